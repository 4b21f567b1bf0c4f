//! The matching stages against an oracle: random 64-bit fingerprints with planted neighbours at
//! distances 0..=9, through `neardup match` (the same SQL stages `run` uses), compared with a
//! brute-force all-pairs scan and a breadth-first clustering written independently here, for
//! every k in 0..=8, both strategies, and every band plan scheme.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{Int64Type, UInt8Type, UInt64Type};

use crate::common::{SplitMix64, pairs_of, path_str, query, summary, write_fingerprints};

/// Rows in input order: (id, fingerprint). Ids run backwards so that "first in input order"
/// and "smallest id" disagree, and the test can tell which rule the job applied.
pub(crate) fn planted_fingerprints() -> Vec<(i64, u64)> {
    let mut rng = SplitMix64(42);
    let mut fingerprints: Vec<u64> = (0..1500).map(|_| rng.next_u64()).collect();
    // Neighbours at distance 0..=9 from random earlier fingerprints.
    for i in 0..1000u64 {
        let base = fingerprints[rng.below(fingerprints.len())];
        let mut neighbour = base;
        let mut flipped = BTreeSet::new();
        while flipped.len() < (i % 10) as usize {
            flipped.insert(rng.below(64));
        }
        for bit in flipped {
            neighbour ^= 1 << bit;
        }
        fingerprints.push(neighbour);
    }
    // A chain whose ends are far apart: one group only through transitivity.
    let mut link = rng.next_u64();
    for bit in [3u64, 17, 29, 41, 53, 60] {
        link ^= 1 << bit;
        fingerprints.push(link);
    }
    // Skew: many copies of one fingerprint, and a big bucket: 2,000 fingerprints with the same
    // last band (a templated page), some of them also near each other.
    let popular = rng.next_u64();
    fingerprints.extend(std::iter::repeat_n(popular, 40));
    let shared_band = rng.next_u64() & 0xFFFF;
    for i in 0..2000u64 {
        let f = (rng.next_u64() & !0xFFFF) | shared_band;
        fingerprints.push(f);
        if i % 10 == 0 {
            fingerprints.push(f ^ (1 << (16 + rng.below(48))));
        }
    }
    // Fingerprints that agree on their top 32 bits: they share two of four bands and many
    // permutation tables, so only the first shared table may report a pair.
    let top = rng.next_u64() & !0xFFFF_FFFF;
    for _ in 0..300 {
        fingerprints.push(top | (rng.next_u64() & 0xFFFF_FFFF));
    }
    let n = fingerprints.len() as i64;
    fingerprints
        .into_iter()
        .enumerate()
        .map(|(row, f)| (n - row as i64, f))
        .collect()
}

pub(crate) fn brute_force_pairs(rows: &[(i64, u64)], k: u32) -> Vec<(i64, i64, u8)> {
    let mut pairs = Vec::new();
    for (i, &(id_i, f_i)) in rows.iter().enumerate() {
        for &(id_j, f_j) in &rows[i + 1..] {
            let d = (f_i ^ f_j).count_ones();
            if d <= k {
                pairs.push((id_i.min(id_j), id_i.max(id_j), d as u8));
            }
        }
    }
    pairs.sort_unstable();
    pairs
}

/// (id, group_id, representative_id, group_size, distance) by breadth-first search.
pub(crate) fn bfs_groups(
    rows: &[(i64, u64)],
    pairs: &[(i64, i64, u8)],
) -> Vec<(i64, u64, i64, i64, u8)> {
    let row_of: BTreeMap<i64, usize> = rows
        .iter()
        .enumerate()
        .map(|(r, &(id, _))| (id, r))
        .collect();
    let mut neighbours: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &(a, b, _) in pairs {
        neighbours.entry(row_of[&a]).or_default().push(row_of[&b]);
        neighbours.entry(row_of[&b]).or_default().push(row_of[&a]);
    }
    let mut seen = BTreeSet::new();
    let mut components: Vec<Vec<usize>> = Vec::new();
    for &start in neighbours.keys() {
        if !seen.insert(start) {
            continue;
        }
        let mut component = vec![start];
        let mut queue = VecDeque::from([start]);
        while let Some(r) = queue.pop_front() {
            for &next in &neighbours[&r] {
                if seen.insert(next) {
                    component.push(next);
                    queue.push_back(next);
                }
            }
        }
        component.sort_unstable();
        components.push(component);
    }
    // Groups are numbered by their representative's (first member's) input order.
    components.sort_by_key(|c| c[0]);
    let mut groups = Vec::new();
    for (number, component) in components.iter().enumerate() {
        let (rep_id, rep_f) = rows[component[0]];
        for &r in component {
            let (id, f) = rows[r];
            groups.push((
                id,
                number as u64 + 1,
                rep_id,
                component.len() as i64,
                (f ^ rep_f).count_ones() as u8,
            ));
        }
    }
    groups.sort_unstable();
    groups
}

