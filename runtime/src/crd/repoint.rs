//! Pointing a CRD's conversion at an operator's webhook without breaking the next
//! `kubectl apply` of the CRD's manifest.
//!
//! `crdgen` prints a CRD whose conversion names the operator's Service; an operator run locally
//! points it at a `url` instead. A merge patch alone leaves the object in a state the manifest
//! can no longer be applied over: the apiserver refuses a client config with both `url` and
//! `service`, and neither kind of apply removes a field its applier never set —
//!
//! - client-side apply deletes only what its `kubectl.kubernetes.io/last-applied-configuration`
//!   annotation names, and the annotation still has the Service;
//! - server-side apply removes only fields its manager owns, and the `url` belongs to whoever
//!   patched it.
//!
//! So [`repoint`] writes the endpoint as if the last apply had written it: it rewrites the
//! endpoint in the last-applied annotation (when the object has one), and hands the ownership of
//! the new endpoint to the apply managers that owned the old one. Applying the manifest again
//! then replaces the endpoint, whichever kind of apply it is; a running operator, which watches
//! its CRDs, points it back at itself at once.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, WebhookClientConfig,
};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Map, Value, json};

/// The annotation client-side apply (`kubectl apply` without `--server-side`) keeps the last
/// applied configuration in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The field manager of the writes [`repoint`] makes.
pub const FIELD_MANAGER: &str = "kubeforge-webhooks";

/// The path of the client config in a CRD, as JSON keys.
const CLIENT_CONFIG: [&str; 4] = ["spec", "conversion", "webhook", "clientConfig"];

/// The two endpoints a client config may name, exactly one at a time.
const ENDPOINTS: [&str; 2] = ["url", "service"];

/// Whether `live` converts as `wanted` says: a webhook conversion at the same endpoint, with
/// `wanted`'s CA bundle when it has one, reviewing `v1`.
#[must_use]
pub fn converts_as(live: &CustomResourceDefinition, wanted: &CustomResourceConversion) -> bool {
    let Some(live) = live.spec.conversion.as_ref() else {
        return false;
    };
    let config = |c: &CustomResourceConversion| {
        c.webhook
            .as_ref()
            .and_then(|w| w.client_config.clone())
            .unwrap_or_default()
    };
    let reviews_v1 = live
        .webhook
        .as_ref()
        .is_some_and(|w| w.conversion_review_versions.iter().any(|v| v == "v1"));
    let (have, want) = (config(live), config(wanted));
    live.strategy == wanted.strategy
        && reviews_v1
        && same_endpoint(&have, &want)
        && (want.ca_bundle.is_none() || have.ca_bundle == want.ca_bundle)
}

/// Whether two client configs name the same endpoint (their CA bundles aside).
#[must_use]
pub fn same_endpoint(a: &WebhookClientConfig, b: &WebhookClientConfig) -> bool {
    a.url == b.url && a.service == b.service
}

/// Points the conversion of the CRD `name` at `wanted` unless it already converts so (see the
/// module); returns whether it wrote. The writes are conditional on the version read: a
/// concurrent change makes them fail with `409` and the caller tries again.
///
/// # Errors
///
/// The apiserver refused or could not be reached.
pub async fn repoint(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    wanted: &CustomResourceConversion,
) -> kube::Result<bool> {
    let live = api.get(name).await?;
    if converts_as(&live, wanted) {
        return Ok(false);
    }
    let managed = serde_json::to_value(&live.metadata.managed_fields).unwrap_or(Value::Null);
    let owners = endpoint_appliers(&managed);
    let endpoint = endpoint_of(wanted);
    let mut metadata = precondition(&live);
    if let Some(last) = live
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(|text| with_endpoint(text, &endpoint))
    {
        metadata.insert("annotations".to_owned(), json!({ LAST_APPLIED: last }));
    }
    let mut patch = super::conversion::replacing_patch(Some(wanted));
    if let Some(root) = patch.as_object_mut() {
        root.insert("metadata".to_owned(), Value::Object(metadata));
    }
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let written = api.patch(name, &params, &Patch::Merge(patch)).await?;
    if owners.is_empty() {
        return Ok(true);
    }
    // The managed fields are written apart: in the write that changes the endpoint the
    // apiserver gives the changed fields to that write's manager, whatever the request says.
    let mut managed = serde_json::to_value(&written.metadata.managed_fields).unwrap_or(Value::Null);
    hand_over(&mut managed, &owners, &endpoint);
    let mut metadata = precondition(&written);
    metadata.insert("managedFields".to_owned(), managed);
    let patch = json!({ "metadata": metadata });
    api.patch(name, &params, &Patch::Merge(patch)).await?;
    Ok(true)
}

