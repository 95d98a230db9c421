//! The manager's production features against the real apiserver: metrics, health probes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube::api::PostParams;
use kubeforge::controller::{Controller, ControllerConfig};
use kubeforge::informer::InformerConfig;
use kubeforge::manager::Manager;
use kubeforge::testing::{TestNamespace, apply_crds};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::controller::{Recorder, WidgetReconciler, converged};
use crate::support::eventually;
use crate::support::widget::{QUIET, Widget, widget, widget_crd};

/// A plain HTTP/1.0 GET: (status code, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The value of one sample line `name{labels} value` in a Prometheus text scrape.
fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.trim().parse().ok())
    })
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: readiness before and after sync, then metrics against the reconciles"
)]
async fn manager_should_serve_readiness_after_sync_and_metrics_matching_reconciles() {
    let ns = TestNamespace::new().await.unwrap();
    // A plane reused from an earlier run may still have the Doohickey CRD: remove it first.
    let crds: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        kube::Api::all(ns.client());
    let crd_name = "doohickeys.manager-test.kubeforge.dev";
    let _ = crds.delete(crd_name, &Default::default()).await;
    eventually(
        "a leftover Doohickey CRD to be gone",
        Duration::from_secs(60),
        async || crate::support::is_not_found(crds.get(crd_name).await).then_some(()),
    )
    .await;
    let mut manager = Manager::new(ns.client())
        .metrics_bind_address("127.0.0.1:0".parse().unwrap())
        .health_probe_bind_address("127.0.0.1:0".parse().unwrap());
    let mut listening = manager.on_listening();
    let recorder = Arc::new(Recorder::default());
    apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let controller = Controller::new(
        "widgets",
        manager.wiring(),
        ns.api::<Widget>(),
        InformerConfig::default(),
    )
    .config(ControllerConfig::default().concurrency(2));
    let widgets_idle = controller.idle();
    // No test installs the Doohickey CRD before this one does: its informer cannot sync yet.
    let doohickeys = Controller::new(
        "doohickeys",
        manager.wiring(),
        ns.api::<Doohickey>(),
        InformerConfig::default(),
    );
    let manager = manager
        .add_controller(controller, WidgetReconciler(recorder.clone()))
        .add_controller(doohickeys, Ignore);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    let mut addrs = std::collections::HashMap::new();
    for _ in 0..2 {
        let (what, addr) = listening.recv().await.unwrap();
        addrs.insert(what, addr);
    }
    let (metrics, health) = (addrs["metrics"], addrs["health probes"]);

    assert_eq!(http_get(health, "/healthz").await, (200, "ok".to_owned()));
    let (status, body) = http_get(health, "/readyz?verbose").await;
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains("[-]informer-sync failed: not synced yet"),
        "{body}"
    );
    assert!(body.contains("doohickeys"), "{body}");
    assert!(
        body.contains("[-]controller-doohickeys failed: starting"),
        "each controller reports its own readiness: {body}"
    );

    apply_crds(&ns.client(), [doohickey_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    eventually(
        "readiness after the informer synced",
        Duration::from_secs(60),
        async || {
            let (status, body) = http_get(health, "/readyz?verbose").await;
            (status == 200).then_some(body)
        },
    )
    .await;

    let names: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    for name in &names {
        ns.api::<Widget>()
            .create(&PostParams::default(), &widget(name, 1))
            .await
            .unwrap();
    }
    eventually("widgets to converge", Duration::from_secs(60), async || {
        converged(&ns, &names, 1).await.then_some(())
    })
    .await;
    // Let the reconciles triggered by our own writes finish, then compare counts.
    widgets_idle.wait(QUIET).await;
    let counted: u32 = recorder.reconciles.lock().unwrap().values().sum();
    let (status, scrape) = http_get(metrics, "/metrics").await;
    assert_eq!(status, 200);
    let total: f64 = ["success", "error", "requeue", "requeue_after"]
        .iter()
        .filter_map(|r| {
            sample(
                &scrape,
                &format!(
                    r#"controller_runtime_reconcile_total{{controller="widgets",result="{r}"}}"#
                ),
            )
        })
        .sum();
    assert_eq!(total, f64::from(counted), "scrape:\n{scrape}");
    assert_eq!(
        sample(
            &scrape,
            r#"controller_runtime_reconcile_time_seconds_count{controller="widgets"}"#
        ),
        Some(f64::from(counted))
    );
    assert_eq!(
        sample(
            &scrape,
            r#"controller_runtime_max_concurrent_reconciles{controller="widgets"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &scrape,
            r#"controller_runtime_active_workers{controller="widgets"}"#
        ),
        Some(0.0)
    );
    assert!(
        sample(
            &scrape,
            r#"workqueue_adds_total{controller="widgets",name="widgets"}"#
        )
        .unwrap()
            >= 10.0
    );
    assert!(
        scrape.contains("kubeforge_informer_cached_objects{resource=\""),
        "{scrape}"
    );
    // The queue by priority, the client's requests and the process, as client-go and
    // client_golang name them.
    assert_eq!(
        sample(
            &scrape,
            r#"workqueue_depth{controller="widgets",name="widgets",priority="0"}"#
        ),
        Some(0.0),
        "{scrape}"
    );
    let requests: f64 = scrape
        .lines()
        .filter(|l| {
            l.starts_with("rest_client_requests_total{code=\"200\"") && l.contains("method=\"GET\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(requests >= 1.0, "GETs answered 200 counted: {scrape}");
    assert!(
        scrape.contains("rest_client_request_duration_seconds_bucket{host=\""),
        "{scrape}"
    );
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
    ] {
        assert!(
            sample(&scrape, name).is_some_and(|v| v > 0.0),
            "{name}: {scrape}"
        );
    }
    // The runners' own series, gathered through the runner tree.
    for (runner, running) in [("controllers", 2.0), ("leader-elected", 1.0)] {
        assert_eq!(
            sample(
                &scrape,
                &format!(r#"kubeforge_runner_runnables{{runner="{runner}"}}"#)
            ),
            Some(running),
            "scrape:\n{scrape}"
        );
    }
    let (status, body) = http_get(health, "/readyz/controller-widgets").await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    eprintln!("{counted} reconciles counted and scraped");

    shutdown.cancel();
    running.await.unwrap().unwrap();
    let _ = crds.delete(crd_name, &Default::default()).await;
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Doohickey {
    metadata: kube::api::ObjectMeta,
}

crate::test_resource!(
    Doohickey,
    group = "manager-test.kubeforge.dev",
    kind = "Doohickey",
    plural = "doohickeys"
);

fn doohickey_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": "doohickeys.manager-test.kubeforge.dev" },
        "spec": {
            "group": "manager-test.kubeforge.dev", "scope": "Namespaced",
            "names": { "plural": "doohickeys", "singular": "doohickey", "kind": "Doohickey" },
            "versions": [{ "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object" } } }]
        }
    }))
    .unwrap()
}

