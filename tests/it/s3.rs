//! A real S3-compatible server on loopback for the object-store tests: moto in server mode (from
//! PyPI; `.ci/run` installs it), one server per test, its own bucket per test, stopped when the
//! test ends. The tests put and read objects with their own client (boto3, installed with moto:
//! `s3_client.py`), so what they check does not go through neardup's client.
//!
//! Where no moto_server is found the tests that need one say so and pass without running,
//! unless `NEARDUP_REQUIRE_S3` is set (CI sets it), when they fail.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{path_str, succeeded};

pub struct S3Server {
    child: Child,
    pub port: u16,
    /// The Python beside moto_server, which has boto3.
    python: PathBuf,
}

/// The moto_server to start: `NEARDUP_MOTO_SERVER`, the venv `.ci/run` makes, or one on PATH.
fn moto_server() -> Option<PathBuf> {
    if let Some(given) = std::env::var_os("NEARDUP_MOTO_SERVER") {
        return Some(PathBuf::from(given));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let venv = home.map(|h| h.join(".cache/neardup/venv/bin/moto_server"));
    if let Some(venv) = venv.filter(|p| p.is_file()) {
        return Some(venv);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("moto_server"))
        .find(|p| p.is_file())
}

impl S3Server {
    /// Starts a server, or returns `None` (after saying why) when there is none to start and
    /// CI does not require one. `extra_env` goes to the server (e.g. to make it check
    /// credentials).
    pub fn start(test: &str, extra_env: &[(&str, &str)]) -> Option<S3Server> {
        let Some(program) = moto_server() else {
            if std::env::var_os("NEARDUP_REQUIRE_S3").is_some() {
                panic!("{test}: NEARDUP_REQUIRE_S3 is set but no moto_server was found");
            }
            eprintln!(
                "{test}: skipped: no moto_server (pip install 'moto[server]', or set \
                 NEARDUP_MOTO_SERVER)"
            );
            return None;
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(&program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .envs(extra_env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server starts");
        let python = program.with_file_name("python");
        let server = S3Server {
            child,
            port,
            python,
        };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "moto_server did not listen on {port} within 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(server)
    }

    /// A server whose bucket `lake` holds the sample at `in/sample.parquet`.
    pub fn with_sample(test: &str) -> Option<S3Server> {
        let server = S3Server::start(test, &[])?;
        server.create_bucket("lake");
        let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample.parquet");
        server.put_file("lake", "in/sample.parquet", &sample);
        Some(server)
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment a neardup process needs to reach this server.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID".into(), "neardup-test".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "neardup-test-secret".into()),
            ("AWS_REGION".into(), "us-east-1".into()),
            ("AWS_ENDPOINT_URL".into(), self.endpoint()),
            ("AWS_ALLOW_HTTP".into(), "true".into()),
        ]
    }

    /// Runs the neardup binary with this server's environment.
    pub fn neardup(&self, args: &[&str]) -> Output {
        self.neardup_with(args, &[])
    }

    /// Runs the binary with this server's environment, then `extra` on top.
    pub fn neardup_with(&self, args: &[&str], extra: &[(&str, &str)]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(args)
            .envs(self.env())
            .envs(extra.iter().copied())
            .output()
            .expect("the neardup binary runs")
    }

    /// Like `neardup`, insisting on success; returns standard output.
    pub fn neardup_ok(&self, args: &[&str]) -> String {
        succeeded(args, self.neardup(args))
    }

    /// Runs the tests' own S3 client (`s3_client.py`, boto3 beside moto) with `args`.
    fn client(&self, args: &[&str], input: Option<&[u8]>) -> Output {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/s3_client.py");
        let mut child = Command::new(&self.python)
            .arg(script)
            .arg(self.endpoint())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the S3 test client starts");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(input.unwrap_or_default()).expect("send");
        }
        child.wait_with_output().expect("the S3 test client ends")
    }

    fn client_ok(&self, args: &[&str], input: Option<&[u8]>) -> Vec<u8> {
        let out = self.client(args, input);
        assert!(
            out.status.success(),
            "s3_client {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    pub fn create_bucket(&self, bucket: &str) {
        self.client_ok(&["create", bucket], None);
    }

    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        self.client_ok(&["put", bucket, key, "-"], Some(bytes));
    }

    pub fn put_file(&self, bucket: &str, key: &str, file: &Path) {
        self.put(bucket, key, &std::fs::read(file).expect("read the file"));
    }

    /// The object's bytes, or `None` when there is none.
    pub fn get(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let out = self.client(&["get", bucket, key], None);
        match out.status.code() {
            Some(0) => Some(out.stdout),
            Some(3) => None,
            _ => panic!(
                "s3_client get {bucket}/{key}: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }

    /// Every key under `prefix`, sorted.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let out = self.client_ok(&["keys", bucket, prefix], None);
        String::from_utf8_lossy(&out)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Copies every object under `prefix` into `dir` (keys relative to the prefix), so that
    /// the test reads them with its own Parquet reader.
    pub fn download(&self, bucket: &str, prefix: &str, dir: &Path) {
        self.client_ok(&["download", bucket, prefix, path_str(dir)], None);
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
