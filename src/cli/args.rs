//! What the user can type: the commands and their flags (clap), and what `run` and `match`
//! make of them (a `JobRequest`; the rules between flags are applied by `JobRequest::resolve`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::cli::values::{
    Cut, FeaturesArg, parse_features, parse_k, parse_max_rows, parse_memory_limit, parse_sweep,
    parse_verify,
};
use crate::commands::eval::EvalOptions;
use crate::commands::explain::{ExplainOptions, Subject};
use crate::commands::generate::GenerateOptions;
use crate::commands::generate_fingerprints::FingerprintOptions;
use crate::commands::plan::PlanOptions;
use crate::commands::query::{Format, QueryOptions};
use crate::commands::report::ReportOptions;
use crate::delta::output::OutputFormat;
use crate::engine::ballista::{self, Cluster, ExecutorOptions};
use crate::engine::cluster_access::{ClusterAccess, TlsFiles};
use crate::engine::session::Console;
use crate::engine::staging::Overwrite;
use crate::error::{Error, Result};
use crate::fingerprint::Width;
use crate::input::format::Format as InputFormat;
use crate::job::choices::Clustering;
use crate::job::choices::{Matching, PairsListed};
use crate::job::config::Verify;
use crate::job::keep::Keep;
use crate::job::{IndexOptions, JobRequest, Source};

