//! `neardup explain`: why two documents of a run were paired or not, and what a document's
//! group holds. It reads the run's tables and its input, and recomputes the features with the
//! options the run recorded, so what it says is what the run did.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, UInt32Type, UInt64Type};
use datafusion::prelude::SessionContext;
use serde_json::{Value, json};
use similar::{ChangeTag, TextDiff};

use crate::commands::cells::{f64_at, i64_at, string_at};
use crate::commands::query::{output_summary, register_outputs};
use crate::engine::sql::{query_batches, quote_ident, quote_literal};
use crate::error::{Error, Result};
use crate::job::summary::Summary;
use crate::text::Featurizer;
use crate::text::options::FeatureOptions;

#[derive(Debug, Clone)]
pub struct ExplainOptions {
    /// The run's output folder or URL.
    pub output: PathBuf,
    pub subject: Subject,
    pub json: bool,
    /// Mark the diff with colours instead of `[-...-]` and `{+...+}`.
    pub colour: bool,
}

#[derive(Debug, Clone)]
pub enum Subject {
    /// Why these two documents were paired, or not.
    Pair(String, String),
    /// The group of this document.
    Group(String),
}

/// Features listed on each side of a pair, the most weighted first.
const FEATURES_SHOWN: usize = 12;
/// Words of unchanged text shown around each change of the diff.
const DIFF_CONTEXT: usize = 6;
/// Changes shown before the diff says how many more there are.
const DIFF_HUNKS: usize = 20;
/// A diff of two long texts that takes longer than this is coarser, not slower.
const DIFF_TIMEOUT: Duration = Duration::from_secs(2);
/// Members of a group listed at most.
const MEMBERS_SHOWN: usize = 40;
/// Nearest fingerprints shown for a document in no group.
const NEAREST_SHOWN: usize = 5;

pub async fn explain(options: &ExplainOptions) -> Result<String> {
    let summary = output_summary(&options.output).await?;
    if summary.command != "run" {
        return Err(Error::Usage(format!(
            "{} is the output of `neardup {}`, which has no texts or signatures to explain; \
             explain reads the output of `neardup run`",
            options.output.display(),
            summary.command
        )));
    }
    let ctx = crate::engine::session::session_context()?;
    register_outputs(&ctx, &options.output).await?;
    let run = Run::new(&ctx, &summary, options);
    match &options.subject {
        Subject::Pair(a, b) => {
            if a == b {
                return Err(Error::Usage(format!(
                    "both ids are {a}; name two documents, or --id {a} for its group"
                )));
            }
            let pair = run.pair(a, b).await?;
            Ok(if options.json {
                format!("{:#}\n", pair.to_json())
            } else {
                pair.render(options.colour)
            })
        }
        Subject::Group(id) => {
            let group = run.group(id).await?;
            Ok(if options.json {
                format!("{:#}\n", group.to_json())
            } else {
                group.render()
            })
        }
    }
}

/// The run being explained: its session, its summary and where it is.
struct Run<'a> {
    ctx: &'a SessionContext,
    summary: &'a Summary,
    output: String,
}

/// One document as the run's `signatures` table has it.
#[derive(Debug, Clone)]
struct Document {
    id: String,
    /// The fingerprint in hex; `None`: nothing to fingerprint.
    simhash: Option<String>,
    features: Option<u32>,
    text_bytes: Option<i64>,
    input_order: Option<i64>,
}

/// A document's group, as `groups` has it.
#[derive(Debug, Clone)]
struct Membership {
    group_id: String,
    representative_id: String,
    group_size: i64,
    distance: Option<i64>,
}

/// Everything said about a pair.
struct PairReport {
    output: String,
    k: u32,
    bits: u32,
    plan: Option<String>,
    min_similarity: Option<f64>,
    min_features: usize,
    documents: [Document; 2],
    memberships: [Option<Membership>; 2],
    distance: Option<i64>,
    shared_table: Option<i64>,
    estimated_jaccard: Option<f64>,
    listed: Option<(i64, Option<f64>)>,
    features: Result<FeatureComparison, String>,
    /// The two cleaned texts, when the run's input is still readable.
    texts: Option<[String; 2]>,
}

