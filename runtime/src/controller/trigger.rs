//! Why a reconcile runs: what queued its key since its last run, as
//! [`Context::triggers`](super::Context::triggers) tells the reconciler and the reconcile span
//! tells the logs and traces.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::ObjectKey;

/// One reason a key was queued.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Trigger {
    /// The object as the controller found it when it started (its informer's first list).
    StartUp,
    /// The object changed shortly before the controller started, while its cache was already
    /// watching: a warm standby taking over, whose old leader may not have reconciled the
    /// change (a creation, a deletion, a new generation, in the last minute). Queued ahead of
    /// the [`StartUp`](Self::StartUp) wave.
    ChangedBeforeStart,
    /// The object was created.
    Created,
    /// The object changed: its spec (`generation_changed`), or only its status or metadata.
    Changed {
        /// Whether `metadata.generation` changed.
        generation_changed: bool,
    },
    /// The object was deleted, or its deletion began.
    Deleted,
    /// A periodic resync re-announced the object unchanged.
    Resync,
    /// An object of kind `kind` it owns (or a change of which concerns it) was created,
    /// changed or deleted.
    Owned {
        /// The owned object's kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// A watched object of kind `kind` mapped to this one.
    Watched {
        /// The watched object's kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// The object's reconcile asked to run again (`Action::Requeue`, `Action::RequeueAfter`).
    Requeue,
    /// A retry after failed reconciles (`attempt` failures in a row so far).
    Retry {
        /// Failures in a row before this run.
        attempt: u32,
    },
    /// The object's timer fired ([`Controller::every`](super::Controller::every)).
    Timer,
    /// A key from outside the cluster
    /// ([`Controller::reconcile_on`](super::Controller::reconcile_on)).
    External,
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::StartUp => f.write_str("start-up"),
            Self::ChangedBeforeStart => f.write_str("changed before start"),
            Self::Created => f.write_str("created"),
            Self::Changed {
                generation_changed: true,
            } => f.write_str("spec changed"),
            Self::Changed {
                generation_changed: false,
            } => f.write_str("status or metadata changed"),
            Self::Deleted => f.write_str("deleted"),
            Self::Resync => f.write_str("resync"),
            Self::Owned { kind, name } => write!(f, "owned {kind} {name}"),
            Self::Watched { kind, name } => write!(f, "watched {kind} {name}"),
            Self::Requeue => f.write_str("requeue"),
            Self::Retry { attempt } => write!(f, "retry after {attempt} failures"),
            Self::Timer => f.write_str("timer"),
            Self::External => f.write_str("external"),
        }
    }
}

/// The most triggers kept per key between two runs (the first ones: a burst of events on a
/// busy object collapses into one run anyway).
const KEPT: usize = 8;

/// The triggers of the queued keys.
#[derive(Default)]
pub(super) struct Triggers {
    keys: Mutex<HashMap<ObjectKey, Vec<Trigger>>>,
}

impl Triggers {
    fn keys(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Vec<Trigger>>> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `key` was queued because of `trigger`.
    pub(super) fn record(&self, key: &ObjectKey, trigger: Trigger) {
        let mut keys = self.keys();
        let triggers = match keys.get_mut(key) {
            Some(triggers) => triggers,
            None => keys.entry(key.clone()).or_default(),
        };
        if triggers.len() < KEPT && !triggers.contains(&trigger) {
            triggers.push(trigger);
        }
    }

    /// The triggers of `key` since its last run (empty when nothing recorded queued it: an add
    /// by hand, a wait for leadership).
    pub(super) fn take(&self, key: &ObjectKey) -> Vec<Trigger> {
        self.keys().remove(key).unwrap_or_default()
    }
}

/// The triggers as one field of a span or log line.
pub(super) fn describe(triggers: &[Trigger]) -> String {
    if triggers.is_empty() {
        return "queued".to_owned();
    }
    triggers
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers_should_be_kept_once_each_until_taken() {
        let triggers = Triggers::default();
        let key = ObjectKey::namespaced("ns", "a");
        triggers.record(&key, Trigger::Created);
        triggers.record(&key, Trigger::Created);
        for i in 0..20 {
            triggers.record(
                &key,
                Trigger::Owned {
                    kind: "ConfigMap".into(),
                    name: format!("c{i}"),
                },
            );
        }
        let taken = triggers.take(&key);
        assert_eq!(taken.len(), KEPT, "bounded");
        assert_eq!(taken[0], Trigger::Created, "once, first");
        assert_eq!(
            describe(&taken[..2]),
            "created, owned ConfigMap c0",
            "readable in a span"
        );
        assert!(triggers.take(&key).is_empty(), "taken once");
        assert_eq!(describe(&[]), "queued");
    }
}
