use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    #[validate(default = "three")]
    pub size: Option<i32>,
    #[validate(enum = ["a", 2])]
    pub mode: Option<String>,
}

fn main() {}
