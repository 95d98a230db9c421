use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    #[validate(exclusive_minimum)]
    pub size: f64,
}

fn main() {}
