//! Kubernetes events (`events.k8s.io/v1`) about the objects a controller manages.
//!
//! A [`Recorder`] publishes events that `kubectl describe` and `kubectl events` show. Repeats
//! of the same event (same object, type, reason, action and note) within
//! [`Recorder::aggregation_window`] do not create new Event objects: the first one's `series`
//! (count and last observed time) is updated instead, as client-go's event broadcaster does. This
//! keeps a reconcile loop that reports the same problem every few seconds from flooding etcd.
//!
//! Event names are `<object name>.<unique suffix>`; cluster-scoped objects get their events in
//! the `default` namespace.
//!
//! # Examples
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubeforge::events::{EventType, Recorder};
//!
//! # async fn doc(client: kube::Client, cm: ConfigMap) -> Result<(), kube::Error> {
//! let recorder = Recorder::new(client, "settings-controller");
//! recorder
//!     .publish(&cm, EventType::Normal, "Synced", "Reconcile", Some("copied 3 keys".into()))
//!     .await?;
//! # Ok(()) }
//! ```

use crate::text::truncate;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use tokio::time::Instant;

/// The type of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something may need attention.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Fingerprint {
    uid: String,
    type_: EventType,
    reason: String,
    action: String,
    note: Option<String>,
}

#[derive(Clone, Debug)]
struct Published {
    namespace: String,
    name: String,
    count: i32,
    first_seen: Instant,
}

/// Publishes events for one controller; see the [module docs](self). Cheap to share (`Arc`).
pub struct Recorder {
    client: Client,
    controller: String,
    instance: String,
    window: Duration,
    published: Mutex<HashMap<Fingerprint, Published>>,
    sequence: AtomicU64,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("controller", &self.controller)
            .field("instance", &self.instance)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder reporting as `controller` (`reportingController`), from this host
    /// (`reportingInstance`: `$POD_NAME` or `$HOSTNAME`, else the controller name).
    pub fn new(client: Client, controller: impl Into<String>) -> Self {
        let controller = controller.into();
        let instance = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| controller.clone());
        Self {
            client,
            controller,
            instance,
            window: Duration::from_secs(600),
            published: Mutex::new(HashMap::new()),
            sequence: AtomicU64::new(0),
        }
    }

    /// Repeats within this window update the first event's series (default 10 minutes).
    #[must_use]
    pub fn aggregation_window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    fn unique_suffix(&self) -> String {
        let nanos = Timestamp::now().as_nanosecond();
        let n = self.sequence.fetch_add(1, Ordering::Relaxed);
        format!("{:x}{n:x}", nanos & 0xffff_ffff_ffff)
    }

    /// Publishes an event about `obj` (which must have been stored: it needs a UID). A repeat
    /// within the aggregation window increments the earlier event's series count.
    ///
    /// # Errors
    ///
    /// The apiserver's error (callers usually log it and go on: events are best effort).
    pub async fn publish<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: Option<String>,
    ) -> Result<(), kube::Error> {
        let regarding = obj.object_ref(&());
        self.publish_about(obj.meta(), regarding, type_, reason, action, note)
            .await
    }

    /// [`publish`](Self::publish) once the object is known by its metadata and reference: not
    /// generic, so a kind costs the user's crate only the shell above.
    async fn publish_about(
        &self,
        meta: &ObjectMeta,
        regarding: ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: Option<String>,
    ) -> Result<(), kube::Error> {
        let fingerprint = Fingerprint {
            uid: meta.uid.clone().unwrap_or_default(),
            type_,
            reason: reason.to_owned(),
            action: action.to_owned(),
            note: note.clone(),
        };
        let now = MicroTime(Timestamp::now());
        let previous = {
            let mut published = self.published.lock().unwrap_or_else(|e| e.into_inner());
            published.retain(|_, p| p.first_seen.elapsed() < self.window);
            published.get(&fingerprint).cloned()
        };
        if let Some(previous) = previous {
            let count = previous.count + 1;
            let api: Api<Event> = Api::namespaced(self.client.clone(), &previous.namespace);
            let series = EventSeries {
                count,
                last_observed_time: now.clone(),
            };
            let patched = api
                .patch(
                    &previous.name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({ "series": series })),
                )
                .await;
            match patched {
                Ok(_) => {
                    let mut published = self.published.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(p) = published.get_mut(&fingerprint) {
                        p.count = count;
                    }
                    return Ok(());
                }
                // The event expired (events have a TTL) or was deleted: publish a new one.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => return Err(e),
            }
        }

        let namespace = meta
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let name = format!(
            "{}.{}",
            meta.name.as_deref().unwrap_or("object"),
            self.unique_suffix()
        );
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            event_time: Some(now),
            action: Some(action.to_owned()),
            reason: Some(reason.to_owned()),
            // The apiserver limits a note's size.
            note: note.map(|n| truncate(n, 1024)),
            type_: Some(type_.as_str().to_owned()),
            regarding: Some(regarding),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(truncate(self.instance.clone(), 128)),
            ..Event::default()
        };
        Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await?;
        self.published
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                fingerprint,
                Published {
                    namespace,
                    name,
                    count: 1,
                    first_seen: Instant::now(),
                },
            );
        Ok(())
    }
}
