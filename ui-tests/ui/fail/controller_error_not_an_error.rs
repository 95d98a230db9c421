use std::sync::Arc;

use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::ConfigMap;

/// Not an error: no `std::error::Error`, no conversion into a `Box<dyn Error>`.
#[derive(Debug)]
pub struct Failed;

pub struct Copier;

#[kubeforge::controller(for = ConfigMap)]
impl Copier {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, Failed> {
        Err(Failed)
    }
}

fn main() {}
