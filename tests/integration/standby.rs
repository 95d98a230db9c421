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
use kubeforge::controller::{Action, Context, Controller, Reconciler};
use kubeforge::informer::InformerConfig;
use kubeforge::leader::LeaderElectionConfig;
use kubeforge::manager::Manager;
use kubeforge::testing::TestNamespace;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually};

const OBJECTS: usize = 200;

/// Counts reconciles, and notes when `cm-0` was first reconciled with `data.v = "new"`.
#[derive(Default)]
struct Counting {
    runs: AtomicUsize,
    new_seen: std::sync::Mutex<Option<Instant>>,
}

struct Counter(Arc<Counting>);

impl Reconciler<ConfigMap> for Counter {
    type Error = std::convert::Infallible;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        self.0.runs.fetch_add(1, Ordering::SeqCst);
        let new = cm
            .data
            .as_ref()
            .and_then(|d| d.get("v"))
            .map(String::as_str)
            == Some("new");
        if new && cm.metadata.name.as_deref() == Some("cm-0") {
            self.0
                .new_seen
                .lock()
                .unwrap()
                .get_or_insert_with(Instant::now);
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
    let counting = Arc::new(Counting::default());
    let controller = Controller::new(
        "standby",
        manager.wiring(),
        ns.api::<ConfigMap>(),
        // A small channel: a subscriber that reads nothing puts events in its backlog at once.
        InformerConfig::default().buffer(8),
    );
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
