//! Warm standbys on the real apiserver: under leader election a standby replica keeps its cache
//! synced with idle workers (by default: before, a standby held nothing until it led), so when the leader goes, it reconciles a changed
//! object without listing anything first; with `warm_up_before_leading(false)` a standby holds
//! nothing until it leads.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kubeforge::cache::Cache;
use kubeforge::controller::{Action, Context, Controller, ControllerConfig, Reconciler, Trigger};
use kubeforge::informer::InformerConfig;
use kubeforge::leader::LeaderElectionConfig;
use kubeforge::manager::Manager;
use kubeforge::testing::TestNamespace;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually};

const OBJECTS: usize = 200;

/// Counts reconciles, and notes when `cm-0` was first reconciled with `data.v = "new"`, and
/// every run in order (name, `data.v`, why).
#[derive(Default)]
struct Counting {
    runs: AtomicUsize,
    new_seen: std::sync::Mutex<Option<Instant>>,
    order: std::sync::Mutex<Vec<(String, String, Vec<Trigger>)>>,
    /// How long each reconcile takes.
    delay: Duration,
}

struct Counter(Arc<Counting>);

impl Reconciler<ConfigMap> for Counter {
    type Error = std::convert::Infallible;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        self.0.runs.fetch_add(1, Ordering::SeqCst);
        let value = cm
            .data
            .as_ref()
            .and_then(|d| d.get("v"))
            .cloned()
            .unwrap_or_default();
        let new = value == "new";
        let name = cm.metadata.name.clone().unwrap_or_default();
        self.0
            .order
            .lock()
            .unwrap()
            .push((name, value, ctx.triggers().to_vec()));
        if new && cm.metadata.name.as_deref() == Some("cm-0") {
            self.0
                .new_seen
                .lock()
                .unwrap()
                .get_or_insert_with(Instant::now);
        }
        if !self.0.delay.is_zero() {
            tokio::time::sleep(self.0.delay).await;
        }
        Ok(Action::Done)
    }
}

/// One replica: its manager running, its cache, what its reconciler saw, whether it leads.
struct Replica {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    cache: Cache,
    counting: Arc<Counting>,
    leading: tokio::sync::watch::Receiver<bool>,
}

/// A replica; `warm`: `None` for the default.
fn replica(ns: &TestNamespace, warm: Option<bool>) -> Replica {
    replica_with(ns, warm, Counting::default(), ControllerConfig::default())
}

/// A replica whose reconciler counts into `counting`, its controller configured by `config`.
fn replica_with(
    ns: &TestNamespace,
    warm: Option<bool>,
    counting: Counting,
    controller_config: ControllerConfig,
) -> Replica {
    let client = ns.client();
    let config = LeaderElectionConfig::new("standby", ns.name()).timings(
        Duration::from_secs(6),
        Duration::from_secs(4),
        Duration::from_secs(1),
    );
    let mut manager = Manager::new(client.clone())
        .namespace(Some(ns.name().to_owned()))
        .leader_election(config);
    if let Some(warm) = warm {
        manager = manager.warm_up_before_leading(warm);
    }
    let counting = Arc::new(counting);
    let controller = Controller::new(
        "standby",
        manager.wiring(),
        ns.api::<ConfigMap>(),
        // A small channel: a subscriber that reads nothing puts events in its backlog at once.
        InformerConfig::default().buffer(8),
    )
    .config(controller_config);
    manager = manager.add_controller(controller, Counter(Arc::clone(&counting)));
    let cache = manager.wiring().cache().clone();
    let leading = manager.leading();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let task = tokio::spawn(async move {
        manager.run_until(token).await.unwrap();
    });
    Replica {
        shutdown,
        task,
        cache,
        counting,
        leading,
    }
}

/// Lists and cached objects of the replica's ConfigMap informer.
fn lists_and_cached(cache: &Cache) -> (u64, usize) {
    cache
        .sync_status()
        .iter()
        .filter(|s| s.name.contains("configmaps"))
        .fold((0, 0), |(lists, cached), s| {
            (lists + s.lists, cached + s.cached)
        })
}

async fn objects(ns: &TestNamespace) {
    futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let api = ns.api::<ConfigMap>();
            async move {
                let cm = configmap(&format!("cm-{i}"), &[("v", "old")]);
                api.create(&PostParams::default(), &cm).await.map(|_| ())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_warm_standby_should_hold_a_synced_cache_and_take_over_without_a_list() {
    let ns = TestNamespace::new().await.unwrap();
    objects(&ns).await;
    let mut leader = replica(&ns, None);
    eventually(
        "the first replica to lead",
        Duration::from_secs(60),
        async || (*leader.leading.borrow_and_update()).then_some(()),
    )
    .await;
    let standby = replica(&ns, None);
    eventually(
        "the standby's cache to sync",
        Duration::from_secs(60),
        // The namespace's own `kube-root-ca.crt` is cached too.
        async || (lists_and_cached(&standby.cache).1 > OBJECTS).then_some(()),
    )
    .await;
    // Synced, its workers idle: no reconcile while the other replica leads, and no events
    // held for a controller that is not running (they piled up in a backlog before: every
    // event since the standby started, for as long as it waited).
    for i in 0..50 {
        ns.api::<ConfigMap>()
            .patch(
                &format!("cm-{i}"),
                &PatchParams::default(),
                &Patch::Merge(json!({ "data": { "standby": "x" } })),
            )
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let late: u64 = standby
        .cache
        .sync_status()
        .iter()
        .map(|s| s.late_events)
        .sum();
    assert_eq!(late, 0, "events held for the standby's idle controller");
    assert!(!*standby.leading.borrow());
    assert_eq!(standby.counting.runs.load(Ordering::SeqCst), 0);
    assert!(leader.counting.runs.load(Ordering::SeqCst) >= OBJECTS);
    let (lists, _) = lists_and_cached(&standby.cache);

    // The leader stops (and releases the Lease); an object changes; the standby takes over.
    let stopped = Instant::now();
    leader.shutdown.cancel();
    leader.task.await.unwrap();
    ns.api::<ConfigMap>()
        .patch(
            "cm-0",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "v": "new" } })),
        )
        .await
        .unwrap();
    let seen = eventually(
        "the standby to reconcile the change",
        Duration::from_secs(60),
        async || *standby.counting.new_seen.lock().unwrap(),
    )
    .await;
    eprintln!(
        "warm takeover: the change reconciled {:?} after the leader stopped",
        seen - stopped
    );
    assert_eq!(
        lists_and_cached(&standby.cache).0,
        lists,
        "no list on takeover: the cache was warm"
    );
    standby.shutdown.cancel();
    standby.task.await.unwrap();
}

