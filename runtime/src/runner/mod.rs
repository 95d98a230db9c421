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
//! Runners are runnables too, so they nest (the manager's tree is in `docs/ARCHITECTURE.md`).
//! Every runner aggregates its children's readiness checks ([`Runnable::health_checks`], served
//! on `/readyz`) and metrics ([`Runnable::metrics`], served on `/metrics`), and adds its own:
//! `kubeforge_runner_runnables{runner}` (running now) and `kubeforge_runner_failures_total{runner}`.
//! A runnable says where it is in its life through a [`Lifecycle`].
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

mod dynamic;
mod multi;
mod report;
mod singleton;

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use prometheus::proto::MetricFamily;
use tokio_util::sync::CancellationToken;

use crate::BoxError;
use crate::health::Check;

pub use dynamic::{DynamicMultiRunner, RunnableId};
pub use multi::MultiRunner;
pub use report::{Lifecycle, Stage, merge_families};
pub use singleton::SingletonRunner;

/// A long-running component.
pub trait Runnable: Send + Sync + 'static {
    /// Runs until `shutdown` is cancelled (then returns `Ok`) or until it fails.
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>>;

    /// Named readiness checks (served on `/readyz`), asked for at each probe; a runner returns
    /// its children's. None by default.
    fn health_checks(&self) -> Vec<(String, Check)> {
        Vec::new()
    }

    /// Named liveness checks (served on `/healthz`), asked for at each probe; a runner returns
    /// its children's. None by default.
    fn liveness_checks(&self) -> Vec<(String, Check)> {
        Vec::new()
    }

    /// Metric families (served on `/metrics`), gathered at each scrape; a runner returns its
    /// own merged with its children's. None by default.
    fn metrics(&self) -> Vec<MetricFamily> {
        Vec::new()
    }

    /// Whether it may run only on the elected leader (controller-runtime's
    /// `NeedLeaderElection`): the manager runs such runnables under its leader-elected
    /// [`SingletonRunner`], the others on every replica. `true` by default.
    fn needs_leader_election(&self) -> bool {
        true
    }
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

/// A started runnable's future.
type RunFuture = BoxFuture<'static, Result<(), BoxError>>;

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

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
        let handle = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { runner.run(shutdown).await }
        });
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
        let handle = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { runner.run(shutdown).await }
        });
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

    /// A runnable with one readiness check named `name` and one metric series.
    struct Reporting(&'static str);

    impl Runnable for Reporting {
        fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
            async move {
                shutdown.cancelled().await;
                Ok(())
            }
            .boxed()
        }

        fn health_checks(&self) -> Vec<(String, Check)> {
            vec![(self.0.to_owned(), crate::health::check(|| async { Ok(()) }))]
        }

        fn metrics(&self) -> Vec<MetricFamily> {
            use prometheus::core::Collector;
            let opts = prometheus::Opts::new("test_up", "up").const_label("who", self.0);
            prometheus::IntGauge::with_opts(opts).unwrap().collect()
        }
    }

    fn names(checks: Vec<(String, Check)>) -> Vec<String> {
        checks.into_iter().map(|(name, _)| name).collect()
    }

    fn series(families: &[MetricFamily], name: &str) -> Vec<String> {
        families
            .iter()
            .filter(|f| f.name() == name)
            .flat_map(|f| f.get_metric())
            .map(|m| {
                m.get_label()
                    .iter()
                    .map(|l| format!("{}={}", l.name(), l.value()))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn runners_should_aggregate_their_childrens_checks_and_metrics() {
        let dynamic = DynamicMultiRunner::new().named("dyn");
        let inner = MultiRunner::new()
            .named("inner")
            .runnable(Arc::new(Reporting("a")))
            .runnable(Arc::new(dynamic.clone()));
        let single = SingletonRunner::named(Arc::new(inner), true, "elected");
        let top = MultiRunner::new()
            .named("top")
            .runnable(Arc::new(Reporting("b")))
            .runnable(Arc::new(single.clone()));
        assert_eq!(
            names(top.health_checks()),
            ["b"],
            "the singleton reports nothing while it does not run"
        );

        let shutdown = CancellationToken::new();
        let handle = tokio::spawn({
            let (top, shutdown) = (top.clone(), shutdown.clone());
            async move { top.run(shutdown).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(names(top.health_checks()), ["b", "a"]);
        let added = dynamic.add(Arc::new(Reporting("c")));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(names(top.health_checks()), ["b", "a", "c"]);

        let families = top.metrics();
        assert_eq!(
            series(&families, "test_up"),
            ["who=b", "who=a", "who=c"],
            "one family, every child's series"
        );
        let running = series(&families, "kubeforge_runner_runnables");
        for runner in ["top", "elected", "inner", "dyn"] {
            assert!(
                running.contains(&format!("runner={runner}")),
                "{runner}: {running:?}"
            );
        }
        let top_running = families
            .iter()
            .find(|f| f.name() == "kubeforge_runner_runnables")
            .and_then(|f| {
                f.get_metric()
                    .iter()
                    .find(|m| m.get_label().iter().any(|l| l.value() == "top"))
                    .map(|m| m.get_gauge().get_value())
            });
        assert_eq!(top_running, Some(2.0));

        assert!(dynamic.remove(added));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(names(top.health_checks()), ["b", "a"]);
        shutdown.cancel();
        assert!(handle.await.unwrap().is_ok());
        assert!(!single.is_running());
        assert_eq!(names(top.health_checks()), ["b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn runners_should_count_failures() {
        let runner = MultiRunner::new()
            .named("failing")
            .runnable(failing_after(Duration::from_secs(1)))
            .error_handler(|_| false);
        let shutdown = CancellationToken::new();
        let handle = tokio::spawn({
            let (runner, shutdown) = (runner.clone(), shutdown.clone());
            async move { runner.run(shutdown).await }
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
        shutdown.cancel();
        assert!(handle.await.unwrap().is_ok());
        let failures = runner
            .metrics()
            .into_iter()
            .find(|f| f.name() == "kubeforge_runner_failures_total")
            .map(|f| f.get_metric()[0].get_counter().get_value());
        assert_eq!(failures, Some(1.0));
    }
}
