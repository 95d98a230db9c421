//! What happens to a child that is no longer built (pruned: dropped from a collection, or its
//! activation condition turned false) and to a child whose owner is deleted: a [`Deletion`]
//! policy per dependent, with a safe default for the kinds that hold other objects.
//!
//! Releasing a child (`orphan`) removes the primary's owner reference and the
//! [`DEPENDENT_LABEL`] and writes [`RELEASED_ANNOTATION`] (the primary's UID): the garbage
//! collector no longer deletes it with the primary, pruning no longer finds it, and only the
//! primary that released it takes it back when it builds it again (any other owner would be a
//! conflict). A child released when its owner is deleted is released before the owner goes:
//! the primary carries [`FINALIZER`] while one of its dependents orphans on owner deletion, or
//! while a child others hold (with finalizers) is seen under a dependent with no policy of its
//! own.

use std::fmt::Display;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::child::DEPENDENT_LABEL;
use crate::BoxError;
use crate::client::{name_error, request};
use crate::controller::{Context, Kind};
use crate::scope::Scoped;

/// The finalizer on a primary while one of its dependents orphans on owner deletion: taken off
/// once those children are released, so the garbage collector finds none of them owned. Defined
/// with the controller's finalizer handling, whose worker reconciles a primary being deleted
/// while it carries it (the controller does not depend on the dependents).
pub use crate::controller::RELEASE_DEPENDENTS as FINALIZER;

/// On a released child: the UID of the primary that released it (only that primary adopts it
/// again).
pub const RELEASED_ANNOTATION: &str = "kubeforge.dev/released-by";

/// The kinds that hold other objects: deleting one deletes what it holds (a Namespace's
/// workloads, a claim's volume data), so they are never deleted without an explicit opt-in.
const HOLDERS: &[&str] = &["Namespace", "PersistentVolumeClaim", "PersistentVolume"];

/// What happens to a child when its dependent no longer builds it, or when its owner is
/// deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deletion {
    /// Deleted (in the background; when the owner is deleted, by the garbage collector).
    Delete,
    /// Released: the owner reference and the [`DEPENDENT_LABEL`] removed, the object kept.
    Orphan,
    /// Left exactly as it is, still owned (pruning only: a child that keeps its owner
    /// reference is deleted with its owner by the garbage collector).
    Keep,
}

impl Display for Deletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Deletion::Delete => "delete",
            Deletion::Orphan => "orphan",
            Deletion::Keep => "keep",
        })
    }
}

/// Whether `K` holds other objects (see [`HOLDERS`]).
pub(super) fn holds_others<K: Kind>() -> bool {
    K::group(&()).is_empty() && HOLDERS.contains(&K::kind(&()).as_ref())
}

/// The policy for a pruned child `object`: the dependent's own, else `orphan` for a kind that
/// holds other objects or an object others hold with finalizers, else `delete`.
pub(super) fn on_prune<K: Kind>(declared: Option<Deletion>, object: &K) -> Deletion {
    match declared {
        Some(policy) => policy,
        None if holds_others::<K>() || held(object) => Deletion::Orphan,
        None => Deletion::Delete,
    }
}

/// The policy when the owner is deleted, known before any child is seen: the dependent's own,
/// else `orphan` for a kind that holds other objects, else `delete`.
pub(super) fn on_owner_delete<K: Kind>(declared: Option<Deletion>) -> Deletion {
    match declared {
        Some(policy) => policy,
        None if holds_others::<K>() => Deletion::Orphan,
        None => Deletion::Delete,
    }
}

/// The policy for child `object` when the owner is deleted: as [`on_owner_delete`], and
/// `orphan` too for an object carrying finalizers (others hold it) unless the dependent says.
pub(super) fn on_owner_delete_of<K: Kind>(declared: Option<Deletion>, object: &K) -> Deletion {
    match declared {
        None if held(object) => Deletion::Orphan,
        declared => on_owner_delete::<K>(declared),
    }
}

