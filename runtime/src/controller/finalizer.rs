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
//!
//! "At most once" holds within one process. Across replicas cleanup is **at least once**: when
//! leadership moves while a cleanup runs (or after it ran but before its finalizer came off),
//! the successor runs it again (the old leader's writes are fenced, not its side effects
//! outside the cluster). Write cleanups to be idempotent: treat "already gone" as done, and
//! announce only what this run changed (the examples' `unregister` removes its row with a
//! JSON-patch `remove`, which fails when a previous run already did).

/// The finalizer a primary carries while dependents of it must be released (orphaned) before
/// the garbage collector sees it gone (`crate::dependents::FINALIZER`): the worker reconciles a
/// primary being deleted while it carries it, so the reconcile can release them and take it off.
pub const RELEASE_DEPENDENTS: &str = "kubeforge.dev/release-dependents";

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::Wiring;
use crate::scope::{AnyKind, KindType};
use crate::writes::Writer;

/// Why adding or removing a controller's finalizer failed (the key is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum FinalizerError {
    /// The patch adding the finalizer failed.
    #[error("adding finalizer {finalizer} to {name}: {}", crate::client::readable(.source))]
    Add {
        /// The object: its kind, namespace and name (`WebApp shop/web`).
        name: String,
        /// The finalizer.
        finalizer: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The patch removing the finalizer failed.
    #[error("removing finalizer {finalizer} from {name}: {}", crate::client::readable(.source))]
    Remove {
        /// The object: its kind, namespace and name (`WebApp shop/web`).
        name: String,
        /// The finalizer.
        finalizer: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl FinalizerError {
    /// Whether the apiserver refused the patch because the object changed or was replaced
    /// since it was cached (a JSON-patch `test` failed: `422`); the cache will catch up.
    pub fn is_stale_cache(&self) -> bool {
        let (Self::Add { source, .. } | Self::Remove { source, .. }) = self;
        is_invalid(source)
    }
}

/// Whether the apiserver refused a patch as invalid (422: a JSON-patch `test` failed).
fn is_invalid(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 422)
}

/// How long a finalized UID is remembered: far longer than an informer takes to deliver the
/// deletion, unless its watch is down, in which case a relist removes the stale copy.
pub(super) const REMEMBER: Duration = Duration::from_secs(600);

/// What the worker knows about the cleanups of objects being deleted.
#[derive(Debug, Default)]
pub(crate) struct Finalized {
    /// Cleanup succeeded, the finalizer is not removed yet: only the removal is retried.
    cleaned: HashSet<String>,
    /// The finalizer was removed (the object is gone or going): nothing is left to do.
    released: HashMap<String, Instant>,
    /// `released` in insertion order, for pruning.
    order: VecDeque<(Instant, String)>,
}

/// The state of the cleanup of one UID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Cleanup has not succeeded yet.
    Pending,
    /// Cleanup succeeded; the finalizer still has to come off.
    Cleaned,
    /// The finalizer came off: this object must not be cleaned up again.
    Released,
}

impl Finalized {
    pub(crate) fn stage(&self, uid: &str) -> Stage {
        if self.released.contains_key(uid) {
            Stage::Released
        } else if self.cleaned.contains(uid) {
            Stage::Cleaned
        } else {
            Stage::Pending
        }
    }

    pub(crate) fn cleaned(&mut self, uid: &str) {
        self.cleaned.insert(uid.to_owned());
    }