struct Ignore;

impl<K: kubeforge::controller::Kind> kubeforge::controller::Reconciler<K> for Ignore {
    type Error = kube::Error;
    async fn reconcile(
        &self,
        _obj: Arc<K>,
        _ctx: &kubeforge::controller::Context<K>,
    ) -> Result<kubeforge::controller::Action, kube::Error> {
        Ok(kubeforge::controller::Action::Done)
    }
}

/// A kind no test ever installs a CRD for.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Nonexistent {
    metadata: kube::api::ObjectMeta,
}

crate::test_resource!(
    Nonexistent,
    group = "never-installed.kubeforge.dev",
    kind = "Nonexistent",
    plural = "nonexistents"
);

/// A controller whose informer cannot sync (no CRD) fails start-up after its sync timeout with
/// an error naming the informer, and the manager stops with it instead of waiting for ever.
#[tokio::test]
async fn a_controller_whose_informers_cannot_sync_should_stop_the_manager_after_the_timeout() {
    let ns = TestNamespace::new().await.unwrap();
    let manager = Manager::new(ns.client());
    let controller = Controller::new(
        "nonexistent",
        manager.wiring(),
        ns.api::<Nonexistent>(),
        InformerConfig::default(),
    )
    .config(ControllerConfig::default().sync_timeout(Some(Duration::from_secs(3))));
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        manager
            .add_controller(controller, Ignore)
            .run_until(CancellationToken::new()),
    )
    .await
    .expect("the manager stops on its own");
    let error = result.expect_err("start-up fails").to_string();
    assert!(started.elapsed() >= Duration::from_secs(3), "{error}");
    assert!(
        error.contains("informers did not sync within 3s")
            && error.contains(&format!("/namespaces/{}/nonexistents", ns.name())),
        "{error}"
    );
}

/// A kind whose CRD the test installs, deletes and installs again while the manager runs.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Gizmo {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    metadata: kube::api::ObjectMeta,
}

crate::test_resource!(
    Gizmo,
    group = "crd-follow.kubeforge.dev",
    kind = "Gizmo",
    plural = "gizmos"
);

const GIZMO_CRD: &str = "gizmos.crd-follow.kubeforge.dev";

