//! `neardup query`: SQL over a run's outputs, with the run's input as `corpus` and the
//! project's functions registered; results as a table, CSV, JSON lines or Parquet.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use datafusion::arrow::csv;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::json::LineDelimitedWriter;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use futures::StreamExt;

use crate::error::{Error, QueryContext, Result};
use crate::job;
use crate::output::{SUMMARY_FILE, is_output_dir};
use crate::summary::Summary;

/// How `query` writes its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// An aligned text table (collects the result in memory).
    Table,
    /// CSV with a header row.
    Csv,
    /// One JSON object per line.
    Json,
    /// A Parquet file (needs --out).
    Parquet,
}

#[derive(Debug, Clone)]
pub struct QueryOptions {
    pub data: Option<PathBuf>,
    /// A signature index whose tables are registered too.
    pub index: Option<PathBuf>,
    pub sql: String,
    pub format: Format,
    pub out: Option<PathBuf>,
}

/// The tables a run writes, registered by these names.
pub const OUTPUT_TABLES: [&str; 4] = ["signatures", "pairs", "groups", "dedup"];

pub async fn query(options: &QueryOptions) -> Result<()> {
    if options.format == Format::Parquet && options.out.is_none() {
        return Err(Error::Usage("--format parquet needs --out FILE".into()));
    }
    // Files can be queried by path too: SELECT * FROM 'data/part-0.parquet'.
    let ctx = job::session_context()?.enable_url_table();
    if let Some(data) = &options.data {
        register_outputs(&ctx, data).await?;
    }
    if let Some(dir) = &options.index {
        crate::index::Index::open_existing(dir)?
            .register_for_query(&ctx)
            .await?;
    }
    let mut statements = DFParser::parse_sql_with_dialect(&options.sql, &GenericDialect {})
        .context(|| "the SQL does not parse".into())?;
    let last = statements
        .pop_back()
        .ok_or_else(|| Error::Usage("no SQL statement given".into()))?;
    let state = ctx.state();
    // Earlier statements (CREATE VIEW, SET, COPY ...) run for their effect; the last one's
    // result is written.
    for statement in statements {
        let plan = state
            .statement_to_plan(statement)
            .await
            .context(|| "planning".into())?;
        ctx.execute_logical_plan(plan)
            .await
            .context(|| "running".into())?
            .collect()
            .await
            .context(|| "running".into())?;
    }
    let plan = state
        .statement_to_plan(last)
        .await
        .context(|| "planning".into())?;
    let frame = ctx
        .execute_logical_plan(plan)
        .await
        .context(|| "running".into())?;
    match &options.out {
        None => write_result(frame, options.format, BufWriter::new(std::io::stdout())).await,
        Some(path) => {
            // Write beside the target and rename: the file appears whole or not at all.
            let partial = partial_path(path);
            let file = File::create(&partial).map_err(|e| Error::io(&partial, e))?;
            let written = write_result(frame, options.format, BufWriter::new(file)).await;
            if let Err(e) = written {
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
            std::fs::rename(&partial, path).map_err(|e| Error::io(path, e))
        }
    }
}

fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

async fn write_result<W: Write + Send>(
    frame: datafusion::dataframe::DataFrame,
    format: Format,
    mut sink: W,
) -> Result<()> {
    let what = || "running the query".to_string();
    let write_err = |e: std::io::Error| Error::io("<query output>", e);
    let arrow_err = |e: datafusion::arrow::error::ArrowError| Error::Internal(e.to_string());
    if format == Format::Table {
        let batches = frame.collect().await.context(what)?;
        let table = pretty_format_batches(&batches).map_err(arrow_err)?;
        writeln!(sink, "{table}").map_err(write_err)?;
        return sink.flush().map_err(write_err);
    }
    let schema = frame.schema().inner().clone();
    let mut stream = frame.execute_stream().await.context(what)?;
    match format {
        Format::Csv => {
            let mut writer = csv::WriterBuilder::new().with_header(true).build(sink);
            while let Some(batch) = stream.next().await {
                writer.write(&batch.context(what)?).map_err(arrow_err)?;
            }
            writer.into_inner().flush().map_err(write_err)
        }
        Format::Json => {
            let mut writer = LineDelimitedWriter::new(sink);
            while let Some(batch) = stream.next().await {
                writer.write(&batch.context(what)?).map_err(arrow_err)?;
            }
            writer.finish().map_err(arrow_err)?;
            writer.into_inner().flush().map_err(write_err)
        }
        Format::Parquet => {
            let properties = WriterProperties::builder()
                .set_compression(Compression::ZSTD(
                    ZstdLevel::try_new(3).map_err(|e| Error::Internal(e.to_string()))?,
                ))
                .build();
            let mut writer = ArrowWriter::try_new(sink, schema, Some(properties))
                .map_err(|e| Error::Internal(e.to_string()))?;
            while let Some(batch) = stream.next().await {
                writer
                    .write(&batch.context(what)?)
                    .map_err(|e| Error::Internal(e.to_string()))?;
            }
            writer.close().map_err(|e| Error::Internal(e.to_string()))?;
            Ok(())
        }
        Format::Table => Ok(()),
    }
}

/// Registers the output tables of a complete run (or match) and its input as `corpus`.
pub async fn register_outputs(ctx: &SessionContext, data: &Path) -> Result<()> {
    if !is_output_dir(data) {
        return Err(Error::Input(format!(
            "{} is not a complete neardup output (no _SUCCESS and summary.json)",
            data.display()
        )));
    }
    let summary = Summary::read(&data.join(SUMMARY_FILE))?;
    for table in OUTPUT_TABLES {
        let dir = data.join(table);
        if dir.is_dir() {
            // A partitioned dedup keeps its partition columns in folder names (dt=.../).
            let partitions = if table == "dedup" {
                let by = &summary.parameters.partition_by;
                by.iter().map(|c| (c.clone(), DataType::Utf8)).collect()
            } else {
                Vec::new()
            };
            ctx.register_parquet(
                table,
                &format!("{}/", dir.display()),
                ParquetReadOptions::default().table_partition_cols(partitions),
            )
            .await
            .context(|| format!("reading {}", dir.display()))?;
        }
    }
    if summary.command == "run" {
        let files: Vec<PathBuf> = summary.inputs.iter().map(PathBuf::from).collect();
        if let Some(missing) = files.iter().find(|f| !f.is_file()) {
            eprintln!(
                "neardup: warning: table corpus not available: input {} is gone",
                missing.display()
            );
            return Ok(());
        }
        let paths: Vec<String> = summary.inputs.clone();
        let corpus = ctx
            .read_parquet(paths, ParquetReadOptions::default().file_extension(""))
            .await
            .context(|| "reading the run's input".into())?;
        ctx.register_table("corpus", corpus.into_view())
            .context(|| "registering corpus".into())?;
    }
    Ok(())
}
