//! The memory pool of `--memory-limit`: DataFusion's fair pool, except that the operators that
//! spill never take the last quarter of it.
//!
//! In DataFusion's `FairSpillPool` the operators that can spill (sorts, aggregates) share the
//! whole pool, and those that cannot (a Parquet writer's column buffers, a hash join's build
//! side, a sort's merge reserve) get only what the spillers left. An aggregate over many
//! fingerprints fills its share, nothing asks it to spill, and the writer of its own output then
//! fails for want of a few hundred kilobytes. Here spillers share at most three quarters of the
//! limit, so the rest is there for the others; spillers spill sooner instead.

use std::fmt;
use std::sync::Mutex;

use datafusion::common::human_readable_size;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

/// The share of the limit that operators which cannot spill always find free of spillers.
const UNSPILLABLE_SHARE: usize = 4;

#[derive(Debug)]
pub struct ReservingFairPool {
    limit: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    spillers: usize,
    spillable: usize,
    unspillable: usize,
}

impl ReservingFairPool {
    pub fn new(limit: usize) -> Self {
        ReservingFairPool {
            limit,
            state: Mutex::new(State::default()),
        }
    }

    /// Bytes the spillers may hold together.
    fn spillers_limit(&self) -> usize {
        self.limit - self.limit / UNSPILLABLE_SHARE
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while the lock was held left plain counters behind: still usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn refuse(
        &self,
        reservation: &MemoryReservation,
        additional: usize,
        available: usize,
    ) -> DataFusionError {
        DataFusionError::ResourcesExhausted(format!(
            "Failed to allocate additional {} for {} with {} already allocated for this \
             reservation - {} remain available for the total memory pool: {self}",
            human_readable_size(additional),
            reservation.consumer().name(),
            human_readable_size(reservation.size()),
            human_readable_size(available),
        ))
    }
}

impl fmt::Display for ReservingFairPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}(pool_size: {})",
            self.name(),
            human_readable_size(self.limit)
        )
    }
}

impl MemoryPool for ReservingFairPool {
    fn name(&self) -> &str {
        "fair, a quarter kept from spillers"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            self.state().spillers += 1;
        }
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            let mut state = self.state();
            state.spillers = state.spillers.saturating_sub(1);
        }
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        let mut state = self.state();
        match reservation.consumer().can_spill() {
            true => state.spillable += additional,
            false => state.unspillable += additional,
        }
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        let mut state = self.state();
        match reservation.consumer().can_spill() {
            true => state.spillable = state.spillable.saturating_sub(shrink),
            false => state.unspillable = state.unspillable.saturating_sub(shrink),
        }
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        let mut state = self.state();
        if reservation.consumer().can_spill() {
            // Each spiller gets an equal part of what the others left, within its share.
            let for_spillers = self
                .spillers_limit()
                .min(self.limit.saturating_sub(state.unspillable));
            let each = for_spillers / state.spillers.max(1);
            if reservation.size() + additional > each {
                return Err(self.refuse(reservation, additional, each));
            }
            state.spillable += additional;
        } else {
            let free = self
                .limit
                .saturating_sub(state.spillable + state.unspillable);
            if additional > free {
                return Err(self.refuse(reservation, additional, free));
            }
            state.unspillable += additional;
        }
        Ok(())
    }

    fn reserved(&self) -> usize {
        let state = self.state();
        state.spillable + state.unspillable
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn spillers_leave_a_quarter_for_the_others() {
        let pool: Arc<dyn MemoryPool> = Arc::new(ReservingFairPool::new(1000));
        let aggregate = MemoryConsumer::new("aggregate")
            .with_can_spill(true)
            .register(&pool);
        // One spiller alone gets three quarters, not the whole pool.
        assert!(aggregate.try_grow(751).is_err());
        aggregate.try_grow(750).unwrap();
        // A writer, which cannot spill, still finds the last quarter.
        let writer = MemoryConsumer::new("writer").register(&pool);
        writer.try_grow(250).unwrap();
        assert!(writer.try_grow(1).is_err());
        assert_eq!(pool.reserved(), 1000);
        // Two spillers split what is theirs; memory the others hold counts against it.
        aggregate.shrink(750);
        let sort = MemoryConsumer::new("sort")
            .with_can_spill(true)
            .register(&pool);
        assert!(sort.try_grow(376).is_err());
        sort.try_grow(375).unwrap();
        writer.shrink(250);
        writer.try_grow(600).unwrap();
        // 400 left for spillers, 200 each: the sort already holds 375.
        assert!(sort.try_grow(1).is_err());
        aggregate.try_grow(25).unwrap();
        drop(sort);
        aggregate.try_grow(375).unwrap();
        assert!(aggregate.try_grow(1).is_err());
        let message = writer.try_grow(1).unwrap_err().to_string();
        assert!(
            message.contains("Resources exhausted") && message.contains("writer"),
            "{message}"
        );
    }
}
