//! The network and the control plane failing under a running controller: connections that go
//! silent (through [`FaultProxy`]), the apiserver stopped while the operator is away and etcd
//! compacted meanwhile (410 → relist), the controller-manager stopped.
//!
//! Regression tests: a black-holed connection used to stall the operator until the watch's
//! server timeout (288 s), a request in flight on a silent connection for ever (> 480 s), and
//! recovery after an outage took 89–92 s because the watch backoff had grown to 30 s and
//! nothing reset it when the apiserver answered again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kubeforge::cache::Cache;
use kubeforge::client::{apply_owned, connect};
use kubeforge::controller::{
    Action, Context, Controller, ControllerConfig, Owns, Reconciler, Wiring,
};
use kubeforge::informer::InformerConfig;
use kubeforge::testing::{ControlPlane, FaultProxy, TestNamespace, apply_crds};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;
use crate::support::widget::{TestError, Widget, widget, widget_crd};

/// Writes `status.observed = spec.value` and an owned ConfigMap; on its first attempt a widget
/// named `slow-*` reads itself, notes that it started and waits for `hold` before its writes.
#[derive(Default)]
struct Observer {
    started: Mutex<HashMap<String, Instant>>,
    hold: tokio::sync::Notify,
    /// When each reconcile ended, and its error.
    ended: Mutex<Vec<(Instant, Option<String>)>>,
}

impl Observer {
    /// After `since`: when the first reconcile failed, and when the last one ended well.
    fn timeline(&self, since: Instant) -> (Option<Duration>, Option<Duration>, usize) {
        let ended = self.ended.lock().unwrap();
        let after = ended.iter().filter(|(at, _)| *at >= since);
        let first_failure = after
            .clone()
            .filter(|(_, error)| error.is_some())
            .map(|(at, _)| *at - since)
            .min();
        let last_success = after
            .clone()
            .filter(|(_, error)| error.is_none())
            .map(|(at, _)| *at - since)
            .max();
        (
            first_failure,
            last_success,
            after.filter(|(_, e)| e.is_some()).count(),
        )
    }
}

struct Observe(Arc<Observer>);

impl Reconciler<Widget> for Observe {
    type Error = TestError;

    async fn reconcile(&self, w: Arc<Widget>, ctx: &Context<Widget>) -> Result<Action, TestError> {
        let outcome = self.attempt(w, ctx).await;
        let error = outcome.as_ref().err().map(ToString::to_string);
        self.0.ended.lock().unwrap().push((Instant::now(), error));
        outcome
    }
}

impl Observe {
    async fn attempt(&self, w: Arc<Widget>, ctx: &Context<Widget>) -> Result<Action, TestError> {
        let name = w.metadata.name.clone().unwrap_or_default();
        // Only the first attempt waits: the retries after the fault must not.
        if name.starts_with("slow-") && !self.0.started.lock().unwrap().contains_key(&name) {
            // A request now leaves a connection in the client's pool (HTTP/1.1) or keeps the
            // shared one (HTTP/2): the requests after the hold go out on it.
            ctx.api::<Widget>().get(&name).await?;
            let notified = self.0.hold.notified();
            self.0
                .started
                .lock()
                .unwrap()
                .insert(name.clone(), Instant::now());
            notified.await;
        }
        let mut child = crate::support::configmap(
            &format!("{name}-cm"),
            &[("value", &w.spec.value.to_string())],
        );
        child.metadata.namespace = w.metadata.namespace.clone();
        apply_owned(&ctx.api::<ConfigMap>(), w.as_ref(), "faults", child).await?;
        if w.status.as_ref().map(|s| s.observed) != Some(w.spec.value) {
            ctx.patch_status(&Patch::Merge(
                json!({ "status": { "observed": w.spec.value } }),
            ))
            .await?;
        }
        Ok(Action::Done)
    }
}

/// Runs the Widget controller in `namespace` with `client` (through a proxy, usually).
async fn run_controller(
    client: kube::Client,
    namespace: &str,
    observer: Arc<Observer>,
) -> (Cache, CancellationToken) {
    run_controller_with(client, namespace, observer, ControllerConfig::default()).await
}

async fn run_controller_with(
    client: kube::Client,
    namespace: &str,
    observer: Arc<Observer>,
    config: ControllerConfig,
) -> (Cache, CancellationToken) {
    let wiring = Wiring::new(client.clone());
    let cache = wiring.cache().clone();
    let controller = Controller::new(
        "faults",
        &wiring,
        Api::<Widget>::namespaced(client.clone(), namespace),
        InformerConfig::default(),
    )
    .config(config)
    .owns(
        Api::<ConfigMap>::namespaced(client, namespace),
        Owns::full(),
    );
    let shutdown = CancellationToken::new();
    tokio::spawn(controller.run(Observe(observer), shutdown.clone()));
    (cache, shutdown)
}

