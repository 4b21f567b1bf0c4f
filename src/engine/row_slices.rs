//! Parquet scans cut into contiguous row ranges, one per partition, so that every core decodes
//! a share of a file however few row groups it has.
//!
//! DataFusion splits a file's scan by byte ranges and gives each partition the row groups whose
//! middle falls in its range: a file written as one row group (debian_docs, most files a `COPY`
//! of a small table writes) stays one partition, decoded on one core. Here each partition gets
//! a file-level row selection instead (`ParquetRowSelection`), which the reader turns into the
//! row groups and rows to decode. The reader numbers rows by their place in the file whatever it
//! skips, so `file_row_index()`, and with it the job's input order, is that of a scan of the
//! whole file.
//!
//! Each partition reads its files through `PagedFiles` (`crate::engine::page_locations`), whose
//! metadata says where each page starts where it can be known (the file stores an offset
//! index, or it is local and its columns do not repeat), so that a partition fetches and
//! decodes only the pages of its own rows (and the column's dictionary) rather than the whole
//! column chunks of a row group it shares with others. Only the signature stage asks for it
//! (`crate::engine::on_demand`), where decoding on one core limited the stage.

use std::ops::Range;
use std::sync::Arc;

use datafusion::common::stats::Precision;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::{
    CachedParquetFileReaderFactory, ParquetAccessPlan, ParquetRowSelection,
};
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfig, FileScanConfigBuilder, ParquetFileReaderFactory, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use datafusion::physical_plan::ExecutionPlan;

use crate::engine::page_locations::PagedFiles;

/// Fewest rows worth a partition of their own: below this the reading of the footer and the
/// shared pages costs about what the rows do.
const MIN_SLICE_ROWS: u64 = 1024;

/// `plan`, if it is a Parquet scan that can be cut, cut into at most `slices` partitions of
/// contiguous rows, read with page locations. `runtime` holds the scan's object store.
pub fn sliced(
    plan: &Arc<dyn ExecutionPlan>,
    slices: usize,
    runtime: &RuntimeEnv,
) -> Option<Arc<dyn ExecutionPlan>> {
    let (scan, parquet) = plan
        .downcast_ref::<DataSourceExec>()?
        .downcast_to_file_source::<ParquetSource>()?;
    let scan = sliced_scan(scan, slices)?;
    // The reader DataFusion would give the scan (or the one it was given), under page
    // locations; without a store to read from, the scan finds out itself when it runs.
    let inner: Arc<dyn ParquetFileReaderFactory> = match parquet.parquet_file_reader_factory() {
        Some(factory) => Arc::clone(factory),
        None => match runtime.object_store(&scan.object_store_url) {
            Ok(store) => Arc::new(CachedParquetFileReaderFactory::new(
                store,
                runtime.cache_manager.get_file_metadata_cache(),
            )),
            Err(_) => return Some(DataSourceExec::from_data_source(scan) as _),
        },
    };
    let local = scan.object_store_url.as_str().starts_with("file:");
    let paged = parquet
        .clone()
        .with_parquet_file_reader_factory(Arc::new(PagedFiles::new(inner, local)));
    let scan = FileScanConfigBuilder::from(scan)
        .with_source(Arc::new(paged))
        .build();
    Some(DataSourceExec::from_data_source(scan) as _)
}

/// The scan with its files' rows cut into at most `slices` partitions, or `None` to leave it:
/// a scan that promises an order or a limit, a file already cut (a byte range, an access plan)
/// or of unknown row count, or too few rows for two partitions.
fn sliced_scan(scan: &FileScanConfig, slices: usize) -> Option<FileScanConfig> {
    if !scan.output_ordering.is_empty() || scan.limit.is_some() {
        return None;
    }
    let files: Vec<&PartitionedFile> = scan.file_groups.iter().flat_map(FileGroup::iter).collect();
    let rows = files
        .iter()
        .map(|file| whole_file_rows(file))
        .collect::<Option<Vec<u64>>>()?;
    let total: u64 = rows.iter().sum();
    let pieces = (slices as u64).min(total / MIN_SLICE_ROWS);
    if pieces < 2 {
        return None;
    }
    let groups = cut(&rows, pieces as usize)
        .into_iter()
        .map(|slice| {
            let files = slice
                .into_iter()
                .map(|(index, range)| file_slice(files[index], rows[index], range))
                .collect();
            FileGroup::new(files)
        })
        .collect();
    Some(
        FileScanConfigBuilder::from(scan.clone())
            .with_file_groups(groups)
            .build(),
    )
}

/// A file's row count, if the scan reads all of it and its footer's count is known.
fn whole_file_rows(file: &PartitionedFile) -> Option<u64> {
    let extensions = &file.extensions;
    if file.range.is_some()
        || extensions.get::<ParquetAccessPlan>().is_some()
        || extensions.get::<ParquetRowSelection>().is_some()
    {
        return None;
    }
    match file.statistics.as_ref()?.num_rows {
        Precision::Exact(rows) => u64::try_from(rows).ok(),
        _ => None,
    }
}

/// The rows `range` of a file of `rows` rows: the file itself when the range is all of it.
fn file_slice(file: &PartitionedFile, rows: u64, range: Range<u64>) -> PartitionedFile {
    if range == (0..rows) {
        return file.clone();
    }
    let selectors = [
        RowSelector::skip(range.start as usize),
        RowSelector::select((range.end - range.start) as usize),
        RowSelector::skip((rows - range.end) as usize),
    ];
    let mut slice = file
        .clone()
        .with_extension(ParquetRowSelection::new(RowSelection::from(
            selectors
                .into_iter()
                .filter(|selector| selector.row_count > 0)
                .collect::<Vec<_>>(),
        )));
    // The file's statistics describe all its rows, not this slice's.
    slice.statistics = None;
    slice
}

