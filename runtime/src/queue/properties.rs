//! Property tests of the work queue: random sequences of adds (at both priorities, with and
//! without delays, through the rate limiter), hand-outs, `done`s, `forget`s and clock advances,
//! on a paused clock, checked step by step against a model of the documented semantics:
//!
//! - an item held by a worker is not handed out again until it is done;
//! - nothing is lost: whenever an added item is not in flight, `get` hands something out, and
//!   once every item in flight is done and every delay has passed, every add was followed by a
//!   hand-out of its item and the queue is idle;
//! - the aging bound: `get` hands out the item with the earliest deadline (its queueing time,
//!   plus the aging bound for a low item), high first on a tie;
//! - the queue's counts (`len`, `len_of`, `oldest`, `in_flight`, `is_idle`, `num_requeues`)
//!   are the model's.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use proptest::prelude::*;
use proptest::sample::Index;
use tokio::time::Instant;

use super::{ExponentialBackoff, NoMetrics, Priority, WorkQueue};

type Key = u8;

/// Few keys, so that adds meet queued, delayed and in-flight copies of their item.
const KEYS: Key = 6;

/// The rate limiter's backoff: 1 ms doubling up to 16 ms.
const BASE_MS: u64 = 1;
const MAX_MS: u64 = 16;

#[derive(Clone, Debug)]
enum Op {
    Add(Key, Priority),
    /// A delay in milliseconds (0: added at once).
    AddAfter(Key, u64, Priority),
    AddRateLimited(Key),
    Forget(Key),
    Take,
    /// `done` for one of the items in flight.
    Done(Index),
    /// `done` for any key, in flight or not.
    DoneKey(Key),
    Advance(u64),
}

fn priority() -> impl Strategy<Value = Priority> {
    prop_oneof![Just(Priority::High), Just(Priority::Low)]
}

fn op() -> impl Strategy<Value = Op> {
    let key = || 0..KEYS;
    prop_oneof![
        4 => (key(), priority()).prop_map(|(k, p)| Op::Add(k, p)),
        3 => (key(), 0_u64..30, priority()).prop_map(|(k, d, p)| Op::AddAfter(k, d, p)),
        1 => key().prop_map(Op::AddRateLimited),
        1 => key().prop_map(Op::Forget),
        5 => Just(Op::Take),
        3 => any::<Index>().prop_map(Op::Done),
        1 => key().prop_map(Op::DoneKey),
        2 => (0_u64..40).prop_map(Op::Advance),
    ]
}

/// A queued item in the model: its priority and since when it waits at that priority.
#[derive(Clone, Copy, Debug)]
struct Queued {
    priority: Priority,
    since: Instant,
}

/// The documented semantics, kept as plainly as possible.
#[derive(Debug)]
struct Model {
    aging: Duration,
    /// Items queued, or to be queued again when their worker is done, at this priority.
    dirty: HashMap<Key, Priority>,
    /// Items `get` may hand out.
    ready: HashMap<Key, Queued>,
    in_flight: BTreeSet<Key>,
    /// Each item's earliest pending delay: when it is due, at what priority.
    delayed: HashMap<Key, (Instant, Priority)>,
    failures: HashMap<Key, u32>,
}

impl Model {
    fn new(aging: Duration) -> Self {
        Self {
            aging,
            dirty: HashMap::new(),
            ready: HashMap::new(),
            in_flight: BTreeSet::new(),
            delayed: HashMap::new(),
            failures: HashMap::new(),
        }
    }

    /// When `queued` is due (earliest first), high first on a tie.
    fn deadline(&self, queued: Queued) -> (Instant, u8) {
        match queued.priority {
            Priority::High => (queued.since, 0),
            Priority::Low => (queued.since + self.aging, 1),
        }
    }

    /// Queues `key`; a queued item is only raised, and keeps its deadline if it is past.
    fn push(&mut self, key: Key, priority: Priority, now: Instant) {
        let fresh = Queued {
            priority,
            since: now,
        };
        match self.ready.get(&key).copied() {
            None => {
                self.ready.insert(key, fresh);
            }
            Some(queued) => {
                if priority > queued.priority && self.deadline(queued).0 >= now {
                    self.ready.insert(key, fresh);
                }
            }
        }
    }

