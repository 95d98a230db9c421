use std::sync::Arc;

use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};

pub struct Selective;

// Predicates of owned and watched kinds see the metadata: `fn(&ObjectMeta, &ObjectMeta) -> bool`.
#[kubeforge::controller(for = ConfigMap, owns(Secret(predicates(Self::data_changed))))]
impl Selective {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, kubeforge::kube::Error> {
        Ok(Action::Done)
    }
    fn data_changed(old: &Secret, new: &Secret) -> bool {
        old.data != new.data
    }
}

fn main() {}
