//! [`Scoped`]: namespaced and cluster-scoped kinds handled by one generic code path.

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::{Api, Client, Resource};

/// Implemented by k8s-openapi's scope markers so generic code can tell namespaced kinds from
/// cluster-scoped ones and build the right [`Api`].
pub trait Scoped: Sized {
    /// Whether objects of this scope live in a namespace.
    const NAMESPACED: bool;

    /// An [`Api`] for `K` in `namespace` (ignored for cluster-scoped kinds; `None` for a
    /// namespaced kind means all namespaces, which can only list and watch).
    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>;
}

impl Scoped for NamespaceResourceScope {
    const NAMESPACED: bool = true;

    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
}

impl Scoped for ClusterResourceScope {
    const NAMESPACED: bool = false;

    fn api<K>(client: Client, _namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        Api::all(client)
    }
}
