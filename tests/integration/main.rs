//! Integration tests against the real local control plane (`controlplane/run`).
//!
//! Each module covers one topic; each test gets a fresh namespace from
//! [`kubeforge::testing::TestNamespace`]. Every test here checks a semantic that a server which
//! did not really implement Kubernetes would get wrong.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

mod controlplane;
mod crd;
