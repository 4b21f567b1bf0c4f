//! Index benchmark: the cost of one batch against signature indexes of different sizes, next
//! to matching everything again, in one run, printed as a Markdown table.
//!
//!     cargo bench --bench index                       # indexes of 1M and 5M fingerprints
//!     cargo bench --bench index -- 1000000 2000000    # index sizes of your choice
//!     NEARDUP_BENCH_BATCH=200000 cargo bench --bench index   # batch size (default 100,000)
//!     NEARDUP_BENCH_JOIN_MAX=2000000 cargo bench ...  # largest batch `--matching join` runs at
//!
//! Index fingerprints: 90% random, 10% planted neighbours of earlier ones at distance 1..=3.
//! The batch: 90% random, 5% neighbours of indexed fingerprints at distance 1..=3, 5% exact
//! copies of indexed ones; k = 3. Every command runs as `neardup match` in its own process;
//! the batch runs read-only (`--index` without `--update-index`) so it sees the same index
//! each time. The bench checks that the batch's pairs are the pairs of matching everything
//! again that involve a batch document.

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use neardup::rng::SplitMix64;

/// Flips `1..=3` distinct random bits of `f`.
fn neighbour(rng: &mut SplitMix64, f: u64) -> u64 {
    let flips = 1 + rng.next_u64() % 3;
    let mut out = f;
    while (out ^ f).count_ones() < flips as u32 {
        out ^= 1 << (rng.next_u64() % 64);
    }
    out
}

fn indexed(n: usize) -> Vec<u64> {
    let mut rng = SplitMix64(11);
    let mut out: Vec<u64> = Vec::with_capacity(n);
    for i in 0..n {
        let f = if i > 0 && i % 10 == 0 {
            let base = out[(rng.next_u64() % out.len() as u64) as usize];
            neighbour(&mut rng, base)
        } else {
            rng.next_u64()
        };
        out.push(f);
    }
    out
}

fn batch(index: &[u64], size: usize) -> Vec<u64> {
    let mut rng = SplitMix64(12);
    (0..size)
        .map(|i| {
            let base = index[(rng.next_u64() % index.len() as u64) as usize];
            match i % 20 {
                0 => neighbour(&mut rng, base),
                1 => base,
                _ => rng.next_u64(),
            }
        })
        .collect()
}

struct Measured {
    wall: f64,
    summary: serde_json::Value,
}

fn run_match(inputs: &[&Path], output: &Path, index: &[&str]) -> Measured {
    let start = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .arg("match")
        .arg("--signatures")
        .args(inputs)
        .arg("--output")
        .arg(output)
        .args(["--k", "3", "--overwrite"])
        .args(index)
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("neardup runs");
    let wall = start.elapsed().as_secs_f64();
    assert!(status.success(), "neardup match {index:?} failed");
    Measured {
        wall,
        summary: common::summary(output),
    }
}

fn count(summary: &serde_json::Value, name: &str) -> u64 {
    summary["counts"][name].as_u64().unwrap_or(0)
}

fn mib(summary: &serde_json::Value) -> f64 {
    summary["peak_rss_bytes"].as_u64().unwrap_or(0) as f64 / (1 << 20) as f64
}

fn main() {
    let sizes = common::sizes(&[1_000_000, 5_000_000]);
    let batch_size: usize = std::env::var("NEARDUP_BENCH_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let join_max: usize = std::env::var("NEARDUP_BENCH_JOIN_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let dir = tempfile::tempdir().expect("temporary folder");
    println!(
        "| indexed | batch | batch s | fingerprints s | candidates s | pairs s | clustering s | groups s | batch peak RSS MiB | batch pairs | batch with `--matching join` s | everything again s | its peak RSS MiB | building the index s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for n in sizes {
        let fps = indexed(n);
        let new = batch(&fps, batch_size);
        let index_file = dir.path().join(format!("index-{n}.parquet"));
        let batch_file = dir.path().join(format!("batch-{n}.parquet"));
        common::write_parquet(&index_file, &fps);
        common::write_parquet_from(&batch_file, n as i64, &new);
        drop((fps, new));
        let index_dir = dir.path().join(format!("index-{n}"));
        let index_arg = index_dir.display().to_string();

        let build = run_match(
            &[&index_file],
            &dir.path().join(format!("build-{n}")),
            &["--index", &index_arg, "--update-index"],
        );
        let one = run_match(
            &[&batch_file],
            &dir.path().join(format!("batch-out-{n}")),
            &["--index", &index_arg],
        );
        let join = if batch_size <= join_max {
            let join = run_match(
                &[&batch_file],
                &dir.path().join(format!("batch-join-{n}")),
                &["--index", &index_arg, "--matching", "join"],
            );
            assert_eq!(count(&join.summary, "pairs"), count(&one.summary, "pairs"));
            format!("{:.2}", join.wall)
        } else {
            format!("skipped (NEARDUP_BENCH_JOIN_MAX = {join_max})")
        };
        let all = run_match(
            &[&index_file, &batch_file],
            &dir.path().join(format!("all-{n}")),
            &[],
        );
        // Matching everything again finds the index's pairs and the batch's, nothing else.
        assert_eq!(
            count(&all.summary, "pairs"),
            count(&build.summary, "pairs") + count(&one.summary, "pairs"),
            "the batch's pairs are the new pairs of one run over everything"
        );
        let stage = |name: &str| common::stage_seconds(&one.summary, name);
        println!(
            "| {n} | {batch_size} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {} | {join} | {:.2} | {:.0} | {:.2} |",
            one.wall,
            stage("fingerprints"),
            stage("candidates"),
            stage("pairs"),
            stage("clustering"),
            stage("groups"),
            mib(&one.summary),
            count(&one.summary, "pairs"),
            all.wall,
            mib(&all.summary),
            build.wall,
        );
    }
}
