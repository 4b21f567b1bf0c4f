//! The command line: argument definitions and what each command prints.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::distributed::{self, Cluster, ExecutorOptions};
use crate::error::Result;
use crate::job::{self, MatchOptions, RunOptions};
use crate::output::Overwrite;
use crate::pipeline::{Clustering, Matching, PairsListed};
use crate::query::{self, Format, QueryOptions};
use crate::summary::Summary;
use crate::text::FeatureOptions;

#[derive(Debug, Parser)]
#[command(
    name = "neardup",
    version,
    about = "Find near-duplicate documents in Parquet corpora with 64-bit SimHash on Apache DataFusion",
    long_about = "Find near-duplicate documents in Parquet corpora with 64-bit SimHash on Apache \
DataFusion.\n\n`run` fingerprints every document (jieba TF-IDF keywords for Chinese, words \
otherwise), finds every pair within Hamming distance k, clusters the pairs into duplicate groups \
and writes Parquet tables; `query` answers SQL over them.",
    after_help = "Example:\n  neardup run --input fixtures/sample.parquet --output out/sample\n  \
neardup query --data out/sample \"SELECT group_id, count(*) FROM groups GROUP BY 1 ORDER BY 2 DESC\""
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Fingerprint a corpus, find its near-duplicates, write signatures, pairs, groups and dedup.
    Run(RunArgs),
    /// Find pairs and groups among fingerprints computed elsewhere (or kept from a run).
    Match(MatchArgs),
    /// Run SQL over a run's outputs (tables signatures, pairs, groups, dedup, corpus).
    Query(QueryArgs),
    /// Score a run's groups against a gold clustering or labelled pairs, for one k or a sweep.
    Eval(EvalArgs),
    /// Make a near-duplicate test corpus and its truth from any Parquet corpus.
    Generate(GenerateArgs),
    /// Write random 64-bit fingerprints with planted neighbours, for `match` at any scale.
    GenerateFingerprints(FingerprintArgs),
    /// Compare the band plans for k: tables, rows, estimated candidates and time; which `run`
    /// and `match` would choose.
    Plan(PlanArgs),
    /// Serve as the scheduler of a Ballista cluster that `run --cluster` submits jobs to.
    Scheduler(SchedulerArgs),
    /// Serve as an executor of a Ballista cluster: runs the tasks its scheduler hands out.
    Executor(ExecutorArgs),
}

#[derive(Debug, Args)]
#[command(
    after_help = "Runs until stopped (Ctrl-C or SIGTERM). Executors and clients connect \
to it. It reads the inputs' Parquet metadata when planning, so inputs and outputs must be on \
storage the scheduler, every executor and the client mount at the same path (docs/CLUSTER.md).\n\
Example:\n  neardup scheduler --bind 0.0.0.0:50050\n  \
neardup executor --scheduler host:50050\n  \
neardup run --cluster df://host:50050 --input /shared/crawl --output /shared/out/crawl"
)]
pub struct SchedulerArgs {
    /// Address and port to listen on (port 0: any free port; the one bound is printed).
    #[arg(long, default_value = "0.0.0.0:50050", value_name = "HOST:PORT")]
    pub bind: String,
    /// An executor that has not asked for work for this many seconds is dead: its tasks run
    /// again on the other executors. At least 10 (a busy executor asks every 5 s). A job whose
    /// last executor is gone fails when none comes back within twice this (docs/CLUSTER.md).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = distributed::DEFAULT_EXECUTOR_TIMEOUT_SECONDS,
        value_parser = clap::value_parser!(u64).range(10..)
    )]
    pub executor_timeout: u64,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Runs until stopped (Ctrl-C or SIGTERM). Start one per machine (or \
several on different ports); each registers with the scheduler and asks it for tasks. Name the \
scheduler as other machines reach it (not localhost): an executor is registered at the address \
the scheduler sees it connect from, unless --external-host says otherwise.\n\
Example:\n  neardup executor --scheduler host:50050 --bind 0.0.0.0:50051 --concurrent-tasks 8"
)]
pub struct ExecutorArgs {
    /// The scheduler's host:port.
    #[arg(long, default_value = "localhost:50050", value_name = "HOST:PORT")]
    pub scheduler: String,
    /// IP address and port of this executor's Arrow Flight service, which other executors and
    /// clients fetch task results from.
    #[arg(long, default_value = "0.0.0.0:50051", value_name = "IP:PORT")]
    pub bind: std::net::SocketAddr,
    /// The host name other machines reach this executor at [default: the address the
    /// scheduler sees it connect from].
    #[arg(long, value_name = "HOST")]
    pub external_host: Option<String>,
    /// Tasks run at once [default: the number of cores].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrent_tasks: Option<u16>,
    /// Folder for shuffle files [default: a temporary folder].
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<String>,
    /// Memory the executor's tasks may hold together, e.g. 8G (at least 4M); beyond it they
    /// spill to --work-dir [default: Ballista's share of the machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = Cut(parse_memory_limit))]
    pub memory_limit: Option<usize>,
    /// Exit with an error naming the scheduler's address when it has not answered for this
    /// many seconds, at start (nothing listening there yet) or later.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = distributed::DEFAULT_SCHEDULER_WAIT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub scheduler_timeout: u64,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Columns id (0, 1, ...) and simhash (UInt64). Streamed in blocks of \
2^20 rows (flat memory at 100M); a planted neighbour copies a random earlier row of its block and \
flips 1..=max-distance bits. Same seed, same file.\n\
Example:\n  neardup generate-fingerprints --count 10000000 --output fp10m.parquet\n  \
neardup match --signatures fp10m.parquet --output out/fp10m --k 3"
)]
pub struct FingerprintArgs {
    /// Rows to write.
    #[arg(long, value_name = "N")]
    pub count: u64,
    /// Parquet file to write.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// Share of rows that are planted neighbours of an earlier row.
    #[arg(long, default_value_t = 0.1, value_name = "SHARE")]
    pub neighbours: f64,
    /// Neighbours differ in 1..=this many bits (0: exact copies).
    #[arg(long, default_value_t = 3, value_name = "BITS")]
    pub max_distance: u32,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Replace --output if it exists.
    #[arg(long)]
    pub overwrite: bool,
}

