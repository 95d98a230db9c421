//! A JSONPath into a k8s-openapi type cannot be resolved at compile time: `unchecked` opts out.
use kubeforge::k8s_openapi::api::core::v1::ResourceRequirements;

#[kubeforge::custom_resource(
    group = "ui.kubeforge.dev",
    version = "v1",
    kind = "Job",
    namespaced,
    printcolumn(
        name = "CPU",
        json_path = ".spec.resources.limits.cpu",
        type = "string",
        unchecked
    ),
    printcolumn(
        name = "Created",
        json_path = ".metadata.creationTimestamp",
        type = "date"
    )
)]
#[derive(Clone, Debug)]
pub struct JobSpec {
    pub resources: ResourceRequirements,
}

pub fn main() {
    let crd = Job::crd();
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .map(Vec::len);
    assert_eq!(columns, Some(2));
}
