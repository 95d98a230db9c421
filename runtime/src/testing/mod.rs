//! Integration-test support against a real local control plane.
//!
//! Kubernetes semantics — resourceVersion conflicts, watch expiry, the status subresource, CRD
//! structural-schema validation, CEL rules, owner-reference garbage collection — cannot be mocked
//! faithfully, so kubeforge's own tests (and your operator's) run against a real `kube-apiserver`,
//! `etcd` and `kube-controller-manager` built from the upstream Go modules and started on loopback
//! by `controlplane/run` (see the book's docs/src/repository.md).
//!
//! - [`ControlPlane::shared`] starts the plane, or reuses a running one, once per test binary.
//! - [`TestNamespace::new`] gives a test a [`kube::Client`] and a fresh namespace, deleted when the
//!   value is dropped (also when the test panics).
//! - [`apply_crds`] installs CustomResourceDefinitions and waits until they are Established.
//! - [`WebhookCleanup`] removes what a test's webhook-serving manager leaves on the shared plane
//!   (its configurations, its CRDs' conversion endpoint), at the end of the test or on a panic.
//! - [`FaultProxy`] sits between an operator and the apiserver and black-holes connections on
//!   demand, for tests of how an operator survives a network that silently stops.
//! - [`MemcachedServer`] runs a real `memcached` on loopback (stopped, restarted or emptied on
//!   demand), for tests of the memcached store backend; it needs the `memcached` binary
//!   (`apt-get install memcached`, or `KUBEFORGE_MEMCACHED`).
//!
//! # Environment
//!
//! | variable | effect |
//! |---|---|
//! | `KUBEFORGE_TEST_KUBECONFIG` | use this kubeconfig instead of starting the local plane |
//! | `KUBEFORGE_CONTROLPLANE` | path of the `controlplane/run` script (default: the one in this repository) |
//! | `KUBEFORGE_KEEP_PLANE` | when set, a plane started by the tests keeps running after the test binary exits |
//! | `KUBEFORGE_MEMCACHED` | path of the `memcached` binary that [`MemcachedServer`] runs (default: `memcached` on `PATH`, else `/usr/bin/memcached`) |
//!
//! A plane that the test binary started itself is stopped when that process exits; one that was
//! already running (for example from `controlplane/run up`) is reused and left running.
//!
//! # Examples
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubeforge::testing::TestNamespace;
//!
//! # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
//! let ns = TestNamespace::new().await?;
//! let configmaps = ns.api::<ConfigMap>();
//! assert!(configmaps.list(&Default::default()).await?.items.is_empty());
//! # Ok(()) }
//! ```

mod crd;
mod error;
mod memcached;
mod namespace;
mod plane;
mod proxy;
mod webhooks;

pub use crd::apply_crds;
pub use error::TestingError;
pub use memcached::MemcachedServer;
pub use namespace::{TEST_NAMESPACE_LABEL, TestNamespace};
pub use plane::ControlPlane;
pub use proxy::FaultProxy;
pub use webhooks::WebhookCleanup;

/// Shows the logs of the code under test (the operator's reconciles, its informers,
/// kubeforge's warnings) in the test's output, where libtest prints them for a failing test
/// only: without it a failing reconcile shows only as a timeout. The level comes from
/// `RUST_LOG`, else `info` (kube's and hyper's own lines from `warn`). Call it first in each
/// test; calls after the first (in the same test binary) do nothing.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn,hyper=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}
