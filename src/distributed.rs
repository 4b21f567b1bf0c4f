//! The job on an Apache DataFusion Ballista cluster: the client session `run --cluster` plans
//! its stages in, and the two server roles, `neardup scheduler` and `neardup executor`.
//!
//! Every side knows neardup's SQL functions: the client plans with them, the scheduler decodes
//! the client's logical plans and the executors decode their tasks by function name, so each
//! registers them. Their options (`--features`, the band plan, k) are SQL literals inside the
//! plan, so no custom codec is needed.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ballista::prelude::{SessionConfigExt, SessionContextExt};
use ballista_core::config::{BALLISTA_ADAPTIVE_PLANNER_ENABLED, TaskSchedulingPolicy};
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use datafusion::execution::{FunctionRegistry, SessionStateBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

use crate::error::{Error, QueryContext, Result};
use crate::udf;

/// The port `df://host` means when it names none (Ballista's default).
pub const DEFAULT_SCHEDULER_PORT: u16 = 50050;

/// Where `--cluster` runs a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cluster {
    /// A scheduler and an executor inside this process (`--cluster standalone`): the job goes
    /// through Ballista's planning, serialisation and shuffles without any server to start.
    Standalone,
    /// A running `neardup scheduler` (`--cluster df://host:port`).
    Remote { host: String, port: u16 },
}

impl Cluster {
    /// Reads `standalone` or `df://host[:port]`.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let text = text.trim();
        if text == "standalone" {
            return Ok(Cluster::Standalone);
        }
        let Some(address) = text.strip_prefix("df://") else {
            return Err(format!(
                "'{text}' is not a scheduler address; write df://host:port (e.g. \
                 df://localhost:{DEFAULT_SCHEDULER_PORT}) or standalone"
            ));
        };
        let address = address.trim_end_matches('/');
        let (host, port) = match address.rsplit_once(':') {
            Some((host, port)) => {
                let port = port
                    .parse::<u16>()
                    .map_err(|_| format!("'{port}' in '{text}' is not a port number"))?;
                (host, port)
            }
            None => (address, DEFAULT_SCHEDULER_PORT),
        };
        if host.is_empty() || host.contains('/') {
            return Err(format!("'{text}' names no host; write df://host:port"));
        }
        Ok(Cluster::Remote {
            host: host.to_string(),
            port,
        })
    }
}

impl fmt::Display for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cluster::Standalone => write!(f, "standalone"),
            Cluster::Remote { host, port } => write!(f, "df://{host}:{port}"),
        }
    }
}

/// A session whose queries run on the cluster, with `config`'s settings (they travel with
/// each job to the scheduler and the executors).
pub async fn cluster_context(cluster: &Cluster, config: SessionConfig) -> Result<SessionContext> {
    let what = || format!("connecting to the Ballista cluster {cluster}");
    // Ballista's own settings on top of the job's (sort-merge joins, no dynamic filters, no
    // round-robin repartitioning). Done here rather than left to Ballista because the standalone
    // scheduler plans with this very state: without them, a dynamic join filter it cannot carry
    // across stages makes it fail a task status update and the job never finishes.
    let mut config = config.upgrade_for_ballista();
    // Ballista 55's adaptive planner (on by default, marked experimental upstream) gave the
    // pairs stage's UNION of two joins each of its rows three times on a real cluster; its
    // static planner gives the local run's rows, so jobs use that.
    config
        .options_mut()
        .set(BALLISTA_ADAPTIVE_PLANNER_ENABLED, "false")
        .context(|| "configuring the Ballista session".into())?;
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .build();
    udf::register_all(&mut state as &mut dyn FunctionRegistry)
        .context(|| "registering SQL functions".into())?;
    let mut ctx = match cluster {
        // The in-process scheduler and executor take their functions from this state.
        Cluster::Standalone => SessionContext::standalone_with_state(state)
            .await
            .context(what)?,
        Cluster::Remote { host, port } => {
            check_reachable(host, *port).await?;
            SessionContext::remote_with_state(&cluster.to_string(), state)
                .await
                .context(what)?
        }
    };
    // Ballista's client session replaces the function list with its own: register again.
    udf::register_all(&mut ctx as &mut dyn FunctionRegistry)
        .context(|| "registering SQL functions".into())?;
    Ok(ctx)
}

/// Ballista connects lazily, so an unreachable scheduler would surface as a failed first
/// stage; say it plainly before any work instead.
async fn check_reachable(host: &str, port: u16) -> Result<()> {
    let connect = tokio::net::TcpStream::connect((host, port));
    match tokio::time::timeout(Duration::from_secs(10), connect).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Error::Input(format!(
            "cannot reach the Ballista scheduler at {host}:{port}: {e} (is `neardup scheduler` \
             running there?)"
        ))),
        Err(_) => Err(Error::Input(format!(
            "cannot reach the Ballista scheduler at {host}:{port}: no answer in 10 s"
        ))),
    }
}

/// How tasks reach executors: they ask the scheduler for work (Ballista's default is that the
/// scheduler pushes tasks, dialling each executor and being dialled back at the name it
/// advertises, which breaks across machines unless both names are set right). Both roles must
/// agree, and both are neardup's.
const SCHEDULING: TaskSchedulingPolicy = TaskSchedulingPolicy::PullStaged;

