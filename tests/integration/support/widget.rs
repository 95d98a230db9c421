//! The `Widget` test kind (a CRD with a status subresource) most controller tests use.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::json;

pub const GROUP: &str = "ctrl-test.kubeforge.dev";

/// How long a controller's queue must stay empty before a test takes it as settled.
pub const QUIET: Duration = Duration::from_millis(300);

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Widget {
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: WidgetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<WidgetStatus>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WidgetSpec {
    pub value: i64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WidgetStatus {
    #[serde(default)]
    pub observed: i64,
}

crate::test_resource!(Widget, group = GROUP, kind = "Widget", plural = "widgets");

pub fn widget(name: &str, value: i64) -> Widget {
    Widget {
        api_version: format!("{GROUP}/v1"),
        kind: "Widget".into(),
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: WidgetSpec { value },
        status: None,
    }
}

pub fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": { "name": format!("widgets.{GROUP}") },
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": { "type": "object", "properties": { "value": { "type": "integer" } } },
                        "status": { "type": "object", "properties": {
                            "observed": { "type": "integer" },
                            // Written by other writers in fault tests (not by the controller).
                            "noise": { "type": "integer" },
                        } },
                    }
                }}
            }]
        }
    }))
    .unwrap()
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct TestError(#[from] kube::Error);
