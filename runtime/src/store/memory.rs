use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use hashbrown::HashTable;
use kube::Resource;
use kube::core::{Expression, Selector, SelectorExt};

use super::LocalStore;
use crate::ObjectKey;

/// Computes the index values of an object (for example the name of the Secret it references).
pub type Indexer<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// An object's place in the store's slots.
type Id = u32;

/// Index value → the ids of the objects that have it (four bytes per entry).
type Postings = HashMap<Box<str>, HashSet<Id>>;

/// The default, in-memory [`Store`](super::Store), with secondary indexes.
///
/// Reads take a shared lock; the informer's writes take an exclusive one briefly. Index upkeep
/// is proportional to the number of labels, owners and custom index values of the object written.
///
/// What it keeps besides the objects themselves is small: each object sits in a slot (a
/// pointer); the key → slot table and the index entries hold slot numbers (four bytes), not
/// copies of names — about 25 bytes per object with the namespace index, plus four per label,
/// owner and custom index value.
pub struct MemoryStore<K> {
    inner: RwLock<Inner<K>>,
    /// The custom indexers; they only grow ([`MemoryStore::add_indexer`]), under the write lock
    /// of `inner`.
    indexers: RwLock<Indexers<K>>,
}

/// The custom indexers of a store, by name.
type Indexers<K> = Arc<[(String, Indexer<K>)]>;

/// What [`LocalStore::add_indexer`](super::LocalStore::add_indexer) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddIndex {
    /// The index was added, and the objects already cached indexed.
    Added,
    /// An index of that name was there already (the first indexer of a name stays).
    Exists,
    /// The store keeps no custom indexes (a skeleton or remote store).
    Unsupported,
}

struct Inner<K> {
    /// The objects, by id; `None`: a free slot (listed in `free`).
    slots: Vec<Option<Arc<K>>>,
    free: Vec<Id>,
    /// Ids by the hash of their object's namespace and name.
    by_key: HashTable<Id>,
    hasher: RandomState,
    by_namespace: Postings,
    by_label: Postings,
    by_owner: Postings,
    custom: HashMap<String, Postings>,
}

impl<K> Default for Inner<K> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            by_key: HashTable::new(),
            hasher: RandomState::new(),
            by_namespace: HashMap::new(),
            by_label: HashMap::new(),
            by_owner: HashMap::new(),
            custom: HashMap::new(),
        }
    }
}

impl<K: Resource> Inner<K> {
    fn hash(hasher: &RandomState, namespace: Option<&str>, name: &str) -> u64 {
        hasher.hash_one((namespace, name))
    }