/// `neardup scheduler`: accepts jobs from clients and hands their tasks to executors; runs
/// until the process is stopped. Binding port 0 picks a free port; the line on standard error
/// names the port bound either way.
pub async fn run_scheduler(bind: &str) -> Result<()> {
    let cannot_listen = |e: std::io::Error| Error::Input(format!("cannot listen on {bind}: {e}"));
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(cannot_listen)?;
    let address = listener.local_addr().map_err(cannot_listen)?;
    let config = SchedulerConfig {
        bind_host: address.ip().to_string(),
        bind_port: address.port(),
        scheduling_policy: SCHEDULING,
        override_session_builder: Some(Arc::new(|config| {
            let mut state = ballista_core::utils::default_session_builder(config)?;
            udf::register_all(&mut state as &mut dyn FunctionRegistry)?;
            Ok(state)
        })),
        ..SchedulerConfig::default()
    };
    let failed = |e: ballista_core::error::BallistaError| {
        Error::Input(format!("the Ballista scheduler failed: {e}"))
    };
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(failed)?;
    let scheduler =
        create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::new(config))
            .await
            .map_err(failed)?;
    eprintln!("neardup: scheduler listening on {address}");
    start_grpc_service_with_listener(listener, scheduler)
        .await
        .map_err(failed)
}

/// What `neardup executor` is told.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// The scheduler's `host:port` (`df://` in front is accepted, as `--cluster` writes it).
    pub scheduler: String,
    /// Address of the executor's Arrow Flight service (shuffle data and results).
    pub bind: std::net::SocketAddr,
    /// The host other machines reach this executor at, when not `bind_host`.
    pub external_host: Option<String>,
    /// Tasks run at once; the number of cores when `None`.
    pub concurrent_tasks: Option<usize>,
    /// Folder for shuffle files; a temporary folder when `None`.
    pub work_dir: Option<String>,
    /// Bytes the tasks may hold together; Ballista's share of the machine when `None`.
    pub memory_limit: Option<usize>,
}

/// `neardup executor`: registers with the scheduler and runs the tasks it is given until the
/// process is stopped.
pub async fn run_executor(options: &ExecutorOptions) -> Result<()> {
    // The same `host[:port]` reading as `--cluster`, which writes it behind `df://`.
    let scheduler = options.scheduler.trim();
    let address = format!(
        "df://{}",
        scheduler.strip_prefix("df://").unwrap_or(scheduler)
    );
    let Ok(Cluster::Remote {
        host: scheduler_host,
        port: scheduler_port,
    }) = Cluster::parse(&address)
    else {
        return Err(Error::Usage(format!(
            "--scheduler {}: write host:port, e.g. localhost:{DEFAULT_SCHEDULER_PORT}",
            options.scheduler
        )));
    };
    let defaults = ExecutorProcessConfig::default();
    let config = ExecutorProcessConfig {
        bind_host: options.bind.ip().to_string(),
        external_host: options.external_host.clone(),
        port: options.bind.port(),
        task_scheduling_policy: SCHEDULING,
        scheduler_host,
        scheduler_port,
        vcores: options.concurrent_tasks.unwrap_or(defaults.vcores),
        work_dir: options.work_dir.clone(),
        memory_pool_size: options.memory_limit.map(|bytes| bytes as u64),
        override_function_registry: Some(Arc::new(function_registry())),
        ..defaults
    };
    eprintln!(
        "neardup: executor on {} working for the scheduler at {}",
        options.bind, options.scheduler
    );
    start_executor_process(Arc::new(config))
        .await
        .map_err(|e| Error::Input(format!("the Ballista executor failed: {e}")))
}

/// DataFusion's functions, Ballista's and neardup's, for decoding tasks by function name.
fn function_registry() -> BallistaFunctionRegistry {
    let mut registry = BallistaFunctionRegistry::default();
    for function in udf::functions() {
        registry
            .scalar_functions
            .insert(function.name().to_string(), function);
    }
    let band_pairs = udf::band_pairs_udaf();
    registry
        .aggregate_functions
        .insert(band_pairs.name().to_string(), band_pairs);
    registry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_addresses() {
        assert_eq!(Cluster::parse("standalone"), Ok(Cluster::Standalone));
        let remote = |host: &str, port| Cluster::Remote {
            host: host.into(),
            port,
        };
        assert_eq!(Cluster::parse("df://host:1234"), Ok(remote("host", 1234)));
        assert_eq!(
            Cluster::parse("df://10.0.0.1/"),
            Ok(remote("10.0.0.1", 50050))
        );
        assert_eq!(remote("h", 7).to_string(), "df://h:7");
        for bad in [
            "host:50050",
            "df://",
            "df://:80",
            "df://h:port",
            "df://h:70000",
        ] {
            assert!(Cluster::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn executors_know_neardups_functions_and_datafusions() {
        let registry = function_registry();
        for name in [
            "simhash",
            "simhash_details",
            "clean_text",
            "hamming",
            "bucket",
            "band_key",
            "shared_band",
            "lower",
            "abs",
        ] {
            assert!(registry.scalar_functions.contains_key(name), "{name}");
        }
        for name in ["band_pairs", "min", "count"] {
            assert!(registry.aggregate_functions.contains_key(name), "{name}");
        }
    }
}
