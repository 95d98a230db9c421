//! The cache store: the informer's local copy of a kind, read by every controller of a manager.
//!
//! An informer is the single writer of a store; any number of readers share it through
//! [`Reader`]s, which can only read (`Informer::store`, `Cache::store` and reconcilers get
//! those). Objects are kept as [`Arc`]s, so a read hands out a reference-counted pointer, never a
//! deep copy.
//!
//! # Staleness contract
//!
//! The store reflects the apiserver as of the last watch event the informer applied: it can lag
//! behind writes (including your own) by the watch latency, usually milliseconds. Reconcilers are
//! level-triggered and will run again when the newer version arrives, so acting on a slightly old
//! object is safe; code that must see its own writes uses the client's read-your-writes support.
//!
//! # Indexes
//!
//! [`MemoryStore`] indexes objects by namespace, by label (`key=value`), by owner UID (for
//! [`Store::owned_by`]) and by any [`Indexer`] registered with [`MemoryStore::indexer`].
//!
//! [`SkeletonStore`] keeps only keys, `resourceVersion`s and owner references: the store of
//! watches that trigger reconciles of owners without caching the children.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::ObjectMeta;
//! use kubeforge::store::{LocalStore, MemoryStore};
//! use kubeforge::ObjectKey;
//!
//! let store = MemoryStore::<ConfigMap>::new();
//! store.apply(Arc::new(ConfigMap {
//!     metadata: ObjectMeta {
//!         name: Some("settings".into()),
//!         namespace: Some("shop".into()),
//!         labels: Some([("app".to_owned(), "web".to_owned())].into()),
//!         ..Default::default()
//!     },
//!     ..Default::default()
//! }));
//! assert!(store.get(&ObjectKey::namespaced("shop", "settings")).is_some());
//! let selector = [("app", "web")].into_iter().collect();
//! assert_eq!(store.list_selected(None, &selector).len(), 1);
//! ```

mod backend;
mod index;
mod interned;
#[cfg(feature = "memcached")]
mod memcached;
mod memory;
mod reader;
mod remote;
mod skeleton;

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::core::{PartialObjectMeta, Selector};

use crate::{BoxError, ObjectKey};

pub use backend::{Backend, CustomStore, MAX_KEY_LEN, SharedBackend, StoreChoice};
/// For the metrics reference (`metrics/reference.rs`).
#[cfg(all(test, feature = "memcached"))]
pub(crate) use memcached::Series as MemcachedSeries;
#[cfg(feature = "memcached")]
pub use memcached::{Memcached, MemcachedConfig};
pub use memory::{AddIndex, Indexer, MemoryStore};
pub use reader::Reader;
pub use remote::{Refill, RemoteStore};
pub use skeleton::SkeletonStore;

