//! Runs the job's SQL files (`sql/*.sql`, compiled into the binary) statement by statement.
//!
//! A stage file may hold several statements. Parameters appear as `${name}` and are replaced
//! by SQL text prepared by the caller (a quoted identifier, a quoted path, a number), so the
//! options reach the plan as literals and the same SQL could run on a cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::config::ConfigOptions;
use datafusion::error::Result as DataFusionResult;
use datafusion::logical_expr::LogicalPlan;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::errors::ParquetError;

use datafusion::prelude::SessionContext;
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::GenericDialect;

use crate::error::{Error, QueryContext, Result};

/// One SQL file of the job.
#[derive(Debug, Clone, Copy)]
pub struct Stage {
    pub name: &'static str,
    pub sql: &'static str,
}

pub const SIGNATURES: Stage = Stage {
    name: "sql/01_signatures.sql",
    sql: include_str!("../sql/01_signatures.sql"),
};
pub const SIGNATURES_GIVEN: Stage = Stage {
    name: "sql/01_signatures_given.sql",
    sql: include_str!("../sql/01_signatures_given.sql"),
};
pub const FINGERPRINTS: Stage = Stage {
    name: "sql/02_fingerprints.sql",
    sql: include_str!("../sql/02_fingerprints.sql"),
};
pub const FINGERPRINTS_INDEX: Stage = Stage {
    name: "sql/02_fingerprints_index.sql",
    sql: include_str!("../sql/02_fingerprints_index.sql"),
};
pub const CANDIDATES_JOIN: Stage = Stage {
    name: "sql/03_candidates_join.sql",
    sql: include_str!("../sql/03_candidates_join.sql"),
};
pub const CANDIDATES_SCAN: Stage = Stage {
    name: "sql/03_candidates_scan.sql",
    sql: include_str!("../sql/03_candidates_scan.sql"),
};
pub const CANDIDATES_INDEX: Stage = Stage {
    name: "sql/03_candidates_index.sql",
    sql: include_str!("../sql/03_candidates_index.sql"),
};
pub const CANDIDATES_INDEX_JOIN: Stage = Stage {
    name: "sql/03_candidates_index_join.sql",
    sql: include_str!("../sql/03_candidates_index_join.sql"),
};
pub const CANDIDATES_TABLE: Stage = Stage {
    name: "sql/03_candidates_table.sql",
    sql: include_str!("../sql/03_candidates_table.sql"),
};
pub const PAIRS: Stage = Stage {
    name: "sql/04_pairs.sql",
    sql: include_str!("../sql/04_pairs.sql"),
};
pub const PAIRS_STAR: Stage = Stage {
    name: "sql/04_pairs_star.sql",
    sql: include_str!("../sql/04_pairs_star.sql"),
};
pub const GROUPS: Stage = Stage {
    name: "sql/05_groups.sql",
    sql: include_str!("../sql/05_groups.sql"),
};
pub const COMPONENTS_START: Stage = Stage {
    name: "sql/05_components_start.sql",
    sql: include_str!("../sql/05_components_start.sql"),
};
pub const COMPONENTS_ROUND: Stage = Stage {
    name: "sql/05_components_round.sql",
    sql: include_str!("../sql/05_components_round.sql"),
};
pub const COMPONENTS_SMALL: Stage = Stage {
    name: "sql/05_components_small.sql",
    sql: include_str!("../sql/05_components_small.sql"),
};
pub const GROUPS_INDEX: Stage = Stage {
    name: "sql/05_groups_index.sql",
    sql: include_str!("../sql/05_groups_index.sql"),
};
pub const DEDUP: Stage = Stage {
    name: "sql/06_dedup.sql",
    sql: include_str!("../sql/06_dedup.sql"),
};
pub const DEDUP_KEPT: Stage = Stage {
    name: "sql/06_dedup_kept.sql",
    sql: include_str!("../sql/06_dedup_kept.sql"),
};
pub const INDEX_BATCH: Stage = Stage {
    name: "sql/07_index_batch.sql",
    sql: include_str!("../sql/07_index_batch.sql"),
};

/// How stage 3 finds the pairs of distinct fingerprints within k, whatever the band plan. Both
/// give the same pairs (the exactness tests run both); they differ in speed
/// (docs/BENCHMARKS.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Matching {
    /// Group each table's rows, sort each group and compare within runs of equal keys.
    Scan,
    /// A hash self-join on each table's key with the Hamming filter in the join.
    Join,
}

impl Matching {
    pub fn candidates_stage(self) -> Stage {
        match self {
            Matching::Scan => CANDIDATES_SCAN,
            Matching::Join => CANDIDATES_JOIN,
        }
    }

