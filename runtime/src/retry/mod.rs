//! The retry processor: retries of failed work, sharded by key, each shard a min-heap by time.
//!
//! This is app-sdk's `RetryProcessor`. A [`RetryRequest`] carries a key, the work to retry and
//! the attempt number. Requests are routed to a worker by a hash of the key, so the retries of
//! one key always run on the same worker, one after the other — never two at once. Each worker
//! keeps its pending requests in a min-heap ordered by due time and sleeps exactly until the
//! earliest one (no polling interval).
//!
//! When the work fails, the [`RetryPolicy`] decides whether and when to try again. When it
//! succeeds but asks for a requeue (`Ok(Some(delay))`), that delay wins over the policy.
//! [`RetryProcessor::dequeue_all`] drops the pending retries of a key, and
//! [`RetryProcessor::on_event`] applies the [`DequeuePolicy`] when a new event for a key arrives
//! (by default: drop its pending retries, since the new event supersedes them).
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use kubeforge::retry::{ExponentialRetry, RetryProcessor, RetryProcessorConfig, RetryRequest};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let processor = RetryProcessor::new(
//!     RetryProcessorConfig::default().workers(2),
//!     ExponentialRetry::new(Duration::from_secs(1), Duration::from_secs(60), 5),
//! );
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! tokio::spawn(processor.clone().run(shutdown.clone()));
//! processor.enqueue(RetryRequest::new("default/web", Duration::from_secs(1), || async {
//!     Ok(None) // done: no further retry
//! }));
//! shutdown.cancel();
//! # }
//! ```

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::collections::hash_map::DefaultHasher;
use std::fmt::Debug;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::queue::exponential;

use crate::BoxError;

/// The work of a [`RetryRequest`]: `Ok(None)` is done, `Ok(Some(d))` asks to run again after
/// `d`, `Err` is a failure for the [`RetryPolicy`] to judge.
pub type RetryFn =
    Box<dyn FnMut() -> BoxFuture<'static, Result<Option<Duration>, BoxError>> + Send>;

/// What kind of event a retry or a new event stems from (for [`DequeuePolicy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceAction {
    /// The object was created.
    Create,
    /// The object was updated.
    Update,
    /// The object was deleted.
    Delete,
    /// Periodic resync.
    Resync,
}

/// A unit of work to retry.
pub struct RetryRequest {
    /// The key the work is about (retries of one key run on one worker, in order).
    pub key: String,
    /// When to run it.
    pub retry_after: Instant,
    /// How many attempts failed before this one.
    pub attempt: u32,
    /// The event the work handles.
    pub action: ResourceAction,
    /// The work.
    pub func: RetryFn,
}

impl Debug for RetryRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryRequest")
            .field("key", &self.key)
            .field("retry_after", &self.retry_after)
            .field("attempt", &self.attempt)
            .field("action", &self.action)
            .finish_non_exhaustive()
    }
}

impl RetryRequest {
    /// A request for `key` due after `delay`, first attempt, action `Update`.
    pub fn new<F, Fut>(key: impl Into<String>, delay: Duration, mut func: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<Duration>, BoxError>> + Send + 'static,
    {
        Self {
            key: key.into(),
            retry_after: Instant::now() + delay,
            attempt: 0,
            action: ResourceAction::Update,
            func: Box::new(move || Box::pin(func())),
        }
    }

    /// Sets the action the work handles.
    #[must_use]
    pub fn action(mut self, action: ResourceAction) -> Self {
        self.action = action;
        self
    }
}

/// The error a [`RetryPolicy`] judges.
pub type RetryError = dyn std::error::Error + Send + Sync + 'static;

/// Decides whether a failed attempt is retried, and after how long.
pub trait RetryPolicy: Send + Sync + 'static {
    /// `attempt` counts failures so far, this one included (1 after the first failure). `None`
    /// gives up.
    fn retry_after(&self, error: &RetryError, attempt: u32) -> Option<Duration>;
}

