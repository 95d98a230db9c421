//! The runtime used by hand (no macros) against the real apiserver: a `Widget` kind whose
//! controller server-side-applies an owned ConfigMap holding `spec.value` and writes
//! `status.observed`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kubeforge::ObjectKey;
use kubeforge::cache::Cache;
use kubeforge::cache::Lookup;
use kubeforge::client::apply_owned;
use kubeforge::controller::{
    Action, Context, Controller, ControllerConfig, Owns, Reconciler, Watches, Wiring,
};
use kubeforge::informer::InformerConfig;
use kubeforge::testing::{ControlPlane, TestNamespace, apply_crds};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::widget::{
    GROUP, QUIET, TestError, Widget, WidgetSpec, WidgetStatus, widget, widget_crd,
};
use crate::support::{configmap, eventually, is_not_found};

/// Counts what the controller did, and can misbehave on purpose.
#[derive(Default)]
pub struct Recorder {
    pub reconciles: Mutex<HashMap<String, u32>>,
    cleanups: AtomicU32,
    panic_on_first_attempt: bool,
}

pub struct WidgetReconciler(pub Arc<Recorder>);

impl Reconciler<Widget> for WidgetReconciler {
    type Error = TestError;

    async fn reconcile(&self, w: Arc<Widget>, ctx: &Context<Widget>) -> Result<Action, TestError> {
        let name = w.metadata.name.clone().unwrap_or_default();
        let attempt = {
            let mut counts = self.0.reconciles.lock().unwrap();
            let n = counts.entry(name.clone()).or_default();
            *n += 1;
            *n
        };
        if self.0.panic_on_first_attempt && attempt == 1 {
            panic!("deliberate panic on the first attempt for {name}");
        }
        let mut child = configmap(
            &format!("{name}-cm"),
            &[("value", &w.spec.value.to_string())],
        );
        child.metadata.namespace = w.metadata.namespace.clone();
        apply_owned(
            &ctx.api::<ConfigMap>(),
            w.as_ref(),
            "widget-controller",
            child,
        )
        .await?;
        if w.status.as_ref().map(|s| s.observed) != Some(w.spec.value) {
            ctx.api::<Widget>()
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": { "observed": w.spec.value } })),
                )
                .await?;
        }
        Ok(Action::Done)
    }

    async fn cleanup(&self, _w: Arc<Widget>, _ctx: &Context<Widget>) -> Result<Action, TestError> {
        self.0.cleanups.fetch_add(1, Ordering::SeqCst);
        Ok(Action::Done)
    }
}

/// A controller running in the background: cancel it, or wait until it has nothing left to do.
pub struct Running {
    shutdown: CancellationToken,
    pub idle: kubeforge::controller::Idle,
}

impl Running {
    pub fn cancel(&self) {
        self.shutdown.cancel();
    }
}

/// Installs the CRD and runs a Widget controller in `ns` until the returned value is cancelled.
async fn start(
    ns: &TestNamespace,
    recorder: Arc<Recorder>,
    config: ControllerConfig,
    secrets_map_to_widgets: bool,
) -> Running {
    start_in(
        ns.client(),
        ns.name(),
        recorder,
        config,
        secrets_map_to_widgets,
    )
    .await
}

