//! The job's own work between its SQL statements (union-find's sort of the pairs' ends, the
//! groups' sort of their members, the map of the paired documents) on every core the session
//! has: a rayon pool of as many threads as the session's partitions, so `--threads` bounds it as
//! it bounds DataFusion. On one core these sorts took 0.77 s of a ten-million-document run, the
//! other core idle (docs/BENCHMARKS.md, "The sorts between the statements on every core").

use datafusion::prelude::SessionContext;

use crate::error::{Error, Result};

/// Shards per core of a map that every core fills at once (verification's sketches, the held
/// documents): with several per core, two cores seldom want the same shard, and a core that
/// drew a full one does not finish far behind the others.
const SHARDS_PER_CORE: usize = 4;

/// Bits of a shard's number in such a map for `cores` cores: `SHARDS_PER_CORE` a core, rounded
/// up to a power of two so that a shard is a fixed number of a fingerprint's bits.
pub fn shard_bits(cores: usize) -> u32 {
    (SHARDS_PER_CORE * cores.max(1))
        .next_power_of_two()
        .trailing_zeros()
}

/// Runs `work` on a pool of the session's `target_partitions` threads: rayon's parallel
/// iterators and sorts inside it use them. It runs off the async runtime's workers (on a
/// blocking thread), since it holds its thread until the work is done.
pub async fn on_every_core<R: Send + 'static>(
    ctx: &SessionContext,
    what: &str,
    work: impl FnOnce() -> R + Send + 'static,
) -> Result<R> {
    let threads = ctx.copied_config().target_partitions().max(1);
    let what = what.to_string();
    let failed = |e: &dyn std::fmt::Display| Error::Internal(format!("{what}: {e}"));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("neardup-cores-{i}"))
        .build()
        .map_err(|e| failed(&e))?;
    tokio::task::spawn_blocking(move || pool.install(work))
        .await
        .map_err(|e| failed(&e))
}

#[cfg(test)]
mod tests {
    use rayon::prelude::*;

    use super::*;

    #[test]
    fn four_shards_a_core_rounded_up_to_a_power_of_two() {
        assert_eq!(shard_bits(0), 2);
        assert_eq!(shard_bits(1), 2);
        assert_eq!(shard_bits(2), 3);
        assert_eq!(shard_bits(3), 4);
        assert_eq!(shard_bits(32), 7);
    }

    #[tokio::test]
    async fn the_pool_has_the_sessions_threads() {
        for threads in [1, 3] {
            let config = datafusion::prelude::SessionConfig::new().with_target_partitions(threads);
            let ctx = SessionContext::new_with_config(config);
            let mut values: Vec<u64> = (0..100_000u64).rev().collect();
            let (pool_threads, sorted) = on_every_core(&ctx, "sorting", move || {
                values.par_sort_unstable();
                (rayon::current_num_threads(), values)
            })
            .await
            .unwrap();
            assert_eq!(pool_threads, threads);
            assert!(sorted.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(sorted.len(), 100_000);
        }
    }
}
