//! The Leases under the RBAC kubeforge derives (issue #48): an operator bound only to the
//! ClusterRole `crdgen --rbac` prints campaigns for its leader-election Lease and, in shard
//! mode, for its membership (before, that role had no Lease rules and both retried `403` for
//! ever); an operator refused its Lease stops at once with one error that names the Lease and
//! what to grant, instead of retrying.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::PostParams;
use kubeforge::crd::READY;
use kubeforge::leader::{LeaderElectionConfig, LeaderElectionError};
use kubeforge::manager::{Manager, ManagerError};
use kubeforge::shard::ShardConfig;
use kubeforge::testing::{ControlPlane, TestNamespace, apply_crds};
use kubeforge_examples::database::{Database, DatabaseController};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, generated_role_client};

/// A Database the operator reconciles: its `Ready` condition shows the operator works.
async fn reconciled(ns: &TestNamespace, name: &str) {
    let db: Database = serde_json::from_value(json!({
        "apiVersion": "apps.kubeforge.dev/v1", "kind": "Database",
        "metadata": { "name": name },
        "spec": { "version": "16", "replicas": 1, "storage": "1Gi" },
    }))
    .unwrap();
    let dbs = ns.api::<Database>();
    dbs.create(&PostParams::default(), &db).await.unwrap();
    eventually(
        "the Database to be reconciled",
        Duration::from_secs(60),
        async || {
            let db = dbs.get(name).await.ok()?;
            db.status?.conditions.get(READY).map(|_| ())
        },
    )
    .await;
}

#[tokio::test]
async fn an_operator_under_crdgens_role_should_lead_and_shard() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [Database::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let operator = generated_role_client::<Database>(&ns, "lease-operator").await;

    // Leader election: the Lease is taken and the controller runs.
    let shutdown = CancellationToken::new();
    let manager = Manager::new(operator.clone())
        .namespace(Some(ns.name().to_owned()))
        .leader_election(LeaderElectionConfig::new("lease-operator", ns.name()))
        .controller(DatabaseController);
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    reconciled(&ns, "led").await;
    let lease = ns.api::<Lease>().get("lease-operator").await.unwrap();
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some());
    shutdown.cancel();
    running.await.unwrap().unwrap();

    // Shard mode: membership Lease, the sharder's, and the listing of the members'.
    let shutdown = CancellationToken::new();
    let manager = Manager::new(operator)
        .namespace(Some(ns.name().to_owned()))
        .shards(ShardConfig::new("lease-shards", ns.name()).identity("solo"))
        .controller(DatabaseController);
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    reconciled(&ns, "sharded").await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_operator_refused_its_lease_should_stop_with_one_clear_error() {
    let ns = TestNamespace::new().await.unwrap();
    // An identity that may read Databases but not Leases.
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "no-leases" },
        "rules": [{ "apiGroups": ["apps.kubeforge.dev"], "resources": ["databases"], "verbs": ["get", "list", "watch"] }],
    }))
    .unwrap();
    ns.api::<Role>()
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "no-leases" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "no-leases" },
        "subjects": [{ "kind": "ServiceAccount", "name": "no-leases", "namespace": ns.name() }],
    }))
    .unwrap();
    ns.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let operator = ControlPlane::shared()
        .unwrap()
        .service_account_client(ns.name(), "no-leases")
        .await
        .unwrap();

    let manager = Manager::new(operator)
        .namespace(Some(ns.name().to_owned()))
        .leader_election(LeaderElectionConfig::new("refused", ns.name()));
    // Without the fix the campaign retries for ever: the bound only keeps a failure readable.
    let outcome = tokio::time::timeout(
        Duration::from_secs(120),
        manager.run_until(CancellationToken::new()),
    )
    .await
    .expect("the manager stops on its own");
    match outcome {
        Err(ManagerError::LeaderElection(error @ LeaderElectionError::Refused { .. })) => {
            let message = error.to_string();
            for part in [
                &format!("{}/refused", ns.name()),
                "403",
                "forbidden",
                "grant get, list, watch, create, update and delete on leases",
            ] {
                assert!(message.contains(part), "{part:?} missing from: {message}");
            }
        }
        other => panic!("expected the Lease's refusal, got {other:?}"),
    }
}