#[derive(Debug, Parser)]
#[command(
    name = "neardup",
    version,
    about = "Find near-duplicate documents in text corpora with SimHash on Apache DataFusion",
    long_about = "Find near-duplicate documents in text corpora (Parquet, JSON Lines, CSV or Delta \
tables, local or on an object store) with SimHash on Apache DataFusion.\n\n`run` cleans every document and cuts it into character n-grams (bigrams in Han \
text, trigrams in other text), fingerprints them with a 64-bit (or 128-bit) SimHash and a \
MinHash sketch, takes every pair within Hamming distance k as a candidate, keeps the pairs whose \
estimated Jaccard similarity passes --verify, clusters them into duplicate groups and writes \
Parquet tables; `query` answers SQL over them.",
    after_help = "Example:\n  neardup run --input fixtures/sample.parquet --output out/sample --overwrite\n  \
neardup query --data out/sample \"SELECT group_id, count(*) FROM groups GROUP BY 1 ORDER BY 2 DESC\"\n\n\
Exit codes: 0 success, 2 a usage error (the command line asks for something that cannot work), \
130 interrupted (Ctrl-C or SIGTERM; nothing half-written is left), 1 anything else."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The worker threads a job in this process asks for: `--threads` of `run` or `match` off a
    /// cluster. The runtime gets that many, so `--threads 1` computes on one core even where a
    /// stage runs more partitions than that (the signature stage splits its scans finer, to
    /// balance them).
    pub fn local_threads(&self) -> Option<usize> {
        let console = match &self.command {
            Command::Run(args) => &args.console,
            Command::Match(args) => &args.console,
            _ => return None,
        };
        match console.cluster {
            None => console.threads.map(usize::from),
            Some(_) => None,
        }
    }
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
    /// Say why two documents of a run were paired or not, or what a document's group holds.
    Explain(ExplainArgs),
    /// Write report.html: a run at a glance, its distances, groups and sample pairs side by
    /// side, and with a truth its precision and recall against k.
    Report(ReportArgs),
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
storage the scheduler, every executor and the client mount at the same path (docs/CLUSTER.md). \
It listens on loopback unless --bind says otherwise; an address other machines reach needs the \
cluster's token in NEARDUP_CLUSTER_TOKEN (the same on every machine) or --tls-ca (docs/CLUSTER.md, \
\"Security\").\n\
Examples:\n  neardup scheduler                                  # 127.0.0.1:50050, one machine\n  \
export NEARDUP_CLUSTER_TOKEN=$(cat /run/secrets/neardup)\n  \
neardup scheduler --bind 0.0.0.0:50050 --tls-cert node.pem --tls-key node.key --tls-ca ca.pem\n  \
neardup run --cluster dfs://host:50050 --tls-ca ca.pem --tls-cert client.pem --tls-key client.key \
--input /shared/crawl --output /shared/out/crawl"
)]
pub struct SchedulerArgs {
    /// Address and port to listen on (port 0: any free port; the one bound is printed). An
    /// address other machines reach needs a token or --tls-ca, or --insecure.
    #[arg(long, default_value = "127.0.0.1:50050", value_name = "HOST:PORT")]
    pub bind: String,
    #[command(flatten)]
    pub access: ServerAccessArgs,
    /// An executor that has not asked for work for this many seconds is dead: its tasks run
    /// again on the other executors. At least 10 (a busy executor asks every 5 s), at most a
    /// week (604800). A job whose last executor is gone fails when none comes back within twice
    /// this (docs/CLUSTER.md).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = ballista::DEFAULT_EXECUTOR_TIMEOUT_SECONDS,
        value_parser = clap::value_parser!(u64).range(10..=604_800)
    )]
    pub executor_timeout: u64,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Runs until stopped (Ctrl-C or SIGTERM). Start one per machine (or \
several on different ports); each registers with the scheduler and asks it for tasks. Name the \
scheduler as other machines reach it (not localhost): an executor is registered at the address \
the scheduler sees it connect from, unless --external-host says otherwise. Its Flight port \
listens on loopback unless --bind says otherwise; an address other machines reach needs the \
cluster's token in NEARDUP_CLUSTER_TOKEN or --tls-ca. With --tls-cert it serves TLS and dials \
the scheduler and other executors over TLS, presenting the same certificate.\n\
Example:\n  neardup executor --scheduler host:50050 --bind 0.0.0.0:50051 --concurrent-tasks 8 \
--tls-cert node.pem --tls-key node.key --tls-ca ca.pem"
)]
pub struct ExecutorArgs {
    /// The scheduler's host:port.
    #[arg(long, default_value = "localhost:50050", value_name = "HOST:PORT")]
    pub scheduler: String,
    /// IP address and port of this executor's Arrow Flight service, which other executors and
    /// clients fetch task results from. An address other machines reach needs a token or
    /// --tls-ca, or --insecure.
    #[arg(long, default_value = "127.0.0.1:50051", value_name = "IP:PORT")]
    pub bind: std::net::SocketAddr,
    #[command(flatten)]
    pub access: ServerAccessArgs,
    /// The host name other machines reach this executor at [default: the address the
    /// scheduler sees it connect from].
    #[arg(long, value_name = "HOST")]
    pub external_host: Option<String>,
    /// Tasks run at once [default: the number of cores].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrent_tasks: Option<u16>,
    /// Folder for shuffle and spill files, kept when the executor stops [default: a folder of
    /// its own in TMPDIR, removed when it stops].
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<String>,
    /// Memory the executor's tasks may hold together, e.g. 8G (at least 4M); beyond it they
    /// spill to the work folder (--work-dir) [default: Ballista's share of the machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = Cut(parse_memory_limit))]
    pub memory_limit: Option<usize>,
    /// Exit with an error naming the scheduler's address when it has not answered for this
    /// many seconds, at start (nothing listening there yet) or later.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = ballista::DEFAULT_SCHEDULER_WAIT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub scheduler_timeout: u64,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Columns id (0, 1, ...) and simhash (UInt64). Streamed in blocks of \
2^20 rows (flat memory at 100M); a planted neighbour copies a random earlier row of its block and \
flips 1..=max-distance bits. Same seed, same file.\n\
Example:\n  neardup generate-fingerprints --count 10000000 --output fp10m.parquet --overwrite\n  \
neardup match --signatures fp10m.parquet --output out/fp10m --k 3 --overwrite"
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
/// `generate --collage-sources` at most: a trillion documents, far beyond any disk, and a
/// number every later sum of documents holds without wrapping.
const MOST_COLLAGE_SOURCES: u64 = 1_000_000_000_000;
/// `generate --max-copies` at most: a million copies of one source.
const MOST_COPIES: u64 = 1_000_000;

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
    /// The default is `match`'s; `run`'s is 7 (its candidates verified by sketches), so give
    /// --k 7 for the plan a run with its defaults chooses.
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
Example:\n  neardup generate --input docs.parquet --output gen.parquet --truth gen-truth.parquet \
--overwrite\n  \
neardup run --input gen.parquet --output out/gen --overwrite\n  \
neardup eval --output out/gen --truth gen-truth.parquet --sweep 0..=7"
)]
pub struct GenerateArgs {
    /// Corpus file to take source documents from: Parquet, or JSON Lines or CSV by its name
    /// (.jsonl, .csv, also compressed), as run reads them.
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
    /// How many source documents to take (the first by id: integer ids in numeric order).
    #[arg(long, default_value_t = 1000)]
    pub sources: usize,
    /// Made-up sources to add after the input's, for corpora larger than the input
    /// ('collage-N': sentences of three random input documents of one script, as long as a
    /// random input document). Rows are streamed, so ten million documents take no more memory
    /// than a thousand. At most a trillion.
    #[arg(long, default_value_t = 0, value_name = "N",
          value_parser = clap::value_parser!(u64).range(..=MOST_COLLAGE_SOURCES))]
    pub collage_sources: u64,
    /// Most copies per source (each source gets 0..=this many; at most a million).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(..=MOST_COPIES))]
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
    /// Output folder of a run, or its URL on an object store (read through its _SUCCESS).
    #[arg(long, visible_alias = "data", value_name = "DIR|URL")]
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
    // Checked by eval itself rather than clap's `requires`, whose message would ask for
    // --labels beside --truth.
    #[arg(long, value_enum, default_value_t = crate::commands::eval::Unlisted::Ignore)]
    pub unlisted: crate::commands::eval::Unlisted,
    /// Score every k in a range, e.g. 0..=3 (up to the run's k).
    #[arg(long, value_name = "LOW..=HIGH", value_parser = Cut(parse_sweep))]
    pub sweep: Option<(u32, u32)>,
    /// table or json.
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    pub format: String,
}

