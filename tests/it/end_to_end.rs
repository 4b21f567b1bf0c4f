//! `neardup run` and `neardup query` through the binary, on the shipped sample: Chinese and
//! English documents, exact copies, edited copies, same-topic documents that are not copies,
//! and NULL, empty and punctuation-only texts.

use std::collections::BTreeSet;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{Int64Type, UInt8Type, UInt64Type};

use crate::common::{fixture, neardup, neardup_ok, path_str, query, run_with_threads, stderr};

/// Whether every column chunk of every Parquet file in `table` has a dictionary page
/// (`expected`), read from the files' footers.
fn every_column_has_dictionary(table: &std::path::Path, expected: bool) -> bool {
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    let mut chunks = 0;
    for entry in std::fs::read_dir(table).unwrap() {
        let file = std::fs::File::open(entry.unwrap().path()).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
        for group in reader.metadata().row_groups() {
            for column in group.columns() {
                chunks += 1;
                if column.dictionary_page_offset().is_some() != expected {
                    return false;
                }
            }
        }
    }
    chunks > 0
}

/// The duplicate groups the sample was written with (see fixtures/README.md), each listed
/// representative first.
const EXPECTED_GROUPS: [&[i64]; 4] = [&[1, 5, 9], &[2, 12], &[3, 7, 11], &[4, 14, 20]];
const NO_FINGERPRINT: [i64; 4] = [13, 15, 16, 19];
const DOCUMENTS: i64 = 20;