    pub(crate) fn released(&mut self, uid: &str, now: Instant) {
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
pub(crate) fn add_patch(uid: &str, current: Option<&Vec<String>>, finalizer: &str) -> Value {
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
pub(crate) fn remove_patch(uid: &str, current: &[String], finalizer: &str) -> Option<Value> {
    let index = current.iter().position(|f| f == finalizer)?;
    Some(json!([
        { "op": "test", "path": "/metadata/uid", "value": uid },
        { "op": "test", "path": "/metadata/finalizers", "value": current },
        { "op": "remove", "path": format!("/metadata/finalizers/{index}") },
    ]))
}

/// Adds `finalizer` to `obj` with a JSON patch that fails if the object's UID or finalizer list
/// changed meanwhile; `None` if the object is gone. The patch goes through the metadata API (its
/// answer is metadata only, so it decodes even if the object no longer fits `K`); the returned
/// object is `obj` with the new metadata, recorded for read-your-writes.
pub(crate) async fn add<K: AnyKind>(
    api: &Api<K>,
    ty: &KindType<K>,
    wiring: &Wiring,
    obj: &K,
    finalizer: &str,
    writer: Option<Writer>,
) -> Result<Option<Arc<K>>, FinalizerError> {
    let meta = obj.meta();
    let name = format!("{} {}", ty.kind(), crate::ObjectKey::of(obj));
    let error = |source| FinalizerError::Add {
        name: name.clone(),
        finalizer: finalizer.to_owned(),
        source,
    };
    let uid = meta.uid.as_deref().unwrap_or_default();
    let patch = add_patch(uid, meta.finalizers.as_ref(), finalizer);
    match patch_metadata(api, wiring, obj, patch, writer).await {
        Ok(with_finalizer) => Ok(Some(Arc::new(with_finalizer))),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(e) => Err(error(e)),
    }
}

/// Removes `finalizer` from `obj` with a JSON patch guarded by tests of the UID and of the list
/// (from the metadata alone: it works on an object that no longer decodes as `K`). Done also when
/// the object is gone, or when another object took its name.
pub(crate) async fn remove<K: AnyKind>(
    api: &Api<K>,
    ty: &KindType<K>,
    wiring: &Wiring,
    obj: &K,
    finalizer: &str,
) -> Result<(), FinalizerError> {
    let meta = obj.meta();
    let name = format!("{} {}", ty.kind(), crate::ObjectKey::of(obj));
    let error = |source| FinalizerError::Remove {
        name: name.clone(),
        finalizer: finalizer.to_owned(),
        source,
    };
    let uid = meta.uid.as_deref().unwrap_or_default();
    let list = meta.finalizers.as_deref().unwrap_or_default();
    let Some(patch) = remove_patch(uid, list, finalizer) else {
        return Ok(());
    };
    match patch_metadata(api, wiring, obj, patch, None).await {
        Ok(_) => Ok(()),
        // Already gone: the finalizer was the last thing holding it.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        // A test failed: if the object is gone or another one took its name, this object's
        // finalizer is no longer ours to remove; otherwise retry from the cache.
        Err(failed) if is_invalid(&failed) => match api
            .get_metadata_opt(meta.name.as_deref().unwrap_or_default())
            .await
        {
            Ok(Some(live)) if live.metadata.uid.as_deref() == Some(uid) => Err(error(failed)),
            Ok(_) => Ok(()),
            Err(e) => Err(error(e)),
        },
        Err(e) => Err(error(e)),
    }
}

/// Sends the JSON patch `patch` of `obj`'s metadata through the metadata API (its answer decodes
/// whatever the object's body) and returns `obj` with the new metadata, recorded for
/// read-your-writes (as `writer`'s own, if given).
async fn patch_metadata<K: AnyKind>(
    api: &Api<K>,
    wiring: &Wiring,
    obj: &K,
    patch: Value,
    writer: Option<Writer>,
) -> Result<K, kube::Error> {
    let name = obj.meta().name.as_deref().unwrap_or_default();
    // A reconcile's own write: versions watched before its answer may be it.
    let _flight = writer
        .as_ref()
        .map(|_| wiring.flight(crate::ObjectKey::of(obj)));
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
    let updated = api
        .patch_metadata(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await?;
    let mut patched = obj.clone();
    *patched.meta_mut() = updated.metadata;
    wiring.record_write_by(&patched, writer);
    Ok(patched)
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
