//! Finalizers under churn: cleanup runs exactly once per object (UID), a stale finalizer removal
//! never lands on a new object of the same name, and nothing stays stuck.
//!
//! Regression tests for the double cleanups seen when one name was deleted and created again in
//! a tight loop (5 of 12 held deletions cleaned twice), with a status writer racing a slow
//! cleanup, and with manifests that already carry the finalizer (a live object lost its
//! finalizer, so its later deletion ran no cleanup at all).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kubeforge::cache::Lookup;
use kubeforge::controller::{Action, Context, Controller, ControllerConfig, Reconciler, Wiring};
use kubeforge::informer::InformerConfig;
use kubeforge::testing::{TestNamespace, apply_crds};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::widget::{TestError, Widget, widget, widget_crd};
use crate::support::{eventually, is_not_found};

const FINALIZER: &str = "ctrl-test.kubeforge.dev/cleanup";

/// Counts cleanups per UID and reconciles per UID; cleanup takes `cleanup_delay`.
#[derive(Default)]
struct Ledger {
    cleanups: Mutex<HashMap<String, u32>>,
    reconciled: Mutex<HashMap<String, u32>>,
}

struct Finalizing {
    ledger: Arc<Ledger>,
    cleanup_delay: Duration,
}

impl Reconciler<Widget> for Finalizing {
    type Error = TestError;

    async fn reconcile(&self, w: Arc<Widget>, ctx: &Context<Widget>) -> Result<Action, TestError> {
        let uid = w.metadata.uid.clone().unwrap_or_default();
        *self
            .ledger
            .reconciled
            .lock()
            .unwrap()
            .entry(uid)
            .or_default() += 1;
        if w.status.as_ref().map(|s| s.observed) != Some(w.spec.value) {
            ctx.patch_status(&Patch::Merge(
                json!({ "status": { "observed": w.spec.value } }),
            ))
            .await?;
        }
        Ok(Action::Done)
    }

    async fn cleanup(&self, w: Arc<Widget>, _ctx: &Context<Widget>) -> Result<Action, TestError> {
        let uid = w.metadata.uid.clone().unwrap_or_default();
        *self.ledger.cleanups.lock().unwrap().entry(uid).or_default() += 1;
        tokio::time::sleep(self.cleanup_delay).await;
        Ok(Action::Done)
    }
}

async fn start(
    ns: &TestNamespace,
    ledger: Arc<Ledger>,
    cleanup_delay: Duration,
) -> CancellationToken {
    apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let wiring = Wiring::new(ns.client());
    let controller = Controller::new(
        "finalizing",
        &wiring,
        ns.api::<Widget>(),
        InformerConfig::default(),
    )
    .config(ControllerConfig::default().finalizer(FINALIZER));
    let shutdown = CancellationToken::new();
    tokio::spawn(controller.run(
        Finalizing {
            ledger,
            cleanup_delay,
        },
        shutdown.clone(),
    ));
    shutdown
}

fn held(w: &Widget) -> bool {
    w.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

/// Creates `w`, retrying while an object of the same name is still being deleted; its UID.
async fn create_when_free(api: &Api<Widget>, w: &Widget) -> String {
    eventually(
        "the name to be free",
        Duration::from_secs(60),
        async || match api.create(&PostParams::default(), w).await {
            Ok(created) => created.metadata.uid,
            Err(kube::Error::Api(s)) if s.code == 409 => None,
            Err(e) => panic!("create failed: {e}"),
        },
    )
    .await
}

/// Waits until `name` is held by the finalizer and reconciled at `value`; returns its UID.
async fn reconciled(api: &Api<Widget>, name: &str, value: i64) -> String {
    eventually(
        "the widget to be held and reconciled",
        Duration::from_secs(60),
        async || {
            let w = api.get_opt(name).await.unwrap()?;
            (held(&w) && w.status.as_ref().map(|s| s.observed) == Some(value))
                .then(|| w.metadata.uid.clone().unwrap_or_default())
        },
    )
    .await
}

/// Waits until no widget is left.
async fn all_gone(api: &Api<Widget>, within: Duration) {
    eventually("every widget to be gone", within, async || {
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
            .then_some(())
    })
    .await;
}

/// Every UID in `deleted` was cleaned up exactly once, and stays so for a moment.
async fn cleaned_exactly_once(ledger: &Ledger, deleted: &[String]) {
    eventually(
        "every deleted widget to be cleaned up",
        Duration::from_secs(60),
        async || {
            let cleanups = ledger.cleanups.lock().unwrap();
            deleted
                .iter()
                .all(|uid| cleanups.contains_key(uid))
                .then_some(())
        },
    )
    .await;
    // A second cleanup would come right after the first: give it time to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cleanups = ledger.cleanups.lock().unwrap().clone();
    let twice: Vec<_> = cleanups.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "cleanup ran more than once: {twice:?}");
    let unknown: Vec<_> = cleanups
        .keys()
        .filter(|uid| !deleted.contains(uid))
        .collect();
    assert!(
        unknown.is_empty(),
        "live objects were cleaned up: {unknown:?}"
    );
}