/// Whether others hold `object` with finalizers (a child never carries kubeforge's own).
pub(super) fn held<K: Kind>(object: &K) -> bool {
    !object.finalizers().is_empty()
}

/// Whether `object` is being deleted: it has a `deletionTimestamp`, or it is a Namespace in
/// phase `Terminating`. Such an object is never ready: what depends on it waits.
pub(super) fn being_deleted<K: Kind>(object: &K) -> bool {
    if object.meta().deletion_timestamp.is_some() {
        return true;
    }
    let is_namespace = K::group(&()).is_empty() && K::kind(&()) == "Namespace";
    is_namespace
        && serde_json::to_value(object).is_ok_and(|v| v["status"]["phase"] == "Terminating")
}

/// Whether `object` was released by `primary` (see [`RELEASED_ANNOTATION`]) and has no
/// controller since: `primary` may take it back.
pub(super) fn released_by<P: Kind, K: Kind>(primary: &P, object: &K) -> bool {
    let released = object.annotations().get(RELEASED_ANNOTATION);
    primary.meta().uid.is_some()
        && released == primary.meta().uid.as_ref()
        && !object
            .owner_references()
            .iter()
            .any(|r| r.controller == Some(true))
}

/// Releases `object` from `primary`: one merge patch (guarded by its resourceVersion) removes
/// the owner reference and the [`DEPENDENT_LABEL`] and writes [`RELEASED_ANNOTATION`], as
/// field manager `manager`. Whether it was still there.
pub(super) async fn release<P: Kind, K: Kind>(
    primary: &P,
    ctx: &Context<P>,
    object: &K,
    manager: &str,
) -> Result<bool, BoxError> {
    let uid = primary.meta().uid.clone().unwrap_or_default();
    let namespace = object.meta().namespace.clone();
    let name = object.name_any();
    let others: Vec<_> = object
        .owner_references()
        .iter()
        .filter(|r| r.uid != uid)
        .cloned()
        .collect();
    let patch = json!({
        "metadata": {
            "resourceVersion": object.meta().resource_version,
            "ownerReferences": others,
            "labels": { DEPENDENT_LABEL: null },
            "annotations": { RELEASED_ANNOTATION: uid },
        }
    });
    match patch_metadata(ctx, object, manager, &patch).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => {
            let what = request("release", &K::kind(&()), namespace.as_deref(), &name);
            Err(name_error(&what, error).into())
        }
    }
}

/// Sends `patch`, a merge patch of `object`'s metadata, as field manager `manager`.
async fn patch_metadata<P: Kind, K: Kind>(
    ctx: &Context<P>,
    object: &K,
    manager: &str,
    patch: &serde_json::Value,
) -> kube::Result<kube::api::PartialObjectMeta<K>> {
    let api = <K::Scope as Scoped>::api::<K>(ctx.client(), object.meta().namespace.as_deref());
    let params = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    };
    api.patch_metadata(&object.name_any(), &params, &Patch::Merge(patch))
        .await
}

/// Takes back `object`, released earlier by the primary `desired` is placed under: one merge
/// patch (guarded by its resourceVersion) adds `desired`'s owner references and
/// [`DEPENDENT_LABEL`] and removes [`RELEASED_ANNOTATION`]. The object as stored after it.
pub(super) async fn adopt<P: Kind, K: Kind>(
    ctx: &Context<P>,
    object: &K,
    desired: &K,
    manager: &str,
) -> Result<Arc<K>, BoxError> {
    let namespace = object.meta().namespace.clone();
    let name = object.name_any();
    let mut references = object.owner_references().to_vec();
    for wanted in desired.owner_references() {
        if !references.iter().any(|r| r.uid == wanted.uid) {
            references.push(wanted.clone());
        }
    }
    let label = desired.labels().get(DEPENDENT_LABEL);
    let patch = json!({
        "metadata": {
            "resourceVersion": object.meta().resource_version,
            "ownerReferences": references,
            "labels": { DEPENDENT_LABEL: label },
            "annotations": { RELEASED_ANNOTATION: null },
        }
    });
    match patch_metadata(ctx, object, manager, &patch).await {
        Ok(written) => {
            let mut adopted = object.clone();
            *adopted.meta_mut() = written.metadata;
            ctx.record_write(&adopted);
            Ok(Arc::new(adopted))
        }
        Err(error) => {
            let what = request("adopt", &K::kind(&()), namespace.as_deref(), &name);
            Err(name_error(&what, error).into())
        }
    }
}

