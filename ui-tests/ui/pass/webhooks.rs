// The trait impls alone wire the webhooks; `webhooks(..)` names them and sets their settings.
use kubeforge::webhook::{AdmissionContext, Defaulter, DeleteValidator, Validator, Verdict};

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
        validate_delete,
        failure_policy = "Ignore",
        side_effects = "NoneOnDryRun",
        timeout_seconds = 5,
        operations = ["CREATE"],
        match_policy = "Exact",
        reinvocation_policy = "Never",
        namespace_selector = "env in (prod, staging)",
        object_selector = "app=shop, !skip-validation"
    )
)]
#[derive(Clone, Debug)]
pub struct ShopSpec {
    pub image: String,
}

impl Validator for Shop {}

impl DeleteValidator for Shop {
    async fn validate_delete(&self, _: &AdmissionContext) -> Verdict {
        Verdict::allow()
    }
}

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
            (
                "Shop",
                "Hooks { validate: true, validate_delete: true, default: true }".to_owned()
            ),
            (
                "Site",
                "Hooks { validate: true, validate_delete: false, default: false }".to_owned()
            ),
        ],
        "Plain has no webhook"
    );
    assert_eq!(kinds[0].settings.failure_policy, "Ignore");
    assert_eq!(kinds[0].settings.timeout_seconds, 5);
    assert_eq!(kinds[1].settings, kubeforge::webhook::Settings::default());

    // The registration: deletes in a webhook of their own, the options on each.
    let configurations = kubeforge::webhook::Configurations {
        name: "shop-operator".to_owned(),
        endpoint: kubeforge::webhook::Endpoint::Url("https://127.0.0.1:9443".to_owned()),
        namespace_selector: None,
        ca_bundle: None,
    };
    let validating = configurations.validating(&kinds[..1], &[]).unwrap();
    let json = kubeforge::serde_json::to_value(&validating).unwrap();
    let hooks = json["webhooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 2, "{json}");
    assert_eq!(hooks[0]["name"], "validate-v1.shops.demo.example.com");
    assert_eq!(
        hooks[0]["rules"][0]["operations"],
        kubeforge::serde_json::json!(["CREATE"])
    );
    assert_eq!(hooks[0]["matchPolicy"], "Exact");
    assert_eq!(
        hooks[0]["clientConfig"]["url"],
        "https://127.0.0.1:9443/shop-operator/validate/demo.example.com/v1/shops"
    );
    assert_eq!(
        hooks[0]["namespaceSelector"],
        kubeforge::serde_json::json!({ "matchExpressions": [
            { "key": "env", "operator": "In", "values": ["prod", "staging"] },
        ] })
    );
    assert_eq!(
        hooks[0]["objectSelector"],
        kubeforge::serde_json::json!({
            "matchLabels": { "app": "shop" },
            "matchExpressions": [{ "key": "skip-validation", "operator": "DoesNotExist" }],
        })
    );
    assert_eq!(
        hooks[1]["name"],
        "validate-delete-v1.shops.demo.example.com"
    );
    assert_eq!(
        hooks[1]["rules"][0]["operations"],
        kubeforge::serde_json::json!(["DELETE"])
    );
    let mutating = configurations.mutating(&kinds[..1]).unwrap();
    let json = kubeforge::serde_json::to_value(&mutating).unwrap();
    assert_eq!(json["webhooks"][0]["reinvocationPolicy"], "Never");
    // Site validates creates and updates only: no delete webhook.
    let site = configurations.validating(&kinds[1..], &[]).unwrap();
    assert_eq!(site.webhooks.unwrap().len(), 1);
}
