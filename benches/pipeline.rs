//! End-to-end benchmark: the whole `neardup run` against the raw feature extractors on the same
//! documents, in one run, printed as a Markdown table.
//!
//!     cargo bench --bench pipeline                       # 20,000 debian_docs sources, ~75k docs
//!     cargo bench --bench pipeline -- 5000               # fewer sources
//!     NEARDUP_BENCH_CORPUS=docs.parquet cargo bench ...  # your corpus (columns id, text)
//!
//! The corpus is made with `neardup generate` from `../shared/data/debian_docs/docs.parquet`
//! (0-6 edited copies per source). Ceilings, one thread each, over every text: jieba-rs TF-IDF
//! keyword extraction (the original system's features) and the default features (cleaning and
//! script-aware n-grams into a SimHash). The job runs as its own process, so its peak RSS (from
//! summary.json) is its own; its stage times come from summary.json too.

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use jieba_rs::{Jieba, KeywordExtract, TfIdf};
use neardup::text::{FeatureOptions, Featurizer, Scratch};

fn neardup(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .output()
        .expect("neardup runs");
    assert!(
        out.status.success(),
        "neardup {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn corpus(work: &Path, sources: &str) -> PathBuf {
    if let Ok(given) = std::env::var("NEARDUP_BENCH_CORPUS") {
        return PathBuf::from(given);
    }
    let data =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/debian_docs/docs.parquet");
    let corpus = work.join(format!("debian-{sources}.parquet"));
    if !corpus.exists() {
        neardup(&[
            "generate",
            "--input",
            data.to_str().expect("utf-8 path"),
            "--output",
            corpus.to_str().expect("utf-8 path"),
            "--truth",
            work.join("truth.parquet").to_str().expect("utf-8 path"),
            "--sources",
            sources,
            "--max-copies",
            "6",
            "--overwrite",
        ]);
    }
    corpus
}

fn row(step: &str, seconds: f64, docs: usize, bytes: usize, note: &str) {
    println!(
        "| {step} | {seconds:.2} | {:.0} | {:.1} | {note} |",
        docs as f64 / seconds,
        bytes as f64 / seconds / 1e6
    );
}

#[tokio::main]
async fn main() {
    let sources = std::env::args()
        .skip(1)
        .find(|a| a.chars().all(|c| c.is_ascii_digit()))
        .unwrap_or_else(|| "20000".to_string());
    let work = std::env::temp_dir().join("neardup-bench-pipeline");
    std::fs::create_dir_all(&work).expect("work folder");
    let corpus = corpus(&work, &sources);
    let texts = common::texts(corpus.to_str().expect("utf-8 path"), None).await;
    let (docs, bytes) = (texts.len(), texts.iter().map(String::len).sum::<usize>());
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    println!(
        "{docs} documents, {:.1} MB of text, {cores} cores; docs/s and MB/s over all documents\n",
        bytes as f64 / 1e6
    );
    println!("| step | seconds | docs/s | MB/s | note |\n|---|---|---|---|---|");

    let jieba = Jieba::new();
    let tfidf = TfIdf::default();
    let started = Instant::now();
    let mut keywords = 0usize;
    for text in &texts {
        keywords += tfidf.extract_keywords(&jieba, text, 50, Vec::new()).len();
    }
    let jieba_seconds = started.elapsed().as_secs_f64();
    row(
        "jieba-rs TF-IDF top 50, 1 thread",
        jieba_seconds,
        docs,
        bytes,
        &format!("{keywords} keywords"),
    );

    let featurizer = Featurizer::new(FeatureOptions::default()).expect("defaults");
    let mut scratch = Scratch::default();
    let started = Instant::now();
    let mut printed = 0usize;
    for text in &texts {
        printed += usize::from(featurizer.fingerprint(text, &mut scratch).simhash.is_some());
    }
    let features_seconds = started.elapsed().as_secs_f64();
    row(
        "default features + SimHash, 1 thread",
        features_seconds,
        docs,
        bytes,
        &format!("{printed} fingerprints"),
    );

    let output = work.join("out");
    let started = Instant::now();
    neardup(&[
        "run",
        "--input",
        corpus.to_str().expect("utf-8 path"),
        "--output",
        output.to_str().expect("utf-8 path"),
        "--overwrite",
    ]);
    let wall = started.elapsed().as_secs_f64();
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(output.join("summary.json")).expect("summary"),
    )
    .expect("summary json");
    let mut signatures = f64::NAN;
    for stage in summary["stages"].as_array().into_iter().flatten() {
        let (name, seconds) = (
            stage["stage"].as_str().unwrap_or("?"),
            stage["seconds"].as_f64().unwrap_or(f64::NAN),
        );
        if name == "signatures" {
            signatures = seconds;
        }
        let note = match name {
            "signatures" => format!(
                "{:.2}x jieba x {cores} cores, {:.2}x default features x {cores} cores",
                jieba_seconds / cores as f64 / seconds,
                features_seconds / cores as f64 / seconds
            ),
            "pairs" => format!("{} pairs", summary["counts"]["pairs"]),
            "candidates" => format!(
                "{} fingerprint pairs",
                summary["counts"]["fingerprint_pairs"]
            ),
            "groups" => format!("{} groups", summary["counts"]["groups"]),
            _ => String::new(),
        };
        row(&format!("run: {name}"), seconds, docs, bytes, &note);
    }
    let peak = summary["peak_rss_bytes"].as_u64().unwrap_or(0) as f64 / (1 << 20) as f64;
    row(
        "run: whole job (process wall time)",
        wall,
        docs,
        bytes,
        &format!(
            "{:.2}x the signature stage; peak RSS {peak:.0} MiB",
            wall / signatures
        ),
    );
}
