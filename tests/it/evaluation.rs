//! `neardup eval` through the binary on the shipped sample, against its known groups.

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{Int64Type, UInt64Type};

use crate::common::{fixture, neardup, neardup_ok, path_str, query};

/// The sample's truth: the written groups, with 14 (an edited copy of 4 beyond k = 3) in 4's.
const TRUTH: &str = "CASE WHEN id IN (1, 5, 9) THEN 'a' WHEN id IN (2, 12) THEN 'b' \
                     WHEN id IN (3, 7, 11) THEN 'c' WHEN id IN (4, 14, 20) THEN 'd' \
                     ELSE CAST(id AS VARCHAR) END";

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

#[tokio::test]
async fn truth_scores_sweep_and_agree_with_a_run_at_that_k() {
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let truth = dir.path().join("truth.parquet");
    neardup_ok(&[
        "query",
        &format!(
            "COPY (SELECT id, {TRUTH} AS cluster FROM '{}') TO '{}'",
            path_str(&sample),
            path_str(&truth)
        ),
    ]);
    let run3 = dir.path().join("k3");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&sample),
        "--output",
        path_str(&run3),
    ]);
    let report = json(&neardup_ok(&[
        "eval",
        "--output",
        path_str(&run3),
        "--truth",
        path_str(&truth),
        "--sweep",
        "0..=3",
        "--format",
        "json",
    ]));
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let k3 = &rows[3];
    // All 10 true pairs found (3 + 1 + 3 + 3); nothing wrong predicted.
    assert_eq!(
        (
            k3["true_positives"].as_u64(),
            k3["false_positives"].as_u64(),
            k3["false_negatives"].as_u64()
        ),
        (Some(10), Some(0), Some(0))
    );
    assert_eq!(k3["precision"], 1.0);
    assert_eq!(k3["recall"], 1.0);
    assert_eq!(report["scored_documents"], 20);

    // Two ways: the same scores from the groups table of the run.
    let groups = query(&run3, "SELECT id, group_id FROM groups").await;
    let mut group_of = std::collections::HashMap::new();
    for b in &groups {
        for i in 0..b.num_rows() {
            group_of.insert(
                b.column(0).as_primitive::<Int64Type>().value(i),
                b.column(1).as_primitive::<UInt64Type>().value(i),
            );
        }
    }
    let truth_of = |id: i64| match id {
        1 | 5 | 9 => 1001,
        2 | 12 => 1002,
        3 | 7 | 11 => 1003,
        4 | 14 | 20 => 1004,
        other => other as u64,
    };
    let ids: Vec<i64> = (1..=20).collect();
    let predicted: Vec<u64> = ids
        .iter()
        .map(|id| group_of.get(id).copied().unwrap_or(10_000 + *id as u64))
        .collect();
    let truths: Vec<u64> = ids.iter().map(|&id| truth_of(id)).collect();
    let (scores, ari) = neardup::commands::eval::score_clustering(&predicted, &truths);
    assert_eq!(k3["true_positives"].as_u64(), Some(scores.true_positives));
    assert_eq!(k3["false_negatives"].as_u64(), Some(scores.false_negatives));
    assert_eq!(k3["true_negatives"].as_u64(), Some(scores.true_negatives));
    assert!((k3["adjusted_rand_index"].as_f64().unwrap() - ari.unwrap()).abs() < 1e-9);

    // The sweep's k = 1 row equals a real run at k = 1.
    let run1 = dir.path().join("k1");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&sample),
        "--output",
        path_str(&run1),
        "--k",
        "1",
    ]);
    let at1 = json(&neardup_ok(&[
        "eval",
        "--output",
        path_str(&run1),
        "--truth",
        path_str(&truth),
        "--format",
        "json",
    ]));
    assert_eq!(at1["rows"][0], rows[1]);
    assert_eq!(at1["rows"][0]["k"], 1);

    // A sweep past the run's k says so instead of inventing rows.
    let past = json(&neardup_ok(&[
        "eval",
        "--output",
        path_str(&run1),
        "--truth",
        path_str(&truth),
        "--sweep",
        "0..=3",
        "--format",
        "json",
    ]));
    assert_eq!(past["rows"].as_array().unwrap().len(), 2);
    assert!(past["note"].as_str().unwrap().contains("k = 1"));
}

