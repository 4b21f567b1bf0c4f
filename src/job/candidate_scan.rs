//! Stage 3 in this process: the candidate pairs by `band_pairs`'s own sort-and-scan, over the
//! distinct fingerprints read into memory once (sql/03_candidates_in_memory.sql), instead of
//! the aggregate of sql/03_candidates_scan.sql. The aggregate copies every row four times
//! (into its partial groups, out as lists, through the repartition, into the final groups)
//! and runs a pass per `ROWS_PER_PASS` rows; here each core takes a table of the plan, cuts
//! it into key slices (equal keys share a slice) and sorts and scans each slice, and a pair is
//! kept only in the first table it shares, as there. The same pairs, written by
//! sql/03_candidates_found.sql.
//!
//! The memory is the fingerprints (8 bytes each) and, per core, one table's slices (8 bytes a
//! fingerprint again) and the pairs on their way to the writer, counted against the session's
//! pool: where the pool refuses them, the aggregate runs instead, in passes that bound what it
//! holds. Each core hands its pairs to the writer in batches as it finds them
//! (sql/03_candidates_found.sql reads them as a stream): held until the end, the pairs of ten
//! million generated documents (67 million, 16 bytes each, and their batches) raised the peak
//! by 0.85 GiB. What the pool does not see: the pairs of one slice beyond a batch's worth (many
//! near copies sharing one table's key), gathered whole before they are sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt8Array, UInt64Array};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::streaming::StreamingTable;
use datafusion::error::{DataFusionError, Result as DataFusionResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::engine::sql::{Bindings, run_stage, stage_frame};
use crate::engine::stages;
use crate::error::{Error, QueryContext, Result};
use crate::fingerprint::hamming;
use crate::job::value_buckets;
use crate::plan::BandPlan;
use crate::udf::pairs_of_group;

/// The table sql/03_candidates_found.sql reads.
const TABLE: &str = "found_candidates";

/// Key slices per table, as sql/03_candidates_scan.sql's groups: a slice of 100M fingerprints
/// is 3 MB, so its sort stays in a core's cache. A power of two.
const SLICES: usize = 256;

/// Pairs a core gathers before it hands them to the writer as a batch of `TABLE` (a few in
/// tests, so that a core sends many).
const BATCH_ROWS: usize = if cfg!(test) { 16 } else { 1 << 20 };

/// Batches a core may have waiting for the writer before it waits itself.
const BATCHES_WAITING: usize = 2;

/// Bytes of a pair in a batch (two fingerprints and a distance) and while gathered for it.
const PAIR_BYTES: usize = 8 + 8 + 1 + 16;

/// Writes the candidate pairs of `plan` within `k` into the candidate pairs' folder. False,
/// with nothing written, when the pool has no room for the fingerprints, the slices, the pairs
/// on their way and the writer: the aggregate must run.
pub async fn write(ctx: &SessionContext, bindings: &Bindings, plan: &str, k: u32) -> Result<bool> {
    let name = stages::CANDIDATES_IN_MEMORY.name;
    let what = || name.to_string();
    let frame = stage_frame(ctx, &stages::CANDIDATES_IN_MEMORY, bindings).await?;
    let Some(gathered) =
        value_buckets::gather(ctx, frame, name, "candidate scan", value_buckets::unsigned).await?
    else {
        return Ok(false);
    };
    let parsed = BandPlan::cached(plan, 64).map_err(|e| Error::Internal(format!("{name}: {e}")))?;
    let tables = parsed.tables();
    let cores = ctx
        .copied_config()
        .target_partitions()
        .clamp(1, tables.max(1));
    let fingerprints: Vec<Vec<u64>> = gathered.buckets.into_iter().flatten().collect();
    let count: usize = fingerprints.iter().map(Vec::len).sum();
    // Each core holds one table's slices at a time, a copy of every fingerprint, and its pairs
    // gathering or waiting for the writer; each gives its share back when it ends. A batch is
    // counted at BATCH_ROWS pairs, or at the fingerprints' number (65,536 at least) where that
    // is smaller, so that a small run fits a small pool.
    let slices_memory = gathered.reservation.new_empty();
    let batch_bytes = BATCH_ROWS.min(count.max(1 << 16)) * PAIR_BYTES;
    let per_core = count * size_of::<u64>() + (BATCHES_WAITING + 2) * batch_bytes;
    // The writer of sql/03_candidates_found.sql runs while the scans hold their memory: room
    // is left for its open row groups (about two batches a core), or it, rather than the
    // check here, would fail in a pool that only just held the scans.
    let writer = cores * 2 * batch_bytes;
    if slices_memory.try_grow(cores * per_core + writer).is_err() {
        return Ok(false);
    }
    slices_memory.shrink(writer);
    let fingerprints = Arc::new(fingerprints);
    let next_table = Arc::new(AtomicUsize::new(1));
    let mut scans = JoinSet::new();
    let mut streams: Vec<Arc<dyn PartitionStream>> = Vec::with_capacity(cores);
    for _ in 0..cores {
        let (fingerprints, next_table) = (Arc::clone(&fingerprints), Arc::clone(&next_table));
        let (sender, receiver) = mpsc::channel(BATCHES_WAITING);
        streams.push(Arc::new(FoundPairs {
            schema: found_schema(),
            receiver: std::sync::Mutex::new(Some(receiver)),
        }));
        let (plan, mask_of) = (plan.to_string(), Arc::clone(&parsed));
        // One set of slices per core, refilled for each table, and taken here rather than on
        // the blocking thread: glibc gives freed memory back to the arena of the thread that
        // took it, and the runtime's threads, which run the later stages, take it again. Taken
        // on the blocking threads, the slices' memory stayed with them and the later stages'
        // peak rose (at 100M fingerprints under `--memory-limit 4G`, to 4.8 GiB from 4.0).
        let mut slices: Vec<Vec<u64>> = (0..SLICES)
            .map(|_| Vec::with_capacity(slice_capacity(count)))
            .collect();
        let memory = slices_memory.split(per_core);
        scans.spawn_blocking(move || {
            let mut found = Vec::with_capacity(BATCH_ROWS);
            let scan = || loop {
                // The statement reading the pairs has ended (failed): no use going on.
                if sender.is_closed() {
                    return Ok(());
                }
                let table = next_table.fetch_add(1, Ordering::Relaxed);
                let Some(mask) = mask_of.mask(table) else {
                    return Ok(());
                };
                fill_slices(&mut slices, &fingerprints, mask as u64, count);
                for slice in &mut slices {
                    pairs_of_group(slice, table, k, &plan, &mut found)?;
                    if found.len() >= BATCH_ROWS && !send(&sender, &mut found) {
                        return Ok(());
                    }
                }
            };
            // A panic is sent as an error too: with the sender merely dropped, the statement
            // would end as if the scan had found every pair.
            let scanned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(scan))
                .unwrap_or_else(|_| {
                    Err(DataFusionError::Internal(format!(
                        "{TABLE}: a scan panicked"
                    )))
                });
            // The last pairs, or the error, which fails the statement that reads them. A send
            // that fails means the statement has ended (its own error says why).
            match scanned {
                Ok(()) => send(&sender, &mut found),
                Err(e) => sender.blocking_send(Err(e)).is_ok(),
            };
            drop(memory);
        });
    }
    let table = StreamingTable::try_new(found_schema(), streams).context(what)?;
    ctx.register_table(TABLE, Arc::new(table)).context(what)?;
    let written = run_stage(ctx, &stages::CANDIDATES_FOUND, bindings).await;
    // Dropping the table drops the receivers, so that a scan waiting to send ends.
    ctx.deregister_table(TABLE).context(what)?;
    while let Some(done) = scans.join_next().await {
        done.map_err(|e| Error::Internal(format!("{name}: {e}")))?;
    }
    drop(slices_memory);
    drop(fingerprints);
    drop(gathered.reservation);
    written.map(|()| true)
}

