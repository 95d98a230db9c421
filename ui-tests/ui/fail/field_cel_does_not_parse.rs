use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    #[validate(rule(cel = "self.all(x, x > 0", message = "positive"))]
    pub sizes: Vec<i32>,
}

fn main() {}