/// A store of the objects of one kind, keyed by [`ObjectKey`]: what a cache backend implements.
///
/// The informer writes through [`Store::apply`], [`Store::delete`] and [`Store::replace`];
/// everyone else reads through a [`Reader`]. Reads and writes are asynchronous and can fail, so
/// a store can live outside the process (a memcached cluster); such a store says in its
/// [`StoreError`]s which backend failed and why.
///
/// Every store keeps the key and `resourceVersion` of each object it holds in memory:
/// [`Store::resource_version`] and [`Store::len`] answer without I/O (read-your-writes and
/// relists ask them for every object).
///
/// In-process stores implement the synchronous [`LocalStore`] instead; [`MemoryStore`] and
/// [`SkeletonStore`] are stores (their futures are ready at once), and [`Local`] makes one of
/// yours a store.
pub trait Store<K>: Send + Sync + 'static {
    /// The object with this key, if cached.
    fn get<'a>(&'a self, key: &'a ObjectKey) -> StoreFuture<'a, Option<Arc<K>>>;

    /// The `resourceVersion` of the object with this key, if cached (from memory).
    fn resource_version(&self, key: &ObjectKey) -> Option<String>;

    /// Number of cached objects (from memory).
    fn len(&self) -> usize;

    /// Whether the store is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every cached object, in no particular order.
    fn list(&self) -> StoreFuture<'_, Vec<Arc<K>>>;

    /// The cached objects of one namespace (`None`: all namespaces) whose labels match `selector`.
    fn list_selected<'a>(
        &'a self,
        namespace: Option<&'a str>,
        selector: &'a Selector,
    ) -> StoreFuture<'a, Vec<Arc<K>>>;

    /// The cached objects that list `owner_uid` among their owner references.
    fn owned_by<'a>(&'a self, owner_uid: &'a str) -> StoreFuture<'a, Vec<Arc<K>>>;

    /// The cached objects for which the indexer named `index` produced `value`; empty if no such
    /// index exists.
    fn by_index<'a>(&'a self, index: &'a str, value: &'a str) -> StoreFuture<'a, Vec<Arc<K>>>;

    /// Adds the custom index `name` (the objects already cached are indexed at once); a store
    /// that keeps no custom indexes answers [`AddIndex::Unsupported`].
    fn add_indexer(&self, name: &str, indexer: Indexer<K>) -> AddIndex {
        let _ = (name, indexer);
        AddIndex::Unsupported
    }

    /// Inserts or replaces an object; returns the previous version.
    fn apply(&self, obj: Arc<K>) -> StoreFuture<'_, Option<Arc<K>>>;

    /// Removes an object; returns it if it was cached.
    fn delete<'a>(&'a self, key: &'a ObjectKey) -> StoreFuture<'a, Option<Arc<K>>>;

    /// Replaces the whole content (after a full list); returns the objects that were removed.
    fn replace(&self, objects: Vec<Arc<K>>) -> StoreFuture<'_, Vec<Arc<K>>>;

    /// Every cached object, if the store holds them in memory (`None` for a remote store: a
    /// late subscriber's replay is then listed by the informer's task).
    fn snapshot(&self) -> Option<Vec<Arc<K>>> {
        None
    }

    /// Whether the backend is reachable (a readiness check); in-process stores always are.
    fn check(&self) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// The backend's name, for logs, errors and metrics (`memory`, `skeleton`, `memcached`).
    fn backend(&self) -> &'static str;

    /// Whether a (re)list is applied object by object as it arrives rather than gathered and
    /// swapped in whole: a remote store's memory then stays that of its index (the informer
    /// keeps only the keys it saw, to remove the others at the end). The memory store swaps; the
    /// skeleton store streams (it keeps a small part of each object).
    fn streams_lists(&self) -> bool {
        false
    }

    /// The keys of every cached object, from memory (what a streamed relist compares with the
    /// keys it saw); only stores that [stream lists](Store::streams_lists) need it.
    fn keys(&self) -> Vec<ObjectKey> {
        Vec::new()
    }

    /// Entries a remote store refilled from the apiserver because its backend had lost them
    /// (0 for in-process stores).
    fn refills(&self) -> u64 {
        0
    }

    /// The key under which a remote store keeps `key` in its backend (diagnostics and tests);
    /// `None` for in-process stores.
    fn entry_key(&self, key: &ObjectKey) -> Option<String> {
        let _ = key;
        None
    }
}

/// What a [`Store`] method returns.
pub type StoreFuture<'a, T> = BoxFuture<'a, Result<T, StoreError>>;

/// A store backend failed.
#[derive(Debug, thiserror::Error)]
#[error("{backend} store: {what}")]
pub struct StoreError {
    /// The backend (`memcached`, ...).
    pub backend: &'static str,
    /// What failed (`get shop/settings from 127.0.0.1:11211`).
    pub what: String,
    /// Why.
    #[source]
    pub source: Option<BoxError>,
}

impl StoreError {
    /// `what` failed in `backend` because of `source`.
    pub fn new(
        backend: &'static str,
        what: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Self {
            backend,
            what: what.into(),
            source: Some(source.into()),
        }
    }
}

