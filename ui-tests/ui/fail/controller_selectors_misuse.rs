use std::sync::Arc;

use kubeforge::ObjectKey;
use kubeforge::cache::Cache;
use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};

pub struct Selective;

#[kubeforge::controller(for = ConfigMap,
    owns(Secret(labels = 3, predicates(generation_chnged))),
    watches(Secret, map = Self::by_secret, fields = "", predicates(spec_changed)))]
impl Selective {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, kubeforge::kube::Error> {
        Ok(Action::Done)
    }
    fn by_secret(secret: &Secret, _cache: &Cache) -> Vec<ObjectKey> {
        vec![ObjectKey::of(secret)]
    }
}

fn main() {}
