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
use ballista_core::extension::SessionStateExt;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_executor::health::ExecutorHealth;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::create_scheduler;
use datafusion::execution::{FunctionRegistry, SessionStateBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

use crate::engine::cluster_access::{ClusterAccess, check_bind};
use crate::engine::standalone;
use crate::engine::task_cancel::{CancellableEngine, CancelledJobs, RunningTasks, parse_listing};
use crate::engine::work_folder::WorkFolder;
use crate::error::{Error, QueryContext, Result, error_chain};
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
    /// A running `neardup scheduler` (`--cluster df://host:port`, or `dfs://` over TLS). The
    /// job fails once the scheduler has had no live executor for `executor_wait`
    /// (`--executor-timeout`).
    Remote {
        host: String,
        port: u16,
        tls: bool,
        executor_wait: Duration,
    },
}

impl Cluster {
    /// Reads `standalone`, `df://host[:port]` or `dfs://host[:port]`.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let text = text.trim();
        if text == "standalone" {
            return Ok(Cluster::Standalone);
        }
        // Never echoed: what comes before an '@' may be a password.
        if text.contains('@') {
            return Err(format!(
                "a scheduler address holds no user or password; write df://host:port, and give \
                 the cluster's token in {} or --token-file (docs/CLUSTER.md)",
                crate::engine::cluster_access::TOKEN_VARIABLE
            ));
        }
        let (address, tls) = match (text.strip_prefix("df://"), text.strip_prefix("dfs://")) {
            (Some(address), _) => (address, false),
            (_, Some(address)) => (address, true),
            _ => {
                return Err(format!(
                    "'{text}' is not a scheduler address; write df://host:port (e.g. \
                     df://localhost:{DEFAULT_SCHEDULER_PORT}), dfs://host:port for TLS, or \
                     standalone"
                ));
            }
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
            tls,
            executor_wait: DEFAULT_EXECUTOR_WAIT,
        })
    }

    /// Whether the scheduler is reached over TLS (`dfs://`).
    pub fn uses_tls(&self) -> bool {
        matches!(self, Cluster::Remote { tls: true, .. })
    }

    /// The same cluster with another wait for a live executor (`--executor-timeout`); a
    /// standalone cluster has its executor inside the process and no wait.
    pub fn with_executor_wait(self, wait: Duration) -> Self {
        match self {
            Cluster::Remote {
                host, port, tls, ..
            } => Cluster::Remote {
                host,
                port,
                tls,
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
            Cluster::Remote {
                host, port, tls, ..
            } => {
                let scheme = if *tls { "dfs" } else { "df" };
                write!(f, "{scheme}://{host}:{port}")
            }
        }
    }
}

/// A session whose queries run on the cluster, with `config`'s settings (they travel with
/// each job to the scheduler and the executors).
pub async fn cluster_context(
    cluster: &Cluster,
    config: SessionConfig,
    access: &ClusterAccess,
    threads_given: bool,
) -> Result<SessionContext> {
    let what = || format!("connecting to the Ballista cluster {cluster}");
    // The scheduler's readiness when the job starts (remote clusters only), and its executors'
    // task slots, which are the job's partitions unless --threads says otherwise.
    let mut readiness = None;
    let mut config = config;
    if let Cluster::Remote { host, port, .. } = cluster {
        let (ready, slots) = check_scheduler(host, *port, access).await?;
        readiness = Some(ready);
        if let (false, Some(slots)) = (threads_given, slots.filter(|&n| n > 0)) {
            config = config.with_target_partitions(slots);
        }
    }
    // Ballista's own settings on top of the job's (sort-merge joins, no dynamic filters, no
    // round-robin repartitioning). Done here rather than left to Ballista because the standalone
    // scheduler plans with this very state: without them, a dynamic join filter it cannot carry
    // across stages makes it fail a task status update and the job never finishes. Every
    // channel Ballista opens for the job (to the scheduler, to executors for results) carries
    // the cluster's TLS and token.
    let mut config = config
        .upgrade_for_ballista()
        .with_ballista_use_tls(access.has_tls())
        .with_ballista_override_create_grpc_client_endpoint(access.endpoint_override());
    // Ballista 55's adaptive planner (on by default, marked experimental upstream) gave the
    // pairs stage's UNION of two joins each of its rows three times on a real cluster; its
    // static planner gives the local run's rows, so jobs use that.
    config
        .options_mut()
        .set(BALLISTA_ADAPTIVE_PLANNER_ENABLED, "false")
        .context(|| "configuring the Ballista session".into())?;
    // Every job of this run carries one name, by which Ctrl-C cancels it on the scheduler.
    let job_name = live_job_name();
    let config = config.with_ballista_job_name(&job_name);
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(runtime_with_stores(None).context(what)?)
        .with_default_features()
        .build();
    udf::register_all(&mut state as &mut dyn FunctionRegistry)
        .context(|| "registering SQL functions".into())?;
    let mut ctx = match cluster {
        // Ballista's scheduler and executor in this process, which take their functions from
        // this state; the executor's shuffle files go with the job's session, which holds
        // their folder.
        Cluster::Standalone => {
            let (url, folder) = standalone::start(&state).await?;
            let state = state.upgrade_for_ballista(url).context(what)?;
            let config = state.config().clone().with_extension(Arc::new(folder));
            SessionContext::new_with_state(
                SessionStateBuilder::new_from_existing(state)
                    .with_config(config)
                    .build(),
            )
        }
        Cluster::Remote { host, port, .. } => {
            if let Ok(mut live) = LIVE_JOB.lock() {
                *live = Some(LiveJob {
                    host: host.clone(),
                    port: *port,
                    access: access.clone(),
                    name: job_name.clone(),
                });
            }
            // Ballista reads only the host and port; the endpoint hook adds TLS.
            SessionContext::remote_with_state(&format!("df://{host}:{port}"), state)
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
            ..
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
            access.clone(),
        );
    }
    Ok(ctx)
}

