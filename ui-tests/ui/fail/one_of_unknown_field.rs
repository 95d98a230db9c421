use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    exactly_one_of = ["git", "imag"])]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub git: Option<String>,
    pub image: Option<String>,
}

fn main() {}
