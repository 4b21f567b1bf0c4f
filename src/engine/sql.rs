//! Runs SQL: the job's files (`sql/*.sql`, `crate::engine::stages`) statement by statement, and
//! the one-off queries of the commands.
//!
//! A stage file may hold several statements. Parameters appear as `${name}` and are replaced
//! by SQL text prepared by the caller (a quoted identifier, a quoted path, a number; the job's
//! are typed in `crate::job::params`), so the options reach the plan as literals and the same SQL
//! runs on a cluster.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::cast::{as_int64_array, as_uint64_array};
use datafusion::common::config::ConfigOptions;
use datafusion::error::Result as DataFusionResult;
use datafusion::logical_expr::LogicalPlan;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::errors::ParquetError;

use datafusion::dataframe::DataFrame;
use datafusion::execution::SessionState;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::DFParser;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::dialect::GenericDialect;

use crate::engine::copy_leftovers;
use crate::engine::parquet_writes;
use crate::engine::stages::Stage;
use crate::error::{Error, QueryContext, Result};
use crate::storage::Place;

/// Values for a stage's `${name}` placeholders, each already SQL text.
#[derive(Debug, Default, Clone)]
pub struct Bindings(BTreeMap<&'static str, String>);

impl Bindings {
    pub fn set(&mut self, name: &'static str, sql_text: impl Into<String>) -> &mut Self {
        self.0.insert(name, sql_text.into());
        self
    }

    /// The names bound, for the test that every placeholder of `sql/` is bound and every
    /// binding used.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.keys().copied()
    }

    #[cfg(test)]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

/// Quotes a column name for SQL (names may hold spaces, capitals or quotes).
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Quotes a string literal for SQL.
pub fn quote_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// A folder as the target of a `COPY ... TO`: quoted, with the trailing slash that makes COPY
/// write a folder of Parquet files.
pub fn folder_literal(dir: &Place) -> String {
    quote_literal(&dir.folder())
}

/// The `${name}` placeholders of a SQL text, in order of appearance (repeats included).
pub fn placeholders(sql: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = sql;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        names.push(&after[..end]);
        rest = &after[end + 1..];
    }
    names
}

