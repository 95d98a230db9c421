//! Concurrent event dispatch with per-object ordering (app-sdk's `ConcurrentInformer`).
//!
//! A [`Dispatcher`] takes an informer subscription and hands each [`Event`] to an
//! [`EventHandler`] on one of several workers. An object with events in flight is pinned to one
//! worker, so all its events are handled there in the order they happened, while events of
//! different objects are handled in parallel; an object without events in flight goes to the
//! worker with the fewest events in flight (a burst such as an initial list spreads evenly,
//! where a hash of the key would give some workers half again as many as others). Each worker has a bounded buffer;
//! when it is full the dispatcher waits, and so does the informer behind it (backpressure).
//!
//! Failed events can be retried through a [`RetryProcessor`]: the failed event is retried by its
//! policy, and a newer event for the same object drops pending retries per its dequeue policy.
//! Retries run on the processor's workers, so a retry that is already running when a newer event
//! of the same object arrives can overlap with it; handlers that retry must be idempotent.
//!
//! Use a [`Controller`](crate::controller::Controller) for level-triggered reconciles; use a
//! dispatcher when you need every event (auditing, mirroring to another system).
//!
//! # Examples
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubeforge::dispatch::{Dispatcher, EventHandler};
//! use kubeforge::informer::{Event, Informer};
//! use kubeforge::BoxError;
//!
//! struct Audit;
//! impl EventHandler<ConfigMap> for Audit {
//!     async fn handle(&self, event: Event<ConfigMap>) -> Result<(), BoxError> {
//!         println!("{:?}", event.object().metadata.name);
//!         Ok(())
//!     }
//! }
//!
//! # async fn doc(informer: Arc<Informer<ConfigMap>>) {
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! Dispatcher::new(8, 64).run(informer.subscribe(), Arc::new(Audit), shutdown).await;
//! # }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use kube::Resource;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::BoxError;
use crate::ObjectKey;
use crate::informer::Event;
use crate::retry::{NewEvent, RetryProcessor, RetryRequest};

/// Handles informer events; see [`Dispatcher`].
pub trait EventHandler<K>: Send + Sync + 'static {
    /// Handles one event. An error is retried when the dispatcher has a [`RetryProcessor`].
    fn handle(&self, event: Event<K>) -> impl Future<Output = Result<(), BoxError>> + Send;
}

/// Fans events out to workers by object key; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct Dispatcher {
    workers: usize,
    buffer: usize,
    retry: Option<RetryProcessor>,
}

impl Dispatcher {
    /// `workers` parallel workers (at least 1), each buffering up to `buffer` events.
    pub fn new(workers: usize, buffer: usize) -> Self {
        Self {
            workers: workers.max(1),
            buffer: buffer.max(1),
            retry: None,
        }
    }

    /// Retry failed events through `processor` (which must be running).
    #[must_use]
    pub fn retry(mut self, processor: RetryProcessor) -> Self {
        self.retry = Some(processor);
        self
    }

    /// Dispatches `events` to `handler` until the subscription ends or `shutdown` is cancelled;
    /// then lets the workers finish what they have buffered.
    pub async fn run<K, H>(
        self,
        mut events: mpsc::Receiver<Event<K>>,
        handler: Arc<H>,
        shutdown: CancellationToken,
    ) where
        K: Resource + Send + Sync + 'static,
        H: EventHandler<K>,
    {
        let mut senders = Vec::with_capacity(self.workers);
        let mut workers = Vec::with_capacity(self.workers);
        let pins = Arc::new(Mutex::new(Pins::new(self.workers)));
        for _ in 0..self.workers {
            let (tx, mut rx) = mpsc::channel::<Event<K>>(self.buffer);
            senders.push(tx);
            let handler = Arc::clone(&handler);
            let retry = self.retry.clone();
            let pins = Arc::clone(&pins);
            workers.push(tokio::spawn(async move {
                while let Some(event) = rx.recv().await {
                    let object = ObjectKey::of(event.object().as_ref());
                    let key = object.to_string();
                    let new_event = NewEvent::of(&event);
                    let action = new_event.action;
                    if let Some(retry) = &retry {
                        retry.on_event(&key, new_event);
                    }
                    if let Err(error) = handler.handle(event.clone()).await {
                        let error = crate::text::concise(error.as_ref());
                        match &retry {
                            Some(retry) => {
                                tracing::debug!(%key, %error, "event handler failed; scheduling a retry");
                                let (handler, event) = (Arc::clone(&handler), event);
                                let request = RetryRequest::new(key, std::time::Duration::ZERO, move || {
                                    let (handler, event) = (Arc::clone(&handler), event.clone());
                                    async move { handler.handle(event).await.map(|()| None) }
                                });
                                // The first retry is due at once; the policy spaces later ones.
                                retry.enqueue(request.action(action));
                            }
                            None => tracing::warn!(%key, %error, "event handler failed"),
                        }
                    }
                    lock(&pins).handled(&object);
                }
            }));
        }
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => break,
                event = events.recv() => event,
            };
            let Some(event) = event else { break };
            let index = lock(&pins).assign(ObjectKey::of(event.object().as_ref()));
            if senders[index].send(event).await.is_err() {
                break;
            }
        }
        drop(senders);
        for w in workers {
            let _ = w.await;
        }
    }
}

/// Which worker each object is pinned to while it has events in flight. An object without
/// events in flight goes to the worker with the fewest events in flight, so a burst (an initial
/// list) spreads evenly; an object's later events go to its pinned worker, in order. The pin is
/// dropped once the worker has handled every event of the object, so the map holds the objects
/// in flight, not every object seen.
struct Pins {
    pinned: HashMap<ObjectKey, (usize, usize)>,
    in_flight: Vec<usize>,
}

