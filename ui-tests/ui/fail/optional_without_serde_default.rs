#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Settings {
    #[validate(optional)]
    pub retries: i32,
}

fn main() {}
