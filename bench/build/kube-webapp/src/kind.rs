//! The WebApp kind with kube-derive and schemars: the same schema as the kubeforge crate's
//! (markers, status and scale subresources, printer columns, a CEL rule), spelled as kube-rs
//! users spell it. The build benchmark touches this file for its incremental builds.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of a web application.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "apps.kubeforge.dev",
    version = "v1",
    kind = "WebApp",
    namespaced,
    status = "WebAppStatus",
    shortname = "wa",
    category = "all",
    printcolumn(name = "Image", type_ = "string", json_path = ".spec.image"),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Port",
        type_ = "integer",
        json_path = ".spec.port",
        priority = "1",
        description = "The container port"
    ),
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    )
)]
#[x_kube(validation = Rule::new("!has(self.minReplicas) || self.minReplicas <= self.replicas")
    .message("minReplicas must not exceed replicas")
    .field_path(".minReplicas"))]
#[serde(rename_all = "camelCase")]
pub struct WebAppSpec {
    /// Container image, e.g. `registry.example.com/shop:1.4`.
    #[schemars(length(min = 1), regex(pattern = r"^[a-z0-9][a-z0-9._/:@-]*$"))]
    pub image: String,
    /// Number of pods.
    #[schemars(range(min = 0, max = 100))]
    pub replicas: i32,
    /// Lower bound for autoscalers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_replicas: Option<i32>,
    /// The port the container listens on.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Environment variables of the container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub env: Vec<EnvVar>,
    /// How the application is exposed.
    #[serde(default)]
    pub exposure: Exposure,
    /// Extra labels for the pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_labels: BTreeMap<String, String>,
}

fn default_port() -> i32 {
    8080
}

/// One environment variable.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
pub struct EnvVar {
    /// Variable name.
    #[schemars(length(min = 1), regex(pattern = "^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub name: String,
    /// Variable value.
    #[serde(default)]
    pub value: String,
}

/// How a web application is reachable.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Exposure {
    /// Only inside the cluster (a ClusterIP Service).
    #[default]
    Internal,
    /// On every node's port (a NodePort Service).
    NodePort,
    /// Through a cloud load balancer.
    LoadBalancer,
}

/// The observed state of a web application.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebAppStatus {
    /// Pods created.
    #[serde(default)]
    pub replicas: i32,
    /// Pods ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Label selector of the pods, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The generation last acted upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
}
