//! Bad input gets a clear error that names the file and column, and the right exit code.

use crate::common::{failing_sample_run, fixture, neardup, neardup_ok, path_str, stderr};

#[test]
fn missing_column_is_named_with_the_columns_that_exist() {
    let dir = tempfile::tempdir().unwrap();
    let message = failing_sample_run(dir.path(), &["--text-column", "body"], 1);
    assert!(message.contains("no text column 'body'"), "{message}");
    assert!(message.contains("id, lang, note, text"), "{message}");
    assert!(message.contains("sample.parquet"), "{message}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no output and no staging folder left behind"
    );
}

/// Thousands of worker threads exhausted the memory before the job started (65,535 aborted
/// the process with "failed to initiate panic"); beyond 1,024 the flag is refused.
#[test]
fn more_threads_than_one_process_can_start_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let message = failing_sample_run(dir.path(), &["--threads", "65535"], 2);
    assert!(
        message.contains("--threads 65535: at most 1024"),
        "{message}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let message = failing_sample_run(dir.path(), &["--threads", "1025", "-q"], 2);
    assert!(message.contains("at most 1024"), "{message}");
    // `neardup run --threads 1024` runs (2.6 s for the sample on two cores).
    let out = dir.path().join("out");
    let sample = fixture("sample.parquet");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&sample),
        "--output",
        path_str(&out),
        "--threads",
        "1024",
        "-q",
    ]);
    assert!(out.join("summary.json").is_file());
}

#[test]
fn text_column_of_the_wrong_type() {
    let dir = tempfile::tempdir().unwrap();
    let message = failing_sample_run(dir.path(), &["--text-column", "id"], 1);
    assert!(message.contains("must be a string column"), "{message}");
}

#[test]
fn k_beyond_the_band_plans_and_plans_short_of_k_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let message = failing_sample_run(dir.path(), &["--k", "9"], 2);
    assert!(message.contains("0..=8"), "{message}");
    let message = failing_sample_run(dir.path(), &["--k", "5", "--plan", "bands:4"], 2);
    assert!(message.contains("only up to k = 3"), "{message}");
    let message = failing_sample_run(dir.path(), &["--plan", "lsh"], 2);
    assert!(
        message.contains("unknown plan") && message.contains("auto"),
        "{message}"
    );
    // Multi-index hashing needs k >= 2 to differ from the bands; said before any work.
    let message = failing_sample_run(dir.path(), &["--k", "1", "--plan", "mih"], 2);
    assert!(message.contains("use --plan bands"), "{message}");
    assert!(!message.contains("signatures"), "{message}");
}

#[test]
fn plan_compares_the_plans_and_reads_signatures() {
    let out = neardup_ok(&["plan", "--docs", "10000000", "--k", "6"]);
    let chosen = out.lines().find(|l| l.ends_with("<- chosen")).unwrap();
    assert!(!chosen.starts_with("bands"), "{out}");
    assert!(out.contains("--plan "), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&output),
        "--quiet",
    ]);
    let signatures = output.join("signatures");
    let out = neardup_ok(&["plan", "--signatures", path_str(&signatures), "--k", "3"]);
    // 13 distinct fingerprints among the sample's 20 documents, all of them sampled.
    assert!(
        out.starts_with("k = 3, 13 distinct 64-bit fingerprints"),
        "{out}"
    );
    assert!(out.contains('*'), "sampled counts are marked: {out}");
    let refused = neardup(&["plan", "--k", "9"]);
    assert_eq!(refused.status.code(), Some(2));
}

