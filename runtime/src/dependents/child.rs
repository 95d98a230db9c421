//! One child's write, shared by single dependents and collections: where it goes (its
//! namespace, checked against the owner's scope), whether the stored one is ours and already
//! holds what was built, and the request that makes it so. Every error names the request.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Preconditions};
use serde_json::Value;

use super::{matcher, policy};
use crate::BoxError;
use crate::ObjectKey;
use crate::cache::Lookup;
use crate::client::{name_error, request};
use crate::controller::{Context, Kind};
use crate::scope::Scoped;

/// The label on each child of a collection: the name of the dependent that made it, so that
/// pruning deletes only what that dependent made (with the owner reference, which says whose).
pub const DEPENDENT_LABEL: &str = "kubeforge.dev/dependent";

/// What writing one child found.
pub(super) enum Written<K> {
    /// The stored child, and whether this reconcile created or wrote it.
    Stored {
        object: Arc<K>,
        created: bool,
        written: bool,
    },
    /// An object of that name exists and `primary` does not own it: left alone (the message
    /// says who owns it).
    Foreign(String),
}

/// Completes `desired` for a write and says where it goes: its namespace (the owner's when it
/// names none; a namespaced owner's children live in its namespace, a cluster-scoped owner's
/// namespaced children must name one), the controller owner reference, the shard label and,
/// for a collection, the [`DEPENDENT_LABEL`].
pub(super) fn place<P: Kind, K: Kind>(
    primary: &P,
    ctx: &Context<P>,
    desired: &mut K,
    label: Option<&str>,
) -> Result<ObjectKey, BoxError> {
    let kind = K::kind(&());
    let name = desired.meta().name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(format!("the desired {kind} has no name").into());
    }
    let owner = || format!("{} {}", P::kind(&()), primary.name_any());
    let owner_namespace = primary.meta().namespace.clone();
    let namespace = if <K::Scope as Scoped>::NAMESPACED {
        let namespace = desired
            .meta()
            .namespace
            .clone()
            .or_else(|| owner_namespace.clone());
        match (&namespace, &owner_namespace) {
            (None, _) => {
                return Err(format!(
                    "{kind} {name}: a namespaced child of the cluster-scoped {} needs metadata.namespace",
                    owner()
                )
                .into());
            }
            (Some(namespace), Some(home)) if namespace != home => {
                return Err(format!(
                    "{kind} {namespace}/{name}: the {} lives in namespace {home}, and an owner \
                     reference cannot cross namespaces",
                    owner()
                )
                .into());
            }
            _ => {}
        }
        desired.meta_mut().namespace.clone_from(&namespace);
        namespace
    } else {
        if owner_namespace.is_some() {
            return Err(format!(
                "{kind} {name} is cluster-scoped: the namespaced {} cannot own it (the garbage \
                 collector deletes such children)",
                owner()
            )
            .into());
        }
        None
    };
    crate::client::owned_by(desired, primary, "dependent")?;
    ctx.label_for_shard(desired);
    if let Some(label) = label {
        desired
            .labels_mut()
            .insert(DEPENDENT_LABEL.to_owned(), label.to_owned());
    }
    Ok(ObjectKey { namespace, name })
}

