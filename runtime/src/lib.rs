//! # kubeforge
//!
//! Declarative Kubernetes operators in Rust. A spec struct annotated with `#[custom_resource]`
//! becomes a complete CRD kind; an impl block annotated with `#[controller]` becomes a controller
//! that runs through shared informers, a deduplicating work queue and a retry processor.
//!
//! This is the only crate an operator depends on: it re-exports the macros and the Kubernetes crates
//! it is built on ([`kube`], [`k8s_openapi`]) so that versions always match.
//!
//! ## Modules
//!
//! - [`store`]: the cache store (`Store` trait, indexed in-memory `MemoryStore`).
//! - [`queue`]: the deduplicating, rate-limited work queue.
//! - [`retry`]: the sharded retry processor with retry and dequeue policies.
//! - [`dispatch`]: concurrent per-object-ordered event dispatch.
//! - [`events`]: an events.k8s.io/v1 recorder that aggregates repeats.
//! - [`leader`]: leader election on a coordination.k8s.io/v1 Lease.
//! - [`health`]: `/healthz` and `/readyz` probes.
//! - [`manager`]: the shared cache, the controllers and the process lifecycle.
//! - [`metrics`]: Prometheus metrics with controller-runtime's names.
//! - [`rbac`]: RBAC rules derived from controller wiring (`crdgen --rbac`).
//! - [`runner`]: MultiRunner, SingletonRunner and DynamicMultiRunner lifecycles.
//! - [`informer`]: list+watch of one kind into a store, with events for subscribers.
//! - [`cache`]: the shared informer registry of a manager.
//! - [`client`]: `connect`, a client that notices dead connections in seconds; conflict-safe
//!   `update_object` and `apply_owned` for children.
//! - [`controller`](mod@controller): `for` / `owns` / `watches` wiring, the reconcile loop and its retry rules.
//! - [`cli`] (feature `cli`): controller-runtime's flags for operator binaries, logging set-up.
//! - [`crd`]: CustomResourceDefinitions from Rust types — the structural schema pass, the
//!   registry of kinds, the ready [`crd::Condition`] type for status structs.
//! - [`crdgen`]: the `crdgen` binary's logic (`kubeforge::crdgen::main()`).
//! - [`testing`] (feature `testing`): a real local control plane for integration tests, one fresh
//!   namespace per test, and CRD installation helpers.
//!
//! ## Macros
//!
//! - [`custom_resource`]: a complete kind from a spec struct (see its docs for every key and the
//!   field markers);
//! - [`controller`](macro@controller): controller wiring on an impl block (`for`, `owns`,
//!   `watches`, finalizer, predicates) and the RBAC rules it needs;
//! - [`schema`]: the same markers, schema and validation for the types inside a spec or status.
#![cfg_attr(docsrs, feature(doc_cfg))]

// Generated code names `::kubeforge::...`; this lets the crate use its own macros.
extern crate self as kubeforge;

pub use k8s_openapi;
pub use kube;
pub use kubeforge_macros::{controller, custom_resource, schema};

pub mod crd;
pub mod crdgen;

pub mod cache;
#[cfg(feature = "cli")]
pub mod cli;
pub mod client;
pub mod controller;
pub mod dispatch;
pub mod events;
pub mod health;
pub mod informer;
mod key;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod queue;
pub mod rbac;
pub mod retry;
pub mod runner;
mod scope;
pub mod store;

pub use key::ObjectKey;
pub use scope::Scoped;

#[cfg(feature = "testing")]
pub mod testing;

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
}
