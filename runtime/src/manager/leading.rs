//! The manager's leader-elected parts: a [`SingletonRunner`] that the leader elector starts when
//! this replica leads (or at once without leader election), as one runnable of the manager.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use prometheus::proto::MetricFamily;
use tokio_util::sync::CancellationToken;

use crate::BoxError;
use crate::cache::Cache;
use crate::health::Check;
use crate::leader::LeaderElector;
use crate::runner::{Runnable, SingletonRunner};

/// Reports whether this replica leads (the `leading` channel and the leader metric).
pub(super) type SetLeading = Arc<dyn Fn(bool) + Send + Sync>;

/// Runs `elected` while this replica leads.
pub(super) struct Leading {
    pub(super) elected: SingletonRunner,
    /// `None`: no leader election, the parts run at once.
    pub(super) elector: Option<Arc<LeaderElector>>,
    pub(super) cache: Cache,
    /// Start the cache before leading, so a new leader has it warm.
    pub(super) warm_up: bool,
    pub(super) set_leading: SetLeading,
}

impl Leading {
    async fn lead(
        elected: SingletonRunner,
        elector: Option<Arc<LeaderElector>>,
        cache: Cache,
        warm_up: bool,
        set_leading: SetLeading,
        shutdown: CancellationToken,
    ) -> Result<(), BoxError> {
        set_leading(false);
        let Some(elector) = elector else {
            cache.start(shutdown.clone());
            set_leading(true);
            let result = elected.run(shutdown).await;
            set_leading(false);
            return result.map_err(BoxError::from);
        };
        if warm_up {
            cache.start(shutdown.clone());
        }
        let mut outcome = Ok(());
        let campaign = elector
            .run(shutdown, |leading| {
                set_leading(true);
                cache.start(leading.clone());
                let outcome = &mut outcome;
                async move {
                    *outcome = elected.run(leading).await;
                }
            })
            .await;
        set_leading(false);
        // Lost leadership outranks how the parts stopped (they were stopped because of it).
        campaign.map_err(BoxError::from)?;
        outcome.map_err(BoxError::from)
    }
}

impl Runnable for Leading {
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Self::lead(
            self.elected.clone(),
            self.elector.clone(),
            self.cache.clone(),
            self.warm_up,
            Arc::clone(&self.set_leading),
            shutdown,
        )
        .boxed()
    }

    fn health_checks(&self) -> Vec<(String, Check)> {
        self.elected.health_checks()
    }

    fn liveness_checks(&self) -> Vec<(String, Check)> {
        self.elected.liveness_checks()
    }

    fn metrics(&self) -> Vec<MetricFamily> {
        Runnable::metrics(&self.elected)
    }

    /// It runs on every replica: it campaigns, and starts the parts only when elected.
    fn needs_leader_election(&self) -> bool {
        false
    }
}