async fn delete_and_recreate_in_a_tight_loop(manifest_has_finalizer: bool) {
    let ns = TestNamespace::new().await.unwrap();
    let ledger = Arc::new(Ledger::default());
    let shutdown = start(&ns, ledger.clone(), Duration::ZERO).await;
    let api = ns.api::<Widget>();
    let mut deleted = Vec::new();
    let started = std::time::Instant::now();
    for round in 0..12 {
        let mut w = widget("churn", round);
        if manifest_has_finalizer {
            w.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        }
        let uid = create_when_free(&api, &w).await;
        if !manifest_has_finalizer {
            // Delete as soon as the deletion is held (the controller's own status write may
            // still be on its way).
            eventually("the finalizer", Duration::from_secs(60), async || {
                api.get_opt("churn").await.unwrap().filter(held).map(|_| ())
            })
            .await;
        }
        // With the finalizer on the manifest, the object is held at once: delete it before the
        // controller has even seen it.
        api.delete("churn", &DeleteParams::default()).await.unwrap();
        deleted.push(uid);
    }
    eventually(
        "the last widget to be gone",
        Duration::from_secs(60),
        async || is_not_found(api.get("churn").await).then_some(()),
    )
    .await;
    cleaned_exactly_once(&ledger, &deleted).await;
    println!(
        "12 held deletions of one name (finalizer on the manifest: {manifest_has_finalizer}) in {:?}, each cleaned once",
        started.elapsed()
    );
    shutdown.cancel();
}

#[tokio::test]
async fn delete_and_recreate_of_one_name_should_clean_each_object_exactly_once() {
    delete_and_recreate_in_a_tight_loop(false).await;
}

#[tokio::test]
async fn recreating_from_a_manifest_with_the_finalizer_should_clean_each_object_exactly_once() {
    delete_and_recreate_in_a_tight_loop(true).await;
}

