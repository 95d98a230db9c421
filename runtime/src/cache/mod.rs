//! The shared cache: one [`Informer`] per (kind, namespace, selectors) for a whole manager.
//!
//! Controllers ask the [`Cache`] for informers instead of creating their own, so two controllers
//! that both watch Deployments in all namespaces share one watch connection and one copy of
//! every Deployment in memory. The first request for a given key decides the informer's other
//! options (resync period, transform).
//!
//! Informers requested before [`Cache::start`] start with it; informers requested later start
//! at once.
//!
//! # Examples
//!
//! ```no_run
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kube::{Api, Client};
//! use kubeforge::cache::Cache;
//! use kubeforge::informer::InformerConfig;
//!
//! # async fn doc(client: Client) {
//! let cache = Cache::new(client.clone());
//! let a = cache.informer(Api::<Deployment>::all(client.clone()), InformerConfig::default());
//! let b = cache.informer(Api::<Deployment>::all(client), InformerConfig::default());
//! assert!(std::sync::Arc::ptr_eq(&a, &b));
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! cache.start(shutdown.clone());
//! cache.wait_for_sync().await;
//! # }
//! ```

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::ObjectKey;
use crate::informer::{ApplyHook, Informer, InformerConfig};
use crate::scope::{Kind, KindType, Scoped};
use crate::store::{
    MemoryStore, Reader, Refill, RemoteStore, SharedBackend, SkeletonStore, Store, StoreChoice,
};

mod lookup;
pub use lookup::{Lookup, NotCached};

/// The metadata of an object of any kind: what an informer of a kind known as data holds.
pub(crate) type ErasedMeta = PartialObjectMeta<kube::api::DynamicObject>;

/// The selectors of an informer: labels, fields, shard narrowing.
type Selection = (Option<String>, Option<String>, Option<Box<str>>);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct InformerKey {
    kind: TypeId,
    url: String,
    labels: Option<String>,
    fields: Option<String>,
    /// Its shard narrowing ([`InformerConfig::shard`]).
    shard: Option<Box<str>>,
    /// Its store keeps skeletons only ([`SkeletonStore`]).
    skeleton: bool,
}

/// Health of one informer, as reported by [`Cache::sync_status`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InformerStatus {
    /// The informer's resource URL with its selectors (for example `/api/v1/configmaps?labelSelector=app=web`).
    pub name: String,
    /// Whether the first complete list has been applied.
    pub synced: bool,
    /// Whether readiness should ignore this informer's sync state.
    pub ignore_sync_for_health: bool,
    /// Objects cached.
    pub cached: usize,
    /// Complete lists applied so far.
    pub lists: u64,
    /// List/watch errors so far (each followed by a retry).
    pub watch_errors: u64,
    /// Objects skipped because they could not be decoded.
    pub undecodable: u64,
    /// Events that waited in a subscriber's backlog because its channel was full.
    pub late_events: u64,
}

trait ErasedInformer: Send + Sync {
    fn as_any(&self) -> Arc<dyn Any + Send + Sync>;
    fn start(&self, shutdown: CancellationToken);
    fn status(&self, name: &str) -> InformerStatus;
    fn wait_for_sync(&self) -> futures::future::BoxFuture<'static, ()>;
    /// The resourceVersion this informer's store holds for `key`.
    fn cached_version(&self, key: &crate::ObjectKey) -> Option<String>;
}

struct Handle<K: Resource>(Arc<Informer<K>>);

