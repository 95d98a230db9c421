//! Every kind-level key at once; the generated API is usable.
use kubeforge::crd::{CustomResource, Validate};

/// Status with the ready-made conditions.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct ThingStatus {
    pub replicas: i32,
    pub selector: Option<String>,
    pub conditions: kubeforge::crd::Conditions,
}

#[kubeforge::custom_resource(
    group = "ui.kubeforge.dev", version = "v1beta1", kind = "Thing", namespaced,
    status = ThingStatus, plural = "thingies", singular = "thingy",
    shortname = "th", shortname = "thg", category = "all",
    printcolumn(name = "Size", json_path = ".spec.size", type = "integer", format = "int32",
        description = "the size", priority = 0),
    scale(spec = ".spec.size", status = ".status.replicas", selector = ".status.selector"),
    rule(cel = "self.size >= 0", message = "size is not negative", reason = "FieldValueInvalid",
        field_path = ".size"),
    rule(cel = "self.size < 100", message_expression = "'size %d too big'.format([self.size])"),
    selectable_field(json_path = ".spec.size"),
    label(key = "app.kubernetes.io/part-of", value = "ui"),
    annotation(key = "example.com/owner", value = "team"),
    deprecated(warning = "use v1"), served = true, storage = true,
)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    /// The size.
    #[validate(minimum = 0, maximum = 1000, multiple_of = 2)]
    pub size: i32,
    #[serde(default)]
    pub limits: Option<Limits>,
}

/// CEL rules type-checked against the fields and cost-estimated at compile time.
#[kubeforge::schema(
    rule(cel = "self.names.all(n, n.matches('^[a-z]+$')) && self.names.size() <= self.max"),
    rule(cel = "!has(self.deadline) || self.deadline > timestamp('2020-01-01T00:00:00Z')"),
    rule(cel = "self.labels.all(k, k.size() < 64 && self.labels[k] != '')"),
    rule(cel = "type(self.port) == int ? self.port > 1024 : self.port.startsWith('http')"),
    rule(cel = "self.ratio > 0 && self.ratio * 2.0 <= 3.0 && self.max + 1 > 1"),
    rule(cel = "!has(self.memory) || quantity(self.memory).isLessThan(quantity('4Gi'))"),
    rule(
        cel = "self.names.exists_one(n, n == 'main') || sets.intersects(self.names, ['a', 'b'])",
        message_expression = "'%d names'.format([self.names.size()])"
    )
)]
#[derive(Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    #[validate(max_items = 16, items(max_length = 63))]
    pub names: Vec<String>,
    pub max: i64,
    #[validate(format = "date-time")]
    pub deadline: Option<String>,
    #[validate(
        max_properties = 8,
        values(max_length = 64),
        rule(cel = "self.all(k, k != '')")
    )]
    pub labels: std::collections::BTreeMap<String, String>,
    #[validate(rule(cel = "self >= 0.0"))]
    pub ratio: f64,
    pub port: kubeforge::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString,
    #[validate(max_length = 16, rule(cel = "isQuantity(self)"))]
    pub memory: Option<String>,
}

pub fn main() {
    let thing = Thing::new(
        "a",
        ThingSpec {
            size: 3,
            limits: None,
        },
    );
    assert!(thing.validate().is_err());
    let crd = Thing::crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("thingies.ui.kubeforge.dev")
    );
    assert_eq!(Thing::INFO.short_names, ["th", "thg"]);
    assert_eq!(
        <Thing as kubeforge::kube::Resource>::api_version(&()),
        "ui.kubeforge.dev/v1beta1"
    );
}
