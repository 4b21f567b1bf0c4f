//! `neardup query`: SQL over a run's outputs, with the run's input as `corpus` and the
//! project's functions registered; results as a table, CSV, TSV, JSON or Parquet. Without SQL on
//! a terminal it is an interactive shell (`crate::commands::query_shell`).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::csv;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::json::{ArrayWriter, LineDelimitedWriter};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::listing::ListingTable;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{LogicalPlan, WriteOp};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use futures::StreamExt;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use crate::engine::commit::open_remote_output;
use crate::engine::partial_file::{Existing, PartialFile, check_target};
use crate::engine::staging::{COMPLETE_MARKER, OUTPUT_TABLES, SUMMARY_FILE, is_output_dir};
use crate::error::{Error, QueryContext, Result};
use crate::input::format::FileFormat;
use crate::job::summary::Summary;
use crate::storage::{Place, Remote};

/// How `query` writes its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// An aligned text table, streamed; cells are cut to one line of at most 64 columns.
    Table,
    /// CSV with a header row.
    Csv,
    /// Tab-separated values with a header row.
    Tsv,
    /// One JSON array of objects, one object per row (as datafusion-cli's json).
    Json,
    /// One JSON object per line (JSON Lines).
    Ndjson,
    /// A Parquet file (needs --out).
    Parquet,
}

