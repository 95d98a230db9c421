//! The read-only handle to a store that informers hand out.

use std::fmt::Debug;
use std::sync::Arc;

use kube::Resource;
use kube::core::Selector;

use super::{Store, StoreError};
use crate::ObjectKey;

/// Reads an informer's store; the informer is the only writer.
///
/// A reader answers for what its informer watches (one namespace or all, its selectors), or for
/// one namespace of an all-namespaces informer when [`Cache::store`](crate::cache::Cache::store)
/// was asked for that namespace: then every read is limited to it. A controller watching a set
/// of namespaces reads one merged from the readers of each namespace's informer
/// ([`Reader::merged`]): a key is read from its namespace's store, lists are concatenated.
pub struct Reader<K> {
    store: Arc<dyn Store<K>>,
    /// Limits every read to this namespace (`None`: everything the store holds).
    namespace: Option<Arc<str>>,
    /// A merged reader's parts, each limited to its namespace (`store` is then the first's).
    parts: Option<Arc<[Reader<K>]>>,
}

impl<K> Clone for Reader<K> {
    fn clone(&self) -> Self {
        Self {
            store: Arc::clone(&self.store),
            namespace: self.namespace.clone(),
            parts: self.parts.clone(),
        }
    }
}

impl<K: 'static> Debug for Reader<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let namespaces: Vec<_> = match self.parts.as_deref() {
            Some(parts) => parts.iter().map(|part| part.namespace.clone()).collect(),
            None => vec![self.namespace.clone()],
        };
        f.debug_struct("Reader")
            .field("namespaces", &namespaces)
            .field("backend", &self.store.backend())
            .field("cached", &self.store.len())
            .finish()
    }
}

