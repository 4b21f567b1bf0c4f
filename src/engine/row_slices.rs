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
//! column chunks of a row group it shares with others.
//!
//! Two stages ask for it. The signature stage cuts the scan under each round-robin
//! repartition (`crate::engine::on_demand`), where decoding on one core limited the stage. The
//! deduplicated corpus, which reads the corpus again, cuts each scan of its plan whose files
//! have fewer row groups than the scan has partitions into as many row ranges (`CutScans`,
//! below): DataFusion's byte ranges left a file of one row group (pyarrow writes a million rows
//! to a row group by default) to the one partition whose range held the row group's middle.

use std::ops::Range;
use std::sync::Arc;

use std::collections::HashMap;

use datafusion::common::config::{ConfigExtension, ConfigOptions};
use datafusion::common::extensions_options;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::metadata::CachedParquetMetaData;
use datafusion::datasource::physical_plan::parquet::{
    CachedParquetFileReaderFactory, ParquetAccessPlan, ParquetRowSelection,
};
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfig, FileScanConfigBuilder, ParquetFileReaderFactory, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result as DataFusionResult;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

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

extensions_options! {
    /// Session option read by `CutScans`.
    pub struct CutEveryScan {
        /// Whether every Parquet scan of a plan is read in row ranges, one per partition.
        pub enabled: bool, default = false
    }
}

impl ConfigExtension for CutEveryScan {
    const PREFIX: &'static str = "neardup_cut_every_scan";
}

/// Cuts each Parquet scan of a plan whose files have fewer row groups than it has partitions
/// into as many row ranges (`sliced`), where the session option `CutEveryScan::enabled` is on.
/// The operators above a scan were planned for its number of partitions, so a scan that would
/// come out with another number (too few rows for each partition to have `MIN_SLICE_ROWS`) is
/// left as it was.
///
/// Ranges hold as many rows, not as many bytes, where DataFusion's byte ranges give each
/// partition about as many bytes once there are row groups enough: the 200,000 Chinese pages
/// in eight row groups took the stage 0.31 s cut against 0.25 s (their last eighth holds a
/// third of the text). Four ranges per partition, taken by whichever partition was free
/// (DataFusion's work stealing), measured no better on two corpora of one row group: in one,
/// the first 6,000 of 200,000 generated pages held 70% of the text, and each range decodes its
/// column's dictionary page again.
#[derive(Debug)]
pub struct CutScans {
    /// Where the scans' object stores are, for the readers of their row ranges.
    runtime: Arc<RuntimeEnv>,
}

impl CutScans {
    pub fn new(runtime: Arc<RuntimeEnv>) -> Self {
        Self { runtime }
    }
}

