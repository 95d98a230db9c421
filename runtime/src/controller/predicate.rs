use std::sync::Arc;

use kube::Resource;
use kube::api::ObjectMeta;

/// Decides whether a change of an object should trigger a reconcile.
///
/// Predicates see updates only: creations, deletions and resyncs always pass, so a controller
/// never misses an object it has not seen. Several predicates on one source are combined with
/// "any": the change passes if one of them says yes.
pub trait Predicate<K>: Send + Sync + 'static {
    /// Whether the change from `old` to `new` matters.
    fn accepts(&self, old: &K, new: &K) -> bool;
}

/// A predicate from a closure.
impl<K, F> Predicate<K> for F
where
    F: Fn(&K, &K) -> bool + Send + Sync + 'static,
{
    fn accepts(&self, old: &K, new: &K) -> bool {
        self(old, new)
    }
}

/// Passes when `metadata.generation` changed: spec changes, not status or metadata-only ones
/// (controller-runtime's `GenerationChangedPredicate`).
#[derive(Clone, Copy, Debug, Default)]
pub struct GenerationChanged;

impl<K: Resource> Predicate<K> for GenerationChanged {
    fn accepts(&self, old: &K, new: &K) -> bool {
        old.meta().generation != new.meta().generation
    }
}

/// Passes when the labels changed.
#[derive(Clone, Copy, Debug, Default)]
pub struct LabelsChanged;

impl<K: Resource> Predicate<K> for LabelsChanged {
    fn accepts(&self, old: &K, new: &K) -> bool {
        old.meta().labels != new.meta().labels
    }
}

/// Passes when the annotations changed.
#[derive(Clone, Copy, Debug, Default)]
pub struct AnnotationsChanged;

impl<K: Resource> Predicate<K> for AnnotationsChanged {
    fn accepts(&self, old: &K, new: &K) -> bool {
        old.meta().annotations != new.meta().annotations
    }
}

/// Passes when `metadata.resourceVersion` changed, i.e. on every real update (filters out
/// re-deliveries of the same version).
#[derive(Clone, Copy, Debug, Default)]
pub struct ResourceVersionChanged;

impl<K: Resource> Predicate<K> for ResourceVersionChanged {
    fn accepts(&self, old: &K, new: &K) -> bool {
        old.meta().resource_version != new.meta().resource_version
    }
}

/// A predicate on metadata only, for any kind: what the built-ins are, and what an owned or
/// watched kind takes ([`Owns::predicate`](super::Owns::predicate),
/// [`Watches::predicate`](super::Watches::predicate)) — also when it is cached as metadata.
pub trait MetadataPredicate: Send + Sync + 'static {
    /// Whether the change from `old` to `new` matters.
    fn accepts_meta(&self, old: &ObjectMeta, new: &ObjectMeta) -> bool;
}

/// A metadata predicate from a closure or function (`#[controller(owns(C, predicates(Self::f)))]`).
impl<F> MetadataPredicate for F
where
    F: Fn(&ObjectMeta, &ObjectMeta) -> bool + Send + Sync + 'static,
{
    fn accepts_meta(&self, old: &ObjectMeta, new: &ObjectMeta) -> bool {
        self(old, new)
    }
}

impl MetadataPredicate for GenerationChanged {
    fn accepts_meta(&self, old: &ObjectMeta, new: &ObjectMeta) -> bool {
        old.generation != new.generation
    }
}

impl MetadataPredicate for LabelsChanged {
    fn accepts_meta(&self, old: &ObjectMeta, new: &ObjectMeta) -> bool {
        old.labels != new.labels
    }
}

impl MetadataPredicate for AnnotationsChanged {
    fn accepts_meta(&self, old: &ObjectMeta, new: &ObjectMeta) -> bool {
        old.annotations != new.annotations
    }
}

impl MetadataPredicate for ResourceVersionChanged {
    fn accepts_meta(&self, old: &ObjectMeta, new: &ObjectMeta) -> bool {
        old.resource_version != new.resource_version
    }
}

/// The metadata predicates of an owned or watched kind.
pub(crate) type MetadataPredicates = Arc<[Arc<dyn MetadataPredicate>]>;

/// Whether an event of an owned or watched kind passes its predicates: updates only are
/// filtered ("any"; none: everything passes).
pub(crate) fn event_passes<T: Resource>(
    predicates: &[Arc<dyn MetadataPredicate>],
    event: &crate::informer::Event<T>,
) -> bool {
    match event {
        crate::informer::Event::Applied {
            old: Some(old),
            new,
        } if !predicates.is_empty() => predicates
            .iter()
            .any(|p| p.accepts_meta(old.meta(), new.meta())),
        _ => true,
    }
}

/// Whether an update passes a set of predicates ("any"; no predicates: everything passes).
pub(crate) fn passes<K: 'static>(predicates: &[Arc<dyn Predicate<K>>], old: &K, new: &K) -> bool {
    predicates.is_empty() || predicates.iter().any(|p| p.accepts(old, new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(generation: i64, label: &str, rv: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.generation = Some(generation);
        cm.metadata.labels = Some([("l".to_owned(), label.to_owned())].into());
        cm.metadata.resource_version = Some(rv.to_owned());
        cm
    }

    #[test]
    fn predicates_should_detect_their_change_only() {
        let base = cm(1, "a", "10");
        let status_only = cm(1, "a", "11");
        let spec = cm(2, "a", "12");
        let relabel = cm(1, "b", "13");
        assert!(!GenerationChanged.accepts(&base, &status_only));
        assert!(GenerationChanged.accepts(&base, &spec));
        assert!(LabelsChanged.accepts(&base, &relabel));
        assert!(!LabelsChanged.accepts(&base, &spec));
        assert!(ResourceVersionChanged.accepts(&base, &status_only));
        assert!(!ResourceVersionChanged.accepts(&base, &base.clone()));
        assert!(!AnnotationsChanged.accepts(&base, &relabel));
    }

    #[test]
    fn predicates_should_combine_with_any() {
        let preds: Vec<Arc<dyn Predicate<ConfigMap>>> =
            vec![Arc::new(GenerationChanged), Arc::new(LabelsChanged)];
        assert!(passes(&preds, &cm(1, "a", "1"), &cm(1, "b", "2")));
        assert!(!passes(&preds, &cm(1, "a", "1"), &cm(1, "a", "2")));
        assert!(
            passes(&[], &cm(1, "a", "1"), &cm(1, "a", "1")),
            "no predicate: all pass"
        );
        let custom: Vec<Arc<dyn Predicate<ConfigMap>>> =
            vec![Arc::new(|_: &ConfigMap, new: &ConfigMap| {
                new.metadata.generation == Some(7)
            })];
        assert!(passes(&custom, &cm(1, "a", "1"), &cm(7, "a", "2")));
    }
}
