//! The values the job's SQL files take, typed: built once per job (`StageParams`), per candidate
//! pass (`Pass`) and per round of the SQL clustering (`Round`), and turned into the `${name}`
//! bindings of `sql/` only when a stage renders. A test checks that every placeholder in `sql/`
//! is bound and every binding is used.

use std::ops::Range;

use crate::engine::sql::{Bindings, folder_literal, quote_ident, quote_literal};
use crate::fingerprint::Width;
use crate::job::keep::Keep;
use crate::storage::Place;

/// Internal tables live here inside the staging folder and are removed before the commit.
pub const WORK_DIR: &str = "_work";

/// How the work tables are written (`${work_table_options}`): LZ4 rather than the outputs'
/// zstd. Each is read once or twice by a later stage and removed, so what counts is the time to
/// write and read it, not its size; the sketches (random bytes) do not compress at all.
const WORK_TABLE_OPTIONS: &str = "OPTIONS ('format.compression' 'lz4_raw')";

/// What every stage of one job is given.
#[derive(Debug, Clone)]
pub struct StageParams {
    /// The staging folder (or run prefix on an object store) the job writes its tables into.
    pub dir: Place,
    pub id_column: String,
    pub k: u32,
    pub width: Width,
    pub source: SourceParams,
    /// Against a signature index: this batch and where its part of the index is staged.
    pub index: Option<IndexParams>,
    /// `--verify T`: candidate pairs are kept when their estimated Jaccard similarity is at
    /// least T; `None` keeps every candidate.
    pub verify: Option<f64>,
    /// `--keep`: the rule that chooses each group's representative.
    pub keep: Keep,
}

/// What the signature stage reads.
#[derive(Debug, Clone)]
pub enum SourceParams {
    Texts {
        column: String,
        /// The canonical feature options (`simhash`'s option string).
        features: String,
        min_features: usize,
        /// `PARTITIONED BY (...)` for dedup, or empty.
        partition_clause: String,
        /// What dedup selects from the corpus: `c.*`, the partition columns' NULLs replaced.
        dedup_columns: String,
    },
    Fingerprints {
        column: String,
    },
}

/// A job's batch of a signature index: its number, the next group id and where its part is
/// staged.
pub use crate::index::batch::BatchPlace as IndexParams;

impl StageParams {
    /// Where the SQL rounds of the clustering write their edges.
    pub fn components_dir(&self) -> Place {
        self.dir.join(WORK_DIR).join("components")
    }

    pub fn bindings(&self) -> Bindings {
        let table = |name: &str| folder_literal(&self.dir.join(name));
        let work = |name: &str| folder_literal(&self.dir.join(WORK_DIR).join(name));
        let mut b = Bindings::default();
        b.set("id", quote_ident(&self.id_column))
            .set("k", self.k.to_string())
            .set("signatures_dir", table("signatures"))
            .set("pairs_dir", table("pairs"))
            .set("groups_dir", table("groups"))
            .set("dedup_dir", table("dedup"))
            .set("fingerprints_dir", work("fingerprints"))
            .set("candidate_pairs_dir", work("candidate_pairs"))
            .set("sketches_dir", work("sketches"))
            .set("fingerprint_pairs_dir", work("fingerprint_pairs"))
            .set("paired_documents_dir", work("paired_documents"))
            .set("verify", self.verify.is_some().to_string())
            // A float literal either way (the threshold is unused when not verifying).
            .set(
                "min_similarity",
                format!("{:?}", self.verify.unwrap_or(0.0)),
            )
            .set("work_table_options", WORK_TABLE_OPTIONS)
            .set("memberships_dir", work("memberships"))
            .set("members_dir", work("members"))
            .set("grouped_members_dir", work("grouped_members"));
        // The band columns: bucket1..bucket4 of 64 bits, bucket1..bucket8 of 128.
        let bands = 1..=self.width.bands();
        let list =
            |each: &dyn Fn(usize) -> String| bands.clone().map(each).collect::<Vec<_>>().join(", ");
        b.set(
            "bucket_columns",
            list(&|n| format!("bucket(simhash, {n}) AS bucket{n}")),
        )
        .set("bucket_names", list(&|n| format!("bucket{n}")));
        match &self.source {
            SourceParams::Texts {
                column,
                features,
                min_features,
                partition_clause,
                dedup_columns,
            } => {
                b.set("text", quote_ident(column))
                    .set("features", quote_literal(features))
                    .set("min_features", min_features.to_string())
                    .set("partition_by", partition_clause.clone())
                    .set("dedup_columns", dedup_columns.clone());
            }
            SourceParams::Fingerprints { column } => {
                b.set("simhash", quote_ident(column));
            }
        }
        self.keep.bind(&mut b);
        // A run on its own is batch 0 (`documents.batch`).
        let batch = self.index.as_ref().map_or(0, |index| index.batch);
        b.set("batch", batch.to_string());
        if let Some(index) = &self.index {
            b.set("next_group_id", index.next_group_id.to_string());
            if let Some(part) = &index.part {
                let folder = |name: &str| folder_literal(&part.join(name));
                b.set("index_documents_dir", folder(crate::index::DOCUMENTS_DIR))
                    .set("index_groups_dir", folder(crate::index::GROUP_LOG_DIR));
            }
        }
        b
    }
}

