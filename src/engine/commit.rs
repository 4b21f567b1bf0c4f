//! Outputs whole or not at all where there is no rename: on an object store a run writes its
//! tables under a prefix of its own, `run-<id>/`, and commits by writing one object last, the
//! manifest `_SUCCESS`, which names that prefix. A single PUT is atomic on every store, so a
//! reader sees the previous manifest (and the previous run's tables, untouched) or the new one,
//! never a mix. The run then removes the prefixes no manifest names: the previous run's, and
//! what killed runs left. docs/ROBUSTNESS.md describes it for users.
//!
//! ```text
//! s3://lake/neardup/dt=2026-11-30/_SUCCESS               the manifest (JSON), written last
//! s3://lake/neardup/dt=2026-11-30/run-<id>/groups/...    the tables of the run it names
//! s3://lake/neardup/dt=2026-11-30/run-<id>/summary.json
//! ```
//!
//! On local disks the output keeps its layout (`out/groups/`, renamed into place whole:
//! `crate::engine::staging`); `Staging` is either.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use url::Url;

use crate::delta::output::{Committed, DeltaStaging, Mode as DeltaMode};
use crate::engine::staging::{COMPLETE_MARKER, OUTPUT_TABLES, Overwrite, SUMMARY_FILE, StagingDir};
use crate::error::{Error, Result};
use crate::storage::{Place, Remote};

/// What a committed output on an object store is: the run whose tables it is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// Always "neardup output": tells a manifest from someone else's `_SUCCESS`.
    pub format: String,
    /// The run's prefix inside the output, `run-<id>`.
    pub run: String,
    /// Each table's folder, relative to the output (`run-<id>/groups/`).
    pub tables: BTreeMap<String, String>,
    /// The run's summary.json, relative to the output.
    pub summary: String,
    pub committed_at: u64,
}

const FORMAT: &str = "neardup output";

const RUN_PREFIX: &str = "run-";

/// Where a job writes until it commits: a local staging folder or a run prefix on a store,
/// or a work folder under an output of Delta tables (`crate::delta::output`).
#[derive(Debug)]
pub enum Staging {
    Local(StagingDir),
    Remote(RemoteStaging),
    Delta(DeltaStaging),
}

impl Staging {
    /// Checks the output can be written (absent, or `overwrite` and a neardup output) and
    /// prepares the place the job writes into. `delta` says how Delta tables are written, for
    /// `--output-format delta`; `command` is the one writing (`run` or `match`).
    pub async fn create(
        output: &Place,
        overwrite: Overwrite,
        delta: Option<DeltaMode>,
        command: &str,
    ) -> Result<Staging> {
        if let Some(mode) = delta {
            return Ok(Staging::Delta(
                DeltaStaging::create(output, mode, command).await?,
            ));
        }
        if overwrite != Overwrite::No && crate::delta::output::open_output(output).await?.is_some()
        {
            return Err(Error::Usage(format!(
                "--output {output} holds neardup's Delta tables; write to it with \
                 --output-format delta (--overwrite or --append), or choose another --output"
            )));
        }
        match output {
            Place::Local(path) => Ok(Staging::Local(StagingDir::create(path, overwrite)?)),
            Place::Remote(url) if matches!(url.scheme(), "http" | "https") => {
                Err(Error::Usage(format!(
                    "--output {url}: http(s):// is read only; write to s3://, gs://, az:// or a \
                     local folder"
                )))
            }
            Place::Remote(url) => Ok(Staging::Remote(
                RemoteStaging::create(url, overwrite).await?,
            )),
        }
    }

    /// Where the job writes its tables.
    pub fn place(&self) -> Place {
        match self {
            Staging::Local(dir) => Place::Local(dir.path().to_path_buf()),
            Staging::Remote(remote) => remote.place(),
            Staging::Delta(delta) => delta.place(),
        }
    }

    /// The output as the user named it.
    pub fn target(&self) -> Place {
        match self {
            Staging::Local(dir) => Place::Local(dir.target().to_path_buf()),
            Staging::Remote(remote) => Place::Remote(remote.output.url().clone()),
            Staging::Delta(delta) => delta.target().clone(),
        }
    }