/// Whether every widget in `names` has `status.observed == value` (read with `admin`).
async fn observed(admin: &Api<Widget>, names: &[String], value: i64) -> bool {
    let Ok(list) = admin.list(&ListParams::default()).await else {
        return false;
    };
    names.iter().all(|name| {
        list.items.iter().any(|w| {
            w.metadata.name.as_deref() == Some(name.as_str())
                && w.status.as_ref().map(|s| s.observed) == Some(value)
        })
    })
}

async fn wait_observed(
    admin: &Api<Widget>,
    names: &[String],
    value: i64,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    eventually("the widgets to converge", within, async || {
        observed(admin, names, value).await.then_some(())
    })
    .await;
    started.elapsed()
}

async fn create_all(admin: &Api<Widget>, names: &[String], value: i64) {
    for name in names {
        admin
            .create(&PostParams::default(), &widget(name, value))
            .await
            .unwrap();
    }
}

async fn set_all(admin: &Api<Widget>, names: &[String], value: i64) {
    for name in names {
        admin
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "value": value } })),
            )
            .await
            .unwrap();
    }
}

/// A namespace with the Widget CRD, a proxy in front of the shared apiserver, and the controller
/// running through it.
struct Behind {
    ns: TestNamespace,
    proxy: FaultProxy,
    observer: Arc<Observer>,
    shutdown: CancellationToken,
}

impl Behind {
    async fn start() -> Behind {
        Self::start_with(ControllerConfig::default()).await
    }

    async fn start_with(config: ControllerConfig) -> Behind {
        let ns = TestNamespace::new().await.unwrap();
        apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
            .await
            .unwrap();
        let plane = ControlPlane::shared().unwrap();
        let proxy = FaultProxy::start(plane.config().await.unwrap())
            .await
            .unwrap();
        let client = connect(proxy.config().clone()).unwrap();
        let observer = Arc::new(Observer::default());
        let (_, shutdown) = run_controller_with(client, ns.name(), observer.clone(), config).await;
        Behind {
            ns,
            proxy,
            observer,
            shutdown,
        }
    }
}

