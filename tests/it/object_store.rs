//! Inputs and outputs on an object store (a real S3-compatible server on loopback, `s3.rs`),
//! and corpora in JSON Lines and CSV. The oracle for a run on the store is the same run on
//! local files: its tables, read back from the store by the test's own client and reader, must
//! be those of the local run row for row.

use std::path::Path;

use datafusion::arrow::util::pretty::pretty_format_batches;

use crate::common::{
    fixture, neardup, neardup_ok, pairs_of, path_str, query, run_sample_locally, stderr,
};
use crate::processes::{start_executors_with_env, start_scheduler_with_env};
use crate::s3::S3Server;

/// The rows of every output table, sorted, as text: what two runs must share.
pub async fn tables(output: &Path) -> Vec<String> {
    let queries = [
        "SELECT id, simhash, input_order FROM signatures ORDER BY id",
        "SELECT id_a, id_b, distance, similarity FROM pairs ORDER BY id_a, id_b",
        "SELECT id, group_id, representative_id FROM groups ORDER BY id",
        "SELECT * FROM dedup ORDER BY id",
    ];
    let mut shown = Vec::new();
    for sql in queries {
        let batches = query(output, sql).await;
        shown.push(pretty_format_batches(&batches).expect("format").to_string());
    }
    shown
}

/// The manifest of an output on the server, parsed.
fn manifest(server: &S3Server, bucket: &str, output: &str) -> serde_json::Value {
    let bytes = server
        .get(bucket, &format!("{output}/_SUCCESS"))
        .unwrap_or_else(|| panic!("{output}/_SUCCESS is on the server"));
    serde_json::from_slice(&bytes).expect("the manifest is JSON")
}

/// Downloads the tables the output's manifest names into `dir`.
pub fn download_output(server: &S3Server, bucket: &str, output: &str, dir: &Path) {
    let run = manifest(server, bucket, output)["run"]
        .as_str()
        .expect("the manifest names its run")
        .to_string();
    server.download(bucket, &format!("{output}/{run}/"), dir);
}

