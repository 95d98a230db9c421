//! Cache stores on the controller path: controllers whose kinds live in a real memcached
//! (`kubeforge::testing::MemcachedServer`), against the real apiserver, with its faults:
//! restarted empty, unreachable, shared by two operators, evicting.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kubeforge::ObjectKey;
use kubeforge::cache::Lookup;
use kubeforge::controller::{Action, Context, Controller, Owns, Reconciler};
use kubeforge::informer::InformerConfig;
use kubeforge::manager::Manager;
use kubeforge::store::{Memcached, MemcachedConfig, SharedBackend};
use kubeforge::testing::{MemcachedServer, TestNamespace, apply_crds};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::controller::{Recorder, WidgetReconciler, converged};
use crate::manager::http_get;
use crate::support::eventually;
use crate::support::widget::{Widget, widget, widget_crd};

const CONVERGE: Duration = Duration::from_secs(90);

fn memcached(server: &MemcachedServer, shard: &str) -> SharedBackend {
    Arc::new(
        Memcached::new(
            MemcachedConfig::new([server.addr()])
                .shard_key(shard)
                .key_sync_interval(Duration::from_secs(1)),
        )
        .unwrap(),
    )
}

/// A manager running the Widget controller with widgets and their ConfigMaps in `backend`.
struct Operator {
    manager: tokio::task::JoinHandle<Result<(), kubeforge::manager::ManagerError>>,
    shutdown: CancellationToken,
    cache: kubeforge::cache::Cache,
    health: SocketAddr,
}

impl Operator {
    async fn start(ns: &TestNamespace, backend: SharedBackend, recorder: Arc<Recorder>) -> Self {
        let mut manager = Manager::new(ns.client())
            .health_probe_bind_address("127.0.0.1:0".parse().unwrap())
            .store_backend(backend);
        let in_memcached = InformerConfig::default().store_named("memcached");
        let controller = Controller::new(
            "widgets",
            manager.wiring(),
            ns.api::<Widget>(),
            in_memcached.clone(),
        )
        .owns(
            ns.api::<ConfigMap>(),
            Owns::full().informer(in_memcached.clone()),
        );
        let cache = manager.cache().clone();
        manager = manager.add_controller(controller, WidgetReconciler(recorder));
        let mut listening = manager.on_listening();
        let shutdown = CancellationToken::new();
        let manager = tokio::spawn(manager.run_until(shutdown.clone()));
        let (_, health) = listening.recv().await.unwrap();
        Self {
            manager,
            shutdown,
            cache,
            health,
        }
    }

    fn widgets(&self, ns: &TestNamespace) -> kubeforge::store::Reader<Widget> {
        self.cache
            .store::<Widget>(&Lookup::namespace(ns.name()))
            .unwrap()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.manager.await.unwrap().unwrap();
    }
}

async fn create_widgets(ns: &TestNamespace, n: usize) -> Vec<String> {
    apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let names: Vec<String> = (0..n).map(|i| format!("w{i}")).collect();
    for name in &names {
        ns.api::<Widget>()
            .create(&PostParams::default(), &widget(name, 1))
            .await
            .unwrap();
    }
    names
}

async fn set_all(ns: &TestNamespace, names: &[String], value: i64) {
    for name in names {
        ns.api::<Widget>()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "value": value } })),
            )
            .await
            .unwrap();
    }
}

async fn converge(ns: &TestNamespace, names: &[String], value: i64, what: &str) {
    eventually(what, CONVERGE, async || {
        converged(ns, names, value).await.then_some(())
    })
    .await;
}

