//! `neardup query`: SQL over a run's outputs, with the run's input as `corpus` and the
//! project's functions registered; results as a table, CSV, TSV, JSON lines or Parquet.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use datafusion::arrow::csv;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::json::LineDelimitedWriter;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use futures::StreamExt;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use crate::error::{Error, QueryContext, Result};
use crate::job;
use crate::output::{SUMMARY_FILE, is_output_dir};
use crate::summary::Summary;

/// How `query` writes its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// An aligned text table, streamed; cells are cut to one line of at most 64 columns.
    Table,
    /// CSV with a header row.
    Csv,
    /// Tab-separated values with a header row.
    Tsv,
    /// One JSON object per line (JSON Lines).
    Json,
    /// The same as json: one JSON object per line.
    Ndjson,
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
    /// Rows the table format shows (`usize::MAX`: all).
    pub max_rows: usize,
    pub out: Option<PathBuf>,
    /// Replace `out` if it exists.
    pub overwrite: bool,
}

/// The tables a run writes, registered by these names.
pub const OUTPUT_TABLES: [&str; 4] = ["signatures", "pairs", "groups", "dedup"];

pub async fn query(options: &QueryOptions) -> Result<()> {
    if options.format == Format::Parquet && options.out.is_none() {
        return Err(Error::Usage("--format parquet needs --out FILE".into()));
    }
    if let Some(out) = &options.out {
        if out.is_dir() {
            return Err(Error::Usage(format!(
                "--out {} is a folder; name a file",
                out.display()
            )));
        }
        if out.exists() && !options.overwrite {
            return Err(Error::Usage(format!(
                "--out {} already exists; pass --overwrite to replace it",
                out.display()
            )));
        }
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
        None => write_result(frame, options, BufWriter::new(std::io::stdout())).await,
        Some(path) => {
            // Write beside the target and rename: the file appears whole or not at all.
            let partial = partial_path(path);
            let file = File::create(&partial).map_err(|e| Error::io(&partial, e))?;
            let written = write_result(frame, options, BufWriter::new(file)).await;
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
    options: &QueryOptions,
    sink: W,
) -> Result<()> {
    let format = options.format;
    let what = || "running the query".to_string();
    let write_err = write_error;
    let arrow_err = |e: datafusion::arrow::error::ArrowError| Error::Internal(e.to_string());
    let schema = frame.schema().inner().clone();
    let mut stream = frame.execute_stream().await.context(what)?;
    match format {
        Format::Table => {
            let mut table = TableWriter::new(&schema, options.max_rows, sink);
            while let Some(batch) = stream.next().await {
                table.write(&batch.context(what)?)?;
            }
            table.finish()
        }
        Format::Csv | Format::Tsv => {
            let delimiter = if format == Format::Tsv { b'\t' } else { b',' };
            let mut writer = csv::WriterBuilder::new()
                .with_header(true)
                .with_delimiter(delimiter)
                .build(sink);
            while let Some(batch) = stream.next().await {
                writer.write(&batch.context(what)?).map_err(arrow_err)?;
            }
            writer.into_inner().flush().map_err(write_err)
        }
        Format::Json | Format::Ndjson => {
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
    }
}

/// Display columns a table cell shows at most; longer values are cut and end in `…`.
const CELL_WIDTH: usize = 64;
/// Rows read before the column widths are fixed; later rows are cut to those widths.
const ROWS_FOR_WIDTHS: usize = 1000;

/// The table format, streamed: memory holds at most `ROWS_FOR_WIDTHS` rows of cut cells,
/// whatever the size of the values (a column of 50 MB texts prints one line per row).
struct TableWriter<W: Write> {
    sink: W,
    header: Vec<String>,
    /// Rows held until the widths are known.
    pending: Vec<Vec<String>>,
    widths: Option<Vec<usize>>,
    /// Rows shown at most (`--maxrows`); the rest are only counted.
    max_rows: usize,
    rows: usize,
}

impl<W: Write> TableWriter<W> {
    fn new(schema: &datafusion::arrow::datatypes::Schema, max_rows: usize, sink: W) -> Self {
        let header = schema.fields().iter().map(|f| cell(f.name())).collect();
        Self {
            sink,
            header,
            pending: Vec::new(),
            widths: None,
            max_rows,
            rows: 0,
        }
    }

    fn write(&mut self, batch: &datafusion::arrow::array::RecordBatch) -> Result<()> {
        let shown = self
            .max_rows
            .saturating_sub(self.rows)
            .min(batch.num_rows());
        self.rows += batch.num_rows();
        if shown == 0 {
            return Ok(());
        }
        let batch = batch.slice(0, shown);
        let options = FormatOptions::default().with_null("NULL");
        let formatters = batch
            .columns()
            .iter()
            .map(|column| ArrayFormatter::try_new(column.as_ref(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Internal(format!("formatting the result: {e}")))?;
        for row in 0..batch.num_rows() {
            let cells: Vec<String> = formatters
                .iter()
                .map(|f| cell(&f.value(row).to_string()))
                .collect();
            match &self.widths {
                Some(_) => self.write_row(&cells)?,
                None => {
                    self.pending.push(cells);
                    if self.pending.len() >= ROWS_FOR_WIDTHS {
                        self.start()?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Fixes the widths from the header and the rows held, and writes them.
    fn start(&mut self) -> Result<()> {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.width()).collect();
        for row in &self.pending {
            for (width, value) in widths.iter_mut().zip(row) {
                *width = (*width).max(value.width());
            }
        }
        self.widths = Some(widths);
        self.write_border()?;
        let header = std::mem::take(&mut self.header);
        self.write_row(&header)?;
        self.write_border()?;
        for row in std::mem::take(&mut self.pending) {
            self.write_row(&row)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        if self.widths.is_none() {
            self.start()?;
        }
        self.write_border()?;
        if self.rows > self.max_rows {
            writeln!(
                self.sink,
                "{} rows, {} shown (--maxrows N or inf shows more)",
                self.rows, self.max_rows
            )
            .map_err(write_error)?;
        }
        self.sink.flush().map_err(write_error)
    }

    fn write_border(&mut self) -> Result<()> {
        let widths = self.widths.as_deref().unwrap_or_default();
        let mut line = String::from("+");
        for width in widths {
            line.push_str(&"-".repeat(width + 2));
            line.push('+');
        }
        writeln!(self.sink, "{line}").map_err(write_error)
    }

    fn write_row(&mut self, cells: &[String]) -> Result<()> {
        let widths = self.widths.as_deref().unwrap_or_default();
        let mut line = String::from("|");
        for (value, &width) in cells.iter().zip(widths) {
            let value = cut(value, width);
            line.push(' ');
            line.push_str(&value);
            line.push_str(&" ".repeat(width.saturating_sub(value.width()) + 1));
            line.push('|');
        }
        writeln!(self.sink, "{line}").map_err(write_error)
    }
}

fn write_error(e: std::io::Error) -> Error {
    Error::io("<query output>", e)
}

/// A value as one table cell: line breaks and tabs shown as `\n`, `\t`, other control
/// characters dropped, cut to `CELL_WIDTH` display columns.
fn cell(value: &str) -> String {
    let mut line = String::with_capacity(value.len().min(4 * CELL_WIDTH));
    let mut width = 0;
    for c in value.chars() {
        let shown: &str = match c {
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            c if c.is_control() => continue,
            _ => "",
        };
        if width > CELL_WIDTH {
            break;
        }
        if shown.is_empty() {
            line.push(c);
            width += c.width().unwrap_or(0);
        } else {
            line.push_str(shown);
            width += 2;
        }
    }
    cut(&line, CELL_WIDTH)
}

/// `value` if it fits in `width` display columns, else its first columns and `…`.
fn cut(value: &str, width: usize) -> String {
    if value.width() <= width {
        return value.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in value.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
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
