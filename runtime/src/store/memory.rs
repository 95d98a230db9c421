use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kube::Resource;
use kube::core::{Expression, Selector, SelectorExt};

use super::LocalStore;
use crate::ObjectKey;

/// Computes the index values of an object (for example the name of the Secret it references).
pub type Indexer<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Index value → the keys of the objects that have it. Keys are shared with `objects` (one
/// allocation per object, however many index entries it has).
type Postings = HashMap<String, HashSet<Arc<ObjectKey>>>;

/// The default, in-memory [`Store`], with secondary indexes.
///
/// Reads take a shared lock; the informer's writes take an exclusive one briefly. Index upkeep
/// is proportional to the number of labels, owners and custom index values of the object written.
pub struct MemoryStore<K> {
    inner: RwLock<Inner<K>>,
    indexers: Vec<(String, Indexer<K>)>,
}

struct Inner<K> {
    objects: HashMap<Arc<ObjectKey>, Arc<K>>,
    by_namespace: Postings,
    by_label: Postings,
    by_owner: Postings,
    custom: HashMap<String, Postings>,
}

impl<K> Default for Inner<K> {
    fn default() -> Self {
        Self {
            objects: HashMap::new(),
            by_namespace: HashMap::new(),
            by_label: HashMap::new(),
            by_owner: HashMap::new(),
            custom: HashMap::new(),
        }
    }
}

impl<K> std::fmt::Debug for MemoryStore<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("len", &self.read().objects.len())
            .field(
                "indexers",
                &self.indexers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<K> MemoryStore<K> {
    fn read(&self) -> RwLockReadGuard<'_, Inner<K>> {
        // A panic while holding the lock cannot leave the maps inconsistent in a way readers care
        // about (each write completes its index updates before returning), so recover from poison.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner<K>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl<K: Resource + Send + Sync + 'static> Default for MemoryStore<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource + Send + Sync + 'static> MemoryStore<K> {
    /// An empty store with the built-in indexes (namespace, labels, owner UID).
    pub fn new() -> Self {
        Self {
            inner: RwLock::new(Inner::default()),
            indexers: Vec::new(),
        }
    }

    /// Adds a named index; [`Store::by_index`] queries it. Register indexers before the store is
    /// filled: objects already cached are not re-indexed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kubeforge::store::MemoryStore;
    ///
    /// let store = MemoryStore::<Pod>::new().indexer("node", Arc::new(|pod: &Pod| {
    ///     pod.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()
    /// }));
    /// ```
    #[must_use]
    pub fn indexer(mut self, name: impl Into<String>, indexer: Indexer<K>) -> Self {
        self.indexers.push((name.into(), indexer));
        self
    }

    /// The index entries of an object: (namespace, labels, owners, custom).
    fn index_entries(&self, obj: &K) -> Entries {
        let meta = obj.meta();
        Entries {
            namespace: meta.namespace.clone(),
            labels: meta
                .labels
                .iter()
                .flatten()
                .map(|(k, v)| label_posting(k, v))
                .collect(),
            owners: meta
                .owner_references
                .iter()
                .flatten()
                .map(|o| o.uid.clone())
                .collect(),
            custom: self
                .indexers
                .iter()
                .map(|(name, f)| (name.clone(), f(obj)))
                .collect(),
        }
    }

    fn unindex(inner: &mut Inner<K>, key: &ObjectKey, entries: Entries) {
        fn remove(postings: &mut Postings, value: &str, key: &ObjectKey) {
            if let Some(set) = postings.get_mut(value) {
                set.remove(key);
                if set.is_empty() {
                    postings.remove(value);
                }
            }
        }
        if let Some(ns) = &entries.namespace {
            remove(&mut inner.by_namespace, ns, key);
        }
        for l in &entries.labels {
            remove(&mut inner.by_label, l, key);
        }
        for o in &entries.owners {
            remove(&mut inner.by_owner, o, key);
        }
        for (name, values) in &entries.custom {
            if let Some(postings) = inner.custom.get_mut(name) {
                for v in values {
                    remove(postings, v, key);
                }
            }
        }
    }

    fn index(inner: &mut Inner<K>, key: &Arc<ObjectKey>, entries: Entries) {
        fn add(postings: &mut Postings, value: String, key: &Arc<ObjectKey>) {
            postings.entry(value).or_default().insert(Arc::clone(key));
        }
        if let Some(ns) = entries.namespace {
            add(&mut inner.by_namespace, ns, key);
        }
        for l in entries.labels {
            add(&mut inner.by_label, l, key);
        }
        for o in entries.owners {
            add(&mut inner.by_owner, o, key);
        }
        for (name, values) in entries.custom {
            let postings = inner.custom.entry(name).or_default();
            for v in values {
                add(postings, v, key);
            }
        }
    }

    fn collect<'a>(
        inner: &Inner<K>,
        keys: impl IntoIterator<Item = &'a Arc<ObjectKey>>,
    ) -> Vec<Arc<K>> {
        keys.into_iter()
            .filter_map(|k| inner.objects.get(k).cloned())
            .collect()
    }
}

struct Entries {
    namespace: Option<String>,
    labels: Vec<String>,
    owners: Vec<String>,
    custom: Vec<(String, Vec<String>)>,
}

fn label_posting(key: &str, value: &str) -> String {
    format!("{key}={value}")
}

fn labels_of<K: Resource>(obj: &K) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    obj.meta().labels.as_ref().unwrap_or(&EMPTY)
}

