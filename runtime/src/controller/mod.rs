//! Controllers: turn watch events into keys, and keys into reconciles.
//!
//! A [`Controller`] watches a primary kind (`for`), optionally kinds it owns (`owns`: an owned
//! object's controller owner reference leads back to the primary) and any other kind
//! (`watches`, with a mapper from the watched object to primary keys). Every event becomes an
//! [`ObjectKey`] in a [`WorkQueue`]; workers take keys and call the [`Reconciler`] with the
//! *latest cached* primary object — level-triggered: the reconciler is not told what changed.
//!
//! # Retry semantics
//!
//! | outcome | what happens |
//! |---|---|
//! | `Ok(Action::Done)` | the key's backoff is reset |
//! | `Ok(Action::Requeue)` | backoff reset; the key runs again right after this run |
//! | `Ok(Action::RequeueAfter(d))` | backoff reset; the key runs again after `d` |
//! | `Err(e)` | [`Reconciler::error_policy`] decides: exponential backoff (default), a fixed delay, or terminal (logged, not retried) |
//! | panic | caught, logged with the key, counted, retried with backoff |
//! | timeout ([`ControllerConfig::reconcile_timeout`]) | the reconcile future is dropped; retried with backoff |
//!
//! One key is never reconciled twice at the same time. A key whose object is no longer cached
//! (deleted) is not reconciled; an object being deleted is reconciled only through the
//! finalizer's cleanup when [`ControllerConfig::finalizer`] is set.
//!
//! # Examples
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use kube::{Api, Client};
//! use kubeforge::cache::Cache;
//! use kubeforge::controller::{Action, Context, Controller, ControllerConfig, Reconciler};
//! use kubeforge::informer::InformerConfig;
//!
//! struct Copier;
//!
//! impl Reconciler<ConfigMap> for Copier {
//!     type Error = kube::Error;
//!     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &Context<ConfigMap>) -> Result<Action, kube::Error> {
//!         // ... make the world match `cm` ...
//!         Ok(Action::Done)
//!     }
//! }
//!
//! # async fn doc(client: Client) {
//! let cache = Cache::new(client.clone());
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! Controller::new("copier", &cache, Api::<ConfigMap>::all(client.clone()), InformerConfig::default())
//!     .owns(Api::<Secret>::all(client), InformerConfig::default())
//!     .config(ControllerConfig::default().concurrency(4))
//!     .run(Copier, shutdown)
//!     .await;
//! # }
//! ```

mod action;
mod finalizer;
mod precondition;
mod predicate;