    fn add(&mut self, key: Key, priority: Priority, now: Instant) {
        if let Some(queued) = self.dirty.get_mut(&key) {
            if priority > *queued {
                *queued = priority;
                if !self.in_flight.contains(&key) {
                    self.push(key, priority, now);
                }
            }
            return;
        }
        self.dirty.insert(key, priority);
        if !self.in_flight.contains(&key) {
            self.push(key, priority, now);
        }
    }

    /// Only the earliest delay of an item is kept, at the highest priority asked.
    fn add_after(&mut self, key: Key, delay: Duration, priority: Priority, now: Instant) {
        if delay.is_zero() {
            return self.add(key, priority, now);
        }
        let due = now + delay;
        let mut priority = priority;
        if let Some((at, kept)) = self.delayed.get_mut(&key) {
            if *at <= due {
                *kept = (*kept).max(priority);
                return;
            }
            priority = priority.max(*kept);
        }
        self.delayed.insert(key, (due, priority));
    }

    /// The backoff of the next failure of `key` (counting it).
    fn backoff(&mut self, key: Key) -> Duration {
        let failures = self.failures.entry(key).or_default();
        let ms = (BASE_MS << (*failures).min(10)).min(MAX_MS);
        *failures += 1;
        Duration::from_millis(ms)
    }

    /// Delays that have come due are added (`get` does this before it looks).
    fn promote(&mut self, now: Instant) {
        let due: Vec<(Key, Priority)> = self
            .delayed
            .iter()
            .filter(|(_, (at, _))| *at <= now)
            .map(|(key, (_, priority))| (*key, *priority))
            .collect();
        for (key, priority) in due {
            self.delayed.remove(&key);
            self.add(key, priority, now);
        }
    }

    /// The items `get` may hand out: those with the earliest deadline.
    fn next(&self) -> Vec<Key> {
        let first = self.ready.values().map(|q| self.deadline(*q)).min();
        self.ready
            .iter()
            .filter(|(_, q)| Some(self.deadline(**q)) == first)
            .map(|(key, _)| *key)
            .collect()
    }

    fn take(&mut self, key: Key) {
        self.ready.remove(&key);
        self.dirty.remove(&key);
        self.in_flight.insert(key);
    }

    fn done(&mut self, key: Key, now: Instant) {
        if !self.in_flight.remove(&key) {
            return;
        }
        if let Some(&priority) = self.dirty.get(&key) {
            let since = now;
            self.ready.insert(key, Queued { priority, since });
        }
    }

    fn oldest(&self, priority: Priority, now: Instant) -> Option<Duration> {
        self.ready
            .values()
            .filter(|q| q.priority == priority)
            .map(|q| now - q.since)
            .max()
    }

    fn idle(&self) -> bool {
        self.ready.is_empty() && self.in_flight.is_empty() && self.delayed.is_empty()
    }
}

/// The queue, its model, and per key the step of its last add at once and of its last
/// hand-out (kept apart from the model: a hand-out must follow every add).
struct Harness {
    queue: WorkQueue<Key>,
    model: Model,
    step: u64,
    added: HashMap<Key, u64>,
    taken: HashMap<Key, u64>,
}

impl Harness {
    fn new(aging: Duration) -> Self {
        let limiter = ExponentialBackoff::new(
            Duration::from_millis(BASE_MS),
            Duration::from_millis(MAX_MS),
        );
        let queue = WorkQueue::with(limiter, Arc::new(NoMetrics));
        queue.set_aging(aging);
        Self {
            queue,
            model: Model::new(aging),
            step: 0,
            added: HashMap::new(),
            taken: HashMap::new(),
        }
    }

