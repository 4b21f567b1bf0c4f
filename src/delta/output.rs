//! The outputs as Delta tables (`--output-format delta`): `signatures`, `pairs`, `groups` and
//! `dedup` are Delta tables under `--output`, and `summary.json` beside them records the version
//! of each that the run wrote.
//!
//! ```text
//! s3://lake/neardup/crawl/summary.json            written last: the versions this run wrote
//! s3://lake/neardup/crawl/groups/_delta_log/...   one commit per table per run
//! s3://lake/neardup/crawl/_neardup_work/run-<id>/ the run's tables until they are committed
//! ```
//!
//! The job writes its tables as usual, into a work folder of its own under the output; at the
//! end each table is written into its Delta table in one commit (delta-rs's writer: Parquet
//! files with column statistics, then the log entry), and summary.json is written last. A
//! table's readers see its previous version or the new one, whole. A commit that fails, and
//! Ctrl-C during the commits (the interrupt handler leaves it to them), put the tables already
//! committed back at their earlier versions. A run killed between two commits leaves some
//! tables at their new version and summary.json at the old ones; the next run says which, and
//! with `--append` first restores them to the versions summary.json names, so that no batch is
//! appended twice.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use deltalake_core::DeltaTable;
use deltalake_core::kernel::transaction::CommitProperties;
use deltalake_core::operations::write::{SchemaMode, WriteBuilder};
use deltalake_core::protocol::SaveMode;
use serde::{Deserialize, Serialize};

use crate::delta::append;
use crate::delta::types::{from_storable, to_storable};
use crate::delta::{At, delta_error, open, version_of};
use crate::engine::staging::{OUTPUT_TABLES, SUMMARY_FILE};
use crate::error::{Error, QueryContext, Result};
use crate::job::summary::Summary;
use crate::storage::{Place, Remote};

/// The folder under the output where runs write their tables before the commits.
pub const WORK_FOLDER: &str = "_neardup_work";

/// How the job writes its outputs (`--output-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// Parquet folders, committed whole (a rename, or a manifest on a store).
    #[default]
    Parquet,
    /// Delta Lake tables, one commit per table.
    Delta,
}

/// What a run does to Delta tables that exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The tables must not exist yet.
    Create,
    /// An overwrite commit: the new version holds only this run's rows; earlier versions stay
    /// readable until vacuumed.
    Overwrite,
    /// This run's rows are added to the tables (`--append`).
    Append,
}

/// A table's version after this run's commit, and the version before (`None`: created).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableVersion {
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<u64>,
}

/// A run's place under a Delta output, until its tables are committed.
#[derive(Debug)]
pub struct DeltaStaging {
    output: Place,
    run: String,
    mode: Mode,
    /// summary.json as the previous run left it, to put back if this run is rolled back.
    previous_summary: Option<Vec<u8>>,
    /// The index batch, recorded in each commit's `commitInfo`.
    batch: Option<u64>,
    /// The tables' versions summary.json records (none for a new output).
    recorded: BTreeMap<String, TableVersion>,
    /// The run made the output's (local) folder, which a failed run removes again.
    made_output_folder: bool,
}

/// The Delta tables a run committed, which a failure after them (adding the batch to the
/// index) restores to their previous versions.
#[derive(Debug, Default)]
pub struct Committed {
    pub output: Option<Place>,
    pub versions: BTreeMap<String, TableVersion>,
    pub previous_summary: Option<Vec<u8>>,
}

