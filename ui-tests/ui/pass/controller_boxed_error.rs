//! `Box<dyn std::error::Error + Send + Sync>` (`kubeforge::BoxError`) as the error of a
//! reconciler and of a watcher's handlers: `?` converts every error type into it.
use std::sync::Arc;

use kubeforge::cache::Lookup;
use kubeforge::controller::{Action, Context, ErrorPolicy, Reconciler};
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubeforge::kube::core::PartialObjectMeta;
use kubeforge::manager::Manager;
use kubeforge::watcher::{WatchContext, Watcher};

pub struct Copier;

#[kubeforge::controller(for = ConfigMap, owns(Secret(metadata)))]
impl Copier {
    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, Box<dyn std::error::Error + Send + Sync>> {
        let name = cm.metadata.name.as_deref().ok_or("no name")?; // &str
        let size: u32 = name.len().try_into()?; // TryFromIntError
        let namespace = ctx.key().namespace.clone().unwrap_or_default();
        let copies = ctx
            .cache()
            .store::<PartialObjectMeta<Secret>>(&Lookup::namespace(namespace))?; // NotCached
        let _ = (size, copies.list().await?); // StoreError
        ctx.api::<ConfigMap>().get(name).await?; // kube::Error
        Ok(Action::Done)
    }
    fn error_policy(
        &self,
        _cm: &ConfigMap,
        error: &Box<dyn std::error::Error + Send + Sync>,
        _ctx: &Context<ConfigMap>,
    ) -> ErrorPolicy {
        match error.downcast_ref::<kubeforge::kube::Error>() {
            Some(_) => ErrorPolicy::Backoff,
            None => ErrorPolicy::Terminal,
        }
    }
}

pub struct Audit;

#[kubeforge::controller(for = Secret, watcher)]
impl Audit {
    async fn add(
        &self,
        secret: Arc<Secret>,
        _ctx: &WatchContext,
    ) -> Result<(), kubeforge::BoxError> {
        if secret.data.is_none() {
            return Err(format!("{:?} is empty", secret.metadata.name).into());
        }
        Ok(())
    }
}

fn wire(manager: Manager) -> Manager {
    manager.controller(Copier).watcher(Audit)
}

pub fn main() {
    let _ = wire;
    let _: fn() -> <Copier as Reconciler<ConfigMap>>::Error = || "boxed".into();
    let _: fn() -> <Audit as Watcher<Secret>>::Error = || "boxed".into();
}
