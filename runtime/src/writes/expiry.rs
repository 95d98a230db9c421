//! Forgetting records nobody will ask for: the write records of [`WriteTracker`](super::WriteTracker)
//! and [`OwnWrites`](super::OwnWrites) are taken when their watch event comes, but a write whose
//! event never comes (a no-op apply returns the version the object already had; a kind no
//! informer watches) must not stay for the life of the process.
//!
//! A map of records is pruned of those older than its bound every [`PRUNE_EVERY`], or sooner
//! when it has doubled since the last pruning, and gives back its table once it is mostly
//! empty: after a start-up burst of 50,000 reconciles the records go within a pruning period of
//! their bound, and so does the table they needed.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// How often a map of records is pruned at most (unless it grows fast).
pub(super) const PRUNE_EVERY: Duration = Duration::from_secs(5);

/// When a map of records was last pruned, and how large it was then.
#[derive(Debug, Default)]
pub(super) struct Pruning {
    at: Option<Instant>,
    len: usize,
}

impl Pruning {
    /// Drops the records of `map` for which `stale` holds, if a pruning is due at `now`; gives
    /// the table's memory back when most of it is empty.
    pub(super) fn prune<K: Eq + Hash, V>(
        &mut self,
        map: &mut HashMap<K, V>,
        now: Instant,
        mut stale: impl FnMut(&V) -> bool,
    ) {
        let due = self
            .at
            .is_none_or(|at| now.duration_since(at) >= PRUNE_EVERY)
            || map.len() > (self.len * 2).max(1024);
        if !due {
            return;
        }
        map.retain(|_, v| !stale(v));
        if map.capacity() > (map.len() * 4).max(64) {
            map.shrink_to(map.len() * 2);
        }
        self.at = Some(now);
        self.len = map.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn records_should_go_within_a_pruning_period_of_their_bound_and_their_table_too() {
        let bound = Duration::from_secs(10);
        let mut pruning = Pruning::default();
        let mut map: HashMap<u32, Instant> = HashMap::new();
        let stale = |now: Instant| move |at: &Instant| now.duration_since(*at) >= bound;
        for i in 0..50_000 {
            map.insert(i, Instant::now());
            pruning.prune(&mut map, Instant::now(), stale(Instant::now()));
        }
        assert_eq!(map.len(), 50_000, "nothing is stale yet");
        let burst_capacity = map.capacity();

        tokio::time::advance(bound + PRUNE_EVERY).await;
        map.insert(50_000, Instant::now());
        pruning.prune(&mut map, Instant::now(), stale(Instant::now()));
        assert_eq!(map.len(), 1, "the burst is forgotten, the new record kept");
        assert!(
            map.capacity() < burst_capacity / 100,
            "the table shrank: {} of {burst_capacity}",
            map.capacity()
        );

        // Not due again before PRUNE_EVERY (unless the map doubles).
        tokio::time::advance(PRUNE_EVERY / 2).await;
        pruning.prune(&mut map, Instant::now(), |_| true);
        assert_eq!(map.len(), 1, "a pruning is due only every PRUNE_EVERY");
        tokio::time::advance(PRUNE_EVERY / 2).await;
        pruning.prune(&mut map, Instant::now(), |_| true);
        assert!(map.is_empty());
    }
}
