//! The session a command's SQL runs in: in this process (all cores or `--threads`, an optional
//! memory limit) or on a Ballista cluster, with the same settings and the crate's functions.

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::config::ConfigOptions;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::{FunctionRegistry, SessionStateBuilder};
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;

use crate::engine::ballista::{self, Cluster};
use crate::engine::cluster_access::{ClusterAccess, TlsFiles};
use crate::engine::on_demand::{DealOnDemand, OnDemand};
use crate::engine::row_slices::{CutEveryScan, CutScans};
use crate::engine::work_folder::WorkFolder;
use crate::error::{QueryContext, Result};
use crate::udf;

/// How a job uses the machine and the terminal, and where it runs.
#[derive(Debug, Clone, Default)]
pub struct Console {
    /// Partitions run in parallel (`--threads`); the number of cores when `None`.
    pub threads: Option<usize>,
    /// No progress lines on standard error (`--quiet`); errors are still reported.
    pub quiet: bool,
    /// Bytes DataFusion's operators may hold (`--memory-limit`); sorts, aggregates and joins
    /// spill to a folder in the temporary folder (`TMPDIR`) beyond it, removed when the job
    /// ends. Unlimited when `None`.
    pub memory_limit: Option<usize>,
    /// Run the stages on a Ballista cluster (`--cluster`) instead of in this process.
    pub cluster: Option<Cluster>,
    /// The cluster's TLS files (`--tls-ca`, `--tls-cert`, `--tls-key`), for `dfs://`.
    pub cluster_tls: TlsFiles,
    /// Where the cluster's token is when not in `NEARDUP_CLUSTER_TOKEN` (`--token-file`).
    pub token_file: Option<PathBuf>,
}

/// The session every stage runs in: all cores, input types kept, zstd Parquet output.
pub fn session_context() -> Result<SessionContext> {
    session_context_with(&Console::default())
}

/// The session a job's stages run in: on its cluster, or in this process.
pub async fn job_session(console: &Console) -> Result<SessionContext> {
    match &console.cluster {
        Some(cluster) => {
            let access = ClusterAccess::load(
                console.token_file.as_deref(),
                &console.cluster_tls,
                cluster.uses_tls(),
            )?;
            let threads_given = console.threads.is_some();
            ballista::cluster_context(cluster, job_config(console), &access, threads_given).await
        }
        None => session_context_from(job_config(console), console),
    }
}

/// A job's settings: the common ones, and its tables written without dictionary pages. Most
/// of their columns are fingerprints, row numbers and ids, nearly all distinct, where the
/// writer filled a dictionary until it gave up on it: at 4M fingerprints that was a fifth of
/// the groups stage's time, and the files came out larger (docs/BENCHMARKS.md). The
/// deduplicated corpus keeps them (sql/06_dedup.sql): its columns are the user's.
fn job_config(console: &Console) -> SessionConfig {
    let mut config = session_config(console);
    config.options_mut().execution.parquet.dictionary_enabled = Some(false);
    config
}

/// Settings every session of a job has, local or on a cluster: partitions (all cores when
/// `None`), input types kept, zstd Parquet output.
fn session_config(console: &Console) -> SessionConfig {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let threads = console.threads.unwrap_or(cores).max(1);
    let mut config = SessionConfig::new().with_target_partitions(threads);
    let options = config.options_mut();
    // One scan per file: where rows are numbered by their order in the scan (JSON Lines, CSV,
    // a cluster) that keeps `input_order` in file order, and the planner still spreads the rows
    // over partitions before the UDF. Where the reader numbers the rows, Parquet scans are
    // split (`crate::job::source::register_corpus`; the signature stage splits its own).
    options.optimizer.repartition_file_scans = false;
    // Keep the input's string types in every output (`dedup` keeps the input columns as they are).
    options.execution.parquet.schema_force_view_types = false;
    options.execution.parquet.compression = Some("zstd(3)".into());
    config
}

/// The most a hash join's input may hold to be held in one table (`joins_probe_one_table`):
/// DataFusion puts that input in one batch, whose string columns hold at most 2 GiB, where a
/// partitioned join holds a share per core.
pub const ONE_TABLE_BYTES: usize = 1 << 30;

/// Lets each hash join of the statements planned next hold its smaller input, where the planner
/// knows its size and it is under `ONE_TABLE_BYTES`, in one table that every core probes,
/// instead of first hashing both inputs to the core holding each key's share: where the other
/// input is large (the corpus with its texts) that moved every row once more. The table is the
/// same size either way. Only in this process: on a cluster each task would hold all of it.
/// The planner's sizes are estimates: a caller that knows the input's real size checks it too.
pub fn joins_probe_one_table(options: &mut ConfigOptions) {
    options.optimizer.hash_join_single_partition_threshold = ONE_TABLE_BYTES;
    // Where only rows are known: 64 bytes a row.
    options.optimizer.hash_join_single_partition_threshold_rows = ONE_TABLE_BYTES / 64;
}

/// A session in this process with the console's partitions and memory limit.
pub fn session_context_with(console: &Console) -> Result<SessionContext> {
    session_context_from(session_config(console), console)
}

/// A session in this process with these settings and the console's memory limit.
fn session_context_from(mut config: SessionConfig, console: &Console) -> Result<SessionContext> {
    let options = config.options_mut();
    // Every URL a statement names resolves through the process's store registry.
    let mut runtime =
        RuntimeEnvBuilder::new().with_object_store_registry(crate::storage::registry());
    let mut spill_folder = None;
    if let Some(limit) = console.memory_limit {
        // A sort keeps a small reserve for its merge so that spilling itself fits under the
        // limit.
        options.execution.sort_spill_reservation_bytes = (limit / 16).min(8 << 20);
        runtime = runtime.with_memory_pool(Arc::new(FairSpillPool::new(limit)));
        // Spill files in a folder the session holds, which Ctrl-C removes too.
        let folder = WorkFolder::create("spill")?;
        runtime = runtime.with_temp_file_path(folder.path());
        spill_folder = Some(Arc::new(folder));
    }
    let runtime = runtime
        .build_arc()
        .context(|| "setting up the session".into())?;
    // The signature stage deals batches out on demand (`OnDemand`), and the deduplicated
    // corpus reads its scans in row ranges (`CutEveryScan`), once DataFusion's rules have
    // placed their repartitions.
    options.extensions.insert(OnDemand::default());
    options.extensions.insert(CutEveryScan::default());
    if let Some(folder) = spill_folder {
        config = config.with_extension(folder);
    }
    let mut rules = PhysicalOptimizer::new().rules;
    rules.push(Arc::new(DealOnDemand::new(Arc::clone(&runtime))));
    rules.push(Arc::new(CutScans::new(Arc::clone(&runtime))));
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(runtime)
        .with_default_features()
        .with_physical_optimizer_rules(rules)
        .build();
    let mut ctx = SessionContext::new_with_state(state);
    udf::register_all(&mut ctx as &mut dyn FunctionRegistry)
        .context(|| "registering SQL functions".into())?;
    Ok(ctx)
}

/// Reads every file completely, the way the stages read it, and returns the first that fails
/// with its error. Runs only after a failure, so its cost is paid only then.
pub async fn find_unreadable_file(
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
        match super::caught_panics::catch_async(read).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Some((file.clone(), e.to_string())),
            Err(stopped) => {
                return Some((file.clone(), super::caught_panics::damaged_file(&stopped)));
            }
        }
    }
    None
}
