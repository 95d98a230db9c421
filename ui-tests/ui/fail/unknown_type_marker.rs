#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Flags {
    #[validate(type = "str")]
    pub enabled: bool,
}

fn main() {}
