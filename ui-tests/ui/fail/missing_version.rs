use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", kind = "Thing", namespaced)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub size: i32,
}

fn main() {}
