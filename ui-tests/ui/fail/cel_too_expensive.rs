use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    rule(cel = "self.items.all(x, x.matches('^[a-z]+$'))"))]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub items: Vec<String>,
    #[validate(max_items = 100, items(max_length = 64), rule(cel = "self.all(x, x.matches('^[a-z]+$'))"))]
    pub bounded: Vec<String>,
    #[validate(max_items = 100, rule(cel = "self.all(row, row.all(c, c != ''))"))]
    pub matrix: Vec<Vec<String>>,
}

fn main() {}
