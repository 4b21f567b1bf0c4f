//! A signature index on an object store (the real S3 server of `s3.rs`): batches through it
//! against the oracle of `incremental` (brute force over every batch at once), and two runs
//! committing the same batch number, of which the store's conditional write lets exactly one
//! land.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{pairs_of, path_str, write_fingerprints};
use crate::exactness::{bfs_groups, brute_force_pairs};
use crate::incremental::{batched_fingerprints, partition};
use crate::s3::S3Server;

/// (id, group_id) of the index's current groups, through `neardup query --index URL`.
fn index_groups(server: &S3Server, index: &str) -> Vec<(i64, u64)> {
    let sql = "SELECT id, group_id FROM index_groups ORDER BY id";
    let csv = server.neardup_ok(&["query", "--index", index, "--format", "csv", sql]);
    csv.lines()
        .skip(1)
        .map(|line| {
            let (id, group) = line.split_once(',').expect("two columns");
            (id.parse().unwrap(), group.parse().unwrap())
        })
        .collect()
}

/// `SELECT ...` over the index on the store, as CSV lines without the header.
fn index_query(server: &S3Server, index: &str, sql: &str) -> Vec<String> {
    let csv = server.neardup_ok(&["query", "--index", index, "--format", "csv", sql]);
    csv.lines().skip(1).map(str::to_string).collect()
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
        &server,
        index,
        "SELECT count(DISTINCT id) FROM index_documents",
    );
    assert_eq!(
        documents,
        vec![rows.len().to_string()],
        "every document is indexed once"
    );
    let groups = index_groups(&server, index);
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
    let counted = index_query(&server, index, "SELECT batch, documents FROM index_batches");
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
    let dir = tempfile::tempdir().unwrap();
    let (rows, batches) = batched_fingerprints();
    let index = "s3://lake/index";
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
            .envs(server.env())
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
    let counted = index_query(&server, index, "SELECT batch, documents FROM index_batches");
    assert_eq!(counted, vec![format!("1,{}", halves[winner].len())]);
    let ids = index_query(&server, index, "SELECT id FROM index_documents ORDER BY id");
    let mut expected: Vec<i64> = halves[winner].iter().map(|r| r.0).collect();
    expected.sort_unstable();
    let expected: Vec<String> = expected.iter().map(i64::to_string).collect();
    assert_eq!(ids, expected, "the winner's documents");
    let parts: BTreeMap<String, usize> = server
        .keys("lake", "index/batch=000001/")
        .iter()
        .map(|k| (k.split('/').nth(2).unwrap_or_default().to_string(), 1))
        .collect();
    assert_eq!(parts.len(), 1, "one run's prefix in batch 1: {parts:?}");

    // The loser's batch goes in as batch 2 when run again.
    let file = dir.path().join(format!("half{loser}.parquet"));
    let again = dir.path().join("again");
    server.neardup_ok(&[
        "match",
        "--signatures",
        path_str(&file),
        "--output",
        path_str(&again),
        "--index",
        index,
        "--update-index",
        "--quiet",
    ]);
    let counted = index_query(&server, index, "SELECT count(*) FROM index_documents");
    assert_eq!(
        counted,
        vec![(halves[0].len() + halves[1].len()).to_string()]
    );
}
