use kubeforge::k8s_openapi::api::core::v1::PodSpec;

#[kubeforge::view(of = PodSpec)]
pub struct PodSpecView {
    pub nod_name: Option<String>,
}

fn main() {}