/// Replaces every `${name}`; a placeholder without a value is an error, not an empty string.
pub fn render(stage: &Stage, bindings: &Bindings) -> Result<String> {
    let mut out = String::with_capacity(stage.sql.len());
    let mut rest = stage.sql;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| Error::Internal(format!("{}: unterminated ${{", stage.name)))?;
        let name = &after[..end];
        let value = bindings.0.get(name).ok_or_else(|| {
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

/// Renders a stage of one query and collects its result.
pub async fn query_stage(
    ctx: &SessionContext,
    stage: &Stage,
    bindings: &Bindings,
) -> Result<Vec<RecordBatch>> {
    let what = || stage.name.to_string();
    stage_frame(ctx, stage, bindings)
        .await?
        .collect()
        .await
        .context(what)
}

/// Renders a stage of one query and plans it, for the caller to collect or stream.
pub async fn stage_frame(
    ctx: &SessionContext,
    stage: &Stage,
    bindings: &Bindings,
) -> Result<DataFrame> {
    let sql = render(stage, bindings)?;
    ctx.sql(&sql).await.context(|| stage.name.to_string())
}

/// Renders a stage of one query whose result is a single count.
pub async fn count_query_stage(
    ctx: &SessionContext,
    stage: &Stage,
    bindings: &Bindings,
) -> Result<u64> {
    first_value(&query_stage(ctx, stage, bindings).await?, 0)
}

/// Renders a stage and runs its statements in order.
pub async fn run_stage(ctx: &SessionContext, stage: &Stage, bindings: &Bindings) -> Result<()> {
    let sql = render(stage, bindings)?;
    run_statements(ctx, &sql, stage.name).await
}

/// `run_stage` with session options changed for this stage only, restored afterwards whether
/// it succeeds or not: the signature stage's batch size (`crate::job::TEXT_BATCH_ROWS`), dedup's Parquet
/// filter pushdown (the scan decodes the filter's columns first, so rows a join's dynamic filter
/// rejects are never decoded).
pub async fn run_stage_with(
    ctx: &SessionContext,
    stage: &Stage,
    bindings: &Bindings,
    change: impl FnOnce(&mut ConfigOptions) -> DataFusionResult<()>,
) -> Result<()> {
    let what = || format!("{}: session options", stage.name);
    with_options(ctx, change, what, run_stage(ctx, stage, bindings)).await
}

/// Runs `work` with session options changed (`what` names it if the change fails), restored
/// afterwards whether it succeeds or not. What `work` plans is planned with the changed options.
pub async fn with_options<T>(
    ctx: &SessionContext,
    change: impl FnOnce(&mut ConfigOptions) -> DataFusionResult<()>,
    what: impl FnOnce() -> String,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    let saved = {
        let state = ctx.state_ref();
        let mut state = state.write();
        let options = state.config_mut().options_mut();
        let saved = options.clone();
        change(options).context(what)?;
        saved
    };
    let result = work.await;
    *ctx.state_ref().write().config_mut().options_mut() = saved;
    result
}

/// Runs each statement of `sql` to completion, discarding results (DDL and COPY).
pub async fn run_statements(ctx: &SessionContext, sql: &str, origin: &str) -> Result<()> {
    let statements = parse(sql, || format!("{origin}: SQL does not parse"))?;
    let state = ctx.state();
    for (number, statement) in statements.into_iter().enumerate() {
        let what = || format!("{origin}, statement {}", number + 1);
        run_statement(ctx, &state, statement, &what, &|_| Ok(())).await?;
    }
    Ok(())
}

/// A rule each statement's plan must pass before it runs (where `neardup query` lets a COPY
/// write).
pub type PlanCheck<'a> = &'a (dyn Fn(&LogicalPlan) -> Result<()> + Send + Sync);

/// Runs every statement of `sql` but the last for its effect (CREATE VIEW, SET, COPY ...), and
/// returns the last one planned, for the caller to stream (`neardup query`).
pub async fn run_all_but_last(
    ctx: &SessionContext,
    sql: &str,
    check: PlanCheck<'_>,
) -> Result<DataFrame> {
    let mut statements = parse(sql, || "the SQL does not parse".into())?;
    let last = statements
        .pop_back()
        .ok_or_else(|| Error::Usage("no SQL statement given".into()))?;
    let state = ctx.state();
    let earlier = statements.len();
    for (number, statement) in statements.into_iter().enumerate() {
        let what = || format!("statement {}", number + 1);
        run_statement(ctx, &state, statement, &what, check).await?;
    }
    let what = || format!("statement {}", earlier + 1);
    let plan = state.statement_to_plan(last).await.context(what)?;
    check(&plan)?;
    // The session as the statements before this one left it (a SET among them).
    parquet_writes::check(&plan, &ctx.state(), &what())?;
    if matches!(plan, LogicalPlan::Copy(_)) {
        // Run here rather than streamed by the caller, so that a COPY that fails takes back
        // the files it wrote (`run_to_end`); its result is one row, the rows written.
        let batches = run_to_end(ctx, plan, &what).await?;
        return ctx.read_batches(batches).context(what);
    }
    ctx.execute_logical_plan(plan).await.context(what)
}

fn parse(sql: &str, failed: impl FnOnce() -> String) -> Result<VecDeque<Statement>> {
    DFParser::parse_sql_with_dialect(sql, &GenericDialect {})
        .context(failed)
        .map_err(with_keyword_hint)
}

/// A parse error stopped on a SQL keyword (`SELECT id, cluster FROM t`: `cluster` is one, and
/// the truth files' column): say that a column so named is quoted.
fn with_keyword_hint(error: Error) -> Error {
    error.with_query_hint(|message| {
        let found = message
            .split_once("found: ")
            .and_then(|(_, rest)| rest.split([' ', '"', ')']).next())?;
        let upper = found.to_ascii_uppercase();
        datafusion::sql::sqlparser::keywords::ALL_KEYWORDS
            .contains(&upper.as_str())
            .then(|| {
                format!(
                    "; {found} is a SQL keyword: where it names a column or table, quote it \
                     (\"{found}\")"
                )
            })
    })
}

/// Plans and runs one statement to completion (a COPY as `run_to_end` says).
async fn run_statement(
    ctx: &SessionContext,
    state: &SessionState,
    statement: Statement,
    what: &dyn Fn() -> String,
    check: PlanCheck<'_>,
) -> Result<()> {
    log::debug!("{}:\n{statement}", what());
    let started = std::time::Instant::now();
    let plan = state.statement_to_plan(statement).await.context(what)?;
    check(&plan)?;
    // The session as the statements before this one left it (a SET among them).
    parquet_writes::check(&plan, &ctx.state(), &what())?;
    run_to_end(ctx, plan, what).await?;
    log::debug!("{}: {:.3} s", what(), started.elapsed().as_secs_f64());
    Ok(())
}

/// Runs a planned statement to completion and returns its rows. For a COPY: a failure removes
/// the local files the COPY added (`copy_leftovers`) and names the folder on a full disk; a COPY
/// into a folder leaves a readable table even when it wrote no row.
async fn run_to_end(
    ctx: &SessionContext,
    plan: LogicalPlan,
    what: &dyn Fn() -> String,
) -> Result<Vec<RecordBatch>> {
    let (destination, folder_copy) = match &plan {
        LogicalPlan::Copy(copy) => {
            let folder = copy.output_url.ends_with('/').then(|| {
                let schema = Arc::new(copy.input.schema().as_arrow().clone());
                (copy.output_url.clone(), schema)
            });
            (Some(copy.output_url.clone()), folder)
        }
        _ => (None, None),
    };
    let before = destination
        .as_deref()
        .and_then(copy_leftovers::Before::note);
    let written = match ctx.execute_logical_plan(plan).await.context(what) {
        Ok(frame) => frame.collect().await.context(what),
        Err(e) => Err(e),
    };
    let batches = match written {
        Ok(batches) => batches,
        Err(e) => {
            if let Some(before) = before {
                before.remove_added();
            }
            return Err(match &destination {
                Some(destination) => e.writing(destination),
                None => e,
            });
        }
    };
    if let Some((folder, schema)) = folder_copy {
        match Place::parse(&folder, "COPY")? {
            Place::Local(folder) => ensure_table_file(&folder, schema)?,
            Place::Remote(url) => ensure_remote_table_file(&url, schema).await?,
        }
    }
    Ok(batches)
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
    let writer_error = |e: ParquetError| Error::parquet(&path, e);
    ArrowWriter::try_new(file, schema, None)
        .map_err(writer_error)?
        .close()
        .map_err(writer_error)?;
    Ok(())
}

/// `ensure_table_file` for a folder on an object store.
async fn ensure_remote_table_file(folder: &url::Url, schema: SchemaRef) -> Result<()> {
    let remote = crate::storage::Remote::open(folder)?;
    let holds_parquet = remote
        .list()
        .await?
        .iter()
        .any(|o| o.location.as_ref().ends_with(".parquet"));
    if holds_parquet {
        return Ok(());
    }
    let file = remote.child("part-0.parquet");
    let writer_error = |e: ParquetError| Error::Internal(format!("{}: {e}", file.url()));
    let mut bytes = Vec::new();
    ArrowWriter::try_new(&mut bytes, schema, None)
        .map_err(writer_error)?
        .close()
        .map_err(writer_error)?;
    file.write(bytes).await
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

/// Runs one query and collects its result; errors name the query.
pub async fn query_batches(ctx: &SessionContext, sql: &str) -> Result<Vec<RecordBatch>> {
    let what = || format!("query {sql}");
    ctx.sql(sql)
        .await
        .context(what)?
        .collect()
        .await
        .context(what)
}

/// Query results as an aligned text table, for error messages that show a few rows.
pub fn pretty(batches: &[RecordBatch]) -> Result<String> {
    datafusion::arrow::util::pretty::pretty_format_batches(batches)
        .map(|table| table.to_string())
        .context(|| "showing rows".into())
}

/// The rows of a table.
pub async fn count_rows(ctx: &SessionContext, table: &str) -> Result<u64> {
    count_query(ctx, &format!("SELECT count(*) FROM {table}")).await
}

/// The single count a query returns.
pub async fn count_query(ctx: &SessionContext, sql: &str) -> Result<u64> {
    let batches = query_batches(ctx, sql).await?;
    first_value(&batches, 0)
}

/// Reads the value in column `column` of the single row of a query result as u64.
pub fn first_value(batches: &[RecordBatch], column: usize) -> Result<u64> {
    let batch = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .ok_or_else(|| Error::Internal("count query returned no row".into()))?;
    let values = as_int64_array(batch.column(column)).context(|| "count".into())?;
    Ok(if values.is_null(0) {
        0
    } else {
        values.value(0) as u64
    })
}

/// The single value of a one-row UInt64 result (`max(group_id)`), `None` when NULL.
pub fn first_unsigned(batches: &[RecordBatch]) -> Result<Option<u64>> {
    let batch = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .ok_or_else(|| Error::Internal("query returned no row".into()))?;
    let values = as_uint64_array(batch.column(0)).context(|| "largest group id".into())?;
    Ok((!values.is_null(0)).then(|| values.value(0)))
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
            let result = run_stage_with(&ctx, stage, &Bindings::default(), |options| {
                options.execution.batch_size = ConfigNonZeroUsize::try_new(123)?;
                Ok(())
            })
            .await;
            assert_eq!(result.is_ok(), stage.name == "good.sql");
            assert_eq!(seen(&ctx), default_rows);
        }
        let refused = run_stage_with(&ctx, &good, &Bindings::default(), |options| {
            options.execution.batch_size = ConfigNonZeroUsize::try_new(0)?;
            Ok(())
        })
        .await;
        assert!(refused.is_err());
        assert_eq!(seen(&ctx), default_rows);
    }

    #[test]
    fn quoting() {
        assert_eq!(quote_ident("Doc \"ID\""), "\"Doc \"\"ID\"\"\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
    }

    #[test]
    fn placeholders_are_replaced() {
        let mut params = Bindings::default();
        params.set("a", "\"id\"").set("k", "3");
        assert_eq!(
            render(&STAGE, &params).unwrap(),
            "SELECT \"id\" FROM t WHERE x <= 3;"
        );
    }

    #[test]
    fn missing_parameter_is_an_error() {
        let mut params = Bindings::default();
        params.set("a", "1");
        let err = render(&STAGE, &params).unwrap_err().to_string();
        assert!(err.contains("${k}"), "{err}");
    }
}
