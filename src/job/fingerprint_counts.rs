//! Stage 2 in this process: the distinct fingerprints and how many documents have each, counted
//! by sorting every document's fingerprint (sql/02_fingerprint_values.sql,
//! `crate::job::value_buckets`) and written by sql/02_fingerprints_counted.sql: the same table
//! as sql/02_fingerprints.sql's grouping, which a cluster runs, and which runs here too for
//! 128-bit fingerprints or when the memory pool refuses the values. The grouping took
//! 0.31 s of 4M fingerprints' `match` and held a hash table of every fingerprint (4.2 GiB at
//! 100M); the values are 8 bytes each.

use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::MemTable;
use datafusion::error::Result as DataFusionResult;
use datafusion::prelude::SessionContext;

use crate::engine::sql::{Bindings, run_stage, stage_frame};
use crate::engine::stages;
use crate::error::{QueryContext, Result};
use crate::job::plan_sample::BottomK;
use crate::job::value_buckets;

/// The table sql/02_fingerprints_counted.sql reads.
const TABLE: &str = "fingerprint_counts";

/// Rows per batch of `TABLE`.
const BATCH_ROWS: usize = 1 << 20;

/// Writes `documents` and `fingerprints` for a run without an index, or the first batch of one.
/// Where the fingerprints were counted here, also returns the planner's sample of them
/// (`crate::job::plan_sample`), kept as each bucket was counted: what reading the table back
/// would give.
pub async fn write(
    ctx: &SessionContext,
    bindings: &Bindings,
    on_cluster: bool,
) -> Result<Option<Vec<u128>>> {
    run_stage(ctx, &stages::DOCUMENTS, bindings).await?;
    let values = stage_frame(ctx, &stages::FINGERPRINT_VALUES, bindings).await?;
    let sortable = !on_cluster && values.schema().field(0).data_type() == &DataType::UInt64;
    let name = stages::FINGERPRINT_VALUES.name;
    let gathered = if sortable {
        value_buckets::gather(
            ctx,
            values,
            name,
            "fingerprint counts",
            value_buckets::unsigned,
        )
        .await?
    } else {
        None
    };
    // 128-bit fingerprints, a cluster, or no room for the values: the grouping, which spills.
    let Some(gathered) = gathered else {
        run_stage(ctx, &stages::FINGERPRINTS, bindings).await?;
        return Ok(None);
    };
    let what = || stages::FINGERPRINTS_COUNTED.name.to_string();
    let schema = Arc::new(Schema::new(vec![
        Field::new("simhash", DataType::UInt64, false),
        Field::new("document_count", DataType::Int64, false),
    ]));
    let counted = {
        let schema = Arc::clone(&schema);
        move |sorted: &[u64]| counted_batches(sorted, &schema)
    };
    let counted = value_buckets::sort_each(gathered.buckets, counted)
        .await
        .context(what)?;
    let mut sample = BottomK::new(crate::planner::SAMPLE);
    let mut partitions = Vec::with_capacity(counted.len());
    for (batches, bucket_sample) in counted {
        partitions.push(batches);
        sample.merge(bucket_sample);
    }
    let rows: usize = partitions.iter().flatten().map(RecordBatch::num_rows).sum();
    gathered
        .reservation
        .resize(rows * (size_of::<u64>() + size_of::<i64>()));
    let table = MemTable::try_new(schema, partitions).context(what)?;
    ctx.register_table(TABLE, Arc::new(table)).context(what)?;
    let written = run_stage(ctx, &stages::FINGERPRINTS_COUNTED, bindings).await;
    ctx.deregister_table(TABLE).context(what)?;
    written.map(|()| Some(sample.into_values()))
}

/// Each distinct value of sorted `values` with how often it occurs, in batches of `schema`, and
/// the planner's sample of the distinct values.
fn counted_batches(
    values: &[u64],
    schema: &Arc<Schema>,
) -> DataFusionResult<(Vec<RecordBatch>, BottomK)> {
    let mut sample = BottomK::new(crate::planner::SAMPLE);
    let mut batches = Vec::new();
    let mut fingerprints: Vec<u64> = Vec::new();
    let mut counts: Vec<i64> = Vec::new();
    for run in values.chunk_by(|a, b| a == b) {
        sample.offer(u128::from(run[0]));
        fingerprints.push(run[0]);
        counts.push(i64::try_from(run.len()).unwrap_or(i64::MAX));
        if fingerprints.len() == BATCH_ROWS {
            batches.push(batch(schema, &mut fingerprints, &mut counts)?);
        }
    }
    if !fingerprints.is_empty() {
        batches.push(batch(schema, &mut fingerprints, &mut counts)?);
    }
    Ok((batches, sample))
}

