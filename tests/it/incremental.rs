//! Batches through a signature index (`--index`, `--update-index`) against one run over all of
//! them: the same pairs and the same group membership, checked against the brute-force oracle
//! of `exactness`; group ids and representatives kept from batch to batch; the index left as
//! it was by a refused or interrupted batch.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{Int64Type, UInt64Type};

use crate::common::{
    SplitMix64, fixture, make_parquet, neardup, neardup_ok, pairs_of, path_str, query, stderr,
    summary, write_fingerprints,
};
use crate::exactness::{bfs_groups, brute_force_pairs, planted_fingerprints};

/// The planted fingerprints and three cases that only show across batches: two groups of
/// batch 1 that a document of batch 3 joins into one, a document of batch 1 with no partner
/// until batch 2, and a group of batch 2 that batch 3 joins to a group of batch 1. Returns
/// the rows in input order and the three batches as row ranges.
pub fn batched_fingerprints() -> (Vec<(i64, u64)>, Vec<std::ops::Range<usize>>) {
    let rows = planted_fingerprints();
    let mut rng = SplitMix64(7);
    let (x, w, v) = (rng.next_u64(), rng.next_u64(), rng.next_u64());
    let z = x ^ 0b111111; // six bits from x: two groups at k = 3 ...
    let y = x ^ 0b000111; // ... that y, three bits from each, joins
    let u = v ^ (0b1111 << 40); // u's group meets v's through t
    let t = v ^ (0b11 << 40);
    let extra = |id: i64, f: u64| (1_000_000 + id, f);
    let mut batch1 = vec![
        extra(1, x),
        extra(2, x ^ 1 << 60),
        extra(3, z),
        extra(4, z ^ 1 << 61),
    ];
    batch1.extend([extra(5, w), extra(6, v), extra(7, v)]);
    let batch2 = [
        extra(8, w ^ 0b11 << 20),
        extra(9, u),
        extra(10, u ^ 1 << 50),
    ];
    let batch3 = [extra(11, y), extra(12, t)];
    let (third, n) = (rows.len() / 3, rows.len());
    let mut all = Vec::new();
    all.extend_from_slice(&rows[..third]);
    all.extend(batch1);
    let end1 = all.len();
    all.extend_from_slice(&rows[third..2 * third]);
    all.extend(batch2);
    let end2 = all.len();
    all.extend_from_slice(&rows[2 * third..n]);
    all.extend(batch3);
    let end3 = all.len();
    (all, vec![0..end1, end1..end2, end2..end3])
}

/// Groups as a set of member sets (ids and numbers aside).
pub fn partition(members: impl IntoIterator<Item = (i64, u64)>) -> BTreeSet<BTreeSet<i64>> {
    let mut groups: BTreeMap<u64, BTreeSet<i64>> = BTreeMap::new();
    for (id, group) in members {
        groups.entry(group).or_default().insert(id);
    }
    groups.into_values().collect()
}

/// (id, group_id, representative_id) rows of the index's current groups.
pub fn index_groups(index: &Path) -> Vec<(i64, u64, i64)> {
    let csv = neardup_ok(&[
        "query",
        "--index",
        path_str(index),
        "--format",
        "csv",
        "SELECT id, group_id, representative_id FROM index_groups ORDER BY id",
    ]);
    csv.lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            (
                fields[0].parse().unwrap(),
                fields[1].parse().unwrap(),
                fields[2].parse().unwrap(),
            )
        })
        .collect()
}

/// (id, group_id, representative_id, batch) of a batch's groups output.
pub async fn batch_groups(output: &Path) -> Vec<(i64, u64, i64, i64)> {
    let sql = "SELECT id, group_id, representative_id, batch FROM groups";
    let mut rows = Vec::new();
    for b in &query(output, sql).await {
        let id = b.column(0).as_primitive::<Int64Type>();
        let group = b.column(1).as_primitive::<UInt64Type>();
        let rep = b.column(2).as_primitive::<Int64Type>();
        let batch = b.column(3).as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            rows.push((id.value(i), group.value(i), rep.value(i), batch.value(i)));
        }
    }
    rows
}

