//! The work queue between event handlers and reconcile workers.
//!
//! Semantics are client-go's `workqueue`, which controller authors rely on:
//!
//! - **Deduplication**: an item added several times before a worker takes it is handed out once.
//! - **Never concurrently**: an item is handed to one worker at a time. If it is added again while
//!   a worker holds it, it is queued once more when that worker calls [`WorkQueue::done`].
//! - **Priorities with aging**: [`WorkQueue::add`] queues a fresh event at [`Priority::High`];
//!   [`WorkQueue::add_after`], [`WorkQueue::add_rate_limited`] and
//!   [`WorkQueue::add_with`]`(.., Priority::Low)` (start-up, resync) queue work that can wait.
//!   High items go first, but a low item goes before every high item queued more than the aging
//!   bound ([`WorkQueue::set_aging`], default [`DEFAULT_AGING`]) after it, so none starves.
//! - **Delays**: [`WorkQueue::add_after`] holds an item back; only its earliest due time is kept.
//! - **Rate limiting**: [`WorkQueue::add_rate_limited`] delays by the [`RateLimiter`] (per-item
//!   exponential backoff combined with an overall token bucket by default);
//!   [`WorkQueue::forget`] resets an item's backoff after success.
//! - **Shutdown**: [`WorkQueue::shutdown_with_drain`] stops handing out items and waits, up to a
//!   grace period, for the ones in flight.
//!
//! Metrics hooks ([`QueueMetrics`]) see adds, depth, time spent queued, work duration and retries;
//! unfinished work is read on demand ([`WorkQueue::unfinished_work`]).
//!
//! # Examples
//!
//! ```
//! use kubeforge::queue::WorkQueue;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let queue = WorkQueue::new();
//! queue.add("default/web");
//! queue.add("default/web"); // deduplicated
//! let item = queue.get().await.unwrap();
//! assert_eq!(item, "default/web");
//! assert_eq!(queue.len(), 0);
//! queue.done(&item);
//! # }
//! ```

#[cfg(test)]
mod properties;
mod rate_limit;
mod ready;

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

pub(crate) use rate_limit::exponential;
pub use rate_limit::{
    ExponentialBackoff, InvalidRateLimit, MaxOf, RateLimiter, TokenBucket, default_rate_limiter,
};
use ready::Ready;
pub use ready::{DEFAULT_AGING, Priority};

/// Observes a [`WorkQueue`]; every method has a no-op default.
pub trait QueueMetrics: Send + Sync {
    /// An item was added (whether or not it was already queued).
    fn added(&self) {}
    /// The number of queued items changed.
    fn depth(&self, _depth: usize) {}
    /// The number of queued items of `priority` changed.
    fn priority_depth(&self, _priority: Priority, _depth: usize) {}
    /// A low-priority item was handed out before waiting high ones: it reached the aging bound.
    fn aged(&self) {}
    /// An item was handed to a worker after waiting this long in the queue.
    fn queued_for(&self, _wait: Duration) {}
    /// A worker finished an item after working on it this long.
    fn worked_for(&self, _work: Duration) {}
    /// An item was re-added through the rate limiter.
    fn retried(&self) {}
}

/// A [`QueueMetrics`] that records nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMetrics;
impl QueueMetrics for NoMetrics {}

/// A deduplicating, rate-limited, delaying work queue. Cheap to clone (all clones share it).
pub struct WorkQueue<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> std::fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("WorkQueue")
            .field("queued", &state.ready.len())
            .field("processing", &state.processing.len())
            .field("delayed", &state.delayed.len())
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Wakes workers waiting in `get` (and `shutdown_with_drain` waiting for `done`).
    notify: Notify,
    /// Wakes everyone in `wait_idle` on any change (kept apart from `notify`, whose
    /// `notify_one` must reach a worker).
    activity: Notify,
    limiter: Box<dyn RateLimiter<T>>,
    metrics: Arc<dyn QueueMetrics>,
}

