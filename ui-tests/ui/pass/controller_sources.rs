//! `every` and `reconcile_on`: a timer per object and a stream of keys from outside.

use std::sync::Arc;

use kubeforge::ObjectKey;
use kubeforge::controller::{Action, Context, Wiring};
use kubeforge::k8s_openapi::api::core::v1::ConfigMap;

#[derive(Debug)]
pub struct Error;
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error")
    }
}
impl std::error::Error for Error {}

/// The keys an external system announces (here: one, once).
fn announced(wiring: &Wiring) -> impl futures::Stream<Item = ObjectKey> + Send + 'static {
    let namespace = wiring.namespaces.single().unwrap_or_default().to_owned();
    futures::stream::iter([ObjectKey::namespaced(namespace, "settings")])
}

pub struct Audit;

#[kubeforge::controller(for = ConfigMap, every = "5m", reconcile_on = announced)]
impl Audit {
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

pub fn main() {}
