//! Status writes that can only land on the object being reconciled.
//!
//! A patch names its object by name. A reconcile working from a cached copy of an object that
//! was deleted and created again under the same name would write the old object's status onto
//! the new one. [`guard`] turns the patch of a status write into one that carries the reconciled
//! object's UID as a precondition the apiserver checks:
//!
//! - a JSON patch gets a leading `test` of `/metadata/uid`;
//! - a JSON merge patch becomes the equivalent JSON patch (RFC 7386 applied op by op, with the
//!   reconciled object deciding whether a member is replaced or merged into), led by the same
//!   `test`; every assumption about the object's structure is itself a `test`, so a patch
//!   computed from a stale copy fails with `422` instead of doing something a merge patch would
//!   not have done. The status subresource of a custom resource ignores `metadata` in a merge
//!   patch, so carrying the UID in the merge patch itself would check nothing;
//! - a strategic merge patch (built-in kinds only) gets `metadata.uid`, which the apiserver
//!   refuses to change;
//! - an apply patch gets `metadata.uid` and the reconciled object's `metadata.resourceVersion`:
//!   the status subresource of a custom resource ignores the UID of an apply (checked on the
//!   real apiserver), and a resourceVersion is the one precondition it checks on every write. A
//!   resourceVersion names one version of one object, so it implies the UID; it also makes the
//!   apply fail with `409` if the object changed since the reconcile read it (that change has
//!   queued another reconcile anyway).

use kube::api::Patch;
use serde::Serialize;
use serde_json::{Map, Value, json};

/// `patch` with `uid` as a precondition. `base` gives the reconciled object as JSON, asked only
/// for a merge patch (it decides the shape of the JSON patch the merge patch becomes);
/// `resource_version` is the reconciled object's, which an apply carries.
///
/// # Errors
///
/// `patch` does not serialize to JSON.
pub(super) fn guard<P: Serialize>(
    patch: &Patch<P>,
    uid: &str,
    resource_version: Option<&str>,
    base: impl FnOnce() -> Result<Value, serde_json::Error>,
) -> Result<Patch<Value>, serde_json::Error> {
    let test_uid = json!({ "op": "test", "path": "/metadata/uid", "value": uid });
    Ok(match patch {
        Patch::Json(ops) => {
            let mut all = vec![test_uid];
            all.extend(
                serde_json::to_value(ops)?
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
            );
            Patch::Json(serde_json::from_value(Value::Array(all))?)
        }
        Patch::Merge(merge) => {
            let merge = serde_json::to_value(merge)?;
            let mut ops = vec![test_uid];
            merge_to_ops(&merge, Some(&base()?), "", &mut ops);
            Patch::Json(serde_json::from_value(Value::Array(ops))?)
        }
        Patch::Apply(p) => {
            let version = resource_version.map(|v| json!(v));
            Patch::Apply(with_meta(serde_json::to_value(p)?, uid, version))
        }
        Patch::Strategic(p) => Patch::Strategic(with_meta(serde_json::to_value(p)?, uid, None)),
        // `Patch` is non-exhaustive: a kind of patch this code does not know cannot be guarded.
        #[allow(unreachable_patterns)]
        _ => {
            return Err(serde::ser::Error::custom(
                "this kind of patch cannot carry a UID precondition",
            ));
        }
    })
}

/// `body` with `metadata.uid` (and `metadata.resourceVersion`), unless it sets them itself.
fn with_meta(mut body: Value, uid: &str, resource_version: Option<Value>) -> Value {
    if let Value::Object(top) = &mut body {
        let meta = top
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.entry("uid").or_insert_with(|| json!(uid));
            if let Some(version) = resource_version {
                meta.entry("resourceVersion").or_insert(version);
            }
        }
    }
    body
}

