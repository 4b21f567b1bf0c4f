//! `neardup eval`: how good are a run's groups against a gold clustering or labelled pairs, and
//! which k is best. The run's pairs carry their distance, so every k up to the run's is scored
//! from one matching: filter the pairs, re-cluster, compare.
//!
//! Every id of a truth and every pair of a labels file counts once: repeats are refused (an id in
//! two clusters) or dropped with a warning (a pair listed again with the same label). A pair
//! listed with two labels is ignored and a row pairing an id with itself dropped, each with a
//! warning; only a label other than 1, 0 and -1 makes a labels file refused. Labelled pairs
//! follow drift_dev's rule: -1 is ignored both ways, and with `Unlisted::Negative` every pair the
//! file does not list is a negative, counted from the group sizes without listing them.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Int64Type, UInt8Type, UInt64Type};
use datafusion::prelude::{CsvReadOptions, ParquetReadOptions, SessionContext};
use serde::Serialize;

use crate::commands::query;
use crate::engine::sql::query_batches;
use crate::engine::sql::quote_ident;
use crate::error::{Error, QueryContext, Result};
use crate::job::clustering::union_find;
use crate::storage::Place;

#[derive(Debug, Clone)]
pub struct EvalOptions {
    pub output: PathBuf,
    pub truth: Option<PathBuf>,
    pub truth_id_column: String,
    pub truth_cluster_column: String,
    pub labels: Option<PathBuf>,
    /// With `labels`: whether a pair the file does not list is ignored or a negative.
    pub unlisted: Unlisted,
    /// Inclusive range of k to score; `None` scores the run's own k.
    pub sweep: Option<(u32, u32)>,
    pub json: bool,
}

/// What a pair of the run's documents that the labels file does not list counts as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unlisted {
    /// Nothing: only the listed pairs are scored (a predicted pair that is not listed is
    /// neither a true nor a false positive).
    #[default]
    Ignore,
    /// A negative: a predicted pair that is not listed is a false positive, and every pair of
    /// the run's documents counts (negatives implicit, as in drift_dev's pairs.parquet).
    Negative,
}

/// The label of one listed pair: 1, 0 or -1 in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// 1 (or true): a near-duplicate.
    Duplicate,
    /// 0 (or false): not a near-duplicate.
    Distinct,
    /// -1: ambiguous, scored neither way (a predicted pair is not a false positive, a missed
    /// one is not a false negative).
    Ignored,
}

impl Label {
    const ALL: [Label; 3] = [Label::Duplicate, Label::Distinct, Label::Ignored];

    pub fn from_value(value: i64) -> Option<Self> {
        match value {
            1 => Some(Label::Duplicate),
            0 => Some(Label::Distinct),
            -1 => Some(Label::Ignored),
            _ => None,
        }
    }

    pub fn value(self) -> i64 {
        match self {
            Label::Duplicate => 1,
            Label::Distinct => 0,
            Label::Ignored => -1,
        }
    }

    fn bit(self) -> u8 {
        match self {
            Label::Duplicate => 1,
            Label::Distinct => 2,
            Label::Ignored => 4,
        }
    }
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
    for (node, component) in union_find::connected_components(edges) {
        labels[node as usize] = component;
    }
    labels
}

/// Pair scores of labelled pairs against a clustering (one label per document), and how many
/// predicted pairs are labelled -1 (ignored). `pairs` are document indexes, each pair once and
/// never a document with itself (`PairBook` makes them so).
///
/// With `Unlisted::Ignore` only the listed pairs count: TP and FN are the predicted and missed
/// label-1 pairs, FP and TN the predicted and separated label-0 ones. With `Unlisted::Negative`
/// every pair of the documents counts and an unlisted one is a negative. Predicted pairs are
/// counted from the group sizes (a group of m has m(m-1)/2), never listed: FP = predicted -
/// TP - predicted and ignored, and TN = all pairs - TP - FP - FN - ignored.
pub fn score_labelled(
    clusters: &[u64],
    pairs: &[(usize, usize, Label)],
    unlisted: Unlisted,
) -> (PairScores, u64) {
    let (mut tp, mut fp, mut fn_, mut tn) = (0u64, 0u64, 0u64, 0u64);
    let (mut predicted_ignored, mut ignored) = (0u64, 0u64);
    for &(x, y, label) in pairs {
        let predicted = clusters[x] == clusters[y];
        match (label, predicted) {
            (Label::Duplicate, true) => tp += 1,
            (Label::Duplicate, false) => fn_ += 1,
            (Label::Distinct, true) => fp += 1,
            (Label::Distinct, false) => tn += 1,
            (Label::Ignored, true) => {
                ignored += 1;
                predicted_ignored += 1;
            }
            (Label::Ignored, false) => ignored += 1,
        }
    }
    if unlisted == Unlisted::Negative {
        let mut sizes: HashMap<u64, u64> = HashMap::new();
        for &c in clusters {
            *sizes.entry(c).or_default() += 1;
        }
        let predicted: u64 = sizes.values().map(|&m| pairs_of(m)).sum();
        // Listed pairs are distinct, so the predicted ones among them are at most all predicted.
        debug_assert!(tp + fp + predicted_ignored <= predicted);
        fp = predicted.saturating_sub(tp + predicted_ignored);
        tn = pairs_of(clusters.len() as u64).saturating_sub(tp + fp + fn_ + ignored);
    }
    (PairScores::from_counts(tp, fp, fn_, tn), predicted_ignored)
}

