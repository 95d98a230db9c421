use std::collections::BTreeMap;

use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    #[validate(items(max_length = 3))]
    pub name: String,
    #[validate(items(minimum = 1, min_items = 2))]
    pub names: Vec<String>,
    #[validate(values(nullable, rule(cel = "self.size() > 1")))]
    pub counts: BTreeMap<String, i32>,
    #[validate(items(default = "x"))]
    pub hosts: Vec<String>,
}

fn main() {}
