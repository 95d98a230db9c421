use std::sync::Arc;

use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubeforge::manager::Manager;
use kubeforge::watcher::{WatchContext, WatcherSpec};

#[derive(Debug)]
pub struct Error;
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error")
    }
}
impl std::error::Error for Error {}

/// Every handler and every key of the watcher mode.
pub struct Audit;

#[kubeforge::controller(for = ConfigMap, watcher, workers = 16, event_timeout = "1m30s", opinionated = "ui.kubeforge.dev/watch",
    retry = exponential(base = "1s", max = "5m", attempts = 10), dequeue = generation_changed, name = "audit")]
impl Audit {
    async fn add(&self, _cm: Arc<ConfigMap>, _ctx: &WatchContext) -> Result<(), Error> {
        Ok(())
    }
    async fn update(
        &self,
        old: Arc<ConfigMap>,
        new: Arc<ConfigMap>,
        _ctx: &WatchContext,
    ) -> Result<(), Error> {
        if old.data == new.data {
            Ok(())
        } else {
            Err(Error)
        }
    }
    async fn delete(&self, _cm: Arc<ConfigMap>, _ctx: &WatchContext) -> Result<(), Error> {
        Ok(())
    }
    async fn sync(&self, _cm: Arc<ConfigMap>, _ctx: &WatchContext) -> Result<(), Error> {
        Ok(())
    }
}

/// Only `add`; `retry = <expression>` where `Self` is the watcher.
pub struct Counter;

#[kubeforge::controller(for = Secret, watcher, retry = Self::policy(), dequeue = none)]
impl Counter {
    async fn add(&self, _secret: Arc<Secret>, _ctx: &WatchContext) -> Result<(), Error> {
        Ok(())
    }
    fn policy() -> kubeforge::retry::ExponentialRetry {
        kubeforge::retry::ExponentialRetry::new(
            std::time::Duration::from_millis(100),
            std::time::Duration::from_secs(60),
            5,
        )
    }
}

fn wire(manager: Manager) -> Manager {
    manager.watcher(Audit).watcher(Counter)
}

pub fn main() {
    let _ = wire;
    assert_eq!(<Audit as WatcherSpec>::NAME, "audit");
    assert_eq!(<Counter as WatcherSpec>::NAME, "secret");
    let has = |rules: &kubeforge::rbac::Rules, resource: &str| {
        rules.policy_rules().iter().any(|r| {
            r.resources
                .as_ref()
                .is_some_and(|rs| rs.iter().any(|x| x == resource))
        })
    };
    let audit = <Audit as WatcherSpec>::rbac();
    assert!(has(&audit, "configmaps") && has(&audit, "events") && has(&audit, "leases"));
    // The opinionated watcher puts its finalizer on every object.
    assert!(has(&audit, "configmaps/finalizers"));
    assert!(!has(
        &<Counter as WatcherSpec>::rbac(),
        "secrets/finalizers"
    ));
}
