//! Fan-out of an informer's events to its subscribers, without letting a slow one stall the rest.
//!
//! Each subscriber reads a bounded channel. The informer never waits for a subscriber: when a
//! channel is full, the event goes into that subscriber's backlog, and a task of the subscriber's
//! own forwards the backlog (in order, waiting on that channel only). So the back-pressure of a
//! slow controller stays on that controller, as in client-go's shared informer (a growing buffer
//! per listener); the events that had to wait are counted ([`Fanout::late`], exported as
//! `kubeforge_informer_late_events_total`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, mpsc};

/// One subscriber: its channel, and the events waiting for room in it.
struct Subscriber<E> {
    tx: mpsc::Sender<E>,
    backlog: Arc<Backlog<E>>,
    mark: Arc<StartupMark>,
}

/// Handles only (no `E: Clone` needed), so `Arc::make_mut` can copy the subscriber list.
impl<E> Clone for Subscriber<E> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            backlog: Arc::clone(&self.backlog),
            mark: Arc::clone(&self.mark),
        }
    }
}

/// Tells a subscriber which of its events came with the informer's first list (or, for a
/// subscriber that came later, its replay of the cache): the state the informer started from,
/// not a change. The work queue puts the keys of those at low priority, so an operator's
/// start-up wave does not hold up the reconcile of an object edited meanwhile. A late
/// subscriber's replay ends with the objects that changed lately ([`super::recent`]): changes
/// the subscriber did not see happen (a warm standby's, made before it led), queued as changes.
#[derive(Debug)]
pub(crate) struct StartupMark {
    /// Events handed to the subscriber so far (sent or in its backlog), replay included.
    handed: AtomicU64,
    /// How many of its first events are the start-up state (`u64::MAX` until the first list
    /// is complete).
    initial: AtomicU64,
    /// How many events after those are a replay's recent changes.
    recent: AtomicU64,
}

/// What a subscriber's event is, by its place in what the subscriber received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Replayed {
    /// Part of the state the informer (or a late subscriber's replay) started from.
    Initial,
    /// In a late subscriber's replay, an object that changed lately.
    Recent,
    /// A change, as it happened.
    Live,
}

impl StartupMark {
    /// What the subscriber's event number `index` (from 0, in the order received) is. Events
    /// are received in the order they were handed over, so an event received before the mark
    /// is set was handed over before the list completed.
    pub(crate) fn replayed(&self, index: u64) -> Replayed {
        let initial = self.initial.load(Ordering::Acquire);
        if index < initial {
            Replayed::Initial
        } else if index < initial.saturating_add(self.recent.load(Ordering::Acquire)) {
            Replayed::Recent
        } else {
            Replayed::Live
        }
    }

    /// Whether event number `index` is part of the start-up state.
    #[cfg(test)]
    pub(crate) fn is_initial(&self, index: u64) -> bool {
        self.replayed(index) == Replayed::Initial
    }
}

struct Backlog<E> {
    queue: Mutex<Queue<E>>,
    wake: Notify,
}

struct Queue<E> {
    events: VecDeque<E>,
    /// Held subscribers get nothing until [`Fanout::release`] hands them their replay.
    held: bool,
}

impl<E> Backlog<E> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue<E>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A subscriber waiting for its replay; see [`Fanout::subscribe_held`].
pub(super) struct Held<E>(Arc<Backlog<E>>, Arc<StartupMark>);

/// The subscribers of one informer.
pub(super) struct Fanout<E> {
    /// Replaced as a whole on (un)subscribe, so publishing only clones the `Arc`.
    subscribers: Mutex<Arc<Vec<Subscriber<E>>>>,
    late: AtomicU64,
    /// Whether [`Fanout::mark_initial`] was called (written under the `subscribers` lock).
    marked: AtomicBool,
}