/// A JSON pointer segment (`~` → `~0`, `/` → `~1`).
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// `value` without the members a merge patch would delete (nulls, recursively).
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Appends the JSON-patch ops that apply merge patch `patch` at `path` of an object whose value
/// there is `base` (as far as the caller knows), each structural assumption tested.
fn merge_to_ops(patch: &Value, base: Option<&Value>, path: &str, ops: &mut Vec<Value>) {
    let Value::Object(members) = patch else {
        // A non-object merge patch replaces the target.
        ops.push(json!({ "op": "add", "path": path, "value": patch }));
        return;
    };
    for (key, value) in members {
        let at = format!("{path}/{}", escape(key));
        let current = base.and_then(|b| b.get(key));
        match (value, current) {
            (Value::Null, None) => {
                // Nothing to delete, as far as we know: check that.
                ops.push(json!({ "op": "test", "path": at, "value": null }));
            }
            (Value::Null, Some(_)) => ops.push(json!({ "op": "remove", "path": at })),
            (Value::Object(_), Some(Value::Object(_))) => {
                // Merged into: its members are patched one by one (if it is missing on the
                // server, the first op on a member fails).
                merge_to_ops(value, current, &at, ops);
            }
            (Value::Object(_), Some(other)) => {
                // Replaces a non-object value.
                ops.push(json!({ "op": "test", "path": at, "value": other }));
                ops.push(json!({ "op": "add", "path": at, "value": without_nulls(value) }));
            }
            (Value::Object(_), None) => {
                ops.push(json!({ "op": "test", "path": at, "value": null }));
                ops.push(json!({ "op": "add", "path": at, "value": without_nulls(value) }));
            }
            (scalar_or_array, _) => {
                // `add` creates or replaces a member.
                ops.push(json!({ "op": "add", "path": at, "value": scalar_or_array }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies a JSON patch the way the apiserver does (json-patch's semantics, with a `test` of
    /// `null` passing on a missing member as in the apiserver's library).
    fn apply_ops(doc: &Value, patch: &Patch<Value>) -> Option<Value> {
        let Patch::Json(ops) = patch else {
            panic!("expected a JSON patch")
        };
        let mut doc = doc.clone();
        for op in &ops.0 {
            match op {
                json_patch::PatchOperation::Test(t)
                    if t.value.is_null() && doc.pointer(t.path.as_str()).is_none() => {}
                other => {
                    json_patch::patch(&mut doc, std::slice::from_ref(other)).ok()?;
                }
            }
        }
        Some(doc)
    }

    fn merged(doc: &Value, merge: &Value) -> Value {
        let mut doc = doc.clone();
        json_patch::merge(&mut doc, merge);
        doc
    }

    #[test]
    fn a_merge_patch_should_become_an_equivalent_uid_guarded_json_patch() {
        let object = json!({
            "metadata": { "name": "a", "uid": "u1" },
            "status": { "observed": 1, "phase": "Old", "conditions": [{ "type": "Ready" }],
                        "nested": { "keep": true, "drop": 1 }, "scalar": "x" },
        });
        let merge = json!({ "status": {
            "observed": 2, "phase": null, "absent": null, "conditions": [],
            "nested": { "drop": null, "new": { "a": 1, "b": null } },
            "scalar": { "now": "object" }, "fresh": { "x": 1 },
            "odd/key~": 3,
        }});
        let guarded = guard(&Patch::Merge(&merge), "u1", None, || Ok(object.clone())).unwrap();
        assert_eq!(apply_ops(&object, &guarded), Some(merged(&object, &merge)));
        // Another object under the same name: the patch fails instead of landing on it.
        let mut recreated = object.clone();
        recreated["metadata"]["uid"] = json!("u2");
        assert_eq!(apply_ops(&recreated, &guarded), None);
    }

    #[test]
    fn a_merge_patch_from_a_stale_copy_should_fail_rather_than_differ_from_a_merge() {
        let cached = json!({ "metadata": { "uid": "u1" } });
        // On the server, status exists already; the cache did not know.
        let live = json!({ "metadata": { "uid": "u1" }, "status": { "other": 1 } });
        let merge = json!({ "status": { "observed": 2 } });
        let guarded = guard(&Patch::Merge(&merge), "u1", None, || Ok(cached.clone())).unwrap();
        assert_eq!(apply_ops(&live, &guarded), None);
        assert_eq!(apply_ops(&cached, &guarded), Some(merged(&cached, &merge)));
    }

    #[test]
    fn json_and_apply_patches_should_carry_the_uid() {
        let ops: json_patch::Patch = serde_json::from_value(json!([
            { "op": "replace", "path": "/status/observed", "value": 3 }
        ]))
        .unwrap();
        let Patch::Json(guarded) =
            guard(&Patch::Json::<()>(ops), "u1", None, || panic!("not needed")).unwrap()
        else {
            panic!()
        };
        assert_eq!(guarded.0.len(), 2);
        let Patch::Apply(body) = guard(
            &Patch::Apply(json!({ "status": {} })),
            "u1",
            Some("42"),
            || panic!("not needed"),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(body["metadata"]["uid"], "u1");
        assert_eq!(body["metadata"]["resourceVersion"], "42");
    }
}