/// Writes `desired` (placed at `key`) unless the stored child already holds it; a stored object
/// `primary` does not own is left alone.
pub(super) async fn write<P: Kind, K: Kind + crate::views::Writable>(
    primary: &P,
    ctx: &Context<P>,
    desired: K,
    key: &ObjectKey,
    create_only: bool,
    manager: &str,
) -> Result<Written<K>, BoxError> {
    let stored = |object, created, written| Written::Stored {
        object: Arc::new(object),
        created,
        written,
    };
    // The cache may not have seen an object made a moment ago: absent there, it is read from
    // the apiserver before anything is written, so a same-named object someone else just made
    // is never taken over.
    let current = match cached::<P, K>(ctx, key).await {
        Some(Some(current)) => Some(current),
        _ => live::<P, K>(ctx, key).await?,
    };
    // Released by this primary earlier (`orphan`): taken back before anything else.
    let current = match current {
        Some(current)
            if !owns(primary, current.as_ref())
                && policy::released_by(primary, current.as_ref()) =>
        {
            Some(policy::adopt(ctx, current.as_ref(), &desired, manager).await?)
        }
        current => current,
    };
    match current {
        Some(current) if !owns(primary, current.as_ref()) => {
            Ok(Written::Foreign(foreign(primary, current.as_ref())))
        }
        // Being deleted: nothing is written into it (it is not ready, so what depends on it
        // waits); it is made again once it is gone.
        Some(current) if policy::being_deleted(current.as_ref()) => Ok(Written::Stored {
            object: current,
            created: false,
            written: false,
        }),
        Some(current) if create_only || unchanged(&desired, current.as_ref()) => {
            Ok(Written::Stored {
                object: current,
                created: false,
                written: false,
            })
        }
        Some(_) => {
            let written = ctx.apply_owned(primary, manager, desired).await?;
            Ok(stored(written, false, true))
        }
        None if create_only => {
            let (object, created) = ctx.create_owned(primary, desired).await?;
            if !created && !owns(primary, &object) {
                return Ok(Written::Foreign(foreign(primary, &object)));
            }
            Ok(stored(object, created, created))
        }
        None => {
            let written = ctx.apply_owned(primary, manager, desired).await?;
            Ok(stored(written, true, true))
        }
    }
}

/// Whether `object` has an owner reference to `primary`.
pub(super) fn owns<P: Kind, K: kube::Resource>(primary: &P, object: &K) -> bool {
    primary
        .meta()
        .uid
        .as_ref()
        .is_some_and(|uid| object.owner_references().iter().any(|r| &r.uid == uid))
}

/// Why `object` is not `primary`'s: who controls it, if anyone.
fn foreign<P: Kind, K: Kind>(primary: &P, object: &K) -> String {
    let at = request(
        "",
        &K::kind(&()),
        object.meta().namespace.as_deref(),
        &object.name_any(),
    );
    let by = object
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .map_or_else(
            || "no controller".to_owned(),
            |r| format!("{} {}", r.kind, r.name),
        );
    format!(
        "{} exists and is not owned by {} {} (its controller: {by}); left as it is",
        at.trim_start(),
        P::kind(&()),
        primary.name_any()
    )
}

/// Deletes `object` (only that object: its UID is a precondition), in the background. Whether
/// it was still there.
pub(super) async fn delete<P: Kind, K: Kind>(
    ctx: &Context<P>,
    object: &K,
) -> Result<bool, BoxError> {
    let namespace = object.meta().namespace.clone();
    let name = object.name_any();
    let api = <K::Scope as Scoped>::api::<K>(ctx.client(), namespace.as_deref());
    let mut params = DeleteParams::background();
    params.preconditions = Some(Preconditions {
        uid: object.meta().uid.clone(),
        resource_version: None,
    });
    match api.delete(&name, &params).await {
        Ok(_) => Ok(true),
        // Gone, or another object of that name since (the UID precondition failed).
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(error) => {
            let what = request("delete", &K::kind(&()), namespace.as_deref(), &name);
            Err(name_error(&what, error).into())
        }
    }
}

/// Whether `current` holds every field of `desired` (see `matcher`), with a Secret's
/// `stringData` compared as the apiserver stores it (in `data`).
pub(super) fn unchanged<K: Kind>(desired: &K, current: &K) -> bool {
    match (serde_json::to_value(desired), serde_json::to_value(current)) {
        (Ok(mut want), Ok(have)) => {
            if K::group(&()).is_empty() && K::kind(&()) == "Secret" {
                string_data_as_stored(&mut want);
            }
            matcher::holds(&want, &have)
        }
        _ => false,
    }
}

/// Moves a Secret's `stringData` into `data`, base64-encoded: the apiserver never stores
/// `stringData`, it merges it into `data` (over a key of both, `stringData` wins).
fn string_data_as_stored(secret: &mut Value) {
    let Some(object) = secret.as_object_mut() else {
        return;
    };
    let Some(Value::Object(strings)) = object.remove("stringData") else {
        return;
    };
    let data = object
        .entry("data")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !data.is_object() {
        *data = Value::Object(serde_json::Map::new());
    }
    if let Some(data) = data.as_object_mut() {
        for (key, value) in strings {
            let bytes = value.as_str().unwrap_or_default().as_bytes().to_vec();
            let encoded = serde_json::to_value(k8s_openapi::ByteString(bytes)).unwrap_or(value);
            data.insert(key, encoded);
        }
    }
}

