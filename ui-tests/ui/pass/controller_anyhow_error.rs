//! `anyhow::Result` as the result of a reconciler and of a watcher's handlers (the error type is
//! the alias's: `anyhow::Error`), with `?` on any error and `error_policy` seeing `anyhow::Error`.
use std::sync::Arc;

use anyhow::Context as _;
use kubeforge::controller::{Action, Context, ControllerSpec, ErrorPolicy, Reconciler};
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubeforge::manager::Manager;
use kubeforge::watcher::{WatchContext, Watcher, WatcherSpec};

pub struct Copier;

#[kubeforge::controller(for = ConfigMap, owns(Secret(metadata)), finalizer = "ui.kubeforge.dev/cleanup")]
impl Copier {
    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> anyhow::Result<Action> {
        let size: u32 = cm
            .data
            .as_ref()
            .and_then(|d| d.get("size"))
            .context("no size in the data")?
            .parse()?;
        anyhow::ensure!(size < 10, "size {size} is too large");
        ctx.api::<ConfigMap>().get(&ctx.key().name).await?;
        Ok(Action::Done)
    }
    async fn cleanup(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> anyhow::Result<Action> {
        Err(anyhow::anyhow!("the registry is read-only"))
    }
    fn error_policy(
        &self,
        _cm: &ConfigMap,
        error: &anyhow::Error,
        _ctx: &Context<ConfigMap>,
    ) -> ErrorPolicy {
        if error.downcast_ref::<std::num::ParseIntError>().is_some() {
            ErrorPolicy::Terminal
        } else {
            ErrorPolicy::Backoff
        }
    }
}

pub struct Audit;

#[kubeforge::controller(for = Secret, watcher)]
impl Audit {
    async fn add(&self, secret: Arc<Secret>, _ctx: &WatchContext) -> anyhow::Result<()> {
        anyhow::ensure!(secret.data.is_some(), "an empty secret");
        Ok(())
    }
    async fn delete(&self, _secret: Arc<Secret>, _ctx: &WatchContext) -> anyhow::Result<()> {
        Ok(())
    }
}

fn wire(manager: Manager) -> Manager {
    manager.controller(Copier).watcher(Audit)
}

pub fn main() {
    let _ = wire;
    let _: fn() -> <Copier as Reconciler<ConfigMap>>::Error =
        || anyhow::anyhow!("the alias's error");
    let _: fn() -> <Audit as Watcher<Secret>>::Error = || anyhow::anyhow!("the alias's error");
    assert_eq!(<Copier as ControllerSpec>::NAME, "configmap");
    assert_eq!(<Audit as WatcherSpec>::NAME, "secret");
}