/// The state holds each item once: the maps and lanes share it (an item is in up to four of
/// them while queued; with [`ObjectKey`](crate::ObjectKey)s of two strings each, copies cost
/// about 500 bytes per queued item, 25 MiB for an operator's start-up wave of 50,000 objects).
struct State<T> {
    ready: Ready<Arc<T>>,
    /// Items that are queued or must be queued again once their worker is done, with the
    /// priority to queue them at.
    dirty: HashMap<Arc<T>, Priority>,
    /// When each queued item was added (for the queue-latency metric).
    added_at: HashMap<Arc<T>, Instant>,
    /// Items held by workers, with the time they were handed out.
    processing: HashMap<Arc<T>, Instant>,
    /// Delayed items by due time; `seq` keeps entries with equal times distinct.
    delayed: BTreeMap<(Instant, u64), (Arc<T>, Priority)>,
    delayed_index: HashMap<Arc<T>, (Instant, u64)>,
    seq: u64,
    shutting_down: bool,
}

/// An item given to the queue: the caller's, or one the queue holds already (a delayed item
/// coming due); shared once the queue keeps it.
enum Incoming<T> {
    Owned(T),
    Held(Arc<T>),
}

impl<T> Incoming<T> {
    fn get(&self) -> &T {
        match self {
            Self::Owned(item) => item,
            Self::Held(item) => item,
        }
    }

