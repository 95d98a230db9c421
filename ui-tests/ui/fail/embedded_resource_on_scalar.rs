use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    #[validate(embedded_resource)]
    pub template: String,
    #[validate(embedded_resource)]
    pub templates: Vec<kubeforge::serde_json::Value>,
}

fn main() {}