#[test]
fn a_file_that_is_not_parquet_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("notes.parquet");
    std::fs::write(&bogus, "plain text, not Parquet").unwrap();
    let result = neardup(&[
        "run",
        "--input",
        path_str(&bogus),
        "--output",
        path_str(&dir.path().join("out")),
    ]);
    assert_eq!(result.status.code(), Some(1));
    let message = stderr(&result);
    assert!(
        message.contains("notes.parquet") && message.contains("not a readable Parquet file"),
        "{message}"
    );
    assert!(!message.contains("panicked"), "{message}");
    // A name that says no format is read as Parquet, and the message says how to read it as
    // another.
    let tsv = dir.path().join("notes.tsv");
    std::fs::write(&tsv, "id\ttext\n1\thello\n").unwrap();
    let result = neardup(&[
        "run",
        "--input",
        path_str(&tsv),
        "--output",
        path_str(&dir.path().join("out")),
    ]);
    assert_eq!(result.status.code(), Some(1));
    let message = stderr(&result);
    assert!(
        message.contains(
            "notes.tsv is not a readable Parquet file (a file is read as Parquet unless its name"
        ) && message.contains("--input-format says another format"),
        "{message}"
    );
}

/// JSON Lines ids beyond Int64 are inferred as floats: the refusal says why and what to do.
#[test]
fn json_ids_beyond_int64_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("pages.jsonl");
    std::fs::write(
        &input,
        "{\"id\":12345678901234567890,\"text\":\"alpha beta gamma\"}\n\
         {\"id\":12345678901234567891,\"text\":\"one two three\"}\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let result = neardup(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&out),
    ]);
    assert_eq!(result.status.code(), Some(1));
    let message = stderr(&result);
    assert!(
        message.contains("has type Float64") && message.contains("write the ids as strings"),
        "{message}"
    );
    assert!(!out.exists());
}

#[test]
fn duplicate_and_null_ids_are_refused_with_examples() {
    let dir = tempfile::tempdir().unwrap();
    let duplicated = dir.path().join("dup.parquet");
    neardup_ok(&[
        "query",
        &format!(
            "COPY (SELECT * FROM (VALUES (7, 'a b c'), (7, 'd e f'), (8, 'g h i')) AS t(id, text)) TO '{}'",
            path_str(&duplicated)
        ),
    ]);
    let result = neardup(&[
        "run",
        "--input",
        path_str(&duplicated),
        "--output",
        path_str(&dir.path().join("o1")),
    ]);
    assert_eq!(result.status.code(), Some(1));
    let message = stderr(&result);
    assert!(
        message.contains("duplicate")
            && message.contains("'7': 2 documents, the first at")
            && message.contains("dup.parquet row 1")
            && message.contains("dup.parquet row 2"),
        "{message}"
    );

    let null_id = dir.path().join("null.parquet");
    neardup_ok(&[
        "query",
        &format!(
            "COPY (SELECT * FROM (VALUES (1, 'a b c'), (NULL, 'd e f')) AS t(id, text)) TO '{}'",
            path_str(&null_id)
        ),
    ]);
    let result = neardup(&[
        "run",
        "--input",
        path_str(&null_id),
        "--output",
        path_str(&dir.path().join("o2")),
    ]);
    assert_eq!(result.status.code(), Some(1));
    let message = stderr(&result);
    assert!(
        message.contains("is NULL at") && message.contains("null.parquet row 2"),
        "{message}"
    );
}

#[test]
fn inputs_with_different_schemas_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.parquet");
    neardup_ok(&[
        "query",
        &format!(
            "COPY (SELECT 1 AS id, 'x y' AS body) TO '{}'",
            path_str(&other)
        ),
    ]);
    let result = neardup(&[
        "run",
        "--input",
        path_str(&fixture("sample.parquet")),
        path_str(&other),
        "--output",
        path_str(&dir.path().join("out")),
    ]);
    assert_eq!(result.status.code(), Some(1));
    let message = stderr(&result);
    assert!(
        message.contains("other.parquet") && message.contains("does not have the schema"),
        "{message}"
    );
}