impl<E: Clone + Send + 'static> Fanout<E> {
    pub(super) fn new() -> Self {
        Self {
            subscribers: Mutex::new(Arc::new(Vec::new())),
            late: AtomicU64::new(0),
            marked: AtomicBool::new(false),
        }
    }

    /// A new subscriber with a channel of `capacity`, first handed `replay` (in order, before
    /// any event published after this call; the start-up state, if given after
    /// [`Fanout::mark_initial`], except its last `recent` events, recent changes). Must be
    /// called within a Tokio runtime.
    pub(super) fn subscribe(
        &self,
        capacity: usize,
        replay: Vec<E>,
        recent: usize,
    ) -> (mpsc::Receiver<E>, Arc<StartupMark>) {
        let (rx, _, mark) = self.add(capacity, replay, recent, false);
        (rx, mark)
    }

    /// A new subscriber that gets nothing until [`Fanout::release`] hands it its replay; what is
    /// published meanwhile is dropped then (the replay, taken later, covers it).
    pub(super) fn subscribe_held(
        &self,
        capacity: usize,
    ) -> (mpsc::Receiver<E>, Held<E>, Arc<StartupMark>) {
        let (rx, backlog, mark) = self.add(capacity, Vec::new(), 0, true);
        (rx, Held(backlog, Arc::clone(&mark)), mark)
    }

    /// Hands a held subscriber `replay` (the state as of now, its start-up state but for the
    /// last `recent` events, recent changes) and then what is published next.
    pub(super) fn release(&self, held: Held<E>, replay: Vec<E>, recent: usize) {
        let Held(backlog, mark) = held;
        let mut queue = backlog.lock();
        let replayed = replay.len() as u64;
        let recent = (recent as u64).min(replayed);
        queue.events = replay.into();
        queue.held = false;
        mark.handed.store(replayed, Ordering::Release);
        mark.recent.store(recent, Ordering::Release);
        mark.initial.store(replayed - recent, Ordering::Release);
        drop(queue);
        backlog.wake.notify_one();
    }

    /// The first list is complete: what each subscriber was handed so far is its start-up
    /// state, and so is the replay of a subscriber that comes later; what follows is change.
    pub(super) fn mark_initial(&self) {
        let subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        for subscriber in subscribers.iter() {
            let handed = subscriber.mark.handed.load(Ordering::Acquire);
            let _ = subscriber.mark.initial.compare_exchange(
                u64::MAX,
                handed,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        self.marked.store(true, Ordering::Release);
    }

    fn add(
        &self,
        capacity: usize,
        replay: Vec<E>,
        recent: usize,
        held: bool,
    ) -> (mpsc::Receiver<E>, Arc<Backlog<E>>, Arc<StartupMark>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let replayed = replay.len() as u64;
        let recent = (recent as u64).min(replayed);
        let backlog = Arc::new(Backlog {
            queue: Mutex::new(Queue {
                events: replay.into(),
                held,
            }),
            wake: Notify::new(),
        });
        crate::task::spawn(forward(tx.clone(), Arc::clone(&backlog)));
        backlog.wake.notify_one();
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        // Under the lock `mark_initial` takes: a subscriber comes before the mark (and is
        // marked with the others) or after it (and only its replay is start-up state).
        let (initial, recent) = if self.marked.load(Ordering::Acquire) {
            (replayed - recent, recent)
        } else {
            (u64::MAX, 0)
        };
        let mark = Arc::new(StartupMark {
            handed: AtomicU64::new(replayed),
            initial: AtomicU64::new(initial),
            recent: AtomicU64::new(recent),
        });
        Arc::make_mut(&mut subscribers).push(Subscriber {
            tx,
            backlog: Arc::clone(&backlog),
            mark: Arc::clone(&mark),
        });
        (rx, backlog, mark)
    }

    /// Hands `event` to every subscriber without waiting; forgets subscribers that are gone.
    pub(super) fn publish(&self, event: &E) {
        let subscribers = Arc::clone(&self.subscribers.lock().unwrap_or_else(|e| e.into_inner()));
        let mut closed = false;
        for subscriber in subscribers.iter() {
            let mut backlog = subscriber.backlog.lock();
            if backlog.held {
                continue; // its replay will cover this event
            }
            subscriber.mark.handed.fetch_add(1, Ordering::AcqRel);
            if !backlog.events.is_empty() {
                // Behind already: keep the order.
                backlog.events.push_back(event.clone());
                self.late.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            match subscriber.tx.try_send(event.clone()) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(event)) => {
                    backlog.events.push_back(event);
                    self.late.fetch_add(1, Ordering::Relaxed);
                    drop(backlog);
                    subscriber.backlog.wake.notify_one();
                }
                Err(mpsc::error::TrySendError::Closed(_)) => closed = true,
            }
        }
        if closed {
            let mut current = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
            Arc::make_mut(&mut current).retain(|s| !s.tx.is_closed());
        }
    }

    /// Events that waited in a backlog because their subscriber's channel was full.
    pub(super) fn late(&self) -> u64 {
        self.late.load(Ordering::Relaxed)
    }
}

