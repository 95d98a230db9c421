//! The objects an informer saw change lately, so that a subscriber that comes late (a warm
//! standby's controllers when it takes over) can tell them from the state it starts from.
//!
//! A warm standby's informers watch while another replica leads. When the leader dies, the
//! changes of its last moments (and those made while its Lease ran out) were watched by the
//! standby but perhaps never reconciled. Without this, the new leader's controllers got every
//! cached object as start-up state, at low priority: a change made during the Lease wait waited
//! for the whole start-up wave (100 s p50 with 50,000 objects). The replay now hands the
//! objects that changed within [`WINDOW`] last, after the start-up state, and the controller
//! queues them at high priority.
//!
//! What counts as a change: a creation, a deletion, a new `metadata.generation`, a deletion
//! timestamp set, and any change of a kind without generations (ConfigMaps, Secrets). A status
//! write does not change the generation of a kind with a status subresource: the old leader's
//! own status writes do not make its objects "recent".

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Resource;

use super::Event;

/// How far back a change counts as recent: longer than a Lease duration (15 s by default) and
/// the retries of a leader that stalls before it dies.
pub(super) const WINDOW: Duration = Duration::from_secs(60);

/// The most changes remembered; older ones are forgotten first (at 1,000 changes a second the
/// window holds the last 65 s).
const CAPACITY: usize = 65_536;

/// Hashes of the keys that changed, with when (16 bytes each, oldest first).
#[derive(Default)]
pub(super) struct Recent {
    changes: Mutex<VecDeque<(Instant, u64)>>,
    hasher: std::hash::RandomState,
}

impl Recent {
    /// Notes `event` if it is a change that counts (see the module's documentation).
    pub(super) fn note<K: Resource>(&self, event: &Event<K>, now: Instant) {
        let counts = match event {
            Event::Applied { old: None, .. } | Event::Deleted(_) => true,
            Event::Applied {
                old: Some(old),
                new,
            } => {
                let (old, new) = (old.meta(), new.meta());
                old.generation != new.generation
                    || new.generation.is_none()
                    || (old.deletion_timestamp.is_none() && new.deletion_timestamp.is_some())
            }
            Event::Resync(_) => false,
        };
        if !counts {
            return;
        }
        let hash = self.hash(event.object().meta());
        let mut changes = self.lock();
        if changes.len() == CAPACITY {
            changes.pop_front();
        }
        changes.push_back((now, hash));
        forget_before(&mut changes, now);
    }

    /// Splits `objects` (a late subscriber's replay) into those that did not change within the
    /// window and those that did, the latter in the order they last changed.
    pub(super) fn split<K: Resource>(
        &self,
        objects: Vec<Arc<K>>,
        now: Instant,
    ) -> (Vec<Arc<K>>, Vec<Arc<K>>) {
        let last: HashMap<u64, usize> = {
            let mut changes = self.lock();
            forget_before(&mut changes, now);
            // Later changes of a key overwrite its earlier place.
            changes
                .iter()
                .enumerate()
                .map(|(i, (_, hash))| (*hash, i))
                .collect()
        };
        if last.is_empty() {
            return (objects, Vec::new());
        }
        let mut recent = Vec::new();
        let mut old = Vec::with_capacity(objects.len());
        for obj in objects {
            match last.get(&self.hash(obj.meta())) {
                Some(place) => recent.push((*place, obj)),
                None => old.push(obj),
            }
        }
        recent.sort_unstable_by_key(|(place, _)| *place);
        (old, recent.into_iter().map(|(_, obj)| obj).collect())
    }

    /// How many changes are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    /// The hash of an object's key (no allocation: an event's key is hashed on every event).
    fn hash(&self, meta: &kube::api::ObjectMeta) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        (meta.namespace.as_deref(), meta.name.as_deref()).hash(&mut hasher);
        std::hash::Hasher::finish(&hasher)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(Instant, u64)>> {
        self.changes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Drops the changes older than the window.
fn forget_before(changes: &mut VecDeque<(Instant, u64)>, now: Instant) {
    let Some(oldest) = now.checked_sub(WINDOW) else {
        return;
    };
    while changes.front().is_some_and(|(at, _)| *at < oldest) {
        changes.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn object(name: &str, generation: Option<i64>) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                generation,
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        })
    }

    fn names(objects: &[Arc<ConfigMap>]) -> Vec<&str> {
        objects
            .iter()
            .map(|o| o.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    #[test]
    fn changes_of_the_window_should_come_last_in_the_order_they_last_changed() {
        let recent = Recent::default();
        let start = Instant::now();
        let changed = |name: &str, old: Option<i64>, new: Option<i64>| Event::Applied {
            old: Some(object(name, old)),
            new: object(name, new),
        };
        recent.note(&changed("a", Some(1), Some(2)), start);
        recent.note(&changed("b", None, None), start + Duration::from_secs(30));
        // A status write (same generation) and a resync are not changes that count.
        recent.note(
            &changed("c", Some(3), Some(3)),
            start + Duration::from_secs(31),
        );
        recent.note(
            &Event::Resync(object("d", None)),
            start + Duration::from_secs(31),
        );
        recent.note(
            &Event::Applied {
                old: None,
                new: object("e", Some(1)),
            },
            start + Duration::from_secs(32),
        );
        // `a` changes again: its place is its last change.
        recent.note(
            &changed("a", Some(2), Some(3)),
            start + Duration::from_secs(33),
        );
        let all: Vec<_> = ["a", "b", "c", "d", "e", "f"]
            .iter()
            .map(|n| object(n, Some(1)))
            .collect();

        let (old, new) = recent.split(all.clone(), start + Duration::from_secs(40));
        assert_eq!(names(&old), ["c", "d", "f"]);
        assert_eq!(names(&new), ["b", "e", "a"]);

        // 61 s after the first: `b` (at 30 s) is out of the window, and forgotten.
        let (old, new) = recent.split(all, start + Duration::from_secs(91));
        assert_eq!(names(&old), ["b", "c", "d", "f"]);
        assert_eq!(names(&new), ["e", "a"]);
        assert_eq!(recent.len(), 2);
    }

    #[test]
    fn a_deletion_begun_should_count_and_memory_should_stay_bounded() {
        let recent = Recent::default();
        let now = Instant::now();
        let mut deleting = (*object("x", Some(4))).clone();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        recent.note(
            &Event::Applied {
                old: Some(object("x", Some(4))),
                new: Arc::new(deleting),
            },
            now,
        );
        assert_eq!(recent.len(), 1);
        for i in 0..CAPACITY + 10 {
            recent.note(
                &Event::Applied {
                    old: None,
                    new: object(&format!("o{i}"), Some(1)),
                },
                now,
            );
        }
        assert_eq!(recent.len(), CAPACITY, "the oldest are forgotten first");
        let (old, new) = recent.split(vec![object("x", Some(4))], now);
        assert_eq!((old.len(), new.len()), (1, 0));
    }
}