#[tokio::test]
async fn batches_through_the_index_equal_one_run_over_all_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let (rows, batches) = batched_fingerprints();
    let order: BTreeMap<i64, usize> = rows.iter().enumerate().map(|(r, f)| (f.0, r)).collect();
    let mut files = Vec::new();
    for (b, range) in batches.iter().enumerate() {
        let file = dir.path().join(format!("batch{}.parquet", b + 1));
        write_fingerprints(&file, &rows[range.clone()]);
        files.push(file);
    }
    for (k, plan, matching) in [
        (3, "auto", "scan"),
        (6, "permutation", "scan"),
        (4, "auto", "join"),
    ] {
        let index = dir.path().join(format!("index_k{k}"));
        let mut all_pairs = Vec::new();
        // Each indexed document's group (id, representative) as the index said after the
        // batch before.
        let mut before: BTreeMap<i64, (u64, i64)> = BTreeMap::new();
        for (b, file) in files.iter().enumerate() {
            let output = dir.path().join(format!("k{k}_batch{}", b + 1));
            let k_text = k.to_string();
            neardup_ok(&[
                "match",
                "--signatures",
                path_str(file),
                "--output",
                path_str(&output),
                "--k",
                &k_text,
                "--plan",
                plan,
                "--matching",
                matching,
                "--index",
                path_str(&index),
                "--update-index",
                "--quiet",
            ]);
            assert_eq!(summary(&output)["index"]["batch"], b as u64 + 1);
            // The batch's own distinct fingerprints, not the index's.
            let distinct: BTreeSet<u64> = rows[batches[b].clone()].iter().map(|r| r.1).collect();
            assert_eq!(
                summary(&output)["counts"]["distinct_fingerprints"],
                distinct.len(),
                "batch {}",
                b + 1
            );
            all_pairs.extend(pairs_of(&output).await);

            // Groups that indexed documents were in keep the smallest such id and its
            // representative; a group with none is new, represented by its first member.
            let listed = batch_groups(&output).await;
            let mut by_group: BTreeMap<u64, Vec<(i64, i64, i64)>> = BTreeMap::new();
            for &(id, group, rep, batch) in &listed {
                by_group.entry(group).or_default().push((id, rep, batch));
            }
            for (group, members) in &by_group {
                let earlier: BTreeSet<(u64, i64)> = members
                    .iter()
                    .filter_map(|m| before.get(&m.0))
                    .copied()
                    .collect();
                let rep = members[0].1;
                assert!(members.iter().all(|m| m.1 == rep), "one representative");
                assert!(members.iter().any(|m| m.2 == b as i64 + 1), "a new member");
                match earlier.first() {
                    Some(&(old_group, old_rep)) => {
                        assert_eq!((*group, rep), (old_group, old_rep), "k = {k}, kept")
                    }
                    None => {
                        let first = members.iter().map(|m| order[&m.0]).min().unwrap();
                        assert_eq!(order[&rep], first, "k = {k}: a new group's first member");
                        assert!(before.values().all(|&(g, _)| g < *group), "ids are new");
                    }
                }
            }
            before = index_groups(&index)
                .into_iter()
                .map(|(id, group, rep)| (id, (group, rep)))
                .collect();
        }

        // The oracle: brute force over every batch at once, and one run over all files.
        let expected = brute_force_pairs(&rows, k);
        all_pairs.sort_unstable();
        assert_eq!(all_pairs.len(), expected.len(), "k = {k}: pair count");
        assert_eq!(all_pairs, expected, "k = {k}: pairs");
        let one_run = dir.path().join(format!("k{k}_one_run"));
        let mut args = vec!["match", "--signatures"];
        args.extend(files.iter().map(|f| path_str(f)));
        let k_text = k.to_string();
        args.extend(["--output", path_str(&one_run), "--k", &k_text, "--quiet"]);
        neardup_ok(&args);
        let mut one_run_pairs = pairs_of(&one_run).await;
        one_run_pairs.sort_unstable();
        assert_eq!(one_run_pairs, expected, "k = {k}: one run");

        let incremental = partition(before.iter().map(|(&id, &(g, _))| (id, g)));
        let oracle = partition(bfs_groups(&rows, &expected).into_iter().map(|g| (g.0, g.1)));
        assert_eq!(incremental.len(), oracle.len(), "k = {k}: group count");
        assert_eq!(incremental, oracle, "k = {k}: group membership");
        // The cases built for it happened: a merge of two batch-1 groups by batch 3.
        let merged = [1_000_001, 1_000_002, 1_000_003, 1_000_004, 1_000_011];
        assert!(
            incremental
                .iter()
                .any(|g| merged.iter().all(|id| g.contains(id))),
            "k = {k}: the two groups merged"
        );
        assert_eq!(before[&1_000_003].0, before[&1_000_001].0);
    }
}

