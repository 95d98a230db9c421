//! Deletion policies of dependents on the real apiserver (and its garbage collector): a
//! Namespace dropped from a cluster-scoped tenant's list is released, not deleted (with what the
//! user put in it), taken back when it returns, and outlives the tenant's deletion; a Namespace
//! dropped under `prune = delete` is deleted, and while it terminates the tenant stays `Ready`
//! and the children that depend on it, once it is wanted again, wait instead of being applied
//! into it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use kubeforge::controller::Context;
use kubeforge::crd::{ConditionStatus, Conditions, READY};
use kubeforge::dependents::{DEPENDENT_LABEL, RELEASED_ANNOTATION};
use kubeforge::manager::Manager;
use kubeforge::testing::{TestNamespace, apply_crds};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;

/// A tenant: namespaces under the default policy of the kind (released when dropped or when the
/// tenant goes), and scratch namespaces deleted when dropped, each holding a settings ConfigMap
/// that depends on it.
#[kubeforge::custom_resource(
    group = "deps-policy.kubeforge.dev",
    version = "v1",
    kind = "PolicyTenant",
    cluster,
    status = PolicyTenantStatus
)]
#[derive(Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTenantSpec {
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub scratch: Vec<String>,
}

#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTenantStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub conditions: Conditions,
}

pub struct Tenants;

/// The field manager of the tenant's applies (not the controller's name).
const MANAGER: &str = "tenant-operator";

#[kubeforge::controller(
    for = PolicyTenant,
    field_manager = "tenant-operator",
    dependents(
        namespace(for_each = namespaces),
        scratch(for_each = scratch_names, prune = delete, on_owner_delete = delete),
        settings(for_each = scratch_names, depends_on(scratch)),
    ),
)]
impl Tenants {
    fn namespaces(&self, tenant: &PolicyTenant, _: &Context<PolicyTenant>) -> Vec<String> {
        tenant.spec.namespaces.clone()
    }

    fn scratch_names(&self, tenant: &PolicyTenant, _: &Context<PolicyTenant>) -> Vec<String> {
        tenant.spec.scratch.clone()
    }

    fn namespace(&self, _: &PolicyTenant, name: &str, _: &Context<PolicyTenant>) -> Namespace {
        namespace(name)
    }

    fn scratch(&self, _: &PolicyTenant, name: &str, _: &Context<PolicyTenant>) -> Namespace {
        namespace(name)
    }

    fn settings(&self, _: &PolicyTenant, name: &str, _: &Context<PolicyTenant>) -> ConfigMap {
        let mut settings = ConfigMap::default();
        settings.metadata.name = Some("settings".to_owned());
        settings.metadata.namespace = Some(name.to_owned());
        settings.data = Some([("tier".to_owned(), "scratch".to_owned())].into());
        settings
    }
}

fn namespace(name: &str) -> Namespace {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.to_owned());
    ns.metadata.labels = Some(
        [(
            kubeforge::testing::TEST_NAMESPACE_LABEL.to_owned(),
            "true".to_owned(),
        )]
        .into(),
    );
    ns
}

/// One test at a time: the kind is cluster-scoped, so every running controller reconciles every
/// tenant.
static ONE_CONTROLLER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The running operator (stopped on drop) and the namespaces the test's tenants name.
struct Running {
    client: Client,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), kubeforge::manager::ManagerError>>,
    namespaces: Vec<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Running {
    /// Stops the operator, returning once it has stopped.
    async fn stop(&mut self) {
        self.shutdown.cancel();
        (&mut self.task).await.unwrap().unwrap();
    }

    /// Deletes the tenant `name` while the operator runs (its finalizer comes off), stops the
    /// operator and deletes the namespaces (letting go of what holds them first).
    async fn finish(self, name: &str) {
        let tenants = Api::<PolicyTenant>::all(self.client.clone());
        let _ = tenants.delete(name, &DeleteParams::default()).await;
        eventually("the tenant gone", Duration::from_secs(60), async || {
            tenants
                .get_opt(name)
                .await
                .ok()
                .and_then(|t| t.is_none().then_some(()))
        })
        .await;
        self.shutdown.cancel();
        let api = Api::<Namespace>::all(self.client.clone());
        for name in &self.namespaces {
            let held = Api::<ConfigMap>::namespaced(self.client.clone(), name);
            let _ = held
                .patch(
                    "held",
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
                )
                .await;
            let _ = api.delete(name, &DeleteParams::default()).await;
        }
    }
}

