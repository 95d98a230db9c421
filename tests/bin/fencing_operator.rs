//! A test operator for leader election: while it leads, it stamps every ConfigMap labelled
//! `fencing=true` in its namespace with its identity and the Lease term (`leaseTransitions`)
//! it was elected in, every 100 ms, and the wall-clock time (µs since the epoch) its reconcile
//! started. The leader-election test runs four of these and checks the stamps: a replica that
//! wrote while another held the Lease would show up as an old term written after a newer one.
//!
//! With `FENCING_EVENT_DELAY_MS=<ms>` each reconcile also publishes an Event about the
//! ConfigMap through the manager's recorder, from a detached task, that many milliseconds later:
//! a replica frozen meanwhile and thawed after a successor took over still tries to. The fencing
//! fault test (tests/integration/faults/fencing.rs) checks in the audit log that no such Event
//! reaches the apiserver.
//!
//! With `FENCING_SEND_DELAY_MS=<ms>` every write waits that long after the manager's fence let
//! it through and before it is sent: a freeze then certainly catches writes in flight (the
//! fencing fault test checks that those are the only ones that arrive late); the process also
//! lingers three times that long before it exits, so that they can.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kubeforge::cli::or_exit;
use kubeforge::controller::{Action, Context, Controller, GenerationChanged, Reconciler};
use kubeforge::events::{EventType, Recorder};
use kubeforge::informer::InformerConfig;

/// (identity, term) while leading.
type Term = Arc<Mutex<Option<(String, i32)>>>;

struct Stamper {
    term: Term,
    writes: std::sync::atomic::AtomicU64,
    /// `FENCING_EVENT_DELAY_MS`: wait, then publish an Event, before each stamp.
    events: Option<(Duration, Arc<Recorder>)>,
}

impl Reconciler<ConfigMap> for Stamper {
    type Error = kube::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, kube::Error> {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros();
        let Some((identity, term)) = self.term.lock().unwrap_or_else(|e| e.into_inner()).clone()
        else {
            return Ok(Action::requeue_after(Duration::from_millis(100)));
        };
        if let Some((delay, recorder)) = &self.events {
            // Fire and forget, as operators often publish events: a detached task outlives the
            // reconcile (and the controller, if leadership is lost meanwhile).
            let (delay, recorder) = (*delay, Arc::clone(recorder));
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let published = recorder
                    .publish(&*cm, EventType::Normal, "Stamped", "Stamp", None)
                    .await;
                if let Err(error) = published {
                    println!("event not published: {error}");
                }
            });
        }
        // A changing sequence number makes every stamp a real write (a watch event).
        let seq = self
            .writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stamp = serde_json::json!({ "metadata": { "annotations": {
            "fencing/holder": identity,
            "fencing/term": term.to_string(),
            "fencing/seq": seq.to_string(),
            "fencing/at": started.to_string(),
        }}});
        ctx.api::<ConfigMap>()
            .patch(
                &ctx.key().name,
                &PatchParams::default(),
                &Patch::Merge(stamp),
            )
            .await?;
        Ok(Action::requeue_after(Duration::from_millis(100)))
    }
}

#[tokio::main]
async fn main() {
    let options = kubeforge::cli::parse!();
    options.init_tracing();
    let client = delay_writes(or_exit(options.client().await));
    let namespace = options
        .namespace
        .first()
        .cloned()
        .unwrap_or_else(|| "default".to_owned());
    let mut manager = or_exit(options.manager(client.clone()));
    let term: Term = Arc::default();

    // When this replica becomes leader, read the term it was elected in from the Lease.
    let mut leading = manager.leading();
    let lease_name = options.leader_election_id.clone().unwrap_or_default();
    let lease_ns = options
        .leader_election_namespace
        .clone()
        .unwrap_or_else(|| namespace.clone());
    let identity = std::env::var("POD_NAME").unwrap_or_default();
    let watcher_term = term.clone();
    let leases: Api<Lease> = Api::namespaced(client.clone(), &lease_ns);
    tokio::spawn(async move {
        while leading.changed().await.is_ok() {
            let now_leading = *leading.borrow();
            if now_leading {
                let lease = leases.get(&lease_name).await.ok();
                let transitions = lease
                    .and_then(|l| l.spec)
                    .and_then(|s| s.lease_transitions)
                    .unwrap_or(0);
                println!("leading term={transitions}");
                *watcher_term.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((identity.clone(), transitions));
            } else {
                *watcher_term.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
        }
    });

    let controller = Controller::new(
        "fencing",
        manager.wiring(),
        Api::<ConfigMap>::namespaced(client, &namespace),
        InformerConfig::default().labels("fencing=true"),
    )
    .predicate(GenerationChanged);
    let events = std::env::var("FENCING_EVENT_DELAY_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(|ms| {
            (
                Duration::from_millis(ms),
                Arc::new(manager.recorder("fencing")),
            )
        });
    let manager = manager.add_controller(
        controller,
        Stamper {
            term,
            writes: Default::default(),
            events,
        },
    );
    let result = manager.run().await;
    if let Some(delay) = send_delay() {
        // Time for the writes in flight to leave before the process exits, as a process that
        // flushes its logs or metrics on the way out gives them.
        tokio::time::sleep(delay * 3).await;
    }
    or_exit(result);
}

/// `FENCING_SEND_DELAY_MS`, if set and not zero.
fn send_delay() -> Option<Duration> {
    std::env::var("FENCING_SEND_DELAY_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

/// `client`, with every write held `FENCING_SEND_DELAY_MS` before it is sent (none if unset).
fn delay_writes(client: kube::Client) -> kube::Client {
    let Some(delay) = send_delay() else {
        return client;
    };
    let namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let client = client.clone();
        let write = request.method() != http::Method::GET;
        // On a task of its own, as a request handed to the connection's task: the caller
        // giving up (a reconcile cancelled at shutdown) does not call it back.
        let sent = tokio::spawn(async move {
            if write {
                tokio::time::sleep(delay).await;
            }
            client.send(request).await
        });
        async move {
            sent.await
                .map_err(|e| kube::Error::Service(e.into()))
                .and_then(|r| r)
        }
    });
    kube::Client::new(service, namespace)
}
