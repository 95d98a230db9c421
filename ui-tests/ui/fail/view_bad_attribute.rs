use kubeforge::k8s_openapi::api::core::v1::Pod;
use kubeforge::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

#[kubeforge::view(off = Pod)]
pub struct Misspelled {
    pub metadata: ObjectMeta,
}

#[kubeforge::view(of = "Pod")]
pub struct NotAType {
    pub metadata: ObjectMeta,
}

#[kubeforge::view(of = Pod)]
#[derive(Clone)]
pub struct DerivesItself {
    pub metadata: String,
}

#[kubeforge::view(of = Pod)]
pub struct Tuple(ObjectMeta);

fn main() {}
