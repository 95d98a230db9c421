//! Prometheus metrics with controller-runtime's names and labels, so existing dashboards work.
//!
//! [`Metrics`] implements the runtime's hooks ([`ControllerMetrics`], and per-controller
//! [`QueueMetrics`] through [`Metrics::queue`]) and renders the Prometheus text format.
//!
//! | metric | labels |
//! |---|---|
//! | `controller_runtime_reconcile_total` | `controller`, `result` (`success`, `error`, `requeue`, `requeue_after`) |
//! | `controller_runtime_reconcile_errors_total` | `controller` |
//! | `controller_runtime_terminal_reconcile_errors_total` | `controller` |
//! | `controller_runtime_reconcile_panics_total` | `controller` |
//! | `controller_runtime_reconcile_time_seconds` (histogram) | `controller` |
//! | `controller_runtime_max_concurrent_reconciles` | `controller` |
//! | `controller_runtime_active_workers` | `controller` |
//! | `workqueue_depth` | `name`, `controller`, `priority` (`0`: fresh events, `-100`: start-up, resync, requeues and retries; controller-runtime's values) |
//! | `kubeforge_workqueue_oldest_item_seconds` (how long the longest-waiting queued item has waited) | `name`, `controller`, `priority` |
//! | `kubeforge_workqueue_aged_total` (low-priority items handed out before waiting fresh ones: they reached the aging bound) | `name`, `controller` |
//! | `workqueue_adds_total`, `workqueue_retries_total` | `name`, `controller` |
//! | `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds` (histograms) | `name`, `controller` |
//! | `workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds` | `name`, `controller` |
//! | `leader_election_master_status` | `name` |
//! | `rest_client_requests_total` (every request of a client [`connect`](crate::client::connect) built) | `code` (`<error>`: no response), `host`, `method` |
//! | `rest_client_request_duration_seconds` (histogram, until the response headers) | `host`, `verb` |
//! | `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`, `process_start_time_seconds` (Linux) | |
//! | `kubeforge_informer_cached_objects`, `kubeforge_informer_synced` | `resource` |
//! | `kubeforge_retry_pending` (retries waiting in the controller's retry processor) | `controller`, `shard` |
//! | `kubeforge_retries_total` | `controller`, `outcome` (`scheduled`, `exhausted`: the retry policy gave up, `dropped`: a new event superseded the retry) |
//! | `kubeforge_retry_lag_seconds` (histogram: how late a retry ran after it was due) | `controller` |
//! | `kubeforge_runner_runnables`, `kubeforge_runner_failures_total` (from the manager's runners) | `runner` (`manager`, `leader-elected`, `controllers`, `crd-followed`) |
//! | `kubeforge_crd_established` (a CRD a controller follows) | `crd`, `controller` |
//! | `kubeforge_informer_lists_total`, `kubeforge_informer_watch_errors_total`, `kubeforge_informer_undecodable_objects_total`, `kubeforge_informer_late_events_total` (events that waited in a slow subscriber's backlog) | `resource` |
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use kubeforge::controller::{ControllerMetrics, ReconcileResult};
//! use kubeforge::metrics::Metrics;
//!
//! let metrics = Arc::new(Metrics::new());
//! metrics.reconciled("webapp", ReconcileResult::Success, Duration::from_millis(12));
//! let text = metrics.render(None);
//! assert!(text.contains(r#"controller_runtime_reconcile_total{controller="webapp",result="success"} 1"#));
//! ```

pub(crate) mod process;
#[cfg(test)]
mod reference;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::proto::MetricFamily;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use crate::ObjectKey;
use crate::cache::Cache;
use crate::controller::{ControllerMetrics, ReconcileResult};
use crate::queue::{Priority, QueueMetrics, WorkQueue};

/// controller-runtime's reconcile-time buckets (seconds).
const RECONCILE_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The metrics of a manager; see the [module docs](self).
pub struct Metrics {
    registry: Registry,
    reconcile: ReconcileSeries,
    queue: QueueSeries,
    informer: InformerSeries,
    retry: RetrySeries,
    leader: IntGaugeVec,
    queues: Mutex<Vec<(String, WorkQueue<ObjectKey>)>>,
}

/// controller-runtime's `controller_runtime_*` series.
struct ReconcileSeries {
    reconcile_total: IntCounterVec,
    reconcile_errors: IntCounterVec,
    terminal_errors: IntCounterVec,
    reconcile_panics: IntCounterVec,
    own_writes_skipped: IntCounterVec,
    reconcile_time: HistogramVec,
    max_concurrent: IntGaugeVec,
    active_workers: IntGaugeVec,
}