    /// Removes a folder of internal tables before the commit.
    pub async fn remove(&self, name: &str) -> Result<()> {
        match self {
            Staging::Local(dir) => {
                let path = dir.path().join(name);
                if path.exists() {
                    std::fs::remove_dir_all(&path).map_err(|e| Error::io(&path, e))?;
                }
                Ok(())
            }
            Staging::Remote(remote) => remote.run().child(name).remove_all().await,
            Staging::Delta(delta) => {
                crate::delta::output::remove_place(&delta.place().join(name)).await
            }
        }
    }

    /// Writes a small file (the summary) into the staged output.
    pub async fn write_file(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        match self {
            Staging::Local(dir) => {
                crate::engine::partial_file::write_atomically(&dir.path().join(name), &bytes)
            }
            Staging::Remote(remote) => remote.run().child(name).write(bytes).await,
            Staging::Delta(delta) => delta.write_summary(bytes).await,
        }
    }

    /// Makes the output the job wrote the one readers see. Delta tables are committed before
    /// (`DeltaStaging::commit_tables`); here their work folder goes.
    pub async fn commit(self) -> Result<(Place, Committed)> {
        match self {
            Staging::Local(dir) => Ok((Place::Local(dir.commit()?), Committed::default())),
            Staging::Remote(remote) => Ok((remote.commit().await?, Committed::default())),
            Staging::Delta(delta) => {
                let target = delta.target().clone();
                Ok((target, delta.finish(BTreeMap::new()).await))
            }
        }
    }

    /// A failed job: removes what it wrote (a local staging folder goes when dropped).
    pub async fn abandon(self) {
        match self {
            Staging::Local(_) => {}
            Staging::Remote(remote) => {
                let _ = remote.run().remove_all().await;
            }
            Staging::Delta(delta) => {
                delta.finish(BTreeMap::new()).await;
            }
        }
    }
}

/// A run's prefix on an object store, committed by writing the output's manifest.
#[derive(Debug)]
pub struct RemoteStaging {
    output: Remote,
    run: String,
}

impl RemoteStaging {
    /// Refuses an output that exists (without `--overwrite`) or holds objects neardup did not
    /// write, and removes what killed runs left.
    pub async fn create(url: &Url, overwrite: Overwrite) -> Result<Self> {
        let output = Remote::open(url)?;
        let manifest = read_manifest(&output).await?;
        if manifest.is_some() && overwrite == Overwrite::No {
            return Err(Error::Usage(format!(
                "output {url} already exists; pass --overwrite to replace it"
            )));
        }
        let foreign = foreign_objects(&output).await?;
        if !foreign.is_empty() {
            let what = if manifest.is_some() {
                "besides a neardup output it holds"
            } else {
                "it is not a neardup output (no _SUCCESS) and holds"
            };
            return Err(Error::Usage(format!(
                "refusing to write to {url}: {what} {}; choose another --output",
                foreign.join(", ")
            )));
        }
        remove_unnamed_runs(&output, manifest.as_ref()).await?;
        Ok(Self {
            output,
            run: format!("{RUN_PREFIX}{}", run_id()),
        })
    }

    fn run(&self) -> Remote {
        self.output.child(&self.run)
    }

    fn place(&self) -> Place {
        Place::Remote(self.run().url().clone())
    }

    /// Writes the manifest naming this run (the commit point), then removes the runs it
    /// replaced.
    async fn commit(self) -> Result<Place> {
        let written = top_level_names(&self.run()).await?;
        let tables: Vec<&str> = OUTPUT_TABLES
            .into_iter()
            .filter(|t| written.iter().any(|w| w == t))
            .collect();
        let manifest = Manifest {
            format: FORMAT.into(),
            run: self.run.clone(),
            tables: tables
                .iter()
                .map(|t| (t.to_string(), format!("{}/{t}/", self.run)))
                .collect(),
            summary: format!("{}/{SUMMARY_FILE}", self.run),
            committed_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::Internal(format!("writing the manifest: {e}")))?;
        self.output.child(COMPLETE_MARKER).write(json).await?;
        if let Err(e) = remove_unnamed_runs(&self.output, Some(&manifest)).await {
            crate::to_stderr!(
                "neardup: warning: the output is committed, but an earlier run's tables could \
                 not be removed ({e}); the next run removes them"
            );
        }
        Ok(Place::Remote(self.output.url().clone()))
    }
}

