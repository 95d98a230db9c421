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

use kube::core::PartialObjectMeta;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::informer::{Informer, InformerConfig};
use crate::scope::Scoped;
use crate::store::{MemoryStore, SkeletonStore, Store};

mod writes;
pub(crate) use writes::WriteTracker;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct InformerKey {
    kind: TypeId,
    url: String,
    labels: Option<String>,
    fields: Option<String>,
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
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::Scope: Scoped,
{
    fn as_any(&self) -> Arc<dyn Any + Send + Sync> {
        self.0.clone()
    }
    fn start(&self, shutdown: CancellationToken) {
        tokio::spawn(Arc::clone(&self.0).run(shutdown));
    }
    fn status(&self, name: &str) -> InformerStatus {
        use std::sync::atomic::Ordering::Relaxed;
        let stats = self.0.stats();
        InformerStatus {
            name: name.to_owned(),
            synced: self.0.has_synced(),
            ignore_sync_for_health: self.0.config().ignore_sync_for_health,
            cached: self.0.store().len(),
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

struct Entry {
    name: String,
    informer: Box<dyn ErasedInformer>,
}

/// The shared informer registry of a manager. Cheap to clone.
#[derive(Clone)]
pub struct Cache {
    client: Client,
    inner: Arc<Mutex<Inner>>,
    writes: Arc<WriteTracker>,
    gate: Arc<std::sync::RwLock<Option<Fence>>>,
    defaults: Arc<std::sync::RwLock<InformerConfig>>,
}

/// Decides whether controllers may start a reconcile right now (leadership still valid).
pub(crate) type ReconcileGate = Arc<dyn Fn() -> bool + Send + Sync>;

/// The reconcile gate and the client whose writes it fences.
struct Fence {
    gate: ReconcileGate,
    client: Client,
}

#[derive(Default)]
struct Inner {
    entries: Vec<(InformerKey, Entry)>,
    index: HashMap<InformerKey, usize>,
    running: Option<CancellationToken>,
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
            client,
            inner: Arc::new(Mutex::new(Inner::default())),
            writes: Arc::new(WriteTracker::default()),
            gate: Arc::default(),
            defaults: Arc::default(),
        }
    }

    /// The informer options controllers declared with `#[kubeforge::controller]` use for every
    /// kind they watch ([`InformerConfig::default`] unless [`Cache::set_informer_defaults`]
    /// changed them).
    pub fn informer_defaults(&self) -> InformerConfig {
        self.defaults
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Changes [`Cache::informer_defaults`] for controllers wired from now on (keep
    /// `managedFields`, a resync period, a page size, ...).
    pub fn set_informer_defaults(&self, config: InformerConfig) {
        *self.defaults.write().unwrap_or_else(|e| e.into_inner()) = config;
    }

    /// Installs the check controllers make before each reconcile (the manager's leader election),
    /// and fences the client they reconcile with by the same check (see [`Cache::writer_client`]).
    pub(crate) fn set_reconcile_gate(&self, gate: ReconcileGate) {
        let client = crate::leader::fence::fenced(self.client.clone(), Arc::clone(&gate));
        *self.gate.write().unwrap_or_else(|e| e.into_inner()) = Some(Fence { gate, client });
    }

    /// Whether controllers may start a reconcile now (always, without leader election).
    pub fn may_reconcile(&self) -> bool {
        self.gate
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_none_or(|fence| (fence.gate)())
    }

    /// The client controllers reconcile with: [`Cache::client`], or under leader election the
    /// same client with its writes fenced — a write attempted while this replica's leadership is
    /// not valid fails with [`NotLeader`](crate::leader::NotLeader) instead of being sent.
    pub fn writer_client(&self) -> Client {
        self.gate
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or_else(|| self.client.clone(), |fence| fence.client.clone())
    }

    /// Records that this process wrote `obj` (as returned by the apiserver): until the informer
    /// of its kind has seen that version, controllers wait briefly before reconciling the object,
    /// so they do not act on an older cached copy of their own write. The [`Context`] write
    /// helpers call this for you.
    ///
    /// [`Context`]: crate::controller::Context
    pub fn record_write<K: Resource + 'static>(&self, obj: &K) {
        let Some(rv) = &obj.meta().resource_version else {
            return;
        };
        let kind = TypeId::of::<K>();
        let key = crate::ObjectKey::of(obj);
        // Record first, then look at the stores: an informer applies an event to its store
        // before it reports it to the tracker, so a watch event that raced ahead of this write's
        // response is either visible in a store now or reported after the record — never lost,
        // and never left behind as a stale entry.
        self.writes.wrote(kind, key.clone(), rv.clone());
        let inner = self.lock();
        let mut informers = inner.entries.iter().filter(|(k, _)| k.kind == kind);
        let mut watched = false;
        let seen = informers.any(|(_, entry)| {
            watched = true;
            entry
                .informer
                .cached_version(&key)
                .is_some_and(|cached| writes::same_or_newer(&cached, rv))
        });
        drop(inner);
        if seen || !watched {
            // Already delivered, or no informer of this kind will ever deliver it: settle the
            // record as the informer would have (waking anyone waiting for this key).
            self.writes.observed(kind, &key, Some(rv));
        }
    }

    pub(crate) fn writes(&self) -> &Arc<WriteTracker> {
        &self.writes
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
    pub fn informer<K>(&self, api: Api<K>, config: InformerConfig) -> Arc<Informer<K>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::Scope: Scoped,
    {
        self.shared_informer(api, config, || Arc::new(MemoryStore::<K>::new()), false)
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
        self.shared_informer(api, config, || Arc::new(SkeletonStore::<C>::new()), true)
    }

    fn shared_informer<K>(
        &self,
        api: Api<K>,
        config: InformerConfig,
        store: impl FnOnce() -> Arc<dyn Store<K>>,
        skeleton: bool,
    ) -> Arc<Informer<K>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::Scope: Scoped,
    {
        let key = InformerKey {
            kind: TypeId::of::<K>(),
            url: api.resource_url().to_owned(),
            labels: config.label_selector.clone(),
            fields: config.field_selector.clone(),
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
            return informer;
        }
        let mut name = key.url.clone();
        for (param, value) in [
            ("labelSelector", &key.labels),
            ("fieldSelector", &key.fields),
        ] {
            if let Some(value) = value {
                name.push(if name.contains('?') { '&' } else { '?' });
                name.push_str(&format!("{param}={value}"));
            }
        }
        let informer = Arc::new(
            Informer::with_store(api, config, store()).with_write_tracker(Arc::clone(&self.writes)),
        );
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

    /// The store of the first informer registered for kind `K` (any namespace or selectors), if
    /// any. Reconcilers use it to read related objects from the cache.
    pub fn store<K>(&self) -> Option<Arc<dyn Store<K>>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::Scope: Scoped,
    {
        let inner = self.lock();
        inner
            .entries
            .iter()
            .filter(|(key, _)| key.kind == TypeId::of::<K>() && !key.skeleton)
            .find_map(|(_, e)| e.informer.as_any().downcast::<Informer<K>>().ok())
            .map(|informer| informer.store())
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
    }

    /// Whether [`Cache::start`] was called (and its token is not cancelled).
    pub fn is_started(&self) -> bool {
        self.lock()
            .running
            .as_ref()
            .is_some_and(|t| !t.is_cancelled())
    }

    /// Waits until every informer registered so far has synced.
    pub async fn wait_for_sync(&self) {
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
        assert!(cache.store::<ConfigMap>().is_some());
    }

    #[tokio::test]
    async fn skeleton_watches_should_reuse_full_informers_and_never_be_read_as_the_cache() {
        use kube::core::PartialObjectMeta;
        let client = offline_client();
        let cache = Cache::new(client.clone());
        let meta = |ns: &str| Api::<PartialObjectMeta<ConfigMap>>::namespaced(client.clone(), ns);

        // A skeleton watch first: no store of the kind to read.
        let skeleton = cache.skeleton_informer(meta("a"), InformerConfig::default());
        assert!(cache.store::<PartialObjectMeta<ConfigMap>>().is_none());
        let again = cache.skeleton_informer(meta("a"), InformerConfig::default());
        assert!(Arc::ptr_eq(&skeleton, &again), "shared like any informer");
        // A full watch of the same key gets an informer of its own, and is the readable store.
        let full = cache.informer(meta("a"), InformerConfig::default());
        assert!(!Arc::ptr_eq(&skeleton, &full));
        assert!(cache.store::<PartialObjectMeta<ConfigMap>>().is_some());

        // A full informer serves a later skeleton watch of the same key.
        let full_b = cache.informer(meta("b"), InformerConfig::default());
        let skeleton_b = cache.skeleton_informer(meta("b"), InformerConfig::default());
        assert!(Arc::ptr_eq(&full_b, &skeleton_b));
        assert_eq!(cache.sync_status().len(), 3);
    }

    fn cm(name: &str, rv: &str) -> ConfigMap {
        ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("x".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn record_write_should_leave_nothing_behind_that_no_informer_will_report() {
        let client = offline_client();
        let cache = Cache::new(client.clone());
        // No informer of the kind: nothing will ever observe the write.
        cache.record_write(&cm("a", "5"));
        assert_eq!(cache.writes().pending_len(), 0);

        let informer = cache.informer(
            Api::<ConfigMap>::namespaced(client, "x"),
            InformerConfig::default(),
        );
        // The watch event raced ahead of the write's response: already in the store.
        informer.store().apply(Arc::new(cm("b", "7")));
        cache.record_write(&cm("b", "7"));
        cache.record_write(&cm("b", "6"));
        assert_eq!(cache.writes().pending_len(), 0, "seen already");
        // Not seen yet: pending until the informer reports it.
        cache.record_write(&cm("b", "8"));
        assert_eq!(cache.writes().pending_len(), 1);
    }
}
