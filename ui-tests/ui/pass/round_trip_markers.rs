//! The round-trip test `conversion(hub = .., generate)` writes draws objects from each version's
//! schema that pass the version's own `validate()` (issue #31): bounds and multiples, lengths,
//! patterns (also a type's and a field's together), formats, enums, item counts, `set` lists,
//! list-maps, Quantities, and CEL rules on the spec and on a field. `main` checks the generator
//! on its own; the generated `#[test]` runs the round trips in this binary.
use kubeforge::crd::Validate;
use kubeforge::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// A DNS label, wherever it is used.
#[kubeforge::schema]
#[validate(
    min_length = 1,
    max_length = 63,
    pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Label(pub String);

#[kubeforge::schema(rule(
    cel = "self.port != self.targetPort || self.name != 'blocked'",
    message = "no"
))]
#[derive(Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    #[validate(max_length = 15)]
    pub name: Label,
    #[validate(minimum = 1, maximum = 65535)]
    pub port: i32,
    #[validate(minimum = 1, maximum = 65535, exclusive_minimum)]
    pub target_port: i32,
    #[validate(enum = ["TCP", "UDP"])]
    pub protocol: String,
}

#[kubeforge::custom_resource(
    group = "ui.kubeforge.dev",
    version = "v2",
    kind = "Drawn",
    namespaced,
    rule(
        cel = "self.minReplicas <= self.maxReplicas",
        message = "min above max"
    )
)]
#[derive(Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DrawnSpec {
    #[validate(
        min_length = 3,
        max_length = 40,
        pattern = r"^[a-z0-9][a-z0-9._/:@-]*$"
    )]
    pub image: String,
    #[validate(minimum = 0, maximum = 50)]
    pub min_replicas: i32,
    #[validate(minimum = 0, maximum = 50, multiple_of = 5)]
    pub max_replicas: i32,
    #[validate(min_items = 2, max_items = 6, list_type = "map", list_map_keys = ["port"])]
    pub ports: Vec<Port>,
    #[validate(
        min_items = 3,
        unique_items,
        items(min_length = 2, max_length = 4, pattern = "^[a-f]+$")
    )]
    pub hosts: Vec<String>,
    #[validate(format = "date-time")]
    pub since: String,
    #[validate(format = "cidr")]
    pub network: String,
    #[validate(format = "byte")]
    pub secret: String,
    #[validate(min_properties = 1, max_properties = 3, values(max_length = 8))]
    pub labels: BTreeMap<String, String>,
    pub memory: Quantity,
    #[validate(max_length = 10, pattern = "^[a-c]+$")]
    pub tag: Label,
    #[validate(
        minimum = 0.5,
        maximum = 2.5,
        rule(cel = "self != 1.0", message = "not one")
    )]
    pub ratio: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(min_length = 5)]
    pub note: Option<String>,
}

pub mod v1 {
    use super::{Label, Port};
    use kubeforge::k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[kubeforge::custom_resource(
        group = "ui.kubeforge.dev",
        version = "v1",
        kind = "Drawn",
        namespaced,
        storage = false,
        conversion(hub = super::Drawn, generate)
    )]
    #[derive(Clone, Debug, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub struct DrawnSpec {
        #[validate(
            min_length = 3,
            max_length = 40,
            pattern = r"^[a-z0-9][a-z0-9._/:@-]*$"
        )]
        pub image: String,
        #[validate(min_items = 1, list_type = "map", list_map_keys = ["port"])]
        pub ports: Vec<Port>,
        #[validate(
            min_items = 3,
            unique_items,
            items(min_length = 2, max_length = 4, pattern = "^[a-f]+$")
        )]
        pub hosts: Vec<String>,
        pub memory: Quantity,
        pub tag: Label,
    }
}

pub fn main() {
    let drawn = kubeforge::webhook::__private::arbitrary_objects::<Drawn>(200).unwrap();
    for object in &drawn {
        if let Err(report) = object.validate() {
            panic!("{object:?}: {report}");
        }
    }
    // The constraints were not all met by luck: the list counts vary.
    let counts: std::collections::BTreeSet<usize> =
        drawn.iter().map(|d| d.spec.ports.len()).collect();
    assert!(counts.len() > 1, "{counts:?}");
    for object in kubeforge::webhook::__private::arbitrary_objects::<v1::Drawn>(200).unwrap() {
        if let Err(report) = object.validate() {
            panic!("{object:?}: {report}");
        }
    }
}