/// Cuts the rows of files of `rows` rows each, taken one after another, into `pieces`
/// contiguous slices whose sizes differ by at most one row: each slice lists (file index, rows
/// of that file), in file order.
fn cut(rows: &[u64], pieces: usize) -> Vec<Vec<(usize, Range<u64>)>> {
    let total: u64 = rows.iter().sum();
    let pieces_u64 = pieces as u64;
    let mut slices = Vec::with_capacity(pieces);
    let mut file = 0;
    let mut offset = 0;
    for piece in 0..pieces_u64 {
        // The first `total % pieces` slices take one row more.
        let mut wanted = total / pieces_u64 + u64::from(piece < total % pieces_u64);
        let mut slice = Vec::new();
        while wanted > 0 {
            let take = wanted.min(rows[file] - offset);
            if take > 0 {
                slice.push((file, offset..offset + take));
            }
            wanted -= take;
            offset += take;
            if offset == rows[file] {
                file += 1;
                offset = 0;
            }
        }
        slices.push(slice);
    }
    slices
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use datafusion::arrow::array::{AsArray, Int64Array};
    use datafusion::arrow::datatypes::Int64Type;
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
    use datafusion::physical_plan::{ExecutionPlanProperties, collect_partitioned};
    use datafusion::prelude::{ParquetReadOptions, SessionContext};

    /// Oracle: the rows laid end to end and counted one by one.
    #[test]
    fn slices_cover_every_row_once_in_order_and_evenly() {
        for rows in [
            vec![10],
            vec![7, 0, 5, 1],
            vec![1, 1, 1, 1, 1],
            vec![100, 3, 250],
        ] {
            let total: u64 = rows.iter().sum();
            for pieces in 1..=total.min(12) as usize {
                let slices = cut(&rows, pieces);
                assert_eq!(slices.len(), pieces);
                let mut expected =
                    (0..rows.len()).flat_map(|file| (0..rows[file]).map(move |row| (file, row)));
                let mut sizes = Vec::new();
                for slice in &slices {
                    let mut size = 0;
                    for (file, range) in slice {
                        assert!(!range.is_empty(), "{rows:?} / {pieces}");
                        for row in range.clone() {
                            assert_eq!(expected.next(), Some((*file, row)), "{rows:?}");
                            size += 1;
                        }
                    }
                    sizes.push(size);
                }
                assert_eq!(expected.next(), None, "{rows:?} / {pieces}");
                let (min, max) = (sizes.iter().min(), sizes.iter().max());
                assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{sizes:?}");
            }
        }
    }

    /// A file of one row group of `rows` rows whose only column is its row number, in pages of
    /// 500 rows and without a page index (as pyarrow writes by default): a row range finds its
    /// pages from their headers.
    pub(crate) fn one_row_group_file(path: &std::path::Path, rows: i64) {
        let batch = RecordBatch::try_from_iter([(
            "n",
            Arc::new(Int64Array::from_iter_values(0..rows)) as _,
        )])
        .unwrap();
        let file = std::fs::File::create(path).unwrap();
        let properties = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_offset_index_disabled(true)
            .set_data_page_row_count_limit(500)
            .set_write_batch_size(500)
            .build();
        let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        assert_eq!(writer.close().unwrap().row_groups().len(), 1);
    }

    /// A file of one row group cut into 4 partitions: each reads a contiguous range of its
    /// rows, and `file_row_index()` is each row's place in the file.
    #[tokio::test]
    async fn one_row_group_is_read_by_every_partition_with_its_row_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("one.parquet");
        let rows = 10_000;
        one_row_group_file(&path, rows);
        let ctx = SessionContext::new();
        ctx.register_parquet("t", path.to_str().unwrap(), ParquetReadOptions::default())
            .await
            .unwrap();
        let frame = ctx
            .sql("SELECT n, CAST(file_row_index() AS BIGINT) AS row FROM t")
            .await
            .unwrap();
        let plan = frame.create_physical_plan().await.unwrap();
        assert!(plan.is::<DataSourceExec>(), "a scan alone");
        assert_eq!(plan.output_partitioning().partition_count(), 1);
        let plan = sliced(&plan, 4, &ctx.runtime_env()).expect("a file of 10,000 rows is cut");
        assert_eq!(plan.output_partitioning().partition_count(), 4);
        let partitions = collect_partitioned(plan, ctx.task_ctx()).await.unwrap();
        let mut seen = Vec::new();
        for partition in &partitions {
            let mut in_partition = Vec::new();
            for batch in partition {
                let n = batch.column(0).as_primitive::<Int64Type>();
                let row = batch.column(1).as_primitive::<Int64Type>();
                assert_eq!(
                    n.values(),
                    row.values(),
                    "file_row_index is the row's place"
                );
                in_partition.extend(n.values().iter().copied());
            }
            // A partition that finishes its range may go on to another's (DataFusion's
            // work stealing between a scan's partitions), in order.
            assert!(
                in_partition.windows(2).all(|w| w[1] > w[0]),
                "rows in order"
            );
            seen.extend(in_partition);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..rows).collect::<Vec<_>>());
    }

    /// Too few rows for two partitions of `MIN_SLICE_ROWS`: left as it is.
    #[tokio::test]
    async fn a_small_file_is_not_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("small.parquet");
        one_row_group_file(&path, 1500);
        let ctx = SessionContext::new();
        let plan = ctx
            .read_parquet(path.to_str().unwrap(), ParquetReadOptions::default())
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        assert!(sliced(&plan, 4, &ctx.runtime_env()).is_none());
    }
}