/// Ballista connects lazily, so an unreachable scheduler would surface as a failed first
/// stage, and an address where something else listens (an HTTP server, an executor's Flight
/// port) as an h2 protocol error; say either plainly before any work instead.
async fn check_scheduler(
    host: &str,
    port: u16,
    access: &ClusterAccess,
) -> Result<(Readiness, Option<usize>)> {
    let outcome = match ask_scheduler(host, port, PROBE_TIMEOUT, access, &READYZ).await {
        Ok(answer) => interpret_readiness(&answer).map(|ready| (ready, task_slots(&answer.body))),
        Err(e) => Err(e),
    };
    match outcome {
        Ok(found) => Ok(found),
        Err(ProbeError::Unreachable(e)) => Err(Error::Input(format!(
            "cannot reach the Ballista scheduler at {host}:{port}: {e} (is `neardup scheduler` \
             running there?)"
        ))),
        Err(ProbeError::NotScheduler(why)) => Err(Error::Input(format!(
            "{}://{host}:{port} is not a Ballista scheduler: {why}. Is that the scheduler's \
             port? (`neardup scheduler` prints the address it listens on)",
            if access.has_tls() { "dfs" } else { "df" }
        ))),
        Err(ProbeError::Refused(why)) => Err(Error::Input(format!(
            "the Ballista scheduler at {host}:{port} refused this client: {why}"
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
    /// A scheduler answers, but refuses this process (no token, or another one).
    Refused(String),
}

/// The longest one look at the scheduler may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a running job asks the scheduler whether an executor is alive.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// An answer from the scheduler's port to a request neardup writes itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Answer {
    /// The status code, when the status line has one.
    code: Option<u16>,
    /// The status line (or code and reason), to quote.
    status: String,
    /// The `Server` header: `ballista/<version>` from a scheduler.
    server: Option<String>,
    /// The `grpc-status` header, which the token check sets when it refuses a call.
    grpc_status: Option<String>,
    /// The body, as text (what arrived of it).
    body: String,
}

/// The task slots of the live executors, from the scheduler's readiness answer
/// (`ready: 2 executors registered, 8 task slots`).
fn task_slots(body: &str) -> Option<usize> {
    let before = body.split(" task slots").next()?;
    if before.len() == body.len() {
        return None;
    }
    before.rsplit(' ').next()?.trim().parse().ok()
}

/// A request to the scheduler's port: its method and path, and the job name it is about.
struct Ask<'a> {
    method: &'a str,
    path: &'a str,
    job: Option<&'a str>,
}

/// The readiness check: `GET /readyz`.
const READYZ: Ask<'static> = Ask {
    method: "GET",
    path: "/readyz",
    job: None,
};

/// The route neardup's scheduler cancels a client's jobs on (the job name in [`JOB_HEADER`]).
const CANCEL_PATH: &str = "/neardup/cancel";

/// The route that lists the jobs the scheduler cancelled lately, one id a line, for executors
/// to stop their running tasks (`crate::engine::task_cancel`).
const CANCELLED_PATH: &str = "/neardup/cancelled";

/// The header that names the job for [`CANCEL_PATH`].
const JOB_HEADER: &str = "x-neardup-job";

/// Asks the scheduler at `host:port` whether it has a live executor: `GET /readyz`, which the
/// scheduler serves on its gRPC port with its name in the `Server` header, 200 when at least
/// one executor is alive, 503 when none is. `patience` bounds the connection and the answer
/// each.
async fn probe_scheduler(
    host: &str,
    port: u16,
    patience: Duration,
    access: &ClusterAccess,
) -> std::result::Result<Readiness, ProbeError> {
    let answer = ask_scheduler(host, port, patience, access, &READYZ).await?;
    interpret_readiness(&answer)
}

/// Sends `ask` to the scheduler's port and reads the answer's head. Over plain text it is
/// HTTP/1.1 written by hand, so a server that is not a scheduler is recognised whatever it
/// speaks; over TLS (`dfs://`) it is an HTTP/2 request on a channel configured as Ballista's
/// are. Either carries the token's proof.
async fn ask_scheduler(
    host: &str,
    port: u16,
    patience: Duration,
    access: &ClusterAccess,
    ask: &Ask<'_>,
) -> std::result::Result<Answer, ProbeError> {
    let connect = tokio::net::TcpStream::connect((host, port));
    let stream = match tokio::time::timeout(patience, connect).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(ProbeError::Unreachable(e.to_string())),
        Err(_) => {
            return Err(ProbeError::Unreachable(format!(
                "no answer in {} s",
                patience.as_secs_f64()
            )));
        }
    };
    if access.has_tls() {
        drop(stream);
        return ask_over_tls(host, port, patience, access, ask).await;
    }
    ask_in_plain_text(stream, host, port, patience, access, ask).await
}