/// A thread-safe in-process store of the objects of one kind (the [`MemoryStore`] and
/// [`SkeletonStore`]): synchronous and infallible; wrap yours in [`Local`] to make it a [`Store`].
pub trait LocalStore<K>: Send + Sync + 'static {
    /// The object with this key, if cached.
    fn get(&self, key: &ObjectKey) -> Option<Arc<K>>;

    /// The `resourceVersion` of the object with this key, if cached (what read-your-writes and
    /// relists compare; a store that synthesizes its objects answers without building one).
    fn resource_version(&self, key: &ObjectKey) -> Option<String>
    where
        K: kube::Resource,
    {
        self.get(key)?.meta().resource_version.clone()
    }

    /// Every cached object, in no particular order.
    fn list(&self) -> Vec<Arc<K>>;

    /// The cached objects of one namespace (`None`: all namespaces) whose labels match `selector`.
    fn list_selected(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>>;

    /// The cached objects that list `owner_uid` among their owner references.
    fn owned_by(&self, owner_uid: &str) -> Vec<Arc<K>>;

    /// The cached objects for which the indexer named `index` produced `value`; empty if no such
    /// index exists.
    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>>;

    /// Adds the custom index `name`, indexing the objects already cached; a store that keeps
    /// no custom indexes answers [`AddIndex::Unsupported`] (the default).
    fn add_indexer(&self, name: &str, indexer: Indexer<K>) -> AddIndex {
        let _ = (name, indexer);
        AddIndex::Unsupported
    }

    /// Number of cached objects.
    fn len(&self) -> usize;

    /// Whether the store is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts or replaces an object; returns the previous version.
    fn apply(&self, obj: Arc<K>) -> Option<Arc<K>>;

    /// Removes an object; returns it if it was cached.
    fn delete(&self, key: &ObjectKey) -> Option<Arc<K>>;

    /// Replaces the whole content (after a full list); returns the objects that were removed.
    fn replace(&self, objects: Vec<Arc<K>>) -> Vec<Arc<K>>;

    /// The backend's name (`memory`, `skeleton`).
    fn backend(&self) -> &'static str {
        "memory"
    }

    /// Whether a (re)list is applied object by object as it arrives (see
    /// [`Store::streams_lists`]): right for a store that keeps less than the objects it is given
    /// (the [`SkeletonStore`]), which would otherwise hold a whole list of full objects at once
    /// to keep a small part of each.
    fn streams_lists(&self) -> bool {
        false
    }

    /// The keys of every cached object (what a streamed relist compares with the keys it saw).
    fn keys(&self) -> Vec<ObjectKey>
    where
        K: kube::Resource,
    {
        self.list()
            .iter()
            .map(|o| ObjectKey::of(o.as_ref()))
            .collect()
    }
}

fn ready<'a, T: Send + 'a>(value: T) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(Ok(value)))
}

/// Implements [`Store`] for an in-process store type by answering through its [`LocalStore`]
/// impl with futures that are ready at once.
macro_rules! store_from_local {
    (impl<$($p:ident),*> for $ty:ty, kind $k:ty where $($bounds:tt)*) => {
        impl<$($p),*> Store<$k> for $ty where $($bounds)* {
            fn get<'a>(&'a self, key: &'a ObjectKey) -> StoreFuture<'a, Option<Arc<$k>>> {
                ready(LocalStore::get(self, key))
            }
            fn resource_version(&self, key: &ObjectKey) -> Option<String> {
                LocalStore::resource_version(self, key)
            }
            fn len(&self) -> usize {
                LocalStore::len(self)
            }
            fn list(&self) -> StoreFuture<'_, Vec<Arc<$k>>> {
                ready(LocalStore::list(self))
            }
            fn list_selected<'a>(
                &'a self,
                namespace: Option<&'a str>,
                selector: &'a Selector,
            ) -> StoreFuture<'a, Vec<Arc<$k>>> {
                ready(LocalStore::list_selected(self, namespace, selector))
            }
            fn owned_by<'a>(&'a self, owner_uid: &'a str) -> StoreFuture<'a, Vec<Arc<$k>>> {
                ready(LocalStore::owned_by(self, owner_uid))
            }
            fn by_index<'a>(
                &'a self,
                index: &'a str,
                value: &'a str,
            ) -> StoreFuture<'a, Vec<Arc<$k>>> {
                ready(LocalStore::by_index(self, index, value))
            }
            fn add_indexer(&self, name: &str, indexer: Indexer<$k>) -> AddIndex {
                LocalStore::add_indexer(self, name, indexer)
            }
            fn apply(&self, obj: Arc<$k>) -> StoreFuture<'_, Option<Arc<$k>>> {
                ready(LocalStore::apply(self, obj))
            }
            fn delete<'a>(&'a self, key: &'a ObjectKey) -> StoreFuture<'a, Option<Arc<$k>>> {
                ready(LocalStore::delete(self, key))
            }
            fn replace(&self, objects: Vec<Arc<$k>>) -> StoreFuture<'_, Vec<Arc<$k>>> {
                ready(LocalStore::replace(self, objects))
            }
            fn snapshot(&self) -> Option<Vec<Arc<$k>>> {
                Some(LocalStore::list(self))
            }
            fn backend(&self) -> &'static str {
                LocalStore::backend(self)
            }
            fn streams_lists(&self) -> bool {
                LocalStore::streams_lists(self)
            }
            fn keys(&self) -> Vec<ObjectKey> {
                LocalStore::keys(self)
            }
        }
    };
}

