//! Which watch events carry nothing but a write a reconcile made itself.
//!
//! A reconcile's write goes through the [`Context`](crate::controller::Context) helpers, which
//! open a [`Flight`] on the target object before sending it and record the answer with its
//! [`Writer`] (the controller and the key whose reconcile made it). An informer reports every
//! version it applies from its watch ([`OwnWrites::watched`]); a version that is a recorded write
//! of ours, or that arrives while a flight to its object is open (the watch event often beats
//! the write's answer), is marked as delivered *live*. A controller's event source then asks
//! [`OwnWrites::take`] (or, while a write to the object is still in flight,
//! [`OwnWrites::take_when_landed`]) whether an event's new version is its own.
//!
//! Only watch events count: a (re)list can fold another client's change and our write into one
//! update, so its events are never recognised.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::ObjectKey;

/// How long a write whose watch event never came is remembered (a no-op apply, a kind no source
/// watches, a version folded into a relist). A watch event normally follows its write within
/// milliseconds; one later than this is queued as anyone's (an extra reconcile, never a lost one).
const FORGET_AFTER: Duration = Duration::from_secs(15);

/// Who made a write: the controller and the key whose reconcile made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Writer {
    pub(crate) controller: Arc<str>,
    pub(crate) key: ObjectKey,
}

impl Writer {
    pub(crate) fn new(controller: &Arc<str>, key: &ObjectKey) -> Self {
        Self {
            controller: Arc::clone(controller),
            key: key.clone(),
        }
    }
}

/// Our recorded writes and the writes in flight.
#[derive(Debug, Default)]
pub(crate) struct OwnWrites {
    state: Mutex<State>,
    /// Woken when a write is recorded or a flight lands.
    landed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// By the resourceVersion a write produced (unique per write: the apiserver takes it from
    /// etcd's revision); the uid is checked too.
    writes: HashMap<String, Written>,
    pruning: super::expiry::Pruning,
    /// Objects with a write in flight, and the versions their informers delivered meanwhile.
    flights: HashMap<ObjectKey, InFlight>,
}

#[derive(Debug)]
struct Written {
    uid: String,
    writer: Writer,
    at: Instant,
    /// An informer applied exactly this version from its watch.
    live: bool,
}

#[derive(Debug, Default)]
struct InFlight {
    writes: usize,
    /// `(uid, resourceVersion)` of the versions watched while in flight.
    watched: Vec<(String, String)>,
}

impl State {
    /// Forgets the writes older than [`FORGET_AFTER`], if a pruning is due.
    fn prune(&mut self, now: Instant) {
        self.pruning.prune(&mut self.writes, now, |w| {
            now.duration_since(w.at) >= FORGET_AFTER
        });
    }
}

/// A write to one object between its request and its recorded answer; lands when dropped.
pub(crate) struct Flight {
    own: Arc<OwnWrites>,
    key: ObjectKey,
}

impl Drop for Flight {
    fn drop(&mut self) {
        let mut state = self.own.lock();
        if let Some(flight) = state.flights.get_mut(&self.key) {
            flight.writes -= 1;
            if flight.writes == 0 {
                state.flights.remove(&self.key);
            }
        }
        drop(state);
        self.own.landed.notify_waiters();
    }
}

impl OwnWrites {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a flight to `key` (the object a write is about to change): versions of it watched
    /// until the flight lands may be that write's.
    pub(crate) fn flight(self: &Arc<Self>, key: ObjectKey) -> Flight {
        self.lock().flights.entry(key.clone()).or_default().writes += 1;
        Flight {
            own: Arc::clone(self),
            key,
        }
    }

    /// Records that `writer` wrote version `rv` of object `uid` (`key`); live at once if a
    /// watch delivered it while the write was in flight.
    pub(crate) fn wrote(&self, key: &ObjectKey, rv: &str, uid: &str, writer: &Writer) {
        let now = Instant::now();
        let mut state = self.lock();
        let live = state
            .flights
            .get(key)
            .is_some_and(|f| f.watched.iter().any(|(u, v)| u == uid && v == rv));
        state.writes.insert(
            rv.to_owned(),
            Written {
                uid: uid.to_owned(),
                writer: writer.clone(),
                at: now,
                live,
            },
        );
        state.prune(now);
        drop(state);
        self.landed.notify_waiters();
    }

    /// The informers already held version `rv` when it was recorded, and no watch delivered it:
    /// a relist did, and nothing will match it.
    pub(crate) fn forget_unwatched(&self, rv: &str) {
        let mut state = self.lock();
        if state.writes.get(rv).is_some_and(|w| !w.live) {
            state.writes.remove(rv);
        }
    }

    /// An informer applied version `rv` of object `uid` (`key`) from its watch.
    pub(crate) fn watched(&self, key: &ObjectKey, rv: &str, uid: &str) {
        let mut state = self.lock();
        if !state.writes.is_empty() {
            state.prune(Instant::now());
        }
        if let Some(written) = state.writes.get_mut(rv)
            && written.uid == uid
        {
            written.live = true;
        } else if let Some(flight) = state.flights.get_mut(key) {
            flight.watched.push((uid.to_owned(), rv.to_owned()));
        }
    }

