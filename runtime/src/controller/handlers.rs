//! Event → key: what a watch event of each source puts into the work queue.

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use kube::Resource;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::ObjectKey;
use crate::informer::{Event, Replayed, Subscription};
use crate::queue::{Priority, WorkQueue};
use crate::retry::{NewEvent, ResourceAction};

use super::ControllerMetrics;
use super::retries::Retries;
use super::startup::StartupOnce;
use super::trigger::Trigger;
use crate::writes::OwnWrites;

/// Maps an event of a child kind `C` to the keys of its owners of kind `K` (only the owner
/// reference marked `controller: true` if `controller_only`).
pub(super) fn owner_keys<K, C>(
    ty: &crate::scope::KindType<K>,
    controller_only: bool,
) -> impl Fn(&Event<C>) -> Vec<ObjectKey> + Send + 'static
where
    K: Resource,
    C: Resource,
{
    let kind = ty.kind().into_owned();
    let group = ty.group().into_owned();
    let namespaced = ty.namespaced();
    move |event: &Event<C>| {
        let mut keys = Vec::new();
        for obj in event.versions() {
            let meta = obj.meta();
            for owner in meta.owner_references.iter().flatten() {
                let owner_group = owner.api_version.rsplit_once('/').map_or("", |(g, _)| g);
                if owner.kind == kind
                    && owner_group == group
                    && (!controller_only || owner.controller == Some(true))
                {
                    let namespace = if namespaced {
                        meta.namespace.clone()
                    } else {
                        None
                    };
                    let key = ObjectKey {
                        namespace,
                        name: owner.name.clone(),
                    };
                    if !keys.contains(&key) {
                        keys.push(key);
                    }
                }
            }
        }
        keys
    }
}

/// Where sources put keys: the retries hear of the event first (with a retry pending, the
/// dequeue policy decides whether the event supersedes it or waits for it), then the key is
/// queued.
#[derive(Clone)]
pub(super) struct Sink {
    pub(super) queue: WorkQueue<ObjectKey>,
    pub(super) retries: Arc<Retries>,
    /// Recognises the events of the controller's own writes (`None`: every event counts).
    pub(super) own: Option<OwnEvents>,
    /// The keys already queued for start-up.
    pub(super) startup: Arc<StartupOnce>,
}

/// What [`ControllerConfig::skip_own_writes`](super::ControllerConfig::skip_own_writes) needs:
/// the record of the process's own writes, and whose they are.
#[derive(Clone)]
pub(super) struct OwnEvents {
    pub(super) writes: Arc<OwnWrites>,
    pub(super) controller: Arc<str>,
    pub(super) metrics: Arc<dyn ControllerMetrics>,
}

/// Whose write an event carries.
enum Whose {
    /// Not a write of this controller's reconciles (or not only one).
    Other,
    /// A write of the reconcile of this key.
    Reconcile(ObjectKey),
    /// Watched while a write to the object was in flight: known once it has landed.
    Landing(BoxFuture<'static, Option<ObjectKey>>),
}

/// How long an event waits for the answer of a write in flight to its object before it is
/// queued as someone else's (the write's request is bounded by the client's timeouts; this only
/// bounds what the event can be held back).
const LANDING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl OwnEvents {
    /// Whose write `event` carries (for the controller's own kind, `primary`: only an update
    /// that kept the generation can be a reconcile's own).
    fn whose<T: Resource>(&self, event: &Event<T>, primary: bool) -> Whose {
        let Event::Applied { old, new } = event else {
            return Whose::Other;
        };
        if primary
            && old
                .as_ref()
                .is_none_or(|old| old.meta().generation != new.meta().generation)
        {
            return Whose::Other;
        }
        let meta = new.meta();
        let (Some(rv), Some(uid)) = (meta.resource_version.as_deref(), meta.uid.as_deref()) else {
            return Whose::Other;
        };
        if let Some(writer) = self.writes.take(rv, uid, &self.controller) {
            return Whose::Reconcile(writer);
        }
        let key = ObjectKey::of(new.as_ref());
        if !self.writes.in_flight(&key) {
            return Whose::Other;
        }
        let (rv, uid) = (rv.to_owned(), uid.to_owned());
        let (writes, controller) = (Arc::clone(&self.writes), Arc::clone(&self.controller));
        Whose::Landing(Box::pin(async move {
            writes
                .take_when_landed(&key, &rv, &uid, &controller, LANDING_WAIT)
                .await
        }))
    }

    fn skipped(&self, key: &ObjectKey) {
        tracing::trace!(controller = %self.controller, %key, "skipping the watch event of this key's own write");
        self.metrics.own_write_skipped(&self.controller);
    }
}

impl Sink {
    pub(super) fn add(&self, key: ObjectKey, event: NewEvent, queued: &Queued) {
        if queued.trigger == Trigger::StartUp && !self.startup.first(&key) {
            return;
        }
        if self.retries.on_event(&key, event) {
            self.retries.triggers().record(&key, queued.trigger.clone());
            self.queue.add_with(key, queued.priority);
        }
    }

