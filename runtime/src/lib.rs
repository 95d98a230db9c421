//! # kubeforge
//!
//! Declarative Kubernetes operators in Rust. A spec struct annotated with `#[custom_resource]`
//! becomes a complete CRD kind; an impl block annotated with `#[controller]` becomes a controller
//! that runs through shared informers, a deduplicating work queue and a retry processor.
//!
//! This is the only crate an operator depends on: it re-exports the macros and the crates operator
//! code names ([`kube`], [`k8s_openapi`], [`tokio`], [`serde`], [`serde_json`], [`tracing`],
//! [`schemars`]; `clap` as [`cli::clap`]) so that versions always match, and [`prelude`] holds
//! the names an operator uses all the time. Differences from depending on those crates directly:
//! the entry point is `#[kubeforge::tokio::main(crate = "kubeforge::tokio")]`, and serde derives
//! on your own types (not kinds: `#[custom_resource]` and `#[schema]` derive serde themselves)
//! need `#[serde(crate = "kubeforge::serde")]`.
//!
//! ```no_run
//! use kubeforge::k8s_openapi::api::core::v1::ConfigMap;
//! use kubeforge::prelude::*;
//! use kubeforge::{kube, tracing};
//! use std::sync::Arc;
//!
//! struct Audit;
//!
//! impl Reconciler<ConfigMap> for Audit {
//!     type Error = kube::Error;
//!
//!     async fn reconcile(
//!         &self,
//!         cm: Arc<ConfigMap>,
//!         _: &Context<ConfigMap>,
//!     ) -> Result<Action, kube::Error> {
//!         tracing::info!(name = %cm.name_any(), "seen");
//!         Ok(Action::Done)
//!     }
//! }
//!
//! #[kubeforge::tokio::main(crate = "kubeforge::tokio")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = kubeforge::client::connect(kube::Config::infer().await?)?;
//!     let manager = Manager::new(client.clone());
//!     let controller = Controller::new(
//!         "audit",
//!         manager.wiring(),
//!         Api::<ConfigMap>::all(client),
//!         InformerConfig::default(),
//!     );
//!     manager.add_controller(controller, Audit).run().await?;
//!     Ok(())
//! }
//! ```
//!
//! ## The main path
//!
//! An event travels through these, in this order (the guide of each is in its module docs):
//!
//! 1. [`informer`]: list+watch of one kind (a client from [`client::connect`] notices dead
//!    connections), decoded leniently when needed, fanned out to subscribers;
//! 2. [`store`]: the cached objects the informer writes (`Store`, indexed `MemoryStore`,
//!    `SkeletonStore` for uncached owned kinds);
//! 3. [`cache`]: the manager's registry of shared informers, one per kind, namespace and selectors;
//! 4. [`controller`](mod@controller): `for` / `owns` / `watches` turn events into keys; workers
//!    reconcile the latest cached object, with finalizers, and decide the key's next step;
//! 5. [`queue`]: the deduplicating, delaying work queue between the two, and [`retry`]: the
//!    retry processor a failed key waits in, under the controller's retry and dequeue policies;
//! 6. [`manager`]: the shared cache, the controllers, leader election ([`leader`]), metrics
//!    ([`metrics`]), probes ([`health`]) and the process lifecycle.
//!
//! ## Around it
//!
//! - [`prelude`]: `use kubeforge::prelude::*;`, the names an operator uses all the time.
//! - [`client`]: `connect`; conflict-safe `update_object`, and `apply_owned` / `create_owned`
//!   (create once, never overwrite) for children.
//! - [`dependents`]: children declared as desired-state functions (`#[controller(dependents(..))]`
//!   or by hand), applied in dependency order with create-only, activation, readiness and the
//!   primary's `Ready` / `Progressing` / `Degraded` conditions.
//! - [`events`]: an events.k8s.io/v1 recorder that aggregates repeats.
//! - [`crd`]: CustomResourceDefinitions from Rust types — the structural schema pass, the
//!   registry of kinds, the ready [`crd::Condition`] type for status structs; [`crdgen`], the
//!   `crdgen` binary's logic; [`rbac`], RBAC rules derived from controller wiring.
//! - [`cli`] (feature `cli`): controller-runtime's flags for operator binaries, logging set-up.
//! - [`testing`] (feature `testing`): a real local control plane for integration tests, one fresh
//!   namespace per test, CRD installation, a fault proxy.
//! - [`views`]: view types, typed projections of a kind that cache only the fields an operator
//!   reads (`#[kubeforge::view(of = Pod)]`), read-only.
//! - [`watcher`]: event handlers (add / update / delete / sync) instead of a reconciler, through
//!   [`dispatch`] (per-object-ordered concurrent dispatch) and the retry processor.
//! - [`runner`]: `MultiRunner` (the manager's), `SingletonRunner`, `DynamicMultiRunner`.
//! - [`webhook`]: admission webhooks (`Validator`, `Defaulter`) and conversion between the
//!   versions of a kind, served by the manager over HTTPS with certificates it manages itself;
//!   [`crd::migrate_storage`] for a storage-version change (a manager runs it on its own:
//!   `Manager::storage_migration`).
//!
//! ## Cargo features
//!
//! On by default: `webhooks` (the manager's webhook server and its certificates), `cel`
//! (client-side evaluation of CEL rules in [`crd::Validate`]; the apiserver enforces them either
//! way) and `crdgen`. Off by default: `cli`, `memcached`, `anyhow`, `testing`. An operator that
//! does not serve webhooks leaves the defaults out (`default-features = false`) and saves their
//! build and link time.
//!
//! ## Macros
//!
//! - [`custom_resource`]: a complete kind from a spec struct (see its docs for every key and the
//!   field markers);
//! - [`controller`](macro@controller): controller wiring on an impl block (`for`, `owns`,
//!   `watches`, finalizer, predicates) and the RBAC rules it needs;
//! - [`schema`]: the same markers, schema and validation for the types inside a spec or status;
//! - [`view`](macro@view): a read-only projection of a kind, checked against it (see [`views`]).
#![cfg_attr(docsrs, feature(doc_cfg))]

