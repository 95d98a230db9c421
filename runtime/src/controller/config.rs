//! The options of a controller.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use crate::queue::{DEFAULT_AGING, NoMetrics, QueueMetrics, TokenBucket};
use crate::retry::{DequeueAll, DequeuePolicy, ExponentialRetry, RetryPolicy};

use super::ControllerMetrics;

/// Options of a [`Controller`](super::Controller).
#[derive(Clone)]
pub struct ControllerConfig {
    pub(super) concurrency: usize,
    pub(super) reconcile_timeout: Option<Duration>,
    pub(super) stall_timeout: Option<Duration>,
    pub(super) shutdown_grace: Duration,
    pub(super) sync_timeout: Option<Duration>,
    pub(super) finalizer: Option<String>,
    pub(super) read_your_writes: Option<Duration>,
    pub(super) skip_own_writes: bool,
    pub(super) aging: Duration,
    pub(super) retry: Arc<dyn RetryPolicy>,
    pub(super) dequeue: Arc<dyn DequeuePolicy>,
    pub(super) retry_rate_limit: Option<Arc<TokenBucket>>,
    pub(super) metrics: Arc<dyn ControllerMetrics>,
    /// `None`: the queue hooks `metrics` gives for the controller's name.
    pub(super) queue_metrics: Option<Arc<dyn QueueMetrics>>,
    pub(super) metrics_set: bool,
}

impl Debug for ControllerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerConfig")
            .field("concurrency", &self.concurrency)
            .field("reconcile_timeout", &self.reconcile_timeout)
            .field("stall_timeout", &self.stall_timeout)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("finalizer", &self.finalizer)
            .field("read_your_writes", &self.read_your_writes)
            .field("skip_own_writes", &self.skip_own_writes)
            .field("aging", &self.aging)
            .finish_non_exhaustive()
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            concurrency: 4,
            reconcile_timeout: Some(RECONCILE_TIMEOUT),
            stall_timeout: Some(STALL_TIMEOUT),
            shutdown_grace: Duration::from_secs(30),
            sync_timeout: Some(SYNC_TIMEOUT),
            finalizer: None,
            read_your_writes: Some(Duration::from_secs(2)),
            skip_own_writes: true,
            aging: DEFAULT_AGING,
            retry: Arc::new(default_retry()),
            dequeue: Arc::new(DequeueAll),
            retry_rate_limit: Some(Arc::new(TokenBucket::default())),
            metrics: Arc::new(NoMetrics),
            queue_metrics: None,
            metrics_set: false,
        }
    }
}

impl ControllerConfig {
    /// Maximum number of concurrent reconciles (of different keys; default 4, at least 1).
    #[must_use]
    pub fn concurrency(mut self, workers: usize) -> Self {
        self.concurrency = workers.max(1);
        self
    }

