use std::collections::BTreeMap;

#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Port {
    pub number: i32,
}

#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Svc", namespaced,
    printcolumn(name = "Main", json_path = ".spec.named.main.numbr", type = "integer"))]
#[derive(Clone, Debug)]
pub struct SvcSpec {
    pub named: BTreeMap<String, Port>,
}

fn main() {}
