//! View types on the real apiserver: a controller whose primary is a Pod view
//! (`#[kubeforge::view(of = Pod)]`) reconciles Pods created with large, realistic specs; its
//! cache holds only the view's fields (asserted on the cached object and on its serialized size
//! next to the full Pod the full type's informer caches); a change of a field the view holds
//! triggers a reconcile; the view and the full type watched side by side in one cache are two
//! informers, and each reads its own. And through `#[controller]`: a ReplicaSet view owning Pod
//! views, the Pods made by kube-controller-manager's ReplicaSet controller.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kubeforge::ObjectKey;
use kubeforge::cache::Lookup;
use kubeforge::controller::{Action, Context, Controller, Reconciler, Wiring};
use kubeforge::informer::InformerConfig;
use kubeforge::manager::Manager;
use kubeforge::testing::TestNamespace;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;

#[kubeforge::view(of = Pod)]
pub struct PodView {
    pub metadata: ObjectMeta,
    pub spec: Option<PodSpecView>,
    pub status: Option<PodStatusView>,
}

#[kubeforge::view(of = PodSpec)]
pub struct PodSpecView {
    pub node_name: Option<String>,
    pub containers: Vec<ContainerView>,
}

#[kubeforge::view(of = Container)]
pub struct ContainerView {
    pub name: String,
    pub image: Option<String>,
}

#[kubeforge::view(of = PodStatus)]
pub struct PodStatusView {
    pub phase: Option<String>,
}

/// What the reconcilers saw: (name, the first container's image).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

struct ViewReconciler(Seen);

impl Reconciler<PodView> for ViewReconciler {
    type Error = std::convert::Infallible;

    async fn reconcile(
        &self,
        pod: Arc<PodView>,
        _: &Context<PodView>,
    ) -> Result<Action, Self::Error> {
        let image = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.0.lock().unwrap().push((name, image));
        Ok(Action::Done)
    }
}

struct FullReconciler(Seen);

impl Reconciler<Pod> for FullReconciler {
    type Error = std::convert::Infallible;

    async fn reconcile(&self, pod: Arc<Pod>, _: &Context<Pod>) -> Result<Action, Self::Error> {
        let image = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.0.lock().unwrap().push((name, image));
        Ok(Action::Done)
    }
}

/// A Pod with a spec the size of a real workload's: three containers with forty environment
/// variables each, probes, resources, mounts, volumes, affinity and tolerations.
fn large_pod(name: &str) -> Pod {
    let env: Vec<_> = (0..40)
        .map(|i| json!({ "name": format!("SETTING_{i}"), "value": format!("value-{i}-{}", "x".repeat(40)) }))
        .collect();
    let container = |n: usize| {
        json!({
            "name": format!("c{n}"),
            "image": format!("registry.example.com/team/app-{n}:1.0.0"),
            "args": ["--listen=:8080", "--log-level=info", "--config=/etc/app/config.yaml"],
            "env": env,
            "ports": [{ "name": "http", "containerPort": 8080 + n }],
            "resources": { "requests": { "cpu": "100m", "memory": "128Mi" }, "limits": { "cpu": "1", "memory": "512Mi" } },
            "readinessProbe": { "httpGet": { "path": "/ready", "port": 8080 + n }, "periodSeconds": 5 },
            "livenessProbe": { "httpGet": { "path": "/live", "port": 8080 + n }, "periodSeconds": 10 },
            "volumeMounts": (0..8).map(|v| json!({ "name": format!("v{v}"), "mountPath": format!("/data/{n}/{v}") })).collect::<Vec<_>>(),
        })
    };
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "app": "views" } },
        "spec": {
            "containers": [container(0), container(1), container(2)],
            "volumes": (0..8).map(|v| json!({ "name": format!("v{v}"), "emptyDir": {} })).collect::<Vec<_>>(),
            "tolerations": [{ "key": "dedicated", "operator": "Equal", "value": "views", "effect": "NoSchedule" }],
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{ "matchExpressions": [{ "key": "zone", "operator": "In", "values": ["a", "b", "c"] }] }]
            } } },
        }
    }))
    .unwrap()
}

/// Whether `seen` holds a reconcile of `name` that saw `image`.
fn saw(seen: &Seen, name: &str, image: &str) -> bool {
    seen.lock()
        .unwrap()
        .iter()
        .any(|(n, i)| n == name && i == image)
}

/// The cached `view` holds the view's fields of the cached `full` Pod and nothing else, in a
/// small fraction of its size.
fn assert_lean(view: &PodView, full: &Pod) {
    // The cached view holds the view's fields, equal to the full object's projection...
    assert_eq!(view, &PodView::project(full));
    let spec = view.spec.as_ref().unwrap();
    assert_eq!(spec.containers.len(), 3);
    assert_eq!(spec.containers[2].name, "c2");
    assert_eq!(view.metadata.uid, full.metadata.uid);
    // ...and nothing else: its JSON has no trace of the env, probes, volumes or affinity.
    let view_json = serde_json::to_string(view).unwrap();
    let full_json = serde_json::to_string(full).unwrap();
    for absent in [
        "SETTING_0",
        "readinessProbe",
        "emptyDir",
        "nodeAffinity",
        "volumeMounts",
    ] {
        assert!(
            !view_json.contains(absent),
            "{absent} in the cached view: {view_json}"
        );
        assert!(full_json.contains(absent), "{absent} not in the cached Pod");
    }
    eprintln!(
        "cached view {} bytes of JSON, cached Pod {} bytes",
        view_json.len(),
        full_json.len()
    );
    // Memory: the cached view is a small fraction of the cached full Pod (managedFields already
    // cut from both by the informers).
    assert!(
        view_json.len() * 5 < full_json.len(),
        "view {} bytes, full Pod {} bytes",
        view_json.len(),
        full_json.len()
    );
}