use std::fmt::Debug;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::api::{Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cache::Cache;
use crate::informer::{Event, Informer, InformerConfig};
use crate::queue::{NoMetrics, QueueMetrics, RateLimiter, WorkQueue, default_rate_limiter};
use crate::scope::Scoped;
use crate::{ObjectKey, store::Store};

pub use action::{Action, ErrorPolicy};
pub use predicate::{
    AnnotationsChanged, GenerationChanged, LabelsChanged, Predicate, ResourceVersionChanged,
};

/// Everything the runtime needs of a kind it watches: a static Kubernetes resource with serde.
/// Implemented for every such type (k8s-openapi kinds, `#[custom_resource]` kinds,
/// `PartialObjectMeta<K>`).
pub trait Kind:
    Resource<DynamicType = (), Scope: Scoped>
    + Clone
    + DeserializeOwned
    + serde::Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Kind for K where
    K: Resource<DynamicType = (), Scope: Scoped>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// Maps an event of a child kind `C` to the keys of its owners of kind `K` (only the owner
/// reference marked `controller: true` if `controller_only`).
fn owner_keys<K, C>(controller_only: bool) -> impl Fn(&Event<C>) -> Vec<ObjectKey> + Send + 'static
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

/// An [`Api`] for `K` in `namespace` (all namespaces when `None`; ignored for cluster-scoped kinds).
pub fn api_for<K: Kind>(client: Client, namespace: Option<&str>) -> Api<K> {
    <K::Scope as Scoped>::api::<K>(client, namespace)
}

/// A controller declared with `#[kubeforge::controller(...)]`: how to build its [`Controller`]
/// and which RBAC rules its wiring needs. Add it to a manager with
/// [`Manager::controller`](crate::manager::Manager::controller).
pub trait ControllerSpec: Reconciler<Self::Kind> + Sized {
    /// The primary kind (`for = ...`).
    type Kind: Kind;
    /// The controller's name (metrics label, logs); defaults to the lowercased kind.
    const NAME: &'static str;
    /// The finalizer the controller holds deleted objects with, if any.
    const FINALIZER: Option<&'static str>;
    /// The wired controller over `cache`, watching `namespace` (or all namespaces).
    fn controller(cache: &Cache, namespace: Option<&str>) -> Controller<Self::Kind>;
    /// The RBAC rules the wiring needs.
    fn rbac() -> crate::rbac::Rules;
}

/// The user's reconcile logic for kind `K`.
pub trait Reconciler<K>: Send + Sync + 'static {
    /// The reconcile error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Makes the world match `obj` (the latest cached version). Must be idempotent.
    fn reconcile(
        &self,
        obj: Arc<K>,
        ctx: &Context<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// Cleans up what `obj` created outside Kubernetes before it is deleted. Called only when
    /// the controller has a [`ControllerConfig::finalizer`]; the finalizer is removed once this
    /// returns `Ok`. The default does nothing.
    fn cleanup(
        &self,
        obj: Arc<K>,
        ctx: &Context<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        let _ = (obj, ctx);
        async { Ok(Action::Done) }
    }

    /// How to retry after `error`. The default retries with exponential backoff.
    fn error_policy(&self, obj: &K, error: &Self::Error, ctx: &Context<K>) -> ErrorPolicy {
        let _ = (obj, error, ctx);
        ErrorPolicy::Backoff
    }
}

/// What a reconcile gets besides the object: a client, the shared cache, and facts about the run.
pub struct Context<K> {
    client: Client,
    cache: Cache,
    key: ObjectKey,
    retries: u32,
    controller: Arc<str>,
    /// The object being reconciled: its UID guards status writes.
    object: Arc<K>,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Debug for Context<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("controller", &self.controller)
            .field("key", &self.key)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

impl<K> Context<K> {
    /// The API client. Under leader election its writes are fenced: once this replica's lease
    /// is no longer valid, anything but a read fails with
    /// [`NotLeader`](crate::leader::NotLeader) instead of reaching the apiserver.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The manager's shared cache (stores of every watched kind).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The key being reconciled.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// How many times this key has failed in a row (0 on a first attempt or after a success).
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// The controller's name.
    pub fn controller_name(&self) -> &str {
        &self.controller
    }

    /// Patches the status of the object being reconciled and records the write for
    /// read-your-writes (see [`ControllerConfig::read_your_writes`]).
    ///
    /// The patch can only land on the object being reconciled, never on another object created
    /// under the same name since: it carries the object's UID as a precondition. A JSON merge
    /// patch is sent as the equivalent JSON patch led by a `test` of the UID (the status
    /// subresource of a custom resource ignores `metadata` in a merge patch); if the cached
    /// object the reconcile started from is too stale to compute that equivalent safely, the
    /// apiserver answers `422` and the reconcile is retried. A strategic merge patch carries
    /// `metadata.uid`; an apply carries the reconciled object's `resourceVersion` as well (the
    /// status of a custom resource ignores an apply's UID), so it fails with `409` if the object
    /// changed since it was read.
    ///
    /// # Errors
    ///
    /// The apiserver's error: `422 Invalid` (`409 Conflict` for an apply) when the object was
    /// replaced by another of the same name.
    pub async fn patch_status<P: serde::Serialize + Debug>(
        &self,
        patch: &Patch<P>,
    ) -> Result<K, kube::Error>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + serde::Serialize
            + DeserializeOwned
            + Debug
            + 'static,
        K::Scope: Scoped,
    {
        let api = self.api::<K>();
        let params = PatchParams::default();
        let written = match self.object.meta().uid.as_deref() {
            Some(uid) => {
                let base =
                    serde_json::to_value(self.object.as_ref()).map_err(kube::Error::SerdeError)?;
                let guarded =
                    precondition::guard(patch, uid, &base).map_err(kube::Error::SerdeError)?;
                api.patch_status(&self.key.name, &params, &guarded).await?
            }
            None => api.patch_status(&self.key.name, &params, patch).await?,
        };
        self.cache.record_write(&written);
        Ok(written)
    }

    /// Replaces the status of the object being reconciled (optimistic concurrency: `obj` carries
    /// the resourceVersion it was read at) and records the write for read-your-writes. Without
    /// a UID of its own, `obj` gets the reconciled object's, which the apiserver checks.
    ///
    /// # Errors
    ///
    /// The apiserver's error; `409 Conflict` if the object changed since `obj` was read or is
    /// another object of the same name.
    pub async fn replace_status(&self, obj: &K) -> Result<K, kube::Error>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + serde::Serialize
            + DeserializeOwned
            + Debug
            + 'static,
        K::Scope: Scoped,
    {
        let api = self.api::<K>();
        let params = kube::api::PostParams::default();
        let written = match (&obj.meta().uid, &self.object.meta().uid) {
            (None, Some(uid)) => {
                let mut with_uid = obj.clone();
                with_uid.meta_mut().uid = Some(uid.clone());
                api.replace_status(&self.key.name, &params, &with_uid)
                    .await?
            }
            _ => api.replace_status(&self.key.name, &params, obj).await?,
        };
        self.cache.record_write(&written);
        Ok(written)
    }

    /// Server-side-applies `child` with a controller owner reference to `owner` (see
    /// [`apply_owned`](crate::client::apply_owned)) in the namespace of the object being
    /// reconciled, as field manager `manager`, and records the write.
    ///
    /// # Errors
    ///
    /// The apiserver's error, or an owner without a UID.
    pub async fn apply_owned<C>(&self, owner: &K, manager: &str, child: C) -> Result<C, kube::Error>
    where
        K: Resource<DynamicType = ()>,
        C: Resource<DynamicType = ()>
            + Clone
            + serde::Serialize
            + DeserializeOwned
            + Debug
            + 'static,
        C::Scope: Scoped,
    {
        let written = crate::client::apply_owned(&self.api::<C>(), owner, manager, child).await?;
        self.cache.record_write(&written);
        Ok(written)
    }

    /// An [`Api`] for kind `C` in the namespace of the object being reconciled (all namespaces
    /// for a cluster-scoped primary; the namespace is ignored for a cluster-scoped `C`).
    pub fn api<C>(&self) -> Api<C>
    where
        C: Resource<DynamicType = ()>,
        C::Scope: Scoped,
    {
        <C::Scope as Scoped>::api::<C>(self.client.clone(), self.key.namespace.as_deref())
    }
}

/// The outcome label of a reconcile, as controller-runtime's `result` metric label spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileResult {
    /// `Ok(Action::Done)`.
    Success,
    /// `Ok(Action::Requeue)`.
    Requeue,
    /// `Ok(Action::RequeueAfter(_))`.
    RequeueAfter,
    /// An error, a panic or a timeout.
    Error,
}

impl ReconcileResult {
    /// The label value (`success`, `requeue`, `requeue_after`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Requeue => "requeue",
            Self::RequeueAfter => "requeue_after",
            Self::Error => "error",
        }
    }
}

