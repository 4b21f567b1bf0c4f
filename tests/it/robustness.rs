//! Bad input and failures through the binary: odd texts, huge documents, corrupt files, empty
//! and degenerate corpora, full and read-only disks, interruptions, panics. Each test names the
//! row of docs/ROBUSTNESS.md it checks.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Int64Type;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::file::metadata::{
    ColumnChunkMetaDataBuilder, FileMetaData, ParquetMetaData, ParquetMetaDataReader,
    ParquetMetaDataWriter,
};

use crate::common::{
    Tmpfs, failing_sample_run, fixture, make_parquet, neardup, neardup_ok, path_str, query, stderr,
    summary,
};

fn count(batches: &[datafusion::arrow::array::RecordBatch]) -> i64 {
    batches[0].column(0).as_primitive::<Int64Type>().value(0)
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("neardup-staging"))
        .collect()
}

#[tokio::test]
async fn odd_texts_have_no_fingerprint_and_mixed_scripts_match() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("odd.parquet");
    let mixed =
        "Debian 是一个自由的操作系统，包含 free software 和 Привет мир 以及 code: fn main() {}";
    make_parquet(
        &input,
        &format!(
            "SELECT * FROM (VALUES (1, NULL), (2, ''), (3, ' \t\n '), (4, '!!! ??? ...'), \
             (5, '😀🎉👍'), (6, chr(1) || chr(2) || chr(27)), (7, '{mixed}'), (8, '{mixed}')) AS t(id, text)"
        ),
    );
    let output = dir.path().join("out");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&output),
    ]);
    let unsigned = query(
        &output,
        "SELECT count(*) FROM signatures WHERE simhash IS NULL AND id <= 6",
    )
    .await;
    assert_eq!(count(&unsigned), 6);
    let groups = query(
        &output,
        "SELECT count(*) FROM groups WHERE id IN (7, 8) AND representative_id = 7",
    )
    .await;
    assert_eq!(count(&groups), 2);
    let s = summary(&output);
    assert_eq!(s["counts"]["null_texts"], 1);
    assert_eq!(s["counts"]["empty_texts"], 5);
    assert_eq!(s["counts"]["documents_kept"], 7);
}

#[tokio::test]
async fn a_fifty_megabyte_document_is_fingerprinted() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.parquet");
    // 'Debian 软件包 管理 system 发行版 内核 ' is 48 bytes: 1.1M repetitions are 52.8 MB.
    // Six distinct keywords: above min_features, so a SimHash rather than an exact hash.
    make_parquet(
        &input,
        "SELECT 1 AS id, repeat('Debian 软件包 管理 system 发行版 内核 ', 1100000) AS text \
         UNION ALL SELECT 2, repeat('Debian 软件包 管理 system 发行版 内核 ', 1100000) || ' 尾巴' \
         UNION ALL SELECT 3, 'a short unrelated text about cooking rice'",
    );
    let output = dir.path().join("out");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&output),
    ]);
    let bytes = query(&output, "SELECT max(text_bytes) FROM signatures").await;
    let max_bytes = bytes[0]
        .column(0)
        .as_primitive::<datafusion::arrow::datatypes::Int32Type>()
        .value(0);
    assert!(max_bytes > 50_000_000, "{max_bytes}");
    let grouped = query(&output, "SELECT count(*) FROM groups WHERE group_id = 1").await;
    assert_eq!(count(&grouped), 2, "the two huge near-copies are one group");
}

#[test]
fn missing_id_column_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let message = failing_sample_run(dir.path(), &["--id-column", "doc_id"], 1);
    assert!(
        message.contains("no id column 'doc_id'") && message.contains("id, lang, note, text"),
        "{message}"
    );
}

#[test]
fn binary_text_column_is_refused_with_a_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bytes.parquet");
    make_parquet(
        &input,
        "SELECT 1 AS id, arrow_cast('abc', 'Binary') AS text",
    );
    let result = neardup(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&dir.path().join("out")),
    ]);
    assert_eq!(result.status.code(), Some(1));
    let message = stderr(&result);
    assert!(
        message.contains("bytes, not text") && message.contains("bytes.parquet"),
        "{message}"
    );
}