/// Hands `found` to the writer in batches of at most `BATCH_ROWS` and empties it; false when
/// the writer has gone.
fn send(sender: &mpsc::Sender<DataFusionResult<RecordBatch>>, found: &mut Vec<(u64, u64)>) -> bool {
    let sent = found
        .chunks(BATCH_ROWS)
        .all(|chunk| sender.blocking_send(found_batch(chunk)).is_ok());
    found.clear();
    sent
}

/// One core's pairs as `TABLE` streams them: the batches its scan sends.
#[derive(Debug)]
struct FoundPairs {
    schema: SchemaRef,
    /// Taken by the one statement that reads the table.
    receiver: std::sync::Mutex<Option<mpsc::Receiver<DataFusionResult<RecordBatch>>>>,
}

impl PartitionStream for FoundPairs {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let receiver = self
            .receiver
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        let batches = match receiver {
            Some(receiver) => futures::stream::unfold(receiver, |mut receiver| async move {
                let batch = receiver.recv().await?;
                Some((batch, receiver))
            })
            .boxed(),
            None => {
                let read_twice = DataFusionError::Internal(format!("{TABLE} read twice"));
                futures::stream::once(async { Err(read_twice) }).boxed()
            }
        };
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            batches,
        ))
    }
}

/// The fingerprints cut into `slices` by a hash of the bits under `mask`: fingerprints that
/// agree on the table's bits share a slice.
fn fill_slices(slices: &mut [Vec<u64>], fingerprints: &[Vec<u64>], mask: u64, count: usize) {
    for slice in slices.iter_mut() {
        slice.clear();
        slice.reserve(slice_capacity(count));
    }
    for &fingerprint in fingerprints.iter().flatten() {
        // The top byte of a multiplicative hash: a table's bits may all sit in one byte of the
        // fingerprint, which the key's own low bits would leave in one slice.
        let hashed = (fingerprint & mask).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let slice = (hashed >> (64 - SLICES.trailing_zeros())) as usize;
        slices[slice].push(fingerprint);
    }
}