impl DeltaStaging {
    /// Checks `output` can take the Delta tables of `command` (`run` or `match`) in `mode` and
    /// picks this run's work folder.
    pub async fn create(output: &Place, mode: Mode, command: &str) -> Result<Self> {
        if let Place::Remote(url) = output
            && matches!(url.scheme(), "http" | "https")
        {
            return Err(Error::Usage(format!(
                "--output {url}: http(s):// is read only; write to s3://, gs://, az:// or a \
                 local folder"
            )));
        }
        let previous_summary = read_small(&output.join(SUMMARY_FILE)).await?;
        let mut recorded = BTreeMap::new();
        if let Some(bytes) = &previous_summary {
            let place = output.join(SUMMARY_FILE).to_string();
            let summary = Summary::from_json(bytes, &place)?;
            let Some(tables) = summary.delta_tables else {
                return Err(Error::Usage(format!(
                    "--output {output} holds a neardup output of Parquet tables; Delta tables \
                     go to another --output"
                )));
            };
            if mode == Mode::Create {
                return Err(Error::Usage(format!(
                    "--output {output} already holds neardup's Delta tables; pass --overwrite \
                     (an overwrite commit: earlier versions stay readable) or --append (add \
                     this run's rows)"
                )));
            }
            if summary.command != command {
                // `match` writes pairs and groups only: the other tables would be left behind,
                // from another run.
                return Err(Error::Usage(format!(
                    "--output {output} holds the Delta tables of `neardup {}`; those of \
                     `neardup {command}` go to another --output",
                    summary.command
                )));
            }
            recorded = tables;
        } else {
            refuse_foreign(output).await?;
        }
        check_versions(output, &recorded, mode).await?;
        remove_work(output).await;
        let made_output_folder = matches!(output, Place::Local(path) if !path.exists());
        let staging = Self {
            output: output.clone(),
            run: format!("run-{}", crate::engine::commit::run_id()),
            mode,
            previous_summary,
            batch: None,
            recorded,
            made_output_folder,
        };
        if let Place::Local(work) = staging.place() {
            std::fs::create_dir_all(&work).map_err(|e| Error::io(&work, e))?;
            crate::engine::staging::register_live(&work);
        }
        Ok(staging)
    }

    /// Records the index batch this run is, so that an append of it is made only once.
    pub fn set_batch(&mut self, batch: u64) {
        self.batch = Some(batch);
    }

    /// An append adds its rows as they are: ids `signatures` already holds are refused before
    /// any work (`crate::delta::append`). With an index, which refuses the ids it holds, these
    /// are a batch committed to the tables but never added to the index.
    pub async fn refuse_ids_already_there(
        &self,
        ctx: &SessionContext,
        id_type: &DataType,
        bindings: &crate::engine::sql::Bindings,
    ) -> Result<()> {
        if self.mode != Mode::Append {
            return Ok(());
        }
        let Some(signatures) = self.recorded.get("signatures") else {
            return Ok(());
        };
        let place = self.output.join("signatures");
        let version = signatures.version;
        let indexed = self.batch.is_some();
        append::refuse_ids_already_there(ctx, &place, version, id_type, indexed, bindings).await
    }

    /// Where the job writes its tables.
    pub fn place(&self) -> Place {
        self.output.join(WORK_FOLDER).join(&self.run)
    }

    pub fn target(&self) -> &Place {
        &self.output
    }

    /// Writes each table the job wrote into its Delta table, one commit each, in the order of
    /// `OUTPUT_TABLES`. A failure restores the tables committed before it.
    pub async fn commit_tables(
        &self,
        partition_by: &[String],
    ) -> Result<BTreeMap<String, TableVersion>> {
        let ctx = crate::engine::session::session_context()?;
        let mut versions = BTreeMap::new();
        for table in OUTPUT_TABLES {
            self.stop_if_interrupted(&versions).await?;
            let staged = self.place().join(table);
            let staged_files = match has_files(&staged).await {
                Ok(any) => any,
                Err(e) => {
                    self.put_back(&versions).await;
                    return Err(e);
                }
            };
            if !staged_files {
                continue;
            }
            let partitions: &[String] = if table == "dedup" { partition_by } else { &[] };
            match self.commit_table(&ctx, table, &staged, partitions).await {
                Ok(version) => {
                    versions.insert(table.to_string(), version);
                    stop_for_tests(table);
                }
                Err(e) => {
                    self.put_back(&versions).await;
                    return Err(e);
                }
            }
        }
        self.stop_if_interrupted(&versions).await?;
        Ok(versions)
    }

