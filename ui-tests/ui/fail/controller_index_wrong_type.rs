use std::sync::Arc;

use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};

pub struct Mistyped;

// An index function reads the kind it indexes (with `metadata`, its `PartialObjectMeta`).
#[kubeforge::controller(for = ConfigMap, indexes(Self::by_type), owns(Pod(metadata, indexes(Self::by_node))))]
impl Mistyped {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, kubeforge::kube::Error> {
        Ok(Action::Done)
    }
    fn by_type(secret: &Secret) -> Vec<String> {
        secret.type_.clone().into_iter().collect()
    }
    fn by_node(pod: &Pod) -> Vec<String> {
        pod.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()
    }
}

fn main() {}
