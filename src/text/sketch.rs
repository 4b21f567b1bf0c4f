//! A one-permutation MinHash sketch of a document's distinct features, from which the Jaccard
//! similarity of two documents' feature sets is estimated: the check that a candidate pair is a
//! near-duplicate (SimHash distance alone chains through templated pages).
//!
//! Each feature's hash is mixed once; its top bits choose one of `BINS` bins and each bin keeps
//! the smallest of the remaining bits (one permutation, Li, Owen and Zhang, "One Permutation
//! Hashing", NIPS 2012). A bin stores 16 bits of its minimum, 1..=65535, or 0 when no feature
//! fell into it. The estimate is the share of agreeing bins among those not empty in both,
//! corrected for two different minima that agree in 16 bits by chance. Its standard error is
//! about sqrt(J (1 - J) / BINS): 0.038 at J = 0.75.

use crate::rng::mix;

/// Bins of a sketch.
pub const BINS: usize = 128;

/// Bytes of a sketch as stored (`FixedSizeBinary(SKETCH_BYTES)`): 16 bits per bin, little-endian.
pub const SKETCH_BYTES: usize = 2 * BINS;

const BIN_BITS: u32 = BINS.trailing_zeros();

/// A sketch being filled, one distinct feature at a time.
#[derive(Debug, Clone)]
pub struct SketchBuilder {
    minima: [u64; BINS],
}

impl Default for SketchBuilder {
    fn default() -> Self {
        Self {
            minima: [u64::MAX; BINS],
        }
    }
}

impl SketchBuilder {
    /// Adds a feature by its hash (any well-spread 64 bits; it is mixed again here, so the
    /// sketch does not correlate with the SimHash vote that uses the same hash).
    #[inline]
    pub fn add(&mut self, feature_hash: u64) {
        let mixed = mix(feature_hash);
        let bin = (mixed >> (64 - BIN_BITS)) as usize;
        let rest = mixed & (u64::MAX >> BIN_BITS);
        if rest < self.minima[bin] {
            self.minima[bin] = rest;
        }
    }

    /// The sketch's bytes; all zero for a document without features.
    pub fn finish(&self) -> [u8; SKETCH_BYTES] {
        let mut out = [0u8; SKETCH_BYTES];
        for (bin, &minimum) in self.minima.iter().enumerate() {
            let value: u16 = if minimum == u64::MAX {
                0
            } else {
                // 1..=65535: 0 stays the empty bin.
                (minimum % 65535) as u16 + 1
            };
            out[2 * bin..2 * bin + 2].copy_from_slice(&value.to_le_bytes());
        }
        out
    }
}

/// The estimated Jaccard similarity of the feature sets behind two sketches, in 0..=1; `None`
/// when either is not a sketch (wrong length) or both documents have no features.
#[inline]
pub fn similarity(a: &[u8], b: &[u8]) -> Option<f64> {
    let (a, b): (&[u8; SKETCH_BYTES], &[u8; SKETCH_BYTES]) =
        (a.try_into().ok()?, b.try_into().ok()?);
    // Four bins at a time, in the 16-bit lanes of a word, without a branch per bin:
    // verification calls this once per candidate pair, tens of millions of times on a large
    // corpus. A bin not empty in both is a non-zero lane of x | y; one that differs, of x ^ y.
    let (mut compared, mut differ) = (0u32, 0u32);
    let (a, b) = (a.as_chunks::<8>().0, b.as_chunks::<8>().0);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (u64::from_le_bytes(x), u64::from_le_bytes(y));
        compared += nonzero_lanes(x | y);
        differ += nonzero_lanes(x ^ y);
    }
    if compared == 0 {
        return None;
    }
    let chance = 1.0 / 65535.0;
    let estimate = f64::from(compared - differ) / f64::from(compared);
    Some(((estimate - chance) / (1.0 - chance)).clamp(0.0, 1.0))
}

