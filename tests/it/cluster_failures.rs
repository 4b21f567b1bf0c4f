//! Failures of a job on an Apache DataFusion Ballista cluster, with `neardup scheduler` and
//! `neardup executor` started as separate processes on loopback (docs/CLUSTER.md, "When
//! something fails"): an executor killed in the middle of a task (its tasks run again on the
//! other, and the job gives the local run's tables), the only executor killed or none ever
//! started (the job fails within its `--executor-timeout`, saying so), and addresses that are
//! not a scheduler's (named, within a bounded time, for clients and executors alike).
//!
//! Every process a test starts is killed when the test ends however it ends, and every client
//! or executor expected to end runs under a deadline, so a regression fails a test instead of
//! hanging it. The timeouts are the flags' shortest sensible values: `neardup scheduler
//! --executor-timeout 10`, `run --executor-timeout 2`, `neardup executor --scheduler-timeout 2`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{fixture, neardup_ok, path_str, sorted_rows, summary};
use crate::processes::{
    Process, free_port, start_executor, start_executors, start_executors_with_env, start_scheduler,
    start_scheduler_with_env, wait_for,
};

/// `neardup scheduler --executor-timeout` here: an executor that has not polled for 10 s is
/// dead (the least the flag takes: a busy executor polls every 5 s).
const SCHEDULER_FLAGS: [&str; 2] = ["--executor-timeout", "10"];

/// A web server that is not a scheduler: answers every request with a small page.
fn start_http_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let page = "<html><body>hello</body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nServer: test-http\r\nContent-Type: text/html\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    port
}

/// The shipped sample (its groups) and 9,000 long documents of random digits (no pairs among
/// them): about 135 MB of text, so that the signature stage's tasks run for about a second and
/// an executor can be killed in the middle of one. With 3,000 (45 MB) the whole stage took
/// 0.33 s on two cores, and a task was sometimes done before two looks 300 ms apart saw it.
fn long_corpus(dir: &Path) -> PathBuf {
    long_corpus_of(dir, 9000)
}

/// As [`long_corpus`], with `documents` long documents.
fn long_corpus_of(dir: &Path, documents: usize) -> PathBuf {
    let path = dir.join("long.parquet");
    neardup_ok(&[
        "query",
        &format!(
            "CREATE EXTERNAL TABLE sample STORED AS PARQUET LOCATION '{}'; \
             COPY (SELECT id, text FROM sample \
                   UNION ALL \
                   SELECT 1000 + value AS id, \
                          repeat(concat(CAST(random() AS VARCHAR), ' ', \
                                        CAST(random() AS VARCHAR), ' '), 400) AS text \
                   FROM generate_series(1, {documents}) \
                   ORDER BY id) \
             TO '{}'",
            path_str(&fixture("sample.parquet")),
            path_str(&path)
        ),
    ]);
    path
}

fn run_args<'a>(input: &'a Path, output: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--input",
        path_str(input),
        "--output",
        path_str(output),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    args
}

/// `neardup run` of `input` into `output` with `extra` flags, logging to `dir/client.log`.
fn start_run(dir: &Path, input: &Path, output: &Path, extra: &[&str]) -> Process {
    Process::client(&run_args(input, output, extra), dir.join("client.log"))
}

/// Waits for `process` to end, up to a minute from `started` (killed then); insists it exited
/// with code 1, and returns its log.
fn exit_1_message(process: &mut Process, started: Instant) -> String {
    let status = process.wait_until(started + Duration::from_secs(60));
    let message = process.log();
    assert_eq!(
        status.and_then(|status| status.code()),
        Some(1),
        "{message}"
    );
    message
}

/// Waits for `executor` to exit with code 1, naming `text`, within 30 s of `started`.
fn assert_exits_naming(executor: &mut Process, started: Instant, text: &str) {
    let message = exit_1_message(executor, started);
    assert!(message.contains(text), "{message}");
    assert!(started.elapsed() < Duration::from_secs(30), "{message}");
}

/// A client's log once no executor works for the scheduler at `address`: it said it waits for
/// one, then that none is alive.
fn assert_says_no_executor(message: &str, address: &str) {
    assert!(
        message.contains(&format!(
            "waiting for an executor to register with the scheduler at {address}"
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "no executor is alive at the scheduler at {address}"
        )),
        "{message}"
    );
}