/// `--plan` on `run` and `match`.
const PLAN_HELP: &str = "Band plan that finds the candidate pairs: auto (the planner picks the \
cheapest for the fingerprints at hand), bands[:B] (B bands; bands alone: k + 1), mih[:M[:R]] \
(multi-index hashing: M substrings searched within radius R; mih:M: R = k / M), \
permutation[:B[:D]] (Manku's tables: B blocks, any D differing; D defaults to k). mih or \
permutation alone lets the planner pick the numbers; see `neardup plan`.";

#[derive(Debug, Args)]
#[command(
    after_help = "Every plan listed finds every pair within k (each proves it in src/plan.rs); \
they differ in cost. rows = fingerprints x tables; candidates = pairs that share a table's key, \
on random fingerprints, or counted on a sample of --signatures (marked *) and scaled up; est. s \
weighs the two with costs measured on a 2-core machine (docs/BENCHMARKS.md).\n\
Example:\n  neardup plan --docs 10000000 --k 6\n  \
neardup plan --signatures out/sample/signatures --k 5"
)]
pub struct PlanArgs {
    /// Distinct fingerprints to plan for (default: those in --signatures, else 1,000,000).
    #[arg(long, value_name = "N")]
    pub docs: Option<u64>,
    /// Largest Hamming distance to find every pair within: 0..=8 of 64 bits, 0..=16 of 128.
    #[arg(long, default_value_t = 3, value_parser = Cut(parse_k))]
    pub k: u32,
    /// Fingerprint width.
    #[arg(long, default_value_t = 64, value_name = "64|128")]
    pub bits: u32,
    /// A run's signatures (or any Parquet with a UInt64 fingerprint column): count the distinct
    /// fingerprints and sample them for real key sizes.
    #[arg(long, num_args = 1.., value_name = "PATH")]
    pub signatures: Vec<String>,
    /// Column holding the fingerprint in --signatures.
    #[arg(long, default_value = "simhash", value_name = "NAME")]
    pub simhash_column: String,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Each source document is kept (id '<id>#0') and followed by 0..=max-copies \
copies ('<id>#1', ...) with one to three edits among: boilerplate, markup, delete_sentence, \
insert_sentence, swap_sentences, typos, truncate, punctuation_width, traditional. The corpus \
has columns id, text, edits; the truth has id, cluster (the source id). Same seed, same output.\n\
Example:\n  neardup generate --input docs.parquet --output gen.parquet --truth gen-truth.parquet\n  \
neardup run --input gen.parquet --output out/gen\n  \
neardup eval --output out/gen --truth gen-truth.parquet --sweep 0..=3"
)]
pub struct GenerateArgs {
    /// Parquet corpus to take source documents from.
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// Parquet file to write the generated corpus to.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// Parquet file to write the truth (id, cluster) to.
    #[arg(long, value_name = "FILE")]
    pub truth: PathBuf,
    #[arg(long, default_value = "id", value_name = "NAME")]
    pub id_column: String,
    #[arg(long, default_value = "text", value_name = "NAME")]
    pub text_column: String,
    /// How many source documents to take (the first by id).
    #[arg(long, default_value_t = 1000)]
    pub sources: usize,
    /// Made-up sources to add after the input's, for corpora larger than the input
    /// ('collage-N': sentences of three random input documents of one script, as long as a
    /// random input document). Rows are streamed, so ten million documents take no more memory
    /// than a thousand.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub collage_sources: usize,
    /// Most copies per source (each source gets 0..=this many).
    #[arg(long, default_value_t = 3)]
    pub max_copies: u64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Replace --output and --truth if they exist.
    #[arg(long)]
    pub overwrite: bool,
    /// Draw edits only from these (comma-separated), e.g. markup,boilerplate,traditional.
    #[arg(long, value_delimiter = ',', value_name = "EDIT,...")]
    pub edits: Vec<String>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Pair precision, recall and F1 count every pair of documents as positive \
(same cluster) or negative; the adjusted Rand index compares the clusterings (--truth only). \
With --labels only the listed pairs count, unless --unlisted negative makes every other pair \
of the run's documents a negative. With --sweep, the run's pairs (which carry their distance) \
are filtered and re-clustered for each k, so one run at the largest k scores them all.\n\
Example:\n  neardup eval --output out/drift --labels drift_dev/pairs.parquet --unlisted negative \
--sweep 0..=3"
)]
pub struct EvalArgs {
    /// Output folder of a run.
    #[arg(long, value_name = "DIR")]
    pub output: PathBuf,
    /// Gold clustering (Parquet, CSV or TSV): an id column and a cluster column.
    #[arg(long, value_name = "FILE")]
    pub truth: Option<PathBuf>,
    /// Id column of --truth.
    #[arg(long, default_value = "id", value_name = "NAME")]
    pub truth_id_column: String,
    /// Cluster column of --truth.
    #[arg(long, default_value = "cluster", value_name = "NAME")]
    pub truth_cluster_column: String,
    /// Labelled pairs (Parquet, CSV or TSV): id_a, id_b, label (1 duplicate, 0 not, -1 ignored
    /// both ways; integer or boolean; without a label column every pair listed is a duplicate).
    /// (a, b) and (b, a) are one pair: a pair listed again with the same label counts once, a
    /// pair with two labels is ignored both ways and a pair of an id with itself is dropped (each
    /// with a warning); another label, or NULL, is refused.
    #[arg(long, value_name = "FILE")]
    pub labels: Option<PathBuf>,
    /// With --labels, what a pair of the run's documents that the file does not list is.
    /// `ignore`: nothing, only listed pairs are scored (for files that list their negatives).
    /// `negative`: a negative, so every predicted pair (two documents in one group) that is not
    /// listed is a false positive (for files that list positives and ambiguous pairs only, like
    /// drift_dev's pairs.parquet). Label -1 pairs are ignored either way.
    #[arg(long, value_enum, default_value_t = crate::eval::Unlisted::Ignore, requires = "labels")]
    pub unlisted: crate::eval::Unlisted,
    /// Score every k in a range, e.g. 0..=3 (up to the run's k).
    #[arg(long, value_name = "LOW..=HIGH", value_parser = Cut(parse_sweep))]
    pub sweep: Option<(u32, u32)>,
    /// table or json.
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    pub format: String,
}