impl<K> ErasedInformer for Handle<K>
where
    K: Resource<DynamicType: Clone + Debug + Send + Sync + 'static>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    fn as_any(&self) -> Arc<dyn Any + Send + Sync> {
        self.0.clone()
    }
    fn start(&self, shutdown: CancellationToken) {
        crate::task::spawn(Arc::clone(&self.0).run(shutdown));
    }
    fn status(&self, name: &str) -> InformerStatus {
        use std::sync::atomic::Ordering::Relaxed;
        let stats = self.0.stats();
        InformerStatus {
            name: name.to_owned(),
            synced: self.0.has_synced(),
            ignore_sync_for_health: self.0.config().ignore_sync_for_health,
            cached: self.0.cached(),
            lists: stats.lists.load(Relaxed),
            watch_errors: stats.watch_errors.load(Relaxed),
            undecodable: stats.undecodable.load(Relaxed),
            late_events: self.0.late_events(),
        }
    }
    fn wait_for_sync(&self) -> futures::future::BoxFuture<'static, ()> {
        let informer = Arc::clone(&self.0);
        Box::pin(async move { informer.wait_for_sync().await })
    }
    fn cached_version(&self, key: &crate::ObjectKey) -> Option<String> {
        self.0.store().resource_version(key)
    }
}

/// The store an informer gets.
enum Chosen<K> {
    Memory,
    Backend(SharedBackend),
    Custom(Arc<dyn Store<K>>),
}

/// Reads one object of `K` from the apiserver, as the informer would cache it (a remote store's
/// refill of an entry its backend lost).
fn refill<K>(client: Client, strip_managed_fields: bool) -> Refill<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::Scope: Scoped,
{
    Arc::new(move |key: ObjectKey| {
        let api = <K::Scope as Scoped>::api::<K>(client.clone(), key.namespace.as_deref());
        Box::pin(async move {
            let mut obj = api.get_opt(&key.name).await?;
            if strip_managed_fields && let Some(obj) = &mut obj {
                obj.meta_mut().managed_fields = None;
            }
            Ok(obj)
        })
    })
}

struct Entry {
    name: String,
    informer: Box<dyn ErasedInformer>,
}

/// The shared informer registry of a manager. Cheap to clone.
#[derive(Clone)]
pub struct Cache {
    client: Client,
    /// The client the informers write their Warning events with (the wiring's writer: fenced
    /// under leader election).
    writer: Client,
    inner: Arc<Mutex<Inner>>,
    /// Told about every change the cache's informers apply.
    hook: Option<Arc<dyn ApplyHook>>,
    /// Whether [`Cache::start`] was called (what [`Cache::wait_for_sync`] waits for first).
    started: Arc<tokio::sync::watch::Sender<bool>>,
}

#[derive(Default)]
struct Inner {
    entries: Vec<(InformerKey, Entry)>,
    index: HashMap<InformerKey, usize>,
    running: Option<CancellationToken>,
    /// Store backends by name, for informers that choose one by name.
    backends: HashMap<String, SharedBackend>,
    /// Informers asked for a backend the cache does not have (see [`Cache::problems`]).
    problems: Vec<String>,
}

impl Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("informers", &self.sync_status())
            .finish_non_exhaustive()
    }
}

impl Cache {
    /// An empty cache whose informers use `client`.
    pub fn new(client: Client) -> Self {
        Self {
            writer: client.clone(),
            client,
            inner: Arc::new(Mutex::new(Inner::default())),
            hook: None,
            started: Arc::new(tokio::sync::watch::channel(false).0),
        }
    }

    /// An empty cache whose informers report every change they apply to `hook`.
    pub(crate) fn with_hook(client: Client, hook: Arc<dyn ApplyHook>) -> Self {
        Self {
            hook: Some(hook),
            ..Self::new(client)
        }
    }

    /// This cache with its informers' Warning events written through `writer`.
    pub(crate) fn with_writer(mut self, writer: Client) -> Self {
        self.writer = writer;
        self
    }

    /// Whether an informer of kind `kind` (found by its `TypeId`) caches `key` at a version
    /// `seen` accepts; `None` if no informer of that kind exists.
    pub(crate) fn caches_version(
        &self,
        kind: TypeId,
        key: &crate::ObjectKey,
        seen: impl Fn(&str) -> bool,
    ) -> Option<bool> {
        let inner = self.lock();
        let mut informers = inner
            .entries
            .iter()
            .filter(|(k, _)| k.kind == kind)
            .peekable();
        informers.peek()?;
        Some(informers.any(|(_, entry)| {
            entry
                .informer
                .cached_version(key)
                .is_some_and(|cached| seen(&cached))
        }))
    }

