//! The job on an Apache DataFusion Ballista cluster: the client session `run --cluster` plans
//! its stages in, and the two server roles, `neardup scheduler` and `neardup executor`.
//!
//! Every side knows neardup's SQL functions: the client plans with them, the scheduler decodes
//! the client's logical plans and the executors decode their tasks by function name, so each
//! registers them. Their options (`--features`, the band plan, k) are SQL literals inside the
//! plan, so no custom codec is needed.
//!
//! Failures are bounded (docs/CLUSTER.md, "When something fails"): the scheduler counts an
//! executor dead once it has not polled for `neardup scheduler --executor-timeout` seconds and
//! runs its tasks again on the others (Ballista's own recovery, with neardup's timeouts); a
//! client gives up when the scheduler has had no live executor for `--executor-timeout`
//! seconds, which Ballista's client never does; an executor exits when its scheduler has not
//! answered for `--scheduler-timeout` seconds. Client and executor learn whether something
//! answering at the scheduler's address is a Ballista scheduler, and whether it has a live
//! executor, from Ballista's readiness check `GET /readyz`, served on the scheduler's gRPC port.

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ballista::prelude::{SessionConfigExt, SessionContextExt};
use ballista_core::config::{BALLISTA_ADAPTIVE_PLANNER_ENABLED, TaskSchedulingPolicy};
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_executor::health::ExecutorHealth;
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

/// How long a job on `--cluster df://...` waits while the scheduler has no live executor
/// (none registered yet, or all gone) before it fails (`run`/`match --executor-timeout`).
pub const DEFAULT_EXECUTOR_WAIT: Duration = Duration::from_secs(60);

/// `neardup scheduler --executor-timeout`: seconds an executor may go without polling the
/// scheduler before it counts as dead and its tasks run again elsewhere (Ballista's default,
/// 180 s, is sized for push scheduling's 60-second heartbeats).
pub const DEFAULT_EXECUTOR_TIMEOUT_SECONDS: u64 = 30;

/// The least `neardup scheduler --executor-timeout`: an executor whose task slots are all busy
/// still polls every 5 s (Ballista's `HEARTBEAT_POLL_INTERVAL`), so a shorter timeout could
/// count a busy executor dead.
pub const MIN_EXECUTOR_TIMEOUT_SECONDS: u64 = 10;

/// How long `neardup executor` waits for its scheduler to answer, at start and whenever it
/// stops answering, before it exits with an error (`--scheduler-timeout`).
pub const DEFAULT_SCHEDULER_WAIT: Duration = Duration::from_secs(60);

/// Where `--cluster` runs a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cluster {
    /// A scheduler and an executor inside this process (`--cluster standalone`): the job goes
    /// through Ballista's planning, serialisation and shuffles without any server to start.
    Standalone,
    /// A running `neardup scheduler` (`--cluster df://host:port`). The job fails once the
    /// scheduler has had no live executor for `executor_wait` (`--executor-timeout`).
    Remote {
        host: String,
        port: u16,
        executor_wait: Duration,
    },
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
            executor_wait: DEFAULT_EXECUTOR_WAIT,
        })
    }

    /// The same cluster with another wait for a live executor (`--executor-timeout`); a
    /// standalone cluster has its executor inside the process and no wait.
    pub fn with_executor_wait(self, wait: Duration) -> Self {
        match self {
            Cluster::Remote { host, port, .. } => Cluster::Remote {
                host,
                port,
                executor_wait: wait,
            },
            standalone => standalone,
        }
    }
}

impl fmt::Display for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cluster::Standalone => write!(f, "standalone"),
            Cluster::Remote { host, port, .. } => write!(f, "df://{host}:{port}"),
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
        .with_runtime_env(runtime_with_stores(None).context(what)?)
        .with_default_features()
        .build();
    udf::register_all(&mut state as &mut dyn FunctionRegistry)
        .context(|| "registering SQL functions".into())?;
    // The scheduler's readiness when the job starts (remote clusters only).
    let mut readiness = None;
    let mut ctx = match cluster {
        // The in-process scheduler and executor take their functions from this state.
        Cluster::Standalone => SessionContext::standalone_with_state(state)
            .await
            .context(what)?,
        Cluster::Remote { host, port, .. } => {
            readiness = Some(check_scheduler(host, *port).await?);
            SessionContext::remote_with_state(&cluster.to_string(), state)
                .await
                .context(what)?
        }
    };
    // Ballista's client session replaces the function list with its own: register again.
    udf::register_all(&mut ctx as &mut dyn FunctionRegistry)
        .context(|| "registering SQL functions".into())?;
    if let (
        Cluster::Remote {
            host,
            port,
            executor_wait,
        },
        Some(readiness),
    ) = (cluster, readiness)
    {
        watch_executors(
            Arc::downgrade(&ctx.state_ref()),
            host.clone(),
            *port,
            *executor_wait,
            readiness,
        );
    }
    Ok(ctx)
}

