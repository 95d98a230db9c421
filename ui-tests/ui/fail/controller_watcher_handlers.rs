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

#[kubeforge::controller(for = ConfigMap, watcher)]
impl Audit {
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, Error> {
        Ok(Action::Done)
    }
    async fn udpate(
        &self,
        _old: Arc<ConfigMap>,
        _new: Arc<ConfigMap>,
        _ctx: &WatchContext,
    ) -> Result<(), Error> {
        Ok(())
    }
    fn sync(&self, _cm: Arc<ConfigMap>) -> Result<(), Error> {
        Ok(())
    }
}

fn main() {
    // The dummy impls keep code using the watcher free of follow-up errors.
    let _ = |manager: Manager| manager.watcher(Audit);
}
