//! Watchers: event handlers run through the concurrent dispatcher (app-sdk's `ResourceWatcher`
//! under its `InformerController`).
//!
//! Where a [`Reconciler`](crate::controller::Reconciler) is level-triggered (it gets the latest
//! object of a key, however many events led to it), a [`Watcher`] is told about every event:
//! [`Watcher::add`], [`Watcher::update`] with the old and the new object, [`Watcher::delete`],
//! [`Watcher::sync`] on a resync. A [`WatcherController`] hands the events of its informer to a
//! [`Dispatcher`] with `workers` workers: events of one object always go to the same worker, in
//! order; events of different objects run in parallel. A failed (or panicking, or timed-out)
//! handler is retried through the controller's [`RetryProcessor`] under its [`RetryPolicy`], and a
//! newer event of the same object drops pending retries per the [`DequeuePolicy`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use kubeforge::k8s_openapi::api::core::v1::ConfigMap;
//! use kubeforge::prelude::*;
//! use kubeforge::watcher::{WatchContext, Watcher, WatcherController};
//!
//! struct Audit;
//!
//! impl Watcher<ConfigMap> for Audit {
//!     type Error = kube::Error;
//!     async fn add(&self, cm: Arc<ConfigMap>, _: &WatchContext) -> Result<(), kube::Error> {
//!         println!("added {}", cm.name_any());
//!         Ok(())
//!     }
//! }
//!
//! # async fn doc(manager: Manager, client: Client) -> Result<(), Box<dyn std::error::Error>> {
//! let audit = WatcherController::new("audit", manager.wiring(), Api::<ConfigMap>::all(client))
//!     .workers(16);
//! manager.add_watcher(audit, Audit).run().await?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube::{Api, Client, Resource};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::BoxError;
use crate::IntoApis;
use crate::cache::Cache;
use crate::controller::finalizer::{Finalized, Stage};
use crate::controller::{ControllerError, ControllerMetrics, Kind, ReconcileResult, Wiring};
use crate::dispatch::{Dispatcher, EventHandler};
use crate::informer::{Event, Informer, InformerConfig};
use crate::queue::NoMetrics;
use crate::retry::{DequeueAll, DequeuePolicy, RetryPolicy, RetryProcessor, RetryProcessorConfig};
use crate::runner::{self, Lifecycle};

/// Handlers of the events of kind `K`; every one but [`Watcher::add`] does nothing by default.
pub trait Watcher<K>: Send + Sync + 'static {
    /// The handlers' error: any [`ReconcileError`](crate::ReconcileError) — a type
    /// implementing [`std::error::Error`], `anyhow::Error` or [`BoxError`].
    type Error: crate::ReconcileError;

    /// An object appeared (also every object of the initial list).
    fn add(
        &self,
        obj: Arc<K>,
        ctx: &WatchContext,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// An object changed from `old` to `new`.
    fn update(
        &self,
        old: Arc<K>,
        new: Arc<K>,
        ctx: &WatchContext,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = (old, new, ctx);
        async { Ok(()) }
    }

    /// An object was deleted (its last known state).
    fn delete(
        &self,
        obj: Arc<K>,
        ctx: &WatchContext,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = (obj, ctx);
        async { Ok(()) }
    }

    /// The resync period elapsed: a cached object, unchanged.
    fn sync(
        &self,
        obj: Arc<K>,
        ctx: &WatchContext,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = (obj, ctx);
        async { Ok(()) }
    }
}

/// A watcher declared with `#[kubeforge::controller(for = Kind, watcher, ...)]`: the handlers
/// (this type's [`Watcher`] impl) and their wiring. Add it with
/// [`Manager::watcher`](crate::manager::Manager::watcher).
pub trait WatcherSpec: Watcher<Self::Kind> + Sized {
    /// The watched kind (`for = ...`).
    type Kind: Kind;
    /// The watcher's name (metrics label, logs); defaults to the lowercased kind.
    const NAME: &'static str;
    /// The watcher wired to `wiring` (its cache, client, namespace and informer options).
    fn watcher(wiring: &Wiring) -> WatcherController<Self::Kind>;
    /// The RBAC rules the watcher needs.
    fn rbac() -> crate::rbac::Rules;
}

