//! What a job is asked to do, with every rule between options applied in one place. The command
//! line fills a `JobRequest` with what the user typed; `JobRequest::resolve` gives the
//! `JobConfig` the job runs, with typed values (the width, the parsed band plan, the clustering
//! for where it runs), or the message that says which options cannot go together.

use std::path::PathBuf;

use crate::delta::output::{Mode, OutputFormat};
use crate::engine::session::Console;
use crate::engine::staging::Overwrite;
use crate::error::{Error, Result};
use crate::fingerprint::{MAX_K, Width};
use crate::input::format::Format;
use crate::job::choices::Clustering;
use crate::job::choices::{Matching, PairsListed};
use crate::job::keep::Keep;
use crate::plan::BandPlan;
use crate::storage::Place;
use crate::text::FeatureOptions;

/// What the documents are: the one difference between `run` and `match`.
#[derive(Debug, Clone)]
pub enum Source {
    /// `neardup run`: texts, fingerprinted by the job.
    Texts {
        text_column: String,
        features: FeatureOptions,
        /// Columns the deduplicated corpus is partitioned by (`--partition-by`), Hive style.
        partition_by: Vec<String>,
    },
    /// `neardup match`: 64-bit fingerprints computed elsewhere, in `simhash_column`.
    Fingerprints { simhash_column: String },
}

/// The features of `neardup match`, in summary.json and an index's settings.
pub const FINGERPRINTS_GIVEN: &str = "fingerprints given";

impl Source {
    /// The command that reads this source, as summary.json names it.
    pub fn command(&self) -> &'static str {
        match self {
            Source::Texts { .. } => "run",
            Source::Fingerprints { .. } => "match",
        }
    }

    /// The table read from an input that is a neardup output: the deduplicated corpus, or the
    /// fingerprints.
    pub fn output_table(&self) -> &'static str {
        match self {
            Source::Texts { .. } => "dedup",
            Source::Fingerprints { .. } => "signatures",
        }
    }

    /// The column the documents are read from: their texts, or their fingerprints.
    pub fn column(&self) -> &str {
        match self {
            Source::Texts { text_column, .. } => text_column,
            Source::Fingerprints { simhash_column } => simhash_column,
        }
    }

    /// The features as summary.json and an index record them: every option spelled out (the
    /// canonical form), or `fingerprints given`.
    pub fn features(&self) -> String {
        match self {
            Source::Texts { features, .. } => features.to_string(),
            Source::Fingerprints { .. } => FINGERPRINTS_GIVEN.to_string(),
        }
    }
}

pub use crate::index::batch::IndexOptions;

/// `--plan` parsed for the job's k and width: the plans the planner chooses among (one, when a
/// plan is named), and who chose them.
#[derive(Debug, Clone)]
pub struct PlanChoice {
    pub spec: String,
    pub plans: Vec<BandPlan>,
    /// `planner`, or `--plan` when the user named the plan.
    pub chosen_by: &'static str,
}

impl PlanChoice {
    pub fn parse(spec: &str, k: u32, width: Width) -> Result<Self> {
        let (plans, chosen_by) = crate::planner::plans_asked(spec, k, width.bits())
            .map_err(|e| Error::Usage(format!("--plan: {e}")))?;
        Ok(Self {
            spec: spec.to_string(),
            plans,
            chosen_by,
        })
    }
}

/// What the job runs, every option resolved and checked against the others.
#[derive(Debug, Clone)]
pub struct JobConfig {
    pub inputs: Vec<String>,
    /// `--input-format`: every input file's format; by extension when `None`.
    pub input_format: Option<Format>,
    pub source: Source,
    /// A local folder or an object-store prefix.
    pub output: Place,
    pub id_column: String,
    pub k: u32,
    pub width: Width,
    /// `--verify T`: candidate pairs within k are kept when the estimated Jaccard similarity of
    /// the two documents' features is at least T; `None` (`--verify off`) keeps every one.
    pub verify: Option<f64>,
    pub matching: Matching,
    pub plan: PlanChoice,
    /// Which document pairs `pairs` lists (`--pairs`).
    pub pairs: PairsListed,
    /// Which member represents its group and is kept by dedup (`--keep`).
    pub keep: Keep,
    /// How pairs become components (`--clustering`, or the default for where the job runs).
    pub clustering: Clustering,
    /// Whether and how an existing output is replaced (`--overwrite`, `--keep-other-files`).
    pub overwrite: Overwrite,
    /// With `--output-format delta`: how its Delta tables are written; `None` for Parquet.
    pub delta: Option<Mode>,
    /// Match against (and maybe add to) a signature index (`--index`, `--update-index`).
    pub index: Option<IndexOptions>,
    pub console: Console,
}

