//! Hooks a controller reports its reconciles to (the manager's Prometheus metrics implement them).

use std::sync::Arc;
use std::time::Duration;

use crate::ObjectKey;
use crate::queue::{NoMetrics, QueueMetrics, WorkQueue};
use crate::retry::{NoRetryMetrics, RetryMetrics};

/// The outcome label of a reconcile, as controller-runtime's `result` metric label spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileResult {
    /// `Ok(Action::Done)`.
    Success,
    /// `Ok(Action::Requeue)`.
    Requeue,
    /// `Ok(Action::RequeueAfter(_))`.
    RequeueAfter,
    /// An error, a panic or a timeout.
    Error,
}

impl ReconcileResult {
    /// The label value (`success`, `requeue`, `requeue_after`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Requeue => "requeue",
            Self::RequeueAfter => "requeue_after",
            Self::Error => "error",
        }
    }
}

/// Observes a controller's reconciles; every method has a no-op default.
pub trait ControllerMetrics: Send + Sync {
    /// A reconcile finished with `result` after `took`.
    fn reconciled(&self, _controller: &str, _result: ReconcileResult, _took: Duration) {}
    /// A reconcile panicked (also reported as an error result).
    fn panicked(&self, _controller: &str) {}
    /// A reconcile failed with a terminal error (not retried).
    fn terminal_error(&self, _controller: &str) {}
    /// A watch event was not queued: it carried only this controller's own write (see
    /// [`ControllerConfig::skip_own_writes`](super::ControllerConfig::skip_own_writes)).
    fn own_write_skipped(&self, _controller: &str) {}
    /// The number of workers currently reconciling changed by `delta`.
    fn active_workers(&self, _controller: &str, _delta: i64) {}
    /// The controller started with this many workers.
    fn max_concurrent_reconciles(&self, _controller: &str, _workers: usize) {}
    /// The controller's work queue was created (metrics read unfinished work from it on demand).
    fn queue_started(&self, _controller: &str, _queue: &WorkQueue<ObjectKey>) {}
    /// The hooks for the work queue of controller `controller` (none by default).
    fn queue_metrics(&self, _controller: &str) -> Arc<dyn QueueMetrics> {
        Arc::new(NoMetrics)
    }
    /// The hooks for the retry processor of controller `controller` (none by default).
    fn retry_metrics(&self, _controller: &str) -> Arc<dyn RetryMetrics> {
        Arc::new(NoRetryMetrics)
    }
}

impl ControllerMetrics for NoMetrics {}
