//! `neardup eval`: how good are a run's groups against a gold clustering or labelled pairs, and
//! which k is best. The run's pairs carry their distance, so every k up to the run's is scored
//! from one matching: filter the pairs, re-cluster, compare.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Int64Type, UInt8Type, UInt64Type};
use datafusion::prelude::{CsvReadOptions, ParquetReadOptions, SessionContext};
use serde::Serialize;

use crate::cluster;
use crate::error::{Error, QueryContext, Result};
use crate::input::quote_ident;
use crate::job::query_batches;
use crate::output::SUMMARY_FILE;
use crate::query;
use crate::summary::Summary;

#[derive(Debug, Clone)]
pub struct EvalOptions {
    pub output: PathBuf,
    pub truth: Option<PathBuf>,
    pub truth_id_column: String,
    pub truth_cluster_column: String,
    pub labels: Option<PathBuf>,
    /// Inclusive range of k to score; `None` scores the run's own k.
    pub sweep: Option<(u32, u32)>,
    pub json: bool,
}

/// Pair-counting scores: every pair of documents is a positive (same cluster) or a negative.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairScores {
    pub true_positives: u64,
    pub false_positives: u64,
    pub false_negatives: u64,
    pub true_negatives: u64,
    /// `None` when nothing was predicted positive (precision is undefined).
    pub precision: Option<f64>,
    /// `None` when the truth has no positive.
    pub recall: Option<f64>,
    pub f1: Option<f64>,
}

impl PairScores {
    pub fn from_counts(tp: u64, fp: u64, fn_: u64, tn: u64) -> Self {
        let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
        let precision = ratio(tp, tp + fp);
        let recall = ratio(tp, tp + fn_);
        let f1 = match (precision, recall) {
            (Some(p), Some(r)) if p + r > 0.0 => Some(2.0 * p * r / (p + r)),
            (Some(_), Some(_)) => Some(0.0),
            _ => None,
        };
        Self {
            true_positives: tp,
            false_positives: fp,
            false_negatives: fn_,
            true_negatives: tn,
            precision,
            recall,
            f1,
        }
    }
}

fn pairs_of(n: u64) -> u64 {
    n * n.saturating_sub(1) / 2
}

/// Pair scores and the adjusted Rand index of a predicted clustering against the truth, both
/// given as one cluster label per item (same items, same order).
pub fn score_clustering(predicted: &[u64], truth: &[u64]) -> (PairScores, Option<f64>) {
    let mut cells: HashMap<(u64, u64), u64> = HashMap::new();
    let mut predicted_sizes: HashMap<u64, u64> = HashMap::new();
    let mut truth_sizes: HashMap<u64, u64> = HashMap::new();
    for (&p, &t) in predicted.iter().zip(truth) {
        *cells.entry((p, t)).or_default() += 1;
        *predicted_sizes.entry(p).or_default() += 1;
        *truth_sizes.entry(t).or_default() += 1;
    }
    let tp: u64 = cells.values().map(|&n| pairs_of(n)).sum();
    let predicted_pairs: u64 = predicted_sizes.values().map(|&n| pairs_of(n)).sum();
    let truth_pairs: u64 = truth_sizes.values().map(|&n| pairs_of(n)).sum();
    let all_pairs = pairs_of(predicted.len() as u64);
    let (fp, fn_) = (predicted_pairs - tp, truth_pairs - tp);
    let tn = all_pairs - tp - fp - fn_;
    let scores = PairScores::from_counts(tp, fp, fn_, tn);
    // Hubert and Arabie's adjusted Rand index, from the same pair counts.
    let ari = (all_pairs > 0).then(|| {
        let expected = predicted_pairs as f64 * truth_pairs as f64 / all_pairs as f64;
        let maximum = (predicted_pairs + truth_pairs) as f64 / 2.0;
        if maximum == expected {
            1.0
        } else {
            (tp as f64 - expected) / (maximum - expected)
        }
    });
    (scores, ari)
}

/// Connected components of the pairs within `k`, as one label per document index.
pub fn clusters_at(documents: usize, pairs: &[(usize, usize, u8)], k: u32) -> Vec<u64> {
    let edges = pairs
        .iter()
        .filter(|p| u32::from(p.2) <= k)
        .map(|&(a, b, _)| (a as u64, b as u64));
    let mut labels: Vec<u64> = (0..documents as u64).collect();
    for (node, component) in cluster::connected_components(edges) {
        labels[node as usize] = component;
    }
    labels
}