/// Adds (`hold`) or removes [`FINALIZER`] on `primary` with a JSON patch guarded by its UID and
/// finalizer list; nothing when it already is as wanted. A changed list is retried (the
/// reconcile fails and runs again on the newer object).
pub(super) async fn finalizer<P: Kind>(
    primary: &P,
    ctx: &Context<P>,
    hold: bool,
) -> Result<(), BoxError> {
    let meta = primary.meta();
    let uid = meta.uid.as_deref().unwrap_or_default();
    let has = primary.finalizers().iter().any(|f| f == FINALIZER);
    let patch = match (hold, has) {
        (true, false) => {
            crate::controller::finalizer::add_patch(uid, meta.finalizers.as_ref(), FINALIZER)
        }
        (false, true) => {
            match crate::controller::finalizer::remove_patch(uid, primary.finalizers(), FINALIZER) {
                Some(patch) => patch,
                None => return Ok(()),
            }
        }
        _ => return Ok(()),
    };
    let patch: json_patch::Patch = serde_json::from_value(patch)?;
    let name = primary.name_any();
    let api = ctx.api::<P>();
    match api
        .patch_metadata(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
    {
        Ok(written) => {
            let mut patched = primary.clone();
            *patched.meta_mut() = written.metadata;
            ctx.record_write(&patched);
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 && !hold => Ok(()),
        Err(error) => {
            let verb = if hold {
                "add finalizer to"
            } else {
                "remove finalizer from"
            };
            let what = request(verb, &P::kind(&()), meta.namespace.as_deref(), &name);
            Err(name_error(&what, error).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PersistentVolumeClaim};
    use serde_json::json;

    use super::*;

    #[test]
    fn kinds_that_hold_others_should_be_orphaned_unless_the_dependent_says_otherwise() {
        let pvc = PersistentVolumeClaim::default();
        assert_eq!(on_prune(None, &pvc), Deletion::Orphan);
        assert_eq!(on_prune(Some(Deletion::Delete), &pvc), Deletion::Delete);
        assert_eq!(on_owner_delete::<Namespace>(None), Deletion::Orphan);
        assert_eq!(on_owner_delete::<ConfigMap>(None), Deletion::Delete);
        let plain = ConfigMap::default();
        assert_eq!(on_prune(None, &plain), Deletion::Delete);
        let held: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": "x", "finalizers": ["backup.example.com/hold"] },
        }))
        .unwrap();
        assert_eq!(on_prune(None, &held), Deletion::Orphan);
        assert_eq!(on_prune(Some(Deletion::Keep), &held), Deletion::Keep);
        assert_eq!(on_owner_delete_of(None, &held), Deletion::Orphan);
        assert_eq!(
            on_owner_delete_of(Some(Deletion::Delete), &held),
            Deletion::Delete
        );
        assert_eq!(on_owner_delete_of(None, &plain), Deletion::Delete);
    }

    #[test]
    fn a_terminating_namespace_or_any_object_with_a_deletion_timestamp_should_be_deleting() {
        let terminating: Namespace = serde_json::from_value(json!({
            "metadata": { "name": "a" }, "status": { "phase": "Terminating" },
        }))
        .unwrap();
        assert!(being_deleted(&terminating));
        let active: Namespace = serde_json::from_value(json!({
            "metadata": { "name": "a" }, "status": { "phase": "Active" },
        }))
        .unwrap();
        assert!(!being_deleted(&active));
        let deleted: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z" },
        }))
        .unwrap();
        assert!(being_deleted(&deleted));
    }
}