/// Ballista connects lazily, so an unreachable scheduler would surface as a failed first
/// stage, and an address where something else listens (an HTTP server, an executor's Flight
/// port) as an h2 protocol error; say either plainly before any work instead.
async fn check_scheduler(host: &str, port: u16) -> Result<Readiness> {
    match probe_scheduler(host, port, PROBE_TIMEOUT).await {
        Ok(readiness) => Ok(readiness),
        Err(ProbeError::Unreachable(e)) => Err(Error::Input(format!(
            "cannot reach the Ballista scheduler at {host}:{port}: {e} (is `neardup scheduler` \
             running there?)"
        ))),
        Err(ProbeError::NotScheduler(why)) => Err(Error::Input(format!(
            "df://{host}:{port} is not a Ballista scheduler: {why}; it does not speak \
             Ballista's gRPC. Is that the scheduler's port? (`neardup scheduler` prints the \
             address it listens on)"
        ))),
    }
}

/// What the scheduler's readiness check says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Readiness {
    /// At least one executor has polled the scheduler within its `--executor-timeout`.
    Executors,
    /// No live executor: none registered yet, or all gone.
    NoExecutor,
}

/// Why the scheduler's readiness could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ProbeError {
    /// Nothing answers at the address (refused, or no answer in time): not started, or gone.
    Unreachable(String),
    /// Something answers there, but not as a Ballista scheduler of this version.
    NotScheduler(String),
}

/// The longest one look at the scheduler may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a running job asks the scheduler whether an executor is alive.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// Asks the scheduler at `host:port` whether it has a live executor: `GET /readyz` over
/// HTTP/1.1, which Ballista's scheduler serves on its gRPC port (HTTP/1 and HTTP/2 share it)
/// with its name in the `Server` header, 200 when at least one executor is alive, 503 when
/// none is. A plain request, so a server that is not a scheduler is recognised whatever it
/// speaks. `patience` bounds the connection and the answer each.
async fn probe_scheduler(
    host: &str,
    port: u16,
    patience: Duration,
) -> std::result::Result<Readiness, ProbeError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let connect = tokio::net::TcpStream::connect((host, port));
    let mut stream = match tokio::time::timeout(patience, connect).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(ProbeError::Unreachable(e.to_string())),
        Err(_) => {
            return Err(ProbeError::Unreachable(format!(
                "no answer in {} s",
                patience.as_secs_f64()
            )));
        }
    };
    let exchange = async {
        let request =
            format!("GET /readyz HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        while !http_answer_complete(&answer) && answer.len() < 64 * 1024 {
            let read = stream.read(&mut buffer).await?;
            if read == 0 {
                break;
            }
            answer.extend_from_slice(&buffer[..read]);
        }
        Ok::<_, std::io::Error>(answer)
    };
    match tokio::time::timeout(patience, exchange).await {
        Ok(Ok(answer)) => read_readiness(&answer).map_err(ProbeError::NotScheduler),
        // A server that speaks only HTTP/2 (gRPC) drops a connection that opens with HTTP/1.1.
        Ok(Err(e)) => Err(ProbeError::NotScheduler(format!(
            "it dropped the connection when asked over HTTP ({e})"
        ))),
        Err(_) => Err(ProbeError::NotScheduler(format!(
            "it accepted the connection but gave no HTTP answer in {} s",
            patience.as_secs_f64()
        ))),
    }
}

/// Whether `answer` holds a whole HTTP response: its head, and as much body as its
/// Content-Length says (without one, the answer ends when the server closes).
fn http_answer_complete(answer: &[u8]) -> bool {
    let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&answer[..end]);
    let length = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        if name.trim().eq_ignore_ascii_case("content-length") {
            value.trim().parse::<usize>().ok()
        } else {
            None
        }
    });
    length.is_some_and(|length| answer.len() >= end + 4 + length)
}

