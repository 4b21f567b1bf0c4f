//! Sessions for the tests of the stages that run in this process (and fall back to SQL): two
//! partitions, a memory pool of a given size, the work tables' options, and tables read back
//! as text to compare the two ways.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::execution::memory_pool::GreedyMemoryPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::engine::sql::quote_literal;

/// A session of two partitions, with a pool of `pool` bytes when given.
pub fn context(pool: Option<usize>) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(2);
    match pool {
        Some(bytes) => {
            let runtime = RuntimeEnvBuilder::new()
                .with_memory_pool(Arc::new(GreedyMemoryPool::new(bytes)))
                .build_arc()
                .unwrap();
            SessionContext::new_with_config_rt(config, runtime)
        }
        None => SessionContext::new_with_config(config),
    }
}

/// The `${work_table_options}` the job binds (LZ4 work tables).
pub fn work_table_options() -> String {
    format!(
        "OPTIONS ({} {})",
        quote_literal("format.compression"),
        quote_literal("lz4_raw")
    )
}

/// The rows of `sql` as text, with their schema.
pub async fn table_text(ctx: &SessionContext, sql: &str) -> (SchemaRef, String) {
    let frame = ctx.sql(sql).await.unwrap();
    let schema = Arc::new(frame.schema().as_arrow().clone());
    let batches = frame.collect().await.unwrap();
    (schema, pretty_format_batches(&batches).unwrap().to_string())
}
