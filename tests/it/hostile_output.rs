//! What an ordinary user can do to an output, a query result or an index, and what neardup must
//! not lose or get silently wrong: files beside neardup's tables, an index inside the output, a
//! result file that exists, a table of huge texts, a deleted batch, an edited feature file.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use crate::common::{fixture, make_parquet, neardup, neardup_ok, path_str, stderr, summary};

fn sample() -> String {
    path_str(&fixture("sample.parquet")).to_string()
}

fn run_sample(output: &Path, extra: &[&str]) -> std::process::Output {
    let input = sample();
    let mut args = vec!["run", "-q", "--input", &input, "--output", path_str(output)];
    args.extend_from_slice(extra);
    neardup(&args)
}

#[test]
fn overwrite_keeps_files_neardup_did_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    assert!(run_sample(&out, &[]).status.success());
    std::fs::write(out.join("NOTES.txt"), "my notes").unwrap();
    std::fs::create_dir(out.join("analysis")).unwrap();
    std::fs::write(out.join("analysis/plot.csv"), "1,2").unwrap();

    // Refused, naming what is there, and nothing is touched.
    let refused = run_sample(&out, &["--overwrite"]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(
        message.contains("NOTES.txt") && message.contains("analysis"),
        "{message}"
    );
    assert!(message.contains("--keep-other-files"), "{message}");
    assert!(out.join("groups").is_dir() && out.join("_SUCCESS").is_file());

    // Told to keep them: the tables are new, the user's files are where they were.
    let before = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let kept = run_sample(&out, &["--overwrite", "--keep-other-files", "--k", "2"]);
    assert!(kept.status.success(), "{}", stderr(&kept));
    assert_ne!(
        before,
        std::fs::read_to_string(out.join("summary.json")).unwrap()
    );
    assert_eq!(summary(&out)["parameters"]["k"], 2);
    assert_eq!(
        std::fs::read_to_string(out.join("NOTES.txt")).unwrap(),
        "my notes"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("analysis/plot.csv")).unwrap(),
        "1,2"
    );
    // Nothing left beside the output.
    let beside: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(beside.len(), 1, "{beside:?}");
}

