//! `run --features`: the options reach the fingerprints, are recorded, and bad ones are refused
//! before any work; the short-text and empty-text policies show in the outputs.

use std::path::Path;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{Int64Type, UInt64Type};

use crate::common::*;

fn run(input: &Path, output: &Path, features: &str) {
    neardup_ok(&[
        "run",
        "--input",
        path_str(input),
        "--output",
        path_str(output),
        "--features",
        features,
        "--overwrite",
    ]);
}

const LONG: &str = "Debian provides more than a pure operating system: it comes with many \
                    thousands of packages, precompiled software bundled up in a nice format";

#[tokio::test]
async fn options_reach_the_fingerprints_and_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.parquet");
    make_parquet(
        &input,
        &format!(
            "SELECT 1 AS id, '{LONG}' AS text UNION ALL SELECT 2, '<p>{LONG}</p>' \
             UNION ALL SELECT 3, 'Open the settings page' UNION ALL SELECT 4, 'open the SETTINGS page!' \
             UNION ALL SELECT 5, '' UNION ALL SELECT 6, '   ' UNION ALL SELECT 7, NULL"
        ),
    );
    let output = dir.path().join("out");
    run(&input, &output, "mode=chars,n=4");
    let s = summary(&output);
    let recorded = s["parameters"]["features"].as_str().unwrap();
    assert!(
        recorded.starts_with("mode=chars,bits=64,top_k=50,n=4,"),
        "{recorded}"
    );
    // The recorded string reproduces the fingerprints through SQL.
    let expected = query(
        &output,
        &format!("SELECT id FROM signatures WHERE id = 1 AND (simhash IS DISTINCT FROM simhash('{LONG}', '{recorded}'))"),
    )
    .await;
    assert_eq!(expected.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    // Markup is stripped by default, so 1 and 2 share a fingerprint; 3 and 4 differ only in
    // case and punctuation, which the cleaning and the character n-grams ignore.
    let groups = query(&output, "SELECT id, group_id FROM groups ORDER BY id").await;
    let rows: Vec<(i64, u64)> = groups
        .iter()
        .flat_map(|b| {
            let ids = b.column(0).as_primitive::<Int64Type>();
            let g = b.column(1).as_primitive::<UInt64Type>();
            (0..b.num_rows()).map(move |i| (ids.value(i), g.value(i)))
        })
        .collect();
    assert_eq!(rows, [(1, 1), (2, 1), (3, 2), (4, 2)]);
    assert_eq!(s["counts"]["empty_texts"], 2);
    assert_eq!(s["counts"]["null_texts"], 1);
    // The features column is there for users to see what was short.
    let features = query(&output, "SELECT features FROM signatures WHERE id = 3").await;
    let n = features[0]
        .column(0)
        .as_primitive::<datafusion::arrow::datatypes::UInt32Type>()
        .value(0);
    assert_eq!(n, 16, "'openthesettingspage' has 16 distinct 4-grams");
}

#[tokio::test]
async fn short_texts_are_counted_and_empty_exact_groups_blank_documents() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.parquet");
    make_parquet(
        &input,
        "SELECT 1 AS id, 'Open the settings page' AS text UNION ALL SELECT 2, 'Open the settings window' \
         UNION ALL SELECT 3, '' UNION ALL SELECT 4, '  \n ' UNION ALL SELECT 5, 'more words than the \
         minimum for a real fingerprint here'",
    );
    let output = dir.path().join("out");
    // Word features: the two four-word texts have three features each (one a stop word).
    run(&input, &output, "mode=words");
    let s = summary(&output);
    assert_eq!(s["counts"]["short_texts"], 2, "{s}");
    assert_eq!(s["counts"]["empty_texts"], 2);
    assert_eq!(
        s["counts"]["groups"], 0,
        "short texts one word apart do not match"
    );

    run(&input, &output, "mode=words,empty=exact");
    let s = summary(&output);
    assert_eq!(s["counts"]["groups"], 1, "{s}");
    let members = query(&output, "SELECT id FROM groups ORDER BY id").await;
    let ids: Vec<i64> = members[0]
        .column(0)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec();
    assert_eq!(ids, [3, 4]);
}

#[test]
fn bad_feature_options_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let message = failing_sample_run(dir.path(), &["--features", "mode=bigrams"], 2);
    assert!(
        message.contains("bigrams") && message.contains("jieba_tfidf"),
        "{message}"
    );
    let message = failing_sample_run(dir.path(), &["--features", "colour=red"], 2);
    assert!(
        message.contains("colour") && message.contains("valid options"),
        "{message}"
    );
    let missing = dir.path().join("no-such-idf.txt");
    let idf = format!("idf={}", path_str(&missing));
    let message = failing_sample_run(dir.path(), &["--features", &idf], 2);
    assert!(message.contains("no-such-idf.txt"), "{message}");
    assert!(!dir.path().join("out").exists(), "nothing written");
}

