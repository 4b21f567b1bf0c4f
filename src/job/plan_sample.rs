//! The planner's sample of the distinct fingerprints: the `planner::SAMPLE` whose mixed value is
//! smallest (a bottom-k sample), from which it counts real key sizes. Read from the
//! `fingerprints` table by SQL (`sample_fingerprints`), or kept while the distinct fingerprints
//! are counted in this process (`crate::job::fingerprint_counts`), which spares a scan of every
//! distinct fingerprint; both keep the same values.

use datafusion::prelude::SessionContext;
use futures::StreamExt;

use crate::engine::sql::{Bindings, stage_frame};
use crate::engine::stages;
use crate::error::{QueryContext, Result};
use crate::fingerprint::Width;
use crate::udf::FingerprintColumn;

/// Up to `planner::SAMPLE` distinct fingerprints of the `fingerprints` table: those whose mixed
/// value is smallest (a bottom-k sample). Which rows those are does not depend on the order the
/// table's rows come in, and a uniform mix makes them a uniform sample of the table.
pub async fn sample_fingerprints(ctx: &SessionContext, width: Width) -> Result<Vec<u128>> {
    let what = || "sampling fingerprints".to_string();
    let mut stream = stage_frame(ctx, &stages::PLAN_SAMPLE, &Bindings::default())
        .await?
        .execute_stream()
        .await
        .context(what)?;
    let mut sample = BottomK::new(crate::planner::SAMPLE);
    while let Some(batch) = stream.next().await {
        let batch = batch.context(what)?;
        match width {
            Width::Bits128 => u128::values(batch.column(0))
                .context(what)?
                .into_iter()
                .for_each(|f| sample.offer(f)),
            Width::Bits64 => u64::values(batch.column(0))
                .context(what)?
                .into_iter()
                .for_each(|f| sample.offer(u128::from(f))),
        }
    }
    Ok(sample.into_values())
}

/// The `size` values with the smallest `mix`, whatever order they are offered in. A value whose
/// mix is above the largest kept is turned away by one comparison; the others are kept until
/// there are twice `size`, then cut back to the smallest `size`. The fingerprints stage offers
/// every distinct fingerprint, where a heap cost about 10 ns a value (about 4 with this).
pub struct BottomK {
    size: usize,
    /// (mix, value): at least the `size` smallest of those offered, at most twice as many.
    kept: Vec<(u64, u128)>,
    /// The largest mix kept after the last cut: no value above it can be among the smallest.
    threshold: u64,
}

impl BottomK {
    pub fn new(size: usize) -> Self {
        BottomK {
            size,
            kept: Vec::new(),
            threshold: u64::MAX,
        }
    }

    pub fn offer(&mut self, value: u128) {
        let mixed = mix(value);
        if mixed > self.threshold {
            return;
        }
        self.kept.push((mixed, value));
        if self.kept.len() >= 2 * self.size.max(1) {
            self.cut();
        }
    }

    /// Keeps the `size` smallest.
    fn cut(&mut self) {
        if self.size == 0 {
            self.kept.clear();
            self.threshold = 0;
        } else if self.kept.len() > self.size {
            self.kept.select_nth_unstable(self.size - 1);
            self.kept.truncate(self.size);
            self.threshold = self.kept[self.size - 1].0;
        }
    }

    /// Keeps what `other` kept too: the bottom of the union of what both were offered, when
    /// no value was offered to both.
    pub fn merge(&mut self, other: BottomK) {
        for (_, value) in other.kept {
            self.offer(value);
        }
    }

    /// The values kept, in the order of their mixed values.
    pub fn into_values(mut self) -> Vec<u128> {
        self.cut();
        self.kept.sort_unstable();
        self.kept.into_iter().map(|(_, v)| v).collect()
    }
}

/// SplitMix64's finaliser over both halves: nearby fingerprints get unrelated values.
fn mix(value: u128) -> u64 {
    crate::rng::mix((value as u64) ^ ((value >> 64) as u64).rotate_left(32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_does_not_depend_on_the_order_of_the_rows() {
        let values: Vec<u128> = (0..5_000u128).map(|i| i * 7919).collect();
        let sample = |order: &mut dyn Iterator<Item = u128>| {
            let mut k = BottomK::new(100);
            order.for_each(|v| k.offer(v));
            let mut kept = k.into_values();
            kept.sort_unstable();
            kept
        };
        let forward = sample(&mut values.iter().copied());
        assert_eq!(forward.len(), 100);
        assert_eq!(forward, sample(&mut values.iter().rev().copied()));
        // Sorted input (what a spilled grouping writes) still gives values from all over the
        // range, not its start: a prefix of 100 would stop at 99 * 7919.
        assert!(forward.iter().filter(|&&v| v > 2_500 * 7919).count() > 20);
        // Fewer values than the size: all of them.
        let mut few = BottomK::new(100);
        (0..10u128).for_each(|v| few.offer(v));
        let mut kept = few.into_values();
        kept.sort_unstable();
        assert_eq!(kept, (0..10u128).collect::<Vec<_>>());
    }

    #[test]
    fn the_sample_is_the_smallest_mixes_and_halves_merge_into_it() {
        // Against sorting everything by (mix, value): the first `size`, in that order, whether
        // offered to one or split between two that are merged (the buckets of the counting).
        let mut random = crate::rng::SplitMix64(3);
        let values: Vec<u128> = (0..50_000).map(|_| u128::from(random.next_u64())).collect();
        let mut sorted: Vec<(u64, u128)> = values.iter().map(|&v| (mix(v), v)).collect();
        sorted.sort_unstable();
        for size in [1, 7, 1000, 20_000] {
            let expected: Vec<u128> = sorted[..size].iter().map(|&(_, v)| v).collect();
            let mut one = BottomK::new(size);
            values.iter().for_each(|&v| one.offer(v));
            assert_eq!(one.into_values(), expected, "{size}");
            let (mut low, mut high) = (BottomK::new(size), BottomK::new(size));
            for &v in &values {
                match v < 1 << 63 {
                    true => low.offer(v),
                    false => high.offer(v),
                }
            }
            low.merge(high);
            assert_eq!(low.into_values(), expected, "{size}");
        }
    }
}