impl PhysicalOptimizerRule for CutScans {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> DataFusionResult<Arc<dyn ExecutionPlan>> {
        let enabled = config
            .extensions
            .get::<CutEveryScan>()
            .is_some_and(|cut| cut.enabled);
        if !enabled {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let partitions = node.output_partitioning().partition_count();
            let too_few = || row_groups(&node, &self.runtime).is_some_and(|n| n < partitions);
            if partitions < 2 || !too_few() {
                return Ok(Transformed::no(node));
            }
            match sliced(&node, partitions, &self.runtime) {
                Some(cut) if cut.output_partitioning().partition_count() == partitions => {
                    Ok(Transformed::yes(cut))
                }
                _ => Ok(Transformed::no(node)),
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "cut_scans"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The row groups of a Parquet scan's files, from the footers DataFusion keeps of the files it
/// has read (`None` if it is not a Parquet scan or a footer is not kept).
fn row_groups(plan: &Arc<dyn ExecutionPlan>, runtime: &RuntimeEnv) -> Option<usize> {
    let (scan, _) = plan
        .downcast_ref::<DataSourceExec>()?
        .downcast_to_file_source::<ParquetSource>()?;
    let footers = runtime.cache_manager.get_file_metadata_cache();
    whole_files(scan)?
        .iter()
        .map(|file| {
            let kept = footers.get(&file.object_meta.location)?;
            let current = kept.meta.size == file.object_meta.size
                && kept.meta.last_modified == file.object_meta.last_modified;
            let footer = kept
                .file_metadata
                .as_any()
                .downcast_ref::<CachedParquetMetaData>()?;
            current.then(|| footer.parquet_metadata().num_row_groups())
        })
        .sum()
}

/// The scan with its files' rows cut into at most `slices` partitions, or `None` to leave it:
/// a scan that promises an order or a limit, a file read only in part (an access plan, a row
/// selection, byte ranges that do not cover it) or of unknown row count, or too few rows for
/// two partitions.
fn sliced_scan(scan: &FileScanConfig, slices: usize) -> Option<FileScanConfig> {
    if !scan.output_ordering.is_empty() || scan.limit.is_some() {
        return None;
    }
    let files = whole_files(scan)?;
    let rows = files
        .iter()
        .map(whole_file_rows)
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
                .map(|(index, range)| file_slice(&files[index], rows[index], range))
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

/// The scan's files in the order it reads them, each once and whole: the byte ranges DataFusion
/// cut a file into (`repartition_file_scans`) are put back together. `None` if the ranges of a
/// file do not follow one another from its first byte to its last.
fn whole_files(scan: &FileScanConfig) -> Option<Vec<PartitionedFile>> {
    let mut files: Vec<PartitionedFile> = Vec::new();
    // Per file, the end of the bytes its ranges covered so far.
    let mut covered: HashMap<&str, u64> = HashMap::new();
    for file in scan.file_groups.iter().flat_map(FileGroup::iter) {
        let size = file.object_meta.size;
        let (start, end) = match &file.range {
            Some(range) => (
                u64::try_from(range.start).ok()?,
                u64::try_from(range.end).ok()?,
            ),
            None => (0, size),
        };
        match covered.get_mut(file.object_meta.location.as_ref()) {
            Some(so_far) if *so_far == start => *so_far = end,
            Some(_) => return None,
            None if start == 0 => {
                covered.insert(file.object_meta.location.as_ref(), end);
                let mut whole = file.clone();
                whole.range = None;
                files.push(whole);
            }
            None => return None,
        }
    }
    let all_read = files
        .iter()
        .all(|file| covered[file.object_meta.location.as_ref()] == file.object_meta.size);
    all_read.then_some(files)
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
    use datafusion::common::tree_node::TreeNodeRecursion;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
    use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
    use datafusion::physical_plan::collect_partitioned;
    use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};

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
        let properties = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_offset_index_disabled(true)
            .set_data_page_row_count_limit(500)
            .set_write_batch_size(500)
            .build();
        assert_eq!(row_numbers_file(path, rows, properties), 1);
    }

    /// A file whose only column, `n`, is the row number, 0 to `rows`, written with
    /// `properties`; returns its row groups.
    fn row_numbers_file(path: &std::path::Path, rows: i64, properties: WriterProperties) -> usize {
        let batch = RecordBatch::try_from_iter([(
            "n",
            Arc::new(Int64Array::from_iter_values(0..rows)) as _,
        )])
        .unwrap();
        let file = std::fs::File::create(path).unwrap();
        let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap().row_groups().len()
    }

    /// The values of the first column (64-bit integers) of every batch of every partition,
    /// sorted: which rows a plan read, whatever partition read them.
    pub(crate) fn sorted_first_column(partitions: &[Vec<RecordBatch>]) -> Vec<i64> {
        let mut values: Vec<i64> = partitions
            .iter()
            .flatten()
            .flat_map(|batch| {
                batch
                    .column(0)
                    .as_primitive::<Int64Type>()
                    .values()
                    .to_vec()
            })
            .collect();
        values.sort_unstable();
        values
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

    /// A session that cuts every scan (`CutEveryScan`), as the deduplicated corpus's stage
    /// does, of two partitions that DataFusion gives byte ranges of a file however small.
    fn cutting_session(cut: bool) -> SessionContext {
        let mut config = SessionConfig::new()
            .with_target_partitions(2)
            .with_repartition_file_scans(true)
            .with_repartition_file_min_size(0);
        config
            .options_mut()
            .extensions
            .insert(CutEveryScan { enabled: cut });
        session_with_rule(config, |runtime| Arc::new(CutScans::new(runtime)))
    }

    /// A session of `config` whose physical optimizer runs DataFusion's rules, then the one
    /// `rule` makes from the session's runtime (as `crate::engine::session` adds the job's).
    pub(crate) fn session_with_rule(
        config: SessionConfig,
        rule: impl FnOnce(Arc<RuntimeEnv>) -> Arc<dyn PhysicalOptimizerRule + Send + Sync>,
    ) -> SessionContext {
        let runtime = Arc::new(RuntimeEnv::default());
        let mut rules = PhysicalOptimizer::new().rules;
        rules.push(rule(Arc::clone(&runtime)));
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            .with_default_features()
            .with_physical_optimizer_rules(rules)
            .build();
        SessionContext::new_with_state(state)
    }

    /// How a partition reads one of its files: by a byte range of it, by a row range of it.
    #[derive(Debug, Clone, Copy)]
    struct FileRead {
        bytes: bool,
        rows: bool,
    }

    /// How each partition of `plan`'s one scan reads its files.
    fn scan_files(plan: &Arc<dyn ExecutionPlan>) -> Vec<Vec<FileRead>> {
        let mut found = Vec::new();
        plan.apply(|node| {
            if let Some((scan, _)) = node
                .downcast_ref::<DataSourceExec>()
                .and_then(|exec| exec.downcast_to_file_source::<ParquetSource>())
            {
                found = scan
                    .file_groups
                    .iter()
                    .map(|group| {
                        group
                            .iter()
                            .map(|file| FileRead {
                                bytes: file.range.is_some(),
                                rows: file.extensions.get::<ParquetRowSelection>().is_some(),
                            })
                            .collect()
                    })
                    .collect();
            }
            Ok(TreeNodeRecursion::Continue)
        })
        .unwrap();
        found
    }

    /// A file of one row group, which DataFusion gives two partitions as two byte ranges (one
    /// of them holding the row group, the other nothing): with `CutEveryScan` on, each
    /// partition has a row range of the whole file instead, and the rows read are the file's,
    /// each once. Without it the byte ranges stay.
    #[tokio::test]
    async fn byte_ranges_of_one_file_become_one_row_range_per_partition() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("one.parquet");
        let rows = 10_000;
        one_row_group_file(&path, rows);
        for cut in [false, true] {
            let ctx = cutting_session(cut);
            ctx.register_parquet("t", path.to_str().unwrap(), ParquetReadOptions::default())
                .await
                .unwrap();
            let frame = ctx.sql("SELECT n FROM t WHERE n >= 0").await.unwrap();
            let plan = frame.create_physical_plan().await.unwrap();
            let files = scan_files(&plan);
            assert_eq!(files.len(), 2, "two partitions either way");
            for group in &files {
                assert_eq!(group.len(), 1, "{files:?}");
                let read = group[0];
                assert_eq!(read.bytes, !cut, "byte ranges only uncut: {files:?}");
                assert_eq!(read.rows, cut, "row ranges only cut: {files:?}");
            }
            let partitions = collect_partitioned(plan, ctx.task_ctx()).await.unwrap();
            let seen = sorted_first_column(&partitions);
            assert_eq!(seen, (0..rows).collect::<Vec<_>>(), "cut: {cut}");
        }
    }

    /// A file of ten row groups, more than the two partitions: left in DataFusion's byte ranges,
    /// which give each partition about as many bytes.
    #[tokio::test]
    async fn a_file_of_row_groups_enough_is_left_in_byte_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ten.parquet");
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(1_000))
            .build();
        assert_eq!(row_numbers_file(&path, 10_000, properties), 10);
        let ctx = cutting_session(true);
        ctx.register_parquet("t", path.to_str().unwrap(), ParquetReadOptions::default())
            .await
            .unwrap();
        let frame = ctx.sql("SELECT n FROM t WHERE n >= 0").await.unwrap();
        let files = scan_files(&frame.create_physical_plan().await.unwrap());
        assert_eq!(files.len(), 2);
        assert!(
            files.iter().flatten().all(|read| read.bytes && !read.rows),
            "{files:?}"
        );
    }

