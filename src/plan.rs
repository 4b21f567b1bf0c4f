//! Band plans: which keys two fingerprints within Hamming distance k are sure to share.
//!
//! A plan is a list of tables, each a bit mask over the fingerprint. Two fingerprints share
//! table t when they agree on every bit of its mask, `(a ^ b) & mask_t == 0`. The matching puts
//! every fingerprint in every table, compares the fingerprints that share a table's key, and keeps
//! a pair only in the first table it shares ([`BandPlan::first_shared_band`]), so each pair is
//! found once. A plan is exact for k when every two fingerprints within distance k share at least
//! one table; each scheme's doc comment proves when that holds.
//!
//! Its cost is the rows (fingerprints times tables) plus the candidates (pairs that share a key,
//! about N^2 / 2 / 2^w for a key of w bits on random fingerprints). Wider keys mean fewer
//! candidates but more tables; [`crate::planner`] weighs the two.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex};

/// Most tables a plan may have: beyond this the rows alone cost more than any plan saves.
pub const MAX_TABLES: usize = 2048;

/// How a plan cuts the fingerprint into tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// The fingerprint cut into `bands` contiguous bands, one table each.
    ///
    /// Exact for k <= bands - 1. Proof: a bit difference lies in exactly one band, so two
    /// fingerprints within k bits differ in at most k bands; with k < bands, some band has no
    /// difference at all, and the two share that band's table (pigeonhole). Four 16-bit bands
    /// (the signatures' `bucket1..bucket4`) are the default for k <= 3.
    Bands { bands: u32 },
    /// Multi-index hashing (Norouzi et al. 2012): `substrings` contiguous substrings, each
    /// searched within radius `radius` of the fingerprint's own substring.
    ///
    /// Exact for k <= substrings * (radius + 1) - 1. Proof: the distances of the substrings sum to
    /// the distance d <= k; if every substring differed in radius + 1 bits or more, d would be at
    /// least substrings * (radius + 1) > k. So some substring i differs in a set D of at most
    /// `radius` bits. The radius search is written as an equi-join on expanded keys: substring i
    /// minus any `radius` of its bits is a table (C(width, radius) tables per substring), and the
    /// table whose removed bits contain D (pad D with other bits of the substring; it has at least
    /// `radius` bits) is one both fingerprints agree on. Removing bits from both sides, rather than
    /// probing the neighbours of one side, keeps it a self-join of one relation. At radius 1 it
    /// compares about as many pairs as probing (16 tables of 15 bits per 16-bit substring against
    /// 16 probes of 16 bits); at radius r it has C(w, r) tables of w - r bits, more candidates
    /// than probing, which the planner's estimate counts.
    MultiIndex { substrings: u32, radius: u32 },
    /// Permutation tables (Manku, Jain and Das Sarma 2007): `blocks` contiguous blocks; one table
    /// for every choice of `differing` blocks, keyed on all the other blocks.
    ///
    /// Exact for k <= differing. Proof: d <= k bit differences touch at most k <= differing
    /// blocks; pad that set of blocks to exactly `differing` (there are `blocks` > `differing`
    /// of them), and the table keyed on the remaining blocks sees no difference. C(blocks,
    /// differing) tables of about (blocks - differing) / blocks of the bits each.
    Permutation { blocks: u32, differing: u32 },
}

impl Scheme {
    /// The largest k the scheme finds every pair within.
    pub fn max_k(self) -> u32 {
        match self {
            Scheme::Bands { bands } => bands.saturating_sub(1),
            Scheme::MultiIndex { substrings, radius } => substrings
                .saturating_mul(radius.saturating_add(1))
                .saturating_sub(1),
            Scheme::Permutation { differing, .. } => differing,
        }
    }
}

/// A plan for fingerprints of `bits` bits: its scheme and the masks of its tables (band 1 is the
/// first mask; masks of 64-bit plans use the low 64 bits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BandPlan {
    scheme: Scheme,
    bits: u32,
    masks: Vec<u128>,
}

