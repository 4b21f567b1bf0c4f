//! The signature index (`--index DIR`): the documents and group assignments of earlier batches,
//! so that a new batch is matched against everything seen before without signing it again.
//!
//! Layout (docs/INDEX.md is the reference for other tools):
//!
//! ```text
//! index.json                      settings every batch must share (bits, k, features, id type)
//! batch=000001/batch.json         what the batch read and the next free group id
//! batch=000001/documents/*.parquet  id, simhash, bucket1..bucketN, batch, input_order
//! batch=000001/group_log/*.parquet  id, group_id, representative_id, assigned_batch
//! batch=000001/_SUCCESS
//! committed/batch=000001          written after the batch's folder: the index knows its batches
//! ```
//!
//! On a local disk a batch is written into a staging folder beside its final name and renamed
//! into place as its last step (`local`); on an object store, which has no rename, it is
//! written under a prefix of its own and committed by a conditional write of its marker
//! (`remote`). Either way a failed or interrupted run leaves the index as it was, and of two
//! runs that race for the same batch number exactly one lands.

pub mod batch;
mod local;
mod remote;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::MemTable;
use datafusion::common::ScalarValue;
use datafusion::prelude::{ParquetReadOptions, SessionContext, lit};
use serde::{Deserialize, Serialize};

use crate::engine::staging::StagingDir;
use crate::error::{Error, QueryContext, Result};
use crate::fingerprint::Width;
use crate::storage::{Place, Remote};

pub const FORMAT: &str = "neardup-index";
pub const VERSION: u32 = 1;
pub const META_FILE: &str = "index.json";
pub const BATCH_FILE: &str = "batch.json";
/// The folders of a batch, one table each.
pub const DOCUMENTS_DIR: &str = "documents";
pub const GROUP_LOG_DIR: &str = "group_log";
/// One empty file per committed batch (`committed/batch=000001`), written after its folder.
pub const COMMITTED_DIR: &str = "committed";

/// The settings every batch of an index shares: pairs and groups are comparable across batches
/// only when the fingerprints and k are.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IndexMeta {
    pub format: String,
    pub version: u32,
    pub fingerprint_bits: u32,
    pub k: u32,
    /// The canonical `--features` string (or `fingerprints given` for `neardup match`).
    pub features: String,
    /// Arrow type of the `id` column, as Arrow prints it (`Int64`, `Utf8`, ...).
    pub id_type: String,
    /// The files the features read (`idf=`, `stop_words=`), each with the digest of its content
    /// (`crate::digest`): an edited file fingerprints differently under the same path.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub feature_files: BTreeMap<String, String>,
    /// The `--verify` threshold the batches' candidate pairs were checked with; absent for
    /// `--verify off` (and for indexes built before documents kept a sketch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<f64>,
}

impl IndexMeta {
    pub fn new(
        fingerprint_bits: u32,
        k: u32,
        features: &str,
        id_type: &DataType,
        feature_files: BTreeMap<String, String>,
        verify: Option<f64>,
    ) -> Self {
        Self {
            format: FORMAT.into(),
            version: VERSION,
            fingerprint_bits,
            k,
            features: features.into(),
            id_type: id_type.to_string(),
            feature_files,
            verify,
        }
    }

    /// The settings of the index at `place`, if there is one, for a run's defaults: a run that
    /// names neither `--k` nor `--verify` takes the index's.
    pub async fn of_existing(place: &Place) -> Result<Option<Self>> {
        match place {
            Place::Local(dir) => {
                let path = dir.join(META_FILE);
                if !path.is_file() {
                    return Ok(None);
                }
                local::read_json(&path).map(Some)
            }
            Place::Remote(url) => {
                let file = Remote::open(url)?.child(META_FILE);
                match file.read().await? {
                    Some(bytes) => parse_json(&bytes, file.url().as_str()).map(Some),
                    None => Ok(None),
                }
            }
        }
    }
}

/// The largest group id an index gives out: 2^62, beyond what a run's group numbers
/// (one per document at most) could reach, so adding a batch's never wraps.
pub(crate) const LARGEST_GROUP_ID: u64 = 1 << 62;

/// What one batch added.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BatchMeta {
    pub batch: u64,
    pub neardup_version: String,
    /// Absolute paths of the files the batch read, in input order.
    pub inputs: Vec<String>,
    pub documents: u64,
    /// Group ids from here on are free (group ids are never reused).
    pub next_group_id: u64,
    /// Seconds since 1970 when the batch was committed.
    pub committed_at: u64,
}

