//! An index on an object store, which has no rename: each run writes its batch under a prefix
//! of its own, and the commit is a conditional write (create if absent) of the batch's record
//! in `committed/`, which names that prefix. Of two runs committing the same batch number the
//! store lets exactly one create the record; the other removes its prefix and fails.
//!
//! ```text
//! index.json                                   settings (created conditionally too)
//! committed/batch=000001                       the commit record: {part, batch}
//! batch=000001/run-<id>/batch.json             the batch the record names
//! batch=000001/run-<id>/documents/*.parquet
//! batch=000001/run-<id>/group_log/*.parquet
//! ```
//!
//! Prefixes no record names (a killed run's, a loser's) are never read; the commit of a batch
//! removes those of that batch and of earlier ones, which no running writer can commit any more.

use std::collections::BTreeSet;

use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use url::Url;

use super::{
    BATCH_FILE, BatchMeta, COMMITTED_DIR, Index, IndexMeta, META_FILE, batch_folder, parse_json,
};
use crate::error::{Error, Result};
use crate::storage::{Place, Remote};

/// What `committed/batch=000001` holds: the prefix of the run that won the batch, and the batch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct CommitRecord {
    part: String,
    batch: BatchMeta,
}

/// Commit records read at once when an index is opened.
const READS_IN_FLIGHT: usize = 16;

/// Reads the index at `url` (`Index::open`): its commit records, then one listing of all its
/// keys (in that order: a listing is no snapshot, and a batch's files are written before its
/// record, so every record read has its files in the later listing), its settings and the
/// records' contents.
pub async fn open(url: &Url, update: bool) -> Result<Index> {
    let root = Remote::open(url)?;
    let committed: Vec<String> = relative_keys(&root.child(COMMITTED_DIR))
        .await?
        .into_iter()
        .map(|key| format!("{COMMITTED_DIR}/{key}"))
        .collect();
    let listed = relative_keys(&root).await?;
    let mut index = Index::new_index(Place::Remote(url.clone()));
    if !listed.iter().any(|key| key == META_FILE) {
        // A killed first run leaves only batch prefixes, which the next commit removes.
        if let Some(other) = listed.iter().find(|key| !key.starts_with("batch=")) {
            return Err(Error::Input(format!(
                "--index {url}: the prefix is not a neardup index (no {META_FILE}, and it holds \
                 {other}); choose an empty or new prefix"
            )));
        }
        if !update {
            return Err(Error::Usage(format!(
                "--index {url}: no index there; pass --update-index to create it with this batch"
            )));
        }
        index.listed = listed;
        return Ok(index);
    }
    let meta_file = root.child(META_FILE);
    let meta: IndexMeta = read_json(&meta_file).await?.ok_or_else(|| {
        Error::Input(format!(
            "{}: gone while the index was read",
            meta_file.url()
        ))
    })?;
    Index::check_format(&meta, meta_file.url().as_str())?;
    let records: Vec<Remote> = committed
        .iter()
        .filter(|key| committed_number(key).is_some())
        .map(|key| root.child(key))
        .collect();
    let mut records: Vec<CommitRecord> = futures::stream::iter(records)
        .map(|marker| async move {
            read_json::<CommitRecord>(&marker).await?.ok_or_else(|| {
                Error::Input(format!("{}: gone while the index was read", marker.url()))
            })
        })
        .buffered(READS_IN_FLIGHT)
        .try_collect()
        .await?;
    records.sort_by_key(|record| record.batch.batch);
    index.meta = Some(meta);
    index.batches = records
        .into_iter()
        .map(|record| (record.batch, record.part))
        .collect();
    index.check_no_gaps("has no record in committed/, though later batches do")?;
    for (batch, part) in &index.batches {
        let described = format!("{part}/{BATCH_FILE}");
        if !listed.contains(&described) {
            return Err(index.missing(
                batch.batch,
                &format!("its files are gone, though {COMMITTED_DIR}/ says it was committed"),
            ));
        }
    }
    index.listed = listed;
    Ok(index)
}

/// The prefix a run writes batch `number` under.
pub fn stage_batch(number: u64) -> String {
    format!(
        "{}/run-{}",
        batch_folder(number),
        crate::engine::commit::run_id()
    )
}

/// Writes `index.json` if the index is new (unless another run did, with the same settings),
/// the batch's `batch.json`, and then its commit record, conditionally: the commit.
pub async fn commit(index: &Index, part: &str, meta: &IndexMeta, batch: &BatchMeta) -> Result<()> {
    let Place::Remote(url) = &index.place else {
        return Err(Error::Internal("a store commit of a local index".into()));
    };
    let root = Remote::open(url)?;
    let lost = |e: Error| abandoned(&root, part, e);
    if index.meta.is_none()
        && let Err(e) = create_settings(&root, meta).await
    {
        return Err(lost(e).await);
    }
    let described = root.child(&format!("{part}/{BATCH_FILE}"));
    if let Err(e) = described.write(to_json(batch)?).await {
        return Err(lost(e).await);
    }
    let record = CommitRecord {
        part: part.to_string(),
        batch: batch.clone(),
    };
    let marker = root.child(&format!("{COMMITTED_DIR}/{}", batch_folder(batch.batch)));
    let created = match marker.create(to_json(&record)?).await {
        Ok(created) => created,
        Err(e) => {
            // The PUT may have landed, or may still land, after its answer was lost: the files
            // stay (a later commit of this number removes them if the record never lands).
            let named = read_json::<CommitRecord>(&marker).await;
            return match named {
                Ok(Some(theirs)) if theirs == record => Ok(()),
                _ => Err(Error::Input(format!(
                    "{}; whether batch {} was added is not known: its record may still land",
                    unconditional(e, url),
                    batch.batch
                ))),
            };
        }
    };
    // A store that ignores the condition lets a second writer replace the record: read it back.
    let read_back = read_json::<CommitRecord>(&marker).await;
    if created && matches!(&read_back, Ok(Some(theirs)) if *theirs != record) {
        return Err(Error::Input(format!(
            "{}: another run replaced this batch's record right after it was written, so the \
             store ignores conditional writes and cannot keep two writers of {url} apart; run \
             one writer at a time there",
            marker.url()
        )));
    }
    // A PUT whose answer was lost and retried finds its own record: that is a win too.
    if !created && read_json::<CommitRecord>(&marker).await?.as_ref() != Some(&record) {
        return Err(lost(Error::Usage(format!(
            "another run added batch {} to {url} while this one ran, so this run's batch was \
             not added (exactly one run commits a batch number)",
            batch.batch
        )))
        .await);
    }
    if let Err(e) = remove_unnamed_parts(index, &root, part, batch.batch).await {
        crate::to_stderr!(
            "neardup: warning: batch {} is committed, but what earlier runs left under {url} \
             could not be removed ({e}); the next commit removes it",
            batch.batch
        );
    }
    Ok(())
}

