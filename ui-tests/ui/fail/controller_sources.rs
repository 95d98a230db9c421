use std::sync::Arc;

use kubeforge::controller::{Action, Context, Wiring};
use kubeforge::k8s_openapi::api::core::v1::ConfigMap;
use kubeforge::ObjectKey;

#[derive(Debug)]
pub struct Error;
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error")
    }
}
impl std::error::Error for Error {}

/// Not a stream of keys.
fn numbers(_wiring: &Wiring) -> Vec<u32> {
    Vec::new()
}

pub struct Zero;

#[kubeforge::controller(for = ConfigMap, every = "0s")]
impl Zero {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

pub struct Unitless;

#[kubeforge::controller(for = ConfigMap, every = "30")]
impl Unitless {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

pub struct NotKeys;

#[kubeforge::controller(for = ConfigMap, reconcile_on = numbers)]
impl NotKeys {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

fn main() {
    let _ = ObjectKey::cluster("x");
}
