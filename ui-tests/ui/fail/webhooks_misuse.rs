// An unknown key in `webhooks(..)`, a failure policy and side effects the apiserver does not
// know, a timeout outside 1..=30.
#[kubeforge::custom_resource(
    group = "demo.example.com",
    version = "v1",
    kind = "Site",
    namespaced,
    webhooks(validat, failure_policy = "Retry", side_effects = "Some", timeout_seconds = 60)
)]
#[derive(Clone, Debug)]
pub struct SiteSpec {
    pub image: String,
}

fn main() {}