    /// The tables this run committed (`versions`) back at their earlier versions, and its
    /// output's summary.json as it was.
    async fn put_back(&self, versions: &BTreeMap<String, TableVersion>) {
        put_back(&self.output, versions, self.previous_summary.as_deref()).await;
    }

    /// After Ctrl-C (which the handler leaves to the commits while they run): the tables
    /// committed so far are put back, and the commits stop.
    async fn stop_if_interrupted(&self, versions: &BTreeMap<String, TableVersion>) -> Result<()> {
        if !crate::engine::staging::interrupted() {
            return Ok(());
        }
        self.put_back(versions).await;
        Err(Error::Input(
            "interrupted while the Delta tables were committed".into(),
        ))
    }

    async fn commit_table(
        &self,
        ctx: &SessionContext,
        name: &str,
        staged: &Place,
        partitions: &[String],
    ) -> Result<TableVersion> {
        let place = self.output.join(name);
        let existing = open(&place, &At::Latest).await?;
        let previous = existing.as_ref().map(version_of);
        let options = ParquetReadOptions::default().table_partition_cols(
            partitions
                .iter()
                .map(|c| (c.clone(), DataType::Utf8))
                .collect(),
        );
        let frame = ctx
            .read_parquet(staged.folder(), options)
            .await
            .and_then(|frame| crate::input::hive_nulls_read_as_null(frame, partitions))
            .context(|| format!("reading the run's {name} table at {staged}"))?;
        let frame = match (&existing, self.mode, self.batch) {
            // Without an index each run numbers its groups from 1.
            (Some(table), Mode::Append, None) if name == "groups" => {
                append::group_ids_after(ctx, table, frame, &place).await?
            }
            _ => frame,
        };
        let frame = to_storable(frame)?;
        refuse_dates_beyond_statistics(&frame, &place).await?;
        if let (Some(table), Mode::Append) = (&existing, self.mode) {
            check_same_columns(table, &frame, &place)?;
        }
        let log_store = match &existing {
            Some(table) => table.log_store(),
            None => crate::delta::log_store(&place)?,
        };
        let snapshot = match &existing {
            Some(table) => Some(
                table
                    .snapshot()
                    .map_err(|e| delta_error(&place, e))?
                    .snapshot()
                    .clone(),
            ),
            None => None,
        };
        let save_mode = match self.mode {
            Mode::Append => SaveMode::Append,
            Mode::Create | Mode::Overwrite => SaveMode::Overwrite,
        };
        let mut metadata: Vec<(String, serde_json::Value)> = vec![(
            "neardup_run".to_string(),
            serde_json::Value::from(self.run.clone()),
        )];
        if let Some(batch) = self.batch {
            metadata.push(("neardup_batch".to_string(), serde_json::Value::from(batch)));
        }
        let mut writer = WriteBuilder::new(log_store, snapshot)
            .with_input_plan(frame.into_unoptimized_plan())
            .with_session_state(Arc::new(delta_planning(ctx)))
            .with_save_mode(save_mode)
            .with_writer_properties(
                WriterProperties::builder()
                    .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).unwrap_or_default()))
                    .build(),
            )
            .with_commit_properties(CommitProperties::default().with_metadata(metadata));
        if !partitions.is_empty() {
            writer = writer.with_partition_columns(partitions.iter().cloned());
        }
        if save_mode == SaveMode::Overwrite {
            // A run with other settings (--bits 128, --partition-by) replaces the schema too.
            writer = writer.with_schema_mode(SchemaMode::Overwrite);
        }
        // Nothing there before this write: a folder of someone's own named like the table
        // is never removed.
        let new_folder = existing.is_none() && top_level_names(&place).await?.is_empty();
        let table = match writer.await {
            Ok(table) => table,
            Err(e) => {
                // The files written before the failure are in no commit: a table this run was
                // creating in a new folder is removed with them (an existing one keeps them
                // unreferenced, as any failed Delta write does, until a vacuum).
                if new_folder {
                    let _ = remove_place(&place).await;
                }
                return Err(delta_error(&place, e));
            }
        };
        Ok(TableVersion {
            version: version_of(&table),
            previous,
        })
    }

    /// Writes summary.json beside the tables, whole (a rename, or one PUT).
    pub async fn write_summary(&self, bytes: Vec<u8>) -> Result<()> {
        write_small(&self.output.join(SUMMARY_FILE), bytes).await
    }

    /// Removes the run's work folder once its tables are committed (`versions`), or the run
    /// failed (none).
    pub async fn finish(self, versions: BTreeMap<String, TableVersion>) -> Committed {
        let _ = remove_place(&self.place()).await;
        if let Place::Local(work) = self.place() {
            crate::engine::staging::forget_live(&work);
        }
        remove_empty_work_folder(&self.output);
        // A run that failed before its first commit leaves the folder it made empty.
        if let (true, Place::Local(path)) = (self.made_output_folder, &self.output) {
            let _ = std::fs::remove_dir(path);
        }
        Committed {
            output: Some(self.output),
            versions,
            previous_summary: self.previous_summary,
        }
    }
}

