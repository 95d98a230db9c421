//! A controller's retries: every failed (or explicitly requeued) key becomes a request of the
//! controller's [`RetryProcessor`], under its [`RetryPolicy`]; when due, the key goes back through
//! the work queue, so dedup and "never two reconciles of one key at once" still hold.
//!
//! Per key the controller keeps the failures in a row (what the policy and
//! [`Context::retries`](super::Context::retries) see) and the typed state a reconcile carries
//! across its retries ([`Context::state`](super::Context::state)). Both are dropped on success, on
//! a terminal error, when the policy gives up and when the object is gone.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::ObjectKey;
use crate::queue::{Priority, QueueMetrics, RateLimiter, TokenBucket, WorkQueue};
use crate::retry::{
    DequeuePolicy, NewEvent, PendingRetry, ResourceAction, RetryError, RetryMetrics, RetryOutcome,
    RetryPolicy, RetryProcessor, RetryProcessorConfig, RetryRequest,
};

use super::outcome::Next;
use super::trigger::{Trigger, Triggers};

/// The typed values a reconcile keeps across the retries of one key.
pub(super) type State = Arc<Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>>;

#[derive(Default)]
struct KeyRetries {
    /// Failures in a row.
    attempts: u32,
    state: State,
}

/// What [`Retries::next`] did with a failing key.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Scheduled {
    /// Nothing to retry (done, terminal).
    No,
    /// A retry is due after the delay (the failures so far).
    After(Duration, u32),
    /// The policy gave up after this many failures; the key waits for the object to change.
    Exhausted(u32),
}

/// The retries waiting in the processor, by key, with a number that tells a retry from the one
/// that replaced it.
type PendingRetries = Arc<Mutex<HashMap<ObjectKey, u64>>>;

/// One controller's retry bookkeeping and processor.
pub(super) struct Retries {
    processor: RetryProcessor,
    policy: Arc<dyn RetryPolicy>,
    dequeue: Arc<dyn DequeuePolicy>,
    bucket: Option<Arc<TokenBucket>>,
    keys: Mutex<HashMap<ObjectKey, KeyRetries>>,
    /// Keys with a retry waiting in the processor (what the dequeue policy and `is_idle` see;
    /// events of keys without one cost nothing here).
    pending: PendingRetries,
    seq: std::sync::atomic::AtomicU64,
    queue: WorkQueue<ObjectKey>,
    queue_metrics: Arc<dyn QueueMetrics>,
    metrics: Arc<dyn RetryMetrics>,
    /// Why each queued key was queued.
    triggers: Arc<Triggers>,
}

/// What a controller's retries are configured with.
pub(super) struct RetryConfig {
    pub(super) policy: Arc<dyn RetryPolicy>,
    pub(super) dequeue: Arc<dyn DequeuePolicy>,
    pub(super) bucket: Option<Arc<TokenBucket>>,
    pub(super) metrics: Arc<dyn RetryMetrics>,
    pub(super) queue_metrics: Arc<dyn QueueMetrics>,
}

impl Retries {
    pub(super) fn new(config: RetryConfig, queue: WorkQueue<ObjectKey>) -> Self {
        // The processor's own policy never runs: its requests only put keys back into the queue
        // and always succeed; the controller applies the policy to the reconcile's outcome.
        let never = |_: &RetryError, _| None;
        // One shard: a due request only puts its key back into the queue.
        let processor = RetryProcessor::new(RetryProcessorConfig::default().workers(1), never)
            .metrics(Arc::clone(&config.metrics));
        Self {
            processor,
            policy: config.policy,
            dequeue: config.dequeue,
            bucket: config.bucket,
            keys: Mutex::default(),
            pending: Arc::default(),
            seq: std::sync::atomic::AtomicU64::new(0),
            queue,
            queue_metrics: config.queue_metrics,
            metrics: config.metrics,
            triggers: Arc::default(),
        }
    }

    /// Why each queued key was queued (recorded by the sources and the retries, taken by the
    /// worker).
    pub(super) fn triggers(&self) -> &Triggers {
        &self.triggers
    }

