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

/// What makes two publications the same event: the object (UID, and kind, namespace and name,
/// so objects not stored yet do not share events), type, reason, action and note. The note is
/// part of it as in client-go's key, so a new message is a new Event instead of a count on an
/// Event showing the old message.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Fingerprint {
    uid: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    type_: EventType,
    reason: String,
    action: String,
    note: Option<String>,
}

/// One publication, before it is an Event.
#[derive(Debug)]
struct Occurrence<'a> {
    type_: EventType,
    reason: &'a str,
    action: &'a str,
    note: Option<String>,
}

impl Occurrence<'_> {
    fn fingerprint(&self, regarding: &ObjectReference) -> Fingerprint {
        Fingerprint {
            uid: regarding.uid.clone(),
            kind: regarding.kind.clone(),
            namespace: regarding.namespace.clone(),
            name: regarding.name.clone(),
            type_: self.type_,
            reason: self.reason.to_owned(),
            action: self.action.to_owned(),
            note: self.note.clone(),
        }
    }
}

/// Who reports: `reportingController` and `reportingInstance`.
#[derive(Clone, Debug)]
struct Reporter {
    controller: String,
    instance: String,
}

/// The apiserver's limits: a note of at most 1 kB, a `reportingInstance` of at most 128
/// characters (longer ones are refused with 422).
const MAX_NOTE: usize = 1024;
const MAX_INSTANCE: usize = 128;
/// Cluster-scoped objects get their events here, as client-go's and kube's recorders do.
const CLUSTER_SCOPED_NAMESPACE: &str = "default";

/// The namespace of the events about `regarding`.
fn event_namespace(regarding: &ObjectReference) -> String {
    regarding
        .namespace
        .clone()
        .unwrap_or_else(|| CLUSTER_SCOPED_NAMESPACE.to_owned())
}

/// `<object name>.<suffix>`, the suffix the clock's nanoseconds (fixed width) followed by the
/// recorder's sequence number, so two events in the same clock reading get different names.
fn event_name(regarding: &ObjectReference, nanos: i128, sequence: u64) -> String {
    format!(
        "{}.{:012x}{sequence:x}",
        regarding.name.as_deref().unwrap_or("object"),
        nanos & 0xffff_ffff_ffff
    )
}

/// The first Event of a series: no `series` yet, note and instance cut to the apiserver's
/// limits.
fn new_event(
    reporter: &Reporter,
    regarding: ObjectReference,
    occurrence: Occurrence<'_>,
    name: String,
    now: MicroTime,
) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(event_namespace(&regarding)),
            ..ObjectMeta::default()
        },
        event_time: Some(now),
        action: Some(occurrence.action.to_owned()),
        reason: Some(occurrence.reason.to_owned()),
        note: occurrence.note.map(|n| truncate(n, MAX_NOTE)),
        type_: Some(occurrence.type_.as_str().to_owned()),
        regarding: Some(regarding),
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(truncate(reporter.instance.clone(), MAX_INSTANCE)),
        ..Event::default()
    }
}

/// The merge patch that records the `count`th occurrence of an event, seen at `now`.
fn series_patch(count: i32, now: MicroTime) -> serde_json::Value {
    let series = EventSeries {
        count,
        last_observed_time: now,
    };
    serde_json::json!({ "series": series })
}

/// An Event already published, which repeats add to.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Published {
    namespace: String,
    name: String,
    count: i32,
    first_seen: Instant,
}

/// The events published within the aggregation window, by fingerprint.
#[derive(Debug, Default)]
struct Aggregation {
    published: HashMap<Fingerprint, Published>,
}

impl Aggregation {
    /// The Event a publication at `now` adds to, if one with the same fingerprint was first
    /// published less than `window` ago, with the count the repeat gives it. Forgets the events
    /// whose window has passed.
    fn repeat(
        &mut self,
        fingerprint: &Fingerprint,
        now: Instant,
        window: Duration,
    ) -> Option<Published> {
        self.published
            .retain(|_, p| now.saturating_duration_since(p.first_seen) < window);
        self.published.get(fingerprint).map(|p| Published {
            count: p.count.saturating_add(1),
            ..p.clone()
        })
    }

    /// The repeat was recorded: the Event now counts `count` occurrences.
    fn counted(&mut self, fingerprint: &Fingerprint, count: i32) {
        if let Some(p) = self.published.get_mut(fingerprint) {
            p.count = count;
        }
    }