async fn start_in(
    client: kube::Client,
    namespace: &str,
    recorder: Arc<Recorder>,
    config: ControllerConfig,
    secrets_map_to_widgets: bool,
) -> Running {
    apply_crds(&client, [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let wiring = Wiring::new(client.clone());
    let mut controller = Controller::new(
        "widgets",
        &wiring,
        Api::<Widget>::namespaced(client.clone(), namespace),
        InformerConfig::default(),
    )
    .owns(
        Api::<ConfigMap>::namespaced(client.clone(), namespace),
        Owns::full(),
    )
    .config(config);
    if secrets_map_to_widgets {
        // A Secret labelled `widget=<name>` concerns that widget.
        controller = controller.watches(
            Api::<Secret>::namespaced(client, namespace),
            Watches::map(|s: &Secret| {
                s.metadata
                    .labels
                    .iter()
                    .flatten()
                    .filter(|(k, _)| k.as_str() == "widget")
                    .map(|(_, v)| {
                        ObjectKey::namespaced(s.metadata.namespace.clone().unwrap_or_default(), v)
                    })
                    .collect()
            }),
        );
    }
    let shutdown = CancellationToken::new();
    let idle = controller.idle();
    tokio::spawn(controller.run(WidgetReconciler(recorder), shutdown.clone()));
    Running { shutdown, idle }
}

pub async fn converged(ns: &TestNamespace, names: &[String], value: i64) -> bool {
    converged_in(&ns.client(), ns.name(), names, value)
        .await
        .unwrap()
}

async fn converged_in(
    client: &kube::Client,
    namespace: &str,
    names: &[String],
    value: i64,
) -> Result<bool, kube::Error> {
    let widgets = Api::<Widget>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await?;
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await?;
    let cm_values: HashMap<_, _> = configmaps
        .into_iter()
        .map(|c| {
            (
                c.metadata.name.clone().unwrap_or_default(),
                c.data.unwrap_or_default(),
            )
        })
        .collect();
    Ok(names.iter().all(|name| {
        let status_ok = widgets.items.iter().any(|w| {
            w.metadata.name.as_deref() == Some(name)
                && w.status.as_ref().map(|s| s.observed) == Some(value)
        });
        let cm_ok = cm_values
            .get(&format!("{name}-cm"))
            .and_then(|d| d.get("value"))
            .is_some_and(|v| v == &value.to_string());
        status_ok && cm_ok
    }))
}

#[tokio::test]
async fn controller_should_converge_200_widgets_and_restore_deleted_children() {
    let ns = TestNamespace::new().await.unwrap();
    let recorder = Arc::new(Recorder::default());
    let shutdown = start(
        &ns,
        recorder.clone(),
        ControllerConfig::default().concurrency(8),
        false,
    )
    .await;
    let api = ns.api::<Widget>();
    let names: Vec<String> = (0..200).map(|i| format!("w{i}")).collect();
    let started = Instant::now();
    for name in &names {
        api.create(&PostParams::default(), &widget(name, 7))
            .await
            .unwrap();
    }
    eventually(
        "200 widgets to converge",
        Duration::from_secs(120),
        async || converged(&ns, &names, 7).await.then_some(()),
    )
    .await;
    eprintln!("200 widgets converged in {:?}", started.elapsed());

    // Every child carries the controller owner reference.
    let cm = ns.api::<ConfigMap>().get("w5-cm").await.unwrap();
    let owner = &cm.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Widget", "w5", Some(true))
    );

    // Deleting an owned ConfigMap brings it back (the owner is reconciled through `owns`).
    ns.api::<ConfigMap>()
        .delete("w5-cm", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the deleted child to come back",
        Duration::from_secs(30),
        async || ns.api::<ConfigMap>().get("w5-cm").await.ok(),
    )
    .await;

    // A spec change converges again.
    api.patch(
        "w9",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "value": 8 } })),
    )
    .await
    .unwrap();
    eventually(
        "w9 to converge on the new value",
        Duration::from_secs(30),
        async || converged(&ns, &["w9".to_owned()], 8).await.then_some(()),
    )
    .await;
    shutdown.cancel();
}

