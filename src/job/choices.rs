//! The choices a job offers between ways of doing the same thing: how candidates are found,
//! which pairs are listed, how pairs become components. Each choice gives the same groups; the
//! options, summary.json and the stages all name them from here.

use crate::engine::stages::{self, Stage};

/// How stage 3 finds the pairs of distinct fingerprints within k, whatever the band plan. Both
/// give the same pairs (the exactness tests run both); they differ in speed
/// (docs/BENCHMARKS.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Matching {
    /// Group each table's rows, sort each group and compare within runs of equal keys (in
    /// memory in one process, by an aggregate on a cluster).
    Scan,
    /// A hash self-join on each table's key with the Hamming filter in the join.
    Join,
}

impl Matching {
    pub fn candidates_stage(self) -> Stage {
        match self {
            Matching::Scan => stages::CANDIDATES_SCAN,
            Matching::Join => stages::CANDIDATES_JOIN,
        }
    }

    /// The same against a signature index: only pairs with a fresh fingerprint.
    pub fn candidates_index_stage(self) -> Stage {
        match self {
            Matching::Scan => stages::CANDIDATES_INDEX,
            Matching::Join => stages::CANDIDATES_INDEX_JOIN,
        }
    }
}

/// Which document pairs the `pairs` table lists. Both give the same groups.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum PairsListed {
    /// Every pair of documents within k (quadratic in the copies of one page).
    #[default]
    All,
    /// Each document with the first document of its fingerprint, and each fingerprint pair by
    /// the first documents of its two fingerprints: linear in the documents.
    Star,
}

impl PairsListed {
    pub fn stage(self) -> Stage {
        match self {
            PairsListed::All => stages::PAIRS,
            PairsListed::Star => stages::PAIRS_STAR,
        }
    }
}

/// How the fingerprint pairs become components. Both label every fingerprint with the smallest
/// of its component (the components tests compare them).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Clustering {
    /// Union-find in this process over all fingerprint pairs (fast; needs them in memory).
    #[default]
    UnionFind,
    /// Large-star / small-star rounds as SQL queries (`sql_rounds`): the pairs never
    /// leave the engine, as a cluster needs.
    Sql,
}
