//! `--keep`: each rule's representatives against a brute-force choice over the groups' members
//! (the rule's key, NULLs never preferred, ties by input order), the same groups whatever the
//! rule, dedup keeping exactly the representatives; and against an index, what an earlier batch
//! kept stays kept.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::common::{fixture, make_parquet, neardup, neardup_ok, path_str, stderr};

/// A generated corpus with two columns to choose by: `quality` (few values, so many ties, and
/// some NULLs) and `fetched_at` (a timestamp, some NULLs).
fn corpus_with_columns(dir: &Path) -> std::path::PathBuf {
    let (generated, truth) = (dir.join("gen.parquet"), dir.join("truth.parquet"));
    neardup_ok(&[
        "generate",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&generated),
        "--truth",
        path_str(&truth),
        "--collage-sources",
        "150",
        "--max-copies",
        "4",
    ]);
    let corpus = dir.join("corpus.parquet");
    make_parquet(
        &corpus,
        &format!(
            "SELECT id, text, \
                    CASE WHEN octet_length(text) % 7 = 0 THEN NULL \
                         ELSE CAST(octet_length(text) % 3 AS DOUBLE) END AS quality, \
                    CASE WHEN octet_length(text) % 5 = 0 THEN NULL \
                         ELSE to_timestamp_seconds(1700000000 + (octet_length(text) * 7919) % 100000) \
                    END AS fetched_at \
             FROM '{}'",
            path_str(&generated)
        ),
    );
    corpus
}

/// One member of a group, with every value a rule compares.
#[derive(Debug, Clone)]
struct Member {
    id: String,
    representative: String,
    text_bytes: i64,
    input_order: i64,
    quality: Option<f64>,
    fetched_at: Option<i64>,
}

/// group id -> members, read through `neardup query` (the run's tables and its input).
fn groups_of(output: &Path) -> BTreeMap<u64, Vec<Member>> {
    let csv = neardup_ok(&[
        "query",
        "--data",
        path_str(output),
        "--format",
        "csv",
        "SELECT g.group_id, g.id, g.representative_id, s.text_bytes, s.input_order, c.quality, \
                CAST(c.fetched_at AS BIGINT) \
         FROM groups g JOIN signatures s ON g.id = s.id JOIN corpus c ON c.id = g.id",
    ]);
    let mut groups: BTreeMap<u64, Vec<Member>> = BTreeMap::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 7, "{line}");
        groups
            .entry(f[0].parse().unwrap())
            .or_default()
            .push(Member {
                id: f[1].into(),
                representative: f[2].into(),
                text_bytes: f[3].parse().unwrap(),
                input_order: f[4].parse().unwrap(),
                quality: (!f[5].is_empty()).then(|| f[5].parse().unwrap()),
                fetched_at: (!f[6].is_empty()).then(|| f[6].parse().unwrap()),
            });
    }
    groups
}

/// The brute-force choice: the member whose key the rule prefers, a member with a key before
/// one without, then the first in input order.
fn expected_representative(rule: &str, members: &[Member]) -> String {
    let key = |m: &Member| -> Option<f64> {
        match rule {
            "first" => Some(0.0),
            "longest" => Some(m.text_bytes as f64),
            "shortest" => Some(-(m.text_bytes as f64)),
            "newest:fetched_at" => m.fetched_at.map(|t| t as f64),
            "oldest:fetched_at" => m.fetched_at.map(|t| -(t as f64)),
            "max:quality" => m.quality,
            "min:quality" => m.quality.map(|q| -q),
            other => panic!("no oracle for {other}"),
        }
    };
    let mut best: Option<&Member> = None;
    for m in members {
        let better = match best {
            None => true,
            Some(b) => match (key(m), key(b)) {
                (Some(x), Some(y)) => x > y || (x == y && m.input_order < b.input_order),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => m.input_order < b.input_order,
            },
        };
        if better {
            best = Some(m);
        }
    }
    best.expect("a group has members").id.clone()
}

fn dedup_ids(output: &Path) -> BTreeSet<String> {
    neardup_ok(&[
        "query",
        "--data",
        path_str(output),
        "--format",
        "csv",
        "SELECT id FROM dedup",
    ])
    .lines()
    .skip(1)
    .map(str::to_string)
    .collect()
}

