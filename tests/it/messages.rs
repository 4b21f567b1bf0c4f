//! Messages that say what is wrong and what to do: each names the column, range, floor, file
//! or folder it is about (docs/ROBUSTNESS.md lists them).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{
    Tmpfs, failing_sample_run, fixture, make_parquet, neardup, neardup_ok, path_str, stderr,
};

#[test]
fn a_dictionary_encoded_text_column_is_named_with_sql_that_decodes_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("dict.parquet");
    make_parquet(
        &input,
        &format!(
            "SELECT id, lang, note, arrow_cast(text, 'Dictionary(Int32, Utf8)') AS text FROM '{}'",
            path_str(&fixture("sample.parquet"))
        ),
    );
    let run = |input: &Path, output: &str| {
        neardup(&[
            "run",
            "--input",
            path_str(input),
            "--output",
            path_str(&dir.path().join(output)),
            "--quiet",
        ])
    };
    let result = run(&input, "out");
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(1), "{message}");
    assert!(
        message.contains("dict.parquet")
            && message.contains("is dictionary-encoded (type Dictionary(Int32, Utf8))"),
        "{message}"
    );
    assert!(!message.contains("must be a string column"), "{message}");
    // The SQL given works as it is: the decoded copy runs.
    let start = message.find("neardup query \"").expect("the command") + "neardup query \"".len();
    let sql = &message[start..];
    let sql = &sql[..sql.find('"').expect("the command's end")];
    assert!(
        sql.contains("SELECT * REPLACE (arrow_cast(text, 'Utf8') AS text)"),
        "{sql}"
    );
    let decoded = dir.path().join("decoded.parquet");
    neardup_ok(&[
        "query",
        &sql.replace("<new file>.parquet", path_str(&decoded)),
    ]);
    let result = run(&decoded, "decoded-out");
    assert!(result.status.success(), "{}", stderr(&result));
}

#[test]
fn partition_by_a_missing_column_lists_the_columns() {
    let dir = tempfile::tempdir().unwrap();
    let message = failing_sample_run(dir.path(), &["--partition-by", "nosuch"], 1);
    assert!(
        message.contains("--partition-by nosuch")
            && message.contains("no column 'nosuch'")
            && message.contains("the columns are: id, lang, note, text"),
        "{message}"
    );
    assert!(!message.contains("--partition-by-column"), "{message}");
    assert!(!message.contains("check ids"), "before any work: {message}");
}

#[test]
fn a_repeated_or_every_partition_column_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let message = failing_sample_run(dir.path(), &["--partition-by", "lang,lang"], 2);
    assert!(
        message.contains("--partition-by lang,lang: column 'lang' is named twice"),
        "{message}"
    );
    assert!(!message.contains("check ids"), "before any work: {message}");
    let message = failing_sample_run(dir.path(), &["--partition-by", "id,lang,note,text"], 2);
    assert!(
        message.contains("these are all the input's columns")
            && message.contains("leave at least one column out"),
        "{message}"
    );
    assert!(!message.contains("check ids"), "before any work: {message}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn k_out_of_range_names_the_allowed_range() {
    let dir = tempfile::tempdir().unwrap();
    for k in ["--k=-1", "--k=17", "--k=99999999999", "--k=many"] {
        let message = failing_sample_run(dir.path(), &[k], 2);
        assert!(
            message.contains("0..=8 for 64-bit fingerprints, 0..=16 with --bits 128"),
            "{k}: {message}"
        );
        assert!(!message.contains("4294967295"), "{k}: {message}");
    }
    for command in [
        &["plan"][..],
        &["match", "--signatures", "x", "--output", "y"],
    ] {
        let mut args = command.to_vec();
        args.push("--k=-1");
        let result = neardup(&args);
        assert_eq!(result.status.code(), Some(2), "{args:?}");
        assert!(stderr(&result).contains("0..=8"), "{}", stderr(&result));
    }
    // Within 0..=16 the width decides, after parsing (errors::k_beyond_*).
    let message = failing_sample_run(dir.path(), &["--k", "9"], 2);
    assert!(message.contains("0..=8"), "{message}");
}

