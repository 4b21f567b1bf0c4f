//! Verification against an oracle: a generated corpus of edited copies (collages of the sample's
//! sentences, so pages share sentences as templated pages do) is run with `--verify off` and with
//! a threshold. Without verification the pairs must be every pair within k (brute force over
//! the signatures); with it, exactly the candidates whose similarity, estimated here from the
//! two fingerprints' sketches by an estimator written independently of `src/text/sketch.rs`,
//! reaches the threshold, plus every pair of documents that share a fingerprint. Both runs show
//! the same similarity for each pair.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{Float64Type, Int64Type, UInt8Type, UInt64Type};

use crate::common::{fixture, neardup_ok, path_str, query, summary};

/// id, simhash, input order, sketch bytes of every fingerprinted document.
async fn signatures(output: &Path) -> Vec<(String, u64, i64, Vec<u8>)> {
    let sql = "SELECT arrow_cast(id, 'Utf8'), simhash, input_order, sketch FROM signatures \
               WHERE simhash IS NOT NULL";
    let mut rows = Vec::new();
    for b in &query(output, sql).await {
        let ids = b.column(0).as_string::<i32>();
        let prints = b.column(1).as_primitive::<UInt64Type>();
        let orders = b.column(2).as_primitive::<Int64Type>();
        let sketches = b.column(3).as_fixed_size_binary();
        for i in 0..b.num_rows() {
            rows.push((
                ids.value(i).to_string(),
                prints.value(i),
                orders.value(i),
                sketches.value(i).to_vec(),
            ));
        }
    }
    rows.sort_by_key(|r| r.2);
    rows
}

/// (id_a, id_b) -> (distance, similarity) of an output's pairs.
async fn pairs(output: &Path) -> BTreeMap<(String, String), (u8, Option<f64>)> {
    let sql = "SELECT arrow_cast(id_a, 'Utf8'), arrow_cast(id_b, 'Utf8'), distance, similarity \
               FROM pairs";
    let mut pairs = BTreeMap::new();
    for b in &query(output, sql).await {
        let (a, bb) = (
            b.column(0).as_string::<i32>(),
            b.column(1).as_string::<i32>(),
        );
        let d = b.column(2).as_primitive::<UInt8Type>();
        let s = b.column(3).as_primitive::<Float64Type>();
        for i in 0..b.num_rows() {
            let similarity = (!s.is_null(i)).then(|| s.value(i));
            let key = (a.value(i).to_string(), bb.value(i).to_string());
            assert!(key.0 < key.1, "pairs are listed with id_a < id_b: {key:?}");
            assert!(pairs.insert(key, (d.value(i), similarity)).is_none());
        }
    }
    pairs
}

/// The estimated Jaccard similarity of two sketches: 128 bins of 16 little-endian bits, 0 an
/// empty bin; agreeing bins over bins not empty in both, less chance agreement of 16 bits.
fn oracle_similarity(a: &[u8], b: &[u8]) -> Option<f64> {
    let bins = |s: &[u8]| -> Vec<u16> {
        (0..s.len() / 2)
            .map(|i| u16::from(s[2 * i]) | (u16::from(s[2 * i + 1]) << 8))
            .collect()
    };
    let (a, b) = (bins(a), bins(b));
    assert_eq!((a.len(), b.len()), (128, 128));
    let used: Vec<(u16, u16)> = a
        .into_iter()
        .zip(b)
        .filter(|&(x, y)| x != 0 || y != 0)
        .collect();
    if used.is_empty() {
        return None;
    }
    let share = used.iter().filter(|(x, y)| x == y).count() as f64 / used.len() as f64;
    let chance = 1.0 / 65535.0;
    Some(((share - chance) / (1.0 - chance)).clamp(0.0, 1.0))
}

