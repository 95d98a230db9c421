use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};

pub struct Db;

#[kubeforge::controller(for = ConfigMap, dependents(secret))]
impl Db {
    fn secret(&self, _cm: &ConfigMap) -> Secret {
        Secret::default()
    }
}

fn main() {}
