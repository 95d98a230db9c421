//! What an outage looks like in the logs at the default level (`info`): one `warn` when a
//! working list/watch fails, one `info` when it is back (however many retries it took in
//! between), and an `info` when the informer relists, with the reason, and when the relist is
//! complete.
//!
//! Regression tests: a watch resumed after its connection went silent logged nothing until the
//! namespace's next event (a quiet namespace: never), a relist after `410 Gone` was logged
//! at `debug` only, and a healthy but quiet watch was presumed dead after the watch-idle deadline.
//!
//! The logs are captured in-process: a `#[tokio::test]` runs on a current-thread runtime, so a
//! subscriber set as this thread's default sees everything the informer and its client log.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kubeforge::client::{ConnectionConfig, connect_with};
use kubeforge::informer::{Informer, InformerConfig};
use kubeforge::testing::{ControlPlane, FaultProxy, TestNamespace, apply_crds};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::logs::Logs;
use crate::support::{configmap, eventually};

const FAILED: &str = "list/watch failed; retrying";
const RECOVERED: &str = "list/watch recovered";
const RELISTING: &str = "relisting";
const RELISTED: &str = "relisted";

/// Seconds in a logged duration (`22.3s`, `850.0ms`).
fn seconds(logged: &Value) -> f64 {
    let text = logged.as_str().unwrap_or_default();
    match text.strip_suffix("ms") {
        Some(ms) => ms.parse::<f64>().unwrap() / 1000.0,
        None => text.trim_end_matches('s').parse().unwrap(),
    }
}

/// An informer of the ConfigMaps of `ns` through `proxy`, with a client that notices a silent
/// connection within 7 s (pings after 2 s of quiet, 5 s to answer) and gives up a connection
/// attempt after 2 s.
async fn informer_behind(
    proxy: &FaultProxy,
    ns: &TestNamespace,
) -> (Arc<Informer<ConfigMap>>, CancellationToken) {
    let connection = ConnectionConfig::default()
        .ping(Duration::from_secs(2), Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(2));
    let client = connect_with(proxy.config().clone(), &connection).unwrap();
    let informer = Arc::new(Informer::new(
        Api::<ConfigMap>::namespaced(client, ns.name()),
        InformerConfig::default(),
    ));
    let shutdown = CancellationToken::new();
    tokio::spawn(informer.clone().run(shutdown.clone()));
    tokio::time::timeout(Duration::from_secs(30), informer.wait_for_sync())
        .await
        .expect("the informer to sync within 30 s");
    // An event proves the watch is established (and the fault hits a running watch, not its
    // request).
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("watched", &[("k", "v")]))
        .await
        .unwrap();
    let key = kubeforge::ObjectKey::namespaced(ns.name(), "watched");
    eventually(
        "the watch to deliver an event",
        Duration::from_secs(30),
        async || informer.store().get(&key).await.unwrap(),
    )
    .await;
    (informer, shutdown)
}