#[derive(Debug, Args)]
#[command(
    after_help = "The page is one self-contained file (inline SVG plots, no scripts, nothing \
loaded from the network), written beside the run's summary.json (on an object store, inside the \
committed run's prefix) and replaced with the run by `run --overwrite`. It reads aggregates and a \
few sample pairs, never the whole corpus: a run of millions of documents reports in seconds. \
Scoring takes eval's options (--truth or --labels) and scores every k from 0 to the run's.\n\
Examples:\n  neardup report --output out/sample\n  \
neardup report --output out/drift --labels drift_dev/pairs.parquet --unlisted negative --open"
)]
pub struct ReportArgs {
    /// Output folder of a run, or its URL on an object store.
    #[arg(long, visible_alias = "data", value_name = "DIR|URL")]
    pub output: PathBuf,
    /// Gold clustering (Parquet, CSV or TSV), as for eval: precision, recall and F1 against k.
    #[arg(long, value_name = "FILE", conflicts_with = "labels")]
    pub truth: Option<PathBuf>,
    /// Id column of --truth.
    #[arg(long, default_value = "id", value_name = "NAME")]
    pub truth_id_column: String,
    /// Cluster column of --truth.
    #[arg(long, default_value = "cluster", value_name = "NAME")]
    pub truth_cluster_column: String,
    /// Labelled pairs (Parquet, CSV or TSV: id_a, id_b, label), as for eval.
    #[arg(long, value_name = "FILE")]
    pub labels: Option<PathBuf>,
    /// With --labels, what a pair the file does not list is (as for eval).
    #[arg(long, value_enum, default_value_t = crate::commands::eval::Unlisted::Ignore, requires = "labels")]
    pub unlisted: crate::commands::eval::Unlisted,
    /// Open the page in the desktop's browser (xdg-open; open on macOS) once it is written.
    #[arg(long)]
    pub open: bool,
}

impl ReportArgs {
    pub fn options(self) -> ReportOptions {
        let scoring = (self.truth.is_some() || self.labels.is_some()).then(|| EvalOptions {
            output: self.output.clone(),
            truth: self.truth,
            truth_id_column: self.truth_id_column,
            truth_cluster_column: self.truth_cluster_column,
            labels: self.labels,
            unlisted: self.unlisted,
            sweep: None,
            json: true,
        });
        ReportOptions {
            output: self.output,
            scoring,
            open: self.open,
        }
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "For a pair: the verdict (paired, or why not: no fingerprint, distance above k, \
below --verify), both documents' rows of signatures and groups, the Hamming distance, the first \
band-plan table they share, the estimated and the exact Jaccard similarity of their features \
(recomputed from the run's input with the options it recorded), the features only one side has \
(the most weighted first) and a word diff of the two cleaned texts.\nFor --id: the document's \
group with its representative and members, or its nearest fingerprints if it is in no group.\n\
Examples:\n  neardup explain --output out/sample 3 11\n  neardup explain --output out/sample --id 3"
)]
pub struct ExplainArgs {
    /// Output folder of a run, or its URL on an object store.
    #[arg(long, visible_alias = "data", value_name = "DIR|URL")]
    pub output: PathBuf,
    /// Explain this document's group instead of a pair.
    #[arg(long, value_name = "ID", conflicts_with = "ids")]
    pub id: Option<String>,
    /// table (text for a person) or json.
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    pub format: String,
    /// The two documents' ids (the run's id column, as text).
    #[arg(value_name = "ID", num_args = 0..=2)]
    pub ids: Vec<String>,
}

