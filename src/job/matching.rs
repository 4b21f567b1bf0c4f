//! Stages 2 to 5, shared by `run` and `match`: distinct fingerprints, the band plan, candidate
//! pairs (in passes), document pairs, clustering and groups.

use datafusion::prelude::SessionContext;

use crate::engine::sql::{Bindings, count_rows, run_stage};
use crate::engine::stages::{self, Stage};
use crate::error::{Error, Result};
use crate::fingerprint::Width;
use crate::index::batch::IndexedBatch;
use crate::job::candidate_scan;
use crate::job::choices::Matching;
use crate::job::clustering;
use crate::job::config::{JobConfig, PlanChoice};
use crate::job::document_pairs;
use crate::job::fingerprint_counts;
use crate::job::numbered_groups;
use crate::job::paired_documents;
use crate::job::params::{Pass, SourceParams, StageParams};
use crate::job::plan_sample;
use crate::job::stopwatch::Stopwatch;
use crate::job::summary::PlanReport;
use crate::job::verify;

/// Rows (fingerprints times tables) one candidate pass holds at most: plans with many tables
/// run in several passes, so memory stays bounded whatever the plan.
pub const ROWS_PER_PASS: u64 = 32 << 20;

/// What the documents are matched against besides each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Against {
    /// Nothing: a run on its own.
    Nothing,
    /// A signature index with no batch yet: matched as a run on its own, grouped as a batch.
    EmptyIndex,
    /// A signature index with batches: the `_index` stages.
    Index,
}

impl Against {
    pub fn of(batch: Option<&IndexedBatch>) -> Self {
        match batch {
            None => Against::Nothing,
            Some(batch) if batch.index.batches.is_empty() => Against::EmptyIndex,
            Some(_) => Against::Index,
        }
    }

    /// The stage for candidates. Against an index with batches only pairs with a fresh
    /// fingerprint are looked for; the first batch of an index is matched like a run.
    fn candidates_stage(self, matching: Matching) -> Stage {
        match self {
            Against::Nothing | Against::EmptyIndex => matching.candidates_stage(),
            Against::Index => matching.candidates_index_stage(),
        }
    }

    /// Stage 2: the documents and their distinct fingerprints, with the indexed ones against
    /// an index with batches (sql/02_fingerprints_index.sql), else this run's alone
    /// (`fingerprint_counts`). Returns the planner's sample where it was kept on the way.
    async fn write_fingerprints(
        self,
        ctx: &SessionContext,
        bindings: &Bindings,
        on_cluster: bool,
    ) -> Result<Option<Vec<u128>>> {
        match self {
            Against::Index => {
                run_stage(ctx, &stages::FINGERPRINTS_INDEX, bindings).await?;
                Ok(None)
            }
            Against::Nothing | Against::EmptyIndex => {
                fingerprint_counts::write(ctx, bindings, on_cluster).await
            }
        }
    }

    /// Stage 5: `groups`. A run on its own numbers them by sorting where it can
    /// (`numbered_groups`); a batch of an index keeps the index's group ids
    /// (sql/05_groups_index.sql).
    async fn write_groups(
        self,
        ctx: &SessionContext,
        bindings: &Bindings,
        config: &JobConfig,
    ) -> Result<()> {
        match self {
            Against::Nothing => {
                let sortable = config.console.cluster.is_none()
                    && config.keep.is_first()
                    && config.width == Width::Bits64;
                numbered_groups::write(ctx, bindings, sortable).await
            }
            Against::EmptyIndex | Against::Index => {
                run_stage(ctx, &stages::GROUPS_INDEX, bindings).await
            }
        }
    }
}