#[test]
fn every_rule_keeps_the_member_a_brute_force_choice_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus_with_columns(dir.path());
    let all_ids: BTreeSet<String> = neardup_ok(&[
        "query",
        "--format",
        "csv",
        &format!("SELECT id FROM '{}'", path_str(&corpus)),
    ])
    .lines()
    .skip(1)
    .map(str::to_string)
    .collect();
    let mut partitions = Vec::new();
    let mut changed = 0;
    for rule in [
        "first",
        "longest",
        "shortest",
        "newest:fetched_at",
        "oldest:fetched_at",
        "max:quality",
        "min:quality",
    ] {
        let out = dir.path().join(rule.replace(':', "_"));
        neardup_ok(&[
            "run",
            "--input",
            path_str(&corpus),
            "--output",
            path_str(&out),
            "--keep",
            rule,
            "-q",
        ]);
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(summary["parameters"]["keep"], rule);
        let groups = groups_of(&out);
        assert!(groups.len() > 20, "{rule}: only {} groups", groups.len());
        let mut removed = BTreeSet::new();
        let mut representative_orders = Vec::new();
        for (group_id, members) in &groups {
            let expected = expected_representative(rule, members);
            for m in members {
                assert_eq!(
                    m.representative, expected,
                    "{rule}: group {group_id}: {members:?}"
                );
                if m.id != expected {
                    removed.insert(m.id.clone());
                }
            }
            let first = members.iter().map(|m| m.input_order).min().unwrap();
            let rep = members.iter().find(|m| m.id == expected).unwrap();
            changed += usize::from(rep.input_order != first);
            representative_orders.push(rep.input_order);
        }
        // Groups are numbered in the input order of their representatives.
        assert!(
            representative_orders.windows(2).all(|w| w[0] < w[1]),
            "{rule}: {representative_orders:?}"
        );
        let kept: BTreeSet<String> = all_ids.difference(&removed).cloned().collect();
        assert_eq!(
            dedup_ids(&out),
            kept,
            "{rule}: dedup keeps the representatives"
        );
        let partition: BTreeSet<BTreeSet<String>> = groups
            .values()
            .map(|ms| ms.iter().map(|m| m.id.clone()).collect())
            .collect();
        partitions.push((rule, partition));
    }
    for (rule, partition) in &partitions[1..] {
        assert!(*partition == partitions[0].1, "{rule} changed the groups");
    }
    // The rules are not all the first member in disguise.
    assert!(
        changed > 20,
        "only {changed} representatives differ from the first member"
    );
}

#[test]
fn against_an_index_what_an_earlier_batch_kept_stays_kept() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let (x, y, p) = (
        0x0123_4567_89ab_cdef_u64,
        0xfedc_ba98_7654_3210_u64,
        0x0f0f_0f0f_f0f0_f0f0,
    );
    // Batch 1: a alone; the group {p1, p2}, represented by p2 under max:score.
    let batch1 = [("a", x, 1.0), ("p1", p, 1.0), ("p2", p ^ 1, 2.0)];
    // Batch 2: b, with a larger score than a, pairs with a; c and d are a new group; r, with
    // the largest score of all, joins p's group.
    let batch2 = [
        ("b", x ^ 0b11, 9.0),
        ("c", y, 2.0),
        ("d", y ^ 0b101, 8.0),
        ("r", p ^ 0b110, 100.0),
    ];
    let write = |name: &str, rows: &[(&str, u64, f64)]| {
        let path = dir.path().join(name);
        let values: Vec<String> = rows
            .iter()
            .map(|(id, f, s)| format!("('{id}', arrow_cast({f}, 'UInt64'), {s:?})"))
            .collect();
        make_parquet(
            &path,
            &format!(
                "SELECT column1 AS id, column2 AS simhash, column3 AS score FROM (VALUES {})",
                values.join(", ")
            ),
        );
        path
    };
    let (one, two) = (write("one.parquet", &batch1), write("two.parquet", &batch2));
    let matched = |input: &Path, output: &Path| {
        neardup_ok(&[
            "match",
            "--signatures",
            path_str(input),
            "--output",
            path_str(output),
            "--index",
            path_str(&index),
            "--update-index",
            "--keep",
            "max:score",
            "-q",
        ]);
    };
    let (out1, out2) = (dir.path().join("out1"), dir.path().join("out2"));
    matched(&one, &out1);
    matched(&two, &out2);
    let rows = |output: &Path| -> BTreeMap<String, (String, String)> {
        neardup_ok(&[
            "query",
            "--data",
            path_str(output),
            "--format",
            "csv",
            "SELECT id, group_id, representative_id FROM groups",
        ])
        .lines()
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            (f[0].to_string(), (f[1].to_string(), f[2].to_string()))
        })
        .collect()
    };
    let first = rows(&out1);
    assert_eq!(first["p1"].1, "p2", "batch 1 chose by score: {first:?}");
    let second = rows(&out2);
    // a was kept by batch 1, so it represents its group although b scores higher.
    assert_eq!(second["b"].1, "a", "{second:?}");
    assert_eq!(second["a"].1, "a", "{second:?}");
    // A group of this batch alone chooses by the rule.
    assert_eq!(second["c"].1, "d", "{second:?}");
    // An indexed group keeps its id and its representative.
    assert_eq!(second["r"], first["p1"], "{second:?}");
}