fn gizmo_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": GIZMO_CRD },
        "spec": {
            "group": "crd-follow.kubeforge.dev", "scope": "Namespaced",
            "names": { "plural": "gizmos", "singular": "gizmo", "kind": "Gizmo" },
            "versions": [{ "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object" } } }]
        }
    }))
    .unwrap()
}

/// Counts the reconciles of each gizmo name.
#[derive(Default)]
struct GizmoController {
    reconciled: std::sync::Mutex<Vec<String>>,
}

impl kubeforge::controller::Reconciler<Gizmo> for GizmoController {
    type Error = kube::Error;
    async fn reconcile(
        &self,
        gizmo: Arc<Gizmo>,
        _ctx: &kubeforge::controller::Context<Gizmo>,
    ) -> Result<kubeforge::controller::Action, kube::Error> {
        let name = gizmo.metadata.name.clone().unwrap_or_default();
        self.reconciled.lock().unwrap().push(name);
        Ok(kubeforge::controller::Action::Done)
    }
}

/// What `#[controller(for = Gizmo)]` would generate, by hand.
impl kubeforge::controller::ControllerSpec for GizmoController {
    type Kind = Gizmo;
    const NAME: &'static str = "gizmo";
    const FINALIZER: Option<&'static str> = None;
    fn controller(wiring: &kubeforge::controller::Wiring) -> Controller<Gizmo> {
        let api =
            kubeforge::controller::apis_for::<Gizmo>(&wiring.cache().client(), &wiring.namespaces);
        Controller::new(Self::NAME, wiring, api, wiring.informer_defaults.clone())
    }
    fn rbac() -> kubeforge::rbac::Rules {
        kubeforge::rbac::Rules::new()
    }
}

/// A shared controller, so the test can read what the manager's copy reconciled.
struct Shared(Arc<GizmoController>);

impl kubeforge::controller::Reconciler<Gizmo> for Shared {
    type Error = kube::Error;
    async fn reconcile(
        &self,
        gizmo: Arc<Gizmo>,
        ctx: &kubeforge::controller::Context<Gizmo>,
    ) -> Result<kubeforge::controller::Action, kube::Error> {
        self.0.reconcile(gizmo, ctx).await
    }
}

impl kubeforge::controller::ControllerSpec for Shared {
    type Kind = Gizmo;
    const NAME: &'static str = "gizmo";
    const FINALIZER: Option<&'static str> = None;
    fn controller(wiring: &kubeforge::controller::Wiring) -> Controller<Gizmo> {
        GizmoController::controller(wiring)
    }
    fn rbac() -> kubeforge::rbac::Rules {
        GizmoController::rbac()
    }
}

async fn crd_gone(
    crds: &kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
) {
    let _ = crds.delete(GIZMO_CRD, &Default::default()).await;
    eventually(
        "the Gizmo CRD to be gone",
        Duration::from_secs(60),
        async || crate::support::is_not_found(crds.get(GIZMO_CRD).await).then_some(()),
    )
    .await;
}

