//! One error type for the crate. Every variant that comes from user data says which file,
//! column or row it is about; the CLI maps variants to exit codes.

use std::path::{Path, PathBuf};

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use datafusion::parquet::errors::ParquetError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line asks for something that cannot work (exit code 2).
    #[error("{0}")]
    Usage(String),

    /// The input data is not what the job needs: a column, a type, an id.
    #[error("{0}")]
    Input(String),

    /// A file or folder could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A Parquet file could not be written (or read outside a query); `path` names it.
    #[error("{}: {source}", path.display())]
    Parquet {
        path: PathBuf,
        #[source]
        source: ParquetError,
    },

    /// Arrow failed on data outside a query (building a table, formatting or writing a result);
    /// `context` says what was being done.
    #[error("{context}: {source}")]
    Arrow {
        context: String,
        #[source]
        source: ArrowError,
    },

    /// A JSON file neardup keeps (summary.json, index.json, batch.json) could not be read or
    /// written; `path` names it.
    #[error("{}: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    /// An object store refused or failed a request; `url` names the object or prefix (never a
    /// credential: they come from the environment, not the URL).
    #[error("{url}: {source}")]
    Store {
        url: String,
        #[source]
        source: object_store::Error,
    },

    /// A server (`neardup scheduler`, `neardup executor`) cannot listen on its address.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: String,
        #[source]
        source: std::io::Error,
    },

    /// Ballista's scheduler or executor failed; `context` says which, and where.
    #[error("{context}: {source}")]
    Cluster {
        context: String,
        #[source]
        source: Box<ballista_core::error::BallistaError>,
    },

    /// delta-rs failed to read or commit a Delta table; `table` names it.
    #[error("Delta table {table}: {source}")]
    Delta {
        table: String,
        #[source]
        source: Box<deltalake_core::DeltaTableError>,
    },

    /// A bug in neardup itself (a stage that references an unknown parameter, say).
    #[error("internal error (a bug in neardup): {0}")]
    Internal(String),

    /// A query or stage failed inside DataFusion; `context` names the stage, `hint` (empty or
    /// starting with "; ") says what a full disk or the memory limit means for the user.
    #[error("{context}: {source}{hint}")]
    Query {
        context: String,
        #[source]
        source: Box<DataFusionError>,
        hint: String,
    },
}

impl Error {
    /// A query's error with `hint` (from DataFusion's message) where it has none yet; any other
    /// error as it is.
    pub fn with_query_hint(self, hint: impl FnOnce(&str) -> Option<String>) -> Self {
        match self {
            Error::Query {
                context,
                source,
                hint: given,
            } => {
                let hint = match given.is_empty() {
                    true => hint(&source.to_string()).unwrap_or(given),
                    false => given,
                };
                Error::Query {
                    context,
                    source,
                    hint,
                }
            }
            other => other,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn parquet(path: impl Into<PathBuf>, source: ParquetError) -> Self {
        Error::Parquet {
            path: path.into(),
            source,
        }
    }

    pub fn arrow(context: impl Into<String>, source: ArrowError) -> Self {
        Error::Arrow {
            context: context.into(),
            source,
        }
    }

    pub fn cluster(
        context: impl Into<String>,
        source: ballista_core::error::BallistaError,
    ) -> Self {
        Error::Cluster {
            context: context.into(),
            source: Box::new(source),
        }
    }

    pub fn json(path: &Path, source: serde_json::Error) -> Self {
        Error::Json {
            path: path.to_path_buf(),
            source,
        }
    }

    /// A failed COPY names the folder it was writing when that folder's disk is full
    /// (object_store's message names neither the file nor the folder).
    pub fn writing(self, destination: &str) -> Self {
        match self {
            Error::Query {
                context,
                source,
                hint,
            } => {
                let hint = write_hint(&source.to_string(), destination).unwrap_or(hint);
                Error::Query {
                    context,
                    source,
                    hint,
                }
            }
            other => other,
        }
    }

    /// Process exit code: 2 for usage errors, 1 for everything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            _ => 1,
        }
    }
}

/// Adds the name of the step that failed to a DataFusion (or Arrow) error, keeping it as the
/// source.
pub trait QueryContext<T> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> QueryContext<T> for std::result::Result<T, ArrowError> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::arrow(context(), source))
    }
}

impl<T> QueryContext<T> for std::result::Result<T, DataFusionError> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| {
            let hint = resource_hint(&source.to_string(), &std::env::temp_dir());
            Error::Query {
                context: context(),
                source: Box::new(source),
                hint,
            }
        })
    }
}

const NO_SPACE: &str = "No space left on device";