/// Objects changed while the leader still led but before the standby took over: the old
/// leader may or may not have reconciled them.
const CHANGED: [&str; 5] = ["cm-7", "cm-51", "cm-99", "cm-142", "cm-188"];

#[tokio::test]
async fn changes_a_warm_standby_watched_before_it_led_should_go_ahead_of_its_start_up_wave() {
    let ns = TestNamespace::new().await.unwrap();
    objects(&ns).await;
    // One worker at 20 ms a reconcile: a start-up wave of 4 s, in the order of the replay.
    let slow = || Counting {
        delay: Duration::from_millis(20),
        ..Counting::default()
    };
    let one = || ControllerConfig::default().concurrency(1);
    let mut leader = replica_with(&ns, None, slow(), one());
    eventually(
        "the first replica to lead",
        Duration::from_secs(60),
        async || (*leader.leading.borrow_and_update()).then_some(()),
    )
    .await;
    let standby = replica_with(&ns, None, slow(), one());
    let store = standby
        .cache
        .informer(ns.api::<ConfigMap>(), InformerConfig::default().buffer(8))
        .store();
    eventually(
        "the standby's cache to sync",
        Duration::from_secs(60),
        async || (lists_and_cached(&standby.cache).1 > OBJECTS).then_some(()),
    )
    .await;
    for name in CHANGED {
        ns.api::<ConfigMap>()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "data": { "v": "new" } })),
            )
            .await
            .unwrap();
    }
    // The standby watched the changes before it led.
    eventually(
        "the standby's cache to hold the changes",
        Duration::from_secs(60),
        async || {
            for name in CHANGED {
                let cm = store
                    .get(&kubeforge::ObjectKey::namespaced(ns.name(), name))
                    .await
                    .unwrap()?;
                cm.data.as_ref()?.get("v").filter(|v| *v == "new")?;
            }
            Some(())
        },
    )
    .await;
    leader.shutdown.cancel();
    leader.task.await.unwrap();

    eventually(
        "the standby's start-up wave to end",
        Duration::from_secs(120),
        async || (standby.counting.runs.load(Ordering::SeqCst) > OBJECTS).then_some(()),
    )
    .await;
    let order = standby.counting.order.lock().unwrap().clone();
    let first = |name: &str| {
        order
            .iter()
            .position(|(n, v, _)| n == name && v == "new")
            .unwrap_or_else(|| panic!("{name} not reconciled with its change: {order:?}"))
    };
    // Ahead of the wave: at most the run in flight and the few the informer handed over first.
    // As start-up state (before) they took their place in the wave, anywhere in it.
    let places: Vec<usize> = CHANGED.iter().map(|name| first(name)).collect();
    assert!(
        places.iter().all(|place| *place < 2 * CHANGED.len()),
        "the changes were reconciles {places:?} of the standby's wave of {}",
        order.len()
    );
    for place in places {
        assert_eq!(order[place].2, [Trigger::ChangedBeforeStart]);
    }
    let started = order
        .iter()
        .filter(|(_, _, t)| *t == [Trigger::StartUp])
        .count();
    assert_eq!(started, order.len() - CHANGED.len(), "{:?}", &order[..10]);
    standby.shutdown.cancel();
    standby.task.await.unwrap();
}

#[tokio::test]
async fn a_cold_standby_should_hold_nothing_until_it_leads() {
    let ns = TestNamespace::new().await.unwrap();
    objects(&ns).await;
    let mut leader = replica(&ns, Some(false));
    eventually(
        "the first replica to lead",
        Duration::from_secs(60),
        async || (*leader.leading.borrow_and_update()).then_some(()),
    )
    .await;
    let standby = replica(&ns, Some(false));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        lists_and_cached(&standby.cache),
        (0, 0),
        "a cold standby lists nothing"
    );
    leader.shutdown.cancel();
    leader.task.await.unwrap();
    eventually(
        "the cold standby to lead and sync",
        Duration::from_secs(60),
        async || {
            let (lists, cached) = lists_and_cached(&standby.cache);
            (lists == 1 && cached > OBJECTS).then_some(())
        },
    )
    .await;
    standby.shutdown.cancel();
    standby.task.await.unwrap();
}