#[test]
fn an_index_or_an_input_inside_the_output_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let index = out.join("index");
    let refused = run_sample(&out, &["--index", path_str(&index), "--update-index"]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(message.contains("inside --output"), "{message}");
    assert!(!out.exists(), "nothing is written");

    // An index that exists inside an output: never deleted by --overwrite.
    assert!(run_sample(&out, &[]).status.success());
    let elsewhere = dir.path().join("index");
    assert!(
        run_sample(
            &dir.path().join("o2"),
            &["--index", path_str(&elsewhere), "--update-index"]
        )
        .status
        .success()
    );
    std::fs::rename(&elsewhere, &index).unwrap();
    let refused = run_sample(&out, &["--overwrite", "--index", path_str(&index)]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(index.join("index.json").is_file());

    // Reading the output's own dedup into the same output.
    let dedup = out.join("dedup");
    let refused = neardup(&[
        "run",
        "--input",
        path_str(&dedup),
        "--output",
        path_str(&out),
        "--overwrite",
    ]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(
        message.contains("--input") && message.contains("inside --output"),
        "{message}"
    );
    assert!(dedup.is_dir());

    // An output inside the folder the job reads.
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::copy(fixture("sample.parquet"), data.join("sample.parquet")).unwrap();
    let refused = neardup(&[
        "run",
        "--input",
        path_str(&data),
        "--output",
        path_str(&data.join("out")),
    ]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(message.contains("inside --input"), "{message}");
}

#[test]
fn query_out_does_not_replace_a_file_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("result.csv");
    std::fs::write(&file, "precious").unwrap();
    let sql = "SELECT 1 AS one";
    let args = ["query", "--format", "csv", "--out", path_str(&file), sql];
    let refused = neardup(&args);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(message.contains("--overwrite"), "{message}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious");
    let mut told = args.to_vec();
    told.insert(1, "--overwrite");
    neardup_ok(&told);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\n1\n");
}

/// `query --out` into the output it reads (a file among a table's, or its summary.json) is
/// refused before any work: the output stays as it was committed.
#[test]
fn query_out_into_the_output_it_reads_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    assert!(run_sample(&out, &[]).status.success());
    let summary_before = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let dedup_files = || std::fs::read_dir(out.join("dedup")).unwrap().count();
    let files_before = dedup_files();
    for (target, extra) in [
        (
            out.join("dedup/extra.parquet"),
            &["--format", "parquet"][..],
        ),
        (
            out.join("summary.json"),
            &["--overwrite", "--format", "json"],
        ),
    ] {
        let mut args = vec![
            "query",
            "--data",
            path_str(&out),
            "--out",
            path_str(&target),
        ];
        args.extend_from_slice(extra);
        args.push("SELECT * FROM corpus");
        let refused = neardup(&args);
        let message = stderr(&refused);
        assert_eq!(refused.status.code(), Some(2), "{message}");
        assert!(message.contains("would write into --data's"), "{message}");
    }
    assert_eq!(dedup_files(), files_before);
    // The user's own folder beside the tables is theirs to write into.
    std::fs::create_dir(out.join("analysis")).unwrap();
    let mine = out.join("analysis/top.csv");
    neardup_ok(&[
        "query",
        "--data",
        path_str(&out),
        "--format",
        "csv",
        "--out",
        path_str(&mine),
        "SELECT count(*) AS n FROM groups",
    ]);
    assert!(mine.is_file());
    assert_eq!(
        std::fs::read_to_string(out.join("summary.json")).unwrap(),
        summary_before
    );
}

/// The Parquet writer panics on an encoding a column's type cannot take, after it has created
/// the file (and loops on a write batch of 0 rows); neardup refuses such a COPY first, naming
/// the column or the setting, and writes nothing. The
/// same COPY with an encoding for the string column that fits is written and reads back.
#[test]
fn a_copy_with_settings_the_writer_cannot_take_is_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("copied");
    let sql = |options: &str| {
        format!(
            "COPY (SELECT 'x' AS text, true AS flag) TO '{}/' STORED AS PARQUET OPTIONS ({options})",
            path_str(&folder)
        )
    };
    let refused = neardup(&["query", &sql("'format.encoding' 'rle'")]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(
        message.contains("column text is stored as Parquet BYTE_ARRAY")
            && message.contains("'delta_byte_array'")
            && message.contains("format.encoding::text"),
        "{message}"
    );
    assert!(!message.contains("internal error"), "{message}");
    assert!(!folder.exists(), "nothing is written");

    // A write batch of 0 rows, which the writer loops on for ever.
    let refused = neardup(&["query", &sql("'format.write_batch_size' '0'")]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(message.contains("write_batch_size is 0"), "{message}");
    assert!(!folder.exists(), "nothing is written");

    neardup_ok(&[
        "query",
        &sql("'format.encoding' 'rle', 'format.encoding::text' 'delta_byte_array'"),
    ]);
    let read = neardup_ok(&[
        "query",
        "--format",
        "csv",
        &format!("SELECT text, flag FROM '{}/'", path_str(&folder)),
    ]);
    assert_eq!(read, "text,flag\nx,true\n");
}

/// A COPY that fails part way, on a value that does not cast near the end, takes back the
/// files its finished partitions wrote; a file that was in the folder before stays.
#[test]
fn a_copy_that_fails_part_way_leaves_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("copied");
    let copy = format!(
        "COPY (SELECT CAST(CASE WHEN value > 900000 THEN 'x' ELSE CAST(value AS VARCHAR) END \
         AS BIGINT) AS v FROM generate_series(1, 1000000)) TO '{}/' STORED AS PARQUET",
        path_str(&folder)
    );
    for last in [true, false] {
        // Last (its result printed) and followed by another statement.
        let sql = if last {
            copy.clone()
        } else {
            format!("{copy}; SELECT 1")
        };
        let failed = neardup(&["query", &sql]);
        let message = stderr(&failed);
        assert_eq!(failed.status.code(), Some(1), "{message}");
        assert!(message.contains("Cannot cast string 'x'"), "{message}");
        assert!(!folder.exists(), "last: {last}");
    }
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("notes.txt"), "mine").unwrap();
    let failed = neardup(&["query", &copy]);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    let left: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("notes.txt")]);
}