#[tokio::test]
async fn verified_pairs_are_the_candidates_whose_sketches_agree_enough() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("gen.parquet");
    let truth = dir.path().join("truth.parquet");
    neardup_ok(&[
        "generate",
        "--input",
        path_str(&fixture("sample.parquet")),
        "--output",
        path_str(&corpus),
        "--truth",
        path_str(&truth),
        "--sources",
        "20",
        "--collage-sources",
        "400",
        "--max-copies",
        "4",
    ]);
    let (k, threshold) = (8u32, 0.7);
    let (off, on) = (dir.path().join("off"), dir.path().join("on"));
    let run = |out: &Path, verify: &str| {
        neardup_ok(&[
            "run",
            "--input",
            path_str(&corpus),
            "--output",
            path_str(out),
            "--k",
            &k.to_string(),
            "--verify",
            verify,
            "--quiet",
        ])
    };
    run(&off, "off");
    run(&on, &threshold.to_string());

    let rows = signatures(&on).await;
    assert_eq!(
        rows,
        signatures(&off).await,
        "verification does not change signatures"
    );
    // A fingerprint's sketch is the smallest of its documents' (byte by byte).
    let mut sketch_of: BTreeMap<u64, &[u8]> = BTreeMap::new();
    for (_, print, _, sketch) in &rows {
        let smallest = sketch_of.entry(*print).or_insert(sketch.as_slice());
        *smallest = (*smallest).min(sketch.as_slice());
    }
    let mut every = BTreeMap::new();
    let mut verified = BTreeSet::new();
    for (i, (id_i, f_i, _, _)) in rows.iter().enumerate() {
        for (id_j, f_j, _, _) in &rows[i + 1..] {
            let d = (f_i ^ f_j).count_ones();
            if d > k {
                continue;
            }
            let key = (
                id_i.clone().min(id_j.clone()),
                id_i.clone().max(id_j.clone()),
            );
            // Documents of one fingerprint are duplicates without a check (no similarity); the
            // others show, and are kept by, their fingerprints' similarity.
            let similarity = if d == 0 {
                None
            } else {
                oracle_similarity(sketch_of[f_i], sketch_of[f_j])
            };
            every.insert(key.clone(), (d as u8, similarity));
            if d == 0 || similarity.is_some_and(|s| s >= threshold) {
                verified.insert(key);
            }
        }
    }
    assert!(
        every.len() > 200,
        "the corpus has candidates: {}",
        every.len()
    );
    assert!(
        !verified.is_empty() && verified.len() < every.len(),
        "the threshold keeps some candidates and drops others: {} of {}",
        verified.len(),
        every.len()
    );

    let unverified = pairs(&off).await;
    let listed: BTreeSet<_> = unverified.keys().cloned().collect();
    let expected: BTreeSet<_> = every.keys().cloned().collect();
    assert_eq!(listed, expected, "--verify off lists every pair within k");
    for (key, shown) in &unverified {
        assert_eq!(*shown, every[key], "{key:?}: distance and similarity");
    }
    let kept = pairs(&on).await;
    let listed: BTreeSet<_> = kept.keys().cloned().collect();
    assert_eq!(listed, verified, "verified pairs against the oracle");
    for (key, shown) in &kept {
        assert_eq!(*shown, every[key], "{key:?}: distance and similarity");
    }

    let (off, on) = (summary(&off), summary(&on));
    assert_eq!(on["parameters"]["min_similarity"], threshold);
    assert!(off["parameters"].get("min_similarity").is_none());
    assert_eq!(
        on["counts"]["candidate_pairs"],
        off["counts"]["fingerprint_pairs"]
    );
    assert!(on["counts"]["fingerprint_pairs"].as_u64() < on["counts"]["candidate_pairs"].as_u64());
}

/// An index built before documents kept a sketch: its index.json has no `verify` and its
/// documents no `sketch` column. A run that names neither `--k` nor `--verify` goes on at the
/// index's k, unverified, and reads the old documents; naming `--verify` is refused.
#[tokio::test]
async fn an_index_from_before_sketches_keeps_its_k_unverified() {
    let dir = tempfile::tempdir().unwrap();
    let sample = fixture("sample.parquet");
    let (first, second) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    let half = |path: &Path, filter: &str| {
        crate::common::make_parquet(
            path,
            &format!("SELECT * FROM '{}' WHERE {filter}", path_str(&sample)),
        )
    };
    half(&first, "id <= 10");
    half(&second, "id > 10");
    let index = dir.path().join("index");
    let run = |input: &Path, out: &str, extra: &[&str]| {
        let out = dir.path().join(out);
        let mut args = vec![
            "run",
            "--input",
            path_str(input),
            "--output",
            path_str(&out),
            "--index",
            path_str(&index),
            "--quiet",
        ];
        args.extend_from_slice(extra);
        crate::common::neardup(&args)
    };
    let made = run(
        &first,
        "out-a",
        &["--update-index", "--verify", "off", "--k", "3"],
    );
    assert!(made.status.success(), "{}", crate::common::stderr(&made));
    // Rewrite the batch's documents without their sketch, as an older neardup wrote them.
    let documents = index.join("batch=000001/documents");
    let old = dir.path().join("old-documents.parquet");
    crate::common::make_parquet(
        &old,
        &format!(
            "SELECT id, simhash, bucket1, bucket2, bucket3, bucket4, batch, input_order FROM '{}/'",
            path_str(&documents)
        ),
    );
    std::fs::remove_dir_all(&documents).unwrap();
    std::fs::create_dir(&documents).unwrap();
    std::fs::rename(&old, documents.join("part-0.parquet")).unwrap();
    let settings = std::fs::read_to_string(index.join("index.json")).unwrap();
    assert!(!settings.contains("verify"), "{settings}");

    let refused = run(&second, "out-refused", &["--verify", "0.75"]);
    assert_eq!(refused.status.code(), Some(2));
    let added = run(&second, "out-b", &["--update-index"]);
    assert!(added.status.success(), "{}", crate::common::stderr(&added));
    let summary = summary(&dir.path().join("out-b"));
    assert_eq!(summary["parameters"]["k"], 3);
    assert!(summary["parameters"].get("min_similarity").is_none());
    let batches = query(
        &dir.path().join("out-b"),
        "SELECT count(*) FROM groups WHERE id <= 10",
    )
    .await;
    let matched = batches[0].column(0).as_primitive::<Int64Type>().value(0);
    assert!(
        matched > 0,
        "the new batch is matched against the old documents"
    );
}
