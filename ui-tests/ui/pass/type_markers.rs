//! Markers on types: `#[validate(..)]` above a `#[kubeforge::schema]` type applies wherever the
//! type is used, narrowed by the markers of a field that uses it.
use kubeforge::crd::Validate;

/// A lowercase name of 2 to 10 letters.
#[kubeforge::schema]
#[validate(min_length = 2, max_length = 10, pattern = "^[a-z]+$")]
#[derive(Clone, Debug)]
pub struct Name(pub String);

/// Some labels.
#[kubeforge::schema]
#[validate(max_items = 3, items(max_length = 5))]
#[derive(Clone, Debug)]
pub struct Tags(pub Vec<String>);

/// A struct with a merge type and a rule.
#[kubeforge::schema]
#[validate(map_type = "atomic", min_properties = 1, rule(cel = "has(self.a)"))]
#[derive(Clone, Debug)]
pub struct Pair {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<String>,
}

/// A mode, documented on the type.
#[kubeforge::schema]
#[validate(title = "Mode", default = "fast")]
#[derive(Clone, Debug)]
pub enum Mode {
    #[serde(rename = "fast")]
    Fast,
    #[serde(rename = "safe")]
    Safe,
}

#[kubeforge::custom_resource(
    group = "ui.kubeforge.dev",
    version = "v1",
    kind = "Named",
    namespaced
)]
#[derive(Clone, Debug)]
pub struct NamedSpec {
    pub name: Name,
    #[validate(max_length = 4)]
    pub short: Name,
    pub tags: Tags,
    pub pair: Pair,
    pub mode: Mode,
}

pub fn main() {
    let named = Named::new(
        "n",
        NamedSpec {
            name: Name("A".into()),
            short: Name("abcde".into()),
            tags: Tags(vec!["toolong".into()]),
            pair: Pair {
                a: Some("x".into()),
            },
            mode: Mode::Safe,
        },
    );
    let report = named.validate().unwrap_err().to_string();
    for expected in [
        "spec.name: should be at least 2 chars long",
        "spec.name: should match '^[a-z]+$'",
        "spec.short: may not be more than 4 bytes",
        "spec.tags[0]: may not be more than 5 bytes",
    ] {
        assert!(report.contains(expected), "{expected:?} in {report}");
    }
    let schema = <Named as kubeforge::crd::CustomResource>::schema();
    let spec = &schema["properties"]["spec"]["properties"];
    assert_eq!(spec["name"]["maxLength"], 10, "{spec}");
    assert_eq!(spec["short"]["maxLength"], 4, "{spec}");
    assert_eq!(spec["short"]["minLength"], 2, "{spec}");
    assert_eq!(spec["tags"]["maxItems"], 3, "{spec}");
    assert_eq!(spec["pair"]["x-kubernetes-map-type"], "atomic", "{spec}");
    assert_eq!(spec["mode"]["default"], "fast", "{spec}");
}
