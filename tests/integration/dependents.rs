//! Declarative dependents (`kubeforge::dependents`) on the real apiserver: applied in
//! `depends_on` order, a create-only Secret that survives spec edits and restarts, an activation
//! condition that deletes its dependent, Ready conditions naming what is not ready, a dependent
//! deleted by hand restored, a failing one reported as Degraded, and no reconcile loop from the
//! framework's own writes; a conflict with an object the primary does not own is rechecked at
//! a fixed interval, not retried as an error; the applies' field manager is settable, so that
//! objects taken over from a hand-written operator keep one manager.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kubeforge::controller::{
    Action, Context, Controller, ControllerConfig, Idle, Owns, Reconciler, Wiring,
};
use kubeforge::crd::{Conditions, READY};
use kubeforge::dependents::{Dependent, Dependents, DependentsError};
use kubeforge::informer::InformerConfig;
use kubeforge::testing::{TestNamespace, apply_crds};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;

/// A database: a generated password Secret, a Service, a ConfigMap that is ready once someone
/// marks it, and a backup CronJob while `backup` is on.
#[kubeforge::custom_resource(
    group = "deps-test.kubeforge.dev",
    version = "v1",
    kind = "Database",
    namespaced,
    status = DatabaseStatus
)]
#[derive(Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseSpec {
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub backup: bool,
    /// A dependent with a name the apiserver refuses (Degraded).
    #[serde(default)]
    pub broken: bool,
}

#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub conditions: Conditions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret: Option<String>,
}

/// The controller: its dependents, a count of reconciles and of the dependents they wrote.
struct Db {
    dependents: Dependents<Database, Db>,
    reconciles: Arc<AtomicU32>,
    writes: Arc<AtomicU32>,
    /// Reconciles that failed because of a conflict.
    errors: Arc<AtomicU32>,
}

fn named<T: Default + kube::Resource>(name: String) -> T {
    let mut object = T::default();
    object.meta_mut().name = Some(name);
    object
}

fn secret(_: &Db, db: &Database, _: &Context<Database>) -> Secret {
    // A new password at every call: only create-only keeps the first.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let mut secret: Secret = named(format!("{}-password", db.name_any()));
    secret.string_data = Some([("password".to_owned(), format!("pw-{nanos}"))].into());
    secret
}

fn config(_: &Db, db: &Database, _: &Context<Database>) -> ConfigMap {
    let mut cm: ConfigMap = named(format!("{}-config", db.name_any()));
    cm.data = Some([("version".to_owned(), db.spec.version.clone())].into());
    cm
}

fn service(_: &Db, db: &Database, _: &Context<Database>) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": db.name_any() },
        "spec": { "clusterIP": "None", "selector": { "db": db.name_any() }, "ports": [{ "port": 5432 }] },
    }))
    .unwrap()
}

fn backup(_: &Db, db: &Database, _: &Context<Database>) -> CronJob {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": { "name": format!("{}-backup", db.name_any()) },
        "spec": {
            "schedule": "0 0 1 1 *",
            "jobTemplate": { "spec": { "template": { "spec": {
                "restartPolicy": "Never",
                "containers": [{ "name": "backup", "image": "busybox" }],
            }}}},
        },
    }))
    .unwrap()
}

/// A Secret built with `stringData`, which the apiserver stores as `data`: compared as stored,
/// it is not rewritten at every reconcile.
fn token(_: &Db, db: &Database, _: &Context<Database>) -> Secret {
    let mut secret: Secret = named(format!("{}-token", db.name_any()));
    secret.string_data = Some([("token".to_owned(), "fixed".to_owned())].into());
    secret
}

fn broken(_: &Db, _: &Database, _: &Context<Database>) -> ConfigMap {
    named("Not_A_Valid_Name".to_owned())
}

/// How long after a conflict the primary is checked again, in these tests.
const RECHECK: Duration = Duration::from_secs(2);

fn dependents() -> Dependents<Database, Db> {
    declared().build().unwrap()
}

fn declared() -> kubeforge::dependents::DependentsBuilder<Database, Db> {
    Dependents::new()
        // Declared out of order: `config` waits for the secret, so the secret comes first.
        .with(
            Dependent::new("config", config)
                .depends_on(&["secret"])
                .ready(|cm: &ConfigMap| {
                    cm.annotations()
                        .get("test/ready")
                        .is_some_and(|v| v == "yes")
                }),
        )
        .with(Dependent::new("secret", secret).create_only())
        .with(Dependent::new("token", token))
        .with(Dependent::new("service", service).ready_builtin())
        .with(Dependent::new("backup", backup).when(|_, db: &Database| db.spec.backup))
        .with(Dependent::new("broken", broken).when(|_, db: &Database| db.spec.broken))
        .conflict_recheck(RECHECK)
}