    /// The processor, to run next to the workers.
    pub(super) fn processor(&self) -> &RetryProcessor {
        &self.processor
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, KeyRetries>> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Failures of `key` in a row.
    pub(super) fn attempts(&self, key: &ObjectKey) -> u32 {
        self.keys().get(key).map_or(0, |k| k.attempts)
    }

    /// The state `key`'s reconciles carry across retries, if any was stored.
    pub(super) fn existing_state(&self, key: &ObjectKey) -> Option<State> {
        self.keys().get(key).map(|k| Arc::clone(&k.state))
    }

    /// The state `key`'s reconciles carry across retries (created on first use).
    pub(super) fn state(&self, key: &ObjectKey) -> State {
        Arc::clone(&self.keys().entry(key.clone()).or_default().state)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, u64>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether no retry is waiting.
    pub(super) fn is_idle(&self) -> bool {
        self.pending().is_empty()
    }

    /// A new event for `key`; whether it is queued now. Without a pending retry, it is. With
    /// one, the dequeue policy decides: the retry is dropped and the event reconciles the key
    /// now, or the retry stays and the event waits for it (the retry reconciles the latest
    /// cached object, so nothing is lost; the key's backoff is kept, so a failing reconcile
    /// whose own status writes come back as events does not spin).
    pub(super) fn on_event(&self, key: &ObjectKey, event: NewEvent) -> bool {
        let mut pending = self.pending();
        if !pending.contains_key(key) {
            return true;
        }
        let name = key.to_string();
        let view = PendingRetry {
            key: &name,
            action: ResourceAction::Update,
            attempt: self.attempts(key),
        };
        if !self.dequeue.dequeue(&event, &view) {
            return false;
        }
        pending.remove(key);
        drop(pending);
        self.processor.dequeue_all(&name);
        self.metrics.retry(RetryOutcome::Dropped);
        true
    }

    /// Forgets `key`: its failures, its state and its pending retry.
    pub(super) fn forget(&self, key: &ObjectKey) {
        self.keys().remove(key);
        if self.pending().remove(key).is_some() {
            self.processor.dequeue_all(&key.to_string());
        }
    }

    /// Carries out `next` for `key`; `error` is the failure the policy judges (`None` for an
    /// explicit requeue).
    pub(super) fn next(
        &self,
        next: Next,
        key: &ObjectKey,
        error: Option<&RetryError>,
    ) -> Scheduled {
        match next {
            Next::Forget | Next::Terminal => {
                self.forget(key);
                Scheduled::No
            }
            Next::ForgetThenAfter(delay, priority) => {
                self.forget(key);
                self.schedule(key, delay, priority, Trigger::Requeue);
                Scheduled::After(delay, 0)
            }
            Next::After(delay, priority) => self.failed(key, error, Some(delay), priority),
            Next::RateLimited => self.failed(key, error, None, Priority::Low),
        }
    }

    /// One more failure of `key`: the policy says whether and when it runs again (`delay`, if
    /// given, replaces the policy's delay but not its verdict); it is queued at `priority`.
    fn failed(
        &self,
        key: &ObjectKey,
        error: Option<&RetryError>,
        delay: Option<Duration>,
        priority: Priority,
    ) -> Scheduled {
        let attempts = {
            let mut keys = self.keys();
            let entry = keys.entry(key.clone()).or_default();
            entry.attempts = entry.attempts.saturating_add(1);
            entry.attempts
        };
        let requeued = RequeueRequested;
        let judged = error.unwrap_or(&requeued);
        let Some(policy_delay) = self.policy.retry_after(judged, attempts) else {
            self.forget(key);
            self.metrics.retry(RetryOutcome::Exhausted);
            return Scheduled::Exhausted(attempts);
        };
        let mut delay = delay.unwrap_or(policy_delay);
        if let Some(bucket) = &self.bucket {
            delay = delay.max(RateLimiter::<()>::when(bucket.as_ref(), &()));
        }
        self.queue_metrics.retried();
        self.metrics.retry(RetryOutcome::Scheduled);
        let trigger = if error.is_some() {
            Trigger::Retry { attempt: attempts }
        } else {
            Trigger::Requeue
        };
        self.schedule(key, delay, priority, trigger);
        Scheduled::After(delay, attempts)
    }

    /// Puts `key` back into the queue at `priority` after `delay`, replacing any pending retry
    /// of it.
    fn schedule(&self, key: &ObjectKey, delay: Duration, priority: Priority, trigger: Trigger) {
        let name = key.to_string();
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.pending().insert(key.clone(), seq).is_some() {
            self.processor.dequeue_all(&name);
        }
        let (queue, key, pending) = (self.queue.clone(), key.clone(), Arc::clone(&self.pending));
        let triggers = Arc::clone(&self.triggers);
        self.processor
            .enqueue(RetryRequest::new(name, delay, move || {
                let mut pending = pending.lock().unwrap_or_else(|e| e.into_inner());
                // Only the retry still on record runs (a replaced one was dequeued, but may
                // have been popped already).
                if pending.get(&key) == Some(&seq) {
                    pending.remove(&key);
                    triggers.record(&key, trigger.clone());
                    queue.add_with(key.clone(), priority);
                }
                async { Ok(None) }
            }));
    }
}

/// What the policy judges when a reconcile asked to run again (`Action::Requeue`).
#[derive(Debug, thiserror::Error)]
#[error("the reconcile asked to run again")]
pub struct RequeueRequested;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::NoMetrics;
    use crate::retry::{DequeueAll, ExponentialRetry, NoRetryMetrics};

    fn retries(policy: impl RetryPolicy) -> (Retries, WorkQueue<ObjectKey>) {
        let queue = WorkQueue::new();
        let config = RetryConfig {
            policy: Arc::new(policy),
            dequeue: Arc::new(DequeueAll),
            bucket: None,
            metrics: Arc::new(NoRetryMetrics),
            queue_metrics: Arc::new(NoMetrics),
        };
        (Retries::new(config, queue.clone()), queue)
    }

    #[derive(Debug, thiserror::Error)]
    #[error("boom")]
    struct Boom;

    #[tokio::test(start_paused = true)]
    async fn failures_should_follow_the_policy_and_give_up() {
        let policy = ExponentialRetry::new(Duration::from_secs(1), Duration::from_secs(4), 3);
        let (retries, queue) = retries(policy);
        let shutdown = tokio_util::sync::CancellationToken::new();
        tokio::spawn(retries.processor().clone().run(shutdown.clone()));
        let key = ObjectKey::namespaced("ns", "a");
        let mut delays = Vec::new();
        for _ in 0..3 {
            match retries.next(Next::RateLimited, &key, Some(&Boom)) {
                Scheduled::After(delay, _) => delays.push(delay),
                other => {
                    assert_eq!(other, Scheduled::Exhausted(3));
                    break;
                }
            }
        }
        assert_eq!(delays, [Duration::from_secs(1), Duration::from_secs(2)]);
        assert_eq!(retries.attempts(&key), 0, "forgotten after giving up");

        // A scheduled retry puts the key back into the queue when due, once.
        retries.next(Next::RateLimited, &key, Some(&Boom));
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(queue.is_empty());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(queue.len(), 1);
        shutdown.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn success_should_drop_attempts_state_and_pending_retries() {
        let (retries, queue) = retries(ExponentialRetry::new(
            Duration::from_secs(1),
            Duration::from_secs(1),
            u32::MAX,
        ));
        let shutdown = tokio_util::sync::CancellationToken::new();
        tokio::spawn(retries.processor().clone().run(shutdown.clone()));
        let key = ObjectKey::namespaced("ns", "a");
        retries.next(Next::RateLimited, &key, Some(&Boom));
        retries
            .state(&key)
            .lock()
            .unwrap()
            .insert(TypeId::of::<u8>(), Box::new(7u8));
        assert_eq!(retries.attempts(&key), 1);
        assert_eq!(retries.state(&key).lock().unwrap().len(), 1, "kept");
        retries.next(Next::Forget, &key, None);
        assert_eq!(retries.attempts(&key), 0);
        assert!(retries.state(&key).lock().unwrap().is_empty());
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(queue.is_empty(), "the pending retry was dropped");
        shutdown.cancel();
    }

    /// Ends the current run of the taken `key` with `next` as a worker would, and returns how
    /// long until the queue hands the key out again (`None`: not within an hour); the key is
    /// then taken again, ready for the next run.
    async fn next_run(
        retries: &Retries,
        queue: &WorkQueue<ObjectKey>,
        key: &ObjectKey,
        next: Next,
    ) -> Option<Duration> {
        retries.next(next, key, Some(&Boom));
        queue.done(key);
        let start = tokio::time::Instant::now();
        tokio::select! {
            got = queue.get() => {
                assert_eq!(got.as_ref(), Some(key));
                Some(start.elapsed())
            }
            () = tokio::time::sleep(Duration::from_secs(3600)) => None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_should_back_off_like_a_failure_and_success_should_reset_it() {
        let (retries, queue) = retries(crate::controller::config::default_retry());
        let shutdown = tokio_util::sync::CancellationToken::new();
        tokio::spawn(retries.processor().clone().run(shutdown.clone()));
        let key = ObjectKey::namespaced("ns", "a");
        queue.add(key.clone());
        assert_eq!(queue.get().await.as_ref(), Some(&key));
        let ms = Duration::from_millis;
        // Asking to run again, again and again: 5 ms, 10 ms, 20 ms — not a busy loop.
        let run = |next| next_run(&retries, &queue, &key, next);
        assert_eq!(run(Next::RateLimited).await, Some(ms(5)));
        assert_eq!(run(Next::RateLimited).await, Some(ms(10)));
        assert_eq!(run(Next::RateLimited).await, Some(ms(20)));
        assert_eq!(retries.attempts(&key), 3);
        // RequeueAfter resets the backoff: after it, a failure starts from 5 ms again.
        assert_eq!(
            run(Next::ForgetThenAfter(ms(700), Priority::Low)).await,
            Some(ms(700))
        );
        assert_eq!(run(Next::RateLimited).await, Some(ms(5)));
        // ErrorPolicy::RetryAfter: its delay, the failure counted.
        assert_eq!(
            run(Next::After(ms(300), Priority::Low)).await,
            Some(ms(300))
        );
        assert_eq!(retries.attempts(&key), 2);
        // Done: forgotten and not queued again.
        assert_eq!(run(Next::Forget).await, None);
        assert_eq!(retries.attempts(&key), 0);
        assert!(retries.is_idle());
        shutdown.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn dequeue_policies_should_drop_pending_retries_on_the_events_they_choose() {
        use crate::retry::DequeueOnGeneration;
        let queue = WorkQueue::new();
        let config = RetryConfig {
            policy: Arc::new(crate::controller::config::default_retry()),
            dequeue: Arc::new(DequeueOnGeneration),
            bucket: None,
            metrics: Arc::new(NoRetryMetrics),
            queue_metrics: Arc::new(NoMetrics),
        };
        let retries = Retries::new(config, queue.clone());
        let shutdown = tokio_util::sync::CancellationToken::new();
        tokio::spawn(retries.processor().clone().run(shutdown.clone()));
        let key = ObjectKey::namespaced("ns", "a");
        let status_only = NewEvent {
            action: ResourceAction::Update,
            generation_changed: false,
        };
        let spec_change = NewEvent {
            generation_changed: true,
            ..status_only
        };
        assert!(
            retries.on_event(&key, status_only),
            "nothing pending: queued"
        );
        retries.next(
            Next::After(Duration::from_secs(10), Priority::Low),
            &key,
            Some(&Boom),
        );
        assert!(
            !retries.on_event(&key, status_only),
            "a status-only update waits for the retry"
        );
        assert!(!retries.is_idle(), "and keeps it");
        assert!(
            retries.on_event(&key, spec_change),
            "a generation change is queued"
        );
        assert!(retries.is_idle(), "and drops the retry");
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(queue.is_empty(), "the dropped retry never ran");
        shutdown.cancel();
    }
}