#[test]
fn generate_draws_only_the_edits_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (corpus, truth) = (dir.path().join("g.parquet"), dir.path().join("t.parquet"));
    let args = |edits: &'static str| {
        vec![
            "generate".to_string(),
            "--input".into(),
            path_str(&fixture("sample.parquet")).into(),
            "--output".into(),
            path_str(&corpus).into(),
            "--truth".into(),
            path_str(&truth).into(),
            "--edits".into(),
            edits.into(),
            "--overwrite".into(),
        ]
    };
    let bad = neardup(
        &args("markup,shouting")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("shouting") && stderr(&bad).contains("boilerplate"));
    neardup_ok(
        &args("markup,traditional")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let edits = neardup_ok(&[
        "query",
        "--format",
        "csv",
        &format!(
            "SELECT DISTINCT e FROM (SELECT unnest(string_to_array(edits, ',')) AS e FROM '{}') ORDER BY e",
            path_str(&corpus)
        ),
    ]);
    assert_eq!(edits.trim(), "e\nmarkup\ntraditional");
}

/// `--bits 128`: eight bands find every pair within 7 bits. The oracle is a brute-force
/// self-join of the signatures on `hamming(a, b) <= 7`, on a generated corpus with copies.
#[tokio::test]
async fn wide_fingerprints_find_every_pair_within_seven_bits() {
    let dir = tempfile::tempdir().unwrap();
    let (corpus, truth) = (dir.path().join("g.parquet"), dir.path().join("t.parquet"));
    neardup_ok(&[
        "generate",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&corpus),
        "--truth",
        path_str(&truth),
        "--max-copies",
        "4",
    ]);
    let output = dir.path().join("out");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&corpus),
        "--output",
        path_str(&output),
        "--bits",
        "128",
        "--k",
        "7",
    ]);
    let s = summary(&output);
    assert_eq!(s["parameters"]["fingerprint_bits"], 128);
    assert_eq!(s["parameters"]["bands"], 8);
    let pairs_of = |sql: &'static str| {
        let output = output.clone();
        async move {
            let batches = query(&output, sql).await;
            let mut pairs: Vec<(String, String, u8)> = Vec::new();
            for b in &batches {
                let (a, c, d) = (
                    b.column(0).as_string::<i32>(),
                    b.column(1).as_string::<i32>(),
                    b.column(2)
                        .as_primitive::<datafusion::arrow::datatypes::UInt8Type>(),
                );
                for i in 0..b.num_rows() {
                    pairs.push((a.value(i).to_string(), c.value(i).to_string(), d.value(i)));
                }
            }
            pairs.sort();
            pairs
        }
    };
    let found =
        pairs_of("SELECT arrow_cast(id_a, 'Utf8'), arrow_cast(id_b, 'Utf8'), distance FROM pairs")
            .await;
    let brute = pairs_of(
        "SELECT arrow_cast(a.id, 'Utf8'), arrow_cast(b.id, 'Utf8'), hamming(a.simhash, b.simhash) \
         FROM signatures a \
         JOIN signatures b ON a.id < b.id WHERE hamming(a.simhash, b.simhash) <= 7",
    )
    .await;
    assert!(
        found.iter().any(|p| p.2 >= 4),
        "some pairs beyond 64-bit reach: {found:?}"
    );
    assert_eq!(found, brute);
    let width = query(
        &output,
        "SELECT arrow_cast(arrow_typeof(simhash), 'Utf8'), bucket8 FROM signatures LIMIT 1",
    )
    .await;
    assert_eq!(
        width[0].column(0).as_string::<i32>().value(0),
        "FixedSizeBinary(16)"
    );
}

#[test]
fn wide_fingerprint_limits_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let m = failing_sample_run(dir.path(), &["--bits", "128", "--k", "17"], 2);
    assert!(m.contains("0..=16"), "{m}");
    let m = failing_sample_run(dir.path(), &["--k", "9"], 2);
    assert!(m.contains("0..=8"), "{m}");
    let m = failing_sample_run(dir.path(), &["--bits", "128", "--matching", "join"], 2);
    assert!(m.contains("--matching scan"), "{m}");
    let m = failing_sample_run(dir.path(), &["--bits", "64", "--features", "bits=128"], 2);
    assert!(m.contains("contradicts"), "{m}");
}

#[test]
fn eval_scores_a_wide_run() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    let sample = fixture("sample.parquet");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&sample),
        "--output",
        path_str(&output),
        "--bits",
        "128",
        "--k",
        "6",
    ]);
    let labels = dir.path().join("labels.tsv");
    std::fs::write(&labels, "id_a\tid_b\tlabel\n1\t5\t1\n1\t6\t0\n").unwrap();
    let report = neardup_ok(&[
        "eval",
        "--output",
        path_str(&output),
        "--labels",
        path_str(&labels),
        "--sweep",
        "0..=8",
        "--format",
        "json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["rows"].as_array().unwrap().len(), 7, "{report}");
    assert!(
        report["note"]
            .as_str()
            .unwrap()
            .contains("128-bit fingerprints support k up to 16"),
        "{report}"
    );
    assert_eq!(report["rows"][6]["true_positives"], 1);
}