    /// Adds `keys` but the one whose reconcile wrote what the event carries.
    fn add_but(
        &self,
        keys: Vec<ObjectKey>,
        writer: Option<&ObjectKey>,
        event: NewEvent,
        queued: &Queued,
    ) {
        for key in keys {
            if writer == Some(&key)
                && let Some(own) = &self.own
            {
                own.skipped(&key);
                continue;
            }
            self.add(key, event, queued);
        }
    }
}

/// Subscribes to a source's informer when the controller starts.
pub(super) type Subscribe<T> = Box<dyn FnOnce() -> Subscription<T> + Send>;

/// Where a source's events come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// The controller's own kind: the events are the keys' own.
    Primary,
    /// A kind it owns.
    Owned,
    /// A kind it watches.
    Watched,
}

/// How an event queues its keys: at which priority, and why.
pub(super) struct Queued {
    priority: Priority,
    trigger: Trigger,
}

impl Queued {
    pub(super) fn new(priority: Priority, trigger: Trigger) -> Self {
        Self { priority, trigger }
    }

    /// For `event` of kind `kind` from `origin`; `replayed`: whether it is part of the state
    /// its informer started from, a change replayed to a late subscriber, or live.
    fn of<T: kube::Resource>(
        origin: Origin,
        kind: &str,
        event: &Event<T>,
        replayed: Replayed,
    ) -> Self {
        let priority = priority(event, replayed);
        let trigger = match (origin, event) {
            _ if replayed == Replayed::Initial => Trigger::StartUp,
            (Origin::Primary, _) if replayed == Replayed::Recent => Trigger::ChangedBeforeStart,
            (_, Event::Resync(_)) => Trigger::Resync,
            (Origin::Primary, Event::Applied { old: None, .. }) => Trigger::Created,
            (
                Origin::Primary,
                Event::Applied {
                    old: Some(old),
                    new,
                },
            ) => Trigger::Changed {
                generation_changed: old.meta().generation != new.meta().generation,
            },
            (Origin::Primary, Event::Deleted(_)) => Trigger::Deleted,
            (Origin::Owned | Origin::Watched, _) => {
                let (kind, name) = (kind.to_owned(), event.object().meta().name.clone());
                let name = name.unwrap_or_default();
                if origin == Origin::Owned {
                    Trigger::Owned { kind, name }
                } else {
                    Trigger::Watched { kind, name }
                }
            }
        };
        Self { priority, trigger }
    }
}

/// The priority of the keys an event puts into the queue: the state an informer started from
/// (its first list, a late subscriber's replay but for its recent changes) and resyncs can
/// wait; changes cannot.
fn priority<T>(event: &Event<T>, replayed: Replayed) -> Priority {
    if replayed == Replayed::Initial || matches!(event, Event::Resync(_)) {
        Priority::Low
    } else {
        Priority::High
    }
}

