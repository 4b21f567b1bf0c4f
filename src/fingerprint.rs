//! SimHash arithmetic with no Arrow in it: feature hashing, the weighted bit vote, Hamming
//! distance and the 16-bit bands the matching joins on. Fingerprints are 64 bits (`u64`, the
//! default) or 128 bits (`u128`, `--bits 128`); `Fingerprint` is what the matching needs of both.

use std::fmt::Debug;
use std::hash::Hash;

use xxhash_rust::xxh3::{xxh3_64, xxh3_128};

/// Number of 16-bit bands a 64-bit fingerprint is cut into.
pub const BANDS: usize = 4;

/// Largest k of a 64-bit fingerprint the band plans find exactly and in reasonable time: an
/// eighth of the bits (16 of 128).
pub const MAX_K: u32 = 8;

/// How wide a job's fingerprints are: 64 bits (UInt64, the default) or 128 (FixedSizeBinary(16),
/// `--bits 128`). Everything that depends on the width asks it here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Width {
    #[default]
    Bits64,
    Bits128,
}

impl Width {
    /// The width of `bits` bits, if fingerprints come in it.
    pub fn from_bits(bits: u32) -> Option<Self> {
        match bits {
            64 => Some(Width::Bits64),
            128 => Some(Width::Bits128),
            _ => None,
        }
    }

    pub const fn bits(self) -> u32 {
        match self {
            Width::Bits64 => 64,
            Width::Bits128 => 128,
        }
    }

    /// 16-bit bands: the columns bucket1..bucket4, or bucket1..bucket8.
    pub const fn bands(self) -> usize {
        self.bits() as usize / 16
    }

    /// The largest k the band plans find exactly in reasonable time: an eighth of the bits.
    pub const fn max_k(self) -> u32 {
        self.bits() / 8
    }
}

impl std::fmt::Display for Width {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.bits())
    }
}

/// A fingerprint width: 64 or 128 bits, cut into 16-bit bands, band 1 being the top bits.
///
/// Pigeonhole: two fingerprints within Hamming distance k differ in at most k bands, so with
/// `BANDS` bands and k < `BANDS` they agree on at least one. Four bands find every pair within 3
/// bits of 64; eight find every pair within 7 bits of 128.
pub trait Fingerprint: Copy + Ord + Hash + Debug + Send + Sync + 'static {
    const BITS: u32;
    const BANDS: usize = (Self::BITS / 16) as usize;

    fn hamming(self, other: Self) -> u32;
    /// The value as 128 bits (a 64-bit fingerprint in the low half), as band plans take it.
    fn widen(self) -> u128;
    /// The bits under `mask` (a band plan's table), the others cleared.
    fn masked(self, mask: u128) -> Self;
    /// The `index`-th 16-bit band (1-based).
    fn band(self, index: usize) -> Option<u16>;
}

impl Fingerprint for u64 {
    const BITS: u32 = 64;
    #[inline]
    fn hamming(self, other: Self) -> u32 {
        (self ^ other).count_ones()
    }
    #[inline]
    fn widen(self) -> u128 {
        u128::from(self)
    }
    #[inline]
    fn masked(self, mask: u128) -> Self {
        self & mask as u64
    }
    fn band(self, index: usize) -> Option<u16> {
        band(self, index)
    }
}

impl Fingerprint for u128 {
    const BITS: u32 = 128;
    #[inline]
    fn hamming(self, other: Self) -> u32 {
        (self ^ other).count_ones()
    }
    #[inline]
    fn widen(self) -> u128 {
        self
    }
    #[inline]
    fn masked(self, mask: u128) -> Self {
        self & mask
    }
    fn band(self, index: usize) -> Option<u16> {
        if !(1..=Self::BANDS).contains(&index) {
            return None;
        }
        Some((self >> (16 * (Self::BANDS - index))) as u16)
    }
}

/// Hashes one feature to 128 bits for 128-bit fingerprints: XXH3-128 with seed 0.
pub fn feature_hash128(feature: &str) -> u128 {
    xxh3_128(feature.as_bytes())
}