/// (id, group_id, representative_id, group_size, distance) of an output's groups, by id.
pub(crate) async fn groups_of(output: &std::path::Path) -> Vec<(i64, u64, i64, i64, u8)> {
    let sql =
        "SELECT id, group_id, representative_id, group_size, distance FROM groups ORDER BY id";
    let mut groups = Vec::new();
    for b in &query(output, sql).await {
        let id = b.column(0).as_primitive::<Int64Type>();
        let group = b.column(1).as_primitive::<UInt64Type>();
        let rep = b.column(2).as_primitive::<Int64Type>();
        let size = b.column(3).as_primitive::<Int64Type>();
        let distance = b.column(4).as_primitive::<UInt8Type>();
        for i in 0..b.num_rows() {
            groups.push((
                id.value(i),
                group.value(i),
                rep.value(i),
                size.value(i),
                distance.value(i),
            ));
        }
    }
    groups
}

/// One matching to check: k, strategy, `--plan`, rows per candidate pass (None: default), and
/// `--pairs`.
type Case = (
    u32,
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
);

fn cases() -> Vec<Case> {
    let mut cases: Vec<Case> = (0..=8).map(|k| (k, "scan", "auto", None, "all")).collect();
    for k in [5, 8] {
        for plan in ["bands", "mih", "permutation"] {
            cases.push((k, "scan", plan, None, "all"));
        }
    }
    cases.extend([
        (3, "join", "auto", None, "all"),
        (7, "join", "mih", None, "all"),
        (2, "scan", "bands:4", None, "all"),
        // The SQL aggregate a cluster runs, a few tables per pass: the pairs of many passes
        // make one table. (The other `scan` cases find them in memory.)
        (6, "scan", "permutation", Some("20000"), "all"),
        // Star pairs: a subset of the pairs that connects the same groups.
        (3, "scan", "auto", None, "star"),
        (8, "scan", "auto", None, "star"),
    ]);
    cases
}

#[tokio::test]
async fn pairs_and_groups_equal_brute_force_for_every_k_plan_and_strategy() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fingerprints.parquet");
    let rows = planted_fingerprints();
    write_fingerprints(&input, &rows);
    for (case, (k, matching, plan, rows_per_pass, listed)) in cases().into_iter().enumerate() {
        let output = dir.path().join(format!("case{case}"));
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"));
        command.args([
            "match",
            "--signatures",
            path_str(&input),
            "--output",
            path_str(&output),
            "--k",
            &k.to_string(),
            "--matching",
            matching,
            "--plan",
            plan,
            "--pairs",
            listed,
            "--quiet",
        ]);
        if let Some(rows) = rows_per_pass {
            command
                .env("NEARDUP_ROWS_PER_PASS", rows)
                .env("NEARDUP_CANDIDATES", "sql");
        }
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "k = {k}, {matching}, {plan}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let distinct: BTreeSet<u64> = rows.iter().map(|r| r.1).collect();
        assert_eq!(
            summary(&output)["counts"]["distinct_fingerprints"],
            distinct.len()
        );
        let ran = summary(&output)["plan"].clone();
        let ran_plan = ran["plan"].as_str().unwrap().to_string();
        if plan != "auto" {
            assert!(ran_plan.starts_with(plan), "{plan} ran as {ran_plan}");
        }
        if rows_per_pass.is_some() {
            assert!(ran["passes"].as_u64().unwrap() > 1, "{ran}");
        }
        let matching = format!("{matching}, {ran_plan}");

        let expected_pairs = brute_force_pairs(&rows, k);
        assert!(
            expected_pairs.len() > 100 + 50 * k as usize,
            "the planted data must exercise k = {k}"
        );
        let mut pairs = pairs_of(&output).await;
        pairs.sort_unstable();
        let expected_groups = bfs_groups(&rows, &expected_pairs);
        if listed == "star" {
            // Every listed pair is a true pair with its distance, at most one per document
            // beyond the fingerprint pairs, and together they connect the same groups.
            let all: BTreeSet<_> = expected_pairs.iter().collect();
            assert!(pairs.iter().all(|p| all.contains(p)), "k = {k}, star");
            let fingerprint_pairs = summary(&output)["counts"]["fingerprint_pairs"]
                .as_u64()
                .unwrap() as usize;
            assert!(
                pairs.len() <= rows.len() + fingerprint_pairs,
                "k = {k}, star"
            );
            assert!(
                pairs.len() < expected_pairs.len(),
                "40 copies give fewer rows"
            );
            assert_eq!(bfs_groups(&rows, &pairs), expected_groups, "k = {k}, star");
        } else {
            assert_eq!(
                pairs.len(),
                expected_pairs.len(),
                "pair count at k = {k}, {matching}"
            );
            assert_eq!(pairs, expected_pairs, "pairs at k = {k}, {matching}");
        }

        let groups = groups_of(&output).await;
        assert_eq!(groups, expected_groups, "groups at k = {k}, {matching}");
    }
}

