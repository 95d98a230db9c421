//! The manager in shard mode (see [`crate::shard`]): this replica's membership Lease stands
//! where the leader Lease would (its controllers run while it is held, and its validity is the
//! gate of every reconcile and write), and the sharder campaigns on every replica.

use std::sync::Arc;

use crate::health::check;
use crate::leader::{LeaderElectionError, LeaderElector};
use crate::shard::{Membership, ShardConfig, ShardMetrics, Sharder};

use super::Manager;

impl Manager {
    /// Split the work of this manager's controllers between the replicas of a shard group: each
    /// replica reconciles, and caches, only the objects the group's sharder assigns to it (see
    /// [`crate::shard`]). Replaces leader election (setting both fails when the manager runs).
    ///
    /// Set it before building controllers by hand from [`Manager::wiring`]: controllers see the
    /// shard their wiring had when they were built (those added with [`Manager::controller`]
    /// are wired when the manager runs, so any order works for them).
    #[must_use]
    pub fn shards(mut self, config: ShardConfig) -> Self {
        let membership = config.membership();
        self.wiring.set_shard(Arc::clone(&membership));
        self.shards = Some((config, membership));
        self
    }

    /// Sets up shard mode: installs the membership gate, adds the sharder and the
    /// `shard-member` readiness check; returns the membership elector.
    pub(super) fn start_sharding(
        &mut self,
        config: &ShardConfig,
        membership: Arc<Membership>,
    ) -> Result<Arc<LeaderElector>, LeaderElectionError> {
        let member = Arc::new(LeaderElector::new(
            self.client.clone(),
            config.member_election()?,
        )?);
        let gate = Arc::clone(&member);
        self.wiring.gate().install(move || gate.lease_valid());
        let elector = LeaderElector::new(self.client.clone(), config.sharder_election())?;
        let sharder = Sharder {
            membership,
            elector: Arc::new(elector),
            client: self.client.clone(),
            lease_namespace: config.lease.lease_namespace.clone(),
            lease_duration: config.lease.lease_duration,
            retry_period: config.lease.retry_period,
            metrics: Arc::new(ShardMetrics::new(&config.group)),
        };
        self.runnables.push(Arc::new(Arc::new(sharder)));
        let held = Arc::clone(&member);
        self.readiness.push((
            "shard-member".to_owned(),
            check(move || {
                let valid = held.lease_valid();
                async move {
                    if valid {
                        Ok(())
                    } else {
                        Err("this replica does not hold a valid shard membership lease".to_owned())
                    }
                }
            }),
        ));
        Ok(member)
    }
}
