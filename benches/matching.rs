//! Matching benchmark: the SQL matching strategies against a single-thread sort-and-scan over
//! the same random fingerprints, in one run, printed as a Markdown table.
//!
//!     cargo bench --bench matching                      # 1M and 4M fingerprints
//!     cargo bench --bench matching -- 1000000 16000000  # sizes of your choice
//!     NEARDUP_BENCH_JOIN_MAX=2000000 cargo bench ...    # largest size the hash join runs at
//!
//! Fingerprints: 90% uniformly random, 10% planted neighbours of earlier ones at distance 1..=3;
//! k = 3. Each strategy runs as `neardup match` in its own process, so its peak RSS (from
//! summary.json) is its own; wall time includes reading and writing Parquet.

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use neardup::fingerprint::{BANDS, band, first_shared_band, hamming};
use neardup::rng::SplitMix64;

const K: u32 = 3;

fn fingerprints(n: usize) -> Vec<u64> {
    let mut rng = SplitMix64(n as u64);
    let mut out: Vec<u64> = Vec::with_capacity(n);
    for i in 0..n {
        if i > 0 && i % 10 == 0 {
            let base = out[(rng.next_u64() % out.len() as u64) as usize];
            let mut f = base;
            let flips = 1 + rng.next_u64() % 3;
            let mut flipped = 0;
            while flipped < flips {
                let bit = 1u64 << (rng.next_u64() % 64);
                if (f ^ base) & bit == 0 {
                    f ^= bit;
                    flipped += 1;
                }
            }
            out.push(f);
        } else {
            out.push(rng.next_u64());
        }
    }
    out
}

/// The baseline: per band, sort (key, fingerprint) once, then compare every pair inside a run
/// of equal keys with one popcount, counting a pair in the first band it shares. One thread,
/// with the CPU's POPCNT when it has one, as the job's scan.
fn sort_and_scan(fingerprints: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT, the only feature the copy assumes.
        return unsafe { sort_and_scan_with_popcnt(fingerprints) };
    }
    sort_and_scan_portable(fingerprints)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn sort_and_scan_with_popcnt(fingerprints: &[u64]) -> u64 {
    sort_and_scan_portable(fingerprints)
}

#[inline(always)]
fn sort_and_scan_portable(fingerprints: &[u64]) -> u64 {
    let mut distinct = fingerprints.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let mut pairs = 0u64;
    let mut keyed: Vec<(u16, u64)> = Vec::with_capacity(distinct.len());
    for index in 1..=BANDS {
        keyed.clear();
        keyed.extend(distinct.iter().map(|&f| (band(f, index).unwrap_or(0), f)));
        keyed.sort_unstable();
        for run in keyed.chunk_by(|a, b| a.0 == b.0) {
            for (i, &(_, a)) in run.iter().enumerate() {
                for &(_, b) in &run[i + 1..] {
                    if hamming(a, b) <= K && first_shared_band(a, b) == Some(index) {
                        pairs += 1;
                    }
                }
            }
        }
    }
    pairs
}

struct Measured {
    wall: f64,
    candidates: f64,
    fingerprint_pairs: u64,
    peak_rss: u64,
}

fn run_match(input: &Path, output: &Path, matching: &str) -> Measured {
    let start = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["match", "--signatures"])
        .arg(input)
        .arg("--output")
        .arg(output)
        .args(["--k", &K.to_string(), "--matching", matching, "--overwrite"])
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("neardup runs");
    let wall = start.elapsed().as_secs_f64();
    assert!(
        status.success(),
        "neardup match --matching {matching} failed"
    );
    let summary = common::summary(output);
    let candidates = common::stage_seconds(&summary, "candidates");
    Measured {
        wall,
        candidates,
        fingerprint_pairs: summary["counts"]["fingerprint_pairs"].as_u64().unwrap_or(0),
        peak_rss: summary["peak_rss_bytes"].as_u64().unwrap_or(0),
    }
}

fn main() {
    let sizes = common::sizes(&[1_000_000, 4_000_000]);
    let join_max: usize = std::env::var("NEARDUP_BENCH_JOIN_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().expect("temporary folder");
    println!(
        "| fingerprints | method | candidates s | whole `match` s | candidates / sort-and-scan | peak RSS MiB | fingerprint pairs |"
    );
    println!("|---|---|---|---|---|---|---|");
    for n in sizes {
        let fps = fingerprints(n);
        let input = dir.path().join(format!("fp-{n}.parquet"));
        common::write_parquet(&input, &fps);
        let start = Instant::now();
        let expected = sort_and_scan(&fps);
        let baseline = start.elapsed().as_secs_f64();
        println!(
            "| {n} | sort-and-scan, Rust, 1 thread | {baseline:.2} | - | 1.00 | - | {expected} |"
        );
        for matching in ["scan", "join"] {
            if matching == "join" && n > join_max {
                println!(
                    "| {n} | {matching} | skipped (NEARDUP_BENCH_JOIN_MAX = {join_max}) | | | | |"
                );
                continue;
            }
            let m = run_match(
                &input,
                &dir.path().join(format!("out-{n}-{matching}")),
                matching,
            );
            assert_eq!(
                m.fingerprint_pairs, expected,
                "{matching} at {n}: pairs differ from the baseline"
            );
            println!(
                "| {n} | {matching} | {:.2} | {:.2} | {:.2} | {} | {} |",
                m.candidates,
                m.wall,
                m.candidates / baseline,
                m.peak_rss >> 20,
                m.fingerprint_pairs
            );
        }
    }
}