/// A copy of the sample whose data pages are damaged but whose footer is intact.
fn corrupt_copy(dir: &Path) -> PathBuf {
    let mut bytes = std::fs::read(fixture("sample.parquet")).unwrap();
    for byte in &mut bytes[200..2200] {
        *byte = 0x5A;
    }
    let path = dir.join("corrupt.parquet");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn corrupt_truncated_and_empty_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    // Same schema as the sample, other ids, so the bad copies below are the only problem.
    let good = dir.path().join("good.parquet");
    make_parquet(
        &good,
        &format!(
            "SELECT id + 100 AS id, lang, note, text FROM '{}'",
            path_str(&fixture("sample.parquet"))
        ),
    );
    let truncated = dir.path().join("truncated.parquet");
    let bytes = std::fs::read(fixture("sample.parquet")).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let empty = dir.path().join("empty.parquet");
    std::fs::write(&empty, b"").unwrap();
    let corrupt = corrupt_copy(dir.path());
    for (bad, words) in [
        (&truncated, "not a readable Parquet file"),
        (&empty, "is empty (0 bytes)"),
        (&corrupt, "cannot be read"),
    ] {
        // The bad file comes after a good one: the message must still name the bad one.
        let output = dir.path().join("out");
        let result = neardup(&[
            "run",
            "--input",
            path_str(&good),
            path_str(bad),
            "--output",
            path_str(&output),
        ]);
        assert_eq!(result.status.code(), Some(1), "{}", bad.display());
        let message = stderr(&result);
        assert!(
            message.contains(path_str(bad)) && message.contains(words),
            "{message}"
        );
        assert!(!message.contains("panicked"), "{message}");
        assert!(!output.exists());
        assert!(leftovers(dir.path()).is_empty());
    }
}

#[tokio::test]
async fn empty_corpus_gives_valid_empty_tables() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("none.parquet");
    make_parquet(
        &input,
        "SELECT * FROM (VALUES (1, 'x')) AS t(id, text) WHERE id < 0",
    );
    let output = dir.path().join("out");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&output),
    ]);
    for table in ["signatures", "pairs", "groups", "dedup"] {
        let rows = query(&output, &format!("SELECT count(*) FROM {table}")).await;
        assert_eq!(count(&rows), 0, "{table}");
    }
    let columns = query(&output, "SELECT id_a, id_b, distance FROM pairs").await;
    assert!(columns.iter().all(|b| b.num_rows() == 0));
    assert_eq!(summary(&output)["counts"]["documents"], 0);
}

#[tokio::test]
async fn one_document_and_all_identical() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.parquet");
    make_parquet(
        &one,
        "SELECT 'only' AS id, 'a single document about nothing much' AS text",
    );
    let output = dir.path().join("one");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&one),
        "--output",
        path_str(&output),
    ]);
    let s = summary(&output);
    assert_eq!(
        (
            s["counts"]["documents"].as_i64(),
            s["counts"]["groups"].as_i64()
        ),
        (Some(1), Some(0))
    );

    let same = dir.path().join("same.parquet");
    make_parquet(
        &same,
        "SELECT value AS id, 'the same page, served again and again' AS text FROM generate_series(1, 300)",
    );
    let output = dir.path().join("same");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&same),
        "--output",
        path_str(&output),
    ]);
    let s = summary(&output);
    assert_eq!(s["counts"]["groups"], 1);
    assert_eq!(s["counts"]["pairs"], 300 * 299 / 2);
    assert_eq!(s["counts"]["documents_kept"], 1);
    let rep = query(
        &output,
        "SELECT count(*) FROM groups WHERE representative_id = 1 AND group_size = 300",
    )
    .await;
    assert_eq!(count(&rep), 300);
}

#[test]
fn output_that_is_a_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out");
    std::fs::write(&file, "mine").unwrap();
    let result = neardup(&[
        "run",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&file),
        "--overwrite",
    ]);
    assert_eq!(result.status.code(), Some(2));
    assert!(stderr(&result).contains("is a file"), "{}", stderr(&result));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
}

