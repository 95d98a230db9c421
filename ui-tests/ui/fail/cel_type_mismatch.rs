use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    rule(cel = "self.name == 1", message = "name"))]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    #[validate(max_length = 63)]
    pub name: String,
    #[validate(rule(cel = "self + 0.5 > 1.0"))]
    pub replicas: i32,
}

fn main() {}
