//! Read-your-own-writes: remember the resourceVersions a controller wrote, so a later reconcile
//! can wait (bounded) until the informer has caught up with them.
//!
//! The tracker is a [`ApplyHook`] of every informer of a [`Wiring`](crate::controller::Wiring)'s
//! cache: informers report each version they apply, [`WriteTracker::record`] remembers our own
//! writes, and the controller's worker waits in [`WriteTracker::caught_up`] before a reconcile.
//!
//! The tracker also knows which watch events are nothing but our own writes ([`own`]): the
//! controller's event sources ask it before they queue the writer's key again (see
//! [`ControllerConfig::skip_own_writes`](crate::controller::ControllerConfig::skip_own_writes)).

mod expiry;
mod own;

pub(crate) use own::{Flight, OwnWrites, Writer};

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Resource;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::ObjectKey;
use crate::cache::Cache;
use crate::informer::ApplyHook;

/// How long an unobserved write is remembered at most (an object outside every informer's
/// selectors is never observed; nothing waits longer than the reconcile bound anyway).
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// Writes not yet seen by the informer of their kind.
#[derive(Debug, Default)]
pub(crate) struct WriteTracker {
    pending: Mutex<Pending>,
    seen: Notify,
    own: Arc<OwnWrites>,
}

#[derive(Debug, Default)]
struct Pending {
    writes: HashMap<(TypeId, ObjectKey), (String, Instant)>,
    pruning: expiry::Pruning,
}

impl Pending {
    /// Forgets the writes older than [`FORGET_AFTER`], if a pruning is due.
    fn prune(&mut self, now: Instant) {
        self.pruning.prune(&mut self.writes, now, |(_, at)| {
            now.duration_since(*at) >= FORGET_AFTER
        });
    }
}

