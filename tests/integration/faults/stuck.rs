//! A stuck operator: reconciles that never return must not hold their keys for ever, and an
//! operator whose every worker is stuck must fail its liveness probe.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kubeforge::controller::{Action, Context, Controller, ControllerConfig, Reconciler};
use kubeforge::informer::InformerConfig;
use kubeforge::manager::Manager;
use kubeforge::testing::TestNamespace;
use tokio_util::sync::CancellationToken;

use crate::manager::http_get;
use crate::support::{configmap, eventually};

/// Hangs for ever on `hang-*` ConfigMaps (the first `hangs` times each), counts the others.
struct Hanging {
    hangs: u32,
    attempts: AtomicU32,
    done: AtomicU32,
}

impl Reconciler<ConfigMap> for Hanging {
    type Error = kube::Error;
    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, kube::Error> {
        let name = cm.metadata.name.clone().unwrap_or_default();
        if name.starts_with("hang") && self.attempts.fetch_add(1, Ordering::SeqCst) < self.hangs {
            std::future::pending::<()>().await;
        }
        self.done.fetch_add(1, Ordering::SeqCst);
        Ok(Action::Done)
    }
}

async fn run(
    ns: &TestNamespace,
    config: ControllerConfig,
    hanging: Arc<Hanging>,
) -> (std::net::SocketAddr, CancellationToken) {
    let mut manager =
        Manager::new(ns.client()).health_probe_bind_address("127.0.0.1:0".parse().unwrap());
    let controller = Controller::new(
        "stuck",
        manager.wiring(),
        ns.api::<ConfigMap>(),
        InformerConfig::default().labels("stuck"),
    )
    .config(config);
    manager = manager.add_controller(controller, hanging);
    let mut listening = manager.on_listening();
    let shutdown = CancellationToken::new();
    tokio::spawn(manager.run_until(shutdown.clone()));
    let (_, health) = listening.recv().await.unwrap();
    (health, shutdown)
}

async fn create(ns: &TestNamespace, names: &[&str]) {
    for name in names {
        let mut cm = configmap(name, &[]);
        cm.metadata.labels = Some([("stuck".to_owned(), "yes".to_owned())].into());
        ns.api::<ConfigMap>()
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
}

/// Every worker hung on a reconcile that never returns, with work waiting: `/healthz` fails,
/// naming the controller, so the kubelet restarts the operator (it answered `ok` for ever).
#[tokio::test]
async fn an_operator_whose_workers_are_all_stuck_should_fail_its_liveness_probe() {
    let ns = TestNamespace::new().await.unwrap();
    let hanging = Arc::new(Hanging {
        hangs: u32::MAX,
        attempts: AtomicU32::new(0),
        done: AtomicU32::new(0),
    });
    let config = ControllerConfig::default()
        .concurrency(1)
        .reconcile_timeout(None)
        .stall_timeout(Duration::from_secs(3));
    let (health, shutdown) = run(&ns, config, Arc::clone(&hanging)).await;
    create(&ns, &["hang-1", "hang-2", "ok-1"]).await;
    let body = eventually("liveness to fail", Duration::from_secs(60), async || {
        let (status, body) = http_get(health, "/healthz?verbose").await;
        (status != 200).then_some(body)
    })
    .await;
    assert!(
        body.contains("[-]controller-stuck failed: stuck: all 1 workers busy"),
        "{body}"
    );
    shutdown.cancel();
}

/// The default reconcile timeout cancels a reconcile that never returns; the key is retried
/// and the other keys are not held up by it (a shortened timeout, the same mechanism).
#[tokio::test]
async fn a_reconcile_that_never_returns_should_be_cancelled_and_retried() {
    assert_eq!(
        kubeforge::controller::RECONCILE_TIMEOUT,
        Duration::from_secs(300),
        "a default exists (documented in the book)"
    );
    let ns = TestNamespace::new().await.unwrap();
    let hanging = Arc::new(Hanging {
        hangs: 2,
        attempts: AtomicU32::new(0),
        done: AtomicU32::new(0),
    });
    let config = ControllerConfig::default()
        .concurrency(1)
        .reconcile_timeout(Duration::from_secs(2));
    let (health, shutdown) = run(&ns, config, Arc::clone(&hanging)).await;
    create(&ns, &["hang-1", "ok-1", "ok-2"]).await;
    eventually(
        "every object reconciled, the hung one after two timeouts",
        Duration::from_secs(60),
        async || (hanging.done.load(Ordering::SeqCst) >= 3).then_some(()),
    )
    .await;
    assert_eq!(hanging.attempts.load(Ordering::SeqCst), 3);
    assert_eq!(http_get(health, "/healthz").await.0, 200);
    shutdown.cancel();
}