impl<F> RetryPolicy for F
where
    F: Fn(&RetryError, u32) -> Option<Duration> + Send + Sync + 'static,
{
    fn retry_after(&self, error: &RetryError, attempt: u32) -> Option<Duration> {
        self(error, attempt)
    }
}

/// Exponential backoff: `base`, `2·base`, `4·base`, ... capped at `max`, giving up after
/// `max_attempts` failures.
#[derive(Clone, Copy, Debug)]
pub struct ExponentialRetry {
    base: Duration,
    max: Duration,
    max_attempts: u32,
}

impl ExponentialRetry {
    /// Backoff from `base` doubling up to `max`, for at most `max_attempts` failures.
    pub fn new(base: Duration, max: Duration, max_attempts: u32) -> Self {
        Self {
            base,
            max,
            max_attempts,
        }
    }
}

impl RetryPolicy for ExponentialRetry {
    fn retry_after(&self, _error: &RetryError, attempt: u32) -> Option<Duration> {
        (attempt < self.max_attempts)
            .then(|| exponential(self.base, self.max, attempt.saturating_sub(1)))
    }
}

/// A new event for a key, as a [`DequeuePolicy`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewEvent {
    /// What happened to the object.
    pub action: ResourceAction,
    /// Whether the object's `metadata.generation` changed (its spec did); `false` for a
    /// status-only or metadata-only update, a resync, or an event of another object (an owned
    /// or watched one) that concerns this key.
    pub generation_changed: bool,
}

impl NewEvent {
    /// An event of `action` that changed the generation (creations and deletions do).
    pub fn new(action: ResourceAction) -> Self {
        Self {
            action,
            generation_changed: matches!(action, ResourceAction::Create | ResourceAction::Delete),
        }
    }
}

impl NewEvent {
    /// The event an informer event is, comparing the generations of the old and new object.
    pub fn of<K: kube::Resource>(event: &crate::informer::Event<K>) -> Self {
        use crate::informer::Event;
        match event {
            Event::Applied { old: None, .. } => Self::new(ResourceAction::Create),
            Event::Applied {
                old: Some(old),
                new,
            } => Self {
                action: ResourceAction::Update,
                generation_changed: old.meta().generation != new.meta().generation,
            },
            Event::Deleted(_) => Self::new(ResourceAction::Delete),
            Event::Resync(_) => Self::new(ResourceAction::Resync),
        }
    }
}

impl From<ResourceAction> for NewEvent {
    fn from(action: ResourceAction) -> Self {
        Self::new(action)
    }
}

/// A pending retry, as a [`DequeuePolicy`] sees it.
#[derive(Clone, Copy, Debug)]
pub struct PendingRetry<'a> {
    /// The key it retries.
    pub key: &'a str,
    /// The event it handles.
    pub action: ResourceAction,
    /// Failures before it.
    pub attempt: u32,
}

impl<'a> From<&'a RetryRequest> for PendingRetry<'a> {
    fn from(request: &'a RetryRequest) -> Self {
        Self {
            key: &request.key,
            action: request.action,
            attempt: request.attempt,
        }
    }
}

/// Decides, when a new event for a key arrives, whether a pending retry of that key is dropped
/// (app-sdk's `RetryDequeuePolicy`). A dropped retry does not run; the new event is handled
/// instead.
pub trait DequeuePolicy: Send + Sync + 'static {
    /// Whether `pending` should be dropped because of `event`.
    fn dequeue(&self, event: &NewEvent, pending: &PendingRetry<'_>) -> bool;
}

