//! The near-duplicate job: checks the input, runs the SQL stages in order in one session, does
//! the clustering between them, and writes the outputs whole or not at all.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::catalog::MemTable;
use datafusion::common::cast::as_int64_array;
use datafusion::execution::FunctionRegistry;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;

use crate::error::{Error, QueryContext, Result};
use crate::fingerprint::{BANDS, Fingerprint};
use crate::input::{self, Corpus, quote_ident, quote_literal};
use crate::output::{SUMMARY_FILE, StagingDir};
use crate::pipeline::{self, Matching, Params};
use crate::summary::{Counts, Parameters, StageTime, Summary};
use crate::text::{FeatureOptions, Featurizer};
use crate::udf::FingerprintColumn;
use crate::{cluster, udf};

/// Largest k the four 16-bit bands find exactly (pigeonhole: k + 1 <= 4 bands).
pub const MAX_K: u32 = 3;

/// What `neardup run` is asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub inputs: Vec<String>,
    pub output: PathBuf,
    pub id_column: String,
    pub text_column: String,
    pub k: u32,
    pub matching: Matching,
    pub overwrite: bool,
    /// How texts become features (`--features`; `simhash`'s option string).
    pub features: FeatureOptions,
    pub console: Console,
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
    pub overwrite: bool,
    pub console: Console,
}

/// How a job uses the machine and the terminal.
#[derive(Debug, Clone, Copy, Default)]
pub struct Console {
    /// Partitions run in parallel (`--threads`); the number of cores when `None`.
    pub threads: Option<usize>,
    /// No progress lines on standard error (`--quiet`); errors are still reported.
    pub quiet: bool,
}

/// Checks k is one the band plan finds exactly.
pub fn check_k(k: u32, bits: u32) -> Result<()> {
    let (bands, max_k) = if bits == 128 {
        (<u128 as Fingerprint>::BANDS, <u128 as Fingerprint>::MAX_K)
    } else {
        (BANDS, MAX_K)
    };
    if k <= max_k {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "--k {k} is not supported: {bands} 16-bit bands of a {bits}-bit fingerprint find every \
         pair only up to k = {max_k} (allowed: 0..={max_k})"
    )))
}

/// The session every stage runs in: all cores, input types kept, zstd Parquet output.
pub fn session_context() -> Result<SessionContext> {
    session_context_with(None)
}

/// The same with `threads` partitions (all cores when `None`).
pub fn session_context_with(threads: Option<usize>) -> Result<SessionContext> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut config = SessionConfig::new().with_target_partitions(threads.unwrap_or(cores).max(1));
    let options = config.options_mut();
    // One scan per file keeps row numbers in file order (`input_order`); the signature stage
    // is still parallel, as the planner spreads the rows over partitions before the UDF.
    options.optimizer.repartition_file_scans = false;
    // Keep the input's string types in every output (`dedup` keeps the input columns as they are).
    options.execution.parquet.schema_force_view_types = false;
    options.execution.parquet.compression = Some("zstd(3)".into());
    let mut ctx = SessionContext::new_with_config(config);
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

/// A stage failed inside DataFusion: if an input file is corrupt, say which one (DataFusion's
/// message does not say which file of many it was reading).
async fn name_corrupt_input(ctx: &SessionContext, error: Error, corpus: &Corpus) -> Error {
    if !matches!(error, Error::Query { .. }) {
        return error;
    }
    match find_unreadable_file(ctx, &corpus.files).await {
        Some((file, message)) => {
            Error::Input(format!("{} cannot be read: {message}", file.display()))
        }
        None => error,
    }
}