/// The two feature sets, recomputed with the run's options.
struct FeatureComparison {
    shared: usize,
    only: [Vec<(String, f64)>; 2],
    only_count: [usize; 2],
}

impl FeatureComparison {
    fn jaccard(&self) -> Option<f64> {
        let union = self.shared + self.only_count[0] + self.only_count[1];
        (union > 0).then(|| self.shared as f64 / union as f64)
    }
}

impl<'a> Run<'a> {
    fn new(ctx: &'a SessionContext, summary: &'a Summary, options: &ExplainOptions) -> Self {
        Self {
            ctx,
            summary,
            output: options.output.display().to_string(),
        }
    }

    async fn pair(&self, a: &str, b: &str) -> Result<PairReport> {
        let documents = [self.document(a).await?, self.document(b).await?];
        let memberships = [self.membership(a).await?, self.membership(b).await?];
        let parameters = &self.summary.parameters;
        let plan = self.summary.plan.as_ref().map(|p| p.plan.clone());
        let (distance, shared_table, estimated_jaccard) =
            self.measures(a, b, plan.as_deref()).await?;
        let listed = self.listed_pair(a, b).await?;
        let featurizer = FeatureOptions::parse(&parameters.features)
            .and_then(Featurizer::new)
            .map_err(|e| {
                format!(
                    "the run's features ({}) cannot be rebuilt: {e}",
                    parameters.features
                )
            });
        let min_features = featurizer.as_ref().map_or(0, |f| f.options().min_features);
        let texts = self.texts(a, b).await?;
        let features = match (&featurizer, &texts) {
            (Ok(featurizer), Some([ta, tb])) => Ok(compare_features(featurizer, ta, tb)),
            (Err(e), _) => Err(e.clone()),
            (_, None) => Err("the run's input is not readable, so its texts are not shown".into()),
        };
        let cleaned = match (&featurizer, texts) {
            (Ok(featurizer), Some([ta, tb])) => Some([
                featurizer.clean(&ta).into_owned(),
                featurizer.clean(&tb).into_owned(),
            ]),
            _ => None,
        };
        Ok(PairReport {
            output: self.output.clone(),
            k: parameters.k,
            bits: parameters.fingerprint_bits,
            plan,
            min_similarity: parameters.min_similarity,
            min_features,
            documents,
            memberships,
            distance,
            shared_table,
            estimated_jaccard,
            listed,
            features,
            texts: cleaned,
        })
    }