/// Hashes one feature to 64 bits.
///
/// XXH3-64 with seed 0: a published, platform-independent function, so fingerprints written
/// today compare with fingerprints computed on another machine or by another tool next year.
/// Changing it changes every fingerprint; `tests` pin known values.
#[inline]
pub fn feature_hash(feature: &str) -> u64 {
    feature_hash_bytes(feature.as_bytes())
}

/// `feature_hash` of a feature's bytes. Always inlined: where the caller's length is a constant
/// (n-grams of a fixed width in bytes, `crate::text::chars::script_ngram_hashes`), XXH3's branches on
/// the length fold away and only the arithmetic of that length is left in the loop.
#[inline(always)]
pub fn feature_hash_bytes(feature: &[u8]) -> u64 {
    xxh3_64(feature)
}

/// Accumulates weighted features into a 64-bit SimHash (Charikar): each feature votes +w on the
/// bits set in its hash and -w on the others; the fingerprint keeps the sign of each bit's total.
/// For each byte value, the +1/-1 sign of each of its eight bits, lowest bit first.
static SIGNS: [[f64; 8]; 256] = {
    let mut table = [[0.0; 8]; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut bit = 0;
        while bit < 8 {
            table[byte][bit] = if (byte >> bit) & 1 == 1 { 1.0 } else { -1.0 };
            bit += 1;
        }
        byte += 1;
    }
    table
};

/// Up to 128 bits are voted on; a 64-bit fingerprint uses the first 64.
#[derive(Debug, Clone)]
pub struct SimHasher {
    votes: [f64; 128],
    features: usize,
}

impl Default for SimHasher {
    fn default() -> Self {
        Self {
            votes: [0.0; 128],
            features: 0,
        }
    }
}

impl SimHasher {
    /// Clears the accumulator so one hasher serves every row of a batch.
    pub fn reset(&mut self) {
        self.votes = [0.0; 128];
        self.features = 0;
    }

    /// Adds one feature, given by its 64-bit hash, with a weight.
    pub fn add(&mut self, hash: u64, weight: f64) {
        self.add_bytes(&hash.to_le_bytes(), weight);
    }

    /// Adds one feature, given by its 128-bit hash, with a weight.
    pub fn add128(&mut self, hash: u128, weight: f64) {
        self.add_bytes(&hash.to_le_bytes(), weight);
    }

    /// Bit `8 * i + j` of the hash is bit `j` of byte `i` (little-endian). A byte's eight signs
    /// come from a table, so the inner loop is eight independent multiply-adds the compiler
    /// vectorises, rather than a shift, a mask and a conversion per bit. Each vote still gets
    /// exactly +w or -w, in the same order, so fingerprints are unchanged bit for bit.
    fn add_bytes(&mut self, hash: &[u8], weight: f64) {
        for (votes, byte) in self.votes.chunks_exact_mut(8).zip(hash) {
            let signs = &SIGNS[usize::from(*byte)];
            for (vote, sign) in votes.iter_mut().zip(signs) {
                *vote += sign * weight;
            }
        }
        self.features += 1;
    }

    /// The 128-bit fingerprint, or `None` when no feature was added.
    pub fn finish128(&self) -> Option<u128> {
        if self.features == 0 {
            return None;
        }
        let mut fingerprint = 0u128;
        for (bit, vote) in self.votes.iter().enumerate() {
            if *vote > 0.0 {
                fingerprint |= 1 << bit;
            }
        }
        Some(fingerprint)
    }

    /// Number of features added since the last reset.
    pub fn feature_count(&self) -> usize {
        self.features
    }

    /// The fingerprint, or `None` when no feature was added: a document with nothing to
    /// fingerprint has no fingerprint, rather than one it would share with every other such
    /// document.
    pub fn finish(&self) -> Option<u64> {
        if self.features == 0 {
            return None;
        }
        let mut fingerprint = 0u64;
        for (bit, vote) in self.votes[..64].iter().enumerate() {
            if *vote > 0.0 {
                fingerprint |= 1 << bit;
            }
        }
        Some(fingerprint)
    }
}