#[test]
fn full_disk_and_read_only_disk_give_clear_errors() {
    let Some(full) = Tmpfs::mount("size=8k") else {
        eprintln!("SKIPPED: this machine does not allow mounting a tmpfs");
        return;
    };
    let output = full.path().join("out");
    let result = neardup(&[
        "run",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&output),
    ]);
    assert_eq!(result.status.code(), Some(1));
    let message = stderr(&result);
    assert!(message.contains("No space left on device"), "{message}");
    // The folder on the full disk is named.
    assert!(message.contains(path_str(full.path())), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(!output.exists());
    assert!(leftovers(full.path()).is_empty(), "staging folder removed");

    let read_only = Tmpfs::mount("size=1m,ro").expect("a second tmpfs mounts when the first did");
    let output = read_only.path().join("out");
    let result = neardup(&[
        "run",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&output),
    ]);
    assert_eq!(result.status.code(), Some(1));
    let message = stderr(&result);
    assert!(
        message.contains("Read-only file system") && message.contains(path_str(read_only.path())),
        "{message}"
    );
}

/// A neardup process paused after a stage; its standard error stays open (a closed pipe would
/// end it on its next message).
struct Paused {
    child: std::process::Child,
    _stderr: std::io::Lines<BufReader<std::process::ChildStderr>>,
}

/// Starts neardup with `args` and `env`, paused for a minute after `stage`, and returns once it
/// says so.
fn start_paused(args: &[&str], env: &[(&str, &Path)], stage: &str) -> Paused {
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .envs(env.iter().copied())
        .env("NEARDUP_PAUSE_AFTER_STAGE", stage)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("the run reaches the pause").unwrap();
        if line.contains("pausing after") {
            break;
        }
    }
    Paused {
        child,
        _stderr: lines,
    }
}

