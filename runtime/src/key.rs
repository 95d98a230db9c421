//! [`ObjectKey`]: the namespace/name pair that identifies an object within one kind.

use std::fmt;

use kube::Resource;

/// Identifies one object of a kind: its namespace (`None` for cluster-scoped kinds) and name.
///
/// This is what work queues, caches and reconcilers pass around (controller-runtime's
/// `NamespacedName`). It displays as `namespace/name`, or `name` for cluster-scoped objects.
///
/// # Examples
///
/// ```
/// use kubeforge::ObjectKey;
///
/// let key = ObjectKey::namespaced("shop", "frontend");
/// assert_eq!(key.to_string(), "shop/frontend");
/// assert_eq!(ObjectKey::cluster("node-1").to_string(), "node-1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace, or `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

impl ObjectKey {
    /// The key of a namespaced object.
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// The key of a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self {
            namespace: None,
            name: name.into(),
        }
    }

    /// The key of an object, from its metadata (an object without a name gets an empty name).
    pub fn of<K: Resource>(obj: &K) -> Self {
        let meta = obj.meta();
        Self {
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}
