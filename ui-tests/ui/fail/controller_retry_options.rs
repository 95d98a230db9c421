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

pub struct BadKeys;

#[kubeforge::controller(for = ConfigMap, retry = exponential(base = "1.5x", atempts = 3), dequeue = generation)]
impl BadKeys {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

pub struct BadBounds;

#[kubeforge::controller(for = ConfigMap, retry = exponential(base = "10m", max = "5m", attempts = 0))]
impl BadBounds {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

fn main() {}
