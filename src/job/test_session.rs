//! Sessions for the tests of the stages that run in this process (and fall back to SQL): two
//! partitions, a memory pool of a given size, the work tables' options, and tables read back
//! as text to compare the two ways.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, UInt32Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::catalog::MemTable;
use datafusion::execution::memory_pool::GreedyMemoryPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::engine::sql::quote_literal;
use crate::udf::FingerprintColumn;

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

/// Registers `columns` as table `name` in two partitions: the first half of the rows and the
/// rest.
pub fn register_in_halves(
    ctx: &SessionContext,
    name: &str,
    fields: Vec<Field>,
    columns: Vec<ArrayRef>,
) {
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    let all = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
    let half = all.num_rows() / 2;
    let halves = vec![
        vec![all.slice(0, half)],
        vec![all.slice(half, all.num_rows() - half)],
    ];
    let table = MemTable::try_new(schema, halves).unwrap();
    ctx.register_table(name, Arc::new(table)).unwrap();
}

/// A column of fingerprints, NULL where `values` has none.
pub fn fingerprint_column<F: FingerprintColumn>(values: &[Option<F>]) -> ArrayRef {
    let present: Vec<F> = values.iter().flatten().copied().collect();
    let dense = F::column(&present).unwrap();
    let mut next = 0u32;
    let at: Vec<Option<u32>> = values
        .iter()
        .map(|v| {
            v.map(|_| {
                next += 1;
                next - 1
            })
        })
        .collect();
    datafusion::arrow::compute::take(&dense, &UInt32Array::from(at), None).unwrap()
}

/// The documents of a case, registered as `documents` (as sql/02_documents.sql has them, no
/// `keep_key`) and counted by fingerprint as `fingerprints`, two partitions each.
pub struct CaseDocuments<'a, F> {
    pub ids: ArrayRef,
    pub simhashes: &'a [Option<F>],
    pub batches: Vec<i64>,
    pub input_order: Vec<i64>,
    pub fresh: Vec<bool>,
}

impl<F: FingerprintColumn> CaseDocuments<'_, F> {
    pub fn register(self, ctx: &SessionContext) {
        let n = self.simhashes.len();
        let fingerprint = |name: &str| Field::new(name, F::data_type(), true);
        register_in_halves(
            ctx,
            "documents",
            vec![
                Field::new("id", self.ids.data_type().clone(), false),
                fingerprint("simhash"),
                Field::new("batch", DataType::Int64, false),
                Field::new("input_order", DataType::Int64, false),
                Field::new("fresh", DataType::Boolean, false),
                Field::new("keep_key", DataType::Int64, true),
            ],
            vec![
                self.ids,
                fingerprint_column(self.simhashes),
                Arc::new(Int64Array::from(self.batches)),
                Arc::new(Int64Array::from(self.input_order)),
                Arc::new(BooleanArray::from(self.fresh)),
                Arc::new(Int64Array::from(vec![None; n])),
            ],
        );
        let mut sorted: Vec<F> = self.simhashes.iter().flatten().copied().collect();
        sorted.sort_unstable();
        let runs: Vec<&[F]> = sorted.chunk_by(|a, b| a == b).collect();
        let values: Vec<F> = runs.iter().map(|run| run[0]).collect();
        register_in_halves(
            ctx,
            "fingerprints",
            vec![
                fingerprint("simhash"),
                Field::new("document_count", DataType::Int64, false),
            ],
            vec![
                F::column(&values).unwrap(),
                Arc::new(Int64Array::from_iter_values(
                    runs.iter().map(|r| r.len() as i64),
                )),
            ],
        );
    }
}
