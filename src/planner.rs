//! Chooses a band plan for k: every plan exact for k, its estimated rows and candidates, and
//! the cheapest by a cost model measured on this machine (docs/BENCHMARKS.md).
//!
//! Rows are fingerprints times tables; candidates are the pairs sharing a table's key. Random
//! fingerprints give the candidates in closed form ([`BandPlan::random_candidates`]); real ones
//! share keys more often (near-duplicates, templates), so when fingerprints are at hand the
//! planner also counts the candidates of a sample exactly and scales them up, and takes the
//! larger of the two.

use std::fmt::Write as _;

use crate::plan::{BandPlan, MAX_TABLES, Scheme};

/// Seconds per row (one fingerprint in one table: unnest, grouping, sort), and per candidate
/// (one popcount inside a run of equal keys), on two cores: fitted to `cargo bench --bench
/// plans` at 1M fingerprints, least squares on the relative error of its nine plans
/// (docs/BENCHMARKS.md).
pub const SECONDS_PER_ROW: f64 = 51e-9;
pub const SECONDS_PER_CANDIDATE: f64 = 0.37e-9;

/// Fingerprints the planner samples to count real candidates.
pub const SAMPLE: usize = 20_000;

/// One plan's estimate.
#[derive(Debug, Clone)]
pub struct Estimate {
    pub plan: BandPlan,
    pub rows: f64,
    pub candidates: f64,
    /// Whether the candidates come from a sample of real fingerprints (else: random model).
    pub sampled: bool,
    pub seconds: f64,
}

/// Every plan worth considering for k: the bands for k, multi-index hashing with 2..=k
/// substrings, permutation tables with k + 2 blocks and up; those over `MAX_TABLES` are left out.
pub fn plans_for(k: u32, bits: u32) -> Vec<BandPlan> {
    let mut schemes = vec![Scheme::Bands { bands: k + 1 }];
    for substrings in 2..=k {
        schemes.push(Scheme::MultiIndex {
            substrings,
            radius: k / substrings,
        });
    }
    if k > 0 {
        for blocks in k + 2..=bits {
            if crate::plan::binomial(blocks, k) > MAX_TABLES as f64 {
                break;
            }
            schemes.push(Scheme::Permutation {
                blocks,
                differing: k,
            });
        }
    }
    schemes
        .into_iter()
        .filter_map(|s| BandPlan::new(s, bits).ok())
        .filter(|p| p.max_k() >= k)
        .collect()
}

/// The plans `--plan` leaves to choose from, and who chose: every plan for k (`auto`), those of
/// one scheme (`mih`, `permutation`), or the one named.
pub fn plans_asked(spec: &str, k: u32, bits: u32) -> Result<(Vec<BandPlan>, &'static str), String> {
    let spec = spec.trim();
    if spec == "auto" {
        return Ok((plans_for(k, bits), "planner"));
    }
    let parsed = BandPlan::parse(spec, bits, k).map_err(|e| {
        if e.starts_with("unknown plan") {
            format!("{e}, or auto (the planner's choice)")
        } else {
            e
        }
    })?;
    if let Some(plan) = parsed {
        return Ok((vec![plan], "--plan"));
    }
    let prefix = format!("{spec}:");
    let plans: Vec<BandPlan> = plans_for(k, bits)
        .into_iter()
        .filter(|p| p.to_string().starts_with(&prefix))
        .collect();
    if plans.is_empty() {
        return Err(format!(
            "no {spec} plan beyond the bands themselves at k = {k}; use --plan bands or auto"
        ));
    }
    Ok((plans, "planner, --plan scheme"))
}

