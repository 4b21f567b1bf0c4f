//! Integration tests, one binary (each test binary links DataFusion, so there is only one).

mod azure;
mod azurite;
mod cluster;
mod cluster_failures;
mod cluster_security;
mod common;
mod delta;
mod end_to_end;
mod errors;
mod eval_scoring;
mod evaluation;
mod exactness;
mod features;
mod help;
mod hostile_input;
mod hostile_output;
mod incremental;
mod index_on_store;
mod messages;
mod object_store;
mod processes;
mod query_input;
mod robustness;
mod s3;
mod verification;