#[test]
fn the_table_format_streams_and_cuts_wide_cells() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("long.parquet");
    // 30 texts of 300,000 characters over 3,000 lines each (as printed whole: 61 MB and more).
    make_parquet(
        &corpus,
        "SELECT CAST(value AS BIGINT) AS id, \
         repeat(concat('line ', CAST(value AS VARCHAR), ' 新闻 of some length', chr(10)), 3000) AS text \
         FROM generate_series(1, 30)",
    );
    let table = neardup_ok(&[
        "query",
        &format!("SELECT id, text FROM '{}' ORDER BY id", path_str(&corpus)),
    ]);
    let lines: Vec<&str> = table.lines().collect();
    // Border, header, border, 30 rows, border.
    assert_eq!(lines.len(), 34, "{}", &table[..table.len().min(2000)]);
    assert!(table.len() < 34 * 300, "{} bytes", table.len());
    assert_eq!(lines[1], format!("| id | {:<64} |", "text"));
    assert!(
        lines[3].starts_with("| 1  | line 1 新闻 of some length\\nline 1"),
        "{}",
        lines[3]
    );
    assert!(lines[3].ends_with("… |"), "{}", lines[3]);
    // Every row is as wide as the header, in display columns (a Han character takes two).
    let width = |s: &str| {
        s.chars()
            .map(|c| {
                if ('\u{4e00}'..='\u{9fff}').contains(&c) {
                    2
                } else {
                    1
                }
            })
            .sum::<usize>()
    };
    for line in &lines {
        assert_eq!(width(line), width(lines[0]), "{line}");
    }
    // NULLs print as NULL; an empty result still shows its header.
    let empty = neardup_ok(&["query", "SELECT CAST(NULL AS VARCHAR) AS v WHERE false"]);
    assert_eq!(empty, "+---+\n| v |\n+---+\n+---+\n");
    let null = neardup_ok(&["query", "SELECT CAST(NULL AS VARCHAR) AS v"]);
    assert!(null.contains("| NULL |"), "{null}");
}

/// Two batches of the sample (ids 1..=10, then 11..=20) through one index.
fn indexed_twice(dir: &Path, extra: &[&str]) -> std::path::PathBuf {
    let index = dir.join("index");
    for (n, condition) in [(1, "id <= 10"), (2, "id > 10")] {
        let batch = dir.join(format!("batch{n}.parquet"));
        let output = dir.join(format!("out{n}"));
        make_parquet(
            &batch,
            &format!("SELECT * FROM '{}' WHERE {condition}", sample()),
        );
        let mut args = vec![
            "run",
            "-q",
            "--input",
            path_str(&batch),
            "--output",
            path_str(&output),
            "--index",
            path_str(&index),
            "--update-index",
        ];
        args.extend_from_slice(extra);
        neardup_ok(&args);
    }
    index
}

/// The sample again with ids 101..=120, as `dir/batch3.parquet`: a third batch for an index.
fn third_batch(dir: &Path) -> std::path::PathBuf {
    let third = dir.join("batch3.parquet");
    make_parquet(
        &third,
        &format!(
            "SELECT id + 100 AS id, lang, note, text FROM '{}'",
            sample()
        ),
    );
    third
}

#[test]
fn an_index_missing_a_batch_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let index = indexed_twice(dir.path(), &[]);
    assert!(index.join("committed/batch=000002").is_file());
    let batches = neardup_ok(&[
        "query",
        "--index",
        path_str(&index),
        "--format",
        "csv",
        "SELECT count(*) AS n FROM index_batches",
    ]);
    assert_eq!(batches, "n\n2\n");
    let third = third_batch(dir.path());
    let against = |index: &Path| {
        let output = index.with_extension("out");
        neardup(&[
            "run",
            "--input",
            path_str(&third),
            "--output",
            path_str(&output),
            "--index",
            path_str(index),
        ])
    };
    assert!(against(&index).status.success());

    for (removed, number) in [("batch=000001", "batch 1"), ("batch=000002", "batch 2")] {
        let copy = dir.path().join(format!("copy-{removed}"));
        copy_dir(&index, &copy);
        std::fs::remove_dir_all(copy.join(removed)).unwrap();
        for result in [
            against(&copy),
            neardup(&["query", "--index", path_str(&copy), "SELECT 1"]),
        ] {
            let message = stderr(&result);
            assert_eq!(result.status.code(), Some(1), "{message}");
            assert!(
                message.contains(number) && message.contains(removed),
                "{message}"
            );
        }
    }
}

