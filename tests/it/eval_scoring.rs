//! `neardup eval`'s counting: repeated truth ids and label pairs, label pairs with two labels
//! (ignored) or of a document with itself (dropped), and `--unlisted negative` (label -1
//! ignored, unlisted pairs negative), against numbers worked out by hand on the shipped sample.
//!
//! At the default k = 3 the sample's groups are {1, 5, 9}, {2, 12}, {3, 7, 11} and {4, 14, 20}
//! (fixtures/README.md; `end_to_end` checks them): 3 + 1 + 3 + 3 = 10 predicted pairs among the
//! run's 20 documents (190 pairs). 6 and 8 are in no group, 99 is not in the run.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::common::{fixture, make_parquet, neardup, neardup_ok, pairs_of, path_str, stderr};

/// A run of the sample at the default k = 3 in `dir/run`.
fn sample_run(dir: &Path) -> PathBuf {
    let run = dir.join("run");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&run),
        // Unverified at k = 3: the scores below are worked out by hand for those pairs.
        "--verify",
        "off",
        "--quiet",
    ]);
    run
}

/// A labels file: (id_a, id_b, label) rows, ids as given, the label cast to `label_type`
/// (an Arrow type name, or "Boolean" for label = 1).
fn write_labels(path: &Path, rows: &[(i64, i64, i64)], label_type: &str) {
    let values: Vec<String> = rows
        .iter()
        .map(|(a, b, l)| format!("({a}, {b}, {l})"))
        .collect();
    let label = if label_type == "Boolean" {
        "l = 1".to_string()
    } else {
        format!("arrow_cast(l, '{label_type}')")
    };
    make_parquet(
        path,
        &format!(
            "SELECT arrow_cast(a, 'Utf8') AS id_a, arrow_cast(b, 'Utf8') AS id_b, {label} AS label \
             FROM (VALUES {}) AS t(a, b, l)",
            values.join(", ")
        ),
    );
}

/// `neardup eval --output <run>` with `extra` flags.
fn eval_args<'a>(run: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["eval", "--output", path_str(run)];
    args.extend_from_slice(extra);
    args
}

/// The eval table of `run` with `extra` flags, insisting the eval succeeds.
fn eval_table(run: &Path, extra: &[&str]) -> String {
    neardup_ok(&eval_args(run, extra))
}

/// Runs the eval of `run` with `extra` flags, insists it fails with exit code 1 without a panic
/// and without printing scores, and returns its standard error.
fn failing_eval(run: &Path, extra: &[&str]) -> String {
    let out = neardup(&eval_args(run, extra));
    let message = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(out.stdout.is_empty(), "no scores printed");
    message
}

/// Each of `parts` is in the eval table `table`.
fn assert_table_has(table: &str, parts: &[&str]) {
    for &part in parts {
        assert!(table.contains(part), "{table}");
    }
}

fn eval_json(run: &Path, extra: &[&str]) -> (serde_json::Value, String) {
    let mut args = eval_args(run, &["--format", "json"]);
    args.extend_from_slice(extra);
    let out = neardup(&args);
    let message = stderr(&out);
    assert!(out.status.success(), "neardup {args:?}: {message}");
    let report = serde_json::from_slice(&out.stdout).expect("eval writes JSON");
    (report, message)
}

fn counts(row: &serde_json::Value) -> [u64; 5] {
    [
        "true_positives",
        "false_positives",
        "false_negatives",
        "true_negatives",
        "predicted_ignored",
    ]
    .map(|key| {
        row[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} in {row}"))
    })
}

fn assert_close(value: &serde_json::Value, expected: f64) {
    let v = value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"));
    assert!((v - expected).abs() < 1e-12, "{v} != {expected}");
}