/// A controller for a kind whose CRD is applied after the manager started begins when the CRD
/// is Established, stops when it is deleted and begins again when it comes back; `/readyz`
/// follows.
#[tokio::test]
async fn a_controller_following_its_crd_should_start_stop_and_start_again_with_it() {
    let ns = TestNamespace::new().await.unwrap();
    let crds: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        kube::Api::all(ns.client());
    crd_gone(&crds).await;
    let gizmos = Arc::new(GizmoController::default());
    let mut manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .health_probe_bind_address("127.0.0.1:0".parse().unwrap())
        .controller_following_crd(Shared(Arc::clone(&gizmos)));
    let mut listening = manager.on_listening();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    let (_, health) = listening.recv().await.unwrap();
    let ready = async || http_get(health, "/readyz").await;
    let (status, body) = ready().await;
    assert_ne!(status, 200, "no CRD yet: not ready: {body}");
    assert!(body.contains(&format!("crd-{GIZMO_CRD}")), "{body}");

    for round in 1..=2 {
        apply_crds(&ns.client(), [gizmo_crd()], Duration::from_secs(30))
            .await
            .unwrap();
        let name = format!("gizmo-{round}");
        let gizmo = Gizmo {
            api_version: "crd-follow.kubeforge.dev/v1".into(),
            kind: "Gizmo".into(),
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
        };
        ns.api::<Gizmo>()
            .create(&PostParams::default(), &gizmo)
            .await
            .unwrap();
        eventually(
            &format!("round {round}: the new gizmo reconciled"),
            Duration::from_secs(30),
            async || {
                gizmos
                    .reconciled
                    .lock()
                    .unwrap()
                    .contains(&name)
                    .then_some(())
            },
        )
        .await;
        let body = eventually(
            &format!("round {round}: ready"),
            Duration::from_secs(30),
            async || {
                let (status, body) = http_get(health, "/readyz?verbose").await;
                (status == 200).then_some(body)
            },
        )
        .await;
        assert!(
            body.contains("[+]controller-gizmo ok"),
            "the started controller's check, through the dynamic runner: {body}"
        );
        crd_gone(&crds).await;
        eventually(
            &format!(
                "round {round}: not ready without the CRD, the stopped controller gone from the dynamic runner's checks"
            ),
            Duration::from_secs(30),
            async || {
                let (status, body) = http_get(health, "/readyz?verbose").await;
                (status != 200 && !body.contains("controller-gizmo")).then_some(())
            },
        )
        .await;
    }
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

/// The leader-elected parts run under a singleton the elector starts: a standby replica is
/// ready without reporting controllers it does not run; the leader reports them; when the
/// leader stops, the standby takes over and reports them.
#[tokio::test]
async fn only_the_leader_should_run_and_report_its_controllers() {
    use kubeforge::leader::LeaderElectionConfig;
    let ns = TestNamespace::new().await.unwrap();
    let replica = |identity: &str| {
        let mut manager = Manager::new(ns.client())
            .health_probe_bind_address("127.0.0.1:0".parse().unwrap())
            .metrics_bind_address("127.0.0.1:0".parse().unwrap())
            .leader_election(
                LeaderElectionConfig::new("probes-leader", ns.name())
                    .identity(identity)
                    .timings(
                        Duration::from_secs(4),
                        Duration::from_secs(3),
                        Duration::from_millis(500),
                    ),
            );
        let controller = Controller::new(
            format!("cms-{identity}"),
            manager.wiring(),
            ns.api::<k8s_openapi::api::core::v1::ConfigMap>(),
            InformerConfig::default(),
        );
        manager = manager.add_controller(controller, Ignore);
        let recorder = manager.recorder(format!("recorder-{identity}"));
        let mut listening = manager.on_listening();
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(manager.run_until(shutdown.clone()));
        async move {
            let mut addrs = std::collections::HashMap::new();
            for _ in 0..2 {
                let (what, addr) = listening.recv().await.unwrap();
                addrs.insert(what, addr);
            }
            (
                addrs["health probes"],
                addrs["metrics"],
                shutdown,
                running,
                recorder,
            )
        }
    };
    let (health_a, metrics_a, stop_a, running_a, recorder_a) = replica("a").await;
    let leads = async |health: SocketAddr, controller: &str| {
        let (status, body) = http_get(health, "/readyz?verbose").await;
        (status == 200 && body.contains(&format!("[+]controller-{controller} ok"))).then_some(())
    };
    eventually(
        "a to lead and run its controller",
        Duration::from_secs(30),
        async || leads(health_a, "cms-a").await,
    )
    .await;
    let (health_b, metrics_b, stop_b, running_b, recorder_b) = replica("b").await;
    // b campaigns in vain while a holds the lease: ready, no controller check, nothing running.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, body) = http_get(health_b, "/readyz?verbose").await;
    assert_eq!(status, 200, "a standby is ready: {body}");
    assert!(!body.contains("controller-"), "{body}");
    let elected_runnables = async |metrics: SocketAddr| {
        let (_, scrape) = http_get(metrics, "/metrics").await;
        sample(
            &scrape,
            r#"kubeforge_runner_runnables{runner="leader-elected"}"#,
        )
    };
    assert_eq!(elected_runnables(metrics_b).await, Some(0.0));
    assert_eq!(elected_runnables(metrics_a).await, Some(1.0));
    // The manager's recorder is fenced: the standby publishes nothing, the leader does.
    let about = ns
        .api::<k8s_openapi::api::core::v1::ConfigMap>()
        .create(
            &PostParams::default(),
            &crate::support::configmap("recorded", &[]),
        )
        .await
        .unwrap();
    let event = async |recorder: &kubeforge::events::Recorder| {
        recorder
            .publish(
                &about,
                kubeforge::events::EventType::Normal,
                "Probe",
                "Test",
                None,
            )
            .await
    };
    let refused = event(&recorder_b).await.expect_err("the standby is fenced");
    assert!(
        refused.to_string().contains("leader"),
        "refused as not the leader: {refused}"
    );
    event(&recorder_a).await.expect("the leader publishes");

    stop_a.cancel();
    running_a.await.unwrap().unwrap();
    eventually("b to take over", Duration::from_secs(30), async || {
        leads(health_b, "cms-b").await
    })
    .await;
    assert_eq!(elected_runnables(metrics_b).await, Some(1.0));
    stop_b.cancel();
    running_b.await.unwrap().unwrap();
}