    /// If a watch delivered version `rv` of object `uid` and that version is a write controller
    /// `controller` made, forgets it and returns the key whose reconcile made it.
    pub(crate) fn take(&self, rv: &str, uid: &str, controller: &str) -> Option<ObjectKey> {
        let mut state = self.lock();
        let mine = state
            .writes
            .get(rv)
            .is_some_and(|w| w.live && w.uid == uid && *w.writer.controller == *controller);
        mine.then(|| state.writes.remove(rv))
            .flatten()
            .map(|w| w.writer.key)
    }

    /// Whether a write to `key` is in flight.
    pub(crate) fn in_flight(&self, key: &ObjectKey) -> bool {
        self.lock().flights.contains_key(key)
    }

    /// Like [`OwnWrites::take`], for a version watched while a write to its object (`key`) was
    /// in flight: waits until no write to it is in flight any more (at most `timeout`), then
    /// answers.
    pub(crate) async fn take_when_landed(
        &self,
        key: &ObjectKey,
        rv: &str,
        uid: &str,
        controller: &str,
        timeout: Duration,
    ) -> Option<ObjectKey> {
        let wait = async {
            loop {
                let landed = self.landed.notified();
                tokio::pin!(landed);
                landed.as_mut().enable();
                if let Some(writer) = self.take(rv, uid, controller) {
                    return Some(writer);
                }
                if !self.in_flight(key) {
                    return None;
                }
                landed.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.ok().flatten()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().writes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(controller: &str, key: &ObjectKey) -> Writer {
        Writer::new(&Arc::from(controller), key)
    }

    #[tokio::test(start_paused = true)]
    async fn own_writes_should_be_taken_only_once_watched_and_by_their_controller() {
        let own = OwnWrites::default();
        let key = ObjectKey::namespaced("ns", "a");
        own.wrote(&key, "10", "uid-a", &writer("web", &key));
        assert_eq!(
            own.take("10", "uid-a", "web"),
            None,
            "not delivered by a watch yet (a relist's event of it must not count)"
        );
        own.watched(&key, "10", "uid-b");
        assert_eq!(own.take("10", "uid-a", "web"), None, "another object's");
        own.watched(&key, "10", "uid-a");
        assert_eq!(own.take("10", "uid-a", "db"), None, "another controller's");
        assert_eq!(own.take("11", "uid-a", "web"), None, "another version");
        assert_eq!(own.take("10", "uid-a", "web"), Some(key.clone()));
        assert_eq!(own.take("10", "uid-a", "web"), None, "taken once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_version_watched_before_its_write_landed_should_be_recognised_once_it_lands() {
        let own = Arc::new(OwnWrites::default());
        let key = ObjectKey::namespaced("ns", "a");
        let flight = own.flight(key.clone());
        own.watched(&key, "10", "uid-a");
        assert!(own.in_flight(&key));
        let waiting = tokio::spawn({
            let (own, key) = (Arc::clone(&own), key.clone());
            async move {
                own.take_when_landed(&key, "10", "uid-a", "web", Duration::from_secs(5))
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(!waiting.is_finished(), "waits for the answer");
        own.wrote(&key, "10", "uid-a", &writer("web", &key));
        drop(flight);
        assert_eq!(waiting.await.unwrap(), Some(key.clone()));
        assert!(!own.in_flight(&key));

        // Another client's version watched during a flight of ours is not ours.
        let flight = own.flight(key.clone());
        own.watched(&key, "20", "uid-a");
        own.wrote(&key, "21", "uid-a", &writer("web", &key));
        drop(flight);
        assert_eq!(
            own.take_when_landed(&key, "20", "uid-a", "web", Duration::from_secs(5))
                .await,
            None
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_never_lands_should_not_hold_its_event_longer_than_the_timeout() {
        let own = Arc::new(OwnWrites::default());
        let key = ObjectKey::cluster("a");
        let _flight = own.flight(key.clone());
        own.watched(&key, "10", "uid");
        let start = Instant::now();
        assert_eq!(
            own.take_when_landed(&key, "10", "uid", "web", Duration::from_secs(2))
                .await,
            None
        );
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn versions_a_relist_delivered_should_be_forgotten() {
        let own = OwnWrites::default();
        let key = ObjectKey::cluster("a");
        own.wrote(&key, "10", "uid", &writer("web", &key));
        own.forget_unwatched("10");
        own.watched(&key, "10", "uid");
        assert_eq!(own.take("10", "uid", "web"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn own_writes_nobody_watches_should_be_forgotten() {
        let own = OwnWrites::default();
        let key = ObjectKey::cluster("a");
        for i in 0..2000 {
            own.wrote(&key, &i.to_string(), "uid", &writer("web", &key));
        }
        assert_eq!(own.len(), 2000, "recent writes are kept");
        tokio::time::advance(FORGET_AFTER + Duration::from_secs(1)).await;
        for i in 0..100 {
            own.wrote(&key, &format!("new{i}"), "uid", &writer("web", &key));
        }
        assert_eq!(own.len(), 100, "the stale ones are pruned");
    }
}
