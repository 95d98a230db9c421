//! Keys from outside the informers on the real apiserver: a timer per object
//! (`Controller::every`: once per period for each cached object, stopped when it is deleted)
//! and a stream of keys (`Controller::reconcile_on`: an external system names what to
//! reconcile).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, PostParams};
use kubeforge::ObjectKey;
use kubeforge::controller::{Action, Context, Controller, Reconciler, Trigger, Wiring};
use kubeforge::informer::InformerConfig;
use kubeforge::testing::TestNamespace;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually};

/// One reconcile: the name, why it ran, and when.
type Run = (String, Vec<Trigger>, Instant);

struct Record(Arc<Mutex<Vec<Run>>>);

impl Reconciler<ConfigMap> for Record {
    type Error = std::convert::Infallible;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let name = cm.metadata.name.clone().unwrap_or_default();
        self.0
            .lock()
            .unwrap()
            .push((name, ctx.triggers().to_vec(), Instant::now()));
        Ok(Action::Done)
    }
}

/// The times `name` ran with `trigger`.
fn runs(seen: &Mutex<Vec<Run>>, name: &str, trigger: &Trigger) -> Vec<Instant> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(n, triggers, _)| n == name && triggers.contains(trigger))
        .map(|(_, _, at)| *at)
        .collect()
}

#[tokio::test]
async fn timers_should_fire_per_object_until_it_is_deleted_and_streamed_keys_should_reconcile() {
    const PERIOD: Duration = Duration::from_secs(1);
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<ConfigMap>();
    for name in ["a", "b"] {
        let mut cm = configmap(name, &[]);
        cm.metadata.labels = Some([("sources".to_owned(), "yes".to_owned())].into());
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ObjectKey>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let wiring = Wiring::new(ns.client());
    let controller = Controller::new(
        "sources",
        &wiring,
        api.clone(),
        InformerConfig::default().labels("sources=yes"),
    )
    .every_with_jitter(PERIOD, 0.0)
    .reconcile_on(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(controller.run(Record(Arc::clone(&seen)), shutdown.clone()));

    // Both objects' timers fire, each at most once per period.
    for name in ["a", "b"] {
        eventually(
            &format!("{name}'s timer firing 3 times"),
            Duration::from_secs(30),
            async || (runs(&seen, name, &Trigger::Timer).len() >= 3).then_some(()),
        )
        .await;
    }
    for name in ["a", "b"] {
        let ticks = runs(&seen, name, &Trigger::Timer);
        for pair in ticks.windows(2) {
            // The reconcile runs after its tick; a gap below the period means two ticks in one.
            assert!(
                pair[1] - pair[0] >= PERIOD - Duration::from_millis(150),
                "{name}'s timer fired {:?} apart",
                pair[1] - pair[0]
            );
        }
    }

    // A deleted object's timer stops; the other's goes on.
    api.delete("b", &DeleteParams::default()).await.unwrap();
    eventually(
        "b gone from the cache",
        Duration::from_secs(30),
        async || (api.get_opt("b").await.ok()?.is_none()).then_some(()),
    )
    .await;
    tokio::time::sleep(PERIOD * 2).await;
    let b_before = runs(&seen, "b", &Trigger::Timer).len();
    let a_before = runs(&seen, "a", &Trigger::Timer).len();
    tokio::time::sleep(PERIOD * 3).await;
    assert_eq!(
        runs(&seen, "b", &Trigger::Timer).len(),
        b_before,
        "b's timer fired after it was deleted"
    );
    assert!(
        runs(&seen, "a", &Trigger::Timer).len() > a_before,
        "a's timer stopped"
    );

    // A key from the stream reconciles its object; one of no object reconciles nothing.
    tx.send(ObjectKey::namespaced(ns.name(), "missing"))
        .unwrap();
    tx.send(ObjectKey::namespaced(ns.name(), "a")).unwrap();
    eventually(
        "a reconciled for the streamed key",
        Duration::from_secs(30),
        async || (!runs(&seen, "a", &Trigger::External).is_empty()).then_some(()),
    )
    .await;
    assert!(runs(&seen, "missing", &Trigger::External).is_empty());

    shutdown.cancel();
    running.await.unwrap().unwrap();
}

/// The keys the macro-wired controller's `reconcile_on` function streams: the test holds the
/// sending side.
static STREAMED: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<ObjectKey>>> = Mutex::new(None);

/// `reconcile_on = streamed`: the stream of keys (taken once, when the controller is built).
fn streamed(_wiring: &Wiring) -> impl futures::Stream<Item = ObjectKey> + Send + 'static {
    let mut rx = STREAMED.lock().unwrap().take().expect("the test's channel");
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// The runs of [`Ticking`].
static TICKED: Mutex<Vec<Run>> = Mutex::new(Vec::new());

/// `every` and `reconcile_on` as `#[controller]` keys.
struct Ticking;

#[kubeforge::controller(for = ConfigMap, every = "1s", reconcile_on = streamed, name = "ticking")]
impl Ticking {
    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, std::convert::Infallible> {
        let name = cm.metadata.name.clone().unwrap_or_default();
        TICKED
            .lock()
            .unwrap()
            .push((name, ctx.triggers().to_vec(), Instant::now()));
        Ok(Action::Done)
    }
}

#[tokio::test]
async fn every_and_reconcile_on_should_wire_a_timer_and_a_stream_from_the_controller_attribute() {
    let ns = TestNamespace::new().await.unwrap();
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("ticks", &[]))
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    *STREAMED.lock().unwrap() = Some(rx);
    let manager = kubeforge::manager::Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .controller(Ticking);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    eventually("two timer ticks", Duration::from_secs(30), async || {
        (runs(&TICKED, "ticks", &Trigger::Timer).len() >= 2).then_some(())
    })
    .await;
    tx.send(ObjectKey::namespaced(ns.name(), "ticks")).unwrap();
    eventually(
        "the streamed key reconciled",
        Duration::from_secs(30),
        async || (!runs(&TICKED, "ticks", &Trigger::External).is_empty()).then_some(()),
    )
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
