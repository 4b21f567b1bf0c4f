//! The near-duplicate job, `neardup run` and `neardup match` alike (they differ only in their
//! `Source`): checks the input, runs the SQL stages of `sql/` in order in one session, clusters
//! between them, and writes the outputs whole or not at all.
//!
//! The sequence, each step in one module: the corpus and its ids (`source`, stage 0), the
//! signatures (stage 1, here), the matching (`matching`: stages 2 to 5, with `clustering`), the
//! deduplicated corpus (stage 6, here), the counts (`counts`), and the summary and the commit
//! (`finish`), which adds the batch to a signature index last (`crate::index`).

mod candidate_scan;
pub mod choices;
pub mod clustering;
pub mod config;
mod cores;
pub mod counts;
mod document_pairs;
mod fingerprint_counts;
mod finish;
mod ids;
pub mod keep;
pub mod matching;
mod numbered_groups;
mod paired_documents;
pub mod params;
pub mod plan_sample;
pub mod source;
pub mod stopwatch;
pub mod summary;
#[cfg(test)]
mod test_session;
mod value_buckets;
mod verify;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigNonZeroUsize;
use datafusion::prelude::SessionContext;

pub use config::{IndexOptions, JobConfig, JobRequest, Source};

use crate::delta::output::DeltaStaging;
use crate::engine::caught_panics;
use crate::engine::commit::Staging;
use crate::engine::on_demand::OnDemand;
use crate::engine::row_slices::CutEveryScan;
use crate::engine::session::{ONE_TABLE_BYTES, job_session, joins_probe_one_table};
use crate::engine::sql::{Bindings, first_value, query_stage, run_stage, run_stage_with};
use crate::engine::stages;
use crate::error::{Error, Result};
use crate::index::IndexMeta;
use crate::index::batch::IndexedBatch;
use crate::input::{self, Corpus};
use crate::job::matching::Against;
use crate::job::params::StageParams;
use crate::job::stopwatch::Stopwatch;
use crate::job::summary::{PlanReport, Summary};

/// Rows per batch while documents are fingerprinted. DataFusion's 8,192 suit narrow rows; 8,192
/// documents are megabytes of text and a quarter of a second of fingerprinting, so at the end
/// of the stage one core finished the last batch alone. 2,048 keep both busy to the end and
/// hold less text in flight (docs/BENCHMARKS.md: about 9% less time and 10% less memory).
pub const TEXT_BATCH_ROWS: usize = 2048;

/// Rows per batch when a file has too few row groups to split by them, and the cores take the
/// batches on demand (`crate::engine::on_demand`): a core that drew a batch of costly pages
/// (Traditional ones, long ones) is the last to finish by at most one batch, so smaller batches
/// even the shares out. When the batches were dealt in turn, debian_docs (one row group, 18,726
/// documents) on 2 threads took 0.57-0.61 s with 256 rows against 0.65-0.79 s with 2,048
/// (`neardup query`, three runs each).
pub const DEALT_TEXT_BATCH_ROWS: usize = 256;

/// Outputs of the signature stage per core where the cores take the batches on demand
/// (`crate::engine::on_demand`). In perf's per-thread timeline of debian_docs (one row group)
/// on two threads with one output per core, one core sat idle 5-10 ms at a time while the
/// other decompressed a page of the texts inside its output's poll; with two per core, over
/// one row range per core, the stage took 0.158-0.185 s against 0.177-0.192 s (medians 0.166
/// and 0.190, six alternating rounds; two per core over four ranges 0.168-0.187 s; eight
/// outputs over eight ranges 0.201-0.224 s). One thread is left alone: two outputs there took
/// 0.291-0.322 s against 0.280-0.297 s.
const OUTPUTS_PER_CORE: usize = 2;

