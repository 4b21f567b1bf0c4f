//! neardup: near-duplicate documents in large text corpora with 64-bit SimHash on Apache
//! DataFusion.
//!
//! The job is SQL (`sql/*.sql`) over Parquet, with three scalar functions (`udf`) and one step
//! that is not relational (`cluster`). `job` runs it, `query` answers SQL over its outputs.

pub mod cli;
pub mod cluster;
pub mod components;
pub mod digest;
pub mod distributed;
pub mod error;
pub mod eval;
pub mod fingerprint;
pub mod generate;
pub mod index;
pub mod input;
pub mod job;
pub mod logging;
pub mod output;
pub mod pipeline;
pub mod plan;
pub mod planner;
pub mod progress;
pub mod query;
pub mod summary;
pub mod synthetic;
pub mod text;
pub mod udf;

pub use error::{Error, Result};
