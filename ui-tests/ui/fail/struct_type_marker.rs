#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Inner {
    pub a: i32,
}

#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Outer {
    #[validate(struct_type = "atomic")]
    pub inner: Inner,
}

fn main() {}