/// What a handler gets besides the object: the wiring's client (fenced under leader election),
/// the cache and the controller's name.
#[derive(Clone, Debug)]
pub struct WatchContext {
    wiring: Arc<Wiring>,
    controller: Arc<str>,
}

impl WatchContext {
    /// The client (see [`Wiring::client`]).
    pub fn client(&self) -> Client {
        self.wiring.client()
    }

    /// The shared cache.
    pub fn cache(&self) -> &Cache {
        self.wiring.cache()
    }

    /// The controller's name.
    pub fn controller_name(&self) -> &str {
        &self.controller
    }
}

/// A watcher of kind `K`: its informer, dispatcher and retries; build it, then
/// [`WatcherController::run`] it (or add it to a manager with
/// [`Manager::add_watcher`](crate::manager::Manager::add_watcher)).
pub struct WatcherController<K: Resource> {
    name: Arc<str>,
    wiring: Wiring,
    /// Subscribed to when the watcher runs (not before: a watcher waiting to lead would hold
    /// events nobody reads).
    /// One informer per namespace watched (one for all namespaces).
    informers: Vec<Arc<crate::informer::Informer<K>>>,
    workers: usize,
    buffer: usize,
    event_timeout: Option<Duration>,
    sync_timeout: Option<Duration>,
    retry: Arc<dyn RetryPolicy>,
    dequeue: Arc<dyn DequeuePolicy>,
    metrics: Arc<dyn ControllerMetrics>,
    /// The opinionated mode's finalizer.
    finalizer: Option<Arc<str>>,
    /// Where `run` is (see [`WatcherController::lifecycle`]).
    lifecycle: Lifecycle,
}

impl<K: Kind> WatcherController<K> {
    /// A watcher named `name` of the objects of `api` (or of one `Api` per namespace of a set,
    /// see [`Namespaces::apis`](crate::Namespaces::apis)), with the wiring's informer defaults.
    pub fn new(name: impl Into<String>, wiring: &Wiring, api: impl IntoApis<K>) -> Self {
        Self::with_informer(name, wiring, api, wiring.informer_defaults.clone())
    }

    /// Like [`WatcherController::new`], with these informer options (selectors, resync, ...).
    pub fn with_informer(
        name: impl Into<String>,
        wiring: &Wiring,
        api: impl IntoApis<K>,
        config: InformerConfig,
    ) -> Self {
        let informers = api
            .into_apis()
            .into_vec()
            .into_iter()
            .map(|api| wiring.cache().informer(api, config.clone()))
            .collect();
        Self {
            name: name.into().into(),
            wiring: wiring.clone(),
            informers,
            lifecycle: Lifecycle::default(),
            workers: 4,
            buffer: 64,
            event_timeout: None,
            sync_timeout: Some(crate::controller::SYNC_TIMEOUT),
            retry: Arc::new(crate::controller::default_retry()),
            dequeue: Arc::new(DequeueAll),
            metrics: wiring
                .metrics()
                .cloned()
                .unwrap_or_else(|| Arc::new(NoMetrics)),
            finalizer: None,
        }
    }

    /// app-sdk's opinionated watcher: every object gets `finalizer` (a qualified name such as
    /// `example.com/watcher`) before [`Watcher::add`] sees it, so a deletion is always delivered
    /// — also one that happened while the operator was down: [`Watcher::delete`] runs once, then
    /// the finalizer comes off and the object goes. Objects that already carry the finalizer when
    /// the watcher starts existed before: they go to [`Watcher::sync`], not `add`. Updates that
    /// did not change the generation (status, metadata, the finalizer itself) are skipped. Use
    /// it with [`DequeueOnGeneration`](crate::retry::DequeueOnGeneration), so a status update does
    /// not cancel a pending retry.
    #[must_use]
    pub fn opinionated(mut self, finalizer: &str) -> Self {
        self.finalizer = Some(finalizer.into());
        self
    }

