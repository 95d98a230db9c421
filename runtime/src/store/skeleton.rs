use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ObjectMeta;
use kube::core::{PartialObjectMeta, Selector, SelectorExt};

use super::LocalStore;
use super::interned::{Key, Strings};
use crate::ObjectKey;

/// A [`LocalStore`] that keeps, of each object, only its key, its `resourceVersion` and its owner
/// references: what a watch that only *triggers* reconciles of the owners needs (the controller's
/// `owns_uncached`), at a fraction of the memory of the objects themselves.
///
/// Reads return skeletons: [`PartialObjectMeta<C>`] whose metadata carries the name, namespace,
/// `resourceVersion` and owner references, and nothing else (no labels, no annotations).
/// Keeping the keys is what lets the informer notice objects deleted while its watch was down
/// (their owners are reconciled after the relist), which a store-less watch would miss.
///
/// Namespaces and the owners' `apiVersion` and `kind` are interned: one allocation per distinct
/// value, however many objects share it. Labels are not kept, so [`LocalStore::list_selected`] only
/// matches selectors that an object without labels matches; [`LocalStore::by_index`] finds nothing;
/// [`LocalStore::owned_by`] scans every object.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::ObjectMeta;
/// use kube::core::PartialObjectMeta;
/// use kubeforge::ObjectKey;
/// use kubeforge::store::{LocalStore, SkeletonStore};
///
/// let store = SkeletonStore::<ConfigMap>::new();
/// store.apply(Arc::new(PartialObjectMeta {
///     metadata: ObjectMeta {
///         name: Some("settings".into()),
///         namespace: Some("shop".into()),
///         resource_version: Some("42".into()),
///         labels: Some([("app".to_owned(), "web".to_owned())].into()),
///         ..Default::default()
///     },
///     ..Default::default()
/// }));
/// let kept = store.get(&ObjectKey::namespaced("shop", "settings")).unwrap();
/// assert_eq!(kept.metadata.resource_version.as_deref(), Some("42"));
/// assert_eq!(kept.metadata.labels, None);
/// ```
pub struct SkeletonStore<C> {
    inner: RwLock<Inner>,
    _kind: PhantomData<fn() -> C>,
}

#[derive(Default)]
struct Inner {
    objects: HashMap<Key, Bones>,
    /// Interned namespaces, owner `apiVersion`s and owner kinds.
    strings: Strings,
    /// Interned (`apiVersion`, `kind`) pairs of owners.
    owner_kinds: HashMap<OwnerKind, Arc<OwnerKind>>,
}

/// What is kept of an object besides its key: two allocations whatever its owners (about 100
/// bytes for an object with one owner, against 200 when each string was its own).
struct Bones {
    /// The `resourceVersion`, then each owner's name and uid, one after another.
    text: Box<str>,
    /// The `resourceVersion`'s length in `text` (`None`: the object had none).
    version: Option<u32>,
    owners: Box<[Owner]>,
}

/// An owner's `apiVersion` and `kind`.
type OwnerKind = (Arc<str>, Arc<str>);

struct Owner {
    kind: Arc<OwnerKind>,
    /// The lengths of the owner's name and uid in [`Bones::text`].
    name: u32,
    uid: u32,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

impl Inner {
    fn intern(&mut self, value: &str) -> Arc<str> {
        self.strings.intern(value)
    }

    /// The key of `key` if its namespace is known (else no object can have it).
    fn lookup(&self, key: &ObjectKey) -> Option<Key> {
        Key::lookup(&self.strings, key)
    }

    fn bones(&mut self, meta: &ObjectMeta) -> (Key, Bones) {
        let key = Key::new(
            &mut self.strings,
            meta.namespace.as_deref(),
            meta.name.as_deref(),
        );
        let references = meta.owner_references.as_deref().unwrap_or_default();
        let version = meta.resource_version.as_deref();
        let mut text = String::with_capacity(
            version.map_or(0, str::len)
                + references
                    .iter()
                    .map(|o| o.name.len() + o.uid.len())
                    .sum::<usize>(),
        );
        text.push_str(version.unwrap_or_default());
        let owners = references
            .iter()
            .map(|o| {
                text.push_str(&o.name);
                text.push_str(&o.uid);
                Owner {
                    kind: self.owner_kind(&o.api_version, &o.kind),
                    name: length(&o.name),
                    uid: length(&o.uid),
                    controller: o.controller,
                    block_owner_deletion: o.block_owner_deletion,
                }
            })
            .collect();
        let bones = Bones {
            text: text.into_boxed_str(),
            version: version.map(length),
            owners,
        };
        (key, bones)
    }