#[tokio::test]
async fn watches_mapper_should_enqueue_exactly_the_mapped_keys() {
    let ns = TestNamespace::new().await.unwrap();
    let recorder = Arc::new(Recorder::default());
    let shutdown = start(&ns, recorder.clone(), ControllerConfig::default(), true).await;
    let api = ns.api::<Widget>();
    let names: Vec<String> = (0..5).map(|i| format!("m{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &widget(name, 1))
            .await
            .unwrap();
    }
    eventually("widgets to converge", Duration::from_secs(30), async || {
        converged(&ns, &names, 1).await.then_some(())
    })
    .await;
    // Let the events of our own writes (status, child) settle, then watch what one Secret does.
    shutdown.idle.wait(QUIET).await;
    let before = recorder.reconciles.lock().unwrap().clone();
    let mut secret = Secret {
        metadata: ObjectMeta {
            name: Some("for-m3".into()),
            labels: Some([("widget".to_owned(), "m3".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    ns.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    eventually(
        "m3 to be reconciled for its secret",
        Duration::from_secs(30),
        async || (recorder.reconciles.lock().unwrap()["m3"] > before["m3"]).then_some(()),
    )
    .await;
    // Relabel the secret to m1: both the old (m3) and the new (m1) key are enqueued.
    let m1_before = recorder.reconciles.lock().unwrap()["m1"];
    secret.metadata.labels = Some([("widget".to_owned(), "m1".to_owned())].into());
    ns.api::<Secret>()
        .patch(
            "for-m3",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "widget": "m1" } } })),
        )
        .await
        .unwrap();
    eventually("m1 to be reconciled", Duration::from_secs(30), async || {
        (recorder.reconciles.lock().unwrap()["m1"] > m1_before).then_some(())
    })
    .await;
    shutdown.idle.wait(QUIET).await;
    let after = recorder.reconciles.lock().unwrap().clone();
    for name in ["m0", "m2", "m4"] {
        assert_eq!(
            after[name], before[name],
            "{name} is not mapped from the secret"
        );
    }
    shutdown.cancel();
}

#[tokio::test]
async fn reconciler_that_panics_on_first_attempt_should_still_converge() {
    let ns = TestNamespace::new().await.unwrap();
    let recorder = Arc::new(Recorder {
        panic_on_first_attempt: true,
        ..Recorder::default()
    });
    let shutdown = start(&ns, recorder.clone(), ControllerConfig::default(), false).await;
    let names: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    for name in &names {
        ns.api::<Widget>()
            .create(&PostParams::default(), &widget(name, 3))
            .await
            .unwrap();
    }
    eventually(
        "panicking widgets to converge",
        Duration::from_secs(60),
        async || converged(&ns, &names, 3).await.then_some(()),
    )
    .await;
    let counts = recorder.reconciles.lock().unwrap().clone();
    for name in &names {
        assert!(
            counts[name] >= 2,
            "{name}: the panic was retried ({})",
            counts[name]
        );
    }
    shutdown.cancel();
}

#[tokio::test]
async fn finalizer_should_run_cleanup_once_then_release_the_object() {
    let ns = TestNamespace::new().await.unwrap();
    let recorder = Arc::new(Recorder::default());
    let config = ControllerConfig::default().finalizer("ctrl-test.kubeforge.dev/cleanup");
    let shutdown = start(&ns, recorder.clone(), config, false).await;
    let api = ns.api::<Widget>();
    api.create(&PostParams::default(), &widget("f", 1))
        .await
        .unwrap();
    eventually(
        "the finalizer to be added and the widget converged",
        Duration::from_secs(30),
        async || {
            let w = api.get("f").await.unwrap();
            let held = w
                .metadata
                .finalizers
                .unwrap_or_default()
                .contains(&"ctrl-test.kubeforge.dev/cleanup".to_owned());
            (held && converged(&ns, &["f".to_owned()], 1).await).then_some(())
        },
    )
    .await;
    assert_eq!(recorder.cleanups.load(Ordering::SeqCst), 0);
    api.delete("f", &DeleteParams::default()).await.unwrap();
    eventually(
        "the widget to be gone",
        Duration::from_secs(30),
        async || is_not_found(api.get("f").await).then_some(()),
    )
    .await;
    shutdown.idle.wait(QUIET).await;
    assert_eq!(
        recorder.cleanups.load(Ordering::SeqCst),
        1,
        "cleanup ran exactly once"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn controller_should_lose_nothing_across_an_apiserver_outage() {
    // A plane of our own: stopping the shared apiserver would break the other tests.
    let plane = tokio::task::spawn_blocking(|| ControlPlane::dedicated("outage"))
        .await
        .unwrap()
        .unwrap();
    let client = plane.client().await.unwrap();
    let ns = "outage";
    let namespace: Namespace =
        serde_json::from_value(json!({ "metadata": { "name": ns } })).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let recorder = Arc::new(Recorder::default());
    let shutdown = start_in(
        client.clone(),
        ns,
        recorder.clone(),
        ControllerConfig::default(),
        false,
    )
    .await;
    let api = Api::<Widget>::namespaced(client.clone(), ns);
    let names: Vec<String> = (0..30).map(|i| format!("o{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &widget(name, 1))
            .await
            .unwrap();
    }
    // Mid-run: reconciles of these widgets are queued or in flight when the apiserver goes away.
    plane.stop_component("kube-apiserver").await.unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    plane.start_component("kube-apiserver").await.unwrap();

    eventually(
        "every widget to converge after the outage",
        Duration::from_secs(120),
        async || {
            converged_in(&client, ns, &names, 1)
                .await
                .ok()?
                .then_some(())
        },
    )
    .await;
    // The watches resumed: a change made after the outage converges too.
    for name in &names {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "value": 2 } })),
        )
        .await
        .unwrap();
    }
    eventually(
        "every widget to converge on a post-outage change",
        Duration::from_secs(60),
        async || {
            converged_in(&client, ns, &names, 2)
                .await
                .ok()?
                .then_some(())
        },
    )
    .await;
    shutdown.cancel();
}