#[test]
fn a_feature_file_edited_between_batches_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let stop_words = dir.path().join("stop.txt");
    std::fs::write(&stop_words, "the\nof\n").unwrap();
    let features = format!("mode=words,stop_words={}", path_str(&stop_words));
    let index = indexed_twice(dir.path(), &["--features", &features]);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(index.join("index.json")).unwrap()).unwrap();
    let recorded = meta["feature_files"][path_str(&stop_words)]
        .as_str()
        .unwrap()
        .to_string();
    assert!(recorded.starts_with("xxh3-128:"), "{meta}");
    assert_eq!(
        summary(&dir.path().join("out2"))["parameters"]["feature_files"][path_str(&stop_words)],
        recorded.as_str()
    );

    std::fs::write(&stop_words, "the\nof\nand\n").unwrap();
    let third = third_batch(dir.path());
    let refused = neardup(&[
        "run",
        "--input",
        path_str(&third),
        "--output",
        path_str(&dir.path().join("out3")),
        "--index",
        path_str(&index),
        "--update-index",
        "--features",
        &features,
    ]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(
        message.contains(path_str(&stop_words)) && message.contains("changed"),
        "{message}"
    );
    assert!(!index.join("batch=000003").exists());
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// `--partition-by` over a column with NULLs: they go to the Hive folder of NULL
/// (`p=__HIVE_DEFAULT_PARTITION__`), apart from '' (strings) and 0 (numbers), and read back as
/// NULL through `query` and through pyarrow (the independent reader, where CI's venv has it).
#[test]
fn null_partition_values_stay_null() {
    let dir = tempfile::tempdir().unwrap();
    let out = partitioned_run(
        dir.path(),
        "SELECT id, p, n, text FROM (VALUES (1, 'a', 1, 'x y z w'), (2, NULL, NULL, 'p q r s'), \
         (3, '', 0, 's t u v'), (4, NULL, 0, 'v w x y')) AS t(id, p, n, text)",
        "p,n",
    );
    assert!(
        out.join("dedup/p=__HIVE_DEFAULT_PARTITION__/n=__HIVE_DEFAULT_PARTITION__")
            .is_dir()
    );
    assert!(out.join("dedup/p=/n=0").is_dir());
    assert_eq!(
        csv_of(
            &out,
            "SELECT id, p IS NULL AS p_null, p, n IS NULL AS n_null, n FROM dedup ORDER BY id"
        ),
        "id,p_null,p,n_null,n\n1,false,a,false,1\n2,true,,true,\n3,false,,false,0\n\
         4,true,,false,0\n"
    );
    assert_eq!(
        csv_of(
            &out,
            "SELECT count(*) FILTER (WHERE p IS NULL) AS p, \
             count(*) FILTER (WHERE n IS NULL) AS n FROM dedup"
        ),
        "p,n\n2,1\n"
    );
    let Some(python) = crate::delta::python("null_partition_values_stay_null") else {
        return;
    };
    let script = "import sys, pyarrow.dataset as ds\n\
        t = ds.dataset(sys.argv[1], format='parquet', partitioning='hive').to_table()\n\
        rows = sorted(zip(t['id'].to_pylist(), t['p'].to_pylist(), t['n'].to_pylist()))\n\
        print(rows)";
    assert_eq!(
        python_output(&python, script, &out.join("dedup")),
        "[(1, 'a', 1), (2, None, None), (3, '', 0), (4, None, 0)]"
    );
}

/// The same for floats and dates of milliseconds (Date64), whose other values the writer spells
/// its own way (1.0 as `1`, a Date64 as its day): NULL in the Hive folder of NULL, not in that of
/// 0 or of 1970-01-01, and every value back as it was through pyarrow.
#[test]
fn null_float_and_date64_partition_values_stay_null() {
    let dir = tempfile::tempdir().unwrap();
    let out = partitioned_run(
        dir.path(),
        "SELECT id, f, arrow_cast(d, 'Date64') AS d, text FROM (VALUES \
         (1, 1.0, '2026-12-07', 'x y z w'), (2, NULL, NULL, 'p q r s'), \
         (3, 0.0, '1970-01-01', 's t u v'), (4, 2.5, NULL, 'v w x y')) AS t(id, f, d, text)",
        "f,d",
    );
    assert_eq!(
        csv_of(
            &out,
            "SELECT arrow_typeof(f) AS f, arrow_typeof(d) AS d FROM corpus LIMIT 1"
        ),
        "f,d\nFloat64,Date64\n"
    );
    for folder in [
        "f=1/d=2026-12-07",
        "f=__HIVE_DEFAULT_PARTITION__/d=__HIVE_DEFAULT_PARTITION__",
        "f=0/d=1970-01-01",
        "f=2.5/d=__HIVE_DEFAULT_PARTITION__",
    ] {
        assert!(out.join("dedup").join(folder).is_dir(), "{folder}");
    }
    assert_eq!(
        csv_of(
            &out,
            "SELECT id, f IS NULL AS f_null, d IS NULL AS d_null FROM dedup ORDER BY id"
        ),
        "id,f_null,d_null\n1,false,false\n2,true,true\n3,false,false\n4,false,true\n"
    );
    let Some(python) = crate::delta::python("null_float_and_date64_partition_values_stay_null")
    else {
        return;
    };
    let script = "import sys, pyarrow as pa, pyarrow.dataset as ds\n\
        part = ds.partitioning(pa.schema([('f', pa.float64()), ('d', pa.date32())]), flavor='hive')\n\
        t = ds.dataset(sys.argv[1], format='parquet', partitioning=part).to_table()\n\
        rows = sorted(zip(t['id'].to_pylist(), t['f'].to_pylist(), map(str, t['d'].to_pylist())))\n\
        print(rows)";
    assert_eq!(
        python_output(&python, script, &out.join("dedup")),
        "[(1, 1.0, '2026-12-07'), (2, None, 'None'), (3, 0.0, '1970-01-01'), (4, 2.5, 'None')]"
    );
}

/// A run over the rows of `select` (written to a Parquet file in `dir`) whose deduplicated
/// corpus is partitioned by `columns`; its output folder.
fn partitioned_run(dir: &Path, select: &str, columns: &str) -> std::path::PathBuf {
    let input = dir.join("in.parquet");
    make_parquet(&input, select);
    let out = dir.join("out");
    neardup_ok(&[
        "run",
        "-q",
        "--input",
        path_str(&input),
        "--output",
        path_str(&out),
        "--partition-by",
        columns,
    ]);
    out
}

/// The CSV result of `sql` over the output at `out` (its tables and its input as `corpus`).
fn csv_of(out: &Path, sql: &str) -> String {
    neardup_ok(&["query", "--data", path_str(out), "--format", "csv", sql])
}

/// What `script` prints about `folder` (its `sys.argv[1]`), run by `python`, which must succeed.
fn python_output(python: &Path, script: &str, folder: &Path) -> String {
    let read = std::process::Command::new(python)
        .args(["-c", script, path_str(folder)])
        .output()
        .unwrap();
    assert!(read.status.success(), "{}", stderr(&read));
    String::from_utf8_lossy(&read.stdout).trim().to_string()
}

/// `generate` reads its input whole before it writes, so an `--output` or `--truth` that is the
/// input (or the two the same file) would lose the corpus; refused before any work, whatever
/// `--overwrite` says.
#[test]
fn generate_never_writes_over_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    std::fs::copy(fixture("sample.parquet"), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let other = dir.path().join("other.parquet");
    // The input by another spelling, through a folder link.
    std::os::unix::fs::symlink(dir.path(), dir.path().join("again")).unwrap();
    let spelled_again = dir.path().join("again/in.parquet");
    let pattern = dir.path().join("*.parquet");
    for (given, output, truth, named) in [
        (&input, &input, &other, "is the --input"),
        (&input, &other, &spelled_again, "is the --input"),
        (&input, &other, &other, "are the same file"),
        // A pattern reads every file it matches.
        (&pattern, &input, &other, "is the --input"),
    ] {
        let refused = neardup(&[
            "generate",
            "--input",
            path_str(given),
            "--output",
            path_str(output),
            "--truth",
            path_str(truth),
            "--overwrite",
        ]);
        let message = stderr(&refused);
        assert_eq!(refused.status.code(), Some(2), "{message}");
        assert!(message.contains(named), "{message}");
        assert_eq!(std::fs::read(&input).unwrap(), before);
        assert!(!other.exists(), "{message}");
    }
}

/// A file or folder neardup writes takes the place of what is there in one rename: over a
/// symbolic link it would replace the link (and, for an output folder, empty what it points to
/// through it), over a device or pipe the device. Each is refused before any work, even with
/// `--overwrite`, and what was there stays.
#[test]
fn links_devices_and_pipes_are_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("base");
    assert!(run_sample(&out, &[]).status.success());
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    // Named as it is, and with a trailing '/' (which looks the link up through it).
    let with_slash = format!("{}/", path_str(&link));
    for named in [path_str(&link), with_slash.as_str()] {
        let refused = run_sample(Path::new(named), &["--overwrite"]);
        let message = stderr(&refused);
        assert_eq!(refused.status.code(), Some(2), "{message}");
        assert!(message.contains("is a symbolic link to"), "{message}");
        assert!(message.contains(path_str(&out)), "{message}");
    }
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(
        std::fs::read_to_string(out.join("summary.json")).unwrap(),
        summary
    );

    let file = dir.path().join("mine.csv");
    std::fs::write(&file, "precious").unwrap();
    let file_link = dir.path().join("mine-link.csv");
    std::os::unix::fs::symlink(&file, &file_link).unwrap();
    let pipe = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&pipe)
        .status()
        .unwrap();
    assert!(made.success());
    for (target, named) in [
        (&file_link, "is a symbolic link to"),
        (&pipe, "is a device, a pipe or a socket"),
    ] {
        let refused = neardup(&[
            "query",
            "--overwrite",
            "--format",
            "csv",
            "--out",
            path_str(target),
            "SELECT 1 AS one",
        ]);
        let message = stderr(&refused);
        assert_eq!(refused.status.code(), Some(2), "{message}");
        assert!(message.contains(named), "{message}");
    }
    assert!(std::fs::symlink_metadata(&file_link).unwrap().is_symlink());
    assert!(
        std::fs::symlink_metadata(&pipe)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious");

    // A new file in folders that do not exist yet: they are made, as `run --output` makes its.
    let nested = dir.path().join("results/2026/top.csv");
    neardup_ok(&[
        "query",
        "--format",
        "csv",
        "--out",
        path_str(&nested),
        "SELECT 1 AS one",
    ]);
    assert_eq!(std::fs::read_to_string(&nested).unwrap(), "one\n1\n");
}