/// The same vote as `SimHasher` for whole-number weights (the counts of the n-gram and word
/// modes), 64 bits, without floating point: a bit's vote is `2 * C - W`, where `C` is the weight
/// of the features that set it and `W` the total, so the bit is set when `2 * C > W`, exactly
/// when `SimHasher`'s sum is positive (its sums of whole numbers are exact below 2^53).
///
/// `C` is counted eight bits at a time: lane `j` holds bit `j` of each of the hash's eight
/// bytes in its own byte (`(hash >> j) & 0x0101..01`), so a weight-`w` feature is eight
/// shift-mask-multiply-adds. A byte lane holds up to 255, so the lanes are emptied into the
/// totals before they could overflow; a weight above 255 is added bit by bit.
#[derive(Debug, Clone)]
pub struct CountingSimHasher {
    lanes: [u64; 8],
    /// Weight added to the lanes since they were last emptied.
    in_lanes: u64,
    counts: [u64; 64],
    total: u64,
    /// Votes added (with `add_each`, occurrences; with `add`, features): only whether it is 0
    /// matters, which says there is no fingerprint.
    features: usize,
}

impl Default for CountingSimHasher {
    fn default() -> Self {
        Self {
            lanes: [0; 8],
            in_lanes: 0,
            counts: [0; 64],
            total: 0,
            features: 0,
        }
    }
}

const LOW_BIT_OF_EACH_BYTE: u64 = 0x0101_0101_0101_0101;

impl CountingSimHasher {
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// Adds one feature, given by its 64-bit hash, with a whole-number weight.
    pub fn add(&mut self, hash: u64, weight: u64) {
        self.features += 1;
        self.total += weight;
        if weight > 255 {
            for (bit, count) in self.counts.iter_mut().enumerate() {
                *count += weight * ((hash >> bit) & 1);
            }
            return;
        }
        if self.in_lanes + weight > 255 {
            self.empty_lanes();
        }
        for (j, lane) in self.lanes.iter_mut().enumerate() {
            *lane += ((hash >> j) & LOW_BIT_OF_EACH_BYTE) * weight;
        }
        self.in_lanes += weight;
    }

    /// Adds each of `hashes` with weight one: the same totals, so the same fingerprint, as
    /// `add(hash, count)` once per distinct hash. Votes by occurrence need no multiply and no
    /// table of counts, and take the hashes in a run the vector units can work through.
    pub fn add_each(&mut self, hashes: &[u64]) {
        self.features += hashes.len();
        self.total += hashes.len() as u64;
        let mut rest = hashes;
        while !rest.is_empty() {
            // A lane's byte takes at most 255 votes before it would carry into the next.
            let room = (255 - self.in_lanes) as usize;
            if room == 0 {
                self.empty_lanes();
                continue;
            }
            let (now, later) = rest.split_at(room.min(rest.len()));
            add_to_lanes(&mut self.lanes, now);
            self.in_lanes += now.len() as u64;
            rest = later;
        }
    }

    fn empty_lanes(&mut self) {
        for (j, lane) in self.lanes.iter_mut().enumerate() {
            for byte in 0..8 {
                self.counts[8 * byte + j] += (*lane >> (8 * byte)) & 0xff;
            }
            *lane = 0;
        }
        self.in_lanes = 0;
    }

    /// The fingerprint, or `None` when no feature was added.
    pub fn finish(&mut self) -> Option<u64> {
        if self.features == 0 {
            return None;
        }
        self.empty_lanes();
        let mut fingerprint = 0u64;
        for (bit, count) in self.counts.iter().enumerate() {
            if 2 * count > self.total {
                fingerprint |= 1 << bit;
            }
        }
        Some(fingerprint)
    }
}

/// Adds bit `8 * byte + j` of each hash to byte `byte` of `lanes[j]`; at most 255 hashes, so no
/// byte carries. Where the CPU has AVX2 (checked when run: the build targets baseline x86-64)
/// the same loop is compiled for it, which lets the compiler shift the eight lanes by a vector
/// of counts in two registers, one hash per step.
fn add_to_lanes(lanes: &mut [u64; 8], hashes: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked above.
        unsafe { add_to_lanes_avx2(lanes, hashes) };
        return;
    }
    add_to_lanes_portable(lanes, hashes);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn add_to_lanes_avx2(lanes: &mut [u64; 8], hashes: &[u64]) {
    add_to_lanes_portable(lanes, hashes);
}

