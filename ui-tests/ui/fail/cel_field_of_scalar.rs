#[kubeforge::schema(rule(cel = "self.replicas.min <= self.max"))]
#[derive(Clone, Debug)]
pub struct Scaling {
    pub replicas: i32,
    pub max: i32,
    #[validate(max_items = 8, rule(cel = "has(self.first)"))]
    pub zones: Vec<String>,
}

fn main() {}