/// A `COPY ... TO` in `neardup query` follows `--out`'s rules: not over an existing file
/// without `--overwrite`, never into the output or index the query reads.
#[test]
fn a_copy_writes_neither_over_a_file_nor_into_what_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    assert!(run_sample(&out, &[]).status.success());
    let file = dir.path().join("mine.csv");
    std::fs::write(&file, "precious").unwrap();
    let copy = format!("COPY (SELECT 1 AS one) TO '{}'", path_str(&file));
    let refused = neardup(&["query", &copy]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(message.contains("pass --overwrite"), "{message}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious");
    neardup_ok(&["query", "--overwrite", &copy]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\n1\n");

    let groups = || std::fs::read_dir(out.join("groups")).unwrap().count();
    let before = groups();
    let into_groups = format!(
        "SELECT 1; COPY (SELECT * FROM groups) TO '{}'",
        path_str(&out.join("groups/extra.parquet"))
    );
    let refused = neardup(&["query", "--data", path_str(&out), &into_groups]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(message.contains("would write into --data's"), "{message}");
    // The same destination as a `file:` URL, a COPY under EXPLAIN ANALYZE (which runs it), and
    // an INSERT INTO a table over the committed folder.
    let groups_dir = path_str(&out.join("groups")).to_string();
    for sql in [
        format!("COPY (SELECT * FROM groups) TO 'file:{groups_dir}/extra.parquet'"),
        format!("EXPLAIN ANALYZE COPY (SELECT * FROM groups) TO '{groups_dir}/extra.parquet'"),
        format!(
            "CREATE EXTERNAL TABLE copied STORED AS PARQUET LOCATION '{groups_dir}/'; \
             INSERT INTO copied SELECT * FROM groups"
        ),
    ] {
        let refused = neardup(&["query", "--overwrite", "--data", path_str(&out), &sql]);
        let message = stderr(&refused);
        assert_eq!(refused.status.code(), Some(2), "{sql}: {message}");
        assert!(message.contains("would write into --data's"), "{message}");
    }
    assert_eq!(groups(), before);
}