#[derive(Debug, Serialize)]
struct Row {
    k: u32,
    #[serde(flatten)]
    scores: PairScores,
    adjusted_rand_index: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Report {
    run_k: u32,
    documents: usize,
    scored_documents: usize,
    unknown_ids: Vec<String>,
    unknown_id_count: usize,
    rows: Vec<Row>,
    best_k_by_f1: Option<u32>,
    /// Labelled pairs only: Hamming distance -> (positives, negatives); key "none" when a
    /// document has no fingerprint.
    distance_histogram: Option<Vec<(String, u64, u64)>>,
    note: Option<String>,
}

// Every id is read as Utf8 (arrow_cast, not CAST AS VARCHAR, which may give Utf8View), so ids of
// any type compare by their text across the run, the truth and the labels.

/// The run's documents (index by id) with their fingerprints, and its pairs by index.
struct RunTables {
    index: HashMap<String, usize>,
    /// 64-bit fingerprints widened, or 128-bit ones: only distances between them are used.
    fingerprints: Vec<Option<u128>>,
    pairs: Vec<(usize, usize, u8)>,
}

async fn load_run(ctx: &SessionContext) -> Result<RunTables> {
    let mut index = HashMap::new();
    let mut fingerprints = Vec::new();
    for batch in query_batches(
        ctx,
        "SELECT arrow_cast(id, 'Utf8'), simhash FROM signatures",
    )
    .await?
    {
        let ids = batch.column(0).as_string::<i32>();
        let hashes: Vec<Option<u128>> = match batch.column(1).data_type() {
            DataType::FixedSizeBinary(16) => batch
                .column(1)
                .as_fixed_size_binary()
                .iter()
                .map(|f| f.and_then(crate::udf::wide_value))
                .collect(),
            _ => batch
                .column(1)
                .as_primitive::<UInt64Type>()
                .iter()
                .map(|f| f.map(u128::from))
                .collect(),
        };
        for (i, hash) in hashes.into_iter().enumerate() {
            index.insert(ids.value(i).to_string(), fingerprints.len());
            fingerprints.push(hash);
        }
    }
    let mut pairs = Vec::new();
    let sql = "SELECT arrow_cast(id_a, 'Utf8'), arrow_cast(id_b, 'Utf8'), distance FROM pairs";
    for batch in query_batches(ctx, sql).await? {
        let (a, b) = (
            batch.column(0).as_string::<i32>(),
            batch.column(1).as_string::<i32>(),
        );
        let d = batch.column(2).as_primitive::<UInt8Type>();
        for i in 0..batch.num_rows() {
            if let (Some(&x), Some(&y)) = (index.get(a.value(i)), index.get(b.value(i))) {
                pairs.push((x, y, d.value(i)));
            }
        }
    }
    Ok(RunTables {
        index,
        fingerprints,
        pairs,
    })
}

/// Registers a Parquet, CSV or TSV file (by extension) as `table`.
async fn register_file(ctx: &SessionContext, table: &str, path: &Path) -> Result<()> {
    let location = path.display().to_string();
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let dotted = format!(".{extension}");
    let what = || format!("reading {location}");
    match extension.as_str() {
        "tsv" | "csv" => {
            let delimiter = if extension == "tsv" { b'\t' } else { b',' };
            let options = CsvReadOptions::new()
                .has_header(true)
                .delimiter(delimiter)
                .file_extension(&dotted);
            ctx.register_csv(table, &location, options)
                .await
                .context(what)
        }
        _ => ctx
            .register_parquet(
                table,
                &location,
                ParquetReadOptions::default().file_extension(""),
            )
            .await
            .context(what),
    }
}

pub async fn eval(options: &EvalOptions) -> Result<String> {
    if options.truth.is_none() == options.labels.is_none() {
        return Err(Error::Usage(
            "give exactly one of --truth and --labels".into(),
        ));
    }
    let summary = Summary::read(&options.output.join(SUMMARY_FILE))?;
    let run_k = summary.parameters.k;
    let (low, high) = options.sweep.unwrap_or((run_k, run_k));
    if low > high {
        return Err(Error::Usage(format!("--sweep {low}..={high} is empty")));
    }
    let bits = summary.parameters.fingerprint_bits;
    let note = (high > run_k).then(|| {
        format!(
            "the run matched at k = {run_k}, so only k up to {run_k} can be scored from its pairs \
             (run again with a larger --k; {bits}-bit fingerprints support k up to {})",
            bits / 8
        )
    });
    let ks: Vec<u32> = (low..=high.min(run_k)).collect();

    let ctx = SessionContext::new();
    query::register_outputs(&ctx, &options.output).await?;
    let run = load_run(&ctx).await?;
    let mut report = Report {
        run_k,
        documents: run.fingerprints.len(),
        scored_documents: 0,
        unknown_ids: Vec::new(),
        unknown_id_count: 0,
        rows: Vec::new(),
        best_k_by_f1: None,
        distance_histogram: None,
        note,
    };
    let mut unknown = Vec::new();
    if let Some(truth) = &options.truth {
        register_file(&ctx, "truth", truth).await?;
        let sql = format!(
            "SELECT arrow_cast({}, 'Utf8'), arrow_cast({}, 'Utf8') FROM truth",
            quote_ident(&options.truth_id_column),
            quote_ident(&options.truth_cluster_column)
        );
        let mut members = Vec::new();
        let mut cluster_numbers: HashMap<String, u64> = HashMap::new();
        for batch in query_batches(&ctx, &sql).await? {
            let (ids, clusters) = (
                batch.column(0).as_string::<i32>(),
                batch.column(1).as_string::<i32>(),
            );
            for i in 0..batch.num_rows() {
                let id = ids.value(i);
                match run.index.get(id) {
                    Some(&doc) => {
                        let next = cluster_numbers.len() as u64;
                        // A NULL cluster is a singleton, not one big cluster of NULLs.
                        let key = if clusters.is_null(i) {
                            format!("\u{0}null-{id}")
                        } else {
                            clusters.value(i).to_string()
                        };
                        let cluster = *cluster_numbers.entry(key).or_insert(next);
                        members.push((doc, cluster));
                    }
                    None => unknown.push(id.to_string()),
                }
            }
        }
        report.scored_documents = members.len();
        let truth_labels: Vec<u64> = members.iter().map(|m| m.1).collect();
        for &k in &ks {
            let clusters = clusters_at(run.fingerprints.len(), &run.pairs, k);
            let predicted: Vec<u64> = members.iter().map(|m| clusters[m.0]).collect();
            let (scores, ari) = score_clustering(&predicted, &truth_labels);
            report.rows.push(Row {
                k,
                scores,
                adjusted_rand_index: ari,
            });
        }
    } else if let Some(labels) = &options.labels {
        register_file(&ctx, "labels", labels).await?;
        // Without a `label` column every listed pair is a positive (silver pairs, say).
        let has_label = ctx
            .table("labels")
            .await
            .context(|| "reading the labels".into())?
            .schema()
            .has_column_with_unqualified_name("label");
        let label = if has_label {
            "CAST(label AS BIGINT)"
        } else {
            "1"
        };
        let sql = format!(
            "SELECT arrow_cast(id_a, 'Utf8'), arrow_cast(id_b, 'Utf8'), {label} FROM labels"
        );
        let sql = sql.as_str();
        let mut labelled = Vec::new();
        for batch in query_batches(&ctx, sql).await? {
            let (a, b) = (
                batch.column(0).as_string::<i32>(),
                batch.column(1).as_string::<i32>(),
            );
            let label = batch.column(2).as_primitive::<Int64Type>();
            for i in 0..batch.num_rows() {
                match (run.index.get(a.value(i)), run.index.get(b.value(i))) {
                    (Some(&x), Some(&y)) => labelled.push((x, y, label.value(i) > 0)),
                    (x, _) => {
                        unknown.push(if x.is_none() { a.value(i) } else { b.value(i) }.to_string())
                    }
                }
            }
        }
        report.scored_documents = labelled.len();
        for &k in &ks {
            let clusters = clusters_at(run.fingerprints.len(), &run.pairs, k);
            let (mut tp, mut fp, mut fn_, mut tn) = (0, 0, 0, 0);
            for &(x, y, positive) in &labelled {
                match (clusters[x] == clusters[y], positive) {
                    (true, true) => tp += 1,
                    (true, false) => fp += 1,
                    (false, true) => fn_ += 1,
                    (false, false) => tn += 1,
                }
            }
            let scores = PairScores::from_counts(tp, fp, fn_, tn);
            report.rows.push(Row {
                k,
                scores,
                adjusted_rand_index: None,
            });
        }
        let mut histogram: std::collections::BTreeMap<Option<u32>, (u64, u64)> = Default::default();
        for &(x, y, positive) in &labelled {
            let distance = run.fingerprints[x]
                .zip(run.fingerprints[y])
                .map(|(a, b)| (a ^ b).count_ones());
            let cell = histogram.entry(distance).or_default();
            if positive { cell.0 += 1 } else { cell.1 += 1 }
        }
        report.distance_histogram = Some(
            histogram
                .into_iter()
                .map(|(d, (p, n))| (d.map_or("none".to_string(), |d| d.to_string()), p, n))
                .collect(),
        );
    }
    report.unknown_id_count = unknown.len();
    unknown.truncate(10);
    report.unknown_ids = unknown;
    report.best_k_by_f1 = report
        .rows
        .iter()
        .filter_map(|r| r.scores.f1.map(|f| (r.k, f)))
        .fold(None, |best: Option<(u32, f64)>, (k, f)| match best {
            Some((_, bf)) if bf >= f => best,
            _ => Some((k, f)),
        })
        .map(|(k, _)| k);
    if options.json {
        return serde_json::to_string_pretty(&report)
            .map_err(|e| Error::Internal(format!("eval report does not serialise: {e}")));
    }
    Ok(render_table(&report))
}

fn render_table(report: &Report) -> String {
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
    let mut out = format!(
        "run k = {}; {} documents in the run; {} scored\n\n| k | TP | FP | FN | TN | precision | recall | F1 | ARI |\n|---|---|---|---|---|---|---|---|---|\n",
        report.run_k, report.documents, report.scored_documents
    );
    for row in &report.rows {
        let s = &row.scores;
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.k,
            s.true_positives,
            s.false_positives,
            s.false_negatives,
            s.true_negatives,
            show(s.precision),
            show(s.recall),
            show(s.f1),
            show(row.adjusted_rand_index)
        );
    }
    if let Some(k) = report.best_k_by_f1 {
        out += &format!("\nbest k by F1: {k}\n");
    }
    if let Some(histogram) = &report.distance_histogram {
        out += "\n| Hamming distance | labelled positive | labelled negative |\n|---|---|---|\n";
        for (d, p, n) in histogram {
            out += &format!("| {d} | {p} | {n} |\n");
        }
    }
    if report.unknown_id_count > 0 {
        out += &format!(
            "\n{} ids in the truth or labels are not in the run (not scored), e.g. {}\n",
            report.unknown_id_count,
            report.unknown_ids.join(", ")
        );
    }
    if let Some(note) = &report.note {
        out += &format!("\nnote: {note}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn perfect_clustering() {
        let (s, ari) = score_clustering(&[7, 7, 8, 9, 9, 9], &[1, 1, 2, 3, 3, 3]);
        assert_eq!(
            (s.true_positives, s.false_positives, s.false_negatives),
            (4, 0, 0)
        );
        assert_eq!(s.true_negatives, 15 - 4);
        assert!(close(s.f1, 1.0) && close(ari, 1.0));
    }

    #[test]
    fn all_singletons_predicted() {
        let (s, ari) = score_clustering(&[1, 2, 3, 4], &[1, 1, 2, 2]);
        assert_eq!(
            (
                s.true_positives,
                s.false_positives,
                s.false_negatives,
                s.true_negatives
            ),
            (0, 0, 2, 4)
        );
        assert_eq!(s.precision, None);
        assert!(close(s.recall, 0.0));
        assert!(close(ari, 0.0));
    }

    #[test]
    fn one_giant_group() {
        // Truth {a,b},{c},{d}: 1 positive of 6 pairs; predicting one group gets it and 5 FPs.
        let (s, ari) = score_clustering(&[0, 0, 0, 0], &[1, 1, 2, 3]);
        assert_eq!(
            (s.true_positives, s.false_positives, s.false_negatives),
            (1, 5, 0)
        );
        assert!(close(s.precision, 1.0 / 6.0) && close(s.recall, 1.0));
        assert!(close(s.f1, 2.0 * (1.0 / 6.0) / (1.0 / 6.0 + 1.0)));
        assert!(close(ari, 0.0));
    }

    #[test]
    fn ari_hand_computed() {
        // Contingency [[2,1],[0,2]]: sum C(n_ij,2) = 2, a = (3,2) -> 4, b = (2,3) -> 4, C(5,2) = 10.
        // ARI = (2 - 1.6) / (4 - 1.6) = 1/6.
        let (s, ari) = score_clustering(&[1, 1, 1, 2, 2], &[1, 1, 2, 2, 2]);
        assert_eq!(s.true_positives, 2);
        assert!(close(ari, 1.0 / 6.0), "{ari:?}");
    }

    #[test]
    fn clusters_follow_the_pairs_within_k() {
        let pairs = [(0, 1, 1u8), (1, 2, 3), (3, 4, 0)];
        assert_eq!(clusters_at(6, &pairs, 0), [0, 1, 2, 3, 3, 5]);
        assert_eq!(clusters_at(6, &pairs, 1), [0, 0, 2, 3, 3, 5]);
        assert_eq!(clusters_at(6, &pairs, 3), [0, 0, 0, 3, 3, 5]);
    }
}
