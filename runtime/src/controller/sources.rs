//! How a controller watches its owned and watched kinds: [`Owns`] and [`Watches`].

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::predicate::MetadataPredicate;
use crate::ObjectKey;
use crate::informer::InformerConfig;

/// How [`Controller::owns`](super::Controller::owns) watches a child kind: what the cache keeps
/// of the children, which owner references count, and the informer options.
///
/// | weight | the cache keeps | read the children with |
/// |---|---|---|
/// | [`Owns::full`] (the default) | every child in full | `cache.store::<C>(..)` |
/// | [`Owns::metadata`] | their metadata (`PartialObjectMeta<C>`, no `data`/`spec`/`status`) | `cache.store::<PartialObjectMeta<C>>(..)` |
/// | [`Owns::uncached`] | keys, `resourceVersion`s and owner references only ([`SkeletonStore`](crate::store::SkeletonStore), a few hundred bytes per child) | not readable: for reconcilers that write children (server-side apply) without reading them back |
///
/// Each reconciles the owner when a child changes or disappears, also across a watch outage.
///
/// ```
/// use kubeforge::controller::Owns;
/// use kubeforge::informer::InformerConfig;
/// let lean = Owns::uncached().informer(InformerConfig::default().labels("app=web"));
/// let shared = Owns::full().any_owner();
/// # let _ = (lean, shared);
/// ```
#[derive(Clone, Default)]
pub struct Owns {
    pub(super) weight: Weight,
    pub(super) any_owner: bool,
    pub(super) informer: Option<InformerConfig>,
    pub(super) predicates: Vec<Arc<dyn MetadataPredicate>>,
}

impl Debug for Owns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owns")
            .field("weight", &self.weight)
            .field("any_owner", &self.any_owner)
            .field("informer", &self.informer)
            .field("predicates", &self.predicates.len())
            .finish()
    }
}

/// What the cache keeps of an owned kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Weight {
    #[default]
    Full,
    Metadata,
    Uncached,
}

impl Owns {
    /// Cache the children in full.
    pub fn full() -> Self {
        Self::default()
    }

    /// Cache the children's metadata only (watched as `PartialObjectMeta<C>`).
    pub fn metadata() -> Self {
        Self {
            weight: Weight::Metadata,
            ..Self::default()
        }
    }

    /// Do not cache the children: keep only what leads to their owners.
    pub fn uncached() -> Self {
        Self {
            weight: Weight::Uncached,
            ..Self::default()
        }
    }

    /// Every owner reference to the controller's kind counts, not only the one marked
    /// `controller: true`.
    #[must_use]
    pub fn any_owner(mut self) -> Self {
        self.any_owner = true;
        self
    }

    /// Watch the children with these informer options (selectors, resync, ...) instead of the
    /// wiring's [`informer_defaults`](super::Wiring::informer_defaults).
    #[must_use]
    pub fn informer(mut self, config: InformerConfig) -> Self {
        self.informer = Some(config);
        self
    }

    /// Reconcile the owner on a child's update only if `predicate` accepts it (several: if any
    /// does); creations and deletions always count. The controller's own
    /// [`predicate`](super::Controller::predicate)s apply to its primary kind only.
    #[must_use]
    pub fn predicate(mut self, predicate: impl MetadataPredicate) -> Self {
        self.predicates.push(Arc::new(predicate));
        self
    }
}

/// Maps a watched object to the keys of the primaries to reconcile.
pub(super) enum Mapper<W> {
    /// Answers at once (reads nothing, or only what it captured).
    Sync(SyncMapper<W>),
    /// May await (reads of a cache store, which can be remote).
    Async(AsyncMapper<W>),
}

pub(super) type SyncMapper<W> = Arc<dyn Fn(&W) -> Vec<ObjectKey> + Send + Sync>;
pub(super) type AsyncMapper<W> =
    Arc<dyn Fn(Arc<W>) -> BoxFuture<'static, Vec<ObjectKey>> + Send + Sync>;

/// How [`Controller::watches`](super::Controller::watches) watches a kind: the mapper from a
/// watched object to the primaries to reconcile (for an update, the keys of the old and the new
/// version count), and the informer options.
///
/// ```
/// use k8s_openapi::api::core::v1::Secret;
/// use kubeforge::ObjectKey;
/// use kubeforge::controller::Watches;
/// // Reconcile the primary named in the Secret's `app` label, in the Secret's namespace.
/// let by_label = Watches::map(|secret: &Secret| {
///     let app = secret.metadata.labels.as_ref().and_then(|l| l.get("app"));
///     let ns = secret.metadata.namespace.as_deref().unwrap_or_default();
///     app.map(|app| ObjectKey::namespaced(ns, app)).into_iter().collect()
/// });
/// # let _ = by_label;
/// ```
pub struct Watches<W> {
    pub(super) mapper: Mapper<W>,
    pub(super) informer: Option<InformerConfig>,
    pub(super) predicates: Vec<Arc<dyn MetadataPredicate>>,
}

impl<W> Debug for Watches<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watches")
            .field("informer", &self.informer)
            .finish_non_exhaustive()
    }
}

impl<W> Watches<W> {
    /// Reconcile the keys `mapper` returns for each watched object.
    pub fn map(mapper: impl Fn(&W) -> Vec<ObjectKey> + Send + Sync + 'static) -> Self {
        Self {
            mapper: Mapper::Sync(Arc::new(mapper)),
            informer: None,
            predicates: Vec::new(),
        }
    }

    /// Reconcile the keys the future `mapper` returns resolves to, for each watched object: a
    /// mapper that reads cache stores (their reads are asynchronous, as a store can be remote).
    /// The events of the watched kind are mapped one at a time, in order.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    /// use kubeforge::ObjectKey;
    /// use kubeforge::cache::{Cache, Lookup};
    /// use kubeforge::controller::Watches;
    /// // Reconcile every cached ConfigMap of the Secret's namespace.
    /// fn every_config_map(cache: Cache) -> Watches<Secret> {
    ///     Watches::map_async(move |secret: Arc<Secret>| {
    ///         let cache = cache.clone();
    ///         async move {
    ///             let ns = secret.metadata.namespace.clone().unwrap_or_default();
    ///             let Ok(maps) = cache.store::<ConfigMap>(&Lookup::namespace(&ns)) else {
    ///                 return Vec::new();
    ///             };
    ///             let listed = maps.list().await.unwrap_or_default();
    ///             listed.iter().map(|cm| ObjectKey::of(cm.as_ref())).collect()
    ///         }
    ///     })
    /// }
    /// ```
    pub fn map_async<F, Fut>(mapper: F) -> Self
    where
        F: Fn(Arc<W>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<ObjectKey>> + Send + 'static,
    {
        Self {
            mapper: Mapper::Async(Arc::new(move |obj| Box::pin(mapper(obj)))),
            informer: None,
            predicates: Vec::new(),
        }
    }

    /// Watch with these informer options instead of the wiring's
    /// [`informer_defaults`](super::Wiring::informer_defaults).
    #[must_use]
    pub fn informer(mut self, config: InformerConfig) -> Self {
        self.informer = Some(config);
        self
    }

    /// Map a watched object's update only if `predicate` accepts it (several: if any does);
    /// creations and deletions always count.
    #[must_use]
    pub fn predicate(mut self, predicate: impl MetadataPredicate) -> Self {
        self.predicates.push(Arc::new(predicate));
        self
    }
}