store_from_local!(impl<K> for MemoryStore<K>, kind K where K: kube::Resource + Send + Sync + 'static);
store_from_local!(impl<C> for SkeletonStore<C>, kind PartialObjectMeta<C> where C: kube::Resource + Send + Sync + 'static);
store_from_local!(impl<K, S> for Local<S>, kind K where K: kube::Resource + Send + Sync + 'static, S: LocalStore<K>);

/// Any [`LocalStore`] of yours as a [`Store`] (the built-in in-process stores are stores
/// already): `Informer::with_store(api, config, Arc::new(Local(my_store)))`.
#[derive(Debug, Default)]
pub struct Local<S>(pub S);

impl<K, S: LocalStore<K>> LocalStore<K> for Local<S> {
    fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.0.get(key)
    }
    fn resource_version(&self, key: &ObjectKey) -> Option<String>
    where
        K: kube::Resource,
    {
        self.0.resource_version(key)
    }
    fn list(&self) -> Vec<Arc<K>> {
        self.0.list()
    }
    fn list_selected(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>> {
        self.0.list_selected(namespace, selector)
    }
    fn owned_by(&self, owner_uid: &str) -> Vec<Arc<K>> {
        self.0.owned_by(owner_uid)
    }
    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        self.0.by_index(index, value)
    }
    fn add_indexer(&self, name: &str, indexer: Indexer<K>) -> AddIndex {
        self.0.add_indexer(name, indexer)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn apply(&self, obj: Arc<K>) -> Option<Arc<K>> {
        self.0.apply(obj)
    }
    fn delete(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.0.delete(key)
    }
    fn replace(&self, objects: Vec<Arc<K>>) -> Vec<Arc<K>> {
        self.0.replace(objects)
    }
    fn backend(&self) -> &'static str {
        self.0.backend()
    }
    fn streams_lists(&self) -> bool {
        self.0.streams_lists()
    }
    fn keys(&self) -> Vec<ObjectKey>
    where
        K: kube::Resource,
    {
        self.0.keys()
    }
}

/// Reads a store through a shared handle.
impl<K, S: LocalStore<K> + ?Sized> LocalStore<K> for Arc<S> {
    fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        (**self).get(key)
    }
    fn resource_version(&self, key: &ObjectKey) -> Option<String>
    where
        K: kube::Resource,
    {
        (**self).resource_version(key)
    }
    fn list(&self) -> Vec<Arc<K>> {
        (**self).list()
    }
    fn list_selected(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>> {
        (**self).list_selected(namespace, selector)
    }
    fn owned_by(&self, owner_uid: &str) -> Vec<Arc<K>> {
        (**self).owned_by(owner_uid)
    }
    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        (**self).by_index(index, value)
    }
    fn add_indexer(&self, name: &str, indexer: Indexer<K>) -> AddIndex {
        (**self).add_indexer(name, indexer)
    }
    fn len(&self) -> usize {
        (**self).len()
    }
    fn apply(&self, obj: Arc<K>) -> Option<Arc<K>> {
        (**self).apply(obj)
    }
    fn delete(&self, key: &ObjectKey) -> Option<Arc<K>> {
        (**self).delete(key)
    }
    fn replace(&self, objects: Vec<Arc<K>>) -> Vec<Arc<K>> {
        (**self).replace(objects)
    }
    fn backend(&self) -> &'static str {
        (**self).backend()
    }
    fn streams_lists(&self) -> bool {
        (**self).streams_lists()
    }
    fn keys(&self) -> Vec<ObjectKey>
    where
        K: kube::Resource,
    {
        (**self).keys()
    }
}