impl BandPlan {
    /// Builds a plan; the error says what is out of range.
    pub fn new(scheme: Scheme, bits: u32) -> Result<Self, String> {
        if bits != 64 && bits != 128 {
            return Err(format!("fingerprints have 64 or 128 bits, not {bits}"));
        }
        let masks = match scheme {
            Scheme::Bands { bands } => {
                check_parts("bands", bands, bits)?;
                parts(bits, bands)
            }
            Scheme::MultiIndex { substrings, radius } => {
                check_parts("substrings", substrings, bits)?;
                let substrings = parts(bits, substrings);
                let mut masks = Vec::new();
                for substring in substrings {
                    let positions = set_bits(substring);
                    // A radius as wide as the substring would leave a table with no key bits.
                    if (radius as usize) >= positions.len() {
                        return Err(format!(
                            "radius {radius} leaves no key bits in a substring of {} bits",
                            positions.len()
                        ));
                    }
                    let count = binomial(positions.len() as u32, radius);
                    if masks.len() as f64 + count > MAX_TABLES as f64 {
                        return Err(too_many_tables());
                    }
                    for removed in combinations(positions.len(), radius as usize) {
                        let drop = removed.iter().fold(0u128, |m, &i| m | positions[i]);
                        masks.push(substring & !drop);
                    }
                }
                masks
            }
            Scheme::Permutation { blocks, differing } => {
                check_parts("blocks", blocks, bits)?;
                if differing >= blocks {
                    return Err(format!(
                        "{differing} differing blocks of {blocks} leave no block to key on"
                    ));
                }
                if binomial(blocks, differing) > MAX_TABLES as f64 {
                    return Err(too_many_tables());
                }
                let blocks = parts(bits, blocks);
                combinations(blocks.len(), differing as usize)
                    .into_iter()
                    .map(|skipped| {
                        (0..blocks.len())
                            .filter(|i| !skipped.contains(i))
                            .fold(0u128, |m, i| m | blocks[i])
                    })
                    .collect()
            }
        };
        Ok(Self {
            scheme,
            bits,
            masks,
        })
    }

    /// The default plan: 16-bit bands (four of 64 bits, eight of 128), the signatures' buckets.
    pub fn default_bands(bits: u32) -> Self {
        let bands = if bits == 128 { 8 } else { 4 };
        Self {
            scheme: Scheme::Bands { bands },
            bits,
            masks: parts(bits, bands),
        }
    }

    /// Reads a plan: `bands[:B]`, `mih[:M[:R]]`, `permutation[:B[:D]]`. Left-out numbers are
    /// the smallest plan of that scheme exact for `k` (`bands:k+1`; the radius floor(k / M); D = k);
    /// `mih` and `permutation` alone are left to the planner (`None`).
    pub fn parse(spec: &str, bits: u32, k: u32) -> Result<Option<Self>, String> {
        let mut fields = spec.trim().split(':');
        let name = fields.next().unwrap_or_default();
        let numbers: Vec<u32> = fields
            .map(|n| {
                n.trim()
                    .parse()
                    .map_err(|_| format!("'{n}' in plan '{spec}' is not a number"))
            })
            .collect::<Result<_, _>>()?;
        let scheme = match (name, numbers.as_slice()) {
            ("bands", []) => Scheme::Bands { bands: k + 1 },
            ("bands", &[bands]) => Scheme::Bands { bands },
            ("mih", []) | ("permutation", []) => return Ok(None),
            ("mih", &[substrings]) => Scheme::MultiIndex {
                substrings,
                radius: k / substrings.max(1),
            },
            ("mih", &[substrings, radius]) => Scheme::MultiIndex { substrings, radius },
            ("permutation", &[blocks]) => Scheme::Permutation {
                blocks,
                differing: k,
            },
            ("permutation", &[blocks, differing]) => Scheme::Permutation { blocks, differing },
            _ => {
                return Err(format!(
                    "unknown plan '{spec}'; write bands[:B], mih[:M[:R]] or permutation[:B[:D]]"
                ));
            }
        };
        let plan = Self::new(scheme, bits).map_err(|e| format!("plan '{spec}': {e}"))?;
        if plan.max_k() < k {
            return Err(format!(
                "plan {plan} finds every pair only up to k = {}, not k = {k}",
                plan.max_k()
            ));
        }
        Ok(Some(plan))
    }