#[inline(always)]
fn add_to_lanes_portable(lanes: &mut [u64; 8], hashes: &[u64]) {
    let mut sums = *lanes;
    for &hash in hashes {
        for (j, sum) in sums.iter_mut().enumerate() {
            *sum += (hash >> j) & LOW_BIT_OF_EACH_BYTE;
        }
    }
    *lanes = sums;
}

/// Number of bits in which two fingerprints differ.
#[inline]
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// The `index`-th 16-bit band (1-based), band 1 being the top 16 bits.
///
/// Two fingerprints within Hamming distance 3 differ in at most 3 of the 4 bands, so they agree
/// on at least one (pigeonhole): joining on each band finds every such pair.
pub fn band(fingerprint: u64, index: usize) -> Option<u16> {
    if !(1..=BANDS).contains(&index) {
        return None;
    }
    let shift = 16 * (BANDS - index);
    Some((fingerprint >> shift) as u16)
}

/// The first band (1-based) on which two fingerprints agree, if any. The matching takes a pair
/// from this band only, so a pair that shares several bands is found once.
pub fn first_shared_band(a: u64, b: u64) -> Option<usize> {
    (1..=BANDS).find(|&index| band(a, index) == band(b, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_hash_is_pinned() {
        // Golden values: if these change, every stored fingerprint becomes incomparable.
        assert_eq!(feature_hash(""), 0x2d06800538d394c2);
        assert_eq!(feature_hash("simhash"), feature_hash("simhash"));
        assert_ne!(feature_hash("simhash"), feature_hash("Simhash"));
    }

    #[test]
    fn one_feature_gives_its_own_hash() {
        let mut h = SimHasher::default();
        h.add(0xdead_beef_0123_4567, 2.5);
        assert_eq!(h.finish(), Some(0xdead_beef_0123_4567));
    }

    #[test]
    fn heavier_feature_wins_the_vote() {
        let mut h = SimHasher::default();
        h.add(0xffff_ffff_ffff_ffff, 1.0);
        h.add(0x0000_0000_0000_0000, 3.0);
        assert_eq!(h.finish(), Some(0));
        h.reset();
        h.add(0xffff_ffff_ffff_ffff, 3.0);
        h.add(0x0000_0000_0000_0000, 1.0);
        assert_eq!(h.finish(), Some(u64::MAX));
    }

    #[test]
    fn majority_vote_per_bit() {
        // Bit by bit: 0b011, 0b101, 0b110 with equal weights -> each bit set twice of three.
        let mut h = SimHasher::default();
        for f in [0b011u64, 0b101, 0b110] {
            h.add(f, 1.0);
        }
        assert_eq!(h.finish(), Some(0b111));
    }

    #[test]
    fn no_features_no_fingerprint() {
        let mut h = SimHasher::default();
        assert_eq!(h.finish(), None);
        h.add(1, 1.0);
        h.reset();
        assert_eq!(h.finish(), None);
        assert_eq!(h.feature_count(), 0);
    }

    #[test]
    fn counting_hasher_equals_the_float_vote() {
        // Oracle: SimHasher's floating-point vote, on random hashes and weights that reach
        // the lane limits (255 in a lane, weights above 255) and ties (equal opposite weights).
        let mut random = crate::rng::SplitMix64(42);
        for case in 0..2000 {
            let mut float = SimHasher::default();
            let mut counting = CountingSimHasher::default();
            let features = random.below(200);
            for _ in 0..features {
                let hash = random.next_u64();
                let weight = match random.below(10) {
                    0 => 200 + random.below(400) as u64,
                    1 => 255,
                    _ => 1 + random.below(5) as u64,
                };
                float.add(hash, weight as f64);
                counting.add(hash, weight);
                if case % 7 == 0 {
                    // An exact tie on every bit: the vote is 0, not positive.
                    float.add(!hash, weight as f64);
                    counting.add(!hash, weight);
                }
            }
            assert_eq!(counting.finish(), float.finish(), "case {case}");
        }
        let mut tie = CountingSimHasher::default();
        tie.add(u64::MAX, 3);
        tie.add(0, 3);
        assert_eq!(tie.finish(), Some(0), "a tie leaves the bit clear");
        tie.reset();
        assert_eq!(tie.finish(), None);
    }

    #[test]
    fn votes_by_occurrence_equal_the_float_vote() {
        // Oracle: SimHasher's floating-point vote of each occurrence with weight one. Runs
        // from empty to past several lane limits (255 occurrences), in pieces of every size,
        // with repeats and exact ties. On a CPU with AVX2 (this project's test machine) the
        // AVX2 loop is checked against it and against the portable one; without, the
        // portable one only.
        let mut random = crate::rng::SplitMix64(7);
        for case in 0..600 {
            let occurrences = random.below(if case % 20 == 0 { 2000 } else { 300 });
            let mut hashes: Vec<u64> = Vec::with_capacity(occurrences);
            for _ in 0..occurrences {
                let hash = match random.below(4) {
                    0 if !hashes.is_empty() => hashes[random.below(hashes.len())],
                    1 if case % 3 == 0 && !hashes.is_empty() => !hashes[hashes.len() - 1],
                    _ => random.next_u64(),
                };
                hashes.push(hash);
            }
            let mut float = SimHasher::default();
            for &hash in &hashes {
                float.add(hash, 1.0);
            }
            let mut counting = CountingSimHasher::default();
            let mut rest = hashes.as_slice();
            while !rest.is_empty() {
                let (piece, later) = rest.split_at(random.below(rest.len()) + 1);
                counting.add_each(piece);
                rest = later;
            }
            assert_eq!(counting.finish(), float.finish(), "case {case}");
            let mut lanes = [0u64; 8];
            let mut portable = [0u64; 8];
            let first = &hashes[..hashes.len().min(255)];
            add_to_lanes(&mut lanes, first);
            add_to_lanes_portable(&mut portable, first);
            assert_eq!(lanes, portable, "case {case}");
        }
    }

    #[test]
    fn hamming_counts_differing_bits() {
        assert_eq!(hamming(0, 0), 0);
        assert_eq!(hamming(0, u64::MAX), 64);
        assert_eq!(hamming(0b1010, 0b0110), 2);
    }

    #[test]
    fn first_shared_band_is_the_lowest_equal_one() {
        let a = 0x1111_2222_3333_4444u64;
        assert_eq!(first_shared_band(a, a), Some(1));
        assert_eq!(first_shared_band(a, 0x9999_2222_9999_4444), Some(2));
        assert_eq!(first_shared_band(a, 0x9999_9999_9999_4444), Some(4));
        assert_eq!(first_shared_band(a, 0x9999_9999_9999_9999), None);
    }

    #[test]
    fn wide_fingerprints_have_eight_bands() {
        let f: u128 = 0x1111_2222_3333_4444_5555_6666_7777_8888;
        assert_eq!(<u128 as Fingerprint>::BANDS, 8);
        assert_eq!(f.band(1), Some(0x1111));
        assert_eq!(f.band(8), Some(0x8888));
        assert_eq!(f.band(9), None);
        let g = f ^ (1 << 127) ^ 1;
        assert_eq!(f.hamming(g), 2);
        let bands = crate::plan::BandPlan::default_bands(128);
        assert_eq!(bands.first_shared_band(f, g), Some(2));
        let mut h = SimHasher::default();
        h.add128(f, 1.0);
        assert_eq!(h.finish128(), Some(f));
        assert_eq!(
            h.finish(),
            Some(f as u64),
            "the 64-bit view is the low votes"
        );
    }

    #[test]
    fn bands_cut_top_first() {
        let f = 0x1111_2222_3333_4444u64;
        assert_eq!(band(f, 1), Some(0x1111));
        assert_eq!(band(f, 2), Some(0x2222));
        assert_eq!(band(f, 3), Some(0x3333));
        assert_eq!(band(f, 4), Some(0x4444));
        assert_eq!(band(f, 0), None);
        assert_eq!(band(f, 5), None);
    }
}
