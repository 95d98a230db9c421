//! The shard metrics, served with the manager's on `/metrics`:
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `kubeforge_shard_owned_objects` | `group`, `member`, `kind` | objects of the kind this replica holds (its informer's, narrowed to its shard) |
//! | `kubeforge_shard_released_total` (counter) | `group`, `member` | drains this replica acknowledged (objects it let go) |
//! | `kubeforge_shard_live_members` | `group` | live members, as the sharder sees them (0 on replicas not sharding) |
//! | `kubeforge_shard_moves_total` | `group`, `move` | the sharder's moves: label patches `assign`, `drain`, `undrain`; by hash ranges, `range` per slot starting to move |
//! | `kubeforge_shard_drain_seconds` | `group` | from a drain mark to its acknowledgement, as the sharder saw it |

use std::time::Duration;

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};

use super::membership::Membership;

/// The shard metrics of one replica.
pub(crate) struct ShardMetrics {
    registry: Registry,
    group: String,
    owned: IntGaugeVec,
    released: IntCounterVec,
    live: IntGaugeVec,
    moves: IntCounterVec,
    drain: HistogramVec,
}

impl ShardMetrics {
    pub(crate) fn new(group: &str) -> Self {
        let registry = Registry::new();
        let owned = gauge(
            &registry,
            "kubeforge_shard_owned_objects",
            "Objects of a sharded kind this replica holds",
            &["group", "member", "kind"],
        );
        let released = counter(
            &registry,
            "kubeforge_shard_released_total",
            "Drains this replica acknowledged",
            &["group", "member"],
        );
        let live = gauge(
            &registry,
            "kubeforge_shard_live_members",
            "Live members as the sharder sees them",
            &["group"],
        );
        let moves = counter(
            &registry,
            "kubeforge_shard_moves_total",
            "The sharder's moves: label patches (assign, drain, undrain), or slots starting to move (range)",
            &["group", "move"],
        );
        let drain = register(
            &registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "kubeforge_shard_drain_seconds",
                    "From a drain mark to its acknowledgement",
                )
                .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
                &["group"],
            ),
        );
        Self {
            registry,
            group: group.to_owned(),
            owned,
            released,
            live,
            moves,
            drain,
        }
    }

    pub(crate) fn set_live(&self, members: usize) {
        self.live
            .with_label_values(&[self.group.as_str()])
            .set(i64::try_from(members).unwrap_or(i64::MAX));
    }

    pub(crate) fn moved(&self, what: &str) {
        self.moves
            .with_label_values(&[self.group.as_str(), what])
            .inc();
    }

    pub(crate) fn drained(&self, took: Duration) {
        self.drain
            .with_label_values(&[self.group.as_str()])
            .observe(took.as_secs_f64());
    }

    /// The families, after reading the replica's owned objects and releases.
    pub(crate) fn gather(&self, membership: &Membership) -> Vec<MetricFamily> {
        let labels = [self.group.as_str(), membership.member()];
        for (kind, count) in membership.owned() {
            self.owned
                .with_label_values(&[labels[0], labels[1], kind.as_str()])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        // A counter of a count kept by the membership: moved up to it (it never goes down).
        let released = self.released.with_label_values(&labels);
        let behind = membership.released().saturating_sub(released.get());
        if behind > 0 {
            released.inc_by(behind);
        }
        self.registry.gather()
    }
}

/// `metric`, registered with `registry` (the definitions are constants: neither step fails).
fn register<M: Collector + Clone + 'static>(
    registry: &Registry,
    metric: Result<M, prometheus::Error>,
) -> M {
    let metric = metric.expect("invariant: valid metric definition");
    registry
        .register(Box::new(metric.clone()))
        .expect("invariant: metric names are unique");
    metric
}

fn gauge(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(registry, IntGaugeVec::new(Opts::new(name, help), labels))
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    register(registry, IntCounterVec::new(Opts::new(name, help), labels))
}
