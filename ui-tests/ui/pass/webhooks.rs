// The trait impls alone wire the webhooks; `webhooks(..)` names them and sets their settings.
use kubeforge::webhook::{AdmissionContext, Defaulter, Validator, Verdict};

#[kubeforge::custom_resource(group = "demo.example.com", version = "v1", kind = "Site", namespaced)]
#[derive(Clone, Debug)]
pub struct SiteSpec {
    pub image: String,
}

impl Validator for Site {
    async fn validate_create(&self, _: &AdmissionContext) -> Verdict {
        Verdict::allow()
    }
}

#[kubeforge::custom_resource(
    group = "demo.example.com",
    version = "v1",
    kind = "Shop",
    namespaced,
    webhooks(
        validate,
        default,
        failure_policy = "Ignore",
        side_effects = "NoneOnDryRun",
        timeout_seconds = 5
    )
)]
#[derive(Clone, Debug)]
pub struct ShopSpec {
    pub image: String,
}

impl Validator for Shop {}

impl Defaulter for Shop {
    async fn apply_defaults(&mut self, _: &AdmissionContext) -> Verdict {
        self.spec.image.push_str(":latest");
        Verdict::allow()
    }
}

#[kubeforge::custom_resource(
    group = "demo.example.com",
    version = "v1",
    kind = "Plain",
    namespaced
)]
#[derive(Clone, Debug)]
pub struct PlainSpec {
    pub image: String,
}

pub fn main() {
    let kinds = kubeforge::webhook::registered();
    let names: Vec<_> = kinds
        .iter()
        .map(|k| (k.kind, format!("{:?}", k.hooks)))
        .collect();
    assert_eq!(
        names,
        [
            ("Shop", "Hooks { validate: true, default: true }".to_owned()),
            (
                "Site",
                "Hooks { validate: true, default: false }".to_owned()
            ),
        ],
        "Plain has no webhook"
    );
    assert_eq!(kinds[0].settings.failure_policy, "Ignore");
    assert_eq!(kinds[0].settings.timeout_seconds, 5);
    assert_eq!(kinds[1].settings, kubeforge::webhook::Settings::default());
}