/// Increments `status.observed` by one per reconcile with an update (not a patch) of the cached
/// object, requeueing until it reaches `limit`: each reconcile depends on seeing its own last write.
struct StatusCounter {
    limit: i64,
    conflicts: Arc<AtomicU32>,
}

impl Reconciler<Widget> for StatusCounter {
    type Error = TestError;

    async fn reconcile(&self, w: Arc<Widget>, ctx: &Context<Widget>) -> Result<Action, TestError> {
        let observed = w.status.as_ref().map_or(0, |s| s.observed);
        if observed >= self.limit {
            return Ok(Action::Done);
        }
        let mut next = (*w).clone();
        next.status = Some(WidgetStatus {
            observed: observed + 1,
        });
        match ctx.replace_status(&next).await {
            Ok(_) => Ok(Action::Requeue),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                self.conflicts.fetch_add(1, Ordering::SeqCst);
                Ok(Action::Requeue)
            }
            Err(e) => Err(e.into()),
        }
    }
}

async fn count_to(limit: i64, read_your_writes: Option<Duration>) -> u32 {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let wiring = Wiring::new(ns.client());
    let conflicts = Arc::new(AtomicU32::new(0));
    let controller = Controller::new(
        "counter",
        &wiring,
        ns.api::<Widget>(),
        InformerConfig::default(),
    )
    // Each reconcile is queued by the watch event of the previous one's write (not skipped as
    // its own), so it runs right after that write: what read-your-writes is for.
    .config(
        ControllerConfig::default()
            .read_your_writes(read_your_writes)
            .skip_own_writes(false),
    );
    let shutdown = CancellationToken::new();
    tokio::spawn(controller.run(
        StatusCounter {
            limit,
            conflicts: conflicts.clone(),
        },
        shutdown.clone(),
    ));
    ns.api::<Widget>()
        .create(&PostParams::default(), &widget("counted", 0))
        .await
        .unwrap();
    eventually(
        "the counter to reach its limit",
        Duration::from_secs(60),
        async || {
            let w = ns.api::<Widget>().get("counted").await.unwrap();
            (w.status.map(|s| s.observed) == Some(limit)).then_some(())
        },
    )
    .await;
    shutdown.cancel();
    conflicts.load(Ordering::SeqCst)
}

#[tokio::test]
async fn read_your_writes_should_spare_reconcilers_conflicts_with_their_own_writes() {
    let with = count_to(30, Some(Duration::from_secs(2))).await;
    let without = count_to(30, None).await;
    eprintln!(
        "30 read-modify-write reconciles: {with} conflicts with read-your-writes, {without} without"
    );
    assert_eq!(
        with, 0,
        "no reconcile acted on a stale copy of its own write"
    );
}

/// A kind whose schema accepts anything in `spec.value`, while the Rust type wants an integer.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Gadget {
    metadata: ObjectMeta,
    spec: WidgetSpec,
}

crate::test_resource!(Gadget, group = GROUP, kind = "Gadget", plural = "gadgets");

struct NameRecorder(Arc<Mutex<Vec<String>>>);