impl<K: Resource + 'static> Reader<K> {
    /// Reads everything `store` holds.
    pub(crate) fn new(store: Arc<dyn Store<K>>) -> Self {
        Self {
            store,
            namespace: None,
            parts: None,
        }
    }

    /// One reader over `parts`, the stores of disjoint namespaces: `(namespace, reader)`
    /// each (the reader of an informer of that namespace). `None` when `parts` is empty.
    pub(crate) fn merged(parts: Vec<(String, Self)>) -> Option<Self> {
        let mut parts: Vec<Self> = parts
            .into_iter()
            .map(|(ns, reader)| reader.in_namespace(&ns))
            .collect();
        if parts.len() <= 1 {
            return parts.pop();
        }
        let first = parts[0].clone();
        Some(Self {
            parts: Some(parts.into()),
            ..first
        })
    }

    /// The part of a merged reader that holds `key`'s namespace.
    fn part(&self, key: &ObjectKey) -> Option<&Self> {
        match &self.parts {
            None => Some(self),
            Some(parts) => parts.iter().find(|part| part.key_visible(key)),
        }
    }

    /// A merged reader's parts (`None` for a reader of one store).
    fn parts(&self) -> Option<&[Self]> {
        self.parts.as_deref()
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
    ///
    /// # Errors
    ///
    /// The store's backend failed (a remote store unreachable); in-memory stores never fail.
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<Arc<K>>, StoreError> {
        match self.part(key) {
            Some(part) if part.key_visible(key) => part.store.get(key).await,
            _ => Ok(None),
        }
    }

    /// The `resourceVersion` cached for this key (from memory, whatever the store).
    pub fn resource_version(&self, key: &ObjectKey) -> Option<String> {
        let part = self.part(key)?;
        if !part.key_visible(key) {
            return None;
        }
        part.store.resource_version(key)
    }

    /// Every cached object, in no particular order.
    ///
    /// # Errors
    ///
    /// As [`Reader::get`].
    pub async fn list(&self) -> Result<Vec<Arc<K>>, StoreError> {
        if let Some(parts) = self.parts() {
            let mut all = Vec::new();
            for part in parts {
                all.extend(Box::pin(part.list()).await?);
            }
            return Ok(all);
        }
        match self.namespace.as_deref() {
            None => self.store.list().await,
            Some(ns) => {
                self.store
                    .list_selected(Some(ns), &Selector::default())
                    .await
            }
        }
    }

    /// The cached objects of one namespace (`None`: all namespaces) whose labels match `selector`.
    ///
    /// # Errors
    ///
    /// As [`Reader::get`].
    pub async fn list_selected(
        &self,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Result<Vec<Arc<K>>, StoreError> {
        if let Some(parts) = self.parts() {
            let mut all = Vec::new();
            for part in parts {
                all.extend(Box::pin(part.list_selected(namespace, selector)).await?);
            }
            return Ok(all);
        }
        match (self.namespace.as_deref(), namespace) {
            (Some(mine), Some(asked)) if mine != asked => Ok(Vec::new()),
            (Some(mine), _) => self.store.list_selected(Some(mine), selector).await,
            (None, asked) => self.store.list_selected(asked, selector).await,
        }
    }

    /// The cached objects that list `owner_uid` among their owner references.
    ///
    /// # Errors
    ///
    /// As [`Reader::get`].
    pub async fn owned_by(&self, owner_uid: &str) -> Result<Vec<Arc<K>>, StoreError> {
        if let Some(parts) = self.parts() {
            let mut all = Vec::new();
            for part in parts {
                all.extend(part.filtered(part.store.owned_by(owner_uid).await?));
            }
            return Ok(all);
        }
        Ok(self.filtered(self.store.owned_by(owner_uid).await?))
    }

    /// The cached objects for which the indexer named `index` produced `value`.
    ///
    /// # Errors
    ///
    /// As [`Reader::get`].
    pub async fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, StoreError> {
        if let Some(parts) = self.parts() {
            let mut all = Vec::new();
            for part in parts {
                all.extend(part.filtered(part.store.by_index(index, value).await?));
            }
            return Ok(all);
        }
        Ok(self.filtered(self.store.by_index(index, value).await?))
    }

    /// Number of cached objects (for a reader limited to a namespace, those of the namespace).
    ///
    /// # Errors
    ///
    /// As [`Reader::get`] (only a reader limited to a namespace reads the store for this).
    pub async fn len(&self) -> Result<usize, StoreError> {
        match (&self.parts, &self.namespace) {
            (None, None) => Ok(self.store.len()),
            _ => Ok(self.list().await?.len()),
        }
    }

    /// Whether nothing is cached.
    ///
    /// # Errors
    ///
    /// As [`Reader::len`].
    pub async fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len().await? == 0)
    }

    /// The store's backend (`memory`, `skeleton`, `memcached`).
    pub fn backend(&self) -> &'static str {
        self.store.backend()
    }

    /// Entries the store refilled from the apiserver because its backend had lost them
    /// (a remote store; 0 for in-memory ones).
    pub fn refills(&self) -> u64 {
        match &self.parts {
            None => self.store.refills(),
            Some(parts) => parts.iter().map(|part| part.store.refills()).sum(),
        }
    }

    /// Where a remote store keeps `key` in its backend (diagnostics); `None` in memory.
    pub fn entry_key(&self, key: &ObjectKey) -> Option<String> {
        self.part(key)?.store.entry_key(key)
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
    use crate::store::{LocalStore, MemoryStore};

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

    #[tokio::test]
    async fn reader_limited_to_a_namespace_should_see_nothing_else() {
        let store = Arc::new(MemoryStore::<ConfigMap>::new());
        LocalStore::apply(&*store, cm("a", "x"));
        LocalStore::apply(&*store, cm("b", "y"));
        let all = Reader::new(store.clone() as Arc<dyn Store<ConfigMap>>);
        assert_eq!(all.len().await.unwrap(), 2);
        let a = all.clone().in_namespace("a");
        assert_eq!(a.len().await.unwrap(), 1);
        let get = async |ns, name| a.get(&ObjectKey::namespaced(ns, name)).await.unwrap();
        assert!(get("a", "x").await.is_some());
        assert!(get("b", "y").await.is_none());
        assert!(
            a.resource_version(&ObjectKey::namespaced("b", "y"))
                .is_none()
        );
        assert_eq!(
            a.list().await.unwrap()[0].metadata.name.as_deref(),
            Some("x")
        );
        let everything = Selector::default();
        let selected = async |reader: &Reader<ConfigMap>, ns| {
            reader.list_selected(ns, &everything).await.unwrap().len()
        };
        assert_eq!(selected(&a, Some("b")).await, 0);
        assert_eq!(selected(&a, None).await, 1);
        assert_eq!(selected(&all, Some("b")).await, 1);
    }

    #[tokio::test]
    async fn a_merged_reader_should_read_each_key_from_its_namespace_and_list_them_all() {
        let (a, b) = (
            Arc::new(MemoryStore::<ConfigMap>::new()),
            Arc::new(MemoryStore::<ConfigMap>::new()),
        );
        LocalStore::apply(&*a, cm("a", "x"));
        LocalStore::apply(&*b, cm("b", "y"));
        LocalStore::apply(&*b, cm("b", "z"));
        // A stray object in a's store under b's namespace is not a's to answer for.
        LocalStore::apply(&*a, cm("b", "stray"));
        let merged = Reader::merged(vec![
            ("a".to_owned(), Reader::new(a as Arc<dyn Store<ConfigMap>>)),
            ("b".to_owned(), Reader::new(b as Arc<dyn Store<ConfigMap>>)),
        ])
        .unwrap();
        let get = async |ns, name| merged.get(&ObjectKey::namespaced(ns, name)).await.unwrap();
        assert!(get("a", "x").await.is_some());
        assert!(get("b", "y").await.is_some());
        assert!(get("b", "stray").await.is_none());
        assert!(get("c", "x").await.is_none());
        assert_eq!(
            merged.resource_version(&ObjectKey::namespaced("b", "z")),
            Some("1".to_owned())
        );
        let mut names: Vec<_> = merged
            .list()
            .await
            .unwrap()
            .iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .collect();
        names.sort();
        assert_eq!(names, ["x", "y", "z"]);
        assert_eq!(merged.len().await.unwrap(), 3);
        let everything = Selector::default();
        let in_b = merged.list_selected(Some("b"), &everything).await.unwrap();
        assert_eq!(in_b.len(), 2);
        assert!(Reader::<ConfigMap>::merged(Vec::new()).is_none());
    }
}
