//! [`SingletonRunner`]: one run of a runnable shared by several callers.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use prometheus::proto::MetricFamily;
use tokio_util::sync::CancellationToken;

use super::Runnable;
use super::report::Stats;
use crate::BoxError;
use crate::health::Check;

type SharedRun = Shared<BoxFuture<'static, Result<(), String>>>;

/// Runs one runnable once for several callers; see the [module docs](super).
///
/// Its readiness checks are the wrapped runnable's while a run is under way, and none
/// otherwise: the manager runs its leader-elected parts under one, so a standby replica is
/// ready without reporting controllers it does not run.
#[derive(Clone)]
pub struct SingletonRunner(Arc<Singleton>);

struct Singleton {
    inner: Arc<dyn Runnable>,
    stop_on_any: bool,
    state: Mutex<Option<SingletonState>>,
    stats: Stats,
}

struct SingletonState {
    run: SharedRun,
    token: CancellationToken,
    callers: usize,
}

impl Debug for SingletonRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingletonRunner")
            .field("name", &self.0.stats.name)
            .field("stop_on_any", &self.0.stop_on_any)
            .finish_non_exhaustive()
    }
}

impl SingletonRunner {
    /// Wraps `inner`. With `stop_on_any`, cancelling any caller's token stops the shared run;
    /// otherwise it stops when every caller has cancelled.
    pub fn new(inner: Arc<dyn Runnable>, stop_on_any: bool) -> Self {
        Self::named(inner, stop_on_any, "singleton")
    }

    /// As [`SingletonRunner::new`], named `name` in its metrics (`runner` label).
    pub fn named(inner: Arc<dyn Runnable>, stop_on_any: bool, name: &str) -> Self {
        Self(Arc::new(Singleton {
            inner,
            stop_on_any,
            state: Mutex::new(None),
            stats: Stats::new(name),
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<SingletonState>> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a run is under way.
    pub fn is_running(&self) -> bool {
        self.lock().is_some()
    }

    /// Joins the shared run (starting it if nobody runs it) and waits for it to end.
    ///
    /// # Errors
    ///
    /// The shared run's failure, as text (it is shared by every caller).
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), String> {
        let (run, token) = {
            let mut state = self.lock();
            let state = state.get_or_insert_with(|| {
                let token = CancellationToken::new();
                let fut = self.0.inner.run(token.clone());
                self.0.stats.set_running(1);
                SingletonState {
                    run: async move { fut.await.map_err(|e| e.to_string()) }
                        .boxed()
                        .shared(),
                    token,
                    callers: 0,
                }
            });
            state.callers += 1;
            (state.run.clone(), state.token.clone())
        };
        let result = tokio::select! {
            result = run.clone() => result,
            () = shutdown.cancelled() => {
                let stop = {
                    let mut state = self.lock();
                    let callers = state.as_mut().map_or(0, |s| { s.callers -= 1; s.callers });
                    self.0.stop_on_any || callers == 0
                };
                if stop {
                    token.cancel();
                }
                let result = run.await;
                return self.finish(result, false);
            }
        };
        self.finish(result, true)
    }

    fn finish(&self, result: Result<(), String>, count_out: bool) -> Result<(), String> {
        let mut state = self.lock();
        if let Some(s) = state.as_mut() {
            if count_out {
                s.callers = s.callers.saturating_sub(1);
            }
            if s.run.peek().is_some() && s.callers == 0 {
                // The run is over: the next caller starts a fresh one.
                *state = None;
                self.0.stats.set_running(0);
                if result.is_err() {
                    self.0.stats.failed();
                }
            }
        }
        result
    }
}

impl SingletonRunner {
    /// This runner as an `Arc<dyn Runnable>` that joins the shared run.
    pub fn shared(self: &Arc<Self>) -> Arc<dyn Runnable> {
        Arc::new((**self).clone())
    }
}

impl Runnable for SingletonRunner {
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        let me = self.clone();
        async move {
            SingletonRunner::run(&me, shutdown)
                .await
                .map_err(BoxError::from)
        }
        .boxed()
    }

    fn health_checks(&self) -> Vec<(String, Check)> {
        if self.is_running() {
            self.0.inner.health_checks()
        } else {
            Vec::new()
        }
    }

    fn liveness_checks(&self) -> Vec<(String, Check)> {
        if self.is_running() {
            self.0.inner.liveness_checks()
        } else {
            Vec::new()
        }
    }

    fn metrics(&self) -> Vec<MetricFamily> {
        self.0.stats.families(self.0.inner.metrics())
    }

    fn needs_leader_election(&self) -> bool {
        self.0.inner.needs_leader_election()
    }
}
