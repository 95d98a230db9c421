use kubeforge::custom_resource;

// A root rule sees `name` and `generateName` of `metadata`, and `status` only on a kind with one.
#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Pool", namespaced,
    root_rule(cel = "self.metadata.labels['team'] != ''"),
    root_rule(cel = "!has(self.status) || self.status.replicas <= self.spec.replicas"))]
#[derive(Clone, Debug)]
pub struct PoolSpec {
    pub replicas: i32,
}

fn main() {}
