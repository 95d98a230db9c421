//! Watchers through the concurrent dispatcher, against the real apiserver: parallel workers
//! speed up slow handlers, events of one object stay in order, failed and timed-out handlers
//! are retried.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kubeforge::controller::Wiring;
use kubeforge::informer::InformerConfig;
use kubeforge::retry::ExponentialRetry;
use kubeforge::testing::TestNamespace;
use kubeforge::watcher::{WatchContext, Watcher, WatcherController};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::widget::{Widget, widget, widget_crd};
use crate::support::{configmap, eventually};

/// Records each handled event: (name, resourceVersion), after sleeping `delay`.
struct Slow {
    delay: Duration,
    seen: Arc<Mutex<Vec<(String, u64)>>>,
    /// When each handler started and ended.
    times: Arc<Mutex<Vec<(Instant, Instant)>>>,
}

impl Slow {
    async fn record(&self, cm: &ConfigMap) -> Result<(), kube::Error> {
        let start = Instant::now();
        tokio::time::sleep(self.delay).await;
        self.times.lock().unwrap().push((start, Instant::now()));
        let name = cm.metadata.name.clone().unwrap_or_default();
        let rv = cm
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .unwrap_or_default();
        self.seen.lock().unwrap().push((name, rv));
        Ok(())
    }
}

impl Watcher<ConfigMap> for Slow {
    type Error = kube::Error;

    async fn add(&self, cm: Arc<ConfigMap>, _: &WatchContext) -> Result<(), kube::Error> {
        self.record(&cm).await
    }

    async fn update(
        &self,
        _old: Arc<ConfigMap>,
        new: Arc<ConfigMap>,
        _: &WatchContext,
    ) -> Result<(), kube::Error> {
        self.record(&new).await
    }
}

const LABELS: &str = "watched=true";