async fn ask_in_plain_text(
    mut stream: tokio::net::TcpStream,
    host: &str,
    port: u16,
    patience: Duration,
    access: &ClusterAccess,
    ask: &Ask<'_>,
) -> std::result::Result<Answer, ProbeError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let exchange = async {
        let mut headers = String::new();
        if let Some(proof) = access.proof_header() {
            headers.push_str(&format!("User-Agent: {proof}\r\n"));
        }
        if let Some(job) = ask.job {
            headers.push_str(&format!("{JOB_HEADER}: {job}\r\nContent-Length: 0\r\n"));
        }
        let request = format!(
            "{} {} HTTP/1.1\r\nHost: {host}:{port}\r\n{headers}Connection: close\r\n\r\n",
            ask.method, ask.path
        );
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
        Ok(Ok(answer)) => parse_answer(&answer),
        // A server that speaks only HTTP/2 (gRPC) or TLS drops a connection that opens with
        // plain HTTP/1.1.
        Ok(Err(e)) => Err(ProbeError::NotScheduler(format!(
            "it dropped the connection when asked over plain HTTP ({e}); if it is a scheduler \
             started with --tls-cert, write dfs://"
        ))),
        Err(_) => Err(ProbeError::NotScheduler(format!(
            "it accepted the connection but gave no HTTP answer in {} s",
            patience.as_secs_f64()
        ))),
    }
}

async fn ask_over_tls(
    host: &str,
    port: u16,
    patience: Duration,
    access: &ClusterAccess,
    ask: &Ask<'_>,
) -> std::result::Result<Answer, ProbeError> {
    use tower::ServiceExt;

    let not_scheduler = |e: &dyn std::error::Error| ProbeError::NotScheduler(error_chain(e));
    // In TLS 1.3 a refused client certificate shows on the first request, not at connect.
    let no_tls = |e: &dyn std::error::Error| {
        ProbeError::NotScheduler(format!(
            "no TLS connection could be made ({}); is it a scheduler started with --tls-cert, \
             does --tls-ca name the authority that signed its certificate, and if it asks for \
             client certificates, do --tls-cert and --tls-key give one that authority signed?",
            error_chain(e)
        ))
    };
    let endpoint = tonic::transport::Endpoint::from_shared(format!("https://{host}:{port}"))
        .map_err(|e| not_scheduler(&e))?
        .connect_timeout(patience);
    let endpoint = access.configure(endpoint).map_err(|e| not_scheduler(&e))?;
    let exchange = async {
        let channel = endpoint.connect().await.map_err(|e| no_tls(&e))?;
        let mut request = axum::http::Request::builder()
            .method(ask.method)
            .uri(ask.path);
        if let Some(job) = ask.job {
            request = request.header(JOB_HEADER, job);
        }
        let request = request
            .body(tonic::body::Body::empty())
            .map_err(|e| not_scheduler(&e))?;
        let response = channel.oneshot(request).await.map_err(|e| no_tls(&e))?;
        // The body is not Sync: nothing may borrow the response across the read below.
        let (code, status, server, grpc_status) = {
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_string)
            };
            let status = response.status();
            (
                status.as_u16(),
                status.to_string(),
                header("server"),
                header("grpc-status"),
            )
        };
        let body = axum::body::to_bytes(axum::body::Body::new(response.into_body()), 64 * 1024)
            .await
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        Ok(Answer {
            code: Some(code),
            status,
            server,
            grpc_status,
            body,
        })
    };
    match tokio::time::timeout(patience, exchange).await {
        Ok(outcome) => outcome,
        Err(_) => Err(ProbeError::NotScheduler(format!(
            "it accepted the connection but gave no answer over TLS in {} s",
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
    // A Content-Length near usize's end (from whatever answers at the address) must not wrap.
    length.is_some_and(|length| {
        (end + 4)
            .checked_add(length)
            .is_some_and(|whole| answer.len() >= whole)
    })
}

/// Reads the head of an HTTP/1.1 answer, or says what answered instead.
fn parse_answer(answer: &[u8]) -> std::result::Result<Answer, ProbeError> {
    let not_scheduler = |why: &str| Err(ProbeError::NotScheduler(why.to_string()));
    if answer.is_empty() {
        return not_scheduler("it closed the connection without answering an HTTP request");
    }
    // A TLS record (an alert, 0x15, or a handshake, 0x16) of version 3.x.
    if answer.len() >= 2 && matches!(answer[0], 0x15 | 0x16) && answer[1] == 0x03 {
        return not_scheduler(
            "it speaks TLS and this client spoke plain text; if it is a scheduler started with \
             --tls-cert, write dfs://",
        );
    }
    let text = String::from_utf8_lossy(answer);
    if !text.starts_with("HTTP/1.") {
        return not_scheduler(
            "it answered an HTTP request in another protocol (an HTTP/2-only service such as \
             an executor's Flight port?)",
        );
    }
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().trim().to_string();
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok());
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value.clone())
    };
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    Ok(Answer {
        code,
        server: header("server"),
        grpc_status: header("grpc-status"),
        status,
        body,
    })
}

