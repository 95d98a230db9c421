#[kubeforge::schema(rules(cel = "self.a > 0"))]
#[derive(Clone, Debug)]
pub struct Part {
    pub a: i32,
}

fn main() {}
