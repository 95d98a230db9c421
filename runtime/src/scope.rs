//! [`Scoped`]: namespaced and cluster-scoped kinds handled by one generic code path; [`Kind`]:
//! what the runtime needs of a kind (re-exported as `kubeforge::controller::Kind`).

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use std::fmt::Debug;

use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

/// Everything the runtime needs of a kind it watches: a static Kubernetes resource with serde.
/// Implemented for every such type (k8s-openapi kinds, `#[custom_resource]` kinds,
/// `PartialObjectMeta<K>`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a Kubernetes kind kubeforge can watch",
    label = "not a Kubernetes kind",
    note = "name the type #[kubeforge::custom_resource(kind = \"...\")] generates (not its spec struct), or a k8s-openapi resource such as `ConfigMap`",
    note = "a kind implements `kube::Resource<DynamicType = ()>` with a `Scoped` scope, `Clone`, `Debug`, `Serialize`, `DeserializeOwned`, `Send` and `Sync`",
    note = "a #[kubeforge::view] is a kind when it has `metadata: ObjectMeta`; a view without it is a part of one"
)]
pub trait Kind:
    Resource<DynamicType = (), Scope: Scoped>
    + Clone
    + DeserializeOwned
    + serde::Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
}

#[diagnostic::do_not_recommend]
impl<K> Kind for K where
    K: Resource<DynamicType = (), Scope: Scoped>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + Debug
        + Send
        + Sync
        + 'static
{
}

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
