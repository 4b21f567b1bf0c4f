//! The near-duplicate job: checks the input, runs the SQL stages in order in one session, does
//! the clustering between them, and writes the outputs whole or not at all.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::MemTable;
use datafusion::common::cast::as_int64_array;
use datafusion::common::config::ConfigNonZeroUsize;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;

use crate::distributed::{self, Cluster};
use crate::error::{Error, QueryContext, Result};
use crate::fingerprint::BANDS;
use crate::index::{BatchMeta, Index, IndexMeta};
use crate::input::{self, Corpus, quote_ident, quote_literal};
use crate::output::{Overwrite, SUMMARY_FILE, StagingDir, refuse_overlap};
use crate::pipeline::{self, Clustering, Matching, PairsListed, Params};
use crate::summary::{Counts, IndexReport, Parameters, PlanReport, StageTime, Summary};
use crate::text::{FeatureOptions, Featurizer};
use crate::udf::FingerprintColumn;
use crate::{cluster, udf};

/// Largest k of a 64-bit fingerprint the band plans find exactly and in reasonable time; an
/// eighth of the bits (16 of 128).
pub const MAX_K: u32 = 8;

/// Rows (fingerprints times tables) one candidate pass holds at most: plans with many tables
/// run in several passes, so memory stays bounded whatever the plan.
pub const ROWS_PER_PASS: u64 = 32 << 20;

/// What `neardup run` is asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub inputs: Vec<String>,
    pub output: PathBuf,
    pub id_column: String,
    pub text_column: String,
    pub k: u32,
    pub matching: Matching,
    /// The band plan: `auto` (the planner's choice) or a spec (`crate::plan::BandPlan::parse`).
    pub plan: String,
    /// Which document pairs `pairs` lists (`--pairs`).
    pub pairs: PairsListed,
    /// How pairs become components (`--clustering`).
    pub clustering: Clustering,
    /// Whether and how an existing output is replaced (`--overwrite`, `--keep-other-files`).
    pub overwrite: Overwrite,
    /// How texts become features (`--features`; `simhash`'s option string).
    pub features: FeatureOptions,
    /// Match against (and maybe add to) a signature index (`--index`, `--update-index`).
    pub index: Option<IndexOptions>,
    /// Columns the deduplicated corpus is partitioned by (`--partition-by`), Hive style.
    pub partition_by: Vec<String>,
    pub console: Console,
}

/// `--index DIR [--update-index]`.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    pub dir: PathBuf,
    /// Add this batch to the index once its outputs are written.
    pub update: bool,
}

/// What `neardup match` is asked to do: fingerprints computed elsewhere.
#[derive(Debug, Clone)]
pub struct MatchOptions {
    pub signatures: Vec<String>,
    pub output: PathBuf,
    pub id_column: String,
    pub simhash_column: String,
    pub k: u32,
    pub matching: Matching,
    /// The band plan: `auto` (the planner's choice) or a spec (`crate::plan::BandPlan::parse`).
    pub plan: String,
    /// Which document pairs `pairs` lists (`--pairs`).
    pub pairs: PairsListed,
    /// How pairs become components (`--clustering`).
    pub clustering: Clustering,
    /// Whether and how an existing output is replaced (`--overwrite`, `--keep-other-files`).
    pub overwrite: Overwrite,
    /// Match against (and maybe add to) a signature index (`--index`, `--update-index`).
    pub index: Option<IndexOptions>,
    pub console: Console,
}

/// How a job uses the machine and the terminal, and where it runs.
#[derive(Debug, Clone, Default)]
pub struct Console {
    /// Partitions run in parallel (`--threads`); the number of cores when `None`.
    pub threads: Option<usize>,
    /// No progress lines on standard error (`--quiet`); errors are still reported.
    pub quiet: bool,
    /// Bytes DataFusion's operators may hold (`--memory-limit`); sorts, aggregates and joins
    /// spill to the temporary folder beyond it. Unlimited when `None`.
    pub memory_limit: Option<usize>,
    /// Run the stages on a Ballista cluster (`--cluster`) instead of in this process.
    pub cluster: Option<Cluster>,
}

/// Checks k is one the band plans find exactly, and that a plan asked for is exact for it.
pub fn check_k(k: u32, bits: u32, plan: &str) -> Result<()> {
    let max_k = if bits == 128 { 2 * MAX_K } else { MAX_K };
    if k > max_k {
        return Err(Error::Usage(format!(
            "--k {k} is not supported for {bits}-bit fingerprints (allowed: 0..={max_k}); beyond \
             an eighth of the bits the band plans compare most of the corpus with itself"
        )));
    }
    crate::planner::plans_asked(plan, k, bits).map_err(|e| Error::Usage(format!("--plan: {e}")))?;
    Ok(())
}

/// `--clustering sql` runs on 64-bit fingerprints without an index (the index's clustering
/// reads its groups, which only union-find does). On a cluster the pairs stay there, so the
/// clustering is SQL; union-find collects them in this process and runs locally only.
fn check_clustering(
    clustering: Clustering,
    bits: u32,
    index: bool,
    console: &Console,
) -> Result<()> {
    if let Some(cluster) = &console.cluster {
        if index || bits != 64 || clustering != Clustering::Sql {
            return Err(Error::Usage(format!(
                "--cluster {cluster} runs 64-bit fingerprints with --clustering sql (its \
                 default), without --index; --bits 128, --index and union-find run locally"
            )));
        }
        if console.memory_limit.is_some() {
            return Err(Error::Usage(
                "--memory-limit bounds this process, not the executors of a --cluster; give \
                 each executor its limit (neardup executor --memory-limit)"
                    .into(),
            ));
        }
        return Ok(());
    }
    if clustering == Clustering::Sql && (bits != 64 || index) {
        return Err(Error::Usage(
            "--clustering sql is for 64-bit fingerprints without --index; leave it out (the \
             default, union-find, gives the same groups)"
                .into(),
        ));
    }
    Ok(())
}

/// The session every stage runs in: all cores, input types kept, zstd Parquet output.
pub fn session_context() -> Result<SessionContext> {
    session_context_with(&Console::default())
}

/// The session a job's stages run in: on its cluster, or in this process.
pub async fn job_context(console: &Console) -> Result<SessionContext> {
    match &console.cluster {
        Some(cluster) => distributed::cluster_context(cluster, session_config(console)).await,
        None => session_context_with(console),
    }
}

/// Settings every session of a job has, local or on a cluster: partitions (all cores when
/// `None`), input types kept, zstd Parquet output.
fn session_config(console: &Console) -> SessionConfig {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let threads = console.threads.unwrap_or(cores).max(1);
    let mut config = SessionConfig::new().with_target_partitions(threads);
    let options = config.options_mut();
    // One scan per file keeps row numbers in file order (`input_order`); the signature stage
    // is still parallel, as the planner spreads the rows over partitions before the UDF.
    options.optimizer.repartition_file_scans = false;
    // Keep the input's string types in every output (`dedup` keeps the input columns as they are).
    options.execution.parquet.schema_force_view_types = false;
    options.execution.parquet.compression = Some("zstd(3)".into());
    config
}