/// An index as found: its settings and committed batches (none for a new index).
#[derive(Debug, Clone)]
pub struct Index {
    /// The index folder (an absolute path) or its URL on an object store.
    pub place: Place,
    pub meta: Option<IndexMeta>,
    /// Committed batches in order, each with its folder relative to `place` (`batch=000001`
    /// locally, `batch=000001/run-<id>` on a store).
    pub batches: Vec<(BatchMeta, String)>,
    /// On a store: the keys under the index, relative to it, as listed when it was opened (the
    /// tables' files are found here rather than with a listing per batch).
    listed: Vec<String>,
}

/// Where a batch is written until it is committed.
#[derive(Debug)]
pub enum BatchStaging {
    /// A staging folder renamed into place by the commit.
    Local(StagingDir),
    /// The batch's own prefix on the store, `batch=000001/run-<id>`, relative to the index.
    Remote(String),
}

impl Index {
    /// Reads the index at `place`. A folder or prefix that does not exist (or is empty) is a
    /// new index, which only `--update-index` may create.
    pub async fn open(place: &Place, update: bool) -> Result<Self> {
        match place {
            Place::Local(dir) => local::open(dir, update),
            Place::Remote(url) => remote::open(url, update).await,
        }
    }

    fn new_index(place: Place) -> Self {
        Self {
            place,
            meta: None,
            batches: Vec::new(),
            listed: Vec::new(),
        }
    }

    /// Refuses settings this neardup cannot read.
    fn check_format(meta: &IndexMeta, file: &str) -> Result<()> {
        if meta.format != FORMAT || meta.version != VERSION {
            return Err(Error::Input(format!(
                "{file}: format {} version {} is not one this neardup reads ({FORMAT} version \
                 {VERSION})",
                meta.format, meta.version
            )));
        }
        Ok(())
    }

    /// The error for a batch the index had and no longer holds whole.
    fn missing(&self, number: u64, why: &str) -> Error {
        Error::Input(format!(
            "--index {}: batch {number} is missing: {} {why}; the index would silently match \
             against less than it holds. Restore the folder (from a backup or the run that \
             wrote it), or start a new index",
            self.place,
            self.batch_place(number)
        ))
    }

    /// Batches are numbered 1, 2, ... without gaps: a gap is a batch that was removed. Their
    /// `next_group_id`s never go down and stay far from u64's end, where the next batch's group
    /// ids would wrap round onto older ones.
    fn check_no_gaps(&self, why: &str) -> Result<()> {
        let mut free_from = 1;
        for (expected, (batch, _)) in (1..).zip(&self.batches) {
            if batch.batch != expected {
                return Err(self.missing(expected, why));
            }
            if batch.next_group_id < free_from || batch.next_group_id > LARGEST_GROUP_ID {
                return Err(Error::Input(format!(
                    "--index {}: batch {expected} records next_group_id {}, where the batches \
                     before it leave {free_from} free and group ids stay below {LARGEST_GROUP_ID}; \
                     {} was edited: restore it, or start a new index",
                    self.place,
                    batch.next_group_id,
                    self.batch_place(expected)
                )));
            }
            free_from = batch.next_group_id;
        }
        Ok(())
    }

    /// An index that must exist (for `neardup query --index`).
    pub async fn open_existing(place: &Place) -> Result<Self> {
        let index = Self::open(place, true).await?;
        if index.meta.is_none() {
            return Err(Error::Input(format!(
                "--index {}: no index there (no {META_FILE})",
                index.place
            )));
        }
        Ok(index)
    }