/// client-go's `workqueue_*` series.
struct QueueSeries {
    depth: IntGaugeVec,
    adds: IntCounterVec,
    retries: IntCounterVec,
    queue_duration: HistogramVec,
    work_duration: HistogramVec,
    unfinished: GaugeVec,
    longest: GaugeVec,
    oldest: GaugeVec,
    aged: IntCounterVec,
}

/// kubeforge's `kubeforge_informer_*` series.
struct InformerSeries {
    informer_cached: IntGaugeVec,
    informer_synced: IntGaugeVec,
    informer_lists: IntCounterVec,
    informer_errors: IntCounterVec,
    informer_undecodable: IntCounterVec,
    informer_late: IntCounterVec,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

pub(crate) fn counter(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> IntCounterVec {
    let metric = IntCounterVec::new(Opts::new(name, help), labels)
        .expect("invariant: valid metric definition");
    registry
        .register(Box::new(metric.clone()))
        .expect("invariant: metric names are unique");
    metric
}

/// Moves `counter` up to `total`, a count kept elsewhere (an informer's, a membership's) and
/// read at scrape time: a counter only goes up, so a smaller total (a count that restarted with
/// its informer) leaves it where it is.
pub(crate) fn advance(counter: &prometheus::IntCounter, total: u64) {
    let current = counter.get();
    if total > current {
        counter.inc_by(total - current);
    }
}

pub(crate) fn gauge(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let metric = IntGaugeVec::new(Opts::new(name, help), labels)
        .expect("invariant: valid metric definition");
    registry
        .register(Box::new(metric.clone()))
        .expect("invariant: metric names are unique");
    metric
}

fn float_gauge(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    let metric =
        GaugeVec::new(Opts::new(name, help), labels).expect("invariant: valid metric definition");
    registry
        .register(Box::new(metric.clone()))
        .expect("invariant: metric names are unique");
    metric
}

fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: Vec<f64>,
) -> HistogramVec {
    let metric = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .expect("invariant: valid metric definition");
    registry
        .register(Box::new(metric.clone()))
        .expect("invariant: metric names are unique");
    metric
}

impl ReconcileSeries {
    fn new(r: &Registry) -> Self {
        let c = &["controller"];
        Self {
            reconcile_total: counter(
                r,
                "controller_runtime_reconcile_total",
                "Total number of reconciliations per controller",
                &["controller", "result"],
            ),
            reconcile_errors: counter(
                r,
                "controller_runtime_reconcile_errors_total",
                "Total number of reconciliation errors per controller",
                c,
            ),
            terminal_errors: counter(
                r,
                "controller_runtime_terminal_reconcile_errors_total",
                "Total number of terminal reconciliation errors per controller",
                c,
            ),
            reconcile_panics: counter(
                r,
                "controller_runtime_reconcile_panics_total",
                "Total number of reconciliation panics per controller",
                c,
            ),
            own_writes_skipped: counter(
                r,
                "kubeforge_controller_own_writes_skipped_total",
                "Watch events not queued because they carried only the controller's own write",
                c,
            ),
            reconcile_time: histogram(
                r,
                "controller_runtime_reconcile_time_seconds",
                "Length of time per reconciliation per controller",
                c,
                RECONCILE_BUCKETS.to_vec(),
            ),
            max_concurrent: gauge(
                r,
                "controller_runtime_max_concurrent_reconciles",
                "Maximum number of concurrent reconciles per controller",
                c,
            ),
            active_workers: gauge(
                r,
                "controller_runtime_active_workers",
                "Number of currently used workers per controller",
                c,
            ),
        }
    }
}

impl QueueSeries {
    fn new(r: &Registry) -> Self {
        let queue_buckets =
            prometheus::exponential_buckets(10e-9, 10.0, 12).expect("invariant: valid buckets");
        let nc = &["name", "controller"];
        Self {
            depth: gauge(
                r,
                "workqueue_depth",
                "Current depth of workqueue by workqueue and priority",
                &["name", "controller", "priority"],
            ),
            adds: counter(
                r,
                "workqueue_adds_total",
                "Total number of adds handled by workqueue",
                nc,
            ),
            retries: counter(
                r,
                "workqueue_retries_total",
                "Total number of retries handled by workqueue",
                nc,
            ),
            queue_duration: histogram(
                r,
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested",
                nc,
                queue_buckets.clone(),
            ),
            work_duration: histogram(
                r,
                "workqueue_work_duration_seconds",
                "How long in seconds processing an item from workqueue takes.",
                nc,
                queue_buckets,
            ),
            unfinished: float_gauge(
                r,
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
                nc,
            ),
            longest: float_gauge(
                r,
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                nc,
            ),
            oldest: float_gauge(
                r,
                "kubeforge_workqueue_oldest_item_seconds",
                "How many seconds the longest-waiting queued item of the priority has waited.",
                &["name", "controller", "priority"],
            ),
            aged: counter(
                r,
                "kubeforge_workqueue_aged_total",
                "Low-priority items handed out before waiting fresh ones, having reached the aging bound.",
                nc,
            ),
        }
    }
}

impl InformerSeries {
    fn new(r: &Registry) -> Self {
        let res = &["resource"];
        Self {
            informer_cached: gauge(
                r,
                "kubeforge_informer_cached_objects",
                "Objects in the informer's cache",
                res,
            ),
            informer_synced: gauge(
                r,
                "kubeforge_informer_synced",
                "Whether the informer has completed its first list (1) or not (0)",
                res,
            ),
            informer_lists: counter(
                r,
                "kubeforge_informer_lists_total",
                "Complete lists (initial and relists) applied by the informer",
                res,
            ),
            informer_errors: counter(
                r,
                "kubeforge_informer_watch_errors_total",
                "List/watch errors of the informer (each followed by a retry)",
                res,
            ),
            informer_undecodable: counter(
                r,
                "kubeforge_informer_undecodable_objects_total",
                "Objects the informer skipped because they did not decode",
                res,
            ),
            informer_late: counter(
                r,
                "kubeforge_informer_late_events_total",
                "Events that waited in a subscriber's backlog because its channel was full",
                res,
            ),
        }
    }
}

impl Metrics {
    /// A fresh registry with every metric defined.
    pub fn new() -> Self {
        let r = Registry::new();
        Self {
            reconcile: ReconcileSeries::new(&r),
            queue: QueueSeries::new(&r),
            informer: InformerSeries::new(&r),
            retry: RetrySeries::new(&r),
            leader: gauge(
                &r,
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
                &["name"],
            ),
            registry: r,
            queues: Mutex::new(Vec::new()),
        }
    }