/// A session in this process with the console's partitions and memory limit.
pub fn session_context_with(console: &Console) -> Result<SessionContext> {
    let mut config = session_config(console);
    let options = config.options_mut();
    let mut ctx = match console.memory_limit {
        None => SessionContext::new_with_config(config),
        Some(limit) => {
            // A sort keeps a small reserve for its merge so that spilling itself fits under
            // the limit.
            options.execution.sort_spill_reservation_bytes = (limit / 16).min(8 << 20);
            let runtime = RuntimeEnvBuilder::new()
                .with_memory_pool(Arc::new(FairSpillPool::new(limit)))
                .build_arc()
                .context(|| "setting up the memory limit".into())?;
            SessionContext::new_with_config_rt(config, runtime)
        }
    };
    udf::register_all(&mut ctx as &mut dyn FunctionRegistry)
        .context(|| "registering SQL functions".into())?;
    Ok(ctx)
}

/// Times stages and reports them on stderr as they finish.
struct Stopwatch {
    started: Instant,
    stages: Vec<StageTime>,
    quiet: bool,
}

impl Stopwatch {
    fn new(quiet: bool) -> Self {
        Self {
            started: Instant::now(),
            stages: Vec::new(),
            quiet,
        }
    }

    async fn time<T>(&mut self, stage: &str, work: impl Future<Output = Result<T>>) -> Result<T> {
        let start = Instant::now();
        let value = work.await?;
        let seconds = start.elapsed().as_secs_f64();
        if !self.quiet {
            eprintln!("neardup: {stage:<12} {seconds:>8.2} s");
        }
        self.stages.push(StageTime {
            stage: stage.to_string(),
            seconds,
            rows: None,
            peak_rss_bytes: crate::summary::peak_rss_bytes(),
        });
        pause_for_tests(stage);
        Ok(value)
    }
}

