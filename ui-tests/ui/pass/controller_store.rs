//! `store = <backend>` in its three places (the primary, an owned kind, a watched kind) and in
//! the watcher mode; a kind without `store` stays in memory.

use std::sync::Arc;

use kubeforge::ObjectKey;
use kubeforge::cache::Cache;
use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::apps::v1::Deployment;
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use kubeforge::watcher::WatchContext;

#[derive(Debug)]
pub struct Error;
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error")
    }
}
impl std::error::Error for Error {}

pub struct Copier;

#[kubeforge::controller(for = ConfigMap, store = memcached,
    owns(Deployment(store = memcached), Service, Pod(metadata, any_owner, store = "redis")),
    watches(Secret, map = Self::by_secret, store = memcached),
    watches(ServiceAccount, map_async = Self::by_account, store = "redis"),
    name = "copier")]
impl Copier {
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, Error> {
        Ok(Action::Done)
    }
    fn by_secret(secret: &Secret, _cache: &Cache) -> Vec<ObjectKey> {
        vec![ObjectKey::of(secret)]
    }
    async fn by_account(account: Arc<ServiceAccount>, _cache: Cache) -> Vec<ObjectKey> {
        vec![ObjectKey::of(&*account)]
    }
}

pub struct Audit;

#[kubeforge::controller(for = ConfigMap, watcher, store = memcached, name = "audit")]
impl Audit {
    async fn add(&self, _cm: Arc<ConfigMap>, _ctx: &WatchContext) -> Result<(), Error> {
        Ok(())
    }
}

pub fn main() {
    use kubeforge::controller::ControllerSpec;
    use kubeforge::watcher::WatcherSpec;
    assert_eq!(<Copier as ControllerSpec>::NAME, "copier");
    assert_eq!(<Audit as WatcherSpec>::NAME, "audit");
    let rules = <Copier as ControllerSpec>::rbac().policy_rules();
    assert!(rules.iter().any(|r| {
        r.resources
            .as_ref()
            .is_some_and(|rs| rs.contains(&"deployments".to_owned()))
    }));
}