    /// The queue hooks for controller `controller` (labels `name` and `controller`).
    pub fn queue(&self, controller: &str) -> Arc<dyn QueueMetrics> {
        let labels = [controller, controller];
        let depth = Priority::ALL.map(|priority| {
            let gauge =
                self.queue
                    .depth
                    .with_label_values(&[controller, controller, priority.label()]);
            gauge.set(0);
            gauge
        });
        Arc::new(QueueHooks {
            adds: self.queue.adds.with_label_values(&labels),
            aged: self.queue.aged.with_label_values(&labels),
            depth,
            queue_duration: self.queue.queue_duration.with_label_values(&labels),
            work_duration: self.queue.work_duration.with_label_values(&labels),
            retries: self.queue.retries.with_label_values(&labels),
        })
    }

    /// Sets `leader_election_master_status{name=lease}`.
    pub fn set_leader(&self, lease: &str, leading: bool) {
        self.leader
            .with_label_values(&[lease])
            .set(i64::from(leading));
    }

    /// The Prometheus registry (register your own metrics here to serve them on `/metrics`).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Renders every metric in the Prometheus text format, after refreshing the gauges that are
    /// read on demand (unfinished work, informer state from `cache`).
    pub fn render(&self, cache: Option<&Cache>) -> String {
        self.render_with(cache, Vec::new())
    }