/// Reads the scheduler's answer to `GET /readyz`, or says what answered instead.
fn read_readiness(answer: &[u8]) -> std::result::Result<Readiness, String> {
    if answer.is_empty() {
        return Err("it closed the connection without answering an HTTP request".into());
    }
    let text = String::from_utf8_lossy(answer);
    if !text.starts_with("HTTP/1.") {
        return Err(
            "it answered an HTTP request in another protocol (an HTTP/2-only service \
                    such as an executor's Flight port?)"
                .into(),
        );
    }
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().trim().to_string();
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok());
    let server = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("server"))
        .map(|(_, value)| value.trim().to_string());
    let Some(version) = server
        .as_deref()
        .and_then(|server| server.strip_prefix("ballista/"))
    else {
        return Err(format!(
            "an HTTP server answers there ('{status}', Server: {})",
            server.as_deref().unwrap_or("not named")
        ));
    };
    let major = |version: &str| version.split('.').next().unwrap_or_default().to_string();
    if major(version) != major(ballista_core::BALLISTA_VERSION) {
        return Err(format!(
            "it is a Ballista {version} scheduler and this neardup speaks Ballista {}; run the \
             same neardup binary everywhere",
            ballista_core::BALLISTA_VERSION
        ));
    }
    match code {
        Some(200) => Ok(Readiness::Executors),
        Some(503) => Ok(Readiness::NoExecutor),
        _ => Err(format!(
            "a Ballista {version} server answered its readiness check with '{status}', as a \
             scheduler does not"
        )),
    }
}

/// While the session behind `session` lives, asks the scheduler every half second whether an
/// executor is alive. When none is (or the scheduler does not answer) it says so once, and
/// after `wait` without one it ends the process with exit code 1, removing the output's
/// staging folder as Ctrl-C does. Ballista's client waits for executors forever, and its
/// scheduler fails a job only once it has lost its last executor (after
/// `no_executors_grace_period_seconds`), never one that none has ever run.
fn watch_executors<T: Send + Sync + 'static>(
    session: Weak<T>,
    host: String,
    port: u16,
    wait: Duration,
    first: Readiness,
) {
    tokio::spawn(async move {
        let mut reading: std::result::Result<Readiness, ProbeError> = Ok(first);
        let mut missing_since: Option<Instant> = None;
        loop {
            let problem = match &reading {
                Ok(Readiness::Executors) => None,
                Ok(Readiness::NoExecutor) => Some(format!(
                    "no executor is alive at the scheduler at {host}:{port}: it has had none for \
                     {} s (start one with `neardup executor --scheduler {host}:{port}`; \
                     --executor-timeout sets how long a job waits)",
                    wait.as_secs_f64()
                )),
                Err(ProbeError::Unreachable(e) | ProbeError::NotScheduler(e)) => Some(format!(
                    "lost the scheduler at {host}:{port}: it has not answered for {} s ({e})",
                    wait.as_secs_f64()
                )),
            };
            match problem {
                None => {
                    if missing_since.take().is_some() {
                        eprintln!(
                            "neardup: an executor is alive at the scheduler at {host}:{port}; \
                             the job goes on"
                        );
                    }
                }
                Some(problem) => {
                    let since = *missing_since.get_or_insert_with(|| {
                        if matches!(reading, Ok(Readiness::NoExecutor)) {
                            eprintln!(
                                "neardup: waiting for an executor to register with the \
                                 scheduler at {host}:{port} (giving up after {} s; \
                                 --executor-timeout)",
                                wait.as_secs_f64()
                            );
                        } else {
                            eprintln!(
                                "neardup: the scheduler at {host}:{port} does not answer; \
                                 waiting up to {} s for it",
                                wait.as_secs_f64()
                            );
                        }
                        Instant::now()
                    });
                    if since.elapsed() >= wait {
                        give_up(&problem);
                    }
                }
            }
            tokio::time::sleep(WATCH_INTERVAL).await;
            if session.strong_count() == 0 {
                return;
            }
            reading = probe_scheduler(&host, port, PROBE_TIMEOUT.min(wait)).await;
        }
    });
}

/// Ends a cluster job that cannot go on: the message, the output's staging folder removed (as
/// on Ctrl-C), exit code 1. The job's stages run under DataFusion's futures, which have no
/// way to be failed from outside. The Ballista job left on the scheduler runs if an executor
/// comes back; otherwise Ballista fails it twice the scheduler's `--executor-timeout` after it
/// lost its last executor (one that no executor ever ran stays queued there).
fn give_up(message: &str) -> ! {
    eprintln!("neardup: error: {message}");
    if crate::engine::staging::remove_live_staging() {
        eprintln!("neardup: nothing was written (an earlier output is untouched)");
    }
    std::process::exit(1);
}