    /// Handle events on `workers` workers (at least 1, default 4); events of one object always
    /// go to the same worker, in order.
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Events buffered per worker before the informer waits (default 64).
    #[must_use]
    pub fn buffer(mut self, events: usize) -> Self {
        self.buffer = events.max(1);
        self
    }

    /// Cancel a handler that runs longer than this and retry its event (default: no limit).
    #[must_use]
    pub fn event_timeout(mut self, timeout: Duration) -> Self {
        self.event_timeout = Some(timeout);
        self
    }

    /// How long start-up waits for the informer to sync (default 2 min; `None`: for ever).
    #[must_use]
    pub fn sync_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.sync_timeout = timeout;
        self
    }

    /// How failed events are retried (default: 5 ms doubling to 1000 s, never giving up).
    #[must_use]
    pub fn retry(mut self, policy: impl RetryPolicy) -> Self {
        self.retry = Arc::new(policy);
        self
    }

    /// Which new events of an object drop its pending retries (default: any).
    #[must_use]
    pub fn dequeue(mut self, policy: impl DequeuePolicy) -> Self {
        self.dequeue = Arc::new(policy);
        self
    }

    /// The watcher's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the watcher is in its life; [`Lifecycle::check`] is its readiness check, which
    /// the manager serves as `watcher-<name>`.
    pub fn lifecycle(&self) -> Lifecycle {
        self.lifecycle.clone()
    }

    /// Runs until `shutdown` is cancelled: starts the cache if needed, waits for it to sync,
    /// then dispatches every event (the initial list's as `add`).
    ///
    /// # Errors
    ///
    /// [`ControllerError::CacheSyncTimeout`] when the informer did not sync in time.
    pub async fn run<W: Watcher<K>>(
        self,
        watcher: W,
        shutdown: CancellationToken,
    ) -> Result<(), ControllerError> {
        let retry_metrics = self.metrics.retry_metrics(&self.name);
        let processor = RetryProcessor::with_policy(RetryProcessorConfig::default(), self.retry)
            .dequeue_policy_shared(self.dequeue)
            .metrics(retry_metrics);
        let retries = AbortOnDrop(tokio::spawn(processor.clone().run(shutdown.clone())));
        let (events, _forwarders) = merged(&self.informers, self.buffer);
        let cache = self.wiring.cache().clone();
        cache.start(shutdown.clone());
        let lifecycle = self.lifecycle.clone();
        lifecycle.set(runner::Stage::Starting);
        tokio::select! {
            () = shutdown.cancelled() => {
                lifecycle.set(runner::Stage::Stopped);
                return Ok(());
            }
            synced = crate::controller::synced(&self.name, &cache, self.sync_timeout) => if let Err(error) = synced {
                lifecycle.set(runner::Stage::Failed(error.to_string()));
                return Err(error);
            },
        }
        tracing::info!(watcher = %self.name, workers = self.workers, "cache synced; dispatching events");
        self.metrics
            .max_concurrent_reconciles(&self.name, self.workers);
        let handler = Handler {
            watcher,
            ctx: WatchContext {
                wiring: Arc::new(self.wiring),
                controller: Arc::clone(&self.name),
            },
            timeout: self.event_timeout,
            metrics: self.metrics,
            finalizer: self.finalizer,
            finalized: std::sync::Mutex::default(),
        };
        let dispatch = Dispatcher::new(self.workers, self.buffer)
            .retry(processor)
            .run(events, Arc::new(handler), shutdown.clone());
        lifecycle.set(runner::Stage::Running);
        dispatch.await;
        lifecycle.set(runner::Stage::Stopped);
        drop(retries);
        Ok(())
    }
}