impl Pins {
    fn new(workers: usize) -> Self {
        Self {
            pinned: HashMap::new(),
            in_flight: vec![0; workers],
        }
    }

    /// The worker for the next event of `key`.
    fn assign(&mut self, key: ObjectKey) -> usize {
        let least_busy = self
            .in_flight
            .iter()
            .enumerate()
            .min_by_key(|(_, n)| **n)
            .map_or(0, |(i, _)| i);
        let (worker, events) = self.pinned.entry(key).or_insert((least_busy, 0));
        *events += 1;
        self.in_flight[*worker] += 1;
        *worker
    }

    /// A worker finished an event of `key`.
    fn handled(&mut self, key: &ObjectKey) {
        if let Some((worker, events)) = self.pinned.get_mut(key) {
            *events -= 1;
            self.in_flight[*worker] = self.in_flight[*worker].saturating_sub(1);
            if *events == 0 {
                self.pinned.remove(key);
            }
        }
    }
}

fn lock(pins: &Mutex<Pins>) -> std::sync::MutexGuard<'_, Pins> {
    pins.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;
    use crate::retry::RetryProcessorConfig;

    fn cm(name: &str, seq: usize) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(seq.to_string()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        })
    }

    #[derive(Default)]
    struct Recorder {
        seen: Mutex<HashMap<String, Vec<usize>>>,
        running: AtomicUsize,
        max_running: AtomicUsize,
        fail_first: Mutex<HashMap<String, bool>>,
    }

    impl EventHandler<ConfigMap> for Recorder {
        async fn handle(&self, event: Event<ConfigMap>) -> Result<(), BoxError> {
            let obj = event.object();
            let name = obj.metadata.name.clone().unwrap_or_default();
            let seq: usize = obj
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or("0")
                .parse()?;
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_running.fetch_max(now, Ordering::SeqCst);
            // Objects take different times, so a shared worker would reorder them.
            tokio::time::sleep(Duration::from_millis(1 + (name.len() as u64 * 7) % 5)).await;
            self.running.fetch_sub(1, Ordering::SeqCst);
            let mut fail = self.fail_first.lock().unwrap();
            if fail.remove(&name).unwrap_or(false) {
                return Err(format!("first attempt of {name} fails").into());
            }
            self.seen.lock().unwrap().entry(name).or_default().push(seq);
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn dispatcher_should_keep_per_object_order_while_running_in_parallel() {
        let (tx, rx) = mpsc::channel(4);
        let handler = Arc::new(Recorder::default());
        let done =
            tokio::spawn(Dispatcher::new(4, 2).run(rx, handler.clone(), CancellationToken::new()));
        let names: Vec<String> = (0..12).map(|i| format!("obj-{i}")).collect();
        for seq in 0..20 {
            for name in &names {
                tx.send(Event::Applied {
                    old: None,
                    new: cm(name, seq),
                })
                .await
                .unwrap();
            }
        }
        drop(tx);
        done.await.unwrap();
        let seen = handler.seen.lock().unwrap();
        for name in &names {
            assert_eq!(seen[name], (0..20).collect::<Vec<_>>(), "{name} in order");
        }
        assert!(
            handler.max_running.load(Ordering::SeqCst) > 1,
            "objects ran in parallel"
        );
        assert!(handler.max_running.load(Ordering::SeqCst) <= 4);
    }

    #[tokio::test(start_paused = true)]
    async fn dispatcher_should_retry_failed_events_through_the_processor() {
        let processor = RetryProcessor::new(
            RetryProcessorConfig::default(),
            |_: &crate::retry::RetryError, _| Some(Duration::from_secs(1)),
        );
        let token = CancellationToken::new();
        tokio::spawn(processor.clone().run(token.clone()));
        let handler = Arc::new(Recorder::default());
        handler
            .fail_first
            .lock()
            .unwrap()
            .insert("flaky".into(), true);
        let (tx, rx) = mpsc::channel(4);
        let done = tokio::spawn(Dispatcher::new(2, 2).retry(processor).run(
            rx,
            handler.clone(),
            token.clone(),
        ));
        tx.send(Event::Applied {
            old: None,
            new: cm("flaky", 1),
        })
        .await
        .unwrap();
        tx.send(Event::Applied {
            old: None,
            new: cm("steady", 1),
        })
        .await
        .unwrap();
        drop(tx);
        done.await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let seen = handler.seen.lock().unwrap();
        assert_eq!(seen["flaky"], [1], "handled once the retry succeeded");
        assert_eq!(seen["steady"], [1]);
        token.cancel();
    }

    #[test]
    fn pins_should_spread_new_objects_and_keep_an_object_on_its_worker_while_in_flight() {
        let mut pins = Pins::new(4);
        let key = |i: usize| ObjectKey::namespaced("ns", format!("o{i}"));
        let workers: Vec<usize> = (0..8).map(|i| pins.assign(key(i))).collect();
        assert_eq!(workers, [0, 1, 2, 3, 0, 1, 2, 3], "spread evenly");
        assert_eq!(pins.assign(key(1)), 1, "pinned while in flight");
        pins.handled(&key(1));
        pins.handled(&key(1));
        pins.handled(&key(5));
        assert!(!pins.pinned.contains_key(&key(1)), "unpinned when done");
        assert_eq!(pins.assign(key(1)), 1, "the least busy worker again");
    }
}