    /// A new Event was created at `now`: repeats add to it from now on.
    fn created(&mut self, fingerprint: Fingerprint, namespace: String, name: String, now: Instant) {
        self.published.insert(
            fingerprint,
            Published {
                namespace,
                name,
                count: 1,
                first_seen: now,
            },
        );
    }
}

/// Publishes events for one controller; see the [module docs](self). Cheap to share (`Arc`).
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    window: Duration,
    aggregation: Mutex<Aggregation>,
    sequence: AtomicU64,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("controller", &self.reporter.controller)
            .field("instance", &self.reporter.instance)
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
            reporter: Reporter {
                controller,
                instance,
            },
            window: Duration::from_secs(600),
            aggregation: Mutex::new(Aggregation::default()),
            sequence: AtomicU64::new(0),
        }
    }

    /// Repeats within this window, counted from the first event, update the first event's
    /// series (default 10 minutes).
    #[must_use]
    pub fn aggregation_window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    fn aggregation(&self) -> std::sync::MutexGuard<'_, Aggregation> {
        self.aggregation.lock().unwrap_or_else(|e| e.into_inner())
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
        self.publish_ref(obj.object_ref(&()), type_, reason, action, note)
            .await
    }

    /// [`publish`](Self::publish) about the object `regarding` refers to (a kind known at run
    /// time: `KindType::object_ref`).
    ///
    /// # Errors
    ///
    /// As [`publish`](Self::publish).
    pub async fn publish_ref(
        &self,
        regarding: ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: Option<String>,
    ) -> Result<(), kube::Error> {
        let occurrence = Occurrence {
            type_,
            reason,
            action,
            note,
        };
        self.publish_about(regarding, occurrence).await
    }

    /// [`publish`](Self::publish) once the object is known by its reference: not generic, so a
    /// kind costs the user's crate only the shell above.
    async fn publish_about(
        &self,
        regarding: ObjectReference,
        occurrence: Occurrence<'_>,
    ) -> Result<(), kube::Error> {
        let fingerprint = occurrence.fingerprint(&regarding);
        let now = MicroTime(Timestamp::now());
        let previous = self
            .aggregation()
            .repeat(&fingerprint, Instant::now(), self.window);
        if let Some(previous) = previous {
            let api: Api<Event> = Api::namespaced(self.client.clone(), &previous.namespace);
            let patch = Patch::Merge(series_patch(previous.count, now.clone()));
            match api
                .patch(&previous.name, &PatchParams::default(), &patch)
                .await
            {
                Ok(_) => {
                    self.aggregation().counted(&fingerprint, previous.count);
                    return Ok(());
                }
                // The event expired (events have a TTL) or was deleted: publish a new one.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => return Err(e),
            }
        }

        let nanos = now.0.as_nanosecond();
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed);
        let name = event_name(&regarding, nanos, sequence);
        let event = new_event(&self.reporter, regarding, occurrence, name.clone(), now);
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await?;
        self.aggregation()
            .created(fingerprint, namespace, name, Instant::now());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use http::{Method, Request, Response, StatusCode};
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ObjectReference};
    use k8s_openapi::api::events::v1::Event;
    use kube::api::ObjectMeta;
    use kube::client::Body;
    use kube::{Client, Resource};

    use super::*;

    fn config_map() -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("settings".into()),
                namespace: Some("shop".into()),
                uid: Some("uid-1".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn namespace() -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some("shop".into()),
                uid: Some("uid-ns".into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        }
    }

    fn occurrence(note: Option<&str>) -> Occurrence<'static> {
        Occurrence {
            type_: EventType::Warning,
            reason: "Failed",
            action: "Reconcile",
            note: note.map(str::to_owned),
        }
    }

    fn reporter() -> Reporter {
        Reporter {
            controller: "settings-controller".into(),
            instance: "pod-0".into(),
        }
    }

    fn now() -> MicroTime {
        MicroTime(Timestamp::from_second(1_700_000_000).expect("valid time"))
    }

    #[test]
    fn fingerprint_should_tell_notes_and_objects_apart() {
        let cm = config_map().object_ref(&());
        let same = occurrence(Some("a")).fingerprint(&cm);
        assert_eq!(same, occurrence(Some("a")).fingerprint(&cm));
        assert_ne!(same, occurrence(Some("b")).fingerprint(&cm));
        assert_ne!(same, occurrence(None).fingerprint(&cm));
        let normal = Occurrence {
            type_: EventType::Normal,
            ..occurrence(Some("a"))
        };
        assert_ne!(same, normal.fingerprint(&cm));

        // Objects not stored yet have no UID: their names still keep them apart.
        let unstored = |name: &str| ObjectReference {
            name: Some(name.into()),
            namespace: Some("shop".into()),
            kind: Some("ConfigMap".into()),
            ..ObjectReference::default()
        };
        assert_ne!(
            occurrence(None).fingerprint(&unstored("one")),
            occurrence(None).fingerprint(&unstored("two"))
        );
    }

    #[test]
    fn new_event_should_describe_a_namespaced_object_in_its_namespace() {
        let regarding = config_map().object_ref(&());
        let name = event_name(&regarding, 0xabc, 7);
        let event = new_event(
            &reporter(),
            regarding.clone(),
            occurrence(Some("bad key")),
            name.clone(),
            now(),
        );
        assert_eq!(name, "settings.000000000abc7");
        assert_eq!(event.metadata.name.as_deref(), Some(name.as_str()));
        assert_eq!(event.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(event.regarding.as_ref(), Some(&regarding));
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert_eq!(event.reason.as_deref(), Some("Failed"));
        assert_eq!(event.action.as_deref(), Some("Reconcile"));
        assert_eq!(event.note.as_deref(), Some("bad key"));
        assert_eq!(
            event.reporting_controller.as_deref(),
            Some("settings-controller")
        );
        assert_eq!(event.reporting_instance.as_deref(), Some("pod-0"));
        assert_eq!(event.event_time, Some(now()));
        assert!(event.series.is_none(), "a first event has no series");
        assert!(event.related.is_none());

        let json = serde_json::to_value(&event).expect("serializable");
        assert_eq!(json["apiVersion"], "events.k8s.io/v1");
        assert_eq!(json["kind"], "Event");
        assert_eq!(json["regarding"]["kind"], "ConfigMap");
        assert_eq!(json["regarding"]["uid"], "uid-1");
        assert_eq!(json["eventTime"], "2023-11-14T22:13:20.000000Z");
    }

    #[test]
    fn new_event_should_put_a_cluster_scoped_objects_events_in_default() {
        let regarding = namespace().object_ref(&());
        assert_eq!(regarding.namespace, None);
        let name = event_name(&regarding, 1, 0);
        let event = new_event(&reporter(), regarding, occurrence(None), name, now());
        assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
        assert!(
            event
                .metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("shop."))
        );
        let regarding = event.regarding.expect("regarding");
        assert_eq!(regarding.kind.as_deref(), Some("Namespace"));
        assert_eq!(regarding.namespace, None);
        assert_eq!(event.note, None);
    }

    #[test]
    fn new_event_should_cut_note_and_instance_to_the_apiservers_limits() {
        let long = Reporter {
            instance: "i".repeat(300),
            ..reporter()
        };
        let note = "é".repeat(1000);
        let event = new_event(
            &long,
            config_map().object_ref(&()),
            occurrence(Some(&note)),
            "n".into(),
            now(),
        );
        let kept = event.note.expect("note");
        assert!(kept.len() <= MAX_NOTE && kept.len() > MAX_NOTE - 2);
        assert!(note.starts_with(&kept));
        assert_eq!(
            event.reporting_instance.map(|i| i.len()),
            Some(MAX_INSTANCE)
        );
    }

    #[test]
    fn event_name_should_differ_within_one_clock_reading() {
        let regarding = config_map().object_ref(&());
        assert_ne!(event_name(&regarding, 42, 0), event_name(&regarding, 42, 1));
        // The clock's part has a fixed width, so it cannot run into the sequence number.
        assert_ne!(
            event_name(&regarding, 0x1, 0x23),
            event_name(&regarding, 0x12, 0x3)
        );
        let unnamed = ObjectReference::default();
        assert!(event_name(&unnamed, 1, 1).starts_with("object."));
    }

    #[test]
    fn series_patch_should_carry_the_count_and_the_last_observed_time() {
        assert_eq!(
            series_patch(3, now()),
            serde_json::json!({
                "series": { "count": 3, "lastObservedTime": "2023-11-14T22:13:20.000000Z" }
            })
        );
    }

    #[test]
    fn aggregation_should_count_repeats_within_the_window() {
        let window = Duration::from_secs(600);
        let cm = config_map().object_ref(&());
        let fingerprint = occurrence(Some("a")).fingerprint(&cm);
        let other = occurrence(Some("b")).fingerprint(&cm);
        let t0 = Instant::now();
        let mut aggregation = Aggregation::default();
        assert_eq!(aggregation.repeat(&fingerprint, t0, window), None);

        aggregation.created(fingerprint.clone(), "shop".into(), "settings.1".into(), t0);
        let second = aggregation
            .repeat(&fingerprint, t0 + Duration::from_secs(1), window)
            .expect("a repeat");
        assert_eq!(
            (second.namespace.as_str(), second.name.as_str()),
            ("shop", "settings.1")
        );
        assert_eq!(second.count, 2);
        assert_eq!(aggregation.repeat(&other, t0, window), None, "another note");

        aggregation.counted(&fingerprint, second.count);
        let third = aggregation.repeat(&fingerprint, t0 + Duration::from_secs(599), window);
        assert_eq!(third.map(|p| p.count), Some(3));

        // A repeat that was not recorded (the patch failed) does not count.
        let again = aggregation.repeat(&fingerprint, t0 + Duration::from_secs(599), window);
        assert_eq!(again.map(|p| p.count), Some(3));

        // The window counts from the first event: once it has passed, a repeat is a new event.
        assert_eq!(aggregation.repeat(&fingerprint, t0 + window, window), None);
        assert!(
            aggregation.published.is_empty(),
            "expired events are forgotten"
        );
    }

    type Seen = Arc<Mutex<Vec<(Method, String, serde_json::Value)>>>;

    /// A client whose apiserver records each request and answers it: a create with the event,
    /// a patch with an empty event, or with 404 while `missing` is set.
    fn fake_client(seen: &Seen, missing: &Arc<Mutex<bool>>) -> Client {
        let seen = Arc::clone(seen);
        let missing = Arc::clone(missing);
        let service = tower::service_fn(move |request: Request<Body>| {
            let seen = Arc::clone(&seen);
            let missing = *missing.lock().expect("lock");
            async move {
                let (parts, body) = request.into_parts();
                let bytes = body.collect_bytes().await?;
                let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
                let path = parts.uri.path().to_owned();
                let patch = parts.method == Method::PATCH;
                seen.lock().expect("lock").push((parts.method, path, json));
                let (status, answer) = if patch && missing {
                    let status = serde_json::json!({
                        "kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "NotFound", "message": "gone", "code": 404
                    });
                    (StatusCode::NOT_FOUND, serde_json::to_vec(&status)?)
                } else if patch {
                    (StatusCode::OK, serde_json::to_vec(&Event::default())?)
                } else {
                    (StatusCode::CREATED, bytes.to_vec())
                };
                let mut response = Response::new(Body::from(answer));
                *response.status_mut() = status;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
            }
        });
        Client::new(service, "default")
    }

    #[tokio::test]
    async fn publish_should_create_then_count_repeats_then_create_again_once_the_event_is_gone() {
        let seen = Seen::default();
        let missing = Arc::new(Mutex::new(false));
        let recorder = Recorder::new(fake_client(&seen, &missing), "settings-controller");
        let cm = config_map();
        let publish = || {
            recorder.publish(
                &cm,
                EventType::Warning,
                "Failed",
                "Reconcile",
                Some("a".into()),
            )
        };
        publish().await.expect("created");
        publish().await.expect("patched");
        publish().await.expect("patched");
        *missing.lock().expect("lock") = true;
        publish().await.expect("created again");
        *missing.lock().expect("lock") = false;
        publish().await.expect("patched");

        let seen = seen.lock().expect("lock").clone();
        let methods: Vec<_> = seen.iter().map(|(m, _, _)| m.as_str()).collect();
        assert_eq!(
            methods,
            ["POST", "PATCH", "PATCH", "PATCH", "POST", "PATCH"]
        );
        let first = seen[0].2["metadata"]["name"].as_str().expect("name");
        assert_eq!(seen[0].1, "/apis/events.k8s.io/v1/namespaces/shop/events");
        assert_eq!(
            seen[1].1,
            format!("/apis/events.k8s.io/v1/namespaces/shop/events/{first}")
        );
        assert_eq!(seen[1].2["series"]["count"], 2);
        assert_eq!(seen[2].2["series"]["count"], 3);
        assert_eq!(seen[3].2["series"]["count"], 4);
        let second = seen[4].2["metadata"]["name"].as_str().expect("name");
        assert_ne!(first, second, "a new event after the old one expired");
        assert!(seen[4].2.get("series").is_none());
        assert_eq!(
            seen[5].1,
            format!("/apis/events.k8s.io/v1/namespaces/shop/events/{second}")
        );
        assert_eq!(seen[5].2["series"]["count"], 2);
    }
}
