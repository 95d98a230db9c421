//! The WebApp kind with `#[custom_resource]`: the same schema as the kube-derive crate's. The
//! build benchmark touches this file for its incremental builds.

use std::collections::BTreeMap;

use kubeforge::crd::Conditions;

/// The desired state of a web application.
#[kubeforge::custom_resource(
    group = "apps.kubeforge.dev",
    version = "v1",
    kind = "WebApp",
    namespaced,
    status = WebAppStatus,
    shortname = "wa",
    category = "all",
    printcolumn(name = "Image", json_path = ".spec.image", type = "string"),
    printcolumn(name = "Replicas", json_path = ".spec.replicas", type = "integer"),
    printcolumn(name = "Ready", json_path = ".status.readyReplicas", type = "integer"),
    printcolumn(name = "Age", json_path = ".metadata.creationTimestamp", type = "date"),
    printcolumn(name = "Port", json_path = ".spec.port", type = "integer", priority = 1,
        description = "The container port"),
    scale(spec = ".spec.replicas", status = ".status.replicas", selector = ".status.selector"),
    rule(cel = "!has(self.minReplicas) || self.minReplicas <= self.replicas",
        message = "minReplicas must not exceed replicas", field_path = ".minReplicas"),
)]
#[derive(Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebAppSpec {
    /// Container image, e.g. `registry.example.com/shop:1.4`.
    #[validate(min_length = 1, pattern = r"^[a-z0-9][a-z0-9._/:@-]*$")]
    pub image: String,
    /// Number of pods.
    #[validate(minimum = 0, maximum = 100)]
    pub replicas: i32,
    /// Lower bound for autoscalers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(minimum = 0)]
    pub min_replicas: Option<i32>,
    /// The port the container listens on.
    #[serde(default = "default_port")]
    #[validate(minimum = 1, maximum = 65535)]
    pub port: i32,
    /// Environment variables of the container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[validate(max_items = 64)]
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
#[kubeforge::schema]
#[derive(Clone, Debug, PartialEq)]
pub struct EnvVar {
    /// Variable name.
    #[validate(min_length = 1, pattern = "^[A-Za-z_][A-Za-z0-9_]*$")]
    pub name: String,
    /// Variable value.
    #[serde(default)]
    pub value: String,
}

/// How a web application is reachable.
#[kubeforge::schema]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
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
    #[serde(default)]
    pub conditions: Conditions,
}