/// Sends `signal` to the paused process and waits for it to end.
fn signal_and_wait(mut paused: Paused, signal: &str) -> std::process::ExitStatus {
    let status = Command::new("kill")
        .args([signal, &paused.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    paused.child.wait().unwrap()
}

/// Starts a run that pauses after `stage`, waits until it says so, and sends it `signal`.
fn interrupt_run(
    input: &Path,
    output: &Path,
    stage: &str,
    signal: &str,
) -> std::process::ExitStatus {
    let args = [
        "run",
        "--input",
        path_str(input),
        "--output",
        path_str(output),
        "--overwrite",
        "--k",
        "0",
    ];
    signal_and_wait(start_paused(&args, &[], stage), signal)
}

/// The files and folders under `dir`, as paths relative to it. A folder that goes while it is
/// walked is listed with what was found in it so far: a cluster's executor removes a finished
/// job's shuffle files while the run that started it is paused.
fn everything_under(dir: &Path) -> Vec<String> {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(next) = todo.pop() {
        let entries = match std::fs::read_dir(&next) {
            Ok(entries) => entries,
            Err(e) if gone(&e) && next != dir => continue,
            Err(e) => panic!("{}: {e}", next.display()),
        };
        for entry in entries {
            let path = match entry {
                Ok(entry) => entry.path(),
                Err(e) if gone(&e) => continue,
                Err(e) => panic!("{}: {e}", next.display()),
            };
            found.push(path.strip_prefix(dir).unwrap().display().to_string());
            if path.is_dir() {
                todo.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Runs the sample with `extra` flags and TMPDIR set to an empty folder: paused after `stage`
/// (where `while_paused` is given what TMPDIR holds) and interrupted with Ctrl-C, after which
/// TMPDIR is empty again; then killed there (`while_paused` is given what it left), then whole,
/// after which TMPDIR is empty again.
fn tmpdir_emptied_after_runs(extra: &[&str], stage: &str, while_paused: impl Fn(&[String])) {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let output = dir.path().join("out");
    let input = fixture("sample.parquet");
    let mut args = vec![
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&output),
    ];
    args.extend_from_slice(extra);
    let paused = start_paused(&args, &[("TMPDIR", &tmp)], stage);
    while_paused(&everything_under(&tmp));
    assert_eq!(signal_and_wait(paused, "-INT").code(), Some(130));
    assert_eq!(everything_under(&tmp), Vec::<String>::new());

    // kill -9: nothing runs, so the folder stays until the next run, which removes it (its
    // process is gone) as it makes its own.
    let paused = start_paused(&args, &[("TMPDIR", &tmp)], stage);
    assert_eq!(signal_and_wait(paused, "-KILL").code(), None);
    let left = everything_under(&tmp);
    while_paused(&left);

    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(&args)
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(output.join("_SUCCESS").exists());
    assert_eq!(everything_under(&tmp), Vec::<String>::new());
}

/// Whether everything in `entries` (paths under TMPDIR) is inside one folder named
/// `neardup-<role>-...`.
fn all_in_one_folder(entries: &[String], role: &str) -> bool {
    !entries.is_empty()
        && entries[0].starts_with(&format!("neardup-{role}-"))
        && entries.iter().all(|p| p.starts_with(&entries[0]))
}

/// `--cluster standalone` writes its shuffle files into a folder of its own in TMPDIR, seen
/// while the run is paused; the folder goes when the run ends, on Ctrl-C, and with the next run
/// after `kill -9`. (Ballista's own standalone executor left them in a `.tmp*` folder after
/// every run.)
#[test]
fn a_standalone_cluster_leaves_no_shuffle_files_in_tmpdir() {
    tmpdir_emptied_after_runs(&["--cluster", "standalone"], "pairs", |during| {
        assert!(
            all_in_one_folder(during, "shuffle") && during.iter().any(|p| p.ends_with(".arrow")),
            "{during:?}"
        );
    });
}

/// A run with --memory-limit spills into a folder of its own in TMPDIR, which goes when the
/// run ends and on Ctrl-C (DataFusion's own spill folders stayed behind an interrupt), and
/// with the next run after `kill -9`.
#[test]
fn spill_folders_go_with_the_run_and_with_ctrl_c() {
    tmpdir_emptied_after_runs(&["--memory-limit", "64M"], "signatures", |during| {
        // DataFusion's spill folder is inside the run's.
        let datafusion = format!("{}/datafusion-", during.first().map_or("", |d| d.as_str()));
        assert!(
            all_in_one_folder(during, "spill") && during.iter().any(|p| p.starts_with(&datafusion)),
            "{during:?}"
        );
        // Beside it, the lock its process holds while it lives.
        let lock = format!("{}.lock", during.first().map_or("", |d| d.as_str()));
        assert!(during.contains(&lock), "{during:?}");
    });
}

#[test]
fn interrupted_runs_leave_the_previous_output_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    let input = fixture("sample.parquet");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&output),
    ]);
    let before = std::fs::read_to_string(output.join("summary.json")).unwrap();

    // Ctrl-C: exit code 130, staging removed, old output as it was.
    let status = interrupt_run(&input, &output, "signatures", "-INT");
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        std::fs::read_to_string(output.join("summary.json")).unwrap(),
        before
    );
    assert!(leftovers(dir.path()).is_empty());

    // kill -9: nothing can run, so the staging folder stays, clearly named and not complete.
    let status = interrupt_run(&input, &output, "pairs", "-KILL");
    assert_eq!(status.code(), None);
    assert_eq!(
        std::fs::read_to_string(output.join("summary.json")).unwrap(),
        before
    );
    let left = leftovers(dir.path());
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(!dir.path().join(&left[0]).join("_SUCCESS").exists());
    // The next run removes what the killed one left.
    neardup_ok(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&output),
        "--overwrite",
    ]);
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_panic_is_reported_as_a_bug_with_exit_code_1() {
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["query", "SELECT 1"])
        .env("NEARDUP_PANIC_FOR_TESTS", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let message = stderr(&out);
    assert!(
        message.contains("internal error, a bug in neardup"),
        "{message}"
    );
    assert!(
        !message.contains("panicked at") && !message.contains("RUST_BACKTRACE"),
        "{message}"
    );
}

