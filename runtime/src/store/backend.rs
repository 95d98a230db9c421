//! [`Backend`]: a key-value service outside the process (memcached) that a [`RemoteStore`]
//! keeps a kind's objects in.
//!
//! [`RemoteStore`]: super::RemoteStore

use std::sync::Arc;
use std::time::Duration;

use prometheus::proto::MetricFamily;

use super::StoreFuture;

/// A key-value service that holds serialized objects for [`RemoteStore`](super::RemoteStore)s,
/// shared by every kind that chose it (each kind under its own key prefix).
///
/// Keys are ASCII without spaces or control characters, at most [`MAX_KEY_LEN`] bytes (the
/// store hashes longer ones). Values are opaque bytes. Every method can fail: a failure names the
/// backend and the server in its [`StoreError`](super::StoreError).
pub trait Backend: Send + Sync + 'static {
    /// The backend's name (`memcached`), in errors, logs, metrics and the readiness check
    /// `store-<name>`.
    fn name(&self) -> &'static str;

    /// A prefix that separates this operator's (or replica group's) entries from others sharing
    /// the service (app-sdk's shard key); empty for none.
    fn shard_key(&self) -> &str;

    /// The values of `keys`, in the same order (`None`: not held).
    fn get_many<'a>(&'a self, keys: &'a [String]) -> StoreFuture<'a, Vec<Option<Vec<u8>>>>;

    /// Stores every `(key, value)`.
    fn set_many<'a>(&'a self, entries: &'a [(String, Vec<u8>)]) -> StoreFuture<'a, ()>;

    /// Removes `keys` (absent ones are not an error).
    fn delete_many<'a>(&'a self, keys: &'a [String]) -> StoreFuture<'a, ()>;

    /// Whether the service answers (the readiness check).
    fn check(&self) -> StoreFuture<'_, ()>;

    /// How many objects one `get_many` or `set_many` carries when a store lists or relists.
    fn page_size(&self) -> usize {
        500
    }

    /// How often each store writes its key list into the service, so a `list` works from the
    /// service alone (app-sdk's key sync); `None` (an interval of 0) disables full `list`s:
    /// selective reads (by namespace, labels, owner) still work from the in-memory index.
    fn key_sync_interval(&self) -> Option<Duration> {
        Some(Duration::from_secs(60))
    }

    /// The backend's metric families (requests by outcome, latency), gathered at each scrape.
    fn metrics(&self) -> Vec<MetricFamily> {
        Vec::new()
    }
}

impl std::fmt::Debug for dyn Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("name", &self.name())
            .field("shard_key", &self.shard_key())
            .finish_non_exhaustive()
    }
}

/// The longest key a [`Backend`] accepts (memcached's limit).
pub const MAX_KEY_LEN: usize = 250;

/// A shared backend, as kinds choose it ([`InformerConfig::store`](crate::informer::InformerConfig::store)).
pub type SharedBackend = Arc<dyn Backend>;

/// Where a kind's objects are kept, when not in memory.
#[derive(Clone, Debug)]
pub enum StoreChoice {
    /// In this backend.
    Backend(SharedBackend),
    /// In the backend of this name the cache was given
    /// ([`Cache::add_backend`](crate::cache::Cache::add_backend), through
    /// `Manager::store_backend` or the operator's command line) — what
    /// `#[controller(store = memcached)]` asks for.
    Named(String),
    /// In a store of yours, built for the kind by the factory
    /// ([`StoreChoice::custom`]).
    Custom(CustomStore),
}

/// A factory of stores of one kind, kept without its type (see [`StoreChoice::custom`]).
#[derive(Clone)]
pub struct CustomStore {
    kind: &'static str,
    factory: Arc<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for CustomStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomStore")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// What [`CustomStore`] holds: builds a store of `K`.
type Factory<K> = Arc<dyn Fn() -> Arc<dyn super::Store<K>> + Send + Sync>;

impl StoreChoice {
    /// Keep the objects of `K` in the stores `factory` builds (one per informer): any
    /// [`Store`](super::Store) implementation, such as a [`MemoryStore`](super::MemoryStore)
    /// with custom indexers.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kubeforge::informer::InformerConfig;
    /// use kubeforge::store::{MemoryStore, StoreChoice};
    ///
    /// let by_key = StoreChoice::custom(|| {
    ///     Arc::new(MemoryStore::<ConfigMap>::new().indexer(
    ///         "has-ca",
    ///         Arc::new(|cm: &ConfigMap| {
    ///             let has = cm.data.as_ref().is_some_and(|d| d.contains_key("ca.crt"));
    ///             vec![has.to_string()]
    ///         }),
    ///     ))
    /// });
    /// let config = InformerConfig::default().store_choice(by_key);
    /// # let _ = config;
    /// ```
    pub fn custom<K: 'static>(
        factory: impl Fn() -> Arc<dyn super::Store<K>> + Send + Sync + 'static,
    ) -> Self {
        let factory: Factory<K> = Arc::new(factory);
        Self::Custom(CustomStore {
            kind: std::any::type_name::<K>(),
            factory: Arc::new(factory),
        })
    }
}

impl CustomStore {
    /// A store of `K`, if this factory builds stores of `K`.
    pub(crate) fn build<K: 'static>(&self) -> Option<Arc<dyn super::Store<K>>> {
        self.factory
            .downcast_ref::<Factory<K>>()
            .map(|factory| factory())
    }

    /// The kind the factory builds stores of.
    pub(crate) fn kind(&self) -> &'static str {
        self.kind
    }
}
