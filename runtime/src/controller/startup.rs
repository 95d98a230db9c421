//! One start-up reconcile per key.
//!
//! The state a controller starts from arrives as events of each source's replay (an informer's
//! first list, or a late subscriber's copy of the cache), queued at low priority with the trigger
//! [`Trigger::StartUp`](super::Trigger::StartUp). The queue folds a key queued twice into one,
//! but not a key whose reconcile is already running: the replay of a watched kind that thousands
//! of objects map to to one primary kept arriving while that primary's first reconcile ran, and
//! each arrival queued it again (6 start-up reconciles of one key in 140 ms).
//!
//! Workers start only once every informer of the controller has synced, so every reconcile sees
//! the whole start-up state of every source; a key queued once for start-up needs no second
//! start-up reconcile. [`StartupOnce`] remembers the keys queued for start-up (a 128-bit hash
//! each, no key copied) until every source that replays has finished its replay, then frees
//! the set. A change is never folded: only the start-up trigger is.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::watch;

use crate::ObjectKey;

/// The keys queued for start-up, shared by a controller's sources.
#[derive(Debug)]
pub(super) struct StartupOnce {
    /// `None` once every replaying source is done (or before any joined).
    seen: Mutex<Option<HashSet<u128>>>,
    /// Sources still replaying.
    replaying: AtomicUsize,
    /// Two independent keys, for a 128-bit hash.
    hashers: (RandomState, RandomState),
    /// Set once the controller's caches have synced: every source's replay length is known.
    synced: watch::Sender<bool>,
}

impl Default for StartupOnce {
    fn default() -> Self {
        Self {
            seen: Mutex::new(Some(HashSet::new())),
            replaying: AtomicUsize::new(0),
            hashers: (RandomState::new(), RandomState::new()),
            synced: watch::Sender::new(false),
        }
    }
}

impl StartupOnce {
    fn seen(&self) -> std::sync::MutexGuard<'_, Option<HashSet<u128>>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `key` is queued for start-up for the first time (it must be queued), or was
    /// already (it need not be).
    pub(super) fn first(&self, key: &ObjectKey) -> bool {
        let hash = |state: &RandomState| {
            let mut hasher = state.build_hasher();
            key.hash(&mut hasher);
            std::hash::Hasher::finish(&hasher)
        };
        let hash = (u128::from(hash(&self.hashers.0)) << 64) | u128::from(hash(&self.hashers.1));
        self.seen().as_mut().is_none_or(|seen| seen.insert(hash))
    }

    /// A source that replays its start-up state: it calls [`Replay::over`] when its replay has
    /// been handled (dropping it counts as that too). Joined before any source runs.
    pub(super) fn join(self: &std::sync::Arc<Self>) -> Replay {
        self.replaying.fetch_add(1, Ordering::AcqRel);
        Replay {
            once: Some(std::sync::Arc::clone(self)),
        }
    }

    /// The controller's caches have synced (its workers start now).
    pub(super) fn synced(&self) {
        self.synced.send_replace(true);
    }

    /// Resolves once the caches have synced.
    pub(super) fn when_synced(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    fn left(&self) {
        if self.replaying.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Every replay handled: the set is not needed any more.
            *self.seen() = None;
        }
    }
}

/// A replaying source's membership in [`StartupOnce`].
#[derive(Debug)]
pub(super) struct Replay {
    once: Option<std::sync::Arc<StartupOnce>>,
}

impl Replay {
    /// Whether the replay was reported handled.
    pub(super) fn is_over(&self) -> bool {
        self.once.is_none()
    }

    /// The source's replay has been handled.
    pub(super) fn over(&mut self) {
        if let Some(once) = self.once.take() {
            once.left();
        }
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        self.over();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_key_should_be_first_once_until_every_replay_is_over() {
        let once = Arc::new(StartupOnce::default());
        let (mut a, b) = (once.join(), once.join());
        let key = ObjectKey::namespaced("ns", "hub");
        assert!(once.first(&key));
        assert!(!once.first(&key));
        assert!(once.first(&ObjectKey::namespaced("ns", "other")));
        assert!(once.first(&ObjectKey::namespaced("other", "hub")));
        a.over();
        a.over();
        assert!(!once.first(&key), "one replay is still going");
        drop(b);
        assert!(once.seen().is_none(), "freed");
        assert!(once.first(&key), "nothing folded after the start-up");
    }
}