    /// The hash of an object's own namespace and name.
    fn hash_of(hasher: &RandomState, obj: &K) -> u64 {
        let meta = obj.meta();
        Self::hash(
            hasher,
            meta.namespace.as_deref(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }

    fn object(slots: &[Option<Arc<K>>], id: Id) -> Option<&Arc<K>> {
        slots.get(id as usize).and_then(Option::as_ref)
    }

    fn is(obj: &K, namespace: Option<&str>, name: &str) -> bool {
        let meta = obj.meta();
        meta.name.as_deref().unwrap_or_default() == name && meta.namespace.as_deref() == namespace
    }

    /// The id of the object with this namespace and name.
    fn find(&self, namespace: Option<&str>, name: &str) -> Option<Id> {
        let hash = Self::hash(&self.hasher, namespace, name);
        self.by_key
            .find(hash, |&id| {
                Self::object(&self.slots, id).is_some_and(|o| Self::is(o, namespace, name))
            })
            .copied()
    }

    /// The id of the stored object with `obj`'s namespace and name.
    fn find_object(&self, obj: &K) -> Option<Id> {
        let meta = obj.meta();
        self.find(
            meta.namespace.as_deref(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }

    fn find_key(&self, key: &ObjectKey) -> Option<Id> {
        self.find(key.namespace.as_deref(), &key.name)
    }

    /// Puts a new object (no object with its key is stored) in a slot; returns its id.
    fn insert(&mut self, obj: Arc<K>) -> Id {
        let hash = Self::hash_of(&self.hasher, &obj);
        let id = match self.free.pop() {
            Some(id) => {
                if let Some(slot) = self.slots.get_mut(id as usize) {
                    *slot = Some(obj);
                }
                id
            }
            None => {
                // More than four billion objects of one kind do not fit in memory anyway.
                let id = Id::try_from(self.slots.len()).unwrap_or(Id::MAX);
                self.slots.push(Some(obj));
                id
            }
        };
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.by_key.insert_unique(hash, id, |&id| {
            Self::object(slots, id).map_or(0, |o| Self::hash_of(hasher, o))
        });
        id
    }

    /// Takes the object with this key out of its slot.
    fn remove(&mut self, key: &ObjectKey) -> Option<(Id, Arc<K>)> {
        let (namespace, name) = (key.namespace.as_deref(), key.name.as_str());
        let hash = Self::hash(&self.hasher, namespace, name);
        let slots = &self.slots;
        let entry = self
            .by_key
            .find_entry(hash, |&id| {
                Self::object(slots, id).is_some_and(|o| Self::is(o, namespace, name))
            })
            .ok()?;
        let (id, _) = entry.remove();
        let obj = self.slots.get_mut(id as usize)?.take()?;
        self.free.push(id);
        Some((id, obj))
    }

    fn objects(&self) -> impl Iterator<Item = &Arc<K>> {
        self.slots.iter().flatten()
    }

    fn collect<'a>(&self, ids: impl IntoIterator<Item = &'a Id>) -> Vec<Arc<K>> {
        ids.into_iter()
            .filter_map(|&id| Self::object(&self.slots, id).cloned())
            .collect()
    }
}

impl<K> std::fmt::Debug for MemoryStore<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("len", &self.read().by_key.len())
            .field(
                "indexers",
                &self
                    .indexers
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .map(|(n, _)| n.clone())
                    .collect::<Vec<_>>(),
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
            indexers: RwLock::new(Arc::from([])),
        }
    }

    /// Adds a named index; [`Store::by_index`](super::Store::by_index) queries it (see
    /// [`LocalStore::add_indexer`](super::LocalStore::add_indexer) to add one to a store in use).
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
    pub fn indexer(self, name: impl Into<String>, indexer: Indexer<K>) -> Self {
        let _ = self.add(&name.into(), indexer);
        self
    }

    /// The custom indexers now.
    fn indexers(&self) -> Indexers<K> {
        Arc::clone(&self.indexers.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Adds indexer `name` and indexes the objects cached with it.
    fn add(&self, name: &str, indexer: Indexer<K>) -> AddIndex {
        let mut inner = self.write();
        let mut indexers = self.indexers.write().unwrap_or_else(|e| e.into_inner());
        if indexers.iter().any(|(n, _)| n == name) {
            return AddIndex::Exists;
        }
        Self::index_with(&mut inner, name, &indexer);
        let mut grown = indexers.to_vec();
        grown.push((name.to_owned(), indexer));
        *indexers = grown.into();
        AddIndex::Added
    }

    /// Indexes every object of `inner` with indexer `name`.
    fn index_with(inner: &mut Inner<K>, name: &str, indexer: &Indexer<K>) {
        let mut postings = Postings::new();
        for (id, slot) in inner.slots.iter().enumerate() {
            let (Some(obj), Ok(id)) = (slot, Id::try_from(id)) else {
                continue;
            };
            for value in indexer(obj) {
                postings.entry(value.into()).or_default().insert(id);
            }
        }
        inner.custom.insert(name.to_owned(), postings);
    }

    /// The index entries of an object: (namespace, labels, owners, custom).
    fn index_entries(indexers: &[(String, Indexer<K>)], obj: &K) -> Entries {
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
            custom: indexers
                .iter()
                .map(|(name, f)| (name.clone(), f(obj)))
                .collect(),
        }
    }

    fn unindex(inner: &mut Inner<K>, id: Id, entries: Entries) {
        fn remove(postings: &mut Postings, value: &str, id: Id) {
            if let Some(set) = postings.get_mut(value) {
                set.remove(&id);
                if set.is_empty() {
                    postings.remove(value);
                } else if set.capacity() > set.len() * 4 + 16 {
                    set.shrink_to(set.len() * 2);
                }
            }
        }
        if let Some(ns) = &entries.namespace {
            remove(&mut inner.by_namespace, ns, id);
        }
        for l in &entries.labels {
            remove(&mut inner.by_label, l, id);
        }
        for o in &entries.owners {
            remove(&mut inner.by_owner, o, id);
        }
        for (name, values) in &entries.custom {
            if let Some(postings) = inner.custom.get_mut(name) {
                for v in values {
                    remove(postings, v, id);
                }
            }
        }
    }

    fn index(inner: &mut Inner<K>, id: Id, entries: Entries) {
        fn add(postings: &mut Postings, value: String, id: Id) {
            postings.entry(value.into()).or_default().insert(id);
        }
        if let Some(ns) = entries.namespace {
            add(&mut inner.by_namespace, ns, id);
        }
        for l in entries.labels {
            add(&mut inner.by_label, l, id);
        }
        for o in entries.owners {
            add(&mut inner.by_owner, o, id);
        }
        for (name, values) in entries.custom {
            let postings = inner.custom.entry(name).or_default();
            for v in values {
                add(postings, v, id);
            }
        }
    }

    /// Puts `obj` into `inner`, indexed; returns the object it replaced.
    fn put(indexers: &[(String, Indexer<K>)], inner: &mut Inner<K>, obj: Arc<K>) -> Option<Arc<K>> {
        let new_entries = Self::index_entries(indexers, &obj);
        let (id, previous) = match inner.find_object(&obj) {
            Some(id) => {
                let previous = inner
                    .slots
                    .get_mut(id as usize)
                    .and_then(|slot| slot.replace(obj));
                if let Some(old) = &previous {
                    Self::unindex(inner, id, Self::index_entries(indexers, old));
                }
                (id, previous)
            }
            None => (inner.insert(obj), None),
        };
        Self::index(inner, id, new_entries);
        previous
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
        let inner = self.read();
        let id = inner.find_key(key)?;
        Inner::object(&inner.slots, id).cloned()
    }

    fn list(&self) -> Vec<Arc<K>> {
        self.read().objects().cloned().collect()
    }

    fn list_selected(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>> {
        let inner = self.read();
        // Narrow the candidates with the smallest posting list among the namespace and the
        // selector's equality requirements, then check the full selector on each candidate.
        let mut postings: Vec<Option<&HashSet<Id>>> = Vec::new();
        if let Some(ns) = namespace {
            postings.push(inner.by_namespace.get(ns));
        }
        for expr in selector.clone() {
            if let Expression::Equal(k, v) = &expr {
                postings.push(inner.by_label.get(label_posting(k, v).as_str()));
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
            Some(ids) => inner.collect(ids).into_iter().filter(matches).collect(),
            None => inner.objects().filter(|o| matches(o)).cloned().collect(),
        }
    }

    fn owned_by(&self, owner_uid: &str) -> Vec<Arc<K>> {
        let inner = self.read();
        inner
            .by_owner
            .get(owner_uid)
            .map(|ids| inner.collect(ids))
            .unwrap_or_default()
    }

    fn add_indexer(&self, name: &str, indexer: Indexer<K>) -> AddIndex {
        self.add(name, indexer)
    }

    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        let inner = self.read();
        inner
            .custom
            .get(index)
            .and_then(|postings| postings.get(value))
            .map(|ids| inner.collect(ids))
            .unwrap_or_default()
    }

    fn len(&self) -> usize {
        self.read().by_key.len()
    }

    fn apply(&self, obj: Arc<K>) -> Option<Arc<K>> {
        let mut inner = self.write();
        Self::put(&self.indexers(), &mut inner, obj)
    }

    fn delete(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let mut inner = self.write();
        let (id, old) = inner.remove(key)?;
        let entries = Self::index_entries(&self.indexers(), &old);
        Self::unindex(&mut inner, id, entries);
        Some(old)
    }

    fn replace(&self, objects: Vec<Arc<K>>) -> Vec<Arc<K>> {
        let indexers = self.indexers();
        let mut fresh = Inner::default();
        fresh.slots.reserve_exact(objects.len());
        for obj in objects {
            Self::put(&indexers, &mut fresh, obj);
        }
        let mut inner = self.write();
        // An indexer added meanwhile (they only grow) indexes the fresh objects too.
        for (name, indexer) in self.indexers().iter().skip(indexers.len()) {
            Self::index_with(&mut fresh, name, indexer);
        }
        let old = std::mem::replace(&mut *inner, fresh);
        old.slots
            .into_iter()
            .flatten()
            .filter(|o| inner.find_object(o).is_none())
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
    fn freed_slots_should_be_reused_without_mixing_objects_up() {
        let store = MemoryStore::new();
        for i in 0..100 {
            let ns = if i % 2 == 0 { "a" } else { "b" };
            store.apply(cm(ns, &format!("o{i}"), &[("n", &i.to_string())], None));
        }
        for i in (0..100).step_by(3) {
            let ns = if i % 2 == 0 { "a" } else { "b" };
            assert!(
                store
                    .delete(&ObjectKey::namespaced(ns, format!("o{i}")))
                    .is_some()
            );
        }
        // New objects take the freed slots; a name in the other namespace is another object.
        for i in 0..34 {
            store.apply(cm("c", &format!("o{i}"), &[("n", "new")], Some("owner")));
        }
        assert_eq!(store.len(), 100 - 34 + 34);
        assert_eq!(store.owned_by("owner").len(), 34);
        let new: Selector = [("n", "new")].into_iter().collect();
        assert_eq!(store.list_selected(Some("c"), &new).len(), 34);
        assert!(store.list_selected(Some("a"), &new).is_empty());
        for i in 0..100 {
            let ns = if i % 2 == 0 { "a" } else { "b" };
            let got = store.get(&ObjectKey::namespaced(ns, format!("o{i}")));
            if i % 3 == 0 {
                assert!(got.is_none(), "o{i} was deleted");
            } else {
                let got = got.unwrap();
                assert_eq!(got.metadata.namespace.as_deref(), Some(ns));
                assert_eq!(got.metadata.labels.as_ref().unwrap()["n"], i.to_string());
            }
        }
        let mine: Selector = [("n", "4")].into_iter().collect();
        assert_eq!(names(store.list_selected(Some("a"), &mine)), ["o4"]);
        assert_eq!(store.list().len(), 100);
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

    #[test]
    fn an_indexer_added_to_a_store_in_use_should_index_what_it_holds_and_what_comes() {
        let store = MemoryStore::<ConfigMap>::new();
        let by_ns: Indexer<ConfigMap> =
            Arc::new(|c: &ConfigMap| c.metadata.namespace.clone().into_iter().collect());
        store.apply(cm("a", "x", &[], None));
        assert_eq!(store.add_indexer("ns", Arc::clone(&by_ns)), AddIndex::Added);
        assert_eq!(store.add_indexer("ns", by_ns), AddIndex::Exists);
        assert_eq!(names(store.by_index("ns", "a")), ["x"]);
        store.apply(cm("a", "y", &[], None));
        assert_eq!(names(store.by_index("ns", "a")), ["x", "y"]);
        // A relist keeps the index.
        store.replace(vec![cm("b", "z", &[], None)]);
        assert!(store.by_index("ns", "a").is_empty());
        assert_eq!(names(store.by_index("ns", "b")), ["z"]);
        store.delete(&ObjectKey::namespaced("b", "z"));
        assert!(store.by_index("ns", "b").is_empty());
    }
}