    /// The shared (`apiVersion`, `kind`) pair.
    fn owner_kind(&mut self, api_version: &str, kind: &str) -> Arc<OwnerKind> {
        let pair = (self.intern(api_version), self.intern(kind));
        Arc::clone(
            self.owner_kinds
                .entry(pair)
                .or_insert_with_key(|pair| Arc::new(pair.clone())),
        )
    }
}

/// A string's length as kept in [`Bones`] (a string of 4 GiB or more cannot be in an object
/// the apiserver served).
fn length(text: &str) -> u32 {
    u32::try_from(text.len()).unwrap_or(u32::MAX)
}

impl Bones {
    /// The `resourceVersion`, and each owner with its name and uid.
    fn parts(&self) -> (Option<&str>, impl Iterator<Item = (&Owner, &str, &str)>) {
        let version = self.version.map_or(0, |n| n as usize);
        let mut rest = self.text.get(version..).unwrap_or_default();
        let owners = self.owners.iter().map(move |owner| {
            let (name, tail) = rest
                .split_at_checked(owner.name as usize)
                .unwrap_or((rest, ""));
            let (uid, tail) = tail
                .split_at_checked(owner.uid as usize)
                .unwrap_or((tail, ""));
            rest = tail;
            (owner, name, uid)
        });
        (
            self.version
                .map(|_| self.text.get(..version).unwrap_or_default()),
            owners,
        )
    }

    /// Whether an owner of the object has this uid.
    fn owned_by(&self, owner_uid: &str) -> bool {
        self.parts().1.any(|(_, _, uid)| uid == owner_uid)
    }

    fn object<C>(&self, key: &Key) -> Arc<PartialObjectMeta<C>> {
        let (version, owners) = self.parts();
        let owners = (!self.owners.is_empty()).then(|| {
            owners
                .map(|(o, name, uid)| OwnerReference {
                    api_version: o.kind.0.to_string(),
                    kind: o.kind.1.to_string(),
                    name: name.to_owned(),
                    uid: uid.to_owned(),
                    controller: o.controller,
                    block_owner_deletion: o.block_owner_deletion,
                })
                .collect()
        });
        let meta = ObjectMeta {
            namespace: key.namespace.as_deref().map(str::to_owned),
            name: Some(key.name.to_string()),
            resource_version: version.map(str::to_owned),
            owner_references: owners,
            ..ObjectMeta::default()
        };
        Arc::new(PartialObjectMeta {
            types: None,
            metadata: meta,
            _phantom: PhantomData,
        })
    }
}

impl<C> std::fmt::Debug for SkeletonStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkeletonStore")
            .field("len", &self.read().objects.len())
            .finish()
    }
}

