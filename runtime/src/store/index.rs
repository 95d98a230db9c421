//! [`KeyIndex`]: what a [`RemoteStore`](super::RemoteStore) keeps in memory of each object — its
//! key, `resourceVersion`, labels and owners' UIDs — in as few bytes as that takes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kube::api::ObjectMeta;
use kube::core::{Selector, SelectorExt};

use super::interned::{Key, Strings};
use crate::ObjectKey;

/// The keys of a remote store's objects with what its reads need without I/O.
///
/// Per object: the name, the `resourceVersion`, the labels and the owners' UIDs; namespaces,
/// label keys and values and owner UIDs are interned (one allocation per distinct value however
/// many objects share it). About 100 bytes per object plus its name, version and distinct
/// values, against about 1.5 KiB for the object's metadata with the posting lists of a
/// [`MemoryStore`](super::MemoryStore). There are no secondary indexes: selecting by namespace
/// and labels and finding the objects of an owner scan the keys (a few milliseconds for 50,000
/// objects), before the bodies are read from the backend.
#[derive(Default)]
pub(super) struct KeyIndex {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    objects: HashMap<Key, Entry>,
    strings: Strings,
}

struct Entry {
    resource_version: Box<str>,
    labels: Box<[(Arc<str>, Arc<str>)]>,
    owners: Box<[Arc<str>]>,
}

impl Inner {
    fn lookup(&self, key: &ObjectKey) -> Option<Key> {
        Key::lookup(&self.strings, key)
    }

    fn intern(&mut self, value: &str) -> Arc<str> {
        self.strings.intern(value)
    }

    fn entry(&mut self, meta: &ObjectMeta) -> (Key, Entry) {
        let key = Key::new(
            &mut self.strings,
            meta.namespace.as_deref(),
            meta.name.as_deref(),
        );
        let labels = meta
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (self.intern(k), self.intern(v)))
            .collect();
        let owners = meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| self.intern(&o.uid))
            .collect();
        let entry = Entry {
            resource_version: meta.resource_version.as_deref().unwrap_or_default().into(),
            labels,
            owners,
        };
        (key, entry)
    }

    /// Drops interned strings no object uses any more (after removals).
    fn sweep(&mut self) {
        self.strings.sweep();
    }
}

impl Entry {
    fn selected(&self, selector: &Selector) -> bool {
        if selector.selects_all() {
            return true;
        }
        let labels: BTreeMap<String, String> = self
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        selector.matches(&labels)
    }
}

impl KeyIndex {
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn len(&self) -> usize {
        self.read().objects.len()
    }

    pub(super) fn resource_version(&self, key: &ObjectKey) -> Option<String> {
        let inner = self.read();
        let key = inner.lookup(key)?;
        inner
            .objects
            .get(&key)
            .map(|e| e.resource_version.to_string())
    }

    /// Records the object of `meta`; whether it was known before.
    pub(super) fn apply(&self, meta: &ObjectMeta) -> bool {
        let mut inner = self.write();
        let (key, entry) = inner.entry(meta);
        inner.objects.insert(key, entry).is_some()
    }

    /// Forgets `key`; whether it was known.
    pub(super) fn delete(&self, key: &ObjectKey) -> bool {
        let mut inner = self.write();
        let Some(key) = inner.lookup(key) else {
            return false;
        };
        let known = inner.objects.remove(&key).is_some();
        if known {
            drop(key);
            inner.sweep_if_sparse();
        }
        known
    }