#[test]
fn a_truth_with_a_repeated_id_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = sample_run(dir.path());
    let truth = dir.path().join("truth.parquet");
    // 5 in two clusters, 9 three times in one: both refused, contradictory or not.
    make_parquet(
        &truth,
        "SELECT * FROM (VALUES (1, 'a'), (5, 'a'), (9, 'a'), (5, 'b'), (2, 'c'), (12, 'c'), \
         (9, 'a'), (9, 'a')) AS t(id, cluster)",
    );
    let message = failing_eval(&run, &["--truth", path_str(&truth)]);
    assert!(message.contains("truth.parquet"), "{message}");
    assert!(
        message.contains("2 ids are listed more than once"),
        "{message}"
    );
    assert!(message.contains("5 (2 times)"), "{message}");
    assert!(message.contains("9 (3 times)"), "{message}");

    // A truth or labels file without the columns it is read by is named, with the flag that
    // names another column and the columns it has.
    let sample = fixture("sample.parquet");
    let message = failing_eval(&run, &["--truth", path_str(&sample)]);
    assert!(
        message.contains("sample.parquet: no column 'cluster' (--truth-cluster-column")
            && message.contains("id, lang, note, text"),
        "{message}"
    );
    let message = failing_eval(&run, &["--labels", path_str(&sample)]);
    assert!(message.contains("no column 'id_a'"), "{message}");

    // --unlisted is about labelled pairs: refused with --truth as a usage error.
    let out = neardup(&eval_args(
        &run,
        &["--truth", path_str(&truth), "--unlisted", "negative"],
    ));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--labels"), "{}", stderr(&out));
}

#[test]
fn a_repeated_label_pair_counts_once_and_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let run = sample_run(dir.path());
    // 1-5 and 4-14 found (TP); 1-6 a missed duplicate (FN); 3-11 predicted but labelled 0
    // (FP); 3-8 labelled 0 and apart (TN). TP 2, FP 1, FN 1, TN 1: precision = recall = 2/3.
    let base = [(1, 5, 1), (4, 14, 1), (1, 6, 1), (3, 11, 0), (3, 8, 0)];
    // The same pairs with 4 repeated rows of 3 pairs, two of them reversed. Counted as rows,
    // they would give TP 3, FP 3, FN 2: precision 0.5, recall 0.6.
    let mut repeated = base.to_vec();
    repeated.extend([(5, 1, 1), (6, 1, 1), (11, 3, 0), (3, 11, 0)]);
    let (base_file, repeated_file, boolean_file) = (
        dir.path().join("base.parquet"),
        dir.path().join("repeated.parquet"),
        dir.path().join("boolean.parquet"),
    );
    write_labels(&base_file, &base, "Int32");
    write_labels(&repeated_file, &repeated, "Int32");
    write_labels(&boolean_file, &repeated, "Boolean");

    let (clean, message) = eval_json(&run, &["--labels", path_str(&base_file)]);
    assert!(!message.contains("warning"), "{message}");
    let row = &clean["rows"][0];
    assert_eq!(counts(row), [2, 1, 1, 1, 0], "{clean}");
    assert_close(&row["precision"], 2.0 / 3.0);
    assert_close(&row["recall"], 2.0 / 3.0);
    assert_eq!(clean["scored_pairs"], 5);
    // 1, 5, 4, 14, 6, 3, 11, 8.
    assert_eq!(clean["scored_documents"], 8);
    assert_eq!(clean["repeated_pairs_dropped"], 0);
    assert_eq!(clean["self_pairs_dropped"], 0);
    assert_eq!(clean["contradicting_pairs_ignored"], 0);
    assert_eq!(clean["unlisted"], "ignore");

    for file in [&repeated_file, &boolean_file] {
        let (report, message) = eval_json(&run, &["--labels", path_str(file)]);
        assert_eq!(report["rows"], clean["rows"], "{report}");
        assert_eq!(report["scored_pairs"], 5);
        assert_eq!(report["scored_documents"], 8);
        assert_eq!(report["repeated_pairs_dropped"], 4);
        assert_eq!(report["distance_histogram"], clean["distance_histogram"]);
        assert_eq!(message.matches("neardup: warning:").count(), 1, "{message}");
        assert!(
            message.contains("3 pairs are listed more than once with the same label")
                && message.contains("dropped the 4 repeated rows"),
            "{message}"
        );
    }
    let table = eval_table(&run, &["--labels", path_str(&repeated_file)]);
    assert_table_has(
        &table,
        &[
            "20 documents in the run; 5 labelled pairs scored (8 documents)",
            "| 3 | 2 | 1 | 1 | 1 | 0.6667 | 0.6667 | 0.6667 | - |\n",
        ],
    );
}

