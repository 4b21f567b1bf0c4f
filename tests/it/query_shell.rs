//! `neardup query`'s interactive shell, driven through a real pseudo-terminal: util-linux's
//! `script` runs the binary on a terminal of its own and passes our keys to it.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{neardup_ok, path_str, run_sample};

/// How long the shell may take to answer one line (a cold start of DataFusion included).
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// The shell on a pseudo-terminal, with everything it has printed so far.
struct Terminal {
    child: Child,
    keys: ChildStdin,
    screen: Arc<Mutex<Vec<u8>>>,
    /// How much of the screen earlier `expect`s consumed.
    seen: usize,
}

impl Terminal {
    fn open(args: &[&str], history: &Path) -> Self {
        // `exec`: no shell stays between script and neardup, to catch the Ctrl-C of a test too
        // and exit 130 when neardup goes on.
        let command = std::iter::once(env!("CARGO_BIN_EXE_neardup"))
            .chain(args.iter().copied())
            .map(shell_quote)
            .fold("exec".to_string(), |line, word| format!("{line} {word}"));
        let mut child = Command::new("script")
            .args(["--quiet", "--return", "--command", &command, "/dev/null"])
            .env("TERM", "xterm")
            .env("SHELL", "/bin/sh")
            .env("NEARDUP_HISTORY", history)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("util-linux's script runs (package bsdutils)");
        let keys = child.stdin.take().unwrap();
        let mut output = child.stdout.take().unwrap();
        let screen = Arc::new(Mutex::new(Vec::new()));
        let filled = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = output.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                filled.lock().unwrap().extend_from_slice(&buffer[..n]);
            }
        });
        Self {
            child,
            keys,
            screen,
            seen: 0,
        }
    }

    /// Waits until the screen shows `text` after what was already seen; returns what came up to
    /// and including it.
    fn expect(&mut self, text: &str) -> String {
        let started = Instant::now();
        loop {
            let screen = String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned();
            if let Some(at) = screen[self.seen.min(screen.len())..].find(text) {
                let end = self.seen + at + text.len();
                let shown = screen[self.seen..end].to_string();
                self.seen = end;
                return shown;
            }
            assert!(
                started.elapsed() < ANSWER_WITHIN,
                "the shell never showed {text:?}; the screen so far:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types `keys` (a `\r` is Enter).
    fn type_keys(&mut self, keys: &str) {
        self.keys.write_all(keys.as_bytes()).unwrap();
        self.keys.flush().unwrap();
    }

    /// Waits for the shell to end; returns its exit status and the whole screen.
    fn wait(mut self) -> (std::process::ExitStatus, String) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // The reader may still be copying the last output.
                std::thread::sleep(Duration::from_millis(100));
                let screen = String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned();
                return (status, screen);
            }
            if started.elapsed() > ANSWER_WITHIN {
                let _ = self.child.kill();
                panic!(
                    "the shell did not end; the screen:\n{}",
                    String::from_utf8_lossy(&self.screen.lock().unwrap())
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[test]
fn the_shell_runs_statements_over_lines_lists_tables_and_keeps_history() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    run_sample(&output, &[]);
    let groups = neardup_ok(&[
        "query",
        "--data",
        path_str(&output),
        "--format",
        "csv",
        "SELECT count(*) AS n FROM groups",
    ]);
    let groups = groups.lines().nth(1).expect("a count").to_string();
    let history = dir.path().join("history");

    let mut shell = Terminal::open(&["query", "--data", path_str(&output)], &history);
    let banner = shell.expect("neardup> ");
    assert!(
        banner.contains("groups") && banner.contains("pairs"),
        "{banner}"
    );

    // A statement over two lines runs when its ';' is typed, and says how many rows it made.
    shell.type_keys("SELECT count(*) AS n\r");
    shell.type_keys("FROM groups;\r");
    let answer = shell.expect("1 row in");
    assert!(answer.contains(&format!("| {groups} ")), "{answer}");
    shell.expect("neardup> ");

    shell.type_keys("\\d\r");
    let tables = shell.expect("neardup> ");
    for table in ["corpus", "groups", "pairs", "signatures"] {
        assert!(tables.contains(table), "{table} missing from:\n{tables}");
    }
    shell.type_keys("\\d groups\r");
    let columns = shell.expect("neardup> ");
    assert!(columns.contains("representative_id"), "{columns}");

    // An error is reported and the shell goes on.
    shell.type_keys("SELECT * FROM no_such_table;\r");
    let refused = shell.expect("neardup> ");
    assert!(refused.contains("no_such_table"), "{refused}");
    shell.type_keys("\\nonsense\r");
    let unknown = shell.expect("neardup> ");
    assert!(unknown.contains("unknown shell command"), "{unknown}");

    // Ctrl-C clears a half-typed line.
    shell.type_keys("SELECT 'never run'");
    shell.type_keys("\x03");
    shell.expect("neardup> ");

    // Ctrl-C during a query stops that query, not the shell.
    shell.type_keys("SELECT count(*) FROM generate_series(1, 100000000000);\r");
    std::thread::sleep(Duration::from_millis(1500));
    shell.type_keys("\x03");
    shell.expect("query stopped");
    shell.expect("neardup> ");
    shell.type_keys("SELECT 41 + 1 AS answer;\r");
    let answer = shell.expect("1 row in");
    assert!(answer.contains("| 42 "), "{answer}");
    shell.expect("neardup> ");

    shell.type_keys("\\q\r");
    let (status, screen) = shell.wait();
    assert!(status.success(), "{status:?}:\n{screen}");

    // The history holds whole statements, the two-line one included.
    let kept = std::fs::read_to_string(&history).unwrap();
    assert!(kept.contains("SELECT count(*) AS n"), "{kept}");
    assert!(kept.contains("FROM groups;"), "{kept}");
    assert!(kept.contains("\\d groups"), "{kept}");
    assert!(!kept.contains("never run"), "{kept}");
}

#[test]
fn the_shell_refuses_out_and_ends_at_end_of_input() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    let target = dir.path().join("result.csv");
    let mut refused = Terminal::open(&["query", "--out", path_str(&target)], &history);
    refused.expect("--out needs SQL");
    let (status, screen) = refused.wait();
    assert_eq!(status.code(), Some(2), "{screen}");
    assert!(!target.exists());

    // Ctrl-D on an empty line leaves, as \q does.
    let mut shell = Terminal::open(&["query"], &history);
    let banner = shell.expect("neardup> ");
    assert!(banner.contains("no tables"), "{banner}");
    shell.type_keys("\x04");
    let (status, screen) = shell.wait();
    assert!(status.success(), "{status:?}:\n{screen}");
}