impl<F> DequeuePolicy for F
where
    F: Fn(&NewEvent, &PendingRetry<'_>) -> bool + Send + Sync + 'static,
{
    fn dequeue(&self, event: &NewEvent, pending: &PendingRetry<'_>) -> bool {
        self(event, pending)
    }
}

/// The default [`DequeuePolicy`]: any new event drops every pending retry of its key.
#[derive(Clone, Copy, Debug, Default)]
pub struct DequeueAll;

impl DequeuePolicy for DequeueAll {
    fn dequeue(&self, _event: &NewEvent, _pending: &PendingRetry<'_>) -> bool {
        true
    }
}

/// app-sdk's opinionated policy: only an event that changed the object's generation (a spec
/// change, a creation, a deletion) drops the pending retries; a status-only update or a resync
/// leaves a pending retry in place, so the work it retries is not lost to an update the retry
/// itself (or another writer of the status) caused.
#[derive(Clone, Copy, Debug, Default)]
pub struct DequeueOnGeneration;

impl DequeuePolicy for DequeueOnGeneration {
    fn dequeue(&self, event: &NewEvent, _pending: &PendingRetry<'_>) -> bool {
        event.generation_changed
    }
}

/// A new event drops pending retries of the same action only (a pending delete retry survives a
/// later update, for example), except that a delete drops all.
#[derive(Clone, Copy, Debug, Default)]
pub struct DequeueSameAction;

impl DequeuePolicy for DequeueSameAction {
    fn dequeue(&self, event: &NewEvent, pending: &PendingRetry<'_>) -> bool {
        event.action == ResourceAction::Delete || pending.action == event.action
    }
}

/// New events never drop pending retries.
#[derive(Clone, Copy, Debug, Default)]
pub struct DequeueNone;

impl DequeuePolicy for DequeueNone {
    fn dequeue(&self, _event: &NewEvent, _pending: &PendingRetry<'_>) -> bool {
        false
    }
}

/// Hooks the processor reports to (the manager's metrics implement them); every method has a
/// no-op default.
pub trait RetryMetrics: Send + Sync + 'static {
    /// Shard `shard` now holds `pending` retries.
    fn pending(&self, _shard: usize, _pending: usize) {}
    /// A retry was scheduled (`scheduled`), given up on (`exhausted`) or dropped by a new event
    /// (`dropped`).
    fn retry(&self, _outcome: RetryOutcome) {}
    /// A retry ran `lag` after it was due.
    fn lag(&self, _lag: Duration) {}
}

/// What became of a retry, for [`RetryMetrics::retry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryOutcome {
    /// A retry was scheduled.
    Scheduled,
    /// The policy gave up on the key.
    Exhausted,
    /// A new event dropped a pending retry.
    Dropped,
}

impl RetryOutcome {
    /// The metric label (`scheduled`, `exhausted`, `dropped`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Exhausted => "exhausted",
            Self::Dropped => "dropped",
        }
    }
}

/// [`RetryMetrics`] that record nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRetryMetrics;

impl RetryMetrics for NoRetryMetrics {}

/// Options of a [`RetryProcessor`].
#[derive(Clone, Debug)]
pub struct RetryProcessorConfig {
    workers: usize,
}

impl Default for RetryProcessorConfig {
    fn default() -> Self {
        Self { workers: 4 }
    }
}

impl RetryProcessorConfig {
    /// Number of workers (shards); at least 1, default 4.
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }
}

enum Command {
    Enqueue(RetryRequest),
    DequeueAll(String),
    OnEvent(String, NewEvent),
}

/// Sharded retry workers. Cheap to clone; [`RetryProcessor::run`] drives them.
#[derive(Clone)]
pub struct RetryProcessor {
    shards: Arc<Vec<mpsc::UnboundedSender<Command>>>,
    receivers: Arc<Mutex<Vec<mpsc::UnboundedReceiver<Command>>>>,
    policy: Arc<dyn RetryPolicy>,
    dequeue: Arc<dyn DequeuePolicy>,
    metrics: Arc<dyn RetryMetrics>,
}

impl Debug for RetryProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryProcessor")
            .field("workers", &self.shards.len())
            .finish_non_exhaustive()
    }
}

impl RetryProcessor {
    /// A processor with `config.workers` shards retrying by `policy`, dropping pending retries
    /// on new events by [`DequeueAll`].
    pub fn new(config: RetryProcessorConfig, policy: impl RetryPolicy) -> Self {
        Self::with_policy(config, Arc::new(policy))
    }

