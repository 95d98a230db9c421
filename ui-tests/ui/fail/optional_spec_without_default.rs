#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    optional_spec)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub size: Option<i32>,
}

fn main() {}