#[test]
fn a_panic_in_a_stage_is_still_reported_as_a_bug() {
    // The stages run where a reader's panic on a damaged file is caught and reported as that
    // file's error; a panic of neardup's own is not one, and says so with its place.
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["run", "-q", "--input"])
        .arg(fixture("sample.parquet"))
        .arg("--output")
        .arg(&output)
        .env("NEARDUP_PANIC_AFTER_STAGE", "signatures")
        .output()
        .unwrap();
    let message = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{message}");
    assert!(
        message.contains(
            "internal error, a bug in neardup; please report it: injected by \
             NEARDUP_PANIC_AFTER_STAGE after signatures (src/job/stopwatch.rs:"
        ),
        "{message}"
    );
    assert!(!message.contains("damaged"), "{message}");
    assert!(!output.exists());
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn usage_errors_exit_with_2() {
    let result = neardup(&["run", "--output", "x"]);
    assert_eq!(result.status.code(), Some(2));
    let result = neardup(&["run", "--input", "x", "--output", "y", "--k", "many"]);
    assert_eq!(result.status.code(), Some(2));
    assert!(stderr(&result).contains("--k"), "{}", stderr(&result));
    // A cluster runs the SQL clustering (at 64 or 128 bits, against an index or not:
    // tests/it/cluster.rs), without a local memory limit; an address must say where the
    // scheduler is. Refused before any work.
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    for extra in [
        &["--cluster", "standalone", "--clustering", "union-find"][..],
        &["--cluster", "standalone", "--memory-limit", "1G"],
        &["--cluster", "localhost:50050", "--index", path_str(&index)],
    ] {
        let message = failing_sample_run(dir.path(), extra, 2);
        assert!(message.contains("--cluster"), "{extra:?}: {message}");
    }
    assert!(!index.exists());
}

/// Row "standard error or output closed by its reader": a run whose stage lines and summary go
/// to pipes nobody reads (`neardup run ... 2>&1 | head -1` once head has its line) finishes and
/// commits its output; the lines are dropped, no panic, nothing left beside the output.
#[test]
fn a_closed_stderr_or_stdout_does_not_stop_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    for (closed, args) in [("stderr", &["-v"][..]), ("stdout", &[][..])] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["run", "--input", path_str(&fixture("sample.parquet"))])
            .args(["--output", path_str(&output), "--overwrite"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away at once: every write to that stream fails with EPIPE.
        let kept = if closed == "stderr" {
            drop(child.stderr.take());
            child.stdout.take().map(std::io::read_to_string)
        } else {
            drop(child.stdout.take());
            child.stderr.take().map(std::io::read_to_string)
        };
        let kept = kept.unwrap().unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{closed} closed: {kept}");
        assert!(!kept.contains("internal error"), "{kept}");
        assert!(output.join("_SUCCESS").is_file(), "{closed} closed");
        assert_eq!(summary(&output)["counts"]["groups"], 4, "{closed} closed");
        assert!(leftovers(dir.path()).is_empty(), "{closed} closed");
    }
}

/// Row "standard error or output closed by its reader": `query`'s result read in part
/// (`neardup query ... | head -c 100`) ends the query, exit 0 and nothing said, in every format
/// (before, each failed with "Broken pipe" once the result outgrew the pipe); a result that
/// cannot be written for another reason (`> /dev/full`) is still an error.
#[test]
fn a_query_result_read_in_part_is_no_error() {
    use std::io::Read;
    for format in ["table", "csv", "tsv", "ndjson", "json"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["query", "--format", format, "--maxrows", "inf"])
            .arg("SELECT value, 'some words to fill the pipe' AS text FROM generate_series(1, 300000)")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 100];
        stdout.read_exact(&mut first).unwrap();
        drop(stdout);
        let mut message = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut message)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{format}: {message}");
        assert!(message.is_empty(), "{format}: {message}");
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let result = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["query", "--format", format, "SELECT 1 AS one"])
            .stdout(full)
            .output()
            .unwrap();
        let message = stderr(&result);
        assert_eq!(result.status.code(), Some(1), "{format}: {message}");
        assert!(message.contains("standard output"), "{format}: {message}");
    }
}

/// Row "standard error or output closed by its reader", its last sentence: `plan`'s answer
/// written to a full device fails the command, where a reader that went away does not.
#[test]
fn an_answer_that_cannot_be_written_is_an_error() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let result = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["plan", "--docs", "1000000", "--k", "3"])
        .stdout(full)
        .output()
        .unwrap();
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(1), "{message}");
    assert!(message.contains("standard output"), "{message}");
    assert!(!message.contains("internal error"), "{message}");
}

