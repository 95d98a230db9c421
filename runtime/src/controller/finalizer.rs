//! Finalizer bookkeeping: cleanup at most once per object UID, and finalizer patches that can
//! only ever touch the object they were computed from.
//!
//! Two facts of the apiserver make this necessary. When the last finalizer comes off an object
//! being deleted, the apiserver deletes it and answers with the object at its *old*
//! resourceVersion, so read-your-own-writes cannot tell that the cache still holds the deleting
//! object; a key queued meanwhile (a status writer touched it, say) then reads that stale copy
//! and would clean up again. And a patch names its object by name only: a finalizer removal
//! computed from the stale copy would land on a new object created under the same name. So the
//! worker remembers the UIDs whose finalizer it removed (for [`REMEMBER`]), and every finalizer
//! patch starts with a JSON-patch `test` of `/metadata/uid`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a finalized UID is remembered: far longer than an informer takes to deliver the
/// deletion, unless its watch is down, in which case a relist removes the stale copy.
pub(super) const REMEMBER: Duration = Duration::from_secs(600);

/// What the worker knows about the cleanups of objects being deleted.
#[derive(Debug, Default)]
pub(super) struct Finalized {
    /// Cleanup succeeded, the finalizer is not removed yet: only the removal is retried.
    cleaned: HashSet<String>,
    /// The finalizer was removed (the object is gone or going): nothing is left to do.
    released: HashMap<String, Instant>,
    /// `released` in insertion order, for pruning.
    order: VecDeque<(Instant, String)>,
}

/// The state of the cleanup of one UID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    /// Cleanup has not succeeded yet.
    Pending,
    /// Cleanup succeeded; the finalizer still has to come off.
    Cleaned,
    /// The finalizer came off: this object must not be cleaned up again.
    Released,
}

impl Finalized {
    pub(super) fn stage(&self, uid: &str) -> Stage {
        if self.released.contains_key(uid) {
            Stage::Released
        } else if self.cleaned.contains(uid) {
            Stage::Cleaned
        } else {
            Stage::Pending
        }
    }

    pub(super) fn cleaned(&mut self, uid: &str) {
        self.cleaned.insert(uid.to_owned());
    }

    pub(super) fn released(&mut self, uid: &str, now: Instant) {
        self.cleaned.remove(uid);
        while let Some((at, _)) = self.order.front() {
            if now.duration_since(*at) < REMEMBER {
                break;
            }
            if let Some((_, old)) = self.order.pop_front() {
                self.released.remove(&old);
            }
        }
        if self.released.insert(uid.to_owned(), now).is_none() {
            self.order.push_back((now, uid.to_owned()));
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.released.len()
    }
}

/// A JSON patch adding `finalizer` to an object whose UID is `uid` and whose finalizer list is
/// `current` (it fails with 422 if either changed).
pub(super) fn add_patch(uid: &str, current: Option<&Vec<String>>, finalizer: &str) -> Value {
    match current {
        None => json!([
            { "op": "test", "path": "/metadata/uid", "value": uid },
            { "op": "test", "path": "/metadata/finalizers", "value": null },
            { "op": "add", "path": "/metadata/finalizers", "value": [finalizer] },
        ]),
        Some(list) => json!([
            { "op": "test", "path": "/metadata/uid", "value": uid },
            { "op": "test", "path": "/metadata/finalizers", "value": list },
            { "op": "add", "path": "/metadata/finalizers/-", "value": finalizer },
        ]),
    }
}

/// A JSON patch removing `finalizer` from an object whose UID is `uid` and whose finalizer list
/// is `current`, or `None` if the list does not hold it.
pub(super) fn remove_patch(uid: &str, current: &[String], finalizer: &str) -> Option<Value> {
    let index = current.iter().position(|f| f == finalizer)?;
    Some(json!([
        { "op": "test", "path": "/metadata/uid", "value": uid },
        { "op": "test", "path": "/metadata/finalizers", "value": current },
        { "op": "remove", "path": format!("/metadata/finalizers/{index}") },
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_uid_should_stay_released_until_it_is_pruned() {
        let mut f = Finalized::default();
        let t0 = Instant::now();
        assert_eq!(f.stage("a"), Stage::Pending);
        f.cleaned("a");
        assert_eq!(f.stage("a"), Stage::Cleaned);
        f.released("a", t0);
        assert_eq!(f.stage("a"), Stage::Released);
        f.released("b", t0 + REMEMBER / 2);
        assert_eq!(f.len(), 2);
        // Pruning happens on insertion, oldest first.
        f.released("c", t0 + REMEMBER + Duration::from_secs(1));
        assert_eq!(f.stage("a"), Stage::Pending);
        assert_eq!(f.stage("b"), Stage::Released);
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn finalizer_patches_should_test_the_uid_first() {
        let add = add_patch("u1", None, "x/y");
        assert_eq!(
            add[0],
            json!({ "op": "test", "path": "/metadata/uid", "value": "u1" })
        );
        let list = vec!["a".to_owned(), "x/y".to_owned()];
        let remove = remove_patch("u1", &list, "x/y").unwrap();
        assert_eq!(remove[0]["path"], "/metadata/uid");
        assert_eq!(
            remove[2],
            json!({ "op": "remove", "path": "/metadata/finalizers/1" })
        );
        assert!(remove_patch("u1", &list, "other").is_none());
    }
}