/// Fault injection for the interruption tests: `NEARDUP_PAUSE_AFTER_STAGE=<stage>` holds the
/// run for a minute after that stage, so a test can kill it at a known point.
fn pause_for_tests(stage: &str) {
    if std::env::var("NEARDUP_PAUSE_AFTER_STAGE").is_ok_and(|s| s == stage) {
        eprintln!("neardup: pausing after {stage} (NEARDUP_PAUSE_AFTER_STAGE)");
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

/// A stage failed inside DataFusion: if an input file or a file of the index the job matches
/// against is corrupt, say which one (DataFusion's message does not say which file of many it
/// was reading).
async fn name_corrupt_input(
    ctx: &SessionContext,
    error: Error,
    corpus: &Corpus,
    batch: Option<&IndexedBatch>,
    console: &Console,
) -> Error {
    // On a cluster the failure is as likely the cluster's, and reading every file again there
    // would stream the corpus through this process: report the error as it came.
    if !matches!(error, Error::Query { .. }) || console.cluster.is_some() {
        return error;
    }
    if let Some((file, message)) = find_unreadable_file(ctx, &corpus.files).await {
        return Error::Input(format!("{} cannot be read: {message}", file.display()));
    }
    match batch {
        Some(batch) => batch.index.name_unreadable_file(ctx).await.unwrap_or(error),
        None => error,
    }
}

/// Reads every file completely, the way the stages read it, and returns the first that fails
/// with its error. Runs only after a failure, so its cost is paid only then.
pub(crate) async fn find_unreadable_file(
    ctx: &SessionContext,
    files: &[PathBuf],
) -> Option<(PathBuf, String)> {
    for file in files {
        let path = file.display().to_string();
        let read = async {
            let frame = ctx
                .read_parquet(path, ParquetReadOptions::default().file_extension(""))
                .await?;
            let mut stream = frame.execute_stream().await?;
            while let Some(batch) = stream.next().await {
                batch?;
            }
            Ok::<(), datafusion::error::DataFusionError>(())
        };
        if let Err(e) = read.await {
            return Some((file.clone(), e.to_string()));
        }
    }
    None
}

/// `neardup run`: Parquet corpus in; signatures, pairs, groups, dedup and summary out.
pub async fn run(options: &RunOptions) -> Result<Summary> {
    let bits = options.features.bits;
    check_k(options.k, bits, &options.plan)?;
    check_clustering(
        options.clustering,
        bits,
        options.index.is_some(),
        &options.console,
    )?;
    if bits == 128 && options.matching == Matching::Join {
        return Err(Error::Usage(
            "--matching join is written for 64-bit fingerprints; use --matching scan (the \
             default) with --bits 128"
                .into(),
        ));
    }
    let mut clock = Stopwatch::new(options.console.quiet);
    let corpus = input::inspect(input::resolve_inputs(&options.inputs)?)?;
    check_places(
        &options.output,
        &options.inputs,
        &corpus,
        options.index.as_ref(),
    )?;
    corpus.check_id_column(&options.id_column)?;
    corpus.check_text_column(&options.text_column)?;
    let partition_by = partition_clause(&corpus, &options.partition_by)?;
    // The canonical form: every option spelled out, recorded in summary.json as it ran.
    let features = options.features.to_string();
    Featurizer::cached(&features).map_err(|e| Error::Usage(format!("--features: {e}")))?;
    let id_type = corpus.column_type(&options.id_column, "id")?;
    let feature_files = crate::digest::feature_files(&options.features)?;
    let settings = IndexMeta::new(bits, options.k, &features, &id_type, feature_files.clone());
    let batch = IndexedBatch::open(options.index.as_ref(), settings)?;
    let staging = StagingDir::create(&options.output, options.overwrite)?;
    let ctx = job_context(&options.console).await?;
    register_corpus(&ctx, &corpus).await?;
    let mut params = stage_params(staging.path(), &options.id_column, options.k, bits);
    params
        .set("text", quote_ident(&options.text_column))
        .set("features", quote_literal(&features))
        .set("partition_by", partition_by);
    if let Some(batch) = &batch {
        batch.prepare(&ctx, &id_type, bits, &mut params).await?;
    }
    let stages = async {
        let ids = check_ids(&ctx, &corpus, &options.id_column, batch.as_ref());
        clock.time("check ids", ids).await?;
        // The count of documents signed lives in the process that signs them.
        let show = !options.console.quiet && options.console.cluster.is_none();
        let signatures = async {
            let _bar = crate::progress::StageBar::documents(corpus.rows, show);
            pipeline::run_stage_with(&ctx, &pipeline::SIGNATURES, &params, |options| {
                let rows = ConfigNonZeroUsize::try_new(pipeline::TEXT_BATCH_ROWS)?;
                options.execution.batch_size = rows;
                Ok(())
            })
            .await
        };
        clock.time("signatures", signatures).await?;
        let asked = MatchingAsked::from(options).against(batch.as_ref());
        let plan = run_matching(&ctx, &params, asked, &mut clock).await?;
        let dedup = async {
            // Two ways to write the same rows; which is faster depends on how many are removed
            // (sql/06_dedup_kept.sql says what was measured). Against an index `groups` also
            // holds indexed members, which only moves the choice, never the rows.
            let removed = count_query(&ctx, REMOVED_COUNT).await?;
            if removed.saturating_mul(3) >= corpus.rows.saturating_mul(2) {
                pipeline::run_stage_with(&ctx, &pipeline::DEDUP_KEPT, &params, |options| {
                    options.execution.parquet.pushdown_filters = true;
                    Ok(())
                })
                .await
            } else {
                pipeline::run_stage(&ctx, &pipeline::DEDUP, &params).await
            }
        };
        clock.time("dedup", dedup).await?;
        Ok(plan)
    };
    let plan = match stages.await {
        Ok(plan) => plan,
        Err(e) => {
            let batch = batch.as_ref();
            return Err(name_corrupt_input(&ctx, e, &corpus, batch, &options.console).await);
        }
    };

    let fresh = batch.as_ref().map(|b| b.number);
    let mut counts = count(&ctx, true, options.features.min_features, fresh).await?;
    let kept = count_rows(&ctx, "dedup").await?;
    if kept + counts.documents_removed != counts.documents {
        return Err(Error::Internal(format!(
            "dedup kept {kept} of {} documents with {} removed: rows were lost",
            counts.documents, counts.documents_removed
        )));
    }
    counts.documents_kept = Some(kept);
    let mut parameters = parameters(
        options.k,
        options.matching,
        options.pairs,
        &options.id_column,
        &options.text_column,
        &features,
        bits,
    );
    parameters.partition_by = options.partition_by.clone();
    parameters.feature_files = feature_files;
    parameters.clustering = options.clustering;
    parameters.cluster = options.console.cluster.as_ref().map(Cluster::to_string);
    let done = Finished {
        command: "run",
        parameters,
        plan,
        corpus: &corpus,
        counts,
    };
    finish_batch(&ctx, staging, batch, &params, done, clock).await
}

/// `neardup match`: fingerprints in; pairs, groups and summary out.
pub async fn match_fingerprints(options: &MatchOptions) -> Result<Summary> {
    check_k(options.k, 64, &options.plan)?;
    check_clustering(
        options.clustering,
        64,
        options.index.is_some(),
        &options.console,
    )?;
    let mut clock = Stopwatch::new(options.console.quiet);
    let corpus = input::inspect(input::resolve_inputs(&options.signatures)?)?;
    check_places(
        &options.output,
        &options.signatures,
        &corpus,
        options.index.as_ref(),
    )?;
    corpus.check_id_column(&options.id_column)?;
    corpus.check_simhash_column(&options.simhash_column)?;
    let id_type = corpus.column_type(&options.id_column, "id")?;
    let settings = IndexMeta::new(
        64,
        options.k,
        FINGERPRINTS_GIVEN,
        &id_type,
        Default::default(),
    );
    let batch = IndexedBatch::open(options.index.as_ref(), settings)?;
    let staging = StagingDir::create(&options.output, options.overwrite)?;
    let ctx = job_context(&options.console).await?;
    register_corpus(&ctx, &corpus).await?;
    let mut params = stage_params(staging.path(), &options.id_column, options.k, 64);
    params.set("simhash", quote_ident(&options.simhash_column));
    if let Some(batch) = &batch {
        batch.prepare(&ctx, &id_type, 64, &mut params).await?;
    }
    let stages = async {
        let ids = check_ids(&ctx, &corpus, &options.id_column, batch.as_ref());
        clock.time("check ids", ids).await?;
        pipeline::run_stage(&ctx, &pipeline::SIGNATURES_GIVEN, &params).await?;
        let asked = MatchingAsked::from(options).against(batch.as_ref());
        run_matching(&ctx, &params, asked, &mut clock).await
    };
    let plan = match stages.await {
        Ok(plan) => plan,
        Err(e) => {
            let batch = batch.as_ref();
            return Err(name_corrupt_input(&ctx, e, &corpus, batch, &options.console).await);
        }
    };
    let fresh = batch.as_ref().map(|b| b.number);
    let counts = count(&ctx, false, 0, fresh).await?;
    let mut parameters = parameters(
        options.k,
        options.matching,
        options.pairs,
        &options.id_column,
        &options.simhash_column,
        FINGERPRINTS_GIVEN,
        64,
    );
    parameters.clustering = options.clustering;
    parameters.cluster = options.console.cluster.as_ref().map(Cluster::to_string);
    let done = Finished {
        command: "match",
        parameters,
        plan,
        corpus: &corpus,
        counts,
    };
    finish_batch(&ctx, staging, batch, &params, done, clock).await
}

/// Refuses an output that would replace or swallow what the job reads: an input file or an index
/// inside the output folder, or an output inside an input folder or the index.
fn check_places(
    output: &Path,
    inputs: &[String],
    corpus: &Corpus,
    index: Option<&IndexOptions>,
) -> Result<()> {
    for file in &corpus.files {
        refuse_overlap(output, "--input", file)?;
    }
    for given in inputs {
        refuse_overlap(output, "--input", Path::new(given))?;
    }
    if let Some(index) = index {
        refuse_overlap(output, "--index", &index.dir)?;
    }
    Ok(())
}

/// The features of `neardup match`, in summary.json and an index's settings.
const FINGERPRINTS_GIVEN: &str = "fingerprints given";

/// `PARTITIONED BY (...)` for `--partition-by`, after checking each column exists.
fn partition_clause(corpus: &Corpus, columns: &[String]) -> Result<String> {
    if columns.is_empty() {
        return Ok(String::new());
    }
    // Before any work: DataFusion would refuse these only when dedup is written, at the end.
    let given = crate::error::echo(&columns.join(","));
    if let Some(twice) = columns
        .iter()
        .enumerate()
        .find_map(|(i, c)| columns[..i].contains(c).then_some(c))
    {
        return Err(Error::Usage(format!(
            "--partition-by {given}: column '{}' is named twice; name each column once",
            crate::error::echo(twice)
        )));
    }
    for column in columns {
        if corpus.schema.field_with_name(column).is_err() {
            return Err(Error::Input(format!(
                "--partition-by {given}: {} has no column '{}'; the columns are: {}",
                corpus.files[0].display(),
                crate::error::echo(column),
                corpus.column_names()
            )));
        }
        // DataFusion takes the names in PARTITIONED BY as written, quotes included.
        if !column.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(Error::Usage(format!(
                "--partition-by {column}: partition columns are written as folder names; use a \
                 column whose name has only letters, digits and '_' (rename it first with \
                 neardup query)"
            )));
        }
    }
    // The columns are distinct and exist, so as many as the schema has are all of them.
    if columns.len() >= corpus.schema.fields().len() {
        return Err(Error::Usage(format!(
            "--partition-by {given}: these are all the input's columns, so the dedup files \
             would hold no column at all (partition values live only in folder names); leave \
             at least one column out"
        )));
    }
    Ok(format!("PARTITIONED BY ({})", columns.join(", ")))
}

/// A job's place in a signature index: the index as found, its settings for this run, this
/// batch's number and, with `--update-index`, the staging folder of the batch's part.
struct IndexedBatch {
    index: Index,
    settings: IndexMeta,
    number: u64,
    staging: Option<StagingDir>,
    /// The index folder did not exist before this run (so a failed run removes it).
    created_folder: bool,
}

impl IndexedBatch {
    /// Opens the index and checks its settings before any work; stages the batch's part when
    /// the run is to add it.
    fn open(options: Option<&IndexOptions>, settings: IndexMeta) -> Result<Option<Self>> {
        let Some(options) = options else {
            return Ok(None);
        };
        let created_folder = !options.dir.exists();
        let index = Index::open(&options.dir, options.update)?;
        index.check_settings(&settings)?;
        let number = index.next_batch();
        let staging = if options.update {
            Some(index.stage_batch(number)?)
        } else {
            None
        };
        Ok(Some(Self {
            index,
            settings,
            number,
            staging,
            created_folder,
        }))
    }

    /// Registers the index's tables and sets the stages' index parameters.
    async fn prepare(
        &self,
        ctx: &SessionContext,
        id_type: &DataType,
        bits: u32,
        params: &mut Params,
    ) -> Result<()> {
        self.index.register(ctx, id_type, bits).await?;
        params
            .set("batch", self.number.to_string())
            .set("next_group_id", self.index.next_group_id().to_string());
        if let Some(staging) = &self.staging {
            let folder =
                |name: &str| quote_literal(&format!("{}/", staging.path().join(name).display()));
            params
                .set("index_documents_dir", folder(crate::index::DOCUMENTS_DIR))
                .set("index_groups_dir", folder(crate::index::GROUP_LOG_DIR));
        }
        Ok(())
    }

    /// A document is added to an index once: ids the index holds are refused, with the batch
    /// that added them (a batch run twice is caught here, before any work).
    async fn check_new_ids(&self, ctx: &SessionContext, id_column: &str) -> Result<()> {
        let id = quote_ident(id_column);
        let taken = query_batches(
            ctx,
            &format!(
                "SELECT CAST(c.{id} AS VARCHAR) AS id, i.batch FROM corpus c \
                 JOIN index_documents i ON c.{id} = i.id ORDER BY i.batch, 1 LIMIT 5"
            ),
        )
        .await?;
        if taken.iter().all(|b| b.num_rows() == 0) {
            return Ok(());
        }
        let shown = datafusion::arrow::util::pretty::pretty_format_batches(&taken)
            .map_err(|e| Error::Internal(e.to_string()))?;
        Err(Error::Input(format!(
            "--index {}: these ids are already in the index, so this batch (or part of it) was \
             added before; an index holds each document once. Some of them:\n{shown}",
            self.index.dir.display()
        )))
    }

    fn report(&self, next_group_id: u64) -> IndexReport {
        IndexReport {
            path: self.index.dir.display().to_string(),
            batch: self.number,
            indexed_documents: self.index.documents(),
            updated: self.staging.is_some(),
            next_group_id,
        }
    }
}

impl Drop for IndexedBatch {
    fn drop(&mut self) {
        // A run that made the index folder and failed leaves no empty folder behind (the
        // staged part goes first; removing a folder that is not empty fails, harmlessly).
        if self.created_folder {
            drop(self.staging.take());
            let _ = std::fs::remove_dir(&self.index.dir);
        }
    }
}

/// What a finished job reports, before its outputs are committed.
struct Finished<'a> {
    command: &'a str,
    parameters: Parameters,
    plan: PlanReport,
    corpus: &'a Corpus,
    counts: Counts,
}