    /// The document's row of `signatures`; an id the run does not have is an error.
    async fn document(&self, id: &str) -> Result<Document> {
        let sql = format!(
            "SELECT arrow_cast(id, 'Utf8'), simhash, features, arrow_cast(text_bytes, 'Int64'), \
             arrow_cast(input_order, 'Int64') FROM signatures WHERE arrow_cast(id, 'Utf8') = {}",
            quote_literal(id)
        );
        let batches = query_batches(self.ctx, &sql).await?;
        let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
            let batch_note = match &self.summary.index {
                Some(index) => format!(
                    "; this run was a batch against the index {}, and an earlier batch's \
                     documents are in the index, not in this output",
                    index.path
                ),
                None => String::new(),
            };
            return Err(Error::Input(format!(
                "no document with id {id} in {}: its signatures table has no such id{batch_note}",
                self.output
            )));
        };
        Ok(Document {
            id: id.to_string(),
            simhash: fingerprint_hex(batch, 1),
            features: u32_value(batch, 2),
            text_bytes: i64_value(batch, 3),
            input_order: i64_value(batch, 4),
        })
    }

    async fn membership(&self, id: &str) -> Result<Option<Membership>> {
        let sql = format!(
            "SELECT arrow_cast(group_id, 'Utf8'), arrow_cast(representative_id, 'Utf8'), \
             arrow_cast(group_size, 'Int64'), arrow_cast(distance, 'Int64') FROM groups \
             WHERE arrow_cast(id, 'Utf8') = {}",
            quote_literal(id)
        );
        let batches = query_batches(self.ctx, &sql).await?;
        Ok(batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .map(|batch| Membership {
                group_id: string_value(batch, 0).unwrap_or_default(),
                representative_id: string_value(batch, 1).unwrap_or_default(),
                group_size: i64_value(batch, 2).unwrap_or(0),
                distance: i64_value(batch, 3),
            }))
    }

    /// Hamming distance, the first band-plan table both fingerprints fall in, and the Jaccard
    /// similarity their MinHash sketches estimate: what the run's matching computed.
    async fn measures(
        &self,
        a: &str,
        b: &str,
        plan: Option<&str>,
    ) -> Result<(Option<i64>, Option<i64>, Option<f64>)> {
        let shared = match plan {
            Some(plan) => format!("shared_band(x.simhash, y.simhash, {})", quote_literal(plan)),
            None => "arrow_cast(NULL, 'Int64')".to_string(),
        };
        let sql = format!(
            "SELECT arrow_cast(hamming(x.simhash, y.simhash), 'Int64'), {shared}, \
             sketch_similarity(x.sketch, y.sketch) \
             FROM signatures x, signatures y \
             WHERE arrow_cast(x.id, 'Utf8') = {} AND arrow_cast(y.id, 'Utf8') = {}",
            quote_literal(a),
            quote_literal(b)
        );
        let batches = query_batches(self.ctx, &sql).await?;
        Ok(match batches.iter().find(|b| b.num_rows() > 0) {
            Some(batch) => (
                i64_value(batch, 0),
                i64_value(batch, 1),
                f64_value(batch, 2),
            ),
            None => (None, None, None),
        })
    }

    /// The pair's row of `pairs`, if the run listed it: its distance and similarity.
    async fn listed_pair(&self, a: &str, b: &str) -> Result<Option<(i64, Option<f64>)>> {
        let (a, b) = (quote_literal(a), quote_literal(b));
        let sql = format!(
            "SELECT arrow_cast(distance, 'Int64'), similarity FROM pairs \
             WHERE (arrow_cast(id_a, 'Utf8') = {a} AND arrow_cast(id_b, 'Utf8') = {b}) \
                OR (arrow_cast(id_a, 'Utf8') = {b} AND arrow_cast(id_b, 'Utf8') = {a})"
        );
        let batches = query_batches(self.ctx, &sql).await?;
        Ok(batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .map(|batch| (i64_value(batch, 0).unwrap_or(0), f64_value(batch, 1))))
    }

    /// The two documents' texts from the run's input (`corpus`), or `None` if it is gone.
    async fn texts(&self, a: &str, b: &str) -> Result<Option<[String; 2]>> {
        if !self.ctx.table_exist("corpus").unwrap_or(false) {
            return Ok(None);
        }
        let parameters = &self.summary.parameters;
        let id = quote_ident(&parameters.id_column);
        let text = quote_ident(&parameters.source_column);
        let sql = format!(
            "SELECT arrow_cast({id}, 'Utf8'), arrow_cast({text}, 'Utf8') FROM corpus \
             WHERE arrow_cast({id}, 'Utf8') IN ({}, {})",
            quote_literal(a),
            quote_literal(b)
        );
        let mut found: HashMap<String, String> = HashMap::new();
        for batch in query_batches(self.ctx, &sql).await? {
            for row in 0..batch.num_rows() {
                if let Some(id) = string_at(&batch, 0, row) {
                    found.insert(id, string_at(&batch, 1, row).unwrap_or_default());
                }
            }
        }
        Ok(match (found.remove(a), found.remove(b)) {
            (Some(ta), Some(tb)) => Some([ta, tb]),
            _ => None,
        })
    }

    async fn group(&self, id: &str) -> Result<GroupReport> {
        let document = self.document(id).await?;
        let membership = self.membership(id).await?;
        let mut members = Vec::new();
        let mut nearest = Vec::new();
        match &membership {
            Some(m) => {
                let sql = format!(
                    "SELECT arrow_cast(g.id, 'Utf8'), arrow_cast(g.distance, 'Int64'), \
                     arrow_cast(s.input_order, 'Int64'), arrow_cast(s.text_bytes, 'Int64') \
                     FROM groups g JOIN signatures s ON s.id = g.id \
                     WHERE arrow_cast(g.group_id, 'Utf8') = {} ORDER BY s.input_order LIMIT {}",
                    quote_literal(&m.group_id),
                    MEMBERS_SHOWN
                );
                for batch in query_batches(self.ctx, &sql).await? {
                    for row in 0..batch.num_rows() {
                        members.push(Member {
                            id: string_at(&batch, 0, row).unwrap_or_default(),
                            distance: i64_at(&batch, 1, row),
                            input_order: i64_at(&batch, 2, row),
                            text_bytes: i64_at(&batch, 3, row),
                        });
                    }
                }
            }
            None if document.simhash.is_some() => {
                let sql = format!(
                    "SELECT arrow_cast(s.id, 'Utf8'), arrow_cast(hamming(s.simhash, d.simhash), 'Int64') AS distance \
                     FROM signatures s, (SELECT simhash FROM signatures WHERE arrow_cast(id, 'Utf8') = {}) d \
                     WHERE s.simhash IS NOT NULL AND arrow_cast(s.id, 'Utf8') <> {} \
                     ORDER BY distance, s.input_order LIMIT {}",
                    quote_literal(id),
                    quote_literal(id),
                    NEAREST_SHOWN
                );
                for batch in query_batches(self.ctx, &sql).await? {
                    for row in 0..batch.num_rows() {
                        if let (Some(other), Some(d)) =
                            (string_at(&batch, 0, row), i64_at(&batch, 1, row))
                        {
                            nearest.push((other, d));
                        }
                    }
                }
            }
            None => {}
        }
        Ok(GroupReport {
            output: self.output.clone(),
            k: self.summary.parameters.k,
            document,
            membership,
            members,
            nearest,
        })
    }
}

