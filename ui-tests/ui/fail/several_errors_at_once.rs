use kubeforge::custom_resource;

// Every mistake is reported in one build, and the struct is still emitted (no cascade).
#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced, categroy = "all")]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    #[validate(max_length = 3)]
    pub size: i32,
    #[validate(pattern = "(")]
    pub name: String,
}

fn main() {
    let spec = ThingSpec { size: 1, name: String::new() };
    let _ = spec.clone();
}
