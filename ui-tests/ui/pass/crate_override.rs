//! `crate = "..."`: generated code reaches kubeforge through another path.
use ::kubeforge as kf;

#[kf::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Renamed", namespaced, crate = "kf")]
#[derive(Clone, Debug)]
pub struct RenamedSpec {
    #[validate(minimum = 1)]
    pub size: i32,
}

#[kf::schema(crate = "kf")]
#[derive(Clone, Debug)]
pub struct Part {
    #[validate(max_length = 3)]
    pub name: String,
}

fn main() {
    use kf::crd::Validate;
    assert!(Renamed::new("r", RenamedSpec { size: 0 }).validate().is_err());
    assert!(Part { name: "four".into() }.validate().is_err());
}