impl Committed {
    /// Puts the tables back at the versions they had before the run, and summary.json as it
    /// was: the run can then be repeated as it was.
    pub async fn roll_back(&self) {
        if let Some(output) = &self.output {
            put_back(output, &self.versions, self.previous_summary.as_deref()).await;
        }
    }
}

/// Puts the tables a run committed (`versions`) back at their earlier versions, and the
/// summary.json before the run (`previous`) back in place with each restored table at the
/// version of its restore (a restore is a commit of its own), so that the next run finds the
/// tables where the summary says.
async fn put_back(
    output: &Place,
    versions: &BTreeMap<String, TableVersion>,
    previous: Option<&[u8]>,
) {
    let restored = match restore(output, versions).await {
        Ok(restored) => restored,
        Err(e) => {
            crate::to_stderr!(
                "neardup: warning: the tables of {output} could not all be restored ({e}); the \
                 next run over it names them"
            );
            return;
        }
    };
    let place = output.join(SUMMARY_FILE);
    let previous = previous.and_then(|bytes| Summary::from_json(bytes, &place.to_string()).ok());
    let _ = match previous {
        Some(mut summary) => {
            if let Some(tables) = &mut summary.delta_tables {
                for (name, version) in &restored {
                    if let Some(entry) = tables.get_mut(name) {
                        entry.version = *version;
                    }
                }
            }
            match serde_json::to_string_pretty(&summary) {
                Ok(json) => write_small(&place, (json + "\n").into_bytes()).await,
                Err(_) => Ok(()),
            }
        }
        None => remove_place(&place).await,
    };
}

/// Days from 1970-01-01 to the first and the last date Delta's statistics can hold (chrono's
/// `NaiveDate`, years -262143 to 262142): delta-rs's writer panics on a file whose smallest or
/// largest date is beyond them, after writing it.
const STATISTICS_DAYS: (i64, i64) = (-96_465_292, 95_026_236);

