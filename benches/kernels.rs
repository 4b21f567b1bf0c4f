//! Kernel benchmark: each SQL function's inner loop on its own, one thread, printed as a
//! Markdown table.
//!
//!     cargo bench --bench kernels                        # 5,000 debian_docs documents
//!     NEARDUP_BENCH_DOCS=20000 cargo bench --bench kernels
//!     NEARDUP_BENCH_ONLY=sketch cargo bench --bench kernels  # the rows whose name holds it
//!     NEARDUP_BENCH_CORPUS=zh200k.parquet cargo bench --bench kernels  # another file's texts
//!
//! Texts: the first N documents of `../shared/data/debian_docs/docs.parquet` (Chinese and
//! English), or of the Parquet file `NEARDUP_BENCH_CORPUS` names (its `text` column).
//! `simhash` in each feature mode with its cleaning; `hamming`, `bucket` and `band_key` over
//! 10 million random fingerprints. The best of three runs of each row.

#[path = "common/mod.rs"]
mod common;

use std::time::Instant;

use neardup::fingerprint::{band, hamming};
use neardup::plan::BandPlan;
use neardup::rng::SplitMix64;
use neardup::text::{Featurizer, Scratch};

const CORPUS: &str = "../shared/data/debian_docs/docs.parquet";

/// Best of three: the shared machine is noisy.
fn best_of_three(mut work: impl FnMut() -> u64) -> (f64, u64) {
    let mut best = f64::INFINITY;
    let mut check = 0;
    for _ in 0..3 {
        let start = Instant::now();
        // black_box: the result is otherwise unused and the optimiser would drop the work.
        check = std::hint::black_box(work());
        best = best.min(start.elapsed().as_secs_f64());
    }
    (best, check)
}

/// Whether a row runs: `NEARDUP_BENCH_ONLY` narrows the table to the rows whose name holds it
/// (one row under `perf record`, say).
fn selected(name: &str) -> bool {
    std::env::var("NEARDUP_BENCH_ONLY").map_or(true, |only| name.contains(&only))
}

#[tokio::main]
async fn main() {
    let limit: usize = std::env::var("NEARDUP_BENCH_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let corpus = std::env::var("NEARDUP_BENCH_CORPUS").unwrap_or_else(|_| CORPUS.to_string());
    let texts = common::texts(&corpus, Some(limit)).await;
    let bytes: usize = texts.iter().map(String::len).sum();
    println!("| kernel | items | seconds | items/s | MB/s |");
    println!("|---|---|---|---|---|");
    // The defaults, then each cleaning step switched off alone (the time a step costs is the
    // defaults' less its row), then all of them off: a regression in one step shows in its row.
    for options in [
        "",
        "html=off",
        "nfkc=off",
        "width=off",
        "t2s=off",
        "case=off",
        "space=off",
        "html=off,nfkc=off,width=off,t2s=off,case=off,space=off",
        "mode=jieba_tfidf,t2s=off",
        "mode=jieba_tfidf",
        "mode=words",
        "mode=shingles",
        "mode=chars,n=2",
        "bits=128",
    ] {
        let name = if options.is_empty() {
            "defaults"
        } else {
            options
        };
        if !selected(&format!("simhash `{name}`")) {
            continue;
        }
        let featurizer = Featurizer::cached(options).expect("options");
        let (seconds, printed) = best_of_three(|| {
            let mut scratch = Scratch::default();
            texts
                .iter()
                .filter(|t| featurizer.fingerprint(t, &mut scratch).features > 0)
                .count() as u64
        });
        println!(
            "| simhash `{name}` | {} documents ({printed} with features) | {seconds:.3} | {:.0} | {:.1} |",
            texts.len(),
            texts.len() as f64 / seconds,
            bytes as f64 / seconds / 1e6
        );
    }
    // What the signature stage computes by default: the fingerprint and the sketch.
    if selected("simhash_sketch `defaults`") {
        let featurizer = Featurizer::cached("").expect("options");
        let (seconds, _) = best_of_three(|| {
            let mut scratch = Scratch::default();
            texts.iter().fold(0, |check, t| {
                featurizer.fingerprint(t, &mut scratch);
                check ^ u64::from(featurizer.sketch(&scratch)[0])
            })
        });
        println!(
            "| simhash_sketch `defaults` | {} documents | {seconds:.3} | {:.0} | {:.1} |",
            texts.len(),
            texts.len() as f64 / seconds,
            bytes as f64 / seconds / 1e6
        );
    }
    if !["hamming", "bucket", "band_key"]
        .iter()
        .any(|name| selected(name))
    {
        return;
    }
    let mut random = SplitMix64(1);
    let fingerprints: Vec<u64> = (0..10_000_000).map(|_| random.next_u64()).collect();
    let n = fingerprints.len();
    let rows = |name: &str, seconds: f64| {
        println!(
            "| {name} | {n} fingerprints | {seconds:.3} | {:.0} | - |",
            n as f64 / seconds
        );
    };
    let (seconds, _) = best_of_three(|| {
        std::hint::black_box(&fingerprints)
            .windows(2)
            .map(|w| u64::from(hamming(w[0], w[1])))
            .sum()
    });
    rows("hamming", seconds);
    let (seconds, _) = best_of_three(|| {
        std::hint::black_box(&fingerprints)
            .iter()
            .map(|&f| u64::from(band(f, 3).unwrap_or(0)))
            .sum()
    });
    rows("bucket (band 3)", seconds);
    let plan = BandPlan::cached("permutation:10:8", 64).expect("plan");
    let (seconds, _) = best_of_three(|| {
        std::hint::black_box(&fingerprints)
            .iter()
            .map(|&f| plan.key(u128::from(f), 17).unwrap_or(0) & 1)
            .sum()
    });
    rows("band_key (permutation:10:8, table 17)", seconds);
}
