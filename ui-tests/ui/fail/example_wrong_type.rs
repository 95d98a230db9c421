#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Settings {
    #[validate(example = "three")]
    pub retries: i32,
}

fn main() {}