impl ExplainArgs {
    pub fn options(self) -> Result<ExplainOptions> {
        use std::io::IsTerminal;
        let subject = match (self.id, <[String; 2]>::try_from(self.ids)) {
            (Some(id), _) => Subject::Group(id),
            (None, Ok([a, b])) => Subject::Pair(a, b),
            (None, Err(_)) => {
                return Err(crate::Error::Usage(
                    "name two documents (neardup explain --output DIR ID ID) or one with --id ID"
                        .into(),
                ));
            }
        };
        Ok(ExplainOptions {
            output: self.output,
            subject,
            json: self.format == "json",
            colour: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        })
    }
}

#[derive(Debug, Args)]
#[command(after_help = "Outputs under --output:\n  \
signatures/   id, simhash, bucket1..bucket4, text_bytes, input_order, features, sketch (one row per document)\n  \
pairs/        id_a < id_b, distance, similarity (one row per verified pair within k)\n  \
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
Example: --features mode=jieba_tfidf,t2s=off  (the original system's features)\n\n\
Example:\n  neardup run --input fixtures/sample.parquet --output out/sample --overwrite\n  \
neardup run --input crawl/ --output out/crawl --verify off --k 3  (unverified pairs within 3 bits)")]
pub struct RunArgs {
    /// The corpus: a Parquet, JSON Lines or CSV file (.jsonl.zst, .csv.gz: compressed), a
    /// folder or prefix (its .parquet files, else its .jsonl, else its .csv), a glob, or a
    /// Delta table (a folder with _delta_log/, or delta:LOCATION[@version=N|@timestamp=T]); a
    /// local path or a URL (s3://, gs://, az://, abfss://, http(s)://); repeat or list several.
    #[arg(long, required = true, num_args = 1.., value_name = "PATH|URL")]
    pub input: Vec<String>,
    /// The format of every input file, whatever its name: parquet, jsonl (ndjson) or csv (with a
    /// header row). By default each file's extension tells, and Parquet when it names none.
    #[arg(long, value_name = "FORMAT", value_parser = Cut(|s: &str| s.parse::<InputFormat>()))]
    pub input_format: Option<InputFormat>,
    /// Folder (or object-store prefix, s3://bucket/path) to write the output tables into,
    /// whole at the end of the run.
    #[arg(long, value_name = "DIR|URL")]
    pub output: PathBuf,
    /// Column holding a unique, non-NULL document id (integer or string).
    #[arg(long, default_value = "id", value_name = "NAME")]
    pub id_column: String,
    /// Column holding the document text.
    #[arg(long, default_value = "text", value_name = "NAME")]
    pub text_column: String,
    /// Largest Hamming distance at which two documents are candidates: 0..=8 of 64 bits,
    /// 0..=16 of 128 bits; every pair within it is found, whatever the plan, and then verified
    /// (--verify) [default: 7 (14 with --bits 128); 3 with --verify off; an existing --index's].
    #[arg(long, value_parser = Cut(parse_k))]
    pub k: Option<u32>,
    /// Keep a candidate pair only if the estimated Jaccard similarity of the two documents'
    /// features is at least this (0..=1; from the MinHash sketch in signatures), or `off` to
    /// keep every pair within k, unverified [default: 0.75; an existing --index's].
    #[arg(long, value_name = "T|off", value_parser = Cut(parse_verify))]
    pub verify: Option<Verify>,
    #[command(flatten)]
    pub job: JobArgs,
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

/// The options `run` and `match` share: how pairs are found, listed and clustered, and whether
/// an existing output is replaced.
#[derive(Debug, Args)]
pub struct JobArgs {
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
    /// Which member represents its group, and so is the one dedup keeps: first (in input
    /// order), longest or shortest (text length in bytes), newest:COLUMN or oldest:COLUMN (a
    /// date or time column, e.g. fetched_at), max:COLUMN or min:COLUMN (e.g. a quality score).
    /// Ties, and members with no value, go by input order. Against an index, what an earlier
    /// batch kept stays kept (docs/INDEX.md).
    #[arg(long, default_value = "first", value_name = "RULE",
          value_parser = Cut(|s: &str| s.parse::<Keep>()))]
    pub keep: Keep,
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
    /// files, and keep those files (they move into the new output). Local folders only: on an
    /// object store an output holding objects neardup did not write is refused.
    #[arg(long, requires = "overwrite")]
    pub keep_other_files: bool,
    /// parquet: each table a folder of Parquet files, the output committed whole. delta: each
    /// table a Delta Lake table, one commit per table, summary.json (written last) naming the
    /// versions; read them with any Delta Lake reader or `neardup query --data` (docs/STORAGE.md).
    #[arg(long, value_enum, default_value_t = OutputFormat::Parquet, value_name = "FORMAT")]
    pub output_format: OutputFormat,
    /// With --output-format delta: add this run's rows to the tables of --output (created if
    /// absent) instead of replacing them; one commit per table. Ids the tables hold are refused;
    /// without --index the run's groups are numbered after the tables'. With --index (and then
    /// --update-index), the daily way to keep one table of everything kept.
    #[arg(long, conflicts_with = "overwrite")]
    pub append: bool,
}

