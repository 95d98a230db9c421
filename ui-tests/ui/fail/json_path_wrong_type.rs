use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    printcolumn(name = "Image", json_path = ".spec.image", type = "integer"))]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub image: String,
}

fn main() {}
