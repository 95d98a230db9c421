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
//! use kubeforge::store::{MemoryStore, Store};
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

mod memory;
mod reader;
mod skeleton;

use std::sync::Arc;

use kube::core::Selector;

use crate::ObjectKey;

pub use memory::{Indexer, MemoryStore};
pub use reader::Reader;
pub use skeleton::SkeletonStore;

/// A thread-safe store of the objects of one kind, keyed by [`ObjectKey`].
///
/// The informer writes through [`Store::apply`], [`Store::delete`] and [`Store::replace`];
/// everyone else reads through a [`Reader`]. Implementations other than [`MemoryStore`] (a shared
/// external cache, for example) plug into an informer through this trait
/// (`Informer::with_store`).
pub trait Store<K>: Send + Sync + 'static {
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
}

/// Reads a store through a shared handle.
impl<K, S: Store<K> + ?Sized> Store<K> for Arc<S> {
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
}
