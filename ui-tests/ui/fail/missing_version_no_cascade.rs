use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", kind = "Thing", namespaced)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub size: i32,
}

fn main() {
    // Only the missing key is reported, not every use of `Thing`.
    let _ = Thing::new("t", ThingSpec { size: 1 });
}