fn parse_sweep(text: &str) -> std::result::Result<(u32, u32), String> {
    let bounds = text
        .split_once("..=")
        .map(|(a, b)| (a.trim().parse::<u32>(), b.trim().parse::<u32>()));
    match bounds {
        Some((Ok(low), Ok(high))) if low <= high => Ok((low, high)),
        _ => match text.trim().parse::<u32>() {
            Ok(k) => Ok((k, k)),
            Err(_) => Err(format!(
                "'{}' is not a range like 0..=3",
                crate::error::echo(text)
            )),
        },
    }
}

/// A value parser whose error echoes the value cut to `crate::error::ECHO_LIMIT` characters
/// (clap's own message for a function parser repeats the whole value, 120 KB of --features
/// included).
#[derive(Clone)]
struct Cut<F>(F);

impl<F, T> clap::builder::TypedValueParser for Cut<F>
where
    F: Fn(&str) -> std::result::Result<T, String> + Clone + Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<T, clap::Error> {
        let Some(text) = value.to_str() else {
            return Err(clap::Error::new(clap::error::ErrorKind::InvalidUtf8).with_cmd(cmd));
        };
        (self.0)(text).map_err(|message| {
            let arg = arg.map_or_else(|| "...".to_string(), |a| a.to_string());
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "invalid value '{}' for '{arg}': {message}\n\nFor more information, try \
                     '--help'.",
                    crate::error::echo(text)
                ),
            )
            .with_cmd(cmd)
        })
    }
}

/// `--k`: 0..=16 here (the most of 128-bit fingerprints); `job::check_k` holds 64-bit ones to
/// 0..=8 once the width is known.
fn parse_k(text: &str) -> std::result::Result<u32, String> {
    let allowed = format!(
        "--k (the largest Hamming distance that matches) allows 0..={} for 64-bit \
         fingerprints, 0..={} with --bits 128",
        job::MAX_K,
        2 * job::MAX_K
    );
    match text.trim().parse::<u32>() {
        Ok(k) if k <= 2 * job::MAX_K => Ok(k),
        Ok(k) => Err(format!("{k} is too large; {allowed}")),
        Err(_) => Err(format!("not a whole number from 0; {allowed}")),
    }
}

