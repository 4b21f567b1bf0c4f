//! A job's batch of a signature index: the index as found, this batch's number and settings,
//! and (with `--update-index`) the staged part the batch adds.

use datafusion::arrow::datatypes::DataType;
use datafusion::prelude::SessionContext;

use crate::engine::sql::{Bindings, pretty, query_stage};
use crate::engine::stages;
use crate::engine::staging::StagingDir;
use crate::error::{Error, Result};
use crate::fingerprint::Width;
use crate::index::{Index, IndexMeta};

/// A job's place in a signature index: the index as found, its settings for this run, this
/// batch's number and, with `--update-index`, the staging folder of the batch's part.
pub struct IndexedBatch {
    pub index: Index,
    pub settings: IndexMeta,
    pub number: u64,
    /// With `--update-index`: where the batch's part is staged, until it is committed.
    pub staging: Option<StagingDir>,
    /// The index folder did not exist before this run (so a failed run removes it).
    created_folder: bool,
}

/// `--index DIR [--update-index]`.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    pub dir: std::path::PathBuf,
    /// Add this batch to the index once its outputs are written.
    pub update: bool,
}

/// What the job's stages need to know of its batch (`crate::job::params::IndexParams`).
#[derive(Debug, Clone)]
pub struct BatchPlace {
    pub batch: u64,
    pub next_group_id: u64,
    /// The staging folder of the part this batch adds, if it adds one.
    pub part: Option<std::path::PathBuf>,
}

impl IndexedBatch {
    /// Opens the index and checks its settings before any work; stages the batch's part when
    /// the run is to add it.
    pub fn open(options: Option<&IndexOptions>, settings: IndexMeta) -> Result<Option<Self>> {
        let Some(options) = options else {
            return Ok(None);
        };
        let created_folder = !options.dir.exists();
        let index = Index::open(&options.dir, options.update)?;
        index.check_settings(&settings)?;
        let number = index.next_batch();
        let staging = if options.update {
            Some(index.stage_batch(number)?)
        } else {
            None
        };
        Ok(Some(Self {
            index,
            settings,
            number,
            staging,
            created_folder,
        }))
    }

    /// Registers the index's tables; returns what the stages need to know of the batch.
    pub async fn prepare(
        &self,
        ctx: &SessionContext,
        id_type: &DataType,
        width: Width,
    ) -> Result<BatchPlace> {
        self.index.register(ctx, id_type, width.bits()).await?;
        Ok(BatchPlace {
            batch: self.number,
            next_group_id: self.index.next_group_id(),
            part: self.staging.as_ref().map(|s| s.path().to_path_buf()),
        })
    }

    /// A document is added to an index once: ids the index holds are refused, with the batch
    /// that added them (a batch run twice is caught here, before any work).
    pub async fn check_new_ids(&self, ctx: &SessionContext, bindings: &Bindings) -> Result<()> {
        let taken = query_stage(ctx, &stages::IDS_INDEXED, bindings).await?;
        if taken.iter().all(|b| b.num_rows() == 0) {
            return Ok(());
        }
        Err(Error::Input(format!(
            "--index {}: these ids are already in the index, so this batch (or part of it) was \
             added before; an index holds each document once. Some of them:\n{}",
            self.index.dir.display(),
            pretty(&taken)?
        )))
    }
}
impl Drop for IndexedBatch {
    fn drop(&mut self) {
        // A run that made the index folder and failed leaves no empty folder behind (the
        // staged part goes first; removing a folder that is not empty fails, harmlessly).
        if self.created_folder {
            drop(self.staging.take());
            let _ = std::fs::remove_dir(&self.index.dir);
        }
    }
}