/// Runs the job: its outputs are committed under `config.output` when it returns the summary.
pub async fn run(config: &JobConfig) -> Result<Summary> {
    let mut clock = Stopwatch::new(config.console.quiet, config.console.cluster.is_none());
    if let (Source::Texts { .. }, None) = (&config.source, &config.console.cluster) {
        // The cleaning's tables (tens of milliseconds on one core) are built while the input is
        // checked, rather than by the first batch while the other cores wait on them. The
        // featurizer itself is built by `source::check_columns`.
        std::thread::spawn(crate::text::build_cleaning_tables);
    }
    let inputs = input::resolve_inputs(
        &config.inputs,
        config.input_format,
        config.source.output_table(),
    )
    .await?;
    let mut corpus = input::inspect(inputs.files).await?;
    corpus.delta_tables = inputs.delta_tables;
    source::check_places(config, &corpus)?;
    let source::Checked {
        params: source_params,
        id_type,
        feature_files,
    } = source::check_columns(config, &corpus)?;
    let settings = IndexMeta::new(
        config.width.bits(),
        config.k,
        &config.source.features(),
        &id_type,
        feature_files.clone(),
        config.verify,
    );
    let batch = IndexedBatch::open(config.index.as_ref(), settings).await?;
    let mut staging = Staging::create(
        &config.output,
        config.overwrite,
        config.delta,
        config.source.command(),
    )
    .await?;
    if let (Staging::Delta(delta), Some(batch)) = (&mut staging, &batch) {
        delta.set_batch(batch.number);
    }
    let ctx = job_session(&config.console).await?;
    let mut params = StageParams {
        dir: staging.place(),
        id_column: config.id_column.clone(),
        k: config.k,
        width: config.width,
        source: source_params,
        index: None,
        verify: config.verify,
        keep: config.keep.clone(),
    };
    let work = async {
        let on_cluster = config.console.cluster.is_some();
        let text_column = match &config.source {
            Source::Texts { text_column, .. } => Some(text_column.as_str()),
            Source::Fingerprints { .. } => None,
        };
        source::register_corpus(&ctx, &corpus, on_cluster, text_column).await?;
        if let Some(batch) = &batch {
            params.index = Some(batch.prepare(&ctx, &id_type, config.width).await?);
        }
        // A reader that stops (panics) on a damaged input file, in any stage, is reported as
        // that file's error below.
        let appended = match &staging {
            Staging::Delta(delta) => Some(Appended {
                delta,
                id_type: &id_type,
            }),
            _ => None,
        };
        let stages = run_stages(
            &ctx,
            config,
            &corpus,
            batch.as_ref(),
            appended,
            &params,
            &mut clock,
        );
        let ran = caught_panics::catch_async(stages)
            .await
            .unwrap_or_else(|stopped| Err(Error::Internal(format!("a stage panicked: {stopped}"))));
        let plan = match ran {
            Ok(plan) => plan,
            Err(e) => {
                let batch = batch.as_ref();
                let console = &config.console;
                return Err(source::name_corrupt_input(&ctx, e, &corpus, batch, console).await);
            }
        };
        let counts = counts::count(&ctx, &params).await?;
        Ok((plan, counts))
    };
    let (plan, counts) = match work.await {
        Ok(done) => done,
        Err(e) => {
            // A local staging folder goes when dropped; a run prefix on a store is removed here.
            staging.abandon().await;
            if let Some(batch) = batch {
                batch.abandon().await;
            }
            return Err(e);
        }
    };
    let done = finish::Finished {
        command: config.source.command(),
        parameters: finish::parameters(config, feature_files),
        plan,
        corpus: &corpus,
        counts,
    };
    finish::finish_batch(&ctx, staging, batch, &params, done, clock).await
}

/// Delta tables the run appends to, and the type of the run's ids.
struct Appended<'a> {
    delta: &'a DeltaStaging,
    id_type: &'a DataType,
}