/// (id, batch) of each row of a table in an output folder, by SQL.
async fn ids(output: &Path, sql: &str) -> BTreeSet<i64> {
    let mut ids = BTreeSet::new();
    for b in &query(output, sql).await {
        ids.extend(b.column(0).as_primitive::<Int64Type>().iter().flatten());
    }
    ids
}

#[tokio::test]
async fn text_batches_in_hive_folders_dedup_against_everything_seen_before() {
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let crawl = dir.path().join("crawl");
    // Every duplicate group of the sample spans the three days.
    let days = [("2026-11-28", 1), ("2026-11-29", 2), ("2026-11-30", 0)];
    for (day, rest) in days {
        let folder = crawl.join(format!("dt={day}"));
        std::fs::create_dir_all(&folder).unwrap();
        make_parquet(
            &folder.join("part-0.parquet"),
            &format!(
                "SELECT * FROM '{}' WHERE id % 3 = {rest}",
                path_str(&sample)
            ),
        );
    }
    for bits in ["64", "128"] {
        batches_of_days(&dir.path().join(format!("bits{bits}")), &crawl, &days, bits).await;
    }
}

/// Runs the days through an index with `--bits`, then one run over the crawl, and compares.
async fn batches_of_days(dir: &Path, crawl: &Path, days: &[(&str, i32)], bits: &str) {
    let index = dir.join("index");
    let mut all_pairs = Vec::new();
    let mut seen: BTreeSet<i64> = BTreeSet::new();
    for (b, (day, _)) in days.iter().enumerate() {
        let output = dir.join(format!("out-{day}"));
        neardup_ok(&[
            "run",
            "--input",
            path_str(&crawl.join(format!("dt={day}"))),
            "--output",
            path_str(&output),
            "--index",
            path_str(&index),
            "--update-index",
            "--partition-by",
            "dt",
            "--bits",
            bits,
            "--quiet",
        ]);
        all_pairs.extend(pairs_of(&output).await);
        // The partition column is kept, and the dedup is written in its folder.
        assert!(output.join("dedup").join(format!("dt={day}")).is_dir());
        let csv = neardup_ok(&[
            "query",
            "--data",
            path_str(&output),
            "--format",
            "csv",
            "SELECT DISTINCT dt FROM dedup",
        ]);
        assert_eq!(csv.lines().collect::<Vec<_>>(), ["dt", *day]);
        // A new document is dropped exactly when its group's representative is another
        // document, and a group with an earlier member is represented by an earlier one.
        let batch = b as i64 + 1;
        let listed = batch_groups(&output).await;
        let batch_of: BTreeMap<i64, i64> = listed.iter().map(|g| (g.0, g.3)).collect();
        for &(id, group, rep, member_batch) in &listed {
            if listed.iter().any(|g| g.1 == group && g.3 < batch) {
                assert!(
                    batch_of[&rep] < batch,
                    "group {group} keeps an indexed representative"
                );
            }
            assert!(
                member_batch == batch || seen.contains(&id),
                "indexed member {id}"
            );
        }
        let new_ids = ids(&output, "SELECT id FROM signatures").await;
        let dropped: BTreeSet<i64> = listed
            .iter()
            .filter(|g| g.3 == batch && g.0 != g.2)
            .map(|g| g.0)
            .collect();
        let kept = ids(&output, "SELECT id FROM dedup").await;
        let expected: BTreeSet<i64> = new_ids.difference(&dropped).copied().collect();
        assert_eq!(kept, expected, "batch {batch}");
        seen.extend(new_ids);
    }
    assert!(
        all_pairs.iter().any(|p| p.0 % 3 != p.1 % 3),
        "the sample's groups span days"
    );

    // One run over the whole crawl folder: the same pairs and groups, and dt as a column.
    let one_run = dir.join("one_run");
    neardup_ok(&[
        "run",
        "--input",
        path_str(crawl),
        "--output",
        path_str(&one_run),
        "--bits",
        bits,
        "--quiet",
    ]);
    let mut expected = pairs_of(&one_run).await;
    expected.sort_unstable();
    all_pairs.sort_unstable();
    assert!(!expected.is_empty());
    assert_eq!(all_pairs, expected);
    let mut groups = Vec::new();
    for b in &query(&one_run, "SELECT id, group_id FROM groups").await {
        let (id, group) = (
            b.column(0).as_primitive::<Int64Type>(),
            b.column(1).as_primitive::<UInt64Type>(),
        );
        groups.extend((0..b.num_rows()).map(|i| (id.value(i), group.value(i))));
    }
    let incremental = index_groups(&index).into_iter().map(|g| (g.0, g.1));
    assert_eq!(partition(incremental), partition(groups));
    let days_seen = ids(&one_run, "SELECT count(DISTINCT dt) FROM dedup").await;
    assert_eq!(days_seen, BTreeSet::from([3]));
}

