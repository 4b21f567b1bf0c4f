//! Azure Blob Storage on loopback for the Azure tests: Azurite, Microsoft's emulator (from npm;
//! `.ci/run` installs it), one per test, with the tests' own client (`azure_client.py`,
//! azure-storage-blob in the venv beside moto).
//!
//! Where no Azurite is found the tests that need one say so and pass without running, unless
//! `NEARDUP_REQUIRE_AZURITE` is set (CI sets it), when they fail.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{path_str, succeeded};

pub struct Azurite {
    child: Child,
    port: u16,
    /// The venv's Python, which has azure-storage-blob.
    python: PathBuf,
    _data: tempfile::TempDir,
}

/// `NEARDUP_AZURITE` (the azurite-blob program), or the copy `.ci/run` installs.
fn azurite_blob() -> Option<PathBuf> {
    if let Some(given) = std::env::var_os("NEARDUP_AZURITE") {
        return Some(PathBuf::from(given));
    }
    let home = PathBuf::from(std::env::var_os("HOME")?);
    let installed = home.join(".cache/neardup/azurite/node_modules/.bin/azurite-blob");
    installed.is_file().then_some(installed)
}

/// The Python beside moto_server (`s3.rs`), whose venv has azure-storage-blob too.
fn venv_python() -> PathBuf {
    if let Some(moto) = std::env::var_os("NEARDUP_MOTO_SERVER") {
        return PathBuf::from(moto).with_file_name("python");
    }
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    home.join(".cache/neardup/venv/bin/python")
}

impl Azurite {
    pub fn start(test: &str) -> Option<Azurite> {
        let Some(program) = azurite_blob() else {
            if std::env::var_os("NEARDUP_REQUIRE_AZURITE").is_some() {
                panic!("{test}: NEARDUP_REQUIRE_AZURITE is set but no azurite-blob was found");
            }
            eprintln!(
                "{test}: skipped: no azurite-blob (npm install azurite, or set NEARDUP_AZURITE)"
            );
            return None;
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let data = tempfile::tempdir().expect("a folder for Azurite");
        let child = Command::new(&program)
            .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            .arg("--location")
            .arg(data.path())
            .args(["--silent", "--skipApiVersionCheck", "--loose"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("azurite-blob starts");
        let azurite = Azurite {
            child,
            port,
            python: venv_python(),
            _data: data,
        };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "azurite-blob did not listen on {port} within 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(azurite)
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What a neardup process needs to reach the emulator: its development account, whose key
    /// object_store knows.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AZURE_STORAGE_USE_EMULATOR".into(), "true".into()),
            ("AZURITE_BLOB_STORAGE_URL".into(), self.endpoint()),
            (
                "AZURE_STORAGE_ACCOUNT_NAME".into(),
                "devstoreaccount1".into(),
            ),
        ]
    }

    pub fn neardup_ok(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(args)
            .envs(self.env())
            .output()
            .expect("the neardup binary runs");
        succeeded(args, out)
    }

    fn client(&self, args: &[&str]) -> Output {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/azure_client.py");
        Command::new(&self.python)
            .arg(script)
            .arg(self.endpoint())
            .args(args)
            .output()
            .expect("the Azure test client runs")
    }

    fn client_ok(&self, args: &[&str]) -> Vec<u8> {
        let out = self.client(args);
        assert!(
            out.status.success(),
            "azure_client {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    pub fn create_container(&self, container: &str) {
        self.client_ok(&["create", container]);
    }

    pub fn put_file(&self, container: &str, name: &str, file: &Path) {
        self.client_ok(&["put", container, name, path_str(file)]);
    }

    pub fn get(&self, container: &str, name: &str) -> Option<Vec<u8>> {
        let out = self.client(&["get", container, name]);
        match out.status.code() {
            Some(0) => Some(out.stdout),
            Some(3) => None,
            _ => panic!("azure_client get: {}", String::from_utf8_lossy(&out.stderr)),
        }
    }

    pub fn keys(&self, container: &str, prefix: &str) -> Vec<String> {
        let out = self.client_ok(&["keys", container, prefix]);
        String::from_utf8_lossy(&out)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }

    pub fn download(&self, container: &str, prefix: &str, dir: &Path) {
        self.client_ok(&["download", container, prefix, path_str(dir)]);
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