/// The features of both texts, recomputed with the run's options.
fn compare_features(featurizer: &Featurizer, a: &str, b: &str) -> FeatureComparison {
    let fa = featurizer.distinct_features(a);
    let fb = featurizer.distinct_features(b);
    let in_a: HashSet<&str> = fa.iter().map(|(f, _)| f.as_str()).collect();
    let in_b: HashSet<&str> = fb.iter().map(|(f, _)| f.as_str()).collect();
    let shared = in_a.intersection(&in_b).count();
    let only = |of: &[(String, f64)], other: &HashSet<&str>| -> Vec<(String, f64)> {
        let mut only: Vec<(String, f64)> = of
            .iter()
            .filter(|(f, _)| !other.contains(f.as_str()))
            .cloned()
            .collect();
        // The most weighted first; equal weights keep the text's order (a stable sort).
        only.sort_by(|x, y| y.1.total_cmp(&x.1));
        only
    };
    let only_a = only(&fa, &in_b);
    let only_b = only(&fb, &in_a);
    let only_count = [only_a.len(), only_b.len()];
    FeatureComparison {
        shared,
        only: [
            only_a.into_iter().take(FEATURES_SHOWN).collect(),
            only_b.into_iter().take(FEATURES_SHOWN).collect(),
        ],
        only_count,
    }
}

