//! [`MultiRunner`]: several runnables at once, and the loop every runner drives them with.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use prometheus::proto::MetricFamily;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::report::Stats;
use super::{ErrorHandler, RunFuture, Runnable, RunnerError};
use crate::BoxError;
use crate::health::Check;

/// Runs several runnables concurrently; see the [module docs](super).
#[derive(Clone)]
pub struct MultiRunner {
    runners: Vec<Arc<dyn Runnable>>,
    policy: Policy,
}

impl Default for MultiRunner {
    fn default() -> Self {
        Self {
            runners: Vec::new(),
            policy: Policy::new("multi"),
        }
    }
}

impl Debug for MultiRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiRunner")
            .field("name", &self.policy.stats.name)
            .field("runners", &self.runners.len())
            .field("exit_wait", &self.policy.exit_wait)
            .finish_non_exhaustive()
    }
}

impl MultiRunner {
    /// An empty runner.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the runner in its metrics (`runner` label; default `multi`).
    #[must_use]
    pub fn named(mut self, name: &str) -> Self {
        self.policy.stats = Stats::new(name);
        self
    }

    /// Adds a runnable.
    #[must_use]
    pub fn runnable(mut self, runnable: Arc<dyn Runnable>) -> Self {
        self.runners.push(runnable);
        self
    }

    /// Called when a runnable fails: returns whether to cancel all the others (the default
    /// without a handler is to cancel them). Failures it ignores are not reported by `run`.
    #[must_use]
    pub fn error_handler(
        mut self,
        handler: impl Fn(&BoxError) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.policy.error_handler = Some(Arc::new(handler));
        self
    }

    /// After cancellation, wait at most this long for the runnables to return.
    #[must_use]
    pub fn exit_wait(mut self, wait: Duration) -> Self {
        self.policy.exit_wait = Some(wait);
        self
    }

    /// Runs every runnable until all have returned. `shutdown` (or a failure the error handler
    /// lets cancel) cancels them all.
    ///
    /// # Errors
    ///
    /// The first failure that cancelled the others, a panic, or [`RunnerError::ExitTimeout`].
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), RunnerError> {
        let token = shutdown.child_token();
        let mut set = JoinSet::new();
        for r in &self.runners {
            set.spawn(r.run(token.clone()));
        }
        drive(&mut set, &token, &self.policy, None).await
    }
}

/// A runner runs under another one: its readiness checks and metrics are its children's.
impl Runnable for MultiRunner {
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        let me = self.clone();
        async move {
            MultiRunner::run(&me, shutdown)
                .await
                .map_err(BoxError::from)
        }
        .boxed()
    }

    fn health_checks(&self) -> Vec<(String, Check)> {
        self.runners
            .iter()
            .flat_map(|r| r.health_checks())
            .collect()
    }

    fn liveness_checks(&self) -> Vec<(String, Check)> {
        self.runners
            .iter()
            .flat_map(|r| r.liveness_checks())
            .collect()
    }

    fn metrics(&self) -> Vec<MetricFamily> {
        self.policy
            .stats
            .families(self.runners.iter().flat_map(|r| r.metrics()).collect())
    }

    fn needs_leader_election(&self) -> bool {
        self.runners.iter().any(|r| r.needs_leader_election())
    }
}

/// What a runner does when a runnable fails and at exit, and its own series (shared by
/// [`MultiRunner`] and [`DynamicMultiRunner`](super::DynamicMultiRunner)).
#[derive(Clone)]
pub(super) struct Policy {
    pub(super) error_handler: Option<ErrorHandler>,
    pub(super) exit_wait: Option<Duration>,
    pub(super) stats: Stats,
}

impl Policy {
    pub(super) fn new(name: &str) -> Self {
        Self {
            error_handler: None,
            exit_wait: None,
            stats: Stats::new(name),
        }
    }
}

/// Waits for the tasks of `set`; handles failures; bounds the wait after cancellation.
pub(super) async fn drive(
    set: &mut JoinSet<Result<(), BoxError>>,
    token: &CancellationToken,
    policy: &Policy,
    mut incoming: Option<&mut tokio::sync::mpsc::UnboundedReceiver<RunFuture>>,
) -> Result<(), RunnerError> {
    let mut first_error: Option<RunnerError> = None;
    let mut deadline_at: Option<tokio::time::Instant> = None;
    let Policy {
        error_handler,
        exit_wait,
        stats,
    } = policy;
    loop {
        stats.set_running(set.len());
        if set.is_empty() && incoming.is_none() {
            break;
        }
        if token.is_cancelled() && deadline_at.is_none() {
            deadline_at = exit_wait.map(|wait| tokio::time::Instant::now() + wait);
        }
        let deadline = async {
            match deadline_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let cancelled = async {
            if token.is_cancelled() {
                std::future::pending::<()>().await;
            }
            token.cancelled().await;
        };
        tokio::select! {
            joined = set.join_next(), if !set.is_empty() => {
                let outcome = match joined {
                    Some(Ok(Ok(()))) | None => continue,
                    Some(Ok(Err(error))) => {
                        stats.failed();
                        let cancel_all = error_handler.as_ref().is_none_or(|h| h(&error));
                        tracing::error!(error = %crate::text::concise(error.as_ref()), cancel_all, "runnable failed");
                        cancel_all.then_some(RunnerError::Failed(error))
                    }
                    Some(Err(join_error)) => {
                        stats.failed();
                        Some(RunnerError::Panicked(join_error.to_string()))
                    }
                };
                if let Some(error) = outcome {
                    first_error.get_or_insert(error);
                    token.cancel();
                }
            }
            added = async {
                match incoming.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => match added {
                Some(fut) => { set.spawn(fut); }
                None => incoming = None,
            },
            () = cancelled => {
                // Dynamic runners stop accepting new runnables once cancelled.
                incoming = None;
            }
            () = deadline => {
                let remaining = set.len();
                set.abort_all();
                stats.set_running(0);
                return Err(first_error.unwrap_or(RunnerError::ExitTimeout(remaining)));
            }
        }
        if token.is_cancelled() {
            incoming = None;
        }
    }
    stats.set_running(0);
    first_error.map_or(Ok(()), Err)
}