/// Reads every file completely, the way the stages read it, and returns the first that fails
/// with its error. Runs only after a failure, so its cost is paid only then.
async fn find_unreadable_file(
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
    check_k(options.k, bits)?;
    if bits == 128 && options.matching == Matching::Join {
        return Err(Error::Usage(
            "--matching join is written for 64-bit fingerprints; use --matching scan (the \
             default) with --bits 128"
                .into(),
        ));
    }
    let mut clock = Stopwatch::new(options.console.quiet);
    let corpus = input::inspect(input::resolve_inputs(&options.inputs)?)?;
    corpus.check_id_column(&options.id_column)?;
    corpus.check_text_column(&options.text_column)?;
    // The canonical form: every option spelled out, recorded in summary.json as it ran.
    let features = options.features.to_string();
    Featurizer::cached(&features).map_err(|e| Error::Usage(format!("--features: {e}")))?;
    let staging = StagingDir::create(&options.output, options.overwrite)?;
    let ctx = session_context_with(options.console.threads)?;
    register_corpus(&ctx, &corpus).await?;
    let params = stage_params(staging.path(), &options.id_column, options.k, bits)
        .set("text", quote_ident(&options.text_column))
        .set("features", quote_literal(&features))
        .clone();
    let stages = async {
        clock
            .time("check ids", check_ids(&ctx, &corpus, &options.id_column))
            .await?;
        clock
            .time(
                "signatures",
                pipeline::run_stage(&ctx, &pipeline::SIGNATURES, &params),
            )
            .await?;
        run_matching(&ctx, &params, options.matching, &mut clock).await?;
        clock
            .time(
                "dedup",
                pipeline::run_stage(&ctx, &pipeline::DEDUP, &params),
            )
            .await
    };
    if let Err(e) = stages.await {
        return Err(name_corrupt_input(&ctx, e, &corpus).await);
    }

    let mut counts = count(&ctx, true, options.features.min_features).await?;
    let kept = count_rows(&ctx, "dedup").await?;
    if kept + counts.documents_removed != counts.documents {
        return Err(Error::Internal(format!(
            "dedup kept {kept} of {} documents with {} removed: rows were lost",
            counts.documents, counts.documents_removed
        )));
    }
    counts.documents_kept = Some(kept);
    let parameters = parameters(
        options.k,
        options.matching,
        &options.id_column,
        &options.text_column,
        &features,
        bits,
    );
    finish(staging, "run", parameters, &corpus, counts, clock)
}

/// `neardup match`: fingerprints in; pairs, groups and summary out.
pub async fn match_fingerprints(options: &MatchOptions) -> Result<Summary> {
    check_k(options.k, 64)?;
    let mut clock = Stopwatch::new(options.console.quiet);
    let corpus = input::inspect(input::resolve_inputs(&options.signatures)?)?;
    corpus.check_id_column(&options.id_column)?;
    corpus.check_simhash_column(&options.simhash_column)?;
    let staging = StagingDir::create(&options.output, options.overwrite)?;
    let ctx = session_context_with(options.console.threads)?;
    register_corpus(&ctx, &corpus).await?;
    let params = stage_params(staging.path(), &options.id_column, options.k, 64)
        .set("simhash", quote_ident(&options.simhash_column))
        .clone();
    let stages = async {
        clock
            .time("check ids", check_ids(&ctx, &corpus, &options.id_column))
            .await?;
        pipeline::run_stage(&ctx, &pipeline::SIGNATURES_GIVEN, &params).await?;
        run_matching(&ctx, &params, options.matching, &mut clock).await
    };
    if let Err(e) = stages.await {
        return Err(name_corrupt_input(&ctx, e, &corpus).await);
    }
    let counts = count(&ctx, false, 0).await?;
    let parameters = parameters(
        options.k,
        options.matching,
        &options.id_column,
        &options.simhash_column,
        "fingerprints given",
        64,
    );
    finish(staging, "match", parameters, &corpus, counts, clock)
}

/// Stages 2 to 5, shared by `run` and `match`: fingerprints, candidates, pairs, clustering,
/// groups.
async fn run_matching(
    ctx: &SessionContext,
    params: &Params,
    matching: Matching,
    clock: &mut Stopwatch,
) -> Result<()> {
    clock
        .time(
            "fingerprints",
            pipeline::run_stage(ctx, &pipeline::FINGERPRINTS, params),
        )
        .await?;
    clock
        .time(
            "candidates",
            pipeline::run_stage(ctx, &matching.candidates_stage(), params),
        )
        .await?;
    clock
        .time("pairs", pipeline::run_stage(ctx, &pipeline::PAIRS, params))
        .await?;
    let clustering = async {
        if params.get("bits") == Some("128") {
            cluster_fingerprints::<u128>(ctx).await
        } else {
            cluster_fingerprints::<u64>(ctx).await
        }
    };
    clock.time("clustering", clustering).await?;
    clock
        .time(
            "groups",
            pipeline::run_stage(ctx, &pipeline::GROUPS, params),
        )
        .await
}

