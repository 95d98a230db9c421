#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Source {
    #[validate(exactly_one_of = ["git", "image"])]
    pub git: Option<String>,
    pub image: Option<String>,
}

fn main() {}
