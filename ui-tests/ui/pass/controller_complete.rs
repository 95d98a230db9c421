use std::sync::Arc;

use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::core::v1::ConfigMap;

#[derive(Debug)]
pub struct Error;
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error")
    }
}
impl std::error::Error for Error {}

pub struct Copier;

use kubeforge::ObjectKey;
use kubeforge::cache::Cache;
use kubeforge::k8s_openapi::api::core::v1::{Pod, Secret};

#[kubeforge::controller(for = ConfigMap, owns(Secret, Pod(uncached, any_owner)), watches(Secret, map = Self::by_secret),
    concurrency = 2, finalizer = "ui.kubeforge.dev/cleanup", predicates(generation_changed, Self::changed), name = "copier")]
impl Copier {
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, Error> {
        Ok(Action::Done)
    }
    async fn cleanup(&self, _cm: Arc<ConfigMap>, _ctx: &Context<ConfigMap>) -> Result<Action, Error> {
        Ok(Action::Done)
    }
    fn by_secret(secret: &Secret, _cache: &Cache) -> Vec<ObjectKey> {
        vec![ObjectKey::of(secret)]
    }
    fn changed(old: &ConfigMap, new: &ConfigMap) -> bool {
        old.data != new.data
    }
}

fn main() {
    use kubeforge::controller::ControllerSpec;
    assert_eq!(<Copier as ControllerSpec>::NAME, "copier");
    assert_eq!(<Copier as ControllerSpec>::FINALIZER, Some("ui.kubeforge.dev/cleanup"));
    let rules = <Copier as ControllerSpec>::rbac().policy_rules();
    assert!(rules.iter().any(|r| r.resources.as_ref().is_some_and(|rs| rs.contains(&"configmaps/finalizers".to_owned()))));
}