/// Reads the scheduler's answer to `GET /readyz` over HTTP/1.1.
#[cfg(test)]
fn read_readiness(answer: &[u8]) -> std::result::Result<Readiness, ProbeError> {
    interpret_readiness(&parse_answer(answer)?)
}

/// The token check answers as gRPC does; status 16 is UNAUTHENTICATED.
fn refused(answer: &Answer) -> Option<ProbeError> {
    (answer.grpc_status.as_deref() == Some("16")).then(|| {
        ProbeError::Refused(format!(
            "it requires the cluster's token and this process did not prove it holds it; set \
             {} (or --token-file) to the token the scheduler was given",
            crate::engine::cluster_access::TOKEN_VARIABLE
        ))
    })
}

/// What an answer to `GET /readyz` means: its status code, and its `Server` header to know a
/// scheduler of this version by.
fn interpret_readiness(answer: &Answer) -> std::result::Result<Readiness, ProbeError> {
    if let Some(refusal) = refused(answer) {
        return Err(refusal);
    }
    let (code, status, server) = (answer.code, &answer.status, &answer.server);
    let Some(version) = server
        .as_deref()
        .and_then(|server| server.strip_prefix("ballista/"))
    else {
        return Err(ProbeError::NotScheduler(format!(
            "an HTTP server answers there ('{status}', Server: {})",
            server.as_deref().unwrap_or("not named")
        )));
    };
    let major = |version: &str| version.split('.').next().unwrap_or_default().to_string();
    if major(version) != major(ballista_core::BALLISTA_VERSION) {
        return Err(ProbeError::NotScheduler(format!(
            "it is a Ballista {version} scheduler and this neardup speaks Ballista {}; run the \
             same neardup binary everywhere",
            ballista_core::BALLISTA_VERSION
        )));
    }
    match code {
        Some(200) => Ok(Readiness::Executors),
        Some(503) => Ok(Readiness::NoExecutor),
        _ => Err(ProbeError::NotScheduler(format!(
            "a Ballista {version} server answered its readiness check with '{status}', as a \
             scheduler does not"
        ))),
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
    access: ClusterAccess,
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
                Err(
                    ProbeError::Unreachable(e)
                    | ProbeError::NotScheduler(e)
                    | ProbeError::Refused(e),
                ) => Some(format!(
                    "lost the scheduler at {host}:{port}: it has not answered for {} s ({e})",
                    wait.as_secs_f64()
                )),
            };
            match problem {
                None => {
                    if missing_since.take().is_some() {
                        crate::to_stderr!(
                            "neardup: an executor is alive at the scheduler at {host}:{port}; \
                             the job goes on"
                        );
                    }
                }
                Some(problem) => {
                    let since = *missing_since.get_or_insert_with(|| {
                        if matches!(reading, Ok(Readiness::NoExecutor)) {
                            crate::to_stderr!(
                                "neardup: waiting for an executor to register with the \
                                 scheduler at {host}:{port} (giving up after {} s; \
                                 --executor-timeout)",
                                wait.as_secs_f64()
                            );
                        } else {
                            crate::to_stderr!(
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
            reading = probe_scheduler(&host, port, PROBE_TIMEOUT.min(wait), &access).await;
        }
    });
}

/// The cluster job this process runs, for the interrupt handler to cancel.
#[derive(Debug, Clone)]
struct LiveJob {
    host: String,
    port: u16,
    access: ClusterAccess,
    name: String,
}

static LIVE_JOB: std::sync::Mutex<Option<LiveJob>> = std::sync::Mutex::new(None);

/// A name no other run shares: the process and the time it started.
fn live_job_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos());
    format!("neardup-{}-{nanos:x}", std::process::id())
}

/// Asks the scheduler to cancel this process's cluster jobs (Ctrl-C, SIGTERM, or a job given
/// up on), waiting at most a few seconds for its answer; says whether it did. The scheduler
/// then hands out no more of their tasks, and executors stop the ones they run
/// (`crate::engine::task_cancel`).
pub fn cancel_live_job() -> bool {
    let Some(job) = LIVE_JOB.lock().ok().and_then(|live| live.clone()) else {
        return false;
    };
    // From the interrupt handler's thread, or from inside the job's runtime (which may not
    // block on another): a thread of its own with a runtime of its own.
    let asked = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        let ask = Ask {
            method: "POST",
            path: CANCEL_PATH,
            job: Some(&job.name),
        };
        Some(runtime.block_on(ask_scheduler(
            &job.host,
            job.port,
            Duration::from_secs(5),
            &job.access,
            &ask,
        )))
    })
    .join();
    let answer = asked.ok().flatten();
    // `cancelled N jobs`
    matches!(answer, Some(Ok(Answer { code: Some(200), body, .. }))
        if !body.starts_with("cancelled 0 "))
}