impl Drop for Behind {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[tokio::test]
async fn a_black_holed_connection_should_be_noticed_and_replaced_within_30s() {
    let b = Behind::start().await;
    let admin = b.ns.api::<Widget>();
    let before = names("before", 5);
    create_all(&admin, &before, 1).await;
    wait_observed(&admin, &before, 1, Duration::from_secs(60)).await;

    // Every connection the operator has goes silent, sockets open: its watches hear nothing.
    b.proxy.blackhole_existing();
    let after = names("after", 3);
    create_all(&admin, &after, 1).await;
    set_all(&admin, &before, 2).await;
    let took = wait_observed(&admin, &after, 1, Duration::from_secs(120)).await;
    wait_observed(&admin, &before, 2, Duration::from_secs(60)).await;
    println!("black-holed connections: new objects reconciled after {took:?}");
    // Pings every 10 s with a 10 s timeout; the rest is reconnecting and relisting.
    assert!(took < Duration::from_secs(45), "took {took:?}");
}

#[tokio::test]
async fn a_request_in_flight_on_a_connection_gone_silent_should_fail_and_be_retried() {
    let b = Behind::start().await;
    let admin = b.ns.api::<Widget>();
    let slow = vec!["slow-0".to_owned()];
    create_all(&admin, &slow, 1).await;
    eventually(
        "the reconcile to start",
        Duration::from_secs(60),
        async || b.observer.started.lock().unwrap().get("slow-0").copied(),
    )
    .await;
    // The connection goes silent, then the reconcile sends its requests on it.
    b.proxy.blackhole_existing();
    let released = Instant::now();
    b.observer.hold.notify_waiters();
    let took = wait_observed(&admin, &slow, 1, Duration::from_secs(120)).await;
    println!(
        "a request in flight on a silent connection: converged {took:?} after it was sent ({:?} since release)",
        released.elapsed()
    );
    assert!(took < Duration::from_secs(45), "took {took:?}");
}

/// Regression test (#31, item 15): with 41 reconciles in flight when the connections went silent,
/// the dead connection was noticed 20 s after the fault and the objects converged 27–30 s after
/// it (the operator; here 20.5–21.6 s, of which 19.9 s until the ping closed the
/// connection and the rest retrying on a new one). The client now pings after 5 s of quiet and
/// gives up 5 s later.
#[tokio::test]
async fn many_reconciles_in_flight_on_a_dead_connection_should_converge_within_18s_of_the_fault() {
    const IN_FLIGHT: usize = 41;
    let b = Behind::start_with(ControllerConfig::default().concurrency(64)).await;
    let admin = b.ns.api::<Widget>();
    let slow = names("slow", IN_FLIGHT);
    create_all(&admin, &slow, 1).await;
    eventually(
        "every reconcile to start",
        Duration::from_secs(60),
        async || (b.observer.started.lock().unwrap().len() == IN_FLIGHT).then_some(()),
    )
    .await;
    // The connection goes silent, then every reconcile sends its requests on it.
    b.proxy.blackhole_existing();
    let fault = Instant::now();
    b.observer.hold.notify_waiters();
    wait_observed(&admin, &slow, 1, Duration::from_secs(120)).await;
    let took = fault.elapsed();
    let (failed, done, failures) = b.observer.timeline(fault);
    println!(
        "{IN_FLIGHT} reconciles in flight on a silent connection: converged {took:?} after the fault; \
         first failure {failed:?}, last success {done:?}, {failures} failed attempts, {} connections",
        b.proxy.connections()
    );
    // Pings after 5 s of quiet, 5 s to answer; the retries on a new connection.
    assert!(took < Duration::from_secs(18), "took {took:?}");
}

#[tokio::test]
async fn all_connections_silent_for_60s_should_converge_soon_after_the_network_returns() {
    let b = Behind::start().await;
    let admin = b.ns.api::<Widget>();
    let first = names("w", 10);
    create_all(&admin, &first, 1).await;
    wait_observed(&admin, &first, 1, Duration::from_secs(60)).await;

    b.proxy.blackhole_all();
    set_all(&admin, &first, 2).await;
    let during = names("during", 5);
    create_all(&admin, &during, 2).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    b.proxy.restore();
    let mut all = first.clone();
    all.extend(during);
    let took = wait_observed(&admin, &all, 2, Duration::from_secs(120)).await;
    println!("60 s of silence: converged {took:?} after the network returned");
    // A connection attempt begun during the outage may wait out its 10 s connect deadline,
    // then the backoff (at most 5 s), then a relist.
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

/// One plane of our own for the disruptive cases: the controller-manager stopped, then the
/// operator cut off while objects change, etcd is compacted and the apiserver restarts.
#[tokio::test]
async fn control_plane_outages_should_lose_nothing() {
    let plane = tokio::task::spawn_blocking(|| ControlPlane::dedicated("faults"))
        .await
        .unwrap()
        .unwrap();
    let admin_client = plane.client().await.unwrap();
    let ns = "faults";
    let namespace: Namespace =
        serde_json::from_value(json!({ "metadata": { "name": ns } })).unwrap();
    Api::<Namespace>::all(admin_client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    apply_crds(&admin_client, [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let admin = Api::<Widget>::namespaced(admin_client.clone(), ns);
    let proxy = FaultProxy::start(plane.config().await.unwrap())
        .await
        .unwrap();
    let observer = Arc::new(Observer::default());
    let (cache, shutdown) =
        run_controller(connect(proxy.config().clone()).unwrap(), ns, observer).await;
    let widgets = names("w", 30);
    create_all(&admin, &widgets, 1).await;
    wait_observed(&admin, &widgets, 1, Duration::from_secs(60)).await;

    // 1. The controller-manager stops: the operator does not depend on it; garbage collection
    //    of a deleted widget's ConfigMap waits for it.
    plane
        .stop_component("kube-controller-manager")
        .await
        .unwrap();
    set_all(&admin, &widgets, 2).await;
    let took = wait_observed(&admin, &widgets, 2, Duration::from_secs(60)).await;
    println!("controller-manager down: converged in {took:?}");
    admin
        .delete("w-29", &DeleteParams::default())
        .await
        .unwrap();
    let configmaps = Api::<ConfigMap>::namespaced(admin_client.clone(), ns);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        configmaps.get_opt("w-29-cm").await.unwrap().is_some(),
        "no GC without the controller-manager"
    );
    plane
        .start_component("kube-controller-manager")
        .await
        .unwrap();
    eventually(
        "the orphaned ConfigMap to be collected",
        Duration::from_secs(90),
        async || {
            configmaps
                .get_opt("w-29-cm")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;
    let widgets = names("w", 29);

    // 2. The operator is cut off while every widget changes and etcd is compacted; then the
    //    apiserver restarts (its watch cache starts at the compacted revision, so the
    //    operator's resourceVersion is gone: 410, relist) and stays down for a while, with the
    //    operator's retries refused.
    let lists_before: u64 = cache.sync_status().iter().map(|s| s.lists).sum();
    proxy.blackhole_all();
    set_all(&admin, &widgets, 3).await;
    plane.compact_etcd().await.unwrap();
    plane.stop_component("kube-apiserver").await.unwrap();
    proxy.restore();
    // Long enough for the operator's backoff to reach its cap.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let restarted = Instant::now();
    plane.start_component("kube-apiserver").await.unwrap();
    let ready_after = restarted.elapsed();
    let took = wait_observed(&admin, &widgets, 3, Duration::from_secs(120)).await;
    let lists_after: u64 = cache.sync_status().iter().map(|s| s.lists).sum();
    println!(
        "after a 30 s apiserver outage with compaction: converged {took:?} after the apiserver was ready ({ready_after:?} to start it); lists {lists_before} -> {lists_after}"
    );
    assert!(
        lists_after > lists_before,
        "the informers relisted after 410 Gone"
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    shutdown.cancel();
}