/// A patch's `metadata` with `obj`'s resource version: the precondition of the write.
fn precondition(obj: &CustomResourceDefinition) -> Map<String, Value> {
    let mut metadata = Map::new();
    if let Some(version) = &obj.metadata.resource_version {
        metadata.insert("resourceVersion".to_owned(), version.clone().into());
    }
    metadata
}

/// The endpoint of `conversion`'s client config as JSON: `{"url": ..}` or `{"service": ..}`.
fn endpoint_of(conversion: &CustomResourceConversion) -> Map<String, Value> {
    let config = conversion
        .webhook
        .as_ref()
        .and_then(|w| w.client_config.clone())
        .unwrap_or_default();
    let mut config = match serde_json::to_value(config) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    config.retain(|k, _| ENDPOINTS.contains(&k.as_str()));
    config
}

/// The last-applied configuration `text` with its client config's endpoint replaced by
/// `endpoint`; `None` when it has no client config (the apply never set one, so it removes
/// none) or is not JSON.
fn with_endpoint(text: &str, endpoint: &Map<String, Value>) -> Option<String> {
    let mut applied: Value = serde_json::from_str(text).ok()?;
    let config = CLIENT_CONFIG
        .iter()
        .try_fold(&mut applied, |v, k| v.get_mut(*k))?
        .as_object_mut()?;
    config.retain(|k, _| !ENDPOINTS.contains(&k.as_str()));
    config.extend(endpoint.clone());
    serde_json::to_string(&applied).ok()
}

/// The managers of server-side applies that own an endpoint of the client config in
/// `managed` (the object's `metadata.managedFields`).
fn endpoint_appliers(managed: &Value) -> Vec<String> {
    let entries = managed.as_array().map(Vec::as_slice).unwrap_or_default();
    entries
        .iter()
        .filter(|e| e["operation"] == "Apply" && e.get("subresource").is_none_or(Value::is_null))
        .filter(|e| {
            client_config_fields(&e["fieldsV1"])
                .is_some_and(|c| ENDPOINTS.iter().any(|k| c.contains_key(&format!("f:{k}"))))
        })
        .filter_map(|e| e["manager"].as_str().map(str::to_owned))
        .collect()
}

/// The field set of the client config in a `fieldsV1` set.
fn client_config_fields(fields: &Value) -> Option<&Map<String, Value>> {
    CLIENT_CONFIG
        .iter()
        .try_fold(fields, |v, k| v.get(format!("f:{k}")))?
        .as_object()
}

/// Gives the fields of `endpoint` to the apply managers `owners` in `managed` and takes them
/// from every other entry.
fn hand_over(managed: &mut Value, owners: &[String], endpoint: &Map<String, Value>) {
    let Some(entries) = managed.as_array_mut() else {
        return;
    };
    let owned = field_set(endpoint);
    for entry in entries {
        let is_owner = entry["operation"] == "Apply"
            && entry["manager"]
                .as_str()
                .is_some_and(|m| owners.iter().any(|o| o == m));
        let Some(config) = entry
            .get_mut("fieldsV1")
            .and_then(|fields| path_mut(fields, &CLIENT_CONFIG, is_owner))
        else {
            continue;
        };
        for key in ENDPOINTS {
            config.remove(&format!("f:{key}"));
        }
        if is_owner {
            config.extend(owned.clone());
        }
    }
}

/// The field set at `path` (JSON keys) in the `fieldsV1` set `fields`; with `create`, the
/// missing sets on the way are created, each owning its map (`.`).
fn path_mut<'a>(
    fields: &'a mut Value,
    path: &[&str],
    create: bool,
) -> Option<&'a mut Map<String, Value>> {
    let map = fields.as_object_mut()?;
    let Some((first, rest)) = path.split_first() else {
        return Some(map);
    };
    let key = format!("f:{first}");
    let next = if create {
        map.entry(key).or_insert_with(|| json!({ ".": {} }))
    } else {
        map.get_mut(&key)?
    };
    path_mut(next, rest, create)
}

