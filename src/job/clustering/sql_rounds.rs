//! Connected components of the fingerprint pairs as SQL rounds (`--clustering sql`), for
//! engines where the pairs must not be collected on one machine (a Ballista cluster). Local runs
//! use union-find (`super::union_find`), which labels the same way: each node with the smallest
//! node of its component.

use crate::storage::Place;

use datafusion::prelude::{ParquetReadOptions, SessionContext};

use crate::engine::sql::{Bindings, count_query_stage, run_stage};
use crate::engine::stages;
use crate::error::{Error, QueryContext, Result};
use crate::job::params::Round;

/// Rounds after which the rounds give up: large-star / small-star needs O(log^2 n), about 40
/// for 2^40 nodes; reaching it means a bug.
pub const MAX_ROUNDS: usize = 200;

/// Computes the components of `fingerprint_pairs` in rounds written under `work`, and registers
/// `fingerprint_components (simhash, component)`, the component being its smallest
/// fingerprint. Against an index (`index` holds the job's bindings) the indexed groups that the
/// batch's fingerprints belong to join the components, and `group_components` names theirs.
/// Returns the rounds it took.
pub async fn sql_components(
    ctx: &SessionContext,
    work: &Place,
    index: Option<&Bindings>,
) -> Result<usize> {
    let folder = |round: usize| work.join(&format!("edges_{round}"));
    let start = folder(0);
    let first = Round {
        edges_out: &start,
        large_out: &start,
        edges_before: "edges_0",
        edges_after: "edges_0",
    };
    match index {
        Some(job) => {
            run_stage(ctx, &stages::COMPONENTS_INDEX_GROUPS, job).await?;
            run_stage(ctx, &stages::COMPONENTS_INDEX_START, &first.bindings()).await?;
        }
        None => run_stage(ctx, &stages::COMPONENTS_START, &first.bindings()).await?,
    }
    register_edges(ctx, &start, "edges_0").await?;
    for round in 1..=MAX_ROUNDS {
        register_edges(ctx, &folder(round - 1), "edges_in").await?;
        let (edges_out, large_out) = (folder(round), work.join(&format!("large_{round}")));
        let (before, after) = (format!("edges_{}", round - 1), format!("edges_{round}"));
        let bindings = Round {
            edges_out: &edges_out,
            large_out: &large_out,
            edges_before: &before,
            edges_after: &after,
        }
        .bindings();
        run_stage(ctx, &stages::COMPONENTS_ROUND, &bindings).await?;
        register_edges(ctx, &large_out, "large_in").await?;
        run_stage(ctx, &stages::COMPONENTS_SMALL, &bindings).await?;
        register_edges(ctx, &edges_out, &after).await?;
        let changed = count_query_stage(ctx, &stages::COMPONENTS_SETTLED, &bindings).await?;
        log::debug!("components: round {round}, {changed} edges changed");
        if changed == 0 {
            let labels = match index {
                Some(_) => &stages::COMPONENTS_INDEX_LABELS,
                None => &stages::COMPONENTS_LABELS,
            };
            run_stage(ctx, labels, &bindings).await?;
            return Ok(round);
        }
    }
    Err(Error::Internal(format!(
        "connected components did not settle in {MAX_ROUNDS} rounds"
    )))
}