impl PairReport {
    /// Why the run paired the two or not, in one sentence.
    fn verdict(&self) -> String {
        let [a, b] = &self.documents;
        for document in [a, b] {
            if document.simhash.is_none() {
                return format!(
                    "not paired: {} has no fingerprint (its text is NULL or has nothing to \
                     fingerprint after cleaning)",
                    document.id
                );
            }
        }
        let grouped_together = match &self.memberships {
            [Some(x), Some(y)] => x.group_id == y.group_id,
            _ => false,
        };
        let group_note = |m: &Option<Membership>| match m {
            Some(m) => format!(", both in group {}", m.group_id),
            None => String::new(),
        };
        if let Some((distance, _)) = self.listed {
            return format!(
                "paired: distance {distance} is within k = {}{}{}",
                self.k,
                match (self.min_similarity, self.estimated_jaccard) {
                    (Some(min), Some(s)) if distance > 0 =>
                        format!(" and the estimated Jaccard {s:.3} passes --verify {min}"),
                    _ => String::new(),
                },
                group_note(&self.memberships[0])
            );
        }
        let Some(distance) = self.distance else {
            return "not paired".to_string();
        };
        let short = [a, b]
            .into_iter()
            .find(|d| d.features.is_some_and(|f| (f as usize) < self.min_features));
        if distance > i64::from(self.k) {
            let mut verdict = format!("not paired: distance {distance} is above k = {}", self.k);
            if let Some(d) = short {
                let _ = write!(
                    verdict,
                    " ({} has {} features, fewer than min_features={}, so its fingerprint is \
                     an exact hash that only exact copies share)",
                    d.id,
                    d.features.unwrap_or(0),
                    self.min_features
                );
            }
            if grouped_together {
                verdict.push_str(&group_note(&self.memberships[0]));
                verdict.push_str(" through other members");
            }
            return verdict;
        }
        if let (Some(min), Some(s)) = (self.min_similarity, self.estimated_jaccard)
            && distance > 0
            && s < min
        {
            return format!(
                "not paired: distance {distance} is within k = {}, but the estimated Jaccard \
                 {s:.3} is below --verify {min}{}",
                self.k,
                if grouped_together {
                    format!("{} through other members", group_note(&self.memberships[0]))
                } else {
                    String::new()
                }
            );
        }
        if grouped_together {
            // Within k and verified, but not listed: `--pairs star` lists one pair per member.
            return format!(
                "paired: distance {distance} is within k = {}{}; pairs lists one pair per \
                 member (--pairs star), not this one",
                self.k,
                group_note(&self.memberships[0])
            );
        }
        format!("not paired: distance {distance} is within k = {}", self.k)
    }

    fn render(&self, colour: bool) -> String {
        let [a, b] = &self.documents;
        let mut out = String::new();
        let _ = writeln!(out, "{} and {} in {}", a.id, b.id, self.output);
        let _ = writeln!(out, "{}\n", self.verdict());
        let rows: [(&str, Box<CellOf>); 5] = [
            (
                "simhash",
                Box::new(|d, _| d.simhash.clone().unwrap_or_else(|| "none".into())),
            ),
            ("features", Box::new(|d, _| show(d.features))),
            ("text bytes", Box::new(|d, _| show(d.text_bytes))),
            ("input row", Box::new(|d, _| input_row(d.input_order))),
            (
                "group",
                Box::new(|_, m| match m {
                    Some(m) => format!(
                        "{} of {} (representative {}, {} bits away)",
                        m.group_id,
                        m.group_size,
                        m.representative_id,
                        show(m.distance)
                    ),
                    None => "none".into(),
                }),
            ),
        ];
        let cells: Vec<(&str, String, String)> = rows
            .iter()
            .map(|(name, value)| {
                (
                    *name,
                    value(a, &self.memberships[0]),
                    value(b, &self.memberships[1]),
                )
            })
            .collect();
        let width = cells
            .iter()
            .map(|(_, left, _)| left.chars().count())
            .chain([a.id.chars().count()])
            .max()
            .unwrap_or(0);
        let _ = writeln!(out, "{:12}  {:width$}  {}", "", a.id, b.id);
        for (name, left, right) in &cells {
            let _ = writeln!(out, "{name:12}  {left:width$}  {right}");
        }
        out.push('\n');
        let _ = writeln!(
            out,
            "Hamming distance   {} of {} bits (k = {})",
            show(self.distance),
            self.bits,
            self.k
        );
        if let Some(plan) = &self.plan {
            let _ = match self.shared_table {
                Some(table) => writeln!(
                    out,
                    "shared table       {table} of the plan {plan} (the first table both \
                     fingerprints fall in)"
                ),
                None => writeln!(
                    out,
                    "shared table       none of the plan {plan}: not a candidate"
                ),
            };
        }
        let verify = match self.min_similarity {
            Some(min) => format!("--verify keeps {min} or more"),
            None => "the run did not verify".to_string(),
        };
        let _ = writeln!(
            out,
            "estimated Jaccard  {} (MinHash sketches; {verify})",
            self.estimated_jaccard
                .map_or("none".to_string(), |s| format!("{s:.3}"))
        );
        match &self.features {
            Ok(features) => {
                let _ = writeln!(
                    out,
                    "exact Jaccard      {}: {} features shared, {} only in {}, {} only in {}",
                    features
                        .jaccard()
                        .map_or("none".to_string(), |j| format!("{j:.3}")),
                    features.shared,
                    features.only_count[0],
                    a.id,
                    features.only_count[1],
                    b.id
                );
            }
            Err(why) => {
                let _ = writeln!(out, "exact Jaccard      not computed: {why}");
            }
        }
        if let Some((distance, similarity)) = self.listed {
            let _ = writeln!(
                out,
                "pairs row          distance {distance}, similarity {}",
                similarity.map_or("NULL".to_string(), |s| format!("{s:.3}"))
            );
        }
        if let Ok(features) = &self.features {
            for (side, document) in [a, b].into_iter().enumerate() {
                if features.only[side].is_empty() {
                    continue;
                }
                let listed: Vec<String> = features.only[side]
                    .iter()
                    .map(|(f, w)| format!("{f:?} {}", weight(*w)))
                    .collect();
                let _ = writeln!(
                    out,
                    "\nonly in {} (the most weighted first): {}",
                    document.id,
                    listed.join(", ")
                );
            }
        }
        if let Some([ta, tb]) = &self.texts {
            let _ = writeln!(
                out,
                "\nthe cleaned texts, {} to {} ({}):",
                a.id,
                b.id,
                if colour {
                    "red removed, green added"
                } else {
                    "[-removed-] {+added+}"
                }
            );
            out.push_str(&render_diff(ta, tb, colour));
        }
        out
    }