/// Refuses a date column of `frame` (the table for `place`) with a value beyond
/// `STATISTICS_DAYS`, naming the column and the value, before anything is written. One scan
/// takes the smallest and largest day of every date column.
async fn refuse_dates_beyond_statistics(
    frame: &datafusion::prelude::DataFrame,
    place: &Place,
) -> Result<()> {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;
    use datafusion::functions_aggregate::expr_fn::{max, min};
    use datafusion::prelude::{cast, ident, lit};
    let schema = frame.schema().as_arrow().clone();
    let mut names = Vec::new();
    let mut bounds = Vec::new();
    for field in schema.fields() {
        // Days since 1970 as Int64; a Date64 is written as the Date32 of its day.
        let days = cast(ident(field.name()), DataType::Int64);
        let days = match field.data_type() {
            DataType::Date32 => days,
            DataType::Date64 => days / lit(86_400_000_i64),
            _ => continue,
        };
        names.push(field.name().as_str());
        bounds.push(min(days.clone()));
        bounds.push(max(days));
    }
    if names.is_empty() {
        return Ok(());
    }
    let what = || format!("checking the dates of {place}");
    let batches = frame
        .clone()
        .aggregate(vec![], bounds)
        .context(what)?
        .collect()
        .await
        .context(what)?;
    for batch in &batches {
        for (at, column) in batch.columns().iter().enumerate() {
            let Some(days) = column.as_primitive_opt::<Int64Type>() else {
                continue;
            };
            for day in days.iter().flatten() {
                if !(STATISTICS_DAYS.0..=STATISTICS_DAYS.1).contains(&day) {
                    return Err(Error::Input(format!(
                        "Delta table {place}: column '{}' holds a date {day} days from \
                         1970-01-01, beyond the years -262143 to 262142 that Delta's file \
                         statistics can hold; write Parquet tables (--output-format parquet), \
                         or leave such rows out",
                        crate::error::echo(names[at / 2])
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The job's session with delta-rs's planner, which plans the writer's own plan nodes.
fn delta_planning(ctx: &SessionContext) -> datafusion::execution::SessionState {
    datafusion::execution::SessionStateBuilder::new_from_existing(ctx.state())
        .with_query_planner(deltalake_core::delta_datafusion::planner::DeltaPlanner::new())
        .build()
}

/// `NEARDUP_STOP_AFTER_DELTA_COMMIT=<table>` ends the process, as `kill -9` would, right after
/// that table's commit: a test's way to stop a run between two commits.
/// `NEARDUP_PAUSE_AFTER_DELTA_COMMIT=<table>` holds the run there for up to a minute, or until
/// Ctrl-C, so that a test can interrupt it between two commits.
fn stop_for_tests(table: &str) {
    if std::env::var_os("NEARDUP_STOP_AFTER_DELTA_COMMIT").is_some_and(|t| t == table) {
        std::process::abort();
    }
    if std::env::var_os("NEARDUP_PAUSE_AFTER_DELTA_COMMIT").is_some_and(|t| t == table) {
        crate::to_stderr!("neardup: pausing after the commit of {table}");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !crate::engine::staging::interrupted() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Restores each table committed by a run to the version before it, and removes a table the
/// run created. Returns each restored table's new version (a restore is a commit of its own).
async fn restore(
    output: &Place,
    versions: &BTreeMap<String, TableVersion>,
) -> Result<BTreeMap<String, u64>> {
    let mut restored = BTreeMap::new();
    for (name, version) in versions {
        let place = output.join(name);
        let Some(previous) = version.previous else {
            remove_place(&place).await?;
            crate::to_stderr!("neardup: removed {place}, which the run had created");
            continue;
        };
        let Some(table) = open(&place, &At::Latest).await? else {
            continue;
        };
        let (table, _) = table
            .restore()
            .with_version_to_restore(previous)
            .await
            .map_err(|e| delta_error(&place, e))?;
        crate::to_stderr!("neardup: restored {place} to the rows of version {previous}");
        restored.insert(name.clone(), version_of(&table));
    }
    Ok(restored)
}

/// Tables newer than summary.json says were committed by a run that stopped before writing
/// it. With `--append` they are restored first (else the next batch would come on top of a
/// half-written one); an overwrite replaces them anyway. A table no summary records cannot be
/// restored to anything and is refused for `--append`.
async fn check_versions(
    output: &Place,
    recorded: &BTreeMap<String, TableVersion>,
    mode: Mode,
) -> Result<()> {
    let mut newer = BTreeMap::new();
    for name in OUTPUT_TABLES {
        let place = output.join(name);
        let Some(table) = open(&place, &At::Latest).await? else {
            continue;
        };
        let latest = version_of(&table);
        match recorded.get(name) {
            Some(v) if v.version == latest => {}
            Some(v) => {
                crate::to_stderr!(
                    "neardup: {place} is at version {latest}, but {SUMMARY_FILE} records \
                     version {}: a run stopped during its commits",
                    v.version
                );
                newer.insert(
                    name.to_string(),
                    TableVersion {
                        version: latest,
                        previous: Some(v.version),
                    },
                );
            }
            None if mode == Mode::Append => {
                return Err(Error::Input(format!(
                    "{place} is a Delta table (version {latest}) that no {SUMMARY_FILE} of \
                     {output} records: a run stopped during its commits. Run once with \
                     --overwrite instead of --append"
                )));
            }
            None => crate::to_stderr!(
                "neardup: {place} is at version {latest}, which no {SUMMARY_FILE} records: a \
                 run stopped during its commits; this run's overwrite replaces it"
            ),
        }
    }
    if mode == Mode::Append && !newer.is_empty() {
        restore(output, &newer).await?;
    }
    Ok(())
}

/// An append must bring the table's columns: other columns are another table. (Types are
/// checked by delta-rs's writer, which knows how Delta reads each back.)
fn check_same_columns(
    table: &DeltaTable,
    frame: &datafusion::prelude::DataFrame,
    place: &Place,
) -> Result<()> {
    let state = table.snapshot().map_err(|e| delta_error(place, e))?;
    let names = |fields: Vec<String>| {
        let mut sorted = fields;
        sorted.sort();
        sorted
    };
    let have = names(
        state
            .snapshot()
            .arrow_schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect(),
    );
    let want = names(
        frame
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect(),
    );
    if have != want {
        return Err(Error::Usage(format!(
            "--append: {place} has columns ({}) but this run writes ({}); append runs with the \
             same settings, or pass --overwrite",
            have.join(", "),
            want.join(", ")
        )));
    }
    Ok(())
}

/// A Delta output: its summary, and each table's name, place and recorded version.
pub type DeltaOutput = (Summary, Vec<(String, Place, u64)>);

/// The Delta output at `output`, or `None` when it is not one: no summary.json, one that is not
/// neardup's or names no Delta tables, or (on a store) one that cannot be read, as a store
/// answers 403 for a missing key to a caller who cannot list.
pub async fn open_output(output: &Place) -> Result<Option<DeltaOutput>> {
    if let Place::Local(path) = output
        && !path.is_dir()
    {
        return Ok(None);
    }
    let summary_place = output.join(SUMMARY_FILE);
    let bytes = match read_small(&summary_place).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(_) if output.is_remote() => return Ok(None),
        Err(e) => return Err(e),
    };
    let Ok(summary) = Summary::from_json(&bytes, &summary_place.to_string()) else {
        return Ok(None);
    };
    let Some(tables) = &summary.delta_tables else {
        return Ok(None);
    };
    let tables = tables
        .iter()
        .map(|(name, v)| (name.clone(), output.join(name), v.version))
        .collect();
    Ok(Some((summary, tables)))
}

/// Registers the Delta table at `place`, at `version`, as `name`, with its columns back at the
/// types of the Parquet outputs.
pub async fn register_table(
    ctx: &SessionContext,
    name: &str,
    place: &Place,
    version: u64,
) -> Result<()> {
    let Some(table) = open(place, &At::Version(version)).await? else {
        return Err(Error::Input(format!(
            "{place}: the Delta table summary.json names is gone"
        )));
    };
    let provider = table
        .table_provider()
        .await
        .context(|| format!("reading the Delta table {place}"))?;
    let frame = ctx
        .read_table(provider)
        .context(|| format!("reading the Delta table {place}"))?;
    let frame = from_storable(frame)?;
    ctx.register_table(name, frame.into_view())
        .context(|| format!("registering {name}"))?;
    Ok(())
}

/// Refuses an output that holds something other than Delta tables neardup may have left.
async fn refuse_foreign(output: &Place) -> Result<()> {
    let names = top_level_names(output).await?;
    let mut foreign: Vec<String> = names
        .iter()
        .filter(|n| !OUTPUT_TABLES.contains(&n.as_str()) && n.as_str() != WORK_FOLDER)
        .cloned()
        .collect();
    // A folder named as a table is the Delta writer's: a run stopped before its first commit
    // leaves data files and partition folders there, which the next run's commit leaves out of
    // the table. Anything else is someone's, which the table would be written around.
    for table in OUTPUT_TABLES {
        if !names.iter().any(|name| name == table) {
            continue;
        }
        let place = output.join(table);
        if let Place::Local(path) = &place
            && !path.is_dir()
        {
            foreign.push(table.to_string());
            continue;
        }
        if open(&place, &At::Latest).await?.is_some() {
            continue;
        }
        let inside = top_level_names(&place).await?;
        foreign.extend(
            inside
                .iter()
                .filter(|name| !written_by_delta(name))
                .map(|name| format!("{table}/{name}")),
        );
    }
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.truncate(5);
    Err(Error::Usage(format!(
        "refusing to write Delta tables to {output}: it is not a neardup output (no \
         {SUMMARY_FILE}) and holds {}; choose another --output",
        foreign.join(", ")
    )))
}

/// Whether a name inside a table's folder is one the Delta writer makes: its log, a data file,
/// a partition's folder.
fn written_by_delta(name: &str) -> bool {
    name == "_delta_log"
        || (name.starts_with("part-") && name.ends_with(".parquet"))
        || name.contains('=')
}

async fn top_level_names(place: &Place) -> Result<Vec<String>> {
    match place {
        Place::Local(path) => {
            if !path.exists() {
                return Ok(Vec::new());
            }
            if !path.is_dir() {
                return Err(Error::Usage(format!(
                    "--output {} is a file, not a folder",
                    path.display()
                )));
            }
            let entries = std::fs::read_dir(path).map_err(|e| Error::io(path, e))?;
            let mut names = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| Error::io(path, e))?;
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
            names.sort();
            Ok(names)
        }
        Place::Remote(url) => crate::engine::commit::top_level_names(&Remote::open(url)?).await,
    }
}

/// Whether the run wrote any file under `place`.
async fn has_files(place: &Place) -> Result<bool> {
    match place {
        Place::Local(path) => Ok(path.is_dir()),
        Place::Remote(url) => Ok(!Remote::open(url)?.list().await?.is_empty()),
    }
}

/// Removes what runs that were killed left in the work folder. One writer per output at a
/// time, as for every output.
async fn remove_work(output: &Place) {
    let _ = remove_place(&output.join(WORK_FOLDER)).await;
}

fn remove_empty_work_folder(output: &Place) {
    if let Place::Local(path) = output {
        let _ = std::fs::remove_dir(path.join(WORK_FOLDER));
    }
}

/// Removes a local file or folder, or every object under a store prefix and the object itself.
pub(crate) async fn remove_place(place: &Place) -> Result<()> {
    match place {
        Place::Local(path) if path.is_dir() => {
            std::fs::remove_dir_all(path).map_err(|e| Error::io(path, e))
        }
        Place::Local(path) if path.exists() => {
            std::fs::remove_file(path).map_err(|e| Error::io(path, e))
        }
        Place::Local(_) => Ok(()),
        Place::Remote(url) => {
            let remote = Remote::open(url)?;
            remote.remove_all().await?;
            remote.delete().await
        }
    }
}

/// A small file (summary.json) at a local path or on a store; `None` when absent.
async fn read_small(place: &Place) -> Result<Option<Vec<u8>>> {
    match place {
        Place::Local(path) => match std::fs::read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path, e)),
        },
        Place::Remote(url) => Remote::open(url)?.read().await,
    }
}

async fn write_small(place: &Place, bytes: Vec<u8>) -> Result<()> {
    match place {
        Place::Local(path) => crate::engine::partial_file::write_atomically(path, &bytes),
        Place::Remote(url) => Remote::open(url)?.write(bytes).await,
    }
}
