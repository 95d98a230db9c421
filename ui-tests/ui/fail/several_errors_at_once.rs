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
    // The root type is still generated: no "cannot find type `Thing`" cascade.
    let thing = Thing::new("t", ThingSpec { size: 1, name: String::new() });
    let _ = (thing.clone(), Thing::crd());
}
