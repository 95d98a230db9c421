use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    rule(cel = "self.name.startWith('app-')"))]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    #[validate(max_length = 63)]
    pub name: String,
    #[validate(max_items = 8, rule(cel = "sets.contain(self, ['a'])"))]
    pub zones: Vec<String>,
}

fn main() {}