impl Reconciler<Database> for Db {
    type Error = DependentsError;

    async fn reconcile(
        &self,
        db: Arc<Database>,
        ctx: &Context<Database>,
    ) -> Result<Action, DependentsError> {
        self.reconciles.fetch_add(1, Ordering::SeqCst);
        let done = self
            .dependents
            .run(self, &db, ctx, |done, status| {
                status.password_secret = done.get::<Secret>("secret").map(|s| s.name_any());
            })
            .await
            .inspect_err(|e| {
                // Failures because of a conflict (what a conflict was before it was rechecked).
                if e.to_string().contains("not owned by") {
                    self.errors.fetch_add(1, Ordering::SeqCst);
                }
            })?;
        let written = done.outcomes.iter().filter(|o| o.written).count();
        self.writes.fetch_add(written as u32, Ordering::SeqCst);
        Ok(done.action())
    }
}

struct Running {
    shutdown: CancellationToken,
    idle: Idle,
    reconciles: Arc<AtomicU32>,
    writes: Arc<AtomicU32>,
    errors: Arc<AtomicU32>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start(ns: &TestNamespace) -> Running {
    start_with(ns, dependents()).await
}

async fn start_with(ns: &TestNamespace, dependents: Dependents<Database, Db>) -> Running {
    apply_crds(&ns.client(), [Database::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let wiring = Wiring::new(ns.client());
    let controller = Controller::new(
        "databases",
        &wiring,
        ns.api::<Database>(),
        InformerConfig::default(),
    )
    .owns(ns.api::<Secret>(), Owns::full())
    .owns(ns.api::<ConfigMap>(), Owns::full())
    .owns(ns.api::<Service>(), Owns::full())
    .owns(ns.api::<CronJob>(), Owns::full())
    .config(
        ControllerConfig::default().retry(kubeforge::retry::ExponentialRetry::new(
            Duration::from_millis(50),
            Duration::from_secs(2),
            u32::MAX,
        )),
    );
    let reconciles = Arc::new(AtomicU32::new(0));
    let writes = Arc::new(AtomicU32::new(0));
    let errors = Arc::new(AtomicU32::new(0));
    let shutdown = CancellationToken::new();
    let idle = controller.idle();
    let db = Db {
        dependents,
        reconciles: Arc::clone(&reconciles),
        writes: Arc::clone(&writes),
        errors: Arc::clone(&errors),
    };
    tokio::spawn(controller.run(db, shutdown.clone()));
    Running {
        shutdown,
        idle,
        reconciles,
        writes,
        errors,
    }
}

fn database(name: &str, backup: bool) -> Database {
    let mut db = Database::new(
        name,
        DatabaseSpec {
            version: "16".into(),
            backup,
            broken: false,
        },
    );
    db.metadata.name = Some(name.into());
    db
}

/// The Ready condition's (status, reason, message) once `check` accepts it.
async fn ready_when(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&kubeforge::crd::Condition) -> bool,
) -> kubeforge::crd::Condition {
    let api = ns.api::<Database>();
    eventually(what, Duration::from_secs(30), async || {
        let db = api.get(name).await.ok()?;
        let status = db.status?;
        (status.observed_generation == db.metadata.generation)
            .then(|| status.conditions.get(READY).cloned())
            .flatten()
            .filter(|c| check(c))
    })
    .await
}

fn mark_ready() -> Patch<serde_json::Value> {
    Patch::Merge(json!({ "metadata": { "annotations": { "test/ready": "yes" } } }))
}

/// The Database `name`'s `Degraded` condition once it is `True`.
async fn degraded(api: &kube::Api<Database>, name: &str) -> kubeforge::crd::Condition {
    eventually("Degraded=True", Duration::from_secs(30), async || {
        let status = api.get(name).await.ok()?.status?;
        status
            .conditions
            .get(kubeforge::dependents::DEGRADED)
            .filter(|c| c.status == kubeforge::crd::ConditionStatus::True)
            .cloned()
    })
    .await
}

#[tokio::test]
async fn dependents_should_be_applied_in_order_and_ready_should_name_what_is_not() {
    let ns = TestNamespace::new().await.unwrap();
    let running = start(&ns).await;
    ns.api::<Database>()
        .create(&PostParams::default(), &database("orders", false))
        .await
        .unwrap();

    let not_ready = ready_when(&ns, "orders", "Ready=False naming config", |c| {
        c.reason == "ConfigNotReady"
    })
    .await;
    assert!(
        not_ready.message.contains("config is not ready"),
        "{not_ready:?}"
    );
    // Applied in dependency order: etcd revisions grow with every write.
    let rv = |rv: Option<String>| rv.unwrap().parse::<u64>().unwrap();
    let secret = ns.api::<Secret>().get("orders-password").await.unwrap();
    let config = ns.api::<ConfigMap>().get("orders-config").await.unwrap();
    let service = ns.api::<Service>().get("orders").await.unwrap();
    let (s, c, v) = (
        rv(secret.resource_version()),
        rv(config.resource_version()),
        rv(service.resource_version()),
    );
    assert!(s < c && c < v, "secret {s}, config {c}, service {v}");
    for owner in [
        secret.owner_references(),
        config.owner_references(),
        service.owner_references(),
    ] {
        assert_eq!(owner.len(), 1);
        assert_eq!(owner[0].kind, "Database");
        assert_eq!(owner[0].controller, Some(true));
    }
    assert!(
        ns.api::<CronJob>()
            .get_opt("orders-backup")
            .await
            .unwrap()
            .is_none(),
        "an inactive dependent is not created"
    );

    // Another client marks the config ready: Ready turns True.
    ns.api::<ConfigMap>()
        .patch("orders-config", &PatchParams::default(), &mark_ready())
        .await
        .unwrap();
    let ready = ready_when(&ns, "orders", "Ready=True", |c| {
        c.reason == "AllDependentsReady"
    })
    .await;
    assert_eq!(ready.status, kubeforge::crd::ConditionStatus::True);
    let status = ns
        .api::<Database>()
        .get("orders")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.password_secret.as_deref(), Some("orders-password"));

    // No loop from the framework's own writes: once idle, the count stays put.
    running.idle.wait(Duration::from_millis(500)).await;
    let settled = running.reconciles.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        running.reconciles.load(Ordering::SeqCst),
        settled,
        "reconciles went on with nothing changing"
    );
    // A reconcile with nothing to change writes nothing: each stored dependent already holds
    // what the desired one sets (the Service's defaults and the marked annotation aside).
    let writes = running.writes.load(Ordering::SeqCst);
    ns.api::<Database>()
        .patch(
            "orders",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "poke": "1" } } })),
        )
        .await
        .unwrap();
    eventually(
        "a reconcile of the poke",
        Duration::from_secs(30),
        async || (running.reconciles.load(Ordering::SeqCst) > settled).then_some(()),
    )
    .await;
    running.idle.wait(Duration::from_millis(500)).await;
    assert_eq!(
        running.writes.load(Ordering::SeqCst),
        writes,
        "a reconcile rewrote unchanged dependents"
    );
    eprintln!("{settled} reconciles and {writes} dependent writes to converge");
}

