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
//! A batch is written into a staging folder beside its final name and renamed into place as
//! its last step, so a failed or interrupted run leaves the index as it was, and two runs that
//! race for the same batch number cannot both land. Only folders with `_SUCCESS` are read.

pub mod batch;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::MemTable;
use datafusion::common::ScalarValue;
use datafusion::prelude::{ParquetReadOptions, SessionContext, lit};
use serde::{Deserialize, Serialize};

use crate::engine::staging::{COMPLETE_MARKER, Overwrite, StagingDir};
use crate::error::{Error, QueryContext, Result};
use crate::fingerprint::Width;

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

    /// The settings of the index in `dir`, if there is one, for a run's defaults: a run that
    /// names neither `--k` nor `--verify` takes the index's.
    pub fn of_existing(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(META_FILE);
        if !path.is_file() {
            return Ok(None);
        }
        read_json(&path).map(Some)
    }
}

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

/// An index as found on disk: its settings and committed batches (none for a new index).
#[derive(Debug, Clone)]
pub struct Index {
    pub dir: PathBuf,
    pub meta: Option<IndexMeta>,
    /// Committed batches in order, each with its folder.
    pub batches: Vec<(BatchMeta, PathBuf)>,
}

impl Index {
    /// Reads the index at `dir`. A folder that does not exist (or is empty) is a new index,
    /// which only `--update-index` may create.
    pub fn open(dir: &Path, update: bool) -> Result<Self> {
        let dir = std::path::absolute(dir).map_err(|e| Error::io(dir, e))?;
        let empty = Self {
            dir: dir.clone(),
            meta: None,
            batches: Vec::new(),
        };
        let exists = dir.is_dir() && !holds_only_leftovers(&dir)?;
        if !exists {
            if dir.exists() && !dir.is_dir() {
                return Err(Error::Usage(format!(
                    "--index {} is a file, not a folder",
                    dir.display()
                )));
            }
            if !update {
                return Err(Error::Usage(format!(
                    "--index {}: no index there; pass --update-index to create it with this batch",
                    dir.display()
                )));
            }
            return Ok(empty);
        }
        let meta_path = dir.join(META_FILE);
        if !meta_path.is_file() {
            return Err(Error::Input(format!(
                "--index {}: the folder is not a neardup index (no {META_FILE}); choose an empty or \
                 new folder",
                dir.display()
            )));
        }
        let meta: IndexMeta = read_json(&meta_path)?;
        if meta.format != FORMAT || meta.version != VERSION {
            return Err(Error::Input(format!(
                "{}: format {} version {} is not one this neardup reads ({FORMAT} version \
                 {VERSION})",
                meta_path.display(),
                meta.format,
                meta.version
            )));
        }
        let mut batches = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(number) = name.strip_prefix("batch=") else {
                continue;
            };
            let path = entry.path();
            // Without the marker it is not a batch (the rename is the commit; this is defence).
            if number.parse::<u64>().is_err() || !path.join(COMPLETE_MARKER).is_file() {
                continue;
            }
            let batch: BatchMeta = read_json(&path.join(BATCH_FILE))?;
            batches.push((batch, path));
        }
        batches.sort_by_key(|(batch, _)| batch.batch);
        let index = Self {
            dir,
            meta: Some(meta),
            batches,
        };
        index.check_batches_complete()?;
        Ok(index)
    }

    /// Refuses an index missing a batch it had: batches are numbered 1, 2, ... without gaps,
    /// and each commit leaves a marker in `committed/`, so a deleted folder (the last one too)
    /// is named instead of silently matching against less. Indexes written before the markers
    /// existed have none; their gaps are still found.
    fn check_batches_complete(&self) -> Result<()> {
        let missing = |number: u64, why: &str| {
            Err(Error::Input(format!(
                "--index {}: batch {number} is missing: {} {why}; the index would silently match \
                 against less than it holds. Restore the folder (from a backup or the run that \
                 wrote it), or start a new index",
                self.dir.display(),
                self.batch_dir(number).display()
            )))
        };
        for (expected, (batch, _)) in (1..).zip(&self.batches) {
            if batch.batch != expected {
                return missing(
                    expected,
                    "is gone or has no _SUCCESS, though later batches exist",
                );
            }
        }
        let committed = self.dir.join(COMMITTED_DIR);
        if !committed.is_dir() {
            return Ok(());
        }
        let mut numbers = Vec::new();
        for entry in std::fs::read_dir(&committed).map_err(|e| Error::io(&committed, e))? {
            let name = entry.map_err(|e| Error::io(&committed, e))?.file_name();
            let name = name.to_string_lossy();
            if let Some(number) = name
                .strip_prefix("batch=")
                .and_then(|n| n.parse::<u64>().ok())
            {
                numbers.push(number);
            }
        }
        numbers.sort_unstable();
        let held = self.batches.len() as u64;
        match numbers.into_iter().find(|&n| n > held) {
            Some(number) => missing(
                number,
                &format!(
                    "is gone or has no _SUCCESS, though {} says it was committed",
                    committed.display()
                ),
            ),
            None => Ok(()),
        }
    }

    /// An index that must exist (for `neardup query --index`).
    pub fn open_existing(dir: &Path) -> Result<Self> {
        let index = Self::open(dir, true)?;
        if index.meta.is_none() {
            return Err(Error::Input(format!(
                "--index {}: no index there (no {META_FILE})",
                index.dir.display()
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
                self.dir.join(META_FILE).display(),
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
                self.dir.display()
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
                        self.dir.display()
                    )));
                }
                None => {
                    return Err(Error::Usage(format!(
                        "--index {}: the index records no content for the feature file {file} \
                         (it was built by an older neardup, which kept only the path), so an \
                         edit since then cannot be ruled out; start a new index",
                        self.dir.display()
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

    /// Where batch `number` lives once committed.
    pub fn batch_dir(&self, number: u64) -> PathBuf {
        self.dir.join(format!("batch={number:06}"))
    }

    /// Starts writing batch `number`: a staging folder that becomes the batch on `commit`.
    pub fn stage_batch(&self, number: u64) -> Result<StagingDir> {
        let target = self.batch_dir(number);
        if target.exists() {
            return Err(Error::Usage(format!(
                "--index {}: {} exists but is not a complete batch (no {COMPLETE_MARKER}), \
                 although the index lists batches up to {}; if no other run is adding to the \
                 index, it is left from a failed copy or edit: remove it",
                self.dir.display(),
                target.display(),
                number - 1
            )));
        }
        StagingDir::create(&target, Overwrite::No)
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
        let files = self.table_files(folder)?;
        let what = || format!("reading the index table {name} in {}", self.dir.display());
        if files.is_empty() {
            let schema: SchemaRef = Arc::new(Schema::new(fields));
            let empty = RecordBatch::new_empty(Arc::clone(&schema));
            let table = MemTable::try_new(schema, vec![vec![empty]]).context(what)?;
            ctx.register_table(name, Arc::new(table)).context(what)?;
            return Ok(());
        }
        let paths: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
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

    /// The Parquet files of one table (`documents` or `group_log`) over every batch.
    fn table_files(&self, folder: &str) -> Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        for (_, dir) in &self.batches {
            let dir = dir.join(folder);
            for entry in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
                let path = entry.map_err(|e| Error::io(&dir, e))?.path();
                if path.extension().is_some_and(|e| e == "parquet") {
                    files.push(path);
                }
            }
        }
        Ok(files)
    }

    /// After a failed stage: the index's first file that cannot be read, named with the batch
    /// it belongs to, or `None` when every file reads (the probe of `job::find_unreadable_file`,
    /// which names a corrupt input the same way).
    pub async fn name_unreadable_file(&self, ctx: &SessionContext) -> Option<Error> {
        let mut files = Vec::new();
        for folder in [DOCUMENTS_DIR, GROUP_LOG_DIR] {
            files.extend(self.table_files(folder).ok()?);
        }
        self.name_unreadable(ctx, &files).await
    }

    async fn name_unreadable(&self, ctx: &SessionContext, files: &[PathBuf]) -> Option<Error> {
        let (file, message) = crate::engine::session::find_unreadable_file(ctx, files).await?;
        let batch = file
            .ancestors()
            .find(|folder| folder.parent() == Some(self.dir.as_path()))
            .unwrap_or(self.dir.as_path());
        Some(Error::Input(format!(
            "--index {}: {} cannot be read: {message}. The index is damaged: restore {} from a \
             backup (or the run that wrote it), or start a new index",
            self.dir.display(),
            file.display(),
            batch.display()
        )))
    }

    /// Makes the staged batch part of the index: writes `index.json` if the index is new, the
    /// batch's `batch.json`, and renames the staging folder into place (the commit).
    pub fn commit(&self, staging: StagingDir, meta: &IndexMeta, batch: &BatchMeta) -> Result<()> {
        if self.meta.is_none() {
            self.create_settings(meta)?;
        }
        write_json_atomically(&staging.path().join(BATCH_FILE), batch)?;
        staging.commit()?;
        // After the rename (the commit): a marker without its folder can only mean the folder
        // was removed later. A run killed before this line leaves a batch without its marker,
        // which reads as committed.
        let committed = self.dir.join(COMMITTED_DIR);
        std::fs::create_dir_all(&committed).map_err(|e| Error::io(&committed, e))?;
        let marker = committed.join(format!("batch={:06}", batch.batch));
        std::fs::write(&marker, b"").map_err(|e| Error::io(&marker, e))?;
        Ok(())
    }
}

/// True when `dir` holds nothing but what a killed first run leaves: its hidden staging folder
/// or a half-written `index.json.partial` (the next run's staging removes the former).
fn holds_only_leftovers(dir: &Path) -> Result<bool> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let name = entry.map_err(|e| Error::io(dir, e))?.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with('.') && !name.ends_with(".partial") {
            return Ok(false);
        }
    }
    Ok(true)
}

impl Index {
    /// Writes `index.json` of a new index unless another run created it meanwhile, in which
    /// case its settings must be these (never overwritten: its batches were built with them).
    fn create_settings(&self, meta: &IndexMeta) -> Result<()> {
        let path = self.dir.join(META_FILE);
        let text = serde_json::to_string_pretty(meta).map_err(|e| Error::json(&path, e))?;
        let partial = self
            .dir
            .join(format!(".{META_FILE}.{}", std::process::id()));
        std::fs::write(&partial, text + "\n").map_err(|e| Error::io(&partial, e))?;
        // A hard link fails if the name is taken: the first run to create the index wins.
        let linked = std::fs::hard_link(&partial, &path);
        let _ = std::fs::remove_file(&partial);
        match linked {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let theirs: IndexMeta = read_json(&path)?;
                if theirs == *meta {
                    Ok(())
                } else {
                    Err(Error::Usage(format!(
                        "another run created the index {} meanwhile, with other settings ({} \
                         against this run's {}); this batch was not added",
                        self.dir.display(),
                        serde_json::to_string(&theirs).unwrap_or_default(),
                        serde_json::to_string(meta).unwrap_or_default()
                    )))
                }
            }
            Err(e) => Err(Error::io(&path, e)),
        }
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| {
        Error::Input(format!(
            "{} cannot be read: {e}. The index is damaged: restore the file from a backup, or \
             start a new index",
            path.display()
        ))
    })
}

