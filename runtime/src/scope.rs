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
pub trait Kind: AnyKind + Resource<DynamicType = (), Scope: Scoped> {}

#[diagnostic::do_not_recommend]
impl<K> Kind for K where K: AnyKind + Resource<DynamicType = (), Scope: Scoped> {}

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

/// A kind the runtime can watch whose type information may be known only at run time: every
/// static [`Kind`], and [`DynamicObject`](kube::api::DynamicObject) with the
/// [`ApiResource`](kube::api::ApiResource) of its [`KindType`].
pub trait AnyKind:
    Resource<DynamicType: Clone + Debug + Send + Sync + 'static>
    + Clone
    + DeserializeOwned
    + serde::Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> AnyKind for K where
    K: Resource<DynamicType: Clone + Debug + Send + Sync + 'static>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// What generic code needs to know of a kind at run time: its `DynamicType` (`()` for a static
/// kind, the `ApiResource` of a `DynamicObject`) and whether its objects live in namespaces.
pub struct KindType<K: Resource> {
    dt: K::DynamicType,
    namespaced: bool,
    /// Builds an [`Api`] in a namespace (or all): kube's constructors differ by scope.
    make: ApiMaker<K>,
}

/// How a [`KindType`] builds an [`Api`].
type ApiMaker<K> = fn(Client, Option<&str>, &<K as Resource>::DynamicType) -> Api<K>;

impl<K: Resource<DynamicType: Clone>> Clone for KindType<K> {
    fn clone(&self) -> Self {
        Self {
            dt: self.dt.clone(),
            namespaced: self.namespaced,
            make: self.make,
        }
    }
}

impl<K: Resource<DynamicType: Debug>> Debug for KindType<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindType")
            .field("dt", &self.dt)
            .field("namespaced", &self.namespaced)
            .finish()
    }
}

impl<K: Resource<DynamicType = (), Scope: Scoped>> KindType<K> {
    /// The type information of a static kind.
    pub fn of() -> Self {
        Self {
            dt: (),
            namespaced: <K::Scope as Scoped>::NAMESPACED,
            make: |client, namespace, ()| <K::Scope as Scoped>::api::<K>(client, namespace),
        }
    }
}

impl<K> KindType<K>
where
    K: Resource<DynamicType = kube::api::ApiResource, Scope = kube::core::DynamicResourceScope>,
{
    /// The type information of a kind known at run time (from discovery, a configuration
    /// file): its resource, and whether its objects live in namespaces. `K` is a
    /// `DynamicObject` (or the metadata of one, `PartialObjectMeta<DynamicObject>`).
    pub fn dynamic(resource: kube::api::ApiResource, namespaced: bool) -> Self {
        Self {
            dt: resource,
            namespaced,
            make: |client, namespace, resource| match namespace {
                Some(ns) => Api::namespaced_with(client, ns, resource),
                None => Api::all_with(client, resource),
            },
        }
    }
}

impl<K: Resource> KindType<K> {
    /// The `DynamicType`.
    pub fn dynamic_type(&self) -> &K::DynamicType {
        &self.dt
    }

    /// Whether objects of the kind live in namespaces.
    pub fn namespaced(&self) -> bool {
        self.namespaced
    }

    /// The kind (`ConfigMap`).
    pub fn kind(&self) -> std::borrow::Cow<'_, str> {
        K::kind(&self.dt)
    }

    /// The group (empty for the core group).
    pub fn group(&self) -> std::borrow::Cow<'_, str> {
        K::group(&self.dt)
    }

    /// The version.
    pub fn version(&self) -> std::borrow::Cow<'_, str> {
        K::version(&self.dt)
    }

    /// The `apiVersion` (`apps/v1`).
    pub fn api_version(&self) -> std::borrow::Cow<'_, str> {
        K::api_version(&self.dt)
    }

    /// The path of the kind's objects in `namespace` (all namespaces for `None`, and for a
    /// cluster-scoped kind).
    pub fn url_path(&self, namespace: Option<&str>) -> String {
        K::url_path(&self.dt, namespace.filter(|_| self.namespaced))
    }

    /// An [`Api`] for the kind in `namespace` (`None`: all namespaces; ignored for a
    /// cluster-scoped kind).
    pub fn api(&self, client: Client, namespace: Option<&str>) -> Api<K> {
        (self.make)(client, namespace.filter(|_| self.namespaced), &self.dt)
    }

    /// The kind as data: what a `DynamicObject`'s [`Api`] of it needs (code that is the same
    /// for every kind takes this instead of being generic over `K`).
    pub fn api_resource(&self) -> kube::api::ApiResource {
        kube::api::ApiResource {
            group: K::group(&self.dt).into_owned(),
            version: K::version(&self.dt).into_owned(),
            api_version: K::api_version(&self.dt).into_owned(),
            kind: K::kind(&self.dt).into_owned(),
            plural: K::plural(&self.dt).into_owned(),
        }
    }

    /// The same kind as data (`D`: `DynamicObject`, or its metadata): code that is the same for
    /// every kind takes this and is compiled once, not once per `K`.
    pub fn erased<D>(&self) -> KindType<D>
    where
        D: Resource<DynamicType = kube::api::ApiResource, Scope = kube::core::DynamicResourceScope>,
    {
        KindType::dynamic(self.api_resource(), self.namespaced)
    }

    /// The reference to `obj` (of an event about it).
    pub fn object_ref(&self, obj: &K) -> k8s_openapi::api::core::v1::ObjectReference {
        obj.object_ref(&self.dt)
    }
}