#[tokio::test]
async fn a_create_only_secret_should_survive_spec_edits_and_restarts() {
    let ns = TestNamespace::new().await.unwrap();
    let running = start(&ns).await;
    let api = ns.api::<Database>();
    api.create(&PostParams::default(), &database("users", false))
        .await
        .unwrap();
    let secrets = ns.api::<Secret>();
    let first = eventually("the password", Duration::from_secs(30), async || {
        secrets.get_opt("users-password").await.ok()?
    })
    .await;

    // A spec edit changes the config; the secret stays as it was.
    api.patch(
        "users",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "version": "17" } })),
    )
    .await
    .unwrap();
    let configs = ns.api::<ConfigMap>();
    eventually(
        "the config to follow the spec",
        Duration::from_secs(30),
        async || {
            let cm = configs.get("users-config").await.ok()?;
            (cm.data?.get("version")? == "17").then_some(())
        },
    )
    .await;
    running.idle.wait(Duration::from_millis(300)).await;
    drop(running);

    // A new operator process (a fresh controller and cache) leaves it alone too.
    let again = start(&ns).await;
    again.idle.wait(Duration::from_millis(300)).await;
    let last = secrets.get("users-password").await.unwrap();
    assert_eq!(last.resource_version(), first.resource_version());
    assert_eq!(last.data, first.data, "the generated password changed");
    assert!(again.reconciles.load(Ordering::SeqCst) >= 1);
}

