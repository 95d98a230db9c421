//! Integration tests against the real local control plane (`controlplane/run`).
//!
//! Each module covers one topic; each test gets a fresh namespace from
//! [`kubeforge::testing::TestNamespace`]. Every test here checks a semantic that a server which
//! did not really implement Kubernetes would get wrong.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

mod admission_policies;
mod cel;
mod cel_cost;
mod cli;
mod client;
mod compat_oracle;
mod config_audit;
mod controller;
mod controlplane;
mod conversion;
mod conversion_reapply;
mod crd;
mod database;
mod dependents;
mod dependents_policy;
mod deploy;
mod dynamic;
mod events;
mod faults;
mod finalizers;
mod guestbook;
mod indexes;
mod informer;
mod leader;
mod lease_rbac;
mod manager;
mod markers;
mod memcached_backend;
mod namespaces;
mod otlp_traces;
mod own_writes;
mod printcolumns;
mod priority;
mod reconcile_errors;
mod retries;
#[allow(
    dead_code,
    reason = "the kind's controller runs in the traced-operator binary"
)]
#[path = "../rollout.rs"]
mod rollout;
mod root_rules;
mod secret_mirror;
mod selectors;
mod shard_ranges;
mod sharding;
mod sources;
mod stalled;
mod standby;
mod startup_once;
mod static_site;
mod stores;

mod upgrade;
mod views;
mod watcher;
mod webapp;
mod webhook_certs;
mod webhooks;

/// What users spawn must be `Send` (checked at compile time).
#[allow(dead_code)]
fn spawned_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    fn check(
        controller: kubeforge::controller::Controller<k8s_openapi::api::core::v1::ConfigMap>,
        manager: kubeforge::manager::Manager,
        reconciler: NoopReconciler,
    ) {
        let token = tokio_util::sync::CancellationToken::new();
        assert_send(&controller.run(reconciler, token.clone()));
        assert_send(&manager.run_until(token));
    }
    let _ = check;
}

#[allow(dead_code)]
struct NoopReconciler;

impl kubeforge::controller::Reconciler<k8s_openapi::api::core::v1::ConfigMap> for NoopReconciler {
    type Error = kube::Error;
    async fn reconcile(
        &self,
        _obj: std::sync::Arc<k8s_openapi::api::core::v1::ConfigMap>,
        _ctx: &kubeforge::controller::Context<k8s_openapi::api::core::v1::ConfigMap>,
    ) -> Result<kubeforge::controller::Action, kube::Error> {
        Ok(kubeforge::controller::Action::Done)
    }
}