    /// Registers the index's tables with the types its settings record, and `index_batches`.
    pub async fn register_for_query(&self, ctx: &SessionContext) -> Result<()> {
        let meta = self
            .meta
            .as_ref()
            .ok_or_else(|| Error::Internal("register_for_query on a new index".into()))?;
        let id_type: DataType = meta.id_type.parse().map_err(|e| {
            Error::Input(format!(
                "{}: id type {} is not an Arrow type: {e}",
                self.place.join(META_FILE),
                meta.id_type
            ))
        })?;
        self.register(ctx, &id_type, meta.fingerprint_bits).await?;
        let batches = &self.batches;
        let schema = Arc::new(Schema::new(vec![
            Field::new("batch", DataType::UInt64, false),
            Field::new("documents", DataType::UInt64, false),
            Field::new("next_group_id", DataType::UInt64, false),
            Field::new("committed_at", DataType::UInt64, false),
            Field::new("inputs", DataType::Utf8, false),
        ]));
        let numbers = |f: fn(&BatchMeta) -> u64| -> ArrayRef {
            Arc::new(UInt64Array::from_iter_values(
                batches.iter().map(|(b, _)| f(b)),
            ))
        };
        let columns = vec![
            numbers(|b| b.batch),
            numbers(|b| b.documents),
            numbers(|b| b.next_group_id),
            numbers(|b| b.committed_at),
            Arc::new(StringArray::from_iter_values(
                batches.iter().map(|(b, _)| b.inputs.join("\n")),
            )) as ArrayRef,
        ];
        let what = || "listing the index's batches".to_string();
        let table = RecordBatch::try_new(Arc::clone(&schema), columns).context(what)?;
        let table = MemTable::try_new(schema, vec![vec![table]]).context(what)?;
        ctx.register_table("index_batches", Arc::new(table))
            .context(what)?;
        Ok(())
    }

    /// Refuses a run whose settings differ from the index's: its pairs and groups would not be
    /// the ones a single run over every batch finds.
    pub fn check_settings(&self, asked: &IndexMeta) -> Result<()> {
        let Some(meta) = &self.meta else {
            return Ok(());
        };
        let mismatch = |what: &str, index: String, run: String| {
            Err(Error::Usage(format!(
                "--index {}: the index was built with {what} {index}, this run has {run}; every \
                 batch of an index must use the same (or start a new index)",
                self.place
            )))
        };
        if meta.fingerprint_bits != asked.fingerprint_bits {
            return mismatch(
                "--bits",
                meta.fingerprint_bits.to_string(),
                asked.fingerprint_bits.to_string(),
            );
        }
        if meta.k != asked.k {
            return mismatch("--k", meta.k.to_string(), asked.k.to_string());
        }
        if meta.verify != asked.verify {
            let shown = |v: Option<f64>| v.map_or("off".to_string(), |t| t.to_string());
            return mismatch("--verify", shown(meta.verify), shown(asked.verify));
        }
        if meta.features != asked.features {
            return mismatch(
                "features",
                format!("'{}'", meta.features),
                format!("'{}'", asked.features),
            );
        }
        if meta.id_type != asked.id_type {
            return mismatch("id type", meta.id_type.clone(), asked.id_type.clone());
        }
        for (file, digest) in &asked.feature_files {
            match meta.feature_files.get(file) {
                Some(recorded) if recorded == digest => {}
                Some(recorded) => {
                    return Err(Error::Usage(format!(
                        "--index {}: the feature file {file} changed since the index was built \
                         (content {recorded} then, {digest} now), so this batch would be \
                         fingerprinted with other weights; restore the file, or start a new index",
                        self.place
                    )));
                }
                None => {
                    return Err(Error::Usage(format!(
                        "--index {}: the index records no content for the feature file {file} \
                         (it was built by an older neardup, which kept only the path), so an \
                         edit since then cannot be ruled out; start a new index",
                        self.place
                    )));
                }
            }
        }
        Ok(())
    }

    /// The number the next batch gets.
    pub fn next_batch(&self) -> u64 {
        self.batches.last().map_or(1, |(batch, _)| batch.batch + 1)
    }

    /// The first group id no batch has used.
    pub fn next_group_id(&self) -> u64 {
        self.batches
            .last()
            .map_or(1, |(batch, _)| batch.next_group_id)
    }

    pub fn documents(&self) -> u64 {
        self.batches.iter().map(|(batch, _)| batch.documents).sum()
    }