    fn to_json(&self) -> Value {
        let document = |d: &Document, m: &Option<Membership>| {
            json!({
                "id": d.id,
                "simhash": d.simhash,
                "features": d.features,
                "text_bytes": d.text_bytes,
                "input_order": d.input_order,
                "group": m.as_ref().map(membership_json),
            })
        };
        let features = match &self.features {
            Ok(f) => json!({
                "exact_jaccard": f.jaccard(),
                "shared": f.shared,
                "only_a": f.only_count[0],
                "only_b": f.only_count[1],
                "only_a_top": f.only[0].iter().map(|(f, w)| json!([f, w])).collect::<Vec<_>>(),
                "only_b_top": f.only[1].iter().map(|(f, w)| json!([f, w])).collect::<Vec<_>>(),
            }),
            Err(why) => json!({ "not_computed": why }),
        };
        json!({
            "output": self.output,
            "verdict": self.verdict(),
            "paired": self.listed.is_some(),
            "k": self.k,
            "bits": self.bits,
            "plan": self.plan,
            "min_similarity": self.min_similarity,
            "a": document(&self.documents[0], &self.memberships[0]),
            "b": document(&self.documents[1], &self.memberships[1]),
            "distance": self.distance,
            "shared_table": self.shared_table,
            "estimated_jaccard": self.estimated_jaccard,
            "pair": self.listed.map(|(d, s)| json!({ "distance": d, "similarity": s })),
            "features": features,
            "diff": self.texts.as_ref().map(|[ta, tb]| diff_json(ta, tb)),
        })
    }
}

/// How one row of the side-by-side table shows a document.
type CellOf = dyn Fn(&Document, &Option<Membership>) -> String;

fn membership_json(m: &Membership) -> Value {
    json!({
        "group_id": m.group_id,
        "representative_id": m.representative_id,
        "group_size": m.group_size,
        "distance": m.distance,
    })
}

/// A weight as the features count it: whole counts without a fraction.
fn weight(w: f64) -> String {
    if w.fract() == 0.0 && w.abs() < 1e15 {
        format!("x{}", w as i64)
    } else {
        format!("{w:.3}")
    }
}

fn show<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or("none".to_string(), |v| v.to_string())
}

/// A document's place in its run's input, counted from 1 as errors count rows: `row 5`, or
/// `file 2, row 5` after the first file. The JSON output keeps `input_order` as it is.
fn input_row(input_order: Option<i64>) -> String {
    let Some(order) = input_order else {
        return "none".into();
    };
    let (file, row) = crate::input::file_and_row(order);
    match file {
        0 => format!("row {row}"),
        _ => format!("file {}, row {row}", file + 1),
    }
}

