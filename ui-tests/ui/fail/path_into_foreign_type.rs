use kubeforge::k8s_openapi::api::core::v1::ResourceRequirements;

#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Job", namespaced,
    printcolumn(name = "CPU", json_path = ".spec.resources.limits.cpu", type = "string"))]
#[derive(Clone, Debug)]
pub struct JobSpec {
    pub resources: ResourceRequirements,
}

fn main() {}