/// Writes the index part (with `--update-index`), commits the outputs, then the index part:
/// a batch is in the index only once its outputs are in place, so a failed run can be run
/// again as it was.
async fn finish_batch(
    ctx: &SessionContext,
    staging: StagingDir,
    batch: Option<IndexedBatch>,
    params: &Params,
    done: Finished<'_>,
    mut clock: Stopwatch,
) -> Result<Summary> {
    let Some(mut batch) = batch else {
        return finish(staging, done, None, clock);
    };
    let highest = query_batches(ctx, "SELECT max(group_id) FROM groups").await?;
    let highest = first_unsigned(&highest)?;
    let next_group_id = batch
        .index
        .next_group_id()
        .max(highest.map_or(0, |g| g + 1));
    let report = batch.report(next_group_id);
    let part = batch.staging.take();
    if part.is_some() {
        clock
            .time(
                "index",
                pipeline::run_stage(ctx, &pipeline::INDEX_BATCH, params),
            )
            .await?;
    }
    let documents = done.counts.documents;
    let inputs = input_names(done.corpus);
    let quiet = clock.quiet;
    let written = staging.target().join(SUMMARY_FILE);
    let summary = finish(staging, done, Some(report), clock)?;
    if let Some(part) = part {
        let meta = BatchMeta {
            batch: batch.number,
            neardup_version: env!("CARGO_PKG_VERSION").to_string(),
            inputs,
            documents,
            next_group_id,
            committed_at: crate::index::now_unix(),
        };
        if let Err(e) = batch.index.commit(part, &batch.settings, &meta) {
            // The outputs are in place; their summary must not claim the batch was added.
            let mut corrected = summary.clone();
            if let Some(index) = &mut corrected.index {
                index.updated = false;
            }
            let _ = corrected.write(&written);
            return Err(Error::Input(format!(
                "the outputs are written, but adding batch {} to the index {} failed: {e}. \
                 The index has no new batch; run again with --overwrite to retry",
                batch.number,
                batch.index.dir.display()
            )));
        }
        if !quiet {
            eprintln!(
                "neardup: added batch {} ({documents} documents) to {}",
                batch.number,
                batch.index.dir.display()
            );
        }
    }
    Ok(summary)
}

/// What the matching stages are asked to do.
#[derive(Debug, Clone, Copy)]
struct MatchingAsked<'a> {
    k: u32,
    matching: Matching,
    plan: &'a str,
    pairs: PairsListed,
    clustering: Clustering,
    quiet: bool,
    against: Against,
}

/// What the documents are matched against besides each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Against {
    /// Nothing: a run on its own.
    Nothing,
    /// A signature index with no batch yet: matched as a run on its own, grouped as a batch.
    EmptyIndex,
    /// A signature index with batches: the `_index` stages.
    Index,
}

impl MatchingAsked<'_> {
    fn against(self, batch: Option<&IndexedBatch>) -> Self {
        let against = match batch {
            None => Against::Nothing,
            Some(batch) if batch.index.batches.is_empty() => Against::EmptyIndex,
            Some(_) => Against::Index,
        };
        Self { against, ..self }
    }
}

