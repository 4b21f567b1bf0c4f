//! The job on an Apache DataFusion Ballista cluster gives the outputs of a local run: in this
//! process (`--cluster standalone`), and with a scheduler and two executors started as separate
//! processes on loopback (`neardup scheduler`, `neardup executor`, `run --cluster df://...`).

use std::path::Path;
use std::process::Command;

use crate::common::{fixture, neardup_ok, path_str, sorted_rows, summary, write_fingerprints};
use crate::exactness::{bfs_groups, brute_force_pairs, groups_of, planted_fingerprints};
use crate::incremental::{batch_groups, batched_fingerprints, index_groups};
use crate::processes::{free_port, start_executors, start_scheduler};

const TABLES: [&str; 4] = ["signatures", "pairs", "groups", "dedup"];

/// Both outputs hold the same tables, row for row, and the same counts.
async fn assert_same_outputs(local: &Path, clustered: &Path) {
    for table in TABLES {
        let sql = format!("SELECT * FROM {table}");
        let (a, b) = (
            sorted_rows(local, &sql).await,
            sorted_rows(clustered, &sql).await,
        );
        assert!(a.len() > 2, "{table}: the sample must give rows");
        assert_eq!(a, b, "{table}");
    }
    assert_eq!(summary(local)["counts"], summary(clustered)["counts"]);
    // This process's CPU is counted only where the stages run in it.
    assert!(summary(local)["cpu_seconds"].is_f64());
    assert!(summary(clustered).get("cpu_seconds").is_none());
    assert!(summary(clustered)["stages"][0].get("cpu_seconds").is_none());
}

fn run_sample(output: &Path, extra: &[&str]) {
    let input = fixture("sample.parquet");
    let mut args = vec![
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(output),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    neardup_ok(&args);
}

#[tokio::test]
async fn a_standalone_cluster_gives_the_outputs_of_a_local_run() {
    let dir = tempfile::tempdir().unwrap();
    let (local, clustered) = (dir.path().join("local"), dir.path().join("clustered"));
    run_sample(&local, &[]);
    run_sample(&clustered, &["--cluster", "standalone"]);
    assert_same_outputs(&local, &clustered).await;
    let parameters = &summary(&clustered)["parameters"];
    assert_eq!(parameters["clustering"], "sql", "the default on a cluster");
    assert_eq!(parameters["cluster"], "standalone");
}

/// 128-bit fingerprints on the cluster: FixedSizeBinary signatures, band keys and labels
/// through Ballista's serialisation and the SQL rounds give the local run's union-find tables.
#[tokio::test]
async fn a_128_bit_run_on_a_standalone_cluster_gives_the_local_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let (local, clustered) = (dir.path().join("local"), dir.path().join("clustered"));
    let wide = ["--bits", "128", "--k", "7"];
    run_sample(&local, &wide);
    run_sample(
        &clustered,
        &[&wide[..], &["--cluster", "standalone"]].concat(),
    );
    assert_same_outputs(&local, &clustered).await;
    assert_eq!(summary(&local)["parameters"]["clustering"], "union-find");
    assert_eq!(summary(&clustered)["parameters"]["clustering"], "sql");
}

/// Matching on the cluster (the band_pairs aggregate across shuffles, the SQL clustering) is
/// exact: the pairs of brute force, and its BFS groups.
#[tokio::test]
async fn matching_on_a_standalone_cluster_equals_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fingerprints.parquet");
    let rows = planted_fingerprints();
    write_fingerprints(&input, &rows);
    let output = dir.path().join("out");
    neardup_ok(&[
        "match",
        "--signatures",
        path_str(&input),
        "--output",
        path_str(&output),
        "--cluster",
        "standalone",
        "--quiet",
    ]);
    let mut pairs = crate::common::pairs_of(&output).await;
    pairs.sort_unstable();
    let expected = brute_force_pairs(&rows, 3);
    assert!(expected.len() > 1000);
    assert_eq!(pairs, expected);
    assert_eq!(groups_of(&output).await, bfs_groups(&rows, &expected));
}