    /// Registers `index_documents`, `index_group_log` and the view `index_groups` (each
    /// document's current group). A new index gives empty tables of the right types.
    pub async fn register(
        &self,
        ctx: &SessionContext,
        id_type: &DataType,
        bits: u32,
    ) -> Result<()> {
        let wide = crate::fingerprint::Width::from_bits(bits) == Some(Width::Bits128);
        let fingerprint = if wide {
            DataType::FixedSizeBinary(16)
        } else {
            DataType::UInt64
        };
        let mut document_fields = vec![
            Field::new("id", id_type.clone(), false),
            Field::new("simhash", fingerprint, true),
        ];
        for band in 1..=bits / 16 {
            document_fields.push(Field::new(format!("bucket{band}"), DataType::UInt16, true));
        }
        document_fields.push(Field::new("batch", DataType::Int64, false));
        document_fields.push(Field::new("input_order", DataType::Int64, false));
        // Absent from the files of indexes built before documents kept a sketch: read as NULL.
        document_fields.push(Field::new("sketch", crate::udf::sketch_type(), true));
        let log_fields = vec![
            Field::new("id", id_type.clone(), false),
            Field::new("group_id", DataType::UInt64, false),
            Field::new("representative_id", id_type.clone(), false),
            Field::new("assigned_batch", DataType::Int64, false),
        ];
        self.register_table(ctx, "index_documents", DOCUMENTS_DIR, document_fields)
            .await?;
        self.register_table(ctx, "index_group_log", GROUP_LOG_DIR, log_fields)
            .await?;
        let stage = &crate::engine::stages::INDEX_GROUPS;
        crate::engine::sql::run_stage(ctx, stage, &Default::default()).await
    }

    async fn register_table(
        &self,
        ctx: &SessionContext,
        name: &str,
        folder: &str,
        fields: Vec<Field>,
    ) -> Result<()> {
        let files = self.table_files(folder).await?;
        let what = || format!("reading the index table {name} in {}", self.place);
        if files.is_empty() {
            // A view of no rows, not an in-memory table: a view is part of the plan, which a
            // cluster's scheduler decodes, where a memory table is not sent.
            let columns = fields.iter().map(|field| {
                let null = ScalarValue::try_from(field.data_type())?;
                Ok(lit(null).alias(field.name()))
            });
            let columns = columns
                .collect::<datafusion::common::Result<Vec<_>>>()
                .context(what)?;
            let empty = ctx
                .read_empty()
                .context(what)?
                .select(columns)
                .context(what)?;
            ctx.register_table(name, empty.into_view()).context(what)?;
            return Ok(());
        }
        let paths: Vec<String> = files.iter().map(Place::to_string).collect();
        let mut frame = match ctx.read_parquet(paths, ParquetReadOptions::default()).await {
            Ok(frame) => frame,
            // A damaged footer fails here, before any stage: name the file.
            Err(e) => {
                if let Some(named) = self.name_unreadable(ctx, &files).await {
                    return Err(named);
                }
                return Err(e).context(what);
            }
        };
        // A column that batches written by an older neardup lack (`sketch`) reads as NULL.
        for field in fields.iter().filter(|f| f.is_nullable()) {
            if frame
                .schema()
                .field_with_unqualified_name(field.name())
                .is_err()
            {
                let null = ScalarValue::try_from(field.data_type()).context(what)?;
                frame = frame.with_column(field.name(), lit(null)).context(what)?;
            }
        }
        ctx.register_table(name, frame.into_view()).context(what)?;
        Ok(())
    }

    /// Where batch `number` lives once committed, for messages: its folder, or on a store the
    /// prefix its runs write under.
    pub fn batch_place(&self, number: u64) -> Place {
        match self.batches.get((number as usize).wrapping_sub(1)) {
            Some((batch, folder)) if batch.batch == number => self.place.join(folder),
            _ => self.place.join(&batch_folder(number)),
        }
    }

    /// Starts writing batch `number`: a place that becomes the batch on `commit`.
    pub fn stage_batch(&self, number: u64) -> Result<BatchStaging> {
        match &self.place {
            Place::Local(dir) => local::stage_batch(self, dir, number).map(BatchStaging::Local),
            // `IndexOptions::place` refuses to add to an index on http(s).
            Place::Remote(_) => Ok(BatchStaging::Remote(remote::stage_batch(number))),
        }
    }

    /// Where a staged batch's tables are written.
    pub fn staged_place(&self, staging: &BatchStaging) -> Place {
        match staging {
            BatchStaging::Local(dir) => Place::Local(dir.path().to_path_buf()),
            BatchStaging::Remote(part) => self.place.join(part),
        }
    }

    /// Makes the staged batch part of the index (`local::commit`, `remote::commit`).
    pub async fn commit(
        &self,
        staging: BatchStaging,
        meta: &IndexMeta,
        batch: &BatchMeta,
    ) -> Result<()> {
        hold_commit_for_tests();
        match staging {
            BatchStaging::Local(dir) => local::commit(self, dir, meta, batch),
            BatchStaging::Remote(part) => remote::commit(self, &part, meta, batch).await,
        }
    }

