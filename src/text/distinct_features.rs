//! The distinct feature hashes of one document: how many there are (a document with too few
//! is matched as an exact copy only, and the count is stored) and what the sketch is built
//! from. The vote does not need them: each occurrence votes once (`CountingSimHasher::add_each`),
//! which gives the same totals as each distinct feature voting its count.
//!
//! An open-addressing set with linear probing, written here rather than taken from a crate:
//! the keys are already uniform 64-bit hashes, so a slot is their low bits with no hashing and
//! no control bytes, and a probe decides on one word. The occupied slots are listed as they
//! fill, so a document walks and clears only as many slots as it has distinct features.

use crate::prefetch::prefetch;

/// Slots of a table at least; a power of two.
const MIN_SLOTS: usize = 64;

/// Slots of a table that fits in a first-level data cache (32 KiB of keys).
const CACHED_SLOTS: usize = 4096;

/// The key of an empty slot. A feature whose hash is 0 is noted apart, in `has_zero`.
const EMPTY: u64 = 0;

#[derive(Default)]
pub struct DistinctFeatures {
    /// Each slot's feature hash, or `EMPTY`.
    keys: Vec<u64>,
    /// The occupied slots, in the order they were filled; as long as `keys`, of which the
    /// first `filled` are in use (written before they are counted, so that an insertion
    /// needs no branch on whether the slot was new).
    occupied: Vec<u32>,
    filled: usize,
    /// Whether the feature whose hash is 0 (one in 2^64 features) occurred.
    has_zero: bool,
}

impl DistinctFeatures {
    /// Empties the set for a document of `occurrences` features: at most half full, so
    /// probes stay short and `add_all` never grows it.
    pub fn reset(&mut self, occurrences: usize) {
        for &at in &self.occupied[..self.filled] {
            self.keys[at as usize] = EMPTY;
        }
        self.filled = 0;
        self.has_zero = false;
        let wanted = occurrences
            .saturating_mul(2)
            .max(MIN_SLOTS)
            .next_power_of_two();
        // A table grown by one long document shrinks again for the short ones after it, so a
        // thread does not hold it for good, nor search a sparse table much larger than the
        // caches.
        if wanted > self.keys.len() || wanted * 64 < self.keys.len() {
            self.keys = vec![EMPTY; wanted];
            self.occupied = vec![0; wanted];
        }
    }

    /// Adds each feature of `hashes`: at most as many as `reset` was told. Whether a feature
    /// was seen before is as likely as not, so a branch on it would be mispredicted half the
    /// time: where its slot holds it or nothing, the slot is written and the list of occupied
    /// slots grows by whether it was empty, without a branch; only a slot that holds another
    /// feature (rare, the table at most half full) walks on.
    pub fn add_all(&mut self, hashes: &[u64]) {
        // More than `reset` was told could fill the table, and a probe would never end.
        debug_assert!(self.filled + hashes.len() <= self.keys.len() / 2);
        // A table in the first-level cache needs no prefetch, which costs a few instructions
        // per feature; a long document's, larger than the caches, has the slot of the feature
        // a few places ahead prefetched, so that the next probes' cache misses overlap this
        // one's instead of following it.
        if self.keys.len() <= CACHED_SLOTS {
            self.insert_all::<false>(hashes);
        } else {
            self.insert_all::<true>(hashes);
        }
    }

    fn insert_all<const PREFETCH: bool>(&mut self, hashes: &[u64]) {
        const AHEAD: usize = 8;
        // Slices and counters held in locals: through `self` they would be read again after
        // every write.
        let keys = self.keys.as_mut_slice();
        let occupied = self.occupied.as_mut_slice();
        let mut filled = self.filled;
        let mask = keys.len() - 1;
        for (index, &hash) in hashes.iter().enumerate() {
            if PREFETCH && let Some(&next) = hashes.get(index + AHEAD) {
                prefetch(&keys[next as usize & mask]);
            }
            if hash == EMPTY {
                self.has_zero = true;
                continue;
            }
            let mut at = hash as usize & mask;
            // One test of both ways the probe ends, the slot holding this feature or nothing:
            // the smaller of `key ^ hash` and `key` is 0 exactly then. Written as two tests,
            // the compiler made two branches, and the first (was it this feature?) went either
            // way and was mispredicted half the time.
            while (keys[at] ^ hash).min(keys[at]) != EMPTY {
                at = (at + 1) & mask;
            }
            let new = keys[at] == EMPTY;
            keys[at] = hash;
            // Slots number at most 2^32 (`reset` sizes them from a text's length), and at
            // most half are filled, so `filled` stays inside `occupied`.
            occupied[filled] = at as u32;
            filled += usize::from(new);
        }
        self.filled = filled;
    }

    /// Number of distinct features.
    pub fn len(&self) -> usize {
        self.filled + usize::from(self.has_zero)
    }

    /// Each distinct feature's hash, in no particular order (the sketch does not depend on it).
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let zero = self.has_zero.then_some(EMPTY);
        self.occupied[..self.filled]
            .iter()
            .map(|&at| self.keys[at as usize])
            .chain(zero)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::rng::SplitMix64;

    /// Oracle: a HashSet, over hashes that collide in their low bits (small values,
    /// multiples of the table size, 0 and u64::MAX) and random ones, through resets of every
    /// size.
    #[test]
    fn distinct_features_are_a_hash_set() {
        let mut random = SplitMix64(3);
        let mut table = DistinctFeatures::default();
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
            let expected: HashSet<u64> = hashes.iter().copied().collect();
            let mut got: Vec<u64> = table.iter().collect();
            let mut want: Vec<u64> = expected.into_iter().collect();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(table.len(), want.len(), "case {case}");
            assert_eq!(got, want, "case {case}");
        }
    }

    #[test]
    fn a_long_documents_table_is_not_kept_for_short_ones() {
        let mut table = DistinctFeatures::default();
        let long: Vec<u64> = (0..1_000_000u64).collect();
        table.reset(long.len());
        table.add_all(&long);
        assert_eq!(table.len(), long.len());
        table.reset(10);
        assert!(table.keys.len() <= 1024, "{}", table.keys.len());
        table.add_all(&[5, 5]);
        assert_eq!(table.iter().collect::<Vec<_>>(), [5]);
    }
}
