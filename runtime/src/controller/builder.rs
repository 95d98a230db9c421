//! The controller builder: the primary kind, what it owns and watches, and `run`.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use kube::{Api, Resource};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::ObjectKey;
use crate::cache::ErasedMeta;
use crate::health::Check;
use crate::informer::{Event, Informer, InformerConfig};
use crate::namespaces::IntoApis;
use crate::queue::{WorkQueue, default_rate_limiter};
use crate::runner::{Lifecycle, Stage};
use crate::scope::{AnyKind, KindType, Scoped};

use super::handlers::{
    Origin, OwnEvents, Sink, Source, Subscribe, mapped, owner_keys, source, source_of,
};
use super::predicate::MetadataPredicates;
use super::progress::Progress;
use super::retries::{Retries, RetryConfig};
use super::sources::Mapper;
use super::sources::Weight;
use super::worker::Worker;
use super::{
    ControllerConfig, ControllerMetrics, Kind, Owns, Predicate, Reconciler, Watches, Wiring,
    predicate,
};

/// A controller for kind `K`; build it, then [`Controller::run`] it.
///
/// The builder's vocabulary: each source is a method taking the source's [`Api`] and a value
/// saying how to watch it ([`InformerConfig`] for the primary, [`Owns`], [`Watches`]); options
/// are set by methods named after them ([`Controller::predicate`], [`Controller::config`]).
pub struct Controller<K: Resource> {
    name: Arc<str>,
    wiring: Wiring,
    /// The primary kind's type information (static, or known at run time).
    ty: KindType<K>,
    /// One informer per namespace watched (one for all namespaces).
    primary: Vec<Arc<Informer<K>>>,
    predicates: Vec<Arc<dyn Predicate<K>>>,
    sources: Vec<Source>,
    config: ControllerConfig,
    /// The work queue once `run` has started its workers (see [`Controller::idle`]).
    running: watch::Sender<Option<Running>>,
    /// Where `run` is (see [`Controller::lifecycle`]).
    lifecycle: Lifecycle,
    /// Whether the running workers make progress (see [`Controller::liveness`]).
    progress: Arc<Progress>,
}

/// The work queue and retries of a running controller, for [`Idle`].
type Running = (WorkQueue<ObjectKey>, Arc<Retries>);

/// Tells when a controller has nothing left to do; from [`Controller::idle`].
#[derive(Clone)]
pub struct Idle {
    running: watch::Receiver<Option<Running>>,
}

impl std::fmt::Debug for Idle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idle").finish_non_exhaustive()
    }
}

impl Idle {
    /// Waits until the controller runs (caches synced, workers started), its queue has had
    /// nothing queued, in flight or delayed for `quiet` in a row and no retry is pending — for
    /// tests that must know that every event so far was handled (retries included) before they
    /// check that nothing more happens. A controller that requeues periodically never becomes
    /// idle.
    pub async fn wait(&self, quiet: std::time::Duration) {
        let mut running = self.running.clone();
        let running = match running.wait_for(Option::is_some).await {
            Ok(running) => running.clone(),
            // The controller was dropped without running: nothing will ever happen.
            Err(_) => return,
        };
        let Some((queue, retries)) = running else {
            return;
        };
        loop {
            queue.wait_idle(quiet).await;
            if retries.is_idle() {
                return;
            }
            tokio::time::sleep(quiet).await;
        }
    }
}

impl<K> Controller<K>
where
    K: Kind,
{
    /// A controller named `name` for the objects of `api` (its namespace, or all namespaces;
    /// or one `Api` per namespace of a set, see [`Namespaces::apis`](crate::Namespaces::apis))
    /// matching `config`'s selectors, wired to `wiring` (its cache's shared informers, its
    /// client, gate and metrics).
    pub fn new(
        name: impl Into<String>,
        wiring: &Wiring,
        api: impl IntoApis<K>,
        config: InformerConfig,
    ) -> Self {
        let mut primary = Vec::new();
        for api in api.into_apis().into_vec() {
            let sharded = wiring
                .shard()
                .map(|membership| (Arc::clone(membership), api.clone(), config.clone()));
            let informer = wiring.cache().informer(api, wiring.narrow(config.clone()));
            if let Some((membership, api, config)) = sharded {
                let informer = Arc::clone(&informer);
                membership.register(&api, &config, move || informer.cached());
            }
            primary.push(informer);
        }
        Self::build(name.into(), wiring, KindType::of(), primary)
    }
}

