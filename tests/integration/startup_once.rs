//! Start-up reconciles a key once (issue #48): a primary that thousands of cached objects map
//! to through a watch mapper was reconciled 6 times in 140 ms at start-up, every time for
//! `start-up` — the watched kind's replay kept arriving while the first reconcile ran, and each
//! arrival queued the key again. Every reconcile after the caches synced sees the whole start-up
//! state, so one is enough; a change made afterwards is still reconciled.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kubeforge::ObjectKey;
use kubeforge::controller::{
    Action, Context, Controller, ControllerConfig, Reconciler, Trigger, Watches, Wiring,
};
use kubeforge::informer::InformerConfig;
use kubeforge::testing::TestNamespace;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually};

/// The watched objects that map to the one primary.
const WATCHED: usize = 2_000;

/// Records the triggers of each reconcile of the hub; takes a while, as a real reconcile does
/// (the replay of the watched kind goes on meanwhile). The namespace's `kube-root-ca.crt` is
/// reconciled too, and not recorded.
#[derive(Clone, Default)]
struct Slow(Arc<Mutex<Vec<Vec<Trigger>>>>);

impl Reconciler<ConfigMap> for Slow {
    type Error = std::convert::Infallible;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        if cm.metadata.name.as_deref() == Some("hub") {
            self.0.lock().unwrap().push(ctx.triggers().to_vec());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(Action::Done)
    }
}

#[tokio::test]
async fn a_primary_many_cached_objects_map_to_should_be_reconciled_once_at_start_up() {
    let ns = TestNamespace::new().await.unwrap();
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("hub", &[]))
        .await
        .unwrap();
    let secrets = ns.api::<Secret>();
    futures::stream::iter(0..WATCHED)
        .map(|i| {
            let secrets = secrets.clone();
            async move {
                let secret: Secret = serde_json::from_value(json!({
                    "metadata": { "name": format!("s{i}"), "labels": { "hub": "hub" } },
                }))
                .unwrap();
                secrets
                    .create(&PostParams::default(), &secret)
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;

    let wiring = Wiring::new(ns.client());
    let namespace = ns.name().to_owned();
    let controller = Controller::new(
        "startup-once",
        &wiring,
        ns.api::<ConfigMap>(),
        InformerConfig::default(),
    )
    .watches(
        ns.api::<Secret>(),
        Watches::map(move |s: &Secret| {
            s.metadata
                .labels
                .iter()
                .flatten()
                .filter(|(k, _)| k.as_str() == "hub")
                .map(|(_, v)| ObjectKey::namespaced(namespace.clone(), v))
                .collect()
        }),
    )
    .config(ControllerConfig::default().concurrency(2));
    let idle = controller.idle();
    let reconciler = Slow::default();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(controller.run(reconciler.clone(), shutdown.clone()));
    // Every event so far handled: the replay of both kinds included.
    idle.wait(Duration::from_millis(500)).await;
    let runs = reconciler.0.lock().unwrap().clone();
    assert_eq!(
        runs,
        vec![vec![Trigger::StartUp]],
        "one start-up reconcile of the hub (the watched kind's replay maps {WATCHED} objects to it)"
    );

    // A change afterwards is reconciled as a change.
    secrets
        .patch(
            "s7",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "annotations": { "touched": "yes" } } })),
        )
        .await
        .unwrap();
    eventually(
        "the change to be reconciled",
        Duration::from_secs(60),
        async || (reconciler.0.lock().unwrap().len() == 2).then_some(()),
    )
    .await;
    let last = reconciler.0.lock().unwrap()[1].clone();
    assert!(
        matches!(last.as_slice(), [Trigger::Watched { name, .. }] if name == "s7"),
        "{last:?}"
    );
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
