use kubeforge::controller::Context;
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};

pub struct Db;

#[kubeforge::controller(for = ConfigMap, dependents(secrte))]
impl Db {
    fn secret(&self, _cm: &ConfigMap, _ctx: &Context<ConfigMap>) -> Secret {
        Secret::default()
    }
}

fn main() {}
