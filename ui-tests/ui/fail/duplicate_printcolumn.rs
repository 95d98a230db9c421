use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    printcolumn(name = "Size", json_path = ".spec.size", type = "integer"),
    printcolumn(name = "Size", json_path = ".spec.size", type = "integer", priority = 1))]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub size: i32,
}

fn main() {}