async fn proxy() -> FaultProxy {
    let plane = ControlPlane::shared().unwrap();
    FaultProxy::start(plane.config().await.unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_watch_gone_silent_should_log_one_warning_and_one_recovery_without_any_event() {
    let (logs, _capture) = Logs::capture();
    let ns = TestNamespace::new().await.unwrap();
    let proxy = proxy().await;
    let (_informer, shutdown) = informer_behind(&proxy, &ns).await;
    logs.clear();

    // The watch's connection goes silent; nothing happens in the namespace afterwards, so only
    // the watch being accepted again on a new connection can tell that it is back.
    let started = Instant::now();
    proxy.blackhole_existing();
    logs.wait_for("INFO", RECOVERED, "ConfigMap", Duration::from_secs(40))
        .await;
    println!("recovered {:?} after the fault", started.elapsed());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let failed = logs.one("WARN", FAILED, "ConfigMap");
    let recovered = logs.one("INFO", RECOVERED, "ConfigMap");
    println!("{failed}\n{recovered}");
    assert_eq!(failed["namespace"], ns.name());
    assert!(failed["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(recovered["namespace"], ns.name());
    assert!(recovered["retries"].as_u64().is_some_and(|n| n >= 1));
    assert!(seconds(&recovered["down"]) < 30.0, "{recovered}");
    shutdown.cancel();
}

#[tokio::test]
async fn retries_during_an_outage_should_not_each_log_a_line() {
    let (logs, _capture) = Logs::capture();
    let ns = TestNamespace::new().await.unwrap();
    let proxy = proxy().await;
    let (informer, shutdown) = informer_behind(&proxy, &ns).await;
    logs.clear();

    // The apiserver is unreachable (connections accepted, then silent) until the informer has
    // failed four times: the watch, then attempts to resume it, each given up after 2 s.
    let started = Instant::now();
    let errors_before = informer.stats().watch_errors.load(Ordering::Relaxed);
    proxy.blackhole_all();
    eventually(
        "four failed attempts",
        Duration::from_secs(60),
        async || {
            let errors = informer.stats().watch_errors.load(Ordering::Relaxed);
            (errors >= errors_before + 4).then_some(())
        },
    )
    .await;
    let outage = started.elapsed();
    proxy.restore();
    logs.wait_for("INFO", RECOVERED, "ConfigMap", Duration::from_secs(30))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let failed = logs.one("WARN", FAILED, "ConfigMap");
    let recovered = logs.one("INFO", RECOVERED, "ConfigMap");
    println!("outage of {outage:?}:\n{failed}\n{recovered}");
    assert!(
        recovered["retries"].as_u64().is_some_and(|n| n >= 4),
        "{recovered}"
    );
    // Down from the first failure (the ping noticed it, after up to 7 s) to the answer.
    assert!(seconds(&recovered["down"]) >= 5.0, "{recovered}");
    assert!(
        logs.lines("INFO", RELISTING, "ConfigMap").is_empty(),
        "the watch resumed from its resourceVersion: {}",
        logs.text()
    );
    shutdown.cancel();
}

/// Regression test (#31, item 13): on a quiet plane a healthy ConfigMap watch hit the 90 s
/// watch-idle deadline and logged `WARN list/watch failed … the apiserver sent nothing for 90s;
/// the connection is presumed dead`: kube's watcher asks the apiserver for 290 s watches, and the
/// apiserver sends a quiet watch no bookmark while the kind's resourceVersion does not move. The
/// client now lowers each watch's `timeoutSeconds` below the deadline, so the apiserver ends a
/// healthy watch itself first. A deadline of 6 s instead of 90 s stands for the long quiet.
#[tokio::test]
async fn a_healthy_watch_quiet_for_longer_than_the_idle_deadline_should_log_no_warning() {
    let (logs, _capture) = Logs::capture();
    let ns = TestNamespace::new().await.unwrap();
    let idle = Duration::from_secs(6);
    let plane = ControlPlane::shared().unwrap();
    let client = connect_with(
        plane.config().await.unwrap(),
        &ConnectionConfig::default().watch_idle_timeout(Some(idle)),
    )
    .unwrap();
    let informer = Arc::new(Informer::new(
        Api::<ConfigMap>::namespaced(client, ns.name()),
        InformerConfig::default(),
    ));
    let shutdown = CancellationToken::new();
    tokio::spawn(informer.clone().run(shutdown.clone()));
    tokio::time::timeout(Duration::from_secs(30), informer.wait_for_sync())
        .await
        .expect("the informer to sync within 30 s");
    let errors = || informer.stats().watch_errors.load(Ordering::Relaxed);
    let (errors_before, lists_before) = (errors(), informer.stats().lists.load(Ordering::Relaxed));

    // Nothing happens in the namespace for more than three deadlines.
    tokio::time::sleep(idle * 3 + Duration::from_secs(2)).await;
    let warnings: Vec<_> = logs
        .json()
        .into_iter()
        .filter(|line| line["level"] == "WARN" || line["level"] == "ERROR")
        .collect();
    assert!(
        warnings.is_empty() && errors() == errors_before,
        "a quiet, healthy watch was presumed dead ({} watch errors):\n{}",
        errors() - errors_before,
        logs.text()
    );
    assert_eq!(
        informer.stats().lists.load(Ordering::Relaxed),
        lists_before,
        "the watch resumed from its resourceVersion, no relist"
    );
    // And the watch still delivers.
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("after", &[("k", "v")]))
        .await
        .unwrap();
    let key = kubeforge::ObjectKey::namespaced(ns.name(), "after");
    eventually(
        "the watch to deliver an event after the quiet",
        Duration::from_secs(10),
        async || informer.store().get(&key).await.unwrap(),
    )
    .await;
    shutdown.cancel();
}

const GROUP: &str = "logs-test.kubeforge.dev";

/// The kind of the relist test, which changes its CRD: a CRD change ends every watch of the
/// kind, so no other test may watch it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Flare {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Value,
}

crate::test_resource!(Flare, group = GROUP, kind = "Flare", plural = "flares");

fn flare_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": { "name": format!("flares.{GROUP}") },
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": { "plural": "flares", "singular": "flare", "kind": "Flare" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                    },
                }},
            }],
        },
    }))
    .unwrap()
}

#[tokio::test]
async fn a_relist_after_410_should_be_logged_with_its_reason() {
    let (logs, _capture) = Logs::capture();
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [flare_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let flares = ns.api::<Flare>();
    for name in ["a", "b", "c"] {
        let flare = json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "Flare",
            "metadata": { "name": name }, "spec": { "n": 1 },
        });
        flares
            .patch(name, &PatchParams::apply("logs-test"), &Patch::Apply(flare))
            .await
            .unwrap();
    }
    let informer = Arc::new(Informer::new(flares, InformerConfig::default()));
    let shutdown = CancellationToken::new();
    tokio::spawn(informer.clone().run(shutdown.clone()));
    tokio::time::timeout(Duration::from_secs(30), informer.wait_for_sync())
        .await
        .expect("the informer to sync within 30 s");
    assert!(
        logs.lines("INFO", RELISTING, "Flare").is_empty(),
        "the first list is no relist: {}",
        logs.text()
    );
    logs.clear();

    // A change of the CRD's spec ends every watch of the kind; the watch resumes from a
    // resourceVersion older than the new watch cache: 410 Gone, relist.
    let started = Instant::now();
    Api::<CustomResourceDefinition>::all(ns.client())
        .patch(
            &format!("flares.{GROUP}"),
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{
                    "op": "add",
                    "path": "/spec/versions/0/schema/openAPIV3Schema/description",
                    "value": format!("changed by {} to make watches relist", ns.name()),
                }]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    logs.wait_for("INFO", RELISTED, "Flare", Duration::from_secs(60))
        .await;
    println!("relisted {:?} after the CRD changed", started.elapsed());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let relisting = logs.one("INFO", RELISTING, "Flare");
    let relisted = logs.one("INFO", RELISTED, "Flare");
    println!("{relisting}\n{relisted}");
    assert_eq!(relisting["reason"], "resourceVersion too old (410 Gone)");
    assert_eq!(relisting["namespace"], ns.name());
    assert_eq!(relisted["objects"], 3);
    assert!(
        logs.lines("WARN", FAILED, "Flare").is_empty(),
        "410 Gone is an answer of the apiserver, not a failure: {}",
        logs.text()
    );
    assert!(seconds(&relisted["took"]) < 30.0, "{relisted}");
    shutdown.cancel();
}
