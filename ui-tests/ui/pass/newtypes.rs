//! Newtypes with #[kubeforge::schema] are their inner value in JSON, and nested validation goes
//! through them.
use kubeforge::crd::Validate;

#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Port {
    #[validate(minimum = 1, maximum = 65535)]
    pub number: i32,
}

#[kubeforge::schema]
#[derive(Clone, Debug)]
#[serde(transparent)]
pub struct Ports(pub Vec<Port>);

#[kubeforge::custom_resource(
    group = "ui.kubeforge.dev",
    version = "v1",
    kind = "Svc",
    namespaced,
    printcolumn(name = "Port", json_path = ".spec.ports[0].number", type = "integer"),
    printcolumn(name = "App", json_path = ".spec.labels.app", type = "string"),
    printcolumn(name = "Main", json_path = ".spec.named.main.number", type = "integer")
)]
#[derive(Clone, Debug)]
pub struct SvcSpec {
    pub ports: Ports,
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub named: std::collections::BTreeMap<String, Port>,
}

pub fn main() {
    let svc = Svc::new(
        "s",
        SvcSpec {
            ports: Ports(vec![Port { number: 0 }]),
            labels: Default::default(),
            named: Default::default(),
        },
    );
    let report = svc.validate().unwrap_err().to_string();
    assert!(
        report.contains("spec.ports[0].number: should be greater than or equal to 1"),
        "{report}"
    );
    let schema = <Svc as kubeforge::crd::CustomResource>::schema();
    assert_eq!(
        schema["properties"]["spec"]["properties"]["ports"]["type"],
        "array"
    );
}