#[test]
fn a_memory_limit_below_the_floor_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for small in ["1", "64K", "3M"] {
        let message = failing_sample_run(dir.path(), &["--memory-limit", small], 2);
        assert!(
            message.contains("--memory-limit") && message.contains("at least 4M"),
            "{small}: {message}"
        );
    }
    // The executor takes the same floor, and refuses before it looks for a scheduler.
    let result = neardup(&["executor", "--memory-limit", "1K"]);
    assert_eq!(result.status.code(), Some(2));
    assert!(
        stderr(&result).contains("at least 4M"),
        "{}",
        stderr(&result)
    );
}

#[test]
fn bits_in_features_and_bits_that_differ_are_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let message = failing_sample_run(dir.path(), &["--features", "bits=64", "--bits", "128"], 2);
    assert!(
        message.contains("--bits 128 contradicts bits=64 in --features"),
        "{message}"
    );
    let message = failing_sample_run(dir.path(), &["--features", "bits=128", "--bits", "64"], 2);
    assert!(
        message.contains("--bits 64 contradicts bits=128 in --features"),
        "{message}"
    );
}

#[test]
fn a_long_option_string_is_cut_in_the_message() {
    let dir = tempfile::tempdir().unwrap();
    // Below Linux's 128 KiB limit on one argument.
    let long = format!("mode={}", "x".repeat(120_000));
    let message = failing_sample_run(dir.path(), &["--features", &long], 2);
    assert!(message.len() < 2_000, "{} bytes echoed", message.len());
    assert!(
        message.contains("--features") && message.contains("is not a mode"),
        "{}",
        &message[..message.len().min(1000)]
    );
    assert!(message.contains(" more characters)"), "{message}");
}

/// A password or a signature typed into an address is refused without showing it: in
/// `--cluster`, `--scheduler`, and a URL under a scheme neardup does not read.
#[test]
fn a_secret_in_an_address_is_never_echoed() {
    let dir = tempfile::tempdir().unwrap();
    for extra in [
        &["--cluster", "df://admin:s3cr3t@127.0.0.1:9"][..],
        &["--cluster", "dfs://s3cr3t@host"],
        &["--cluster", "http://admin:s3cr3t@host"],
    ] {
        let message = failing_sample_run(dir.path(), extra, 2);
        assert!(!message.contains("s3cr3t"), "{message}");
        assert!(message.contains("no user or password"), "{message}");
    }
    for input in [
        "hdfs://admin:s3cr3t@namenode/corpus",
        "https://host/corpus.parquet?X-Amz-Signature=s3cr3t",
    ] {
        let out = neardup(&["run", "--input", input, "--output", "unused"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(!stderr(&out).contains("s3cr3t"), "{}", stderr(&out));
    }
    let out = neardup(&["executor", "--scheduler", "admin:s3cr3t@host:1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!stderr(&out).contains("s3cr3t"), "{}", stderr(&out));
}

/// A run that adds the sample to a new index in `dir/index`; returns the index.
fn sample_index(dir: &Path) -> PathBuf {
    let index = dir.join("index");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&dir.join("first")),
        "--index",
        path_str(&index),
        "--update-index",
        "--quiet",
    ]);
    index
}

fn the_documents_file(index: &Path) -> PathBuf {
    let folder = index.join("batch=000001").join("documents");
    std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .expect("a documents file")
}

/// Runs a second batch (the sample's texts under other ids) against `index`.
fn second_batch(dir: &Path, index: &Path, output: &str) -> (Option<i32>, String) {
    let input = dir.join("second.parquet");
    if !input.exists() {
        make_parquet(
            &input,
            &format!(
                "SELECT id + 1000 AS id, lang, note, text FROM '{}'",
                path_str(&fixture("sample.parquet"))
            ),
        );
    }
    let result = neardup(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&dir.join(output)),
        "--index",
        path_str(index),
    ]);
    (result.status.code(), stderr(&result))
}

