use std::sync::Arc;

use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::ConfigMap;
use kubeforge::manager::Manager;
use kubeforge::watcher::WatchContext;

#[derive(Debug)]
pub struct Error;
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error")
    }
}
impl std::error::Error for Error {}

pub struct Audit;

#[kubeforge::controller(for = ConfigMap, watcher, owns(kubeforge::k8s_openapi::api::core::v1::Secret), concurrency = 8, workers = 0)]
impl Audit {
    async fn add(&self, _cm: Arc<ConfigMap>, _ctx: &WatchContext) -> Result<(), Error> {
        Ok(())
    }
}

pub struct Copier;

#[kubeforge::controller(for = ConfigMap, workers = 8, event_timeout = "5s")]
impl Copier {
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

fn main() {
    // The dummy impls keep code using them free of follow-up errors.
    let _ = |manager: Manager| manager.watcher(Audit).controller(Copier);
}