impl Reconciler<Gadget> for NameRecorder {
    type Error = TestError;
    async fn reconcile(&self, g: Arc<Gadget>, _ctx: &Context<Gadget>) -> Result<Action, TestError> {
        self.0.lock().unwrap().push(format!(
            "{}={}",
            g.metadata.name.clone().unwrap_or_default(),
            g.spec.value
        ));
        Ok(Action::Done)
    }
}

#[tokio::test]
async fn undecodable_objects_should_be_skipped_not_block_the_informer() {
    let ns = TestNamespace::new().await.unwrap();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": { "name": format!("gadgets.{GROUP}") },
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": { "plural": "gadgets", "singular": "gadget", "kind": "Gadget" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": {
                        "type": "object",
                        "properties": { "value": { "x-kubernetes-int-or-string": true } }
                    }}
                }}
            }]
        }
    }))
    .unwrap();
    apply_crds(&ns.client(), [crd], Duration::from_secs(30))
        .await
        .unwrap();
    let gvk = kube::api::GroupVersionKind::gvk(GROUP, "v1", "Gadget");
    let raw: Api<kube::api::DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &kube::api::ApiResource::from_gvk(&gvk),
    );
    for (name, value) in [
        ("good-1", json!(1)),
        ("bad", json!("not a number")),
        ("good-2", json!(2)),
    ] {
        let obj = serde_json::from_value(json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "Gadget",
            "metadata": { "name": name }, "spec": { "value": value },
        }))
        .unwrap();
        raw.create(&PostParams::default(), &obj).await.unwrap();
    }

    let wiring = Wiring::new(ns.client());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let shutdown = CancellationToken::new();
    let controller = Controller::new(
        "gadgets",
        &wiring,
        ns.api::<Gadget>(),
        InformerConfig::default(),
    );
    tokio::spawn(controller.run(NameRecorder(seen.clone()), shutdown.clone()));
    eventually(
        "the decodable gadgets to be reconciled",
        Duration::from_secs(30),
        async || {
            let seen = seen.lock().unwrap();
            (seen.contains(&"good-1=1".to_owned()) && seen.contains(&"good-2=2".to_owned()))
                .then_some(())
        },
    )
    .await;
    let status = wiring.cache().sync_status();
    assert!(status[0].synced);
    assert_eq!(status[0].cached, 2, "the bad object is not cached");
    assert!(status[0].undecodable >= 1);

    // Once fixed, the object is picked up like any other.
    raw.patch(
        "bad",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "value": 3 } })),
    )
    .await
    .unwrap();
    eventually(
        "the fixed gadget to be reconciled",
        Duration::from_secs(30),
        async || {
            seen.lock()
                .unwrap()
                .contains(&"bad=3".to_owned())
                .then_some(())
        },
    )
    .await;
    shutdown.cancel();
}

/// Runs a Widget controller whose ConfigMaps are watched as `owns` wires them, and converges one
/// widget `name`.
async fn converge_one_widget(
    ns: &TestNamespace,
    name: &str,
    owns: impl FnOnce(Controller<Widget>) -> Controller<Widget>,
) -> (Cache, Arc<Recorder>, CancellationToken) {
    apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let wiring = Wiring::new(ns.client());
    let cache = wiring.cache().clone();
    let controller = owns(Controller::new(
        "widgets-lean",
        &wiring,
        ns.api::<Widget>(),
        InformerConfig::default(),
    ));
    let shutdown = CancellationToken::new();
    let recorder = Arc::new(Recorder::default());
    tokio::spawn(controller.run(WidgetReconciler(recorder.clone()), shutdown.clone()));
    ns.api::<Widget>()
        .create(&PostParams::default(), &widget(name, 4))
        .await
        .unwrap();
    let names = [name.to_owned()];
    eventually(
        "the widget to converge",
        Duration::from_secs(30),
        async || converged(ns, &names, 4).await.then_some(()),
    )
    .await;
    (cache, recorder, shutdown)
}