/// Ids not in the run, each once, with the first few in the order read.
#[derive(Debug, Default)]
struct UnknownIds {
    seen: HashSet<String>,
    examples: Vec<String>,
}

impl UnknownIds {
    fn add(&mut self, id: &str) {
        if !self.seen.contains(id) {
            self.seen.insert(id.to_string());
            if self.examples.len() < 10 {
                self.examples.push(id.to_string());
            }
        }
    }
}

/// How many times each id of a truth file is listed: a counter per run document, a map for
/// the ids the run does not have (few, usually).
#[derive(Debug)]
pub struct IdTally {
    in_run: Vec<u32>,
    elsewhere: HashMap<String, u32>,
    /// Ids listed more than once, in the order of their second listing.
    repeated: Vec<(String, Option<usize>)>,
}

impl IdTally {
    pub fn new(documents: usize) -> Self {
        Self {
            in_run: vec![0; documents],
            elsewhere: HashMap::new(),
            repeated: Vec::new(),
        }
    }

    /// Counts `id` (run document `doc`, if the run has it); true the first time it is seen.
    pub fn add(&mut self, id: &str, doc: Option<usize>) -> bool {
        let count = match doc {
            Some(doc) => &mut self.in_run[doc],
            None => self.elsewhere.entry(id.to_string()).or_default(),
        };
        *count += 1;
        if *count == 2 {
            self.repeated.push((id.to_string(), doc));
        }
        *count == 1
    }

    /// The ids listed more than once and how many times, in the order they were repeated.
    pub fn repeated(&self) -> Vec<(&str, u32)> {
        self.repeated
            .iter()
            .map(|(id, doc)| {
                let count = match doc {
                    Some(doc) => self.in_run[*doc],
                    None => self.elsewhere[id],
                };
                (id.as_str(), count)
            })
            .collect()
    }
}

/// A pair as the labels file names it: by run document (smaller index first), or by its ids
/// (smaller first) when the run lacks one of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PairKey {
    Run(usize, usize),
    Other(String, String),
}

#[derive(Debug, Default)]
struct Seen {
    /// `Label::bit`s of every label the pair was listed with.
    labels: u8,
    rows: u32,
}

fn labels_of(bits: u8) -> Vec<Label> {
    Label::ALL
        .into_iter()
        .filter(|l| bits & l.bit() != 0)
        .collect()
}

/// How many examples an error or a warning about rows shows.
const EXAMPLES: usize = 5;

/// The rows of a labels file, checked: (a, b) and (b, a) are one pair, a pair listed again with
/// the same label is kept once, a pair listed with two labels is kept as ignored (scored neither
/// way), a row pairing an id with itself is dropped, and a label other than 1, 0 and -1 (or
/// NULL) makes the file refused (`finish`).
#[derive(Debug, Default)]
pub struct PairBook {
    seen: HashMap<PairKey, Seen>,
    /// Pairs listed with different labels, in the order noticed, as shown in warnings.
    conflicts: Vec<(PairKey, String)>,
    self_pairs: Vec<String>,
    self_pair_rows: u64,
    bad_labels: Vec<String>,
    bad_label_count: u64,
    unknown: UnknownIds,
}

/// A labels file's pairs once checked: each pair once.
#[derive(Debug)]
pub struct LabelledPairs {
    /// Pairs of run documents (smaller index first), sorted. A pair listed with different
    /// labels is here as `Label::Ignored`: scored neither way, like a -1.
    pub pairs: Vec<(usize, usize, Label)>,
    /// Pairs listed more than once with one label, and the rows dropped as repeats.
    pub repeated_pairs: u64,
    pub dropped_rows: u64,
    /// Rows that pair an id with itself, all dropped.
    pub self_pair_rows: u64,
    self_pair_examples: Vec<String>,
    /// Pairs listed with different labels (in the whole file, and of two run documents), all
    /// ignored.
    pub contradicting_pairs: u64,
    pub contradicting_in_run: u64,
    contradicting_examples: Vec<String>,
    unknown: UnknownIds,
}

impl PairBook {
    /// One row: ids `a` and `b`, the label's value (`None`: NULL), the run's documents by id.
    pub fn add(&mut self, a: &str, b: &str, label: Option<i64>, index: &HashMap<String, usize>) {
        let shown = || format!("({a}, {b})");
        // A bad label is a malformed file whatever the ids: checked first.
        let Some(label) = label.and_then(Label::from_value) else {
            let value = label.map_or("NULL".to_string(), |v| v.to_string());
            self.refuse(a, b, &value);
            return;
        };
        if a == b {
            self.self_pair_rows += 1;
            let shown = shown();
            if self.self_pairs.len() < EXAMPLES && !self.self_pairs.contains(&shown) {
                self.self_pairs.push(shown);
            }
            return;
        }
        let key = match (index.get(a), index.get(b)) {
            (Some(&x), Some(&y)) => PairKey::Run(x.min(y), x.max(y)),
            (x, y) => {
                for (id, found) in [(a, x), (b, y)] {
                    if found.is_none() {
                        self.unknown.add(id);
                    }
                }
                let (low, high) = if a < b { (a, b) } else { (b, a) };
                PairKey::Other(low.to_string(), high.to_string())
            }
        };
        match self.seen.entry(key) {
            Entry::Vacant(entry) => {
                entry.insert(Seen {
                    labels: label.bit(),
                    rows: 1,
                });
            }
            Entry::Occupied(mut entry) => {
                let seen = entry.get_mut();
                seen.rows += 1;
                let agreed = seen.labels.count_ones() == 1;
                seen.labels |= label.bit();
                if agreed && seen.labels.count_ones() > 1 {
                    let key = entry.key().clone();
                    self.conflicts.push((key, shown()));
                }
            }
        }
    }