/// Stages 0 to 6. Returns the band plan as it ran.
async fn run_stages(
    ctx: &SessionContext,
    config: &JobConfig,
    corpus: &Corpus,
    batch: Option<&IndexedBatch>,
    appended: Option<Appended<'_>>,
    params: &StageParams,
    clock: &mut Stopwatch,
) -> Result<PlanReport> {
    let bindings = params.bindings();
    let on_cluster = config.console.cluster.is_some();
    let ids = async {
        source::check_ids(ctx, corpus, &bindings, batch, &config.id_column, on_cluster).await?;
        // After the index's own check, whose message is the one for ids it holds.
        if let Some(Appended { delta, id_type }) = appended {
            // The Delta table's provider lives in this process, which a cluster's session
            // cannot plan over: there the check runs in a session of its own here.
            let local;
            let check_ctx = match on_cluster {
                true => {
                    local = crate::engine::session::session_context()?;
                    source::register_corpus(&local, corpus, false, None).await?;
                    &local
                }
                false => ctx,
            };
            delta
                .refuse_ids_already_there(check_ctx, id_type, &bindings)
                .await?;
        }
        Ok(())
    };
    clock.time("check ids", ids).await?;
    match &config.source {
        Source::Texts { .. } => {
            // The count of documents signed lives in the process that signs them.
            let show = !config.console.quiet && config.console.cluster.is_none();
            let partitions = ctx.state().config().target_partitions();
            let split = source::split_scans(corpus, on_cluster, partitions);
            // The on-demand hand-off is this process's own operator, which a cluster's
            // executors do not have.
            let on_demand = !on_cluster;
            let signatures = sign_texts(ctx, &bindings, corpus.rows, split, on_demand, show);
            clock.time("signatures", signatures).await?;
        }
        // A view over the fingerprints given: nothing worth timing.
        Source::Fingerprints { .. } => run_stage(ctx, &stages::SIGNATURES_GIVEN, &bindings).await?,
    }
    let against = Against::of(batch);
    let plan = matching::run_matching(ctx, config, params, against, clock).await?;
    if let Source::Texts { .. } = config.source {
        let dedup = write_dedup(ctx, &bindings, corpus.rows, on_cluster);
        clock.time("dedup", dedup).await?;
    }
    Ok(plan)
}

/// Stage 1 of `run`: every document's signature, in batches of `TEXT_BATCH_ROWS`. With `split`
/// (rows numbered by their file's row index) the reading of one file is spread over that many
/// partitions too: DataFusion gives each a range of its row groups. Without, the batches are of
/// `DEALT_TEXT_BATCH_ROWS` and, with `on_demand` (in this process), handed on demand
/// (`crate::engine::on_demand`) to `OUTPUTS_PER_CORE` outputs per core, over a Parquet file cut
/// into as many row ranges as cores.
async fn sign_texts(
    ctx: &SessionContext,
    bindings: &Bindings,
    rows: u64,
    split: Option<usize>,
    on_demand: bool,
    show: bool,
) -> Result<()> {
    let _bar = crate::progress::StageBar::documents(rows, show);
    run_stage_with(ctx, &stages::SIGNATURES, bindings, |options| {
        let rows = match split {
            Some(_) => TEXT_BATCH_ROWS,
            None => DEALT_TEXT_BATCH_ROWS,
        };
        options.execution.batch_size = ConfigNonZeroUsize::try_new(rows)?;
        options.optimizer.repartition_file_scans = split.is_some();
        if let Some(partitions) = split {
            options.execution.target_partitions = partitions;
        }
        // Where DataFusion would deal the batches out in turn, each core takes the next when
        // it is ready for one, and a Parquet file is read in row ranges by every core.
        if on_demand {
            let cores = options.execution.target_partitions;
            // Two outputs per core, over one row range per core: when one output's poll
            // decompresses a page of the texts and fingerprints its batch (milliseconds
            // on end), the core the writer's task left idle has another output to run.
            if split.is_none() && cores > 1 {
                options.execution.target_partitions = OUTPUTS_PER_CORE * cores;
            }
            options.extensions.insert(OnDemand {
                enabled: true,
                slices: cores,
            });
        }
        Ok(())
    })
    .await
}

