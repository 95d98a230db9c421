//! The `Stalled` condition: when the retry policy gives up on an object, the runtime says so on
//! the object itself (besides the `RetriesExhausted` event), if the kind's status has
//! `conditions`; the next successful reconcile sets it back to `False`.

use std::collections::HashSet;
use std::sync::Mutex;

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource};
use serde_json::json;

use crate::ObjectKey;
use crate::crd::{Conditions, STALLED};

/// Whether the status of the kind (group, version, kind) has `conditions` and a status
/// subresource, by the CRDs `#[custom_resource]` registered in this binary (a kind that is not
/// one of them has none as far as the runtime knows).
pub(super) fn has_conditions(group: &str, version: &str, kind: &str) -> bool {
    crate::crd::registered().iter().any(|crd| {
        crd.spec.group == group
            && crd.spec.names.kind == kind
            && crd.spec.versions.iter().any(|v| {
                v.name == version
                    && v.subresources.as_ref().is_some_and(|s| s.status.is_some())
                    && v.schema
                        .as_ref()
                        .and_then(|s| s.open_api_v3_schema.as_ref())
                        .and_then(|s| s.properties.as_ref()?.get("status"))
                        .and_then(|s| s.properties.as_ref()?.get("conditions"))
                        .is_some()
            })
    })
}

/// The keys this process marked stalled (so a success knows to clear the condition without
/// reading every object's conditions).
#[derive(Default)]
pub(super) struct Stalled {
    keys: Mutex<HashSet<ObjectKey>>,
}

impl Stalled {
    fn keys(&self) -> std::sync::MutexGuard<'_, HashSet<ObjectKey>> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn marked(&self, key: &ObjectKey) {
        self.keys().insert(key.clone());
    }

    /// Whether `key` may carry a `Stalled=True` this process set (forgotten once asked).
    pub(super) fn take(&self, key: &ObjectKey) -> bool {
        self.keys().remove(key)
    }
}

/// The status patch that sets `Stalled` on `obj` (`message`: why it gave up) or, with `None`,
/// sets it back to `False` if it is `True`; `None` when nothing changes. Computed before any
/// task is spawned, so a success on an object that is not stalled costs no request. It carries
/// the object's resourceVersion: a conflict means the object changed, and it runs again anyway.
pub(super) fn patch<K>(obj: &K, message: Option<&str>) -> Option<(String, serde_json::Value)>
where
    K: Resource + serde::Serialize,
{
    let value = serde_json::to_value(obj).ok()?;
    let mut conditions: Conditions = value
        .pointer("/status/conditions")
        .cloned()
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default();
    let generation = obj.meta().generation.unwrap_or_default();
    let changed = match message {
        Some(message) => conditions.mark(STALLED, true, "RetriesExhausted", message, generation),
        None if conditions.is_true(STALLED) => conditions.mark(
            STALLED,
            false,
            "Reconciled",
            "the last reconcile succeeded",
            generation,
        ),
        None => false,
    };
    let name = obj.meta().name.clone().filter(|_| changed)?;
    let patch = json!({
        "metadata": { "resourceVersion": obj.meta().resource_version },
        "status": { "conditions": conditions },
    });
    Some((name, patch))
}

/// Sends a [`patch`]; returns the object as written.
pub(super) async fn send<K>(api: &Api<K>, name: &str, patch: &serde_json::Value) -> kube::Result<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}
