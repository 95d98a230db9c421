//! Store backends as parts of the manager: each serves its readiness check `store-<name>` and
//! its metrics, on every replica.

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use prometheus::proto::MetricFamily;
use tokio_util::sync::CancellationToken;

use crate::BoxError;
use crate::health::{Check, check};
use crate::runner::Runnable;
use crate::store::SharedBackend;

/// How long the readiness check waits for the backend.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// A backend the manager's cache uses.
pub(super) struct BackendPart(pub(super) SharedBackend);

impl Runnable for BackendPart {
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        async move {
            shutdown.cancelled().await;
            Ok(())
        }
        .boxed()
    }

    fn health_checks(&self) -> Vec<(String, Check)> {
        let backend = SharedBackend::clone(&self.0);
        vec![(
            format!("store-{}", self.0.name()),
            check(move || {
                let backend = SharedBackend::clone(&backend);
                async move {
                    match tokio::time::timeout(CHECK_TIMEOUT, backend.check()).await {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(error)) => Err(error.to_string()),
                        Err(_) => Err(format!("no answer within {CHECK_TIMEOUT:?}")),
                    }
                }
            }),
        )]
    }

    fn metrics(&self) -> Vec<MetricFamily> {
        self.0.metrics()
    }

    /// Readiness and metrics on every replica, leading or not.
    fn needs_leader_election(&self) -> bool {
        false
    }
}
