//! One trace per generation: when spans are exported ([`crate::otlp`]), the reconciles of one
//! object at one `metadata.generation` share a trace, each a child of the first. A spec change
//! (a new generation) starts a new trace; requeues, retries and the events of its children
//! (the reconcile that finally sets `Ready`) continue it. An object without a generation (a
//! ConfigMap) starts a new trace on each create or change, and continues it otherwise.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::ObjectKey;
use crate::otlp::ids::TraceIds;

use super::trigger::Trigger;

/// Traces remembered; past this the map is cleared (the next reconcile of each object starts a
/// new trace), so a controller of many objects keeps at most this many entries.
const MAX_ENTRIES: usize = 100_000;

#[derive(Default)]
pub(super) struct GenerationTraces {
    by_key: Mutex<HashMap<ObjectKey, Entry>>,
}

#[derive(Clone, Copy)]
struct Entry {
    generation: Option<i64>,
    trace: u128,
    /// The first reconcile of the generation: the later ones are its children.
    first: u64,
}

impl GenerationTraces {
    /// The ids of the reconcile about to run for `key`.
    pub(super) fn ids(
        &self,
        key: &ObjectKey,
        generation: Option<i64>,
        triggers: &[Trigger],
    ) -> TraceIds {
        let fresh = generation.is_none()
            && triggers
                .iter()
                .any(|t| matches!(t, Trigger::Created | Trigger::Changed { .. }));
        let mut by_key = self
            .by_key
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(entry) = by_key.get(key)
            && entry.generation == generation
            && !fresh
        {
            return TraceIds::child_of(entry.trace, entry.first);
        }
        let ids = TraceIds::root();
        if by_key.len() >= MAX_ENTRIES {
            by_key.clear();
        }
        by_key.insert(
            key.clone(),
            Entry {
                generation,
                trace: ids.trace,
                first: ids.span,
            },
        );
        ids
    }

    /// The object is gone.
    pub(super) fn forget(&self, key: &ObjectKey) {
        self.by_key
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::namespaced("ns", name)
    }

    #[test]
    fn reconciles_of_one_generation_share_a_trace_and_a_new_generation_starts_one() {
        let traces = GenerationTraces::default();
        let first = traces.ids(&key("a"), Some(1), &[Trigger::Created]);
        assert_eq!(first.parent, 0);
        let again = traces.ids(
            &key("a"),
            Some(1),
            &[Trigger::Owned {
                kind: "Deployment".into(),
                name: "a".into(),
            }],
        );
        assert_eq!((again.trace, again.parent), (first.trace, first.span));
        let retry = traces.ids(&key("a"), Some(1), &[Trigger::Retry { attempt: 1 }]);
        assert_eq!((retry.trace, retry.parent), (first.trace, first.span));
        // Other objects have their own.
        let other = traces.ids(&key("b"), Some(1), &[Trigger::StartUp]);
        assert_ne!(other.trace, first.trace);
        let changed = traces.ids(
            &key("a"),
            Some(2),
            &[Trigger::Changed {
                generation_changed: true,
            }],
        );
        assert_ne!(changed.trace, first.trace);
        assert_eq!(changed.parent, 0);
        traces.forget(&key("a"));
        let recreated = traces.ids(&key("a"), Some(2), &[Trigger::Created]);
        assert_ne!(recreated.trace, changed.trace);
    }

    #[test]
    fn without_a_generation_a_change_starts_a_trace_and_a_requeue_continues_it() {
        let traces = GenerationTraces::default();
        let first = traces.ids(&key("cm"), None, &[Trigger::Created]);
        let requeued = traces.ids(&key("cm"), None, &[Trigger::Requeue]);
        assert_eq!(requeued.trace, first.trace);
        let changed = traces.ids(
            &key("cm"),
            None,
            &[Trigger::Changed {
                generation_changed: false,
            }],
        );
        assert_ne!(changed.trace, first.trace);
    }
}