/// Row "a corpus in JSON Lines or CSV": a file whose name does not say its format, run with
/// `--input-format jsonl`, is read as JSON Lines again by the commands that open the run
/// (before, they read it as Parquet and every query of the output failed); a JSON line that
/// is cut is named by its line in the whole file.
#[test]
fn a_run_of_a_file_named_without_its_format_opens_as_it_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("export.dat");
    let lines: String = (0..60)
        .map(|i| {
            format!(
                "{{\"id\":\"d{i}\",\"text\":\"page {} of the manual\"}}\n",
                i % 7
            )
        })
        .collect();
    std::fs::write(&input, &lines).unwrap();
    let out = dir.path().join("out");
    neardup_ok(&[
        "run",
        "-q",
        "--input",
        path_str(&input),
        "--input-format",
        "jsonl",
        "--output",
        path_str(&out),
    ]);
    let counted = neardup_ok(&[
        "query",
        "--data",
        path_str(&out),
        "--format",
        "csv",
        "SELECT count(*) AS n FROM corpus",
    ]);
    assert_eq!(counted, "n\n60\n");

    // The file with line `at` (from 1) replaced by `line`: the run's error, after checking it
    // failed with exit 1.
    let failing_with = |at: usize, line: &str, output: &str| {
        let mut lines: Vec<&str> = lines.lines().collect();
        lines[at - 1] = line;
        std::fs::write(&input, lines.join("\n")).unwrap();
        let failed = neardup(&[
            "run",
            "--input",
            path_str(&input),
            "--input-format",
            "jsonl",
            "--output",
            path_str(&dir.path().join(output)),
        ]);
        let message = stderr(&failed);
        assert_eq!(failed.status.code(), Some(1), "{message}");
        message
    };
    // Line 51 cut short: the reader's own message counts lines within its chunk.
    let message = failing_with(51, "{\"id\":\"d50\",\"text\":\"page", "cut");
    assert!(
        message.contains("line 51 is not one JSON object: EOF while parsing a string"),
        "{message}"
    );
    // Line 41's text a number where the others are strings: the reader names the field only.
    let message = failing_with(41, "{\"id\":\"d40\",\"text\":7}", "typed");
    assert!(
        message.contains(path_str(&input)) && message.contains("(line 41: its \"text\" is 7"),
        "{message}"
    );
}

/// Row "A number column's later value of another kind": the JSON reader takes a column's type
/// from the first 1,000 lines and cut a later `1100.5` in an Int64 column to 1100 without an
/// error; the run now stops before any stage, naming the line, and writes nothing.
#[test]
fn a_whole_number_column_is_not_cut_to_fit() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("pages.jsonl");
    let write = |id_1100: &str| {
        let lines: String = (0..1_200)
            .map(|i| {
                let id = if i == 1_100 {
                    id_1100.to_string()
                } else {
                    i.to_string()
                };
                format!(
                    "{{\"id\":{id},\"text\":\"page {} of the manual\"}}\n",
                    i % 7
                )
            })
            .collect();
        std::fs::write(&input, lines).unwrap();
    };
    write("1100.5");
    let out = dir.path().join("out");
    let failed = neardup(&[
        "run",
        "-q",
        "--input",
        path_str(&input),
        "--output",
        path_str(&out),
    ]);
    let message = stderr(&failed);
    assert_eq!(failed.status.code(), Some(1), "{message}");
    assert!(
        message.contains(&format!(
            "{} line 1101: its \"id\" is 1100.5",
            path_str(&input)
        )) && message.contains("read it as 1100"),
        "{message}"
    );
    assert!(!out.exists(), "a refused run writes nothing");
    // Written as a whole number, the same value is read as written.
    write("1.1e3");
    neardup_ok(&[
        "run",
        "-q",
        "--input",
        path_str(&input),
        "--output",
        path_str(&out),
    ]);
    let ids = neardup_ok(&[
        "query",
        "--data",
        path_str(&out),
        "--format",
        "csv",
        "SELECT count(*) AS n, sum(id) AS total FROM corpus",
    ]);
    assert_eq!(ids, format!("n,total\n1200,{}\n", (0..1_200).sum::<i64>()));
}