/// object_store's local file system, which every COPY writes through; DataFusion's spill
/// files are written with `std::fs` in the disk manager's temporary folder instead.
const OBJECT_STORE_WRITE: &str = "LocalFileSystem";

/// What a DataFusion error means when it is about a full disk or the memory limit, and what to
/// do; empty otherwise. `temp_dir` is where DataFusion's disk manager spills (its default is
/// `std::env::temp_dir()`, that is TMPDIR).
pub fn resource_hint(message: &str, temp_dir: &std::path::Path) -> String {
    if message.contains(NO_SPACE) {
        if message.contains(OBJECT_STORE_WRITE) {
            return "; a file being written is on a full disk: free space on it, or write to \
                    a folder on a larger disk"
                .into();
        }
        return format!(
            "; the temporary folder {} is full: DataFusion spills sorts, aggregates and joins \
             there beyond --memory-limit (on a cluster, to each executor's --work-dir). Free \
             space there, set TMPDIR to a folder on a larger disk, or raise --memory-limit",
            temp_dir.display()
        );
    }
    if message.contains("Resources exhausted") {
        return "; --memory-limit is too small for this stage: raise it, or lower --threads \
                (each partition holds buffers of its own)"
            .into();
    }
    String::new()
}

/// The hint for a COPY into `destination` that failed because that disk is full.
fn write_hint(message: &str, destination: &str) -> Option<String> {
    (message.contains(NO_SPACE) && message.contains(OBJECT_STORE_WRITE)).then(|| {
        format!(
            "; the disk holding {destination} is full: free space there, or write to a folder \
             on a larger disk"
        )
    })
}

/// An error and its sources, one after another (tonic's and rustls' say little on their own);
/// a cause that the text already quotes is not repeated.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        source = cause.source();
    }
    text
}

/// Most characters of a user's value a message echoes.
pub const ECHO_LIMIT: usize = 200;

/// A value as a message echoes it: whole up to `ECHO_LIMIT` characters, else its start and how
/// many characters were left out (a 120 KB option string is not printed back whole).
pub fn echo(value: &str) -> String {
    match value.char_indices().nth(ECHO_LIMIT) {
        None => value.to_string(),
        Some((end, _)) => format!(
            "{}… ({} more characters)",
            &value[..end],
            value[end..].chars().count()
        ),
    }
}

/// `echo` in double quotes with Rust's escapes, as `{:?}` shows a short value.
pub fn echo_quoted(value: &str) -> String {
    match value.char_indices().nth(ECHO_LIMIT) {
        None => format!("{value:?}"),
        Some((end, _)) => format!(
            "\"{}…\" ({} more characters)",
            value[..end].escape_debug(),
            value[end..].chars().count()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_when_echoed() {
        assert_eq!(echo("mode=x"), "mode=x");
        assert_eq!(echo_quoted("a\"b"), "\"a\\\"b\"");
        let long = "é".repeat(ECHO_LIMIT + 5);
        let shown = echo(&long);
        assert!(shown.starts_with(&"é".repeat(ECHO_LIMIT)), "{shown}");
        assert!(shown.ends_with("… (5 more characters)"), "{shown}");
        let quoted = echo_quoted(&"x".repeat(120_000));
        assert!(quoted.ends_with("…\" (119800 more characters)"), "{quoted}");
        assert!(quoted.len() < 300);
        assert_eq!(echo(&"y".repeat(ECHO_LIMIT)), "y".repeat(ECHO_LIMIT));
    }

    #[test]
    fn full_disks_and_the_memory_limit_are_explained() {
        let temp = std::path::Path::new("/scratch/tmp");
        let spill = "Arrow error: Io error: IO error: No space left on device (os error 28)";
        let hint = resource_hint(spill, temp);
        assert!(
            hint.contains("/scratch/tmp") && hint.contains("TMPDIR"),
            "{hint}"
        );
        let copy = "IO error: Generic LocalFileSystem error: Unable to copy data to file: No \
                    space left on device (os error 28)";
        assert!(!resource_hint(copy, temp).contains("/scratch/tmp"));
        let named = write_hint(copy, "/out/.o.neardup-staging-1/pairs/").unwrap();
        assert!(
            named.contains("/out/.o.neardup-staging-1/pairs/"),
            "{named}"
        );
        assert_eq!(write_hint(spill, "/out/"), None);
        let memory = "Resources exhausted: Failed to allocate additional 72.7 KB";
        assert!(resource_hint(memory, temp).contains("--memory-limit"));
        assert_eq!(resource_hint("Parquet error: bad page", temp), "");
    }
}