#[derive(Debug, Args)]
#[command(after_help = "Outputs under --output:\n  \
signatures/   id, simhash, bucket1..bucket4, text_bytes, input_order, features (one row per document)\n  \
pairs/        id_a < id_b, distance (one row per pair within k)\n  \
groups/       id, group_id, representative_id, group_size, distance (duplicated documents)\n  \
dedup/        the input rows minus the non-representative group members\n  \
summary.json  parameters, inputs, counts, stage times\n\n\
--features takes key=value pairs separated by commas (docs/FEATURES.md):\n\
\x20 mode=auto|jieba_tfidf|jieba_tf|words|shingles|chars  how text becomes features; auto:\n\
\x20     character bigrams in runs of Han characters, trigrams in other text\n\
\x20 bits=64|128      fingerprint width (also --bits)\n\
\x20 top_k=50         keywords kept by jieba_tfidf\n\
\x20 n=3              words per shingle (shingles), characters per n-gram (chars)\n\
\x20 idf=FILE         jieba-format IDF table; stop_words=FILE: one stop word per line\n\
\x20 min_features=5   fewer distinct features: matched only as exact copies (short texts)\n\
\x20 empty=skip|exact documents with no features: left out, or duplicates of each other\n\
\x20 html=on nfkc=on width=on t2s=on case=on cjk_only=off space=on  cleaning, in this order\n\
\x20     (t2s=on: Traditional characters to Simplified; t2s=tw: also Taiwan vocabulary)\n\
Example: --features mode=jieba_tfidf,t2s=off  (the original system's features)")]
pub struct RunArgs {
    /// Parquet input: a file, a folder (searched for *.parquet) or a glob; repeat or list several.
    #[arg(long, required = true, num_args = 1.., value_name = "PATH")]
    pub input: Vec<String>,
    /// Folder to write the output tables into (created whole at the end of the run).
    #[arg(long, value_name = "DIR")]
    pub output: PathBuf,
    /// Column holding a unique, non-NULL document id (integer or string).
    #[arg(long, default_value = "id", value_name = "NAME")]
    pub id_column: String,
    /// Column holding the document text.
    #[arg(long, default_value = "text", value_name = "NAME")]
    pub text_column: String,
    /// Largest Hamming distance at which two documents are duplicates: 0..=8 of 64 bits,
    /// 0..=16 of 128 bits; every pair within it is found, whatever the plan.
    #[arg(long, default_value_t = 3, value_parser = Cut(parse_k))]
    pub k: u32,
    /// How candidate pairs are found; both give the same pairs (docs/BENCHMARKS.md).
    #[arg(long, value_enum, default_value_t = Matching::Scan)]
    pub matching: Matching,
    #[arg(long, default_value = "auto", value_name = "PLAN", help = PLAN_HELP)]
    pub plan: String,
    /// Which document pairs the pairs table lists: all (every pair within k; a page copied m
    /// times gives m(m-1)/2 rows), or star (each document with the first of its fingerprint,
    /// fingerprint pairs by their first documents; the same groups, rows linear in documents).
    #[arg(long, value_enum, default_value_t = PairsListed::All)]
    pub pairs: PairsListed,
    /// How pairs become groups: union-find in this process, or SQL rounds (large-star /
    /// small-star) that never collect the pairs, as on a cluster; the same groups
    /// [default: union-find; sql with --cluster].
    #[arg(long, value_enum)]
    pub clustering: Option<Clustering>,
    /// Replace --output if it already holds a neardup output. Only neardup's own entries
    /// (its tables, summary.json, _SUCCESS) are ever replaced; a folder that holds other files
    /// too is refused unless --keep-other-files is given.
    #[arg(long)]
    pub overwrite: bool,
    /// With --overwrite: replace neardup's tables in an output folder that also holds other
    /// files, and keep those files (they move into the new output).
    #[arg(long, requires = "overwrite")]
    pub keep_other_files: bool,
    /// Cleaning and feature options, e.g. mode=chars,n=3 (listed below; unset keys keep their
    /// defaults). The same string works in SQL: simhash(text, 'mode=chars,n=3').
    #[arg(long, value_name = "KEY=VALUE,...", default_value = "", hide_default_value = true,
          value_parser = Cut(parse_features))]
    pub features: FeaturesArg,
    /// Fingerprint width: 64 (UInt64, four 16-bit buckets) or 128 (FixedSizeBinary(16),
    /// bucket1..bucket8, k up to 16), for finer distinctions between long texts. The same as
    /// --features bits=N.
    #[arg(long, value_parser = ["64", "128"], value_name = "64|128")]
    pub bits: Option<String>,
    /// Write the deduplicated corpus in one folder per value of these columns (Hive style,
    /// e.g. dedup/dt=2026-11-28/...); input columns or partition folders of the input.
    #[arg(long, value_name = "COLUMN", value_delimiter = ',')]
    pub partition_by: Vec<String>,
    #[command(flatten)]
    pub index: IndexArgs,
    #[command(flatten)]
    pub console: ConsoleArgs,
}

