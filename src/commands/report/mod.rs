//! `neardup report`: one HTML page about a run, for a person choosing k or checking a run. It
//! reads aggregates of the run's tables and a few samples (`data`), draws them (`plots`, inline
//! SVG) and lays them out (`page`); the page goes beside the run's summary.json, so it goes
//! with the run it describes (replaced with it by `run --overwrite`).

mod data;
mod page;
mod plots;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;

use crate::commands::cells::{f64_at, i64_at, string_at};
use crate::commands::eval::{self, EvalOptions};
use crate::commands::query::{output_summary, register_outputs, summary_folder};
use crate::engine::sql::{query_batches, quote_ident, quote_literal};
use crate::engine::staging::REPORT_FILE;
use crate::error::{Error, Result};
use crate::job::summary::Summary;
use crate::storage::{Place, Remote};
use data::{DistanceCount, GroupSummary, Quality, QualityRow, ReportData, SamplePair, StageRow};

#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// The run's output folder or URL.
    pub output: PathBuf,
    /// With `--truth` or `--labels`: how to score the run against k (`eval`'s options; the
    /// sweep is set here).
    pub scoring: Option<EvalOptions>,
    /// Open the page in the desktop's browser once written.
    pub open: bool,
}

/// Sample pairs shown at each distance.
const SAMPLES_PER_DISTANCE: usize = 3;
/// Largest groups listed.
const LARGEST_GROUPS: usize = 10;
/// Characters of each sample text shown side by side.
const SAMPLE_CHARS: usize = 3000;
/// Characters of a representative's text read for the groups table.
const REPRESENTATIVE_CHARS: usize = 300;

/// Writes the report and returns what to print: where it is.
pub async fn report(options: &ReportOptions) -> Result<String> {
    let summary = output_summary(&options.output).await?;
    let ctx = crate::engine::session::session_context()?;
    register_outputs(&ctx, &options.output).await?;
    let data = gather(&ctx, &summary, options).await?;
    let html = page::render(&data);
    let place = summary_folder(&options.output).await?.join(REPORT_FILE);
    write_whole(&place, html.into_bytes()).await?;
    if options.open {
        open_in_browser(&place);
    }
    Ok(format!("{place}\n"))
}

async fn gather(
    ctx: &SessionContext,
    summary: &Summary,
    options: &ReportOptions,
) -> Result<ReportData> {
    let parameters = &summary.parameters;
    let k = parameters.k;
    let counts = &summary.counts;
    let distances = distance_counts(ctx, k).await?;
    let group_sizes = group_sizes(ctx).await?;
    let mut largest_groups = largest_groups(ctx).await?;
    let mut samples = sample_pairs(ctx, &distances).await?;
    let texts = texts(ctx, summary, &largest_groups, &samples).await?;
    for group in &mut largest_groups {
        group.representative_text = texts
            .get(&group.representative_id)
            .map(|t| beginning(t, REPRESENTATIVE_CHARS));
    }
    for pair in &mut samples {
        pair.text_a = texts.get(&pair.id_a).map(|t| beginning(t, SAMPLE_CHARS));
        pair.text_b = texts.get(&pair.id_b).map(|t| beginning(t, SAMPLE_CHARS));
    }
    let quality = match &options.scoring {
        Some(scoring) => Some(quality(scoring, k).await?),
        None => None,
    };
    Ok(ReportData {
        output: options.output.display().to_string(),
        written_at: now_rfc3339(),
        glance: glance(summary),
        parameters: parameter_rows(summary)?,
        stages: summary
            .stages
            .iter()
            .map(|s| StageRow {
                stage: s.stage.clone(),
                seconds: s.seconds,
                cores: s.cores(),
            })
            .collect(),
        k,
        fingerprint_bits: parameters.fingerprint_bits,
        distances,
        min_similarity: parameters.min_similarity,
        dropped_by_verify: counts
            .candidate_pairs
            .saturating_sub(counts.fingerprint_pairs),
        group_sizes,
        largest_groups,
        samples,
        quality,
    })
}

