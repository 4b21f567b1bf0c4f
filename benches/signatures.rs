//! The signature stage against ClickHouse and against the arithmetic floor, in one run, printed
//! as a Markdown table.
//!
//!     cargo bench --bench signatures                          # debian_docs
//!     cargo bench --bench signatures -- gen200k.parquet ...   # your Parquet files (a text column)
//!
//! For each file, best of three:
//! - neardup: `neardup run` as its own process with `--threads 1` and `--threads 2`; the
//!   signature stage's seconds from summary.json (default cleaning, features and sketches),
//!   each run followed by ClickHouse's at the same threads;
//! - its kernel alone: cleaning, features, SimHash and sketch of every text on one thread, in
//!   this process, with the texts already in memory;
//! - ClickHouse: `ngramSimHashCaseInsensitiveUTF8(text, 3)` over the file, written as Parquet,
//!   through the `chdb` package (PyPI) with `max_threads` 1 and 2, timed inside Python after the
//!   import. The Python is `$NEARDUP_BENCH_PYTHON`, else `~/.cache/neardup/venv/bin/python`;
//!   without chdb its columns say so;
//! - the floor: a plain n-gram SimHash written here, no cleaning, one core (Han bigrams, other
//!   trigrams over the raw characters, XXH3, one integer vote per n-gram, no distinct features,
//!   no sketch): what the arithmetic costs.
//!
//! "cores busy" is the stage's CPU seconds over its wall seconds at two threads (summary.json's
//! `cpu_seconds`), the median of the rounds: 2.0 means neither core waited, however fast the
//! machine ran that minute; scaling below it is each core's own work slowing down.
//!
//! MB are the bytes of the text column. "vs ClickHouse" is neardup's MB/s over ClickHouse's at
//! the same threads, the median of the three rounds' ratios (this machine's speed drifts from
//! one minute to the next, and two runs side by side drift together): 1.0 or more is as fast.

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use neardup::fingerprint::CountingSimHasher;
use neardup::text::{Featurizer, Scratch, is_han};
use xxhash_rust::xxh3::xxh3_64;

const RUNS: usize = 3;

fn best(mut work: impl FnMut() -> f64) -> f64 {
    (0..RUNS).map(|_| work()).fold(f64::INFINITY, f64::min)
}

/// The signature stage's seconds of one `neardup run` at `threads`, and the cores it kept busy.
fn neardup_stage(input: &Path, work: &Path, threads: usize) -> (f64, f64) {
    let output = work.join(format!("out-{threads}"));
    let status = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "run",
            "-q",
            "--overwrite",
            "--threads",
            &threads.to_string(),
        ])
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(&output)
        .status()
        .expect("neardup runs");
    assert!(status.success(), "neardup run on {}", input.display());
    let summary = common::summary(&output);
    let seconds = common::stage_seconds(&summary, "signatures");
    let cpu = common::stage_number(&summary, "signatures", "cpu_seconds");
    (seconds, cpu / seconds)
}

fn python() -> PathBuf {
    std::env::var_os("NEARDUP_BENCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_default();
            Path::new(&home).join(".cache/neardup/venv/bin/python")
        })
}