/// A JSON Lines key first written after the lines the reader infers the columns from was no
/// column: its values were dropped from dedup without a word. It is named with its line, in a
/// compressed file too; the same key within the first lines is a column and reaches dedup.
#[test]
fn a_key_first_written_after_the_inferred_lines_is_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("pages.jsonl");
    let write = |lang_from: usize| {
        let lines: String = (0..1_200)
            .map(|i| {
                let lang = if i >= lang_from {
                    ",\"lang\":\"de\""
                } else {
                    ""
                };
                // Words of their own: no two pages are near duplicates.
                let words: Vec<String> = (0..12).map(|j| format!("w{}", i * 13 + j)).collect();
                let text = words.join(" ");
                format!("{{\"id\":{i},\"text\":\"{text}\"{lang}}}\n")
            })
            .collect();
        std::fs::write(&input, lines).unwrap();
    };
    write(1_100);
    let out = dir.path().join("out");
    let run = |input: &Path| {
        neardup(&[
            "run",
            "-q",
            "--input",
            path_str(input),
            "--output",
            path_str(&out),
        ])
    };
    let failed = run(&input);
    let message = stderr(&failed);
    assert_eq!(failed.status.code(), Some(1), "{message}");
    assert!(
        message.contains(&format!(
            "{} line 1101: it has the key \"lang\", which is not among the columns",
            path_str(&input)
        )) && message.contains("(id, text)"),
        "{message}"
    );
    assert!(!out.exists(), "a refused run writes nothing");
    let gz = dir.path().join("pages.jsonl.gz");
    let gzip = std::process::Command::new("gzip")
        .arg("-k")
        .arg(&input)
        .status()
        .unwrap();
    assert!(gzip.success() && gz.is_file());
    let message = stderr(&run(&gz));
    assert!(
        message.contains("line 1101 of the uncompressed text: it has the key \"lang\""),
        "{message}"
    );
    // A late key holding only nulls drops nothing.
    let nulls = dir.path().join("nulls.jsonl");
    let text = std::fs::read_to_string(&input).unwrap();
    std::fs::write(&nulls, text.replace("\"lang\":\"de\"", "\"lang\":null")).unwrap();
    assert_eq!(
        run(&nulls).status.code(),
        Some(0),
        "{}",
        stderr(&run(&nulls))
    );
    std::fs::remove_dir_all(&out).unwrap();
    // Within the first lines the key is a column; lines without it hold NULL.
    write(900);
    assert_eq!(run(&input).status.code(), Some(0));
    let langs = neardup_ok(&[
        "query",
        "--data",
        path_str(&out),
        "--format",
        "csv",
        "SELECT count(*) FILTER (WHERE (id >= 900) <> (lang IS NOT NULL)) AS wrong, \
         count(lang) > 250 AS most FROM dedup",
    ]);
    assert_eq!(langs, "wrong,most\n0,true\n");
}

/// An input column named as the column the job numbers the rows in was refused by DataFusion
/// as an ambiguous name in a view's statement; it is named before any work.
#[test]
fn an_input_column_named_as_the_input_order_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("ordered.parquet");
    let sql = "SELECT 'd' || value AS id, 'page ' || value || ' of the manual' AS text, \
               value AS __neardup_input_order FROM generate_series(0, 9)";
    neardup_ok(&["query", "--out", path_str(&input), sql]);
    let out = dir.path().join("out");
    let failed = neardup(&[
        "run",
        "-q",
        "--input",
        path_str(&input),
        "--output",
        path_str(&out),
    ]);
    let message = stderr(&failed);
    assert_eq!(failed.status.code(), Some(1), "{message}");
    assert!(
        message.contains("column named '__neardup_input_order', a name neardup keeps"),
        "{message}"
    );
    assert!(!out.exists());
}

/// The sample with its footer written again after `damage` changed the metadata, its pages as
/// they were: the footer's numbers then disagree with the bytes, as after damage on a disk.
pub(crate) fn with_footer(
    dir: &Path,
    name: &str,
    damage: impl FnOnce(ParquetMetaData) -> ParquetMetaData,
) -> PathBuf {
    let bytes = std::fs::read(fixture("sample.parquet")).unwrap();
    let metadata = ParquetMetaDataReader::new()
        .parse_and_finish(&bytes::Bytes::from(bytes.clone()))
        .unwrap();
    let footer_length = u32::from_le_bytes(bytes[bytes.len() - 8..][..4].try_into().unwrap());
    let pages_end = bytes.len() - 8 - footer_length as usize;
    let mut damaged = bytes[..pages_end].to_vec();
    ParquetMetaDataWriter::new(&mut damaged, &damage(metadata))
        .finish()
        .unwrap();
    let path = dir.join(name);
    std::fs::write(&path, damaged).unwrap();
    path
}

