//! A job's batch of a signature index: the index as found, this batch's number and settings,
//! and (with `--update-index`) the staged part the batch adds.

use datafusion::arrow::datatypes::DataType;
use datafusion::prelude::SessionContext;

use crate::engine::sql::{Bindings, pretty, query_stage};
use crate::engine::stages;
use crate::error::{Error, Result};
use crate::fingerprint::Width;
use crate::index::{BatchStaging, Index, IndexMeta};
use crate::storage::Place;

/// A job's place in a signature index: the index as found, its settings for this run, this
/// batch's number and, with `--update-index`, the staging folder of the batch's part.
pub struct IndexedBatch {
    pub index: Index,
    pub settings: IndexMeta,
    pub number: u64,
    /// With `--update-index`: where the batch's part is staged, until it is committed.
    pub staging: Option<BatchStaging>,
    /// The local index folder did not exist before this run (so a failed run removes it).
    created_folder: bool,
}

/// `--index DIR|URL [--update-index]`.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// As given: a folder or an object-store URL.
    pub dir: std::path::PathBuf,
    /// Add this batch to the index once its outputs are written.
    pub update: bool,
    /// The settings of the index as found before the job's options are resolved (an existing
    /// index's k and verification are a run's defaults); `None` for a new index.
    pub recorded: Option<IndexMeta>,
}

impl IndexOptions {
    /// Where the index is; an index on http(s), which is read only, cannot be added to.
    pub fn place(&self) -> Result<Place> {
        let place = Place::parse(&self.dir.to_string_lossy(), "--index")?;
        if let Place::Remote(url) = &place
            && self.update
            && matches!(url.scheme(), "http" | "https")
        {
            return Err(Error::Usage(format!(
                "--index {url}: http(s):// is read only; keep an index you add to on s3://, \
                 gs://, az:// or a local disk"
            )));
        }
        Ok(place)
    }
}

/// What the job's stages need to know of its batch (`crate::job::params::IndexParams`).
#[derive(Debug, Clone)]
pub struct BatchPlace {
    pub batch: u64,
    pub next_group_id: u64,
    /// Where the part this batch adds is staged, if it adds one.
    pub part: Option<Place>,
}

impl IndexedBatch {
    /// Opens the index and checks its settings before any work; stages the batch's part when
    /// the run is to add it.
    pub async fn open(options: Option<&IndexOptions>, settings: IndexMeta) -> Result<Option<Self>> {
        let Some(options) = options else {
            return Ok(None);
        };
        let place = options.place()?;
        let created_folder = place.as_local().is_some_and(|dir| !dir.exists());
        let index = Index::open(&place, options.update).await?;
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
            part: self.staging.as_ref().map(|s| self.index.staged_place(s)),
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
            self.index.place,
            pretty(&taken)?
        )))
    }

    /// A failed run: removes the batch's staged part (on a store; a local one goes when
    /// dropped).
    pub async fn abandon(mut self) {
        if let Some(staging) = self.staging.take() {
            self.index.abandon(&staging).await;
        }
    }
}

impl Drop for IndexedBatch {
    fn drop(&mut self) {
        // A run that made the index folder and failed leaves no empty folder behind (the
        // staged part goes first; removing a folder that is not empty fails, harmlessly).
        if self.created_folder
            && let Some(dir) = self.index.place.as_local()
        {
            drop(self.staging.take());
            let _ = std::fs::remove_dir(dir);
        }
    }
}
