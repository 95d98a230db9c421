#[kubeforge::schema]
#[derive(Clone, Debug)]
pub enum Size {
    Fixed(#[validate(minimum = 1)] i32),
    Auto,
}

fn main() {}
