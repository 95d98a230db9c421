//! Printer columns take the JSONPath the apiserver's table printer takes: filters, `[*]`,
//! indexes and slices, `['key']`; every field they name is checked, the filter's fields on the
//! list's element type.

/// A port of the spec (a user type; a filter compares its fields).
#[kubeforge::schema]
#[derive(Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    pub name: String,
    pub number: i32,
    pub ratio: f64,
    pub public: bool,
    pub host_name: Option<String>,
    pub target: Target,
}

/// Where a port goes (a filter reads through it: `@.target.port`).
#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Target {
    pub port: i32,
}

/// A condition of the user's own.
#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Probe {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub latency: Option<i64>,
}

/// Status with kubeforge's ready-made conditions and a list of the user's own.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct ThingStatus {
    pub conditions: kubeforge::crd::Conditions,
    pub probes: Vec<Probe>,
    pub list: Vec<kubeforge::crd::Condition>,
}

#[kubeforge::custom_resource(
    group = "ui.kubeforge.dev", version = "v1", kind = "Thing", namespaced, status = ThingStatus,
    printcolumn(name = "Ready", json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
        type = "string"),
    printcolumn(name = "Reason", json_path = ".status.list[?(@.type == 'Ready')].reason",
        type = "string"),
    printcolumn(name = "Since", json_path = r#".status.conditions[?(@.type=="Ready")].lastTransitionTime"#,
        type = "date"),
    printcolumn(name = "Probe", json_path = r#".status.probes[?(@.type!="Liveness")].latency"#,
        type = "integer"),
    printcolumn(name = "Http", json_path = ".spec.ports[?(@.number >= 8000)].number", type = "integer"),
    printcolumn(name = "Public", json_path = ".spec.ports[?(@.public == true)].name", type = "string"),
    printcolumn(name = "Ratio", json_path = ".spec.ports[?(@.ratio < 0.5)].ratio", type = "number"),
    printcolumn(name = "Named", json_path = ".spec.ports[?(@.hostName)].hostName", type = "string"),
    printcolumn(name = "Same", json_path = ".spec.ports[?(@.name == @.hostName)].number", type = "integer"),
    printcolumn(name = "First", json_path = ".spec.ports[0].number", type = "integer"),
    printcolumn(name = "Last", json_path = ".spec.ports[-1:].number", type = "integer"),
    printcolumn(name = "Any", json_path = ".spec.ports[*].name", type = "string"),
    printcolumn(name = "Main", json_path = ".spec.named['main'].number", type = "integer"),
    printcolumn(name = "Tag", json_path = r".spec.labels.app\.kubernetes\.io/name", type = "string"),
    printcolumn(name = "Hosts", json_path = ".spec.hosts[?(@ == 'a')]", type = "string"),
    printcolumn(name = "Target", json_path = ".spec.ports[?(@.target.port == 80)].name", type = "string"),
    printcolumn(name = "Braces", json_path = ".spec.ports[?(@.name != '{x}')].name", type = "string"),
    printcolumn(name = "Deep", json_path = "..number", type = "integer", unchecked),
)]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub ports: Vec<Port>,
    pub named: std::collections::BTreeMap<String, Port>,
    pub labels: std::collections::BTreeMap<String, String>,
    pub hosts: Vec<String>,
}

pub fn main() {
    let crd = Thing::crd();
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap_or_default();
    assert_eq!(columns.len(), 18);
    assert_eq!(
        columns[0].json_path,
        r#".status.conditions[?(@.type=="Ready")].status"#
    );
    assert_eq!(
        columns[13].json_path,
        r".spec.labels.app\.kubernetes\.io/name"
    );
}