#[tokio::test]
async fn an_activation_turning_false_should_delete_and_a_dependent_deleted_by_hand_come_back() {
    let ns = TestNamespace::new().await.unwrap();
    let _running = start(&ns).await;
    let api = ns.api::<Database>();
    api.create(&PostParams::default(), &database("stock", true))
        .await
        .unwrap();
    let cronjobs = ns.api::<CronJob>();
    eventually("the backup CronJob", Duration::from_secs(30), async || {
        cronjobs.get_opt("stock-backup").await.ok()?
    })
    .await;

    api.patch(
        "stock",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "backup": false } })),
    )
    .await
    .unwrap();
    eventually(
        "the backup CronJob deleted",
        Duration::from_secs(30),
        async || {
            cronjobs
                .get_opt("stock-backup")
                .await
                .ok()
                .and_then(|c| c.is_none().then_some(()))
        },
    )
    .await;

    // Deleted by hand: restored, as a new object.
    let services = ns.api::<Service>();
    let before = eventually("the service", Duration::from_secs(30), async || {
        services.get_opt("stock").await.ok()?
    })
    .await;
    services
        .delete("stock", &DeleteParams::default())
        .await
        .unwrap();
    let after = eventually(
        "the service restored",
        Duration::from_secs(30),
        async || {
            services
                .get_opt("stock")
                .await
                .ok()?
                .filter(|s| s.uid() != before.uid())
        },
    )
    .await;
    assert_eq!(after.owner_references().len(), 1);
}

#[tokio::test]
async fn a_dependent_the_apiserver_refuses_should_make_the_primary_degraded() {
    let ns = TestNamespace::new().await.unwrap();
    let _running = start(&ns).await;
    let mut db = database("broken", false);
    db.spec.broken = true;
    ns.api::<Database>()
        .create(&PostParams::default(), &db)
        .await
        .unwrap();
    let api = ns.api::<Database>();
    let degraded = degraded(&api, "broken").await;
    assert_eq!(degraded.reason, "BrokenFailed");
    assert!(
        degraded.message.contains("Not_A_Valid_Name"),
        "{degraded:?}"
    );
    // The others were still applied, and a Warning event names the dependent.
    assert!(
        ns.api::<Secret>()
            .get_opt("broken-password")
            .await
            .unwrap()
            .is_some()
    );
    let events = ns.api::<k8s_openapi::api::events::v1::Event>();
    eventually("a Warning event", Duration::from_secs(30), async || {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("ApplyFailed")
                    && e.note.as_deref().is_some_and(|n| n.starts_with("broken:"))
            })
            .map(|_| ())
    })
    .await;
}

#[tokio::test]
async fn a_conflict_should_be_rechecked_at_a_fixed_interval_not_retried_as_an_error() {
    let ns = TestNamespace::new().await.unwrap();
    // Someone else's ConfigMap under the name of the database's.
    let theirs: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "held-config" }, "data": { "owner": "someone else" },
    }))
    .unwrap();
    let configs = ns.api::<ConfigMap>();
    configs
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    let running = start(&ns).await;
    ns.api::<Database>()
        .create(&PostParams::default(), &database("held", false))
        .await
        .unwrap();
    let api = ns.api::<Database>();
    let degraded = degraded(&api, "held").await;
    assert_eq!(degraded.reason, "ConfigConflict", "{degraded:?}");
    assert!(degraded.message.contains("not owned by"), "{degraded:?}");

    // Held for a while: reconciled again at the recheck interval, never as a failure.
    let from = running.reconciles.load(Ordering::SeqCst);
    tokio::time::sleep(RECHECK * 5).await;
    assert_eq!(
        running.errors.load(Ordering::SeqCst),
        0,
        "a conflict was returned as an error (retried with backoff)"
    );
    assert!(
        running.reconciles.load(Ordering::SeqCst) > from,
        "not rechecked"
    );
    assert_eq!(
        configs.get("held-config").await.unwrap().data,
        theirs.data,
        "theirs is left as it is"
    );

    let rechecks = running.reconciles.load(Ordering::SeqCst) - from;
    // Theirs deleted: nothing wakes the database but the recheck, which makes its own.
    configs
        .delete("held-config", &DeleteParams::default())
        .await
        .unwrap();
    let deleted = std::time::Instant::now();
    let ours = eventually("the database's ConfigMap", RECHECK * 15, async || {
        configs
            .get_opt("held-config")
            .await
            .ok()?
            .filter(|c| !c.owner_references().is_empty())
    })
    .await;
    assert_eq!(ours.owner_references()[0].name, "held");
    assert_eq!(running.errors.load(Ordering::SeqCst), 0);
    eprintln!(
        "conflict held {:?}: {rechecks} reconciles, 0 failed; ours made {:?} after theirs was deleted (recheck {RECHECK:?})",
        RECHECK * 5,
        deleted.elapsed()
    );
}