/// A persisted signature index: earlier batches, matched against without signing them again.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Match the documents against the signature index in DIR too (docs/INDEX.md): pairs and
    /// groups with indexed documents, stable group ids, and dedup drops new documents that
    /// duplicate anything indexed. The index must have the same --k, features and id type.
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
    /// Add this batch to --index once the outputs are written (creates the index if DIR is
    /// missing or empty). Atomic: a failed run leaves the index as it was. A batch whose ids
    /// are already indexed is refused.
    #[arg(long, requires = "index")]
    pub update_index: bool,
}

impl IndexArgs {
    fn options(&self) -> Option<job::IndexOptions> {
        self.index.as_ref().map(|dir| job::IndexOptions {
            dir: dir.clone(),
            update: self.update_index,
        })
    }
}

/// How a job uses the machine and the terminal.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Partitions run in parallel [default: the number of cores]. With --cluster: tasks per
    /// stage, best the cluster's task slots in all (its executors' --concurrent-tasks summed).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// Print nothing but errors (no stage times, no progress bars, no summary).
    #[arg(long, short, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Most memory DataFusion's sorts, aggregates and joins may hold, e.g. 512M or 4G (at
    /// least 4M); beyond it they spill to the temporary folder (TMPDIR). Unlimited by default.
    #[arg(long, value_name = "SIZE", value_parser = Cut(parse_memory_limit))]
    pub memory_limit: Option<usize>,
    /// Also log each stage's SQL as it runs and the planner's comparison (the same as
    /// RUST_LOG=neardup=debug; RUST_LOG=datafusion=debug adds DataFusion's own log).
    #[arg(long, short)]
    pub verbose: bool,
    /// Run the stages on an Apache DataFusion Ballista cluster: df://host:port of a running
    /// `neardup scheduler`, or `standalone` (a scheduler and an executor in this process).
    /// Inputs and --output must be paths every executor reads and writes at the same place
    /// (docs/CLUSTER.md).
    #[arg(long, value_name = "df://HOST:PORT", value_parser = Cluster::parse)]
    pub cluster: Option<Cluster>,
    /// With --cluster df://...: fail the job once the scheduler has had no live executor for
    /// this many seconds (none registered yet, or all gone) [default: 60].
    #[arg(
        long,
        value_name = "SECONDS",
        requires = "cluster",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub executor_timeout: Option<u64>,
}

impl ConsoleArgs {
    fn console(&self) -> job::Console {
        let wait = self.executor_timeout.map_or(
            distributed::DEFAULT_EXECUTOR_WAIT,
            std::time::Duration::from_secs,
        );
        job::Console {
            threads: self.threads.map(usize::from),
            quiet: self.quiet,
            memory_limit: self.memory_limit,
            cluster: self.cluster.clone().map(|c| c.with_executor_wait(wait)),
        }
    }

    /// `--clustering` as given, or the default for where the job runs.
    fn clustering(&self, asked: Option<Clustering>) -> Clustering {
        asked.unwrap_or(match self.cluster {
            Some(_) => Clustering::Sql,
            None => Clustering::UnionFind,
        })
    }
}

/// A size in bytes, with an optional K, M or G (powers of 1024).
fn parse_size(text: &str) -> std::result::Result<usize, String> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let multiplier: usize = match unit.trim().to_ascii_uppercase().trim_end_matches('B') {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return Err(not_a_size(text)),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .filter(|&n| n > 0)
        .ok_or_else(|| not_a_size(text))
}

fn not_a_size(text: &str) -> String {
    format!(
        "'{}' is not a size such as 512M or 4G",
        crate::error::echo(text)
    )
}

/// The smallest `--memory-limit`: the shipped sample's run needs 4M on two partitions (at 2M a
/// sort cannot reserve its merge buffer). More partitions need more; DataFusion's "Resources
/// exhausted" then says to raise the limit or lower --threads (`crate::error::resource_hint`).
pub const MIN_MEMORY_LIMIT: usize = 4 << 20;

/// `--memory-limit`: a size (`parse_size`) of at least `MIN_MEMORY_LIMIT`.
fn parse_memory_limit(text: &str) -> std::result::Result<usize, String> {
    let bytes = parse_size(text)?;
    if bytes < MIN_MEMORY_LIMIT {
        return Err(format!(
            "too small to run in: DataFusion's sorts, aggregates and Parquet writers each \
             reserve buffers of their own, so neardup needs at least {}M (more with many \
             --threads), e.g. 512M or 4G",
            MIN_MEMORY_LIMIT >> 20
        ));
    }
    Ok(bytes)
}