/// How many of a word's four 16-bit lanes are not zero. Adding 0x7fff to a lane's low 15 bits
/// sets its top bit exactly when they are not all zero, and cannot carry into the next lane.
#[inline]
fn nonzero_lanes(word: u64) -> u32 {
    const LOW_BITS: u64 = 0x7fff_7fff_7fff_7fff;
    const TOP_BITS: u64 = 0x8000_8000_8000_8000;
    ((((word & LOW_BITS) + LOW_BITS) | word) & TOP_BITS).count_ones()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::rng::SplitMix64;

    fn sketch(features: &[u64]) -> [u8; SKETCH_BYTES] {
        let mut builder = SketchBuilder::default();
        for &f in features {
            builder.add(f);
        }
        builder.finish()
    }

    #[test]
    fn identical_sets_are_one_and_disjoint_sets_near_zero() {
        let a: Vec<u64> = (0..500).collect();
        assert_eq!(similarity(&sketch(&a), &sketch(&a)), Some(1.0));
        let mut reversed = a.clone();
        reversed.reverse();
        assert_eq!(similarity(&sketch(&a), &sketch(&reversed)), Some(1.0));
        let b: Vec<u64> = (10_000..10_500).collect();
        assert!(similarity(&sketch(&a), &sketch(&b)).unwrap() < 0.05);
        assert_eq!(similarity(&sketch(&[]), &sketch(&[])), None);
        assert_eq!(similarity(&sketch(&a), &sketch(&[])), Some(0.0));
        assert_eq!(similarity(&sketch(&a), &[0u8; 3]), None);
    }

    #[test]
    fn similarity_is_the_share_of_agreeing_bins_counted_one_by_one() {
        // The oracle: walk the bins, skip those empty in both, count the ones that agree.
        fn by_bins(a: &[u8], b: &[u8]) -> Option<f64> {
            let (mut agree, mut compared) = (0u32, 0u32);
            for bin in 0..BINS {
                let x = u16::from_le_bytes([a[2 * bin], a[2 * bin + 1]]);
                let y = u16::from_le_bytes([b[2 * bin], b[2 * bin + 1]]);
                if x == 0 && y == 0 {
                    continue;
                }
                compared += 1;
                agree += u32::from(x == y);
            }
            let chance = 1.0 / 65535.0;
            (compared > 0).then(|| {
                ((f64::from(agree) / f64::from(compared) - chance) / (1.0 - chance)).clamp(0.0, 1.0)
            })
        }
        let mut rng = SplitMix64(11);
        for trial in 0..2_000 {
            // Small sets leave most bins empty; shared features make bins agree.
            let size = [0, 1, 5, 40, 130, 600][trial % 6];
            let shared = rng.below(size + 1);
            let common: Vec<u64> = (0..shared).map(|_| rng.next_u64()).collect();
            let mut a = common.clone();
            let mut b = common;
            a.extend((shared..size).map(|_| rng.next_u64()));
            b.extend((0..rng.below(size + 1)).map(|_| rng.next_u64()));
            let (sa, sb) = (sketch(&a), sketch(&b));
            assert_eq!(similarity(&sa, &sb), by_bins(&sa, &sb), "trial {trial}");
        }
    }

    #[test]
    fn estimates_follow_the_exact_jaccard() {
        // Pairs of random sets with a known overlap, small (fewer features than bins) and
        // large: the estimate stays within four standard errors of the exact Jaccard, and the
        // mean error is small.
        let mut rng = SplitMix64(7);
        let mut total_error = 0.0;
        let trials = 300;
        for trial in 0..trials {
            let size = [20, 60, 200, 1000][trial % 4];
            let shared = rng.below(size + 1);
            let common: Vec<u64> = (0..shared).map(|_| rng.next_u64()).collect();
            let mut a = common.clone();
            let mut b = common;
            a.extend((shared..size).map(|_| rng.next_u64()));
            b.extend((shared..size).map(|_| rng.next_u64()));
            let (sa, sb): (HashSet<u64>, HashSet<u64>) =
                (a.iter().copied().collect(), b.iter().copied().collect());
            let exact = sa.intersection(&sb).count() as f64 / sa.union(&sb).count() as f64;
            let estimate = similarity(&sketch(&a), &sketch(&b)).unwrap();
            let error = (estimate - exact).abs();
            let sd = (exact * (1.0 - exact) / BINS as f64).sqrt().max(0.01);
            assert!(
                error <= 4.0 * sd + 0.02,
                "size {size}: {estimate} vs {exact}"
            );
            total_error += error;
        }
        let mean = total_error / trials as f64;
        assert!(mean < 0.03, "mean absolute error {mean}");
    }
}