    /// Like [`RetryProcessor::new`], with a shared policy.
    pub fn with_policy(config: RetryProcessorConfig, policy: Arc<dyn RetryPolicy>) -> Self {
        let (senders, receivers) = (0..config.workers)
            .map(|_| mpsc::unbounded_channel())
            .unzip();
        Self {
            shards: Arc::new(senders),
            receivers: Arc::new(Mutex::new(receivers)),
            policy,
            dequeue: Arc::new(DequeueAll),
            metrics: Arc::new(NoRetryMetrics),
        }
    }

    /// Replaces the [`DequeuePolicy`].
    #[must_use]
    pub fn dequeue_policy(mut self, policy: impl DequeuePolicy) -> Self {
        self.dequeue = Arc::new(policy);
        self
    }

    /// Like [`RetryProcessor::dequeue_policy`], with a shared policy.
    #[must_use]
    pub fn dequeue_policy_shared(mut self, policy: Arc<dyn DequeuePolicy>) -> Self {
        self.dequeue = policy;
        self
    }

    /// Reports pending retries, outcomes and lag to `metrics`.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn RetryMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    fn shard(&self, key: &str) -> &mpsc::UnboundedSender<Command> {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        let n = self.shards.len() as u64;
        // `n` is at least 1 and the index is below it, so both conversions are exact.
        let index = usize::try_from(hasher.finish() % n).unwrap_or(0);
        &self.shards[index]
    }

    /// Schedules `request` (ignored after the processor stopped).
    pub fn enqueue(&self, request: RetryRequest) {
        let _ = self.shard(&request.key).send(Command::Enqueue(request));
    }

    /// Drops every pending retry of `key`.
    pub fn dequeue_all(&self, key: &str) {
        let _ = self.shard(key).send(Command::DequeueAll(key.to_owned()));
    }

    /// Tells the processor a new event for `key` arrived: pending retries the [`DequeuePolicy`]
    /// selects are dropped.
    pub fn on_event(&self, key: &str, event: impl Into<NewEvent>) {
        let _ = self
            .shard(key)
            .send(Command::OnEvent(key.to_owned(), event.into()));
    }

    /// Runs the workers until `shutdown` is cancelled (pending retries are dropped then).
    /// Only the first call runs them; later calls return at once.
    pub async fn run(self, shutdown: CancellationToken) {
        let receivers =
            std::mem::take(&mut *self.receivers.lock().unwrap_or_else(|e| e.into_inner()));
        let workers: Vec<_> = receivers
            .into_iter()
            .enumerate()
            .map(|(shard, rx)| {
                let worker = ShardWorker {
                    shard,
                    rx,
                    heap: BinaryHeap::new(),
                    seq: 0,
                    policy: Arc::clone(&self.policy),
                    dequeue: Arc::clone(&self.dequeue),
                    metrics: Arc::clone(&self.metrics),
                };
                tokio::spawn(worker.run(shutdown.clone()))
            })
            .collect();
        for w in workers {
            let _ = w.await;
        }
    }
}

struct Pending {
    due: Instant,
    seq: u64,
    request: RetryRequest,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

struct ShardWorker {
    shard: usize,
    rx: mpsc::UnboundedReceiver<Command>,
    heap: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    policy: Arc<dyn RetryPolicy>,
    dequeue: Arc<dyn DequeuePolicy>,
    metrics: Arc<dyn RetryMetrics>,
}

impl ShardWorker {
    fn push(&mut self, request: RetryRequest) {
        self.seq += 1;
        self.heap.push(Reverse(Pending {
            due: request.retry_after,
            seq: self.seq,
            request,
        }));
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::Enqueue(request) => self.push(request),
            Command::DequeueAll(key) => self.heap.retain(|Reverse(p)| p.request.key != key),
            Command::OnEvent(key, event) => {
                let dequeue = Arc::clone(&self.dequeue);
                let before = self.heap.len();
                self.heap.retain(|Reverse(p)| {
                    p.request.key != key
                        || !dequeue.dequeue(&event, &PendingRetry::from(&p.request))
                });
                for _ in self.heap.len()..before {
                    self.metrics.retry(RetryOutcome::Dropped);
                }
            }
        }
        self.metrics.pending(self.shard, self.heap.len());
    }

