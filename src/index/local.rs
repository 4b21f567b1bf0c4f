//! An index on a local disk (or a shared folder): each batch is staged beside its final folder
//! and renamed into place, the rename being the commit; a hard link creates `index.json` only
//! if no other run did.

use std::path::Path;

use serde::Serialize;

use super::{
    BATCH_FILE, BatchMeta, COMMITTED_DIR, Index, IndexMeta, META_FILE, batch_folder, parse_json,
};
use crate::engine::staging::{COMPLETE_MARKER, Overwrite, StagingDir};
use crate::error::{Error, Result};
use crate::storage::Place;

/// Reads the index in `dir` (`Index::open`).
pub fn open(dir: &Path, update: bool) -> Result<Index> {
    let dir = std::path::absolute(dir).map_err(|e| Error::io(dir, e))?;
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
        return Ok(Index::new_index(Place::Local(dir)));
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
    Index::check_format(&meta, &meta_path.display().to_string())?;
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
        batches.push((batch, name));
    }
    batches.sort_by_key(|(batch, _)| batch.batch);
    let mut index = Index::new_index(Place::Local(dir));
    index.meta = Some(meta);
    index.batches = batches;
    index.check_no_gaps("is gone or has no _SUCCESS, though later batches exist")?;
    check_committed_markers(&index)?;
    Ok(index)
}

/// Refuses an index missing its last batches: each commit leaves a marker in `committed/`,
/// so a deleted folder (the last one too) is named instead of silently matching against less.
/// Indexes written before the markers existed have none; their gaps are still found.
fn check_committed_markers(index: &Index) -> Result<()> {
    let Place::Local(dir) = &index.place else {
        return Ok(());
    };
    let committed = dir.join(COMMITTED_DIR);
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
    let held = index.batches.len() as u64;
    match numbers.into_iter().find(|&n| n > held) {
        Some(number) => Err(index.missing(
            number,
            &format!(
                "is gone or has no _SUCCESS, though {} says it was committed",
                committed.display()
            ),
        )),
        None => Ok(()),
    }
}

/// A staging folder that becomes batch `number` on `commit`.
pub fn stage_batch(index: &Index, dir: &Path, number: u64) -> Result<StagingDir> {
    let target = dir.join(batch_folder(number));
    if target.exists() {
        return Err(Error::Usage(format!(
            "--index {}: {} exists but is not a complete batch (no {COMPLETE_MARKER}), \
             although the index lists batches up to {}; if no other run is adding to the \
             index, it is left from a failed copy or edit: remove it",
            index.place,
            target.display(),
            number - 1
        )));
    }
    StagingDir::create(&target, Overwrite::No)
}

/// Writes `index.json` if the index is new, the batch's `batch.json`, and renames the staging
/// folder into place (the commit).
pub fn commit(
    index: &Index,
    staging: StagingDir,
    meta: &IndexMeta,
    batch: &BatchMeta,
) -> Result<()> {
    let Place::Local(dir) = &index.place else {
        return Err(Error::Internal(
            "a local commit of an index on a store".into(),
        ));
    };
    if index.meta.is_none() {
        create_settings(dir, meta)?;
    }
    write_json_atomically(&staging.path().join(BATCH_FILE), batch)?;
    staging.commit()?;
    // After the rename (the commit): a marker without its folder can only mean the folder
    // was removed later. A run killed before this line leaves a batch without its marker,
    // which reads as committed.
    let committed = dir.join(COMMITTED_DIR);
    std::fs::create_dir_all(&committed).map_err(|e| Error::io(&committed, e))?;
    let marker = committed.join(batch_folder(batch.batch));
    std::fs::write(&marker, b"").map_err(|e| Error::io(&marker, e))?;
    Ok(())
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

/// Writes `index.json` of a new index unless another run created it meanwhile, in which case
/// its settings must be these (never overwritten: its batches were built with them).
pub(super) fn create_settings(dir: &Path, meta: &IndexMeta) -> Result<()> {
    let path = dir.join(META_FILE);
    let text = serde_json::to_string_pretty(meta).map_err(|e| Error::json(&path, e))?;
    let partial = dir.join(format!(".{META_FILE}.{}", std::process::id()));
    std::fs::write(&partial, text + "\n").map_err(|e| Error::io(&partial, e))?;
    // A hard link fails if the name is taken: the first run to create the index wins.
    let linked = std::fs::hard_link(&partial, &path);
    let _ = std::fs::remove_file(&partial);
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let theirs: IndexMeta = read_json(&path)?;
            super::same_settings(&theirs, meta, &dir.display().to_string())
        }
        Err(e) => Err(Error::io(&path, e)),
    }
}