/// Ends a cluster job that cannot go on: the message, the output's staging folder removed (as
/// on Ctrl-C), exit code 1. The job's stages run under DataFusion's futures, which have no
/// way to be failed from outside. The Ballista job left on the scheduler runs if an executor
/// comes back; otherwise Ballista fails it twice the scheduler's `--executor-timeout` after it
/// lost its last executor (one that no executor ever ran stays queued there).
fn give_up(message: &str) -> ! {
    crate::to_stderr!("neardup: error: {message}");
    cancel_live_job();
    if crate::engine::staging::remove_live_staging() {
        crate::to_stderr!("neardup: nothing was written (an earlier output is untouched)");
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
pub async fn run_scheduler(
    bind: &str,
    executor_timeout_seconds: u64,
    access: &ClusterAccess,
    insecure: bool,
) -> Result<()> {
    let executor_timeout_seconds = executor_timeout_seconds.max(MIN_EXECUTOR_TIMEOUT_SECONDS);
    let cannot_listen = |source| Error::Listen {
        address: bind.to_string(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(cannot_listen)?;
    let address = listener.local_addr().map_err(cannot_listen)?;
    check_bind("scheduler", address, access, insecure)?;
    let config = SchedulerConfig {
        bind_host: address.ip().to_string(),
        bind_port: address.port(),
        scheduling_policy: SCHEDULING,
        executor_timeout_seconds,
        expire_dead_executor_interval_seconds: (executor_timeout_seconds / 5).clamp(1, 15),
        no_executors_grace_period_seconds: executor_timeout_seconds.saturating_mul(2),
        use_tls: access.has_tls(),
        override_create_grpc_client_endpoint: Some(access.endpoint_override()),
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
    let routes = scheduler_routes(scheduler);
    let server = match access.server_tls() {
        Some(tls) => tonic::transport::Server::builder()
            .tls_config(tls.timeout(TLS_HANDSHAKE_TIMEOUT))
            .map_err(|e| tls_failed("scheduler", e))?,
        None => tonic::transport::Server::builder(),
    };
    let scheme = if access.has_tls() { "dfs" } else { "df" };
    crate::to_stderr!(
        "neardup: scheduler listening on {address} ({scheme}://; {})",
        describe_access(access)
    );
    let access = access.clone();
    server
        // The readiness check `/readyz` is HTTP/1.1 on the same port.
        .accept_http1(true)
        .layer(tonic::service::InterceptorLayer::new(move |request| {
            access.check(request)
        }))
        .add_routes(routes)
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
        .await
        .map_err(|e| {
            let e = ballista_core::error::BallistaError::TonicError(e);
            Error::cluster("the Ballista scheduler failed", e)
        })
}

/// How long a connection may take to finish its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn tls_failed(role: &str, e: tonic::transport::Error) -> Error {
    Error::Usage(format!(
        "the {role}'s TLS settings cannot be used: {} (--tls-cert and --tls-key must be a PEM \
         certificate chain and its private key; --tls-ca a PEM certificate)",
        error_chain(&e)
    ))
}

/// What a server's start line says about who may call it.
fn describe_access(access: &ClusterAccess) -> String {
    let tls = match (access.has_tls(), access.verifies_clients()) {
        (true, true) => "TLS with client certificates",
        (true, false) => "TLS",
        (false, _) => "no TLS",
    };
    let token = if access.has_token() {
        "token required"
    } else {
        "no token"
    };
    format!("{tls}, {token}")
}

/// The executors alive (polled within the scheduler's `--executor-timeout`, and not dying) and
/// their task slots in all: Ballista's own count, which is crate-private, from its public
/// record of executors and their heartbeats.
async fn live_executors(
    scheduler: &ballista_scheduler::scheduler_server::SchedulerServer<
        LogicalPlanNode,
        PhysicalPlanNode,
    >,
) -> (usize, usize) {
    use ballista_core::serde::protobuf::executor_status::Status;

    let executors = &scheduler.state.executor_manager;
    let timeout = scheduler.state.config.executor_timeout_seconds;
    let since = ballista_core::utils::get_time_before(timeout);
    let Ok(registered) = executors.get_executors_state().await else {
        return (0, 0);
    };
    let (mut alive, mut slots) = (0, 0);
    for (metadata, _, _) in registered {
        let Some(heartbeat) = executors.get_executor_hearbeat(&metadata.id) else {
            continue;
        };
        // Under pull scheduling an executor without a status counts as active, as in Ballista.
        let active = matches!(
            heartbeat.status.as_ref().and_then(|s| s.status.as_ref()),
            Some(Status::Active(_)) | None
        );
        if active && heartbeat.timestamp > since {
            alive += 1;
            slots += metadata.specification.vcores as usize;
        }
    }
    (alive, slots)
}

/// The scheduler's routes: Ballista's gRPC service, and the readiness check `GET /readyz` that
/// `run --cluster` and the executors ask (Ballista's own HTTP routes are crate-private, and
/// its server cannot do TLS), with the `Server: ballista/<version>` header they recognise it by.
fn scheduler_routes(
    scheduler: ballista_scheduler::scheduler_server::SchedulerServer<
        LogicalPlanNode,
        PhysicalPlanNode,
    >,
) -> tonic::service::Routes {
    use axum::http::{StatusCode, header};
    use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpcServer;

    let config = scheduler.state.config.clone();
    let grpc = SchedulerGrpcServer::new(scheduler.clone())
        .max_encoding_message_size(config.grpc_server_max_encoding_message_size as usize)
        .max_decoding_message_size(config.grpc_server_max_decoding_message_size as usize);
    let mut builder = tonic::service::RoutesBuilder::default();
    builder.add_service(grpc);
    let server = format!("ballista/{}", ballista_core::BALLISTA_VERSION);
    let scheduler_for_cancel = scheduler.clone();
    let cancelled_jobs = Arc::new(CancelledJobs::default());
    let readyz = move || {
        let scheduler = scheduler.clone();
        let server = server.clone();
        async move {
            let (alive, slots) = live_executors(&scheduler).await;
            let (status, body) = if scheduler.is_ready() {
                (
                    StatusCode::OK,
                    format!("ready: {alive} executors registered, {slots} task slots\n"),
                )
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "not ready: {alive}/{} executors registered, {slots} task slots\n",
                        scheduler.state.config.min_ready_executors
                    ),
                )
            };
            (status, [(header::SERVER, server)], body)
        }
    };
    let cancel = {
        let scheduler = scheduler_for_cancel;
        let listed = Arc::clone(&cancelled_jobs);
        move |headers: axum::http::HeaderMap| {
            let scheduler = scheduler.clone();
            let listed = Arc::clone(&listed);
            async move {
                let Some(name) = headers.get(JOB_HEADER).and_then(|v| v.to_str().ok()) else {
                    return (StatusCode::BAD_REQUEST, format!("no {JOB_HEADER} header\n"));
                };
                // Every job the scheduler knows, to find the queued and running ones (its
                // `get_running_jobs` lists, in memory, only finished ones).
                let jobs = match scheduler.state.task_manager.get_all_jobs().await {
                    Ok(jobs) => jobs,
                    Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
                };
                let mut cancelled = 0;
                for job in jobs
                    .into_iter()
                    .filter(|j| j.job_name == name && j.end_time == 0)
                {
                    let id = job.job_id.to_string();
                    // Listed first: an executor may ask while the cancel goes on.
                    listed.add(&id);
                    if scheduler.cancel_job(job.job_id).await.is_ok() {
                        crate::to_stderr!(
                            "neardup: cancelled job {id} ({name}) as its client asked"
                        );
                        cancelled += 1;
                    }
                }
                (StatusCode::OK, format!("cancelled {cancelled} jobs\n"))
            }
        }
    };
    let router = builder
        .routes()
        .into_axum_router()
        .route("/readyz", axum::routing::get(readyz))
        .route(CANCEL_PATH, axum::routing::post(cancel))
        .route(
            CANCELLED_PATH,
            axum::routing::get(move || async move { cancelled_jobs.listing() }),
        );
    tonic::service::Routes::from(router)
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
    /// Folder for shuffle files; a temporary folder of the executor's own, removed when it
    /// stops, when `None`.
    pub work_dir: Option<String>,
    /// Bytes the tasks may hold together; Ballista's share of the machine when `None`.
    pub memory_limit: Option<usize>,
    /// How long to wait for the scheduler to answer, at start and whenever it stops answering
    /// (`--scheduler-timeout`), before exiting with an error naming its address.
    pub scheduler_wait: Duration,
    /// The token and TLS of the cluster: for the Flight service, and for every connection to
    /// the scheduler and to other executors.
    pub access: ClusterAccess,
    /// Listen beyond loopback with no token (`--insecure`).
    pub insecure: bool,
}

/// `neardup executor`: registers with the scheduler and runs the tasks it is given until the
/// process is stopped.
pub async fn run_executor(options: &ExecutorOptions) -> Result<()> {
    // The same `host[:port]` reading as `--cluster`, which writes it behind `df://`.
    let scheduler = options.scheduler.trim();
    let bare = scheduler.strip_prefix("df://").unwrap_or(scheduler);
    let address = format!("df://{}", bare.strip_prefix("dfs://").unwrap_or(bare));
    let Ok(Cluster::Remote {
        host: scheduler_host,
        port: scheduler_port,
        ..
    }) = Cluster::parse(&address)
    else {
        return Err(Error::Usage(format!(
            "--scheduler {}: write host:port, e.g. localhost:{DEFAULT_SCHEDULER_PORT}",
            crate::storage::redacted(&address)
        )));
    };
    let access = &options.access;
    check_bind("executor", options.bind, access, options.insecure)?;
    // Ballista connects once and then polls forever, whatever answers: find the scheduler
    // first, within a bounded wait, and say what is wrong with the address if it is not one.
    wait_for_scheduler(
        &scheduler_host,
        scheduler_port,
        options.scheduler_wait,
        access,
    )
    .await?;
    let named = format!("{scheduler_host}:{scheduler_port}");
    let running = Arc::new(RunningTasks::default());
    tokio::spawn(stop_cancelled_tasks(
        Arc::clone(&running),
        scheduler_host.clone(),
        scheduler_port,
        access.clone(),
    ));
    // Flipped by Ballista's poll loop on every poll: whether the scheduler answered the last.
    let health = ExecutorHealth::new();
    // Without --work-dir, a folder of the executor's own that goes when it stops (Ballista's
    // temporary folder stays behind with every job's shuffle files).
    let own_folder = match options.work_dir {
        Some(_) => None,
        None => Some(WorkFolder::create("executor")?),
    };
    let work_dir = options.work_dir.clone().or_else(|| {
        own_folder
            .as_ref()
            .map(|folder| folder.path().to_string_lossy().into_owned())
    });
    let defaults = ExecutorProcessConfig::default();
    let config = ExecutorProcessConfig {
        bind_host: options.bind.ip().to_string(),
        external_host: options.external_host.clone(),
        port: options.bind.port(),
        task_scheduling_policy: SCHEDULING,
        scheduler_host,
        scheduler_port,
        vcores: options.concurrent_tasks.unwrap_or(defaults.vcores),
        work_dir: work_dir.clone(),
        memory_pool_size: options.memory_limit.map(|bytes| bytes as u64),
        override_function_registry: Some(Arc::new(function_registry())),
        override_runtime_producer: Some(Arc::new(move |_| runtime_with_stores(work_dir.clone()))),
        health: health.clone(),
        // Every connection out (the scheduler, other executors' shuffle data) with the
        // cluster's TLS and token, and the Flight service behind the same check.
        override_create_grpc_client_endpoint: Some(access.endpoint_override()),
        override_config_producer: Some({
            let access = access.clone();
            Arc::new(move || {
                ballista_core::utils::default_config_producer()
                    .with_ballista_use_tls(access.has_tls())
                    .with_ballista_override_create_grpc_client_endpoint(access.endpoint_override())
            })
        }),
        override_arrow_flight_service: Some(flight_service(access.clone())),
        override_execution_engine: Some(Arc::new(CancellableEngine::new(
            ballista_engine(defaults.client_ttl),
            running,
        ))),
        ..defaults
    };
    crate::to_stderr!(
        "neardup: executor on {} working for the scheduler at {} ({})",
        options.bind,
        options.scheduler,
        describe_access(access)
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

/// The engine Ballista's executor runs tasks with by default: shuffle reads through a pool of
/// clients, each dropped after `client_ttl` idle seconds (0: no pool).
fn ballista_engine(
    client_ttl: u64,
) -> Arc<dyn ballista_executor::execution_engine::ExecutionEngine> {
    use ballista_executor::execution_engine::DefaultExecutionEngine;

    if client_ttl == 0 {
        return Arc::new(DefaultExecutionEngine::new());
    }
    let pool = crate::engine::client_pool::IdleClients::new(Duration::from_secs(client_ttl));
    Arc::new(DefaultExecutionEngine::with_client_pool(Arc::new(pool)))
}

/// While the executor runs tasks, asks the scheduler every half second which jobs it cancelled
/// and stops their tasks. An unanswered ask is retried; the poll loop watches the scheduler.
async fn stop_cancelled_tasks(
    running: Arc<RunningTasks>,
    host: String,
    port: u16,
    access: ClusterAccess,
) {
    let ask = Ask {
        method: "GET",
        path: CANCELLED_PATH,
        job: None,
    };
    loop {
        tokio::time::sleep(crate::engine::task_cancel::CHECK_EVERY).await;
        if !running.any() {
            continue;
        }
        match ask_scheduler(&host, port, Duration::from_secs(5), &access, &ask).await {
            Ok(Answer {
                code: Some(200),
                body,
                ..
            }) => {
                running.stop_jobs(parse_listing(&body));
            }
            other => log::debug!("asking the scheduler for its cancelled jobs: {other:?}"),
        }
    }
}

/// The executor's Arrow Flight service (its shuffle files and task results) as Ballista's own,
/// behind the cluster's TLS and token check.
fn flight_service(access: ClusterAccess) -> Arc<ballista_executor::ArrowFlightServerProvider> {
    use arrow_flight::flight_service_server::FlightServiceServer;
    use ballista_core::error::BallistaError;
    use ballista_executor::flight_service::BallistaFlightService;

    Arc::new(move |work_dir, address, mut shutdown, grpc_config| {
        let access = access.clone();
        tokio::spawn(async move {
            let mut server = ballista_core::utils::create_grpc_server(&grpc_config);
            if let Some(tls) = access.server_tls() {
                server = server
                    .tls_config(tls.timeout(TLS_HANDSHAKE_TIMEOUT))
                    .map_err(BallistaError::TonicError)?;
            }
            let check = access.clone();
            // Ballista's limits for Flight messages (16 MiB).
            let limit = 16 * 1024 * 1024;
            server
                .layer(tonic::service::InterceptorLayer::new(move |request| {
                    check.check(request)
                }))
                .add_service(
                    FlightServiceServer::new(BallistaFlightService::new(work_dir))
                        .max_decoding_message_size(limit)
                        .max_encoding_message_size(limit),
                )
                .serve_with_shutdown(address, shutdown.recv())
                .await
                .map_err(BallistaError::TonicError)
        })
    })
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
async fn wait_for_scheduler(
    host: &str,
    port: u16,
    wait: Duration,
    access: &ClusterAccess,
) -> Result<()> {
    let started = Instant::now();
    let mut said = false;
    loop {
        let patience = PROBE_TIMEOUT.min(
            wait.saturating_sub(started.elapsed())
                .max(Duration::from_secs(1)),
        );
        match probe_scheduler(host, port, patience, access).await {
            Ok(_) => return Ok(()),
            Err(ProbeError::Refused(why)) => {
                return Err(Error::Input(format!(
                    "the scheduler at {host}:{port} refused this executor: {why}"
                )));
            }
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
                    crate::to_stderr!(
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
            tls: false,
            executor_wait: DEFAULT_EXECUTOR_WAIT,
        };
        assert_eq!(Cluster::parse("df://host:1234"), Ok(remote("host", 1234)));
        assert_eq!(
            Cluster::parse("df://10.0.0.1/"),
            Ok(remote("10.0.0.1", 50050))
        );
        assert_eq!(remote("h", 7).to_string(), "df://h:7");
        let tls = Cluster::parse("dfs://h:7").unwrap();
        assert!(tls.uses_tls() && !remote("h", 7).uses_tls());
        assert_eq!(tls.to_string(), "dfs://h:7");
        for bad in [
            "host:50050",
            "df://",
            "df://:80",
            "df://h:port",
            "df://h:70000",
        ] {
            assert!(Cluster::parse(bad).is_err(), "{bad} accepted");
        }
        for secret in [
            "df://admin:s3cr3t@h:1",
            "dfs://s3cr3t@h",
            "http://u:s3cr3t@h",
        ] {
            let refused = Cluster::parse(secret).unwrap_err();
            assert!(!refused.contains("s3cr3t"), "{refused}");
            assert!(refused.contains("no user or password"), "{refused}");
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
        let Err(ProbeError::NotScheduler(why)) = read_readiness(http.as_bytes()) else {
            panic!("nginx is not a scheduler");
        };
        assert!(why.contains("an HTTP server answers there"), "{why}");
        assert!(why.contains("nginx"), "{why}");
        for other in [&b""[..], &b"\x00\x00\x12\x04\x00\x00\x00\x00\x00"[..]] {
            assert!(read_readiness(other).is_err());
        }
        let old = ready.replace(
            &format!("ballista/{}", ballista_core::BALLISTA_VERSION),
            "ballista/0.12.0",
        );
        let Err(ProbeError::NotScheduler(why)) = read_readiness(old.as_bytes()) else {
            panic!("another major version is refused");
        };
        assert!(why.contains("0.12.0"), "{why}");
        // A guarded scheduler refuses a caller without the token as gRPC does.
        let refused = "HTTP/1.1 200 OK\r\ncontent-type: application/grpc\r\ngrpc-status: 16\r\n\
                       content-length: 0\r\n\r\n";
        assert!(matches!(
            read_readiness(refused.as_bytes()),
            Err(ProbeError::Refused(_))
        ));
    }

    #[test]
    fn task_slots_are_read_from_the_readiness_answer() {
        assert_eq!(
            task_slots("ready: 2 executors registered, 8 task slots\n"),
            Some(8)
        );
        assert_eq!(task_slots("ready: 2 executors registered\n"), None);
        assert_eq!(task_slots(""), None);
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