#[tokio::test]
async fn a_scheduler_and_two_executor_processes_give_the_outputs_of_a_local_run() {
    let dir = tempfile::tempdir().unwrap();
    let (scheduler, scheduler_address) = start_scheduler(dir.path(), &[]);
    let executors = start_executors(dir.path(), 2, &scheduler_address);

    let (local, clustered) = (dir.path().join("local"), dir.path().join("clustered"));
    run_sample(&local, &[]);
    let cluster = format!("df://{scheduler_address}");
    let input = fixture("sample.parquet");
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "run",
            "--input",
            path_str(&input),
            "--output",
            path_str(&clustered),
            "--cluster",
            &cluster,
            "--threads",
            "4",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "run --cluster failed:\n{}\nscheduler:\n{}\nexecutor 0:\n{}\nexecutor 1:\n{}",
        String::from_utf8_lossy(&out.stderr),
        scheduler.log(),
        executors[0].log(),
        executors[1].log()
    );
    assert_same_outputs(&local, &clustered).await;
    // Both executors ran tasks.
    for (n, executor) in executors.iter().enumerate() {
        assert!(
            executor.log().contains("Finished task"),
            "executor {n} ran no task:\n{}",
            executor.log()
        );
    }
    assert_eq!(summary(&clustered)["parameters"]["cluster"], cluster);
}

#[test]
fn an_unreachable_scheduler_is_named_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    let cluster = format!("df://127.0.0.1:{}", free_port());
    let input = fixture("sample.parquet");
    let out = crate::common::neardup(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&output),
        "--cluster",
        &cluster,
    ]);
    let message = crate::common::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{message}");
    assert!(
        message.contains("cannot reach the Ballista scheduler"),
        "{message}"
    );
    assert!(!output.exists());
}

/// Batches through an index group alike by union-find (locally), by the SQL rounds locally and
/// on a cluster: the same groups, ids and representatives batch after batch, and the same index.
/// The batches hold the cases that only show across batches (tests/it/incremental.rs checks
/// union-find's against brute force): groups merged by a later document, a late partner.
#[tokio::test]
async fn batches_through_an_index_on_a_standalone_cluster_group_as_union_find_does() {
    let dir = tempfile::tempdir().unwrap();
    let (rows, batches) = batched_fingerprints();
    let files: Vec<_> = batches
        .iter()
        .enumerate()
        .map(|(b, range)| {
            let file = dir.path().join(format!("batch{}.parquet", b + 1));
            write_fingerprints(&file, &rows[range.clone()]);
            file
        })
        .collect();
    let modes: [(&str, &[&str]); 3] = [
        ("union-find", &[]),
        ("sql", &["--clustering", "sql"]),
        ("cluster", &["--cluster", "standalone"]),
    ];
    let mut seen = Vec::new();
    for (mode, extra) in modes {
        let index = dir.path().join(format!("index_{mode}"));
        let mut groups = Vec::new();
        for (b, file) in files.iter().enumerate() {
            let output = dir.path().join(format!("{mode}_batch{}", b + 1));
            let mut args = vec![
                "match",
                "--signatures",
                path_str(file),
                "--output",
                path_str(&output),
                "--index",
                path_str(&index),
                "--update-index",
                "--quiet",
            ];
            args.extend_from_slice(extra);
            neardup_ok(&args);
            let parameters = &summary(&output)["parameters"];
            let clustering = if mode == "union-find" {
                "union-find"
            } else {
                "sql"
            };
            assert_eq!(parameters["clustering"], clustering, "{mode}");
            let mut listed = batch_groups(&output).await;
            listed.sort_unstable();
            groups.push(listed);
        }
        assert!(
            groups.iter().all(|g| !g.is_empty()),
            "{mode}: every batch groups"
        );
        seen.push((mode, groups, index_groups(&index)));
    }
    let (_, expected_groups, expected_index) = &seen[0];
    for (mode, groups, index) in &seen[1..] {
        assert_eq!(groups, expected_groups, "{mode}: each batch's groups");
        assert_eq!(index, expected_index, "{mode}: the index's groups");
    }
}