/// Observes a controller's reconciles; every method has a no-op default.
pub trait ControllerMetrics: Send + Sync {
    /// A reconcile finished with `result` after `took`.
    fn reconciled(&self, _controller: &str, _result: ReconcileResult, _took: Duration) {}
    /// A reconcile panicked (also reported as an error result).
    fn panicked(&self, _controller: &str) {}
    /// A reconcile failed with a terminal error (not retried).
    fn terminal_error(&self, _controller: &str) {}
    /// The number of workers currently reconciling changed by `delta`.
    fn active_workers(&self, _controller: &str, _delta: i64) {}
    /// The controller started with this many workers.
    fn max_concurrent_reconciles(&self, _controller: &str, _workers: usize) {}
    /// The controller's work queue was created (metrics read unfinished work from it on demand).
    fn queue_started(&self, _controller: &str, _queue: &WorkQueue<ObjectKey>) {}
}

impl ControllerMetrics for NoMetrics {}

/// Options of a [`Controller`].
#[derive(Clone)]
pub struct ControllerConfig {
    concurrency: usize,
    reconcile_timeout: Option<Duration>,
    shutdown_grace: Duration,
    finalizer: Option<String>,
    read_your_writes: Option<Duration>,
    rate_limiter: Option<Arc<dyn RateLimiter<ObjectKey>>>,
    metrics: Arc<dyn ControllerMetrics>,
    queue_metrics: Arc<dyn QueueMetrics>,
    metrics_set: bool,
}

impl Debug for ControllerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerConfig")
            .field("concurrency", &self.concurrency)
            .field("reconcile_timeout", &self.reconcile_timeout)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("finalizer", &self.finalizer)
            .field("read_your_writes", &self.read_your_writes)
            .finish_non_exhaustive()
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            concurrency: 4,
            reconcile_timeout: None,
            shutdown_grace: Duration::from_secs(30),
            finalizer: None,
            read_your_writes: Some(Duration::from_secs(2)),
            rate_limiter: None,
            metrics: Arc::new(NoMetrics),
            queue_metrics: Arc::new(NoMetrics),
            metrics_set: false,
        }
    }
}