    /// The client the cache's informers use.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shared informer for `api`'s kind and namespace with `config`'s selectors, created on
    /// first use. If the cache is running, a new informer starts at once.
    ///
    /// Its store is the one `config` chooses ([`InformerConfig::store`]): in memory by default,
    /// or a [`RemoteStore`] in a backend. The first controller to ask for an informer chooses
    /// its store; later ones with the same kind, namespace and selectors share it.
    pub fn informer<K>(&self, api: Api<K>, config: InformerConfig) -> Arc<Informer<K>>
    where
        K: Kind,
    {
        let choice = self.store_for(&api, &config);
        let strip = !config.keep_managed_fields;
        let client = api.clone().into_client();
        let store = move |name: &str| -> Arc<dyn Store<K>> {
            match choice {
                Chosen::Memory => Arc::new(MemoryStore::<K>::new()),
                Chosen::Backend(backend) => {
                    Arc::new(RemoteStore::new(backend, name, refill(client, strip)))
                }
                Chosen::Custom(store) => store,
            }
        };
        self.shared_informer(api, config, store, false, Informer::with_store)
    }

    /// The shared informer of a kind known only at run time (see [`KindType::dynamic`]) for
    /// `api`'s namespace with `config`'s selectors, created on first use, its objects in memory
    /// (a store backend in `config` is a [problem](Cache::problems): it stores static kinds).
    ///
    /// [`KindType::dynamic`]: crate::KindType::dynamic
    pub fn dynamic_informer(
        &self,
        api: Api<DynamicObject>,
        ty: &KindType<DynamicObject>,
        config: InformerConfig,
    ) -> Arc<Informer<DynamicObject>> {
        if config.store.is_some() {
            self.lock().problems.push(format!(
                "{} asks for a store backend: a kind known at run time is cached in memory",
                api.resource_url()
            ));
        }
        let ty = ty.clone();
        self.shared_informer(
            api,
            config,
            |_| Arc::new(MemoryStore::<DynamicObject>::new()),
            false,
            move |api, config, _| Informer::dynamic(api, ty, config),
        )
    }