// Generated code names `::kubeforge::...`; this lets the crate use its own macros.
extern crate self as kubeforge;

pub use k8s_openapi;
pub use kube;
pub use kubeforge_macros::{controller, custom_resource, schema, view};
pub use schemars;
pub use serde;
pub use serde_json;
pub use tokio;
pub use tracing;

pub mod crd;
#[cfg(feature = "crdgen")]
pub mod crdgen;
pub mod dependents;

pub mod cache;
#[cfg(feature = "cli")]
pub mod cli;
pub mod client;
pub mod controller;
pub mod dispatch;
mod error;
pub mod events;
pub mod health;
pub mod informer;
mod key;
pub mod leader;
pub mod manager;
pub mod memory;
pub mod metrics;
mod namespaces;
pub mod otlp;
pub mod queue;
pub mod rbac;
pub mod retry;
pub mod runner;
mod scope;
pub mod shard;
pub mod store;
mod task;
mod text;
pub mod views;
pub mod watcher;
pub mod webhook;
mod writes;

pub use error::ReconcileError;
pub use key::ObjectKey;
pub use namespaces::{Apis, IntoApis, Namespaces};
pub use scope::{AnyKind, KindType, Scoped};

/// A boxed error that can cross tasks (what runnables, retry callbacks and the client's
/// middleware return).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[cfg(feature = "testing")]
pub mod testing;

pub mod prelude {
    //! The names an operator uses all the time: `use kubeforge::prelude::*;`.
    //!
    //! The controller vocabulary ([`Controller`], [`Reconciler`], [`Context`], [`Action`],
    //! [`ControllerConfig`], [`Owns`], [`Watches`], [`Wiring`], [`InformerConfig`]), the
    //! [`Manager`], the shared [`Cache`], its [`Lookup`]s and store [`Reader`]s (`watches` mappers
    //! get the cache, reconcilers read it), [`ObjectKey`], events
    //! ([`Recorder`], [`EventType`]), kube's client types and traits ([`Api`], [`Client`],
    //! [`Resource`], [`ResourceExt`], [`Patch`], [`PatchParams`]), [`BoxError`] (what a
    //! dependent, a reconcile or a cleanup may fail with when any error will do), and the macros.
    //!
    //! Crates are not in it: import the ones you use by name
    //! (`use kubeforge::{serde_json, tracing};`). A crate name brought in by a glob would be
    //! ambiguous with a dependency of the same name in every `use` path that starts with it.

    pub use crate::cache::{Cache, Lookup};
    pub use crate::controller::{
        Action, Context, Controller, ControllerConfig, Owns, Reconciler, Watches, Wiring,
    };
    pub use crate::events::{EventType, Recorder};
    pub use crate::informer::InformerConfig;
    pub use crate::manager::Manager;
    pub use crate::store::Reader;
    pub use crate::{BoxError, ObjectKey};
    pub use kube::api::{Patch, PatchParams};
    pub use kube::{Api, Client, Resource, ResourceExt};
    // The macros only: `crate::controller` would bring the module `controller` along.
    pub use kubeforge_macros::{controller, custom_resource, schema};
}

/// What generated code needs, re-exported so that users do not depend on these crates directly.
/// Not public API.
#[doc(hidden)]
pub mod __private {
    pub use garde;
    pub use inventory;
    pub use k8s_openapi;
    pub use kube;
    pub use schemars;
    pub use serde;
    pub use serde_json;

    /// The error type of a `Result`: `#[controller]` names a one-parameter alias's
    /// (`anyhow::Result<Action>`) as `<anyhow::Result<Action> as ResultError>::Error`.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a `Result`",
        label = "a `#[controller]` method returns a `Result`"
    )]
    pub trait ResultError {
        /// `E` of `Result<T, E>`.
        type Error;
    }

    impl<T, E> ResultError for Result<T, E> {
        type Error = E;
    }
}