/// A persisted signature index: earlier batches, matched against without signing them again.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Match the documents against the signature index in DIR (or at an object-store URL,
    /// s3://lake/neardup-index) too (docs/INDEX.md): pairs and groups with indexed documents,
    /// stable group ids, and dedup drops new documents that duplicate anything indexed. The
    /// index must have the same --k, features and id type.
    #[arg(long, value_name = "DIR|URL")]
    pub index: Option<PathBuf>,
    /// Add this batch to --index once the outputs are written (creates the index if DIR is
    /// missing or empty). Atomic: a failed run leaves the index as it was, and of two runs
    /// adding a batch at once exactly one lands. A batch whose ids are already indexed is
    /// refused.
    #[arg(long, requires = "index")]
    pub update_index: bool,
}

impl IndexArgs {
    fn options(&self) -> Option<IndexOptions> {
        self.index.as_ref().map(|dir| IndexOptions {
            dir: dir.clone(),
            update: self.update_index,
            recorded: None,
        })
    }
}

/// How a job uses the machine and the terminal.
/// Who may use a scheduler or an executor (docs/CLUSTER.md, "Security"). The token itself is
/// never a flag: it comes from NEARDUP_CLUSTER_TOKEN or the file --token-file names.
#[derive(Debug, Args)]
pub struct ServerAccessArgs {
    /// This server's certificate chain (PEM): serve TLS. Executors also present it to the
    /// scheduler and to each other, so give it both serverAuth and clientAuth.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The authority (PEM) that signed the cluster's certificates: peers are checked against
    /// it, and every client must present a certificate it signed (mutual TLS).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    /// Read the cluster's shared token from this file (its first line) instead of
    /// NEARDUP_CLUSTER_TOKEN. Every call to and from this server must prove it.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Listen on an address other machines reach with no token and no client certificates
    /// (anyone there can use the cluster); prints a warning naming what is exposed.
    #[arg(long)]
    pub insecure: bool,
}

impl ServerAccessArgs {
    /// The token and TLS this server runs with.
    pub fn access(&self) -> Result<ClusterAccess> {
        ClusterAccess::load(
            self.token_file.as_deref(),
            &self.tls_files(),
            self.tls_cert.is_some(),
        )
    }

    fn tls_files(&self) -> TlsFiles {
        TlsFiles {
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            ca: self.tls_ca.clone(),
        }
    }
}

