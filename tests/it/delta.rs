//! Delta Lake tables in and out, checked with an independent reader and writer: delta-rs's
//! Python package (`deltalake`, with pyarrow; `delta_client.py`), never neardup's own reader.
//! The oracle of each output is the Parquet output of the same run.
//!
//! Where no Python with `deltalake` is found the tests say so and pass without running, unless
//! `NEARDUP_REQUIRE_DELTA` is set (CI sets it), when they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{
    fixture, make_parquet, neardup, neardup_ok, path_str, run_sample, run_sample_locally,
    sorted_rows, stderr, summary,
};
use crate::s3::S3Server;

/// The Python that has `deltalake`: the venv `.ci/run` makes, or `NEARDUP_PYTHON`.
pub fn python(test: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os("NEARDUP_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let home = PathBuf::from(std::env::var_os("HOME")?);
            Some(home.join(".cache/neardup/venv/bin/python"))
        });
    let works = candidate.as_ref().is_some_and(|python| {
        Command::new(python)
            .args(["-c", "import deltalake, pyarrow"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if works {
        return candidate;
    }
    if std::env::var_os("NEARDUP_REQUIRE_DELTA").is_some() {
        panic!("{test}: NEARDUP_REQUIRE_DELTA is set but no Python with deltalake was found");
    }
    eprintln!("{test}: skipped: no Python with deltalake (pip install deltalake pyarrow)");
    None
}

/// The independent client, with `env` (an S3 server's) for tables on a store.
struct Client {
    python: PathBuf,
    env: Vec<(String, String)>,
}

impl Client {
    fn new(test: &str) -> Option<Client> {
        Some(Client {
            python: python(test)?,
            env: Vec::new(),
        })
    }

    fn run(&self, args: &[&str]) -> Output {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/delta_client.py");
        Command::new(&self.python)
            .arg(script)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .expect("the Delta test client runs")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "delta_client {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Asserts the table (at `version`) holds exactly the rows of the Parquet folders.
    fn assert_same_rows(&self, table: &str, version: &str, parquet: &[&Path]) -> u64 {
        let mut args = vec!["compare", table, version];
        args.extend(parquet.iter().map(|p| path_str(p)));
        let said = self.ok(&args);
        said.trim_end_matches(" rows")
            .parse()
            .unwrap_or_else(|_| panic!("{said}"))
    }

    fn count(&self, table: &str, version: &str) -> u64 {
        self.ok(&["count", table, version]).parse().unwrap()
    }

    fn version(&self, table: &str) -> u64 {
        self.ok(&["version", table]).parse().unwrap()
    }

    fn operations(&self, table: &str) -> Vec<String> {
        self.ok(&["history", table])
            .lines()
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
            .collect()
    }
}

const TABLES: [&str; 4] = ["signatures", "pairs", "groups", "dedup"];

fn query_csv(data: &Path, sql: &str) -> String {
    neardup_ok(&["query", "--data", path_str(data), "--format", "csv", sql])
}

#[test]
fn delta_outputs_hold_the_rows_of_the_parquet_outputs_and_read_back_at_their_types() {
    let Some(client) = Client::new("delta_outputs_hold_the_rows") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (parquet, delta) = (dir.path().join("parquet"), dir.path().join("delta"));
    run_sample_locally(&parquet);
    run_sample(&delta, &["--output-format", "delta"]);
    for table in TABLES {
        let rows = client.assert_same_rows(
            path_str(&delta.join(table)),
            "latest",
            &[&parquet.join(table)],
        );
        if table != "pairs" {
            assert!(rows > 0, "{table} is empty");
        }
    }
    let versions = &summary(&delta)["delta_tables"];
    for table in TABLES {
        assert_eq!(versions[table]["version"], 0, "{versions}");
    }
    // neardup reads its Delta tables back with the types of the Parquet outputs.
    for sql in [
        "SELECT id, simhash, bucket1, bucket4, features, sketch, arrow_typeof(simhash) AS t, \
         arrow_typeof(sketch) AS s FROM signatures ORDER BY id",
        "SELECT id_a, id_b, distance, arrow_typeof(distance) AS t FROM pairs ORDER BY id_a, id_b",
        "SELECT * FROM groups ORDER BY id",
        "SELECT * FROM dedup ORDER BY id",
    ] {
        assert_eq!(query_csv(&delta, sql), query_csv(&parquet, sql), "{sql}");
    }
}

#[test]
fn an_overwrite_is_a_new_version_and_the_previous_one_stays_readable() {
    let Some(client) = Client::new("an_overwrite_is_a_new_version") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let delta = dir.path().join("delta");
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let other = ["--k", "3", "--verify", "off"];
    run_sample(&first, &[]);
    run_sample(&second, &other);
    run_sample(&delta, &["--output-format", "delta"]);
    let refused = neardup(&[
        "run",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&delta),
        "--output-format",
        "delta",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("--append"),
        "{}",
        stderr(&refused)
    );
    let mut overwrite = vec!["--output-format", "delta", "--overwrite"];
    overwrite.extend_from_slice(&other);
    run_sample(&delta, &overwrite);
    for table in TABLES {
        let place = delta.join(table);
        client.assert_same_rows(path_str(&place), "0", &[&first.join(table)]);
        client.assert_same_rows(path_str(&place), "1", &[&second.join(table)]);
        assert_eq!(summary(&delta)["delta_tables"][table]["previous"], 0);
    }
    let sql = "SELECT * FROM pairs ORDER BY id_a, id_b";
    assert_eq!(query_csv(&delta, sql), query_csv(&second, sql));
}

/// The sample run once into `dir/delta` as Delta tables: the folder, and each table's rows.
fn first_delta_run(client: &Client, dir: &Path) -> (PathBuf, Vec<u64>) {
    let delta = dir.join("delta");
    run_sample(&delta, &["--output-format", "delta"]);
    let rows = TABLES
        .iter()
        .map(|t| client.count(path_str(&delta.join(t)), "latest"))
        .collect();
    (delta, rows)
}

/// The sample with its ids moved up by `by`: another day's documents, which an append without
/// an index takes (the sample's own ids are in the tables already).
fn sample_moved(dir: &Path, by: i64) -> PathBuf {
    let path = dir.join(format!("sample_plus_{by}.parquet"));
    let sample = fixture("sample.parquet");
    make_parquet(
        &path,
        &format!(
            "SELECT id + {by} AS id, lang, note, text FROM '{}'",
            path_str(&sample)
        ),
    );
    path
}

#[test]
fn a_run_stopped_between_commits_is_named_and_undone_by_the_next_append() {
    let Some(client) = Client::new("a_run_stopped_between_commits") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (delta, rows) = first_delta_run(&client, dir.path());
    let next_day = sample_moved(dir.path(), 100);
    let args = [
        "run",
        "--input",
        path_str(&next_day),
        "--output",
        path_str(&delta),
        "--output-format",
        "delta",
        "--append",
        "-q",
    ];
    let stopped = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .env("NEARDUP_STOP_AFTER_DELTA_COMMIT", "pairs")
        .output()
        .unwrap();
    assert!(!stopped.status.success());
    // Every table is at its old version or its new one; summary.json still names the old.
    let at: Vec<u64> = TABLES
        .iter()
        .map(|t| client.version(path_str(&delta.join(t))))
        .collect();
    assert_eq!(at, [1, 1, 0, 0]);
    assert_eq!(summary(&delta)["delta_tables"]["signatures"]["version"], 0);
    let out = neardup(&args);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    let name = path_str(&delta.join("signatures")).to_string();
    assert!(
        said.contains(&format!(
            "{name} is at version 1, but summary.json records version 0"
        )),
        "{said}"
    );
    assert!(said.contains("restored"), "{said}");
    // Two runs' rows, not three: the stopped run's rows were taken out first.
    for (table, first) in TABLES.iter().zip(&rows) {
        let place = delta.join(table);
        assert_eq!(
            client.count(path_str(&place), "latest"),
            2 * first,
            "{table}"
        );
    }
    let operations = client.operations(path_str(&delta.join("signatures")));
    assert_eq!(operations, ["WRITE", "WRITE", "RESTORE", "WRITE"]);
}

/// Ctrl-C between two commits of an overwrite: the tables committed are put back (a restore
/// commit each), summary.json names where every table is, exit 130, and the next append finds
/// nothing to repair.
#[test]
fn ctrl_c_between_commits_puts_back_the_tables_committed() {
    let Some(client) = Client::new("ctrl_c_between_commits") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (delta, rows) = first_delta_run(&client, dir.path());
    let sample = fixture("sample.parquet");
    let next_day = sample_moved(dir.path(), 100);
    let args = |mode: &'static str, k: &'static str| {
        // An overwrite runs the sample again; an append, the next day's documents.
        let input = if mode == "--append" {
            &next_day
        } else {
            &sample
        };
        [
            "run",
            "--input",
            path_str(input),
            "--output",
            path_str(&delta),
            "--output-format",
            "delta",
            mode,
            "--k",
            k,
        ]
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args("--overwrite", "2"))
        .env("NEARDUP_PAUSE_AFTER_DELTA_COMMIT", "pairs")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut said = String::new();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    for line in lines.by_ref() {
        let line = line.unwrap();
        said.push_str(&line);
        said.push('\n');
        if line.contains("pausing after the commit of pairs") {
            break;
        }
    }
    assert!(said.contains("pausing after"), "{said}");
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    for line in lines {
        said.push_str(&line.unwrap());
        said.push('\n');
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{said}");
    assert!(said.contains("restored"), "{said}");
    assert!(said.contains("commits stopped"), "{said}");
    // Every table holds the first run's rows; the two committed have a restore on top.
    for (table, first) in TABLES.iter().zip(&rows) {
        let place = delta.join(table);
        assert_eq!(client.count(path_str(&place), "latest"), *first, "{table}");
        let version = client.version(path_str(&place));
        assert_eq!(
            summary(&delta)["delta_tables"][table]["version"],
            version,
            "{table}"
        );
    }
    assert_eq!(
        client.operations(path_str(&delta.join("signatures"))),
        ["WRITE", "WRITE", "RESTORE"]
    );
    assert_eq!(
        client.operations(path_str(&delta.join("groups"))),
        ["WRITE"]
    );
    assert_eq!(summary(&delta)["parameters"]["k"], 7);
    // Nothing for the next run to name or repair.
    let out = neardup(&args("--append", "7"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("records version"),
        "{}",
        stderr(&out)
    );
}

/// Each group's id and its members' ids, as the client prints them.
fn groups_listed(client: &Client, table: &Path) -> Vec<(u64, String)> {
    client
        .ok(&["groups", path_str(table)])
        .lines()
        .map(|line| {
            let (group, ids) = line.split_once(' ').unwrap_or((line, ""));
            (group.parse().unwrap(), ids.to_string())
        })
        .collect()
}

/// Without an index each run numbers its groups from 1; appended, they are numbered after the
/// table's largest, so that two runs' groups never read as one. Ids the tables hold are
/// refused before any work, and the tables stay as they were.
#[test]
fn an_append_without_an_index_numbers_its_groups_after_the_tables_and_takes_no_id_twice() {
    let Some(client) = Client::new("an_append_without_an_index") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let half = |name: &str, rest: u8| {
        let path = dir.path().join(name);
        let select = format!(
            "SELECT * FROM '{}' WHERE id % 2 = {rest}",
            path_str(&sample)
        );
        make_parquet(&path, &select);
        path
    };
    let (odd, even) = (half("odd.parquet", 1), half("even.parquet", 0));
    // The oracle: each half run alone into Parquet tables, read by pyarrow.
    let alone = |input: &Path, name: &str| {
        let out = dir.path().join(name);
        neardup_ok(&[
            "run",
            "--input",
            path_str(input),
            "--output",
            path_str(&out),
        ]);
        groups_listed(&client, &out.join("groups"))
    };
    let first = alone(&odd, "odd_alone");
    let second = alone(&even, "even_alone");
    assert!(
        !first.is_empty() && !second.is_empty(),
        "{first:?} {second:?}"
    );
    let last = first.iter().map(|(group, _)| *group).max().unwrap();
    let mut want = first.clone();
    want.extend(
        second
            .iter()
            .map(|(group, ids)| (group + last, ids.clone())),
    );

    let delta = dir.path().join("delta");
    let run = |input: &Path, extra: &[&str]| {
        let mut args = vec![
            "run",
            "--input",
            path_str(input),
            "--output",
            path_str(&delta),
        ];
        args.extend_from_slice(&["--output-format", "delta", "-q"]);
        args.extend_from_slice(extra);
        neardup(&args)
    };
    for (input, extra) in [(&odd, &[][..]), (&even, &["--append"][..])] {
        let out = run(input, extra);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(groups_listed(&client, &delta.join("groups")), want);

    // The whole sample again: the odd and the even ids are in the tables already.
    let versions = |client: &Client| TABLES.map(|t| client.version(path_str(&delta.join(t))));
    let before = versions(&client);
    let out = run(&sample, &["--append"]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("these ids are already in"), "{said}");
    assert!(said.contains("--overwrite"), "{said}");
    // The smallest first, as integers (1, 2, 3, not 1, 10, 11).
    let listed: Vec<&str> = said
        .lines()
        .map(|l| l.trim_matches(|c| c == '|' || c == ' '))
        .filter(|l| l.parse::<u64>().is_ok())
        .collect();
    assert_eq!(listed, ["1", "2", "3", "4", "5"], "{said}");
    assert_eq!(versions(&client), before);
    assert_eq!(groups_listed(&client, &delta.join("groups")), want);
    // Ids of another kind: the Delta writer would have converted the strings "1".."20" to the
    // integers the table holds, twice each.
    let strings = dir.path().join("strings.parquet");
    let select = format!(
        "SELECT CAST(id AS VARCHAR) AS id, lang, note, text FROM '{}'",
        path_str(&sample)
    );
    make_parquet(&strings, &select);
    let out = run(&strings, &["--append"]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("holds ids of type Int64"), "{said}");
    assert_eq!(versions(&client), before);
    // On a cluster too (the check runs in this process, where the Delta table is read).
    let out = run(
        &sample,
        &["--append", "--cluster", "standalone", "--threads", "2"],
    );
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("these ids are already in"), "{said}");
    assert_eq!(versions(&client), before);
}

#[test]
fn a_delta_input_written_by_delta_rs_is_read_at_the_version_asked() {
    let Some(client) = Client::new("a_delta_input_written_by_delta_rs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("corpus");
    let sample = fixture("sample.parquet");
    client.ok(&[
        "write",
        path_str(&sample),
        path_str(&table),
        "append",
        "id < 11",
    ]);
    client.ok(&[
        "write",
        path_str(&sample),
        path_str(&table),
        "append",
        "id >= 11",
    ]);
    let whole = dir.path().join("whole");
    let latest = dir.path().join("latest");
    let recognised = dir.path().join("recognised");
    run_sample(&whole, &[]);
    let delta_input = format!("delta:{}", table.display());
    for (input, output) in [
        (delta_input.as_str(), &latest),
        (path_str(&table), &recognised),
    ] {
        neardup_ok(&["run", "--input", input, "--output", path_str(output), "-q"]);
        let reads = &summary(output)["delta_inputs"];
        assert_eq!(reads[0]["version"], 1, "{reads}");
        assert_eq!(reads[0]["table"], path_str(&table), "{reads}");
    }
    // The files of version 1 come in path order, not the sample's: compare what does not
    // depend on input order.
    let rt = tokio::runtime::Runtime::new().unwrap();
    for sql in [
        "SELECT id_a, id_b, distance FROM pairs",
        "SELECT id, group_size FROM groups",
    ] {
        let want = rt.block_on(sorted_rows(&whole, sql));
        assert!(!want.is_empty(), "{sql}");
        assert_eq!(rt.block_on(sorted_rows(&latest, sql)), want, "{sql}");
        assert_eq!(rt.block_on(sorted_rows(&recognised, sql)), want, "{sql}");
    }
    // Time travel: version 0 is the first ten documents, and only them.
    let first = dir.path().join("first.parquet");
    make_parquet(
        &first,
        &format!("SELECT * FROM '{}' WHERE id < 11", sample.display()),
    );
    let (old, oracle) = (dir.path().join("old"), dir.path().join("oracle"));
    let at_zero = format!("{delta_input}@version=0");
    neardup_ok(&["run", "--input", &at_zero, "--output", path_str(&old), "-q"]);
    neardup_ok(&[
        "run",
        "--input",
        path_str(&first),
        "--output",
        path_str(&oracle),
        "-q",
    ]);
    assert_eq!(summary(&old)["delta_inputs"][0]["version"], 0);
    assert_eq!(summary(&old)["counts"]["documents"], 10);
    for sql in [
        "SELECT * FROM groups",
        "SELECT * FROM pairs",
        "SELECT * FROM dedup",
    ] {
        let want = rt.block_on(sorted_rows(&oracle, sql));
        assert_eq!(rt.block_on(sorted_rows(&old, sql)), want, "{sql}");
    }
    // A version the table does not have is named, with the ones it has.
    let missing = format!("{delta_input}@version=7");
    let out = neardup(&["run", "--input", &missing, "--output", path_str(&old), "-q"]);
    assert_eq!(out.status.code(), Some(1));
    let said = stderr(&out);
    assert!(
        said.contains("version 7") && said.contains("latest version is 1"),
        "{said}"
    );
}

#[test]
fn daily_appends_through_the_index_make_one_table_with_a_commit_a_day() {
    let Some(client) = Client::new("daily_appends_through_the_index") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let (delta, index, oracle_index) = (
        dir.path().join("delta"),
        dir.path().join("index"),
        dir.path().join("oracle-index"),
    );
    let mut oracles = Vec::new();
    for (day, filter) in ["id < 8", "id >= 8 AND id < 15", "id >= 15"]
        .iter()
        .enumerate()
    {
        let input = dir.path().join(format!("day{day}.parquet"));
        make_parquet(
            &input,
            &format!("SELECT * FROM '{}' WHERE {filter}", sample.display()),
        );
        let oracle = dir.path().join(format!("oracle{day}"));
        let common = ["--update-index", "-q"];
        let mut args = vec!["run", "--input", path_str(&input), "--index"];
        args.extend([path_str(&oracle_index), "--output", path_str(&oracle)]);
        args.extend(common);
        neardup_ok(&args);
        let mut args = vec!["run", "--input", path_str(&input), "--index"];
        args.extend([path_str(&index), "--output", path_str(&delta)]);
        args.extend(["--output-format", "delta", "--append"]);
        args.extend(common);
        neardup_ok(&args);
        oracles.push(oracle);
    }
    for table in ["dedup", "groups", "signatures"] {
        let place = delta.join(table);
        let folders: Vec<PathBuf> = oracles.iter().map(|o| o.join(table)).collect();
        let folders: Vec<&Path> = folders.iter().map(PathBuf::as_path).collect();
        let rows = client.assert_same_rows(path_str(&place), "latest", &folders);
        assert!(rows > 0, "{table}");
        assert_eq!(client.operations(path_str(&place)), ["WRITE"; 3], "{table}");
    }
    assert_eq!(summary(&delta)["delta_tables"]["dedup"]["version"], 2);
    assert_eq!(summary(&delta)["index"]["batch"], 3);

    // An append matched against the index and not added to it would leave a batch in the
    // tables that the index lacks: refused.
    let next_day = sample_moved(dir.path(), 100);
    let append = |input: &Path, update: bool| {
        let mut args = vec![
            "run",
            "--input",
            path_str(input),
            "--index",
            path_str(&index),
        ];
        args.extend([
            "--output",
            path_str(&delta),
            "--output-format",
            "delta",
            "--append",
        ]);
        if update {
            args.push("--update-index");
        }
        neardup(&args)
    };
    let out = append(&next_day, false);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("needs --update-index"),
        "{}",
        stderr(&out)
    );
    // A day committed to the tables whose batch never reached the index (as a run stopped
    // between the two leaves it; its batch is taken out of the index here): repeating it
    // would append its rows a second time.
    let out = append(&next_day, true);
    assert!(out.status.success(), "{}", stderr(&out));
    for name in ["batch=000004", "committed/batch=000004"] {
        let place = index.join(name);
        match place.is_dir() {
            true => std::fs::remove_dir_all(&place).unwrap(),
            false => std::fs::remove_file(&place).unwrap(),
        }
    }
    let rows = client.count(path_str(&delta.join("signatures")), "latest");
    let out = append(&next_day, true);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("but not in --index"), "{said}");
    assert_eq!(
        client.count(path_str(&delta.join("signatures")), "latest"),
        rows
    );
    // A day the index holds is named by the index's own check, which runs first.
    let out = append(&dir.path().join("day2.parquet"), true);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("already in the index"), "{said}");
}

#[test]
fn delta_tables_on_s3_are_read_by_delta_rs_and_by_the_next_run() {
    let Some(mut client) = Client::new("delta_tables_on_s3") else {
        return;
    };
    let Some(server) = S3Server::with_sample("delta_tables_on_s3") else {
        return;
    };
    client.env = server.env();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    run_sample_locally(&local);
    server.neardup_ok(&[
        "run",
        "--input",
        "s3://lake/in/sample.parquet",
        "--output",
        "s3://lake/out",
        "--output-format",
        "delta",
        "-q",
    ]);
    for table in TABLES {
        let url = format!("s3://lake/out/{table}");
        client.assert_same_rows(&url, "latest", &[&local.join(table)]);
    }
    let keys = server.keys("lake", "out/");
    assert!(keys.contains(&"out/summary.json".to_string()), "{keys:?}");
    assert!(
        !keys.iter().any(|k| k.contains("_neardup_work")),
        "{keys:?}"
    );
    let sql = "SELECT * FROM groups ORDER BY id";
    let on_s3 = server.neardup_ok(&["query", "--data", "s3://lake/out", "--format", "csv", sql]);
    assert_eq!(on_s3, query_csv(&local, sql));
    // The output as the next run's input: its dedup, at the version its summary names.
    let again = dir.path().join("again");
    server.neardup_ok(&[
        "run",
        "--input",
        "s3://lake/out",
        "--output",
        path_str(&again),
        "-q",
    ]);
    let kept = &summary(&local)["counts"]["documents_kept"];
    assert_eq!(&summary(&again)["counts"]["documents"], kept);
    assert_eq!(
        summary(&again)["delta_inputs"][0]["table"],
        "s3://lake/out/dedup"
    );
}

#[test]
fn a_failed_delta_run_leaves_no_folder_it_made() {
    // A run that fails before its first commit (here on a JSON Lines value of the wrong
    // kind) removes the output folder it made, as a Parquet output's run does.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(
        &input,
        "{\"id\":1,\"text\":\"a page of the manual\"}\n{\"id\":2,\"text\":7}\n",
    )
    .unwrap();
    let output = dir.path().join("out");
    let out = neardup(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&output),
        "--output-format",
        "delta",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("line 2"), "{}", stderr(&out));
    assert!(!output.exists());
}

#[test]
fn a_date_beyond_deltas_statistics_is_refused_before_writing() {
    // delta-rs's writer panicked on a date its statistics cannot hold (beyond the year 262142),
    // after writing the dedup table's file, which the run left behind without a log.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("dated.parquet");
    let output = dir.path().join("out");
    let run_with_first_day = |day: i64| {
        let sql = format!(
            "SELECT 'd' || value AS id, 'page ' || (value % 5) || ' of the manual' AS text, \
             arrow_cast(arrow_cast(CASE WHEN value = 0 THEN {day} ELSE 0 END, 'Int32'), \
             'Date32') AS day FROM generate_series(0, 49)"
        );
        neardup_ok(&["query", "--overwrite", "--out", path_str(&input), &sql]);
        neardup(&[
            "run",
            "-q",
            "--input",
            path_str(&input),
            "--output",
            path_str(&output),
            "--output-format",
            "delta",
        ])
    };
    let out = run_with_first_day(i32::MAX as i64);
    let message = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{message}");
    assert!(
        message.contains("column 'day' holds a date 2147483647 days from 1970-01-01"),
        "{message}"
    );
    assert!(!message.contains("internal error"), "{message}");
    assert!(!output.exists(), "nothing is left of the run");
    let out = run_with_first_day(-96_465_293);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!stderr(&out).contains("internal error"), "{}", stderr(&out));
    // The first and the last day the statistics hold are written.
    let out = run_with_first_day(-96_465_292);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    std::fs::remove_dir_all(&output).unwrap();
    let out = run_with_first_day(95_026_236);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let days = neardup_ok(&[
        "query",
        "--data",
        path_str(&output),
        "--format",
        "csv",
        "SELECT count(*) AS n, max(arrow_cast(day, 'Int32')) AS last FROM dedup",
    ]);
    assert_eq!(days, "n,last\n5,95026236\n");
}

#[test]
fn columns_named_alike_but_for_case_are_refused_before_the_run() {
    // Delta does not tell `id` from `Id`: delta-rs refused them at the dedup table's commit,
    // after the whole run. Now the run stops first, naming both, at the top or in a struct.
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("value AS \"Id\"", "'id' and 'Id' differ only in case"),
        (
            "named_struct('a', 1, 'A', 2) AS s",
            "'a' and 'A' (inside 's') differ only in case",
        ),
        (
            "map(['k'], [named_struct('b', 1, 'B', 2)]) AS m",
            "'b' and 'B' (inside 'value') differ only in case",
        ),
    ];
    for (case, (column, expected)) in cases.into_iter().enumerate() {
        let input = dir.path().join("cased.parquet");
        let sql = format!(
            "SELECT 'd' || value AS id, 'page ' || value || ' of the manual' AS text, {column} \
             FROM generate_series(0, 9)"
        );
        neardup_ok(&["query", "--overwrite", "--out", path_str(&input), &sql]);
        let output = dir.path().join(format!("out{case}"));
        let args = [
            "run",
            "-q",
            "--input",
            path_str(&input),
            "--output",
            path_str(&output),
        ];
        let out = neardup(&[&args[..], &["--output-format", "delta"]].concat());
        let message = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{message}");
        assert!(message.contains(expected), "{message}");
        assert!(
            !message.contains("removed"),
            "no table was written: {message}"
        );
        assert!(!output.exists(), "{message}");
        // Parquet tables take them.
        neardup_ok(&args);
    }
}

