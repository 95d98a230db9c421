//! A filter reads fields of the list's elements: `@.typ` is not a JSON field of kubeforge's
//! `Condition`, `@.latency` is an integer compared with a string, and the field after the filter
//! is looked up on the element type too.

/// A probe of the user's own.
#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Probe {
    #[serde(rename = "type")]
    pub type_: String,
    pub latency: i64,
}

#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct ThingStatus {
    pub conditions: kubeforge::crd::Conditions,
    pub probes: Vec<Probe>,
}

#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing",
    namespaced, status = ThingStatus,
    printcolumn(name = "Ready", json_path = r#".status.conditions[?(@.typ=="Ready")].status"#,
        type = "string"),
    printcolumn(name = "Slow", json_path = ".status.probes[?(@.latency > '100')].type",
        type = "string"),
    printcolumn(name = "Why", json_path = ".status.conditions[?(@.type == 'Ready')].reson",
        type = "string"))]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub size: i32,
}

fn main() {}
