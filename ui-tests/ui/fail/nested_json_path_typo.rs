use kubeforge::custom_resource;

#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub host: String,
}

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    printcolumn(name = "Host", json_path = ".spec.endpoints[0].hots", type = "string"))]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub endpoints: Vec<Endpoint>,
}

fn main() {}
