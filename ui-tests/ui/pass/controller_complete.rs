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
    concurrency = 2, finalizer = "ui.kubeforge.dev/cleanup", predicates(generation_changed, Self::changed), name = "copier",
    retry = exponential(base = "1s", max = "5m", attempts = 10), dequeue = generation_changed,
    rbac(group = "", resources = ["services", "endpoints"], verbs = ["create", "delete"]),
    rbac(group = "apps", resources = ["deployments/scale"], verbs = ["update"], resource_names = ["web"]))]
impl Copier {
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, Error> {
        Ok(Action::Done)
    }
    async fn cleanup(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, Error> {
        Ok(Action::Done)
    }
    fn by_secret(secret: &Secret, _cache: &Cache) -> Vec<ObjectKey> {
        vec![ObjectKey::of(secret)]
    }
    fn changed(old: &ConfigMap, new: &ConfigMap) -> bool {
        old.data != new.data
    }
}

/// `retry = <expression>`: `Self` is the controller; the other dequeue words.
pub struct Retrier;

#[kubeforge::controller(for = ConfigMap, retry = Self::policy(), dequeue = same_action)]
impl Retrier {
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, Error> {
        Ok(Action::Done)
    }
    fn policy() -> kubeforge::retry::ExponentialRetry {
        kubeforge::retry::ExponentialRetry::new(
            std::time::Duration::from_millis(100),
            std::time::Duration::from_secs(60),
            5,
        )
    }
}

mod policies {
    pub fn forever() -> kubeforge::retry::ExponentialRetry {
        kubeforge::retry::ExponentialRetry::new(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(1),
            u32::MAX,
        )
    }
}

pub struct Defaults;

#[kubeforge::controller(for = ConfigMap, retry = exponential(), dequeue = all, name = "defaults")]
impl Defaults {
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

pub struct ByPath;

#[kubeforge::controller(for = ConfigMap, retry = policies::forever(), dequeue = none, name = "bypath")]
impl ByPath {
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

pub fn main() {
    use kubeforge::controller::ControllerSpec;
    assert_eq!(<Copier as ControllerSpec>::NAME, "copier");
    assert_eq!(
        <Copier as ControllerSpec>::FINALIZER,
        Some("ui.kubeforge.dev/cleanup")
    );
    let rules = <Copier as ControllerSpec>::rbac().policy_rules();
    assert!(rules.iter().any(|r| {
        r.resources
            .as_ref()
            .is_some_and(|rs| rs.contains(&"configmaps/finalizers".to_owned()))
    }));
    // `rbac(..)`: rules the wiring cannot see, merged with its own.
    let verbs = |resource: &str| {
        rules
            .iter()
            .filter(|r| r.resource_names.is_none())
            .find(|r| {
                r.resources
                    .as_ref()
                    .is_some_and(|rs| rs.iter().any(|x| x == resource))
            })
            .map(|r| r.verbs.join(" "))
    };
    assert_eq!(verbs("services").as_deref(), Some("create delete"));
    assert_eq!(verbs("endpoints").as_deref(), Some("create delete"));
    let named = rules
        .iter()
        .find(|r| r.resource_names.is_some())
        .expect("a rule with names");
    assert_eq!(
        named.resource_names.as_deref(),
        Some(&["web".to_owned()][..])
    );
    assert_eq!(
        named.resources.as_deref(),
        Some(&["deployments/scale".to_owned()][..])
    );
    assert_eq!(named.api_groups.as_deref(), Some(&["apps".to_owned()][..]));
}
