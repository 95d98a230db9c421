use kubeforge::k8s_openapi::api::core::v1::{Container, PodSpec};

#[kubeforge::view(of = PodSpec)]
pub struct PodSpecView {
    pub node_name: Option<u32>,
    pub containers: Vec<ContainerView>,
    pub hostname: String,
}

#[kubeforge::view(of = Container)]
pub struct ContainerView {
    pub name: String,
}

fn main() {}