/// Someone edits the widget's child, then deletes it: each time its owner is reconciled and puts
/// it back.
async fn tampered_child_should_be_restored(ns: &TestNamespace, name: &str, recorder: &Recorder) {
    let child = format!("{name}-cm");
    let names = [name.to_owned()];
    let before = recorder.reconciles.lock().unwrap()[name];
    ns.api::<ConfigMap>()
        .patch(
            &child,
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "value": "tampered" } })),
        )
        .await
        .unwrap();
    eventually(
        "the edited child to be restored",
        Duration::from_secs(30),
        async || converged(ns, &names, 4).await.then_some(()),
    )
    .await;
    assert!(recorder.reconciles.lock().unwrap()[name] > before);

    ns.api::<ConfigMap>()
        .delete(&child, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the deleted child to come back",
        Duration::from_secs(30),
        async || ns.api::<ConfigMap>().get(&child).await.ok(),
    )
    .await;
}

#[tokio::test]
async fn owned_kinds_watched_metadata_only_should_still_restore_children() {
    let ns = TestNamespace::new().await.unwrap();
    // The ConfigMaps are cached as metadata only (no `data`): owner references are all `owns` needs.
    let (cache, recorder, shutdown) = converge_one_widget(&ns, "lean", |c| {
        c.owns(ns.api::<ConfigMap>(), Owns::metadata())
    })
    .await;
    let lean = cache
        .store::<kube::core::PartialObjectMeta<ConfigMap>>(&Lookup::namespace(ns.name()))
        .unwrap()
        .get(&ObjectKey::namespaced(ns.name(), "lean-cm"))
        .await
        .unwrap();
    let lean = lean.expect("the child is cached as metadata");
    assert_eq!(
        lean.metadata.owner_references.as_ref().unwrap()[0].name,
        "lean"
    );
    tampered_child_should_be_restored(&ns, "lean", &recorder).await;
    shutdown.cancel();
}

#[tokio::test]
async fn owned_kinds_watched_uncached_should_still_restore_children() {
    let ns = TestNamespace::new().await.unwrap();
    // The ConfigMaps are not cached: the watch keeps keys, versions and owner references only.
    let (cache, recorder, shutdown) = converge_one_widget(&ns, "bare", |c| {
        c.owns(ns.api::<ConfigMap>(), Owns::uncached())
    })
    .await;
    let here = Lookup::namespace(ns.name());
    assert!(cache.store::<ConfigMap>(&here).is_err());
    assert!(
        cache
            .store::<kube::core::PartialObjectMeta<ConfigMap>>(&here)
            .is_err()
    );
    let status = cache.sync_status();
    let children = status
        .iter()
        .find(|s| s.name.ends_with("/configmaps"))
        .expect("a ConfigMap watch");
    assert!(children.synced);
    // What the watch keeps of the child: its key, version and owner, nothing else. The widget
    // converged through the apiserver; the child's watch event may still be on its way.
    let skeletons = cache
        .skeleton_informer(
            ns.api::<kube::core::PartialObjectMeta<ConfigMap>>(),
            InformerConfig::default(),
        )
        .store();
    let key = ObjectKey::namespaced(ns.name(), "bare-cm");
    let skeleton = eventually(
        "the child's skeleton in the informer",
        Duration::from_secs(10),
        async || skeletons.get(&key).await.unwrap(),
    )
    .await;
    assert_eq!(
        skeleton.metadata.owner_references.as_ref().unwrap()[0].name,
        "bare"
    );
    assert!(skeleton.metadata.resource_version.is_some());
    // Every real object has these; the skeleton does not keep them.
    assert_eq!(skeleton.metadata.uid, None);
    assert_eq!(skeleton.metadata.creation_timestamp, None);
    tampered_child_should_be_restored(&ns, "bare", &recorder).await;
    shutdown.cancel();
}

/// Fails terminally for widgets named `terminal-*`; hangs on the first attempt of `slow-*`.
struct Misbehaving(Arc<Recorder>);

#[derive(Debug, thiserror::Error)]
enum MisbehavingError {
    #[error("this widget can never work")]
    Permanent,
}

impl Reconciler<Widget> for Misbehaving {
    type Error = MisbehavingError;