/// A batch of `TABLE` taking the fingerprints and counts gathered so far.
fn batch(
    schema: &Arc<Schema>,
    fingerprints: &mut Vec<u64>,
    counts: &mut Vec<i64>,
) -> DataFusionResult<RecordBatch> {
    let columns: Vec<Arc<dyn Array>> = vec![
        Arc::new(UInt64Array::from(std::mem::take(fingerprints))),
        Arc::new(Int64Array::from(std::mem::take(counts))),
    ];
    Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{AsArray, BooleanArray, FixedSizeBinaryArray, StringArray};
    use datafusion::arrow::datatypes::UInt64Type;

    use super::*;
    use crate::engine::sql::folder_literal;
    use crate::fingerprint::Width;
    use crate::job::plan_sample::sample_fingerprints;
    use crate::job::test_session;
    use crate::rng::SplitMix64;
    use crate::storage::Place;

    /// A session with `signatures` of `simhashes` in two partitions, bound to write into `dir`.
    fn session(
        simhashes: &[Option<u64>],
        pool: Option<usize>,
        dir: &Place,
    ) -> (SessionContext, Bindings) {
        let ctx = test_session::context(pool);
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("simhash", DataType::UInt64, true),
            Field::new("input_order", DataType::Int64, false),
            Field::new("sketch", DataType::FixedSizeBinary(4), false),
        ]));
        let half = simhashes.len() / 2;
        let partitions = [&simhashes[..half], &simhashes[half..]]
            .into_iter()
            .enumerate()
            .map(|(part, values)| {
                let ids = (0..values.len()).map(|row| format!("{part}-{row}"));
                let columns: Vec<Arc<dyn Array>> = vec![
                    Arc::new(StringArray::from_iter_values(ids)),
                    Arc::new(UInt64Array::from(values.to_vec())),
                    Arc::new(Int64Array::from_iter_values(0..values.len() as i64)),
                    Arc::new(
                        FixedSizeBinaryArray::try_from_iter(values.iter().map(|_| [0u8; 4]))
                            .unwrap(),
                    ),
                ];
                vec![RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()]
            })
            .collect();
        let table = MemTable::try_new(schema, partitions).unwrap();
        ctx.register_table("signatures", Arc::new(table)).unwrap();
        let mut bindings = Bindings::default();
        bindings
            .set("batch", "0")
            .set("keep_key", "NULL")
            .set(
                "fingerprints_dir",
                folder_literal(&dir.join("fingerprints")),
            )
            .set("work_table_options", test_session::work_table_options());
        (ctx, bindings)
    }

    /// `fingerprints`, sorted: (simhash, document_count, fresh).
    async fn fingerprints_table(ctx: &SessionContext) -> Vec<(u64, i64, bool)> {
        let batches = ctx
            .sql("SELECT simhash, document_count, fresh FROM fingerprints")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let mut rows = Vec::new();
        for batch in batches {
            let simhash = batch.column(0).as_primitive::<UInt64Type>();
            let count = batch
                .column(1)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let fresh = batch
                .column(2)
                .as_any()
                .downcast_ref::<BooleanArray>()
                .unwrap();
            for row in 0..batch.num_rows() {
                rows.push((simhash.value(row), count.value(row), fresh.value(row)));
            }
        }
        rows.sort_unstable();
        rows
    }

    /// The table counted here, and by the grouping (what a cluster runs). Counting here also
    /// keeps the planner's sample, which must be the one read back from the table written.
    async fn both_ways(
        simhashes: &[Option<u64>],
    ) -> (Vec<(u64, i64, bool)>, Vec<(u64, i64, bool)>) {
        let dir = tempfile::tempdir().unwrap();
        let mut tables = Vec::new();
        for (name, on_cluster) in [("sorted", false), ("grouped", true)] {
            let place = Place::Local(dir.path().join(name));
            let (ctx, bindings) = session(simhashes, None, &place);
            let kept = write(&ctx, &bindings, on_cluster).await.unwrap();
            let read_back = sample_fingerprints(&ctx, Width::Bits64).await.unwrap();
            let table = fingerprints_table(&ctx).await;
            assert_eq!(read_back.len(), table.len().min(crate::planner::SAMPLE));
            match on_cluster {
                false => assert_eq!(kept, Some(read_back)),
                true => assert_eq!(kept, None),
            }
            tables.push(table);
        }
        let grouped = tables.pop().unwrap();
        (tables.pop().unwrap(), grouped)
    }

    #[tokio::test]
    async fn counts_by_sorting_are_the_groupings_counts() {
        // A hand-checked case: 7 twice (once in each partition), 3 once, NULL left out.
        let (sorted, grouped) = both_ways(&[Some(7), Some(3), None, Some(7)]).await;
        assert_eq!(sorted, [(3, 1, true), (7, 2, true)]);
        assert_eq!(grouped, sorted);
        // Random fingerprints with many repeats, past a batch of `TABLE`, against the grouping.
        let mut random = SplitMix64(8);
        let simhashes: Vec<Option<u64>> = (0..BATCH_ROWS + 5000)
            .map(|_| match random.below(100) {
                0 => None,
                1..=50 => Some(random.below(1000) as u64),
                _ => Some(random.next_u64()),
            })
            .collect();
        let (sorted, grouped) = both_ways(&simhashes).await;
        let rows: i64 = sorted.iter().map(|row| row.1).sum();
        assert_eq!(rows as usize, simhashes.iter().flatten().count());
        assert_eq!(sorted, grouped);
    }

    #[tokio::test]
    async fn without_memory_for_the_values_the_grouping_runs() {
        // 16 bytes cannot hold three fingerprints: `gather` gives up and the grouping, which
        // cannot run in 16 bytes either, names its stage. A MiB holds them.
        let dir = tempfile::tempdir().unwrap();
        let place = Place::Local(dir.path().to_path_buf());
        let (ctx, bindings) = session(&[Some(7), Some(3), None, Some(7)], Some(16), &place);
        let e = write(&ctx, &bindings, false).await.unwrap_err().to_string();
        assert!(e.contains(stages::FINGERPRINTS.name), "{e}");
        let (ctx, bindings) = session(&[Some(7), Some(3), None, Some(7)], Some(1 << 20), &place);
        write(&ctx, &bindings, false).await.unwrap();
        assert_eq!(fingerprints_table(&ctx).await, [(3, 1, true), (7, 2, true)]);
    }
}
