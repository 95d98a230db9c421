//! Selectors and built-in predicates per owned and watched kind.
use std::sync::Arc;

use kubeforge::ObjectKey;
use kubeforge::cache::Cache;
use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};

pub struct Selective;

#[kubeforge::controller(for = ConfigMap,
    owns(Secret(labels = "app=web", predicates(generation_changed, labels_changed)),
         Pod(uncached, fields = "status.phase=Running")),
    watches(Secret, map = Self::by_secret, labels = "watched=true", fields = "type=Opaque",
            predicates(annotations_changed)))]
impl Selective {
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, kubeforge::kube::Error> {
        Ok(Action::Done)
    }
    fn by_secret(secret: &Secret, _cache: &Cache) -> Vec<ObjectKey> {
        vec![ObjectKey::of(secret)]
    }
}

pub fn main() {
    use kubeforge::controller::ControllerSpec;
    // RBAC is derived as without selectors.
    let rules = <Selective as ControllerSpec>::rbac().policy_rules();
    assert!(rules.iter().any(|r| {
        r.resources
            .as_ref()
            .is_some_and(|rs| rs.contains(&"secrets".to_owned()))
    }));
    assert!(rules.iter().any(|r| {
        r.resources
            .as_ref()
            .is_some_and(|rs| rs.contains(&"pods".to_owned()))
    }));
}