fn glance(summary: &Summary) -> Vec<(String, String)> {
    let c = &summary.counts;
    let share = |part: u64| {
        if c.documents == 0 {
            String::new()
        } else {
            format!(" ({:.1}%)", 100.0 * part as f64 / c.documents as f64)
        }
    };
    let mut rows = vec![
        ("command", summary.command.clone()),
        ("documents", c.documents.to_string()),
        (
            "removed",
            format!("{}{}", c.documents_removed, share(c.documents_removed)),
        ),
    ];
    if let Some(kept) = c.documents_kept {
        rows.push(("kept", kept.to_string()));
    }
    rows.extend([
        ("groups", c.groups.to_string()),
        ("documents in groups", c.grouped_documents.to_string()),
        ("pairs", c.pairs.to_string()),
        ("distinct fingerprints", c.distinct_fingerprints.to_string()),
        (
            "no fingerprint (NULL, empty)",
            format!("{}, {}", c.null_texts, c.empty_texts),
        ),
        ("short texts (exact match only)", c.short_texts.to_string()),
        ("representative", summary.parameters.keep.clone()),
    ]);
    if let Some(plan) = &summary.plan {
        rows.push(("band plan", format!("{} ({})", plan.plan, plan.chosen_by)));
    }
    if let Some(index) = &summary.index {
        rows.push((
            "index",
            format!(
                "{}, batch {}, {} documents before",
                index.path, index.batch, index.indexed_documents
            ),
        ));
    }
    rows.push(("total time", format!("{:.2} s", summary.total_seconds)));
    if let Some(peak) = summary.peak_rss_bytes {
        rows.push(("peak memory", format!("{:.0} MiB", peak as f64 / 1048576.0)));
    }
    let inputs = match summary.inputs.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [first, rest @ ..] => format!("{first} and {} more", rest.len()),
    };
    rows.push(("input", inputs));
    rows.into_iter().map(|(l, v)| (l.to_string(), v)).collect()
}

