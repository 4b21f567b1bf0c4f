//! Band plan benchmark: for each k, the cheapest plan of each scheme by the planner's estimate,
//! run as `neardup match --plan ...` on the same random fingerprints, with the planner's
//! estimates beside the measured candidates, printed as a Markdown table.
//!
//!     cargo bench --bench plans                          # 1M fingerprints, k = 3, 5, 7
//!     cargo bench --bench plans -- 1000000 10000000      # sizes of your choice
//!     NEARDUP_BENCH_KS=3,8 cargo bench --bench plans     # other k
//!     NEARDUP_BENCH_MAX_SECONDS=600 ...                  # skip plans estimated slower
//!
//! Fingerprints: 90% uniformly random, 10% planted neighbours of earlier ones at distance
//! 1..=k. Measured candidates are counted exactly here (pairs sharing a table's key, summed over
//! tables) by a single-thread sort-and-scan written apart from the job; the pairs within k it
//! finds must be the same for every plan, and the same as the job's.

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use neardup::plan::{BandPlan, Scheme};
use neardup::planner;
use neardup::rng::SplitMix64;

fn fingerprints(n: usize, k: u32) -> Vec<u64> {
    let mut rng = SplitMix64(n as u64 ^ u64::from(k) << 40);
    let mut out: Vec<u64> = Vec::with_capacity(n);
    for i in 0..n {
        if i > 0 && i % 10 == 0 {
            let base = out[(rng.next_u64() % out.len() as u64) as usize];
            let mut f = base;
            let flips = 1 + rng.next_u64() % u64::from(k.max(1));
            while u64::from((f ^ base).count_ones()) < flips {
                f ^= 1u64 << (rng.next_u64() % 64);
            }
            out.push(f);
        } else {
            out.push(rng.next_u64());
        }
    }
    out
}

/// Exact candidates of a plan (pairs sharing a key, per table) and the pairs within k, each
/// taken from its first shared table: a single-thread sort-and-scan per table.
fn count_exactly(plan: &BandPlan, distinct: &[u64], k: u32) -> (u64, u64) {
    let (mut candidates, mut pairs) = (0u64, 0u64);
    let mut keyed: Vec<(u64, u64)> = Vec::with_capacity(distinct.len());
    for band in 1..=plan.tables() {
        let mask = plan.mask(band).unwrap_or(0) as u64;
        keyed.clear();
        keyed.extend(distinct.iter().map(|&f| (f & mask, f)));
        keyed.sort_unstable();
        for run in keyed.chunk_by(|a, b| a.0 == b.0) {
            let c = run.len() as u64;
            candidates += c * (c - 1) / 2;
            for (i, &(_, a)) in run.iter().enumerate() {
                for &(_, b) in &run[i + 1..] {
                    if (a ^ b).count_ones() <= k
                        && plan.first_shared_band(u128::from(a), u128::from(b)) == Some(band)
                    {
                        pairs += 1;
                    }
                }
            }
        }
    }
    (candidates, pairs)
}

struct Measured {
    wall: f64,
    candidates_stage: f64,
    fingerprint_pairs: u64,
    peak_rss: u64,
    passes: u64,
}

fn run_match(input: &Path, output: &Path, k: u32, plan: &str) -> Measured {
    let start = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["match", "--signatures"])
        .arg(input)
        .arg("--output")
        .arg(output)
        .args([
            "--k",
            &k.to_string(),
            "--plan",
            plan,
            "--overwrite",
            "--quiet",
        ])
        .status()
        .expect("neardup runs");
    let wall = start.elapsed().as_secs_f64();
    assert!(status.success(), "neardup match --plan {plan} failed");
    let summary = common::summary(output);
    let candidates_stage = common::stage_seconds(&summary, "candidates");
    Measured {
        wall,
        candidates_stage,
        fingerprint_pairs: summary["counts"]["fingerprint_pairs"].as_u64().unwrap_or(0),
        peak_rss: summary["peak_rss_bytes"].as_u64().unwrap_or(0),
        passes: summary["plan"]["passes"].as_u64().unwrap_or(0),
    }
}

fn scheme_name(plan: &BandPlan) -> &'static str {
    match plan.scheme() {
        Scheme::Bands { .. } => "bands",
        Scheme::MultiIndex { .. } => "mih",
        Scheme::Permutation { .. } => "permutation",
    }
}

fn main() {
    let sizes = common::sizes(&[1_000_000]);
    let ks: Vec<u32> = std::env::var("NEARDUP_BENCH_KS")
        .unwrap_or_else(|_| "3,5,7".into())
        .split(',')
        .filter_map(|k| k.trim().parse().ok())
        .collect();
    let max_seconds: f64 = std::env::var("NEARDUP_BENCH_MAX_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300.0);
    let dir = tempfile::tempdir().expect("temporary folder");
    println!(
        "| fingerprints | k | plan | tables | passes | rows | est. candidates | candidates | est. s | candidates s | whole `match` s | peak RSS MiB | fingerprint pairs |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in &sizes {
        for &k in &ks {
            let fps = fingerprints(n, k);
            let input = dir.path().join(format!("fp-{n}-{k}.parquet"));
            common::write_parquet(&input, &fps);
            let mut distinct = fps.clone();
            distinct.sort_unstable();
            distinct.dedup();
            let estimates =
                planner::estimate(planner::plans_for(k, 64), distinct.len() as u64, &[]);
            let mut expected_pairs = None;
            for scheme in ["bands", "mih", "permutation"] {
                let Some(e) = estimates.iter().find(|e| scheme_name(&e.plan) == scheme) else {
                    continue;
                };
                let spec = e.plan.to_string();
                if e.seconds > max_seconds {
                    println!(
                        "| {n} | {k} | {spec} | {} | | {:.2e} | {:.2e} | | {:.1} | skipped (over {max_seconds} s estimated) | | | |",
                        e.plan.tables(),
                        e.rows,
                        e.candidates,
                        e.seconds
                    );
                    continue;
                }
                let (candidates, pairs) = count_exactly(&e.plan, &distinct, k);
                if let Some(expected) = expected_pairs {
                    assert_eq!(pairs, expected, "{spec}: a plan missed or repeated pairs");
                }
                expected_pairs = Some(pairs);
                let m = run_match(
                    &input,
                    &dir.path().join(format!("out-{n}-{k}-{spec}")),
                    k,
                    &spec,
                );
                assert_eq!(m.fingerprint_pairs, pairs, "{spec} at {n}, k = {k}");
                println!(
                    "| {n} | {k} | {spec} | {} | {} | {:.2e} | {:.2e} | {:.2e} | {:.1} | {:.2} | {:.2} | {} | {} |",
                    e.plan.tables(),
                    m.passes,
                    e.rows,
                    e.candidates,
                    candidates as f64,
                    e.seconds,
                    m.candidates_stage,
                    m.wall,
                    m.peak_rss >> 20,
                    m.fingerprint_pairs
                );
            }
        }
    }
}
