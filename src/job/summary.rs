//! `summary.json`: what a run was asked to do, what it read, what it found, how long it took.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::job::choices::Clustering;
use crate::job::choices::{Matching, PairsListed};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub neardup_version: String,
    pub command: String,
    pub parameters: Parameters,
    /// The band plan the matching ran (absent in summaries written before plans existed).
    #[serde(default)]
    pub plan: Option<PlanReport>,
    /// The signature index the run matched against (`--index`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexReport>,
    /// Absolute paths of the input files, in input order.
    pub inputs: Vec<String>,
    /// Each input's format (`parquet`, `jsonl` or `csv`), in the same order, so that `query`
    /// reads a file whose name does not say it (`--input-format`) as the run did. Absent in
    /// summaries written before it was recorded: the names say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_formats: Vec<String>,
    /// The Delta tables the inputs came from, and the version of each that was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delta_inputs: Vec<crate::delta::input::TableRead>,
    /// With `--output-format delta`: each table's version after this run's commit (and
    /// before it). Absent for Parquet outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_tables:
        Option<std::collections::BTreeMap<String, crate::delta::output::TableVersion>>,
    pub counts: Counts,
    /// Wall time of each stage, in the order they ran.
    pub stages: Vec<StageTime>,
    pub total_seconds: f64,
    /// CPU time (user and system, every thread) the process spent on the job: over
    /// `total_seconds`, the cores it kept busy. Absent on a cluster, whose work runs in the
    /// executors, and where the OS does not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// Peak resident memory of the process, where the OS reports it (Linux).
    pub peak_rss_bytes: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Parameters {
    pub k: u32,
    /// How candidate pairs were found (`scan` or `join`).
    pub matching: Matching,
    /// Which document pairs `pairs` lists (`all`, or `star`: linear in the documents).
    #[serde(default)]
    pub pairs: PairsListed,
    /// How pairs became components (`union-find` or `sql`).
    #[serde(default)]
    pub clustering: Clustering,
    pub id_column: String,
    /// The text column (`run`) or the fingerprint column (`match`).
    pub source_column: String,
    pub fingerprint_bits: u32,
    pub bands: u32,
    /// `--verify`: the smallest estimated Jaccard similarity a candidate pair needed; absent
    /// when the run did not verify (`--verify off`, and `match`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_similarity: Option<f64>,
    pub features: String,
    /// `--keep`: the rule that chose each group's representative (`first`, `longest`,
    /// `max:quality`, ...); `first` in summaries written before the rule could be chosen.
    #[serde(default = "first_rule")]
    pub keep: String,
    /// Columns `dedup` is partitioned by (`--partition-by`), Hive style; empty when not.
    #[serde(default)]
    pub partition_by: Vec<String>,
    /// The files the features read, each with the digest of its content (`crate::digest`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub feature_files: std::collections::BTreeMap<String, String>,
    /// The Ballista cluster the job ran on (`--cluster`); absent for a local run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

fn first_rule() -> String {
    "first".into()
}

/// A run against a signature index (docs/INDEX.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IndexReport {
    /// The index folder.
    pub path: String,
    /// This run's batch number (the one it was added as, with `updated`).
    pub batch: u64,
    /// Documents the index held before this run.
    pub indexed_documents: u64,
    /// Whether the batch was added to the index (`--update-index`).
    pub updated: bool,
    /// Group ids from here on were not used.
    pub next_group_id: u64,
}