    /// One row whose label, `value` as written, is not 1, 0 or -1: the file is refused.
    pub fn refuse(&mut self, a: &str, b: &str, value: &str) {
        self.bad_label_count += 1;
        if self.bad_labels.len() < EXAMPLES {
            self.bad_labels.push(format!("{value} for ({a}, {b})"));
        }
    }

    /// The checked pairs, or an error naming `file` and the first few rows with a label other
    /// than 1, 0 and -1. Self pairs and contradicting pairs are not errors: `LabelledPairs::
    /// warnings` says what became of them.
    pub fn finish(self, file: &Path) -> Result<LabelledPairs> {
        if self.bad_label_count > 0 {
            return Err(Error::Input(format!(
                "labels {}: {} rows have a label other than 1 (duplicate), 0 (not) or -1 \
                 (ignored), e.g. {}; give each pair one of those labels",
                file.display(),
                self.bad_label_count,
                self.bad_labels.join(", ")
            )));
        }
        let contradicting_examples: Vec<String> = self
            .conflicts
            .iter()
            .take(EXAMPLES)
            .map(|(key, shown)| {
                let seen = &self.seen[key];
                let labels: Vec<String> = labels_of(seen.labels)
                    .iter()
                    .map(|l| l.value().to_string())
                    .collect();
                format!(
                    "{shown} labelled {} ({} rows)",
                    labels.join(" and "),
                    seen.rows
                )
            })
            .collect();
        let (mut repeated_pairs, mut dropped_rows, mut contradicting_in_run) = (0, 0, 0);
        let mut pairs = Vec::new();
        for (key, seen) in self.seen {
            let labels = labels_of(seen.labels);
            // A pair with two labels: all its rows are ignored, none counts as a repeat.
            let label = if labels.len() > 1 {
                if let PairKey::Run(..) = key {
                    contradicting_in_run += 1;
                }
                Label::Ignored
            } else {
                if seen.rows > 1 {
                    repeated_pairs += 1;
                    dropped_rows += u64::from(seen.rows - 1);
                }
                labels[0]
            };
            if let PairKey::Run(x, y) = key {
                pairs.push((x, y, label));
            }
        }
        pairs.sort_unstable_by_key(|p| (p.0, p.1));
        Ok(LabelledPairs {
            pairs,
            repeated_pairs,
            dropped_rows,
            self_pair_rows: self.self_pair_rows,
            self_pair_examples: self.self_pairs,
            contradicting_pairs: self.conflicts.len() as u64,
            contradicting_in_run,
            contradicting_examples,
            unknown: self.unknown,
        })
    }
}

impl LabelledPairs {
    /// What was dropped or ignored, one line each (without the `neardup: warning: ` prefix),
    /// naming `file`: rows pairing an id with itself, pairs with contradicting labels, repeats.
    pub fn warnings(&self, file: &Path) -> Vec<String> {
        let file = file.display();
        let mut warnings = Vec::new();
        if self.self_pair_rows > 0 {
            warnings.push(format!(
                "labels {file}: {} rows pair a document with itself (e.g. {}); they say nothing \
                 about two documents and are not scored",
                self.self_pair_rows,
                self.self_pair_examples.join(", ")
            ));
        }
        if self.contradicting_pairs > 0 {
            warnings.push(format!(
                "labels {file}: {} pairs are listed with different labels ((a, b) and (b, a) are \
                 the same pair), e.g. {}; they are not scored (ignored both ways, like label -1)",
                self.contradicting_pairs,
                self.contradicting_examples.join(", ")
            ));
        }
        if self.dropped_rows > 0 {
            warnings.push(format!(
                "labels {file}: {} pairs are listed more than once with the same label ((a, b) \
                 and (b, a) are the same pair); dropped the {} repeated rows, so each pair \
                 counts once",
                self.repeated_pairs, self.dropped_rows
            ));
        }
        warnings
    }
}

#[derive(Debug, Serialize)]
struct Row {
    k: u32,
    #[serde(flatten)]
    scores: PairScores,
    adjusted_rand_index: Option<f64>,
    /// Labelled pairs only: predicted pairs labelled -1 or listed with contradicting labels,
    /// counted neither as TP nor as FP.
    predicted_ignored: Option<u64>,
}

