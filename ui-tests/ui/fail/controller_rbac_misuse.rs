use std::sync::Arc;

use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::ConfigMap;

pub struct Writer;

#[kubeforge::controller(for = ConfigMap,
    rbac(group = "", resources = ["Secrets"], verbs = ["creat"]),
    rbac(resources = ["services"], verbs = ["get"]),
    rbac(non_resource_urls = ["metrics", "/debug/*/x"], verbs = ["list"]),
    rbac(group = "", non_resource_urls = ["/metrics"], verbs = ["get"]))]
impl Writer {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, kubeforge::kube::Error> {
        Ok(Action::Done)
    }
}

fn main() {}