/// summary.json's parameters, each as a line of text.
fn parameter_rows(summary: &Summary) -> Result<Vec<(String, String)>> {
    let value = serde_json::to_value(&summary.parameters)
        .map_err(|e| Error::Internal(format!("summary parameters: {e}")))?;
    let mut rows = Vec::new();
    if let serde_json::Value::Object(map) = value {
        for (name, value) in map {
            let text = match value {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            rows.push((name, text));
        }
    }
    Ok(rows)
}

/// Pairs per distance, every distance 0..=k listed.
async fn distance_counts(ctx: &SessionContext, k: u32) -> Result<Vec<DistanceCount>> {
    let sql = "SELECT arrow_cast(distance, 'Int64'), count(*) FROM pairs GROUP BY distance";
    let mut found = BTreeMap::new();
    for batch in query_batches(ctx, sql).await? {
        for row in 0..batch.num_rows() {
            if let (Some(d), Some(n)) = (i64_at(&batch, 0, row), i64_at(&batch, 1, row)) {
                found.insert(d, n);
            }
        }
    }
    Ok((0..=k)
        .map(|distance| DistanceCount {
            distance,
            pairs: found.get(&i64::from(distance)).copied().unwrap_or(0) as u64,
        })
        .collect())
}

async fn group_sizes(ctx: &SessionContext) -> Result<Vec<(u64, u64)>> {
    let sql = "SELECT size, count(*) FROM \
               (SELECT group_id, arrow_cast(max(group_size), 'Int64') AS size FROM groups \
                GROUP BY group_id) \
               GROUP BY size ORDER BY size";
    let mut sizes = Vec::new();
    for batch in query_batches(ctx, sql).await? {
        for row in 0..batch.num_rows() {
            if let (Some(size), Some(n)) = (i64_at(&batch, 0, row), i64_at(&batch, 1, row)) {
                sizes.push((size as u64, n as u64));
            }
        }
    }
    Ok(sizes)
}

async fn largest_groups(ctx: &SessionContext) -> Result<Vec<GroupSummary>> {
    let sql = format!(
        "SELECT arrow_cast(group_id, 'Int64'), arrow_cast(size, 'Int64'), representative \
         FROM (SELECT group_id, max(group_size) AS size, \
                      arrow_cast(min(representative_id), 'Utf8') AS representative \
               FROM groups GROUP BY group_id) \
         ORDER BY size DESC, group_id LIMIT {LARGEST_GROUPS}"
    );
    let mut groups = Vec::new();
    for batch in query_batches(ctx, &sql).await? {
        for row in 0..batch.num_rows() {
            if let (Some(group_id), Some(size), Some(representative_id)) = (
                i64_at(&batch, 0, row),
                i64_at(&batch, 1, row),
                string_at(&batch, 2, row),
            ) {
                groups.push(GroupSummary {
                    group_id: group_id as u64,
                    size: size as u64,
                    representative_id,
                    representative_text: None,
                });
            }
        }
    }
    Ok(groups)
}

/// A few pairs at each distance that has any. Each is a top-k over the pairs (no sort of the
/// whole table), ordered by a hash of the ids: a spread of the run, the same on every report.
async fn sample_pairs(
    ctx: &SessionContext,
    distances: &[DistanceCount],
) -> Result<Vec<SamplePair>> {
    let mut samples = Vec::new();
    for d in distances.iter().filter(|d| d.pairs > 0) {
        let sql = format!(
            "SELECT arrow_cast(id_a, 'Utf8') AS a, arrow_cast(id_b, 'Utf8') AS b, \
                    arrow_cast(similarity, 'Float64') \
             FROM pairs WHERE distance = {} \
             ORDER BY md5(concat(arrow_cast(id_a, 'Utf8'), ' ', arrow_cast(id_b, 'Utf8'))) \
             LIMIT {SAMPLES_PER_DISTANCE}",
            d.distance
        );
        for batch in query_batches(ctx, &sql).await? {
            for row in 0..batch.num_rows() {
                if let (Some(id_a), Some(id_b)) =
                    (string_at(&batch, 0, row), string_at(&batch, 1, row))
                {
                    samples.push(SamplePair {
                        distance: d.distance,
                        id_a,
                        id_b,
                        similarity: f64_at(&batch, 2, row),
                        text_a: None,
                        text_b: None,
                    });
                }
            }
        }
    }
    Ok(samples)
}

/// The cleaned texts (what the features were taken from, with the run's options) of the
/// documents the page shows, in one filtered scan of the input. None for `match`, which has no
/// texts, or when the input is gone.
async fn texts(
    ctx: &SessionContext,
    summary: &Summary,
    groups: &[GroupSummary],
    samples: &[SamplePair],
) -> Result<HashMap<String, String>> {
    let mut found = HashMap::new();
    if summary.command != "run" || !ctx.table_exist("corpus").unwrap_or(false) {
        return Ok(found);
    }
    let ids: Vec<String> = groups
        .iter()
        .map(|g| &g.representative_id)
        .chain(samples.iter().flat_map(|p| [&p.id_a, &p.id_b]))
        .map(|id| quote_literal(id))
        .collect();
    if ids.is_empty() {
        return Ok(found);
    }
    let parameters = &summary.parameters;
    let id = quote_ident(&parameters.id_column);
    let text = quote_ident(&parameters.source_column);
    let sql = format!(
        "SELECT arrow_cast({id}, 'Utf8'), arrow_cast(clean_text({text}, {}), 'Utf8') \
         FROM corpus WHERE arrow_cast({id}, 'Utf8') IN ({})",
        quote_literal(&parameters.features),
        ids.join(", ")
    );
    let batches: Vec<RecordBatch> = query_batches(ctx, &sql).await?;
    for batch in &batches {
        for row in 0..batch.num_rows() {
            if let Some(id) = string_at(batch, 0, row) {
                found.insert(id, string_at(batch, 1, row).unwrap_or_default());
            }
        }
    }
    Ok(found)
}

/// `eval`'s scores at every k from 0 to the run's, read from its JSON (the same numbers
/// `neardup eval --sweep 0..=K --format json` prints).
async fn quality(scoring: &EvalOptions, k: u32) -> Result<Quality> {
    let options = EvalOptions {
        sweep: Some((0, k)),
        json: true,
        ..scoring.clone()
    };
    let json = eval::eval(&options).await?;
    let report: serde_json::Value = serde_json::from_str(&json)
        .map_err(|e| Error::Internal(format!("reading eval's scores: {e}")))?;
    let score = |row: &serde_json::Value, name: &str| row.get(name).and_then(|v| v.as_f64());
    let rows = report["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter_map(|row| {
                    Some(QualityRow {
                        k: u32::try_from(row.get("k")?.as_u64()?).ok()?,
                        precision: score(row, "precision"),
                        recall: score(row, "recall"),
                        f1: score(row, "f1"),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let against = scoring
        .truth
        .as_ref()
        .or(scoring.labels.as_ref())
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    Ok(Quality {
        against,
        rows,
        best_k: report["best_k_by_f1"]
            .as_u64()
            .and_then(|k| u32::try_from(k).ok()),
    })
}

fn beginning(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        None => text.to_string(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// Writes the page whole or not at all: a temporary file renamed over the old page on a local
/// disk, a single PUT on an object store.
async fn write_whole(place: &Place, bytes: Vec<u8>) -> Result<()> {
    match place {
        Place::Local(path) => crate::engine::partial_file::write_atomically(path, &bytes),
        Place::Remote(url) => Remote::open(url)?.write(bytes).await,
    }
}

/// Hands the page to the desktop's opener; a machine without one gets a note, not an error (the
/// page is written either way).
fn open_in_browser(place: &Place) {
    let Place::Local(path) = place else {
        crate::to_stderr!("neardup: the report is on an object store; download {place} to open it");
        return;
    };
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(opener)
        .arg(path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        crate::to_stderr!(
            "neardup: could not open {} with {opener} ({e}); open it in a browser",
            path.display()
        );
    }
}

/// The time now as RFC 3339 in UTC, to the second.
fn now_rfc3339() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}