    /// Keeps exactly the objects of `metas`; the keys of those it dropped.
    pub(super) fn replace<'a>(
        &self,
        metas: impl IntoIterator<Item = &'a ObjectMeta>,
    ) -> Vec<ObjectKey> {
        let mut inner = self.write();
        let mut fresh = HashMap::new();
        for meta in metas {
            let (key, entry) = inner.entry(meta);
            fresh.insert(key, entry);
        }
        let old = std::mem::replace(&mut inner.objects, fresh);
        let removed = old
            .into_keys()
            .filter(|k| !inner.objects.contains_key(k))
            .map(|k| k.object_key())
            .collect();
        inner.sweep();
        removed
    }

    /// Every key.
    pub(super) fn keys(&self) -> Vec<ObjectKey> {
        self.read().objects.keys().map(Key::object_key).collect()
    }

    /// The keys in `namespace` (all namespaces: `None`) whose labels `selector` matches.
    pub(super) fn selected(&self, namespace: Option<&str>, selector: &Selector) -> Vec<ObjectKey> {
        let inner = self.read();
        inner
            .objects
            .iter()
            .filter(|(k, _)| namespace.is_none_or(|ns| k.namespace.as_deref() == Some(ns)))
            .filter(|(_, e)| e.selected(selector))
            .map(|(k, _)| k.object_key())
            .collect()
    }

    /// The keys of the objects with an owner reference to `owner_uid`.
    pub(super) fn owned_by(&self, owner_uid: &str) -> Vec<ObjectKey> {
        let inner = self.read();
        inner
            .objects
            .iter()
            .filter(|(_, e)| e.owners.iter().any(|o| &**o == owner_uid))
            .map(|(k, _)| k.object_key())
            .collect()
    }
}

impl Inner {
    /// Sweeps the interned strings once they outnumber the objects by far (deletions leave
    /// unused ones behind; a sweep per deletion would be quadratic).
    fn sweep_if_sparse(&mut self) {
        if self.strings.len() > 64 && self.strings.len() > 4 * self.objects.len() {
            self.sweep();
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn meta(
        ns: &str,
        name: &str,
        rv: &str,
        labels: &[(&str, &str)],
        owner: Option<&str>,
    ) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(ns.to_owned()),
            name: Some(name.to_owned()),
            resource_version: Some(rv.to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            owner_references: owner.map(|uid| {
                vec![OwnerReference {
                    uid: uid.to_owned(),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        }
    }

    fn names(mut keys: Vec<ObjectKey>) -> Vec<String> {
        keys.sort_by(|a, b| a.name.cmp(&b.name));
        keys.into_iter().map(|k| k.name).collect()
    }

    #[test]
    fn index_should_answer_versions_selections_and_owners() {
        let index = KeyIndex::default();
        assert!(!index.apply(&meta("a", "x", "1", &[("app", "web")], Some("u1"))));
        assert!(!index.apply(&meta("a", "y", "2", &[("app", "db")], None)));
        assert!(!index.apply(&meta("b", "z", "3", &[("app", "web")], Some("u1"))));
        assert!(index.apply(&meta("a", "x", "4", &[("app", "web")], Some("u1"))));
        assert_eq!(index.len(), 3);
        assert_eq!(
            index
                .resource_version(&ObjectKey::namespaced("a", "x"))
                .as_deref(),
            Some("4")
        );
        assert_eq!(
            index.resource_version(&ObjectKey::namespaced("c", "x")),
            None
        );
        let web = Selector::from_iter(
            [("app", "web")]
                .map(|(k, v)| kube::core::Expression::Equal(k.to_owned(), v.to_owned())),
        );
        assert_eq!(names(index.selected(None, &web)), ["x", "z"]);
        assert_eq!(names(index.selected(Some("a"), &web)), ["x"]);
        assert_eq!(
            names(index.selected(Some("a"), &Selector::default())),
            ["x", "y"]
        );
        assert_eq!(names(index.owned_by("u1")), ["x", "z"]);

        assert!(index.delete(&ObjectKey::namespaced("b", "z")));
        assert!(!index.delete(&ObjectKey::namespaced("b", "z")));
        let removed = index.replace([&meta("a", "y", "5", &[], None)]);
        assert_eq!(names(removed), ["x"]);
        assert_eq!(names(index.keys()), ["y"]);
        assert!(index.owned_by("u1").is_empty());
        // Only what the one object left uses stays interned.
        assert_eq!(index.read().strings.len(), 1, "the namespace `a`");
    }
}