/// `--clustering sql` (large-star / small-star rounds) gives the groups of the brute-force oracle,
/// as union-find does, here with a chain of planted neighbours and 40 copies.
#[tokio::test]
async fn sql_clustering_groups_equal_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fingerprints.parquet");
    let rows = planted_fingerprints();
    write_fingerprints(&input, &rows);
    for k in [3u32, 8] {
        let output = dir.path().join(format!("sql{k}"));
        let k_text = k.to_string();
        crate::common::neardup_ok(&[
            "match",
            "--signatures",
            path_str(&input),
            "--output",
            path_str(&output),
            "--k",
            &k_text,
            "--clustering",
            "sql",
            "--quiet",
        ]);
        assert_eq!(summary(&output)["parameters"]["clustering"], "sql");
        let groups = groups_of(&output).await;
        let expected = bfs_groups(&rows, &brute_force_pairs(&rows, k));
        assert!(expected.len() > 1000, "k = {k}: the data must have groups");
        assert_eq!(groups, expected, "k = {k}");
    }
}

/// Under `--memory-limit` the distinct fingerprints spill (at 64M 300,000 of them do: with a full
/// temporary folder the run fails), and a spilled grouping writes them sorted. The planner's sample must not depend on that order (the first rows of a sorted table
/// share their leading bits, so one band would look like a single bucket): the limit changes
/// neither the plan nor the pairs and groups, and the schemas are the same.
#[tokio::test]
async fn a_memory_limit_changes_neither_the_plan_nor_the_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fingerprints.parquet");
    crate::common::neardup_ok(&[
        "generate-fingerprints",
        "--count",
        "300000",
        "--output",
        path_str(&input),
    ]);
    let run = |name: &str, extra: &[&str]| {
        let output = dir.path().join(name);
        let mut args = vec![
            "match",
            "--signatures",
            path_str(&input),
            "--output",
            path_str(&output),
            "--quiet",
        ];
        args.extend_from_slice(extra);
        crate::common::neardup_ok(&args);
        output
    };
    let free = run("free", &[]);
    let limited = run("limited", &["--memory-limit", "64M", "--threads", "2"]);
    assert_eq!(summary(&free)["plan"], summary(&limited)["plan"]);
    let (free_pairs, limited_pairs) = (pairs_of(&free).await, pairs_of(&limited).await);
    assert!(free_pairs.len() > 20_000, "{}", free_pairs.len());
    let sorted = |mut pairs: Vec<(i64, i64, u8)>| {
        pairs.sort_unstable();
        pairs
    };
    assert_eq!(sorted(free_pairs), sorted(limited_pairs));
    assert_eq!(groups_of(&free).await, groups_of(&limited).await);
    // The groups' columns keep the types and nullability users' readers were written for.
    for output in [&free, &limited] {
        let batches = query(output, "SELECT * FROM groups LIMIT 1").await;
        let fields: Vec<String> = batches[0]
            .schema()
            .fields()
            .iter()
            .map(|f| format!("{} {} {}", f.name(), f.data_type(), f.is_nullable()))
            .collect();
        assert_eq!(
            fields,
            [
                "id Int64 false",
                "group_id UInt64 false",
                "representative_id Int64 false",
                "group_size Int64 false",
                "distance UInt8 true"
            ]
        );
    }
}
