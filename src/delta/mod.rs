//! Delta Lake tables, through delta-rs (`deltalake-core`): a corpus read from a table at one of
//! its versions (`input`), the outputs written as tables with one commit each (`output`), what
//! an append keeps true across runs (`append`), and the column types both
//! sides agree on (`types`).
//!
//! A table is opened with the store the rest of the job uses (`storage::registry()`, set up
//! from the environment), so a Delta table on `s3://` needs nothing the Parquet tables there do
//! not. A commit is delta-rs's: the next `_delta_log/NNNNNNNNNNNNNNNNNNNN.json`, written only if
//! absent (a conditional PUT on a store), so of two writers of one version exactly one lands.

pub mod append;
pub mod input;
pub mod output;
pub mod types;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use datafusion::execution::object_store::ObjectStoreRegistry;
use deltalake_core::logstore::{LogStoreRef, StorageConfig, default_logstore};
use deltalake_core::{DeltaTable, DeltaTableError};
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use url::Url;

use crate::error::{Error, Result};
use crate::storage::{Place, Remote};

/// The folder of a table's commits, whose presence makes a folder a Delta table.
pub const LOG_DIR: &str = "_delta_log";

/// Which version of a table to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    Latest,
    Version(u64),
    /// The version that was the latest at this time (by the commit files' modification times).
    Timestamp(DateTime<Utc>),
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Latest => write!(f, "its latest version"),
            At::Version(v) => write!(f, "version {v}"),
            At::Timestamp(t) => write!(f, "timestamp {}", t.to_rfc3339()),
        }
    }
}

/// The table's location as delta-rs takes it: a URL ending in '/'.
pub fn table_url(place: &Place) -> Result<Url> {
    match place {
        Place::Local(path) => {
            let path = std::path::absolute(path).map_err(|e| Error::io(path, e))?;
            Url::from_directory_path(&path).map_err(|()| {
                Error::Usage(format!("{}: not a path delta-rs can open", path.display()))
            })
        }
        Place::Remote(url) => Ok(Url::parse(&place.folder()).unwrap_or_else(|_| url.clone())),
    }
}

/// The log store of the table at `place`: delta-rs's default one (commits by put-if-absent)
/// over the store the job reads and writes that place with.
pub fn log_store(place: &Place) -> Result<LogStoreRef> {
    let url = table_url(place)?;
    let root: Arc<dyn ObjectStore> = match place {
        Place::Local(_) => Arc::new(LocalFileSystem::new()),
        Place::Remote(remote) => crate::storage::registry()
            .get_store(remote)
            .map_err(|e| Error::Input(e.to_string()))?,
    };
    let config = StorageConfig::default();
    let prefixed: Arc<dyn ObjectStore> = Arc::from(
        config
            .decorate_store(Arc::clone(&root), &url)
            .map_err(|e| delta_error(place, e))?,
    );
    Ok(default_logstore(prefixed, root, &url, &config))
}

/// Whether `place` holds a Delta table: a `_delta_log/` folder with at least one file.
pub async fn is_table(place: &Place) -> Result<bool> {
    match place {
        Place::Local(path) => Ok(path.join(LOG_DIR).is_dir()),
        Place::Remote(url) => {
            let log = Remote::open(url)?.child(LOG_DIR);
            Ok(!log.list().await?.is_empty())
        }
    }
}

/// The table at `place`, loaded at `at`; `None` when there is no table there (no commit yet).
pub async fn open(place: &Place, at: &At) -> Result<Option<DeltaTable>> {
    // delta-rs refuses a local folder that does not exist rather than finding no table there.
    if let Place::Local(path) = place
        && !path.join(LOG_DIR).is_dir()
    {
        return Ok(None);
    }
    let mut table = DeltaTable::new(log_store(place)?);
    let loaded = match at {
        At::Latest => table.load().await,
        At::Version(version) => table.load_version(*version).await,
        At::Timestamp(time) => table.load_with_datetime(*time).await,
    };
    match loaded {
        Ok(()) => Ok(Some(table)),
        Err(DeltaTableError::NotATable(_)) => Ok(None),
        Err(e) if *at != At::Latest => {
            let message = e.to_string();
            let hint = versions_hint(place).await;
            Err(Error::Input(format!(
                "Delta table {place}: cannot read {at}: {message}{hint}"
            )))
        }
        Err(e) => Err(delta_error(place, e)),
    }
}

/// The loaded table's version (a loaded table always has one).
pub fn version_of(table: &DeltaTable) -> u64 {
    table.version().unwrap_or(0)
}

/// "; its versions are 0 to N" for a message about a version that cannot be read.
async fn versions_hint(place: &Place) -> String {
    let Ok(store) = log_store(place) else {
        return String::new();
    };
    let table = DeltaTable::new(store);
    match table.get_latest_version().await {
        Ok(latest) => format!(" (its latest version is {latest})"),
        Err(_) => String::new(),
    }
}

/// A delta-rs error about the table at `place`.
pub fn delta_error(place: &Place, source: DeltaTableError) -> Error {
    Error::Delta {
        table: place.to_string(),
        source: Box::new(source),
    }
}