async fn start(home: &TestNamespace, namespaces: Vec<String>) -> Running {
    let client = home.client();
    apply_crds(&client, [PolicyTenant::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(
        Manager::new(client.clone())
            .controller(Tenants)
            .run_until(shutdown.clone()),
    );
    // Tenants a failed run left (one test runs at a time): the operator lets them go.
    let _ = Api::<PolicyTenant>::all(client.clone())
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    Running {
        client,
        shutdown,
        task,
        namespaces,
    }
}

async fn create(client: &Client, name: &str, spec: serde_json::Value) -> PolicyTenant {
    let spec: PolicyTenantSpec = serde_json::from_value(spec).unwrap();
    Api::<PolicyTenant>::all(client.clone())
        .create(&PostParams::default(), &PolicyTenant::new(name, spec))
        .await
        .unwrap()
}

async fn respec(client: &Client, name: &str, spec: serde_json::Value) -> i64 {
    let patched = Api::<PolicyTenant>::all(client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .unwrap();
    patched.metadata.generation.unwrap()
}

/// The tenant's Ready condition (status, message) once its status is of generation
/// `generation` (or later) and `check` accepts it.
async fn ready_at(
    client: &Client,
    name: &str,
    generation: i64,
    what: &str,
    check: impl Fn(bool, &str) -> bool,
) -> (bool, String) {
    let api = Api::<PolicyTenant>::all(client.clone());
    eventually(what, Duration::from_secs(90), async || {
        let tenant = api.get(name).await.ok()?;
        let status = tenant.status?;
        if status.observed_generation? < generation {
            return None;
        }
        let ready = status.conditions.get(READY)?;
        let holds = ready.status == ConditionStatus::True;
        check(holds, &ready.message).then(|| (holds, ready.message.clone()))
    })
    .await
}

/// Whether `ns` is owned by the object of UID `uid`.
fn owned_by(ns: &Namespace, uid: &str) -> bool {
    ns.owner_references().iter().any(|r| r.uid == uid)
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one story: made, dropped, re-added, owner deleted, with the namespaces checked after each step"
)]
async fn a_namespace_dropped_or_whose_tenant_is_deleted_should_be_released_never_deleted() {
    let _turn = ONE_CONTROLLER.lock().await;
    let home = TestNamespace::new().await.unwrap();
    let [a, b, s] = ["a", "b", "s"].map(|n| format!("{}-{n}", home.name()));
    let running = start(&home, vec![a.clone(), b.clone(), s.clone()]).await;
    let client = running.client.clone();
    let name = format!("released-{}", home.name());
    let generation = create(&client, &name, json!({ "namespaces": [a, b] }))
        .await
        .metadata
        .generation
        .unwrap();
    ready_at(&client, &name, generation, "a and b made", |ready, _| ready).await;
    let uid = Api::<PolicyTenant>::all(client.clone())
        .get(&name)
        .await
        .unwrap()
        .uid()
        .unwrap();
    let namespaces = Api::<Namespace>::all(client.clone());
    for ns in [&a, &b] {
        let made = namespaces.get(ns).await.unwrap();
        assert!(owned_by(&made, &uid), "{ns}");
        assert_eq!(
            made.labels().get(DEPENDENT_LABEL).map(String::as_str),
            Some("namespace")
        );
        // Applied as the field manager the controller names, not as the controller.
        let managers: Vec<(String, String)> = made
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .map(|f| {
                (
                    f.manager.clone().unwrap_or_default(),
                    f.operation.clone().unwrap_or_default(),
                )
            })
            .collect();
        assert!(
            managers.contains(&(MANAGER.to_owned(), "Apply".to_owned())),
            "{managers:?}"
        );
        assert!(
            !managers.iter().any(|(m, _)| m == "policytenant"),
            "{managers:?}"
        );
    }
    // What the user keeps in b.
    let workload: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "workload" }, "data": { "state": "precious" },
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), &b)
        .create(&PostParams::default(), &workload)
        .await
        .unwrap();

    // b dropped: released (no owner reference, no dependent label), never deleted.
    let dropped = std::time::Instant::now();
    let generation = respec(&client, &name, json!({ "namespaces": [a] })).await;
    let released = eventually("b released", Duration::from_secs(60), async || {
        let ns = namespaces.get(&b).await.ok()?;
        assert!(
            ns.metadata.deletion_timestamp.is_none(),
            "the dropped namespace {b} is being deleted"
        );
        (!owned_by(&ns, &uid)).then_some(ns)
    })
    .await;
    let release_took = dropped.elapsed();
    assert!(!released.labels().contains_key(DEPENDENT_LABEL));
    assert_eq!(
        released.annotations().get(RELEASED_ANNOTATION),
        Some(&uid),
        "it names who released it"
    );
    let (ready, message) = ready_at(&client, &name, generation, "Ready after b", |_, _| true).await;
    assert!(ready, "{message}");
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), &b)
            .get_opt("workload")
            .await
            .unwrap()
            .is_some()
    );

    // b back: taken back by the tenant that released it.
    let generation = respec(&client, &name, json!({ "namespaces": [a, b] })).await;
    ready_at(&client, &name, generation, "b taken back", |ready, _| ready).await;
    let back = namespaces.get(&b).await.unwrap();
    assert!(owned_by(&back, &uid), "{:?}", back.metadata);
    assert!(!back.annotations().contains_key(RELEASED_ANNOTATION));
    assert_eq!(back.uid(), released.uid(), "the same namespace");

    // The tenant deleted: the garbage collector deletes what it owns, so a and b are released
    // before it goes (its finalizer holds it until then).
    // A scratch namespace (`on_owner_delete = delete`) shows when the collector has acted.
    let generation = respec(
        &client,
        &name,
        json!({ "namespaces": [a, b], "scratch": [s] }),
    )
    .await;
    ready_at(&client, &name, generation, "s made", |ready, _| ready).await;
    let tenants = Api::<PolicyTenant>::all(client.clone());
    let held = tenants.get(&name).await.unwrap();
    let deleted = std::time::Instant::now();
    tenants
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the tenant gone", Duration::from_secs(60), async || {
        tenants
            .get_opt(&name)
            .await
            .ok()
            .and_then(|t| t.is_none().then_some(()))
    })
    .await;
    let gone_after = deleted.elapsed();
    eventually(
        "the collector to delete s",
        Duration::from_secs(60),
        async || {
            let ns = namespaces.get_opt(&s).await.ok()?;
            ns.is_none_or(|ns| ns.metadata.deletion_timestamp.is_some())
                .then_some(())
        },
    )
    .await;
    for ns in [&a, &b] {
        let kept = namespaces.get(ns).await.unwrap();
        assert!(
            kept.metadata.deletion_timestamp.is_none(),
            "{ns} deleted with its tenant"
        );
        assert!(!owned_by(&kept, &uid), "{ns}: {:?}", kept.metadata);
        assert_eq!(kept.annotations().get(RELEASED_ANNOTATION), Some(&uid));
    }
    assert!(
        held.finalizers()
            .contains(&kubeforge::dependents::FINALIZER.to_owned()),
        "the tenant was not held: {:?}",
        held.finalizers()
    );
    eprintln!(
        "b released {release_took:?} after it was dropped; the tenant gone {gone_after:?} after its deletion, a and b released"
    );
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), &b)
            .get_opt("workload")
            .await
            .unwrap()
            .is_some()
    );
    running.finish(&name).await;
}

