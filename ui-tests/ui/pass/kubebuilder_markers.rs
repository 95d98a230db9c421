//! The kubebuilder markers of issue #15: type-level groups, `immutable`, `type`, `items(..)` /
//! `values(..)`, titles, examples, external docs, `required` / `optional`, `optional_spec`.
use kubeforge::crd::{CustomResource, Validate};
use std::collections::BTreeMap;

#[kubeforge::schema(at_most_one_of = ["cpu", "gpu"], at_least_one_of = ["cpu", "gpu", "memory"])]
#[derive(Clone, Debug, Default)]
pub struct Limits {
    pub cpu: Option<String>,
    pub gpu: Option<String>,
    pub memory: Option<String>,
}

#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced,
    exactly_one_of = ["git", "image"], optional_spec)]
#[derive(Clone, Debug, Default)]
pub struct ThingSpec {
    pub git: Option<String>,
    pub image: Option<String>,
    #[validate(map_type = "atomic")]
    pub limits: Option<Limits>,
    #[validate(
        immutable,
        title = "Region",
        example = "eu-west-1",
        external_docs(url = "https://example.com", description = "d")
    )]
    pub region: Option<String>,
    #[validate(type = "object")]
    pub settings: Option<kubeforge::serde_json::Value>,
    #[validate(items(int_or_string, max_length = 8))]
    pub ports: Option<Vec<kubeforge::serde_json::Value>>,
    #[validate(
        values(format = "byte", max_length = 64),
        example_json = r#"{"a": "aGk="}"#
    )]
    pub blobs: Option<BTreeMap<String, String>>,
    #[validate(required)]
    pub owner: Option<String>,
    #[serde(default)]
    #[validate(optional)]
    pub note: String,
}

pub fn main() {
    let schema = Thing::schema();
    let spec = &schema["properties"]["spec"];
    assert_eq!(schema.get("required"), None, "optional_spec");
    assert_eq!(spec["required"], kubeforge::serde_json::json!(["owner"]));
    assert_eq!(spec["properties"]["region"]["title"], "Region");
    assert_eq!(
        spec["properties"]["blobs"]["additionalProperties"]["format"],
        "byte"
    );
    assert_eq!(spec["properties"]["settings"]["type"], "object");
    let rules = spec["x-kubernetes-validations"].to_string();
    assert!(
        rules.contains("exactly one of git, image must be set"),
        "{rules}"
    );
    let thing = Thing::new(
        "t",
        ThingSpec {
            git: Some("g".into()),
            owner: Some("o".into()),
            ..ThingSpec::default()
        },
    );
    assert!(thing.validate().is_ok());
    let missing_owner = Thing::new(
        "t",
        ThingSpec {
            git: Some("g".into()),
            ..ThingSpec::default()
        },
    );
    let report = missing_owner.validate().unwrap_err().to_string();
    assert!(report.contains("spec.owner: Required value"), "{report}");
}
