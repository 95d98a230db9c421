//! Sources of keys besides the informers: a stream of keys from outside the cluster
//! ([`Controller::reconcile_on`](super::Controller::reconcile_on)), and a timer per object
//! ([`Controller::every`](super::Controller::every), kopf's timers): every cached object is
//! queued once per period, with jitter so that objects created together do not fire together,
//! and its timer stops when it is deleted.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Resource;
use tokio::time::Instant;

use crate::ObjectKey;
use crate::informer::{Event, Subscription};
use crate::queue::Priority;
use crate::retry::{NewEvent, ResourceAction};

use super::handlers::{Queued, Sink, Source};
use super::trigger::Trigger;

/// What a key from a stream or a timer counts as for a pending retry's dequeue policy: news
/// about the object, not a change of its spec.
const RELATED: NewEvent = NewEvent {
    action: ResourceAction::Update,
    generation_changed: false,
};

/// Queues every key `keys` yields (at high priority: someone asked now), until it ends or the
/// controller stops.
pub(super) fn stream_source<S>(keys: S) -> Source
where
    S: Stream<Item = ObjectKey> + Send + 'static,
{
    Box::new(move |sink: Sink, shutdown| {
        Box::pin(async move {
            let queued = Queued::new(Priority::High, Trigger::External);
            let mut keys = std::pin::pin!(keys);
            loop {
                let key = tokio::select! {
                    () = shutdown.cancelled() => break,
                    key = keys.next() => key,
                };
                let Some(key) = key else { break };
                sink.add(key, RELATED, &queued);
            }
        })
    })
}

/// A timer per object of the primary kind: each object in the cache is queued every `period`
/// (the first time `period` after it was seen, each time plus up to `jitter` × `period`), at
/// low priority like a resync (a fresh event goes first; the queue's aging bound keeps it from
/// waiting long).
pub(super) fn timer_source<K>(
    subscribe: impl FnOnce() -> Subscription<K> + Send + 'static,
    period: Duration,
    jitter: f64,
) -> Source
where
    K: Resource + Send + Sync + 'static,
{
    Box::new(move |sink: Sink, shutdown| {
        let Subscription { mut events, .. } = subscribe();
        Box::pin(async move {
            let queued = Queued::new(Priority::Low, Trigger::Timer);
            let mut timers = Timers::new(period, jitter);
            loop {
                let due = timers.next_due();
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    event = events.recv() => match event {
                        Some(Event::Applied { new, .. }) => timers.watch(ObjectKey::of(new.as_ref()), Instant::now()),
                        Some(Event::Deleted(old)) => timers.forget(&ObjectKey::of(old.as_ref())),
                        Some(Event::Resync(_)) => {}
                        None => break,
                    },
                    () = sleep_until(due) => {
                        for key in timers.fire(Instant::now()) {
                            sink.add(key, RELATED, &queued);
                        }
                    }
                }
            }
        })
    })
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The objects' next firing times.
struct Timers {
    period: Duration,
    jitter: f64,
    rng: kubeforge_shared::random::Rng,
    next: HashMap<ObjectKey, Instant>,
    schedule: BTreeSet<(Instant, ObjectKey)>,
}

impl Timers {
    fn new(period: Duration, jitter: f64) -> Self {
        Self {
            period,
            jitter: jitter.clamp(0.0, 1.0),
            rng: kubeforge_shared::random::Rng::from_clock(),
            next: HashMap::new(),
            schedule: BTreeSet::new(),
        }
    }

    /// `period` plus up to `jitter` × `period`.
    fn interval(&mut self) -> Duration {
        self.period.mul_f64(1.0 + self.jitter * self.rng.fraction())
    }

    /// An object in the cache: its timer starts if it has none.
    fn watch(&mut self, key: ObjectKey, now: Instant) {
        if self.next.contains_key(&key) {
            return;
        }
        let at = now + self.interval();
        self.schedule.insert((at, key.clone()));
        self.next.insert(key, at);
    }

    /// A deleted object: its timer stops.
    fn forget(&mut self, key: &ObjectKey) {
        if let Some(at) = self.next.remove(key) {
            self.schedule.remove(&(at, key.clone()));
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.schedule.first().map(|(at, _)| *at)
    }

    /// The keys due at `now`, each rescheduled one interval after it was due (not after `now`:
    /// a late tick does not shift the object's rhythm, unless it is more than a period late).
    fn fire(&mut self, now: Instant) -> Vec<ObjectKey> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.schedule.first()
            && *at <= now
        {
            let Some((at, key)) = self.schedule.pop_first() else {
                break;
            };
            let mut next = at + self.interval();
            if next <= now {
                next = now + self.interval();
            }
            self.schedule.insert((next, key.clone()));
            self.next.insert(key.clone(), next);
            due.push(key);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::namespaced("ns", name)
    }

    #[tokio::test(start_paused = true)]
    async fn each_object_fires_once_per_period_and_stops_when_deleted() {
        let start = Instant::now();
        let mut timers = Timers::new(Duration::from_secs(30), 0.0);
        timers.watch(key("a"), start);
        timers.watch(key("b"), start + Duration::from_secs(10));
        // Seen again (an update): the timer keeps its rhythm.
        timers.watch(key("a"), start + Duration::from_secs(20));
        assert_eq!(timers.next_due(), Some(start + Duration::from_secs(30)));
        assert!(timers.fire(start + Duration::from_secs(29)).is_empty());
        assert_eq!(timers.fire(start + Duration::from_secs(30)), [key("a")]);
        assert_eq!(timers.fire(start + Duration::from_secs(40)), [key("b")]);
        assert_eq!(timers.next_due(), Some(start + Duration::from_secs(60)));
        timers.forget(&key("a"));
        assert_eq!(timers.next_due(), Some(start + Duration::from_secs(70)));
        assert_eq!(timers.fire(start + Duration::from_secs(100)), [key("b")]);
        // More than a period late: the next tick is a period after now.
        assert_eq!(timers.next_due(), Some(start + Duration::from_secs(130)));
        timers.forget(&key("b"));
        assert_eq!(timers.next_due(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn jitter_spreads_objects_seen_together_within_its_bound() {
        let start = Instant::now();
        let mut timers = Timers::new(Duration::from_secs(10), 0.5);
        for i in 0..200 {
            timers.watch(key(&i.to_string()), start);
        }
        let times: Vec<Duration> = timers.next.values().map(|at| *at - start).collect();
        assert!(
            times
                .iter()
                .all(|t| *t >= Duration::from_secs(10) && *t <= Duration::from_secs(15))
        );
        let early = times
            .iter()
            .filter(|t| **t < Duration::from_millis(12_500))
            .count();
        assert!(
            (60..140).contains(&early),
            "{early} of 200 in the first half of the jitter"
        );
    }
}
