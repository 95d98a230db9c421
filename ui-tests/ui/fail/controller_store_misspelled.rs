use std::sync::Arc;

use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::ConfigMap;

#[derive(Debug)]
pub struct Error;
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error")
    }
}
impl std::error::Error for Error {}


pub struct Copier;

#[kubeforge::controller(for = ConfigMap, owns(Secret(stor = memcached)))]
impl Copier {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

fn main() {}