impl<K: Resource + Send + Sync + 'static> LocalStore<K> for MemoryStore<K> {
    fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.read().objects.get(key).cloned()
    }

    fn list(&self) -> Vec<Arc<K>> {
        self.read().objects.values().cloned().collect()
    }

    fn list_selected(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>> {
        let inner = self.read();
        // Narrow the candidates with the smallest posting list among the namespace and the
        // selector's equality requirements, then check the full selector on each candidate.
        let mut postings: Vec<Option<&HashSet<Arc<ObjectKey>>>> = Vec::new();
        if let Some(ns) = namespace {
            postings.push(inner.by_namespace.get(ns));
        }
        for expr in selector.clone() {
            if let Expression::Equal(k, v) = &expr {
                postings.push(inner.by_label.get(&label_posting(k, v)));
            }
        }
        if postings.iter().any(Option::is_none) {
            return Vec::new(); // a required namespace or label value has no object at all
        }
        let candidates = postings.into_iter().flatten().min_by_key(|set| set.len());
        let matches = |obj: &Arc<K>| {
            namespace.is_none_or(|ns| obj.meta().namespace.as_deref() == Some(ns))
                && selector.matches(labels_of(obj.as_ref()))
        };
        match candidates {
            Some(keys) => Self::collect(&inner, keys)
                .into_iter()
                .filter(matches)
                .collect(),
            None => inner
                .objects
                .values()
                .filter(|o| matches(o))
                .cloned()
                .collect(),
        }
    }

    fn owned_by(&self, owner_uid: &str) -> Vec<Arc<K>> {
        let inner = self.read();
        inner
            .by_owner
            .get(owner_uid)
            .map(|keys| Self::collect(&inner, keys))
            .unwrap_or_default()
    }

    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        let inner = self.read();
        inner
            .custom
            .get(index)
            .and_then(|postings| postings.get(value))
            .map(|keys| Self::collect(&inner, keys))
            .unwrap_or_default()
    }

    fn len(&self) -> usize {
        self.read().objects.len()
    }

    fn apply(&self, obj: Arc<K>) -> Option<Arc<K>> {
        let key = ObjectKey::of(obj.as_ref());
        let new_entries = self.index_entries(&obj);
        let mut inner = self.write();
        let key = match inner.objects.get_key_value(&key) {
            Some((shared, _)) => Arc::clone(shared),
            None => Arc::new(key),
        };
        let previous = inner.objects.insert(Arc::clone(&key), obj);
        if let Some(old) = &previous {
            let old_entries = self.index_entries(old);
            Self::unindex(&mut inner, &key, old_entries);
        }
        Self::index(&mut inner, &key, new_entries);
        previous
    }

    fn delete(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let mut inner = self.write();
        let old = inner.objects.remove(key)?;
        let entries = self.index_entries(&old);
        Self::unindex(&mut inner, key, entries);
        Some(old)
    }

    fn replace(&self, objects: Vec<Arc<K>>) -> Vec<Arc<K>> {
        let mut fresh = Inner::default();
        for obj in objects {
            let key = Arc::new(ObjectKey::of(obj.as_ref()));
            let entries = self.index_entries(&obj);
            Self::index(&mut fresh, &key, entries);
            fresh.objects.insert(key, obj);
        }
        let mut inner = self.write();
        let old = std::mem::replace(&mut *inner, fresh);
        old.objects
            .into_iter()
            .filter(|(k, _)| !inner.objects.contains_key(k))
            .map(|(_, v)| v)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ObjectMeta;

    fn cm(ns: &str, name: &str, labels: &[(&str, &str)], owner: Option<&str>) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).into(), (*v).into()))
                        .collect(),
                ),
                owner_references: owner.map(|uid| {
                    vec![OwnerReference {
                        uid: uid.into(),
                        ..OwnerReference::default()
                    }]
                }),
                ..ObjectMeta::default()
            },
            data: Some([("name".to_owned(), name.to_owned())].into()),
            ..ConfigMap::default()
        })
    }

    fn names(mut objs: Vec<Arc<ConfigMap>>) -> Vec<String> {
        objs.sort_by_key(|o| o.metadata.name.clone());
        objs.iter()
            .map(|o| o.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn store_should_select_by_namespace_and_labels() {
        let store = MemoryStore::new();
        store.apply(cm("a", "one", &[("app", "web"), ("tier", "fe")], None));
        store.apply(cm("a", "two", &[("app", "web")], None));
        store.apply(cm("b", "three", &[("app", "web")], None));
        store.apply(cm("b", "four", &[("app", "db")], None));

        let web: Selector = [("app", "web")].into_iter().collect();
        assert_eq!(
            names(store.list_selected(None, &web)),
            ["one", "three", "two"]
        );
        assert_eq!(names(store.list_selected(Some("a"), &web)), ["one", "two"]);
        assert_eq!(
            names(store.list_selected(Some("c"), &web)),
            Vec::<String>::new()
        );
        let all = Selector::default();
        assert_eq!(
            names(store.list_selected(Some("b"), &all)),
            ["four", "three"]
        );
        let not_fe: Selector = Expression::NotEqual("tier".into(), "fe".into()).into();
        assert_eq!(
            names(store.list_selected(Some("a"), &not_fe)),
            ["two"],
            "set-based requirements are checked on every candidate"
        );
    }

    #[test]
    fn store_should_reindex_on_update_and_delete() {
        let store = MemoryStore::new();
        store.apply(cm("a", "one", &[("app", "web")], Some("u1")));
        assert_eq!(names(store.owned_by("u1")), ["one"]);

        let previous = store.apply(cm("a", "one", &[("app", "db")], Some("u2")));
        assert!(previous.is_some());
        let web: Selector = [("app", "web")].into_iter().collect();
        assert!(
            store.list_selected(None, &web).is_empty(),
            "old label unindexed"
        );
        assert!(store.owned_by("u1").is_empty(), "old owner unindexed");
        assert_eq!(names(store.owned_by("u2")), ["one"]);

        assert!(store.delete(&ObjectKey::namespaced("a", "one")).is_some());
        assert!(store.owned_by("u2").is_empty());
        assert!(store.is_empty());
        assert!(store.delete(&ObjectKey::namespaced("a", "one")).is_none());
    }

    #[test]
    fn store_should_report_removed_objects_on_replace() {
        let store = MemoryStore::new();
        store.apply(cm("a", "keep", &[], None));
        store.apply(cm("a", "gone", &[], None));
        let removed = store.replace(vec![cm("a", "keep", &[], None), cm("a", "new", &[], None)]);
        assert_eq!(names(removed), ["gone"]);
        assert_eq!(names(store.list()), ["keep", "new"]);
    }

    #[test]
    fn store_should_query_custom_indexers() {
        let store = MemoryStore::<ConfigMap>::new().indexer(
            "data-name",
            Arc::new(|c: &ConfigMap| c.data.iter().flatten().map(|(_, v)| v.clone()).collect()),
        );
        store.apply(cm("a", "x", &[], None));
        store.apply(cm("b", "y", &[], None));
        assert_eq!(names(store.by_index("data-name", "y")), ["y"]);
        assert!(store.by_index("data-name", "z").is_empty());
        assert!(store.by_index("missing", "y").is_empty());
    }
}