/// How tasks reach executors: they ask the scheduler for work (Ballista's default is that the
/// scheduler pushes tasks, dialling each executor and being dialled back at the name it
/// advertises, which breaks across machines unless both names are set right). Both roles must
/// agree, and both are neardup's.
const SCHEDULING: TaskSchedulingPolicy = TaskSchedulingPolicy::PullStaged;

/// `neardup scheduler`: accepts jobs from clients and hands their tasks to executors; runs
/// until the process is stopped. Binding port 0 picks a free port; the line on standard error
/// names the port bound either way.
///
/// An executor that has not polled for `executor_timeout_seconds` counts as dead: the scheduler
/// drops it (checking every fifth of that, at most every 15 s) and Ballista runs its tasks
/// again on the other executors, with the stages whose shuffle files it held. A job that lost
/// its last executor is failed by Ballista if none comes back within twice the timeout.
pub async fn run_scheduler(bind: &str, executor_timeout_seconds: u64) -> Result<()> {
    let executor_timeout_seconds = executor_timeout_seconds.max(MIN_EXECUTOR_TIMEOUT_SECONDS);
    let cannot_listen = |source| Error::Listen {
        address: bind.to_string(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(cannot_listen)?;
    let address = listener.local_addr().map_err(cannot_listen)?;
    let config = SchedulerConfig {
        bind_host: address.ip().to_string(),
        bind_port: address.port(),
        scheduling_policy: SCHEDULING,
        executor_timeout_seconds,
        expire_dead_executor_interval_seconds: (executor_timeout_seconds / 5).clamp(1, 15),
        no_executors_grace_period_seconds: 2 * executor_timeout_seconds,
        override_session_builder: Some(Arc::new(|config| {
            let state = ballista_core::utils::default_session_builder(config)?;
            let mut state = SessionStateBuilder::new_from_existing(state)
                .with_runtime_env(runtime_with_stores(None)?)
                .build();
            udf::register_all(&mut state as &mut dyn FunctionRegistry)?;
            Ok(state)
        })),
        ..SchedulerConfig::default()
    };
    let failed = |e| Error::cluster("the Ballista scheduler failed", e);
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
    /// How long to wait for the scheduler to answer, at start and whenever it stops answering
    /// (`--scheduler-timeout`), before exiting with an error naming its address.
    pub scheduler_wait: Duration,
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
        ..
    }) = Cluster::parse(&address)
    else {
        return Err(Error::Usage(format!(
            "--scheduler {}: write host:port, e.g. localhost:{DEFAULT_SCHEDULER_PORT}",
            options.scheduler
        )));
    };
    // Ballista connects once and then polls forever, whatever answers: find the scheduler
    // first, within a bounded wait, and say what is wrong with the address if it is not one.
    wait_for_scheduler(&scheduler_host, scheduler_port, options.scheduler_wait).await?;
    let named = format!("{scheduler_host}:{scheduler_port}");
    // Flipped by Ballista's poll loop on every poll: whether the scheduler answered the last.
    let health = ExecutorHealth::new();
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
        override_runtime_producer: Some({
            let work_dir = options.work_dir.clone();
            Arc::new(move |_| runtime_with_stores(work_dir.clone()))
        }),
        health: health.clone(),
        ..defaults
    };
    eprintln!(
        "neardup: executor on {} working for the scheduler at {}",
        options.bind, options.scheduler
    );
    let wait = options.scheduler_wait;
    tokio::select! {
        outcome = start_executor_process(Arc::new(config)) => outcome.map_err(|e| {
            let context = format!("the Ballista executor working for the scheduler at {named} failed");
            Error::cluster(context, e)
        }),
        () = scheduler_silent(&health, wait) => Err(Error::Input(format!(
            "the scheduler at {named} has not answered this executor's polls for {} s; stopping \
             (is `neardup scheduler` still running there, on that port? --scheduler-timeout \
             sets the wait)",
            wait.as_secs_f64()
        ))),
    }
}

