//! Runners: lifecycles of several long-running components (app-sdk's runner patterns).
//!
//! Everything long-running — a controller, an informer cache, a metrics server — is a
//! [`Runnable`]: it runs until its [`CancellationToken`] is cancelled or it fails.
//!
//! - [`MultiRunner`] runs several at once; when one fails, an error handler decides whether the
//!   others are cancelled (default: yes); an optional exit timeout bounds the wait for the others.
//! - [`SingletonRunner`] lets several callers run one runnable: it is started once and shared.
//! - [`DynamicMultiRunner`] is a [`MultiRunner`] to which runnables can be added, and from which
//!   they can be removed (cancelled), while it runs.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use kubeforge::runner::{MultiRunner, runnable};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! let runner = MultiRunner::new()
//!     .runnable(runnable(|token| async move { token.cancelled().await; Ok(()) }))
//!     .exit_wait(Duration::from_secs(5));
//! shutdown.cancel();
//! runner.run(shutdown).await.unwrap();
//! # }
//! ```

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::BoxError;

/// A long-running component.
pub trait Runnable: Send + Sync + 'static {
    /// Runs until `shutdown` is cancelled (then returns `Ok`) or until it fails.
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>>;
}

struct FnRunnable<F>(F);

impl<F, Fut> Runnable for FnRunnable<F>
where
    F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        (self.0)(shutdown).boxed()
    }
}

/// A [`Runnable`] from a closure.
pub fn runnable<F, Fut>(f: F) -> Arc<dyn Runnable>
where
    F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    Arc::new(FnRunnable(f))
}

/// Why a runner stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// A runnable failed (the first failure is reported).
    #[error("runnable failed: {0}")]
    Failed(#[source] BoxError),
    /// Some runnables were still running when the exit timeout passed.
    #[error("{0} runnables still running after the exit timeout")]
    ExitTimeout(usize),
    /// A runnable panicked.
    #[error("runnable panicked: {0}")]
    Panicked(String),
}

/// Decides, after a runnable failed, whether the other runnables are cancelled.
pub type ErrorHandler = Arc<dyn Fn(&BoxError) -> bool + Send + Sync>;

/// Runs several runnables concurrently; see the [module docs](self).
#[derive(Clone, Default)]
pub struct MultiRunner {
    runners: Vec<Arc<dyn Runnable>>,
    error_handler: Option<ErrorHandler>,
    exit_wait: Option<Duration>,
}

impl Debug for MultiRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiRunner")
            .field("runners", &self.runners.len())
            .field("exit_wait", &self.exit_wait)
            .finish_non_exhaustive()
    }
}

impl MultiRunner {
    /// An empty runner.
    pub fn new() -> Self {
        Self::default()
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
        self.error_handler = Some(Arc::new(handler));
        self
    }

    /// After cancellation, wait at most this long for the runnables to return.
    #[must_use]
    pub fn exit_wait(mut self, wait: Duration) -> Self {
        self.exit_wait = Some(wait);
        self
    }

    /// Runs every runnable until all have returned. `shutdown` (or a failure the error handler
    /// lets cancel) cancels them all.
    ///
    /// # Errors
    ///
    /// The first failure that cancelled the others, a panic, or [`RunnerError::ExitTimeout`].
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), RunnerError> {
        let token = shutdown.child_token();
        let mut set = JoinSet::new();
        for r in &self.runners {
            set.spawn(r.run(token.clone()));
        }
        drive(
            &mut set,
            &token,
            self.error_handler.as_ref(),
            self.exit_wait,
            None,
        )
        .await
    }
}

/// Waits for the tasks of `set`; handles failures; bounds the wait after cancellation.
async fn drive(
    set: &mut JoinSet<Result<(), BoxError>>,
    token: &CancellationToken,
    error_handler: Option<&ErrorHandler>,
    exit_wait: Option<Duration>,
    mut incoming: Option<&mut tokio::sync::mpsc::UnboundedReceiver<RunFuture>>,
) -> Result<(), RunnerError> {
    let mut first_error: Option<RunnerError> = None;
    let mut deadline_at: Option<tokio::time::Instant> = None;
    loop {
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
                        let cancel_all = error_handler.is_none_or(|h| h(&error));
                        tracing::error!(%error, cancel_all, "runnable failed");
                        cancel_all.then_some(RunnerError::Failed(error))
                    }
                    Some(Err(join_error)) => Some(RunnerError::Panicked(join_error.to_string())),
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
                return Err(first_error.unwrap_or(RunnerError::ExitTimeout(remaining)));
            }
        }
        if token.is_cancelled() {
            incoming = None;
        }
    }
    first_error.map_or(Ok(()), Err)
}