/// `--verify`: off, or the smallest estimated Jaccard similarity a pair must have.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verify {
    Off,
    AtLeast(f64),
}

/// The threshold `run` verifies with by default: where F1 peaks on real edited pages
/// (docs/EVALUATION.md), on a plateau from 0.7 to 0.8.
pub const DEFAULT_MIN_SIMILARITY: f64 = 0.75;

/// k without verification: the largest distance at which unverified pairs stay precise.
pub const DEFAULT_K: u32 = 3;

/// k with verification, for 64-bit fingerprints: verification keeps the precision whatever k,
/// and k = 7 has recall within a point of k = 8's on real drift at half its candidate stage
/// (docs/EVALUATION.md, docs/BENCHMARKS.md).
pub const DEFAULT_K_VERIFIED: u32 = 7;

/// What the command line asked for, before the rules between options are applied.
#[derive(Debug, Clone)]
pub struct JobRequest {
    pub inputs: Vec<String>,
    pub input_format: Option<Format>,
    pub source: Source,
    pub output: PathBuf,
    pub id_column: String,
    /// `--k`, if given (the default depends on the verification and on an existing index).
    pub k: Option<u32>,
    /// `--verify`, if given.
    pub verify: Option<Verify>,
    /// `--bits`, if given.
    pub bits: Option<Width>,
    /// The `bits=` of `--features`, if it names one (`FeatureOptions` alone cannot tell
    /// `bits=64` from the default).
    pub features_bits: Option<Width>,
    pub matching: Matching,
    pub plan: String,
    pub pairs: PairsListed,
    pub keep: Keep,
    /// `--clustering`, if given.
    pub clustering: Option<Clustering>,
    pub overwrite: Overwrite,
    /// `--output-format`.
    pub output_format: OutputFormat,
    /// `--append`: add to the Delta tables of `--output`.
    pub append: bool,
    pub index: Option<IndexOptions>,
    pub console: Console,
}

impl JobRequest {
    /// Applies every rule between options, in the order the messages were designed for: the
    /// width, k for it, the plan, the clustering for where the job runs, the matching.
    pub fn resolve(self) -> Result<JobConfig> {
        let mut source = self.source;
        let width = match &mut source {
            Source::Texts { features, .. } => {
                if let Some(bits) = self.bits {
                    if let Some(given) = self.features_bits.filter(|&given| given != bits) {
                        return Err(Error::Usage(format!(
                            "--bits {bits} contradicts bits={given} in --features; give the \
                             fingerprint width once (--bits {bits}, or bits={bits} in --features)"
                        )));
                    }
                    features.width = bits;
                }
                features.width
            }
            Source::Fingerprints { .. } => Width::Bits64,
        };
        let (k, verify) = k_and_verify(self.k, self.verify, self.index.as_ref(), &source, width)?;
        check_k(k, width)?;
        let plan = PlanChoice::parse(&self.plan, k, width)?;
        let clustering = self.clustering.unwrap_or(match self.console.cluster {
            Some(_) => Clustering::Sql,
            None => Clustering::UnionFind,
        });
        check_clustering(clustering, &self.console)?;
        if width == Width::Bits128 && self.matching == Matching::Join {
            return Err(Error::Usage(
                "--matching join is written for 64-bit fingerprints; use --matching scan (the \
                 default) with --bits 128"
                    .into(),
            ));
        }
        let output = Place::parse(&self.output.to_string_lossy(), "--output")?;
        if let Some(index) = &self.index {
            index.place()?;
        }
        let delta = delta_mode(self.output_format, self.append, self.overwrite)?;
        if let (Some(Mode::Append), Some(index)) = (delta, &self.index)
            && !index.update
        {
            return Err(Error::Usage(
                "--append with --index needs --update-index: the tables would hold a batch the \
                 index does not, and the next batch would give its new groups the same ids"
                    .into(),
            ));
        }
        Ok(JobConfig {
            inputs: self.inputs,
            input_format: self.input_format,
            source,
            output,
            id_column: self.id_column,
            k,
            width,
            verify,
            matching: self.matching,
            plan,
            pairs: self.pairs,
            keep: self.keep,
            clustering,
            overwrite: self.overwrite,
            delta,
            index: self.index,
            console: self.console,
        })
    }
}

