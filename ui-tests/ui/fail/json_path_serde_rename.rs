use kubeforge::custom_resource;

// JSONPaths use the JSON names: `min_replicas` is `minReplicas` in JSON.
#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    selectable_field(json_path = ".spec.min_replicas"))]
#[derive(Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ThingSpec {
    pub min_replicas: i32,
}

fn main() {}