#[test]
fn a_corrupt_index_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let index = sample_index(dir.path());
    let file = the_documents_file(&index);
    let good = std::fs::read(&file).unwrap();
    // Data pages damaged, footer intact (the failure comes from a stage), then everything but
    // the magic bytes and the footer's length (it comes from reading the schema).
    let mut pages = good.clone();
    for byte in &mut pages[4..600.min(good.len() - 8)] {
        *byte = 0x5A;
    }
    let mut footer = good.clone();
    let end = footer.len() - 8;
    for byte in &mut footer[4..end] {
        *byte = 0x5A;
    }
    for (case, bytes) in [("pages", pages), ("footer", footer)] {
        std::fs::write(&file, bytes).unwrap();
        let (code, message) = second_batch(dir.path(), &index, &format!("out-{case}"));
        assert_eq!(code, Some(1), "{case}: {message}");
        assert!(
            message.contains(path_str(&file))
                && message.contains("cannot be read")
                && message.contains("batch=000001"),
            "{case}: {message}"
        );
        assert!(!message.contains("panicked"), "{message}");
    }
    // `query --index` reads the schema the same way.
    let result = neardup(&[
        "query",
        "--index",
        path_str(&index),
        "SELECT count(*) FROM index_documents",
    ]);
    assert_eq!(result.status.code(), Some(1));
    assert!(
        stderr(&result).contains(path_str(&file)),
        "{}",
        stderr(&result)
    );
    std::fs::write(&file, &good).unwrap();

    // The index's JSON files are named too, with what to do.
    for name in ["index.json", "batch=000001/batch.json"] {
        let path = index.join(name);
        let kept = std::fs::read(&path).unwrap();
        std::fs::write(&path, "{\"format\": \"neardup-ind").unwrap();
        let (code, message) = second_batch(dir.path(), &index, "out-json");
        assert_eq!(code, Some(1), "{name}: {message}");
        assert!(
            message.contains(path_str(&path))
                && message.contains("cannot be read")
                && message.contains("restore the file from a backup"),
            "{name}: {message}"
        );
        std::fs::write(&path, kept).unwrap();
    }
    let (code, message) = second_batch(dir.path(), &index, "out-repaired");
    assert_eq!(code, Some(0), "{message}");
}

#[test]
fn a_full_temporary_folder_is_named_with_tmpdir() {
    let Some(full) = Tmpfs::mount("size=8k") else {
        eprintln!("SKIPPED: this machine does not allow mounting a tmpfs");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fingerprints = dir.path().join("fp.parquet");
    neardup_ok(&[
        "generate-fingerprints",
        "--count",
        "40000",
        "--output",
        path_str(&fingerprints),
    ]);
    // At the floor and on two partitions the candidates' aggregate spills, into the full
    // TMPDIR (`NEARDUP_CANDIDATES=sql`: in memory, the candidates of so few fingerprints fit
    // the pool and nothing spills). Not fewer: 20,000, the count this test had, stopped
    // spilling at all when the document pairs' plan changed, and 25,000 spill only in the
    // groups stage.
    let result = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "match",
            "--signatures",
            path_str(&fingerprints),
            "--output",
            path_str(&dir.path().join("out")),
            "--memory-limit",
            "4M",
            "--threads",
            "2",
            "--quiet",
        ])
        .env("TMPDIR", full.path())
        .env("NEARDUP_CANDIDATES", "sql")
        .output()
        .expect("the neardup binary runs");
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(1), "{message}");
    assert!(
        message.contains("No space left on device")
            && message.contains(&format!(
                "the temporary folder {} is full",
                path_str(full.path())
            ))
            && message.contains("TMPDIR"),
        "{message}"
    );
    assert!(!dir.path().join("out").exists());
}

/// A folder's corpus is its files of one format; the others beside them were passed over
/// without a word. They are named on standard error, and the run reads what it read before.
#[test]
fn files_of_another_format_in_an_input_folder_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("mixed");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("a.jsonl"),
        "{\"id\":1,\"text\":\"alpha beta gamma delta\"}\n{\"id\":2,\"text\":\"one two three four\"}\n",
    )
    .unwrap();
    std::fs::write(folder.join("b.csv"), "id,text\n3,\"a page of its own\"\n").unwrap();
    let out = dir.path().join("out");
    let run = neardup(&[
        "run",
        "--input",
        path_str(&folder),
        "--output",
        path_str(&out),
    ]);
    let message = stderr(&run);
    assert_eq!(run.status.code(), Some(0), "{message}");
    assert!(
        message.contains(
            "reading its JSON Lines files only; 1 file(s) of another format are not read ("
        ) && message.contains("b.csv)"),
        "{message}"
    );
    let count = neardup_ok(&[
        "query",
        "--data",
        path_str(&out),
        "--format",
        "csv",
        "SELECT count(*) AS n FROM signatures",
    ]);
    assert_eq!(count, "n\n2\n");
}