impl<'a> From<&'a MatchOptions> for MatchingAsked<'a> {
    fn from(options: &'a MatchOptions) -> Self {
        Self {
            k: options.k,
            matching: options.matching,
            plan: &options.plan,
            pairs: options.pairs,
            clustering: options.clustering,
            quiet: options.console.quiet,
            against: Against::Nothing,
        }
    }
}

impl<'a> From<&'a RunOptions> for MatchingAsked<'a> {
    fn from(options: &'a RunOptions) -> Self {
        Self {
            k: options.k,
            matching: options.matching,
            plan: &options.plan,
            pairs: options.pairs,
            clustering: options.clustering,
            quiet: options.console.quiet,
            against: Against::Nothing,
        }
    }
}

/// Stages 2 to 5, shared by `run` and `match`: fingerprints, the band plan, candidates (in
/// passes), pairs, clustering, groups. Returns the plan as it ran.
async fn run_matching(
    ctx: &SessionContext,
    params: &Params,
    asked: impl Into<MatchingAsked<'_>>,
    clock: &mut Stopwatch,
) -> Result<PlanReport> {
    let asked = asked.into();
    // Against an index with batches only pairs with a fresh fingerprint are looked for; the
    // first batch of an index is matched like a run.
    let (fingerprints, candidates, groups) = match asked.against {
        Against::Nothing => (
            pipeline::FINGERPRINTS,
            asked.matching.candidates_stage(),
            pipeline::GROUPS,
        ),
        Against::EmptyIndex => (
            pipeline::FINGERPRINTS,
            asked.matching.candidates_stage(),
            pipeline::GROUPS_INDEX,
        ),
        Against::Index => (
            pipeline::FINGERPRINTS_INDEX,
            asked.matching.candidates_index_stage(),
            pipeline::GROUPS_INDEX,
        ),
    };
    let indexed = asked.against != Against::Nothing;
    clock
        .time(
            "fingerprints",
            pipeline::run_stage(ctx, &fingerprints, params),
        )
        .await?;
    let bits: u32 = if params.get("bits") == Some("128") {
        128
    } else {
        64
    };
    let report = clock
        .time("plan", choose_plan(ctx, asked.plan, asked.k, bits))
        .await?;
    if !asked.quiet {
        eprintln!(
            "neardup: plan {} ({}): {} tables in {} pass{}, about {:.3e} candidates",
            report.plan,
            report.chosen_by,
            report.tables,
            report.passes,
            if report.passes == 1 { "" } else { "es" },
            report.estimated_candidates
        );
    }
    let candidates = async {
        let bar = crate::progress::StageBar::passes(report.passes as u64, !asked.quiet);
        let per_pass = report.tables.div_ceil(report.passes.max(1));
        for pass in 0..report.passes {
            let from = 1 + pass * per_pass;
            let to = (from + per_pass).min(report.tables + 1);
            let mut params = params.clone();
            params
                .set("plan", quote_literal(&report.plan))
                .set("band_from", from.to_string())
                .set("band_to", to.to_string());
            pipeline::run_stage(ctx, &candidates, &params).await?;
            bar.advance();
        }
        pipeline::run_stage(ctx, &pipeline::CANDIDATES_TABLE, params).await
    };
    clock.time("candidates", candidates).await?;
    clock
        .time(
            "pairs",
            pipeline::run_stage(ctx, &asked.pairs.stage(), params),
        )
        .await?;
    let clustering = async {
        if asked.clustering == Clustering::Sql {
            let work = Path::new(params.get("work_dir").unwrap_or_default());
            let rounds = crate::components::sql_components(ctx, work).await?;
            log::debug!("components in {rounds} SQL rounds");
            return Ok(());
        }
        match (params.get("bits") == Some("128"), indexed) {
            (true, false) => cluster_fingerprints::<u128>(ctx).await,
            (false, false) => cluster_fingerprints::<u64>(ctx).await,
            (true, true) => cluster_against_index::<u128>(ctx).await,
            (false, true) => cluster_against_index::<u64>(ctx).await,
        }
    };
    clock.time("clustering", clustering).await?;
    clock
        .time("groups", pipeline::run_stage(ctx, &groups, params))
        .await?;
    Ok(report)
}

/// The plan asked for, or the planner's cheapest for the fingerprints at hand (their number, and
/// a sample of them for real key sizes), with the passes that keep rows per pass bounded.
async fn choose_plan(ctx: &SessionContext, spec: &str, k: u32, bits: u32) -> Result<PlanReport> {
    let n = count_rows(ctx, "fingerprints").await?;
    let (candidates, chosen_by) = crate::planner::plans_asked(spec, k, bits)
        .map_err(|e| Error::Usage(format!("--plan: {e}")))?;
    let sample = sample_fingerprints(ctx, bits).await?;
    let estimates = crate::planner::estimate(candidates, n, &sample);
    log::debug!(
        "plans for k = {k}, {n} distinct fingerprints, {} sampled:\n{}",
        sample.len(),
        crate::planner::table(&estimates)
    );
    let best = estimates
        .into_iter()
        .next()
        .ok_or_else(|| Error::Usage(format!("--plan {spec}: no such plan is exact for k = {k}")))?;
    let tables = best.plan.tables();
    Ok(PlanReport {
        plan: best.plan.to_string(),
        chosen_by: chosen_by.to_string(),
        tables,
        passes: passes(n, tables).1,
        estimated_rows: best.rows,
        estimated_candidates: best.candidates,
    })
}

/// Tables per candidate pass and passes, for `n` fingerprints in `tables` tables: as many tables
/// as keep a pass within the rows per pass, at least one.
fn passes(n: u64, tables: usize) -> (usize, usize) {
    let per_pass = (rows_per_pass() / n.max(1)).clamp(1, tables.max(1) as u64) as usize;
    (per_pass, tables.div_ceil(per_pass))
}

/// `ROWS_PER_PASS`, or `NEARDUP_ROWS_PER_PASS` (a test hook: small values force many passes).
fn rows_per_pass() -> u64 {
    std::env::var("NEARDUP_ROWS_PER_PASS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROWS_PER_PASS)
}

/// What `neardup plan` is asked to compare.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    pub docs: Option<u64>,
    pub k: u32,
    pub bits: u32,
    pub signatures: Vec<String>,
    pub simhash_column: String,
}