/// Feeds keys into the queue until cancelled.
pub(super) type Source = Box<dyn FnOnce(Sink, CancellationToken) -> BoxFuture<'static, ()> + Send>;

/// Drains a subscription, mapping each event to keys. From the [`Origin::Primary`], the events
/// are the keys' own (their action and generation change count for the dequeue policy);
/// otherwise an event of another object that concerns the key (an update that did not change
/// its generation).
pub(super) fn source<T>(
    events: impl FnOnce() -> Subscription<T> + Send + 'static,
    origin: Origin,
    map: impl Fn(&Event<T>) -> Vec<ObjectKey> + Send + 'static,
) -> Source
where
    T: kube::Resource + Send + Sync + 'static,
    T::DynamicType: Default,
{
    let kind = T::kind(&T::DynamicType::default()).into_owned();
    source_of(kind, events, origin, map)
}

/// [`source`] of a kind named `kind` (one known at run time).
pub(super) fn source_of<T>(
    kind: String,
    events: impl FnOnce() -> Subscription<T> + Send + 'static,
    origin: Origin,
    map: impl Fn(&Event<T>) -> Vec<ObjectKey> + Send + 'static,
) -> Source
where
    T: kube::Resource + Send + Sync + 'static,
{
    mapped(kind, events, origin, move |event: Event<T>| {
        std::future::ready(map(&event))
    })
}

/// The source of the events of kind `kind` (also one known at run time), mapped by `map`, an
/// asynchronous mapper (a watched kind's mapper that reads the cache); events are mapped one at
/// a time, in order.
pub(super) fn mapped<T, F, Fut>(
    kind: String,
    subscribe: impl FnOnce() -> Subscription<T> + Send + 'static,
    origin: Origin,
    map: F,
) -> Source
where
    T: kube::Resource + Send + Sync + 'static,
    F: Fn(Event<T>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Vec<ObjectKey>> + Send + 'static,
{
    let related = NewEvent {
        action: ResourceAction::Update,
        generation_changed: false,
    };
    let primary = origin == Origin::Primary;
    Box::new(move |sink: Sink, shutdown| {
        // Joined now, before any source runs: the start-up set lives until every replay is over.
        let mut replay = sink.startup.join();
        let mut synced = sink.startup.when_synced();
        Box::pin(async move {
            let Subscription { mut events, mark } = subscribe();
            // Events watched while a write to their object was in flight, until it lands.
            let mut landing = FuturesUnordered::new();
            let mut received = 0_u64;
            loop {
                // Past the replay (its length is known once the list is complete).
                if !replay.is_over() && mark.replayed(received) != Replayed::Initial {
                    replay.over();
                }
                let event = tokio::select! {
                    () = shutdown.cancelled() => break,
                    Some(()) = landing.next(), if !landing.is_empty() => continue,
                    // An empty replay: nothing else would look again.
                    Ok(()) = synced.changed(), if !replay.is_over() => continue,
                    event = events.recv() => event,
                };
                let Some(event) = event else { break };
                let queued = Queued::of(origin, &kind, &event, mark.replayed(received));
                received += 1;
                let new_event = if primary {
                    NewEvent::of(&event)
                } else {
                    related
                };
                let whose = match &sink.own {
                    Some(own) => own.whose(&event, primary),
                    None => Whose::Other,
                };
                let keys = tokio::select! {
                    () = shutdown.cancelled() => break,
                    keys = map(event) => keys,
                };
                match whose {
                    Whose::Other => sink.add_but(keys, None, new_event, &queued),
                    Whose::Reconcile(writer) => {
                        sink.add_but(keys, Some(&writer), new_event, &queued);
                    }
                    Whose::Landing(writer) => {
                        let sink = sink.clone();
                        landing.push(async move {
                            let writer = writer.await;
                            sink.add_but(keys, writer.as_ref(), new_event, &queued);
                        });
                    }
                }
            }
        })
    })
}