    /// A plan from its canonical spec (as `Display` writes it), built once per process: the
    /// matching functions receive the spec as a literal and look the masks up here.
    pub fn cached(spec: &str, bits: u32) -> Result<Arc<Self>, String> {
        type Cache = Mutex<HashMap<(String, u32), Arc<BandPlan>>>;
        static CACHE: LazyLock<Cache> = LazyLock::new(Default::default);
        let key = (spec.to_string(), bits);
        let mut cache = CACHE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(found) = cache.get(&key) {
            return Ok(Arc::clone(found));
        }
        // Only a canonical spec, every number named (the job passes nothing else): a short one
        // would be filled in for some k, silently not the caller's.
        let plan = Self::parse(spec, bits, 0)?
            .filter(|plan| plan.to_string() == spec)
            .ok_or_else(|| {
                format!("plan '{spec}' must name all its numbers (e.g. bands:4, mih:4:1, permutation:10:8)")
            })?;
        let plan = Arc::new(plan);
        cache.insert(key, Arc::clone(&plan));
        Ok(plan)
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    pub fn bits(&self) -> u32 {
        self.bits
    }

    pub fn max_k(&self) -> u32 {
        self.scheme.max_k()
    }

    /// Number of tables (bands), each a pass over every fingerprint.
    pub fn tables(&self) -> usize {
        self.masks.len()
    }

    /// The mask of table `band` (1-based).
    pub fn mask(&self, band: usize) -> Option<u128> {
        band.checked_sub(1).and_then(|i| self.masks.get(i)).copied()
    }

    /// Key bits of each table.
    pub fn key_bits(&self) -> impl Iterator<Item = u32> + '_ {
        self.masks.iter().map(|m| m.count_ones())
    }

    /// The first table (1-based) two fingerprints share, if any.
    pub fn first_shared_band(&self, a: u128, b: u128) -> Option<usize> {
        let difference = a ^ b;
        self.masks
            .iter()
            .position(|mask| difference & mask == 0)
            .map(|i| i + 1)
    }

    /// A 64-bit key equal for any two fingerprints that share table `band`: the masked bits,
    /// mixed so that any slice of it spreads the keys evenly. For 64-bit fingerprints the mix
    /// is a bijection, so equal keys mean a shared table; 128-bit keys may collide, which only
    /// costs a comparison (pairs are checked against the masks).
    pub fn key(&self, fingerprint: u128, band: usize) -> Option<u64> {
        let masked = fingerprint & self.mask(band)?;
        Some(mix64(masked as u64 ^ mix64((masked >> 64) as u64)))
    }

    /// Expected candidates (pairs that share some table's key, counted once per table) among n
    /// random distinct fingerprints: n (n - 1) / 2 / 2^w per table of w key bits.
    pub fn random_candidates(&self, n: u64) -> f64 {
        let pairs = n as f64 * (n.saturating_sub(1)) as f64 / 2.0;
        self.key_bits().map(|w| pairs / 2f64.powi(w as i32)).sum()
    }
}

impl fmt::Display for BandPlan {
    /// The canonical spec, every number spelled out: `bands:4`, `mih:4:1`, `permutation:11:8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scheme {
            Scheme::Bands { bands } => write!(f, "bands:{bands}"),
            Scheme::MultiIndex { substrings, radius } => write!(f, "mih:{substrings}:{radius}"),
            Scheme::Permutation { blocks, differing } => {
                write!(f, "permutation:{blocks}:{differing}")
            }
        }
    }
}

fn too_many_tables() -> String {
    format!("more than {MAX_TABLES} tables")
}

fn check_parts(what: &str, count: u32, bits: u32) -> Result<(), String> {
    if (1..=bits).contains(&count) {
        Ok(())
    } else {
        Err(format!(
            "{count} {what} of a {bits}-bit fingerprint (1..={bits})"
        ))
    }
}

