use std::sync::Arc;

use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};

pub struct Indexed;

// An uncached kind keeps no objects: it has nothing to index.
#[kubeforge::controller(for = ConfigMap, owns(Pod(metadata), Secret(uncached, indexes(Self::by_type))))]
impl Indexed {
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