#[tokio::test]
async fn a_run_on_s3_writes_the_tables_of_the_same_run_on_local_files() {
    let Some(server) = S3Server::start("run on s3", &[]) else {
        return;
    };
    server.create_bucket("lake");
    let dir = tempfile::tempdir().unwrap();
    // Hive-partitioned input, the same bytes on the store and on disk.
    let local_input = dir.path().join("crawl/dt=2026-11-30");
    std::fs::create_dir_all(&local_input).unwrap();
    std::fs::copy(
        fixture("sample.parquet"),
        local_input.join("part-0.parquet"),
    )
    .unwrap();
    server.put_file(
        "lake",
        "crawl/dt=2026-11-30/part-0.parquet",
        &fixture("sample.parquet"),
    );
    let local_out = dir.path().join("local");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&dir.path().join("crawl")),
        "--output",
        path_str(&local_out),
        "-q",
    ]);
    let out = server.neardup(&[
        "run",
        "--input",
        "s3://lake/crawl/",
        "--output",
        "s3://lake/neardup/dt=2026-11-30",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(
        printed.contains("s3://lake/neardup/dt=2026-11-30"),
        "{printed}"
    );
    assert!(!printed.contains("neardup-test-secret"), "{printed}");

    let copy = dir.path().join("from-s3");
    download_output(&server, "lake", "neardup/dt=2026-11-30", &copy);
    let summary = std::fs::read_to_string(copy.join("summary.json")).unwrap();
    assert!(!summary.contains("neardup-test-secret"), "{summary}");
    assert!(
        summary.contains("s3://lake/crawl/dt=2026-11-30/part-0.parquet"),
        "{summary}"
    );
    assert!(
        !copy.join("_work").exists(),
        "internal tables are removed before the commit"
    );
    assert_eq!(tables(&copy).await, tables(&local_out).await);
    // The partition folder is a column of the input, so dedup keeps it.
    let dt = query(&copy, "SELECT DISTINCT dt FROM dedup").await;
    assert!(
        pretty_format_batches(&dt)
            .unwrap()
            .to_string()
            .contains("2026-11-30")
    );

    // neardup query reads the output through its manifest.
    let sql = "SELECT count(*) AS n FROM groups";
    let remote = server.neardup_ok(&["query", "--data", "s3://lake/neardup/dt=2026-11-30", sql]);
    let local = neardup_ok(&["query", "--data", path_str(&local_out), sql]);
    assert_eq!(remote, local);
    let corpus = server.neardup_ok(&[
        "query",
        "--data",
        "s3://lake/neardup/dt=2026-11-30",
        "SELECT count(*) AS n FROM corpus",
    ]);
    let documents = neardup_ok(&[
        "query",
        "--data",
        path_str(&local_out),
        "SELECT count(*) AS n FROM corpus",
    ]);
    assert_eq!(corpus, documents);
}

/// Writes the sample's rows as `file.gz` and `file.zst` beside `file` (JSON Lines or CSV, by
/// `stored`), with DataFusion's own compressing writers.
fn compress(file: &Path, stored: &str) {
    for codec in ["gzip", "zstd"] {
        let extension = if codec == "gzip" { "gz" } else { "zst" };
        let target = format!("{}.{extension}", file.display());
        let sql = format!(
            "COPY (SELECT id, text FROM '{}' ORDER BY id) TO '{target}' STORED AS {stored} \
             OPTIONS ('format.compression' '{codec}')",
            fixture("sample.parquet").display()
        );
        neardup_ok(&["query", &sql]);
        assert!(Path::new(&target).is_file(), "{target}");
    }
}

#[tokio::test]
async fn json_lines_and_csv_corpora_give_the_groups_of_the_same_rows_in_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let select = format!("SELECT id, text FROM '{}' ORDER BY id", sample.display());
    let jsonl = dir.path().join("sample.jsonl");
    let csv = dir.path().join("sample.csv");
    let parquet = dir.path().join("sample.parquet");
    for (file, format) in [(&jsonl, "ndjson"), (&csv, "csv"), (&parquet, "parquet")] {
        neardup_ok(&[
            "query",
            "--format",
            format,
            "--out",
            path_str(file),
            &select,
        ]);
    }
    compress(&jsonl, "JSON");
    compress(&csv, "CSV");
    // CSV has no types: its ids are read as text, so they are compared as numbers.
    let groups = "SELECT CAST(id AS BIGINT) AS id, group_id FROM groups ORDER BY 1";
    let run = |input: &Path, name: &str, extra: &[&str]| {
        let output = dir.path().join(name);
        let mut args = vec![
            "run",
            "--input",
            path_str(input),
            "--output",
            path_str(&output),
            "-q",
        ];
        args.extend_from_slice(extra);
        neardup_ok(&args);
        output
    };
    let expected = query(&run(&parquet, "out-parquet", &[]), groups).await;
    let expected = pretty_format_batches(&expected).unwrap().to_string();
    assert!(
        expected.lines().count() > 10,
        "the sample has groups:\n{expected}"
    );
    for name in [
        "sample.jsonl",
        "sample.jsonl.gz",
        "sample.jsonl.zst",
        "sample.csv",
        "sample.csv.gz",
        "sample.csv.zst",
    ] {
        let output = run(&dir.path().join(name), &format!("out-{name}"), &[]);
        let got = query(&output, groups).await;
        assert_eq!(
            pretty_format_batches(&got).unwrap().to_string(),
            expected,
            "{name}"
        );
    }
    // A name that says nothing, with the format given.
    let unnamed = dir.path().join("dump.data");
    std::fs::copy(&jsonl, &unnamed).unwrap();
    let output = run(&unnamed, "out-given", &["--input-format", "jsonl"]);
    let got = query(&output, groups).await;
    assert_eq!(pretty_format_batches(&got).unwrap().to_string(), expected);
    // A folder of JSON Lines files (no Parquet in it).
    let folder = dir.path().join("jsonl-folder");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(&jsonl, folder.join("part-0.jsonl")).unwrap();
    let output = run(&folder, "out-folder", &[]);
    let got = query(&output, groups).await;
    assert_eq!(pretty_format_batches(&got).unwrap().to_string(), expected);
    // A JSON Lines file that is not one is named.
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(&broken, "{\"id\": 1, \"text\": \"a\"}\nnot json\n").unwrap();
    let out = neardup(&[
        "run",
        "--input",
        path_str(&broken),
        "--output",
        path_str(&dir.path().join("out-broken")),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("broken.jsonl"), "{}", stderr(&out));
    assert!(!dir.path().join("out-broken").exists());
}

#[tokio::test]
async fn a_compressed_json_lines_corpus_on_s3_gives_the_local_groups() {
    let Some(server) = S3Server::start("jsonl on s3", &[]) else {
        return;
    };
    server.create_bucket("dump");
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("sample.jsonl");
    let select = format!(
        "SELECT id, text FROM '{}' ORDER BY id",
        fixture("sample.parquet").display()
    );
    neardup_ok(&[
        "query",
        "--format",
        "ndjson",
        "--out",
        path_str(&jsonl),
        &select,
    ]);
    compress(&jsonl, "JSON");
    let zst = dir.path().join("sample.jsonl.zst");
    server.put_file("dump", "2026/part-0.jsonl.zst", &zst);
    server.put("dump", "2026/_SUCCESS", b"");
    let local = dir.path().join("local");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&zst),
        "--output",
        path_str(&local),
        "-q",
    ]);
    server.neardup_ok(&[
        "run",
        "--input",
        "s3://dump/2026/*.jsonl.zst",
        "--output",
        "s3://dump/out",
        "-q",
    ]);
    let copy = dir.path().join("copy");
    download_output(&server, "dump", "out", &copy);
    let groups = "SELECT id, group_id, representative_id FROM groups ORDER BY id";
    assert_eq!(
        pretty_format_batches(&query(&copy, groups).await)
            .unwrap()
            .to_string(),
        pretty_format_batches(&query(&local, groups).await)
            .unwrap()
            .to_string()
    );
}