    async fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        self.step += 1;
        let now = Instant::now();
        let (queue, model) = (&self.queue, &mut self.model);
        match op {
            Op::Add(key, priority) => {
                queue.add_with(key, priority);
                model.add(key, priority, now);
                self.added.insert(key, self.step);
            }
            Op::AddAfter(key, ms, priority) => {
                let delay = Duration::from_millis(ms);
                queue.add_after_with(key, delay, priority);
                model.add_after(key, delay, priority, now);
                if delay.is_zero() {
                    self.added.insert(key, self.step);
                }
            }
            Op::AddRateLimited(key) => {
                queue.add_rate_limited(key);
                let delay = model.backoff(key);
                model.add_after(key, delay, Priority::Low, now);
            }
            Op::Forget(key) => {
                queue.forget(&key);
                model.failures.remove(&key);
            }
            Op::Take => {
                self.take()?;
            }
            Op::Done(i) => {
                if !model.in_flight.is_empty() {
                    let key = *model
                        .in_flight
                        .iter()
                        .nth(i.index(model.in_flight.len()))
                        .expect("an index below the length");
                    queue.done(&key);
                    model.done(key, now);
                }
            }
            Op::DoneKey(key) => {
                queue.done(&key);
                model.done(key, now);
            }
            Op::Advance(ms) => tokio::time::advance(Duration::from_millis(ms)).await,
        }
        self.check_counts()
    }

    /// One poll of `get`: it hands out one of the items the model says are next, or nothing
    /// when the model has nothing ready.
    fn take(&mut self) -> Result<Option<Key>, TestCaseError> {
        let model = &mut self.model;
        model.promote(Instant::now());
        let next = model.next();
        let key = match self.queue.get().now_or_never() {
            None => {
                prop_assert!(
                    next.is_empty(),
                    "nothing handed out while {:?} wait, not in flight (lost)",
                    model.ready
                );
                return Ok(None);
            }
            Some(None) => return Err(TestCaseError::fail("the queue shut down")),
            Some(Some(key)) => key,
        };
        prop_assert!(
            !model.in_flight.contains(&key),
            "{} handed out twice at once",
            key
        );
        prop_assert!(
            model.ready.contains_key(&key),
            "{} handed out but not queued: {:?}",
            key,
            model
        );
        prop_assert!(
            next.contains(&key),
            "{} handed out before {:?}, which were due earlier: {:?}",
            key,
            next,
            model.ready
        );
        model.take(key);
        self.step += 1;
        self.taken.insert(key, self.step);
        Ok(Some(key))
    }

    fn check_counts(&self) -> Result<(), TestCaseError> {
        let (queue, model, now) = (&self.queue, &self.model, Instant::now());
        prop_assert_eq!(queue.len(), model.ready.len(), "len");
        for priority in Priority::ALL {
            let of = model.ready.values().filter(|q| q.priority == priority);
            prop_assert_eq!(queue.len_of(priority), of.count(), "len_of {:?}", priority);
            let oldest = model.oldest(priority, now);
            prop_assert_eq!(queue.oldest(priority), oldest, "oldest {:?}", priority);
        }
        prop_assert_eq!(queue.in_flight(), model.in_flight.len(), "in flight");
        prop_assert_eq!(queue.is_idle(), model.idle(), "idle: {:?}", model);
        for key in 0..KEYS {
            let failures = model.failures.get(&key).copied().unwrap_or(0);
            prop_assert_eq!(queue.num_requeues(&key), failures, "requeues of {}", key);
        }
        Ok(())
    }

    /// Workers finish everything and the clock runs until nothing is left: every add was
    /// followed by a hand-out and the queue is idle.
    async fn drain(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..1000 {
            let in_flight: Vec<Key> = self.model.in_flight.iter().copied().collect();
            for key in in_flight {
                self.apply(Op::DoneKey(key)).await?;
            }
            while self.take()?.is_some() {}
            self.check_counts()?;
            if !self.model.in_flight.is_empty() {
                continue;
            }
            let Some(due) = self.model.delayed.values().map(|(at, _)| *at).min() else {
                break;
            };
            tokio::time::advance(due.saturating_duration_since(Instant::now())).await;
        }
        prop_assert!(self.queue.is_idle(), "not idle: {:?}", self.queue);
        for (key, added) in &self.added {
            let taken = self.taken.get(key).copied().unwrap_or(0);
            prop_assert!(
                taken > *added,
                "{} added at step {} but last handed out at {}",
                key,
                added,
                taken
            );
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_queue_should_follow_its_model(aging in 0_u64..60, ops in prop::collection::vec(op(), 1..100)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let mut harness = Harness::new(Duration::from_millis(aging));
            for op in ops {
                harness.apply(op).await?;
            }
            harness.drain().await
        })?;
    }
}