    fn share(self) -> Arc<T> {
        match self {
            Self::Owned(item) => Arc::new(item),
            Self::Held(item) => item,
        }
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> Default for WorkQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// A queue with client-go's default rate limiter and no metrics.
    pub fn new() -> Self {
        Self::with(default_rate_limiter(), Arc::new(NoMetrics))
    }

    /// A queue with the given rate limiter and metrics hooks.
    pub fn with(limiter: impl RateLimiter<T> + 'static, metrics: Arc<dyn QueueMetrics>) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    ready: Ready::new(DEFAULT_AGING),
                    dirty: HashMap::new(),
                    added_at: HashMap::new(),
                    processing: HashMap::new(),
                    delayed: BTreeMap::new(),
                    delayed_index: HashMap::new(),
                    seq: 0,
                    shutting_down: false,
                }),
                notify: Notify::new(),
                activity: Notify::new(),
                limiter: Box::new(limiter),
                metrics,
            }),
        }
    }

    /// Queues `item` at [`Priority::High`] (a fresh event) unless it is already queued (then it
    /// is only raised to high); if a worker holds it, it is queued again when the worker is
    /// done. Ignored after shutdown.
    pub fn add(&self, item: T) {
        self.add_with(item, Priority::High);
    }

    /// Queues `item` at `priority`, as [`WorkQueue::add`] does. An item already queued keeps
    /// its place, raised to `priority` if that is higher; it is never lowered.
    pub fn add_with(&self, item: T, priority: Priority) {
        let mut state = self.shared.lock();
        if self.insert(&mut state, Incoming::Owned(item), priority) {
            drop(state);
            self.shared.notify.notify_one();
        }
    }

    /// Returns whether a worker should be woken.
    fn insert(&self, state: &mut State<T>, item: Incoming<T>, priority: Priority) -> bool {
        if state.shutting_down {
            return false;
        }
        let now = Instant::now();
        if let Some((held, queued_at)) = state.dirty.get_key_value(item.get()) {
            if priority > *queued_at {
                let held = Arc::clone(held);
                state.dirty.insert(Arc::clone(&held), priority);
                if !state.processing.contains_key(&*held) {
                    state.ready.push(held, priority, now);
                    self.depths(state);
                }
            }
            return false;
        }
        let item = item.share();
        state.dirty.insert(Arc::clone(&item), priority);
        self.shared.metrics.added();
        if state.processing.contains_key(&*item) {
            return false; // re-queued by `done`
        }
        state.added_at.insert(Arc::clone(&item), now);
        state.ready.push(item, priority, now);
        self.depths(state);
        self.shared.activity.notify_waiters();
        true
    }

    /// Reports the depths to the metrics hooks.
    fn depths(&self, state: &State<T>) {
        let metrics = &self.shared.metrics;
        metrics.depth(state.ready.len());
        for priority in Priority::ALL {
            metrics.priority_depth(priority, state.ready.len_of(priority));
        }
    }

    /// Queues `item` at [`Priority::Low`] after `delay` (a requeue). If it is already waiting
    /// with an earlier due time, that time is kept; a zero delay queues it at once.
    pub fn add_after(&self, item: T, delay: Duration) {
        self.add_after_with(item, delay, Priority::Low);
    }

    /// Queues `item` at `priority` after `delay`, as [`WorkQueue::add_after`] does (when two
    /// delays of one item meet, the earlier due time is kept, at the higher priority).
    pub fn add_after_with(&self, item: T, delay: Duration, priority: Priority) {
        if delay.is_zero() {
            return self.add_with(item, priority);
        }
        let due = Instant::now() + delay;
        let mut state = self.shared.lock();
        if state.shutting_down {
            return;
        }
        let mut priority = priority;
        if let Some(&slot) = state.delayed_index.get(&item) {
            let kept = state.delayed.get_mut(&slot).map(|(_, p)| p);
            if slot.0 <= due {
                if let Some(kept) = kept {
                    *kept = (*kept).max(priority);
                }
                return;
            }
            priority = kept.map_or(priority, |kept| (*kept).max(priority));
            state.delayed_index.remove(&item);
            state.delayed.remove(&slot);
        }
        state.seq += 1;
        let slot = (due, state.seq);
        let item = Arc::new(item);
        state.delayed.insert(slot, (Arc::clone(&item), priority));
        state.delayed_index.insert(item, slot);
        drop(state);
        // The new due time may be earlier than what sleeping workers wait for.
        self.shared.notify.notify_waiters();
        self.shared.activity.notify_waiters();
    }

    /// Queues `item` at [`Priority::Low`] after the delay its rate limiter gives (counting one
    /// more failure).
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.shared.limiter.when(&item);
        self.shared.metrics.retried();
        self.add_after(item, delay);
    }

    /// Clears `item`'s failure history, so its next backoff starts from the base delay.
    pub fn forget(&self, item: &T) {
        self.shared.limiter.forget(item);
    }

    /// How many times `item` has been rate-limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.shared.limiter.retries(item)
    }

    /// Waits for the next item and marks it as being processed; call [`WorkQueue::done`] with it
    /// when finished. Returns `None` once the queue is shut down.
    pub async fn get(&self) -> Option<T> {
        loop {
            let notified = self.shared.notify.notified();
            tokio::pin!(notified);
            // Registered before the state is inspected, so no wake-up can fall in between.
            notified.as_mut().enable();
            let next_due = {
                let mut state = self.shared.lock();
                if state.shutting_down {
                    return None;
                }
                self.promote_due(&mut state);
                if let Some(popped) = state.ready.pop() {
                    let (item, now) = (popped.item, Instant::now());
                    state.dirty.remove(&*item);
                    if let Some(added) = state.added_at.remove(&*item) {
                        self.shared.metrics.queued_for(now - added);
                    }
                    if popped.aged {
                        self.shared.metrics.aged();
                    }
                    state.processing.insert(Arc::clone(&item), now);
                    self.depths(&state);
                    let more = state.ready.len() > 0;
                    drop(state);
                    if more {
                        // Pass the baton: another worker may take the next item.
                        self.shared.notify.notify_one();
                    }
                    return Some(T::clone(&item));
                }
                state.delayed.keys().next().map(|(due, _)| *due)
            };
            match next_due {
                Some(due) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(due) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Moves delayed items whose time has come into the queue.
    fn promote_due(&self, state: &mut State<T>) {
        let now = Instant::now();
        while let Some(entry) = state.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (item, priority) = entry.remove();
            state.delayed_index.remove(&*item);
            self.insert(state, Incoming::Held(item), priority);
        }
    }

    /// Marks `item` as no longer processed; if it was added meanwhile, it is queued again.
    pub fn done(&self, item: &T) {
        let mut state = self.shared.lock();
        let Some(started) = state.processing.remove(item) else {
            return;
        };
        self.shared.metrics.worked_for(started.elapsed());
        let requeue = state
            .dirty
            .get_key_value(item)
            .map(|(held, priority)| (Arc::clone(held), *priority))
            .filter(|_| !state.shutting_down);
        let requeued = requeue.is_some();
        if let Some((held, priority)) = requeue {
            let now = Instant::now();
            state.added_at.insert(Arc::clone(&held), now);
            state.ready.push(held, priority, now);
            self.depths(&state);
        }
        drop(state);
        // Wakes a worker for the requeued item, and `shutdown_with_drain` waiting for the drain.
        self.shared.notify.notify_waiters();
        self.shared.activity.notify_waiters();
        if requeued {
            self.shared.notify.notify_one();
        }
    }

    /// Number of items waiting to be handed out (not counting delayed or in-flight ones).
    pub fn len(&self) -> usize {
        self.shared.lock().ready.len()
    }

    /// Number of items of `priority` waiting to be handed out.
    pub fn len_of(&self, priority: Priority) -> usize {
        self.shared.lock().ready.len_of(priority)
    }

    /// How long the longest-waiting item of `priority` has waited so far (`None`: none waits).
    pub fn oldest(&self, priority: Priority) -> Option<Duration> {
        self.shared.lock().ready.oldest(priority, Instant::now())
    }

    /// Sets the aging bound: a low-priority item goes before every high-priority item queued
    /// more than `bound` after it (default [`DEFAULT_AGING`]; `Duration::MAX`: strict priority,
    /// low items wait for as long as high ones keep coming).
    pub fn set_aging(&self, bound: Duration) {
        self.shared.lock().ready.set_aging(bound);
    }

    /// Whether no item is waiting to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of items held by workers right now.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().processing.len()
    }

    /// Total time the in-flight items have been worked on so far, and the longest single one
    /// (controller-runtime's `unfinished_work_seconds` and `longest_running_processor_seconds`).
    pub fn unfinished_work(&self) -> (Duration, Duration) {
        let now = Instant::now();
        let state = self.shared.lock();
        state
            .processing
            .values()
            .map(|started| now - *started)
            .fold((Duration::ZERO, Duration::ZERO), |(total, longest), d| {
                (total + d, longest.max(d))
            })
    }

    /// Whether nothing is queued, in flight or delayed.
    pub fn is_idle(&self) -> bool {
        let state = self.shared.lock();
        state.ready.len() == 0 && state.processing.is_empty() && state.delayed.is_empty()
    }

    /// Waits until the queue has been idle (nothing queued, in flight or delayed) for `quiet` in
    /// a row: the work a burst of events caused, retries included, is done. For tests and
    /// tools; a controller that requeues periodically is never idle.
    pub async fn wait_idle(&self, quiet: Duration) {
        loop {
            let activity = self.shared.activity.notified();
            tokio::pin!(activity);
            activity.as_mut().enable();
            if !self.is_idle() {
                activity.await;
                continue;
            }
            tokio::select! {
                () = &mut activity => {}
                () = tokio::time::sleep(quiet) => {
                    if self.is_idle() {
                        return;
                    }
                }
            }
        }
    }

    /// Stops the queue at once: later adds are ignored and [`WorkQueue::get`] returns `None`.
    pub fn shutdown(&self) {
        self.shared.lock().shutting_down = true;
        self.shared.notify.notify_waiters();
        self.shared.activity.notify_waiters();
    }

    /// Whether [`WorkQueue::shutdown`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.lock().shutting_down
    }

    /// Shuts down, then waits until workers have called [`WorkQueue::done`] for every in-flight
    /// item, or `grace` has passed. Returns whether all in-flight work finished in time.
    pub async fn shutdown_with_drain(&self, grace: Duration) -> bool {
        self.shutdown();
        let deadline = Instant::now() + grace;
        loop {
            let notified = self.shared.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.in_flight() == 0 {
                return true;
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => return self.in_flight() == 0,
            }
        }
    }
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Every critical section leaves the state consistent before anything can panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    async fn next(queue: &WorkQueue<&'static str>) -> Option<&'static str> {
        tokio::time::timeout(Duration::from_secs(3600 * 24 * 365), queue.get())
            .await
            .ok()
            .flatten()
    }

    /// Whether `get` would return something without time passing.
    async fn ready(queue: &WorkQueue<&'static str>) -> Option<&'static str> {
        tokio::time::timeout(Duration::from_millis(1), queue.get())
            .await
            .ok()
            .flatten()
    }

    /// An item that counts its clones.
    struct Counted(u32, Arc<AtomicUsize>);

    impl PartialEq for Counted {
        fn eq(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }

    impl Eq for Counted {}

    impl std::hash::Hash for Counted {
        fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
            self.0.hash(state);
        }
    }

    impl Clone for Counted {
        fn clone(&self) -> Self {
            self.1.fetch_add(1, Ordering::Relaxed);
            Self(self.0, Arc::clone(&self.1))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_hold_each_queued_item_once() {
        let clones = Arc::new(AtomicUsize::new(0));
        let q = WorkQueue::new();
        for i in 0..100 {
            q.add(Counted(i, Arc::clone(&clones)));
            q.add_with(Counted(i, Arc::clone(&clones)), Priority::Low);
            q.add_after(
                Counted(1000 + i, Arc::clone(&clones)),
                Duration::from_secs(1),
            );
        }
        assert_eq!(
            clones.load(Ordering::Relaxed),
            0,
            "queued and delayed: no copy"
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        for _ in 0..200 {
            let item = q.get().await.expect("queued");
            q.add(item.clone()); // again while in flight: queued once more at `done`
            q.done(&item);
        }
        // One copy handed out per `get` and the test's own per re-add; none kept by the queue.
        assert_eq!(clones.load(Ordering::Relaxed), 400);
        assert_eq!(q.len(), 200);
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_deduplicate_and_keep_order() {
        let q = WorkQueue::new();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        assert_eq!(next(&q).await, Some("a"));
        assert_eq!(next(&q).await, Some("b"));
        assert_eq!(ready(&q).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_not_hand_out_an_item_in_flight_but_rerun_it_after_done() {
        let q = WorkQueue::new();
        q.add("a");
        let a = next(&q).await.unwrap();
        q.add("a");
        q.add("a");
        assert_eq!(
            ready(&q).await,
            None,
            "held by a worker: not handed out again"
        );
        q.done(&a);
        assert_eq!(ready(&q).await, Some("a"), "re-run once after done");
        q.done(&"a");
        assert_eq!(ready(&q).await, None, "and only once");
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_release_delayed_items_when_due_keeping_the_earliest() {
        let q = WorkQueue::new();
        q.add_after("late", Duration::from_secs(10));
        q.add_after("soon", Duration::from_secs(5));
        q.add_after("soon", Duration::from_secs(20)); // later duplicate: ignored
        let start = Instant::now();
        assert_eq!(next(&q).await, Some("soon"));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        assert_eq!(next(&q).await, Some("late"));
        assert_eq!(start.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_wake_a_sleeping_worker_for_an_earlier_delay() {
        let q = WorkQueue::new();
        q.add_after("late", Duration::from_secs(60));
        let worker = tokio::spawn({
            let q = q.clone();
            async move {
                let item = q.get().await;
                (item, Instant::now())
            }
        });
        tokio::task::yield_now().await;
        let start = Instant::now();
        q.add_after("early", Duration::from_secs(1));
        let (item, at) = worker.await.unwrap();
        assert_eq!(item, Some("early"));
        assert_eq!(at - start, Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_keep_a_delayed_copy_after_a_plain_add() {
        let q = WorkQueue::new();
        q.add_after("a", Duration::from_secs(60));
        q.add("a");
        assert_eq!(ready(&q).await, Some("a"));
        q.done(&"a");
        assert_eq!(ready(&q).await, None);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(
            ready(&q).await,
            Some("a"),
            "the requested requeue still happens"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_count_requeues_until_forgotten() {
        let q = WorkQueue::new();
        q.add_rate_limited("a");
        q.add_rate_limited("a");
        assert_eq!(q.num_requeues(&"a"), 2);
        q.forget(&"a");
        assert_eq!(q.num_requeues(&"a"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_apply_backoff_delays_in_sequence() {
        let q = WorkQueue::new();
        let mut waits = Vec::new();
        for _ in 0..4 {
            let before = Instant::now();
            q.add_rate_limited("a");
            let a = next(&q).await.unwrap();
            waits.push(before.elapsed());
            q.done(&a);
        }
        let ms = |n| Duration::from_millis(n);
        assert_eq!(waits, [ms(5), ms(10), ms(20), ms(40)]);
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_stop_handing_out_after_shutdown() {
        let q = WorkQueue::new();
        let waiting = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.shutdown();
        assert_eq!(waiting.await.unwrap(), None);
        q.add("a");
        assert!(q.is_empty(), "adds after shutdown are ignored");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_with_drain_should_wait_for_in_flight_work_within_grace() {
        let q = WorkQueue::new();
        q.add("a");
        let a = next(&q).await.unwrap();
        let finisher = tokio::spawn({
            let q = q.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                q.done(&a);
            }
        });
        let start = Instant::now();
        assert!(q.shutdown_with_drain(Duration::from_secs(10)).await);
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        finisher.await.unwrap();

        let q = WorkQueue::new();
        q.add("stuck");
        let _stuck = next(&q).await.unwrap();
        let start = Instant::now();
        assert!(!q.shutdown_with_drain(Duration::from_secs(5)).await);
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_never_run_one_item_concurrently_under_load() {
        let q = WorkQueue::new();
        let running = Arc::new(Mutex::new(HashSet::new()));
        let runs = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for _ in 0..8 {
            let (q, running, runs) = (q.clone(), running.clone(), runs.clone());
            workers.push(tokio::spawn(async move {
                while let Some(item) = q.get().await {
                    assert!(
                        running.lock().unwrap().insert(item),
                        "{item} ran twice at once"
                    );
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    running.lock().unwrap().remove(&item);
                    runs.fetch_add(1, Ordering::SeqCst);
                    q.done(&item);
                }
            }));
        }
        for round in 0..50 {
            for item in ["a", "b", "c"] {
                q.add(item);
            }
            if round % 2 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(q.shutdown_with_drain(Duration::from_secs(1)).await);
        for w in workers {
            w.await.unwrap();
        }
        let runs = runs.load(Ordering::SeqCst);
        assert!(
            (3..=150).contains(&runs),
            "deduplicated: {runs} runs for 150 adds"
        );
    }

    #[derive(Default)]
    struct Recorder {
        adds: AtomicUsize,
        retries: AtomicUsize,
        max_depth: AtomicUsize,
        queued: Mutex<Vec<Duration>>,
        worked: Mutex<Vec<Duration>>,
    }
    impl QueueMetrics for Recorder {
        fn added(&self) {
            self.adds.fetch_add(1, Ordering::SeqCst);
        }
        fn depth(&self, depth: usize) {
            self.max_depth.fetch_max(depth, Ordering::SeqCst);
        }
        fn queued_for(&self, wait: Duration) {
            self.queued.lock().unwrap().push(wait);
        }
        fn worked_for(&self, work: Duration) {
            self.worked.lock().unwrap().push(work);
        }
        fn retried(&self) {
            self.retries.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_report_metrics_and_unfinished_work() {
        let metrics = Arc::new(Recorder::default());
        let q = WorkQueue::with(default_rate_limiter(), metrics.clone());
        q.add("a");
        q.add("b");
        q.add("a");
        tokio::time::advance(Duration::from_millis(30)).await;
        let a = next(&q).await.unwrap();
        tokio::time::advance(Duration::from_millis(70)).await;
        assert_eq!(
            q.unfinished_work(),
            (Duration::from_millis(70), Duration::from_millis(70))
        );
        q.done(&a);
        q.add_rate_limited("c");
        assert_eq!(
            metrics.adds.load(Ordering::SeqCst),
            2,
            "a duplicate add is not counted"
        );
        assert_eq!(metrics.retries.load(Ordering::SeqCst), 1);
        assert_eq!(metrics.max_depth.load(Ordering::SeqCst), 2);
        assert_eq!(*metrics.queued.lock().unwrap(), [Duration::from_millis(30)]);
        assert_eq!(*metrics.worked.lock().unwrap(), [Duration::from_millis(70)]);
    }

    #[tokio::test(start_paused = true)]
    async fn wait_idle_should_return_after_the_last_retry_and_a_quiet_period() {
        let queue: WorkQueue<&str> = WorkQueue::new();
        queue.add("a");
        let worker = {
            let queue = queue.clone();
            tokio::spawn(async move {
                // Fails twice (retried after 5 ms, then 10 ms), then succeeds.
                for _ in 0..2 {
                    let item = queue.get().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    queue.add_rate_limited(item);
                    queue.done(&item);
                }
                let item = queue.get().await.unwrap();
                queue.forget(&item);
                queue.done(&item);
            })
        };
        let start = Instant::now();
        queue.wait_idle(Duration::from_millis(100)).await;
        // 50 + 5 + 50 + 10 ms of work and retries, then 100 ms of quiet.
        assert_eq!(start.elapsed(), Duration::from_millis(215));
        assert!(queue.is_idle());
        worker.await.unwrap();
    }

    /// A start-up wave of 1,000 low items worked by 2 workers at 10 ms each (5 s in all) and
    /// an edit every 100 ms: each edit waits for at most the items in flight, and the wave
    /// still finishes on time.
    #[tokio::test(start_paused = true)]
    async fn fresh_events_should_overtake_a_start_up_wave_which_still_finishes() {
        let q: WorkQueue<String> = WorkQueue::new();
        for i in 0..1000 {
            q.add_with(format!("wave-{i}"), Priority::Low);
        }
        let handed = Arc::new(Mutex::new(Vec::<(String, Instant)>::new()));
        let mut workers = Vec::new();
        for _ in 0..2 {
            let (q, handed) = (q.clone(), Arc::clone(&handed));
            workers.push(tokio::spawn(async move {
                while let Some(item) = q.get().await {
                    handed.lock().unwrap().push((item.clone(), Instant::now()));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    q.done(&item);
                }
            }));
        }
        let start = Instant::now();
        let mut edits = HashMap::new();
        for i in 0..40 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let edit = format!("edit-{i}");
            edits.insert(edit.clone(), Instant::now());
            q.add(edit);
        }
        q.wait_idle(Duration::from_millis(1)).await;
        q.shutdown();
        for w in workers {
            w.await.unwrap();
        }
        let handed = handed.lock().unwrap();
        let waits: Vec<Duration> = handed
            .iter()
            .filter_map(|(item, at)| edits.get(item).map(|queued| *at - *queued))
            .collect();
        assert_eq!(waits.len(), 40);
        assert!(
            waits.iter().all(|w| *w <= Duration::from_millis(10)),
            "an edit waits at most for one item in flight: {waits:?}"
        );
        let wave_done = handed
            .iter()
            .filter(|(item, _)| item.starts_with("wave-"))
            .map(|(_, at)| *at)
            .max()
            .unwrap();
        assert!(
            wave_done - start <= Duration::from_millis(5200),
            "the wave took {:?} (5 s of work, plus the edits' 0.2 s)",
            wave_done - start
        );
    }

    /// A steady stream of fresh events, twice what the worker can do, does not starve a low
    /// item: it goes right after the fresh events queued before it was due (the aging bound
    /// after it was queued), before every later one.
    #[tokio::test(start_paused = true)]
    async fn a_stream_of_fresh_events_should_not_hold_a_low_item_past_its_deadline() {
        let q: WorkQueue<String> = WorkQueue::new();
        q.set_aging(Duration::from_secs(2));
        let start = Instant::now();
        q.add_with("resync".to_owned(), Priority::Low);
        let feeder = tokio::spawn({
            let q = q.clone();
            async move {
                for i in 0.. {
                    q.add(format!("fresh-{i}"));
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        });
        tokio::task::yield_now().await;
        let mut before = 0;
        loop {
            let item = q.get().await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
            q.done(&item);
            if item == "resync" {
                break;
            }
            before += 1;
        }
        feeder.abort();
        // Fresh events 0..=400 were queued at 0..=2000 ms, the last one at its deadline (a tie
        // goes to the high item); 401 came after.
        assert_eq!(
            before, 401,
            "handed out after exactly the fresh events queued before its deadline"
        );
        assert_eq!(start.elapsed(), Duration::from_millis(4020));
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_raised_while_in_flight_should_come_back_at_the_higher_priority() {
        let q = WorkQueue::new();
        q.add_with("a", Priority::Low);
        let a = next(&q).await.unwrap();
        q.add_with("a", Priority::Low);
        q.add("a");
        q.add_with("b", Priority::Low);
        q.done(&a);
        assert_eq!(q.len_of(Priority::High), 1);
        assert_eq!(ready(&q).await, Some("a"), "raised: before the low `b`");
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_items_should_come_in_at_their_priority() {
        let q = WorkQueue::new();
        q.add_after("requeue", Duration::from_secs(1));
        q.add_after_with("urgent", Duration::from_secs(1), Priority::High);
        q.add_after("merged", Duration::from_secs(1));
        q.add_after_with("merged", Duration::from_secs(5), Priority::High);
        tokio::time::advance(Duration::from_secs(1)).await;
        // A later delay of a waiting item raises its priority, keeping its earlier time.
        let order = [ready(&q).await, ready(&q).await, ready(&q).await];
        assert_eq!(order, [Some("urgent"), Some("merged"), Some("requeue")]);
        assert_eq!(q.len_of(Priority::High), 0);
    }

    /// Random adds at random priorities and delays, by several producers, while four workers
    /// take items: every add is followed by a hand-out of its item (nothing lost), and no item
    /// is handed out twice at once. (The tick of an add is taken before the add, that of a
    /// hand-out after it: a hand-out can only be later than the add it serves.)
    #[tokio::test(start_paused = true)]
    async fn no_add_should_be_lost_whatever_the_priorities_and_delays() {
        use std::sync::atomic::AtomicU64;
        let q: WorkQueue<u32> = WorkQueue::new();
        q.set_aging(Duration::from_millis(50));
        let clock = Arc::new(AtomicU64::new(1));
        // Per item: the tick of its last add and of its last hand-out.
        let last = Arc::new(Mutex::new(HashMap::<u32, (u64, u64)>::new()));
        let running = Arc::new(Mutex::new(HashSet::new()));
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let (q, clock, last, running) =
                (q.clone(), clock.clone(), last.clone(), running.clone());
            tasks.push(tokio::spawn(async move {
                while let Some(item) = q.get().await {
                    let tick = clock.fetch_add(1, Ordering::SeqCst);
                    last.lock().unwrap().entry(item).or_default().1 = tick;
                    assert!(running.lock().unwrap().insert(item), "{item} twice at once");
                    tokio::time::sleep(Duration::from_millis(u64::from(item % 3))).await;
                    running.lock().unwrap().remove(&item);
                    q.done(&item);
                }
            }));
        }
        let mut producers = Vec::new();
        for seed in 1..=3_u64 {
            let (q, clock, last) = (q.clone(), clock.clone(), last.clone());
            producers.push(tokio::spawn(async move {
                let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let mut next = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                for _ in 0..3000 {
                    let r = next();
                    let item = u32::try_from(r % 40).unwrap();
                    let priority = if r & 64 == 0 {
                        Priority::High
                    } else {
                        Priority::Low
                    };
                    if (r >> 8) % 4 == 0 {
                        // Delayed adds mix in (only the earliest pending delay of an item is
                        // kept, so they are not checked one by one).
                        let delay = Duration::from_millis((r >> 12) % 20);
                        q.add_after_with(item, delay, priority);
                    } else {
                        let tick = clock.fetch_add(1, Ordering::SeqCst);
                        last.lock().unwrap().entry(item).or_default().0 = tick;
                        q.add_with(item, priority);
                    }
                    if r % 5 == 0 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }));
        }
        for p in producers {
            p.await.unwrap();
        }
        // A queue that lost track of an item may never be idle: bounded (in paused time).
        let idle = tokio::time::timeout(
            Duration::from_secs(60),
            q.wait_idle(Duration::from_millis(100)),
        );
        assert!(idle.await.is_ok(), "the queue never became idle: {q:?}");
        for (item, (added, handed)) in last.lock().unwrap().iter() {
            assert!(
                handed > added,
                "item {item} added at tick {added} but last handed out at {handed}"
            );
        }
        q.shutdown();
        for t in tasks {
            t.await.unwrap();
        }
    }
}
