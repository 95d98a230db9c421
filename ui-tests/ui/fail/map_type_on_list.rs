#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Selector {
    #[validate(map_type = "atomic")]
    pub terms: Vec<String>,
}

fn main() {}