#[test]
fn contradicting_and_self_pairs_are_warned_about_and_not_scored() {
    let dir = tempfile::tempdir().unwrap();
    let run = sample_run(dir.path());
    let labels = dir.path().join("conflict.parquet");
    // 1-5 (predicted) and 6-8 (apart) are each listed with 1 and with 0: ignored both ways.
    // 7-7 and 9-9 pair a document with itself: dropped. The rest as in the test above: 2-12
    // found (TP), 1-6 missed (FN), 3-11 predicted but labelled 0 (FP), 3-8 apart (TN).
    // TP 1, FP 1, FN 1, TN 1, 1-5 predicted and ignored: precision = recall = F1 = 1/2. Scored
    // by their first row, the contradicting pairs would give TP 2, FP 1, FN 1, TN 2 (precision
    // 2/3); by their last, TP 1, FP 2, FN 2, TN 1 (1/3).
    let rows = [
        (1, 5, 1),
        (5, 1, 0),
        (7, 7, 1),
        (2, 12, 1),
        (6, 8, 0),
        (8, 6, 1),
        (1, 6, 1),
        (3, 11, 0),
        (3, 8, 0),
        (9, 9, 0),
    ];
    write_labels(&labels, &rows, "Int64");
    let file = path_str(&labels);

    let (report, message) = eval_json(&run, &["--labels", file]);
    let row = &report["rows"][0];
    assert_eq!(counts(row), [1, 1, 1, 1, 1], "{report}");
    assert_close(&row["precision"], 0.5);
    assert_close(&row["recall"], 0.5);
    assert_close(&row["f1"], 0.5);
    assert_eq!(report["scored_pairs"], 4);
    assert_eq!(report["ignored_pairs"], 0);
    assert_eq!(report["self_pairs_dropped"], 2);
    assert_eq!(report["contradicting_pairs_ignored"], 2);
    assert_eq!(report["repeated_pairs_dropped"], 0);
    assert_eq!(report["unknown_id_count"], 0);
    // 2, 12, 1, 6, 3, 11, 8 (5 is only in the ignored 1-5).
    assert_eq!(report["scored_documents"], 7);
    // The histogram has the 4 scored pairs only: 2 positives (2-12, 1-6), 2 negatives.
    let histogram = report["distance_histogram"].as_array().unwrap();
    let total = |i: usize| -> u64 { histogram.iter().map(|c| c[i].as_u64().unwrap()).sum() };
    assert_eq!((total(1), total(2)), (2, 2), "{report}");

    // One warning each, naming the file; rows are read sorted by id_a, so the contradiction is
    // noticed at (5, 1) and (8, 6).
    assert_eq!(message.matches("neardup: warning:").count(), 2, "{message}");
    assert!(
        message.contains(&format!(
            "neardup: warning: labels {file}: 2 rows pair a document with itself (e.g. (7, 7), \
             (9, 9)); they say nothing about two documents and are not scored\n"
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "neardup: warning: labels {file}: 2 pairs are listed with different labels ((a, b) \
             and (b, a) are the same pair), e.g. (5, 1) labelled 1 and 0 (2 rows), (8, 6) \
             labelled 1 and 0 (2 rows); they are not scored (ignored both ways, like label -1)\n"
        )),
        "{message}"
    );

    // Unlisted negative: 10 predicted pairs, TP 1 (2-12), 1 ignored (1-5), so FP = 10 - 1 - 1
    // = 8 (1-9, 5-9, 3-7, 3-11, 7-11, 4-14, 4-20, 14-20); FN 1 (1-6); TN = 190 - 1 - 8 - 1 - 2
    // ignored (1-5, 6-8) = 178. Precision 1/9, recall 1/2, F1 = 2 (1/9)(1/2) / (11/18) = 2/11.
    let (report, _) = eval_json(&run, &["--labels", file, "--unlisted", "negative"]);
    let row = &report["rows"][0];
    assert_eq!(counts(row), [1, 8, 1, 178, 1], "{report}");
    assert_close(&row["precision"], 1.0 / 9.0);
    assert_close(&row["recall"], 0.5);
    assert_close(&row["f1"], 2.0 / 11.0);
    assert_eq!(report["scored_documents"], 20);

    let table = eval_table(&run, &["--labels", file]);
    assert_table_has(
        &table,
        &[
            "20 documents in the run; 4 labelled pairs scored (7 documents); 2 with \
             contradicting labels, ignored\n",
            "| 3 | 1 | 1 | 1 | 1 | 0.5000 | 0.5000 | 0.5000 | - | 1 |\n",
            "ignored: predicted pairs labelled -1 or with contradicting labels",
        ],
    );
}