/// The metadata with the first row group's column `column` changed by `change`.
pub(crate) fn change_column(
    metadata: ParquetMetaData,
    column: usize,
    change: impl FnOnce(ColumnChunkMetaDataBuilder) -> ColumnChunkMetaDataBuilder,
) -> ParquetMetaData {
    let mut builder = metadata.into_builder();
    let mut row_groups = builder.take_row_groups();
    let first = row_groups.remove(0);
    let mut columns = first.columns().to_vec();
    columns[column] = change(columns[column].clone().into_builder())
        .build()
        .unwrap();
    let first = first
        .into_builder()
        .set_column_metadata(columns)
        .build()
        .unwrap();
    row_groups.insert(0, first);
    builder.set_row_groups(row_groups).build()
}

/// The key-value metadata's `ARROW:schema` (the Arrow writer's copy of the column types) with
/// the first one-character change that stops the Arrow reader, found by trying each in turn.
pub(crate) fn with_damaged_arrow_schema(metadata: ParquetMetaData) -> ParquetMetaData {
    let file = metadata.file_metadata();
    let pairs = file.key_value_metadata().unwrap().clone();
    let at = pairs.iter().position(|p| p.key == "ARROW:schema").unwrap();
    let schema = pairs[at].value.clone().unwrap().into_bytes();
    let stops = |value: Vec<u8>| {
        let mut damaged = pairs.clone();
        damaged[at].value = Some(String::from_utf8(value).unwrap());
        let read = std::panic::catch_unwind(|| {
            parquet_to_arrow_schema(file.schema_descr(), Some(&damaged))
        });
        read.is_err().then_some(damaged)
    };
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let damaged = (0..schema.len())
        .flat_map(|i| alphabet.iter().map(move |c| (i, *c)))
        .find_map(|(i, c)| {
            let mut value = schema.clone();
            value[i] = c;
            stops(value)
        })
        .expect("some one-character change to the Arrow schema stops its reader");
    let file = FileMetaData::new(
        file.version(),
        file.num_rows(),
        file.created_by().map(str::to_string),
        Some(damaged),
        file.schema_descr_ptr(),
        file.column_orders().cloned(),
    );
    ParquetMetaData::new(file, metadata.row_groups().to_vec())
}

#[test]
fn a_damaged_footer_is_named_not_a_panic() {
    // ROBUSTNESS.md: "A damaged Parquet footer". Each damage below made the Parquet or Arrow
    // reader panic, reported as a bug in neardup that named no file.
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            with_footer(dir.path(), "negative.parquet", |m| {
                change_column(m, 0, |c| {
                    c.set_dictionary_page_offset(None)
                        .set_data_page_offset(-201)
                })
            }),
            "its footer places column 'id' of row group 0 at offset -201",
        ),
        (
            with_footer(dir.path(), "past_the_end.parquet", |m| {
                change_column(m, 3, |c| c.set_total_compressed_size(1 << 40))
            }),
            "past the file's end",
        ),
        (
            // Pages longer than the chunk the footer gives them: the reader stops in a stage.
            with_footer(dir.path(), "short_chunk.parquet", |m| {
                let size = m.row_group(0).column(0).compressed_size();
                change_column(m, 0, |c| c.set_total_compressed_size(size - 33))
            }),
            "the reader stopped on it (range end out of bounds",
        ),
        (
            with_footer(
                dir.path(),
                "arrow_schema.parquet",
                with_damaged_arrow_schema,
            ),
            "is not a readable Parquet file: the reader stopped on it",
        ),
    ];
    for (bad, words) in &cases {
        let output = dir.path().join("out");
        let result = neardup(&[
            "run",
            "--input",
            path_str(bad),
            "--output",
            path_str(&output),
        ]);
        let message = stderr(&result);
        assert_eq!(
            result.status.code(),
            Some(1),
            "{}: {message}",
            bad.display()
        );
        assert!(
            message.contains(path_str(bad)) && message.contains(words),
            "{}: {message}",
            bad.display()
        );
        assert!(!message.contains("internal error"), "{message}");
        assert!(!output.exists());
        assert!(leftovers(dir.path()).is_empty());
    }
}
