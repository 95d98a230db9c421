//! The `Stalled` condition on the real apiserver: when the retry policy gives up on an object
//! whose status has conditions, the runtime sets `Stalled=True` (reason `RetriesExhausted`) on
//! it, besides the Warning event; once the object changes and its reconcile succeeds, `Stalled`
//! goes back to `False`. Neither write starts a reconcile of its own (issue #48: setting it
//! came back as a status change and the object failed twice as often, with two
//! `RetriesExhausted`; clearing it cost one extra reconcile).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use kubeforge::controller::{Action, Context, Controller, ControllerConfig, Reconciler, Wiring};
use kubeforge::crd::{ConditionStatus, Conditions, STALLED};
use kubeforge::informer::InformerConfig;
use kubeforge::testing::{TestNamespace, apply_crds};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;

/// An object whose reconcile fails while `fail` is set.
#[kubeforge::custom_resource(
    group = "stalled-test.kubeforge.dev",
    version = "v1",
    kind = "Brittle",
    namespaced,
    status = BrittleStatus
)]
#[derive(Clone, Debug, Default)]
pub struct BrittleSpec {
    #[serde(default)]
    pub fail: bool,
}

#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BrittleStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub conditions: Conditions,
}

#[derive(Debug, thiserror::Error)]
#[error("told to fail")]
struct Told;

/// Counts, per object name, the reconciles that failed and those that succeeded.
#[derive(Clone, Default)]
struct FailsWhenTold(Arc<Mutex<HashMap<String, (usize, usize)>>>);

impl FailsWhenTold {
    fn counts(&self, name: &str) -> (usize, usize) {
        self.0
            .lock()
            .unwrap()
            .get(name)
            .copied()
            .unwrap_or_default()
    }
}

impl Reconciler<Brittle> for FailsWhenTold {
    type Error = Told;

    async fn reconcile(&self, b: Arc<Brittle>, _ctx: &Context<Brittle>) -> Result<Action, Told> {
        let mut counts = self.0.lock().unwrap();
        let (failed, succeeded) = counts.entry(b.name_any()).or_default();
        if b.spec.fail {
            *failed += 1;
            Err(Told)
        } else {
            *succeeded += 1;
            Ok(Action::Done)
        }
    }
}

/// Creates the healthy object `name` and waits until it was reconciled. With one worker, every
/// reconcile that an earlier watch event caused (the `Stalled` write's, were it not skipped)
/// was handed out before it: the informer delivers events in order and the queue hands out a
/// priority's keys in order.
async fn barrier(ns: &TestNamespace, reconciler: &FailsWhenTold, name: &str) {
    ns.api::<Brittle>()
        .create(
            &PostParams::default(),
            &Brittle::new(name, BrittleSpec { fail: false }),
        )
        .await
        .unwrap();
    eventually(
        &format!("{name} to be reconciled"),
        Duration::from_secs(60),
        async || (reconciler.counts(name).1 > 0).then_some(()),
    )
    .await;
}

/// The `Stalled` condition's (status, reason) once `check` accepts it.
async fn stalled(
    ns: &TestNamespace,
    what: &str,
    check: impl Fn(&ConditionStatus, &str) -> bool,
) -> (ConditionStatus, String) {
    eventually(what, Duration::from_secs(60), async || {
        let b = ns.api::<Brittle>().get("b").await.ok()?;
        let c = b.status?.conditions.get(STALLED)?.clone();
        check(&c.status, &c.reason).then_some((c.status, c.reason))
    })
    .await
}

#[tokio::test]
async fn an_object_given_up_on_should_be_marked_stalled_until_it_reconciles() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [Brittle::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let wiring = Wiring::new(ns.client());
    let ms = Duration::from_millis;
    let controller = Controller::new(
        "brittle",
        &wiring,
        ns.api::<Brittle>(),
        InformerConfig::default(),
    )
    .config(
        ControllerConfig::default()
            .concurrency(1)
            .retry(kubeforge::retry::ExponentialRetry::new(ms(50), ms(200), 3)),
    );
    let shutdown = CancellationToken::new();
    let reconciler = FailsWhenTold::default();
    let running = tokio::spawn(controller.run(reconciler.clone(), shutdown.clone()));

    let b = Brittle::new("b", BrittleSpec { fail: true });
    ns.api::<Brittle>()
        .create(&PostParams::default(), &b)
        .await
        .unwrap();
    let (_, reason) = stalled(&ns, "Stalled=True after 3 failures", |s, _| {
        *s == ConditionStatus::True
    })
    .await;
    assert_eq!(reason, "RetriesExhausted");
    barrier(&ns, &reconciler, "after-stalled").await;
    assert_eq!(
        reconciler.counts("b"),
        (3, 0),
        "the 3 tries the policy allows, and nothing for the Stalled write"
    );

    ns.api::<Brittle>()
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "fail": false } })),
        )
        .await
        .unwrap();
    let (_, reason) = stalled(&ns, "Stalled=False after a success", |s, _| {
        *s == ConditionStatus::False
    })
    .await;
    assert_eq!(reason, "Reconciled");
    barrier(&ns, &reconciler, "after-cleared").await;
    assert_eq!(
        reconciler.counts("b"),
        (3, 1),
        "one success for the change, and nothing for clearing Stalled"
    );
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