impl ControllerConfig {
    /// Maximum number of concurrent reconciles (of different keys; default 4, at least 1).
    #[must_use]
    pub fn concurrency(mut self, workers: usize) -> Self {
        self.concurrency = workers.max(1);
        self
    }

    /// Cancel a reconcile that runs longer than this (it is retried with backoff). The future is
    /// dropped at its next await point: a reconcile stuck in blocking code is not interrupted.
    #[must_use]
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.reconcile_timeout = Some(timeout);
        self
    }

    /// How long shutdown waits for running reconciles (default 30 s).
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Hold deleted objects with this finalizer until [`Reconciler::cleanup`] succeeds. The
    /// finalizer is added before the first reconcile of each object.
    #[must_use]
    pub fn finalizer(mut self, name: impl Into<String>) -> Self {
        self.finalizer = Some(name.into());
        self
    }

    /// Before reconciling an object this controller (or anything recording through
    /// [`Cache::record_write`]) wrote, wait up to `wait` for the informer to deliver that
    /// version, so the reconcile never sees an older cached copy of its own write (default 2 s;
    /// `None` turns it off).
    #[must_use]
    pub fn read_your_writes(mut self, wait: Option<Duration>) -> Self {
        self.read_your_writes = wait;
        self
    }

    /// Replace the per-key retry rate limiter (default: client-go's, 5 ms .. 1000 s per key
    /// combined with 10 qps / 100 burst overall).
    #[must_use]
    pub fn rate_limiter(mut self, limiter: Arc<dyn RateLimiter<ObjectKey>>) -> Self {
        self.rate_limiter = Some(limiter);
        self
    }

    /// Report reconciles and queue activity to these hooks.
    #[must_use]
    pub fn metrics(
        mut self,
        controller: Arc<dyn ControllerMetrics>,
        queue: Arc<dyn QueueMetrics>,
    ) -> Self {
        self.metrics = controller;
        self.queue_metrics = queue;
        self.metrics_set = true;
        self
    }
}

struct SharedLimiter(Arc<dyn RateLimiter<ObjectKey>>);
impl RateLimiter<ObjectKey> for SharedLimiter {
    fn when(&self, item: &ObjectKey) -> Duration {
        self.0.when(item)
    }
    fn forget(&self, item: &ObjectKey) {
        self.0.forget(item);
    }
    fn retries(&self, item: &ObjectKey) -> u32 {
        self.0.retries(item)
    }
}

/// Feeds keys into the queue until cancelled.
type Source =
    Box<dyn FnOnce(WorkQueue<ObjectKey>, CancellationToken) -> BoxFuture<'static, ()> + Send>;

/// Drains a subscription, mapping each event to keys.
fn source<T: Send + Sync + 'static>(
    mut events: mpsc::Receiver<Event<T>>,
    map: impl Fn(&Event<T>) -> Vec<ObjectKey> + Send + 'static,
) -> Source {
    Box::new(move |queue, shutdown| {
        Box::pin(async move {
            loop {
                let event = tokio::select! {
                    () = shutdown.cancelled() => break,
                    event = events.recv() => event,
                };
                let Some(event) = event else { break };
                for key in map(&event) {
                    queue.add(key);
                }
            }
        })
    })
}

/// A controller for kind `K`; build it, then [`Controller::run`] it.
pub struct Controller<K: Resource> {
    name: Arc<str>,
    cache: Cache,
    primary: Arc<Informer<K>>,
    primary_events: mpsc::Receiver<Event<K>>,
    predicates: Vec<Arc<dyn Predicate<K>>>,
    sources: Vec<Source>,
    config: ControllerConfig,
}

