use kubeforge::custom_resource;

#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct ThingStatus {
    pub replicas: String,
}

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    status = ThingStatus, scale(spec = ".spec.replicas", status = ".status.replicas"))]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub replicas: i32,
}

fn main() {}
