//! The work queue's priorities on the real apiserver: a controller that starts with many
//! objects (as an operator does after a restart) works through them as its start-up wave, and
//! an object edited meanwhile is reconciled at once, not after the wave.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kubeforge::controller::{
    Action, Context, Controller, ControllerConfig, Reconciler, Trigger, Wiring,
};
use kubeforge::informer::InformerConfig;
use kubeforge::testing::TestNamespace;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually};

/// Objects in the start-up wave.
const WAVE: usize = 600;

/// Records each reconcile (name, `data.v` and why it ran) and takes 20 ms over it, so the
/// wave of one worker lasts at least 12 s.
struct Slow(Arc<Mutex<Vec<Run>>>);

/// One reconcile: the name, `data.v`, and why it ran.
type Run = (String, String, Vec<Trigger>);

impl Reconciler<ConfigMap> for Slow {
    type Error = std::convert::Infallible;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let name = cm.metadata.name.clone().unwrap_or_default();
        let value = cm
            .data
            .as_ref()
            .and_then(|d| d.get("v"))
            .cloned()
            .unwrap_or_default();
        self.0
            .lock()
            .unwrap()
            .push((name, value, ctx.triggers().to_vec()));
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(Action::Done)
    }
}

#[tokio::test]
async fn an_edit_during_the_start_up_wave_should_be_reconciled_before_the_wave_ends() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let api = ns.api::<ConfigMap>();
    // Names sort as they are listed: the edited one, `cm-599`, comes last in the wave.
    futures::stream::iter(0..WAVE)
        .map(|i| {
            let api = api.clone();
            async move {
                let cm = configmap(&format!("cm-{i:03}"), &[("v", "old")]);
                api.create(&PostParams::default(), &cm).await.map(|_| ())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();

    let seen = Arc::new(Mutex::new(Vec::new()));
    let wiring = Wiring::new(client.clone());
    let controller = Controller::new(
        "priority-wave",
        &wiring,
        api.clone(),
        InformerConfig::default(),
    )
    .config(ControllerConfig::default().concurrency(1));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(controller.run(Slow(Arc::clone(&seen)), shutdown.clone()));
    let count = || seen.lock().unwrap().len();
    eventually("the wave under way", Duration::from_secs(120), async || {
        (count() >= 50).then_some(())
    })
    .await;

    let edit = json!({ "data": { "v": "new" } });
    api.patch("cm-599", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    let position = eventually(
        "the edit reconciled",
        Duration::from_secs(240),
        async || {
            seen.lock()
                .unwrap()
                .iter()
                .position(|(name, value, _)| name == "cm-599" && value == "new")
        },
    )
    .await;
    // One worker, and the edit was made after 50 reconciles: it waits at most for the one in
    // flight and the few the informer delivered before it. Without priorities it was the last.
    assert!(
        position < WAVE / 2,
        "the edit was reconcile number {position} of a wave of {WAVE}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    loop {
        let missing: Vec<String> = {
            let seen = seen.lock().unwrap();
            let names: std::collections::HashSet<&str> =
                seen.iter().map(|(name, _, _)| name.as_str()).collect();
            (0..WAVE)
                .map(|i| format!("cm-{i:03}"))
                .filter(|name| !names.contains(name.as_str()))
                .collect()
        };
        if missing.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the wave did not finish in 240 s: {} of {WAVE} never reconciled: {missing:?}",
            missing.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Why each ran, as the reconciler's Context said: the wave's objects as found at start-up,
    // the edited one for that and because it changed (a ConfigMap has no generation), in one
    // run.
    {
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen[position].2,
            [
                Trigger::StartUp,
                Trigger::Changed {
                    generation_changed: false
                }
            ]
        );
        let started = seen
            .iter()
            .filter(|(_, _, t)| *t == [Trigger::StartUp])
            .count();
        assert_eq!(started, seen.len() - 1, "{:?}", &seen[..5]);
    }
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