/// The changes from `a` to `b` word by word, each with a little unchanged text around it.
fn render_diff(a: &str, b: &str, colour: bool) -> String {
    let diff = TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_unicode_words(a, b);
    let groups = diff.grouped_ops(DIFF_CONTEXT);
    if groups.is_empty() {
        return "  (the same text)\n".to_string();
    }
    let (removed, added, plain) = if colour {
        (("\x1b[31;9m", "\x1b[0m"), ("\x1b[32m", "\x1b[0m"), ("", ""))
    } else {
        (("[-", "-]"), ("{+", "+}"), ("", ""))
    };
    let mut out = String::new();
    for group in groups.iter().take(DIFF_HUNKS) {
        out.push_str("  …");
        for op in group {
            for change in diff.iter_changes(op) {
                let value = change.value().replace('\n', " ");
                let (open, close) = match change.tag() {
                    ChangeTag::Equal => plain,
                    ChangeTag::Delete => removed,
                    ChangeTag::Insert => added,
                };
                out.push_str(open);
                out.push_str(&value);
                out.push_str(close);
            }
        }
        out.push_str("…\n");
    }
    if groups.len() > DIFF_HUNKS {
        let _ = writeln!(out, "  ({} more changes)", groups.len() - DIFF_HUNKS);
    }
    out
}

/// The diff for tools: how similar the texts are, and each change as removed/added text.
fn diff_json(a: &str, b: &str) -> Value {
    let diff = TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_unicode_words(a, b);
    let mut changes = Vec::new();
    for op in diff.ops() {
        let mut removed = String::new();
        let mut added = String::new();
        for change in diff.iter_changes(op) {
            match change.tag() {
                ChangeTag::Equal => {}
                ChangeTag::Delete => removed.push_str(change.value()),
                ChangeTag::Insert => added.push_str(change.value()),
            }
        }
        if !removed.is_empty() || !added.is_empty() {
            changes.push(json!({ "removed": removed, "added": added }));
        }
    }
    json!({ "ratio": diff.ratio(), "changes": changes })
}

/// A document's group and its members, or its nearest fingerprints when it is in none.
struct GroupReport {
    output: String,
    k: u32,
    document: Document,
    membership: Option<Membership>,
    members: Vec<Member>,
    nearest: Vec<(String, i64)>,
}

struct Member {
    id: String,
    distance: Option<i64>,
    input_order: Option<i64>,
    text_bytes: Option<i64>,
}

impl GroupReport {
    fn render(&self) -> String {
        let mut out = String::new();
        let id = &self.document.id;
        let Some(m) = &self.membership else {
            if self.document.simhash.is_none() {
                let _ = writeln!(
                    out,
                    "{id} in {} is in no group: it has no fingerprint (its text is NULL or has \
                     nothing to fingerprint after cleaning)",
                    self.output
                );
                return out;
            }
            let _ = writeln!(
                out,
                "{id} in {} is in no group: no other document's fingerprint is within k = {} of \
                 its own, or none passed --verify",
                self.output, self.k
            );
            if !self.nearest.is_empty() {
                let nearest: Vec<String> = self
                    .nearest
                    .iter()
                    .map(|(other, d)| format!("{other} ({d} bits)"))
                    .collect();
                let _ = writeln!(out, "nearest fingerprints: {}", nearest.join(", "));
                let _ = writeln!(
                    out,
                    "(neardup explain --output {} {id} ID says why a pair was not made)",
                    self.output
                );
            }
            return out;
        };
        let _ = writeln!(
            out,
            "{id} in {} is in group {} of {} documents; its representative, the member first in \
             input order, is {} (dedup keeps it and removes the others)\n",
            self.output, m.group_id, m.group_size, m.representative_id
        );
        let header = [
            "id",
            "input row",
            "text bytes",
            "bits from the representative",
        ];
        let rows: Vec<[String; 4]> = self
            .members
            .iter()
            .map(|member| {
                [
                    if member.id == m.representative_id {
                        format!("{} (kept)", member.id)
                    } else {
                        member.id.clone()
                    },
                    input_row(member.input_order),
                    show(member.text_bytes),
                    show(member.distance),
                ]
            })
            .collect();
        let mut widths = header.map(|h| h.chars().count());
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut line = String::new();
            for (cell, width) in cells.iter().zip(widths) {
                let _ = write!(line, "{cell:width$}  ");
            }
            line.trim_end().to_string()
        };
        let _ = writeln!(out, "{}", line(&header.map(str::to_string)));
        for row in &rows {
            let _ = writeln!(out, "{}", line(row));
        }
        if (m.group_size as usize) > self.members.len() {
            let _ = writeln!(
                out,
                "({} more members; neardup query --data {} \"SELECT * FROM groups WHERE group_id = {}\" lists them all)",
                m.group_size as usize - self.members.len(),
                self.output,
                m.group_id
            );
        }
        out
    }

    fn to_json(&self) -> Value {
        json!({
            "output": self.output,
            "id": self.document.id,
            "simhash": self.document.simhash,
            "group": self.membership.as_ref().map(membership_json),
            "members": self.members.iter().map(|m| json!({
                "id": m.id,
                "input_order": m.input_order,
                "text_bytes": m.text_bytes,
                "distance": m.distance,
            })).collect::<Vec<_>>(),
            "nearest": self.nearest.iter().map(|(id, d)| json!({ "id": id, "distance": d })).collect::<Vec<_>>(),
        })
    }
}