/// A runtime whose URLs resolve through the process's store registry, so the client, the
/// scheduler and every executor read and write `s3://...` and the rest the same way; with the
/// executor's work folder for its spill files.
fn runtime_with_stores(
    work_dir: Option<String>,
) -> datafusion::error::Result<Arc<datafusion::execution::runtime_env::RuntimeEnv>> {
    let mut runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
        .with_object_store_registry(crate::storage::registry());
    if let Some(dir) = work_dir {
        runtime = runtime.with_temp_file_path(dir);
    }
    runtime.build_arc()
}

/// Waits until a Ballista scheduler answers at `host:port`: retries while nothing does (it may
/// be starting), fails at once if something else answers, and fails after `wait`.
async fn wait_for_scheduler(host: &str, port: u16, wait: Duration) -> Result<()> {
    let started = Instant::now();
    let mut said = false;
    loop {
        let patience = PROBE_TIMEOUT.min(
            wait.saturating_sub(started.elapsed())
                .max(Duration::from_secs(1)),
        );
        match probe_scheduler(host, port, patience).await {
            Ok(_) => return Ok(()),
            Err(ProbeError::NotScheduler(why)) => {
                return Err(Error::Input(format!(
                    "--scheduler {host}:{port} is not a Ballista scheduler: {why}. Is that the \
                     scheduler's port? (`neardup scheduler` prints the address it listens on)"
                )));
            }
            Err(ProbeError::Unreachable(e)) => {
                if started.elapsed() >= wait {
                    return Err(Error::Input(format!(
                        "no Ballista scheduler answered at {host}:{port} in {} s: {e} (is \
                         `neardup scheduler` running there, on that port? --scheduler-timeout \
                         sets the wait)",
                        wait.as_secs_f64()
                    )));
                }
                if !said {
                    eprintln!(
                        "neardup: waiting for the scheduler at {host}:{port} ({e}); giving up \
                         after {} s",
                        wait.as_secs_f64()
                    );
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Returns once the executor's polls have gone unanswered for `wait` (Ballista's poll loop
/// retries failed polls every 50 ms, forever).
async fn scheduler_silent(health: &ExecutorHealth, wait: Duration) {
    let mut last_answer = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if health.is_ready() {
            last_answer = Instant::now();
        } else if last_answer.elapsed() >= wait {
            return;
        }
    }
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
            executor_wait: DEFAULT_EXECUTOR_WAIT,
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
    fn the_executor_wait_is_the_remote_clusters_only() {
        let wait = Duration::from_secs(5);
        let remote = Cluster::parse("df://h:1").unwrap().with_executor_wait(wait);
        assert!(matches!(remote, Cluster::Remote { executor_wait, .. } if executor_wait == wait));
        assert_eq!(remote.to_string(), "df://h:1");
        assert_eq!(
            Cluster::Standalone.with_executor_wait(wait),
            Cluster::Standalone
        );
    }

    /// What Ballista's scheduler answers to `GET /readyz` (`api/health.rs`, with the `Server`
    /// header of `scheduler_process::with_version_headers`), and what other servers do.
    #[test]
    fn readiness_answers_are_read_and_other_servers_named() {
        let scheduler = |status: &str, body: &str| {
            format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n\
                 content-length: {}\r\nserver: ballista/{}\r\n\
                 x-powered-by: datafusion/55.2.0\r\n\r\n{body}",
                body.len(),
                ballista_core::BALLISTA_VERSION
            )
        };
        let ready = scheduler("200 OK", "ready: 2 executors registered\n");
        assert!(http_answer_complete(ready.as_bytes()));
        assert!(!http_answer_complete(&ready.as_bytes()[..ready.len() - 1]));
        assert_eq!(read_readiness(ready.as_bytes()), Ok(Readiness::Executors));
        let none = scheduler(
            "503 Service Unavailable",
            "not ready: 0/1 executors registered\n",
        );
        assert_eq!(read_readiness(none.as_bytes()), Ok(Readiness::NoExecutor));

        let http = "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 2\r\n\r\nhi";
        let why = read_readiness(http.as_bytes()).unwrap_err();
        assert!(why.contains("an HTTP server answers there"), "{why}");
        assert!(why.contains("nginx"), "{why}");
        for other in [&b""[..], &b"\x00\x00\x12\x04\x00\x00\x00\x00\x00"[..]] {
            assert!(read_readiness(other).is_err());
        }
        let old = ready.replace(
            &format!("ballista/{}", ballista_core::BALLISTA_VERSION),
            "ballista/0.12.0",
        );
        let why = read_readiness(old.as_bytes()).unwrap_err();
        assert!(why.contains("0.12.0"), "{why}");
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
