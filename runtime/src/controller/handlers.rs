//! Event → key: what a watch event of each source puts into the work queue.

use futures::future::BoxFuture;
use kube::Resource;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::ObjectKey;
use crate::informer::Event;
use crate::queue::WorkQueue;
use crate::retry::{NewEvent, ResourceAction};
use crate::scope::Scoped;

use super::retries::Retries;

/// Maps an event of a child kind `C` to the keys of its owners of kind `K` (only the owner
/// reference marked `controller: true` if `controller_only`).
pub(super) fn owner_keys<K, C>(
    controller_only: bool,
) -> impl Fn(&Event<C>) -> Vec<ObjectKey> + Send + 'static
where
    K: Resource<DynamicType = ()>,
    K::Scope: Scoped,
    C: Resource,
{
    let kind = K::kind(&()).into_owned();
    let group = K::group(&()).into_owned();
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
                    let namespace = if <K::Scope as Scoped>::NAMESPACED {
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
}

impl Sink {
    fn add(&self, key: ObjectKey, event: NewEvent) {
        if self.retries.on_event(&key, event) {
            self.queue.add(key);
        }
    }
}

/// Feeds keys into the queue until cancelled.
pub(super) type Source = Box<dyn FnOnce(Sink, CancellationToken) -> BoxFuture<'static, ()> + Send>;

/// Drains a subscription, mapping each event to keys. `primary`: the events are the keys' own
/// (their action and generation change count for the dequeue policy); otherwise an event of
/// another object that concerns the key (an update that did not change its generation).
pub(super) fn source<T: kube::Resource + Send + Sync + 'static>(
    events: mpsc::Receiver<Event<T>>,
    primary: bool,
    map: impl Fn(&Event<T>) -> Vec<ObjectKey> + Send + 'static,
) -> Source {
    source_async(events, primary, move |event: Event<T>| {
        std::future::ready(map(&event))
    })
}

/// Like [`source`], with an asynchronous mapper (a watched kind's mapper that reads the cache);
/// events are mapped one at a time, in order.
pub(super) fn source_async<T, F, Fut>(
    mut events: mpsc::Receiver<Event<T>>,
    primary: bool,
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
    Box::new(move |sink, shutdown| {
        Box::pin(async move {
            loop {
                let event = tokio::select! {
                    () = shutdown.cancelled() => break,
                    event = events.recv() => event,
                };
                let Some(event) = event else { break };
                let new_event = if primary {
                    NewEvent::of(&event)
                } else {
                    related
                };
                let keys = tokio::select! {
                    () = shutdown.cancelled() => break,
                    keys = map(event) => keys,
                };
                for key in keys {
                    sink.add(key, new_event);
                }
            }
        })
    })
}