impl Controller<DynamicObject> {
    /// A controller of a kind known only at run time — from discovery or a configuration file
    /// (kube's `Controller::new_with`) — named `name`, for the objects of `api` (or one `Api` per
    /// namespace of a set) matching `config`'s selectors. `ty` says what the kind is
    /// ([`KindType::dynamic`]); its objects are cached in memory.
    ///
    /// A manager that shards cannot split a kind known at run time between its replicas: the
    /// controller then refuses to start, saying so (see [`Cache::problems`]).
    ///
    /// [`Cache::problems`]: crate::cache::Cache::problems
    ///
    /// ```no_run
    /// # fn doc(wiring: &kubeforge::controller::Wiring, client: kubeforge::kube::Client) {
    /// use kubeforge::KindType;
    /// use kubeforge::controller::Controller;
    /// use kubeforge::informer::InformerConfig;
    /// use kubeforge::kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
    /// let gvk = GroupVersionKind::gvk("example.com", "v1", "Gadget");
    /// let resource = ApiResource::from_gvk(&gvk);
    /// let api = Api::<DynamicObject>::all_with(client, &resource);
    /// let ty = KindType::dynamic(resource, true);
    /// let controller = Controller::dynamic("gadgets", wiring, api, ty, InformerConfig::default());
    /// # }
    /// ```
    pub fn dynamic(
        name: impl Into<String>,
        wiring: &Wiring,
        api: impl IntoApis<DynamicObject>,
        ty: KindType<DynamicObject>,
        config: InformerConfig,
    ) -> Self {
        let name: String = name.into();
        if wiring.shard().is_some() {
            wiring.cache().problem(format!(
                "controller {name}: {} is a kind known at run time, which a sharded manager cannot split between its replicas",
                ty.kind()
            ));
        }
        let primary = api
            .into_apis()
            .into_vec()
            .into_iter()
            .map(|api| wiring.cache().dynamic_informer(api, &ty, config.clone()))
            .collect();
        Self::build(name, wiring, ty, primary)
    }
}