#[test]
fn a_label_other_than_1_0_and_minus_1_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = sample_run(dir.path());
    let labels = dir.path().join("bad.parquet");
    // 2 is no label, on a self pair too: the file is malformed, nothing is scored.
    write_labels(&labels, &[(1, 5, 1), (2, 12, 2), (7, 7, 3)], "Int64");
    let message = failing_eval(&run, &["--labels", path_str(&labels)]);
    assert!(message.contains("bad.parquet"), "{message}");
    assert!(
        message.contains("2 rows have a label other than 1")
            && message.contains("2 for (2, 12)")
            && message.contains("3 for (7, 7)"),
        "{message}"
    );

    // A fraction is no label either, though a cast to an integer would make 0.5 a 0 and 1.7
    // a 1; a whole number written as a float is its number.
    let fractions = dir.path().join("fractions.parquet");
    make_parquet(
        &fractions,
        "SELECT arrow_cast(a, 'Utf8') AS id_a, arrow_cast(b, 'Utf8') AS id_b, l AS label \
         FROM (VALUES (1, 5, 1.0), (2, 12, 0.5), (3, 11, 1.7), (4, 14, -1.0)) AS t(a, b, l)",
    );
    let message = failing_eval(&run, &["--labels", path_str(&fractions)]);
    assert!(
        message.contains("2 rows have a label other than 1")
            && message.contains("0.5 for (2, 12)")
            && message.contains("1.7 for (3, 11)"),
        "{message}"
    );
}

/// drift_dev-like labels: string ids, Int8 labels 1 or -1, negatives not listed.
const DRIFT_LIKE: [(i64, i64, i64); 7] = [
    (1, 5, 1),  // predicted: TP
    (1, 9, -1), // predicted, ignored: neither TP nor FP
    (2, 12, 1), // predicted: TP
    (4, 14, 1), // predicted: TP
    (1, 6, 1),  // not predicted: FN
    (3, 8, -1), // not predicted, ignored: not FN
    (99, 1, 1), // 99 is not in the run: not scored
];