/// `--features` as given: the options, and the width if the string names one (`bits=`), so
/// that `--bits` can be checked against it (`FeatureOptions` alone cannot tell `bits=64` from
/// the default).
#[derive(Debug, Clone)]
pub struct FeaturesArg {
    pub options: FeatureOptions,
    pub bits: Option<u32>,
}

/// `--bits` sets the features' width; it may not contradict a `bits=` in `--features`.
fn with_bits(features: FeaturesArg, bits: Option<&str>) -> Result<FeatureOptions> {
    let FeaturesArg {
        mut options,
        bits: given,
    } = features;
    let Some(bits) = bits else {
        return Ok(options);
    };
    let bits: u32 = if bits == "128" { 128 } else { 64 };
    if let Some(given) = given.filter(|&given| given != bits) {
        return Err(crate::error::Error::Usage(format!(
            "--bits {bits} contradicts bits={given} in --features; give the fingerprint width \
             once (--bits {bits}, or bits={bits} in --features)"
        )));
    }
    options.bits = bits;
    Ok(options)
}

fn parse_features(text: &str) -> std::result::Result<FeaturesArg, String> {
    let options = FeatureOptions::parse(text).map_err(|e| e.to_string())?;
    // The last `bits=` counts, as in `FeatureOptions::parse`, which has checked the value.
    let bits = text
        .split(',')
        .filter_map(|item| item.split_once('='))
        .filter(|(key, _)| key.trim() == "bits")
        .filter_map(|(_, value)| value.trim().parse::<u32>().ok())
        .next_back();
    Ok(FeaturesArg { options, bits })
}

#[derive(Debug, Args)]
pub struct MatchArgs {
    /// Parquet fingerprints (an id column and a UInt64 simhash column): files, folders or globs.
    #[arg(long, required = true, num_args = 1.., value_name = "PATH")]
    pub signatures: Vec<String>,
    /// Folder to write pairs, groups and summary.json into.
    #[arg(long, value_name = "DIR")]
    pub output: PathBuf,
    /// Column holding a unique, non-NULL document id.
    #[arg(long, default_value = "id", value_name = "NAME")]
    pub id_column: String,
    /// Column holding the 64-bit fingerprint (UInt64).
    #[arg(long, default_value = "simhash", value_name = "NAME")]
    pub simhash_column: String,
    /// Largest Hamming distance at which two fingerprints match: 0..=8; every pair within it is
    /// found, whatever the plan.
    #[arg(long, default_value_t = 3, value_parser = Cut(parse_k))]
    pub k: u32,
    /// How candidate pairs are found; both give the same pairs (docs/BENCHMARKS.md).
    #[arg(long, value_enum, default_value_t = Matching::Scan)]
    pub matching: Matching,
    #[arg(long, default_value = "auto", value_name = "PLAN", help = PLAN_HELP)]
    pub plan: String,
    /// Which document pairs the pairs table lists: all (every pair within k; a page copied m
    /// times gives m(m-1)/2 rows), or star (each document with the first of its fingerprint,
    /// fingerprint pairs by their first documents; the same groups, rows linear in documents).
    #[arg(long, value_enum, default_value_t = PairsListed::All)]
    pub pairs: PairsListed,
    /// How pairs become groups: union-find in this process, or SQL rounds (large-star /
    /// small-star) that never collect the pairs, as on a cluster; the same groups
    /// [default: union-find; sql with --cluster].
    #[arg(long, value_enum)]
    pub clustering: Option<Clustering>,
    /// Replace --output if it already holds a neardup output. Only neardup's own entries
    /// (its tables, summary.json, _SUCCESS) are ever replaced; a folder that holds other files
    /// too is refused unless --keep-other-files is given.
    #[arg(long)]
    pub overwrite: bool,
    /// With --overwrite: replace neardup's tables in an output folder that also holds other
    /// files, and keep those files (they move into the new output).
    #[arg(long, requires = "overwrite")]
    pub keep_other_files: bool,
    #[command(flatten)]
    pub index: IndexArgs,
    #[command(flatten)]
    pub console: ConsoleArgs,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Several statements may be given, separated by ';' (in the argument, with -c, \
in -f files or on standard input): all run, the last one's result is written.\nFunctions: simhash(text [, options]), simhash_details(text [, options]), \
clean_text(text [, options]), hamming(a, b), bucket(simhash, n), band_key(simhash, band, plan), \
shared_band(a, b, plan), and the aggregate band_pairs(simhash, band, k [, plan]). Options are run's --features string, e.g. 'mode=chars,n=3'."
)]
pub struct QueryArgs {
    /// Output folder of a run; its tables and its input (as corpus) are registered.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// A signature index (run --index); registers index_documents, index_group_log,
    /// index_groups (each document's current group) and index_batches.
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
    /// How to write the result.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Rows the table format shows, or `inf` for all; the rest are counted and the count is
    /// printed under the table. The other formats write every row.
    #[arg(long, value_name = "N|inf", default_value = "40", value_parser = parse_max_rows)]
    pub maxrows: usize,
    /// Write the result to this file instead of standard output (appears whole, at the end).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace --out if the file exists.
    #[arg(long, requires = "out")]
    pub overwrite: bool,
    /// SQL to run after the SQL argument; repeat for more.
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    pub command: Vec<String>,
    /// A file of SQL statements to run after the -c ones; repeat for more.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Vec<PathBuf>,
    /// The SQL to run. Without it, -c and -f give the SQL, or else standard input does
    /// (`neardup query < statements.sql`).
    pub sql: Option<String>,
}

