//! The end of a job: the summary (parameters, counts, stage times), the commit of the outputs,
//! and then the batch's part of a signature index, so that a batch is in the index only once
//! its outputs are in place.

use datafusion::prelude::SessionContext;

use std::collections::BTreeMap;

use crate::delta::output::Committed;
use crate::engine::commit::Staging;
use crate::engine::sql::{first_unsigned, query_stage, run_stage};
use crate::engine::stages;
use crate::engine::staging::SUMMARY_FILE;
use crate::error::{Error, Result};
use crate::index::batch::IndexedBatch;
use crate::index::{BatchMeta, BatchStaging, Index};
use crate::input::Corpus;
use crate::job::config::{JobConfig, Source};
use crate::job::params::{StageParams, WORK_DIR};
use crate::job::stopwatch::Stopwatch;
use crate::job::summary::{Counts, IndexReport, Parameters, PlanReport, Summary};
use crate::storage::Place;

/// summary.json's parameters for the job as it was configured.
pub(super) fn parameters(
    config: &JobConfig,
    feature_files: std::collections::BTreeMap<String, String>,
) -> Parameters {
    let partition_by = match &config.source {
        Source::Texts { partition_by, .. } => partition_by.clone(),
        Source::Fingerprints { .. } => Vec::new(),
    };
    Parameters {
        k: config.k,
        matching: config.matching,
        pairs: config.pairs,
        clustering: config.clustering,
        id_column: config.id_column.clone(),
        source_column: config.source.column().to_string(),
        fingerprint_bits: config.width.bits(),
        bands: config.width.bands() as u32,
        min_similarity: config.verify,
        features: config.source.features(),
        keep: config.keep.to_string(),
        partition_by,
        feature_files,
        cluster: config.console.cluster.as_ref().map(ToString::to_string),
    }
}

/// What a finished job reports, before its outputs are committed.
pub(super) struct Finished<'a> {
    pub command: &'static str,
    pub parameters: Parameters,
    pub plan: PlanReport,
    pub corpus: &'a Corpus,
    pub counts: Counts,
}

/// Writes the index part (with `--update-index`), commits the outputs, then the index part:
/// a batch is in the index only once its outputs are in place, so a failed run can be run
/// again as it was.
pub(super) async fn finish_batch(
    ctx: &SessionContext,
    staging: Staging,
    batch: Option<IndexedBatch>,
    params: &StageParams,
    done: Finished<'_>,
    mut clock: Stopwatch,
) -> Result<Summary> {
    let Some(mut batch) = batch else {
        return Ok(finish(staging, done, None, clock).await?.0);
    };
    let bindings = params.bindings();
    let highest = match query_stage(ctx, &stages::INDEX_NEXT_GROUP, &bindings).await {
        Ok(highest) => highest,
        Err(e) => {
            let part = batch.staging.take();
            return Err(abandon_both(staging, &batch.index, part.as_ref(), e).await);
        }
    };
    let highest = first_unsigned(&highest)?;
    let next_group_id = batch
        .index
        .next_group_id()
        .max(highest.map_or(0, |g| g + 1));
    let report = IndexReport {
        path: batch.index.place.to_string(),
        batch: batch.number,
        indexed_documents: batch.index.documents(),
        updated: batch.staging.is_some(),
        next_group_id,
    };
    let part = batch.staging.take();
    if let Some(staged) = &part {
        let written = clock
            .time("index", run_stage(ctx, &stages::INDEX_BATCH, &bindings))
            .await;
        if let Err(e) = written {
            return Err(abandon_both(staging, &batch.index, Some(staged), e).await);
        }
    }
    let documents = done.counts.documents;
    let inputs = input_names(done.corpus);
    let quiet = clock.quiet;
    let written = staging.target().join(SUMMARY_FILE);
    let (summary, committed) = match finish(staging, done, Some(report), clock).await {
        Ok(finished) => finished,
        Err(e) => {
            if let Some(staged) = &part {
                batch.index.abandon(staged).await;
            }
            return Err(e);
        }
    };
    if let Some(part) = part {
        let meta = BatchMeta {
            batch: batch.number,
            neardup_version: env!("CARGO_PKG_VERSION").to_string(),
            inputs,
            documents,
            next_group_id,
            committed_at: crate::index::now_unix(),
        };
        if let Err(e) = batch.index.commit(part, &batch.settings, &meta).await {
            if committed.output.is_some() {
                // Delta tables go back to the versions before this run, and summary.json with
                // them, so that the run can be repeated as it was (an append would otherwise be
                // made twice).
                committed.roll_back().await;
                return Err(Error::Input(format!(
                    "adding batch {} to the index {} failed: {e}. The Delta tables are back at \
                     their versions before this run; run it again",
                    batch.number, batch.index.place
                )));
            }
            // The outputs are in place; their summary must not claim the batch was added.
            let mut corrected = summary.clone();
            if let Some(index) = &mut corrected.index {
                index.updated = false;
            }
            if let Place::Local(written) = &written {
                let _ = corrected.write(written);
            }
            return Err(Error::Input(format!(
                "the outputs are written, but adding batch {} to the index {} failed: {e}. \
                 Run again with --overwrite to retry (`neardup query --index {} \"SELECT batch \
                 FROM index_batches\"` lists the batches the index holds)",
                batch.number, batch.index.place, batch.index.place
            )));
        }
        if !quiet {
            crate::to_stderr!(
                "neardup: added batch {} ({documents} documents) to {}",
                batch.number,
                batch.index.place
            );
        }
    }
    Ok(summary)
}

