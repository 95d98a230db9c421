//! The Database example operator (`examples/src/database.rs`), written with
//! `#[controller(dependents(..))]`, running under a ServiceAccount bound only to the ClusterRole
//! `crdgen --rbac` prints: its dependents in `depends_on` order, Ready naming the StatefulSet
//! (no kubelet runs its pods here), the create-only password across a spec edit and an operator
//! restart, a labelled ConfigMap rolling the pods, the backup CronJob deleted when `backup` is
//! unset, a hand-deleted Service restored, `Created` events, and the finalizer deleting the
//! volumes.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kubeforge::crd::{ConditionStatus, READY};
use kubeforge::manager::Manager;
use kubeforge::testing::{TestNamespace, apply_crds};
use kubeforge_examples::database::{Database, DatabaseController, LABEL};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, generated_role_client};

/// Runs the operator until the token is cancelled.
fn run(operator: &Client, ns: &TestNamespace) -> CancellationToken {
    let manager = Manager::new(operator.clone())
        .namespace(Some(ns.name().to_owned()))
        .controller(DatabaseController);
    let shutdown = CancellationToken::new();
    tokio::spawn(manager.run_until(shutdown.clone()));
    shutdown
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: the Database operator under its generated RBAC, dependent by dependent"
)]
async fn database_operator_should_apply_its_dependents_under_its_generated_rbac() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [Database::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let operator = generated_role_client::<Database>(&ns, "database-operator").await;
    let shutdown = run(&operator, &ns);

    let dbs = ns.api::<Database>();
    let db: Database = serde_json::from_value(json!({
        "apiVersion": "apps.kubeforge.dev/v1", "kind": "Database",
        "metadata": { "name": "orders" },
        "spec": { "version": "16", "replicas": 2, "storage": "1Gi", "backup": "0 3 * * *" },
    }))
    .unwrap();
    dbs.create(&PostParams::default(), &db).await.unwrap();

    // Everything applied; the StatefulSet is not ready (no kubelet), and Ready says so.
    let status = eventually(
        "Ready=False naming the StatefulSet",
        Duration::from_secs(60),
        async || {
            let db = dbs.get("orders").await.ok()?;
            let status = db.status?;
            let ready = status.conditions.get(READY)?;
            (status.observed_generation == db.metadata.generation
                && ready.status == ConditionStatus::False
                && ready.reason == "StatefulsetNotReady")
                .then_some(status)
        },
    )
    .await;
    assert_eq!(status.phase.as_deref(), Some("Provisioning"));
    let cronjobs = ns.api::<CronJob>();
    let backup = eventually("the backup CronJob", Duration::from_secs(30), async || {
        cronjobs.get_opt("orders-backup").await.ok()?
    })
    .await;
    let secrets = ns.api::<Secret>();
    let password = secrets.get("orders-password").await.unwrap();
    let service = ns.api::<Service>().get("orders").await.unwrap();
    let statefulsets = ns.api::<StatefulSet>();
    let sts = statefulsets.get("orders").await.unwrap();
    let rv = |o: Option<String>| o.unwrap().parse::<u64>().unwrap();
    let order = [
        rv(password.resource_version()),
        rv(service.resource_version()),
        rv(sts.metadata.resource_version.clone()),
        rv(backup.resource_version()),
    ];
    assert!(
        order.is_sorted(),
        "created out of depends_on order: {order:?}"
    );
    for owners in [
        password.owner_references(),
        service.owner_references(),
        sts.owner_references(),
        backup.owner_references(),
    ] {
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].controller),
            ("Database", Some(true))
        );
    }
    let events = ns.api::<Event>();
    eventually(
        "a Created event per dependent",
        Duration::from_secs(30),
        async || {
            let list = events.list(&ListParams::default()).await.ok()?;
            let created = list
                .items
                .iter()
                .filter(|e| e.reason.as_deref() == Some("Created"))
                .count();
            (created >= 4).then_some(())
        },
    )
    .await;

    // A labelled ConfigMap rolls the pods: the template's digest changes and mounts it.
    let digest = |sts: &StatefulSet| {
        sts.spec
            .template
            .metadata
            .as_ref()?
            .annotations
            .as_ref()?
            .get("db.kubeforge.dev/config")
            .cloned()
    };
    let before = digest(&sts);
    let mut cm: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "orders-tuning", "labels": { LABEL: "orders" } },
        "data": { "postgresql.conf": "max_connections = 50" },
    }))
    .unwrap();
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    eventually(
        "the config to roll the pods",
        Duration::from_secs(30),
        async || {
            let sts = statefulsets.get("orders").await.ok()?;
            (digest(&sts) != before
                && serde_json::to_string(&sts.spec)
                    .ok()?
                    .contains("orders-tuning"))
            .then_some(())
        },
    )
    .await;
    cm.data = Some(
        [(
            "postgresql.conf".to_owned(),
            "max_connections = 80".to_owned(),
        )]
        .into(),
    );
    let rolled = statefulsets.get("orders").await.unwrap();
    ns.api::<ConfigMap>()
        .replace("orders-tuning", &PostParams::default(), &{
            let mut cm = cm.clone();
            cm.metadata.resource_version = ns
                .api::<ConfigMap>()
                .get("orders-tuning")
                .await
                .unwrap()
                .resource_version();
            cm
        })
        .await
        .unwrap();
    eventually(
        "a config change to roll them again",
        Duration::from_secs(30),
        async || {
            let sts = statefulsets.get("orders").await.ok()?;
            (digest(&sts) != digest(&rolled)).then_some(())
        },
    )
    .await;

    // A spec edit: the StatefulSet follows, the password does not; backups off deletes the CronJob.
    dbs.patch(
        "orders",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "replicas": 3, "backup": null } })),
    )
    .await
    .unwrap();
    eventually(
        "the CronJob deleted and 3 replicas",
        Duration::from_secs(30),
        async || {
            let gone = cronjobs.get_opt("orders-backup").await.ok()?.is_none();
            let sts = statefulsets.get("orders").await.ok()?;
            (gone && sts.spec.replicas == Some(3)).then_some(())
        },
    )
    .await;

    // A restart of the operator (a fresh cache) keeps the password; a deleted Service comes back.
    shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let shutdown = run(&operator, &ns);
    let services = ns.api::<Service>();
    services
        .delete("orders", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the Service restored",
        Duration::from_secs(30),
        async || {
            services
                .get_opt("orders")
                .await
                .ok()?
                .filter(|s| s.uid() != service.uid())
        },
    )
    .await;
    let after = secrets.get("orders-password").await.unwrap();
    assert_eq!(after.resource_version(), password.resource_version());
    assert_eq!(after.data, password.data, "the generated password changed");

    // The finalizer deletes the volumes the StatefulSet leaves behind.
    let claims = ns.api::<PersistentVolumeClaim>();
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": { "name": "data-orders-0", "labels": { LABEL: "orders" } },
        "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } },
    }))
    .unwrap();
    if claims.get_opt("data-orders-0").await.unwrap().is_none() {
        claims.create(&PostParams::default(), &claim).await.unwrap();
    }
    dbs.delete("orders", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the Database gone with its volumes",
        Duration::from_secs(60),
        async || {
            let gone = dbs.get_opt("orders").await.ok()?.is_none();
            let lp = ListParams::default().labels(&format!("{LABEL}=orders"));
            let left = claims.list(&lp).await.ok()?;
            let deleting = left
                .items
                .iter()
                .all(|c| c.metadata.deletion_timestamp.is_some());
            (gone && deleting).then_some(())
        },
    )
    .await;
    shutdown.cancel();
}
