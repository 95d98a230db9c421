//! Controllers: turn watch events into keys, and keys into reconciles.
//!
//! A [`Controller`] watches a primary kind (`for`), optionally kinds it owns (`owns`: an owned
//! object's controller owner reference leads back to the primary) and any other kind
//! (`watches`, with a mapper from the watched object to primary keys). Every event becomes an
//! [`ObjectKey`](crate::ObjectKey) in a [`WorkQueue`](crate::queue::WorkQueue); workers take keys and call the [`Reconciler`] with the
//! *latest cached* primary object — level-triggered: the reconciler is not told what changed.
//!
//! # Retry semantics
//!
//! Failed keys wait in the controller's retry processor ([`crate::retry`]); a due retry puts the
//! key back into the queue. The [`RetryPolicy`](crate::retry::RetryPolicy)
//! ([`ControllerConfig::retry`]) gets each failure and the failures in a row.
//!
//! | outcome | what happens |
//! |---|---|
//! | `Ok(Action::Done)` | the key's failures, state and pending retry are dropped |
//! | `Ok(Action::Requeue)` | counts as a failure: the key runs again after the policy's delay (a key that asks again and again slows down instead of spinning) |
//! | `Ok(Action::RequeueAfter(d))` | failures and state dropped; the key runs again after `d` |
//! | `Err(e)` | [`Reconciler::error_policy`] decides: the retry policy's delay (default), a fixed delay (the failure still counts), or terminal (logged, not retried) |
//! | a finalizer write fails ([`FinalizerError`]) | a failure, retried by the policy |
//! | panic | caught, logged with the key, counted, a failure |
//! | timeout ([`ControllerConfig::reconcile_timeout`]) | the reconcile future is dropped; a failure |
//! | the policy gives up | the key is dropped until the object changes; Warning event `RetriesExhausted` |
//!
//! A new event for a key with a pending retry meets the dequeue policy
//! ([`ControllerConfig::dequeue`]): it reconciles now (the retry dropped) or waits for the retry.
//! [`Context::state`] carries typed values across the retries of a key.
//!
//! The decision is one pure function (`outcome.rs`), as controller-runtime's `reconcileHandler`.
//! One key is never reconciled twice at the same time. A key whose object is no longer cached
//! (deleted) is not reconciled; an object being deleted is reconciled only through the
//! finalizer's cleanup when [`ControllerConfig::finalizer`] is set.
//!
//! # Examples
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use kube::{Api, Client};
//! use kubeforge::controller::{Action, Context, Controller, ControllerConfig, Owns, Reconciler, Wiring};
//! use kubeforge::informer::InformerConfig;
//!
//! struct Copier;
//!
//! impl Reconciler<ConfigMap> for Copier {
//!     type Error = kube::Error;
//!     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &Context<ConfigMap>) -> Result<Action, kube::Error> {
//!         // ... make the world match `cm` ...
//!         Ok(Action::Done)
//!     }
//! }
//!
//! # async fn doc(client: Client) {
//! let wiring = Wiring::new(client.clone());
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! Controller::new("copier", &wiring, Api::<ConfigMap>::all(client.clone()), InformerConfig::default())
//!     .owns(Api::<Secret>::all(client), Owns::metadata())
//!     .config(ControllerConfig::default().concurrency(4))
//!     .run(Copier, shutdown)
//!     .await;
//! # }
//! ```

mod action;
mod builder;
mod config;
mod context;
pub(crate) mod finalizer;
mod handlers;
mod metrics;
mod outcome;
mod precondition;
mod predicate;
mod progress;
mod reconciler;
mod retries;
mod sources;
mod stalled;
mod startup;
mod timers;
mod trace_link;
mod trigger;
mod wiring;
mod worker;

use kube::{Api, Client};

use crate::scope::Scoped;

pub use crate::scope::Kind;
pub use action::{Action, ErrorPolicy, Priority};
pub(crate) use builder::synced;
pub use builder::{Controller, ControllerError, Idle};
pub use config::{ControllerConfig, RECONCILE_TIMEOUT, STALL_TIMEOUT};
pub(crate) use config::{SYNC_TIMEOUT, default_retry};
pub use context::Context;
pub use finalizer::{FinalizerError, RELEASE_DEPENDENTS};
pub use metrics::{ControllerMetrics, ReconcileResult};
pub use predicate::{
    AnnotationsChanged, GenerationChanged, LabelsChanged, MetadataPredicate, Predicate,
    ResourceVersionChanged,
};
pub use reconciler::{ControllerSpec, Reconciler};
pub use retries::RequeueRequested;
pub use sources::{Owns, Watches};
pub use trigger::Trigger;
pub use wiring::Wiring;
pub(crate) use worker::panic_message;

/// An [`Api`] for `K` in `namespace` (all namespaces when `None`; ignored for cluster-scoped kinds).
pub fn api_for<K: Kind>(client: Client, namespace: Option<&str>) -> Api<K> {
    <K::Scope as Scoped>::api::<K>(client, namespace)
}

/// One [`Api`] for `K` per namespace of `namespaces` (one over all namespaces for
/// [`Namespaces::all`](crate::Namespaces::all) and for cluster-scoped kinds): what
/// `#[controller]` watches its kinds with, the [`Wiring::namespaces`] of its manager.
pub fn apis_for<K: Kind>(client: &Client, namespaces: &crate::Namespaces) -> crate::Apis<K> {
    namespaces.apis(client)
}
