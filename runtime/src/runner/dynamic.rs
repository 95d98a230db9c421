//! [`DynamicMultiRunner`]: a [`MultiRunner`](super::MultiRunner) whose runnables change while it
//! runs.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use prometheus::proto::MetricFamily;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::multi::{Policy, drive};
use super::report::Stats;
use super::{RunFuture, Runnable, RunnerError};
use crate::BoxError;
use crate::health::Check;

/// Identifies a runnable added to a [`DynamicMultiRunner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RunnableId(u64);

/// A [`MultiRunner`](super::MultiRunner) whose runnables can change while it runs; see the
/// [module docs](super). Its readiness checks and metrics are those of the runnables it holds
/// at the time they are asked for.
#[derive(Clone)]
pub struct DynamicMultiRunner {
    inner: Arc<Mutex<DynamicState>>,
    policy: Policy,
    ids: Arc<AtomicU64>,
}

struct DynamicState {
    runnables: HashMap<RunnableId, (Arc<dyn Runnable>, CancellationToken)>,
    running: Option<(
        CancellationToken,
        tokio::sync::mpsc::UnboundedSender<RunFuture>,
    )>,
}

impl Debug for DynamicMultiRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicMultiRunner")
            .field("name", &self.policy.stats.name)
            .finish_non_exhaustive()
    }
}

impl Default for DynamicMultiRunner {
    fn default() -> Self {
        Self::new()
    }
}

impl DynamicMultiRunner {
    /// An empty runner.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mutex::new(DynamicState {
                runnables: HashMap::new(),
                running: None,
            })),

            ids: Arc::new(AtomicU64::new(0)),
            policy: Policy::new("dynamic"),
        }
    }

    /// Names the runner in its metrics (`runner` label; default `dynamic`).
    #[must_use]
    pub fn named(mut self, name: &str) -> Self {
        self.policy.stats = Stats::new(name);
        self
    }

    /// As [`MultiRunner::error_handler`](super::MultiRunner::error_handler).
    #[must_use]
    pub fn error_handler(
        mut self,
        handler: impl Fn(&BoxError) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.policy.error_handler = Some(Arc::new(handler));
        self
    }

    /// As [`MultiRunner::exit_wait`](super::MultiRunner::exit_wait).
    #[must_use]
    pub fn exit_wait(mut self, wait: Duration) -> Self {
        self.policy.exit_wait = Some(wait);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DynamicState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a runnable; it starts at once if the runner is running.
    pub fn add(&self, runnable: Arc<dyn Runnable>) -> RunnableId {
        let id = RunnableId(self.ids.fetch_add(1, Ordering::Relaxed));
        let mut state = self.lock();
        let token = match &state.running {
            Some((parent, tx)) => {
                let token = parent.child_token();
                let _ = tx.send(runnable.run(token.clone()));
                token
            }
            None => CancellationToken::new(),
        };
        state.runnables.insert(id, (runnable, token));
        id
    }

    /// Removes a runnable, cancelling it if it runs. Returns whether it was present.
    pub fn remove(&self, id: RunnableId) -> bool {
        match self.lock().runnables.remove(&id) {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Runs the current runnables and those added later, until `shutdown` is cancelled (or a
    /// failure cancels everything) and all have returned.
    ///
    /// # Errors
    ///
    /// As [`MultiRunner::run`](super::MultiRunner::run).
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), RunnerError> {
        let token = shutdown.child_token();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut set = JoinSet::new();
        {
            let mut state = self.lock();
            for (runnable, child) in state.runnables.values_mut() {
                *child = token.child_token();
                set.spawn(runnable.run(child.clone()));
            }
            state.running = Some((token.clone(), tx));
        }
        let result = drive(&mut set, &token, &self.policy, Some(&mut rx)).await;
        self.lock().running = None;
        result
    }
}

impl Runnable for DynamicMultiRunner {
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        let me = self.clone();
        async move {
            DynamicMultiRunner::run(&me, shutdown)
                .await
                .map_err(BoxError::from)
        }
        .boxed()
    }

    fn health_checks(&self) -> Vec<(String, Check)> {
        self.children()
            .iter()
            .flat_map(|r| r.health_checks())
            .collect()
    }

    fn liveness_checks(&self) -> Vec<(String, Check)> {
        self.children()
            .iter()
            .flat_map(|r| r.liveness_checks())
            .collect()
    }

    fn metrics(&self) -> Vec<MetricFamily> {
        let children = self.children().iter().flat_map(|r| r.metrics()).collect();
        self.policy.stats.families(children)
    }
}

impl DynamicMultiRunner {
    /// The runnables held now, in the order they were added.
    fn children(&self) -> Vec<Arc<dyn Runnable>> {
        let state = self.lock();
        let mut held: Vec<_> = state.runnables.iter().collect();
        held.sort_by_key(|(id, _)| id.0);
        held.into_iter().map(|(_, (r, _))| Arc::clone(r)).collect()
    }
}
