//! Inputs laid out to trip up the search for files: symlink loops in an input folder. Each test
//! names the row of docs/ROBUSTNESS.md it checks. A regression here would hang rather than fail,
//! so every run of the binary is killed after a time limit.
#![cfg(unix)]

use std::io::Read;
use std::os::unix::fs::symlink;
use std::process::{Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::{fixture, path_str, summary};

/// Far more than a run on the sample takes; a search that follows a loop never finishes.
const LIMIT: Duration = Duration::from_secs(60);

/// Runs the `neardup` binary with `args`; kills it and fails the test if it has not finished
/// within `limit`.
fn neardup_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the neardup binary runs");
    // Read both pipes while waiting, so a chatty child cannot block on a full pipe.
    let stdout = drain(child.stdout.take().expect("stdout"));
    let stderr = drain(child.stderr.take().expect("stderr"));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for neardup") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "neardup {args:?} did not finish within {limit:?}; killed (a symlink loop followed?)"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: stdout.join().expect("stdout reader").expect("read stdout"),
        stderr: stderr.join().expect("stderr reader").expect("read stderr"),
    }
}

/// Reads a pipe to its end on a thread of its own.
fn drain<R: Read + Send + 'static>(mut pipe: R) -> JoinHandle<std::io::Result<Vec<u8>>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        pipe.read_to_end(&mut bytes).map(|_| bytes)
    })
}

/// [`neardup_within`] with [`LIMIT`], insisting on success; returns (stdout, stderr).
fn neardup_ok_within(args: &[&str]) -> (String, String) {
    let out = neardup_within(args, LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "neardup {args:?} failed with {:?}:\n{stderr}",
        out.status.code()
    );
    (String::from_utf8(out.stdout).expect("utf-8 output"), stderr)
}

/// The CSV result of `sql` over an output folder.
fn csv(output: &std::path::Path, sql: &str) -> String {
    neardup_ok_within(&["query", "--data", path_str(output), "--format", "csv", sql]).0
}

/// Row "symlink loop in an input folder": two links to `.` beside the sample, read as a folder
/// and as a `**` glob, give the run on the sample itself, with a warning naming each link.
#[test]
fn symlink_loops_in_an_input_folder_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    let copy = corpus.join("sample.parquet");
    std::fs::copy(fixture("sample.parquet"), &copy).unwrap();
    symlink(".", corpus.join("l1")).unwrap();
    symlink(".", corpus.join("l2")).unwrap();

    let direct = dir.path().join("direct");
    let sample = fixture("sample.parquet");
    neardup_ok_within(&[
        "run",
        "--input",
        path_str(&sample),
        "--output",
        path_str(&direct),
    ]);
    let pattern = corpus.join("**").join("*.parquet");
    let expected_groups = csv(
        &direct,
        "SELECT group_id, id, representative_id, group_size FROM groups ORDER BY group_id, id",
    );
    assert!(expected_groups.lines().count() > 1, "{expected_groups}");

    for (name, input) in [("folder", &corpus), ("glob", &pattern)] {
        let output = dir.path().join(name);
        let (_, stderr) = neardup_ok_within(&[
            "run",
            "--input",
            path_str(input),
            "--output",
            path_str(&output),
        ]);
        for link in ["l1", "l2"] {
            let named = stderr
                .lines()
                .filter(|l| {
                    l.starts_with("neardup: warning: ") && l.contains(&format!("corpus/{link} "))
                })
                .count();
            assert_eq!(named, 1, "{name}: one warning naming {link}:\n{stderr}");
        }
        let run = summary(&output);
        assert_eq!(run["inputs"].as_array().unwrap().len(), 1, "{name}: {run}");
        assert_eq!(run["inputs"][0], path_str(&copy), "{name}");
        assert_eq!(run["counts"], summary(&direct)["counts"], "{name}");
        assert_eq!(
            csv(&output, "SELECT count(*) AS n FROM signatures"),
            "n\n20\n",
            "{name}"
        );
        assert_eq!(
            csv(
                &output,
                "SELECT group_id, id, representative_id, group_size FROM groups ORDER BY group_id, id",
            ),
            expected_groups,
            "{name}"
        );
    }
}

/// Row "symlink loop in an input folder", its last case: a file named again by another path
/// (through `..`, or a symlink beside it), given as several `--input`s, is read once, under its
/// first name, and the run is the run on the file alone.
#[test]
fn a_file_named_again_by_another_path_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    let copy = corpus.join("sample.parquet");
    std::fs::copy(fixture("sample.parquet"), &copy).unwrap();
    symlink(&copy, corpus.join("link.parquet")).unwrap();
    let again = corpus.join("..").join("corpus").join("sample.parquet");

    let direct = dir.path().join("direct");
    neardup_ok_within(&[
        "run",
        "--input",
        path_str(&copy),
        "--output",
        path_str(&direct),
    ]);
    let output = dir.path().join("named_thrice");
    neardup_ok_within(&[
        "run",
        "--input",
        path_str(&copy),
        "--input",
        path_str(&again),
        "--input",
        path_str(&corpus.join("link.parquet")),
        "--input",
        path_str(&corpus),
        "--output",
        path_str(&output),
    ]);
    let run = summary(&output);
    assert_eq!(run["inputs"].as_array().unwrap().len(), 1, "{run}");
    assert_eq!(run["inputs"][0], path_str(&copy));
    assert_eq!(run["counts"], summary(&direct)["counts"]);
    let pairs = "SELECT id_a, id_b, distance FROM pairs ORDER BY 1, 2";
    assert_eq!(csv(&output, pairs), csv(&direct, pairs));
    assert_eq!(
        csv(
            &output,
            "SELECT count(*) AS n FROM pairs WHERE id_a >= id_b"
        ),
        "n\n0\n"
    );
}
