//! The distinct feature hashes of one document, each with how often it occurred: what the
//! counting modes vote with (once per distinct feature, weighted by its count) and what the
//! sketch is built from.
//!
//! An open-addressing table with linear probing, written here rather than taken from a crate:
//! the keys are already uniform 64-bit hashes, so a slot is their low bits with no hashing and
//! no control bytes, and a probe decides on one word. Counts sit beside the keys in a second
//! array, and the occupied slots are listed as they fill, so a document walks and clears only
//! as many slots as it has distinct features. Voting once per distinct feature with its count
//! gives the same integer totals as voting once per occurrence, so fingerprints are the same bit
//! for bit.

/// Slots of a table at least; a power of two.
const MIN_SLOTS: usize = 64;

/// The key of an empty slot. A feature whose hash is 0 is counted apart, in `zero_count`.
const EMPTY: u64 = 0;

#[derive(Default)]
pub struct FeatureCounts {
    /// Each slot's feature hash, or `EMPTY`.
    keys: Vec<u64>,
    /// How often the slot's feature occurred.
    counts: Vec<u32>,
    /// The occupied slots, in the order they were filled.
    occupied: Vec<u32>,
    /// Occurrences of the feature whose hash is 0 (one in 2^64 features).
    zero_count: u32,
}

impl FeatureCounts {
    /// Empties the table for a document of `occurrences` features: at most half full, so
    /// probes stay short and `add_all` never grows it.
    pub fn reset(&mut self, occurrences: usize) {
        for &at in &self.occupied {
            self.keys[at as usize] = EMPTY;
        }
        self.occupied.clear();
        self.zero_count = 0;
        let wanted = occurrences
            .saturating_mul(2)
            .max(MIN_SLOTS)
            .next_power_of_two();
        // A table grown by one long document shrinks again for the short ones after it, so a
        // thread does not hold it for good, nor search a sparse table much larger than the
        // caches.
        if wanted > self.keys.len() || wanted * 64 < self.keys.len() {
            self.keys = vec![EMPTY; wanted];
            self.counts = vec![0; wanted];
            self.occupied = Vec::with_capacity(wanted / 2);
        }
    }

    /// Counts one occurrence of each feature of `hashes`: at most as many as `reset` was told.
    /// The slot of the feature a few places ahead is read early, so that on a long document,
    /// whose table does not fit in the caches, the next probes' cache misses overlap this
    /// one's instead of following it.
    pub fn add_all(&mut self, hashes: &[u64]) {
        const AHEAD: usize = 8;
        let mask = self.keys.len() - 1;
        for (index, &hash) in hashes.iter().enumerate() {
            if let Some(&next) = hashes.get(index + AHEAD) {
                std::hint::black_box(self.keys[next as usize & mask]);
            }
            if hash == EMPTY {
                self.zero_count = self.zero_count.saturating_add(1);
                continue;
            }
            let mut at = hash as usize & mask;
            loop {
                let key = self.keys[at];
                if key == hash {
                    self.counts[at] = self.counts[at].saturating_add(1);
                    break;
                }
                if key == EMPTY {
                    self.keys[at] = hash;
                    self.counts[at] = 1;
                    // Slots number at most 2^32: `reset` sizes them from a text's length.
                    self.occupied.push(at as u32);
                    break;
                }
                at = (at + 1) & mask;
            }
        }
    }

    /// Number of distinct features.
    pub fn len(&self) -> usize {
        self.occupied.len() + usize::from(self.zero_count > 0)
    }

    /// Each distinct feature's hash with its count, in no particular order (the vote and the
    /// sketch do not depend on it).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let zero = (self.zero_count > 0).then_some((EMPTY, self.zero_count));
        self.occupied
            .iter()
            .map(|&at| (self.keys[at as usize], self.counts[at as usize]))
            .chain(zero)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::rng::SplitMix64;

    /// Oracle: a HashMap of counts, over hashes that collide in their low bits (small values,
    /// multiples of the table size, 0 and u64::MAX) and random ones, through resets of every
    /// size.
    #[test]
    fn counts_are_a_hash_maps_counts() {
        let mut random = SplitMix64(3);
        let mut table = FeatureCounts::default();
        for case in 0..300 {
            let occurrences = random.below(if case % 50 == 0 { 100_000 } else { 5000 });
            let hashes: Vec<u64> = (0..occurrences)
                .map(|_| match random.below(4) {
                    0 => random.below(50) as u64,
                    1 => (random.below(50) as u64) << 16,
                    2 => [0, u64::MAX][random.below(2)],
                    _ => random.next_u64(),
                })
                .collect();
            table.reset(hashes.len());
            table.add_all(&hashes);
            let mut expected: HashMap<u64, u32> = HashMap::new();
            for &hash in &hashes {
                *expected.entry(hash).or_default() += 1;
            }
            let mut got: Vec<(u64, u32)> = table.iter().collect();
            let mut want: Vec<(u64, u32)> = expected.into_iter().collect();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(table.len(), want.len(), "case {case}");
            assert_eq!(got, want, "case {case}");
        }
    }

    #[test]
    fn a_long_documents_table_is_not_kept_for_short_ones() {
        let mut table = FeatureCounts::default();
        let long: Vec<u64> = (0..1_000_000u64).collect();
        table.reset(long.len());
        table.add_all(&long);
        assert_eq!(table.len(), long.len());
        table.reset(10);
        assert!(table.keys.len() <= 1024, "{}", table.keys.len());
        table.add_all(&[5, 5]);
        assert_eq!(table.iter().collect::<Vec<_>>(), [(5, 2)]);
    }
}