/// The primary and owned kinds cached in memcached: the controller converges, reads come from
/// memcached, and after memcached restarts empty every object still converges — each lost entry
/// is refilled from the apiserver, none is taken for a deleted object.
#[tokio::test]
async fn a_controller_should_converge_with_its_cache_in_memcached_and_survive_a_restart() {
    let ns = TestNamespace::new().await.unwrap();
    let mut server = MemcachedServer::start(64).await.unwrap();
    let names = create_widgets(&ns, 20).await;
    let recorder = Arc::new(Recorder::default());
    let operator = Operator::start(&ns, memcached(&server, "restart"), recorder).await;
    converge(&ns, &names, 1, "converged with memcached").await;
    let widgets = operator.widgets(&ns);
    assert_eq!(widgets.backend(), "memcached");
    assert_eq!(widgets.list().await.unwrap().len(), 20);
    assert_eq!(widgets.refills(), 0, "nothing lost yet");
    // The reads a reconciler makes work as with the in-memory store: by key, by namespace and
    // labels, by owner (the index in memory finds the keys, the bodies come from memcached).
    let w0 = widgets
        .get(&ObjectKey::namespaced(ns.name(), "w0"))
        .await
        .unwrap()
        .expect("cached");
    let children = operator
        .cache
        .store::<ConfigMap>(&Lookup::namespace(ns.name()))
        .unwrap();
    assert_eq!(children.backend(), "memcached");
    let owned = children
        .owned_by(w0.metadata.uid.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        owned.len(),
        1,
        "w0's ConfigMap, found through the owner index"
    );
    assert_eq!(owned[0].metadata.name.as_deref(), Some("w0-cm"));
    let everything = kube::core::Selector::default();
    let in_namespace = widgets
        .list_selected(Some(ns.name()), &everything)
        .await
        .unwrap();
    assert_eq!(in_namespace.len(), 20);

    server.restart().await.unwrap();
    // A read of an entry lost in the restart refills it from the apiserver (it is not taken for
    // a deleted object).
    let w1 = widgets
        .get(&ObjectKey::namespaced(ns.name(), "w1"))
        .await
        .unwrap()
        .expect("refilled, not taken for deleted");
    assert_eq!(w1.metadata.name.as_deref(), Some("w1"));
    assert!(
        widgets.refills() > 0,
        "the entry lost in the restart was refilled from the apiserver"
    );
    set_all(&ns, &names, 2).await;
    converge(&ns, &names, 2, "converged after memcached restarted empty").await;
    let listed = widgets.list().await.unwrap();
    assert_eq!(listed.len(), 20, "every object is still cached");
    operator.stop().await;
}

/// memcached unreachable: reads fail with an error naming memcached, the controller retries,
/// `/readyz` reports the store; when memcached returns everything recovers by itself.
#[tokio::test]
async fn an_unreachable_memcached_should_fail_readiness_and_recover_by_itself() {
    let ns = TestNamespace::new().await.unwrap();
    let mut server = MemcachedServer::start(64).await.unwrap();
    let names = create_widgets(&ns, 5).await;
    let operator = Operator::start(
        &ns,
        memcached(&server, "outage"),
        Arc::new(Recorder::default()),
    )
    .await;
    converge(&ns, &names, 1, "converged before the outage").await;
    eventually("ready", Duration::from_secs(30), async || {
        (http_get(operator.health, "/readyz").await.0 == 200).then_some(())
    })
    .await;

    server.stop();
    let widgets = operator.widgets(&ns);
    let error = widgets
        .get(&ObjectKey::namespaced(ns.name(), "w0"))
        .await
        .expect_err("memcached is down");
    assert!(error.to_string().contains("memcached"), "{error}");
    let body = eventually(
        "readiness to report the store",
        Duration::from_secs(30),
        async || {
            let (status, body) = http_get(operator.health, "/readyz?verbose").await;
            (status != 200).then_some(body)
        },
    )
    .await;
    assert!(body.contains("[-]store-memcached failed"), "{body}");
    set_all(&ns, &names, 2).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !converged(&ns, &names, 2).await,
        "nothing can be reconciled while the cache cannot be read"
    );

    server.start_again().await.unwrap();
    converge(&ns, &names, 2, "converged after memcached returned").await;
    eventually("ready again", Duration::from_secs(30), async || {
        (http_get(operator.health, "/readyz").await.0 == 200).then_some(())
    })
    .await;
    operator.stop().await;
}