/// The `fieldsV1` form of the fields of `object`: `f:<key>` for each, a map's own `.`.
fn field_set(object: &Map<String, Value>) -> Map<String, Value> {
    object
        .iter()
        .map(|(k, v)| {
            let inner = match v {
                Value::Object(map) => {
                    let mut set = field_set(map);
                    set.insert(".".to_owned(), json!({}));
                    Value::Object(set)
                }
                _ => json!({}),
            };
            (format!("f:{k}"), inner)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> Map<String, Value> {
        json!({ "service": { "name": "shop-webhook", "namespace": "shop", "path": "/convert", "port": 443 } })
            .as_object()
            .cloned()
            .unwrap()
    }

    fn url() -> Map<String, Value> {
        json!({ "url": "https://127.0.0.1:9443/convert" })
            .as_object()
            .cloned()
            .unwrap()
    }

    fn applied(endpoint: &Map<String, Value>) -> Value {
        let mut config = endpoint.clone();
        config.insert("caBundle".to_owned(), "Q0E=".into());
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "spec": { "group": "x", "conversion": {
                "strategy": "Webhook",
                "webhook": { "clientConfig": config, "conversionReviewVersions": ["v1"] },
            } },
        })
    }

    #[test]
    fn the_last_applied_configuration_should_name_the_new_endpoint_and_keep_the_rest() {
        let text = applied(&service()).to_string();
        let out: Value = serde_json::from_str(&with_endpoint(&text, &url()).unwrap()).unwrap();
        assert_eq!(out, applied(&url()));
        // An apply that set no conversion removes none: nothing to rewrite.
        let bare = json!({ "spec": { "group": "x" } }).to_string();
        assert_eq!(with_endpoint(&bare, &url()), None);
        assert_eq!(with_endpoint("not json", &url()), None);
    }

    fn fields(endpoint: Value) -> Value {
        json!({ "f:spec": { "f:group": {}, "f:conversion": { ".": {}, "f:strategy": {}, "f:webhook": {
            ".": {}, "f:conversionReviewVersions": {},
            "f:clientConfig": endpoint,
        } } } })
    }

    #[test]
    fn only_server_side_appliers_of_an_endpoint_should_be_its_owners() {
        let owned = fields(json!({ ".": {}, "f:service": { ".": {}, "f:name": {} } }));
        let managed = json!([
            { "manager": "kubectl", "operation": "Apply", "fieldsV1": owned },
            { "manager": "kubectl-client-side-apply", "operation": "Update", "fieldsV1": owned },
            { "manager": "helm", "operation": "Apply", "fieldsV1": fields(json!({ ".": {}, "f:caBundle": {} })) },
            { "manager": "kube-apiserver", "operation": "Update", "subresource": "status", "fieldsV1": {} },
        ]);
        assert_eq!(endpoint_appliers(&managed), ["kubectl"]);
    }

    #[test]
    fn the_new_endpoint_should_belong_to_the_appliers_and_to_no_one_else() {
        // After the endpoint's write: the applier kept the rest of the client config, the
        // patch's manager owns the url and the CA bundle.
        let mut managed = json!([
            { "manager": "kubectl", "operation": "Apply", "fieldsV1": fields(json!({ ".": {} })) },
            { "manager": FIELD_MANAGER, "operation": "Update",
              "fieldsV1": fields(json!({ "f:url": {}, "f:caBundle": {} })) },
        ]);
        hand_over(&mut managed, &["kubectl".to_owned()], &url());
        assert_eq!(
            managed,
            json!([
                { "manager": "kubectl", "operation": "Apply",
                  "fieldsV1": fields(json!({ ".": {}, "f:url": {} })) },
                { "manager": FIELD_MANAGER, "operation": "Update",
                  "fieldsV1": fields(json!({ "f:caBundle": {} })) },
            ])
        );
        // Back to a Service: its fields, each owned, the url no longer.
        hand_over(&mut managed, &["kubectl".to_owned()], &service());
        let config = client_config_fields(&managed[0]["fieldsV1"]).unwrap();
        assert_eq!(
            Value::Object(config.clone()),
            json!({ ".": {}, "f:service": {
                ".": {}, "f:name": {}, "f:namespace": {}, "f:path": {}, "f:port": {},
            } })
        );
    }

    #[test]
    fn an_applier_that_lost_the_whole_client_config_should_get_the_path_back() {
        let mut managed = json!([
            { "manager": "kubectl", "operation": "Apply", "fieldsV1": { "f:spec": { "f:group": {} } } },
        ]);
        hand_over(&mut managed, &["kubectl".to_owned()], &url());
        assert_eq!(
            managed[0]["fieldsV1"]["f:spec"]["f:conversion"]["f:webhook"]["f:clientConfig"]["f:url"],
            json!({})
        );
    }
}