async fn create_many(ns: &TestNamespace, n: usize) {
    let api = ns.api::<ConfigMap>();
    for i in 0..n {
        let mut cm = configmap(&format!("cm-{i:03}"), &[("v", "0")]);
        cm.metadata.labels = Some([("watched".to_owned(), "true".to_owned())].into());
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
}

/// Runs a watcher with `workers` over the namespace's labelled ConfigMaps until `n` events were
/// handled; returns how long the handlers took (from the first one's start to the last one's
/// end, so the informer's list is not counted) and what was seen.
async fn handle_all(
    ns: &TestNamespace,
    workers: usize,
    n: usize,
    delay: Duration,
) -> (Duration, Vec<(String, u64)>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let wiring = Wiring::new(ns.client());
    let watcher = WatcherController::with_informer(
        format!("slow-{workers}"),
        &wiring,
        ns.api::<ConfigMap>(),
        InformerConfig::default().labels(LABELS),
    )
    .workers(workers);
    let shutdown = CancellationToken::new();
    let times = Arc::new(Mutex::new(Vec::new()));
    let handlers = Slow {
        delay,
        seen: Arc::clone(&seen),
        times: Arc::clone(&times),
    };
    tokio::spawn(watcher.run(handlers, shutdown.clone()));
    eventually(
        "every event handled",
        Duration::from_secs(120),
        async || (seen.lock().unwrap().len() >= n).then_some(()),
    )
    .await;
    let times = times.lock().unwrap().clone();
    let first = times.iter().map(|(start, _)| *start).min().unwrap();
    let last = times.iter().map(|(_, end)| *end).max().unwrap();
    let took = last - first;
    shutdown.cancel();
    let seen = seen.lock().unwrap().clone();
    (took, seen)
}

#[tokio::test]
async fn sixteen_workers_should_handle_slow_events_at_least_8_times_faster_than_one() {
    let ns = TestNamespace::new().await.unwrap();
    create_many(&ns, 200).await;
    let delay = Duration::from_millis(50);
    let (parallel, seen) = handle_all(&ns, 16, 200, delay).await;
    assert_eq!(seen.len(), 200);
    let (serial, seen) = handle_all(&ns, 1, 200, delay).await;
    assert_eq!(seen.len(), 200);
    let speedup = serial.as_secs_f64() / parallel.as_secs_f64();
    println!("200 events of 50 ms: 1 worker {serial:?}, 16 workers {parallel:?}, {speedup:.1}x");
    assert!(serial >= delay * 200, "one worker: {serial:?}");
    assert!(speedup >= 8.0, "16 workers only {speedup:.1}x faster");
}

#[tokio::test]
async fn events_of_one_object_should_be_handled_in_order_across_workers() {
    let ns = TestNamespace::new().await.unwrap();
    create_many(&ns, 20).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let wiring = Wiring::new(ns.client());
    let watcher = WatcherController::with_informer(
        "ordered",
        &wiring,
        ns.api::<ConfigMap>(),
        InformerConfig::default().labels(LABELS),
    )
    .workers(16);
    let shutdown = CancellationToken::new();
    let handlers = Slow {
        delay: Duration::from_millis(5),
        seen: Arc::clone(&seen),
        times: Arc::default(),
    };
    tokio::spawn(watcher.run(handlers, shutdown.clone()));
    // Ten updates of every object, interleaved.
    let api = ns.api::<ConfigMap>();
    for round in 1..=10 {
        for i in 0..20 {
            api.patch(
                &format!("cm-{i:03}"),
                &PatchParams::default(),
                &Patch::Merge(json!({ "data": { "v": round.to_string() } })),
            )
            .await
            .unwrap();
        }
    }
    let last_rv: u64 = api
        .get("cm-019")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    eventually(
        "the last update handled",
        Duration::from_secs(60),
        async || {
            let seen = seen.lock().unwrap();
            seen.iter().any(|(_, rv)| *rv == last_rv).then_some(())
        },
    )
    .await;
    shutdown.cancel();
    let mut by_object: HashMap<String, Vec<u64>> = HashMap::new();
    for (name, rv) in seen.lock().unwrap().iter() {
        by_object.entry(name.clone()).or_default().push(*rv);
    }
    assert_eq!(by_object.len(), 20);
    for (name, rvs) in &by_object {
        assert!(
            rvs.windows(2).all(|w| w[0] < w[1]),
            "{name}: handled out of order: {rvs:?}"
        );
    }
}

/// Fails the first attempt of every event, and hangs on the first attempt of `hang-*` objects.
struct Flaky {
    attempts: Arc<Mutex<HashMap<String, u32>>>,
}

#[derive(Debug, thiserror::Error)]
#[error("first attempt fails")]
struct FirstAttempt;

impl Watcher<ConfigMap> for Flaky {
    type Error = FirstAttempt;

    async fn add(&self, cm: Arc<ConfigMap>, _: &WatchContext) -> Result<(), FirstAttempt> {
        let name = cm.metadata.name.clone().unwrap_or_default();
        let attempt = {
            let mut attempts = self.attempts.lock().unwrap();
            let n = attempts.entry(name.clone()).or_default();
            *n += 1;
            *n
        };
        match attempt {
            1 if name.starts_with("hang") => {
                std::future::pending::<()>().await;
                Ok(())
            }
            1 => Err(FirstAttempt),
            _ => Ok(()),
        }
    }
}

#[tokio::test]
async fn failed_and_timed_out_handlers_should_be_retried() {
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<ConfigMap>();
    for name in ["fail-1", "hang-1"] {
        let mut cm = configmap(name, &[("v", "0")]);
        cm.metadata.labels = Some([("watched".to_owned(), "true".to_owned())].into());
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let attempts = Arc::new(Mutex::new(HashMap::new()));
    let wiring = Wiring::new(ns.client());
    let watcher = WatcherController::with_informer(
        "flaky",
        &wiring,
        ns.api::<ConfigMap>(),
        InformerConfig::default().labels(LABELS),
    )
    .event_timeout(Duration::from_millis(500))
    .retry(ExponentialRetry::new(
        Duration::from_millis(100),
        Duration::from_secs(1),
        5,
    ));
    let shutdown = CancellationToken::new();
    let handlers = Flaky {
        attempts: Arc::clone(&attempts),
    };
    tokio::spawn(watcher.run(handlers, shutdown.clone()));
    eventually(
        "both handlers retried",
        Duration::from_secs(30),
        async || {
            let attempts = attempts.lock().unwrap();
            (attempts.get("fail-1") == Some(&2) && attempts.get("hang-1") == Some(&2)).then_some(())
        },
    )
    .await;
    // Retried once each, then done: no more attempts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = attempts.lock().unwrap().clone();
    assert_eq!(attempts.get("fail-1"), Some(&2), "{attempts:?}");
    assert_eq!(attempts.get("hang-1"), Some(&2), "{attempts:?}");
    shutdown.cancel();
}

/// Records every handler call as `(handler, name)`.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<(&'static str, String)>>>);

impl Calls {
    fn push(&self, handler: &'static str, obj: &Widget) {
        let name = obj.metadata.name.clone().unwrap_or_default();
        self.0.lock().unwrap().push((handler, name));
    }
    fn count(&self, handler: &str, name: &str) -> usize {
        let calls = self.0.lock().unwrap();
        calls
            .iter()
            .filter(|(h, n)| *h == handler && n == name)
            .count()
    }
}

impl Watcher<Widget> for Calls {
    type Error = kube::Error;
    async fn add(&self, w: Arc<Widget>, _: &WatchContext) -> Result<(), kube::Error> {
        self.push("add", &w);
        Ok(())
    }
    async fn update(
        &self,
        _old: Arc<Widget>,
        new: Arc<Widget>,
        _: &WatchContext,
    ) -> Result<(), kube::Error> {
        self.push("update", &new);
        Ok(())
    }
    async fn delete(&self, w: Arc<Widget>, _: &WatchContext) -> Result<(), kube::Error> {
        self.push("delete", &w);
        Ok(())
    }
    async fn sync(&self, w: Arc<Widget>, _: &WatchContext) -> Result<(), kube::Error> {
        self.push("sync", &w);
        Ok(())
    }
}

const FINALIZER: &str = "watcher-test.kubeforge.dev/watch";

fn start_opinionated(
    ns: &TestNamespace,
    calls: &Calls,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), kubeforge::controller::ControllerError>>,
) {
    let wiring = Wiring::new(ns.client());
    let watcher = WatcherController::new("opinionated", &wiring, ns.api::<Widget>())
        .opinionated(FINALIZER)
        .dequeue(kubeforge::retry::DequeueOnGeneration);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(watcher.run(calls.clone(), shutdown.clone()));
    (shutdown, running)
}

/// The opinionated watcher: a finalizer on every object, `sync` for objects that existed at
/// start-up, updates only on generation changes, and exactly one `delete` for an object deleted
/// while the operator was stopped.
#[tokio::test]
async fn opinionated_watcher_should_deliver_a_delete_that_happened_while_it_was_stopped_once() {
    let ns = TestNamespace::new().await.unwrap();
    kubeforge::testing::apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let widgets = ns.api::<Widget>();
    for name in ["kept", "doomed"] {
        widgets
            .create(&PostParams::default(), &widget(name, 1))
            .await
            .unwrap();
    }
    let first = Calls::default();
    let (shutdown, running) = start_opinionated(&ns, &first);
    eventually(
        "both added, with the finalizer",
        Duration::from_secs(30),
        async || {
            let held = |w: &Widget| {
                w.metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == FINALIZER)
            };
            let kept = widgets.get("kept").await.ok()?;
            let doomed = widgets.get("doomed").await.ok()?;
            (first.count("add", "kept") == 1 && held(&kept) && held(&doomed)).then_some(())
        },
    )
    .await;
    // A status-only update is skipped, a spec change is an update.
    widgets
        .patch_status(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "observed": 5 } })),
        )
        .await
        .unwrap();
    widgets
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "value": 2 } })),
        )
        .await
        .unwrap();
    eventually(
        "the spec change handled",
        Duration::from_secs(30),
        async || (first.count("update", "kept") == 1).then_some(()),
    )
    .await;
    // Stopped for sure (its dispatcher drained) before anything changes.
    shutdown.cancel();
    running.await.unwrap().unwrap();

    // While the operator is down: one object deleted (held by the finalizer), one created.
    widgets.delete("doomed", &Default::default()).await.unwrap();
    widgets
        .create(&PostParams::default(), &widget("newcomer", 1))
        .await
        .unwrap();

    let second = Calls::default();
    let (shutdown, _running) = start_opinionated(&ns, &second);
    eventually(
        "the deleted widget released and gone",
        Duration::from_secs(30),
        async || {
            let gone = widgets.get_opt("doomed").await.ok()?.is_none();
            (gone && second.count("add", "newcomer") == 1).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(second.count("delete", "doomed"), 1, "exactly one delete");
    assert_eq!(
        second.count("sync", "kept"),
        1,
        "existed before: sync, not add"
    );
    assert_eq!(second.count("add", "kept"), 0);
    assert_eq!(
        first.count("update", "kept"),
        1,
        "the status update was skipped"
    );
    shutdown.cancel();
}