/// The most `--threads` a job in this process takes. 1,024 ran the sample in 2.6 s; 4,096 took
/// 45 s and 1.7 GiB before any work, and 65,535 aborted the process.
pub const MOST_LOCAL_THREADS: usize = 1024;

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Cores the job computes on: the worker threads, and the partitions a stage runs (the
    /// signature stage may split a file of many row groups into four partitions a core, to share
    /// them out evenly) [default: the number of cores; at most 1024]. With --cluster df://...:
    /// tasks per stage [default: the live executors' task slots in all, their
    /// --concurrent-tasks summed, as the scheduler reports them when the job starts].
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
    /// `dfs://host:port` is the same over TLS (a scheduler started with --tls-cert).
    #[arg(long, value_name = "df://HOST:PORT", value_parser = Cut(Cluster::parse))]
    pub cluster: Option<Cluster>,
    /// With --cluster dfs://...: the authority (PEM) that signed the scheduler's and the
    /// executors' certificates [default: the system's roots].
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub tls_ca: Option<PathBuf>,
    /// With --cluster dfs://...: this client's certificate (PEM), for a cluster that asks for
    /// client certificates (its servers have --tls-ca).
    #[arg(long, value_name = "FILE", requires_all = ["cluster", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With --cluster: read the cluster's token from this file instead of
    /// NEARDUP_CLUSTER_TOKEN.
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub token_file: Option<PathBuf>,
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
    fn console(&self) -> Console {
        let wait = self.executor_timeout.map_or(
            ballista::DEFAULT_EXECUTOR_WAIT,
            std::time::Duration::from_secs,
        );
        Console {
            threads: self.threads.map(usize::from),
            quiet: self.quiet,
            memory_limit: self.memory_limit,
            cluster: self.cluster.clone().map(|c| c.with_executor_wait(wait)),
            cluster_tls: TlsFiles {
                cert: self.tls_cert.clone(),
                key: self.tls_key.clone(),
                ca: self.tls_ca.clone(),
            },
            token_file: self.token_file.clone(),
        }
    }
}

impl RunArgs {
    /// What `neardup run` asks of the job (`JobRequest::resolve` checks it).
    pub fn request(self) -> JobRequest {
        let source = Source::Texts {
            text_column: self.text_column,
            features: self.features.options,
            partition_by: self.partition_by,
        };
        let bits = self.bits.as_deref().map(|b| match b {
            "128" => Width::Bits128,
            _ => Width::Bits64,
        });
        self.job.request(Parts {
            inputs: self.input,
            input_format: self.input_format,
            source,
            output: self.output,
            id_column: self.id_column,
            k: self.k,
            verify: self.verify,
            bits,
            features_bits: self.features.bits,
            index: self.index.options(),
            console: self.console.console(),
        })
    }
}

impl MatchArgs {
    /// What `neardup match` asks of the job.
    pub fn request(self) -> JobRequest {
        let source = Source::Fingerprints {
            simhash_column: self.simhash_column,
        };
        self.job.request(Parts {
            inputs: self.signatures,
            input_format: None,
            source,
            output: self.output,
            id_column: self.id_column,
            k: Some(self.k),
            verify: None,
            bits: None,
            features_bits: None,
            index: self.index.options(),
            console: self.console.console(),
        })
    }
}

/// The parts of a request that `run` and `match` give differently.
struct Parts {
    inputs: Vec<String>,
    input_format: Option<InputFormat>,
    source: Source,
    output: PathBuf,
    id_column: String,
    k: Option<u32>,
    verify: Option<Verify>,
    bits: Option<Width>,
    features_bits: Option<Width>,
    index: Option<IndexOptions>,
    console: Console,
}

impl JobArgs {
    fn request(self, parts: Parts) -> JobRequest {
        JobRequest {
            inputs: parts.inputs,
            input_format: parts.input_format,
            source: parts.source,
            output: parts.output,
            id_column: parts.id_column,
            k: parts.k,
            verify: parts.verify,
            bits: parts.bits,
            features_bits: parts.features_bits,
            matching: self.matching,
            plan: self.plan,
            pairs: self.pairs,
            keep: self.keep,
            clustering: self.clustering,
            overwrite: Overwrite::from_flags(self.overwrite, self.keep_other_files),
            output_format: self.output_format,
            append: self.append,
            index: parts.index,
            console: parts.console,
        }
    }
}

