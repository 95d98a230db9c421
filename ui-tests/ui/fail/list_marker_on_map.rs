use std::collections::BTreeMap;

use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    #[validate(max_items = 3)]
    pub labels: BTreeMap<String, String>,
}

fn main() {}