/// Stage 6: the deduplicated corpus. Two ways write the same rows; which is faster depends on
/// how many are removed (sql/06_dedup_kept.sql says what was measured). Against an index
/// `groups` also holds indexed members, which only moves the choice, never the rows.
async fn write_dedup(
    ctx: &SessionContext,
    bindings: &Bindings,
    documents: u64,
    on_cluster: bool,
) -> Result<()> {
    let counts = query_stage(ctx, &stages::DEDUP_REMOVED, bindings).await?;
    let (removed, text_bytes) = (first_value(&counts, 0)?, first_value(&counts, 1)?);
    let (removed_id_bytes, id_bytes) = (first_value(&counts, 2)?, first_value(&counts, 3)?);
    let row_group_rows = dedup_row_group_rows(text_bytes, documents);
    let kept_few = removed.saturating_mul(3) >= documents.saturating_mul(2);
    // The ids the stage joins to the corpus: those removed, or with the other way those kept.
    let joined_id_bytes = match kept_few {
        true => id_bytes.saturating_sub(removed_id_bytes),
        false => removed_id_bytes,
    };
    let one_table = !on_cluster && joined_id_bytes < ONE_TABLE_BYTES as u64;
    let stage = if kept_few {
        &stages::DEDUP_KEPT
    } else {
        &stages::DEDUP
    };
    run_stage_with(ctx, stage, bindings, |options| {
        options.execution.parquet.pushdown_filters = kept_few;
        // The corpus is read again here, and the rows written need no input order (they go to
        // several files as the writer's partitions take them): each core reads a share of a
        // file's row groups, where one scan per file left the decoding on one core (a million
        // generated documents in one file: the stage took 4.0 s at 0.54 of two cores busy).
        options.optimizer.repartition_file_scans = true;
        if !on_cluster {
            // ... and a file of fewer row groups than cores in row ranges rather than byte
            // ranges: a file of one row group was still decoded by one partition (200,000
            // pages of 241 MB in one row group: the stage took 0.38 s with one of two cores
            // busy).
            options.extensions.insert(CutEveryScan { enabled: true });
        }
        options.execution.parquet.max_row_group_size = row_group_rows;
        if one_table {
            // The ids joined (removed or kept) in one table: a partitioned join first moved
            // every corpus row, text and all, to the core holding its id's share (at 10M
            // generated documents all 19.5 GB of texts once more).
            joins_probe_one_table(options);
        }
        Ok(())
    })
    .await
}

/// Texts a row group of the deduplicated corpus holds, in bytes: the Parquet writer keeps a
/// row group in memory until it is full, and with DataFusion's million rows of about 2,000-byte
/// texts the stage peaked at 5.3 GiB against 1.6 with 131,072 rows, and took longer (10M
/// generated documents, docs/BENCHMARKS.md). Only the texts are counted: other wide columns
/// of the corpus make the row groups larger.
const DEDUP_ROW_GROUP_TEXT_BYTES: u64 = 128 << 20;

/// Rows per row group of the deduplicated corpus: `DEDUP_ROW_GROUP_TEXT_BYTES` of texts at the
/// corpus's average length, between 4,096 rows and DataFusion's default of a million.
fn dedup_row_group_rows(text_bytes: u64, documents: u64) -> usize {
    let average = text_bytes.div_ceil(documents.max(1)).max(1);
    (DEDUP_ROW_GROUP_TEXT_BYTES / average).clamp(4_096, 1 << 20) as usize
}

#[cfg(test)]
mod tests {
    use super::dedup_row_group_rows;

    #[test]
    fn row_groups_of_the_deduplicated_corpus_hold_about_128_mib_of_text() {
        // 900-byte texts: 149,130 rows (128 MiB / 900, the average rounded up).
        assert_eq!(dedup_row_group_rows(900 * 10_000_000, 10_000_000), 149_130);
        // Tweets reach DataFusion's million; books stay at 4,096 rows.
        assert_eq!(dedup_row_group_rows(50 * 1_000, 1_000), 1 << 20);
        assert_eq!(dedup_row_group_rows(1 << 30, 10), 4_096);
        // No documents, or no text: the million.
        assert_eq!(dedup_row_group_rows(0, 0), 1 << 20);
    }
}