/// Two operators with different shard keys caching the same objects in one memcached: each
/// keeps its own entries, so one operator's damaged entry does not touch the other's.
#[tokio::test]
async fn operators_with_different_shard_keys_should_see_only_their_own_entries() {
    let ns = TestNamespace::new().await.unwrap();
    let server = MemcachedServer::start(64).await.unwrap();
    let names = create_widgets(&ns, 3).await;
    let a_backend = memcached(&server, "team-a");
    let a = Operator::start(&ns, Arc::clone(&a_backend), Arc::new(Recorder::default())).await;
    let b = Operator::start(
        &ns,
        memcached(&server, "team-b"),
        Arc::new(Recorder::default()),
    )
    .await;
    converge(&ns, &names, 1, "both converged").await;
    let key = ObjectKey::namespaced(ns.name(), "w0");
    let (a_widgets, b_widgets) = (a.widgets(&ns), b.widgets(&ns));
    let (a_key, b_key) = (
        a_widgets.entry_key(&key).unwrap(),
        b_widgets.entry_key(&key).unwrap(),
    );
    assert_ne!(a_key, b_key);
    assert!(a_key.starts_with("team-a:") && b_key.starts_with("team-b:"));
    let entries = a_backend
        .get_many(&[a_key.clone(), b_key.clone()])
        .await
        .unwrap();
    assert!(
        entries.iter().all(Option::is_some),
        "both entries are there"
    );

    // Damage b's entry: b notices and refills; a reads its own entry, untouched.
    a_backend
        .set_many(&[(b_key, b"{\"not\": \"a widget\"}".to_vec())])
        .await
        .unwrap();
    let (a_before, b_before) = (a_widgets.refills(), b_widgets.refills());
    assert!(a_widgets.get(&key).await.unwrap().is_some());
    assert!(b_widgets.get(&key).await.unwrap().is_some());
    assert_eq!(a_widgets.refills(), a_before, "a's entry was not touched");
    // (b's own reconciles may read the damaged entry too, and refill it as well.)
    assert!(
        b_widgets.refills() > b_before,
        "b refilled its damaged entry"
    );
    a.stop().await;
    b.stop().await;
}

/// Records what each reconcile saw of a ConfigMap's data.
#[derive(Default)]
struct Sizes(Mutex<BTreeMap<String, (String, usize)>>);

struct SizeReconciler(Arc<Sizes>);

impl Reconciler<ConfigMap> for SizeReconciler {
    type Error = kube::Error;
    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, kube::Error> {
        let round = cm
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("round").cloned())
            .unwrap_or_default();
        let size = cm
            .data
            .as_ref()
            .and_then(|d| d.get("blob"))
            .map_or(0, String::len);
        self.0
            .0
            .lock()
            .unwrap()
            .insert(cm.metadata.name.clone().unwrap_or_default(), (round, size));
        Ok(Action::Done)
    }
}

/// A memcached too small for the cache (2 MB, 120 ConfigMaps of 32 KB) evicts entries; an
/// evicted entry is re-read from the apiserver, never taken for a deletion: every object is
/// reconciled, whole, each time it changes.
#[tokio::test]
async fn entries_evicted_by_memcached_should_be_reread_never_treated_as_deleted() {
    const N: usize = 120;
    let ns = TestNamespace::new().await.unwrap();
    let server = MemcachedServer::start(2).await.unwrap();
    let blob = "x".repeat(32 * 1024);
    let names: Vec<String> = (0..N).map(|i| format!("big-{i}")).collect();
    for name in &names {
        let mut cm = crate::support::configmap(name, &[("blob", &blob)]);
        cm.metadata.labels = Some([("round".to_owned(), "1".to_owned())].into());
        ns.api::<ConfigMap>()
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let sizes = Arc::new(Sizes::default());
    let manager = Manager::new(ns.client()).store_backend(memcached(&server, "evict"));
    let controller = Controller::new(
        "sizes",
        manager.wiring(),
        ns.api::<ConfigMap>(),
        InformerConfig::default()
            .labels("round")
            .store_named("memcached"),
    );
    let cache = manager.cache().clone();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(
        manager
            .add_controller(controller, SizeReconciler(Arc::clone(&sizes)))
            .run_until(shutdown.clone()),
    );
    let all_at = async |round: &str| {
        let seen = sizes.0.lock().unwrap();
        (seen.len() == N
            && seen
                .values()
                .all(|(r, size)| r == round && *size == blob.len()))
        .then_some(())
    };
    eventually("round 1 reconciled whole", CONVERGE, async || {
        all_at("1").await
    })
    .await;
    for name in &names {
        ns.api::<ConfigMap>()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "labels": { "round": "2" } } })),
            )
            .await
            .unwrap();
    }
    eventually("round 2 reconciled whole", CONVERGE, async || {
        all_at("2").await
    })
    .await;
    let store = cache
        .store::<ConfigMap>(&Lookup::namespace(ns.name()).labels("round"))
        .unwrap();
    assert!(
        store.refills() > 0,
        "{N} objects of 32 KB cannot all stay in 2 MB: some were evicted and re-read"
    );
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