/// Cuts `bits` into `count` contiguous masks from the top bit, widths differing by at most one
/// (the wider first): four of 64 bits are the 16-bit buckets, bucket1 the top bits.
fn parts(bits: u32, count: u32) -> Vec<u128> {
    let (base, extra) = (bits / count, bits % count);
    let mut top = bits;
    (0..count)
        .map(|i| {
            let width = base + u32::from(i < extra);
            top -= width;
            let ones = if width == 128 {
                u128::MAX
            } else {
                (1u128 << width) - 1
            };
            ones << top
        })
        .collect()
}

/// The single-bit masks of `mask`, from the top.
fn set_bits(mask: u128) -> Vec<u128> {
    (0..128)
        .rev()
        .map(|bit| 1u128 << bit)
        .filter(|b| mask & b != 0)
        .collect()
}

/// Every `choose`-subset of 0..n, in lexicographic order.
fn combinations(n: usize, choose: usize) -> Vec<Vec<usize>> {
    fn extend(
        start: usize,
        n: usize,
        left: usize,
        current: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
    ) {
        if left == 0 {
            out.push(current.clone());
            return;
        }
        for i in start..=n.saturating_sub(left) {
            current.push(i);
            extend(i + 1, n, left - 1, current, out);
            current.pop();
        }
    }
    let mut out = Vec::new();
    if choose <= n {
        extend(0, n, choose, &mut Vec::new(), &mut out);
    }
    out
}

/// C(n, k) as a float (large values stay finite).
pub fn binomial(n: u32, k: u32) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).fold(1.0, |c, i| c * f64::from(n - i) / f64::from(i + 1))
}