/// `--maxrows`: a count, or `inf` for every row.
fn parse_max_rows(text: &str) -> std::result::Result<usize, String> {
    if text == "inf" {
        return Ok(usize::MAX);
    }
    text.parse()
        .map_err(|_| "a whole number of rows, or inf for all of them".to_string())
}

/// The statements `query` runs, in order: the SQL argument, each -c, each -f file, or standard
/// input when none is given.
fn query_sql(args: &QueryArgs) -> Result<String> {
    use std::io::{IsTerminal, Read};
    let mut parts: Vec<String> = args.sql.iter().chain(&args.command).cloned().collect();
    for file in &args.file {
        parts.push(std::fs::read_to_string(file).map_err(|e| crate::Error::io(file, e))?);
    }
    if parts.is_empty() {
        let mut stdin = std::io::stdin();
        if stdin.is_terminal() {
            return Err(crate::Error::Usage(
                "no SQL given: pass it as an argument, with -c SQL or -f FILE, or on standard \
                 input (neardup query < statements.sql)"
                    .into(),
            ));
        }
        let mut text = String::new();
        stdin
            .read_to_string(&mut text)
            .map_err(|e| crate::Error::io("<standard input>", e))?;
        parts.push(text);
    }
    // A part without its closing ';' still ends its last statement.
    Ok(parts.join("\n;\n"))
}

/// Runs one command; the caller turns an error into a message and an exit code.
pub async fn execute(cli: Cli) -> Result<()> {
    let logged = match &cli.command {
        Command::Run(args) => crate::logging::job_default(args.console.verbose),
        Command::Match(args) => crate::logging::job_default(args.console.verbose),
        Command::Scheduler(_) | Command::Executor(_) => crate::logging::SERVER_DEFAULT,
        _ => crate::logging::job_default(false),
    };
    crate::logging::init(logged);
    match cli.command {
        Command::Run(args) => {
            let options = RunOptions {
                inputs: args.input,
                output: args.output.clone(),
                id_column: args.id_column,
                text_column: args.text_column,
                k: args.k,
                matching: args.matching,
                plan: args.plan,
                pairs: args.pairs,
                clustering: args.console.clustering(args.clustering),
                overwrite: Overwrite::from_flags(args.overwrite, args.keep_other_files),
                features: with_bits(args.features, args.bits.as_deref())?,
                index: args.index.options(),
                partition_by: args.partition_by,
                console: args.console.console(),
            };
            let summary = job::run(&options).await?;
            if !args.console.quiet {
                report(&summary, &args.output);
            }
        }
        Command::Match(args) => {
            let options = MatchOptions {
                signatures: args.signatures,
                output: args.output.clone(),
                id_column: args.id_column,
                simhash_column: args.simhash_column,
                k: args.k,
                matching: args.matching,
                plan: args.plan,
                pairs: args.pairs,
                clustering: args.console.clustering(args.clustering),
                overwrite: Overwrite::from_flags(args.overwrite, args.keep_other_files),
                index: args.index.options(),
                console: args.console.console(),
            };
            let summary = job::match_fingerprints(&options).await?;
            if !args.console.quiet {
                report(&summary, &args.output);
            }
        }
        Command::Eval(args) => {
            let options = crate::eval::EvalOptions {
                output: args.output,
                truth: args.truth,
                truth_id_column: args.truth_id_column,
                truth_cluster_column: args.truth_cluster_column,
                labels: args.labels,
                unlisted: args.unlisted,
                sweep: args.sweep,
                json: args.format == "json",
            };
            print!("{}", crate::eval::eval(&options).await?);
        }
        Command::Generate(args) => {
            let options = crate::generate::GenerateOptions {
                input: args.input,
                output: args.output.clone(),
                truth: args.truth.clone(),
                id_column: args.id_column,
                text_column: args.text_column,
                sources: args.sources,
                collage_sources: args.collage_sources,
                max_copies: args.max_copies,
                seed: args.seed,
                overwrite: args.overwrite,
                edits: args.edits,
            };
            let (sources, documents) = crate::generate::generate(&options).await?;
            println!(
                "{documents} documents from {sources} sources in {}; truth in {}",
                args.output.display(),
                args.truth.display()
            );
        }
        Command::GenerateFingerprints(args) => {
            let options = crate::synthetic::FingerprintOptions {
                output: args.output.clone(),
                count: args.count,
                neighbours: args.neighbours,
                max_distance: args.max_distance,
                seed: args.seed,
                overwrite: args.overwrite,
            };
            let planted = crate::synthetic::generate(&options)?;
            println!(
                "{} fingerprints ({planted} planted neighbours) in {}",
                args.count,
                args.output.display()
            );
        }
        Command::Plan(args) => {
            let options = job::PlanOptions {
                docs: args.docs,
                k: args.k,
                bits: args.bits,
                signatures: args.signatures,
                simhash_column: args.simhash_column,
            };
            print!("{}", job::compare_plans(&options).await?);
        }
        Command::Scheduler(args) => {
            distributed::run_scheduler(&args.bind, args.executor_timeout).await?
        }
        Command::Executor(args) => {
            let options = ExecutorOptions {
                scheduler: args.scheduler,
                bind: args.bind,
                external_host: args.external_host,
                concurrent_tasks: args.concurrent_tasks.map(usize::from),
                work_dir: args.work_dir,
                memory_limit: args.memory_limit,
                scheduler_wait: std::time::Duration::from_secs(args.scheduler_timeout),
            };
            distributed::run_executor(&options).await?
        }
        Command::Query(args) => {
            let options = QueryOptions {
                sql: query_sql(&args)?,
                data: args.data,
                index: args.index,
                max_rows: args.maxrows,
                format: args.format,
                out: args.out,
                overwrite: args.overwrite,
            };
            query::query(&options).await?;
        }
    }
    Ok(())
}

