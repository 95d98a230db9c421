use std::sync::Arc;

use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::PodSpec;

/// A view of a part of a kind (no `metadata`): not a kind.
#[kubeforge::view(of = PodSpec)]
pub struct PodSpecView {
    pub node_name: Option<String>,
}

#[derive(Debug)]
pub struct Error;
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error")
    }
}
impl std::error::Error for Error {}

pub struct Scheduler;

#[kubeforge::controller(for = PodSpecView)]
impl Scheduler {
    async fn reconcile(&self, _obj: Arc<PodSpecView>, _ctx: &Context<PodSpecView>) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

fn main() {}