#[test]
fn unlisted_negative_counts_unlisted_predicted_pairs_as_false_positives() {
    let dir = tempfile::tempdir().unwrap();
    let run = sample_run(dir.path());
    let labels = dir.path().join("pairs.parquet");
    write_labels(&labels, &DRIFT_LIKE, "Int8");

    // 10 predicted pairs: TP 3 (1-5, 2-12, 4-14), 1 ignored (1-9), so FP = 10 - 3 - 1 = 6
    // (5-9, 3-7, 3-11, 7-11, 4-20, 14-20). FN 1 (1-6). TN = 190 - 3 - 6 - 1 - 2 ignored = 178.
    // precision 3/9, recall 3/4, F1 = 2 (1/3)(3/4) / (1/3 + 3/4) = 6/13.
    let (report, _) = eval_json(
        &run,
        &["--labels", path_str(&labels), "--unlisted", "negative"],
    );
    let row = &report["rows"][0];
    assert_eq!(row["k"], 3);
    assert_eq!(counts(row), [3, 6, 1, 178, 1], "{report}");
    assert_close(&row["precision"], 1.0 / 3.0);
    assert_close(&row["recall"], 0.75);
    assert_close(&row["f1"], 6.0 / 13.0);
    assert_eq!(report["unlisted"], "negative");
    assert_eq!(report["scored_pairs"], 4);
    assert_eq!(report["ignored_pairs"], 2);
    assert_eq!(report["scored_documents"], 20);
    assert_eq!(report["unknown_id_count"], 1);
    assert_eq!(report["unknown_ids"], serde_json::json!(["99"]));

    // Unlisted ignored (the default): the same -1 pairs count neither way, and no pair that
    // is not listed is an FP. TP 3, FP 0, FN 1, TN 0: precision 1, recall 3/4.
    let (default, _) = eval_json(&run, &["--labels", path_str(&labels)]);
    let row = &default["rows"][0];
    assert_eq!(counts(row), [3, 0, 1, 0, 1], "{default}");
    assert_close(&row["precision"], 1.0);
    assert_close(&row["recall"], 0.75);
    assert_eq!(default["unlisted"], "ignore");
    // 1, 5, 2, 12, 4, 14, 6 (the ignored pairs' documents are not scored).
    assert_eq!(default["scored_documents"], 7);

    let table = eval_table(
        &run,
        &["--labels", path_str(&labels), "--unlisted", "negative"],
    );
    assert_table_has(
        &table,
        &[
            "4 labelled pairs scored (20 documents); 2 labelled -1, ignored; every unlisted \
             pair of the run's documents is a negative",
            "| 3 | 3 | 6 | 1 | 178 | 0.3333 | 0.7500 | 0.4615 | - | 1 |\n",
        ],
    );
}

/// Components of the sample's documents 1..=20 joined by the run's pairs within `k`.
fn groups_at(pairs: &[(i64, i64, u8)], k: u8) -> HashMap<i64, i64> {
    let mut group: HashMap<i64, i64> = (1..=20).map(|id| (id, id)).collect();
    // Relabel until nothing changes: slow, obviously right, and 20 documents.
    loop {
        let mut changed = false;
        for &(a, b, _) in pairs.iter().filter(|p| p.2 <= k) {
            let low = group[&a].min(group[&b]);
            for id in [a, b] {
                if group[&id] != low {
                    let old = group[&id];
                    for g in group.values_mut() {
                        if *g == old {
                            *g = low;
                        }
                    }
                    changed = true;
                }
            }
        }
        if !changed {
            return group;
        }
    }
}

#[tokio::test]
async fn unlisted_negative_sweeps_like_counting_every_pair() {
    let dir = tempfile::tempdir().unwrap();
    let run = sample_run(dir.path());
    let labels = dir.path().join("pairs.parquet");
    write_labels(&labels, &DRIFT_LIKE, "Int8");
    let (report, _) = eval_json(
        &run,
        &[
            "--labels",
            path_str(&labels),
            "--unlisted",
            "negative",
            "--sweep",
            "0..=3",
        ],
    );
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{report}");
    let label_of: BTreeMap<(i64, i64), i64> = DRIFT_LIKE
        .iter()
        .map(|&(a, b, l)| ((a.min(b), a.max(b)), l))
        .collect();
    let pairs = pairs_of(&run).await;
    for (k, row) in rows.iter().enumerate() {
        let group = groups_at(&pairs, k as u8);
        // Every one of the 190 pairs, by the rule in drift_dev's README.
        let [mut tp, mut fp, mut fn_, mut tn, mut ignored] = [0u64; 5];
        for a in 1..=20i64 {
            for b in a + 1..=20 {
                let predicted = group[&a] == group[&b];
                match (label_of.get(&(a, b)).copied().unwrap_or(0), predicted) {
                    (1, true) => tp += 1,
                    (1, false) => fn_ += 1,
                    (0, true) => fp += 1,
                    (0, false) => tn += 1,
                    (_, true) => ignored += 1,
                    (_, false) => {}
                }
            }
        }
        assert_eq!(row["k"], k as u64);
        assert_eq!(counts(row), [tp, fp, fn_, tn, ignored], "k = {k}: {report}");
    }
    // The last row is the run's own k, as worked out by hand above.
    assert_eq!(counts(&rows[3]), [3, 6, 1, 178, 1]);
}