/// `neardup plan`: every plan exact for k, estimated, the planner's choice first.
pub async fn compare_plans(options: &PlanOptions) -> Result<String> {
    let bits = options.bits;
    if bits != 64 && bits != 128 {
        return Err(Error::Usage(format!(
            "--bits {bits}: fingerprints have 64 or 128 bits"
        )));
    }
    check_k(options.k, bits, "auto")?;
    let (mut n, mut sample, mut source) = (1_000_000, Vec::new(), "assumed".to_string());
    if !options.signatures.is_empty() {
        if bits != 64 {
            return Err(Error::Usage(
                "--signatures reads 64-bit (UInt64) fingerprints; leave out --bits 128".into(),
            ));
        }
        let corpus = input::inspect(input::resolve_inputs(&options.signatures)?)?;
        corpus.check_simhash_column(&options.simhash_column)?;
        let ctx = session_context()?;
        register_corpus(&ctx, &corpus).await?;
        let column = quote_ident(&options.simhash_column);
        pipeline::run_statements(
            &ctx,
            &format!(
                "CREATE VIEW fingerprints AS SELECT DISTINCT {column} AS simhash FROM corpus \
                 WHERE {column} IS NOT NULL"
            ),
            "distinct fingerprints",
        )
        .await?;
        n = count_rows(&ctx, "fingerprints").await?;
        sample = sample_fingerprints(&ctx, 64).await?;
        source = format!(
            "in {} file(s), {} sampled",
            corpus.files.len(),
            sample.len()
        );
    }
    if let Some(docs) = options.docs {
        n = docs;
        source = if sample.is_empty() {
            "given".into()
        } else {
            format!("given; {} sampled from --signatures", sample.len())
        };
    }
    let estimates =
        crate::planner::estimate(crate::planner::plans_for(options.k, bits), n, &sample);
    let mut out = format!(
        "k = {}, {n} distinct {bits}-bit fingerprints ({source})\n",
        options.k
    );
    out.push_str(&crate::planner::table(&estimates));
    if let Some(best) = estimates.first() {
        let (tables_per_pass, passes) = passes(n, best.plan.tables());
        out.push_str(&format!(
            "{} runs in {passes} pass(es) of at most {tables_per_pass} tables. Force a plan with \
             --plan {}.\n",
            best.plan, best.plan
        ));
    }
    Ok(out)
}

/// Up to `planner::SAMPLE` distinct fingerprints (the table is grouped, so in no useful order).
async fn sample_fingerprints(ctx: &SessionContext, bits: u32) -> Result<Vec<u128>> {
    let batches = query_batches(
        ctx,
        &format!(
            "SELECT simhash FROM fingerprints LIMIT {}",
            crate::planner::SAMPLE
        ),
    )
    .await?;
    let what = || "sampling fingerprints".to_string();
    let mut sample = Vec::new();
    for batch in &batches {
        if bits == 128 {
            sample.extend(u128::values(batch.column(0)).context(what)?);
        } else {
            sample.extend(
                u64::values(batch.column(0))
                    .context(what)?
                    .into_iter()
                    .map(u128::from),
            );
        }
    }
    Ok(sample)
}

fn stage_params(dir: &Path, id_column: &str, k: u32, bits: u32) -> Params {
    let folder = |name: &str| {
        // A trailing slash makes COPY write a folder of Parquet files.
        quote_literal(&format!("{}/", dir.join(name).display()))
    };
    let mut params = Params::default();
    params
        .set(
            "work_dir",
            dir.join(WORK_DIR).join("components").display().to_string(),
        )
        .set("id", quote_ident(id_column))
        .set("k", k.to_string())
        .set("partition_by", "")
        .set("batch", "0")
        .set("signatures_dir", folder("signatures"))
        .set(
            "fingerprints_dir",
            folder(&format!("{WORK_DIR}/fingerprints")),
        )
        .set(
            "fingerprint_pairs_dir",
            folder(&format!("{WORK_DIR}/fingerprint_pairs")),
        )
        .set("members_dir", folder(&format!("{WORK_DIR}/members")))
        .set(
            "grouped_members_dir",
            folder(&format!("{WORK_DIR}/grouped_members")),
        )
        .set("pairs_dir", folder("pairs"))
        .set("groups_dir", folder("groups"))
        .set("dedup_dir", folder("dedup"));
    // The band columns: bucket1..bucket4 of 64 bits, bucket1..bucket8 of 128.
    let bands = 1..=if bits == 128 { 8 } else { BANDS };
    let list = |each: &dyn Fn(usize) -> String, separator: &str| {
        bands.clone().map(each).collect::<Vec<_>>().join(separator)
    };
    params
        .set("bits", bits.to_string())
        .set(
            "bucket_columns",
            list(&|n| format!("bucket(simhash, {n}) AS bucket{n}"), ", "),
        )
        .set("bucket_names", list(&|n| format!("bucket{n}"), ", "));
    params
}

/// Internal tables live here inside the staging folder and are removed before the commit.
const WORK_DIR: &str = "_work";

fn parameters(
    k: u32,
    matching: Matching,
    pairs: PairsListed,
    id_column: &str,
    source_column: &str,
    features: &str,
    bits: u32,
) -> Parameters {
    Parameters {
        k,
        matching,
        pairs,
        clustering: Clustering::UnionFind,
        id_column: id_column.to_string(),
        source_column: source_column.to_string(),
        fingerprint_bits: bits,
        bands: bits / 16,
        features: features.to_string(),
        partition_by: Vec::new(),
        feature_files: Default::default(),
        cluster: None,
    }
}

fn finish(
    staging: StagingDir,
    done: Finished<'_>,
    index: Option<IndexReport>,
    clock: Stopwatch,
) -> Result<Summary> {
    let work = staging.path().join(WORK_DIR);
    if work.exists() {
        std::fs::remove_dir_all(&work).map_err(|e| Error::io(&work, e))?;
    }
    let counts = done.counts;
    let mut stages = clock.stages;
    for stage in &mut stages {
        stage.rows = match stage.stage.as_str() {
            "signatures" => Some(counts.documents),
            "fingerprints" => Some(counts.distinct_fingerprints),
            "candidates" => Some(counts.fingerprint_pairs),
            "pairs" => Some(counts.pairs),
            "groups" => Some(counts.grouped_documents),
            "dedup" => counts.documents_kept,
            "index" => Some(counts.documents),
            _ => None,
        };
    }
    let summary = Summary {
        neardup_version: env!("CARGO_PKG_VERSION").to_string(),
        command: done.command.to_string(),
        parameters: done.parameters,
        plan: Some(done.plan),
        index,
        inputs: input_names(done.corpus),
        counts,
        stages,
        total_seconds: clock.started.elapsed().as_secs_f64(),
        peak_rss_bytes: crate::summary::peak_rss_bytes(),
    };
    summary.write(&staging.path().join(SUMMARY_FILE))?;
    let target = staging.commit()?;
    if !clock.quiet {
        eprintln!("neardup: wrote {}", target.display());
    }
    Ok(summary)
}

fn input_names(corpus: &Corpus) -> Vec<String> {
    corpus
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect()
}