impl<C> Default for SkeletonStore<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C> SkeletonStore<C> {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            inner: RwLock::new(Inner::default()),
            _kind: PhantomData,
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        // Every write completes before it releases the lock: a poisoned lock is still consistent.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl<C: Send + Sync + 'static> LocalStore<PartialObjectMeta<C>> for SkeletonStore<C> {
    fn backend(&self) -> &'static str {
        "skeleton"
    }

    /// A list's objects are cut down to their bones as they arrive: the full objects of a whole
    /// list are never held at once.
    fn streams_lists(&self) -> bool {
        true
    }

    fn keys(&self) -> Vec<ObjectKey> {
        self.read().objects.keys().map(Key::object_key).collect()
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<PartialObjectMeta<C>>> {
        let inner = self.read();
        let key = inner.lookup(key)?;
        inner.objects.get(&key).map(|b| b.object(&key))
    }

    fn resource_version(&self, key: &ObjectKey) -> Option<String>
    where
        PartialObjectMeta<C>: kube::Resource,
    {
        let inner = self.read();
        let key = inner.lookup(key)?;
        inner.objects.get(&key)?.parts().0.map(str::to_owned)
    }

    fn list(&self) -> Vec<Arc<PartialObjectMeta<C>>> {
        let inner = self.read();
        inner.objects.iter().map(|(k, b)| b.object(k)).collect()
    }

    fn list_selected(
        &self,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Arc<PartialObjectMeta<C>>> {
        // Labels are not kept: every object is seen as having none.
        if !selector.matches(&std::collections::BTreeMap::new()) {
            return Vec::new();
        }
        let inner = self.read();
        inner
            .objects
            .iter()
            .filter(|(k, _)| namespace.is_none_or(|ns| k.namespace.as_deref() == Some(ns)))
            .map(|(k, b)| b.object(k))
            .collect()
    }

    fn owned_by(&self, owner_uid: &str) -> Vec<Arc<PartialObjectMeta<C>>> {
        let inner = self.read();
        inner
            .objects
            .iter()
            .filter(|(_, b)| b.owned_by(owner_uid))
            .map(|(k, b)| b.object(k))
            .collect()
    }

    fn by_index(&self, _index: &str, _value: &str) -> Vec<Arc<PartialObjectMeta<C>>> {
        Vec::new()
    }

    fn len(&self) -> usize {
        self.read().objects.len()
    }

    fn apply(&self, obj: Arc<PartialObjectMeta<C>>) -> Option<Arc<PartialObjectMeta<C>>> {
        let mut inner = self.write();
        let (key, bones) = inner.bones(&obj.metadata);
        let previous = inner.objects.insert(key.clone(), bones);
        previous.map(|b| b.object(&key))
    }

    fn delete(&self, key: &ObjectKey) -> Option<Arc<PartialObjectMeta<C>>> {
        let mut inner = self.write();
        let key = inner.lookup(key)?;
        inner.objects.remove(&key).map(|b| b.object(&key))
    }

    fn replace(&self, objects: Vec<Arc<PartialObjectMeta<C>>>) -> Vec<Arc<PartialObjectMeta<C>>> {
        let mut inner = self.write();
        let mut fresh = HashMap::with_capacity(objects.len());
        for obj in objects {
            let (key, bones) = inner.bones(&obj.metadata);
            fresh.insert(key, bones);
        }
        let old = std::mem::replace(&mut inner.objects, fresh);
        old.into_iter()
            .filter(|(k, _)| !inner.objects.contains_key(k))
            .map(|(k, b)| b.object(&k))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::core::PartialObjectMeta;

    use super::*;

    type Meta = PartialObjectMeta<ConfigMap>;
    type Skeletons = SkeletonStore<ConfigMap>;

    fn obj(ns: &str, name: &str, rv: &str, owner_uid: Option<&str>) -> Arc<Meta> {
        Arc::new(PartialObjectMeta {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                annotations: Some([("note".to_owned(), "dropped".to_owned())].into()),
                owner_references: owner_uid.map(|uid| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "Deployment".into(),
                        name: format!("owner-{uid}"),
                        uid: uid.into(),
                        controller: Some(true),
                        block_owner_deletion: None,
                    }]
                }),
                ..ObjectMeta::default()
            },
            ..PartialObjectMeta::default()
        })
    }

    #[test]
    fn skeleton_store_should_keep_keys_versions_and_owners_only() {
        let store = Skeletons::new();
        assert!(store.apply(obj("a", "x", "1", Some("u1"))).is_none());
        let previous = store
            .apply(obj("a", "x", "2", Some("u1")))
            .expect("replaced");
        assert_eq!(previous.metadata.resource_version.as_deref(), Some("1"));

        let kept = store.get(&ObjectKey::namespaced("a", "x")).expect("kept");
        assert_eq!(kept.metadata.name.as_deref(), Some("x"));
        assert_eq!(kept.metadata.namespace.as_deref(), Some("a"));
        assert_eq!(kept.metadata.resource_version.as_deref(), Some("2"));
        assert_eq!(kept.metadata.labels, None);
        assert_eq!(kept.metadata.annotations, None);
        let owners = kept.metadata.owner_references.as_ref().expect("owners");
        assert_eq!(owners[0].name, "owner-u1");
        assert_eq!(owners[0].api_version, "apps/v1");
        assert_eq!(owners[0].controller, Some(true));

        let key = ObjectKey::namespaced("a", "x");
        assert_eq!(store.resource_version(&key).as_deref(), Some("2"));
        assert_eq!(
            store.resource_version(&ObjectKey::namespaced("b", "x")),
            None
        );
        assert!(store.get(&ObjectKey::namespaced("b", "x")).is_none());
        assert!(store.get(&ObjectKey::namespaced("a", "y")).is_none());
        assert_eq!(store.owned_by("u1").len(), 1);
        assert!(store.owned_by("u2").is_empty());
        assert!(store.by_index("any", "x").is_empty());
    }

    #[test]
    fn skeleton_store_should_give_back_every_owner_and_a_missing_version() {
        let store = Skeletons::new();
        let owner = |kind: &str, name: &str, uid: &str, controller| OwnerReference {
            api_version: "example.com/v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller,
            block_owner_deletion: Some(false),
        };
        let owners = vec![
            owner("Gadget", "g-ü", "0000-1", Some(true)),
            owner("Widget", "", "uid-2", None),
            owner("Gadget", "third", "", Some(false)),
        ];
        store.apply(Arc::new(PartialObjectMeta {
            metadata: ObjectMeta {
                namespace: Some("a".into()),
                name: Some("many".into()),
                owner_references: Some(owners.clone()),
                ..ObjectMeta::default()
            },
            ..PartialObjectMeta::default()
        }));
        let key = ObjectKey::namespaced("a", "many");
        let kept = store.get(&key).expect("kept");
        assert_eq!(kept.metadata.owner_references, Some(owners));
        assert_eq!(kept.metadata.resource_version, None);
        assert_eq!(store.resource_version(&key), None);
        assert_eq!(store.owned_by("uid-2").len(), 1);
        assert_eq!(store.owned_by("").len(), 1, "the third owner's empty uid");
        assert!(store.owned_by("0000").is_empty(), "a prefix is not a uid");
        // Without owners, the version alone.
        store.apply(obj("a", "plain", "77", None));
        let plain = store
            .get(&ObjectKey::namespaced("a", "plain"))
            .expect("kept");
        assert_eq!(plain.metadata.resource_version.as_deref(), Some("77"));
        assert_eq!(plain.metadata.owner_references, None);
    }

    #[test]
    fn skeleton_store_should_report_what_a_relist_removed() {
        let store = Skeletons::new();
        store.apply(obj("a", "x", "1", None));
        store.apply(obj("a", "y", "1", Some("u")));
        store.apply(obj("b", "x", "1", None));
        // What a streamed relist compares with the keys it saw.
        assert!(store.streams_lists());
        let mut keys: Vec<_> = store.keys().iter().map(ToString::to_string).collect();
        keys.sort();
        assert_eq!(keys, ["a/x", "a/y", "b/x"]);
        let removed = store.replace(vec![obj("a", "x", "3", None)]);
        let mut names: Vec<_> = removed
            .iter()
            .map(|o| ObjectKey::of(o.as_ref()).to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["a/y", "b/x"]);
        // The removed skeleton still names its owner: the owner is what gets reconciled.
        let y = removed
            .iter()
            .find(|o| o.metadata.name.as_deref() == Some("y"))
            .expect("y removed");
        assert_eq!(
            y.metadata.owner_references.as_ref().expect("owner")[0].uid,
            "u"
        );
        assert_eq!(store.len(), 1);
        let deleted = store
            .delete(&ObjectKey::namespaced("a", "x"))
            .expect("was there");
        assert_eq!(deleted.metadata.resource_version.as_deref(), Some("3"));
        assert!(store.is_empty());
    }

    #[test]
    fn skeleton_store_should_match_selectors_as_if_objects_had_no_labels() {
        let store = Skeletons::new();
        store.apply(obj("a", "x", "1", None));
        store.apply(obj("b", "x", "1", None));
        assert_eq!(store.list_selected(None, &Selector::default()).len(), 2);
        assert_eq!(
            store.list_selected(Some("a"), &Selector::default()).len(),
            1
        );
        let app_web: Selector = [("app", "web")].into_iter().collect();
        assert!(store.list_selected(None, &app_web).is_empty());
        assert_eq!(store.list().len(), 2);
    }
}
