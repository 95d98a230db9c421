// The registration options of `webhooks(..)`: `DELETE` is not an operation to list (deletes are
// validated by implementing `DeleteValidator`), policies the apiserver does not know, a
// `metadata_updates` that is neither `Skip` nor `Send`, selectors
// that do not parse, and `validate_delete` without its impl.
#[kubeforge::custom_resource(
    group = "demo.example.com",
    version = "v1",
    kind = "Site",
    namespaced,
    webhooks(
        validate_delete,
        operations = ["CREATE", "DELETE"],
        match_policy = "Fuzzy",
        reinvocation_policy = "Always",
        metadata_updates = "Ignore",
        namespace_selector = "env in prod",
        object_selector = "tier=front end"
    )
)]
#[derive(Clone, Debug)]
pub struct SiteSpec {
    pub image: String,
}

fn main() {}
