//! The commands besides `run` and `match` (which are `crate::job`): each takes its options and
//! returns what it prints.

pub mod cells;
pub mod eval;
pub mod explain;
pub mod generate;
pub mod generate_fingerprints;
pub mod plan;
pub mod query;
pub mod query_files;
pub mod query_shell;
pub mod report;