/// A scratch namespace of a new tenant, made and then held in `Terminating` by a ConfigMap with
/// a finalizer of the test's: the tenant's name, the namespace and its UID.
async fn terminating_scratch(home: &TestNamespace, client: &Client) -> (String, String, String) {
    let name = format!("scratch-{}", home.name());
    let c = format!("{}-c", home.name());
    let generation = create(client, &name, json!({ "scratch": [c] }))
        .await
        .metadata
        .generation
        .unwrap();
    ready_at(client, &name, generation, "c made", |ready, _| ready).await;
    let namespaces = Api::<Namespace>::all(client.clone());
    let uid = namespaces.get(&c).await.unwrap().uid().unwrap();
    let held: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "held", "finalizers": ["deps-policy.kubeforge.dev/hold"] },
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), &c)
        .create(&PostParams::default(), &held)
        .await
        .unwrap();
    respec(client, &name, json!({ "scratch": [] })).await;
    eventually("c terminating", Duration::from_secs(60), async || {
        let ns = namespaces.get(&c).await.ok()?;
        ns.metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    (name, c, uid)
}

/// Lets go of the ConfigMap holding `ns` in `Terminating`.
async fn let_go(client: &Client, ns: &str) {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
        )
        .await
        .unwrap();
}

/// The refused applies reported about the object of UID `uid`: each `ApplyFailed` event counts
/// as often as it recurred (its series).
async fn refused_applies(client: &Client, uid: &str) -> i32 {
    let events = Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("ApplyFailed"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid))
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum()
}