/// `neardup run --input <input> --output <output>`, which must fail with exit code 1 and no
/// panic; its message.
fn failing_run(input: &std::path::Path, output: &std::path::Path) -> String {
    let result = neardup(&[
        "run",
        "--input",
        path_str(input),
        "--output",
        path_str(output),
    ]);
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(1), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    message
}

/// Parquet allows two columns of one name; the job reads by name and `dedup` would keep one,
/// so such a file is refused, naming it and the column, before any work.
#[test]
fn a_file_with_two_columns_of_one_name_is_refused() {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::arrow::ArrowWriter;

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("twice.parquet");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("text", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(StringArray::from(vec!["a b c d e f", "g h i j k l"])),
            Arc::new(StringArray::from(vec!["kept", "or lost"])),
        ],
    )
    .unwrap();
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(&input).unwrap(), schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();

    let output = dir.path().join("out");
    let message = failing_run(&input, &output);
    assert!(
        message.contains("twice.parquet") && message.contains("two columns named 'text'"),
        "{message}"
    );
    assert!(!output.exists());
}

/// An empty CSV or JSON Lines file has no columns to infer: the error says so and names it,
/// rather than listing no columns.
#[test]
fn an_empty_text_file_is_named_as_having_no_columns() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["empty.csv", "empty.jsonl"] {
        let input = dir.path().join(name);
        std::fs::write(&input, "").unwrap();
        let message = failing_run(&input, &dir.path().join("out"));
        assert!(
            message.contains(name) && message.contains("has no columns"),
            "{message}"
        );
    }
}

/// A text file with a byte that is not UTF-8 is refused naming its line: CSV's reader says the
/// line and field, and for JSON Lines, whose reader does not, the job finds the line itself,
/// in the uncompressed text of a compressed file.
#[test]
fn text_that_is_not_utf8_is_refused_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("bad.csv");
    std::fs::write(&csv, b"id,text\n1,hello there\n2,bad \xff here\n").unwrap();
    let message = failing_run(&csv, &dir.path().join("out"));
    assert!(
        message.contains("bad.csv") && message.contains("line 3"),
        "{message}"
    );
    let jsonl = dir.path().join("bad.jsonl");
    std::fs::write(
        &jsonl,
        b"{\"id\":1,\"text\":\"hello\"}\n{\"id\":2,\"text\":\"b\xffd\"}\n",
    )
    .unwrap();
    let message = failing_run(&jsonl, &dir.path().join("out"));
    // Line 1 is 24 bytes with its newline; the bad byte is 17 into line 2.
    assert!(
        message.contains("bad.jsonl")
            && message.contains("line 2 is not UTF-8, at byte offset 41 of the file"),
        "{message}"
    );
    // Compressed, the line is found in the text gzip gives back (gzip is on every Debian).
    let gzipped = std::process::Command::new("gzip")
        .args(["--keep", path_str(&jsonl)])
        .status()
        .unwrap();
    assert!(gzipped.success());
    let message = failing_run(&dir.path().join("bad.jsonl.gz"), &dir.path().join("out"));
    assert!(
        message.contains("bad.jsonl.gz")
            && message.contains("line 2 is not UTF-8, at byte offset 41 of the uncompressed text"),
        "{message}"
    );
    assert!(!dir.path().join("out").exists());
}

/// A JSON Lines text column that is NULL in the rows its type is inferred from is named with
/// why its type is Null; a device given as input is not said to be missing.
#[test]
fn an_inferred_null_column_and_a_device_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("nulls.jsonl");
    std::fs::write(
        &input,
        "{\"id\": 1, \"text\": null}\n{\"id\": 2, \"text\": null}\n",
    )
    .unwrap();
    let output = dir.path().join("out");
    let message = failing_run(&input, &output);
    assert!(
        message.contains("has type Null")
            && message.contains("take their type from the first rows"),
        "{message}"
    );
    let message = failing_run(std::path::Path::new("/dev/null"), &output);
    assert!(message.contains("neither a file nor a folder"), "{message}");
}
