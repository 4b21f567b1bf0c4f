//! `run --features`: the options reach the fingerprints, are recorded, and bad ones are refused
//! before any work; the short-text and empty-text policies show in the outputs.

use std::path::Path;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{Int64Type, UInt64Type};

use crate::common::*;

fn make_parquet(path: &Path, select: &str) {
    neardup_ok(&["query", &format!("COPY ({select}) TO '{}'", path_str(path))]);
}

fn summary(output: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(output.join("summary.json")).unwrap()).unwrap()
}

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
        recorded.starts_with("mode=chars,top_k=50,n=4,"),
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