    async fn run(mut self, shutdown: CancellationToken) {
        loop {
            let next_due = self.heap.peek().map(|Reverse(p)| p.due);
            let sleep = async {
                match next_due {
                    Some(due) => tokio::time::sleep_until(due).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return,
                command = self.rx.recv() => match command {
                    Some(command) => self.apply(command),
                    None => return,
                },
                () = sleep => {
                    let Some(Reverse(pending)) = self.heap.pop() else { continue };
                    self.metrics.lag(Instant::now().saturating_duration_since(pending.due));
                    self.execute(pending.request).await;
                    self.metrics.pending(self.shard, self.heap.len());
                }
            }
        }
    }

    async fn execute(&mut self, mut request: RetryRequest) {
        match (request.func)().await {
            Ok(None) => {}
            Ok(Some(delay)) => {
                request.retry_after = Instant::now() + delay;
                request.attempt = 0;
                self.push(request);
            }
            Err(error) => {
                let failures = request.attempt + 1;
                let delay = self.policy.retry_after(error.as_ref(), failures);
                let error = crate::text::concise(error.as_ref());
                match delay {
                    Some(delay) => {
                        self.metrics.retry(RetryOutcome::Scheduled);
                        tracing::debug!(key = %request.key, attempt = failures, %error, ?delay, "retrying");
                        request.retry_after = Instant::now() + delay;
                        request.attempt = failures;
                        self.push(request);
                    }
                    None => {
                        self.metrics.retry(RetryOutcome::Exhausted);
                        tracing::warn!(key = %request.key, attempts = failures, %error, "giving up after repeated failures");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    type Log = Arc<Mutex<Vec<(String, Duration)>>>;

    /// A request that logs (key, time since `start`) and then returns `result`.
    fn logged(
        key: &str,
        delay: Duration,
        log: &Log,
        start: Instant,
        result: fn() -> Result<Option<Duration>, BoxError>,
    ) -> RetryRequest {
        let (log, name) = (log.clone(), key.to_owned());
        RetryRequest::new(key, delay, move || {
            let (log, name) = (log.clone(), name.clone());
            async move {
                log.lock().unwrap().push((name, start.elapsed()));
                result()
            }
        })
    }

    fn started(processor: &RetryProcessor) -> CancellationToken {
        let token = CancellationToken::new();
        tokio::spawn(processor.clone().run(token.clone()));
        token
    }

    #[tokio::test(start_paused = true)]
    async fn processor_should_run_requests_in_due_order() {
        let processor = RetryProcessor::new(
            RetryProcessorConfig::default().workers(1),
            ExponentialRetry::new(Duration::from_secs(1), Duration::from_secs(60), 3),
        );
        let log: Log = Arc::default();
        let start = Instant::now();
        let _token = started(&processor);
        processor.enqueue(logged("c", Duration::from_secs(3), &log, start, || {
            Ok(None)
        }));
        processor.enqueue(logged("a", Duration::from_secs(1), &log, start, || {
            Ok(None)
        }));
        processor.enqueue(logged("b", Duration::from_secs(2), &log, start, || {
            Ok(None)
        }));
        tokio::time::sleep(Duration::from_secs(10)).await;
        let s = Duration::from_secs;
        assert_eq!(
            *log.lock().unwrap(),
            [("a".into(), s(1)), ("b".into(), s(2)), ("c".into(), s(3))]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn processor_should_back_off_failures_then_give_up() {
        let processor = RetryProcessor::new(
            RetryProcessorConfig::default(),
            ExponentialRetry::new(Duration::from_secs(1), Duration::from_secs(60), 4),
        );
        let log: Log = Arc::default();
        let start = Instant::now();
        let _token = started(&processor);
        processor.enqueue(logged("k", Duration::ZERO, &log, start, || {
            Err("boom".into())
        }));
        tokio::time::sleep(Duration::from_secs(100)).await;
        let times: Vec<_> = log
            .lock()
            .unwrap()
            .iter()
            .map(|(_, t)| t.as_secs())
            .collect();
        // Attempts at 0, then after 1 s, 2 s, 4 s; the 4th failure gives up.
        assert_eq!(times, [0, 1, 3, 7]);
    }

    #[tokio::test(start_paused = true)]
    async fn explicit_requeue_should_override_the_policy() {
        let never = |_: &RetryError, _| None;
        let processor = RetryProcessor::new(RetryProcessorConfig::default(), never);
        let runs = Arc::new(AtomicU32::new(0));
        let _token = started(&processor);
        let counter = runs.clone();
        processor.enqueue(RetryRequest::new("k", Duration::ZERO, move || {
            let counter = counter.clone();
            async move {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                Ok((n < 2).then_some(Duration::from_secs(5)))
            }
        }));
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert_eq!(
            runs.load(Ordering::SeqCst),
            3,
            "requeued twice by request, then done"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn dequeue_all_should_drop_pending_retries_of_the_key_only() {
        let processor = RetryProcessor::new(
            RetryProcessorConfig::default().workers(1),
            |_: &RetryError, _| None,
        );
        let log: Log = Arc::default();
        let start = Instant::now();
        let _token = started(&processor);
        processor.enqueue(logged("a", Duration::from_secs(5), &log, start, || {
            Ok(None)
        }));
        processor.enqueue(logged("b", Duration::from_secs(5), &log, start, || {
            Ok(None)
        }));
        processor.dequeue_all("a");
        tokio::time::sleep(Duration::from_secs(10)).await;
        let keys: Vec<_> = log.lock().unwrap().iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, ["b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn dequeue_policy_should_decide_on_new_events() {
        let processor = RetryProcessor::new(
            RetryProcessorConfig::default().workers(1),
            |_: &RetryError, _| None,
        )
        .dequeue_policy(DequeueSameAction);
        let log: Log = Arc::default();
        let start = Instant::now();
        let _token = started(&processor);
        processor.enqueue(
            logged("k", Duration::from_secs(5), &log, start, || Ok(None))
                .action(ResourceAction::Delete),
        );
        processor.enqueue(
            logged("k", Duration::from_secs(5), &log, start, || Ok(None))
                .action(ResourceAction::Update),
        );
        processor.on_event("k", ResourceAction::Update);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(
            log.lock().unwrap().len(),
            1,
            "the pending delete retry survived an update"
        );

        processor.enqueue(
            logged("k", Duration::from_secs(5), &log, start, || Ok(None))
                .action(ResourceAction::Create),
        );
        processor.on_event("k", ResourceAction::Delete);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(log.lock().unwrap().len(), 1, "a delete drops everything");
    }

    #[tokio::test(start_paused = true)]
    async fn one_key_should_never_run_concurrently_across_shards() {
        let processor = RetryProcessor::new(
            RetryProcessorConfig::default().workers(4),
            |_: &RetryError, _| None,
        );
        let running = Arc::new(AtomicU32::new(0));
        let max = Arc::new(AtomicU32::new(0));
        let _token = started(&processor);
        for i in 0..20 {
            let (running, max) = (running.clone(), max.clone());
            processor.enqueue(RetryRequest::new(
                "same",
                Duration::from_millis(i),
                move || {
                    let (running, max) = (running.clone(), max.clone());
                    async move {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        max.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        running.fetch_sub(1, Ordering::SeqCst);
                        Ok(None)
                    }
                },
            ));
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(max.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn exponential_retry_should_cap_and_stop() {
        let policy = ExponentialRetry::new(Duration::from_secs(1), Duration::from_secs(5), 5);
        let e: BoxError = "x".into();
        let delays: Vec<_> = (1..=5).map(|a| policy.retry_after(e.as_ref(), a)).collect();
        let s = |n| Some(Duration::from_secs(n));
        assert_eq!(delays, [s(1), s(2), s(4), s(5), None]);
    }
}
