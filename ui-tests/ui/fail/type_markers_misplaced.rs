//! Markers on a type that do not fit what the type is.

#[kubeforge::schema]
#[validate(min_length = 2, max_items = 1)]
#[derive(Clone, Debug)]
pub struct Port(pub i32);

#[kubeforge::schema]
#[validate(pattern = "^a", min_properties = 1, required)]
#[derive(Clone, Debug)]
pub struct Pair {
    pub a: String,
}

#[kubeforge::schema]
#[validate(enum = ["a"], min_properties = 1)]
#[derive(Clone, Debug)]
pub enum Mode {
    A,
}

fn main() {}