/// A unique run id that sorts by time: milliseconds since 1970, process id and a counter.
pub fn run_id() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{millis:013}-{}-{n}", std::process::id())
}

/// The manifest of a committed output, `None` when there is none. A `_SUCCESS` that is not
/// neardup's is an error naming it.
pub async fn read_manifest(output: &Remote) -> Result<Option<Manifest>> {
    let marker = output.child(COMPLETE_MARKER);
    let Some(bytes) = marker.read().await? else {
        return Ok(None);
    };
    match serde_json::from_slice::<Manifest>(&bytes) {
        Ok(manifest) if manifest.format == FORMAT => Ok(Some(manifest)),
        _ => Err(Error::Input(format!(
            "{} is not a neardup manifest: {} was not written by neardup",
            marker.url(),
            output.url()
        ))),
    }
}

/// Top-level names under `output` that neardup does not write there (up to five).
async fn foreign_objects(output: &Remote) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for name in top_level_names(output).await? {
        if name != COMPLETE_MARKER && !name.starts_with(RUN_PREFIX) && !names.contains(&name) {
            names.push(name);
        }
        if names.len() == 5 {
            break;
        }
    }
    Ok(names)
}

/// The first name of every key under `output`: its top-level objects and folders, once each.
pub(crate) async fn top_level_names(output: &Remote) -> Result<Vec<String>> {
    let prefix = output.key().to_string();
    let mut names = Vec::new();
    for object in output.list().await? {
        let key = object.location.to_string();
        let rest = key
            .strip_prefix(&prefix)
            .unwrap_or(&key)
            .trim_start_matches('/');
        let name = rest.split('/').next().unwrap_or(rest).to_string();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

/// Removes every `run-*` prefix the manifest does not name: the run it replaced, and runs that
/// were killed before their commit. One writer per output at a time: a second job writing the
/// same output would remove the first one's tables before it commits.
async fn remove_unnamed_runs(output: &Remote, manifest: Option<&Manifest>) -> Result<()> {
    for name in top_level_names(output).await? {
        let named = manifest.is_some_and(|m| m.run == name);
        if name.starts_with(RUN_PREFIX) && !named {
            output.child(&name).remove_all().await?;
        }
    }
    Ok(())
}

/// A committed output opened for reading: its summary and each table's folder.
#[derive(Debug)]
pub struct CommittedOutput {
    pub summary_bytes: Vec<u8>,
    pub summary_place: String,
    /// Folder (with a trailing '/') of each table the output holds.
    pub tables: BTreeMap<String, String>,
}

/// Opens a committed output on a store, refusing one without a manifest (a run still writing
/// it, a failed run, or not an output).
pub async fn open_remote_output(url: &Url) -> Result<CommittedOutput> {
    let output = Remote::open(url)?;
    let Some(manifest) = read_manifest(&output).await? else {
        return Err(Error::Input(format!(
            "{url} is not a complete neardup output (no {COMPLETE_MARKER}): a run is still \
             writing it, a run failed, or it was never one"
        )));
    };
    let summary = output.child(&manifest.summary);
    let bytes = summary.read().await?.ok_or_else(|| {
        Error::Input(format!(
            "{url}: its manifest names {}, which is gone",
            summary.url()
        ))
    })?;
    let tables = manifest
        .tables
        .iter()
        .map(|(name, folder)| (name.clone(), format!("{url}/{folder}")))
        .collect();
    Ok(CommittedOutput {
        summary_bytes: bytes,
        summary_place: summary.url().to_string(),
        tables,
    })
}
