use kubeforge::custom_resource;

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ThingStatus {
    pub ready: bool,
}

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced, status = ThingStatus)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub size: i32,
}

fn main() {}
