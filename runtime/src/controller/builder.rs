//! The controller builder: the primary kind, what it owns and watches, and `run`.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use kube::core::PartialObjectMeta;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::ObjectKey;
use crate::cache::Cache;
use crate::informer::{Event, Informer, InformerConfig};
use crate::queue::{WorkQueue, default_rate_limiter};
use crate::scope::Scoped;

use super::config::SharedLimiter;
use super::handlers::{Source, owner_keys, source};
use super::worker::Worker;
use super::{ControllerConfig, ControllerMetrics, Kind, Predicate, Reconciler, predicate};

/// A controller for kind `K`; build it, then [`Controller::run`] it.
pub struct Controller<K: Resource> {
    name: Arc<str>,
    cache: Cache,
    primary: Arc<Informer<K>>,
    primary_events: mpsc::Receiver<Event<K>>,
    predicates: Vec<Arc<dyn Predicate<K>>>,
    sources: Vec<Source>,
    config: ControllerConfig,
    /// The work queue once `run` has started its workers (see [`Controller::idle`]).
    running: watch::Sender<Option<WorkQueue<ObjectKey>>>,
}

/// Tells when a controller has nothing left to do; from [`Controller::idle`].
#[derive(Clone, Debug)]
pub struct Idle {
    running: watch::Receiver<Option<WorkQueue<ObjectKey>>>,
}

impl Idle {
    /// Waits until the controller runs (caches synced, workers started) and its queue has had
    /// nothing queued, in flight or delayed for `quiet` in a row — for tests that must know that
    /// every event so far was handled (retries included) before they check that nothing more
    /// happens. A controller that requeues periodically never becomes idle.
    pub async fn wait(&self, quiet: std::time::Duration) {
        let mut running = self.running.clone();
        let queue = match running.wait_for(Option::is_some).await {
            Ok(queue) => queue.clone(),
            // The controller was dropped without running: nothing will ever happen.
            Err(_) => return,
        };
        if let Some(queue) = queue {
            queue.wait_idle(quiet).await;
        }
    }
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
            running: watch::channel(None).0,
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

    /// A handle that tells when the controller has nothing left to do (see [`Idle::wait`]).
    pub fn idle(&self) -> Idle {
        Idle {
            running: self.running.subscribe(),
        }
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
            running,
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
        running.send_replace(Some(queue.clone()));

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
