//! The manager: one shared cache, several controllers, one lifecycle.
//!
//! A [`Manager`] owns the [`Cache`] its controllers share, starts the informers, runs every
//! controller (and any other [`Runnable`]) and stops everything on SIGTERM or ctrl-c, giving
//! running reconciles a bounded grace period.
//!
//! # Examples
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::{Api, Client};
//! use kubeforge::controller::{Action, Context, Controller, Reconciler};
//! use kubeforge::informer::InformerConfig;
//! use kubeforge::manager::Manager;
//!
//! struct Noop;
//! impl Reconciler<ConfigMap> for Noop {
//!     type Error = kube::Error;
//!     async fn reconcile(&self, _: Arc<ConfigMap>, _: &Context<ConfigMap>) -> Result<Action, kube::Error> {
//!         Ok(Action::Done)
//!     }
//! }
//!
//! # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::try_default().await?;
//! let manager = Manager::new(client.clone());
//! let controller = Controller::new("noop", manager.cache(), Api::<ConfigMap>::all(client), InformerConfig::default());
//! manager.controller(controller, Noop).run().await?;
//! # Ok(()) }
//! ```

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::cache::Cache;
use crate::controller::{Controller, Reconciler};
use crate::retry::BoxError;
use crate::runner::{MultiRunner, Runnable, RunnerError};
use crate::scope::Scoped;

/// Runs controllers over a shared cache; see the [module docs](self).
pub struct Manager {
    client: Client,
    cache: Cache,
    runnables: Vec<Arc<dyn Runnable>>,
    shutdown_grace: Duration,
}

impl Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("runnables", &self.runnables.len())
            .field("shutdown_grace", &self.shutdown_grace)
            .finish_non_exhaustive()
    }
}

/// A controller with its reconciler, runnable once.
struct ControllerRunnable<K: Resource, R> {
    parts: Mutex<Option<(Controller<K>, R)>>,
}

impl<K, R> Runnable for ControllerRunnable<K, R>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + Send
        + Sync
        + 'static,
    K::Scope: Scoped,
    R: Reconciler<K>,
{
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        let parts = self.parts.lock().unwrap_or_else(|e| e.into_inner()).take();
        async move {
            match parts {
                Some((controller, reconciler)) => {
                    controller.run(reconciler, shutdown).await;
                    Ok(())
                }
                None => Err("a controller can only be run once".into()),
            }
        }
        .boxed()
    }
}

impl Manager {
    /// A manager whose cache and controllers use `client`.
    pub fn new(client: Client) -> Self {
        Self {
            cache: Cache::new(client.clone()),
            client,
            runnables: Vec::new(),
            shutdown_grace: Duration::from_secs(30),
        }
    }

    /// The shared cache: build controllers with it so they share informers.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// How long shutdown waits for everything to stop (default 30 s).
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Adds a controller and its reconciler.
    #[must_use]
    pub fn controller<K, R>(mut self, controller: Controller<K>, reconciler: R) -> Self
    where
        K: Resource<DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Serialize
            + Debug
            + Send
            + Sync
            + 'static,
        K::Scope: Scoped,
        R: Reconciler<K>,
    {
        self.runnables.push(Arc::new(ControllerRunnable {
            parts: Mutex::new(Some((controller, reconciler))),
        }));
        self
    }

    /// Adds any other long-running component (a metrics server, for example).
    #[must_use]
    pub fn runnable(mut self, runnable: Arc<dyn Runnable>) -> Self {
        self.runnables.push(runnable);
        self
    }

    /// Runs until SIGTERM or ctrl-c, then stops everything within the grace period.
    ///
    /// # Errors
    ///
    /// A component failed (and stopped the others), or did not stop within the grace period.
    pub async fn run(self) -> Result<(), RunnerError> {
        let shutdown = CancellationToken::new();
        let trigger = shutdown.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            tracing::info!("shutdown signal received; stopping");
            trigger.cancel();
        });
        self.run_until(shutdown).await
    }

    /// Runs until `shutdown` is cancelled, then stops everything within the grace period.
    ///
    /// # Errors
    ///
    /// As [`Manager::run`].
    pub async fn run_until(self, shutdown: CancellationToken) -> Result<(), RunnerError> {
        let token = shutdown.child_token();
        self.cache.start(token.clone());
        let runner = self
            .runnables
            .into_iter()
            .fold(MultiRunner::new(), MultiRunner::with)
            .exit_wait(self.shutdown_grace);
        let result = runner.run(token.clone()).await;
        token.cancel();
        result
    }
}

/// Completes on ctrl-c, or on SIGTERM on Unix.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
