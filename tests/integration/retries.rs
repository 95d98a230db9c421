//! Retries through the controller's retry processor, against the real apiserver: the policy's
//! intervals and its give-up (with the Warning event), dequeue policies, state across retries.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kubeforge::ObjectKey;
use kubeforge::controller::{
    Action, Context, Controller, ControllerConfig, Idle, Reconciler, Wiring,
};
use kubeforge::informer::InformerConfig;
use kubeforge::retry::{DequeueOnGeneration, ExponentialRetry};
use kubeforge::testing::{TestNamespace, apply_crds};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;
use crate::support::widget::{QUIET, Widget, widget, widget_crd};

/// One reconcile as the test reconciler saw it.
#[derive(Clone, Debug)]
struct Attempt {
    at: Instant,
    generation: i64,
    retries: u32,
    /// What `ctx.state::<u32>()` held when the attempt started.
    state: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
#[error("failing on purpose (generation {0})")]
struct Failing(i64);

/// Fails every reconcile of a generation listed in `fail` (all when empty is false), records
/// each attempt, and counts attempts in the key's retry state.
struct Flaky {
    attempts: Arc<Mutex<Vec<Attempt>>>,
    fail_generations: Vec<i64>,
    fail_always: bool,
}

impl Reconciler<Widget> for Flaky {
    type Error = Failing;

    async fn reconcile(&self, w: Arc<Widget>, ctx: &Context<Widget>) -> Result<Action, Failing> {
        let generation = w.metadata.generation.unwrap_or_default();
        let state = ctx.state::<u32>();
        ctx.set_state(state.unwrap_or(0) + 1);
        self.attempts.lock().unwrap().push(Attempt {
            at: Instant::now(),
            generation,
            retries: ctx.retries(),
            state,
        });
        if self.fail_always || self.fail_generations.contains(&generation) {
            Err(Failing(generation))
        } else {
            Ok(Action::Done)
        }
    }
}

struct Running {
    attempts: Arc<Mutex<Vec<Attempt>>>,
    idle: Idle,
    shutdown: CancellationToken,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn run(ns: &TestNamespace, config: ControllerConfig, flaky: Flaky) -> Running {
    apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let attempts = Arc::clone(&flaky.attempts);
    let wiring = Wiring::new(ns.client());
    let controller = Controller::new(
        "flaky",
        &wiring,
        ns.api::<Widget>(),
        InformerConfig::default(),
    )
    .config(config);
    let idle = controller.idle();
    let shutdown = CancellationToken::new();
    tokio::spawn(controller.run(flaky, shutdown.clone()));
    Running {
        attempts,
        idle,
        shutdown,
    }
}

fn flaky(fail_generations: Vec<i64>, fail_always: bool) -> Flaky {
    Flaky {
        attempts: Arc::default(),
        fail_generations,
        fail_always,
    }
}

fn attempts(running: &Running) -> Vec<Attempt> {
    running.attempts.lock().unwrap().clone()
}

/// Waits for the first reconcile of the test's widget.
async fn first_attempt(running: &Running) {
    eventually(
        "the first (failing) reconcile",
        Duration::from_secs(30),
        async || (!attempts(running).is_empty()).then_some(()),
    )
    .await;
}

async fn patch_spec(ns: &TestNamespace, name: &str, value: i64) {
    ns.api::<Widget>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "value": value } })),
        )
        .await
        .unwrap();
}

async fn patch_status(ns: &TestNamespace, name: &str, observed: i64) {
    ns.api::<Widget>()
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "observed": observed } })),
        )
        .await
        .unwrap();
}