fn ids(batches: &[datafusion::arrow::array::RecordBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect()
}

#[tokio::test]
async fn sample_run_finds_the_planted_groups() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    let input = fixture("sample.parquet");
    let stdout = neardup_ok(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&output),
    ]);
    assert!(stdout.contains("4 groups"), "{stdout}");

    // groups: membership, representative (first in input order), size, numbering.
    let batches = query(
        &output,
        "SELECT group_id, id, representative_id, group_size FROM groups ORDER BY group_id, id",
    )
    .await;
    let mut got: Vec<(u64, i64, i64, i64)> = Vec::new();
    for b in &batches {
        for i in 0..b.num_rows() {
            got.push((
                b.column(0).as_primitive::<UInt64Type>().value(i),
                b.column(1).as_primitive::<Int64Type>().value(i),
                b.column(2).as_primitive::<Int64Type>().value(i),
                b.column(3).as_primitive::<Int64Type>().value(i),
            ));
        }
    }
    let mut expected = Vec::new();
    for (number, members) in EXPECTED_GROUPS.iter().enumerate() {
        let mut sorted = members.to_vec();
        sorted.sort_unstable();
        for id in sorted {
            expected.push((number as u64 + 1, id, members[0], members.len() as i64));
        }
    }
    assert_eq!(got, expected);

    // signatures: one row per document; no fingerprint for NULL, empty, blank, punctuation.
    let all = ids(&query(&output, "SELECT id FROM signatures ORDER BY id").await);
    assert_eq!(all, (1..=DOCUMENTS).collect::<Vec<_>>());
    let unsigned = ids(&query(
        &output,
        "SELECT id FROM signatures WHERE simhash IS NULL ORDER BY id",
    )
    .await);
    assert_eq!(unsigned, NO_FINGERPRINT);
    let bands = query(
        &output,
        "SELECT count(*) FROM signatures WHERE simhash IS NOT NULL AND \
         (bucket1 <> bucket(simhash, 1) OR bucket4 <> bucket(simhash, 4) \
          OR arrow_cast(bucket1, 'UInt64') * 281474976710656 + arrow_cast(bucket2, 'UInt64') * 4294967296 \
             + arrow_cast(bucket3, 'UInt64') * 65536 + arrow_cast(bucket4, 'UInt64') <> simhash)",
    )
    .await;
    assert_eq!(
        bands[0].column(0).as_primitive::<Int64Type>().value(0),
        0,
        "bands reassemble the fingerprint"
    );

    // pairs: exactly the brute-force pairs over the signatures, distance recomputed.
    let sigs = query(
        &output,
        "SELECT id, simhash FROM signatures WHERE simhash IS NOT NULL ORDER BY id",
    )
    .await;
    let mut fingerprints = Vec::new();
    for b in &sigs {
        let (id, f) = (
            b.column(0).as_primitive::<Int64Type>(),
            b.column(1).as_primitive::<UInt64Type>(),
        );
        for i in 0..b.num_rows() {
            fingerprints.push((id.value(i), f.value(i)));
        }
    }
    let mut expected_pairs = Vec::new();
    for (i, &(a, fa)) in fingerprints.iter().enumerate() {
        for &(b, fb) in &fingerprints[i + 1..] {
            let d = (fa ^ fb).count_ones();
            if d <= 3 {
                expected_pairs.push((a.min(b), a.max(b), d as u8));
            }
        }
    }
    expected_pairs.sort_unstable();
    let batches = query(
        &output,
        "SELECT id_a, id_b, distance FROM pairs ORDER BY id_a, id_b",
    )
    .await;
    let mut pairs = Vec::new();
    for b in &batches {
        for i in 0..b.num_rows() {
            pairs.push((
                b.column(0).as_primitive::<Int64Type>().value(i),
                b.column(1).as_primitive::<Int64Type>().value(i),
                b.column(2).as_primitive::<UInt8Type>().value(i),
            ));
        }
    }
    assert_eq!(pairs, expected_pairs);
    assert!(
        pairs.contains(&(1, 5, 0)),
        "the exact copy is a pair at distance 0"
    );

    // dedup: every input column, every row but the non-representatives.
    let removed: BTreeSet<i64> = EXPECTED_GROUPS
        .iter()
        .flat_map(|g| g[1..].iter().copied())
        .collect();
    let kept = ids(&query(&output, "SELECT id FROM dedup ORDER BY id").await);
    let expected_kept: Vec<i64> = (1..=DOCUMENTS).filter(|id| !removed.contains(id)).collect();
    assert_eq!(kept, expected_kept);
    let columns = query(&output, "SELECT * FROM dedup LIMIT 1").await;
    let names: Vec<String> = columns[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["id", "lang", "note", "text"]);
    // The corpus's columns keep dictionary pages (a language column is a handful of values);
    // the job's own tables, nearly all distinct values, are written without.
    assert!(every_column_has_dictionary(&output.join("dedup"), true));
    assert!(every_column_has_dictionary(
        &output.join("signatures"),
        false
    ));
    let null_text = query(&output, "SELECT text FROM dedup WHERE id = 13").await;
    assert!(
        null_text[0].column(0).is_null(0),
        "a NULL text is kept as NULL"
    );

    // summary.json
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(output.join("summary.json")).unwrap())
            .unwrap();
    let counts = &summary["counts"];
    assert_eq!(counts["documents"], DOCUMENTS);
    assert_eq!(counts["null_texts"], 1);
    assert_eq!(counts["empty_texts"], 3);
    assert_eq!(counts["groups"], 4);
    assert_eq!(counts["grouped_documents"], 11);
    assert_eq!(counts["documents_removed"], 7);
    assert_eq!(counts["documents_kept"], DOCUMENTS - 7);
    assert_eq!(counts["pairs"], expected_pairs.len());
    let distinct = query(&output, "SELECT count(DISTINCT simhash) FROM signatures").await;
    assert_eq!(
        counts["distinct_fingerprints"],
        distinct[0].column(0).as_primitive::<Int64Type>().value(0)
    );
    // The defaults: candidates within k = 7, verified at an estimated Jaccard of 0.75.
    assert_eq!(summary["parameters"]["k"], 7);
    assert_eq!(summary["parameters"]["min_similarity"], 0.75);
    // Per stage: the rows it wrote (as counted above) and the peak memory so far.
    let stage = |name: &str| {
        summary["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stage"] == name)
            .unwrap_or_else(|| panic!("no stage {name}: {summary}"))
            .clone()
    };
    assert_eq!(stage("signatures")["rows"], DOCUMENTS);
    assert_eq!(stage("candidates")["rows"], counts["candidate_pairs"]);
    assert_eq!(stage("verify")["rows"], counts["fingerprint_pairs"]);
    assert_eq!(stage("pairs")["rows"], expected_pairs.len());
    assert_eq!(stage("dedup")["rows"], DOCUMENTS - 7);
    assert!(stage("plan")["rows"].is_null());
    assert!(stage("groups")["peak_rss_bytes"].as_u64().unwrap() > 1 << 20);
    // The CPU of each stage, and of the whole job, which holds them all.
    let stages = summary["stages"].as_array().unwrap();
    let cpu: Vec<f64> = stages
        .iter()
        .map(|s| s["cpu_seconds"].as_f64().unwrap_or_else(|| panic!("{s}")))
        .collect();
    assert!(cpu.iter().all(|&c| c >= 0.0), "{cpu:?}");
    assert!(stage("signatures")["cpu_seconds"].as_f64().unwrap() > 0.0);
    let whole = summary["cpu_seconds"].as_f64().unwrap();
    assert!(whole + 1e-6 >= cpu.iter().sum::<f64>(), "{whole} {cpu:?}");
    // k = 7: eight bands of 8 bits, by pigeonhole (the planner's pick at this size).
    assert_eq!(summary["plan"]["plan"], "bands:8");
    assert!(output.join("_SUCCESS").is_file());
    assert!(
        !output.join("_work").exists(),
        "internal tables are removed"
    );
}

