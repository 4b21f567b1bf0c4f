//! One error type for the crate. Every variant that comes from user data says which file,
//! column or row it is about; the CLI maps variants to exit codes.

use std::path::PathBuf;

use datafusion::error::DataFusionError;

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

    /// A bug in neardup itself (a stage that references an unknown parameter, say).
    #[error("internal error (a bug in neardup): {0}")]
    Internal(String),

    /// A query or stage failed inside DataFusion; `context` names the stage.
    #[error("{context}: {source}")]
    Query {
        context: String,
        #[source]
        source: Box<DataFusionError>,
    },
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
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

/// Adds the name of the step that failed to a DataFusion error.
pub trait QueryContext<T> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> QueryContext<T> for std::result::Result<T, DataFusionError> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Query {
            context: context(),
            source: Box::new(source),
        })
    }
}
