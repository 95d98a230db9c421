// `webhooks(validate, default)` names traits the kind does not implement: each is reported at
// its key.
#[kubeforge::custom_resource(
    group = "demo.example.com",
    version = "v1",
    kind = "Site",
    namespaced,
    webhooks(validate, default)
)]
#[derive(Clone, Debug)]
pub struct SiteSpec {
    pub image: String,
}

fn main() {}