/// Moves a subscriber's backlog into its channel, oldest first, waiting for room.
async fn forward<E: Clone>(tx: mpsc::Sender<E>, backlog: Arc<Backlog<E>>) {
    loop {
        backlog.wake.notified().await;
        loop {
            // The front stays queued while it is being sent, so `publish` keeps appending
            // behind it instead of overtaking it.
            let next = {
                let queue = backlog.lock();
                if queue.held {
                    None
                } else {
                    queue.events.front().cloned()
                }
            };
            let Some(next) = next else {
                break;
            };
            if tx.send(next).await.is_err() {
                return; // the subscriber is gone
            }
            backlog.lock().events.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_slow_subscriber_should_not_hold_up_the_others_or_lose_order() {
        let fanout = Fanout::<u32>::new();
        let (mut slow, _) = fanout.subscribe(4, vec![], 0);
        let (mut fast, _) = fanout.subscribe(4, vec![], 0);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while got.len() < 100 {
                got.push(fast.recv().await.unwrap());
            }
            got
        });
        // Publishing never waits, though `slow` reads nothing.
        for i in 0..100 {
            fanout.publish(&i);
            tokio::task::yield_now().await;
        }
        let fast_got = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .expect("the fast subscriber got every event while the slow one read none")
            .unwrap();
        assert_eq!(fast_got, (0..100).collect::<Vec<_>>());
        assert!(fanout.late() >= 96, "late: {}", fanout.late());
        // The slow subscriber gets everything, in order, when it reads.
        let mut slow_got = Vec::new();
        while slow_got.len() < 100 {
            slow_got.push(slow.recv().await.unwrap());
        }
        assert_eq!(slow_got, (0..100).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn replay_should_come_before_later_events_and_closed_subscribers_should_be_dropped() {
        let fanout = Fanout::<u32>::new();
        let (mut rx, _) = fanout.subscribe(2, vec![1, 2, 3, 4, 5], 0);
        fanout.publish(&6);
        let mut got = Vec::new();
        while got.len() < 6 {
            got.push(rx.recv().await.unwrap());
        }
        assert_eq!(got, [1, 2, 3, 4, 5, 6]);
        drop(rx);
        let (mut held, handle, _) = fanout.subscribe_held(4);
        fanout.publish(&7);
        fanout.release(handle, vec![10, 11], 0);
        fanout.publish(&12);
        let mut got = Vec::new();
        while got.len() < 3 {
            got.push(held.recv().await.unwrap());
        }
        assert_eq!(
            got,
            [10, 11, 12],
            "held: what came before the release is in the replay"
        );
        drop(held);
        fanout.publish(&7);
        fanout.publish(&8);
        assert!(fanout.subscribers.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_start_up_mark_should_cover_what_came_before_the_first_list_completed() {
        let fanout = Fanout::<u32>::new();
        let (_early, early) = fanout.subscribe(1, vec![], 0);
        for i in 0..3 {
            fanout.publish(&i); // two of them wait in the backlog: counted all the same
        }
        assert!(
            early.is_initial(5),
            "unmarked: everything so far is start-up state"
        );
        fanout.mark_initial();
        fanout.publish(&3);
        assert!(early.is_initial(2) && !early.is_initial(3));
        // Later subscribers: only their replay is start-up state.
        let (_late, late) = fanout.subscribe(4, vec![10, 11], 0);
        assert!(late.is_initial(1) && !late.is_initial(2));
        let (_held, handle, held) = fanout.subscribe_held(4);
        fanout.publish(&4);
        fanout.release(handle, vec![20, 21, 22], 0);
        fanout.publish(&5);
        assert!(held.is_initial(2) && !held.is_initial(3));
        // A replay's recent changes come after its start-up state, before what is live.
        let (_late, late) = fanout.subscribe(4, vec![30, 31, 32], 2);
        let (_held, handle, held) = fanout.subscribe_held(4);
        fanout.release(handle, vec![40, 41, 42], 1);
        let kinds = |mark: &StartupMark| (0..4).map(|i| mark.replayed(i)).collect::<Vec<_>>();
        use Replayed::{Initial, Live, Recent};
        assert_eq!(kinds(&late), [Initial, Recent, Recent, Live]);
        assert_eq!(kinds(&held), [Initial, Initial, Recent, Live]);
        assert_eq!(kinds(&early), [Initial, Initial, Initial, Live]);
    }
}