impl WriteTracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that we wrote `key` of kind `kind`, producing `resource_version`.
    pub(crate) fn wrote(&self, kind: TypeId, key: ObjectKey, resource_version: String) {
        let now = Instant::now();
        let mut pending = self.lock();
        pending.writes.insert((kind, key), (resource_version, now));
        pending.prune(now);
    }

    /// Records that this process wrote `obj` (as returned by the apiserver): until an informer of
    /// `cache` has applied that version, [`WriteTracker::caught_up`] waits for it.
    pub(crate) fn record<K: Resource + 'static>(&self, cache: &Cache, obj: &K) {
        self.record_by(cache, obj, None);
    }

    /// Like [`WriteTracker::record`], knowing who wrote: the watch event of exactly this version
    /// is then recognised as the writer's own ([`WriteTracker::take_own`]).
    pub(crate) fn record_by<K: Resource + 'static>(
        &self,
        cache: &Cache,
        obj: &K,
        writer: Option<Writer>,
    ) {
        let Some(rv) = &obj.meta().resource_version else {
            return;
        };
        let kind = TypeId::of::<K>();
        let key = ObjectKey::of(obj);
        let own = writer.zip(obj.meta().uid.as_deref());
        if let Some((writer, uid)) = &own {
            // Before the stores are read (as the write below): an event applied from now on
            // marks it.
            self.own.wrote(&key, rv, uid, writer);
        }
        // Record first, then look at the stores: an informer applies an event to its store
        // before it reports it to the tracker, so a watch event that raced ahead of this write's
        // response is either visible in a store now or reported after the record — never lost,
        // and never left behind as a stale entry.
        self.wrote(kind, key.clone(), rv.clone());
        let seen = cache.caches_version(kind, &key, |cached| same_or_newer(cached, rv));
        if seen == Some(true) && own.is_some() {
            // Cached already, and not from a watch event: nothing will match it.
            self.own.forget_unwatched(rv);
        }
        if seen != Some(false) {
            // Already delivered, or no informer of this kind will ever deliver it: settle the
            // record as the informer would have (waking anyone waiting for this key).
            self.observed(kind, &key, Some(rv));
        }
    }

    /// The writes whose watch events are recognised as their writer's own.
    pub(crate) fn own(&self) -> &Arc<OwnWrites> {
        &self.own
    }

    /// Writes remembered and not yet observed.
    #[cfg(test)]
    pub(crate) fn pending_len(&self) -> usize {
        self.lock().writes.len()
    }

    /// The informer of `kind` applied `key` at `resource_version` (`None`: deleted) from its
    /// watch; `uid`: the object's.
    fn watched(
        &self,
        kind: TypeId,
        key: &ObjectKey,
        resource_version: Option<&str>,
        uid: Option<&str>,
    ) {
        if let (Some(rv), Some(uid)) = (resource_version, uid) {
            self.own.watched(key, rv, uid);
        }
        self.observed(kind, key, resource_version);
    }

    /// The informer of `kind` applied `key` at `resource_version` (`None`: deleted).
    fn observed(&self, kind: TypeId, key: &ObjectKey, resource_version: Option<&str>) {
        let mut pending = self.lock();
        if pending.writes.is_empty() {
            return;
        }
        pending.prune(Instant::now());
        let id = (kind, key.clone());
        let caught_up = match (pending.writes.get(&id), resource_version) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some((wanted, _)), Some(rv)) => same_or_newer(rv, wanted),
        };
        if caught_up {
            pending.writes.remove(&id);
            drop(pending);
            self.seen.notify_waiters();
        }
    }

    /// Waits until the informer has seen our last write of `key`, at most `timeout`. Returns
    /// whether it caught up (`true` also when nothing was pending).
    ///
    /// `current` reads the resourceVersion the informer's store holds for `key`: the watch event
    /// of a write can arrive before the writer records it, so the store is consulted too.
    pub(crate) async fn caught_up(
        &self,
        kind: TypeId,
        key: &ObjectKey,
        timeout: Duration,
        current: impl Fn() -> Option<String>,
    ) -> bool {
        // The common case on the reconcile hot path: nothing written and not yet seen.
        if self.lock().writes.is_empty() {
            return true;
        }
        let id = (kind, key.clone());
        let wait = async {
            loop {
                let notified = self.seen.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let Some((wanted, _)) = self.lock().writes.get(&id).cloned() else {
                    return;
                };
                if let Some(rv) = current()
                    && same_or_newer(&rv, &wanted)
                {
                    self.lock().writes.remove(&id);
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(timeout, wait).await.is_ok() {
            return true;
        }
        // Give up waiting; forget the write so later reconciles do not wait for it again.
        self.lock().writes.remove(&id);
        false
    }
}

impl ApplyHook for WriteTracker {
    fn applied(
        &self,
        kind: TypeId,
        key: &ObjectKey,
        resource_version: Option<&str>,
        uid: Option<&str>,
    ) {
        self.watched(kind, key, resource_version, uid);
    }

    /// A relist replaced the informer's content: whatever it holds is the newest state, so
    /// nothing of `kind` is pending any more.
    fn relisted(&self, kind: TypeId) {
        self.lock().writes.retain(|(k, _), _| *k != kind);
        self.seen.notify_waiters();
    }
}

/// Whether resourceVersion `a` is `b` or a later one.
fn same_or_newer(a: &str, b: &str) -> bool {
    a == b || newer(a, b)
}

/// Whether resourceVersion `a` is newer than `b`. resourceVersions are opaque to clients, but the
/// apiserver derives them from etcd's revision counter; when both parse as integers, a larger one
/// means a later write (which also proves our write was applied before it).
fn newer(a: &str, b: &str) -> bool {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a > b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tracker_should_wait_until_the_written_version_is_observed() {
        let tracker = std::sync::Arc::new(WriteTracker::default());
        let kind = TypeId::of::<u8>();
        let key = ObjectKey::namespaced("ns", "a");
        assert!(
            tracker
                .caught_up(kind, &key, Duration::from_secs(1), || None)
                .await,
            "nothing pending"
        );

        tracker.wrote(kind, key.clone(), "10".into());
        let waiter = tokio::spawn({
            let (tracker, key) = (tracker.clone(), key.clone());
            async move {
                tracker
                    .caught_up(kind, &key, Duration::from_secs(5), || None)
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        tracker.observed(kind, &key, Some("9"));
        tracker.observed(TypeId::of::<u16>(), &key, Some("10"));
        assert!(
            !waiter.is_finished(),
            "an older version or another kind does not count"
        );
        tracker.observed(kind, &key, Some("10"));
        assert!(waiter.await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn tracker_should_accept_newer_versions_and_deletions_and_time_out() {
        let tracker = WriteTracker::default();
        let kind = TypeId::of::<u8>();
        let key = ObjectKey::cluster("a");
        tracker.wrote(kind, key.clone(), "10".into());
        tracker.observed(kind, &key, Some("12"));
        assert!(
            tracker
                .caught_up(kind, &key, Duration::from_secs(1), || None)
                .await
        );

        tracker.wrote(kind, key.clone(), "20".into());
        tracker.observed(kind, &key, None);
        assert!(
            tracker
                .caught_up(kind, &key, Duration::from_secs(1), || None)
                .await
        );

        tracker.wrote(kind, key.clone(), "30".into());
        let start = tokio::time::Instant::now();
        assert!(
            !tracker
                .caught_up(kind, &key, Duration::from_secs(2), || None)
                .await
        );
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        assert!(
            tracker
                .caught_up(kind, &key, Duration::from_secs(2), || None)
                .await,
            "forgotten after the timeout"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tracker_should_forget_writes_nobody_observes() {
        let tracker = WriteTracker::default();
        let kind = TypeId::of::<u8>();
        for i in 0..2000 {
            tracker.wrote(kind, ObjectKey::cluster(format!("old{i}")), "1".into());
        }
        assert_eq!(tracker.pending_len(), 2000, "recent writes are kept");
        tokio::time::advance(FORGET_AFTER + Duration::from_secs(1)).await;
        for i in 0..100 {
            tracker.wrote(kind, ObjectKey::cluster(format!("new{i}")), "1".into());
        }
        assert_eq!(tracker.pending_len(), 100, "the stale ones are pruned");
    }
}