#[derive(Debug, Serialize)]
struct Report {
    run_k: u32,
    documents: usize,
    /// Truth: its ids found in the run. Labelled pairs: the run's documents in the scored
    /// pairs (label 1 or 0), or every document of the run with `--unlisted negative`.
    scored_documents: usize,
    /// Labelled pairs only: how a pair the file does not list was counted.
    unlisted: Option<Unlisted>,
    /// Labelled pairs only: listed pairs of the run's documents labelled 1 or 0, each once.
    scored_pairs: Option<u64>,
    /// Labelled pairs only: listed pairs of the run's documents labelled -1.
    ignored_pairs: Option<u64>,
    /// Labelled pairs only: rows dropped because they list a pair again with the same label.
    repeated_pairs_dropped: Option<u64>,
    /// Labelled pairs only: rows dropped because they pair an id with itself.
    self_pairs_dropped: Option<u64>,
    /// Labelled pairs only: pairs of the file listed with different labels, ignored both ways
    /// (between the run's documents or not, as the warning counts them).
    contradicting_pairs_ignored: Option<u64>,
    /// Those of them between two of the run's documents (in the table's first line).
    #[serde(skip)]
    contradicting_in_run: u64,
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

/// A table of the output holds a column of another type than a run writes (the folder was
/// edited, or written by something else).
fn not_a_runs_column(table: &str, column: &str, found: &DataType, written: &str) -> Error {
    Error::Input(format!(
        "{table}.{column} is {found}, where a neardup run writes {written}: this output's tables \
         were changed after the run; run it again"
    ))
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
            other => batch
                .column(1)
                .as_primitive_opt::<UInt64Type>()
                .ok_or_else(|| not_a_runs_column("signatures", "simhash", other, "UInt64"))?
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
        let d = batch
            .column(2)
            .as_primitive_opt::<UInt8Type>()
            .ok_or_else(|| {
                not_a_runs_column("pairs", "distance", batch.column(2).data_type(), "UInt8")
            })?;
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

/// Refuses a truth or labels file without the columns it is read by, naming the file, the
/// column, the flag that names another, and the columns it has.
async fn require_columns(
    ctx: &SessionContext,
    table: &str,
    path: &Path,
    columns: &[(&str, &str)],
) -> Result<()> {
    let frame = ctx
        .table(table)
        .await
        .context(|| format!("reading {}", path.display()))?;
    let schema = frame.schema();
    for (column, flag) in columns {
        if !schema.has_column_with_unqualified_name(column) {
            let have: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
            return Err(Error::Input(format!(
                "{table} {}: no column '{}' ({flag}); its columns are: {}",
                path.display(),
                crate::error::echo(column),
                crate::error::echo(&have.join(", "))
            )));
        }
    }
    Ok(())
}

pub async fn eval(options: &EvalOptions) -> Result<String> {
    if options.truth.is_none() == options.labels.is_none() {
        return Err(Error::Usage(
            "give exactly one of --truth and --labels".into(),
        ));
    }
    if options.truth.is_some() && options.unlisted != Unlisted::Ignore {
        return Err(Error::Usage(
            "--unlisted is for --labels: a truth scores every pair of its documents".into(),
        ));
    }
    // DataFusion's own message for a missing file suggests declaring a schema.
    for (role, path) in [("--truth", &options.truth), ("--labels", &options.labels)] {
        if let Some(path) = path
            && let Ok(Place::Local(file)) = Place::parse(&path.to_string_lossy(), role)
            && !crate::engine::staging::has_glob_characters(&file)
            && !file.exists()
        {
            return Err(Error::Input(format!(
                "{role} {}: no such file",
                path.display()
            )));
        }
    }
    let summary = query::output_summary(&options.output).await?;
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

    let ctx = crate::engine::session::session_context()?;
    query::register_outputs(&ctx, &options.output).await?;
    let run = load_run(&ctx).await?;
    let mut report = Report {
        run_k,
        documents: run.fingerprints.len(),
        scored_documents: 0,
        unlisted: None,
        scored_pairs: None,
        ignored_pairs: None,
        repeated_pairs_dropped: None,
        self_pairs_dropped: None,
        contradicting_pairs_ignored: None,
        contradicting_in_run: 0,
        unknown_ids: Vec::new(),
        unknown_id_count: 0,
        rows: Vec::new(),
        best_k_by_f1: None,
        distance_histogram: None,
        note,
    };
    let unknown = match (&options.truth, &options.labels) {
        (Some(truth), _) => score_truth(&ctx, &run, options, truth, &ks, &mut report).await?,
        (None, Some(labels)) => score_labels(&ctx, &run, options, labels, &ks, &mut report).await?,
        (None, None) => UnknownIds::default(),
    };
    report.unknown_id_count = unknown.seen.len();
    report.unknown_ids = unknown.examples;
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
            .map_err(|e| Error::json(Path::new("<standard output>"), e));
    }
    Ok(render_table(&report))
}

/// Scores the run's groups at each k against a gold clustering (`--truth`); returns the ids the
/// run does not have.
async fn score_truth(
    ctx: &SessionContext,
    run: &RunTables,
    options: &EvalOptions,
    truth: &Path,
    ks: &[u32],
    report: &mut Report,
) -> Result<UnknownIds> {
    let mut unknown = UnknownIds::default();
    register_file(ctx, "truth", truth).await?;
    require_columns(
        ctx,
        "truth",
        truth,
        &[
            (
                options.truth_id_column.as_str(),
                "--truth-id-column names another",
            ),
            (
                options.truth_cluster_column.as_str(),
                "--truth-cluster-column names another",
            ),
        ],
    )
    .await?;
    let sql = format!(
        "SELECT arrow_cast({}, 'Utf8'), arrow_cast({}, 'Utf8') FROM truth",
        quote_ident(&options.truth_id_column),
        quote_ident(&options.truth_cluster_column)
    );
    let mut members = Vec::new();
    let mut cluster_numbers: HashMap<String, u64> = HashMap::new();
    let mut tally = IdTally::new(run.fingerprints.len());
    for batch in query_batches(ctx, &sql).await? {
        let (ids, clusters) = (
            batch.column(0).as_string::<i32>(),
            batch.column(1).as_string::<i32>(),
        );
        for i in 0..batch.num_rows() {
            let id = ids.value(i);
            let doc = run.index.get(id).copied();
            // A repeated id is refused below: it would be scored twice, or be in two clusters.
            if !tally.add(id, doc) {
                continue;
            }
            match doc {
                Some(doc) => {
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
                None => unknown.add(id),
            }
        }
    }
    let repeated = tally.repeated();
    if !repeated.is_empty() {
        let examples: Vec<String> = repeated
            .iter()
            .take(EXAMPLES)
            .map(|(id, n)| format!("{id} ({n} times)"))
            .collect();
        return Err(Error::Input(format!(
            "truth {}: {} ids are listed more than once, e.g. {}; an id belongs to one \
             cluster, so list each id once",
            truth.display(),
            repeated.len(),
            examples.join(", ")
        )));
    }
    report.scored_documents = members.len();
    let truth_labels: Vec<u64> = members.iter().map(|m| m.1).collect();
    for &k in ks {
        let clusters = clusters_at(run.fingerprints.len(), &run.pairs, k);
        let predicted: Vec<u64> = members.iter().map(|m| clusters[m.0]).collect();
        let (scores, ari) = score_clustering(&predicted, &truth_labels);
        report.rows.push(Row {
            k,
            scores,
            adjusted_rand_index: ari,
            predicted_ignored: None,
        });
    }
    Ok(unknown)
}

/// Scores the run's groups at each k against labelled pairs (`--labels`), with the distance
/// histogram of the labelled pairs; returns the ids the run does not have.
async fn score_labels(
    ctx: &SessionContext,
    run: &RunTables,
    options: &EvalOptions,
    labels: &Path,
    ks: &[u32],
    report: &mut Report,
) -> Result<UnknownIds> {
    let labelled = read_labels(ctx, run, labels).await?;
    for warning in labelled.warnings(labels) {
        crate::to_stderr!("neardup: warning: {warning}");
    }
    fill_label_counts(report, run, &labelled, options.unlisted);
    for &k in ks {
        let clusters = clusters_at(run.fingerprints.len(), &run.pairs, k);
        let (scores, predicted_ignored) =
            score_labelled(&clusters, &labelled.pairs, options.unlisted);
        report.rows.push(Row {
            k,
            scores,
            adjusted_rand_index: None,
            predicted_ignored: Some(predicted_ignored),
        });
    }
    report.distance_histogram = Some(distance_histogram(run, &labelled.pairs));
    Ok(labelled.unknown)
}

/// Reads the labels file as `labels` and checks its pairs (without a `label` column every
/// listed pair is a positive).
async fn read_labels(
    ctx: &SessionContext,
    run: &RunTables,
    labels: &Path,
) -> Result<LabelledPairs> {
    register_file(ctx, "labels", labels).await?;
    require_columns(
        ctx,
        "labels",
        labels,
        &[
            ("id_a", "a labels file has id_a, id_b and label"),
            ("id_b", "a labels file has id_a, id_b and label"),
        ],
    )
    .await?;
    // Without a `label` column every listed pair is a positive (silver pairs, say).
    let has_label = ctx
        .table("labels")
        .await
        .context(|| "reading the labels".into())?
        .schema()
        .has_column_with_unqualified_name("label");
    // The label as a whole number, NULL where it is not one (0.5 would otherwise cast to 0),
    // and as written, to name such rows.
    let (label, written) = if has_label {
        (
            "CASE WHEN CAST(label AS DOUBLE) = CAST(CAST(label AS BIGINT) AS DOUBLE) \
             THEN CAST(label AS BIGINT) END",
            "arrow_cast(label, 'Utf8')",
        )
    } else {
        ("1", "'1'")
    };
    let sql = format!(
        "SELECT arrow_cast(id_a, 'Utf8'), arrow_cast(id_b, 'Utf8'), {label}, {written} FROM labels"
    );
    let mut book = PairBook::default();
    for batch in query_batches(ctx, &sql).await? {
        let (a, b) = (
            batch.column(0).as_string::<i32>(),
            batch.column(1).as_string::<i32>(),
        );
        let label = batch.column(2).as_primitive::<Int64Type>();
        let written = batch.column(3).as_string::<i32>();
        for i in 0..batch.num_rows() {
            if label.is_null(i) && !written.is_null(i) {
                book.refuse(a.value(i), b.value(i), written.value(i));
                continue;
            }
            let value = (!label.is_null(i)).then(|| label.value(i));
            book.add(a.value(i), b.value(i), value, &run.index);
        }
    }
    book.finish(labels)
}

/// The report's counts of the labelled pairs and of the documents they score.
fn fill_label_counts(
    report: &mut Report,
    run: &RunTables,
    labelled: &LabelledPairs,
    unlisted: Unlisted,
) {
    let pairs = &labelled.pairs;
    // Ignored: labelled -1, or listed with contradicting labels (counted apart).
    let ignored = pairs.iter().filter(|p| p.2 == Label::Ignored).count() as u64;
    report.unlisted = Some(unlisted);
    report.scored_pairs = Some(pairs.len() as u64 - ignored);
    report.ignored_pairs = Some(ignored - labelled.contradicting_in_run);
    report.repeated_pairs_dropped = Some(labelled.dropped_rows);
    report.self_pairs_dropped = Some(labelled.self_pair_rows);
    report.contradicting_pairs_ignored = Some(labelled.contradicting_pairs);
    report.contradicting_in_run = labelled.contradicting_in_run;
    report.scored_documents = match unlisted {
        Unlisted::Negative => run.fingerprints.len(),
        Unlisted::Ignore => pairs
            .iter()
            .filter(|p| p.2 != Label::Ignored)
            .flat_map(|p| [p.0, p.1])
            .collect::<HashSet<usize>>()
            .len(),
    };
}

/// Hamming distance ("none" when a document has no fingerprint) -> (labelled positive,
/// labelled negative) of the scored pairs, by distance.
fn distance_histogram(run: &RunTables, pairs: &[(usize, usize, Label)]) -> Vec<(String, u64, u64)> {
    // Ignored pairs (-1, or two labels) are left out: it is of positives against negatives.
    let mut histogram: std::collections::BTreeMap<Option<u32>, (u64, u64)> = Default::default();
    for &(x, y, label) in pairs {
        if label == Label::Ignored {
            continue;
        }
        let distance = run.fingerprints[x]
            .zip(run.fingerprints[y])
            .map(|(a, b)| (a ^ b).count_ones());
        let cell = histogram.entry(distance).or_default();
        if label == Label::Duplicate {
            cell.0 += 1
        } else {
            cell.1 += 1
        }
    }
    histogram
        .into_iter()
        .map(|(d, (p, n))| (d.map_or("none".to_string(), |d| d.to_string()), p, n))
        .collect()
}

/// The report as text: a heading line, the scores by k, the histogram and the notes.
fn render_table(report: &Report) -> String {
    let mut out = render_heading(report);
    out += &render_scores(report);
    out += &render_histogram(report);
    out += &render_notes(report);
    out
}

/// The first line: the run's k and documents, and what was scored.
fn render_heading(report: &Report) -> String {
    let mut out = format!(
        "run k = {}; {} documents in the run; ",
        report.run_k, report.documents
    );
    match (report.unlisted, report.scored_pairs) {
        (Some(unlisted), Some(scored)) => {
            out += &format!(
                "{scored} labelled pairs scored ({} documents)",
                report.scored_documents
            );
            if let Some(ignored) = report.ignored_pairs.filter(|&n| n > 0) {
                out += &format!("; {ignored} labelled -1, ignored");
            }
            if report.contradicting_in_run > 0 {
                out += &format!(
                    "; {} with contradicting labels, ignored",
                    report.contradicting_in_run
                );
            }
            if unlisted == Unlisted::Negative {
                out += "; every unlisted pair of the run's documents is a negative";
            }
            out += "\n";
        }
        _ => out += &format!("{} scored\n", report.scored_documents),
    }
    out
}

/// The table of scores by k (with the ignored column when there are ignored pairs), and the
/// best k by F1.
fn render_scores(report: &Report) -> String {
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
    // The ignored column only when the labels have -1 or contradicting pairs.
    let with_ignored =
        report.ignored_pairs.is_some_and(|n| n > 0) || report.contradicting_in_run > 0;
    let mut out = String::from("\n| k | TP | FP | FN | TN | precision | recall | F1 | ARI |");
    out += if with_ignored {
        " ignored |\n|---|---|---|---|---|---|---|---|---|---|\n"
    } else {
        "\n|---|---|---|---|---|---|---|---|---|\n"
    };
    for row in &report.rows {
        let s = &row.scores;
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
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
        if with_ignored {
            out += &format!(" {} |", row.predicted_ignored.unwrap_or(0));
        }
        out += "\n";
    }
    if with_ignored {
        out += if report.contradicting_in_run > 0 {
            "\nignored: predicted pairs labelled -1 or with contradicting labels (neither TP nor \
             FP)\n"
        } else {
            "\nignored: predicted pairs labelled -1 (neither TP nor FP)\n"
        };
    }
    if let Some(k) = report.best_k_by_f1 {
        out += &format!("\nbest k by F1: {k}\n");
    }
    out
}

/// The labelled pairs by Hamming distance (labelled pairs only; empty otherwise).
fn render_histogram(report: &Report) -> String {
    let mut out = String::new();
    if let Some(histogram) = &report.distance_histogram {
        out += "\n| Hamming distance | labelled positive | labelled negative |\n|---|---|---|\n";
        for (d, p, n) in histogram {
            out += &format!("| {d} | {p} | {n} |\n");
        }
    }
    out
}

/// The ids not in the run, and the note about a sweep beyond the run's k (each if any).
fn render_notes(report: &Report) -> String {
    let mut out = String::new();
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
    fn labelled_pairs_hand_computed_both_ways() {
        // Groups {0,1,2} and {3,4}; 5 alone. 0-1 is found (TP), 0-2 is predicted but ignored,
        // 3-4 is a predicted label-0 pair (FP), 1-5 a missed duplicate (FN), 2-5 ignored apart.
        let clusters = [0, 0, 0, 3, 3, 5];
        let pairs = [
            (0, 1, Label::Duplicate),
            (0, 2, Label::Ignored),
            (3, 4, Label::Distinct),
            (1, 5, Label::Duplicate),
            (2, 5, Label::Ignored),
        ];
        let (s, ignored) = score_labelled(&clusters, &pairs, Unlisted::Ignore);
        let counts = |s: &PairScores| {
            (
                s.true_positives,
                s.false_positives,
                s.false_negatives,
                s.true_negatives,
            )
        };
        assert_eq!((counts(&s), ignored), ((1, 1, 1, 0), 1));
        assert!(close(s.precision, 0.5) && close(s.recall, 0.5));
        // Unlisted negative: 4 predicted pairs (3 + 1); FP = 4 - 1 TP - 1 ignored = 2 (the
        // unlisted 1-2 and the label-0 3-4); TN = 15 - 1 - 2 - 1 - 2 ignored = 9.
        let (s, ignored) = score_labelled(&clusters, &pairs, Unlisted::Negative);
        assert_eq!((counts(&s), ignored), ((1, 2, 1, 9), 1));
        assert!(close(s.precision, 1.0 / 3.0) && close(s.recall, 0.5));
    }

    #[test]
    fn labelled_pairs_agree_with_counting_every_pair() {
        let mut random = crate::rng::SplitMix64(11);
        for round in 0..200 {
            let n = 2 + random.below(12);
            let clusters: Vec<u64> = (0..n).map(|_| random.below(n / 2 + 1) as u64).collect();
            let mut labels: HashMap<(usize, usize), Label> = HashMap::new();
            for _ in 0..random.below(2 * n) {
                let (a, b) = (random.below(n), random.below(n));
                if a != b {
                    let label = Label::ALL[random.below(3)];
                    labels.insert((a.min(b), a.max(b)), label);
                }
            }
            let pairs: Vec<(usize, usize, Label)> =
                labels.iter().map(|(&(a, b), &l)| (a, b, l)).collect();
            for unlisted in [Unlisted::Ignore, Unlisted::Negative] {
                // Every pair, one by one, with the rule as drift_dev's README states it.
                let (mut tp, mut fp, mut fn_, mut tn, mut ignored) = (0, 0, 0, 0, 0);
                for a in 0..n {
                    for b in a + 1..n {
                        let predicted = clusters[a] == clusters[b];
                        let label = match (labels.get(&(a, b)), unlisted) {
                            (Some(&l), _) => l,
                            (None, Unlisted::Negative) => Label::Distinct,
                            (None, Unlisted::Ignore) => continue,
                        };
                        match (label, predicted) {
                            (Label::Duplicate, true) => tp += 1,
                            (Label::Duplicate, false) => fn_ += 1,
                            (Label::Distinct, true) => fp += 1,
                            (Label::Distinct, false) => tn += 1,
                            (Label::Ignored, true) => ignored += 1,
                            (Label::Ignored, false) => {}
                        }
                    }
                }
                let (s, predicted_ignored) = score_labelled(&clusters, &pairs, unlisted);
                assert_eq!(
                    (
                        s.true_positives,
                        s.false_positives,
                        s.false_negatives,
                        s.true_negatives,
                        predicted_ignored
                    ),
                    (tp, fp, fn_, tn, ignored),
                    "round {round}, {unlisted:?}"
                );
            }
        }
    }

    fn run_index(ids: &[&str]) -> HashMap<String, usize> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| (id.to_string(), i))
            .collect()
    }