impl<K> Controller<K>
where
    K: Kind,
{
    /// A controller named `name` for the objects of `api` (its namespace, or all namespaces)
    /// matching `config`'s selectors, using the cache's shared informer.
    pub fn new(
        name: impl Into<String>,
        cache: &Cache,
        api: Api<K>,
        config: InformerConfig,
    ) -> Self {
        let primary = cache.informer(api, config);
        let primary_events = primary.subscribe();
        Self {
            name: name.into().into(),
            cache: cache.clone(),
            primary,
            primary_events,
            predicates: Vec::new(),
            sources: Vec::new(),
            config: ControllerConfig::default(),
        }
    }

    /// Only reconcile updates of the primary that pass one of the predicates (creations,
    /// deletions and resyncs always pass). Call repeatedly to add several.
    #[must_use]
    pub fn with_predicate(mut self, predicate: impl Predicate<K>) -> Self {
        self.predicates.push(Arc::new(predicate));
        self
    }

    /// Sets the controller's options.
    #[must_use]
    pub fn config(mut self, config: ControllerConfig) -> Self {
        self.config = config;
        self
    }

    /// Changes the controller's options, keeping those already set (by `#[controller]`, for
    /// example): `.configure(|config| config.concurrency(16))`.
    #[must_use]
    pub fn configure(mut self, change: impl FnOnce(ControllerConfig) -> ControllerConfig) -> Self {
        self.config = change(self.config);
        self
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reports to the manager's metrics unless the controller was given its own hooks.
    pub(crate) fn default_metrics(mut self, metrics: &Arc<crate::metrics::Metrics>) -> Self {
        if !self.config.metrics_set {
            self.config.metrics = Arc::clone(metrics) as Arc<dyn ControllerMetrics>;
            self.config.queue_metrics = metrics.queue(&self.name);
        }
        self
    }

    /// Watch objects of kind `C` and reconcile their controlling owner of kind `K` (the owner
    /// reference with `controller: true`).
    ///
    /// To keep the cache lean, watch the owned kind as metadata only: pass an
    /// `Api<kube::core::PartialObjectMeta<C>>` — owner references are all `owns` needs, and the
    /// cache then holds no `data`, `spec` or `status` of the children.
    #[must_use]
    pub fn owns<C>(self, api: Api<C>, config: InformerConfig) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        C::Scope: Scoped,
    {
        self.owns_with(api, config, true)
    }

    /// Like [`Controller::owns`]; with `controller_only: false` every owner reference to a `K`
    /// counts, not just the controlling one.
    #[must_use]
    pub fn owns_with<C>(
        mut self,
        api: Api<C>,
        config: InformerConfig,
        controller_only: bool,
    ) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        C::Scope: Scoped,
    {
        let informer = self.cache.informer(api, config);
        self.sources.push(source(
            informer.subscribe(),
            owner_keys::<K, C>(controller_only),
        ));
        self
    }

    /// Like [`Controller::owns`], without caching the children: the watch keeps only their keys,
    /// `resourceVersion`s and owner references (a [`SkeletonStore`](crate::store::SkeletonStore),
    /// a few hundred bytes per object) and decodes only their metadata. Enough to reconcile the
    /// owner when a child changes or disappears (also while the watch was down); reads of `C`
    /// from the cache see nothing of these children. The cheapest choice when the reconciler
    /// writes its children (server-side apply) without reading them back from the cache.
    #[must_use]
    pub fn owns_uncached<C>(mut self, api: Api<C>, config: InformerConfig) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        C::Scope: Scoped,
    {
        let namespace = api.namespace().map(str::to_owned);
        let metadata = <C::Scope as Scoped>::api::<PartialObjectMeta<C>>(
            api.into_client(),
            namespace.as_deref(),
        );
        let informer = self.cache.skeleton_informer(metadata, config);
        self.sources.push(source(
            informer.subscribe(),
            owner_keys::<K, PartialObjectMeta<C>>(true),
        ));
        self
    }

    /// Watch objects of kind `W` and reconcile the keys `mapper` returns for them (for an update,
    /// the keys of the old and the new version).
    #[must_use]
    pub fn watches<W, F>(mut self, api: Api<W>, config: InformerConfig, mapper: F) -> Self
    where
        W: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        W::Scope: Scoped,
        F: Fn(&W) -> Vec<ObjectKey> + Send + Sync + 'static,
    {
        let informer = self.cache.informer(api, config);
        let map = move |event: &Event<W>| {
            let mut keys = Vec::new();
            for obj in event.versions() {
                for key in mapper(obj) {
                    if !keys.contains(&key) {
                        keys.push(key);
                    }
                }
            }
            keys
        };
        self.sources.push(source(informer.subscribe(), map));
        self
    }

    /// Runs until `shutdown` is cancelled: starts the cache if needed, waits for every informer
    /// to sync, then reconciles with the configured number of workers. On shutdown, running
    /// reconciles get [`ControllerConfig::shutdown_grace`] to finish.
    pub async fn run<R: Reconciler<K>>(self, reconciler: R, shutdown: CancellationToken) {
        let Controller {
            name,
            cache,
            primary,
            primary_events,
            predicates,
            mut sources,
            config,
        } = self;
        let queue = match &config.rate_limiter {
            Some(limiter) => {
                WorkQueue::with(SharedLimiter(limiter.clone()), config.queue_metrics.clone())
            }
            None => WorkQueue::with(default_rate_limiter(), config.queue_metrics.clone()),
        };
        sources.push(source(primary_events, move |event: &Event<K>| {
            let pass = match event {
                Event::Applied {
                    old: Some(old),
                    new,
                } => predicate::passes(&predicates, old, new),
                _ => true,
            };
            if pass {
                vec![ObjectKey::of(event.object().as_ref())]
            } else {
                Vec::new()
            }
        }));
        // Dropping `run` (an aborted task, lost leadership) aborts everything it spawned.
        let mut tasks = AbortOnDrop(Vec::new());
        for source in sources {
            tasks
                .0
                .push(tokio::spawn(source(queue.clone(), shutdown.clone())));
        }

        cache.start(shutdown.clone());
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = cache.wait_for_sync() => {}
        }
        tracing::info!(controller = %name, workers = config.concurrency, "caches synced; starting workers");
        config.metrics.queue_started(&name, &queue);
        config
            .metrics
            .max_concurrent_reconciles(&name, config.concurrency);

        let worker = Arc::new(Worker {
            name: name.clone(),
            client: cache.writer_client(),
            cache: cache.clone(),
            store: primary.store(),
            reconciler,
            queue: queue.clone(),
            config: config.clone(),
            ids: AtomicU64::new(0),
            finalized: std::sync::Mutex::default(),
        });
        let mut workers = AbortOnDrop(
            (0..config.concurrency)
                .map(|_| {
                    let worker = Arc::clone(&worker);
                    tokio::spawn(async move {
                        while let Some(key) = worker.queue.get().await {
                            worker.process(&key).await;
                            worker.queue.done(&key);
                        }
                    })
                })
                .collect(),
        );

        shutdown.cancelled().await;
        if !queue.shutdown_with_drain(config.shutdown_grace).await {
            tracing::warn!(controller = %name, grace = ?config.shutdown_grace, "reconciles still running after the shutdown grace period; abandoning them");
            for w in &workers.0 {
                w.abort();
            }
        }
        for w in std::mem::take(&mut workers.0) {
            let _ = w.await;
        }
        tracing::info!(controller = %name, "stopped");
    }
}

