//! What the apiserver's table printer cannot parse (it would drop every column of the kind) or
//! never evaluates, and what kubeforge cannot check without `unchecked`.

#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct ThingStatus {
    pub conditions: kubeforge::crd::Conditions,
}

#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Thing",
    namespaced, status = ThingStatus,
    printcolumn(name = "A", json_path = r#".status.conditions[?(@.type=="Ready").status"#,
        type = "string"),
    printcolumn(name = "B", json_path = r#".status.conditions[?(@.type=="Ready)].status"#,
        type = "string"),
    printcolumn(name = "C", json_path = ".status.conditions[?(@.type = 'Ready')].status",
        type = "string"),
    printcolumn(name = "D", json_path = ".status.conditions[x].status", type = "string"),
    printcolumn(name = "E", json_path = "..status", type = "string"),
    printcolumn(name = "F", json_path = ".spec.on[?(@.enabled < true)]", type = "string"),
    selectable_field(json_path = ".status.conditions[*].status"))]
#[derive(Clone, Debug)]
pub struct ThingSpec {
    pub on: Vec<Toggle>,
}

#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Toggle {
    pub enabled: bool,
}

fn main() {}