    /// As [`Metrics::render`], with `more` families (those the manager's runners report),
    /// merged with the registry's by name.
    pub fn render_with(&self, cache: Option<&Cache>, more: Vec<MetricFamily>) -> String {
        for (controller, queue) in self.queues.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let (total, longest) = queue.unfinished_work();
            let labels = [controller.as_str(), controller.as_str()];
            self.queue
                .unfinished
                .with_label_values(&labels)
                .set(total.as_secs_f64());
            self.queue
                .longest
                .with_label_values(&labels)
                .set(longest.as_secs_f64());
            for priority in Priority::ALL {
                let oldest = queue.oldest(priority).unwrap_or_default();
                self.queue
                    .oldest
                    .with_label_values(&[
                        controller.as_str(),
                        controller.as_str(),
                        priority.label(),
                    ])
                    .set(oldest.as_secs_f64());
            }
        }
        if let Some(cache) = cache {
            for informer in cache.sync_status() {
                let label = [informer.name.as_str()];
                let to_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
                self.informer
                    .informer_cached
                    .with_label_values(&label)
                    .set(to_i64(informer.cached as u64));
                self.informer
                    .informer_synced
                    .with_label_values(&label)
                    .set(i64::from(informer.synced));
                advance(
                    &self.informer.informer_lists.with_label_values(&label),
                    informer.lists,
                );
                advance(
                    &self.informer.informer_errors.with_label_values(&label),
                    informer.watch_errors,
                );
                advance(
                    &self.informer.informer_undecodable.with_label_values(&label),
                    informer.undecodable,
                );
                advance(
                    &self.informer.informer_late.with_label_values(&label),
                    informer.late_events,
                );
            }
        }
        let mut out = Vec::new();
        let mut families = self.registry.gather();
        families.extend(more);
        families.extend(crate::client::metrics::families());
        families.extend(process::families());
        families.extend(crate::otlp::families());
        let families = crate::runner::merge_families(families);
        if let Err(error) = TextEncoder::new().encode(&families, &mut out) {
            tracing::warn!(%error, "encoding metrics failed");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl ControllerMetrics for Metrics {
    fn reconciled(&self, controller: &str, result: ReconcileResult, took: Duration) {
        self.reconcile
            .reconcile_total
            .with_label_values(&[controller, result.as_str()])
            .inc();
        if result == ReconcileResult::Error {
            self.reconcile
                .reconcile_errors
                .with_label_values(&[controller])
                .inc();
        }
        self.reconcile
            .reconcile_time
            .with_label_values(&[controller])
            .observe(took.as_secs_f64());
    }
    fn panicked(&self, controller: &str) {
        self.reconcile
            .reconcile_panics
            .with_label_values(&[controller])
            .inc();
    }
    fn terminal_error(&self, controller: &str) {
        self.reconcile
            .terminal_errors
            .with_label_values(&[controller])
            .inc();
    }
    fn own_write_skipped(&self, controller: &str) {
        self.reconcile
            .own_writes_skipped
            .with_label_values(&[controller])
            .inc();
    }
    fn active_workers(&self, controller: &str, delta: i64) {
        self.reconcile
            .active_workers
            .with_label_values(&[controller])
            .add(delta);
    }
    fn max_concurrent_reconciles(&self, controller: &str, workers: usize) {
        // Like controller-runtime, publish every series at zero as soon as the controller starts,
        // so rates and absent-series alerts work from the first scrape.
        for result in ["success", "error", "requeue", "requeue_after"] {
            self.reconcile
                .reconcile_total
                .with_label_values(&[controller, result]);
        }
        for counter in [
            &self.reconcile.reconcile_errors,
            &self.reconcile.terminal_errors,
            &self.reconcile.reconcile_panics,
            &self.reconcile.own_writes_skipped,
        ] {
            counter.with_label_values(&[controller]);
        }
        self.reconcile
            .max_concurrent
            .with_label_values(&[controller])
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
        self.reconcile
            .active_workers
            .with_label_values(&[controller])
            .add(0);
    }
    fn queue_started(&self, controller: &str, queue: &WorkQueue<ObjectKey>) {
        self.queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((controller.to_owned(), queue.clone()));
    }
    fn queue_metrics(&self, controller: &str) -> Arc<dyn QueueMetrics> {
        self.queue(controller)
    }
    fn retry_metrics(&self, controller: &str) -> Arc<dyn crate::retry::RetryMetrics> {
        let series = &self.retry;
        let outcome = |o: crate::retry::RetryOutcome| {
            series.retries.with_label_values(&[controller, o.as_str()])
        };
        use crate::retry::RetryOutcome::{Dropped, Exhausted, Scheduled};
        Arc::new(RetryHooks {
            controller: controller.to_owned(),
            pending: series.pending.clone(),
            outcomes: [outcome(Scheduled), outcome(Exhausted), outcome(Dropped)],
            lag: series.lag.with_label_values(&[controller]),
        })
    }
}

/// The retry processors' `kubeforge_retry*` series.
struct RetrySeries {
    pending: IntGaugeVec,
    retries: IntCounterVec,
    lag: HistogramVec,
}

impl RetrySeries {
    fn new(r: &Registry) -> Self {
        Self {
            pending: gauge(
                r,
                "kubeforge_retry_pending",
                "Retries waiting in the retry processor, per shard",
                &["controller", "shard"],
            ),
            retries: counter(
                r,
                "kubeforge_retries_total",
                "Retries scheduled, given up (exhausted) or superseded by a new event (dropped)",
                &["controller", "outcome"],
            ),
            lag: histogram(
                r,
                "kubeforge_retry_lag_seconds",
                "How long after its due time a retry ran",
                &["controller"],
                prometheus::exponential_buckets(1e-4, 4.0, 10).expect("invariant: valid buckets"),
            ),
        }
    }
}

/// One controller's retry series (the outcomes resolved once).
struct RetryHooks {
    controller: String,
    pending: IntGaugeVec,
    outcomes: [prometheus::IntCounter; 3],
    lag: prometheus::Histogram,
}

impl crate::retry::RetryMetrics for RetryHooks {
    fn pending(&self, shard: usize, pending: usize) {
        self.pending
            .with_label_values(&[self.controller.as_str(), &shard.to_string()])
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
    }
    fn retry(&self, outcome: crate::retry::RetryOutcome) {
        use crate::retry::RetryOutcome::{Dropped, Exhausted, Scheduled};
        let i = match outcome {
            Scheduled => 0,
            Exhausted => 1,
            Dropped => 2,
        };
        self.outcomes[i].inc();
    }
    fn lag(&self, lag: Duration) {
        self.lag.observe(lag.as_secs_f64());
    }
}

/// One controller's queue series, resolved once (no label lookups per queue operation).
struct QueueHooks {
    adds: prometheus::IntCounter,
    aged: prometheus::IntCounter,
    /// By priority, in the order of [`Priority::ALL`].
    depth: [prometheus::IntGauge; 2],
    queue_duration: prometheus::Histogram,
    work_duration: prometheus::Histogram,
    retries: prometheus::IntCounter,
}

impl QueueMetrics for QueueHooks {
    fn added(&self) {
        self.adds.inc();
    }
    fn priority_depth(&self, priority: Priority, depth: usize) {
        let index = usize::from(priority == Priority::Low);
        self.depth[index].set(i64::try_from(depth).unwrap_or(i64::MAX));
    }
    fn aged(&self) {
        self.aged.inc();
    }
    fn queued_for(&self, wait: Duration) {
        self.queue_duration.observe(wait.as_secs_f64());
    }
    fn worked_for(&self, work: Duration) {
        self.work_duration.observe(work.as_secs_f64());
    }
    fn retried(&self) {
        self.retries.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn metrics_should_render_controller_runtime_names_and_labels() {
        let metrics = Arc::new(Metrics::new());
        metrics.reconciled("web", ReconcileResult::Success, Duration::from_millis(3));
        metrics.reconciled("web", ReconcileResult::Error, Duration::from_millis(3));
        metrics.panicked("web");
        metrics.max_concurrent_reconciles("web", 4);
        metrics.set_leader("web-lease", true);
        let hooks = metrics.queue("web");
        hooks.added();
        hooks.retried();
        hooks.priority_depth(Priority::High, 2);
        hooks.priority_depth(Priority::Low, 3);
        hooks.aged();
        let queue = WorkQueue::new();
        metrics.queue_started("web", &queue);
        let text = metrics.render(None);
        for line in [
            r#"controller_runtime_reconcile_total{controller="web",result="success"} 1"#,
            r#"controller_runtime_reconcile_total{controller="web",result="error"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="web"} 1"#,
            r#"controller_runtime_reconcile_panics_total{controller="web"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="web"} 2"#,
            r#"controller_runtime_max_concurrent_reconciles{controller="web"} 4"#,
            r#"controller_runtime_active_workers{controller="web"} 0"#,
            r#"workqueue_adds_total{controller="web",name="web"} 1"#,
            r#"workqueue_retries_total{controller="web",name="web"} 1"#,
            r#"workqueue_depth{controller="web",name="web",priority="0"} 2"#,
            r#"workqueue_depth{controller="web",name="web",priority="-100"} 3"#,
            r#"kubeforge_workqueue_aged_total{controller="web",name="web"} 1"#,
            r#"kubeforge_workqueue_oldest_item_seconds{controller="web",name="web",priority="-100"} 0"#,
            r#"workqueue_unfinished_work_seconds{controller="web",name="web"} 0"#,
            r#"leader_election_master_status{name="web-lease"} 1"#,
            "# TYPE controller_runtime_reconcile_time_seconds histogram",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }
}