/// Estimates each plan for `n` distinct fingerprints, cheapest first. `sample` holds some of
/// them (any, or none); plans within 4x of the cheapest random-model cost are re-counted on it.
pub fn estimate(plans: Vec<BandPlan>, n: u64, sample: &[u128]) -> Vec<Estimate> {
    let mut estimates: Vec<Estimate> = plans
        .into_iter()
        .map(|plan| {
            let rows = n as f64 * plan.tables() as f64;
            let candidates = plan.random_candidates(n);
            Estimate {
                seconds: cost(rows, candidates),
                plan,
                rows,
                candidates,
                sampled: false,
            }
        })
        .collect();
    let cheapest = estimates
        .iter()
        .map(|e| e.seconds)
        .fold(f64::INFINITY, f64::min);
    if sample.len() >= 2 {
        for e in estimates.iter_mut().filter(|e| e.seconds <= 4.0 * cheapest) {
            let counted = sample_candidates(&e.plan, sample, n);
            e.candidates = e.candidates.max(counted);
            e.sampled = true;
            e.seconds = cost(e.rows, e.candidates);
        }
    }
    estimates.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    estimates
}

fn cost(rows: f64, candidates: f64) -> f64 {
    rows * SECONDS_PER_ROW + candidates * SECONDS_PER_CANDIDATE
}

/// Candidates among `sample`, counted exactly, scaled to `n` fingerprints: each pair of the
/// whole set is in the sample with probability s (s - 1) / (n (n - 1)).
pub fn sample_candidates(plan: &BandPlan, sample: &[u128], n: u64) -> f64 {
    let s = sample.len() as f64;
    let mut keys: Vec<u64> = Vec::with_capacity(sample.len());
    let mut sharing = 0f64;
    for band in 1..=plan.tables() {
        keys.clear();
        keys.extend(sample.iter().filter_map(|&f| plan.key(f, band)));
        keys.sort_unstable();
        for run in keys.chunk_by(|a, b| a == b) {
            let c = run.len() as f64;
            sharing += c * (c - 1.0) / 2.0;
        }
    }
    let n = (n as f64).max(s);
    sharing * n * (n - 1.0) / (s * (s - 1.0))
}

/// The comparison as a table, the chosen plan first; plans over 20 times its cost are counted,
/// not listed.
pub fn table(estimates: &[Estimate]) -> String {
    let cheapest = estimates.first().map_or(0.0, |e| e.seconds);
    let (shown, hidden) =
        estimates.split_at(estimates.partition_point(|e| e.seconds <= 20.0 * cheapest.max(1e-3)));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<18} {:>7} {:>9} {:>14} {:>14} {:>10}",
        "plan", "tables", "key bits", "rows", "candidates", "est. s"
    );
    for (i, e) in shown.iter().enumerate() {
        let widths: Vec<u32> = e.plan.key_bits().collect();
        let (low, high) = (
            widths.iter().min().copied().unwrap_or(0),
            widths.iter().max().copied().unwrap_or(0),
        );
        let bits = if low == high {
            low.to_string()
        } else {
            format!("{low}-{high}")
        };
        let _ = writeln!(
            out,
            "{:<18} {:>7} {:>9} {:>14} {:>13}{} {:>10.2}{}",
            e.plan.to_string(),
            e.plan.tables(),
            bits,
            approximately(e.rows),
            approximately(e.candidates),
            if e.sampled { "*" } else { " " },
            e.seconds,
            if i == 0 { "  <- chosen" } else { "" }
        );
    }
    if !hidden.is_empty() {
        let _ = writeln!(
            out,
            "({} more plans, each over 20 times the chosen one's cost)",
            hidden.len()
        );
    }
    out
}