/// Registers (or re-registers) `name` as the edges in `folder`.
async fn register_edges(ctx: &SessionContext, folder: &Place, name: &str) -> Result<()> {
    let path = folder.folder();
    let _ = ctx.deregister_table(name);
    ctx.register_parquet(name, &path, ParquetReadOptions::default())
        .await
        .context(|| format!("reading the edges in {path}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{AsArray, RecordBatch, UInt64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema, UInt64Type};
    use datafusion::parquet::arrow::ArrowWriter;

    use super::*;
    use crate::engine::ballista::{Cluster, cluster_context};
    use crate::rng::SplitMix64;

    /// The SQL rounds' labels for `edges` in `ctx`, sorted by node. The edges are a Parquet
    /// file, which a cluster's executors read as a local session does.
    async fn sql_labels(ctx: &SessionContext, edges: &[(u64, u64)]) -> (Vec<(u64, u64)>, usize) {
        let work = tempfile::tempdir().unwrap();
        let schema = Arc::new(Schema::new(vec![
            // Declared non-null: the rounds must not depend on how the pairs were declared.
            Field::new("simhash_a", DataType::UInt64, false),
            Field::new("simhash_b", DataType::UInt64, false),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(UInt64Array::from_iter_values(edges.iter().map(|e| e.0))),
                Arc::new(UInt64Array::from_iter_values(edges.iter().map(|e| e.1))),
            ],
        )
        .unwrap();
        let file = work.path().join("pairs.parquet");
        let mut writer =
            ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let _ = ctx.deregister_table("fingerprint_pairs");
        ctx.register_parquet(
            "fingerprint_pairs",
            file.to_str().unwrap(),
            ParquetReadOptions::default(),
        )
        .await
        .unwrap();
        let _ = ctx.deregister_table("fingerprint_components");
        let rounds = sql_components(ctx, &Place::Local(work.path().to_path_buf()), None)
            .await
            .unwrap();
        let batches = ctx
            .sql("SELECT simhash, component FROM fingerprint_components")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let mut labels = Vec::new();
        for b in &batches {
            let (n, l) = (
                b.column(0).as_primitive::<UInt64Type>(),
                b.column(1).as_primitive::<UInt64Type>(),
            );
            labels.extend((0..b.num_rows()).map(|i| (n.value(i), l.value(i))));
        }
        labels.sort_unstable();
        (labels, rounds)
    }

    /// Node ids in a random order, so that labels cannot follow the shape by accident.
    fn shuffled(n: usize, rng: &mut SplitMix64) -> Vec<u64> {
        let mut ids: Vec<u64> = (0..n as u64).map(|i| i * 7919 + 13).collect();
        for i in (1..ids.len()).rev() {
            ids.swap(i, rng.below(i + 1));
        }
        ids
    }

    /// A chain, a star, many small components, one giant random component and no edges.
    fn graphs() -> Vec<(&'static str, Vec<(u64, u64)>)> {
        let mut rng = SplitMix64(0xCC);
        let mut graphs: Vec<(&str, Vec<(u64, u64)>)> = Vec::new();
        let ids = shuffled(3000, &mut rng);
        graphs.push(("chain", ids.windows(2).map(|w| (w[0], w[1])).collect()));
        let ids = shuffled(1001, &mut rng);
        graphs.push((
            "star",
            ids[1..].iter().map(|&leaf| (ids[0], leaf)).collect(),
        ));
        let ids = shuffled(2000, &mut rng);
        let mut small = Vec::new();
        for part in ids.chunks(4) {
            small.extend(part.windows(2).map(|w| (w[0], w[1])));
        }
        graphs.push(("many small", small));
        let ids = shuffled(2000, &mut rng);
        let giant = (0..5000)
            .map(|_| (ids[rng.below(ids.len())], ids[rng.below(ids.len())]))
            .filter(|(a, b)| a != b)
            .collect();
        graphs.push(("giant", giant));
        graphs.push(("empty", Vec::new()));
        graphs
    }

    async fn rounds_equal_union_find(ctx: &SessionContext, place: &str) {
        for (name, edges) in graphs() {
            let expected =
                crate::job::clustering::union_find::connected_components(edges.iter().copied());
            let (labels, rounds) = sql_labels(ctx, &edges).await;
            assert_eq!(labels, expected, "{name} ({place})");
            assert!(rounds <= 20, "{name} ({place}): {rounds} rounds");
        }
    }

    #[tokio::test]
    async fn sql_rounds_equal_union_find_on_chains_stars_small_and_giant_components() {
        let ctx = crate::engine::session::session_context().unwrap();
        rounds_equal_union_find(&ctx, "local").await;
    }

    /// The same rounds as Ballista jobs: planned by the client, decoded by the scheduler and
    /// run by an executor (in this process), edges shuffled between stages.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sql_rounds_on_a_ballista_cluster_equal_union_find() {
        let config = datafusion::prelude::SessionConfig::new().with_target_partitions(2);
        let ctx = cluster_context(&Cluster::Standalone, config, &Default::default(), true)
            .await
            .unwrap();
        rounds_equal_union_find(&ctx, "standalone cluster").await;
    }
}