type SharedRun = Shared<BoxFuture<'static, Result<(), String>>>;

/// A started runnable's future.
type RunFuture = BoxFuture<'static, Result<(), BoxError>>;

/// Runs one runnable once for several callers; see the [module docs](self).
pub struct SingletonRunner {
    inner: Arc<dyn Runnable>,
    stop_on_any: bool,
    state: Mutex<Option<SingletonState>>,
}

struct SingletonState {
    run: SharedRun,
    token: CancellationToken,
    callers: usize,
}

impl Debug for SingletonRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingletonRunner")
            .field("stop_on_any", &self.stop_on_any)
            .finish_non_exhaustive()
    }
}

impl SingletonRunner {
    /// Wraps `inner`. With `stop_on_any`, cancelling any caller's token stops the shared run;
    /// otherwise it stops when every caller has cancelled.
    pub fn new(inner: Arc<dyn Runnable>, stop_on_any: bool) -> Self {
        Self {
            inner,
            stop_on_any,
            state: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<SingletonState>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
                let fut = self.inner.run(token.clone());
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
                    self.stop_on_any || callers == 0
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
            }
        }
        result
    }
}

impl SingletonRunner {
    /// This runner as an `Arc<dyn Runnable>` that joins the shared run.
    pub fn shared(self: &Arc<Self>) -> Arc<dyn Runnable> {
        let me = Arc::clone(self);
        runnable(move |token| {
            let me = Arc::clone(&me);
            async move { me.run(token).await.map_err(BoxError::from) }
        })
    }
}

/// Identifies a runnable added to a [`DynamicMultiRunner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RunnableId(u64);