#[tokio::test]
async fn the_field_manager_of_the_applies_should_be_settable_so_a_migrated_object_keeps_one() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [Database::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let db = ns
        .api::<Database>()
        .create(&PostParams::default(), &database("legacy", false))
        .await
        .unwrap();
    // What the hand-written operator applied, as its own field manager.
    let legacy = "legacy-db-operator";
    let before = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "legacy-config",
            "ownerReferences": [{
                "apiVersion": "deps-test.kubeforge.dev/v1", "kind": "Database", "name": "legacy",
                "uid": db.uid().unwrap(), "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "data": { "version": "15" },
    });
    let configs = ns.api::<ConfigMap>();
    configs
        .patch(
            "legacy-config",
            &PatchParams::apply(legacy),
            &Patch::Apply(&before),
        )
        .await
        .unwrap();

    let _running = start_with(&ns, declared().field_manager(legacy).build().unwrap()).await;
    let applied =
        eventually("the version applied", Duration::from_secs(30), async || {
            configs.get("legacy-config").await.ok().filter(|c| {
                c.data.as_ref().and_then(|d| d.get("version")) == Some(&"16".to_owned())
            })
        })
        .await;
    let managers: Vec<String> = applied
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|f| f.operation.as_deref() == Some("Apply"))
        .filter_map(|f| f.manager.clone())
        .collect();
    assert_eq!(managers, [legacy], "one manager of the applied fields");
}

#[tokio::test]
async fn a_child_others_hold_with_finalizers_should_be_released_when_pruned_or_its_owner_goes() {
    let ns = TestNamespace::new().await.unwrap();
    let _running = start(&ns).await;
    let api = ns.api::<Database>();
    api.create(&PostParams::default(), &database("held", true))
        .await
        .unwrap();
    let cronjobs = ns.api::<CronJob>();
    let configs = ns.api::<ConfigMap>();
    let hold = Patch::Merge(json!({ "metadata": { "finalizers": ["backup.example.com/hold"] } }));
    eventually("the children", Duration::from_secs(30), async || {
        cronjobs.get_opt("held-backup").await.ok()??;
        configs.get_opt("held-config").await.ok()?
    })
    .await;
    // Someone else's finalizers on two of them: they hold something.
    cronjobs
        .patch("held-backup", &PatchParams::default(), &hold)
        .await
        .unwrap();
    configs
        .patch("held-config", &PatchParams::default(), &hold)
        .await
        .unwrap();
    let uid = api.get("held").await.unwrap().uid().unwrap();

    // Pruned (`when` turned false): released, not deleted.
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "backup": false } })),
    )
    .await
    .unwrap();
    let released = eventually(
        "the CronJob released",
        Duration::from_secs(30),
        async || {
            let cronjob = cronjobs.get("held-backup").await.ok()?;
            assert!(
                cronjob.metadata.deletion_timestamp.is_none(),
                "the held CronJob is being deleted"
            );
            cronjob.owner_references().is_empty().then_some(cronjob)
        },
    )
    .await;
    assert_eq!(
        released
            .annotations()
            .get(kubeforge::dependents::RELEASED_ANNOTATION),
        Some(&uid)
    );

    // The owner deleted: held until the held ConfigMap is released; the collector deletes the
    // rest (the Service shows it has acted).
    eventually("the database held", Duration::from_secs(30), async || {
        let db = api.get("held").await.ok()?;
        db.finalizers()
            .contains(&kubeforge::dependents::FINALIZER.to_owned())
            .then_some(())
    })
    .await;
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let services = ns.api::<Service>();
    eventually(
        "the database gone, its Service collected",
        Duration::from_secs(60),
        async || {
            let gone = api.get_opt("held").await.ok()?.is_none()
                && services.get_opt("held").await.ok()?.is_none();
            gone.then_some(())
        },
    )
    .await;
    let config = configs.get("held-config").await.unwrap();
    assert!(config.metadata.deletion_timestamp.is_none(), "deleted");
    assert!(
        config.owner_references().is_empty(),
        "{:?}",
        config.metadata
    );
    // Let go, so the namespace can go.
    let unhold = Patch::Merge(json!({ "metadata": { "finalizers": null } }));
    configs
        .patch("held-config", &PatchParams::default(), &unhold)
        .await
        .unwrap();
    cronjobs
        .patch("held-backup", &PatchParams::default(), &unhold)
        .await
        .unwrap();
}