impl<K: Resource> std::fmt::Debug for WatcherController<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatcherController")
            .field("name", &self.name)
            .field("workers", &self.workers)
            .field("event_timeout", &self.event_timeout)
            .finish_non_exhaustive()
    }
}

/// The watcher as the dispatcher's event handler: picks the handler, applies the timeout,
/// catches panics, reports each event as a reconcile to the metrics.
struct Handler<W> {
    watcher: W,
    ctx: WatchContext,
    timeout: Option<Duration>,
    metrics: Arc<dyn ControllerMetrics>,
    /// The opinionated mode's finalizer.
    finalizer: Option<Arc<str>>,
    /// Deletes per UID (opinionated mode), as the controller's finalizer stages them: delivered
    /// once (a late event of the object, such as the watch's DELETED event that still carries
    /// the finalizer, does not deliver it again); after a failed finalizer removal only the
    /// removal is retried.
    finalized: std::sync::Mutex<Finalized>,
}

impl<K: Kind, W: Watcher<K>> EventHandler<K> for Handler<W> {
    async fn handle(&self, event: Event<K>) -> Result<(), BoxError> {
        let started = Instant::now();
        let ctx = &self.ctx;
        let run = async {
            match &self.finalizer {
                None => self.plain(event).await,
                Some(finalizer) => self.opinionated(event, finalizer).await,
            }
        };
        let caught = AssertUnwindSafe(run).catch_unwind();
        self.metrics.active_workers(&ctx.controller, 1);
        let result = match self.timeout {
            Some(limit) => match tokio::time::timeout(limit, caught).await {
                Ok(caught) => flatten(caught),
                Err(_) => Err(BoxError::from(EventTimeout(limit))),
            },
            None => flatten(caught.await),
        };
        self.metrics.active_workers(&ctx.controller, -1);
        let label = match &result {
            Ok(()) => ReconcileResult::Success,
            Err(_) => ReconcileResult::Error,
        };
        self.metrics
            .reconciled(&ctx.controller, label, started.elapsed());
        result
    }
}

impl<W> Handler<W> {
    /// Every event to its handler.
    async fn plain<K: Kind>(&self, event: Event<K>) -> Result<(), BoxError>
    where
        W: Watcher<K>,
    {
        let ctx = &self.ctx;
        let handled = match event {
            Event::Applied { old: None, new } => self.watcher.add(new, ctx).await,
            Event::Applied {
                old: Some(old),
                new,
            } => self.watcher.update(old, new, ctx).await,
            Event::Deleted(obj) => self.watcher.delete(obj, ctx).await,
            Event::Resync(obj) => self.watcher.sync(obj, ctx).await,
        };
        handled.map_err(crate::error::boxed)
    }