/// A [`MultiRunner`] whose runnables can change while it runs; see the [module docs](self).
#[derive(Clone)]
pub struct DynamicMultiRunner {
    inner: Arc<Mutex<DynamicState>>,
    error_handler: Option<ErrorHandler>,
    exit_wait: Option<Duration>,
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
        f.debug_struct("DynamicMultiRunner").finish_non_exhaustive()
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
            error_handler: None,
            exit_wait: None,
            ids: Arc::new(AtomicU64::new(0)),
        }
    }

    /// As [`MultiRunner::error_handler`].
    #[must_use]
    pub fn error_handler(
        mut self,
        handler: impl Fn(&BoxError) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.error_handler = Some(Arc::new(handler));
        self
    }

    /// As [`MultiRunner::exit_wait`].
    #[must_use]
    pub fn exit_wait(mut self, wait: Duration) -> Self {
        self.exit_wait = Some(wait);
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
    /// As [`MultiRunner::run`].
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
        let result = drive(
            &mut set,
            &token,
            self.error_handler.as_ref(),
            self.exit_wait,
            Some(&mut rx),
        )
        .await;
        self.lock().running = None;
        result
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Runs until cancelled, counting starts and stops.
    fn counted(starts: Arc<AtomicUsize>, stops: Arc<AtomicUsize>) -> Arc<dyn Runnable> {
        runnable(move |token| {
            let (starts, stops) = (starts.clone(), stops.clone());
            async move {
                starts.fetch_add(1, Ordering::SeqCst);
                token.cancelled().await;
                stops.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
    }

    fn failing_after(delay: Duration) -> Arc<dyn Runnable> {
        runnable(move |_| async move {
            tokio::time::sleep(delay).await;
            Err("boom".into())
        })
    }

    #[tokio::test(start_paused = true)]
    async fn multi_runner_should_cancel_all_when_one_fails() {
        let (starts, stops) = (Arc::default(), Arc::default());
        let runner = MultiRunner::new()
            .runnable(counted(Arc::clone(&starts), Arc::clone(&stops)))
            .runnable(failing_after(Duration::from_secs(1)));
        let result = runner.run(CancellationToken::new()).await;
        assert!(matches!(result, Err(RunnerError::Failed(_))), "{result:?}");
        assert_eq!(
            stops.load(Ordering::SeqCst),
            1,
            "the other runnable was cancelled"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn multi_runner_should_keep_going_when_the_handler_says_so() {
        let (starts, stops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let runner = MultiRunner::new()
            .runnable(counted(Arc::clone(&starts), Arc::clone(&stops)))
            .runnable(failing_after(Duration::from_secs(1)))
            .error_handler(|_| false);
        let shutdown = CancellationToken::new();
        let handle = tokio::spawn(runner.run(shutdown.clone()));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            stops.load(Ordering::SeqCst),
            0,
            "still running after the ignored failure"
        );
        shutdown.cancel();
        assert!(handle.await.unwrap().is_ok());
        assert_eq!(stops.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn multi_runner_should_give_up_after_the_exit_wait() {
        let stubborn = runnable(|_| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        });
        let runner = MultiRunner::new()
            .runnable(stubborn)
            .exit_wait(Duration::from_secs(2));
        let shutdown = CancellationToken::new();
        let handle = tokio::spawn(runner.run(shutdown.clone()));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let cancelled_at = tokio::time::Instant::now();
        shutdown.cancel();
        let result = handle.await.unwrap();
        assert!(
            matches!(result, Err(RunnerError::ExitTimeout(1))),
            "{result:?}"
        );
        assert_eq!(cancelled_at.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn singleton_runner_should_start_once_for_many_callers() {
        let (starts, stops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let single = Arc::new(SingletonRunner::new(
            counted(Arc::clone(&starts), Arc::clone(&stops)),
            false,
        ));
        let (a, b) = (CancellationToken::new(), CancellationToken::new());
        let ha = tokio::spawn({
            let (s, t) = (Arc::clone(&single), a.clone());
            async move { s.run(t).await }
        });
        let hb = tokio::spawn({
            let (s, t) = (Arc::clone(&single), b.clone());
            async move { s.run(t).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 1);
        a.cancel();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(stops.load(Ordering::SeqCst), 0, "b still needs it");
        b.cancel();
        assert!(ha.await.unwrap().is_ok() && hb.await.unwrap().is_ok());
        assert_eq!(stops.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn singleton_runner_should_stop_on_any_when_asked() {
        let (starts, stops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let single = Arc::new(SingletonRunner::new(
            counted(Arc::clone(&starts), Arc::clone(&stops)),
            true,
        ));
        let (a, b) = (CancellationToken::new(), CancellationToken::new());
        let runs: Vec<_> = [a.clone(), b.clone()]
            .into_iter()
            .map(|t| {
                let s = single.shared();
                tokio::spawn(async move { s.run(t).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(1)).await;
        a.cancel();
        for r in runs {
            assert!(r.await.unwrap().is_ok());
        }
        assert_eq!(
            (starts.load(Ordering::SeqCst), stops.load(Ordering::SeqCst)),
            (1, 1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn dynamic_runner_should_start_added_and_cancel_removed_runnables() {
        let runner = DynamicMultiRunner::new();
        let (s1, e1) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let first = runner.add(counted(Arc::clone(&s1), Arc::clone(&e1)));
        let shutdown = CancellationToken::new();
        let handle = tokio::spawn({
            let r = runner.clone();
            let t = shutdown.clone();
            async move { r.run(t).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(s1.load(Ordering::SeqCst), 1);

        let (s2, e2) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let _second = runner.add(counted(Arc::clone(&s2), Arc::clone(&e2)));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            s2.load(Ordering::SeqCst),
            1,
            "added while running: started at once"
        );

        assert!(runner.remove(first));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(e1.load(Ordering::SeqCst), 1, "removed: cancelled");
        assert_eq!(e2.load(Ordering::SeqCst), 0);

        shutdown.cancel();
        assert!(handle.await.unwrap().is_ok());
        assert_eq!(e2.load(Ordering::SeqCst), 1);
    }
}