/// Registers `corpus` (all files, scanned in parallel) and `corpus_ordered` (the same rows with
/// `__neardup_input_order` = file index * 2^32 + row index; the name cannot clash with an
/// input column, such as the `input_order` of a run's own signatures). Hive partition folders
/// of the files are columns of both, after the files' own.
pub async fn register_corpus(ctx: &SessionContext, corpus: &Corpus) -> Result<()> {
    let paths: Vec<String> = corpus
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    let options = || ParquetReadOptions::default().file_extension("");
    let mut plain = Vec::with_capacity(paths.len());
    let mut ordered = Vec::with_capacity(paths.len());
    for (index, path) in paths.iter().enumerate() {
        let table = format!("corpus_file_{index}");
        ctx.register_parquet(&table, path, options())
            .await
            .context(|| format!("reading {path}"))?;
        let mut columns = String::from("*");
        let values = corpus.partition_values.get(index).into_iter().flatten();
        for (name, value) in corpus.partition_columns.iter().zip(values) {
            let value = value
                .as_deref()
                .map_or("CAST(NULL AS VARCHAR)".to_string(), quote_literal);
            columns.push_str(&format!(", {value} AS {}", quote_ident(name)));
        }
        plain.push(format!("SELECT {columns} FROM {table}"));
        ordered.push(format!(
            "SELECT {columns}, {index} * 4294967296 + CAST(row_number() OVER () AS BIGINT) - 1 AS __neardup_input_order FROM {table}"
        ));
    }
    if corpus.partition_columns.is_empty() {
        let all = ctx
            .read_parquet(paths.clone(), options())
            .await
            .context(|| "reading the input files".into())?;
        ctx.register_table("corpus", all.into_view())
            .context(|| "registering the corpus".into())?;
    } else {
        let view = format!("CREATE VIEW corpus AS {}", plain.join(" UNION ALL "));
        pipeline::run_statements(ctx, &view, "partition columns").await?;
    }
    let view = format!(
        "CREATE VIEW corpus_ordered AS {}",
        ordered.join(" UNION ALL ")
    );
    pipeline::run_statements(ctx, &view, "input order").await
}

/// Ids must be present and unique (pairs, groups and dedup refer to documents by id), and not
/// in the index the batch is matched against, if any.
async fn check_ids(
    ctx: &SessionContext,
    corpus: &Corpus,
    id_column: &str,
    batch: Option<&IndexedBatch>,
) -> Result<()> {
    check_corpus_ids(ctx, corpus, id_column).await?;
    match batch {
        Some(batch) => batch.check_new_ids(ctx, id_column).await,
        None => Ok(()),
    }
}

async fn check_corpus_ids(ctx: &SessionContext, corpus: &Corpus, id_column: &str) -> Result<()> {
    let id = quote_ident(id_column);
    let nulls = query_batches(
        ctx,
        &format!(
            "SELECT __neardup_input_order FROM corpus_ordered WHERE {id} IS NULL ORDER BY 1 LIMIT 3"
        ),
    )
    .await?;
    let mut places = Vec::new();
    for batch in &nulls {
        let orders = as_int64_array(batch.column(0)).context(|| "NULL ids".into())?;
        places.extend(orders.iter().flatten().map(|o| corpus.locate(o)));
    }
    if !places.is_empty() {
        return Err(Error::Input(format!(
            "id column '{id_column}' is NULL at {}; every document needs an id",
            places.join(", ")
        )));
    }
    let duplicates = query_batches(
        ctx,
        &format!(
            "SELECT CAST({id} AS VARCHAR) AS id, count(*) AS copies FROM corpus \
             GROUP BY {id} HAVING count(*) > 1 ORDER BY copies DESC, id LIMIT 5"
        ),
    )
    .await?;
    let shown = datafusion::arrow::util::pretty::pretty_format_batches(&duplicates)
        .map_err(|e| Error::Internal(e.to_string()))?;
    if duplicates.iter().any(|b| b.num_rows() > 0) {
        return Err(Error::Input(format!(
            "id column '{id_column}' has duplicate values; ids must be unique. Some of them:\n{shown}"
        )));
    }
    Ok(())
}

/// Union-find over the fingerprint pairs; registers `fingerprint_components` for stage 3.
async fn cluster_fingerprints<F: FingerprintColumn>(ctx: &SessionContext) -> Result<()> {
    let what = || "clustering".to_string();
    let mut stream = ctx
        .sql("SELECT simhash_a, simhash_b FROM fingerprint_pairs")
        .await
        .context(what)?
        .execute_stream()
        .await
        .context(what)?;
    let mut edges = Vec::new();
    while let Some(batch) = stream.next().await {
        let batch = batch.context(what)?;
        let a = F::values(batch.column(0)).context(what)?;
        let b = F::values(batch.column(1)).context(what)?;
        edges.extend(a.into_iter().zip(b));
    }
    let components = cluster::connected_components(edges);
    let schema = Arc::new(Schema::new(vec![
        Field::new("simhash", F::data_type(), false),
        Field::new("component", F::data_type(), false),
    ]));
    let nodes: Vec<F> = components.iter().map(|c| c.0).collect();
    let labels: Vec<F> = components.iter().map(|c| c.1).collect();
    let columns = vec![
        F::column(&nodes).context(what)?,
        F::column(&labels).context(what)?,
    ];
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)
        .map_err(|e| Error::Internal(e.to_string()))?;
    let table = MemTable::try_new(schema, vec![vec![batch]]).context(what)?;
    ctx.register_table("fingerprint_components", Arc::new(table))
        .context(what)?;
    Ok(())
}

/// A node of the clustering against an index: a fingerprint of this batch, or a group the
/// index already holds (its members are connected without reading them all). Fingerprints order
/// before groups, so a component's smallest node, its label, is a fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Node<F> {
    Fingerprint(F),
    Group(u64),
}