/// The finaliser of MurmurHash3: a bijection on u64 that spreads every input bit.
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint;
    use crate::rng::SplitMix64;

    fn plan(spec: &str, bits: u32) -> BandPlan {
        BandPlan::parse(spec, bits, 0).unwrap().unwrap()
    }

    #[test]
    fn four_bands_are_the_signature_buckets() {
        let bands = BandPlan::default_bands(64);
        assert_eq!(bands, plan("bands:4", 64));
        let f = 0x1234_5678_9abc_def0u64;
        for band in 1..=4 {
            let mask = bands.mask(band).unwrap() as u64;
            let shift = mask.trailing_zeros();
            assert_eq!(
                Some(((f & mask) >> shift) as u16),
                fingerprint::band(f, band)
            );
        }
        assert_eq!(BandPlan::default_bands(128).tables(), 8);
    }

    #[test]
    fn table_counts_and_widths() {
        // Permutation: C(blocks, differing) tables keyed on the other blocks.
        let p = plan("permutation:11:8", 64);
        assert_eq!(p.tables(), 165);
        assert!(
            p.key_bits().all(|w| (15..=18).contains(&w)),
            "3 of 11 blocks of 5-6 bits"
        );
        // Multi-index: each 16-bit substring minus one bit: 4 x 16 tables of 15 bits.
        let m = plan("mih:4:1", 64);
        assert_eq!(m.tables(), 64);
        assert!(m.key_bits().all(|w| w == 15));
        assert_eq!(m.max_k(), 7);
        assert_eq!(plan("mih:5:1", 64).max_k(), 9);
        // Uneven cuts: widths differ by at most one and cover every bit once.
        for count in [3, 5, 7, 9, 11, 13] {
            let masks = parts(64, count);
            assert_eq!(masks.iter().fold(0, |m, x| m | x), u64::MAX as u128);
            assert_eq!(masks.iter().map(|m| m.count_ones()).sum::<u32>(), 64);
        }
    }

    #[test]
    fn specs_round_trip_and_errors_say_what_is_wrong() {
        for spec in [
            "bands:4",
            "bands:9",
            "mih:4:1",
            "mih:3:2",
            "permutation:10:8",
        ] {
            assert_eq!(plan(spec, 64).to_string(), spec);
        }
        assert_eq!(
            BandPlan::parse("bands", 64, 6)
                .unwrap()
                .unwrap()
                .to_string(),
            "bands:7"
        );
        assert_eq!(
            BandPlan::parse("mih:4", 64, 6)
                .unwrap()
                .unwrap()
                .to_string(),
            "mih:4:1"
        );
        assert_eq!(BandPlan::parse("mih", 64, 6).unwrap(), None);
        let err = |spec: &str, k| BandPlan::parse(spec, 64, k).unwrap_err();
        assert!(err("bands:4", 5).contains("only up to k = 3"));
        assert!(err("permutation:8:8", 3).contains("no block"));
        assert!(err("mih:4:x", 3).contains("not a number"));
        assert!(err("lsh", 3).contains("unknown plan"));
        assert!(err("bands:65", 3).contains("1..=64"));
        assert!(err("permutation:32:16", 3).contains("more than"));
    }

    /// Every difference pattern of weight <= max_k is covered by some table: exhaustively for the
    /// weights that can be enumerated, and at weight max_k for patterns packed into few blocks,
    /// spread one per block, and random ones.
    #[test]
    fn every_difference_within_max_k_shares_a_table() {
        let specs = [
            "bands:4",
            "bands:9",
            "mih:4:1",
            "mih:3:2",
            "mih:5:1",
            "permutation:8:6",
            "permutation:10:8",
            "permutation:6:3",
        ];
        let mut random = SplitMix64(9);
        for spec in specs {
            let p = plan(spec, 64);
            let covered = |pattern: u64| p.first_shared_band(0, u128::from(pattern)).is_some();
            // Weights 0..=2 exhaustively.
            assert!(covered(0), "{spec}");
            for i in 0..64 {
                assert!(covered(1 << i), "{spec}");
                for j in i + 1..64 {
                    assert!(covered((1 << i) | (1 << j)), "{spec}");
                }
            }
            let k = p.max_k();
            // Runs of k consecutive bits, at every offset (differences packed in blocks).
            for offset in 0..=64 - k {
                let run = if k == 0 {
                    0
                } else {
                    (u64::MAX >> (64 - k)) << offset
                };
                assert!(covered(run), "{spec}: run at {offset}");
            }
            // Random patterns of exactly k bits.
            for _ in 0..20_000 {
                let mut pattern = 0u64;
                while pattern.count_ones() < k {
                    pattern |= 1 << (random.next_u64() % 64);
                }
                assert!(covered(pattern), "{spec}: {pattern:#x}");
            }
            // And the bound is tight: a pattern of k + 1 bits that shares no table.
            let miss = match p.scheme() {
                Scheme::Bands { bands: parts_count }
                | Scheme::Permutation {
                    blocks: parts_count,
                    ..
                } => parts(64, parts_count)
                    .iter()
                    .take(k as usize + 1)
                    .fold(0u128, |m, part| m | (1u128 << part.trailing_zeros())),
                // radius + 1 bits in every substring.
                Scheme::MultiIndex { substrings, radius } => parts(64, substrings)
                    .iter()
                    .flat_map(|&s| set_bits(s).into_iter().take(radius as usize + 1))
                    .fold(0u128, |m, bit| m | bit),
            };
            assert_eq!(miss.count_ones(), k + 1, "{spec}");
            assert_eq!(p.first_shared_band(0, miss), None, "{spec}");
        }
    }

    #[test]
    fn keys_agree_exactly_when_a_table_is_shared() {
        let p = plan("permutation:8:6", 64);
        let mut random = SplitMix64(3);
        for _ in 0..10_000 {
            let a = random.next_u64();
            let b = a ^ (1 << (random.next_u64() % 64)) ^ (1 << (random.next_u64() % 64));
            for band in 1..=p.tables() {
                let shared = (a ^ b) as u128 & p.mask(band).unwrap() == 0;
                assert_eq!(
                    p.key(u128::from(a), band) == p.key(u128::from(b), band),
                    shared
                );
            }
        }
    }

    #[test]
    fn random_candidates_follow_the_key_width() {
        // Four 16-bit tables: 4 * C(n, 2) / 65536.
        let n = 1_000_000u64;
        let expected = 4.0 * (n as f64) * (n as f64 - 1.0) / 2.0 / 65536.0;
        let got = BandPlan::default_bands(64).random_candidates(n);
        assert!((got - expected).abs() < 1.0);
        assert_eq!(binomial(11, 8), 165.0);
    }
}