/// One pass of the candidate stage: the plan's tables `bands` (1-based, end excluded).
#[derive(Debug, Clone)]
pub struct Pass<'a> {
    pub plan: &'a str,
    pub bands: Range<usize>,
}

impl Pass<'_> {
    pub fn bind(&self, bindings: &mut Bindings) {
        bindings
            .set("plan", quote_literal(self.plan))
            .set("band_from", self.bands.start.to_string())
            .set("band_to", self.bands.end.to_string());
    }
}

/// One round of the SQL clustering (`crate::job::clustering::sql_rounds`): the folders it
/// writes and the edge tables it compares.
#[derive(Debug, Clone)]
pub struct Round<'a> {
    pub edges_out: &'a Place,
    pub large_out: &'a Place,
    pub edges_before: &'a str,
    pub edges_after: &'a str,
}

impl Round<'_> {
    pub fn bindings(&self) -> Bindings {
        let mut b = Bindings::default();
        b.set("edges_out_dir", folder_literal(self.edges_out))
            .set("large_out_dir", folder_literal(self.large_out))
            .set("edges_before", self.edges_before.to_string())
            .set("edges_after", self.edges_after.to_string())
            .set("work_table_options", WORK_TABLE_OPTIONS);
        b
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use datafusion::sql::parser::DFParser;
    use datafusion::sql::sqlparser::dialect::GenericDialect;

    use super::*;
    use crate::engine::sql::{placeholders, render};
    use crate::engine::stages::ALL;

    fn params(source: SourceParams, width: Width) -> StageParams {
        StageParams {
            dir: Place::Local("/tmp/out/.staging".into()),
            id_column: "doc id".into(),
            k: 3,
            width,
            source,
            index: Some(IndexParams {
                batch: 2,
                next_group_id: 7,
                part: Some(Place::Local("/tmp/index/.part".into())),
            }),
            verify: Some(0.75),
            keep: Keep::Longest,
        }
    }

    /// Everything any stage can be given: a run against an index it updates, one pass, one
    /// round, and the fingerprints column of `match`.
    fn everything() -> Bindings {
        let texts = SourceParams::Texts {
            column: "text".into(),
            features: "mode=auto".into(),
            min_features: 5,
            partition_clause: "PARTITIONED BY (dt)".into(),
            dedup_columns: "c.*".into(),
        };
        let mut all = params(texts, Width::Bits64).bindings();
        let given = SourceParams::Fingerprints {
            column: "simhash".into(),
        };
        let simhash = params(given, Width::Bits64).bindings();
        all.set("simhash", quote_ident("simhash"));
        assert!(simhash.names().any(|n| n == "simhash"));
        let pass = Pass {
            plan: "bands:4",
            bands: 1..5,
        };
        pass.bind(&mut all);
        let (edges, large) = (
            Place::Local("/tmp/e1".into()),
            Place::Local("/tmp/l1".into()),
        );
        let round = Round {
            edges_out: &edges,
            large_out: &large,
            edges_before: "edges_0",
            edges_after: "edges_1",
        };
        for name in round.bindings().names() {
            if all.get(name).is_none() {
                all.set(name, "edges_1");
            }
        }
        all
    }

    #[test]
    fn every_placeholder_is_bound_and_every_binding_is_used() {
        let used: BTreeSet<&str> = ALL.iter().flat_map(|s| placeholders(s.sql)).collect();
        let bound: BTreeSet<&str> = everything().names().collect();
        assert_eq!(used, bound, "placeholders of sql/ against the bindings");
    }

    #[test]
    fn every_stage_parses_once_rendered() {
        let all = everything();
        for stage in ALL {
            let sql = render(stage, &all).unwrap();
            DFParser::parse_sql_with_dialect(&sql, &GenericDialect {})
                .unwrap_or_else(|e| panic!("{}: {e}", stage.name));
        }
    }

    #[test]
    fn bands_follow_the_width() {
        let given = || SourceParams::Fingerprints {
            column: "simhash".into(),
        };
        // The index keeps each document's band columns (sql/07_index_batch.sql).
        let names = |width| {
            params(given(), width)
                .bindings()
                .get("bucket_names")
                .map(str::to_string)
                .unwrap()
        };
        let (wide, narrow) = (names(Width::Bits128), names(Width::Bits64));
        assert!(
            wide.ends_with("bucket8") && !wide.contains("bucket9"),
            "{wide}"
        );
        assert!(
            narrow.ends_with("bucket4") && !narrow.contains("bucket5"),
            "{narrow}"
        );
    }
}