    /// The opinionated mode (see [`WatcherController::opinionated`]).
    async fn opinionated<K: Kind>(&self, event: Event<K>, finalizer: &str) -> Result<(), BoxError>
    where
        W: Watcher<K>,
    {
        let ctx = &self.ctx;
        let held = |obj: &K| {
            obj.meta()
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == finalizer)
        };
        let (old, new) = match event {
            Event::Applied { old, new } => (old, new),
            // Gone with the finalizer still on (already delivered, or removed behind our back):
            // delivered once.
            Event::Deleted(obj) if held(&obj) => return self.deleted(obj, finalizer).await,
            // Never held by this watcher: it was never added either.
            Event::Deleted(_) => return Ok(()),
            Event::Resync(obj) if held(&obj) => {
                return self
                    .watcher
                    .sync(obj, ctx)
                    .await
                    .map_err(crate::error::boxed);
            }
            Event::Resync(_) => return Ok(()),
        };
        if new.meta().deletion_timestamp.is_some() {
            return if held(&new) {
                self.deleted(new, finalizer).await
            } else {
                Ok(())
            };
        }
        if !held(&new) {
            let api = self.api_for(new.as_ref());
            let Some(with) = crate::controller::finalizer::add(
                &api,
                &crate::scope::KindType::of(),
                &ctx.wiring,
                new.as_ref(),
                finalizer,
                None,
            )
            .await?
            else {
                return Ok(()); // gone meanwhile
            };
            return self
                .watcher
                .add(with, ctx)
                .await
                .map_err(crate::error::boxed);
        }
        let handled = match old {
            // Carried our finalizer before this run saw it: it existed before.
            None => self.watcher.sync(new, ctx).await,
            Some(old) if !held(&old) => Ok(()), // our own finalizer patch
            Some(old) if old.meta().generation == new.meta().generation => Ok(()),
            Some(old) => self.watcher.update(old, new, ctx).await,
        };
        handled.map_err(crate::error::boxed)
    }

    /// `delete` (once per object UID), then the finalizer comes off; a failure of either is
    /// retried, the removal alone once `delete` succeeded.
    async fn deleted<K: Kind>(&self, obj: Arc<K>, finalizer: &str) -> Result<(), BoxError>
    where
        W: Watcher<K>,
    {
        let uid = obj.meta().uid.clone().unwrap_or_default();
        let stage = self.finalized().stage(&uid);
        if stage == Stage::Released {
            return Ok(());
        }
        if stage == Stage::Pending {
            self.watcher
                .delete(Arc::clone(&obj), &self.ctx)
                .await
                .map_err(crate::error::boxed)?;
            self.finalized().cleaned(&uid);
        }
        let api = self.api_for(obj.as_ref());
        crate::controller::finalizer::remove(
            &api,
            &crate::scope::KindType::of(),
            &self.ctx.wiring,
            obj.as_ref(),
            finalizer,
        )
        .await?;
        self.finalized().released(&uid, std::time::Instant::now());
        Ok(())
    }

    fn finalized(&self) -> std::sync::MutexGuard<'_, Finalized> {
        self.finalized.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn api_for<K: Kind>(&self, obj: &K) -> Api<K> {
        crate::controller::api_for(self.ctx.client(), obj.meta().namespace.as_deref())
    }
}

fn flatten(caught: std::thread::Result<Result<(), BoxError>>) -> Result<(), BoxError> {
    caught.unwrap_or_else(|panic| {
        let message = crate::controller::panic_message(&panic);
        Err(BoxError::from(format!("the handler panicked: {message}")))
    })
}

/// A handler ran past the event timeout (it is retried).
#[derive(Debug, thiserror::Error)]
#[error("the event handler ran longer than {0:?}")]
pub struct EventTimeout(pub Duration);

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What keeps a merged receiver fed: the forwarding tasks (aborted when dropped), and for an
/// empty set of informers the sender, so the receiver waits instead of ending.
type Forwarders<K> = (
    Vec<AbortOnDrop>,
    Option<tokio::sync::mpsc::Sender<Event<K>>>,
);

/// One receiver of the events of every informer in `informers` (of each namespace of a set),
/// and what forwards them. A single informer's own channel is handed out as it is.
fn merged<K: Kind>(
    informers: &[Arc<Informer<K>>],
    buffer: usize,
) -> (tokio::sync::mpsc::Receiver<Event<K>>, Forwarders<K>) {
    if let [one] = informers {
        return (one.subscribe(), (Vec::new(), None));
    }
    let (tx, rx) = tokio::sync::mpsc::channel(buffer.max(1));
    let tasks = informers
        .iter()
        .map(|informer| {
            let mut events = informer.subscribe();
            let tx = tx.clone();
            AbortOnDrop(tokio::spawn(async move {
                while let Some(event) = events.recv().await {
                    if tx.send(event).await.is_err() {
                        return;
                    }
                }
            }))
        })
        .collect();
    (rx, (tasks, informers.is_empty().then_some(tx)))
}
