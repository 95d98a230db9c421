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
    rule(cel = "self.size < 100", message_expression = "'size ' + string(self.size) + ' too big'"),
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
}

fn main() {
    let thing = Thing::new("a", ThingSpec { size: 3 });
    assert!(thing.validate().is_err());
    let crd = Thing::crd();
    assert_eq!(crd.metadata.name.as_deref(), Some("thingies.ui.kubeforge.dev"));
    assert_eq!(Thing::INFO.short_names, ["th", "thg"]);
    assert_eq!(<Thing as kubeforge::kube::Resource>::api_version(&()), "ui.kubeforge.dev/v1beta1");
}
