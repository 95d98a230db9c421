use std::sync::Arc;

use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::Pod;
use kubeforge::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubeforge::kube::api::Patch;

#[kubeforge::view(of = Pod)]
pub struct PodView {
    pub metadata: ObjectMeta,
}

#[derive(Debug)]
pub struct Error;
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error")
    }
}
impl std::error::Error for Error {}
impl From<kubeforge::kube::Error> for Error {
    fn from(_: kubeforge::kube::Error) -> Self {
        Error
    }
}

pub struct Labeller;

#[kubeforge::controller(for = PodView)]
impl Labeller {
    async fn reconcile(&self, pod: Arc<PodView>, ctx: &Context<PodView>) -> Result<Action, Error> {
        ctx.patch_status(&Patch::Merge(kubeforge::serde_json::json!({}))).await?;
        ctx.apply_owned(&pod, "labeller", PodView::default()).await?;
        Ok(Action::Done)
    }
}

fn main() {}
