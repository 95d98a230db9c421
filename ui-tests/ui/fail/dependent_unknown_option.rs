use kubeforge::controller::Context;
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};

pub struct Db;

#[kubeforge::controller(for = ConfigMap, dependents(secret(create_once), service(depends_on(secrets))))]
impl Db {
    fn secret(&self, _cm: &ConfigMap, _ctx: &Context<ConfigMap>) -> Secret {
        Secret::default()
    }
    fn service(&self, _cm: &ConfigMap, _ctx: &Context<ConfigMap>) -> Service {
        Service::default()
    }
}

fn main() {}