    /// Byte ranges put back together only where they cover their file end to end, in order.
    #[test]
    fn only_byte_ranges_that_cover_a_file_make_it_whole() {
        let schema = Arc::new(datafusion::arrow::datatypes::Schema::empty());
        let scan_of = |groups: Vec<Vec<PartitionedFile>>| {
            FileScanConfigBuilder::new(
                datafusion::execution::object_store::ObjectStoreUrl::local_filesystem(),
                Arc::new(ParquetSource::new(schema.clone())),
            )
            .with_file_groups(groups.into_iter().map(FileGroup::new).collect())
            .build()
        };
        let names = |files: Option<Vec<PartitionedFile>>| {
            files.map(|files| {
                files
                    .iter()
                    .map(|file| {
                        assert!(file.range.is_none());
                        file.object_meta.location.to_string()
                    })
                    .collect::<Vec<_>>()
            })
        };
        let a = || PartitionedFile::new("a", 100);
        let b = || PartitionedFile::new("b", 50);
        let covered = scan_of(vec![
            vec![a().with_range(0, 40)],
            vec![a().with_range(40, 100), b().with_range(0, 10)],
            vec![b().with_range(10, 50)],
        ]);
        assert_eq!(
            names(whole_files(&covered)),
            Some(vec!["a".into(), "b".into()])
        );
        let whole = scan_of(vec![vec![b()], vec![a()]]);
        assert_eq!(
            names(whole_files(&whole)),
            Some(vec!["b".into(), "a".into()])
        );
        for part in [
            vec![vec![a().with_range(0, 40)], vec![a().with_range(50, 100)]],
            vec![vec![a().with_range(0, 40)]],
            vec![vec![a().with_range(40, 100)], vec![a().with_range(0, 40)]],
            vec![vec![a().with_range(10, 100)]],
        ] {
            assert_eq!(names(whole_files(&scan_of(part))), None);
        }
    }
}