/// The band plan a matching ran, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlanReport {
    /// Canonical spec, e.g. `bands:4`, `mih:4:1`, `permutation:11:8`; `--plan` takes it back.
    pub plan: String,
    /// `planner` (cheapest estimate), `--plan` (asked for), or `planner, --plan scheme`.
    pub chosen_by: String,
    pub tables: usize,
    /// Candidate passes, each over a share of the tables, to bound memory.
    pub passes: usize,
    /// The planner's estimates: rows (fingerprints times tables) and candidate comparisons.
    pub estimated_rows: f64,
    pub estimated_candidates: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Counts {
    pub documents: u64,
    /// Documents whose text is NULL (no fingerprint, in no group, kept).
    pub null_texts: u64,
    /// Documents whose text has no features: empty, whitespace, punctuation only, markup only.
    /// Without `empty=exact` they have no fingerprint and take no part in matching.
    pub empty_texts: u64,
    /// Documents with some features but fewer than `min_features`: fingerprinted by an exact
    /// hash, so they match only copies with the same features (the short-text policy).
    #[serde(default)]
    pub short_texts: u64,
    pub distinct_fingerprints: u64,
    /// Pairs of distinct fingerprints within distance k, before verification.
    #[serde(default)]
    pub candidate_pairs: u64,
    /// Pairs of distinct fingerprints within distance k that passed verification (all the
    /// candidates with `--verify off`).
    pub fingerprint_pairs: u64,
    /// Pairs of documents within distance k (rows of `pairs`).
    pub pairs: u64,
    pub groups: u64,
    /// Documents in some group (rows of `groups`).
    pub grouped_documents: u64,
    /// Group members that are not their group's representative.
    pub documents_removed: u64,
    /// Rows of `dedup` (`run` only).
    pub documents_kept: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageTime {
    pub stage: String,
    pub seconds: f64,
    /// Rows the stage wrote: documents signed, distinct fingerprints, fingerprint pairs, document
    /// pairs, grouped documents, documents kept (none for stages that write no table).
    #[serde(default)]
    pub rows: Option<u64>,
    /// The process's peak resident memory when the stage ended (VmHWM, Linux).
    #[serde(default)]
    pub peak_rss_bytes: Option<u64>,
    /// CPU time (user and system, every thread) the process spent during the stage: over
    /// `seconds`, the cores the stage kept busy, which tells a stage bound to one core from one
    /// that waits on nothing whatever the machine. Absent on a cluster (see `Summary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
}

/// The shortest stage whose cores are shown. The kernel adds a thread's CPU time to the
/// process's when it is switched out or at a timer tick, so a reading misses up to a few
/// milliseconds of the other threads: over a stage of a few milliseconds that could show more
/// cores than the machine has.
const CORES_SHOWN_FROM_SECONDS: f64 = 0.1;

impl StageTime {
    /// The cores the stage kept busy (its CPU seconds over its seconds), for a stage long enough
    /// for the figure to mean something.
    pub fn cores(&self) -> Option<f64> {
        let cpu = self.cpu_seconds?;
        (self.seconds >= CORES_SHOWN_FROM_SECONDS).then(|| cpu / self.seconds)
    }
}

impl Summary {
    /// Writes summary.json whole or not at all (it is rewritten inside a committed output when
    /// adding the batch to an index fails).
    pub fn write(&self, path: &Path) -> Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(|e| Error::json(path, e))?;
        crate::engine::partial_file::write_atomically(path, (json + "\n").as_bytes())
    }

    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Self::from_json(&text, &path.display().to_string())
    }

    /// A summary from its bytes; `place` names where they were read, for the error. The
    /// fingerprint width and k are checked, since the commands that read a run size their
    /// work by them (one score per k up to the run's).
    pub fn from_json(bytes: &[u8], place: &str) -> Result<Self> {
        let summary: Self = serde_json::from_slice(bytes)
            .map_err(|e| Error::Input(format!("{place} is not a neardup summary: {e}")))?;
        let Parameters {
            k,
            fingerprint_bits,
            ..
        } = summary.parameters;
        if !matches!(fingerprint_bits, 64 | 128) || k > fingerprint_bits / 8 {
            return Err(Error::Input(format!(
                "{place} is not a neardup summary: parameters.fingerprint_bits is \
                 {fingerprint_bits} and parameters.k {k} (a run has 64 or 128 bits and k up to \
                 an eighth of them)"
            )));
        }
        Ok(summary)
    }
}

/// CPU time (user and system) this process has spent so far on all its threads, in seconds;
/// Unix.
pub fn process_cpu_seconds() -> Option<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the `rusage` the pointer points at, and says so by returning 0;
    // the value is read only then (and was zeroed before, so it is initialised either way).
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
            return None;
        }
        usage.assume_init()
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(seconds(usage.ru_utime) + seconds(usage.ru_stime))
}

/// Peak resident set size of this process (VmHWM), on Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{StageTime, process_cpu_seconds};

    #[test]
    fn cores_are_shown_for_stages_long_enough_to_count_them() {
        let stage = |seconds: f64, cpu_seconds: Option<f64>| StageTime {
            stage: "signatures".into(),
            seconds,
            rows: None,
            peak_rss_bytes: None,
            cpu_seconds,
        };
        assert_eq!(stage(2.0, Some(3.5)).cores(), Some(1.75));
        assert_eq!(stage(0.1, Some(0.1)).cores(), Some(1.0));
        // 5 ms of CPU counted in a stage of 2 ms: more cores than this machine has.
        assert_eq!(stage(0.002, Some(0.005)).cores(), None);
        assert_eq!(stage(2.0, None).cores(), None);
    }

    /// The process's user and system time from /proc/self/stat, in clock ticks (Linux): the
    /// same kernel counters as getrusage, through another interface and a coarser unit.
    fn proc_stat_cpu_seconds() -> f64 {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        // The command name, in parentheses, may hold spaces: the fields follow its last ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        // SAFETY: sysconf reads a constant of the system; it has no pointer arguments.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        ticks / per_second
    }

    #[test]
    fn cpu_seconds_agree_with_the_kernels_ticks() {
        let (ours_before, theirs_before) =
            (process_cpu_seconds().unwrap(), proc_stat_cpu_seconds());
        // A third of a second of arithmetic on this thread (others of the test process may
        // run meanwhile: both readings count them alike).
        let until = Instant::now() + Duration::from_millis(300);
        let mut x = 1u64;
        while Instant::now() < until {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let (ours_after, theirs_after) = (process_cpu_seconds().unwrap(), proc_stat_cpu_seconds());
        let (ours, theirs) = (ours_after - ours_before, theirs_after - theirs_before);
        assert!(ours > 0.0, "{ours}");
        // A tick each end (at most 100 a second here), and a tenth for the readings not being
        // taken at the same instant while other threads run.
        assert!(
            (ours - theirs).abs() <= 0.03 + theirs / 10.0,
            "getrusage {ours} s, /proc/self/stat {theirs} s"
        );
    }
}
