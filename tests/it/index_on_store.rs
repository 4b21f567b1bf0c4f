//! A signature index on an object store (the real S3 server of `s3.rs`): batches through it
//! against the oracle of `incremental` (brute force over every batch at once), and two runs
//! committing the same batch number, of which the store's conditional write lets exactly one
//! land.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{
    fixture, make_parquet, neardup_ok, pairs_of, path_str, succeeded, write_fingerprints,
};
use crate::exactness::{bfs_groups, brute_force_pairs};
use crate::incremental::{batched_fingerprints, partition};
use crate::object_store::{download_output, tables};
use crate::s3::S3Server;

/// The binary with a store's environment.
fn run_with(env: &[(String, String)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .envs(env.iter().cloned())
        .output()
        .expect("the neardup binary runs")
}

/// `SELECT ...` over the index on the store, as CSV lines without the header.
fn index_query(env: &[(String, String)], index: &str, sql: &str) -> Vec<String> {
    let args = ["query", "--index", index, "--format", "csv", sql];
    let csv = succeeded(&args, run_with(env, &args));
    csv.lines().skip(1).map(str::to_string).collect()
}

/// (id, group_id) of the index's current groups.
fn index_groups(env: &[(String, String)], index: &str) -> Vec<(i64, u64)> {
    let sql = "SELECT id, group_id FROM index_groups ORDER BY id";
    index_query(env, index, sql)
        .iter()
        .map(|line| {
            let (id, group) = line.split_once(',').expect("two columns");
            (id.parse().unwrap(), group.parse().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn batches_through_an_index_on_s3_equal_one_run_over_all_of_them() {
    let Some(server) = S3Server::start("index on s3", &[]) else {
        return;
    };
    server.create_bucket("lake");
    let dir = tempfile::tempdir().unwrap();
    let (rows, batches) = batched_fingerprints();
    let index = "s3://lake/neardup-index";
    let mut all_pairs = Vec::new();
    for (b, range) in batches.iter().enumerate() {
        let file = dir.path().join(format!("batch{}.parquet", b + 1));
        write_fingerprints(&file, &rows[range.clone()]);
        let output = dir.path().join(format!("batch{}", b + 1));
        server.neardup_ok(&[
            "match",
            "--signatures",
            path_str(&file),
            "--output",
            path_str(&output),
            "--k",
            "3",
            "--index",
            index,
            "--update-index",
            "--quiet",
        ]);
        all_pairs.extend(pairs_of(&output).await);
    }
    let expected = brute_force_pairs(&rows, 3);
    all_pairs.sort_unstable();
    assert_eq!(all_pairs, expected, "the batches' pairs are all pairs");
    let documents = index_query(
        &server.env(),
        index,
        "SELECT count(DISTINCT id) FROM index_documents",
    );
    assert_eq!(
        documents,
        vec![rows.len().to_string()],
        "every document is indexed once"
    );
    let groups = index_groups(&server.env(), index);
    let oracle = partition(bfs_groups(&rows, &expected).into_iter().map(|g| (g.0, g.1)));
    assert_eq!(partition(groups), oracle, "group membership");

    // What the store holds: three commit records, each naming the one prefix of its batch.
    let keys = server.keys("lake", "neardup-index/");
    let records: Vec<&String> = keys.iter().filter(|k| k.contains("/committed/")).collect();
    assert_eq!(records.len(), 3, "{keys:?}");
    for number in 1..=3 {
        let record = server
            .get(
                "lake",
                &format!("neardup-index/committed/batch={number:06}"),
            )
            .expect("the commit record");
        let record: serde_json::Value = serde_json::from_slice(&record).unwrap();
        let part = record["part"].as_str().unwrap();
        assert_eq!(record["batch"]["batch"], number);
        let folder = format!("neardup-index/batch={number:06}/");
        assert!(
            keys.iter()
                .filter(|k| k.starts_with(&folder))
                .all(|k| k.starts_with(&format!("neardup-index/{part}/"))),
            "batch {number} holds only its committed part: {keys:?}"
        );
    }
    let counted = index_query(
        &server.env(),
        index,
        "SELECT batch, documents FROM index_batches",
    );
    let sizes: Vec<String> = batches
        .iter()
        .enumerate()
        .map(|(b, r)| format!("{},{}", b + 1, r.len()))
        .collect();
    assert_eq!(counted, sizes);
}

#[test]
fn two_runs_committing_one_batch_on_s3_land_exactly_one() {
    let Some(server) = S3Server::start("index race on s3", &[]) else {
        return;
    };
    server.create_bucket("lake");
    let keys = || server.keys("lake", "index/batch=000001/");
    two_runs_commit_batch_one(&server.env(), "s3://lake/index", keys);
}

/// Two runs with different documents commit batch 1 of the index at `index` at once (held at
/// the commit and released together): exactly one lands, the other fails saying so and leaves
/// no files (`batch_one_keys` lists the store's keys under `batch=000001/`), and run again it
/// becomes batch 2.
pub fn two_runs_commit_batch_one(
    env: &[(String, String)],
    index: &str,
    batch_one_keys: impl Fn() -> Vec<String>,
) {
    let dir = tempfile::tempdir().unwrap();
    let (rows, batches) = batched_fingerprints();
    // Two batches of different documents, each a valid first batch.
    let halves = [&rows[batches[0].clone()], &rows[batches[1].clone()]];
    let release = dir.path().join("release");
    let mut runs = Vec::new();
    for (n, half) in halves.iter().enumerate() {
        let file = dir.path().join(format!("half{n}.parquet"));
        write_fingerprints(&file, half);
        let output = dir.path().join(format!("out{n}"));
        let child = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["match", "--signatures", path_str(&file), "--output"])
            .arg(&output)
            .args(["--index", index, "--update-index", "--quiet"])
            .envs(env.iter().cloned())
            .env("NEARDUP_HOLD_INDEX_COMMIT", &release)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("neardup starts");
        runs.push(child);
    }
    // Both have read the index (no batch yet) and wait at their commit: release them at once.
    let ready = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with("release.ready-")
            })
            .count()
    };
    let start = Instant::now();
    while ready(dir.path()) < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "both runs reach the commit"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::write(&release, b"").unwrap();
    let outcomes: Vec<_> = runs
        .into_iter()
        .map(|child| child.wait_with_output().expect("neardup ends"))
        .collect();
    let won: Vec<usize> = (0..2).filter(|&n| outcomes[n].status.success()).collect();
    assert_eq!(won.len(), 1, "exactly one run lands");
    let (winner, loser) = (won[0], 1 - won[0]);
    let message = String::from_utf8_lossy(&outcomes[loser].stderr);
    assert_eq!(outcomes[loser].status.code(), Some(1), "{message}");
    assert!(
        message.contains("another run added batch 1") && message.contains(index),
        "{message}"
    );

    // The index is readable and holds the winner's batch alone, with the loser's files gone.
    let counted = index_query(env, index, "SELECT batch, documents FROM index_batches");
    assert_eq!(counted, vec![format!("1,{}", halves[winner].len())]);
    let ids = index_query(env, index, "SELECT id FROM index_documents ORDER BY id");
    let mut expected: Vec<i64> = halves[winner].iter().map(|r| r.0).collect();
    expected.sort_unstable();
    let expected: Vec<String> = expected.iter().map(i64::to_string).collect();
    assert_eq!(ids, expected, "the winner's documents");
    let parts: BTreeSet<String> = batch_one_keys()
        .iter()
        .map(|k| k.split('/').nth(2).unwrap_or_default().to_string())
        .collect();
    assert_eq!(parts.len(), 1, "one run's prefix in batch 1: {parts:?}");

    // The loser's batch goes in as batch 2 when run again.
    let file = dir.path().join(format!("half{loser}.parquet"));
    let again = dir.path().join("again");
    let args = [
        "match",
        "--signatures",
        path_str(&file),
        "--output",
        path_str(&again),
        "--index",
        index,
        "--update-index",
        "--quiet",
    ];
    succeeded(&args, run_with(env, &args));
    let counted = index_query(env, index, "SELECT count(*) FROM index_documents");
    assert_eq!(
        counted,
        vec![(halves[0].len() + halves[1].len()).to_string()]
    );
}

#[tokio::test]
async fn daily_crawls_on_s3_through_an_index_on_s3_give_the_local_days_tables() {
    let Some(server) = S3Server::start("daily crawls through an index on s3", &[]) else {
        return;
    };
    server.create_bucket("lake");
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    // Every duplicate group of the sample spans the three days; each day on disk and on S3.
    let days = [("2026-11-28", 1), ("2026-11-29", 2), ("2026-11-30", 0)];
    for (day, rest) in days {
        let folder = dir.path().join(format!("crawl/dt={day}"));
        std::fs::create_dir_all(&folder).unwrap();
        let file = folder.join("part-0.parquet");
        let select = format!(
            "SELECT * FROM '{}' WHERE id % 3 = {rest}",
            path_str(&sample)
        );
        make_parquet(&file, &select);
        server.put_file("lake", &format!("crawl/dt={day}/part-0.parquet"), &file);
    }
    for (day, _) in days {
        let local = dir.path().join(format!("local-{day}"));
        let common = ["--update-index", "--partition-by", "dt", "--quiet"];
        let local_input = dir.path().join(format!("crawl/dt={day}"));
        let local_index = dir.path().join("index");
        let mut args = vec!["run", "--input", path_str(&local_input), "--output"];
        args.extend([path_str(&local), "--index", path_str(&local_index)]);
        args.extend(common);
        neardup_ok(&args);
        let input = format!("s3://lake/crawl/dt={day}/");
        let output = format!("s3://lake/neardup/dt={day}");
        let mut args = vec!["run", "--input", &input, "--output", &output];
        args.extend(["--index", "s3://lake/neardup-index"]);
        args.extend(common);
        server.neardup_ok(&args);

        let downloaded = dir.path().join(format!("s3-{day}"));
        download_output(&server, "lake", &format!("neardup/dt={day}"), &downloaded);
        assert_eq!(tables(&downloaded).await, tables(&local).await, "day {day}");
    }
    let sql = "SELECT id, group_id, representative_id FROM index_groups ORDER BY id";
    let on_s3 = index_query(&server.env(), "s3://lake/neardup-index", sql);
    let index = dir.path().join("index");
    let csv = neardup_ok(&["query", "--index", path_str(&index), "--format", "csv", sql]);
    let local: Vec<&str> = csv.lines().skip(1).collect();
    assert!(!local.is_empty(), "the days share groups");
    assert_eq!(on_s3, local, "the index's groups");
}

#[test]
fn a_store_that_cannot_write_conditionally_adds_no_batch() {
    let Some(server) = S3Server::start("index without conditional writes", &[]) else {
        return;
    };
    server.create_bucket("lake");
    let dir = tempfile::tempdir().unwrap();
    let (rows, batches) = batched_fingerprints();
    let file = dir.path().join("batch1.parquet");
    write_fingerprints(&file, &rows[batches[0].clone()]);
    let output = dir.path().join("out");
    let args = [
        "match",
        "--signatures",
        path_str(&file),
        "--output",
        path_str(&output),
        "--index",
        "s3://lake/index",
        "--update-index",
        "--quiet",
    ];
    // object_store's switch for S3 servers without If-None-Match.
    let out = server.neardup_with(&args, &[("AWS_CONDITIONAL_PUT", "disabled")]);
    let message = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{message}");
    assert!(message.contains("only if it is absent"), "{message}");
    assert!(
        server.keys("lake", "index/").is_empty(),
        "nothing of the batch stays"
    );
}