/// The task an executor's log shows received and not finished, if any.
fn running_task(log: &str) -> Option<String> {
    log.lines()
        .filter_map(|line| line.split_once("Received task: ["))
        .map(|(_, task)| task.trim_end_matches(']').to_string())
        .find(|task| !log.contains(&format!("Finished task : [{task}]")))
}

/// Kills (`kill -9`) the first of `executors` seen in the middle of one task on two looks
/// 300 ms apart (a task of the signature stage, the long one) while `client` runs; returns
/// which. An executor in the middle of a task of the client's job holds no result the client
/// has yet to fetch (results are fetched once the whole job is done).
fn kill_one_mid_task(executors: &mut [Process], client: &mut Process, deadline: Instant) -> usize {
    let mut seen: Vec<Option<(String, Instant)>> = vec![None; executors.len()];
    loop {
        assert!(
            !client.has_ended(),
            "the job ended before any executor was seen in the middle of a task:\n{}",
            client.log()
        );
        assert!(
            Instant::now() < deadline,
            "no executor was seen in the middle of a task"
        );
        for (n, executor) in executors.iter_mut().enumerate() {
            let task = running_task(&executor.log());
            let same = matches!((&seen[n], &task), (Some((old, _)), Some(task)) if old == task);
            if !same {
                seen[n] = task.map(|task| (task, Instant::now()));
            } else if seen[n]
                .as_ref()
                .is_some_and(|(_, since)| since.elapsed() >= Duration::from_millis(300))
            {
                executor.kill();
                return n;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Both outputs hold the same tables (dedup by its ids: its texts are the corpus's), and the
/// same counts.
async fn assert_same_tables(local: &Path, clustered: &Path) {
    for sql in [
        "SELECT id, simhash, input_order FROM signatures",
        "SELECT * FROM pairs",
        "SELECT * FROM groups",
        "SELECT id FROM dedup",
    ] {
        let (a, b) = (
            sorted_rows(local, sql).await,
            sorted_rows(clustered, sql).await,
        );
        assert!(a.len() > 2, "{sql}: the corpus must give rows");
        assert_eq!(a, b, "{sql}");
    }
    assert_eq!(summary(local)["counts"], summary(clustered)["counts"]);
}

/// No staging folder (`.<output>.neardup-staging-<pid>`) left in `dir`.
fn assert_no_staging_left(dir: &Path, context: &str) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("neardup-staging"))
        .collect();
    let listing = || {
        let find = std::process::Command::new("find")
            .arg(dir)
            .arg("-ls")
            .output()
            .unwrap();
        String::from_utf8_lossy(&find.stdout).into_owned()
    };
    assert!(
        left.is_empty(),
        "staging folders left: {left:?}\n{}\n{context}",
        listing()
    );
}

#[tokio::test]
async fn a_killed_executors_tasks_run_again_on_the_other_and_the_job_gives_the_local_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let input = long_corpus(dir.path());
    let (scheduler, address) = start_scheduler(dir.path(), &SCHEDULER_FLAGS);
    let mut executors = start_executors(dir.path(), 2, &address);
    let (local, clustered) = (dir.path().join("local"), dir.path().join("clustered"));
    neardup_ok(&run_args(&input, &local, &[]));

    let cluster = format!("df://{address}");
    let mut client = start_run(
        dir.path(),
        &input,
        &clustered,
        &["--cluster", &cluster, "--threads", "2"],
    );
    let deadline = Instant::now() + Duration::from_secs(240);
    let killed = kill_one_mid_task(&mut executors, &mut client, deadline);
    let killed_at = Instant::now();
    let status = client.wait_until(deadline);
    let logs = || {
        format!(
            "client:\n{}\nscheduler:\n{}\nexecutor 0:\n{}\nexecutor 1:\n{}",
            client.log(),
            scheduler.log(),
            executors[0].log(),
            executors[1].log()
        )
    };
    assert!(
        status.is_some_and(|status| status.success()),
        "run --cluster with executor {killed} killed: {status:?}\n{}",
        logs()
    );
    // The scheduler counted the killed executor dead (10 s without a poll) and its task ran
    // again on the other one, which ran the rest of the job.
    assert!(
        scheduler.log().contains("heartbeat timed out"),
        "{}",
        logs()
    );
    assert!(
        executors[1 - killed].log().contains("Finished task"),
        "{}",
        logs()
    );
    // Bounded: 10 s to find it dead, then the rest of the job on one executor.
    let took = killed_at.elapsed();
    assert!(took < Duration::from_secs(180), "{took:?}\n{}", logs());
    assert_same_tables(&local, &clustered).await;
}

/// How many tasks an executor has been handed so far.
fn tasks_received(executor: &Process) -> usize {
    executor.log().matches("Received task: [").count()
}

/// SIGTERM on `run --cluster` in the middle of a stage cancels its job on the scheduler (over
/// the token-guarded route, the token from --token-file): the client exits with 130 at once,
/// the executors stop the tasks they were running, and no executor is handed another,
/// although the stage (12 partitions on 2 task slots) had more to run.
#[test]
fn sigterm_on_a_cluster_run_cancels_its_job_on_the_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    // Four times the text: the signature stage's task runs for seconds, long enough to be
    // seen and stopped.
    let input = long_corpus_of(dir.path(), 12_000);
    let token = "a-test-token-of-enough-length-0002";
    let env = vec![("NEARDUP_CLUSTER_TOKEN".to_string(), token.to_string())];
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let (scheduler, address) = start_scheduler_with_env(dir.path(), &SCHEDULER_FLAGS, &env);
    let mut executors = start_executors_with_env(dir.path(), 2, &address, &env);
    let cluster = format!("df://{address}");
    let output = dir.path().join("out");
    let mut client = start_run(
        dir.path(),
        &input,
        &output,
        &[
            "--cluster",
            &cluster,
            "--threads",
            "12",
            "--token-file",
            path_str(&token_file),
        ],
    );
    // In the long signature stage: one task seen running on two looks 300 ms apart, of a job
    // the scheduler has not finished (a log line read between a short task's two may look
    // like a long task).
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen: Option<(String, Instant)> = None;
    loop {
        assert!(!client.has_ended(), "{}", client.log());
        assert!(Instant::now() < deadline, "no long task started");
        let task = executors.iter().find_map(|e| running_task(&e.log()));
        match (&seen, task) {
            (Some((old, since)), Some(task)) if *old == task => {
                let job = task
                    .trim_start_matches("TID ")
                    .split('/')
                    .next()
                    .unwrap_or("");
                let finished = format!("Job finished successfully: [{job}]");
                if since.elapsed() >= Duration::from_millis(300)
                    && !scheduler.log().contains(&finished)
                {
                    break;
                }
            }
            (_, task) => seen = task.map(|task| (task, Instant::now())),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    client.signal("-TERM");
    let status = client.wait_until(Instant::now() + Duration::from_secs(15));
    let logs = || {
        format!(
            "client:\n{}\nscheduler:\n{}\nexecutor 0:\n{}\nexecutor 1:\n{}",
            client.log(),
            scheduler.log(),
            executors[0].log(),
            executors[1].log()
        )
    };
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{}", logs());
    assert!(
        client.log().contains("the cluster job was cancelled"),
        "{}",
        logs()
    );
    assert!(
        scheduler.log().contains("as its client asked"),
        "{}",
        logs()
    );
    // The running tasks are stopped (the executors ask the scheduler which jobs it cancelled);
    // then nothing more is handed out.
    let stop_deadline = Instant::now() + Duration::from_secs(10);
    while executors.iter().any(|e| running_task(&e.log()).is_some()) {
        assert!(
            Instant::now() < stop_deadline,
            "a task was not stopped\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        executors
            .iter()
            .any(|e| e.log().contains("neardup: stopped task")),
        "no running task was stopped\n{}",
        logs()
    );
    let handed: Vec<usize> = executors.iter().map(tasks_received).collect();
    std::thread::sleep(Duration::from_secs(3));
    let later: Vec<usize> = executors.iter().map(tasks_received).collect();
    assert_eq!(
        handed,
        later,
        "tasks were handed out after the cancel\n{}",
        logs()
    );
    assert!(!output.exists());
    assert_no_staging_left(dir.path(), &logs());
    for executor in &mut executors {
        assert!(!executor.has_ended(), "{}", executor.log());
    }
}

#[test]
fn killing_the_only_executor_fails_the_job_within_its_executor_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let input = long_corpus(dir.path());
    let (scheduler, address) = start_scheduler(dir.path(), &SCHEDULER_FLAGS);
    let mut executors = start_executors(dir.path(), 1, &address);
    let output = dir.path().join("out");
    let cluster = format!("df://{address}");
    let mut client = start_run(
        dir.path(),
        &input,
        &output,
        &[
            "--cluster",
            &cluster,
            "--threads",
            "2",
            "--executor-timeout",
            "2",
        ],
    );
    kill_one_mid_task(
        &mut executors,
        &mut client,
        Instant::now() + Duration::from_secs(120),
    );
    let killed_at = Instant::now();
    let status = client.wait_until(killed_at + Duration::from_secs(90));
    let message = client.log();
    assert_eq!(
        status.and_then(|status| status.code()),
        Some(1),
        "{message}\nscheduler:\n{}",
        scheduler.log()
    );
    assert_says_no_executor(&message, &address);
    assert!(!message.contains("panicked"), "{message}");
    // 10 s for the scheduler to count it dead, 2 s of waiting, half-second looks.
    let took = killed_at.elapsed();
    assert!(took < Duration::from_secs(45), "{took:?}\n{message}");
    assert!(!output.exists());
    assert_no_staging_left(dir.path(), "");
}

#[test]
fn a_job_without_executors_says_it_waits_and_fails_within_its_executor_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (_scheduler, address) = start_scheduler(dir.path(), &SCHEDULER_FLAGS);
    let input = fixture("sample.parquet");
    let output = dir.path().join("out");
    let cluster = format!("df://{address}");
    let started = Instant::now();
    let mut client = start_run(
        dir.path(),
        &input,
        &output,
        &["--cluster", &cluster, "--executor-timeout", "2"],
    );
    let message = exit_1_message(&mut client, started);
    assert_says_no_executor(&message, &address);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "{took:?}\n{message}");
    assert!(!output.exists());
    assert_no_staging_left(dir.path(), "");
}

#[test]
fn an_http_server_given_as_the_cluster_is_named_as_not_a_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let port = start_http_server();
    let input = fixture("sample.parquet");
    let output = dir.path().join("out");
    let cluster = format!("df://127.0.0.1:{port}");
    let started = Instant::now();
    let mut client = start_run(dir.path(), &input, &output, &["--cluster", &cluster]);
    let message = exit_1_message(&mut client, started);
    assert!(
        message.contains(&format!("{cluster} is not a Ballista scheduler")),
        "{message}"
    );
    assert!(
        message.contains("an HTTP server answers there"),
        "{message}"
    );
    assert!(!message.contains("panicked"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(!output.exists());
}

#[test]
fn an_executor_pointed_at_a_wrong_port_exits_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens there: it retries for its --scheduler-timeout, then gives up.
    let closed = format!("127.0.0.1:{}", free_port());
    let started = Instant::now();
    let mut executor = start_executor(dir.path(), 0, &closed, &["--scheduler-timeout", "2"]);
    assert_exits_naming(
        &mut executor,
        started,
        &format!("no Ballista scheduler answered at {closed}"),
    );

    // Something else listens there: refused at once, whatever the timeout.
    let http = format!("127.0.0.1:{}", start_http_server());
    let started = Instant::now();
    let mut executor = start_executor(dir.path(), 1, &http, &["--scheduler-timeout", "60"]);
    assert_exits_naming(
        &mut executor,
        started,
        &format!("--scheduler {http} is not a Ballista scheduler"),
    );
}

#[test]
fn an_executor_whose_scheduler_stops_exits_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut scheduler, address) = start_scheduler(dir.path(), &SCHEDULER_FLAGS);
    let mut executor = start_executor(dir.path(), 0, &address, &["--scheduler-timeout", "2"]);
    wait_for(&executor, "Starting poll work loop with scheduler");
    scheduler.kill();
    let stopped = Instant::now();
    assert_exits_naming(
        &mut executor,
        stopped,
        &format!("the scheduler at {address} has not answered this executor's polls"),
    );
}