/// `match` reads fingerprints, not texts, and writes no deduplicated corpus: the help of the
/// flags it shares with `run` says what they do here.
const MATCH_KEEP_HELP: &str = "Which member represents its group: first (in input order), \
newest:COLUMN or oldest:COLUMN (a date or time column of --signatures), max:COLUMN or min:COLUMN \
(e.g. a quality score). Ties, and members with no value, go by input order. longest and \
shortest measure texts, which match does not read";
const MATCH_INDEX_HELP: &str = "Match the fingerprints against the signature index in DIR (or \
at an object-store URL) too (docs/INDEX.md): pairs and groups with indexed documents, and \
stable group ids. The index must have the same --k and id type";
const MATCH_APPEND_HELP: &str = "With --output-format delta: add this run's rows to the \
tables of --output (pairs, groups; created if absent) instead of replacing them; one commit per \
table. Without --index the run's groups are numbered after the tables'";

#[derive(Debug, Args)]
#[command(
    mut_arg("keep", |a| a.help(MATCH_KEEP_HELP)),
    mut_arg("index", |a| a.help(MATCH_INDEX_HELP)),
    mut_arg("append", |a| a.help(MATCH_APPEND_HELP))
)]
pub struct MatchArgs {
    /// Parquet fingerprints (an id column and a UInt64 simhash column): files, folders or globs,
    /// local or on an object store (s3://, gs://, az://, http(s)://).
    #[arg(long, required = true, num_args = 1.., value_name = "PATH|URL")]
    pub signatures: Vec<String>,
    /// Folder (or object-store prefix) to write pairs, groups and summary.json into.
    #[arg(long, value_name = "DIR|URL")]
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
    #[command(flatten)]
    pub job: JobArgs,
    #[command(flatten)]
    pub index: IndexArgs,
    #[command(flatten)]
    pub console: ConsoleArgs,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Several statements may be given, separated by ';' (in the argument, with -c, \
in -f files or on standard input): all run, the last one's result is written.\nWith no SQL on a terminal, \
query is an interactive shell: statements end with ';' and may span lines, \\d lists the tables, \\d NAME \
shows a table's columns, \\q quits; history is kept in ~/.neardup_history (or $NEARDUP_HISTORY).\nFunctions: simhash(text [, options]), simhash_details(text [, options]), \
simhash_sketch(text [, options]), sketch_similarity(a, b), clean_text(text [, options]), hamming(a, b), bucket(simhash, n), band_key(simhash, band, plan), \
shared_band(a, b, plan), signed_bits(simhash) and unsigned_bits(bits) (a fingerprint as Int64 and back, for tables without unsigned integers), \
hive_partition_value(value) (the Hive folder --partition-by writes a value to, NULL as __HIVE_DEFAULT_PARTITION__), \
and the aggregate band_pairs(simhash, band, k [, plan]). Options are run's --features string, e.g. 'mode=chars,n=3'."
)]
pub struct QueryArgs {
    /// Output folder of a run, or its URL on an object store; its tables and its input (as
    /// corpus) are registered.
    #[arg(long, value_name = "DIR|URL")]
    pub data: Option<PathBuf>,
    /// A signature index (run --index), a folder or its URL on an object store; registers
    /// index_documents, index_group_log, index_groups (each document's current group) and
    /// index_batches.
    #[arg(long, value_name = "DIR|URL")]
    pub index: Option<PathBuf>,
    /// How to write the result [default: from --out's extension (.parquet, .csv, .tsv, .json,
    /// .ndjson, .jsonl), else table; a compressed name (.gz, .zst, .bz2, .xz) is refused].
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Rows the table format shows, or `inf` for all; the rest are counted and the count is
    /// printed under the table. The other formats write every row.
    #[arg(long, value_name = "N|inf", default_value = "40", value_parser = parse_max_rows)]
    pub maxrows: usize,
    /// Write the result to this file (or object-store URL, s3://lake/results/top.parquet)
    /// instead of standard output; it appears whole, at the end.
    #[arg(long, value_name = "FILE|URL")]
    pub out: Option<PathBuf>,
    /// Replace --out, or the file a `COPY ... TO` names (in the SQL given or in the shell), if
    /// it exists (without it both are refused). A COPY into a folder adds its files to the
    /// folder's.
    #[arg(long)]
    pub overwrite: bool,
    /// SQL to run after the SQL argument; repeat for more.
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    pub command: Vec<String>,
    /// A file of SQL statements to run after the -c ones; repeat for more.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Vec<PathBuf>,
    /// The SQL to run. Without it, -c and -f give the SQL, or else standard input does
    /// (`neardup query < statements.sql`); on a terminal, an interactive shell opens.
    pub sql: Option<String>,
}

