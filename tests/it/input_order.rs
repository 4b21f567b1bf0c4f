//! Input order (`signatures.input_order` = file index * 2^32 + row in the file), which decides
//! representatives, is exact whatever the number of threads, on a file of many row groups (the
//! unit a parallel scan of one file would split by).

use std::path::Path;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Int64Type;
use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};

use crate::common::{neardup_ok, path_str, query, run_with_threads, sorted_rows};

/// A Parquet file of ids `from..to` in order, texts unlike each other, `group_rows` rows per
/// row group.
fn corpus_file(path: &Path, from: u64, to: u64, group_rows: usize) {
    neardup_ok(&[
        "query",
        &format!(
            "COPY (SELECT value AS id, concat(md5(CAST(value AS VARCHAR)), ' ', \
             md5(concat('b', value)), ' ', md5(concat('c', value)), ' ', \
             md5(concat('d', value))) AS text \
             FROM generate_series({from}, {}) ORDER BY value) TO '{}' \
             OPTIONS ('format.max_row_group_size' '{group_rows}')",
            to - 1,
            path_str(path)
        ),
    ]);
}

fn row_groups(path: &Path) -> usize {
    let file = std::fs::File::open(path).unwrap();
    SerializedFileReader::new(file)
        .unwrap()
        .metadata()
        .num_row_groups()
}

#[tokio::test]
async fn a_file_split_over_the_cores_keeps_each_rows_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    corpus_file(&a, 0, 60_000, 2_000);
    corpus_file(&b, 60_000, 61_000, 1_000);
    // Over 1 MiB (DataFusion splits smaller files no further) and many row groups.
    assert!(std::fs::metadata(&a).unwrap().len() > 2 << 20);
    assert_eq!(row_groups(&a), 30);
    let mut outputs = Vec::new();
    for threads in ["1", "4"] {
        let out = dir.path().join(format!("out{threads}"));
        run_with_threads(&[&a, &b], &out, threads);
        let batches = query(&out, "SELECT id, input_order FROM signatures").await;
        let mut seen = 0;
        for batch in &batches {
            let ids = batch.column(0).as_primitive::<Int64Type>();
            let orders = batch.column(1).as_primitive::<Int64Type>();
            for (id, order) in ids.values().iter().zip(orders.values()) {
                // The oracle: ids are the rows' positions, file b is the second file.
                let expected = if *id < 60_000 {
                    *id
                } else {
                    (1 << 32) + id - 60_000
                };
                assert_eq!(*order, expected, "id {id} at --threads {threads}");
                seen += 1;
            }
        }
        assert_eq!(seen, 61_000);
        outputs.push(out);
    }
    let sql = "SELECT id, simhash, input_order FROM signatures";
    assert_eq!(
        sorted_rows(&outputs[0], sql).await,
        sorted_rows(&outputs[1], sql).await
    );
}

/// A file of one row group, which the signature stage reads in row ranges on every core
/// (`crate::engine::on_demand`): the input order is still each row's place in the file.
#[tokio::test]
async fn a_file_of_one_row_group_read_by_every_core_keeps_each_rows_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("one.parquet");
    corpus_file(&file, 0, 20_000, 100_000);
    assert_eq!(row_groups(&file), 1);
    let mut outputs = Vec::new();
    for threads in ["1", "3"] {
        let out = dir.path().join(format!("out{threads}"));
        run_with_threads(&[&file], &out, threads);
        let batches = query(&out, "SELECT id, input_order FROM signatures").await;
        let mut orders = Vec::new();
        for batch in &batches {
            let ids = batch.column(0).as_primitive::<Int64Type>();
            let order = batch.column(1).as_primitive::<Int64Type>();
            for (id, order) in ids.values().iter().zip(order.values()) {
                // The oracle: ids are the rows' positions.
                assert_eq!(order, id, "--threads {threads}");
                orders.push(*order);
            }
        }
        orders.sort_unstable();
        assert_eq!(
            orders,
            (0..20_000).collect::<Vec<i64>>(),
            "--threads {threads}"
        );
        outputs.push(out);
    }
    let sql = "SELECT id, simhash, input_order FROM signatures";
    assert_eq!(
        sorted_rows(&outputs[0], sql).await,
        sorted_rows(&outputs[1], sql).await
    );
}