#[test]
fn delta_flags_and_places_that_cannot_work_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--input", path_str(&sample)];
        args.extend_from_slice(extra);
        neardup(&args)
    };
    let out_dir = dir.path().join("out");
    let out = run(&["--output", path_str(&out_dir), "--append"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--output-format delta"),
        "{}",
        stderr(&out)
    );
    // A Parquet output is not replaced by Delta tables, nor the other way round.
    run_sample_locally(&out_dir);
    let out = run(&[
        "--output",
        path_str(&out_dir),
        "--output-format",
        "delta",
        "--overwrite",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("Parquet tables"), "{}", stderr(&out));
    let delta_dir = dir.path().join("delta");
    run_sample(&delta_dir, &["--output-format", "delta"]);
    let out = run(&["--output", path_str(&delta_dir), "--overwrite"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // A folder of someone else's files takes no Delta tables.
    let foreign = dir.path().join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
    let out = run(&["--output", path_str(&foreign), "--output-format", "delta"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("notes.txt"), "{}", stderr(&out));
    assert!(foreign.join("notes.txt").is_file());
    // Nor a folder holding someone's files where a table goes (the table was written around
    // them), nor a file there; a run stopped before its first commit leaves only the Delta
    // writer's own files, which the next run writes over.
    let inside = dir.path().join("inside");
    std::fs::create_dir_all(inside.join("dedup")).unwrap();
    std::fs::write(inside.join("dedup/mine.txt"), "mine").unwrap();
    std::fs::write(inside.join("pairs"), "mine too").unwrap();
    let out = run(&["--output", path_str(&inside), "--output-format", "delta"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("holds pairs, dedup/mine.txt;"),
        "{}",
        stderr(&out)
    );
    assert!(!inside.join("dedup/_delta_log").exists());
    assert_eq!(std::fs::read(inside.join("pairs")).unwrap(), b"mine too");
    let stopped = dir.path().join("stopped");
    std::fs::create_dir_all(stopped.join("dedup/lang=en")).unwrap();
    std::fs::write(stopped.join("dedup/part-00000-1-c000.zstd.parquet"), "cut").unwrap();
    let out = run(&["--output", path_str(&stopped), "--output-format", "delta"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stopped.join("dedup/_delta_log").is_dir());
    // delta: of a folder without a log.
    let not_a_table = format!("delta:{}", foreign.display());
    let out = neardup(&[
        "run",
        "--input",
        &not_a_table,
        "--output",
        path_str(&dir.path().join("x")),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a Delta table"),
        "{}",
        stderr(&out)
    );
}