impl EvalArgs {
    pub fn options(self) -> EvalOptions {
        EvalOptions {
            output: self.output,
            truth: self.truth,
            truth_id_column: self.truth_id_column,
            truth_cluster_column: self.truth_cluster_column,
            labels: self.labels,
            unlisted: self.unlisted,
            sweep: self.sweep,
            json: self.format == "json",
        }
    }
}

impl GenerateArgs {
    pub fn options(self) -> GenerateOptions {
        GenerateOptions {
            input: self.input,
            output: self.output,
            truth: self.truth,
            id_column: self.id_column,
            text_column: self.text_column,
            sources: self.sources,
            // At most MOST_COLLAGE_SOURCES (clap's range), which a usize holds.
            collage_sources: self.collage_sources as usize,
            max_copies: self.max_copies,
            seed: self.seed,
            overwrite: self.overwrite,
            edits: self.edits,
        }
    }
}

impl FingerprintArgs {
    pub fn options(self) -> FingerprintOptions {
        FingerprintOptions {
            output: self.output,
            count: self.count,
            neighbours: self.neighbours,
            max_distance: self.max_distance,
            seed: self.seed,
            overwrite: self.overwrite,
        }
    }
}

impl PlanArgs {
    pub fn options(self) -> PlanOptions {
        PlanOptions {
            docs: self.docs,
            k: self.k,
            bits: self.bits,
            signatures: self.signatures,
            simhash_column: self.simhash_column,
        }
    }
}

impl ExecutorArgs {
    pub fn options(self) -> Result<ExecutorOptions> {
        Ok(ExecutorOptions {
            access: self.access.access()?,
            insecure: self.access.insecure,
            scheduler: self.scheduler,
            bind: self.bind,
            external_host: self.external_host,
            concurrent_tasks: self.concurrent_tasks.map(usize::from),
            work_dir: self.work_dir,
            memory_limit: self.memory_limit,
            scheduler_wait: std::time::Duration::from_secs(self.scheduler_timeout),
        })
    }
}

impl QueryArgs {
    /// The options, with the SQL read from the argument, -c, -f files or standard input.
    pub fn options(self) -> Result<QueryOptions> {
        Ok(QueryOptions {
            sql: self.sql_text()?,
            data: self.data,
            index: self.index,
            max_rows: self.maxrows,
            format: match (self.format, &self.out) {
                (Some(format), _) => format,
                (None, None) => Format::Table,
                (None, Some(out)) => match Format::from_extension(out) {
                    Some(format) => format,
                    // `top.csv.gz` was written as the table format, uncompressed: neither what
                    // its name says nor every row.
                    None if names_compression(out) => {
                        return Err(Error::Usage(format!(
                            "--out {}: query results are written uncompressed (Parquet \
                             compresses its own); name it .parquet, .csv, .tsv, .json, .ndjson \
                             or .jsonl, or give --format",
                            out.display()
                        )));
                    }
                    None => Format::Table,
                },
            },
            out: self.out,
            overwrite: self.overwrite,
        })
    }

    /// The statements `query` runs, in order: the SQL argument, each -c, each -f file, or standard
    /// input when none is given. `None`: no SQL and standard input is a terminal, so the
    /// interactive shell reads it.
    fn sql_text(&self) -> Result<Option<String>> {
        use std::io::{IsTerminal, Read};
        let mut parts: Vec<String> = self.sql.iter().chain(&self.command).cloned().collect();
        for file in &self.file {
            parts.push(std::fs::read_to_string(file).map_err(|e| crate::Error::io(file, e))?);
        }
        if parts.is_empty() {
            let mut stdin = std::io::stdin();
            if stdin.is_terminal() {
                return Ok(None);
            }
            let mut text = String::new();
            stdin
                .read_to_string(&mut text)
                .map_err(|e| crate::Error::io("<standard input>", e))?;
            parts.push(text);
        }
        // A part without its closing ';' still ends its last statement.
        Ok(Some(parts.join("\n;\n")))
    }
}

/// Whether a file's last extension names a compression (`top.csv.gz`).
fn names_compression(path: &std::path::Path) -> bool {
    path.extension()
        .and_then(|extension| extension.to_str())
        .is_some_and(|extension| {
            crate::input::format::Compression::of_extension(&extension.to_ascii_lowercase())
                .is_some()
        })
}