/// A batch that fails before its outputs are committed: its staged output and its staged part
/// of the index are removed (on a store; local staging folders go when dropped).
async fn abandon_both(
    staging: Staging,
    index: &Index,
    part: Option<&BatchStaging>,
    error: Error,
) -> Error {
    staging.abandon().await;
    if let Some(part) = part {
        index.abandon(part).await;
    }
    error
}

async fn finish(
    staging: Staging,
    done: Finished<'_>,
    index: Option<IndexReport>,
    clock: Stopwatch,
) -> Result<(Summary, Committed)> {
    if let Err(e) = staging.remove(WORK_DIR).await {
        staging.abandon().await;
        return Err(e);
    }
    let counts = done.counts;
    let mut stages = clock.stages;
    for stage in &mut stages {
        stage.rows = match stage.stage.as_str() {
            "signatures" => Some(counts.documents),
            "fingerprints" => Some(counts.distinct_fingerprints),
            "candidates" => Some(counts.candidate_pairs),
            "verify" => Some(counts.fingerprint_pairs),
            "pairs" => Some(counts.pairs),
            "groups" => Some(counts.grouped_documents),
            "dedup" => counts.documents_kept,
            "index" => Some(counts.documents),
            _ => None,
        };
    }
    let mut summary = Summary {
        neardup_version: env!("CARGO_PKG_VERSION").to_string(),
        command: done.command.to_string(),
        parameters: done.parameters,
        plan: Some(done.plan),
        index,
        inputs: input_names(done.corpus),
        input_formats: done
            .corpus
            .formats
            .iter()
            .map(|f| f.format.to_string())
            .collect(),
        delta_inputs: done.corpus.delta_tables.clone(),
        delta_tables: None,
        counts,
        stages,
        total_seconds: clock.started.elapsed().as_secs_f64(),
        cpu_seconds: Stopwatch::cpu_since(clock.started_cpu),
        peak_rss_bytes: crate::job::summary::peak_rss_bytes(),
    };
    // Delta tables are committed one by one before the summary, which records their versions.
    let mut versions = BTreeMap::new();
    // From the first Delta commit to summary.json, Ctrl-C is left to the commits.
    let _commits = match &staging {
        Staging::Delta(_) => match crate::engine::staging::begin_commits() {
            Ok(commits) => Some(commits),
            Err(e) => {
                staging.abandon().await;
                return Err(e);
            }
        },
        _ => None,
    };
    if let Staging::Delta(delta) = &staging {
        match delta.commit_tables(&summary.parameters.partition_by).await {
            Ok(committed) => versions = committed,
            Err(e) => {
                staging.abandon().await;
                return Err(e);
            }
        }
        summary.delta_tables = Some(versions.clone());
    }
    let json = serde_json::to_string_pretty(&summary)
        .map_err(|e| Error::Internal(format!("writing {SUMMARY_FILE}: {e}")))?;
    let written = staging
        .write_file(SUMMARY_FILE, (json + "\n").into_bytes())
        .await;
    if let Err(e) = written {
        staging.abandon().await;
        return Err(e);
    }
    let (target, mut committed) = staging.commit().await?;
    committed.versions = versions;
    if !clock.quiet {
        crate::to_stderr!("neardup: wrote {target}");
    }
    Ok((summary, committed))
}

fn input_names(corpus: &Corpus) -> Vec<String> {
    corpus.files.iter().map(ToString::to_string).collect()
}