    /// Cancel a reconcile that runs longer than this (it is retried with backoff), so that one
    /// hung request cannot hold its key for ever (default 5 min; `None` lets reconciles run as
    /// long as they like). The future is dropped at its next await point: a reconcile stuck in
    /// blocking code is not interrupted (the liveness check below catches that).
    #[must_use]
    pub fn reconcile_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.reconcile_timeout = timeout.into();
        self
    }

    /// The controller's liveness check (`controller-<name>` on `/healthz`) fails when keys are
    /// waiting, every worker is busy and no reconcile has finished for this long (default 6 min,
    /// a minute past the default reconcile timeout; `None` disables it): the kubelet then
    /// restarts an operator whose workers are all stuck.
    #[must_use]
    pub fn stall_timeout(mut self, stall: impl Into<Option<Duration>>) -> Self {
        self.stall_timeout = stall.into();
        self
    }

    /// How long the controller waits at start for its informers to list everything (default
    /// 2 min, as controller-runtime's `CacheSyncTimeout`; `None` waits for ever). When it runs
    /// out, [`Controller::run`](super::Controller::run) fails with
    /// [`ControllerError::CacheSyncTimeout`](super::ControllerError::CacheSyncTimeout) naming the
    /// informers that did not sync (a missing CRD, missing RBAC), and a manager stops with it.
    #[must_use]
    pub fn sync_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.sync_timeout = timeout;
        self
    }

    /// How long shutdown waits for running reconciles (default 30 s).
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Hold deleted objects with this finalizer until [`Reconciler::cleanup`](super::Reconciler::cleanup) succeeds. The
    /// finalizer is added before the first reconcile of each object.
    #[must_use]
    pub fn finalizer(mut self, name: impl Into<String>) -> Self {
        self.finalizer = Some(name.into());
        self
    }

    /// Before reconciling an object this controller (or anything recording through
    /// [`Wiring::record_write`](super::Wiring::record_write)) wrote, wait up to `wait` for the informer to deliver that
    /// version, so the reconcile never sees an older cached copy of its own write (default 2 s;
    /// `None` turns it off).
    #[must_use]
    pub fn read_your_writes(mut self, wait: Option<Duration>) -> Self {
        self.read_your_writes = wait;
        self
    }

    /// Do not queue a key again for a watch event that carries nothing but a write its own
    /// reconcile made (default `true`). A reconcile's status patch, finalizer, or apply of a
    /// child otherwise comes back as an event and costs one more reconcile that finds nothing to
    /// do. An event is skipped only when all of these hold:
    ///
    /// - it is an update or creation an informer received from its **watch** — never an event
    ///   of a (re)list, which can fold other clients' changes into one update, never a
    ///   deletion or a resync;
    /// - its new version is **exactly** the resourceVersion (and uid) a write of this
    ///   controller returned, recorded through the [`Context`](super::Context) write helpers,
    ///   [`Context::record_write`](super::Context::record_write) or the finalizer;
    /// - the key it would queue is the key whose reconcile made that write (an event of a child
    ///   still queues its other owners; a write to another object of the kind still queues it);
    /// - for the controller's own kind, the object's `generation` did not change (an update of
    ///   the spec is reconciled even when this controller made it).
    ///
    /// Every other client's write is its own watch event, delivered before or after ours and
    /// queued as usual, so nothing another client does is skipped. A watch event that arrives
    /// before the write's response is recorded is not recognised and costs the extra reconcile,
    /// as with the switch off. Skipped events are counted in
    /// `kubeforge_controller_own_writes_skipped_total`.
    #[must_use]
    pub fn skip_own_writes(mut self, skip: bool) -> Self {
        self.skip_own_writes = skip;
        self
    }

    /// The queue's aging bound. Keys are queued at two priorities: fresh events (a create,
    /// update or delete of the object, or of something it owns or watches) at high, and work
    /// that can wait at low: the objects the informers found at start-up, resyncs, requeues
    /// and retries ([`Action::priority`](super::Action::priority) and
    /// [`ErrorPolicy::priority`](super::ErrorPolicy::priority) change the latter two). So an
    /// object edited while an operator works through its start-up wave is reconciled at once,
    /// not after the wave. A low key goes before every high key queued more than `bound` after
    /// it, so none starves under a stream of events (default 5 min, longer than the start-up
    /// wave of 50,000 objects; `Duration::MAX` for strict priority).
    #[must_use]
    pub fn priority_aging(mut self, bound: Duration) -> Self {
        self.aging = bound;
        self
    }

    /// How failed keys are retried (default: per key exponential 5 ms .. 1000 s without an
    /// attempt limit, client-go's controller backoff). A failed reconcile, a panic, a timeout or
    /// `Action::Requeue` counts one failure; the policy gets the error and the failures in a row
    /// and returns the delay, or `None` to give up: the key is then dropped, with a Warning
    /// event on the object and the `kubeforge_retries_total{outcome="exhausted"}` metric, until
    /// the object changes again. `ErrorPolicy::RetryAfter(d)` replaces the policy's delay, not
    /// its verdict.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kubeforge::controller::ControllerConfig;
    /// use kubeforge::retry::ExponentialRetry;
    /// let config = ControllerConfig::default()
    ///     .retry(ExponentialRetry::new(Duration::from_secs(1), Duration::from_secs(300), 10));
    /// ```
    #[must_use]
    pub fn retry(mut self, policy: impl RetryPolicy) -> Self {
        self.retry = Arc::new(policy);
        self
    }

    /// What a new event does to a key with a pending retry: the policy either drops the retry
    /// and the event reconciles the key now, or keeps it and the event waits for it (the retry
    /// reconciles the latest cached object). Default [`DequeueAll`]: every event reconciles at
    /// once, as controller-runtime does. [`DequeueOnGeneration`](crate::retry::DequeueOnGeneration):
    /// only spec changes, creations and deletions do; a status-only update keeps the key's
    /// backoff (a failing reconcile that writes an error condition does not retrigger itself).
    /// [`DequeueNone`](crate::retry::DequeueNone): retries are never cut short.
    #[must_use]
    pub fn dequeue(mut self, policy: impl DequeuePolicy) -> Self {
        self.dequeue = Arc::new(policy);
        self
    }

    /// An overall limit on retries of all keys together (default 10 per second, bursts of 100,
    /// as client-go's controllers); `None` lifts it.
    #[must_use]
    pub fn retry_rate_limit(mut self, limit: Option<TokenBucket>) -> Self {
        self.retry_rate_limit = limit.map(Arc::new);
        self
    }

    /// Report reconciles and queue activity to these hooks.
    #[must_use]
    pub fn metrics(
        mut self,
        controller: Arc<dyn ControllerMetrics>,
        queue: Arc<dyn QueueMetrics>,
    ) -> Self {
        self.metrics = controller;
        self.queue_metrics = Some(queue);
        self.metrics_set = true;
        self
    }

    /// Reports to `metrics` (a wiring's), with the queue hooks it gives; unlike
    /// [`ControllerConfig::metrics`], a manager may still replace them with its own.
    pub(super) fn metrics_hooks(mut self, metrics: Arc<dyn ControllerMetrics>) -> Self {
        self.metrics = metrics;
        self.queue_metrics = None;
        self
    }

    /// The hooks of the controller's work queue.
    pub(super) fn queue_hooks(&self, controller: &str) -> Arc<dyn QueueMetrics> {
        match &self.queue_metrics {
            Some(queue) => Arc::clone(queue),
            None => self.metrics.queue_metrics(controller),
        }
    }
}

/// The default [`ControllerConfig::reconcile_timeout`].
pub const RECONCILE_TIMEOUT: Duration = Duration::from_secs(300);

/// The default [`ControllerConfig::stall_timeout`].
pub const STALL_TIMEOUT: Duration = Duration::from_secs(360);

/// How long start-up waits for the informers by default (controller-runtime's `CacheSyncTimeout`).
pub(crate) const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// client-go's per-key controller backoff as a retry policy: 5 ms doubling up to 1000 s, never
/// giving up.
pub(crate) fn default_retry() -> ExponentialRetry {
    ExponentialRetry::new(
        Duration::from_millis(5),
        Duration::from_secs(1000),
        u32::MAX,
    )
}