#[tokio::test]
async fn query_formats_and_existing_output() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    let out = path_str(&output);
    let input = fixture("sample.parquet");
    neardup_ok(&["run", "--input", path_str(&input), "--output", out]);

    // Groups joined with their text through `corpus`; CSV to standard output.
    let csv = neardup_ok(&[
        "query",
        "--data",
        out,
        "--format",
        "csv",
        "SELECT g.group_id, count(*) AS docs, min(c.lang) AS lang FROM groups g \
         JOIN corpus c ON c.id = g.id GROUP BY g.group_id ORDER BY g.group_id",
    ]);
    assert_eq!(csv, "group_id,docs,lang\n1,3,zh\n2,2,zh\n3,3,en\n4,3,en\n");

    // Several statements: the last one's result; JSON Lines; the project's functions.
    let json = neardup_ok(&[
        "query",
        "--data",
        out,
        "--format",
        "ndjson",
        "CREATE VIEW big AS SELECT * FROM groups WHERE group_size = 3; \
         SELECT id, hamming(simhash, simhash) AS self FROM signatures WHERE id IN (SELECT id FROM big) ORDER BY id",
    ]);
    let lines: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<i64> = lines.iter().map(|v| v["id"].as_i64().unwrap()).collect();
    assert_eq!(got, [1, 3, 4, 5, 7, 9, 11, 14, 20]);
    assert!(lines.iter().all(|v| v["self"] == 0));

    // Parquet to a file, and the table format.
    let file = dir.path().join("groups.parquet");
    neardup_ok(&[
        "query",
        "--data",
        out,
        "--format",
        "parquet",
        "--out",
        path_str(&file),
        "SELECT * FROM groups",
    ]);
    let table = neardup_ok(&[
        "query",
        &format!("SELECT count(*) AS n FROM '{}'", path_str(&file)),
    ]);
    assert!(table.contains("| 11 |"), "{table}");

    // The signatures a run keeps can be matched again, with the same groups.
    let again = dir.path().join("again");
    neardup_ok(&[
        "match",
        "--signatures",
        path_str(&output.join("signatures")),
        "--output",
        path_str(&again),
    ]);
    let groups_of = |dir: std::path::PathBuf| async move {
        let batches = query(
            &dir,
            "SELECT id, group_id, representative_id FROM groups ORDER BY id",
        )
        .await;
        datafusion::arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string()
    };
    assert_eq!(groups_of(output.clone()).await, groups_of(again).await);

    // An existing output is refused without --overwrite, replaced with it.
    let again = neardup(&["run", "--input", path_str(&input), "--output", out]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("--overwrite"), "{}", stderr(&again));
    neardup_ok(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        out,
        "--overwrite",
        "--k",
        "0",
    ]);
    let summary = std::fs::read_to_string(output.join("summary.json")).unwrap();
    assert!(summary.contains("\"k\": 0"), "{summary}");
}

#[tokio::test]
async fn representative_follows_the_order_of_the_input_files() {
    // The sample split in two files: ids up to 10, and the rest. Group {2, 12} is represented
    // by whichever comes first in input order, so swapping the files swaps the representative.
    let dir = tempfile::tempdir().unwrap();
    let sample = path_str(&fixture("sample.parquet")).to_string();
    let first = dir.path().join("first.parquet");
    let second = dir.path().join("second.parquet");
    for (file, condition) in [(&first, "id <= 10"), (&second, "id > 10")] {
        neardup_ok(&[
            "query",
            &format!(
                "COPY (SELECT * FROM '{sample}' WHERE {condition} ORDER BY id) TO '{}'",
                path_str(file)
            ),
        ]);
    }
    // Second file first: 11, 12 and 20 now come before 1, so {3, 7, 11} is group 1 (rep 11),
    // {2, 12} group 2 (rep 12).
    for (files, representative, group) in [([&first, &second], 2, 2), ([&second, &first], 12, 2)] {
        let output = dir.path().join(format!("out-{representative}"));
        neardup_ok(&[
            "run",
            "--input",
            path_str(files[0]),
            path_str(files[1]),
            "--output",
            path_str(&output),
        ]);
        let rows = query(
            &output,
            "SELECT representative_id, group_id FROM groups WHERE id = 2",
        )
        .await;
        let rep = rows[0].column(0).as_primitive::<Int64Type>().value(0);
        let group_id = rows[0].column(1).as_primitive::<UInt64Type>().value(0);
        assert_eq!((rep, group_id), (representative, group), "files {files:?}");
    }
}

