//! Helpers shared by the integration tests: running the binary, writing and reading Parquet.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::prelude::{ParquetReadOptions, SessionContext};

/// Runs the `neardup` binary with `args`.
pub fn neardup(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .output()
        .expect("the neardup binary runs")
}

/// Runs the binary and insists it succeeds; returns its standard output.
pub fn neardup_ok(args: &[&str]) -> String {
    succeeded(args, neardup(args))
}

/// Insists the run of the binary with `args` succeeded; returns its standard output.
pub fn succeeded(args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "neardup {args:?} failed with {:?}:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Runs the job on the sample with its defaults into the local folder `output`: the oracle of
/// the tests that run the same job elsewhere.
pub fn run_sample_locally(output: &Path) {
    run_sample(output, &[]);
}

/// Runs the job on the sample into `output` with `extra` flags, insisting it succeeds; returns
/// its standard error.
pub fn run_sample(output: &Path, extra: &[&str]) -> String {
    let sample = fixture("sample.parquet");
    let mut args = vec![
        "run",
        "--input",
        path_str(&sample),
        "--output",
        path_str(output),
        "-q",
    ];
    args.extend_from_slice(extra);
    let out = neardup(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stderr(&out)
}

/// Runs `neardup run` on the shipped sample into `dir/out` with `extra` flags, insists it fails
/// with exit code `code` and without a panic, and returns its standard error.
pub fn failing_sample_run(dir: &Path, extra: &[&str], code: i32) -> String {
    let input = fixture("sample.parquet");
    let output = dir.join("out");
    let mut args = vec![
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&output),
    ];
    args.extend_from_slice(extra);
    let result = neardup(&args);
    let message = stderr(&result);
    assert_eq!(result.status.code(), Some(code), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    message
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

pub fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// Rows of a SQL query over the Parquet folders of an output (`signatures`, `pairs`, ...).
pub async fn query(output: &Path, sql: &str) -> Vec<RecordBatch> {
    let mut ctx = SessionContext::new();
    neardup::udf::register_all(&mut ctx).expect("functions");
    for table in ["signatures", "pairs", "groups", "dedup"] {
        let dir = output.join(table);
        if dir.is_dir() {
            ctx.register_parquet(
                table,
                &format!("{}/", dir.display()),
                ParquetReadOptions::default(),
            )
            .await
            .expect("register output table");
        }
    }
    ctx.sql(sql)
        .await
        .expect("plan")
        .collect()
        .await
        .expect("run")
}

/// Every row of a query over an output, formatted and sorted, so that two outputs compare whole.
pub async fn sorted_rows(output: &Path, sql: &str) -> Vec<String> {
    let batches = query(output, sql).await;
    let text = pretty_format_batches(&batches).unwrap().to_string();
    let mut rows: Vec<String> = text
        .lines()
        .filter(|line| line.starts_with('|'))
        .map(str::to_string)
        .collect();
    rows.sort();
    rows
}

/// (id_a, id_b, distance) of an output's `pairs` with Int64 ids, in file order.
pub async fn pairs_of(output: &Path) -> Vec<(i64, i64, u8)> {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::{Int64Type, UInt8Type};
    let mut pairs = Vec::new();
    for b in &query(output, "SELECT id_a, id_b, distance FROM pairs").await {
        let (a, bb, d) = (
            b.column(0).as_primitive::<Int64Type>(),
            b.column(1).as_primitive::<Int64Type>(),
            b.column(2).as_primitive::<UInt8Type>(),
        );
        for i in 0..b.num_rows() {
            pairs.push((a.value(i), bb.value(i), d.value(i)));
        }
    }
    pairs
}

/// `neardup run` of `inputs` into `out` at `--threads threads`.
pub fn run_with_threads(inputs: &[&Path], out: &Path, threads: &str) {
    let mut args = vec!["run", "--input"];
    args.extend(inputs.iter().map(|input| path_str(input)));
    args.extend(["--output", path_str(out), "--threads", threads, "--quiet"]);
    neardup_ok(&args);
}

/// Writes the result of a SQL query (through the binary) as a Parquet file.
pub fn make_parquet(path: &Path, select: &str) {
    // A UNION ALL's branches run as separate partitions and reach the file in any order; sorting
    // by the first column (the id in every caller) makes the file's row order, and with it input
    // order, representatives and group numbers, the same on every run.
    neardup_ok(&[
        "query",
        &format!(
            "COPY (SELECT * FROM ({select}) ORDER BY 1) TO '{}'",
            path_str(path)
        ),
    ]);
}

/// The summary.json of an output folder.
pub fn summary(output: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(output.join("summary.json")).unwrap()).unwrap()
}

/// Writes fingerprints as a Parquet file with columns id (Int64) and simhash (UInt64).
pub fn write_fingerprints(path: &Path, fingerprints: &[(i64, u64)]) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("simhash", DataType::UInt64, false),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from_iter_values(
                fingerprints.iter().map(|f| f.0),
            )),
            Arc::new(UInt64Array::from_iter_values(
                fingerprints.iter().map(|f| f.1),
            )),
        ],
    )
    .expect("batch");
    let file = std::fs::File::create(path).expect("create parquet");
    let mut writer = ArrowWriter::try_new(file, schema, None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

/// The project's deterministic generator, so tests need no seed handling.
pub use neardup::rng::SplitMix64;

/// A small tmpfs mounted for a test (root only); `None` where the machine does not allow
/// mounting one. Unmounted when dropped.
pub struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    pub fn mount(options: &str) -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs", path_str(dir.path())])
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(Self(dir))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}
