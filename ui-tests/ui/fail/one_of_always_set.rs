#[kubeforge::schema(at_most_one_of = ["cpu", "gpu"])]
#[derive(Clone, Debug)]
pub struct Limits {
    pub cpu: String,
    pub gpu: Option<String>,
}

fn main() {}
