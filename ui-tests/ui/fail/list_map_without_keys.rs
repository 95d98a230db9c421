use kubeforge::custom_resource;

#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Port {
    pub name: String,
}

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    #[validate(list_type = "map")]
    pub ports: Vec<Port>,
}

fn main() {}
