//! The read-only handle to a store that informers hand out.

use std::fmt::Debug;
use std::sync::Arc;

use kube::Resource;
use kube::core::Selector;

use super::Store;
use crate::ObjectKey;

/// Reads an informer's store; the informer is the only writer.
///
/// A reader answers for what its informer watches (one namespace or all, its selectors), or for
/// one namespace of an all-namespaces informer when [`Cache::store`](crate::cache::Cache::store)
/// was asked for that namespace: then every read is limited to it.
pub struct Reader<K> {
    store: Arc<dyn Store<K>>,
    /// Limits every read to this namespace (`None`: everything the store holds).
    namespace: Option<Arc<str>>,
}

impl<K> Clone for Reader<K> {
    fn clone(&self) -> Self {
        Self {
            store: Arc::clone(&self.store),
            namespace: self.namespace.clone(),
        }
    }
}

impl<K: 'static> Debug for Reader<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("namespace", &self.namespace)
            .field("len", &self.store.len())
            .finish()
    }
}

impl<K: Resource + 'static> Reader<K> {
    /// Reads everything `store` holds.
    pub(crate) fn new(store: Arc<dyn Store<K>>) -> Self {
        Self {
            store,
            namespace: None,
        }
    }

    /// The same store, read as if it held only `namespace`.
    pub(crate) fn in_namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    fn visible(&self, obj: &K) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj.meta().namespace.as_deref() == Some(ns))
    }

    fn key_visible(&self, key: &ObjectKey) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| key.namespace.as_deref() == Some(ns))
    }

    /// The object with this key, if cached.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        if !self.key_visible(key) {
            return None;
        }
        self.store.get(key)
    }

    /// The `resourceVersion` cached for this key.
    pub fn resource_version(&self, key: &ObjectKey) -> Option<String> {
        if !self.key_visible(key) {
            return None;
        }
        self.store.resource_version(key)
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        match self.namespace.as_deref() {
            None => self.store.list(),
            Some(ns) => self.store.list_selected(Some(ns), &Selector::default()),
        }
    }

    /// The cached objects of one namespace (`None`: all namespaces) whose labels match `selector`.
    pub fn list_selected(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>> {
        match (self.namespace.as_deref(), namespace) {
            (Some(mine), Some(asked)) if mine != asked => Vec::new(),
            (Some(mine), _) => self.store.list_selected(Some(mine), selector),
            (None, asked) => self.store.list_selected(asked, selector),
        }
    }

    /// The cached objects that list `owner_uid` among their owner references.
    pub fn owned_by(&self, owner_uid: &str) -> Vec<Arc<K>> {
        self.filtered(self.store.owned_by(owner_uid))
    }

    /// The cached objects for which the indexer named `index` produced `value`.
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        self.filtered(self.store.by_index(index, value))
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        match self.namespace {
            None => self.store.len(),
            Some(_) => self.list().len(),
        }
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn filtered(&self, mut objects: Vec<Arc<K>>) -> Vec<Arc<K>> {
        if self.namespace.is_some() {
            objects.retain(|obj| self.visible(obj));
        }
        objects
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;
    use crate::store::MemoryStore;

    fn cm(ns: &str, name: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    #[test]
    fn reader_limited_to_a_namespace_should_see_nothing_else() {
        let store = Arc::new(MemoryStore::<ConfigMap>::new());
        store.apply(cm("a", "x"));
        store.apply(cm("b", "y"));
        let all = Reader::new(store.clone() as Arc<dyn Store<ConfigMap>>);
        assert_eq!(all.len(), 2);
        let a = all.clone().in_namespace("a");
        assert_eq!(a.len(), 1);
        assert!(a.get(&ObjectKey::namespaced("a", "x")).is_some());
        assert!(a.get(&ObjectKey::namespaced("b", "y")).is_none());
        assert!(
            a.resource_version(&ObjectKey::namespaced("b", "y"))
                .is_none()
        );
        assert_eq!(a.list()[0].metadata.name.as_deref(), Some("x"));
        let everything = Selector::default();
        assert!(a.list_selected(Some("b"), &everything).is_empty());
        assert_eq!(a.list_selected(None, &everything).len(), 1);
        assert_eq!(all.list_selected(Some("b"), &everything).len(), 1);
    }
}
