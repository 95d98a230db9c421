//! The conversion a merged CRD needs: versions of one kind whose schemas differ in shape cannot
//! be converted by the apiserver (`strategy: None` only rewrites `apiVersion`, dropping what the
//! other version does not have), so such a CRD always carries a webhook conversion. Until an
//! operator points it at its webhook (the running manager does, `crdgen` prints its Service),
//! it points at a Service that does not exist, named for what is missing
//! (`default/conversion-webhook-not-configured`): every request that needs a conversion fails
//! loudly, none is stored with fields dropped. (A Service, not a URL: applying `crdgen`'s CRD,
//! which names the operator's Service, over it then replaces it; the apiserver refuses a CRD
//! whose conversion has both.)

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};
use serde_json::Value;

/// The namespace and name of the Service the conversion of a CRD no operator has configured yet
/// points at: it does not exist, and the apiserver's error names it, so it says what is missing.
pub const UNCONFIGURED_SERVICE: (&str, &str) = ("default", "conversion-webhook-not-configured");

/// Whether `config` is the endpoint of [`unconfigured`].
#[must_use]
pub fn is_unconfigured(config: &WebhookClientConfig) -> bool {
    config
        .service
        .as_ref()
        .is_some_and(|s| (s.namespace.as_str(), s.name.as_str()) == UNCONFIGURED_SERVICE)
}

/// Whether the versions of `crd` differ in shape (their schemas without descriptions).
#[must_use]
pub fn versions_differ(crd: &CustomResourceDefinition) -> bool {
    let mut shapes = crd.spec.versions.iter().map(|v| {
        let mut schema = serde_json::to_value(&v.schema).unwrap_or(Value::Null);
        strip_descriptions(&mut schema);
        schema
    });
    let Some(first) = shapes.next() else {
        return false;
    };
    shapes.any(|s| s != first)
}

/// `spec.conversion` of a CRD whose versions convert through a webhook at `client_config`.
#[must_use]
pub fn webhook_conversion(client_config: WebhookClientConfig) -> CustomResourceConversion {
    CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            client_config: Some(client_config),
            conversion_review_versions: vec!["v1".to_owned()],
        }),
    }
}

/// A merge patch of a CRD that sets its `spec.conversion` to `conversion`, replacing whichever
/// endpoint the CRD had: the one `conversion` does not name (`url` or `service`) is set to
/// `null`, since the apiserver refuses a conversion with both. A `caBundle` the CRD has is kept
/// when `conversion` brings none (a CA injector may own it). `None` patches nothing but
/// `spec.conversion: null`, which the apiserver defaults to `strategy: None`: only tests call it
/// so, for CRDs whose versions share one shape.
#[must_use]
pub fn replacing_patch(conversion: Option<&CustomResourceConversion>) -> Value {
    let mut conversion = serde_json::to_value(conversion).unwrap_or(Value::Null);
    if let Some(config) = conversion
        .pointer_mut("/webhook/clientConfig")
        .and_then(Value::as_object_mut)
    {
        for endpoint in ["url", "service"] {
            config.entry(endpoint).or_insert(Value::Null);
        }
    }
    serde_json::json!({ "spec": { "conversion": conversion } })
}

/// The conversion of a CRD no operator has configured: a webhook at a Service that does not
/// exist ([`UNCONFIGURED_SERVICE`]).
#[must_use]
pub fn unconfigured(crd: &CustomResourceDefinition) -> CustomResourceConversion {
    webhook_conversion(WebhookClientConfig {
        service: Some(ServiceReference {
            namespace: UNCONFIGURED_SERVICE.0.to_owned(),
            name: UNCONFIGURED_SERVICE.1.to_owned(),
            path: Some(format!(
                "/convert/{}/{}",
                crd.spec.group, crd.spec.names.plural
            )),
            port: Some(443),
        }),
        ..WebhookClientConfig::default()
    })
}

/// Sets the unconfigured webhook conversion on `crd` when its versions differ in shape and it
/// has no conversion yet.
pub(crate) fn require_conversion(crd: &mut CustomResourceDefinition) {
    if crd.spec.conversion.is_none() && versions_differ(crd) {
        crd.spec.conversion = Some(unconfigured(crd));
    }
}

fn strip_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("description");
            map.values_mut().for_each(strip_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
    };

    use super::*;

    fn version(name: &str, field: &str, description: &str) -> CustomResourceDefinitionVersion {
        let schema: JSONSchemaProps = serde_json::from_value(serde_json::json!({
            "type": "object",
            "description": description,
            "properties": { field: { "type": "string", "description": description } },
        }))
        .unwrap();
        CustomResourceDefinitionVersion {
            name: name.into(),
            served: true,
            storage: name == "v1",
            schema: Some(CustomResourceValidation {
                open_api_v3_schema: Some(schema),
            }),
            ..CustomResourceDefinitionVersion::default()
        }
    }

    #[test]
    fn the_replacing_patch_should_null_the_other_endpoint_and_keep_the_ca_bundle() {
        let at_url = webhook_conversion(WebhookClientConfig {
            url: Some("https://127.0.0.1:9443/convert".into()),
            ..WebhookClientConfig::default()
        });
        let patch = replacing_patch(Some(&at_url));
        let config = &patch["spec"]["conversion"]["webhook"]["clientConfig"];
        assert_eq!(config["url"], "https://127.0.0.1:9443/convert");
        assert!(config["service"].is_null() && config.get("service").is_some());
        assert!(config.get("caBundle").is_none(), "{patch}");
        let crd = CustomResourceDefinition::default();
        let patch = replacing_patch(Some(&unconfigured(&crd)));
        let config = &patch["spec"]["conversion"]["webhook"]["clientConfig"];
        assert!(config["url"].is_null() && config.get("url").is_some());
        assert_eq!(config["service"]["name"], UNCONFIGURED_SERVICE.1);
        assert_eq!(
            replacing_patch(None),
            serde_json::json!({ "spec": { "conversion": null } })
        );
    }

    #[test]
    fn versions_of_different_shapes_should_require_a_webhook_conversion() {
        let mut crd = CustomResourceDefinition::default();
        crd.spec.group = "t.kubeforge.dev".into();
        crd.spec.names.plural = "things".into();
        crd.spec.versions = vec![version("v2", "a", "new docs"), version("v1", "a", "old")];
        require_conversion(&mut crd);
        assert_eq!(crd.spec.conversion, None, "descriptions are not a shape");
        crd.spec.versions[0] = version("v2", "b", "");
        require_conversion(&mut crd);
        let conversion = crd.spec.conversion.unwrap();
        assert_eq!(conversion.strategy, "Webhook");
        let config = conversion.webhook.unwrap().client_config.unwrap();
        assert!(is_unconfigured(&config), "{config:?}");
        assert_eq!(
            config.service.unwrap().path.as_deref(),
            Some("/convert/t.kubeforge.dev/things")
        );
    }
}
