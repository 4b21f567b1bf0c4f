//! The distinct feature hashes of one document: how many there are (a document with too few
//! is matched as an exact copy only, and the count is stored) and what the sketch is built
//! from. The vote does not need them: each occurrence votes once (`CountingSimHasher::add_each`),
//! which gives the same totals as each distinct feature voting its count.
//!
//! An open-addressing set with linear probing, written here rather than taken from a crate:
//! the keys are already uniform 64-bit hashes, so a slot is their low bits with no hashing and
//! no control bytes, and a probe decides on one word. The occupied slots are listed as they
//! fill, so a document walks and clears only as many slots as it has distinct features.
//!
//! A table is the first slots of a buffer that a thread keeps from one document to the next
//! (up to `KEPT_SLOTS`), and a new buffer is written empty before it is probed
//! (`empty_slots`): on two threads, tables allocated zeroed for each long document cost 8% of
//! the signature stage's CPU on debian_docs in interrupts between the cores.

use crate::prefetch::prefetch;

/// Slots of a table at least; a power of two.
const MIN_SLOTS: usize = 64;

/// Slots of a table that fits in a first-level data cache (32 KiB of keys).
const CACHED_SLOTS: usize = 4096;

/// Slots a thread keeps between documents at most (12 bytes each, 3 MiB): tables for texts
/// of up to about 130,000 features. The buffer of a longer text is given back at the next
/// shorter one, so that one long document does not hold its table for the rest of the job.
const KEPT_SLOTS: usize = 1 << 18;

/// The key of an empty slot. A feature whose hash is 0 is noted apart, in `has_zero`.
const EMPTY: u64 = 0;

#[derive(Default)]
pub struct DistinctFeatures {
    /// Each slot's feature hash, or `EMPTY`: the table is the first `slots`, and every slot
    /// past them is `EMPTY`.
    keys: Vec<u64>,
    /// The slots of the current document's table, a power of two.
    slots: usize,
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
        // A buffer grown past `KEPT_SLOTS` by one long document goes back to that size at a
        // shorter one. Within the buffer a short document's table is still small: its first
        // `wanted` slots, which stay in the caches.
        let kept = wanted.max(KEPT_SLOTS);
        if wanted > self.keys.len() || kept < self.keys.len() {
            self.keys = empty_slots(wanted.max(self.keys.len().min(kept)));
            self.occupied = vec![0; self.keys.len()];
        }
        self.slots = wanted;
    }

    /// Gives back a buffer grown past `KEPT_SLOTS`, and forgets the last document.
    pub fn trim(&mut self) {
        self.reset(0);
    }

    /// Adds each feature of `hashes`: at most as many as `reset` was told. Whether a feature
    /// was seen before is as likely as not, so a branch on it would be mispredicted half the
    /// time: where its slot holds it or nothing, the slot is written and the list of occupied
    /// slots grows by whether it was empty, without a branch; only a slot that holds another
    /// feature (rare, the table at most half full) walks on.
    pub fn add_all(&mut self, hashes: &[u64]) {
        // More than `reset` was told could fill the table, and a probe would never end.
        debug_assert!(self.filled + hashes.len() <= self.slots / 2);
        // A table in the first-level cache needs no prefetch, which costs a few instructions
        // per feature; a long document's, larger than the caches, has the slot of the feature
        // a few places ahead prefetched, so that the next probes' cache misses overlap this
        // one's instead of following it.
        if self.slots <= CACHED_SLOTS {
            self.insert_all::<false>(hashes);
        } else {
            self.insert_all::<true>(hashes);
        }
    }

    fn insert_all<const PREFETCH: bool>(&mut self, hashes: &[u64]) {
        const AHEAD: usize = 8;
        // Slices and counters held in locals: through `self` they would be read again after
        // every write.
        let keys = &mut self.keys[..self.slots];
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

/// `slots` empty slots, written here rather than allocated zeroed. Zeroed memory of this size
/// comes as pages not yet given, which the probes read first: each page was mapped to the
/// shared zero page, then faulted again and copied at the first write, and that second fault
/// interrupts every other core running the process to flush the old mapping. Written first, a
/// page is faulted in once. (`occupied` is written before it is read, so zeroed is fine.)
fn empty_slots(slots: usize) -> Vec<u64> {
    let mut keys = Vec::with_capacity(slots);
    keys.resize(slots, EMPTY);
    keys
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
        assert_eq!(table.keys.len(), KEPT_SLOTS);
        assert_eq!(table.slots, MIN_SLOTS);
        table.add_all(&[5, 5]);
        assert_eq!(table.iter().collect::<Vec<_>>(), [5]);
    }

    /// Documents long and short in turn, all within `KEPT_SLOTS`, use the same buffer: none
    /// is allocated again, and each document still finds only its own features.
    #[test]
    fn a_buffer_within_the_kept_slots_serves_every_document() {
        let mut table = DistinctFeatures::default();
        let long: Vec<u64> = (1..=KEPT_SLOTS as u64 / 2).collect();
        table.reset(long.len());
        table.add_all(&long);
        let buffer = table.keys.as_ptr();
        for round in 0..3u64 {
            let short = [round + 1, round + 1, 7 << 40];
            table.reset(short.len());
            assert_eq!(table.slots, MIN_SLOTS);
            table.add_all(&short);
            let mut got: Vec<u64> = table.iter().collect();
            got.sort_unstable();
            assert_eq!(got, [round + 1, 7 << 40]);
            table.reset(long.len());
            table.add_all(&long);
            assert_eq!(table.len(), long.len());
            assert_eq!(table.keys.as_ptr(), buffer, "round {round}");
        }
    }
}