/// ClickHouse's seconds for one run at `threads`, or the reason it could not run.
fn clickhouse(input: &Path, work: &Path, threads: usize) -> Result<f64, String> {
    let script = r#"
import sys, time
import chdb
path, out, threads = sys.argv[1], sys.argv[2], sys.argv[3]
query = (f"SELECT ngramSimHashCaseInsensitiveUTF8(text, 3) AS simhash "
         f"FROM file('{path}', Parquet) INTO OUTFILE '{out}' TRUNCATE FORMAT Parquet "
         f"SETTINGS max_threads = {threads}")
# Not timed: a process's first query also starts the engine.
chdb.query(query)
start = time.perf_counter()
chdb.query(query)
print(time.perf_counter() - start)
"#;
    let mut command = Command::new(python());
    command
        .args(["-c", script])
        .arg(input)
        .arg(work.join("clickhouse.parquet"))
        .arg(threads.to_string());
    let out = command
        .output()
        .map_err(|e| format!("{}: {e}", python().display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or("failed").to_string();
        return Err(last);
    }
    let printed = String::from_utf8_lossy(&out.stdout);
    printed
        .trim()
        .parse::<f64>()
        .map_err(|e| format!("{printed}: {e}"))
}

/// The signature stage's seconds and ClickHouse's at one thread count, `RUNS` rounds of one
/// run each, the two alternating.
struct SideBySide {
    neardup: Vec<f64>,
    /// The cores neardup's stage kept busy, per round.
    cores: Vec<f64>,
    clickhouse: Result<Vec<f64>, String>,
}

fn side_by_side(input: &Path, work: &Path, threads: usize) -> SideBySide {
    let (mut neardup, mut cores) = (Vec::new(), Vec::new());
    let mut clickhouse_seconds = Ok(Vec::new());
    for _ in 0..RUNS {
        let (seconds, busy) = neardup_stage(input, work, threads);
        neardup.push(seconds);
        cores.push(busy);
        if let Ok(times) = &mut clickhouse_seconds {
            match clickhouse(input, work, threads) {
                Ok(seconds) => times.push(seconds),
                Err(why) => clickhouse_seconds = Err(why),
            }
        }
    }
    SideBySide {
        neardup,
        cores,
        clickhouse: clickhouse_seconds,
    }
}

impl SideBySide {
    /// The median over rounds of ClickHouse's seconds over neardup's (its speed relative to
    /// ClickHouse's); NaN without ClickHouse.
    fn median_ratio(&self) -> f64 {
        let Ok(clickhouse) = &self.clickhouse else {
            return f64::NAN;
        };
        let ratios: Vec<f64> = clickhouse
            .iter()
            .zip(&self.neardup)
            .map(|(c, n)| c / n)
            .collect();
        median(&ratios)
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

fn fastest(seconds: &[f64]) -> f64 {
    seconds.iter().copied().fold(f64::INFINITY, f64::min)
}

/// The plain SimHash of one text: n-grams of the raw characters by script run, XXH3, one vote
/// per n-gram in the job's integer byte lanes. `starts` is reused across texts.
fn floor_simhash(text: &str, starts: &mut Vec<usize>, votes: &mut CountingSimHasher) -> u64 {
    votes.reset();
    starts.clear();
    starts.extend(text.char_indices().map(|(at, _)| at));
    starts.push(text.len());
    let chars = starts.len() - 1;
    let han = |i: usize| text[starts[i]..].chars().next().is_some_and(is_han);
    let mut first = 0;
    while first < chars {
        let script = han(first);
        let mut end = first + 1;
        while end < chars && han(end) == script {
            end += 1;
        }
        let n = if script { 2 } else { 3 };
        let last = if end - first <= n { first } else { end - n };
        for start in first..=last {
            let stop = (start + n).min(end);
            votes.add(xxh3_64(&text.as_bytes()[starts[start]..starts[stop]]), 1);
        }
        first = end;
    }
    votes.finish().unwrap_or(0)
}

fn seconds(work: impl FnOnce() -> u64) -> f64 {
    let start = Instant::now();
    std::hint::black_box(work());
    start.elapsed().as_secs_f64()
}

fn cell(mb: f64, seconds: Option<f64>) -> String {
    seconds.map_or("-".into(), |s| format!("{s:.3} s ({:.0} MB/s)", mb / s))
}

#[tokio::main]
async fn main() {
    let mut files: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    if files.is_empty() {
        files.push(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/debian_docs/docs.parquet"),
        );
    }
    let work = tempfile::tempdir().expect("a temporary folder");
    println!(
        "| file | MB | neardup stage, 1 thread | 2 threads | scaling | cores busy, 2 threads | \
         kernel alone, 1 thread | ClickHouse, 1 thread | 2 threads | vs ClickHouse, 1 / 2 threads | floor, 1 thread |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for file in &files {
        let texts = common::texts(file.to_str().expect("a UTF-8 path"), None).await;
        let mb = texts.iter().map(String::len).sum::<usize>() as f64 / 1e6;
        let one = side_by_side(file, work.path(), 1);
        let two = side_by_side(file, work.path(), 2);
        let featurizer = Featurizer::cached("").expect("default options");
        let kernel = best(|| {
            seconds(|| {
                let mut scratch = Scratch::default();
                let mut check = 0u64;
                for text in &texts {
                    let printed = featurizer.fingerprint(text, &mut scratch);
                    check ^= printed.simhash.unwrap_or(0);
                    check ^= u64::from(featurizer.sketch(&scratch)[0]);
                }
                check
            })
        });
        let floor = best(|| {
            seconds(|| {
                let (mut starts, mut votes) = (Vec::new(), CountingSimHasher::default());
                texts.iter().fold(0, |check, t| {
                    check ^ floor_simhash(t, &mut starts, &mut votes)
                })
            })
        });
        let (ch_one, ch_two, versus) = match (&one.clickhouse, &two.clickhouse) {
            (Ok(ch_one), Ok(ch_two)) => (
                cell(mb, Some(fastest(ch_one))),
                cell(mb, Some(fastest(ch_two))),
                format!("{:.2} / {:.2}", one.median_ratio(), two.median_ratio()),
            ),
            (Err(why), _) | (_, Err(why)) => (format!("not run: {why}"), "-".into(), "-".into()),
        };
        let busy = median(&two.cores);
        let (one, two) = (fastest(&one.neardup), fastest(&two.neardup));
        println!(
            "| {} | {mb:.1} | {} | {} | {:.2}x | {busy:.2} | {} | {ch_one} | {ch_two} | {versus} | {} |",
            file.file_name().map_or("?".into(), |n| n.to_string_lossy()),
            cell(mb, Some(one)),
            cell(mb, Some(two)),
            one / two,
            cell(mb, Some(kernel)),
            cell(mb, Some(floor)),
        );
    }
}