pub(super) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    parse_json(&bytes, &path.display().to_string())
}

/// Writes the JSON whole or not at all, so readers never see half a file.
fn write_json_atomically<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::json(path, e))?;
    crate::engine::partial_file::write_atomically(path, (text + "\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use datafusion::arrow::datatypes::DataType;

    use super::*;

    #[test]
    fn a_missing_index_needs_update_index_and_a_foreign_folder_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("index");
        let err = open(&dir, false).unwrap_err().to_string();
        assert!(err.contains("--update-index"), "{err}");
        let new = open(&dir, true).unwrap();
        assert!(new.meta.is_none());
        assert_eq!((new.next_batch(), new.next_group_id()), (1, 1));

        // What a killed first run leaves is not an index, but does not stop the next one.
        std::fs::create_dir_all(dir.join(".batch=000001.neardup-staging-4000000000")).unwrap();
        assert!(open(&dir, true).unwrap().meta.is_none());
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        let err = open(&dir, true).unwrap_err().to_string();
        assert!(err.contains("not a neardup index"), "{err}");
    }

    #[test]
    fn settings_must_match_and_batches_without_marker_are_not_read() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("index");
        let meta = IndexMeta::new(64, 3, "mode=auto", &DataType::Int64, BTreeMap::new(), None);
        let index = open(&dir, true).unwrap();
        let staging = stage_batch(&index, &dir, 1).unwrap();
        let batch = BatchMeta {
            batch: 1,
            neardup_version: "test".into(),
            inputs: vec![],
            documents: 7,
            next_group_id: 4,
            committed_at: 0,
        };
        commit(&index, staging, &meta, &batch).unwrap();
        // A batch folder left by a crash before its rename: no marker, so not a batch.
        std::fs::create_dir(dir.join("batch=000002")).unwrap();

        let index = open(&dir, false).unwrap();
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
        assert!(create_settings(&dir, &meta).is_ok());
        let err = create_settings(&dir, &other_k).unwrap_err().to_string();
        assert!(err.contains("another run created the index"), "{err}");
        assert_eq!(open(&dir, false).unwrap().meta, Some(meta));
        // Batch 2's folder exists (the crash), so staging batch 2 is refused, not overwritten.
        let err = stage_batch(&index, &dir, 2).unwrap_err().to_string();
        assert!(err.contains("batch=000002"), "{err}");
    }

    /// A batch.json edited to a next_group_id near u64's end (the next batch's ids would wrap
    /// onto older groups) or below an earlier batch's is refused when the index is opened.
    #[test]
    fn group_ids_that_would_wrap_or_go_back_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("index");
        let meta = IndexMeta::new(64, 3, "mode=auto", &DataType::Int64, BTreeMap::new(), None);
        for (number, next_group_id) in [(1, 10), (2, 20)] {
            let index = open(&dir, true).unwrap();
            let staging = stage_batch(&index, &dir, number).unwrap();
            let batch = BatchMeta {
                batch: number,
                neardup_version: "test".into(),
                inputs: vec![],
                documents: 7,
                next_group_id,
                committed_at: 0,
            };
            commit(&index, staging, &meta, &batch).unwrap();
        }
        assert_eq!(open(&dir, false).unwrap().next_group_id(), 20);
        let file = dir.join("batch=000002").join(BATCH_FILE);
        let written = std::fs::read_to_string(&file).unwrap();
        for edited in [u64::MAX, 1 << 63, 9] {
            let text = written.replace(
                "\"next_group_id\": 20",
                &format!("\"next_group_id\": {edited}"),
            );
            assert_ne!(text, written);
            std::fs::write(&file, text).unwrap();
            let err = open(&dir, false).unwrap_err().to_string();
            assert!(
                err.contains("next_group_id") && err.contains("batch 2"),
                "{err}"
            );
        }
    }
}