#[tokio::test]
async fn finalizer_removal_racing_a_status_writer_should_clean_each_object_exactly_once() {
    let ns = TestNamespace::new().await.unwrap();
    let ledger = Arc::new(Ledger::default());
    let shutdown = start(&ns, ledger.clone(), Duration::from_millis(300)).await;
    let api = ns.api::<Widget>();
    let names: Vec<String> = (0..10).map(|i| format!("raced-{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &widget(name, 0))
            .await
            .unwrap();
    }
    let mut deleted = Vec::new();
    for name in &names {
        deleted.push(reconciled(&api, name, 0).await);
    }
    // Another writer keeps changing the status (events that queue the keys again) while the
    // slow cleanups run and the names are taken again.
    let writer_stop = CancellationToken::new();
    let writer = {
        let api = api.clone();
        let names = names.clone();
        let stop = writer_stop.clone();
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.is_cancelled() {
                for name in &names {
                    n += 1;
                    let _ = api
                        .patch_status(
                            name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({ "status": { "noise": n } })),
                        )
                        .await;
                }
            }
        })
    };
    for name in &names {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    // The second generation comes with the finalizer already on, like a re-applied manifest,
    // as soon as each name is free: a stale finalizer removal would strip it.
    for name in &names {
        let mut w = widget(name, 1);
        w.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        create_when_free(&api, &w).await;
    }
    for name in &names {
        deleted.push(reconciled(&api, name, 1).await);
    }
    for name in &names {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    all_gone(&api, Duration::from_secs(60)).await;
    writer_stop.cancel();
    writer.await.unwrap();
    cleaned_exactly_once(&ledger, &deleted).await;
    shutdown.cancel();
}

#[tokio::test]
async fn objects_deleted_while_the_operator_is_down_should_be_cleaned_once_when_it_returns() {
    let ns = TestNamespace::new().await.unwrap();
    let ledger = Arc::new(Ledger::default());
    let shutdown = start(&ns, ledger.clone(), Duration::ZERO).await;
    let api = ns.api::<Widget>();
    let names: Vec<String> = (0..10).map(|i| format!("away-{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &widget(name, 1))
            .await
            .unwrap();
    }
    let mut deleted = Vec::new();
    for name in &names {
        deleted.push(reconciled(&api, name, 1).await);
    }
    shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(500)).await;
    for name in &names {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    // Held by the finalizer while nobody runs.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        10
    );
    let back = std::time::Instant::now();
    let shutdown = start(&ns, ledger.clone(), Duration::ZERO).await;
    all_gone(&api, Duration::from_secs(30)).await;
    println!(
        "10 deletions made while the operator was down released {:?} after it returned",
        back.elapsed()
    );
    cleaned_exactly_once(&ledger, &deleted).await;
    shutdown.cancel();
}

/// Counts failed reconciles (errors, panics, timeouts and failed finalizer writes).
#[derive(Default)]
struct Failures(std::sync::atomic::AtomicU32);

impl kubeforge::controller::ControllerMetrics for Failures {
    fn reconciled(
        &self,
        _controller: &str,
        result: kubeforge::controller::ReconcileResult,
        _took: Duration,
    ) {
        if result == kubeforge::controller::ReconcileResult::Error {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Holds the reconcile of `blocker` until `release`; records the others.
struct Blocking {
    release: Arc<tokio::sync::Notify>,
    reconciled: Arc<Mutex<Vec<String>>>,
}

impl Reconciler<Widget> for Blocking {
    type Error = TestError;

    async fn reconcile(&self, w: Arc<Widget>, _ctx: &Context<Widget>) -> Result<Action, TestError> {
        let name = w.metadata.name.clone().unwrap_or_default();
        if name == "blocker" {
            self.release.notified().await;
        }
        self.reconciled.lock().unwrap().push(name);
        Ok(Action::Done)
    }
}

/// The cache still shows an object the apiserver has deleted (its informer is cut off) when the
/// worker comes to add the finalizer: the `404` means there is nothing to do, not an error to
/// retry with backoff (which used to log a warning and count a failed reconcile each time).
#[tokio::test]
async fn adding_the_finalizer_to_an_object_deleted_meanwhile_should_be_done_not_an_error() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    // The informer watches through a proxy the test can silence; the worker writes directly.
    let plane = kubeforge::testing::ControlPlane::shared().unwrap();
    let proxy = kubeforge::testing::FaultProxy::start(plane.config().await.unwrap())
        .await
        .unwrap();
    let watching = kubeforge::client::connect(proxy.config().clone()).unwrap();
    let wiring = Wiring::new(ns.client());
    let failures = Arc::new(Failures::default());
    let release = Arc::new(tokio::sync::Notify::new());
    let reconciled = Arc::new(Mutex::new(Vec::new()));
    let controller = Controller::new(
        "finalizing",
        &wiring,
        Api::<Widget>::namespaced(watching, ns.name()),
        InformerConfig::default(),
    )
    .config(
        ControllerConfig::default()
            .finalizer(FINALIZER)
            .concurrency(1)
            .metrics(failures.clone(), Arc::new(kubeforge::queue::NoMetrics)),
    );
    let shutdown = CancellationToken::new();
    let store = wiring
        .cache()
        .store::<Widget>(&Lookup::namespace(ns.name()))
        .unwrap();
    tokio::spawn(controller.run(
        Blocking {
            release: release.clone(),
            reconciled: reconciled.clone(),
        },
        shutdown.clone(),
    ));
    let api = ns.api::<Widget>();
    // The only worker is busy with `blocker` while `gone` is created, cached and deleted.
    api.create(&PostParams::default(), &widget("blocker", 1))
        .await
        .unwrap();
    eventually(
        "the blocker to hold the worker",
        Duration::from_secs(30),
        async || api.get("blocker").await.ok().filter(held).map(|_| ()),
    )
    .await;
    api.create(&PostParams::default(), &widget("gone", 1))
        .await
        .unwrap();
    eventually(
        "the informer to cache it",
        Duration::from_secs(30),
        async || {
            store
                .get(&kubeforge::ObjectKey::namespaced(ns.name(), "gone"))
                .await
                .unwrap()
                .map(|_| ())
        },
    )
    .await;
    proxy.blackhole_existing();
    api.delete("gone", &DeleteParams::default()).await.unwrap();
    assert!(
        is_not_found(api.get("gone").await),
        "deleted at once: no finalizer yet"
    );
    let failed_before = failures.0.load(std::sync::atomic::Ordering::SeqCst);
    release.notify_waiters();
    eventually(
        "the worker to be done with the blocker",
        Duration::from_secs(30),
        async || {
            reconciled
                .lock()
                .unwrap()
                .contains(&"blocker".to_owned())
                .then_some(())
        },
    )
    .await;
    // The worker has met `gone` in the stale cache by now; give a retry time to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        failures.0.load(std::sync::atomic::Ordering::SeqCst),
        failed_before,
        "adding a finalizer to a deleted object counted as a failed reconcile"
    );
    assert!(!reconciled.lock().unwrap().contains(&"gone".to_owned()));
    shutdown.cancel();
}