#[tokio::test]
async fn a_view_controller_should_cache_only_the_view_and_run_beside_the_full_type() {
    let ns = TestNamespace::new().await.unwrap();
    let pods = ns.api::<Pod>();
    let names = ["web-0", "web-1", "web-2"];
    for name in names {
        pods.create(&PostParams::default(), &large_pod(name))
            .await
            .unwrap();
    }

    // One wiring, one cache: the view's controller and the full type's, two informers.
    let wiring = Wiring::new(ns.client());
    let (view_seen, full_seen): (Seen, Seen) = Default::default();
    let shutdown = CancellationToken::new();
    let views = Controller::new(
        "pod-views",
        &wiring,
        ns.api::<PodView>(),
        InformerConfig::default(),
    );
    let fulls = Controller::new("pods", &wiring, pods.clone(), InformerConfig::default());
    let running = [
        tokio::spawn(views.run(ViewReconciler(Arc::clone(&view_seen)), shutdown.clone())),
        tokio::spawn(fulls.run(FullReconciler(Arc::clone(&full_seen)), shutdown.clone())),
    ];

    let first = "registry.example.com/team/app-0:1.0.0";
    for name in names {
        eventually(
            &format!("both controllers reconciling {name}"),
            Duration::from_secs(30),
            async || (saw(&view_seen, name, first) && saw(&full_seen, name, first)).then_some(()),
        )
        .await;
    }

    // Each type reads its own informer.
    let lookup = Lookup::namespace(ns.name());
    let view_store = wiring.cache().store::<PodView>(&lookup).unwrap();
    let full_store = wiring.cache().store::<Pod>(&lookup).unwrap();
    let key = ObjectKey::namespaced(ns.name(), "web-0");
    let view = view_store
        .get(&key)
        .await
        .unwrap()
        .expect("the view cached");
    let full = full_store.get(&key).await.unwrap().expect("the Pod cached");
    assert_eq!(view_store.len().await.unwrap(), names.len());

    assert_lean(&view, &full);

    // A change of a field the view holds reconciles the view's controller, which sees it.
    let updated = "registry.example.com/team/app-0:2.0.0";
    let patch = json!({ "spec": { "containers": [{ "name": "c0", "image": updated }] } });
    pods.patch("web-1", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    eventually(
        "the view's controller seeing web-1's new image",
        Duration::from_secs(30),
        async || saw(&view_seen, "web-1", updated).then_some(()),
    )
    .await;
    eventually(
        "the full type's controller seeing it too",
        Duration::from_secs(30),
        async || saw(&full_seen, "web-1", updated).then_some(()),
    )
    .await;
    let cached = view_store
        .get(&ObjectKey::namespaced(ns.name(), "web-1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        cached.spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some(updated)
    );

    shutdown.cancel();
    for task in running {
        task.await.unwrap().unwrap();
    }
}

#[kubeforge::view(of = ReplicaSet)]
pub struct ReplicaSetView {
    pub metadata: ObjectMeta,
}

/// What the ReplicaSet view's reconciles saw: per ReplicaSet, its Pods' first images, read from
/// the cache of Pod views.
#[derive(Clone, Default)]
struct Owners(Arc<Mutex<BTreeMap<String, Vec<String>>>>);

#[kubeforge::controller(for = ReplicaSetView, name = "replicaset-views", owns(PodView))]
impl Owners {
    async fn reconcile(
        &self,
        rs: Arc<ReplicaSetView>,
        ctx: &Context<ReplicaSetView>,
    ) -> Result<Action, kubeforge::BoxError> {
        let pods = ctx
            .cache()
            .store::<PodView>(&Lookup::scope(ctx.key().namespace.as_deref()))?;
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let mut images: Vec<String> = pods
            .owned_by(&uid)
            .await?
            .iter()
            .filter_map(|pod| pod.spec.as_ref()?.containers.first()?.image.clone())
            .collect();
        images.sort();
        let name = rs.metadata.name.clone().unwrap_or_default();
        self.0.lock().unwrap().insert(name, images);
        Ok(Action::Done)
    }
}

#[tokio::test]
async fn a_view_should_be_the_owned_kind_of_a_controller_of_a_view() {
    let ns = TestNamespace::new().await.unwrap();
    let owners = Owners::default();
    let manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .controller(owners.clone());
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));

    let template = large_pod("unused");
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "views" } },
            "template": { "metadata": { "labels": { "app": "views" } }, "spec": template.spec },
        }
    }))
    .unwrap();
    ns.api::<ReplicaSet>()
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    let first = "registry.example.com/team/app-0:1.0.0".to_owned();
    let seen = |wanted: Vec<String>| {
        let owners = owners.clone();
        async move { (owners.0.lock().unwrap().get("web") == Some(&wanted)).then_some(()) }
    };
    eventually(
        "the ReplicaSet view reconciled with its two Pod views",
        Duration::from_secs(60),
        async || seen(vec![first.clone(), first.clone()]).await,
    )
    .await;

    // A change of an owned Pod's field the view holds reconciles its owner.
    let pods = ns.api::<Pod>();
    let name = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .first()
        .and_then(|pod| pod.metadata.name.clone())
        .unwrap();
    let updated = "registry.example.com/team/app-0:2.0.0".to_owned();
    let patch = json!({ "spec": { "containers": [{ "name": "c0", "image": updated }] } });
    pods.patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    eventually(
        "the owner reconciled with the Pod view's new image",
        Duration::from_secs(30),
        async || seen(vec![first.clone(), updated.clone()]).await,
    )
    .await;

    shutdown.cancel();
    running.await.unwrap().unwrap();
}
