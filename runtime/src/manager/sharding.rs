//! The manager in shard mode (see [`crate::shard`]): this replica's membership Lease stands
//! where the leader Lease would (its controllers run while it is held, and its validity is the
//! gate of every reconcile and write), and the sharder campaigns on every replica.

use std::sync::Arc;

use crate::health::check;
use crate::leader::{LeaderElectionError, LeaderElector};
use crate::shard::{Membership, RangeMember, ShardConfig, ShardMetrics, Sharder};

use super::Manager;

impl Manager {
    /// Split the work of this manager's controllers between the replicas of a shard group: each
    /// replica reconciles, and caches, only the objects the group's sharder assigns to it (see
    /// [`crate::shard`]). Replaces leader election (setting both fails when the manager runs).
    ///
    /// Set it before building controllers by hand from [`Manager::wiring`]: controllers see the
    /// shard their wiring had when they were built (those added with [`Manager::controller`]
    /// are wired when the manager runs, so any order works for them). Watchers are not sharded:
    /// a manager with both fails when it runs.
    #[must_use]
    pub fn shards(mut self, config: ShardConfig) -> Self {
        let membership = config.membership();
        self.wiring.set_shard(Arc::clone(&membership));
        self.shards = Some((config, membership));
        self
    }

    /// Sets up shard mode: installs the membership gate, adds the sharder and the
    /// `shard-member` readiness check; returns the membership elector.
    pub(super) async fn start_sharding(
        &mut self,
        config: &ShardConfig,
        membership: Arc<Membership>,
    ) -> Result<Arc<LeaderElector>, LeaderElectionError> {
        if self.watchers > 0 {
            // A watcher handles every event of its kind, on every replica that runs it; it has
            // no worker holding a key that could acknowledge a drain.
            return Err(LeaderElectionError::InvalidConfig(
                "watchers are not sharded: run them in a leader-elected manager of their own"
                    .to_owned(),
            ));
        }
        let member = Arc::new(LeaderElector::new(
            self.client.clone(),
            config.member_election()?,
        )?);
        // Labels or hash ranges: the apiserver says whether it serves shard selectors.
        let mode = crate::shard::decide(
            &self.client,
            &config.lease.lease_namespace,
            config.mode,
            config.lease.lease_duration * 2,
        )
        .await
        .map_err(LeaderElectionError::ShardMode)?;
        membership.set_mode(mode);
        let mode_name = match mode {
            crate::shard::Mode::Labels => "labels",
            crate::shard::Mode::Ranges(_) => "ranges",
        };
        member.annotate(
            [(
                crate::shard::ranges::MODE_ANNOTATION.to_owned(),
                mode_name.to_owned(),
            )]
            .into(),
        );
        if matches!(mode, crate::shard::Mode::Ranges(_)) {
            self.runnables.push(Arc::new(Arc::new(RangeMember {
                membership: Arc::clone(&membership),
                elector: Arc::clone(&member),
                client: self.client.clone(),
                lease_namespace: config.lease.lease_namespace.clone(),
            })));
        }
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
            observed: std::sync::Mutex::default(),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{Api, Client};
    use tokio_util::sync::CancellationToken;

    use crate::leader::LeaderElectionConfig;
    use crate::manager::Manager;
    use crate::shard::ShardConfig;
    use crate::watcher::{WatchContext, Watcher, WatcherController};

    fn offline_client() -> Client {
        // Never contacted: the manager refuses to start first.
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("static url"));
        Client::try_from(config).expect("offline client")
    }

    struct Ignore;

    impl Watcher<ConfigMap> for Ignore {
        type Error = kube::Error;
        async fn add(&self, _: Arc<ConfigMap>, _: &WatchContext) -> Result<(), kube::Error> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn shard_mode_should_refuse_leader_election_and_watchers_with_a_clear_error() {
        let client = offline_client();
        let config = ShardConfig::new("g", "ns").identity("a");
        let both = Manager::new(client.clone())
            .shards(config.clone())
            .leader_election(LeaderElectionConfig::new("l", "ns"));
        let error = both
            .run_until(CancellationToken::new())
            .await
            .expect_err("refused");
        assert!(error.to_string().contains("exclude each other"), "{error}");

        let manager = Manager::new(client.clone()).shards(config);
        let watcher = WatcherController::new("w", manager.wiring(), Api::<ConfigMap>::all(client));
        let error = manager
            .add_watcher(watcher, Ignore)
            .run_until(CancellationToken::new())
            .await
            .expect_err("refused");
        assert!(
            error.to_string().contains("watchers are not sharded"),
            "{error}"
        );
    }
}
