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
//! - [`schema`]: the same markers, schema and validation for the types inside a spec or status.
#![cfg_attr(docsrs, feature(doc_cfg))]

// Generated code names `::kubeforge::...`; this lets the crate use its own macros.
extern crate self as kubeforge;

pub use k8s_openapi;
pub use kube;
pub use kubeforge_macros::{custom_resource, schema};

pub mod crd;
pub mod crdgen;

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