    /// A failed run's staged batch: a local staging folder goes when dropped; a batch's prefix
    /// on a store is removed here (or, if this fails too, by the next commit of that batch).
    pub async fn abandon(&self, staging: &BatchStaging) {
        if let BatchStaging::Remote(part) = staging
            && let Place::Remote(url) = self.place.join(part)
            && let Ok(remote) = Remote::open(&url)
        {
            let _ = remote.remove_all().await;
        }
    }

    /// The Parquet files of one table (`documents` or `group_log`) over every batch.
    async fn table_files(&self, table: &str) -> Result<Vec<Place>> {
        let mut files = Vec::new();
        for (_, folder) in &self.batches {
            let inside = format!("{folder}/{table}/");
            match &self.place {
                Place::Local(dir) => {
                    let dir = dir.join(folder).join(table);
                    for entry in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
                        let path = entry.map_err(|e| Error::io(&dir, e))?.path();
                        if path.extension().is_some_and(|e| e == "parquet") {
                            files.push(Place::Local(path));
                        }
                    }
                }
                Place::Remote(_) => files.extend(
                    self.listed
                        .iter()
                        .filter(|key| key.starts_with(&inside) && key.ends_with(".parquet"))
                        .map(|key| self.place.join(key)),
                ),
            }
        }
        Ok(files)
    }

    /// After a failed stage: the index's first file that cannot be read, named with the batch
    /// it belongs to, or `None` when every file reads (the probe of `job::find_unreadable_file`,
    /// which names a corrupt input the same way). Local files only: on a store the stage's
    /// own error names the object.
    pub async fn name_unreadable_file(&self, ctx: &SessionContext) -> Option<Error> {
        let mut files = Vec::new();
        for table in [DOCUMENTS_DIR, GROUP_LOG_DIR] {
            files.extend(self.table_files(table).await.ok()?);
        }
        self.name_unreadable(ctx, &files).await
    }

    async fn name_unreadable(&self, ctx: &SessionContext, files: &[Place]) -> Option<Error> {
        let dir = self.place.as_local()?;
        let local: Vec<PathBuf> = files
            .iter()
            .filter_map(|f| f.as_local().map(PathBuf::from))
            .collect();
        let (file, message) = crate::engine::session::find_unreadable_file(ctx, &local).await?;
        let batch = file
            .ancestors()
            .find(|folder| folder.parent() == Some(dir))
            .unwrap_or(dir);
        Some(Error::Input(format!(
            "--index {}: {} cannot be read: {message}. The index is damaged: restore {} from a \
             backup (or the run that wrote it), or start a new index",
            self.place,
            file.display(),
            batch.display()
        )))
    }
}

/// Fault injection for the test of two runs committing one batch:
/// `NEARDUP_HOLD_INDEX_COMMIT=<file>` makes a run that is about to commit create
/// `<file>.ready-<pid>` and wait (two minutes at most) until `<file>` exists, so a test can
/// release both runs at once.
fn hold_commit_for_tests() {
    let Some(release) = std::env::var_os("NEARDUP_HOLD_INDEX_COMMIT").map(PathBuf::from) else {
        return;
    };
    let mut ready = release.clone().into_os_string();
    ready.push(format!(".ready-{}", std::process::id()));
    let _ = std::fs::write(&ready, b"");
    let start = std::time::Instant::now();
    while !release.exists() && start.elapsed() < std::time::Duration::from_secs(120) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The folder name of batch `number`: `batch=000001`.
fn batch_folder(number: u64) -> String {
    format!("batch={number:06}")
}

/// A run that found no index and lost the race to create it may add its batch only if the
/// winner's settings are its own.
fn same_settings(theirs: &IndexMeta, mine: &IndexMeta, index: &str) -> Result<()> {
    if theirs == mine {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "another run created the index {index} meanwhile, with other settings ({} against this \
         run's {}); this batch was not added",
        serde_json::to_string(theirs).unwrap_or_default(),
        serde_json::to_string(mine).unwrap_or_default()
    )))
}

/// Reads a JSON file of the index; `file` names it in the error.
fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8], file: &str) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| {
        Error::Input(format!(
            "{file} cannot be read: {e}. The index is damaged: restore the file from a backup, \
             or start a new index"
        ))
    })
}

/// Seconds since 1970, for `batch.json`.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