/// How Delta tables are written (`None`: Parquet outputs): `--append` adds to them,
/// `--overwrite` is an overwrite commit, and otherwise they must not exist yet.
fn delta_mode(format: OutputFormat, append: bool, overwrite: Overwrite) -> Result<Option<Mode>> {
    match (format, append, overwrite) {
        (OutputFormat::Parquet, true, _) => Err(Error::Usage(
            "--append adds this run's rows to Delta tables; pass --output-format delta too".into(),
        )),
        (OutputFormat::Parquet, false, _) => Ok(None),
        (OutputFormat::Delta, _, Overwrite::KeepingOthers) => Err(Error::Usage(
            "--keep-other-files is for Parquet outputs; an output of Delta tables keeps \
             whatever else its folder holds untouched only if it has nothing else: choose \
             another --output"
                .into(),
        )),
        (OutputFormat::Delta, true, _) => Ok(Some(Mode::Append)),
        (OutputFormat::Delta, false, Overwrite::Owned) => Ok(Some(Mode::Overwrite)),
        (OutputFormat::Delta, false, Overwrite::No) => Ok(Some(Mode::Create)),
    }
}

/// k and the verification threshold: as given; else those of the index the run adds to
/// (its batches must share them); else verification at `DEFAULT_MIN_SIMILARITY` with
/// candidates up to `DEFAULT_K_VERIFIED` (twice that of 128 bits). `match` has no texts to
/// verify, so it does not, with `DEFAULT_K`.
fn k_and_verify(
    k: Option<u32>,
    asked: Option<Verify>,
    index: Option<&IndexOptions>,
    source: &Source,
    width: Width,
) -> Result<(u32, Option<f64>)> {
    if let Source::Fingerprints { .. } = source {
        return Ok((k.unwrap_or(DEFAULT_K), None));
    }
    let indexed = match index {
        Some(index) => index.recorded.clone(),
        None => None,
    };
    let verify = match (asked, &indexed) {
        (Some(Verify::Off), _) => None,
        (Some(Verify::AtLeast(t)), _) => Some(t),
        (None, Some(meta)) => meta.verify,
        (None, None) => Some(DEFAULT_MIN_SIMILARITY),
    };
    let k = match (k, &indexed) {
        (Some(k), _) => k,
        (None, Some(meta)) if asked.is_none() => meta.k,
        (None, _) if verify.is_some() => DEFAULT_K_VERIFIED * width.bits() / 64,
        (None, _) => DEFAULT_K,
    };
    Ok((k, verify))
}

/// Checks k is one the band plans find exactly for the width.
pub fn check_k(k: u32, width: Width) -> Result<()> {
    let max_k = width.max_k();
    if k > max_k {
        return Err(Error::Usage(format!(
            "--k {k} is not supported for {width}-bit fingerprints (allowed: 0..={max_k}); beyond \
             an eighth of the bits the band plans compare most of the corpus with itself"
        )));
    }
    Ok(())
}

/// The largest k of any width, which `--k` accepts before the width is known.
pub const MAX_K_ANY_WIDTH: u32 = 2 * MAX_K;

