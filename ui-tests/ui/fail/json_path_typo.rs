use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    printcolumn(name = "Replicas", json_path = ".spec.replicsa", type = "integer"))]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub replicas: i32,
}

fn main() {}