    #[test]
    fn repeated_pairs_count_once_whichever_way_round() {
        let index = run_index(&["a", "b", "c"]);
        let mut book = PairBook::default();
        book.add("a", "b", Some(1), &index);
        book.add("b", "a", Some(1), &index);
        book.add("a", "b", Some(1), &index);
        book.add("c", "a", Some(-1), &index);
        book.add("a", "c", Some(-1), &index);
        book.add("b", "c", Some(0), &index);
        // Ids the run lacks: each reported once, their repeats dropped all the same.
        book.add("x", "a", Some(1), &index);
        book.add("a", "x", Some(1), &index);
        book.add("y", "x", Some(0), &index);
        let checked = book.finish(Path::new("labels.tsv")).unwrap();
        assert_eq!(
            checked.pairs,
            [
                (0, 1, Label::Duplicate),
                (0, 2, Label::Ignored),
                (1, 2, Label::Distinct)
            ]
        );
        assert_eq!((checked.repeated_pairs, checked.dropped_rows), (3, 4));
        assert_eq!(
            (checked.self_pair_rows, checked.contradicting_pairs),
            (0, 0)
        );
        assert_eq!(checked.unknown.examples, ["x", "y"]);
        assert_eq!(checked.unknown.seen.len(), 2);
        let warnings = checked.warnings(Path::new("labels.tsv"));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("labels labels.tsv: 3 pairs are listed more than once"),
            "{warnings:?}"
        );
    }

    #[test]
    fn contradicting_and_self_pairs_are_warned_about_and_not_scored() {
        let index = run_index(&["a", "b", "c", "d"]);
        let mut book = PairBook::default();
        for (a, b, label) in [
            // One pair, labelled 1 and 0: ignored, its 3 rows not counted as repeats.
            ("a", "b", 1),
            ("b", "a", 0),
            ("a", "b", 1),
            ("a", "c", 1),
            ("c", "a", 1),
            // Two labels between ids the run lacks: warned about all the same.
            ("x", "y", 1),
            ("y", "x", -1),
            // Self pairs, whatever their label and whether the run has the id: dropped.
            ("a", "a", 1),
            ("d", "d", 0),
            ("a", "a", 1),
            ("z", "z", -1),
            ("c", "d", -1),
        ] {
            book.add(a, b, Some(label), &index);
        }
        let file = Path::new("dir/labels.parquet");
        let checked = book.finish(file).unwrap();
        assert_eq!(
            checked.pairs,
            [
                (0, 1, Label::Ignored),
                (0, 2, Label::Duplicate),
                (2, 3, Label::Ignored)
            ]
        );
        assert_eq!((checked.repeated_pairs, checked.dropped_rows), (1, 1));
        assert_eq!(checked.self_pair_rows, 4);
        assert_eq!(
            (checked.contradicting_pairs, checked.contradicting_in_run),
            (2, 1)
        );
        // z is only in a self pair: dropped before it is looked up.
        assert_eq!(checked.unknown.examples, ["x", "y"]);
        assert_eq!(
            checked.warnings(file),
            [
                "labels dir/labels.parquet: 4 rows pair a document with itself (e.g. (a, a), \
                 (d, d), (z, z)); they say nothing about two documents and are not scored",
                "labels dir/labels.parquet: 2 pairs are listed with different labels ((a, b) and \
                 (b, a) are the same pair), e.g. (b, a) labelled 1 and 0 (3 rows), (y, x) \
                 labelled 1 and -1 (2 rows); they are not scored (ignored both ways, like label \
                 -1)",
                "labels dir/labels.parquet: 1 pairs are listed more than once with the same label \
                 ((a, b) and (b, a) are the same pair); dropped the 1 repeated rows, so each pair \
                 counts once",
            ]
        );
        // Groups {a, b} and {c, d}: the contradicting a-b is predicted but neither TP nor FP,
        // whether unlisted pairs are ignored or negatives (6 pairs: FP = 2 predicted - 0 TP -
        // 2 ignored = 0; TN = 6 - 0 - 0 - 1 FN - 2 ignored = 3).
        let clusters = [0, 0, 2, 2];
        for (unlisted, tn) in [(Unlisted::Ignore, 0), (Unlisted::Negative, 3)] {
            let (s, ignored) = score_labelled(&clusters, &checked.pairs, unlisted);
            assert_eq!(
                (
                    s.true_positives,
                    s.false_positives,
                    s.false_negatives,
                    s.true_negatives,
                    ignored
                ),
                (0, 0, 1, tn, 2),
                "{unlisted:?}"
            );
        }
    }

    #[test]
    fn warnings_show_five_examples() {
        let index = run_index(&[]);
        let mut book = PairBook::default();
        for i in 0..7 {
            let (p, q) = (format!("p{i}"), format!("q{i}"));
            book.add(&p, &q, Some(1), &index);
            book.add(&q, &p, Some(0), &index);
            book.add(&p, &p, Some(1), &index);
        }
        let file = Path::new("labels.tsv");
        let warnings = book.finish(file).unwrap().warnings(file);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].contains(
                "7 rows pair a document with itself (e.g. (p0, p0), (p1, p1), \
                 (p2, p2), (p3, p3), (p4, p4)); they"
            ),
            "{warnings:?}"
        );
        assert!(
            warnings[1].contains("7 pairs are listed with different labels"),
            "{warnings:?}"
        );
        assert_eq!(
            warnings[1].matches("labelled 1 and 0 (2 rows)").count(),
            5,
            "{warnings:?}"
        );
    }

    #[test]
    fn labels_other_than_1_0_and_minus_1_are_refused() {
        let index = run_index(&["a", "b", "c"]);
        let mut book = PairBook::default();
        // A self pair or a contradiction does not hide a bad label: the file is malformed.
        for (a, b, label) in [
            ("a", "b", Some(2)),
            ("a", "c", None),
            ("a", "a", Some(3)),
            ("b", "c", Some(1)),
            ("c", "b", Some(0)),
        ] {
            book.add(a, b, label, &index);
        }
        let bad = book
            .finish(Path::new("dir/labels.parquet"))
            .unwrap_err()
            .to_string();
        assert!(bad.contains("dir/labels.parquet"), "{bad}");
        assert!(
            bad.contains("3 rows have a label other than 1")
                && bad.contains("2 for (a, b)")
                && bad.contains("NULL for (a, c)")
                && bad.contains("3 for (a, a)"),
            "{bad}"
        );
    }

    #[test]
    fn repeated_truth_ids_are_found_in_and_out_of_the_run() {
        let mut tally = IdTally::new(3);
        assert!(tally.add("a", Some(0)));
        assert!(tally.add("z", None));
        assert!(!tally.add("a", Some(0)));
        assert!(tally.add("b", Some(1)));
        assert!(!tally.add("z", None));
        assert!(!tally.add("z", None));
        assert!(!tally.add("a", Some(0)));
        assert_eq!(tally.repeated(), [("a", 3), ("z", 3)]);
        let mut once = IdTally::new(2);
        assert!(once.add("a", Some(0)) && once.add("b", Some(1)) && once.add("c", None));
        assert!(once.repeated().is_empty());
    }

    #[test]
    fn clusters_follow_the_pairs_within_k() {
        let pairs = [(0, 1, 1u8), (1, 2, 3), (3, 4, 0)];
        assert_eq!(clusters_at(6, &pairs, 0), [0, 1, 2, 3, 3, 5]);
        assert_eq!(clusters_at(6, &pairs, 1), [0, 0, 2, 3, 3, 5]);
        assert_eq!(clusters_at(6, &pairs, 3), [0, 0, 0, 3, 3, 5]);
    }
}