/// Aborts its tasks when dropped.
struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

struct Worker<K: Resource, R> {
    name: Arc<str>,
    client: Client,
    cache: Cache,
    store: Arc<dyn Store<K>>,
    reconciler: R,
    queue: WorkQueue<ObjectKey>,
    config: ControllerConfig,
    ids: AtomicU64,
    /// Cleanups by object UID: cleanup runs at most once per UID (see `finalizer.rs`).
    finalized: std::sync::Mutex<finalizer::Finalized>,
}

enum Outcome<E> {
    Finished(Result<Action, E>),
    Panicked(String),
    TimedOut,
}

impl<K, R> Worker<K, R>
where
    K: Kind,
    R: Reconciler<K>,
{
    async fn process(&self, key: &ObjectKey) {
        if let Some(wait) = self.config.read_your_writes
            && !self
                .cache
                .writes()
                .caught_up(std::any::TypeId::of::<K>(), key, wait, || {
                    self.store.resource_version(key)
                })
                .await
        {
            tracing::debug!(%key, ?wait, "informer did not deliver our last write in time; reconciling the cached version");
        }
        if !self.cache.may_reconcile() {
            // Leadership is not (or no longer) valid: do nothing, try again later. If it was
            // lost, the manager is about to stop this controller anyway.
            self.queue.add_after(key.clone(), Duration::from_secs(1));
            return;
        }
        let Some(obj) = self.store.get(key) else {
            // Deleted: nothing to reconcile (cleanup, if any, ran while the finalizer held it).
            self.queue.forget(key);
            return;
        };
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let span = tracing::info_span!(
            "reconcile",
            controller = %self.name,
            namespace = key.namespace.as_deref().unwrap_or(""),
            name = %key.name,
            reconcile_id = %format_args!("{id:x}"),
        );
        self.process_object(key, obj).instrument(span).await;
    }

    async fn process_object(&self, key: &ObjectKey, obj: Arc<K>) {
        let deleting = obj.meta().deletion_timestamp.is_some();
        let finalizer = self.config.finalizer.as_deref();
        let has_finalizer = |o: &K, f: &str| o.meta().finalizers.iter().flatten().any(|x| x == f);
        let ctx = Context {
            client: self.client.clone(),
            cache: self.cache.clone(),
            key: key.clone(),
            retries: self.queue.num_requeues(key),
            controller: self.name.clone(),
            object: Arc::clone(&obj),
            _kind: PhantomData,
        };
        let started = Instant::now();
        let uid = obj.meta().uid.clone().unwrap_or_default();
        let (outcome, cleanup) = match finalizer {
            Some(f) if deleting && has_finalizer(&obj, f) => match self.stage(&uid) {
                // The finalizer came off already; the cache still shows the object as it was.
                finalizer::Stage::Released => {
                    tracing::debug!(%uid, "cleanup already done and finalizer removed; waiting for the deletion to reach the cache");
                    self.queue.forget(key);
                    return;
                }
                // Cleanup succeeded before but removing the finalizer failed: only retry that.
                finalizer::Stage::Cleaned => (Outcome::Finished(Ok(Action::Done)), true),
                finalizer::Stage::Pending => (
                    self.guarded(self.reconciler.cleanup(Arc::clone(&obj), &ctx))
                        .await,
                    true,
                ),
            },
            _ if deleting => {
                // Being deleted and not held by our finalizer: nothing left to reconcile.
                self.queue.forget(key);
                return;
            }
            Some(f) if !has_finalizer(&obj, f) => match self.add_finalizer(&obj, f).await {
                Ok(Some(updated)) => (
                    self.guarded(self.reconciler.reconcile(updated, &ctx)).await,
                    false,
                ),
                Ok(None) => {
                    tracing::debug!(
                        "object deleted before its finalizer could be added; nothing to do"
                    );
                    self.queue.forget(key);
                    return;
                }
                Err(error) => {
                    if is_invalid(&error) {
                        // The object changed (finalizers) or was replaced (UID) since it was cached.
                        tracing::debug!(%error, "object changed since it was cached; adding the finalizer again later");
                    } else {
                        tracing::warn!(%error, "adding the finalizer failed; retrying");
                    }
                    self.metric(ReconcileResult::Error, started.elapsed());
                    self.queue.add_rate_limited(key.clone());
                    return;
                }
            },
            _ => (
                self.guarded(self.reconciler.reconcile(Arc::clone(&obj), &ctx))
                    .await,
                false,
            ),
        };
        let took = started.elapsed();
        match outcome {
            Outcome::Finished(Ok(action)) => {
                if cleanup && let Some(f) = finalizer {
                    self.finalized().cleaned(&uid);
                    if let Err(error) = self.remove_finalizer(&obj, f).await {
                        tracing::warn!(%error, "removing the finalizer failed; retrying");
                        self.metric(ReconcileResult::Error, took);
                        self.queue.add_rate_limited(key.clone());
                        return;
                    }
                    self.finalized().released(&uid, std::time::Instant::now());
                    tracing::debug!("cleanup done; finalizer removed");
                }
                self.queue.forget(key);
                match action {
                    Action::Done => self.metric(ReconcileResult::Success, took),
                    Action::Requeue => {
                        self.metric(ReconcileResult::Requeue, took);
                        self.queue.add(key.clone());
                    }
                    Action::RequeueAfter(delay) => {
                        self.metric(ReconcileResult::RequeueAfter, took);
                        self.queue.add_after(key.clone(), delay);
                    }
                }
            }
            Outcome::Finished(Err(error)) => {
                self.metric(ReconcileResult::Error, took);
                match self.reconciler.error_policy(&obj, &error, &ctx) {
                    ErrorPolicy::Backoff => {
                        tracing::warn!(%error, retries = ctx.retries, "reconcile failed; retrying with backoff");
                        self.queue.add_rate_limited(key.clone());
                    }
                    ErrorPolicy::RetryAfter(delay) => {
                        tracing::warn!(%error, ?delay, "reconcile failed; retrying after the requested delay");
                        self.queue.add_after(key.clone(), delay);
                    }
                    ErrorPolicy::Terminal => {
                        tracing::error!(%error, "reconcile failed with a terminal error; not retrying until the object changes");
                        self.config.metrics.terminal_error(&self.name);
                        self.queue.forget(key);
                    }
                }
            }
            Outcome::Panicked(message) => {
                tracing::error!(panic = %message, "reconcile panicked; retrying with backoff");
                self.config.metrics.panicked(&self.name);
                self.metric(ReconcileResult::Error, took);
                self.queue.add_rate_limited(key.clone());
            }
            Outcome::TimedOut => {
                tracing::warn!(timeout = ?self.config.reconcile_timeout, "reconcile timed out; retrying with backoff");
                self.metric(ReconcileResult::Error, took);
                self.queue.add_rate_limited(key.clone());
            }
        }
    }

    fn metric(&self, result: ReconcileResult, took: Duration) {
        self.config.metrics.reconciled(&self.name, result, took);
    }

    /// Runs a reconcile or cleanup future, catching panics and applying the timeout.
    async fn guarded<F>(&self, fut: F) -> Outcome<R::Error>
    where
        F: Future<Output = Result<Action, R::Error>>,
    {
        self.config.metrics.active_workers(&self.name, 1);
        let caught = AssertUnwindSafe(fut).catch_unwind();
        let outcome = match self.config.reconcile_timeout {
            Some(limit) => match tokio::time::timeout(limit, caught).await {
                Ok(result) => {
                    result.map_or_else(|p| Outcome::Panicked(panic_message(&p)), Outcome::Finished)
                }
                Err(_) => Outcome::TimedOut,
            },
            None => caught
                .await
                .map_or_else(|p| Outcome::Panicked(panic_message(&p)), Outcome::Finished),
        };
        self.config.metrics.active_workers(&self.name, -1);
        outcome
    }

    fn api_for(&self, obj: &K) -> Api<K> {
        <K::Scope as Scoped>::api::<K>(self.client.clone(), obj.meta().namespace.as_deref())
    }

    fn finalized(&self) -> std::sync::MutexGuard<'_, finalizer::Finalized> {
        self.finalized.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stage(&self, uid: &str) -> finalizer::Stage {
        self.finalized().stage(uid)
    }

    /// Adds the finalizer with a JSON patch that fails if the object's UID or finalizer list
    /// changed meanwhile; `None` if the object is gone. The patch goes through the metadata API
    /// (its answer is metadata only, so it decodes even if the object no longer fits `K`); the
    /// returned object is `obj` with the new metadata.
    async fn add_finalizer(&self, obj: &K, finalizer: &str) -> Result<Option<Arc<K>>, kube::Error> {
        let meta = obj.meta();
        let name = meta.name.clone().unwrap_or_default();
        let uid = meta.uid.as_deref().unwrap_or_default();
        let patch = finalizer::add_patch(uid, meta.finalizers.as_ref(), finalizer);
        let patch: json_patch::Patch =
            serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
        match self
            .api_for(obj)
            .patch_metadata(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(updated) => {
                let mut with_finalizer = obj.clone();
                *with_finalizer.meta_mut() = updated.metadata;
                self.cache.record_write(&with_finalizer);
                Ok(Some(Arc::new(with_finalizer)))
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Removes the finalizer with a JSON patch guarded by tests of the UID and of the list (from
    /// the metadata alone: it works on an object that no longer decodes as `K`).
    async fn remove_finalizer(&self, obj: &K, finalizer: &str) -> Result<(), kube::Error> {
        let meta = obj.meta();
        let name = meta.name.clone().unwrap_or_default();
        let uid = meta.uid.as_deref().unwrap_or_default();
        let list = meta.finalizers.as_deref().unwrap_or_default();
        let Some(patch) = finalizer::remove_patch(uid, list, finalizer) else {
            return Ok(());
        };
        let patch: json_patch::Patch =
            serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
        let api = self.api_for(obj);
        // Through the metadata API: the answer decodes even when the object does not fit `K`.
        match api
            .patch_metadata(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(updated) => {
                let mut released = obj.clone();
                *released.meta_mut() = updated.metadata;
                self.cache.record_write(&released);
                Ok(())
            }
            // Already gone: the finalizer was the last thing holding it.
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            // A test failed: if the object is gone or another one took its name, this
            // object's finalizer is no longer ours to remove; otherwise retry from the cache.
            Err(error) if is_invalid(&error) => match api.get_metadata_opt(&name).await? {
                Some(live) if live.metadata.uid.as_deref() == Some(uid) => Err(error),
                _ => Ok(()),
            },
            Err(e) => Err(e),
        }
    }
}

/// Whether the apiserver refused a patch as invalid (422: a JSON-patch `test` failed).
fn is_invalid(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 422)
}

fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned())
}
