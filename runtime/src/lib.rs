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
//! - [`runner`]: MultiRunner, SingletonRunner and DynamicMultiRunner lifecycles.
//! - [`informer`]: list+watch of one kind into a store, with events for subscribers.
//! - [`cache`]: the shared informer registry of a manager.
//! - [`client`]: conflict-safe `update_object` and `apply_owned` for children.
//! - [`controller`]: `for` / `owns` / `watches` wiring, the reconcile loop and its retry rules.
//! - [`cli`] (feature `cli`): controller-runtime's flags for operator binaries, logging set-up.
//! - [`testing`] (feature `testing`): a real local control plane for integration tests, one fresh
//!   namespace per test, and CRD installation helpers.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use k8s_openapi;
pub use kube;

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
pub mod retry;
pub mod runner;
mod scope;
pub mod store;

pub use key::ObjectKey;
pub use scope::Scoped;

#[cfg(feature = "testing")]
pub mod testing;
