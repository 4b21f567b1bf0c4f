//! neardup processes that a test starts and that outlive one call: a scheduler and executors
//! on loopback (`neardup scheduler`, `neardup executor`) and clients run under a deadline. Each
//! is killed when the test ends however it ends, its standard error in a log file.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::common::path_str;

/// A neardup process, killed when the test ends however it ends.
pub struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    /// A scheduler or an executor: the binary with `args`, standard error into `log`, and
    /// `RUST_LOG` set so that Ballista's executors log each task they receive and finish (at
    /// info) and the scheduler each executor it finds dead (at warn); `env` on top of this
    /// process's environment.
    pub fn server_with_env(args: &[&str], log: PathBuf, env: &[(String, String)]) -> Self {
        Self::start(
            args,
            log,
            Some("ballista_executor=info,ballista_scheduler=info"),
            env,
        )
    }

    /// A client (`neardup run`, ...): the binary with `args`, standard error into `log`.
    pub fn client(args: &[&str], log: PathBuf) -> Self {
        Self::start(args, log, None, &[])
    }

    fn start(
        args: &[&str],
        log: PathBuf,
        rust_log: Option<&str>,
        env: &[(String, String)],
    ) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_neardup"));
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap());
        if let Some(rust_log) = rust_log {
            command.env("RUST_LOG", rust_log);
        }
        let child = command.spawn().expect("the neardup binary starts");
        Process { child, log }
    }

    /// What the process has written to standard error so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `signal` (`-TERM`, `-INT`) with the `kill` command.
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill {signal} failed");
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn has_ended(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }

    /// Waits for the process to end; kills it at `deadline` and returns `None` then.
    pub fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                self.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port nobody listens on now (the OS picks it, so parallel test runs do not clash).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The first line of a process's log that contains `text`, waiting up to a minute for it.
pub fn wait_for(process: &Process, text: &str) -> String {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if let Some(line) = process.log().lines().find(|l| l.contains(text)) {
            return line.to_string();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no '{text}' in the log:\n{}", process.log());
}

/// The port in the first line of `process`'s log that says `words ADDRESS:PORT ...` (a
/// scheduler's `scheduler listening on`, an executor's `executor on`), waiting for it.
pub fn port_after(process: &Process, words: &str) -> u16 {
    let line = wait_for(process, words);
    line.split(words)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|address| address.rsplit(':').next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no port after '{words}' in '{line}'"))
}

/// The port the scheduler printed it listens on (it was started on port 0).
fn scheduler_port(scheduler: &Process) -> u16 {
    port_after(scheduler, "scheduler listening on ")
}

/// A scheduler on a free loopback port with `extra` flags, logging to `dir/scheduler.log`, and
/// its `127.0.0.1:port`.
pub fn start_scheduler(dir: &Path, extra: &[&str]) -> (Process, String) {
    start_scheduler_with_env(dir, extra, &[])
}

/// `start_scheduler` with `env` set for the scheduler.
pub fn start_scheduler_with_env(
    dir: &Path,
    extra: &[&str],
    env: &[(String, String)],
) -> (Process, String) {
    let mut args = vec!["scheduler", "--bind", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let scheduler = Process::server_with_env(&args, dir.join("scheduler.log"), env);
    let port = scheduler_port(&scheduler);
    (scheduler, format!("127.0.0.1:{port}"))
}

/// Executor number `n` of one task slot, working for `scheduler` (its `host:port`) with `extra`
/// flags, in `dir/executor<n>` and logging to `dir/executor<n>.log`.
pub fn start_executor(dir: &Path, n: usize, scheduler: &str, extra: &[&str]) -> Process {
    start_executor_with_env(dir, n, scheduler, extra, &[])
}

/// `start_executor` with `env` set for the executor.
pub fn start_executor_with_env(
    dir: &Path,
    n: usize,
    scheduler: &str,
    extra: &[&str],
    env: &[(String, String)],
) -> Process {
    let work = dir.join(format!("executor{n}"));
    std::fs::create_dir_all(&work).unwrap();
    let bind = format!("127.0.0.1:{}", free_port());
    let mut args = vec![
        "executor",
        "--scheduler",
        scheduler,
        "--bind",
        &bind,
        "--concurrent-tasks",
        "1",
        "--work-dir",
        path_str(&work),
    ];
    args.extend_from_slice(extra);
    Process::server_with_env(&args, dir.join(format!("executor{n}.log")), env)
}

/// `count` executors working for `scheduler`, once each polls it for work.
pub fn start_executors(dir: &Path, count: usize, scheduler: &str) -> Vec<Process> {
    start_executors_with_env(dir, count, scheduler, &[])
}

/// `start_executors` with `env` set for each executor.
pub fn start_executors_with_env(
    dir: &Path,
    count: usize,
    scheduler: &str,
    env: &[(String, String)],
) -> Vec<Process> {
    let executors: Vec<Process> = (0..count)
        .map(|n| start_executor_with_env(dir, n, scheduler, &[], env))
        .collect();
    for executor in &executors {
        wait_for(executor, "Starting poll work loop with scheduler");
    }
    executors
}