#[tokio::test]
async fn a_child_being_pruned_should_not_make_the_tenant_not_ready() {
    let _turn = ONE_CONTROLLER.lock().await;
    let home = TestNamespace::new().await.unwrap();
    let c = format!("{}-c", home.name());
    let running = start(&home, vec![c.clone()]).await;
    let client = running.client.clone();
    let (name, c, _) = terminating_scratch(&home, &client).await;
    let generation = Api::<PolicyTenant>::all(client.clone())
        .get(&name)
        .await
        .unwrap()
        .metadata
        .generation
        .unwrap();
    // c is not wanted any more: its deletion holds nothing back.
    let (ready, message) = ready_at(&client, &name, generation, "c dropped", |_, _| true).await;
    assert!(ready, "Ready=False while c terminates: {message}");
    let namespaces = Api::<Namespace>::all(client.clone());
    assert!(
        namespaces
            .get(&c)
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some(),
        "c still terminating"
    );
    let_go(&client, &c).await;
    running.finish(&name).await;
}

#[tokio::test]
async fn children_should_wait_while_the_namespace_they_depend_on_terminates() {
    let _turn = ONE_CONTROLLER.lock().await;
    let home = TestNamespace::new().await.unwrap();
    let c = format!("{}-c", home.name());
    let running = start(&home, vec![c.clone()]).await;
    let client = running.client.clone();
    let (name, c, old) = terminating_scratch(&home, &client).await;
    let tenant = Api::<PolicyTenant>::all(client.clone())
        .get(&name)
        .await
        .unwrap()
        .uid()
        .unwrap();
    let refused_before = refused_applies(&client, &tenant).await;

    // c wanted again while its old self terminates: not ready, and its settings wait.
    let generation = respec(&client, &name, json!({ "scratch": [c] })).await;
    let (ready, message) = ready_at(&client, &name, generation, "c re-added", |_, _| true).await;
    // Reconciles while it terminates (each change of c's wakes the tenant): none applies into
    // it. A spec change and 5 s later, still none.
    respec(&client, &name, json!({ "scratch": [c], "namespaces": [] })).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let refused = refused_applies(&client, &tenant).await - refused_before;
    assert_eq!(refused, 0, "applies refused by the terminating namespace");
    assert!(!ready);
    assert!(message.contains("being deleted"), "{message}");
    assert!(message.contains("waits for scratch"), "{message}");

    // Once the old namespace is gone, a new one is made and the settings land in it.
    let_go(&client, &c).await;
    let generation = Api::<PolicyTenant>::all(client.clone())
        .get(&name)
        .await
        .unwrap()
        .metadata
        .generation
        .unwrap();
    ready_at(&client, &name, generation, "c made again", |ready, _| ready).await;
    let new = Api::<Namespace>::all(client.clone()).get(&c).await.unwrap();
    assert_ne!(new.uid().unwrap(), old, "a new namespace");
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), &c)
            .get_opt("settings")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(refused_applies(&client, &tenant).await - refused_before, 0);
    running.finish(&name).await;
}

#[tokio::test]
async fn a_tenant_deleted_while_the_operator_is_down_should_wait_for_it_and_release_its_namespaces()
{
    let _turn = ONE_CONTROLLER.lock().await;
    let home = TestNamespace::new().await.unwrap();
    let d = format!("{}-d", home.name());
    let mut running = start(&home, vec![d.clone()]).await;
    let client = running.client.clone();
    let name = format!("down-{}", home.name());
    let generation = create(&client, &name, json!({ "namespaces": [d] }))
        .await
        .metadata
        .generation
        .unwrap();
    ready_at(&client, &name, generation, "d made", |ready, _| ready).await;
    running.stop().await;

    // Down: the tenant is held by the dependents' finalizer, so the collector, which deletes a
    // child only once its owner is gone, leaves d alone.
    let tenants = Api::<PolicyTenant>::all(client.clone());
    tenants
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let held = tenants.get(&name).await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(held.finalizers(), [kubeforge::dependents::FINALIZER]);
    let uid = held.uid().unwrap();
    let namespaces = Api::<Namespace>::all(client.clone());
    let owned = namespaces.get(&d).await.unwrap();
    assert!(owned_by(&owned, &uid));
    assert!(owned.metadata.deletion_timestamp.is_none());

    // Back: d released, then the tenant goes.
    let back = std::time::Instant::now();
    let running = start(&home, vec![d.clone()]).await;
    eventually("the tenant gone", Duration::from_secs(60), async || {
        tenants
            .get_opt(&name)
            .await
            .ok()
            .and_then(|t| t.is_none().then_some(()))
    })
    .await;
    eprintln!(
        "the tenant deleted while the operator was down: gone {:?} after it came back",
        back.elapsed()
    );
    let released = namespaces.get(&d).await.unwrap();
    assert!(!owned_by(&released, &uid), "{:?}", released.metadata);
    assert!(released.metadata.deletion_timestamp.is_none());
    running.finish(&name).await;
}
