//! Interned strings and object keys, shared by the compact in-memory stores ([`SkeletonStore`]
//! and the remote store's key index): one allocation per distinct namespace (or label, owner, ..)
//! however many objects share it.
//!
//! [`SkeletonStore`]: super::SkeletonStore

use std::collections::HashSet;
use std::sync::Arc;

use crate::ObjectKey;

/// A set of interned strings.
#[derive(Default)]
pub(super) struct Strings(HashSet<Arc<str>>);

impl Strings {
    /// The shared copy of `value`, added if new.
    pub(super) fn intern(&mut self, value: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(value) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(value);
        self.0.insert(Arc::clone(&shared));
        shared
    }

    /// Drops the strings nothing but the set holds any more.
    pub(super) fn sweep(&mut self) {
        self.0.retain(|s| Arc::strong_count(s) > 1);
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

/// An object's key with its namespace interned.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) namespace: Option<Arc<str>>,
    pub(super) name: Box<str>,
}

impl Key {
    /// The key of an object's `namespace` and `name`, interning the namespace.
    pub(super) fn new(strings: &mut Strings, namespace: Option<&str>, name: Option<&str>) -> Self {
        Key {
            namespace: namespace.map(|ns| strings.intern(ns)),
            name: name.unwrap_or_default().into(),
        }
    }

    /// The key of `key` if its namespace is known (else no object can have it).
    pub(super) fn lookup(strings: &Strings, key: &ObjectKey) -> Option<Self> {
        let namespace = match key.namespace.as_deref() {
            Some(ns) => Some(Arc::clone(strings.0.get(ns)?)),
            None => None,
        };
        Some(Key {
            namespace,
            name: key.name.as_str().into(),
        })
    }

    pub(super) fn object_key(&self) -> ObjectKey {
        ObjectKey {
            namespace: self.namespace.as_deref().map(str::to_owned),
            name: self.name.to_string(),
        }
    }
}