#[tokio::test]
async fn shipped_sample_matches_its_source() {
    // fixtures/sample.parquet is built from fixtures/sample.jsonl (fixtures/README.md).
    let source = std::fs::read_to_string(fixture("sample.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = source
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let json = neardup_ok(&[
        "query",
        "--format",
        "ndjson",
        &format!(
            "SELECT id, lang, note, text FROM '{}' ORDER BY id",
            path_str(&fixture("sample.parquet"))
        ),
    ]);
    let parquet_rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parquet_rows.len(), rows.len());
    for (a, b) in rows.iter().zip(&parquet_rows) {
        for column in ["id", "lang", "note"] {
            assert_eq!(a[column], b[column]);
        }
        // JSON lines leave NULL columns out.
        assert_eq!(
            a["text"],
            *b.get("text").unwrap_or(&serde_json::Value::Null)
        );
    }
}

/// `--quiet` prints nothing on success; `--threads 1` gives the same tables as all cores.
#[tokio::test]
async fn quiet_and_one_thread_give_the_same_groups() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("sample.parquet");
    let (all, one) = (dir.path().join("all"), dir.path().join("one"));
    neardup_ok(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&all),
    ]);
    let quiet = neardup(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&one),
        "--threads",
        "1",
        "--quiet",
    ]);
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    assert!(
        quiet.stdout.is_empty() && quiet.stderr.is_empty(),
        "{}",
        stderr(&quiet)
    );
    let groups = |output: std::path::PathBuf| async move {
        let batches = query(
            &output,
            "SELECT id, group_id, representative_id FROM groups ORDER BY id",
        )
        .await;
        datafusion::arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string()
    };
    assert_eq!(groups(all.clone()).await, groups(one).await);
    // Under a memory limit DataFusion spills; the groups do not change.
    let limited = dir.path().join("limited");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&limited),
        "--memory-limit",
        "4M",
        "--quiet",
    ]);
    assert_eq!(groups(all).await, groups(limited).await);
    let bad = neardup(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        "x",
        "--memory-limit",
        "lots",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("512M"), "{}", stderr(&bad));
    // --verbose logs each stage's SQL and the planner's comparison; no bar off a terminal.
    let verbose = neardup(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&dir.path().join("verbose")),
        "--verbose",
    ]);
    let log = stderr(&verbose);
    assert!(verbose.status.success(), "{log}");
    assert!(
        log.contains("sql/03_candidates_found.sql, statement 1:\nCOPY"),
        "{log}"
    );
    assert!(log.contains("<- chosen"), "{log}");
    assert!(
        !log.contains("documents, eta"),
        "a progress bar off a terminal: {log}"
    );
    let zero = neardup(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        "x",
        "--threads",
        "0",
    ]);
    assert_eq!(zero.status.code(), Some(2));
}

/// The deduplicated corpus when every core reads a share of one file's row groups, both ways it
/// is written (most documents kept: the anti-join; most removed: the join to the kept ids).
/// Oracle: the planted copies. Id v's text is that of v mod `originals`, texts of different
/// originals are unlike each other, so the ids from `originals` up are exactly those removed,
/// and every row kept is the input's row.
#[tokio::test]
async fn a_file_read_by_every_core_is_deduplicated_whole() {
    const ROWS: i64 = 40_000;
    let text = |v: &str| {
        format!(
            "concat(md5(CAST({v} AS VARCHAR)), ' ', md5(concat('b', {v})), ' ', \
             md5(concat('c', {v})), ' ', md5(concat('d', {v})))"
        )
    };
    for originals in [32_000, 10_000] {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("corpus.parquet");
        neardup_ok(&[
            "query",
            &format!(
                "COPY (SELECT value AS id, {} AS text FROM generate_series(0, {}) ORDER BY value) \
                 TO '{}' OPTIONS ('format.max_row_group_size' '4000')",
                text(&format!("value % {originals}")),
                ROWS - 1,
                path_str(&input)
            ),
        ]);
        // Over 2 MiB in ten row groups: DataFusion splits a file over the cores from 1 MiB
        // (`repartition_file_min_size`).
        assert!(std::fs::metadata(&input).unwrap().len() > 2 << 20);
        let output = dir.path().join("out");
        run_with_threads(&[&input], &output, "4");
        let removed = ids(&query(
            &output,
            "SELECT id FROM groups WHERE id <> representative_id ORDER BY id",
        )
        .await);
        assert_eq!(removed, (originals..ROWS).collect::<Vec<i64>>());
        let kept = ids(&query(&output, "SELECT id FROM dedup ORDER BY id").await);
        assert_eq!(kept, (0..originals).collect::<Vec<i64>>());
        let altered = query(
            &output,
            &format!("SELECT count(*) FROM dedup WHERE text <> {}", text("id")),
        )
        .await;
        assert_eq!(altered[0].column(0).as_primitive::<Int64Type>().value(0), 0);
    }
}