    /// The store `config` chooses; a backend name the cache does not know, or a custom store
    /// of another kind, is recorded as a problem (the informer then keeps its objects in
    /// memory, and controllers refuse to start).
    fn store_for<K: Resource + 'static>(&self, api: &Api<K>, config: &InformerConfig) -> Chosen<K> {
        let problem = match &config.store {
            None => return Chosen::Memory,
            Some(StoreChoice::Backend(backend)) => return Chosen::Backend(Arc::clone(backend)),
            Some(StoreChoice::Custom(custom)) => match custom.build::<K>() {
                Some(store) => return Chosen::Custom(store),
                None => format!(
                    "{} is given a custom store of {}, not of its kind {}",
                    api.resource_url(),
                    custom.kind(),
                    std::any::type_name::<K>()
                ),
            },
            Some(StoreChoice::Named(name)) => {
                let inner = self.lock();
                if let Some(backend) = inner.backends.get(name) {
                    return Chosen::Backend(Arc::clone(backend));
                }
                let known: Vec<&String> = inner.backends.keys().collect();
                format!(
                    "{} asks for the store backend `{name}`, which is not configured (configured: {known:?}); add it with Manager::store_backend or the operator's command line (--memcached-servers)",
                    api.resource_url()
                )
            }
        };
        self.lock().problems.push(problem);
        Chosen::Memory
    }

    /// Makes `backend` available, under its name, to informers that choose a backend by name
    /// ([`InformerConfig::store_named`], `#[controller(store = memcached)]`). Add backends
    /// before building the controllers that use them.
    pub fn add_backend(&self, backend: SharedBackend) {
        self.lock()
            .backends
            .insert(backend.name().to_owned(), backend);
    }

    /// The backend named `name`, if the cache has one.
    pub fn backend(&self, name: &str) -> Option<SharedBackend> {
        self.lock().backends.get(name).cloned()
    }

    /// Records a misconfiguration that stops controllers at start-up.
    pub(crate) fn problem(&self, problem: String) {
        self.lock().problems.push(problem);
    }

    /// What is wrong with the cache's configuration (an informer asked for a backend the cache
    /// does not have); controllers refuse to start while this is not empty.
    pub fn problems(&self) -> Vec<String> {
        self.lock().problems.clone()
    }

    /// Like [`Cache::informer`], for a metadata watch of `C` that only needs keys,
    /// `resourceVersion`s and owner references (a [`SkeletonStore`]): it reuses a full informer
    /// with the same key if one exists, and is never what [`Cache::store`] returns.
    pub fn skeleton_informer<C>(
        &self,
        api: Api<PartialObjectMeta<C>>,
        config: InformerConfig,
    ) -> Arc<Informer<PartialObjectMeta<C>>>
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
        C::Scope: Scoped,
    {
        self.shared_informer(
            api,
            config,
            |_| Arc::new(SkeletonStore::<C>::new()),
            true,
            Informer::with_store,
        )
    }

    /// [`Cache::skeleton_informer`] of a kind as data (`ty`: [`KindType::dynamic`]): one
    /// instance of the informer's code serves every kind, where the typed one is compiled again
    /// in the operator's crate for each. What `owns` with [`Owns::uncached`] watches with.
    ///
    /// [`Owns::uncached`]: crate::controller::Owns::uncached
    pub(crate) fn erased_skeleton_informer(
        &self,
        api: Api<ErasedMeta>,
        ty: KindType<ErasedMeta>,
        config: InformerConfig,
    ) -> Arc<Informer<ErasedMeta>> {
        self.shared_informer(
            api,
            config,
            |_| Arc::new(SkeletonStore::<kube::api::DynamicObject>::new()),
            true,
            move |api, config, store| Informer::dynamic_metadata(api, ty, config, store),
        )
    }

    fn shared_informer<K>(
        &self,
        api: Api<K>,
        config: InformerConfig,
        store: impl FnOnce(&str) -> Arc<dyn Store<K>>,
        skeleton: bool,
        build: impl FnOnce(Api<K>, InformerConfig, Arc<dyn Store<K>>) -> Informer<K>,
    ) -> Arc<Informer<K>>
    where
        K: Resource<DynamicType: Clone + Debug + Send + Sync + 'static>
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
    {
        let key = InformerKey {
            kind: TypeId::of::<K>(),
            url: api.resource_url().to_owned(),
            labels: config.label_selector.clone(),
            fields: config.field_selector.clone(),
            shard: config.shard.key().map(String::into_boxed_str),
            skeleton,
        };
        let full = InformerKey {
            skeleton: false,
            ..key.clone()
        };
        let mut inner = self.lock();
        // A full informer serves skeleton watchers too (it holds more than they need).
        let existing = inner.index.get(&full).or_else(|| inner.index.get(&key));
        if let Some(&i) = existing
            && let Ok(informer) = inner.entries[i]
                .1
                .informer
                .as_any()
                .downcast::<Informer<K>>()
        {
            // A later source's indexes are added to the shared store.
            let problems = informer.add_options(&config);
            inner.problems.extend(problems);
            return informer;
        }
        let mut name = key.url.clone();
        let shard = key.shard.as_deref().map(str::to_owned);
        for (param, value) in [
            ("labelSelector", &key.labels),
            ("fieldSelector", &key.fields),
            ("shard", &shard),
        ] {
            if let Some(value) = value {
                name.push(if name.contains('?') { '&' } else { '?' });
                name.push_str(&format!("{param}={value}"));
            }
        }
        let informer = Arc::new(
            build(api, config.clone(), store(&name))
                .on_apply(self.hook.clone())
                .events_through(self.writer.clone()),
        );
        // Options of another kind, an index the store cannot keep: start-up problems.
        let problems = informer.add_options(&config);
        inner.problems.extend(problems);
        let handle = Box::new(Handle(Arc::clone(&informer)));
        if let Some(token) = &inner.running {
            handle.start(token.child_token());
        }
        let i = inner.entries.len();
        inner.entries.push((
            key.clone(),
            Entry {
                name,
                informer: handle,
            },
        ));
        inner.index.insert(key, i);
        informer
    }

    /// Reads the cached objects of kind `K` in `namespaces` from the informers without
    /// selectors, or else from those of the one set of selectors the cache watches `K` with
    /// (what a source of a controller registered its indexes on); [`NotCached`] when there is
    /// none, or several to choose from.
    pub(crate) fn store_in<K>(&self, namespaces: &crate::Namespaces) -> Result<Reader<K>, NotCached>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::Scope: Scoped,
    {
        let lookup = Lookup::namespaces(namespaces.clone());
        let refused = match self.store::<K>(&lookup) {
            Ok(reader) => return Ok(reader),
            Err(refused) => refused,
        };
        let mut selections: Vec<Selection> = self
            .lock()
            .entries
            .iter()
            .filter(|(key, _)| key.kind == TypeId::of::<K>() && !key.skeleton)
            .map(|(key, _)| (key.labels.clone(), key.fields.clone(), key.shard.clone()))
            .collect();
        selections.sort();
        selections.dedup();
        let [(labels, fields, shard)] = selections.as_slice() else {
            return Err(refused);
        };
        let mut lookup = lookup;
        lookup.labels.clone_from(labels);
        lookup.fields.clone_from(fields);
        self.store_narrowed::<K>(&lookup, shard.as_deref())
    }

    /// Reads the cached objects of kind `K` that `lookup` names: the store of the informer
    /// watching `lookup`'s namespace (or, for one namespace, the all-namespaces informer, read
    /// as if it held only that namespace) with exactly `lookup`'s selectors.
    ///
    /// An informer with other selectors never answers: it would silently hide objects.
    /// Metadata-only kinds are read as `K = PartialObjectMeta<C>`; children of `owns` with
    /// [`Owns::uncached`](crate::controller::Owns::uncached) are not cached at all.
    ///
    /// # Errors
    ///
    /// [`NotCached`] when no informer of the cache serves `lookup`; its message lists what the
    /// cache holds of the kind.
    ///
    /// ```no_run
    /// # fn doc(cache: &kubeforge::cache::Cache) -> Result<(), kubeforge::cache::NotCached> {
    /// use k8s_openapi::api::core::v1::Secret;
    /// use kubeforge::cache::Lookup;
    /// let secrets = cache.store::<Secret>(&Lookup::namespace("shop"))?;
    /// let labelled = cache.store::<Secret>(&Lookup::all().labels("app=web"))?;
    /// # Ok(()) }
    /// ```
    pub fn store<K>(&self, lookup: &Lookup) -> Result<Reader<K>, NotCached>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::Scope: Scoped,
    {
        self.store_narrowed(lookup, None)
    }

    /// [`Cache::store`] from the informers narrowed to `shard` (a sharded manager's
    /// controllers', [`InformerConfig::shard`]) or from those not narrowed.
    fn store_narrowed<K>(
        &self,
        lookup: &Lookup,
        shard: Option<&str>,
    ) -> Result<Reader<K>, NotCached>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::Scope: Scoped,
    {
        let inner = self.lock();
        let candidates = || {
            inner.entries.iter().filter(|(key, _)| {
                key.kind == TypeId::of::<K>()
                    && !key.skeleton
                    && key.labels == lookup.labels
                    && key.fields == lookup.fields
                    && key.shard.as_deref() == shard
            })
        };
        let reader = |(_, entry): &(InformerKey, Entry)| {
            entry
                .informer
                .as_any()
                .downcast::<Informer<K>>()
                .ok()
                .map(|informer| informer.store())
        };
        let find = |namespace: Option<&str>| {
            let all = K::url_path(&(), None);
            let exact = K::url_path(&(), namespace);
            if let Some(found) = candidates()
                .find(|(key, _)| key.url == exact)
                .and_then(reader)
            {
                return Some(found);
            }
            let ns = namespace?;
            candidates()
                .find(|(key, _)| key.url == all)
                .and_then(reader)
                .map(|found| found.in_namespace(ns))
        };
        // A cluster-scoped kind has no namespace to narrow to.
        let namespaces: Vec<Option<&str>> =
            if lookup.namespaces.is_all() || !<K::Scope as Scoped>::NAMESPACED {
                vec![None]
            } else {
                lookup.namespaces.iter().map(Some).collect()
            };
        let parts: Option<Vec<(String, Reader<K>)>> = namespaces
            .iter()
            .map(|&ns| Some((ns.unwrap_or_default().to_owned(), find(ns)?)))
            .collect();
        match parts {
            Some(mut parts) if parts.len() == 1 => {
                if let Some((_, one)) = parts.pop() {
                    return Ok(one);
                }
            }
            Some(parts) => {
                return Ok(Reader::merged(parts)
                    .unwrap_or_else(|| Reader::new(Arc::new(MemoryStore::<K>::new()))));
            }
            None => {}
        }
        let cached = inner
            .entries
            .iter()
            .filter(|(key, _)| key.kind == TypeId::of::<K>() && !key.skeleton)
            .map(|(_, entry)| entry.name.clone())
            .collect();
        Err(NotCached::new::<K>(lookup, cached))
    }

    /// Starts every registered informer (and those registered later) until `shutdown` is
    /// cancelled. Calling it again has no effect while running.
    pub fn start(&self, shutdown: CancellationToken) {
        let mut inner = self.lock();
        if inner.running.as_ref().is_some_and(|t| !t.is_cancelled()) {
            return;
        }
        for (_, entry) in &inner.entries {
            entry.informer.start(shutdown.child_token());
        }
        inner.running = Some(shutdown);
        self.started.send_replace(true);
    }

    /// Whether [`Cache::start`] was called (and its token is not cancelled).
    pub fn is_started(&self) -> bool {
        self.lock()
            .running
            .as_ref()
            .is_some_and(|t| !t.is_cancelled())
    }

    /// Waits until the cache has been started ([`Cache::start`]; a manager wires its
    /// controllers first) and every informer registered by then has synced.
    pub async fn wait_for_sync(&self) {
        // Only fails if the sender is dropped, which cannot happen while `self` lives.
        let _ = self.started.subscribe().wait_for(|started| *started).await;
        let waits: Vec<_> = self
            .lock()
            .entries
            .iter()
            .map(|(_, e)| e.informer.wait_for_sync())
            .collect();
        futures::future::join_all(waits).await;
    }

    /// Sync state and counters of every informer, in registration order.
    pub fn sync_status(&self) -> Vec<InformerStatus> {
        self.lock()
            .entries
            .iter()
            .map(|(_, e)| e.informer.status(&e.name))
            .collect()
    }

    /// Whether the cache counts as synced for readiness: every informer has synced, except those
    /// configured with `ignore_sync_for_health`.
    pub fn is_ready(&self) -> bool {
        self.sync_status()
            .iter()
            .all(|s| s.synced || s.ignore_sync_for_health)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};

    fn offline_client() -> Client {
        // Never contacted: these tests only exercise the registry.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Client::try_from(config).unwrap()
    }

    #[tokio::test]
    async fn cache_should_share_one_informer_per_kind_namespace_and_selectors() {
        let client = offline_client();
        let cache = Cache::new(client.clone());
        let cm_all = || Api::<ConfigMap>::all(client.clone());
        let a = cache.informer(cm_all(), InformerConfig::default());
        let b = cache.informer(
            cm_all(),
            InformerConfig::default().resync(std::time::Duration::from_secs(1)),
        );
        assert!(Arc::ptr_eq(&a, &b), "same kind, namespace and selectors");
        let labelled = cache.informer(cm_all(), InformerConfig::default().labels("app=web"));
        assert!(!Arc::ptr_eq(&a, &labelled), "different selector");
        let ns = cache.informer(
            Api::<ConfigMap>::namespaced(client.clone(), "x"),
            InformerConfig::default(),
        );
        assert!(!Arc::ptr_eq(&a, &ns), "different namespace");
        let _secrets = cache.informer(Api::<Secret>::all(client), InformerConfig::default());
        let names: Vec<_> = cache.sync_status().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "/api/v1/configmaps",
                "/api/v1/configmaps?labelSelector=app=web",
                "/api/v1/namespaces/x/configmaps",
                "/api/v1/secrets"
            ]
        );
        assert!(!cache.is_ready(), "nothing synced yet");
        assert!(cache.store::<ConfigMap>(&Lookup::all()).is_ok());
    }

    #[tokio::test]
    async fn skeleton_watches_should_reuse_full_informers_and_never_be_read_as_the_cache() {
        use kube::core::PartialObjectMeta;
        let client = offline_client();
        let cache = Cache::new(client.clone());
        let meta = |ns: &str| Api::<PartialObjectMeta<ConfigMap>>::namespaced(client.clone(), ns);

        // A skeleton watch first: no store of the kind to read.
        let skeleton = cache.skeleton_informer(meta("a"), InformerConfig::default());
        let a = Lookup::namespace("a");
        assert!(cache.store::<PartialObjectMeta<ConfigMap>>(&a).is_err());
        let again = cache.skeleton_informer(meta("a"), InformerConfig::default());
        assert!(Arc::ptr_eq(&skeleton, &again), "shared like any informer");
        // A full watch of the same key gets an informer of its own, and is the readable store.
        let full = cache.informer(meta("a"), InformerConfig::default());
        assert!(!Arc::ptr_eq(&skeleton, &full));
        assert!(cache.store::<PartialObjectMeta<ConfigMap>>(&a).is_ok());

        // A full informer serves a later skeleton watch of the same key.
        let full_b = cache.informer(meta("b"), InformerConfig::default());
        let skeleton_b = cache.skeleton_informer(meta("b"), InformerConfig::default());
        assert!(Arc::ptr_eq(&full_b, &skeleton_b));
        assert_eq!(cache.sync_status().len(), 3);
    }

    #[tokio::test]
    async fn erased_skeleton_watches_should_be_shared_per_kind_and_namespace_only() {
        use k8s_openapi::api::core::v1::Service;
        let client = offline_client();
        let cache = Cache::new(client.clone());
        let erased = |ty: &KindType<ErasedMeta>, ns: &str| {
            cache.erased_skeleton_informer(
                ty.api(client.clone(), Some(ns)),
                ty.clone(),
                InformerConfig::default(),
            )
        };
        let config_maps = KindType::<ConfigMap>::of().erased::<ErasedMeta>();
        let services = KindType::<Service>::of().erased::<ErasedMeta>();
        let a = erased(&config_maps, "a");
        assert!(
            Arc::ptr_eq(&a, &erased(&config_maps, "a")),
            "one watch per key"
        );
        // One Rust type for every kind: the key's URL keeps kinds and namespaces apart.
        let service_a = erased(&services, "a");
        assert!(!Arc::ptr_eq(&a, &service_a));
        assert!(!Arc::ptr_eq(&a, &erased(&config_maps, "b")));
        assert_eq!(a.store().backend(), "skeleton");
        assert_eq!(service_a.config().label_selector, None);
        // Never a readable store of the kind's metadata.
        assert!(
            cache
                .store::<PartialObjectMeta<ConfigMap>>(&Lookup::namespace("a"))
                .is_err()
        );
        assert_eq!(cache.sync_status().len(), 3);
    }

    #[tokio::test]
    async fn informers_should_get_the_store_their_config_chooses() {
        use crate::store::{MemoryStore, StoreChoice};
        let client = offline_client();
        let cache = Cache::new(client.clone());
        let indexed = StoreChoice::custom(|| {
            Arc::new(MemoryStore::<ConfigMap>::new().indexer(
                "name",
                Arc::new(|cm: &ConfigMap| cm.metadata.name.clone().into_iter().collect()),
            ))
        });
        let informer = cache.informer(
            Api::<ConfigMap>::namespaced(client.clone(), "x"),
            InformerConfig::default().store_choice(indexed.clone()),
        );
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("a".into());
        cm.metadata.namespace = Some("x".into());
        informer.apply_for_test(cm).await;
        let reader = cache.store::<ConfigMap>(&Lookup::namespace("x")).unwrap();
        assert_eq!(
            reader.by_index("name", "a").await.unwrap().len(),
            1,
            "the custom store's index"
        );
        assert!(cache.problems().is_empty());
        // A store of another kind, or a backend nobody configured: problems, which stop
        // controllers at start-up.
        cache.informer(
            Api::<Secret>::namespaced(client.clone(), "x"),
            InformerConfig::default().store_choice(indexed),
        );
        cache.informer(
            Api::<Secret>::namespaced(client, "y"),
            InformerConfig::default().store_named("memcached"),
        );
        let problems = cache.problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("custom store of k8s_openapi"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("`memcached`, which is not configured"),
            "{problems:?}"
        );
    }

    #[tokio::test]
    async fn store_should_answer_only_for_the_namespace_and_selectors_asked() {
        let client = offline_client();
        let cache = Cache::new(client.clone());
        let labelled = InformerConfig::default().labels("app=web");
        cache.informer(Api::<ConfigMap>::all(client.clone()), labelled);
        // Only a label-filtered informer: a read of all ConfigMaps is an error, not a subset.
        let missing = cache
            .store::<ConfigMap>(&Lookup::all())
            .expect_err("no unfiltered informer");
        assert_eq!(
            missing.to_string(),
            "nothing caches v1 ConfigMap for all namespaces without selectors; cached of this kind: /api/v1/configmaps?labelSelector=app=web"
        );
        assert!(
            cache
                .store::<ConfigMap>(&Lookup::all().labels("app=web"))
                .is_ok()
        );
        assert!(
            cache
                .store::<ConfigMap>(&Lookup::namespace("x").labels("app=web"))
                .is_ok(),
            "the all-namespaces informer serves one namespace"
        );
        assert!(cache.store::<Secret>(&Lookup::all()).is_err());

        // One namespace's informer does not answer for all namespaces or for another.
        cache.informer(
            Api::<Secret>::namespaced(client.clone(), "x"),
            InformerConfig::default(),
        );
        assert!(cache.store::<Secret>(&Lookup::namespace("x")).is_ok());
        assert!(cache.store::<Secret>(&Lookup::namespace("y")).is_err());
        assert!(cache.store::<Secret>(&Lookup::all()).is_err());

        // A set is served when each of its namespaces is, read as one store.
        let set = || Lookup::namespaces(crate::Namespaces::set(["x", "y"]));
        let refused = cache.store::<Secret>(&set()).unwrap_err();
        assert!(refused.to_string().contains("namespaces x,y"), "{refused}");
        cache.informer(
            Api::<Secret>::namespaced(client, "y"),
            InformerConfig::default(),
        );
        assert!(cache.store::<Secret>(&set()).is_ok());
        assert!(
            cache
                .store::<ConfigMap>(
                    &Lookup::namespaces(crate::Namespaces::set(["x", "z"])).labels("app=web")
                )
                .is_ok(),
            "the all-namespaces informer serves each namespace of a set"
        );
    }
}