/// Room for a slice of `count` fingerprints: its share and an eighth more, which random
/// fingerprints stay within.
fn slice_capacity(count: usize) -> usize {
    count / SLICES + count / (SLICES * 8) + 16
}

/// The columns of `TABLE`. Nullable, as the aggregate's are: the outputs' schemas carry it
/// through.
fn found_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("simhash_a", DataType::UInt64, true),
        Field::new("simhash_b", DataType::UInt64, true),
        Field::new("distance", DataType::UInt8, true),
    ]))
}

/// Pairs as a batch of `TABLE`, with their distance.
fn found_batch(pairs: &[(u64, u64)]) -> DataFusionResult<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from_iter_values(pairs.iter().map(|p| p.0))),
        Arc::new(UInt64Array::from_iter_values(pairs.iter().map(|p| p.1))),
        Arc::new(UInt8Array::from_iter_values(
            pairs.iter().map(|p| hamming(p.0, p.1) as u8),
        )),
    ];
    Ok(RecordBatch::try_new(found_schema(), columns)?)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::{UInt8Type, UInt64Type};
    use datafusion::catalog::MemTable;

    use super::*;
    use crate::engine::sql::folder_literal;
    use crate::job::test_session;
    use crate::rng::SplitMix64;
    use crate::storage::Place;

    /// Random fingerprints with neighbours planted 0 to `k` + 2 bits from earlier ones, and a
    /// few that share one table's bits exactly (a large run in one slice).
    fn fingerprints(count: usize, k: u32, seed: u64) -> Vec<u64> {
        let mut random = SplitMix64(seed);
        let mut values: Vec<u64> = Vec::with_capacity(count);
        while values.len() < count {
            let value = match (values.len(), random.below(4)) {
                (0, _) | (_, 0 | 1) => random.next_u64(),
                (n, 2) => {
                    let mut near = values[random.below(n)];
                    for _ in 0..random.below(k as usize + 3) {
                        near ^= 1 << random.below(64);
                    }
                    near
                }
                _ => 0xABCD_0000_0000_0000 | (random.next_u64() >> 16),
            };
            values.push(value);
        }
        values.sort_unstable();
        values.dedup();
        values
    }

    /// Every pair within `k`, by comparing all of them: the oracle.
    fn all_pairs(values: &[u64], k: u32) -> BTreeSet<(u64, u64, u8)> {
        let mut pairs = BTreeSet::new();
        for (i, &a) in values.iter().enumerate() {
            for &b in &values[i + 1..] {
                let distance = (a ^ b).count_ones();
                if distance <= k {
                    pairs.insert((a.min(b), a.max(b), distance as u8));
                }
            }
        }
        pairs
    }

    #[tokio::test]
    async fn every_pair_within_k_once_against_all_pairs() {
        for (plan, k) in [("bands:4", 3), ("permutation:6:4", 4), ("bands:4", 1)] {
            let values = fingerprints(3000, k, 11 + u64::from(k));
            let expected = all_pairs(&values, k);
            // Enough for each core to send several batches.
            assert!(
                expected.len() > 8 * BATCH_ROWS,
                "{plan}: {} pairs",
                expected.len()
            );
            let dir = tempfile::tempdir().unwrap();
            let found = candidate_pairs(&values, plan, k, None, dir.path()).await;
            assert_eq!(
                found,
                Some(expected.into_iter().collect()),
                "{plan} k = {k}"
            );
        }
    }

    #[tokio::test]
    async fn without_room_in_the_pool_nothing_is_written() {
        let values = fingerprints(3000, 3, 5);
        let dir = tempfile::tempdir().unwrap();
        // Room for the fingerprints but not for the slices of two cores.
        let pool = Some(values.len() * 8 * 2);
        assert_eq!(
            candidate_pairs(&values, "bands:4", 3, pool, dir.path()).await,
            None
        );
        assert!(!dir.path().join("candidate_pairs").exists());
    }

    /// Runs `write` over `values` as the `fingerprints` table, in two partitions; the pairs it
    /// wrote as (simhash_a, simhash_b, distance), in order, or None when it gave up.
    async fn candidate_pairs(
        values: &[u64],
        plan: &str,
        k: u32,
        pool: Option<usize>,
        dir: &std::path::Path,
    ) -> Option<Vec<(u64, u64, u8)>> {
        let ctx = test_session::context(pool);
        let schema = Arc::new(Schema::new(vec![Field::new(
            "simhash",
            DataType::UInt64,
            false,
        )]));
        let half = values.len() / 2;
        let partitions = [&values[..half], &values[half..]]
            .into_iter()
            .map(|part| {
                let column: ArrayRef = Arc::new(UInt64Array::from(part.to_vec()));
                vec![RecordBatch::try_new(Arc::clone(&schema), vec![column]).unwrap()]
            })
            .collect();
        let table = MemTable::try_new(schema, partitions).unwrap();
        ctx.register_table("fingerprints", Arc::new(table)).unwrap();
        let folder = Place::Local(dir.join("candidate_pairs"));
        let mut bindings = Bindings::default();
        bindings
            .set("candidate_pairs_dir", folder_literal(&folder))
            .set("work_table_options", test_session::work_table_options());
        if !write(&ctx, &bindings, plan, k).await.unwrap() {
            return None;
        }
        let folder = format!("{}/", dir.join("candidate_pairs").display());
        ctx.register_parquet("written", &folder, Default::default())
            .await
            .unwrap();
        let read = "SELECT simhash_a, simhash_b, distance FROM written ORDER BY 1, 2";
        let batches = ctx.sql(read).await.unwrap().collect().await.unwrap();
        let mut rows = Vec::new();
        for batch in batches {
            let a = batch.column(0).as_primitive::<UInt64Type>();
            let b = batch.column(1).as_primitive::<UInt64Type>();
            let d = batch.column(2).as_primitive::<UInt8Type>();
            for row in 0..batch.num_rows() {
                rows.push((a.value(row), b.value(row), d.value(row)));
            }
        }
        Some(rows)
    }
}