impl<K> Controller<K>
where
    K: AnyKind,
{
    /// The controller over `primary`, with the wiring's metrics.
    fn build(
        name: String,
        wiring: &Wiring,
        ty: KindType<K>,
        primary: Vec<Arc<Informer<K>>>,
    ) -> Self {
        let name: Arc<str> = name.into();
        let mut config = ControllerConfig::default();
        if let Some(metrics) = wiring.metrics() {
            config = config.metrics_hooks(Arc::clone(metrics));
        }
        Self {
            name,
            wiring: wiring.clone(),
            ty,
            primary,
            predicates: Vec::new(),
            sources: Vec::new(),
            config,
            running: watch::channel(None).0,
            lifecycle: Lifecycle::default(),
            progress: Arc::default(),
        }
    }

    /// Only reconcile updates of the primary that pass one of the predicates (creations,
    /// deletions and resyncs always pass). Call repeatedly to add several.
    #[must_use]
    pub fn predicate(mut self, predicate: impl Predicate<K>) -> Self {
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

    /// Where the controller is in its life: starting (waiting for its informers), running,
    /// stopped or failed; [`Lifecycle::check`] is its readiness check, which the manager serves
    /// as `controller-<name>`.
    pub fn lifecycle(&self) -> Lifecycle {
        self.lifecycle.clone()
    }

    /// The controller's liveness check (served as `controller-<name>` on `/healthz`): fails
    /// while keys wait, every worker is busy and no reconcile has finished for
    /// [`ControllerConfig::stall_timeout`]; always passes when that is `None`.
    pub fn liveness(&self) -> Check {
        match self.config.stall_timeout {
            Some(stall) => self.progress.check(stall),
            None => crate::health::check(|| async { Ok(()) }),
        }
    }

    /// Tells when the controller has nothing left to do (see [`Idle::wait`]).
    pub fn idle(&self) -> Idle {
        Idle {
            running: self.running.subscribe(),
        }
    }

    /// The primary kind's type information.
    pub fn kind_type(&self) -> &KindType<K> {
        &self.ty
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reports to `metrics` (the manager's) unless the controller was given its own hooks.
    pub(crate) fn default_metrics(mut self, metrics: &Arc<dyn ControllerMetrics>) -> Self {
        if !self.config.metrics_set {
            self.config = self.config.metrics_hooks(Arc::clone(metrics));
        }
        self
    }

    /// Watch objects of kind `C` and reconcile their owner of kind `K` (by default the owner
    /// reference with `controller: true`); `owns` says what the cache keeps of the children
    /// ([`Owns::full`], [`Owns::metadata`], [`Owns::uncached`]) and with which informer options.
    ///
    /// The choice is made at run time, so this compiles all three kinds of informer for `C`;
    /// `#[controller]` calls the form of the weight it was given, which compiles one.
    #[must_use]
    pub fn owns<C>(self, api: impl IntoApis<C>, owns: Owns) -> Self
    where
        C: super::Kind,
    {
        match owns.weight {
            Weight::Full => self.owns_full(api, owns),
            Weight::Metadata => self.owns_metadata(api, owns),
            Weight::Uncached => self.owns_uncached(api, owns),
        }
    }

    /// [`owns`](Self::owns) with [`Owns::full`], whatever the weight of `owns`.
    #[doc(hidden)]
    #[must_use]
    pub fn owns_full<C: super::Kind>(self, api: impl IntoApis<C>, owns: Owns) -> Self {
        self.owned(owns, api, |cache, api, config| {
            let informer = cache.informer(api, config);
            Box::new(move || informer.subscription())
        })
    }

    /// [`owns`](Self::owns) with [`Owns::metadata`], whatever the weight of `owns`.
    #[doc(hidden)]
    #[must_use]
    pub fn owns_metadata<C>(self, api: impl IntoApis<C>, owns: Owns) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
        C::Scope: Scoped,
    {
        self.owned(owns, api, |cache, api, config| {
            let informer = cache.informer(metadata_api(api), config);
            Box::new(move || informer.subscription())
        })
    }

    /// [`owns`](Self::owns) with [`Owns::uncached`], whatever the weight of `owns`.
    #[doc(hidden)]
    #[must_use]
    pub fn owns_uncached<C>(self, api: impl IntoApis<C>, owns: Owns) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
        C::Scope: Scoped,
    {
        // The kind as data from here on: the informer, its store and the mapping of its
        // events are compiled once in kubeforge rather than once per owned kind.
        let apis = api
            .into_apis()
            .into_vec()
            .into_iter()
            .map(|api| {
                let namespace = api.namespace().map(str::to_owned);
                (api.into_client(), namespace)
            })
            .collect();
        self.owns_erased(KindType::<C>::of().erased(), apis, owns)
    }

    /// [`owns_uncached`](Self::owns_uncached) of the kind `ty`, one source per
    /// (client, namespace).
    fn owns_erased(
        mut self,
        ty: KindType<ErasedMeta>,
        apis: Vec<(kube::Client, Option<String>)>,
        owns: Owns,
    ) -> Self {
        let kind = ty.kind().into_owned();
        let config = owns
            .informer
            .unwrap_or_else(|| self.wiring.informer_defaults.clone());
        let predicates: MetadataPredicates = owns.predicates.into();
        for (client, namespace) in apis {
            let informer = self.wiring.cache().erased_skeleton_informer(
                ty.api(client, namespace.as_deref()),
                ty.clone(),
                self.wiring.narrow_owned(config.clone()),
            );
            let events = move || informer.subscription();
            let map = gated(
                Arc::clone(&predicates),
                owner_keys::<K, ErasedMeta>(&self.ty, !owns.any_owner),
            );
            self.sources
                .push(source_of(kind.clone(), events, Origin::Owned, map));
        }
        self
    }

    /// Adds the sources of an owned kind `C`, one per `Api`, whose events (as `T`: the kind, or
    /// its metadata) `subscribe` gets from the cache with the owned kind's informer options.
    fn owned<C, T>(
        mut self,
        owns: Owns,
        apis: impl IntoApis<C>,
        informer: impl Fn(&crate::cache::Cache, Api<C>, InformerConfig) -> Subscribe<T>,
    ) -> Self
    where
        T: Resource + Send + Sync + 'static,
        T::DynamicType: Default,
    {
        let config = owns
            .informer
            .unwrap_or_else(|| self.wiring.informer_defaults.clone());
        let predicates: MetadataPredicates = owns.predicates.into();
        for api in apis.into_apis().into_vec() {
            let events = informer(
                self.wiring.cache(),
                api,
                self.wiring.narrow_owned(config.clone()),
            );
            let map = gated(
                Arc::clone(&predicates),
                owner_keys::<K, T>(&self.ty, !owns.any_owner),
            );
            self.sources.push(source(events, Origin::Owned, map));
        }
        self
    }

    /// Watch objects of kind `W` and reconcile the keys `watches` maps them to (for an update,
    /// the keys of the old and the new version).
    #[must_use]
    pub fn watches<W>(mut self, api: impl IntoApis<W>, watches: Watches<W>) -> Self
    where
        W: Kind,
    {
        let config = watches
            .informer
            .unwrap_or_else(|| self.wiring.informer_defaults.clone());
        let predicates: MetadataPredicates = watches.predicates.into();
        let kind = W::kind(&()).into_owned();
        for api in api.into_apis().into_vec() {
            let informer = self.wiring.cache().informer(api, config.clone());
            let events = move || informer.subscription();
            let source = watched(&kind, events, Arc::clone(&predicates), &watches.mapper);
            self.sources.push(source);
        }
        self
    }

    /// [`watches`](Self::watches) of a kind known only at run time (`ty`:
    /// [`KindType::dynamic`]), cached in memory.
    #[must_use]
    pub fn watches_dynamic(
        mut self,
        api: impl IntoApis<DynamicObject>,
        ty: &KindType<DynamicObject>,
        watches: Watches<DynamicObject>,
    ) -> Self {
        let config = watches
            .informer
            .unwrap_or_else(|| self.wiring.informer_defaults.clone());
        let predicates: MetadataPredicates = watches.predicates.into();
        let kind = ty.kind().into_owned();
        for api in api.into_apis().into_vec() {
            let informer = self
                .wiring
                .cache()
                .dynamic_informer(api, ty, config.clone());
            let events = move || informer.subscription();
            let source = watched(&kind, events, Arc::clone(&predicates), &watches.mapper);
            self.sources.push(source);
        }
        self
    }

    /// [`owns`](Self::owns) of a kind known only at run time (`ty`: [`KindType::dynamic`]),
    /// cached in full, in memory: its objects whose owner reference names the primary
    /// reconcile it.
    #[must_use]
    pub fn owns_dynamic(
        mut self,
        api: impl IntoApis<DynamicObject>,
        ty: &KindType<DynamicObject>,
        owns: Owns,
    ) -> Self {
        let config = owns
            .informer
            .unwrap_or_else(|| self.wiring.informer_defaults.clone());
        let predicates: MetadataPredicates = owns.predicates.into();
        for api in api.into_apis().into_vec() {
            let informer = self.wiring.cache().dynamic_informer(
                api,
                ty,
                self.wiring.narrow_owned(config.clone()),
            );
            let events = move || informer.subscription();
            let map = gated(
                Arc::clone(&predicates),
                owner_keys::<K, DynamicObject>(&self.ty, !owns.any_owner),
            );
            let kind = ty.kind().into_owned();
            self.sources
                .push(source_of(kind, events, Origin::Owned, map));
        }
        self
    }

    /// Reconciles the keys `keys` yields, besides those of the watch events: changes an
    /// external system announces (a message queue, another service's webhook, a poll). Each key
    /// is queued at high priority, deduplicated with the others, and its reconcile sees
    /// [`Trigger::External`](super::Trigger::External). The stream is polled once the
    /// controller runs (after its caches synced, and only while it leads); a key of an object
    /// that does not exist reconciles nothing.
    ///
    /// ```no_run
    /// # use kubeforge::controller::Controller;
    /// # use kubeforge::ObjectKey;
    /// # fn add(controller: Controller<kubeforge::k8s_openapi::api::core::v1::ConfigMap>) {
    /// let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<ObjectKey>();
    /// let controller = controller.reconcile_on(tokio_stream_from(rx));
    /// // Elsewhere, when the outside world changed: tx.send(ObjectKey::namespaced("ns", "name"))
    /// # let _ = (controller, tx);
    /// # }
    /// # fn tokio_stream_from(mut rx: tokio::sync::mpsc::UnboundedReceiver<ObjectKey>)
    /// #     -> impl futures::Stream<Item = ObjectKey> + Send + 'static {
    /// #     futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    /// # }
    /// ```
    #[must_use]
    pub fn reconcile_on(
        mut self,
        keys: impl futures::Stream<Item = ObjectKey> + Send + 'static,
    ) -> Self {
        self.sources.push(super::timers::stream_source(keys));
        self
    }

    /// Reconciles every object of the primary kind once per `period` (kopf's timers), besides
    /// its events, with up to 10 % jitter ([`Controller::every_with_jitter`]). An object's
    /// timer starts when the cache first holds it (the first tick a period later) and stops when
    /// it is deleted; the reconcile sees [`Trigger::Timer`](super::Trigger::Timer), queued at
    /// low priority like a resync.
    #[must_use]
    pub fn every(self, period: Duration) -> Self {
        self.every_with_jitter(period, 0.1)
    }

    /// [`Controller::every`] with each interval `period` plus up to `jitter` × `period`
    /// (0.0 to 1.0), so objects created together do not fire together.
    #[must_use]
    pub fn every_with_jitter(mut self, period: Duration, jitter: f64) -> Self {
        for informer in &self.primary {
            let informer = Arc::clone(informer);
            self.sources.push(super::timers::timer_source(
                move || informer.subscription(),
                period,
                jitter,
            ));
        }
        self
    }

    /// Runs until `shutdown` is cancelled: starts the cache if needed, waits for every informer
    /// to sync, then reconciles with the configured number of workers. On shutdown, running
    /// reconciles get [`ControllerConfig::shutdown_grace`] to finish.
    ///
    /// # Errors
    ///
    /// [`ControllerError::CacheSyncTimeout`] when the informers did not sync within
    /// [`ControllerConfig::sync_timeout`].
    pub async fn run<R: Reconciler<K>>(
        self,
        reconciler: R,
        shutdown: CancellationToken,
    ) -> Result<(), ControllerError> {
        let Controller {
            name,
            wiring,
            ty,
            primary,
            predicates,
            mut sources,
            config,
            running,
            lifecycle,
            progress,
        } = self;
        lifecycle.set(Stage::Starting);
        // Subscribed now, not when the controller was built: a controller that waits to lead
        // (its informers warm) holds no subscription whose events would pile up meanwhile; it
        // gets the cache's state as its start-up state when it starts.
        sources.extend(primary_sources(&primary, &ty, predicates));
        // Dropping `run` (an aborted task, lost leadership) aborts everything it spawned.
        let startup = Arc::default();
        let (queue, retries, _tasks) =
            plumbing(&name, &config, &wiring, sources, &startup, &shutdown);

        let cache = wiring.cache().clone();
        cache.start(shutdown.clone());
        tokio::select! {
            () = shutdown.cancelled() => {
                lifecycle.set(Stage::Stopped);
                return Ok(());
            }
            synced = synced(&name, &cache, config.sync_timeout) => if let Err(error) = synced {
                lifecycle.set(Stage::Failed(error.to_string()));
                return Err(error);
            },
        }
        tracing::info!(controller = %name, workers = config.concurrency, "caches synced; starting workers");
        startup.synced();
        config.metrics.queue_started(&name, &queue);
        config
            .metrics
            .max_concurrent_reconciles(&name, config.concurrency);

        let worker = Arc::new(Worker {
            name: name.clone(),
            wiring: Arc::new(wiring),
            store: primary_store(&primary),
            reconciler,
            queue: queue.clone(),
            retries: Arc::clone(&retries),
            recorder: std::sync::OnceLock::new(),
            config: config.clone(),
            ids: AtomicU64::new(0),
            finalized: std::sync::Mutex::default(),
            conditions: std::sync::OnceLock::new(),
            stalled: super::stalled::Stalled::default(),
            traces: super::trace_link::GenerationTraces::default(),
            ty,
        });
        progress.started(config.concurrency, queue.clone());
        let mut workers = AbortOnDrop(
            (0..config.concurrency)
                .map(|_| {
                    let worker = Arc::clone(&worker);
                    let progress = Arc::clone(&progress);
                    crate::task::spawn(async move {
                        while let Some(key) = worker.queue.get().await {
                            progress.begin();
                            worker.process(&key).await;
                            worker.queue.done(&key);
                            progress.end();
                        }
                    })
                })
                .collect(),
        );
        running.send_replace(Some((queue.clone(), Arc::clone(&retries))));
        lifecycle.set(Stage::Running);

        shutdown.cancelled().await;
        lifecycle.set(Stage::Stopped);
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
        Ok(())
    }
}

/// Appends the keys of `more` that `keys` does not hold yet.
fn add_new(keys: &mut Vec<ObjectKey>, more: Vec<ObjectKey>) {
    for key in more {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
}

/// Waits for `cache` to sync, at most `timeout`; the error names what did not sync.
pub(crate) async fn synced(
    controller: &str,
    cache: &crate::cache::Cache,
    timeout: Option<Duration>,
) -> Result<(), ControllerError> {
    let problems = cache.problems();
    if !problems.is_empty() {
        tracing::error!(%controller, ?problems, "the cache is misconfigured; stopping");
        return Err(ControllerError::Misconfigured {
            controller: controller.to_owned(),
            problems,
        });
    }
    wait_for_sync(cache, timeout).await.map_err(|waited| {
        let pending = unsynced(cache);
        tracing::error!(%controller, ?waited, ?pending, "informers did not sync in time; stopping");
        ControllerError::CacheSyncTimeout {
            controller: controller.to_owned(),
            waited,
            pending,
        }
    })
}

/// Waits for `cache` to sync, at most `timeout`; `Err(timeout)` when it ran out.
async fn wait_for_sync(
    cache: &crate::cache::Cache,
    timeout: Option<Duration>,
) -> Result<(), Duration> {
    match timeout {
        None => {
            cache.wait_for_sync().await;
            Ok(())
        }
        Some(limit) => tokio::time::timeout(limit, cache.wait_for_sync())
            .await
            .map_err(|_| limit),
    }
}

/// The informers of `cache` that have not synced.
fn unsynced(cache: &crate::cache::Cache) -> Vec<String> {
    cache
        .sync_status()
        .into_iter()
        .filter(|s| !s.synced)
        .map(|s| s.name)
        .collect()
}

/// Why [`Controller::run`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The cache cannot serve what the controller asked for (a store backend that is not
    /// configured).
    #[error("controller {controller}: {}", problems.join("; "))]
    Misconfigured {
        /// The controller's name.
        controller: String,
        /// What is wrong.
        problems: Vec<String>,
    },
    /// The informers did not list everything within [`ControllerConfig::sync_timeout`].
    #[error(
        "controller {controller}: informers did not sync within {waited:?} (missing CRD or RBAC?): {}",
        pending.join(", ")
    )]
    CacheSyncTimeout {
        /// The controller's name.
        controller: String,
        /// How long it waited.
        waited: Duration,
        /// The informers that had not synced (resource URL with selectors).
        pending: Vec<String>,
    },
}

/// The work queue, the retries, and the tasks that feed them: the sources and the retry
/// processor (retries go through the processor, not the queue's rate limiter).
fn plumbing(
    name: &Arc<str>,
    config: &ControllerConfig,
    wiring: &Wiring,
    sources: Vec<Source>,
    startup: &Arc<super::startup::StartupOnce>,
    shutdown: &CancellationToken,
) -> (WorkQueue<ObjectKey>, Arc<Retries>, AbortOnDrop) {
    let queue_hooks = config.queue_hooks(name);
    let queue = WorkQueue::with(default_rate_limiter(), Arc::clone(&queue_hooks));
    queue.set_aging(config.aging);
    let retries = Arc::new(Retries::new(
        RetryConfig {
            policy: Arc::clone(&config.retry),
            dequeue: Arc::clone(&config.dequeue),
            bucket: config.retry_rate_limit.clone(),
            metrics: config.metrics.retry_metrics(name),
            queue_metrics: queue_hooks,
        },
        queue.clone(),
    ));
    let own = config.skip_own_writes.then(|| OwnEvents {
        writes: Arc::clone(wiring.writes().own()),
        controller: Arc::clone(name),
        metrics: Arc::clone(&config.metrics),
    });
    let mut tasks = AbortOnDrop(Vec::new());
    let sink = Sink {
        queue: queue.clone(),
        retries: Arc::clone(&retries),
        own,
        startup: Arc::clone(startup),
    };
    for source in sources {
        tasks
            .0
            .push(crate::task::spawn(source(sink.clone(), shutdown.clone())));
    }
    let processor = retries.processor().clone();
    tasks
        .0
        .push(crate::task::spawn(processor.run(shutdown.clone())));
    (queue, retries, tasks)
}

/// The metadata-only [`Api`] over the same namespace as `api`.
fn metadata_api<C>(api: Api<C>) -> Api<PartialObjectMeta<C>>
where
    C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    C::Scope: Scoped,
{
    let namespace = api.namespace().map(str::to_owned);
    <C::Scope as Scoped>::api::<PartialObjectMeta<C>>(api.into_client(), namespace.as_deref())
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

/// `map`, for the updates `predicates` accept only (creations, deletions and resyncs always).
fn gated<T: Resource>(
    predicates: MetadataPredicates,
    map: impl Fn(&Event<T>) -> Vec<ObjectKey> + Send + 'static,
) -> impl Fn(&Event<T>) -> Vec<ObjectKey> + Send + 'static {
    move |event: &Event<T>| {
        if predicate::event_passes(&predicates, event) {
            map(event)
        } else {
            Vec::new()
        }
    }
}

/// The source of one informer of a watched kind `W`: its events mapped to keys by `mapper`.
fn watched<W: AnyKind>(
    kind: &str,
    events: impl FnOnce() -> crate::informer::Subscription<W> + Send + 'static,
    predicates: MetadataPredicates,
    mapper: &Mapper<W>,
) -> Source {
    match mapper {
        Mapper::Sync(mapper) => {
            let mapper = Arc::clone(mapper);
            source_of(
                kind.to_owned(),
                events,
                Origin::Watched,
                gated(predicates, move |event: &Event<W>| {
                    let mut keys = Vec::new();
                    for obj in event.versions() {
                        add_new(&mut keys, mapper(obj));
                    }
                    keys
                }),
            )
        }
        Mapper::Async(mapper) => {
            let mapper = Arc::clone(mapper);
            mapped(
                kind.to_owned(),
                events,
                Origin::Watched,
                move |event: Event<W>| {
                    let mapper = Arc::clone(&mapper);
                    let passes = predicate::event_passes(&predicates, &event);
                    async move {
                        let mut keys = Vec::new();
                        if passes {
                            for obj in event.versions() {
                                add_new(&mut keys, mapper(Arc::clone(obj)).await);
                            }
                        }
                        keys
                    }
                },
            )
        }
    }
}

/// One reader over the primary informers: the one, or those of each namespace of a set merged.
fn primary_store<K: AnyKind>(primary: &[Arc<Informer<K>>]) -> crate::store::Reader<K> {
    let parts = primary
        .iter()
        .map(|informer| {
            let namespace = informer.namespace().unwrap_or_default().to_owned();
            (namespace, informer.store())
        })
        .collect::<Vec<_>>();
    match parts.as_slice() {
        [(_, one)] => one.clone(),
        _ => crate::store::Reader::merged(parts).unwrap_or_else(|| {
            crate::store::Reader::new(Arc::new(crate::store::MemoryStore::<K>::new()))
        }),
    }
}

/// The sources of the primary informers: each event's own key, for the updates `predicates`
/// accept (creations, deletions and resyncs always).
fn primary_sources<K: AnyKind>(
    primary: &[Arc<Informer<K>>],
    ty: &KindType<K>,
    predicates: Vec<Arc<dyn Predicate<K>>>,
) -> Vec<Source> {
    let predicates: Arc<[Arc<dyn Predicate<K>>]> = predicates.into();
    primary
        .iter()
        .map(|informer| {
            let informer = Arc::clone(informer);
            let predicates = Arc::clone(&predicates);
            let events = move || informer.subscription();
            let map = move |event: &Event<K>| {
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
            };
            source_of(ty.kind().into_owned(), events, Origin::Primary, map)
        })
        .collect()
}