/// An estimated count as people read it: whole numbers with thousands separators below a
/// million, then millions, billions and trillions to three figures (`2.20 billion`), and powers
/// of ten past a thousand trillion.
pub fn approximately(count: f64) -> String {
    if !count.is_finite() {
        return "unknown".into();
    }
    if count < 0.5 {
        return if count > 0.0 { "under 1" } else { "0" }.into();
    }
    // Three figures first, so that 999,999.6 reads as 1.00 million, not 1,000,000.
    let whole = count.round();
    let count = if whole < 1e6 {
        whole
    } else {
        let unit = 10f64.powi(count.log10().floor() as i32 - 2);
        (count / unit).round() * unit
    };
    if count >= 1e15 {
        return format!("{count:.2e}");
    }
    for (scale, name) in [(1e12, "trillion"), (1e9, "billion"), (1e6, "million")] {
        if count >= scale {
            let figure = count / scale;
            let decimals = if figure >= 100.0 {
                0
            } else if figure >= 10.0 {
                1
            } else {
                2
            };
            return format!("{figure:.decimals$} {name}");
        }
    }
    let digits = format!("{count:.0}");
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn estimates_read_as_words_and_separated_digits() {
        assert_eq!(approximately(0.0), "0");
        assert_eq!(approximately(0.09375), "under 1");
        assert_eq!(approximately(22.0), "22");
        assert_eq!(approximately(999_999.4), "999,999");
        assert_eq!(approximately(1_234.0), "1,234");
        assert_eq!(approximately(2_200_000.0), "2.20 million");
        assert_eq!(approximately(62_499_195_315.1), "62.5 billion");
        assert_eq!(approximately(1.04e11), "104 billion");
        assert_eq!(approximately(3.1e13), "31.0 trillion");
        assert_eq!(approximately(999_999.6), "1.00 million");
        assert_eq!(approximately(9.995e6), "10.0 million");
        assert_eq!(approximately(99.995e6), "100 million");
        assert_eq!(approximately(999.95e6), "1.00 billion");
        assert_eq!(approximately(1.8e19), "1.80e19");
        assert_eq!(approximately(f64::INFINITY), "unknown");
        assert_eq!(approximately(f64::NAN), "unknown");
    }

    #[test]
    fn every_plan_offered_is_exact_for_k() {
        for k in 0..=8 {
            let plans = plans_for(k, 64);
            assert!(
                plans
                    .iter()
                    .all(|p| p.max_k() >= k && p.tables() <= MAX_TABLES)
            );
            assert!(
                plans
                    .iter()
                    .any(|p| matches!(p.scheme(), Scheme::Bands { .. }))
            );
            if k >= 2 {
                assert!(
                    plans
                        .iter()
                        .any(|p| matches!(p.scheme(), Scheme::MultiIndex { .. }))
                );
                assert!(
                    plans
                        .iter()
                        .any(|p| matches!(p.scheme(), Scheme::Permutation { .. }))
                );
            }
        }
    }

    #[test]
    fn small_k_keeps_the_four_bands_and_large_k_avoids_narrow_bands() {
        let best = |k, n| estimate(plans_for(k, 64), n, &[])[0].plan.to_string();
        assert_eq!(best(3, 1_000_000), "bands:4");
        // Nine 7-bit bands at k = 8 would compare 1M^2 / 2 / 128 pairs per band.
        assert!(!best(8, 1_000_000).starts_with("bands"));
    }

    #[test]
    fn a_sample_sees_skew_the_random_model_misses() {
        // Every fingerprint shares its top 16 bits: band 1 of four bands is one big bucket.
        let mut random = SplitMix64(5);
        let n = 50_000u64;
        let sample: Vec<u128> = (0..SAMPLE)
            .map(|_| u128::from((random.next_u64() >> 16) | 0xABCD << 48))
            .collect();
        let bands = BandPlan::default_bands(64);
        let counted = sample_candidates(&bands, &sample, n);
        let all_pairs = n as f64 * (n as f64 - 1.0) / 2.0;
        assert!(counted >= all_pairs, "{counted} < {all_pairs}");
        assert!(bands.random_candidates(n) < all_pairs / 1000.0);
        let estimates = estimate(vec![bands], n, &sample);
        assert!(estimates[0].sampled && estimates[0].candidates >= all_pairs);
    }

    #[test]
    fn the_table_marks_the_choice() {
        let shown = table(&estimate(plans_for(6, 64), 10_000_000, &[]));
        assert!(shown.lines().nth(1).unwrap().ends_with("<- chosen"));
        assert!(shown.contains("mih:") && shown.contains("permutation:"));
    }
}