impl Format {
    /// The format a file's extension names, for `--out` without `--format`.
    pub fn from_extension(path: &Path) -> Option<Self> {
        let extension = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match extension.as_str() {
            "parquet" => Format::Parquet,
            "csv" => Format::Csv,
            "tsv" => Format::Tsv,
            "json" => Format::Json,
            "ndjson" | "jsonl" => Format::Ndjson,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
pub struct QueryOptions {
    pub data: Option<PathBuf>,
    /// A signature index whose tables are registered too.
    pub index: Option<PathBuf>,
    /// The statements to run; `None` opens the interactive shell.
    pub sql: Option<String>,
    pub format: Format,
    /// Rows the table format shows (`usize::MAX`: all).
    pub max_rows: usize,
    pub out: Option<PathBuf>,
    /// Replace `out` if it exists.
    pub overwrite: bool,
}

pub async fn query(options: &QueryOptions) -> Result<()> {
    let Some(sql) = &options.sql else {
        if options.out.is_some() {
            return Err(Error::Usage(
                "--out needs SQL to run (an argument, -c, -f or standard input); the shell \
                 prints its results on the terminal"
                    .into(),
            ));
        }
        if options.format == Format::Parquet {
            return Err(Error::Usage("--format parquet needs --out FILE".into()));
        }
        return crate::commands::query_shell::shell(&query_context(options).await?, options).await;
    };
    if options.format == Format::Parquet && options.out.is_none() {
        return Err(Error::Usage("--format parquet needs --out FILE".into()));
    }
    let existing = Existing::from_overwrite(options.overwrite);
    let out = match &options.out {
        Some(out) => Some(Place::parse(&out.to_string_lossy(), OUT_ROLE)?),
        None => None,
    };
    if let Some(Place::Local(path)) = &out {
        refuse_writing_what_is_read(path, OUT_ROLE, options)?;
    }
    // Checked before any work; a local file is checked again when it is created.
    match &out {
        Some(Place::Local(path)) => check_target(path, OUT_ROLE, existing)?,
        Some(Place::Remote(url)) => check_remote_target(url, existing).await?,
        None => {}
    }
    let ctx = query_context(options).await?;
    let copy_rule = |plan: &LogicalPlan| check_copy(plan, options);
    let frame = crate::engine::sql::run_all_but_last(&ctx, sql, &copy_rule)
        .await
        .map_err(|e| with_data_hint(e, options))?;
    match &out {
        None => {
            let (sink, gone) = NotingReaderGone::new(BufWriter::new(std::io::stdout()));
            match write_result(frame, options, sink, Path::new(STANDARD_OUTPUT)).await {
                // A reader that took what it wanted and left (`neardup query ... | head`): the
                // write that found it gone ended the query, and that is no failure.
                Err(_) if gone.load(Ordering::Relaxed) => Ok(()),
                other => other.map(|_rows| ()),
            }
        }
        Some(Place::Local(path)) => {
            // Written under a partial name and renamed: the file appears whole or not at all
            // (a failed or interrupted query removes the partial file).
            let (partial, file) = PartialFile::create(path, OUT_ROLE, existing)?;
            write_result(frame, options, BufWriter::new(file), path).await?;
            partial.commit()
        }
        Some(Place::Remote(url)) => {
            // Written to a local scratch file, then uploaded as one object (one PUT, or parts
            // that become the object only when the upload completes): whole or not at all.
            let scratch = std::env::temp_dir().join(format!(
                "neardup-query-{}.{}",
                std::process::id(),
                crate::engine::commit::run_id()
            ));
            let (partial, file) = PartialFile::create(&scratch, OUT_ROLE, Existing::Replace)?;
            let named = Path::new(url.as_str());
            write_result(frame, options, BufWriter::new(file), named).await?;
            let replace = existing == Existing::Replace;
            Remote::open(url)?.upload(partial.path(), replace).await
        }
    }
}

/// Refuses a file `role` would write inside `--data`'s tables, summary or marker, or inside
/// `--index`: a committed output or an index is read by later queries and runs as it was
/// committed, and a file among a table's files would become part of that table. (The user's own
/// files beside the tables are theirs.)
fn refuse_writing_what_is_read(path: &Path, role: &str, options: &QueryOptions) -> Result<()> {
    let output_parts = options.data.iter().flat_map(|data| {
        let names = OUTPUT_TABLES
            .into_iter()
            .chain([SUMMARY_FILE, COMPLETE_MARKER]);
        names.map(|name| ("--data", data.join(name)))
    });
    let index = options.index.iter().map(|index| ("--index", index.clone()));
    for (read_as, part) in output_parts.chain(index) {
        if crate::engine::staging::is_inside(path, &part) {
            return Err(Error::Usage(format!(
                "{role} {} would write into {read_as}'s {}, which later queries and runs read \
                 as it was committed; write the result elsewhere",
                path.display(),
                part.display()
            )));
        }
    }
    Ok(())
}

/// The rule for what a statement writes on this machine's disk, as for `--out`, wherever it
/// sits in the plan (under `EXPLAIN ANALYZE` too): a `COPY ... TO` not into what the query reads
/// (`refuse_writing_what_is_read`), not over a symbolic link or a device, and not over an
/// existing file unless `--overwrite` (a folder takes the COPY's files beside its own, as
/// DataFusion writes them); an `INSERT INTO` a table whose files are on disk not into what the
/// query reads.
pub(crate) fn check_copy(plan: &LogicalPlan, options: &QueryOptions) -> Result<()> {
    let mut checked = Ok(());
    // The closure never fails: what it finds is kept in `checked`, and the walk stops there.
    let _ = plan.apply(|node| {
        checked = check_write(node, options);
        Ok(if checked.is_ok() {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    checked
}

fn check_write(node: &LogicalPlan, options: &QueryOptions) -> Result<()> {
    match node {
        LogicalPlan::Copy(copy) => {
            const ROLE: &str = "COPY ... TO";
            let Some(path) = local_destination(&copy.output_url) else {
                return Ok(());
            };
            refuse_writing_what_is_read(&path, ROLE, options)?;
            crate::engine::staging::refuse_symlink(&path, ROLE)?;
            if path.is_dir() {
                return Ok(());
            }
            check_target(&path, ROLE, Existing::from_overwrite(options.overwrite))
        }
        LogicalPlan::Dml(dml) if matches!(dml.op, WriteOp::Insert(_)) => {
            let Ok(provider) = source_as_provider(&dml.target) else {
                return Ok(());
            };
            let Some(listing) = provider.downcast_ref::<ListingTable>() else {
                return Ok(());
            };
            for url in listing.table_paths() {
                if let Some(path) = local_destination(url.as_str()) {
                    refuse_writing_what_is_read(&path, "INSERT INTO", options)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The place on this machine's disk a statement writes to: a path, or a `file:` URL as
/// DataFusion reads it (`file:/data/out` too); `None` on an object store.
fn local_destination(destination: &str) -> Option<PathBuf> {
    if destination.starts_with("file:") {
        return url::Url::parse(destination).ok()?.to_file_path().ok();
    }
    match Place::parse(destination, "a destination") {
        Ok(Place::Local(path)) => Some(path),
        _ => None,
    }
}

/// Runs `sql` over an output's tables (`data`) and an index's, and gathers the result of the
/// last statement: `query` for callers other than the terminal (the Python bindings).
pub async fn query_batches(
    data: Option<&Path>,
    index: Option<&Path>,
    sql: &str,
    overwrite: bool,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let options = QueryOptions {
        data: data.map(Path::to_path_buf),
        index: index.map(Path::to_path_buf),
        sql: Some(sql.to_string()),
        format: Format::Parquet,
        max_rows: usize::MAX,
        out: None,
        overwrite,
    };
    let ctx = query_context(&options).await?;
    let copy_rule = |plan: &LogicalPlan| check_copy(plan, &options);
    let frame = crate::engine::sql::run_all_but_last(&ctx, sql, &copy_rule).await?;
    let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
    let batches = frame
        .collect()
        .await
        .context(|| "running the query".into())?;
    Ok((schema, batches))
}

/// A session with the project's functions, `--data`'s tables and `--index`'s tables.
async fn query_context(options: &QueryOptions) -> Result<SessionContext> {
    // Files can be queried by path too: SELECT * FROM 'data/part-0.parquet'.
    let ctx = super::query_files::with_file_tables(crate::engine::session::session_context()?);
    if let Some(data) = &options.data {
        register_outputs(&ctx, data).await?;
    }
    if let Some(dir) = &options.index {
        let place = Place::parse(&dir.to_string_lossy(), "--index")?;
        crate::index::Index::open_existing(&place)
            .await?
            .register_for_query(&ctx)
            .await?;
    }
    Ok(ctx)
}

/// A statement naming a run's table (`groups`, `corpus`) without `--data`: those tables are a
/// run's output's, registered by `--data`.
fn with_data_hint(error: Error, options: &QueryOptions) -> Error {
    if options.data.is_some() {
        return error;
    }
    error.with_query_hint(|message| {
        let names_a_run_table = (OUTPUT_TABLES.iter().chain(&["corpus"]))
            .any(|table| message.contains(&format!("table 'datafusion.public.{table}' not found")));
        names_a_run_table.then(|| {
            "; a run's tables (signatures, pairs, groups, dedup, corpus) are there with --data \
             <its --output>, e.g. neardup query --data out/sample \"SELECT ...\""
                .to_string()
        })
    })
}

/// `--out URL`: a store that can be written (not http(s)), and no object there unless
/// `--overwrite`.
async fn check_remote_target(url: &url::Url, existing: Existing) -> Result<()> {
    if matches!(url.scheme(), "http" | "https") {
        return Err(Error::Usage(format!(
            "{OUT_ROLE} {url}: http(s):// is read only; write to s3://, gs://, az:// or a local \
             file"
        )));
    }
    let target = Remote::open(url)?;
    if target.key().is_empty() {
        return Err(Error::Usage(format!(
            "{OUT_ROLE} {url} names a bucket; name an object in it ({url}/result.parquet)"
        )));
    }
    if existing == Existing::Refuse && target.exists_as_object().await? {
        return Err(Error::Usage(format!(
            "{OUT_ROLE} {url} already exists; pass --overwrite to replace it"
        )));
    }
    Ok(())
}

/// How messages name the `--out` file.
const OUT_ROLE: &str = "--out";
/// How messages name standard output, where the result goes without `--out`.
const STANDARD_OUTPUT: &str = "<standard output>";

/// Writes the query's result to `sink` in the chosen format; `target` names `sink` in errors.
/// Returns the number of rows.
pub(crate) async fn write_result<W: Write + Send>(
    frame: datafusion::dataframe::DataFrame,
    options: &QueryOptions,
    sink: W,
    target: &Path,
) -> Result<usize> {
    let format = options.format;
    let what = || "running the query".to_string();
    let writing = || format!("writing the result to {}", target.display());
    let schema = frame.schema().inner().clone();
    let mut stream = frame.execute_stream().await.context(what)?;
    let mut rows = 0;
    match format {
        Format::Table => {
            let mut table = TableWriter::new(&schema, options.max_rows, sink, target);
            while let Some(batch) = stream.next().await {
                let batch = batch.context(what)?;
                rows += batch.num_rows();
                table.write(&batch)?;
            }
            table.finish()?;
        }
        Format::Csv | Format::Tsv => {
            let delimiter = if format == Format::Tsv { b'\t' } else { b',' };
            let mut writer = csv::WriterBuilder::new()
                .with_header(true)
                .with_delimiter(delimiter)
                .build(sink);
            while let Some(batch) = stream.next().await {
                let batch = batch.context(what)?;
                rows += batch.num_rows();
                writer.write(&batch).context(writing)?;
            }
            writer.into_inner().flush().map_err(write_error(target))?;
        }
        Format::Ndjson => {
            let mut writer = LineDelimitedWriter::new(sink);
            while let Some(batch) = stream.next().await {
                let batch = batch.context(what)?;
                refuse_unwritable_values(&batch, rows)?;
                rows += batch.num_rows();
                writer.write(&batch).context(writing)?;
            }
            writer.finish().context(writing)?;
            writer.into_inner().flush().map_err(write_error(target))?;
        }
        Format::Json => {
            // Streamed too: the array's objects are written batch by batch.
            let mut writer = ArrayWriter::new(sink);
            while let Some(batch) = stream.next().await {
                let batch = batch.context(what)?;
                refuse_unwritable_values(&batch, rows)?;
                rows += batch.num_rows();
                writer.write(&batch).context(writing)?;
            }
            writer.finish().context(writing)?;
            let mut sink = writer.into_inner();
            sink.write_all(b"\n").map_err(write_error(target))?;
            sink.flush().map_err(write_error(target))?;
        }
        Format::Parquet => {
            let parquet_error = |e| Error::parquet(target, e);
            let level = ZstdLevel::try_new(3).map_err(parquet_error)?;
            let properties = WriterProperties::builder()
                .set_compression(Compression::ZSTD(level))
                .build();
            let mut writer =
                ArrowWriter::try_new(sink, schema, Some(properties)).map_err(parquet_error)?;
            while let Some(batch) = stream.next().await {
                let batch = batch.context(what)?;
                rows += batch.num_rows();
                writer.write(&batch).map_err(parquet_error)?;
            }
            writer.close().map_err(parquet_error)?;
        }
    }
    Ok(rows)
}

/// Display columns a table cell shows at most; longer values are cut and end in `…`.
const CELL_WIDTH: usize = 64;
/// Rows read before the column widths are fixed; later rows are cut to those widths.
const ROWS_FOR_WIDTHS: usize = 1000;

/// Refuses a value the JSON writers cannot show: they write a date or time they fail to format
/// (a Date64 far beyond any calendar, say) as the string `ERROR: ...`, and the result would look
/// whole. `first_row` is the batch's first row in the result, from 0. Only columns of dates and
/// times, and the nested and dictionary columns that may hold them, are formatted here.
fn refuse_unwritable_values(batch: &RecordBatch, first_row: usize) -> Result<()> {
    fn may_fail(data_type: &DataType) -> bool {
        data_type.is_temporal()
            || data_type.is_nested()
            || matches!(data_type, DataType::Dictionary(..))
    }
    // Errors returned, not shown: nested columns format their children through this too.
    let options = FormatOptions::default().with_display_error(false);
    let schema = batch.schema();
    for (column, field) in batch.columns().iter().zip(schema.fields()) {
        if !may_fail(field.data_type()) {
            continue;
        }
        let formatter = ArrayFormatter::try_new(column.as_ref(), &options)
            .context(|| "formatting the result".into())?;
        let mut scratch = String::new();
        for row in 0..column.len() {
            scratch.clear();
            if let Err(e) = formatter.value(row).write(&mut scratch) {
                return Err(Error::Input(format!(
                    "row {} of the result, column '{}': {e}; JSON cannot hold this value (write \
                     the result as Parquet, or cast the column in the query)",
                    first_row + row + 1,
                    crate::error::echo(field.name())
                )));
            }
        }
    }
    Ok(())
}

/// The table format, streamed: memory holds at most `ROWS_FOR_WIDTHS` rows of cut cells,
/// whatever the size of the values (a column of 50 MB texts prints one line per row).
struct TableWriter<W: Write> {
    sink: W,
    /// Names `sink` in errors: the `--out` file or standard output.
    target: PathBuf,
    header: Vec<String>,
    /// Rows held until the widths are known.
    pending: Vec<Vec<String>>,
    widths: Option<Vec<usize>>,
    /// Rows shown at most (`--maxrows`); the rest are only counted.
    max_rows: usize,
    rows: usize,
}

impl<W: Write> TableWriter<W> {
    fn new(
        schema: &datafusion::arrow::datatypes::Schema,
        max_rows: usize,
        sink: W,
        target: &Path,
    ) -> Self {
        let header = schema.fields().iter().map(|f| cell(f.name())).collect();
        Self {
            sink,
            target: target.to_path_buf(),
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
            .collect::<std::result::Result<Vec<_>, ArrowError>>()
            .context(|| "formatting the result".into())?;
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
            .map_err(write_error(&self.target))?;
        }
        self.sink.flush().map_err(write_error(&self.target))
    }

    fn write_border(&mut self) -> Result<()> {
        let widths = self.widths.as_deref().unwrap_or_default();
        let mut line = String::from("+");
        for width in widths {
            line.push_str(&"-".repeat(width + 2));
            line.push('+');
        }
        writeln!(self.sink, "{line}").map_err(write_error(&self.target))
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
        writeln!(self.sink, "{line}").map_err(write_error(&self.target))
    }
}

/// Standard output that notes when its reader has gone (a pipe closed at its other end), so
/// that the error which then ends the writing can be told from a failure. The formats' writers
/// wrap an IO error in their own, whose kind is lost by the time it reaches the caller.
struct NotingReaderGone<W> {
    inner: W,
    gone: Arc<AtomicBool>,
}

impl<W: Write> NotingReaderGone<W> {
    fn new(inner: W) -> (Self, Arc<AtomicBool>) {
        let gone = Arc::new(AtomicBool::new(false));
        let sink = Self {
            inner,
            gone: Arc::clone(&gone),
        };
        (sink, gone)
    }

    fn note<T>(&self, result: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &result
            && e.kind() == std::io::ErrorKind::BrokenPipe
        {
            self.gone.store(true, Ordering::Relaxed);
        }
        result
    }
}

impl<W: Write> Write for NotingReaderGone<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let result = self.inner.write(bytes);
        self.note(result)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let result = self.inner.flush();
        self.note(result)
    }
}

/// An IO error writing the result to `target` (the `--out` file or standard output).
fn write_error(target: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::io(target, e)
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

/// Registers the output tables of a complete run (or match) and its input as `corpus`. `data`
/// is a local output folder or an output on an object store (read through its manifest).
pub async fn register_outputs(ctx: &SessionContext, data: &Path) -> Result<()> {
    let place = Place::parse(&data.to_string_lossy(), "--data")?;
    if let Some((summary, tables)) = crate::delta::output::open_output(&place).await? {
        // Delta tables, each at the version the run's summary.json records: one run's tables,
        // even while a later run is committing its own.
        for (name, table, version) in tables {
            crate::delta::output::register_table(ctx, &name, &table, version).await?;
        }
        if summary.command == "run" {
            register_run_input(ctx, &summary).await?;
        }
        return Ok(());
    }
    let (summary, tables) = match place {
        Place::Local(dir) => local_output(&dir)?,
        Place::Remote(url) => {
            let output = open_remote_output(&url).await?;
            let summary = Summary::from_json(&output.summary_bytes, &output.summary_place)?;
            (summary, output.tables.into_iter().collect())
        }
    };
    for (table, folder) in tables {
        // A partitioned dedup keeps its partition columns in folder names (dt=.../).
        let partitions = if table == "dedup" {
            let by = &summary.parameters.partition_by;
            by.iter().map(|c| (c.clone(), DataType::Utf8)).collect()
        } else {
            Vec::new()
        };
        let columns: Vec<String> = partitions.iter().map(|(c, _)| c.clone()).collect();
        let read = ctx
            .read_parquet(
                &folder,
                ParquetReadOptions::default().table_partition_cols(partitions),
            )
            .await
            .and_then(|frame| crate::input::hive_nulls_read_as_null(frame, &columns))
            .context(|| format!("reading {folder}"))?;
        ctx.register_table(&table, read.into_view())
            .context(|| format!("reading {folder}"))?;
    }
    if summary.command == "run" {
        register_run_input(ctx, &summary).await?;
    }
    Ok(())
}

/// The summary of a complete output, local or on an object store.
pub async fn output_summary(data: &Path) -> Result<Summary> {
    let place = Place::parse(&data.to_string_lossy(), "--output")?;
    if let Some((summary, _)) = crate::delta::output::open_output(&place).await? {
        return Ok(summary);
    }
    match place {
        Place::Local(dir) => Ok(local_output(&dir)?.0),
        Place::Remote(url) => {
            let output = open_remote_output(&url).await?;
            Summary::from_json(&output.summary_bytes, &output.summary_place)
        }
    }
}

/// The folder (or prefix) that holds an output's summary.json: the output itself, or on an
/// object store the committed run's own prefix, so a file written there goes with that run.
pub async fn summary_folder(data: &Path) -> Result<Place> {
    let place = Place::parse(&data.to_string_lossy(), "--output")?;
    if crate::delta::output::open_output(&place).await?.is_some() {
        return Ok(place);
    }
    match &place {
        Place::Local(dir) => {
            local_output(dir)?;
            Ok(place)
        }
        Place::Remote(url) => {
            let output = open_remote_output(url).await?;
            let summary = &output.summary_place;
            let folder = summary
                .strip_suffix(SUMMARY_FILE)
                .map(|s| s.trim_end_matches('/'))
                .unwrap_or(summary);
            Place::parse(folder, "--output")
        }
    }
}

/// A local output's summary and the folders of the tables it holds.
fn local_output(data: &Path) -> Result<(Summary, Vec<(String, String)>)> {
    if !data.exists() {
        return Err(Error::Input(format!(
            "{}: no such folder (the --output of a neardup run)",
            data.display()
        )));
    }
    if !is_output_dir(data) {
        return Err(Error::Input(format!(
            "{} is not a complete neardup output (no _SUCCESS and summary.json)",
            data.display()
        )));
    }
    let summary = Summary::read(&data.join(SUMMARY_FILE))?;
    let tables = OUTPUT_TABLES
        .into_iter()
        .map(|table| (table, data.join(table)))
        .filter(|(_, dir)| dir.is_dir())
        .map(|(table, dir)| (table.to_string(), format!("{}/", dir.display())))
        .collect();
    Ok((summary, tables))
}

/// The run's input as `corpus`, if it is still where the run read it (local inputs are
/// checked; a URL is read as it is).
async fn register_run_input(ctx: &SessionContext, summary: &Summary) -> Result<()> {
    let mut frames = Vec::new();
    for (number, input) in summary.inputs.iter().enumerate() {
        if let Place::Local(file) = Place::parse(input, "input")?
            && !file.is_file()
        {
            crate::to_stderr!(
                "neardup: warning: table corpus not available: input {} is gone",
                file.display()
            );
            return Ok(());
        }
        // As the run read it: a name that does not say its format was given --input-format.
        let given = summary
            .input_formats
            .get(number)
            .and_then(|f| f.parse().ok());
        let format = FileFormat::of_file(input, given);
        match format.read(ctx, input).await {
            Ok(frame) => frames.push(frame),
            // The other tables do not need it: a query of them still runs.
            Err(e) => {
                crate::to_stderr!(
                    "neardup: warning: table corpus not available: reading the run's input \
                     {input} as {}: {}",
                    format.format,
                    e.strip_backtrace()
                );
                return Ok(());
            }
        }
    }
    let Some(mut corpus) = frames.pop() else {
        return Ok(());
    };
    while let Some(frame) = frames.pop() {
        corpus = frame
            .union(corpus)
            .context(|| "reading the run's input".into())?;
    }
    ctx.register_table("corpus", corpus.into_view())
        .context(|| "registering corpus".into())?;
    Ok(())
}
