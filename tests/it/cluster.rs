//! The job on an Apache DataFusion Ballista cluster gives the outputs of a local run: in this
//! process (`--cluster standalone`), and with a scheduler and two executors started as separate
//! processes on loopback (`neardup scheduler`, `neardup executor`, `run --cluster df://...`).

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use datafusion::arrow::util::pretty::pretty_format_batches;

use crate::common::{fixture, neardup_ok, path_str, query, summary, write_fingerprints};
use crate::exactness::{bfs_groups, brute_force_pairs, groups_of, planted_fingerprints};

const TABLES: [&str; 4] = ["signatures", "pairs", "groups", "dedup"];

/// Every row of an output table, formatted and sorted, so that two runs compare whole.
async fn table_rows(output: &Path, table: &str) -> Vec<String> {
    let batches = query(output, &format!("SELECT * FROM {table}")).await;
    let text = pretty_format_batches(&batches).unwrap().to_string();
    let mut rows: Vec<String> = text
        .lines()
        .filter(|line| line.starts_with('|'))
        .map(str::to_string)
        .collect();
    rows.sort();
    rows
}

/// Both outputs hold the same tables, row for row, and the same counts.
async fn assert_same_outputs(local: &Path, clustered: &Path) {
    for table in TABLES {
        let (a, b) = (
            table_rows(local, table).await,
            table_rows(clustered, table).await,
        );
        assert!(a.len() > 2, "{table}: the sample must give rows");
        assert_eq!(a, b, "{table}");
    }
    assert_eq!(summary(local)["counts"], summary(clustered)["counts"]);
}

fn run_sample(output: &Path, extra: &[&str]) {
    let input = fixture("sample.parquet");
    let mut args = vec![
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(output),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    neardup_ok(&args);
}

#[tokio::test]
async fn a_standalone_cluster_gives_the_outputs_of_a_local_run() {
    let dir = tempfile::tempdir().unwrap();
    let (local, clustered) = (dir.path().join("local"), dir.path().join("clustered"));
    run_sample(&local, &[]);
    run_sample(&clustered, &["--cluster", "standalone"]);
    assert_same_outputs(&local, &clustered).await;
    let parameters = &summary(&clustered)["parameters"];
    assert_eq!(parameters["clustering"], "sql", "the default on a cluster");
    assert_eq!(parameters["cluster"], "standalone");
}

/// Matching on the cluster (the band_pairs aggregate across shuffles, the SQL clustering) is
/// exact: the pairs of brute force, and its BFS groups.
#[tokio::test]
async fn matching_on_a_standalone_cluster_equals_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fingerprints.parquet");
    let rows = planted_fingerprints();
    write_fingerprints(&input, &rows);
    let output = dir.path().join("out");
    neardup_ok(&[
        "match",
        "--signatures",
        path_str(&input),
        "--output",
        path_str(&output),
        "--cluster",
        "standalone",
        "--quiet",
    ]);
    let mut pairs = crate::common::pairs_of(&output).await;
    pairs.sort_unstable();
    let expected = brute_force_pairs(&rows, 3);
    assert!(expected.len() > 1000);
    assert_eq!(pairs, expected);
    assert_eq!(groups_of(&output).await, bfs_groups(&rows, &expected));
}

/// A server process, stopped when the test ends however it ends.
struct Server {
    child: Child,
    log: PathBuf,
}

impl Server {
    fn start(args: &[&str], log: PathBuf) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(args)
            // Ballista's executors log each task they finish at this level.
            .env("RUST_LOG", "ballista_executor=info")
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .expect("the neardup binary starts");
        Server { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on now (the OS picks it, so parallel test runs do not clash).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The first line of a server's log that contains `text`, waiting up to a minute for it.
fn wait_for(server: &Server, text: &str) -> String {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if let Some(line) = server.log().lines().find(|l| l.contains(text)) {
            return line.to_string();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no '{text}' in the log:\n{}", server.log());
}

/// The port the scheduler printed it listens on (it was started on port 0).
fn scheduler_port(scheduler: &Server) -> u16 {
    let line = wait_for(scheduler, "scheduler listening on");
    line.rsplit(':').next().unwrap().trim().parse().unwrap()
}

#[tokio::test]
async fn a_scheduler_and_two_executor_processes_give_the_outputs_of_a_local_run() {
    let dir = tempfile::tempdir().unwrap();
    let scheduler = Server::start(
        &["scheduler", "--bind", "127.0.0.1:0"],
        dir.path().join("scheduler.log"),
    );
    let port = scheduler_port(&scheduler);
    let scheduler_address = format!("127.0.0.1:{port}");
    let mut executors = Vec::new();
    for n in 0..2 {
        let work = dir.path().join(format!("executor{n}"));
        std::fs::create_dir(&work).unwrap();
        let bind = format!("127.0.0.1:{}", free_port());
        executors.push(Server::start(
            &[
                "executor",
                "--scheduler",
                &scheduler_address,
                "--bind",
                &bind,
                "--concurrent-tasks",
                "1",
                "--work-dir",
                path_str(&work),
            ],
            dir.path().join(format!("executor{n}.log")),
        ));
    }

    for executor in &executors {
        wait_for(executor, "Starting poll work loop with scheduler");
    }

    let (local, clustered) = (dir.path().join("local"), dir.path().join("clustered"));
    run_sample(&local, &[]);
    let cluster = format!("df://{scheduler_address}");
    let input = fixture("sample.parquet");
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "run",
            "--input",
            path_str(&input),
            "--output",
            path_str(&clustered),
            "--cluster",
            &cluster,
            "--threads",
            "4",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "run --cluster failed:\n{}\nscheduler:\n{}\nexecutor 0:\n{}\nexecutor 1:\n{}",
        String::from_utf8_lossy(&out.stderr),
        scheduler.log(),
        executors[0].log(),
        executors[1].log()
    );
    assert_same_outputs(&local, &clustered).await;
    // Both executors ran tasks.
    for (n, executor) in executors.iter().enumerate() {
        assert!(
            executor.log().contains("Finished task"),
            "executor {n} ran no task:\n{}",
            executor.log()
        );
    }
    assert_eq!(summary(&clustered)["parameters"]["cluster"], cluster);
}

#[test]
fn an_unreachable_scheduler_is_named_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    let cluster = format!("df://127.0.0.1:{}", free_port());
    let input = fixture("sample.parquet");
    let out = crate::common::neardup(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&output),
        "--cluster",
        &cluster,
    ]);
    let message = crate::common::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{message}");
    assert!(
        message.contains("cannot reach the Ballista scheduler"),
        "{message}"
    );
    assert!(!output.exists());
}