/// Stages 2 to 5: fingerprints, the band plan, candidates (in passes), pairs, clustering,
/// groups. Returns the plan as it ran.
pub async fn run_matching(
    ctx: &SessionContext,
    config: &JobConfig,
    params: &StageParams,
    against: Against,
    clock: &mut Stopwatch,
) -> Result<PlanReport> {
    let candidates = against.candidates_stage(config.matching);
    let bindings = params.bindings();
    let on_cluster = config.console.cluster.is_some();
    let distinct = against.write_fingerprints(ctx, &bindings, on_cluster);
    let sample = clock.time("fingerprints", distinct).await?;
    let report = clock
        .time(
            "plan",
            choose_plan(ctx, &config.plan, config.k, config.width, sample),
        )
        .await?;
    let quiet = config.console.quiet;
    if !quiet {
        crate::to_stderr!(
            "neardup: plan {} ({}): {} tables in {} pass{}, candidates estimated: {}",
            report.plan,
            report.chosen_by,
            report.tables,
            report.passes,
            if report.passes == 1 { "" } else { "es" },
            crate::planner::approximately(report.estimated_candidates)
        );
    }
    // A run on its own in this process scans the tables in memory; the rest (a cluster, an
    // index with batches, 128-bit fingerprints, `--matching join`, a pool without room) runs
    // the SQL in passes.
    let in_memory = !on_cluster
        && against != Against::Index
        && config.width == Width::Bits64
        && config.matching == Matching::Scan
        && !candidates_in_sql();
    let passes = async {
        if in_memory && candidate_scan::write(ctx, &bindings, &report.plan, config.k).await? {
            return run_stage(ctx, &stages::CANDIDATES_TABLE, &bindings).await;
        }
        let bar = crate::progress::StageBar::passes(report.passes as u64, !quiet);
        let per_pass = report.tables.div_ceil(report.passes.max(1));
        for pass in 0..report.passes {
            let from = 1 + pass * per_pass;
            let to = (from + per_pass).min(report.tables + 1);
            let mut bindings = bindings.clone();
            Pass {
                plan: &report.plan,
                bands: from..to,
            }
            .bind(&mut bindings);
            run_stage(ctx, &candidates, &bindings).await?;
            bar.advance();
        }
        run_stage(ctx, &stages::CANDIDATES_TABLE, &bindings).await
    };
    clock.time("candidates", passes).await?;
    // Fingerprints given and no index: no document has a sketch to verify with.
    let sketches =
        matches!(params.source, SourceParams::Texts { .. }) || against != Against::Nothing;
    let verification = async {
        match sketches {
            true => verify::verify(ctx, &bindings, config.width, on_cluster).await,
            false => run_stage(ctx, &stages::VERIFY_NONE, &bindings).await,
        }
    };
    clock.time("verify", verification).await?;
    let pairs = async {
        paired_documents::write(ctx, &bindings, config.width, on_cluster).await?;
        // Listed in this process where it can hold the paired documents.
        if !on_cluster && document_pairs::write(ctx, &bindings, config.width, config.pairs).await? {
            return Ok(());
        }
        run_stage(ctx, &config.pairs.stage(), &bindings).await
    };
    clock.time("pairs", pairs).await?;
    let indexed = against != Against::Nothing;
    let components = clustering::components(ctx, config.clustering, params, indexed);
    clock.time("clustering", components).await?;
    let grouping = against.write_groups(ctx, &bindings, config);
    clock.time("groups", grouping).await?;
    Ok(report)
}

/// The plan asked for, or the planner's cheapest for the fingerprints at hand (their number, and
/// a sample of them for real key sizes), with the passes that keep rows per pass bounded.
async fn choose_plan(
    ctx: &SessionContext,
    choice: &PlanChoice,
    k: u32,
    width: Width,
    sample: Option<Vec<u128>>,
) -> Result<PlanReport> {
    let n = count_rows(ctx, "fingerprints").await?;
    let sample = match sample {
        Some(kept) => kept,
        None => plan_sample::sample_fingerprints(ctx, width).await?,
    };
    let estimates = crate::planner::estimate(choice.plans.clone(), n, &sample);
    log::debug!(
        "plans for k = {k}, {n} distinct fingerprints, {} sampled:\n{}",
        sample.len(),
        crate::planner::table(&estimates)
    );
    let best = estimates.into_iter().next().ok_or_else(|| {
        Error::Usage(format!(
            "--plan {}: no such plan is exact for k = {k}",
            choice.spec
        ))
    })?;
    let tables = best.plan.tables();
    Ok(PlanReport {
        plan: best.plan.to_string(),
        chosen_by: choice.chosen_by.to_string(),
        tables,
        passes: passes(n, tables).1,
        estimated_rows: best.rows,
        estimated_candidates: best.candidates,
    })
}

/// Tables per candidate pass and passes, for `n` fingerprints in `tables` tables: as many tables
/// as keep a pass within the rows per pass, at least one.
pub fn passes(n: u64, tables: usize) -> (usize, usize) {
    let per_pass = (rows_per_pass() / n.max(1)).clamp(1, tables.max(1) as u64) as usize;
    (per_pass, tables.div_ceil(per_pass))
}

/// `NEARDUP_CANDIDATES=sql`, a test hook: the candidates by the SQL aggregate, in passes, as a
/// cluster finds them, rather than in memory.
fn candidates_in_sql() -> bool {
    std::env::var("NEARDUP_CANDIDATES").is_ok_and(|v| v == "sql")
}

/// `ROWS_PER_PASS`, or `NEARDUP_ROWS_PER_PASS` (a test hook: small values force many passes).
fn rows_per_pass() -> u64 {
    std::env::var("NEARDUP_ROWS_PER_PASS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROWS_PER_PASS)
}