/// The stored child at `key`: from the cache when it holds full objects of `K` there, else
/// from the apiserver.
pub(super) async fn current<P: Kind, K: Kind>(
    ctx: &Context<P>,
    key: &ObjectKey,
) -> Result<Option<Arc<K>>, BoxError> {
    match cached::<P, K>(ctx, key).await {
        Some(found) => Ok(found),
        None => live::<P, K>(ctx, key).await,
    }
}

/// The child at `key` in the cache; `None` when the cache does not hold full objects of `K`
/// there (or cannot be read).
async fn cached<P: Kind, K: Kind>(ctx: &Context<P>, key: &ObjectKey) -> Option<Option<Arc<K>>> {
    let store = ctx
        .cache()
        .store::<K>(&Lookup::scope(key.namespace.as_deref()))
        .ok()?;
    store.get(key).await.ok()
}

/// The child at `key` as the apiserver has it now.
async fn live<P: Kind, K: Kind>(
    ctx: &Context<P>,
    key: &ObjectKey,
) -> Result<Option<Arc<K>>, BoxError> {
    let api = <K::Scope as Scoped>::api::<K>(ctx.client(), key.namespace.as_deref());
    match api.get_opt(&key.name).await {
        Ok(found) => Ok(found.map(Arc::new)),
        Err(error) => {
            let what = request("get", &K::kind(&()), key.namespace.as_deref(), &key.name);
            Err(name_error(&what, error).into())
        }
    }
}

/// The children of kind `K` that `primary` owns and that carry the [`DEPENDENT_LABEL`]
/// `label`: from the cache when it holds full objects of `K` in the owner's scope, else listed.
pub(super) async fn labelled<P: Kind, K: Kind>(
    primary: &P,
    ctx: &Context<P>,
    label: &str,
) -> Result<Vec<Arc<K>>, BoxError> {
    let Some(uid) = primary.meta().uid.clone() else {
        return Ok(Vec::new());
    };
    // A namespaced owner's children are in its namespace; a cluster-scoped owner's anywhere
    // the controller watches.
    let scope = match &primary.meta().namespace {
        Some(namespace) => crate::Namespaces::one(namespace.clone()),
        None => ctx.wiring().namespaces.clone(),
    };
    let scope = if <K::Scope as Scoped>::NAMESPACED {
        scope
    } else {
        crate::Namespaces::all()
    };
    let ours = |object: &K| object.labels().get(DEPENDENT_LABEL).map(String::as_str) == Some(label);
    if let Ok(store) = ctx.cache().store::<K>(&Lookup::namespaces(scope.clone()))
        && let Ok(owned) = store.owned_by(&uid).await
    {
        return Ok(owned.into_iter().filter(|o| ours(o)).collect());
    }
    let params = ListParams::default().labels(&format!("{DEPENDENT_LABEL}={label}"));
    let mut children = Vec::new();
    for api in scope.apis::<K>(&ctx.client()).into_vec() {
        let listed = crate::client::list_paged(&api, &params, 500)
            .await
            .map_err(|e| {
                let what = request("list", &K::kind(&()), api.namespace(), label);
                name_error(&what, e)
            })?;
        children.extend(
            listed
                .into_iter()
                .filter(|o| owns(primary, o))
                .map(Arc::new),
        );
    }
    Ok(children)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Secret;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_secret_built_with_string_data_should_match_what_the_apiserver_stores() {
        let built: Secret = serde_json::from_value(json!({
            "metadata": { "name": "s" },
            "data": { "a": "YQ==" },
            "stringData": { "token": "v1" },
        }))
        .unwrap();
        let stored: Secret = serde_json::from_value(json!({
            "metadata": { "name": "s", "uid": "u" },
            "data": { "a": "YQ==", "token": "djE=" },
            "type": "Opaque",
        }))
        .unwrap();
        assert!(unchanged(&built, &stored));
        let changed: Secret = serde_json::from_value(json!({
            "metadata": { "name": "s" },
            "stringData": { "token": "v2" },
        }))
        .unwrap();
        assert!(!unchanged(&changed, &stored));
    }
}