    /// The same against a signature index: only pairs with a fresh fingerprint.
    pub fn candidates_index_stage(self) -> Stage {
        match self {
            Matching::Scan => CANDIDATES_INDEX,
            Matching::Join => CANDIDATES_INDEX_JOIN,
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
            PairsListed::All => PAIRS,
            PairsListed::Star => PAIRS_STAR,
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
    /// Large-star / small-star rounds as SQL queries (`src/components.rs`): the pairs never
    /// leave the engine, as a cluster needs.
    Sql,
}

/// Values for a stage's `${name}` placeholders, each already SQL text.
#[derive(Debug, Default, Clone)]
pub struct Params(BTreeMap<String, String>);

impl Params {
    pub fn set(&mut self, name: &str, sql_text: impl Into<String>) -> &mut Self {
        self.0.insert(name.to_string(), sql_text.into());
        self
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

/// Replaces every `${name}`; a placeholder without a value is an error, not an empty string.
pub fn render(stage: &Stage, params: &Params) -> Result<String> {
    let mut out = String::with_capacity(stage.sql.len());
    let mut rest = stage.sql;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| Error::Internal(format!("{}: unterminated ${{", stage.name)))?;
        let name = &after[..end];
        let value = params.0.get(name).ok_or_else(|| {
            Error::Internal(format!(
                "{}: no value for parameter ${{{name}}}",
                stage.name
            ))
        })?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Renders a stage and runs its statements in order.
pub async fn run_stage(ctx: &SessionContext, stage: &Stage, params: &Params) -> Result<()> {
    let sql = render(stage, params)?;
    run_statements(ctx, &sql, stage.name).await
}

/// Rows per batch while documents are fingerprinted. DataFusion's 8,192 suit narrow rows; 8,192
/// documents are megabytes of text and a quarter of a second of fingerprinting, so at the end
/// of the stage one core finished the last batch alone. 2,048 keep both busy to the end and
/// hold less text in flight (docs/BENCHMARKS.md: about 9% less time and 10% less memory).
pub const TEXT_BATCH_ROWS: usize = 2048;

/// `run_stage` with session options changed for this stage only, restored afterwards whether
/// it succeeds or not: the signature stage's batch size (`TEXT_BATCH_ROWS`), dedup's Parquet
/// filter pushdown (the scan decodes the filter's columns first, so rows a join's dynamic filter
/// rejects are never decoded).
pub async fn run_stage_with(
    ctx: &SessionContext,
    stage: &Stage,
    params: &Params,
    change: impl FnOnce(&mut ConfigOptions) -> DataFusionResult<()>,
) -> Result<()> {
    let saved = {
        let state = ctx.state_ref();
        let mut state = state.write();
        let options = state.config_mut().options_mut();
        let saved = options.clone();
        change(options).context(|| format!("{}: session options", stage.name))?;
        saved
    };
    let result = run_stage(ctx, stage, params).await;
    *ctx.state_ref().write().config_mut().options_mut() = saved;
    result
}

/// Runs each statement of `sql` to completion, discarding results (DDL and COPY).
pub async fn run_statements(ctx: &SessionContext, sql: &str, origin: &str) -> Result<()> {
    let statements = DFParser::parse_sql_with_dialect(sql, &GenericDialect {})
        .context(|| format!("{origin}: SQL does not parse"))?;
    let state = ctx.state();
    for (number, statement) in statements.into_iter().enumerate() {
        let what = || format!("{origin}, statement {}", number + 1);
        log::debug!("{}:\n{statement}", what());
        let started = std::time::Instant::now();
        let plan = state.statement_to_plan(statement).await.context(what)?;
        let folder_copy = match &plan {
            LogicalPlan::Copy(copy) if copy.output_url.ends_with('/') => Some((
                PathBuf::from(&copy.output_url),
                Arc::new(copy.input.schema().as_arrow().clone()),
            )),
            _ => None,
        };
        // A COPY that fails on a full disk names the folder it was writing.
        let destination = match &plan {
            LogicalPlan::Copy(copy) => Some(copy.output_url.clone()),
            _ => None,
        };
        let written = match ctx.execute_logical_plan(plan).await.context(what) {
            Ok(frame) => frame.collect().await.context(what),
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            return Err(match &destination {
                Some(destination) => e.writing(destination),
                None => e,
            });
        }
        if let Some((folder, schema)) = folder_copy {
            ensure_table_file(&folder, schema)?;
        }
        log::debug!("{}: {:.3} s", what(), started.elapsed().as_secs_f64());
    }
    Ok(())
}

/// A COPY of no rows writes no file, and an empty folder is not a table anyone can read (its
/// schema is unknown). Writes one empty Parquet file with the query's schema in that case, so an
/// empty result is still a valid, typed table.
fn ensure_table_file(folder: &Path, schema: SchemaRef) -> Result<()> {
    if holds_parquet(folder) {
        return Ok(());
    }
    std::fs::create_dir_all(folder).map_err(|e| Error::io(folder, e))?;
    let path = folder.join("part-0.parquet");
    let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
    let writer_error = |e: ParquetError| Error::Internal(format!("{}: {e}", path.display()));
    ArrowWriter::try_new(file, schema, None)
        .map_err(writer_error)?
        .close()
        .map_err(writer_error)?;
    Ok(())
}

/// True when `folder` or a folder inside it (a partitioned COPY) holds a Parquet file.
fn holds_parquet(folder: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return false;
    };
    entries.filter_map(|e| e.ok()).any(|e| {
        let path = e.path();
        path.is_dir() && holds_parquet(&path)
            || e.file_name().to_string_lossy().ends_with(".parquet")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::common::config::ConfigNonZeroUsize;

    const STAGE: Stage = Stage {
        name: "test.sql",
        sql: "SELECT ${a} FROM t WHERE x <= ${k};",
    };

    #[tokio::test]
    async fn stage_options_are_restored_after_the_stage() {
        let ctx = SessionContext::new();
        let default_rows = ctx.state().config().batch_size();
        let seen = |ctx: &SessionContext| ctx.state().config().batch_size();
        // A stage that succeeds and one that fails: the session's own setting comes back both
        // times, and a bad change is refused before the stage runs.
        let good = Stage {
            name: "good.sql",
            sql: "CREATE VIEW v AS SELECT 1 AS one;",
        };
        let bad = Stage {
            name: "bad.sql",
            sql: "SELECT * FROM no_such_table;",
        };
        for stage in [&good, &bad] {
            let result = run_stage_with(&ctx, stage, &Params::default(), |options| {
                options.execution.batch_size = ConfigNonZeroUsize::try_new(123)?;
                Ok(())
            })
            .await;
            assert_eq!(result.is_ok(), stage.name == "good.sql");
            assert_eq!(seen(&ctx), default_rows);
        }
        let refused = run_stage_with(&ctx, &good, &Params::default(), |options| {
            options.execution.batch_size = ConfigNonZeroUsize::try_new(0)?;
            Ok(())
        })
        .await;
        assert!(refused.is_err());
        assert_eq!(seen(&ctx), default_rows);
    }

    #[test]
    fn placeholders_are_replaced() {
        let mut params = Params::default();
        params.set("a", "\"id\"").set("k", "3");
        assert_eq!(
            render(&STAGE, &params).unwrap(),
            "SELECT \"id\" FROM t WHERE x <= 3;"
        );
    }

    #[test]
    fn missing_parameter_is_an_error() {
        let mut params = Params::default();
        params.set("a", "1");
        let err = render(&STAGE, &params).unwrap_err().to_string();
        assert!(err.contains("${k}"), "{err}");
    }

    #[test]
    fn every_stage_parses_once_rendered() {
        // Every placeholder any stage uses gets a plausible value; parsing must succeed.
        let mut params = Params::default();
        for name in [
            "id",
            "text",
            "k",
            "signatures_dir",
            "fingerprints_dir",
            "fingerprint_pairs_dir",
            "pairs_dir",
            "groups_dir",
            "dedup_dir",
            "index_documents_dir",
            "index_groups_dir",
            "members_dir",
            "grouped_members_dir",
            "edges_out_dir",
            "large_out_dir",
            "simhash",
        ] {
            params.set(
                name,
                if name.ends_with("_dir") {
                    "'/tmp/x/'"
                } else {
                    "\"c\""
                },
            );
        }
        params
            .set("k", "3")
            .set("features", "'mode=auto'")
            .set("bucket_columns", "bucket(simhash, 1) AS bucket1")
            .set("bucket_names", "bucket1")
            .set("plan", "'bands:4'")
            .set("band_from", "1")
            .set("band_to", "5")
            .set("batch", "2")
            .set("next_group_id", "7")
            .set("partition_by", "PARTITIONED BY (dt)");
        for stage in [
            SIGNATURES,
            SIGNATURES_GIVEN,
            FINGERPRINTS,
            FINGERPRINTS_INDEX,
            CANDIDATES_JOIN,
            CANDIDATES_SCAN,
            CANDIDATES_INDEX,
            CANDIDATES_INDEX_JOIN,
            CANDIDATES_TABLE,
            PAIRS,
            PAIRS_STAR,
            GROUPS,
            COMPONENTS_START,
            COMPONENTS_ROUND,
            COMPONENTS_SMALL,
            GROUPS_INDEX,
            DEDUP,
            DEDUP_KEPT,
            INDEX_BATCH,
        ] {
            let sql = render(&stage, &params).unwrap();
            DFParser::parse_sql_with_dialect(&sql, &GenericDialect {})
                .unwrap_or_else(|e| panic!("{}: {e}", stage.name));
        }
    }
}