/// Every file and folder under `dir` with its size, hidden ones included.
fn listing(dir: &Path) -> Vec<(String, u64)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.push((path.display().to_string(), 0));
            found.extend(listing(&path));
        } else {
            let size = std::fs::metadata(&path).unwrap().len();
            found.push((path.display().to_string(), size));
        }
    }
    found.sort();
    found
}

#[test]
fn refused_and_killed_batches_leave_the_index_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let (first, second) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    make_parquet(
        &first,
        &format!("SELECT * FROM '{}' WHERE id <= 10", path_str(&sample)),
    );
    make_parquet(
        &second,
        &format!("SELECT * FROM '{}' WHERE id > 10", path_str(&sample)),
    );
    let index = dir.path().join("index");
    let run = |input: &Path, output: &str, extra: &[&str]| {
        let output = dir.path().join(output);
        let mut args = vec![
            "run",
            "--input",
            path_str(input),
            "--output",
            path_str(&output),
            "--index",
            path_str(&index),
        ];
        args.extend_from_slice(extra);
        neardup(&args)
    };
    // Reading a missing index is refused; only --update-index creates one.
    let out = run(&first, "out-missing", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--update-index"));
    assert!(!index.exists());
    assert!(run(&first, "out-a", &["--update-index"]).status.success());
    let before = listing(&index);

    // The same batch again: its ids are indexed.
    let out = run(&first, "out-again", &["--update-index"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already in the index"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("out-again").exists());
    // Other settings than the index's.
    let out = run(&second, "out-k", &["--update-index", "--k", "4"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--k 7"), "{}", stderr(&out));
    assert_eq!(listing(&index), before);

    // Killed after the index part is written, before anything is committed.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["run", "--input", path_str(&second), "--output"])
        .arg(dir.path().join("out-b"))
        .args(["--index", path_str(&index), "--update-index"])
        .env("NEARDUP_PAUSE_AFTER_STAGE", "index")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    while !lines.next().unwrap().unwrap().contains("pausing after") {}
    child.kill().unwrap();
    child.wait().unwrap();
    let csv = neardup_ok(&[
        "query",
        "--index",
        path_str(&index),
        "--format",
        "csv",
        "SELECT count(*) AS batches FROM index_batches",
    ]);
    assert_eq!(csv.lines().nth(1), Some("1"));
    assert!(!dir.path().join("out-b").exists());

    // The next run adds the batch and removes what the killed one left.
    assert!(run(&second, "out-b", &["--update-index"]).status.success());
    let after = listing(&index);
    assert!(
        after.iter().all(|(path, _)| !path.contains("staging")),
        "{after:?}"
    );
    assert!(
        before.iter().all(|entry| after.contains(entry)),
        "batch 1 untouched"
    );
    assert!(index.join("batch=000002").join("_SUCCESS").is_file());
}