/// The Warning events about `name` with `reason`.
async fn warnings(ns: &TestNamespace, name: &str, reason: &str) -> Vec<Event> {
    let events: Api<Event> = ns.api();
    let list = events.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

#[tokio::test]
async fn failures_should_be_retried_at_the_policy_intervals_then_given_up_with_an_event() {
    let ns = TestNamespace::new().await.unwrap();
    let ms = Duration::from_millis;
    // 4 attempts: the first and 3 retries after 300, 600 and 1200 ms; then the policy gives up.
    let policy = ExponentialRetry::new(ms(300), ms(1200), 4);
    let running = run(
        &ns,
        ControllerConfig::default().retry(policy),
        flaky(Vec::new(), true),
    )
    .await;
    ns.api::<Widget>()
        .create(&PostParams::default(), &widget("doomed", 1))
        .await
        .unwrap();
    eventually(
        "the Warning event of the exhausted retries",
        Duration::from_secs(30),
        async || {
            let found = warnings(&ns, "doomed", "RetriesExhausted").await;
            (!found.is_empty()).then_some(found)
        },
    )
    .await;
    // Idle: nothing queued, nothing pending — the key was dropped, not retried further.
    tokio::time::timeout(Duration::from_secs(20), running.idle.wait(ms(1500)))
        .await
        .expect("no retry after giving up");
    let seen = attempts(&running);
    assert_eq!(seen.len(), 4, "the first attempt and 3 retries: {seen:?}");
    let retries: Vec<u32> = seen.iter().map(|a| a.retries).collect();
    assert_eq!(retries, [0, 1, 2, 3], "ctx.retries() counts the failures");
    let states: Vec<Option<u32>> = seen.iter().map(|a| a.state).collect();
    assert_eq!(
        states,
        [None, Some(1), Some(2), Some(3)],
        "the state set on attempt 1 is seen on attempts 2..N"
    );
    for (i, expected) in [ms(300), ms(600), ms(1200)].into_iter().enumerate() {
        let gap = seen[i + 1].at - seen[i].at;
        // Never early; late by at most the watch/queue latency of a loaded machine.
        assert!(
            gap >= expected && gap < expected + ms(1500),
            "retry {} came {gap:?} after the attempt before it (policy: {expected:?})",
            i + 1
        );
    }

    // Until the object changes: a spec change reconciles it again, from a clean slate.
    patch_spec(&ns, "doomed", 2).await;
    eventually(
        "a reconcile of the changed object",
        Duration::from_secs(20),
        async || (attempts(&running).len() > 4).then_some(()),
    )
    .await;
    let fresh = &attempts(&running)[4];
    assert_eq!((fresh.retries, fresh.state), (0, None), "{fresh:?}");
}

#[tokio::test]
async fn generation_changes_should_cut_a_pending_retry_short_and_status_updates_wait_for_it() {
    let ns = TestNamespace::new().await.unwrap();
    // A long first retry: whatever reconciles the widget within the test is an event.
    let policy = ExponentialRetry::new(Duration::from_secs(60), Duration::from_secs(60), 10);
    let config = ControllerConfig::default()
        .retry(policy)
        .dequeue(DequeueOnGeneration);
    let running = run(&ns, config, flaky(vec![1], false)).await;
    ns.api::<Widget>()
        .create(&PostParams::default(), &widget("slow", 1))
        .await
        .unwrap();
    first_attempt(&running).await;

    // A status-only update: with the opinionated policy it waits for the pending retry.
    patch_status(&ns, "slow", 7).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        attempts(&running).len(),
        1,
        "a status-only update did not cut the retry short"
    );
    assert!(
        tokio::time::timeout(Duration::from_secs(1), running.idle.wait(QUIET))
            .await
            .is_err(),
        "the retry is still pending"
    );

    // A spec change drops the pending retry and reconciles at once (and succeeds: gen 2).
    let bumped = Instant::now();
    patch_spec(&ns, "slow", 2).await;
    eventually(
        "the reconcile of the new generation",
        Duration::from_secs(10),
        async || (attempts(&running).len() == 2).then_some(()),
    )
    .await;
    let second = attempts(&running)[1].clone();
    assert_eq!(second.generation, 2);
    assert!(second.at - bumped < Duration::from_secs(5), "{second:?}");
    assert_eq!(second.state, Some(1), "the state of the failed attempt");
    // Nothing left: the 60 s retry is gone (idle would otherwise wait for it).
    tokio::time::timeout(Duration::from_secs(15), running.idle.wait(QUIET))
        .await
        .expect("no pending retry after the generation change");
    assert_eq!(attempts(&running).len(), 2);

    // After the success the state is gone.
    patch_spec(&ns, "slow", 3).await;
    eventually(
        "the reconcile of generation 3",
        Duration::from_secs(10),
        async || (attempts(&running).len() == 3).then_some(()),
    )
    .await;
    assert_eq!(attempts(&running)[2].state, None);
}

#[tokio::test]
async fn by_default_any_event_should_reconcile_a_key_with_a_pending_retry_at_once() {
    let ns = TestNamespace::new().await.unwrap();
    let policy = ExponentialRetry::new(Duration::from_secs(60), Duration::from_secs(60), 10);
    let running = run(
        &ns,
        ControllerConfig::default().retry(policy),
        flaky(vec![1], false),
    )
    .await;
    ns.api::<Widget>()
        .create(&PostParams::default(), &widget("eager", 1))
        .await
        .unwrap();
    first_attempt(&running).await;
    patch_status(&ns, "eager", 7).await;
    eventually(
        "the status update's reconcile (the retry dropped)",
        Duration::from_secs(10),
        async || (attempts(&running).len() >= 2).then_some(()),
    )
    .await;
    let key = ObjectKey::namespaced(ns.name(), "eager");
    assert_eq!(
        attempts(&running)[1].retries,
        1,
        "{key}: the failure still counts"
    );
}
