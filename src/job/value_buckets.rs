//! A column's 64-bit values gathered from every partition of a query into one bucket per
//! partition by their top bits, each bucket then sorted on a thread of its own. Equal values
//! share a bucket, so what each sorted bucket shows on its own (a repeat, a run of one value)
//! is what the whole would show. The id check (`crate::job::ids`) and the distinct fingerprints
//! (`crate::job::fingerprint_counts`) sort this way where DataFusion's grouping held a hash
//! table of every value: 8 bytes a value, counted against the session's memory pool.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::UInt64Type;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result as DataFusionResult};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::prelude::{DataFrame, SessionContext};
use futures::StreamExt;
use tokio::task::JoinSet;

use crate::error::{Error, QueryContext, Result};

/// Buckets of values, with the pool's account of their memory. Each bucket is in parts, a part
/// per partition of the query: `sort_each` puts a bucket's parts together on the thread that
/// sorts it, where putting them together as the partitions finished copied every value on one
/// core.
pub struct Buckets {
    pub buckets: Vec<Vec<Vec<u64>>>,
    pub reservation: MemoryReservation,
}

/// Runs `frame`, each batch's values given by `values_of` (which adds them to its vector, or
/// returns false to give up: a NULL id, say), into one bucket per partition of the session.
/// `None` when `values_of` gives up or the pool refuses the values' memory; `what` names the
/// query in errors and `consumer` the memory in the pool's reports.
pub async fn gather(
    ctx: &SessionContext,
    frame: DataFrame,
    what: &str,
    consumer: &str,
    values_of: fn(&RecordBatch, &mut Vec<u64>) -> DataFusionResult<bool>,
) -> Result<Option<Buckets>> {
    let what = || what.to_string();
    let count = ctx.copied_config().target_partitions().max(1);
    let reservation = MemoryConsumer::new(consumer).register(&ctx.runtime_env().memory_pool);
    let streams = frame.execute_stream_partitioned().await.context(what)?;
    let mut partitions = JoinSet::new();
    for mut stream in streams {
        let reservation = reservation.new_empty();
        partitions.spawn(async move {
            let mut buckets: Vec<Vec<u64>> = vec![Vec::new(); count];
            let mut values = Vec::new();
            while let Some(batch) = stream.next().await {
                values.clear();
                if !values_of(&batch?, &mut values)? {
                    return Ok(None);
                }
                if reservation
                    .try_grow(values.len() * size_of::<u64>())
                    .is_err()
                {
                    return Ok(None);
                }
                for &value in &values {
                    buckets[bucket_of(value, count)].push(value);
                }
            }
            Ok::<_, DataFusionError>(Some((buckets, reservation)))
        });
    }
    let mut all: Vec<Vec<Vec<u64>>> = vec![Vec::new(); count];
    let mut held = Vec::new();
    while let Some(done) = partitions.join_next().await {
        let done = done.map_err(|e| Error::Internal(format!("{}: {e}", what())))?;
        let Some((buckets, partition_reservation)) = done.context(what)? else {
            return Ok(None);
        };
        for (bucket, part) in all.iter_mut().zip(buckets) {
            bucket.push(part);
        }
        held.push(partition_reservation);
    }
    let total: usize = all.iter().flatten().map(Vec::len).sum();
    reservation.resize(total * size_of::<u64>());
    drop(held);
    Ok(Some(Buckets {
        buckets: all,
        reservation,
    }))
}

/// For `gather`: a batch's first column, UInt64 (the fingerprints), into `values`; NULLs left
/// out.
pub fn unsigned(batch: &RecordBatch, values: &mut Vec<u64>) -> DataFusionResult<bool> {
    let column = batch.column(0).as_primitive::<UInt64Type>();
    if column.null_count() == 0 {
        values.extend_from_slice(column.values());
    } else {
        values.extend(column.iter().flatten());
    }
    Ok(true)
}

/// The bucket of `value` among `count`: by its top bits, a multiply and a shift.
fn bucket_of(value: u64, count: usize) -> usize {
    ((u128::from(value) * count as u128) >> 64) as usize
}

/// Puts each bucket's parts together and sorts them on a blocking thread of its own, and gives
/// the bucket to `then` there; the results in the buckets' order.
pub async fn sort_each<T: Send + 'static>(
    buckets: Vec<Vec<Vec<u64>>>,
    then: impl Fn(&[u64]) -> DataFusionResult<T> + Send + Sync + 'static,
) -> DataFusionResult<Vec<T>> {
    let then = Arc::new(then);
    let mut sorting = JoinSet::new();
    for (index, parts) in buckets.into_iter().enumerate() {
        let then = Arc::clone(&then);
        sorting.spawn_blocking(move || {
            // One part is the bucket as it is, without a copy.
            let mut bucket = match parts.len() {
                1 => parts.into_iter().next().unwrap_or_default(),
                _ => parts.concat(),
            };
            bucket.sort_unstable();
            then(&bucket).map(|result| (index, result))
        });
    }
    let mut results = Vec::new();
    while let Some(done) = sorting.join_next().await {
        results.push(done.map_err(|e| DataFusionError::External(Box::new(e)))??);
    }
    results.sort_by_key(|(index, _)| *index);
    Ok(results.into_iter().map(|(_, result)| result).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn buckets_follow_the_values_order() {
        // Every value's bucket is in range, and a larger value never goes to an earlier bucket:
        // equal values share one, and the buckets in order are the values in order.
        let mut random = SplitMix64(4);
        for count in [1, 2, 3, 8, 32] {
            let mut values: Vec<u64> = (0..2000).map(|_| random.next_u64()).collect();
            values.extend([0, 1, u64::MAX, u64::MAX - 1, 1 << 63]);
            values.sort_unstable();
            let buckets: Vec<usize> = values.iter().map(|&v| bucket_of(v, count)).collect();
            assert!(buckets.iter().all(|&b| b < count), "{count}");
            assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{count}");
            assert_eq!(bucket_of(u64::MAX, count), count - 1);
            assert_eq!(bucket_of(0, count), 0);
        }
    }

    #[tokio::test]
    async fn each_bucket_is_sorted_and_kept_in_order() {
        // A bucket's parts (one per partition) are put together.
        let buckets = vec![
            vec![vec![3, 1], vec![2]],
            vec![],
            vec![vec![9], vec![], vec![7]],
        ];
        let sorted = sort_each(buckets, |bucket| Ok(bucket.to_vec()))
            .await
            .unwrap();
        assert_eq!(sorted, [vec![1, 2, 3], vec![], vec![7, 9]]);
    }
}
