//! Stage 0's quick look at the ids in this process: one scan of the id column, each id hashed to
//! 64 bits and the hashes sorted (sql/00_ids_hashed.sql, `crate::job::value_buckets`). Without
//! a NULL and without two equal hashes every id is present and unique, which is what almost
//! every run finds, and the queries that would name the bad ones need not run. A hash grouping
//! of every id (what sql/00_ids_repeated.sql is) took 0.27-0.39 s of 4M fingerprints' `match`
//! and held a table of every id (4.2 GiB at 100M); the hashes are 8 bytes an id.

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::hash_utils::{RandomState, create_hashes};
use datafusion::error::Result as DataFusionResult;
use datafusion::prelude::SessionContext;

use crate::engine::sql::{Bindings, stage_frame};
use crate::engine::stages;
use crate::error::{QueryContext, Result};
use crate::job::value_buckets;

/// What the scan found.
#[derive(Debug, PartialEq, Eq)]
pub enum Look {
    /// Every id present and unique.
    Clean,
    /// A NULL, two equal hashes (a repeated id, or once in a great while two ids whose hashes
    /// agree), or no memory for the hashes: the exact queries must tell.
    Unsure,
}

/// Scans the ids of `corpus`: `Clean` when none is NULL and no two hash alike.
pub async fn look(ctx: &SessionContext, bindings: &Bindings) -> Result<Look> {
    let name = stages::IDS_HASHED.name;
    let frame = stage_frame(ctx, &stages::IDS_HASHED, bindings).await?;
    // Without room for the hashes the queries run instead: their grouping can spill.
    let Some(hashes) = value_buckets::gather(ctx, frame, name, "id check", hash_ids).await? else {
        return Ok(Look::Unsure);
    };
    let repeats = |sorted: &[u64]| Ok(sorted.windows(2).any(|pair| pair[0] == pair[1]));
    let repeated = value_buckets::sort_each(hashes.buckets, repeats)
        .await
        .context(|| name.to_string())?;
    Ok(if repeated.into_iter().any(|found| found) {
        Look::Unsure
    } else {
        Look::Clean
    })
}

/// Each id's 64-bit hash into `hashes`; false at a NULL id.
fn hash_ids(batch: &RecordBatch, hashes: &mut Vec<u64>) -> DataFusionResult<bool> {
    let ids = batch.column(0);
    // Logical: a column of the Null type has no null buffer, and every row is NULL.
    if ids.logical_null_count() > 0 {
        return Ok(false);
    }
    let start = hashes.len();
    hashes.resize(start + ids.len(), 0);
    create_hashes([ids], &RandomState::with_seed(0), &mut hashes[start..])?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, Int64Array, NullArray, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::catalog::MemTable;
    use datafusion::execution::memory_pool::GreedyMemoryPool;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::prelude::SessionConfig;

    use super::*;
    use crate::rng::SplitMix64;

    /// A session whose `corpus` is `partitions`, each a list of ids of one column, `id`.
    fn corpus(ctx: &SessionContext, data_type: DataType, partitions: Vec<ArrayRef>) {
        let schema = Arc::new(Schema::new(vec![Field::new("id", data_type, true)]));
        let partitions = partitions
            .into_iter()
            .map(|ids| vec![RecordBatch::try_new(Arc::clone(&schema), vec![ids]).unwrap()])
            .collect();
        let table = MemTable::try_new(schema, partitions).unwrap();
        ctx.register_table("corpus", Arc::new(table)).unwrap();
    }

    fn bindings() -> Bindings {
        let mut bindings = Bindings::default();
        bindings.set("id", "id");
        bindings
    }

    fn strings(ids: &[Option<&str>]) -> ArrayRef {
        Arc::new(StringArray::from(ids.to_vec()))
    }

    async fn look_at(data_type: DataType, partitions: Vec<ArrayRef>) -> Look {
        let ctx = SessionContext::new();
        corpus(&ctx, data_type, partitions);
        look(&ctx, &bindings()).await.unwrap()
    }

    #[tokio::test]
    async fn unique_ids_are_clean_and_a_null_or_a_repeat_is_not() {
        // Hand-checked cases: a repeat within a partition, across partitions, a NULL, none.
        let utf8 = || DataType::Utf8;
        let cases = [
            (
                vec![strings(&[Some("a"), Some("b")]), strings(&[Some("c")])],
                Look::Clean,
            ),
            (
                vec![strings(&[Some("a"), Some("b"), Some("a")])],
                Look::Unsure,
            ),
            (
                vec![strings(&[Some("a"), Some("b")]), strings(&[Some("b")])],
                Look::Unsure,
            ),
            (vec![strings(&[Some("a")]), strings(&[None])], Look::Unsure),
            (vec![strings(&[]), strings(&[])], Look::Clean),
        ];
        for (partitions, expected) in cases {
            let shown = format!("{partitions:?}");
            assert_eq!(look_at(utf8(), partitions).await, expected, "{shown}");
        }
        // One row of an id column of the Null type: NULL, though the array has no null buffer.
        let nulls: ArrayRef = Arc::new(NullArray::new(1));
        assert_eq!(look_at(DataType::Null, vec![nulls]).await, Look::Unsure);
    }

    #[tokio::test]
    async fn random_integer_ids_look_as_a_set_counts_them() {
        // Oracle: whether a HashSet of the ids is as long as the list.
        let mut random = SplitMix64(5);
        for case in 0..40 {
            let range = if case % 2 == 0 { 1 << 40 } else { 3000 };
            let partitions: Vec<Vec<i64>> = (0..1 + random.below(4))
                .map(|_| {
                    (0..random.below(500))
                        .map(|_| random.below(range) as i64)
                        .collect()
                })
                .collect();
            let all: Vec<i64> = partitions.iter().flatten().copied().collect();
            let unique = all.len() == all.iter().collect::<std::collections::HashSet<_>>().len();
            let arrays = partitions
                .into_iter()
                .map(|ids| Arc::new(Int64Array::from(ids)) as ArrayRef)
                .collect();
            let expected = if unique { Look::Clean } else { Look::Unsure };
            assert_eq!(
                look_at(DataType::Int64, arrays).await,
                expected,
                "case {case}"
            );
        }
    }

    #[tokio::test]
    async fn without_memory_for_the_hashes_the_queries_decide() {
        // A pool of 64 bytes holds the hashes of 2 ids, not of 20.
        let names: Vec<String> = (0..20).map(|i| format!("id{i}")).collect();
        let many: Vec<Option<&str>> = names.iter().map(|n| Some(n.as_str())).collect();
        for (ids, expected) in [(&many[..2], Look::Clean), (&many[..], Look::Unsure)] {
            let runtime = RuntimeEnvBuilder::new()
                .with_memory_pool(Arc::new(GreedyMemoryPool::new(64)))
                .build_arc()
                .unwrap();
            let ctx = SessionContext::new_with_config_rt(SessionConfig::new(), runtime);
            corpus(&ctx, DataType::Utf8, vec![strings(ids)]);
            assert_eq!(look(&ctx, &bindings()).await.unwrap(), expected, "{ids:?}");
        }
    }
}