#[tokio::test]
async fn overwriting_on_s3_commits_by_the_manifest_and_removes_what_runs_left() {
    let Some(server) = S3Server::with_sample("overwrite on s3") else {
        return;
    };
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--input",
            "s3://lake/in/sample.parquet",
            "--output",
            "s3://lake/out",
            "-q",
        ];
        args.extend_from_slice(extra);
        server.neardup(&args)
    };
    let first = run(&[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let first_run = manifest(&server, "lake", "out")["run"]
        .as_str()
        .unwrap()
        .to_string();
    // Without --overwrite an existing output is refused, and left as it was.
    let again = run(&[]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("--overwrite"), "{}", stderr(&again));
    assert_eq!(manifest(&server, "lake", "out")["run"], first_run.as_str());
    // What a killed run leaves: a run prefix no manifest names.
    server.put(
        "lake",
        "out/run-0000000000001-1-0/pairs/part-0.parquet",
        b"half",
    );
    let second = run(&["--overwrite"]);
    assert!(second.status.success(), "{}", stderr(&second));
    let second_run = manifest(&server, "lake", "out")["run"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(second_run, first_run);
    let keys = server.keys("lake", "out/");
    let prefixes: std::collections::BTreeSet<&str> = keys
        .iter()
        .map(|k| k.trim_start_matches("out/").split('/').next().unwrap())
        .collect();
    let expected: std::collections::BTreeSet<&str> =
        ["_SUCCESS", second_run.as_str()].into_iter().collect();
    assert_eq!(prefixes, expected, "{keys:?}");
    // A folder that is not a neardup output is never written into.
    server.put("lake", "theirs/report.csv", b"a,b\n");
    let out = server.neardup(&[
        "run",
        "--input",
        "s3://lake/in/sample.parquet",
        "--output",
        "s3://lake/theirs",
        "--overwrite",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("report.csv"), "{}", stderr(&out));
    assert_eq!(server.keys("lake", "theirs/"), ["theirs/report.csv"]);
}

#[test]
fn a_run_killed_during_an_overwrite_on_s3_leaves_the_previous_output_whole() {
    let Some(server) = S3Server::with_sample("kill on s3") else {
        return;
    };
    let args = [
        "run",
        "--input",
        "s3://lake/in/sample.parquet",
        "--output",
        "s3://lake/out",
        "-q",
        "--overwrite",
    ];
    server.neardup_ok(&args);
    let sql = "SELECT count(*) AS n FROM groups";
    let before = server.neardup_ok(&["query", "--data", "s3://lake/out", sql]);
    // Kill runs at several moments; whenever it dies, a reader sees one whole output.
    for delay_ms in [150, 400, 800] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(args)
            .envs(server.env())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let seen = server.neardup_ok(&["query", "--data", "s3://lake/out", sql]);
        assert_eq!(seen, before, "after a kill at {delay_ms} ms");
    }
    // The next run removes every prefix the killed ones left.
    server.neardup_ok(&args);
    let run = manifest(&server, "lake", "out")["run"]
        .as_str()
        .unwrap()
        .to_string();
    for key in server.keys("lake", "out/") {
        assert!(
            key == "out/_SUCCESS" || key.starts_with(&format!("out/{run}/")),
            "left behind: {key}"
        );
    }
}

#[test]
fn store_errors_name_the_url_and_write_nothing() {
    let Some(server) = S3Server::with_sample("s3 errors") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let local_out = dir.path().join("out");
    // Runs on `input` (with `extra` flags and environment) and checks it fails with `code`,
    // its message names `named`, no secret or panic shows, and nothing is written.
    let fails = |input: &str, extra: &[&str], env: &[(&str, &str)], code: i32, named: &str| {
        let mut args = vec!["run", "--input", input, "--output", path_str(&local_out)];
        args.extend_from_slice(extra);
        let out = server.neardup_with(&args, env);
        let message = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{input}: {message}");
        assert!(message.contains(named), "{input}: {message}");
        for never in ["panicked", "neardup-test-secret", "hunter2"] {
            assert!(!message.contains(never), "{input}: {message}");
        }
        assert!(!local_out.exists(), "{input}");
    };
    // A bucket that does not exist; an object that is not there.
    fails(
        "s3://no-such-bucket/in/",
        &[],
        &[],
        1,
        "s3://no-such-bucket/in",
    );
    let missing = "s3://lake/in/missing.parquet";
    fails(missing, &[], &[], 1, missing);
    // An endpoint where nothing listens.
    let nothing = [("AWS_ENDPOINT_URL", "http://127.0.0.1:9")];
    fails("s3://lake/in/", &[], &nothing, 1, "s3://lake/in");
    // Credentials in the URL are refused and not echoed.
    fails(
        "s3://AKIDEXAMPLE:hunter2@lake/in/",
        &[],
        &[],
        2,
        "environment",
    );
    // An index in a bucket that does not exist, in a prefix that holds other things, or on
    // http(s), which is read only.
    let index = ["--index", "s3://no-such-bucket/index", "--update-index"];
    fails("s3://lake/in/", &index, &[], 1, "s3://no-such-bucket/index");
    server.put("lake", "notes/readme.txt", b"mine");
    let foreign = ["--index", "s3://lake/notes", "--update-index"];
    fails("s3://lake/in/", &foreign, &[], 1, "not a neardup index");
    assert_eq!(server.keys("lake", "notes/"), ["notes/readme.txt"]);
    let http = ["--index", "http://127.0.0.1:9/index", "--update-index"];
    fails("s3://lake/in/", &http, &[], 2, "read only");
    // A JSON Lines object with a byte that is not UTF-8 on its second line: read again from
    // the store to name the line, as a local file is.
    server.put(
        "lake",
        "text/bad.jsonl",
        b"{\"id\":\"a\",\"text\":\"ok\"}\n{\"id\":\"b\",\"text\":\"x\xff\"}\n",
    );
    fails(
        "s3://lake/text/bad.jsonl",
        &[],
        &[],
        1,
        "line 2 is not UTF-8, at byte offset 42 of the file",
    );
    // A Parquet object whose footer places a column outside it stops the Parquet reader in a
    // stage, and one whose stored Arrow schema is damaged stops the Arrow reader when the
    // footer is read: both are named, as a local file is.
    let damaged = crate::robustness::with_footer(dir.path(), "damaged.parquet", |m| {
        crate::robustness::change_column(m, 0, |c| {
            c.set_dictionary_page_offset(None)
                .set_data_page_offset(-201)
        })
    });
    server.put(
        "lake",
        "damaged/in.parquet",
        &std::fs::read(damaged).unwrap(),
    );
    fails(
        "s3://lake/damaged/in.parquet",
        &[],
        &[],
        1,
        "s3://lake/damaged/in.parquet cannot be read: the reader stopped on it (column start \
         and length should not be negative)",
    );
    let schema = crate::robustness::with_footer(
        dir.path(),
        "schema.parquet",
        crate::robustness::with_damaged_arrow_schema,
    );
    server.put("lake", "schema/in.parquet", &std::fs::read(schema).unwrap());
    fails(
        "s3://lake/schema/in.parquet",
        &[],
        &[],
        1,
        "s3://lake/schema/in.parquet is not a readable Parquet file: the reader stopped on it",
    );
}

#[test]
fn wrong_credentials_are_refused_with_the_url_and_no_secret() {
    // moto checks signatures against its users once this count of unchecked requests is used.
    let Some(server) = S3Server::start(
        "wrong credentials",
        &[("INITIAL_NO_AUTH_ACTION_COUNT", "0")],
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = server.neardup_with(
        &[
            "run",
            "--input",
            "s3://lake/in/",
            "--output",
            path_str(&dir.path().join("out")),
        ],
        &[("AWS_SECRET_ACCESS_KEY", "a-wrong-secret-1234")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("s3://lake/in"), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("a-wrong-secret-1234"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("out").exists());
}

#[test]
fn gcs_and_azure_urls_resolve_through_the_same_registry() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    // No credentials file where GOOGLE_APPLICATION_CREDENTIALS points: a clear error that
    // names the bucket and what GCS reads.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "run",
            "--input",
            "gs://corpus/crawl/",
            "--output",
            path_str(&output),
        ])
        .env(
            "GOOGLE_APPLICATION_CREDENTIALS",
            dir.path().join("missing-key.json"),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("gs://corpus"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("GOOGLE_APPLICATION_CREDENTIALS"),
        "{}",
        stderr(&out)
    );
    assert!(!output.exists());
    // Azure without an account: the error says which settings Azure takes.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "run",
            "--input",
            "az://corpus/crawl/",
            "--output",
            path_str(&output),
        ])
        .env_remove("AZURE_STORAGE_ACCOUNT_NAME")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("AZURE_STORAGE_ACCOUNT_NAME"),
        "{}",
        stderr(&out)
    );
    // An unknown scheme is a usage error.
    let out = neardup(&[
        "run",
        "--input",
        "hdfs://nn/crawl",
        "--output",
        path_str(&output),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// A scheduler and two executors, each with its own work folder and none of the data: the
/// input is only on the store, and the executors write the outputs there themselves.
#[tokio::test]
async fn a_cluster_that_shares_no_folder_reads_and_writes_the_store() {
    let Some(server) = S3Server::with_sample("cluster on s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let env = server.env();
    let (scheduler, address) = start_scheduler_with_env(dir.path(), &[], &env);
    let executors = start_executors_with_env(dir.path(), 2, &address, &env);
    let local = dir.path().join("local");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&local),
        "-q",
    ]);
    let cluster = format!("df://{address}");
    let out = server.neardup(&[
        "run",
        "--input",
        "s3://lake/in/sample.parquet",
        "--output",
        "s3://lake/out",
        "--cluster",
        &cluster,
        "--threads",
        "4",
        "-q",
    ]);
    assert!(
        out.status.success(),
        "run --cluster failed:\n{}\nscheduler:\n{}\nexecutor 0:\n{}\nexecutor 1:\n{}",
        stderr(&out),
        scheduler.log(),
        executors[0].log(),
        executors[1].log()
    );
    let copy = dir.path().join("copy");
    download_output(&server, "lake", "out", &copy);
    assert_eq!(tables(&copy).await, tables(&local).await);
    for (n, executor) in executors.iter().enumerate() {
        assert!(
            executor.log().contains("Finished task"),
            "executor {n} ran no task"
        );
    }
}

#[test]
fn query_results_go_to_the_store_whole_and_are_not_replaced_unasked() {
    let Some(server) = S3Server::with_sample("query --out on s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sql = "SELECT id, note FROM 's3://lake/in/sample.parquet' ORDER BY id";
    let printed = server.neardup_ok(&["query", "--format", "csv", sql]);
    let csv_url = "s3://lake/results/sample.csv";
    server.neardup_ok(&["query", "--format", "csv", "--out", csv_url, sql]);
    let stored = server
        .get("lake", "results/sample.csv")
        .expect("the result is stored");
    assert_eq!(String::from_utf8(stored).unwrap(), printed);

    // Parquet: the same bytes as the same query written to a local file.
    let local = dir.path().join("sample.parquet");
    let parquet = ["query", "--format", "parquet", "--out"];
    let mut args = parquet.to_vec();
    args.extend([path_str(&local), sql]);
    server.neardup_ok(&args);
    let mut args = parquet.to_vec();
    args.extend(["s3://lake/results/sample.parquet", sql]);
    server.neardup_ok(&args);
    let stored = server
        .get("lake", "results/sample.parquet")
        .expect("stored");
    assert_eq!(stored, std::fs::read(&local).unwrap());

    // A bucket is no place for a file.
    let out = server.neardup(&["query", "--out", "s3://lake", "SELECT 1 AS one"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("names a bucket"), "{}", stderr(&out));

    // An existing object is replaced only with --overwrite.
    let other = "SELECT 1 AS one";
    let out = server.neardup(&["query", "--format", "csv", "--out", csv_url, other]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--overwrite"), "{}", stderr(&out));
    let replace = [
        "query",
        "--format",
        "csv",
        "--out",
        csv_url,
        "--overwrite",
        other,
    ];
    server.neardup_ok(&replace);
    assert_eq!(
        server.get("lake", "results/sample.csv").unwrap(),
        b"one\n1\n"
    );

    // COPY ... TO a URL inside the SQL goes through the same store.
    let copy =
        "COPY (SELECT id FROM 's3://lake/in/sample.parquet') TO 's3://lake/results/ids.parquet'";
    server.neardup_ok(&["query", copy]);
    let ids = dir.path().join("ids.parquet");
    std::fs::write(
        &ids,
        server.get("lake", "results/ids.parquet").expect("copied"),
    )
    .unwrap();
    let count = format!("SELECT count(*) AS n FROM '{}'", path_str(&ids));
    let counted = neardup_ok(&["query", "--format", "csv", &count]);
    let source = "SELECT count(*) AS n FROM 's3://lake/in/sample.parquet'";
    assert_eq!(
        counted,
        server.neardup_ok(&["query", "--format", "csv", source])
    );
}

#[tokio::test]
async fn an_output_given_as_input_is_read_through_its_manifest() {
    let Some(server) = S3Server::with_sample("an output as input") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    server.neardup_ok(&[
        "run",
        "--input",
        "s3://lake/in/",
        "--output",
        "s3://lake/out",
        "-q",
    ]);
    let local = at("local");
    run_sample_locally(&local);

    // match on the output (on the store, and a local folder) reads its signatures.
    let signatures = local.join("signatures");
    let given = [
        ("s3://lake/out", at("m_s3")),
        (path_str(&local), at("m_local")),
        (path_str(&signatures), at("m_folder")),
    ];
    let mut found = Vec::new();
    for (input, output) in &given {
        let args = [
            "match",
            "--signatures",
            input,
            "--output",
            path_str(output),
            "-q",
        ];
        server.neardup_ok(&args);
        let mut pairs = pairs_of(output).await;
        pairs.sort_unstable();
        found.push(pairs);
    }
    assert!(!found[0].is_empty(), "the sample has pairs");
    assert_eq!(found[0], found[2], "the store's output");
    assert_eq!(found[1], found[2], "the local output");

    // run on the output reads its dedup: each document kept once more.
    let again = at("again");
    server.neardup_ok(&[
        "run",
        "--input",
        "s3://lake/out",
        "--output",
        path_str(&again),
        "-q",
    ]);
    let kept = query(&local, "SELECT count(*) FROM dedup").await;
    let read = query(&again, "SELECT count(*) FROM signatures").await;
    let show =
        |b: &[datafusion::arrow::array::RecordBatch]| pretty_format_batches(b).unwrap().to_string();
    assert_eq!(show(&read), show(&kept));

    // An output of match has no signatures to match again.
    let matched = "s3://lake/matched";
    server.neardup_ok(&[
        "match",
        "--signatures",
        "s3://lake/out",
        "--output",
        matched,
        "-q",
    ]);
    let refused = at("no");
    let args = [
        "match",
        "--signatures",
        matched,
        "--output",
        path_str(&refused),
        "-q",
    ];
    let out = server.neardup(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("without a signatures table"),
        "{}",
        stderr(&out)
    );
}