#[test]
fn labelled_pairs_and_unknown_ids() {
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let run = dir.path().join("run");
    neardup_ok(&[
        "run",
        "--input",
        path_str(&sample),
        "--output",
        path_str(&run),
        "--verify",
        "off",
    ]);
    let labels = dir.path().join("labels.tsv");
    std::fs::write(
        &labels,
        "id_a\tid_b\tlabel\n1\t5\t1\n1\t6\t0\n4\t14\t1\n3\t8\t0\n99\t1\t1\n13\t1\t0\n",
    )
    .unwrap();
    let table = neardup_ok(&[
        "eval",
        "--output",
        path_str(&run),
        "--labels",
        path_str(&labels),
    ]);
    // 1-5 and 4-14 found (TP), 1-6 and 3-8 apart (TN), 13 has no fingerprint (TN).
    assert!(
        table.contains("| 3 | 2 | 0 | 0 | 3 | 1.0000 | 1.0000 | 1.0000 | - |"),
        "{table}"
    );
    assert!(
        table.contains("1 ids in the truth or labels are not in the run"),
        "{table}"
    );
    assert!(table.contains("| none | 0 | 1 |"), "{table}");
    assert!(table.contains("| 0 | 1 | 0 |"), "{table}");

    let both = neardup(&["eval", "--output", path_str(&run)]);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn generated_corpus_is_deterministic_and_scores_against_its_truth() {
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let make = |name: &str, seed: &str| {
        let (corpus, truth) = (
            dir.path().join(format!("{name}.parquet")),
            dir.path().join(format!("{name}-truth.parquet")),
        );
        neardup_ok(&[
            "generate",
            "--input",
            path_str(&sample),
            "--output",
            path_str(&corpus),
            "--truth",
            path_str(&truth),
            "--max-copies",
            "3",
            "--seed",
            seed,
        ]);
        (corpus, truth)
    };
    let (a, truth) = make("a", "7");
    let (b, _) = make("b", "7");
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "same seed, same corpus"
    );
    // A JSON Lines copy of the sample gives the same corpus: generate reads it as run does.
    let jsonl = dir.path().join("sample.jsonl");
    let all = format!("SELECT * FROM '{}'", sample.display());
    neardup_ok(&["query", "--out", path_str(&jsonl), &all]);
    let from_jsonl = dir.path().join("j.parquet");
    neardup_ok(&[
        "generate",
        "--input",
        path_str(&jsonl),
        "--output",
        path_str(&from_jsonl),
        "--truth",
        path_str(&dir.path().join("j-truth.parquet")),
        "--max-copies",
        "3",
        "--seed",
        "7",
    ]);
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&from_jsonl).unwrap(),
        "the same sources, the same corpus"
    );
    let (c, _) = make("c", "8");
    assert_ne!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&c).unwrap(),
        "another seed, another corpus"
    );
    // Refuses to overwrite without being asked.
    let again = neardup(&[
        "generate",
        "--input",
        path_str(&sample),
        "--output",
        path_str(&a),
        "--truth",
        path_str(&truth),
    ]);
    assert_eq!(again.status.code(), Some(2));

    let out = dir.path().join("out");
    neardup_ok(&["run", "--input", path_str(&a), "--output", path_str(&out)]);
    let report = json(&neardup_ok(&[
        "eval",
        "--output",
        path_str(&out),
        "--truth",
        path_str(&truth),
        "--format",
        "json",
    ]));
    // Every generated document is known to the truth, and the copies are found at least in part.
    assert_eq!(report["unknown_id_count"], 0);
    assert!(
        report["rows"][0]["true_positives"].as_u64().unwrap() > 0,
        "{report}"
    );
}

#[test]
fn collage_sources_stream_past_the_input_in_row_groups() {
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    let dir = tempfile::tempdir().unwrap();
    let (corpus, truth) = (dir.path().join("c.parquet"), dir.path().join("t.parquet"));
    let out = neardup_ok(&[
        "generate",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&corpus),
        "--truth",
        path_str(&truth),
        "--collage-sources",
        "20000",
        "--max-copies",
        "1",
    ]);
    let rows = |sql: &str| -> String {
        let answer = neardup_ok(&["query", sql, "--format", "csv"]);
        answer.lines().nth(1).unwrap_or_default().to_string()
    };
    // The input's documents with text are the first sources.
    let real: usize = rows(&format!(
        "SELECT count(*) FROM '{}' WHERE trim(text) <> ''",
        path_str(&fixture("sample.parquet"))
    ))
    .parse()
    .unwrap();
    assert!(real > 10);
    assert!(
        out.contains(&format!("from {} sources", real + 20_000)),
        "{out}"
    );
    // Every document is in the truth once; the 20 input documents and 20,000 collages are the
    // clusters; no collage is empty (a copy may be: truncating a one-letter text).
    let (c, t) = (path_str(&corpus), path_str(&truth));
    let documents = rows(&format!("SELECT count(*) FROM '{c}'"));
    assert!(out.starts_with(&format!("{documents} documents")), "{out}");
    assert_eq!(
        rows(&format!(
            "SELECT count(*) FROM '{c}' x JOIN '{t}' y ON x.id = y.id"
        )),
        documents
    );
    assert_eq!(
        rows(&format!(
            "SELECT count(DISTINCT cluster), count(DISTINCT cluster) FILTER (WHERE cluster LIKE 'collage-%') FROM '{t}'"
        )),
        format!("{},20000", real + 20_000)
    );
    assert_eq!(
        rows(&format!(
            "SELECT count(*) FROM '{c}' WHERE id LIKE 'collage-%#0' AND length(text) = 0"
        )),
        "0"
    );
    // Streamed: row groups of 16,384 rows, the last one partial.
    let reader = SerializedFileReader::new(std::fs::File::open(&corpus).unwrap()).unwrap();
    let groups: Vec<i64> = reader
        .metadata()
        .row_groups()
        .iter()
        .map(|g| g.num_rows())
        .collect();
    let total: i64 = documents.parse().unwrap();
    assert_eq!(groups.iter().sum::<i64>(), total);
    assert!(groups.len() >= 2, "{groups:?}");
    assert!(
        groups[..groups.len() - 1].iter().all(|&n| n == 16_384),
        "{groups:?}"
    );
}

/// `--sources N` takes the first N documents by id: integer ids in numeric order (they were
/// compared as text: 1, 10, 11).
#[test]
fn sources_are_the_first_by_id_in_the_ids_own_order() {
    let dir = tempfile::tempdir().unwrap();
    let (corpus, truth) = (dir.path().join("c.parquet"), dir.path().join("t.parquet"));
    neardup_ok(&[
        "generate",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&corpus),
        "--truth",
        path_str(&truth),
        "--sources",
        "3",
        "--max-copies",
        "0",
    ]);
    let ids = neardup_ok(&[
        "query",
        "--format",
        "csv",
        &format!("SELECT id FROM '{}' ORDER BY id", corpus.display()),
    ]);
    assert_eq!(ids, "id\n1#0\n2#0\n3#0\n");
}