/// Union-find over this batch's fingerprint pairs and the indexed groups that the batch's
/// fingerprints belong to; registers `fingerprint_components` and `group_components` for
/// sql/05_groups_index.sql, each component named by its smallest fingerprint.
async fn cluster_against_index<F: FingerprintColumn + std::hash::Hash>(
    ctx: &SessionContext,
) -> Result<()> {
    let what = || "clustering against the index".to_string();
    let mut edges: Vec<(Node<F>, Node<F>)> = Vec::new();
    let mut stream = ctx
        .sql("SELECT simhash_a, simhash_b FROM fingerprint_pairs")
        .await
        .context(what)?
        .execute_stream()
        .await
        .context(what)?;
    while let Some(batch) = stream.next().await {
        let batch = batch.context(what)?;
        let a = F::values(batch.column(0)).context(what)?;
        let b = F::values(batch.column(1)).context(what)?;
        edges.extend(
            a.into_iter()
                .zip(b)
                .map(|(a, b)| (Node::Fingerprint(a), Node::Fingerprint(b))),
        );
    }
    let memberships = query_batches(
        ctx,
        "SELECT DISTINCT d.simhash, g.group_id \
         FROM index_documents d \
         JOIN index_groups g ON d.id = g.id \
         WHERE d.simhash IN (SELECT simhash_a FROM fingerprint_pairs \
                             UNION ALL SELECT simhash_b FROM fingerprint_pairs \
                             UNION ALL SELECT simhash FROM documents WHERE fresh)",
    )
    .await?;
    for batch in &memberships {
        let fingerprints = F::values(batch.column(0)).context(what)?;
        let groups = datafusion::common::cast::as_uint64_array(batch.column(1)).context(what)?;
        edges.extend(
            fingerprints
                .into_iter()
                .zip(groups.iter().flatten())
                .map(|(f, g)| (Node::Fingerprint(f), Node::Group(g))),
        );
    }
    let (mut fingerprints, mut fingerprint_labels) = (Vec::new(), Vec::new());
    let (mut groups, mut group_labels) = (Vec::new(), Vec::new());
    for (node, label) in cluster::connected_components(edges) {
        let Node::Fingerprint(label) = label else {
            return Err(Error::Internal("a component without a fingerprint".into()));
        };
        match node {
            Node::Fingerprint(f) => {
                fingerprints.push(f);
                fingerprint_labels.push(label);
            }
            Node::Group(g) => {
                groups.push(g);
                group_labels.push(label);
            }
        }
    }
    let register = |name: &str, first: (&str, DataType, ArrayRef), labels: &[F]| {
        let schema = Arc::new(Schema::new(vec![
            Field::new(first.0, first.1, false),
            Field::new("component", F::data_type(), false),
        ]));
        let columns = vec![first.2, F::column(labels).context(what)?];
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns)
            .map_err(|e| Error::Internal(e.to_string()))?;
        let table = MemTable::try_new(schema, vec![vec![batch]]).context(what)?;
        ctx.register_table(name, Arc::new(table)).context(what)?;
        Ok::<(), Error>(())
    };
    register(
        "fingerprint_components",
        (
            "simhash",
            F::data_type(),
            F::column(&fingerprints).context(what)?,
        ),
        &fingerprint_labels,
    )?;
    register(
        "group_components",
        (
            "group_id",
            DataType::UInt64,
            Arc::new(UInt64Array::from(groups)),
        ),
        &group_labels,
    )?;
    Ok(())
}

/// Runs one query and collects its result; errors name the query.
pub(crate) async fn query_batches(ctx: &SessionContext, sql: &str) -> Result<Vec<RecordBatch>> {
    let what = || format!("query {sql}");
    ctx.sql(sql)
        .await
        .context(what)?
        .collect()
        .await
        .context(what)
}

const REMOVED_COUNT: &str = "SELECT count(*) FROM groups WHERE id <> representative_id";

async fn count_rows(ctx: &SessionContext, table: &str) -> Result<u64> {
    count_query(ctx, &format!("SELECT count(*) FROM {table}")).await
}

/// The single count a query returns.
pub(crate) async fn count_query(ctx: &SessionContext, sql: &str) -> Result<u64> {
    let batches = query_batches(ctx, sql).await?;
    first_value(&batches, 0)
}

/// Reads the value in column `column` of the single row of a query result as u64.
fn first_value(batches: &[RecordBatch], column: usize) -> Result<u64> {
    let batch = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .ok_or_else(|| Error::Internal("count query returned no row".into()))?;
    let values = as_int64_array(batch.column(column)).context(|| "count".into())?;
    Ok(if values.is_null(0) {
        0
    } else {
        values.value(0) as u64
    })
}

/// The single value of a one-row UInt64 result (`max(group_id)`), `None` when NULL.
fn first_unsigned(batches: &[RecordBatch]) -> Result<Option<u64>> {
    let batch = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .ok_or_else(|| Error::Internal("query returned no row".into()))?;
    let values = datafusion::common::cast::as_uint64_array(batch.column(0))
        .context(|| "largest group id".into())?;
    Ok((!values.is_null(0)).then(|| values.value(0)))
}

/// Counts for the summary. `has_texts` is false for `match`, whose input holds no texts.
/// `batch` is this run's batch of an index, whose `groups` also list indexed documents: only
/// this batch's documents can be removed from its dedup.
async fn count(
    ctx: &SessionContext,
    has_texts: bool,
    min_features: usize,
    batch: Option<u64>,
) -> Result<Counts> {
    // `features` is NULL for NULL text; `match` has no texts, so no features column.
    let features = if has_texts { "features" } else { "NULL" };
    let documents = query_batches(
        ctx,
        &format!(
            "SELECT count(*), count(*) - count(text_bytes), count(*) - count(simhash), \
                    count(DISTINCT simhash), \
                    count(*) FILTER (WHERE {features} = 0), \
                    count(*) FILTER (WHERE {features} > 0 AND {features} < {min_features}) \
             FROM signatures"
        ),
    )
    .await?;
    let null_texts = if has_texts {
        first_value(&documents, 1)?
    } else {
        0
    };
    let removed = match batch {
        None => "count(*) - count(DISTINCT group_id)".to_string(),
        Some(batch) => {
            format!("count(*) FILTER (WHERE id <> representative_id AND batch = {batch})")
        }
    };
    let groups = query_batches(
        ctx,
        &format!("SELECT count(DISTINCT group_id), count(*), {removed} FROM groups"),
    )
    .await?;
    Ok(Counts {
        documents: first_value(&documents, 0)?,
        null_texts,
        empty_texts: first_value(&documents, 4)?,
        short_texts: first_value(&documents, 5)?,
        distinct_fingerprints: first_value(&documents, 3)?,
        fingerprint_pairs: count_rows(ctx, "fingerprint_pairs").await?,
        pairs: count_rows(ctx, "pairs").await?,
        groups: first_value(&groups, 0)?,
        grouped_documents: first_value(&groups, 1)?,
        documents_removed: first_value(&groups, 2)?,
        documents_kept: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(columns: &[&str]) -> Corpus {
        let fields: Vec<Field> = columns
            .iter()
            .map(|name| Field::new(*name, DataType::Utf8, true))
            .collect();
        Corpus {
            files: vec![PathBuf::from("/data/in.parquet")],
            schema: Arc::new(Schema::new(fields)),
            rows: 0,
            partition_columns: Vec::new(),
            partition_values: Vec::new(),
        }
    }

    #[test]
    fn partition_columns_are_checked_before_any_work() {
        let corpus = corpus(&["id", "text", "dt"]);
        let names = |list: &[&str]| list.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        let clause = partition_clause(&corpus, &names(&["dt"])).unwrap();
        assert_eq!(clause, "PARTITIONED BY (dt)");
        assert_eq!(partition_clause(&corpus, &[]).unwrap(), "");
        let err = partition_clause(&corpus, &names(&["nosuch"])).unwrap_err();
        assert_eq!(err.exit_code(), 1);
        let message = err.to_string();
        assert!(
            message.contains("no column 'nosuch'") && message.contains("id, text, dt"),
            "{message}"
        );
        assert!(!message.contains("-column"), "{message}");
        let err = partition_clause(&corpus, &names(&["dt", "dt"])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("'dt' is named twice"), "{err}");
        let err = partition_clause(&corpus, &names(&["id", "text", "dt"])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("all the input's columns"), "{err}");
    }
}