fn stage_params(dir: &Path, id_column: &str, k: u32, bits: u32) -> Params {
    let folder = |name: &str| {
        // A trailing slash makes COPY write a folder of Parquet files.
        quote_literal(&format!("{}/", dir.join(name).display()))
    };
    let mut params = Params::default();
    params
        .set("id", quote_ident(id_column))
        .set("k", k.to_string())
        .set("signatures_dir", folder("signatures"))
        .set(
            "fingerprints_dir",
            folder(&format!("{WORK_DIR}/fingerprints")),
        )
        .set(
            "fingerprint_pairs_dir",
            folder(&format!("{WORK_DIR}/fingerprint_pairs")),
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
        .set("bucket_names", list(&|n| format!("bucket{n}"), ", "))
        .set(
            "band_rows",
            list(
                &|n| {
                    format!(
                        "SELECT {n} AS band, bucket{n} AS band_value, simhash FROM fingerprints"
                    )
                },
                " UNION ALL ",
            ),
        );
    params
}

/// Internal tables live here inside the staging folder and are removed before the commit.
const WORK_DIR: &str = "_work";

fn parameters(
    k: u32,
    matching: Matching,
    id_column: &str,
    source_column: &str,
    features: &str,
    bits: u32,
) -> Parameters {
    Parameters {
        k,
        matching,
        id_column: id_column.to_string(),
        source_column: source_column.to_string(),
        fingerprint_bits: bits,
        bands: bits / 16,
        features: features.to_string(),
    }
}

fn finish(
    staging: StagingDir,
    command: &str,
    parameters: Parameters,
    corpus: &Corpus,
    counts: Counts,
    clock: Stopwatch,
) -> Result<Summary> {
    let work = staging.path().join(WORK_DIR);
    if work.exists() {
        std::fs::remove_dir_all(&work).map_err(|e| Error::io(&work, e))?;
    }
    let summary = Summary {
        neardup_version: env!("CARGO_PKG_VERSION").to_string(),
        command: command.to_string(),
        parameters,
        inputs: corpus
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect(),
        counts,
        stages: clock.stages,
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

/// Registers `corpus` (all files, scanned in parallel) and `corpus_ordered` (the same rows with
/// `__neardup_input_order` = file index * 2^32 + row index; the name cannot clash with an
/// input column, such as the `input_order` of a run's own signatures).
pub async fn register_corpus(ctx: &SessionContext, corpus: &Corpus) -> Result<()> {
    let paths: Vec<String> = corpus
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    let options = || ParquetReadOptions::default().file_extension("");
    let all = ctx
        .read_parquet(paths.clone(), options())
        .await
        .context(|| "reading the input files".into())?;
    ctx.register_table("corpus", all.into_view())
        .context(|| "registering the corpus".into())?;
    let mut union = Vec::with_capacity(paths.len());
    for (index, path) in paths.iter().enumerate() {
        let table = format!("corpus_file_{index}");
        ctx.register_parquet(&table, path, options())
            .await
            .context(|| format!("reading {path}"))?;
        union.push(format!(
            "SELECT *, {index} * 4294967296 + CAST(row_number() OVER () AS BIGINT) - 1 AS __neardup_input_order FROM {table}"
        ));
    }
    let view = format!(
        "CREATE VIEW corpus_ordered AS {}",
        union.join(" UNION ALL ")
    );
    pipeline::run_statements(ctx, &view, "input order").await
}

/// Ids must be present and unique: pairs, groups and dedup refer to documents by id.
async fn check_ids(ctx: &SessionContext, corpus: &Corpus, id_column: &str) -> Result<()> {
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

async fn count_rows(ctx: &SessionContext, table: &str) -> Result<u64> {
    let batches = query_batches(ctx, &format!("SELECT count(*) FROM {table}")).await?;
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

/// Counts for the summary. `has_texts` is false for `match`, whose input holds no texts.
async fn count(ctx: &SessionContext, has_texts: bool, min_features: usize) -> Result<Counts> {
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
    let groups = query_batches(
        ctx,
        "SELECT count(DISTINCT group_id), count(*), count(*) - count(DISTINCT group_id) FROM groups",
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