#[test]
fn rules_that_cannot_apply_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let out = dir.path().join("out");
    let run = |keep: &str| {
        neardup(&[
            "run",
            "--input",
            path_str(&sample),
            "--output",
            path_str(&out),
            "--keep",
            keep,
        ])
    };
    let missing = run("max:nosuch");
    assert_eq!(missing.status.code(), Some(1));
    let message = stderr(&missing);
    assert!(
        message.contains("no column 'nosuch'") && message.contains("id, lang, note, text"),
        "{message}"
    );
    let unknown = run("biggest");
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("newest:COLUMN"),
        "{}",
        stderr(&unknown)
    );
    assert!(!out.exists(), "a refused run writes nothing");

    let listy = dir.path().join("listy.parquet");
    make_parquet(
        &listy,
        "SELECT 1 AS id, 'some text here for a document' AS text, make_array(1, 2) AS tags",
    );
    let list = neardup(&[
        "run",
        "--input",
        path_str(&listy),
        "--output",
        path_str(&out),
        "--keep",
        "max:tags",
    ]);
    assert_eq!(list.status.code(), Some(1));
    assert!(stderr(&list).contains("no order"), "{}", stderr(&list));

    let fingerprints = dir.path().join("f.parquet");
    crate::common::write_fingerprints(&fingerprints, &[(1, 7), (2, 7)]);
    let longest = neardup(&[
        "match",
        "--signatures",
        path_str(&fingerprints),
        "--output",
        path_str(&out),
        "--keep",
        "longest",
    ]);
    assert_eq!(longest.status.code(), Some(2));
    assert!(
        stderr(&longest).contains("only fingerprints"),
        "{}",
        stderr(&longest)
    );
    for output in [&missing, &unknown, &list, &longest] {
        assert!(!stderr(output).contains("panicked"), "{}", stderr(output));
    }
}

/// A rule over a text column compares text: "9" above "10". That is said on standard error
/// (CSV columns are all text), and the rule is applied as before.
#[test]
fn a_rule_over_text_says_it_compares_text() {
    let dir = tempfile::tempdir().unwrap();
    let text = "the quick brown fox jumps over the lazy dog near the river bank on a sunny \
                afternoon in the middle of summer while children play";
    let input = dir.path().join("scores.csv");
    std::fs::write(
        &input,
        format!("id,score,text\na,10,{text}\nb,9,{text}\nc,100,{text}\n"),
    )
    .unwrap();
    let out = dir.path().join("out");
    let run = neardup(&[
        "run",
        "--input",
        path_str(&input),
        "--output",
        path_str(&out),
        "--keep",
        "max:score",
    ]);
    let message = stderr(&run);
    assert_eq!(run.status.code(), Some(0), "{message}");
    assert!(
        message.contains("column 'score' holds text (CSV columns are all text)"),
        "{message}"
    );
    let kept = neardup_ok(&[
        "query",
        "--data",
        path_str(&out),
        "--format",
        "csv",
        "SELECT id FROM dedup",
    ]);
    assert_eq!(kept, "id\nb\n");
}