    async fn reconcile(
        &self,
        w: Arc<Widget>,
        _ctx: &Context<Widget>,
    ) -> Result<Action, MisbehavingError> {
        let name = w.metadata.name.clone().unwrap_or_default();
        let attempt = {
            let mut counts = self.0.reconciles.lock().unwrap();
            let n = counts.entry(name.clone()).or_default();
            *n += 1;
            *n
        };
        if name.starts_with("terminal") {
            return Err(MisbehavingError::Permanent);
        }
        if name.starts_with("slow") && attempt == 1 {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ok(Action::Done)
    }

    fn error_policy(
        &self,
        _w: &Widget,
        error: &MisbehavingError,
        _ctx: &Context<Widget>,
    ) -> kubeforge::controller::ErrorPolicy {
        match error {
            MisbehavingError::Permanent => kubeforge::controller::ErrorPolicy::Terminal,
        }
    }
}

#[tokio::test]
async fn terminal_errors_should_not_be_retried_and_timeouts_should_be() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let recorder = Arc::new(Recorder::default());
    let wiring = Wiring::new(ns.client());
    let controller = Controller::new(
        "misbehaving",
        &wiring,
        ns.api::<Widget>(),
        InformerConfig::default(),
    )
    .config(ControllerConfig::default().reconcile_timeout(Duration::from_millis(500)));
    let shutdown = CancellationToken::new();
    tokio::spawn(controller.run(Misbehaving(recorder.clone()), shutdown.clone()));
    for name in ["terminal-1", "slow-1"] {
        ns.api::<Widget>()
            .create(&PostParams::default(), &widget(name, 1))
            .await
            .unwrap();
    }
    eventually(
        "the slow widget to be retried after its timeout",
        Duration::from_secs(30),
        async || {
            (recorder.reconciles.lock().unwrap().get("slow-1").copied() >= Some(2)).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        recorder.reconciles.lock().unwrap()["terminal-1"],
        1,
        "a terminal error is not retried"
    );
    assert_eq!(
        recorder.reconciles.lock().unwrap()["slow-1"],
        2,
        "retried once, then succeeded"
    );

    // A change to the object is a new chance.
    ns.api::<Widget>()
        .patch(
            "terminal-1",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "value": 2 } })),
        )
        .await
        .unwrap();
    eventually(
        "the changed widget to be reconciled again",
        Duration::from_secs(30),
        async || (recorder.reconciles.lock().unwrap()["terminal-1"] == 2).then_some(()),
    )
    .await;
    shutdown.cancel();
}

#[tokio::test]
async fn manager_should_share_informers_and_stop_within_its_grace_period() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let manager =
        kubeforge::manager::Manager::new(ns.client()).shutdown_grace(Duration::from_secs(5));
    let widgets = Controller::new(
        "widgets",
        manager.wiring(),
        ns.api::<Widget>(),
        InformerConfig::default(),
    )
    .owns(ns.api::<ConfigMap>(), Owns::full());
    // A second controller whose primary is the ConfigMap kind the first one owns.
    let configmaps = Controller::new(
        "configmaps",
        manager.wiring(),
        ns.api::<ConfigMap>(),
        InformerConfig::default(),
    );
    let cache = manager.cache().clone();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let manager = manager
        .add_controller(widgets, WidgetReconciler(Arc::default()))
        .add_controller(configmaps, ConfigMapNames(seen.clone()));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));

    ns.api::<Widget>()
        .create(&PostParams::default(), &widget("shared", 5))
        .await
        .unwrap();
    eventually(
        "the widget to converge and its child to reach the second controller",
        Duration::from_secs(30),
        async || {
            let names = ["shared".to_owned()];
            (converged(&ns, &names, 5).await
                && seen.lock().unwrap().contains(&"shared-cm".to_owned()))
            .then_some(())
        },
    )
    .await;
    assert_eq!(
        cache.sync_status().len(),
        2,
        "one Widget and one shared ConfigMap informer: {:?}",
        cache.sync_status()
    );

    let stopping = std::time::Instant::now();
    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "stopped in {:?}",
        stopping.elapsed()
    );
}

struct ConfigMapNames(Arc<Mutex<Vec<String>>>);

impl Reconciler<ConfigMap> for ConfigMapNames {
    type Error = TestError;
    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, TestError> {
        self.0
            .lock()
            .unwrap()
            .push(cm.metadata.name.clone().unwrap_or_default());
        Ok(Action::Done)
    }
}