/// Writes the JSON whole or not at all, so readers never see half a file.
fn write_json_atomically<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::json(path, e))?;
    crate::engine::partial_file::write_atomically(path, (text + "\n").as_bytes())
}

/// Seconds since 1970, for `batch.json`.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_index_needs_update_index_and_a_foreign_folder_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("index");
        let err = Index::open(&dir, false).unwrap_err().to_string();
        assert!(err.contains("--update-index"), "{err}");
        let new = Index::open(&dir, true).unwrap();
        assert!(new.meta.is_none());
        assert_eq!((new.next_batch(), new.next_group_id()), (1, 1));

        // What a killed first run leaves is not an index, but does not stop the next one.
        std::fs::create_dir_all(dir.join(".batch=000001.neardup-staging-4000000000")).unwrap();
        assert!(Index::open(&dir, true).unwrap().meta.is_none());
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        let err = Index::open(&dir, true).unwrap_err().to_string();
        assert!(err.contains("not a neardup index"), "{err}");
    }

    #[test]
    fn settings_must_match_and_batches_without_marker_are_not_read() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("index");
        let meta = IndexMeta::new(64, 3, "mode=auto", &DataType::Int64, BTreeMap::new(), None);
        let index = Index::open(&dir, true).unwrap();
        let staging = index.stage_batch(1).unwrap();
        let batch = BatchMeta {
            batch: 1,
            neardup_version: "test".into(),
            inputs: vec![],
            documents: 7,
            next_group_id: 4,
            committed_at: 0,
        };
        index.commit(staging, &meta, &batch).unwrap();
        // A batch folder left by a crash before its rename: no marker, so not a batch.
        std::fs::create_dir(dir.join("batch=000002")).unwrap();

        let index = Index::open(&dir, false).unwrap();
        assert_eq!(index.batches.len(), 1);
        assert_eq!((index.next_batch(), index.next_group_id()), (2, 4));
        assert_eq!(index.documents(), 7);
        assert!(index.check_settings(&meta).is_ok());
        let other_k = IndexMeta::new(64, 5, "mode=auto", &DataType::Int64, BTreeMap::new(), None);
        let err = index.check_settings(&other_k).unwrap_err().to_string();
        assert!(err.contains("--k 3") && err.contains("5"), "{err}");
        let other_id = IndexMeta::new(64, 3, "mode=auto", &DataType::Utf8, BTreeMap::new(), None);
        let err = index.check_settings(&other_id).unwrap_err().to_string();
        assert!(err.contains("id type Int64"), "{err}");
        // A run that opened the folder before batch 1 landed cannot change the settings.
        let stale = Index {
            dir: dir.clone(),
            meta: None,
            batches: Vec::new(),
        };
        assert!(stale.create_settings(&meta).is_ok());
        let err = stale.create_settings(&other_k).unwrap_err().to_string();
        assert!(err.contains("another run created the index"), "{err}");
        assert_eq!(Index::open(&dir, false).unwrap().meta, Some(meta));
        // Batch 2's folder exists (the crash), so staging batch 2 is refused, not overwritten.
        let err = index.stage_batch(2).unwrap_err().to_string();
        assert!(err.contains("batch=000002"), "{err}");
    }
}