/// `--clustering sql` runs without an index (the index's clustering reads its groups, which
/// only union-find does), on 64- or 128-bit fingerprints (the rounds compare labels, which
/// both widths order as numbers). On a cluster the pairs stay there, so the clustering is
/// SQL; union-find collects them in this process and runs locally only.
fn check_clustering(clustering: Clustering, console: &Console) -> Result<()> {
    if let Some(cluster) = &console.cluster {
        if clustering != Clustering::Sql {
            return Err(Error::Usage(format!(
                "--cluster {cluster} runs --clustering sql (its default): union-find collects \
                 every pair in this process, so it runs locally"
            )));
        }
        if console.memory_limit.is_some() {
            return Err(Error::Usage(
                "--memory-limit bounds this process, not the executors of a --cluster; give \
                 each executor its limit (neardup executor --memory-limit)"
                    .into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(bits: Option<Width>, features_bits: Option<Width>) -> JobRequest {
        let mut features = FeatureOptions::default();
        if let Some(width) = features_bits {
            features.width = width;
        }
        JobRequest {
            inputs: vec!["in.parquet".into()],
            input_format: None,
            source: Source::Texts {
                text_column: "text".into(),
                features,
                partition_by: Vec::new(),
            },
            output: PathBuf::from("out"),
            id_column: "id".into(),
            k: Some(3),
            verify: None,
            bits,
            features_bits,
            matching: Matching::Scan,
            plan: "auto".into(),
            pairs: PairsListed::All,
            keep: Keep::First,
            clustering: None,
            overwrite: Overwrite::No,
            output_format: OutputFormat::Parquet,
            append: false,
            index: None,
            console: Console::default(),
        }
    }

    #[test]
    fn delta_outputs_are_created_overwritten_or_appended_to() {
        let mode = |format, append, overwrite| {
            let mut r = request(None, None);
            (r.output_format, r.append, r.overwrite) = (format, append, overwrite);
            r.resolve().map(|c| c.delta).map_err(|e| e.to_string())
        };
        use OutputFormat::{Delta, Parquet};
        assert_eq!(mode(Parquet, false, Overwrite::Owned), Ok(None));
        assert_eq!(mode(Delta, false, Overwrite::No), Ok(Some(Mode::Create)));
        assert_eq!(
            mode(Delta, false, Overwrite::Owned),
            Ok(Some(Mode::Overwrite))
        );
        assert_eq!(mode(Delta, true, Overwrite::No), Ok(Some(Mode::Append)));
        let err = mode(Parquet, true, Overwrite::No).unwrap_err();
        assert!(err.contains("--output-format delta"), "{err}");
        let err = mode(Delta, false, Overwrite::KeepingOthers).unwrap_err();
        assert!(err.contains("--keep-other-files"), "{err}");
    }

    #[test]
    fn bits_given_twice_must_agree() {
        let (w64, w128) = (Some(Width::Bits64), Some(Width::Bits128));
        let err = request(w128, w64).resolve().unwrap_err().to_string();
        assert!(
            err.contains("--bits 128 contradicts bits=64 in --features"),
            "{err}"
        );
        assert_eq!(request(w64, w64).resolve().unwrap().width, Width::Bits64);
        assert_eq!(request(w128, None).resolve().unwrap().width, Width::Bits128);
        assert_eq!(request(None, w128).resolve().unwrap().width, Width::Bits128);
        let config = request(w128, None).resolve().unwrap();
        let Source::Texts { features, .. } = &config.source else {
            panic!("a run reads texts");
        };
        assert!(features.to_string().contains("bits=128"), "{features}");
    }

    #[test]
    fn k_plan_clustering_and_matching_are_checked_against_the_width() {
        let mut wide = request(Some(Width::Bits128), None);
        wide.k = Some(16);
        assert_eq!(wide.clone().resolve().unwrap().k, 16);
        let mut narrow = request(None, None);
        narrow.k = Some(9);
        let err = narrow.resolve().unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("allowed: 0..=8"), "{err}");
        let mut join = wide.clone();
        join.matching = Matching::Join;
        assert!(
            join.resolve()
                .unwrap_err()
                .to_string()
                .contains("--matching join")
        );
        // The SQL rounds order 128-bit labels as they order 64-bit ones.
        let mut sql = wide;
        sql.clustering = Some(Clustering::Sql);
        assert!(sql.resolve().is_ok());
        let mut plan = request(None, None);
        plan.plan = "bands:2".into();
        assert!(
            plan.resolve()
                .unwrap_err()
                .to_string()
                .starts_with("--plan: ")
        );
        let defaults = request(None, None).resolve().unwrap();
        assert_eq!(defaults.clustering, Clustering::UnionFind);
        assert_eq!(defaults.plan.chosen_by, "planner");
    }

    #[test]
    fn runs_verify_by_default_with_candidates_up_to_k_7_and_off_means_today_s_k() {
        let mut asked = request(None, None);
        asked.k = None;
        let config = asked.clone().resolve().unwrap();
        assert_eq!((config.k, config.verify), (7, Some(0.75)));
        let mut wide = asked.clone();
        wide.bits = Some(Width::Bits128);
        assert_eq!(wide.resolve().unwrap().k, 14);
        let mut off = asked.clone();
        off.verify = Some(Verify::Off);
        let config = off.resolve().unwrap();
        assert_eq!((config.k, config.verify), (3, None));
        let mut strict = asked.clone();
        strict.verify = Some(Verify::AtLeast(0.9));
        assert_eq!(strict.resolve().unwrap().verify, Some(0.9));
        let mut given = asked;
        given.source = Source::Fingerprints {
            simhash_column: "simhash".into(),
        };
        let config = given.resolve().unwrap();
        assert_eq!(
            (config.k, config.verify),
            (3, None),
            "match does not verify"
        );
    }

    #[tokio::test]
    async fn an_existing_index_gives_its_k_and_verification_as_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let meta = crate::index::IndexMeta::new(
            64,
            3,
            "mode=auto",
            &datafusion::arrow::datatypes::DataType::Int64,
            Default::default(),
            None,
        );
        let json = serde_json::to_string(&meta).unwrap();
        std::fs::write(dir.path().join("index.json"), json).unwrap();
        let mut asked = request(None, None);
        asked.k = None;
        let place = Place::Local(dir.path().to_path_buf());
        asked.index = Some(IndexOptions {
            dir: dir.path().to_path_buf(),
            update: true,
            recorded: crate::index::IndexMeta::of_existing(&place).await.unwrap(),
        });
        let config = asked.clone().resolve().unwrap();
        assert_eq!((config.k, config.verify), (3, None));
        asked.verify = Some(Verify::AtLeast(0.75));
        let config = asked.resolve().unwrap();
        assert_eq!((config.k, config.verify), (7, Some(0.75)));
    }
}
