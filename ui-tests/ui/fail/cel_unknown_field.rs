use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    rule(cel = "self.minReplicas <= self.replicas", message = "min <= replicas"))]
#[derive(Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ThingSpec {
    pub min_replica: i32,
    pub replicas: i32,
}

#[kubeforge::schema(rule(cel = "self.low <= self.hihg"))]
#[derive(Clone, Debug)]
pub struct Range {
    pub low: i32,
    pub high: i32,
}

fn main() {}