fn report(summary: &Summary, output: &std::path::Path) {
    let c = &summary.counts;
    println!(
        "{} documents ({} with NULL text, {} with nothing to fingerprint): {} pairs within k = {}, \
         {} groups holding {} documents, {} removed.",
        c.documents,
        c.null_texts,
        c.empty_texts,
        c.pairs,
        summary.parameters.k,
        c.groups,
        c.grouped_documents,
        c.documents_removed
    );
    if summary.parameters.pairs == PairsListed::All && c.pairs > 10 * c.documents.max(1) {
        println!(
            "Note: {} pairs for {} documents: many copies of the same pages. --pairs star lists \
             at most one pair per document (plus one per fingerprint pair) with the same groups.",
            c.pairs, c.documents
        );
    }
    println!(
        "Outputs in {} ({:.2} s):",
        output.display(),
        summary.total_seconds
    );
    for table in query::OUTPUT_TABLES {
        if output.join(table).is_dir() {
            println!("  {}/", output.join(table).display());
        }
    }
    println!("  {}", output.join(crate::output::SUMMARY_FILE).display());
    println!(
        "Ask: neardup query --data {} \"SELECT group_id, count(*) AS docs FROM groups GROUP BY 1 ORDER BY 2 DESC LIMIT 10\"",
        output.display()
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_take_units() {
        assert_eq!(super::parse_size("512M"), Ok(512 << 20));
        assert_eq!(super::parse_size("4g"), Ok(4 << 30));
        assert_eq!(super::parse_size("2GB"), Ok(2 << 30));
        assert_eq!(super::parse_size("1000"), Ok(1000));
        for bad in ["", "0", "M", "12X", "-5M", "99999999999999999999G"] {
            assert!(super::parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn memory_limits_below_the_floor_are_refused() {
        assert_eq!(super::parse_memory_limit("4M"), Ok(4 << 20));
        assert_eq!(super::parse_memory_limit("1G"), Ok(1 << 30));
        for small in ["1", "1K", "3M", "4194303"] {
            let err = super::parse_memory_limit(small).unwrap_err();
            assert!(err.contains("at least 4M"), "{small}: {err}");
        }
        assert!(
            super::parse_memory_limit("lots")
                .unwrap_err()
                .contains("512M")
        );
    }

    #[test]
    fn k_is_parsed_up_to_the_widest_fingerprints() {
        assert_eq!(super::parse_k("0"), Ok(0));
        assert_eq!(super::parse_k("16"), Ok(16));
        for bad in ["-1", "17", "99999999999", "many"] {
            let err = super::parse_k(bad).unwrap_err();
            assert!(
                err.contains("0..=8 for 64-bit") && err.contains("0..=16 with --bits 128"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn bits_given_twice_must_agree() {
        let given = |text: &str| super::parse_features(text).unwrap();
        assert_eq!(given("mode=chars").bits, None);
        assert_eq!(given("bits=128, bits = 64").bits, Some(64));
        let err = super::with_bits(given("bits=64"), Some("128"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--bits 128 contradicts bits=64 in --features"),
            "{err}"
        );
        assert!(super::with_bits(given("bits=64"), Some("64")).is_ok());
        assert_eq!(super::with_bits(given(""), Some("128")).unwrap().bits, 128);
        assert_eq!(super::with_bits(given("bits=128"), None).unwrap().bits, 128);
    }
}