/// The fingerprint in the first row of `column`, in hex (64 or 128 bits).
fn fingerprint_hex(batch: &RecordBatch, column: usize) -> Option<String> {
    let array = batch.column(column);
    if array.is_null(0) {
        return None;
    }
    match array.data_type() {
        DataType::UInt64 => Some(format!(
            "{:016x}",
            array.as_primitive::<UInt64Type>().value(0)
        )),
        DataType::FixedSizeBinary(_) => Some(
            array
                .as_fixed_size_binary()
                .value(0)
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect(),
        ),
        _ => None,
    }
}

fn u32_value(batch: &RecordBatch, column: usize) -> Option<u32> {
    let array = batch.column(column);
    match array.data_type() {
        DataType::UInt32 if !array.is_null(0) => Some(array.as_primitive::<UInt32Type>().value(0)),
        _ => None,
    }
}

fn i64_value(batch: &RecordBatch, column: usize) -> Option<i64> {
    i64_at(batch, column, 0)
}

fn f64_value(batch: &RecordBatch, column: usize) -> Option<f64> {
    f64_at(batch, column, 0)
}

fn string_value(batch: &RecordBatch, column: usize) -> Option<String> {
    string_at(batch, column, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_rows_count_from_one_within_their_file() {
        assert_eq!(input_row(Some(0)), "row 1");
        assert_eq!(input_row(Some(4)), "row 5");
        assert_eq!(input_row(Some((1 << 32) + 2)), "file 2, row 3");
        assert_eq!(input_row(None), "none");
    }

    #[test]
    fn the_diff_marks_removed_and_added_words_with_context() {
        let diff = render_diff(
            "the quick brown fox jumps over the lazy dog",
            "the quick red fox jumps over the lazy dog",
            false,
        );
        assert!(diff.contains("[-brown-]{+red+}"), "{diff}");
        assert_eq!(render_diff("same", "same", false), "  (the same text)\n");
        let json = diff_json("数据库 系统", "数据 系统");
        assert_eq!(json["changes"].as_array().map(Vec::len), Some(1), "{json}");
    }

    #[test]
    fn features_only_one_side_has_come_most_weighted_first() {
        let featurizer = Featurizer::new(FeatureOptions::parse("mode=words").unwrap()).unwrap();
        let compared = compare_features(
            &featurizer,
            "apt installs packages packages packages quickly",
            "apt installs programs",
        );
        assert_eq!(compared.shared, 2);
        assert_eq!(compared.only_count, [2, 1]);
        assert_eq!(compared.only[0][0], ("packages".to_string(), 3.0));
        assert_eq!(compared.only[1][0].0, "programs");
        assert_eq!(compared.jaccard(), Some(2.0 / 5.0));
    }
}
