//! neardup: near-duplicate documents in large text corpora with SimHash on Apache DataFusion.
//!
//! The job is SQL (`sql/*.sql`, in order) over Parquet, with the SQL functions of `udf` and one
//! step that is not relational (the clustering). The folders follow the flow of a command
//! (docs/ARCHITECTURE.md):
//! `cli` parses what the user typed into a `job::JobConfig` or a command's options; `job` runs the
//! stage sequence, `index` keeps the batches seen before, `commands` holds the other commands;
//! `engine` is what every one of them runs on (sessions, the SQL runner, staged outputs); `delta`
//! reads and writes Delta Lake tables.
//! `text`, `fingerprint`, `plan` and `planner` are the arithmetic, free of Arrow; `prefetch` a
//! cache hint shared by the hot loops.

pub mod cli;
pub mod commands;
pub mod delta;
pub mod digest;
pub mod engine;
pub mod error;
pub mod fingerprint;
pub mod index;
pub mod input;
pub mod job;
pub mod logging;
pub mod plan;
pub mod planner;
pub mod prefetch;
pub mod progress;
pub mod rng;
pub mod storage;
pub mod terminal;
pub mod text;
pub mod udf;

pub use error::{Error, Result};