/// A batch that will not be committed: its prefix goes, and `error` says why.
async fn abandoned(root: &Remote, part: &str, error: Error) -> Error {
    let _ = root.child(part).remove_all().await;
    error
}

/// Creates `index.json`; a run that lost the race may go on only with the winner's settings.
async fn create_settings(root: &Remote, meta: &IndexMeta) -> Result<()> {
    let file = root.child(META_FILE);
    let created = file
        .create(to_json(meta)?)
        .await
        .map_err(|e| unconditional(e, root.url()))?;
    if created {
        return Ok(());
    }
    match read_json::<IndexMeta>(&file).await? {
        Some(theirs) => super::same_settings(&theirs, meta, root.url().as_str()),
        None => Err(Error::Input(format!(
            "{}: refused as existing, then not found; try again",
            file.url()
        ))),
    }
}

/// A store that cannot write conditionally cannot keep two writers from both committing.
fn unconditional(error: Error, url: &Url) -> Error {
    match error {
        Error::Store {
            source: object_store::Error::NotImplemented { .. },
            ..
        } => Error::Usage(format!(
            "--index {url}: this store cannot write an object only if it is absent, which an \
             index's commit needs so that two runs never both add a batch (docs/STORAGE.md \
             says which stores can, and how to turn it on)"
        )),
        other => other,
    }
}

/// Removes the prefixes of batches up to `number` that no commit record names: losers' and
/// killed runs'. None of their writers can commit any more, so none is still needed.
async fn remove_unnamed_parts(index: &Index, root: &Remote, part: &str, number: u64) -> Result<()> {
    let mut named: BTreeSet<&str> = index.batches.iter().map(|(_, p)| p.as_str()).collect();
    named.insert(part);
    let folder = batch_folder(number);
    let mut keys = index.listed.clone();
    keys.extend(
        relative_keys(&root.child(&folder))
            .await?
            .into_iter()
            .map(|key| format!("{folder}/{key}")),
    );
    let unnamed: BTreeSet<String> = keys
        .iter()
        .filter_map(|key| part_of(key))
        .filter(|(p, n)| *n <= number && !named.contains(p.as_str()))
        .map(|(p, _)| p)
        .collect();
    for part in unnamed {
        root.child(&part).remove_all().await?;
    }
    Ok(())
}

/// `batch=000003/run-<id>` and 3 for a key inside a run's prefix.
fn part_of(key: &str) -> Option<(String, u64)> {
    let mut parts = key.splitn(3, '/');
    let folder = parts.next()?;
    let run = parts.next()?;
    let number = folder.strip_prefix("batch=")?.parse().ok()?;
    run.starts_with("run-")
        .then(|| (format!("{folder}/{run}"), number))
}

/// The number of a commit record's key, `committed/batch=000001`.
fn committed_number(key: &str) -> Option<u64> {
    key.strip_prefix(COMMITTED_DIR)?
        .strip_prefix("/batch=")?
        .parse()
        .ok()
}

/// Every key under `root`, relative to it.
async fn relative_keys(root: &Remote) -> Result<Vec<String>> {
    let prefix = root.key().to_string();
    Ok(root
        .list()
        .await?
        .into_iter()
        .map(|object| {
            let key = object.location.to_string();
            key.strip_prefix(&prefix)
                .map_or(key.as_str(), |rest| rest.trim_start_matches('/'))
                .to_string()
        })
        .collect())
}

async fn read_json<T: serde::de::DeserializeOwned>(file: &Remote) -> Result<Option<T>> {
    match file.read().await? {
        Some(bytes) => parse_json(&bytes, file.url().as_str()).map(Some),
        None => Ok(None),
    }
}

fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value)
        .map_err(|e| Error::Internal(format!("writing the index's JSON: {e}")))?;
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_batch_and_run() {
        assert_eq!(
            part_of("batch=000003/run-17-2-0/documents/part-0.parquet"),
            Some(("batch=000003/run-17-2-0".to_string(), 3))
        );
        assert_eq!(part_of("batch=000003/batch.json"), None);
        assert_eq!(part_of("committed/batch=000003"), None);
        assert_eq!(committed_number("committed/batch=000012"), Some(12));
        assert_eq!(committed_number("committed/batch=x"), None);
        assert_eq!(committed_number("index.json"), None);
    }
}
