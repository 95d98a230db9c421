//! ConfigAudit, a watcher-style operator: every change of the data of a ConfigMap labelled
//! `audit.kubeforge.dev/enabled=true` becomes an Event on the ConfigMap naming the keys that were
//! added, changed or removed (values are never copied into the event).
//!
//! A reconciler sees the latest state of an object; an audit needs every change, old and new
//! side by side, so this is a watcher (`#[controller(for = ConfigMap, watcher, ...)]`): `update`
//! gets both versions, events of one ConfigMap arrive in order on one worker, different
//! ConfigMaps are handled by 8 workers in parallel, and a failed handler is retried with its
//! event.

use std::collections::BTreeMap;
use std::sync::Arc;

use kubeforge::events::{EventType, Recorder};
use kubeforge::k8s_openapi::api::core::v1::ConfigMap;
use kubeforge::kube;
use kubeforge::watcher::WatchContext;

/// The label that opts a ConfigMap in.
pub const LABEL: &str = "audit.kubeforge.dev/enabled";

/// The ConfigAudit watcher.
pub struct ConfigAudit {
    /// Publishes the audit events.
    pub recorder: Arc<Recorder>,
}

// ANCHOR: watcher
#[kubeforge::controller(for = ConfigMap, watcher, workers = 8, event_timeout = "30s", name = "config-audit")]
impl ConfigAudit {
    async fn add(&self, cm: Arc<ConfigMap>, _ctx: &WatchContext) -> Result<(), kube::Error> {
        if audited(&cm) {
            let keys = cm.data.as_ref().map_or(0, BTreeMap::len);
            self.publish(&cm, "Audited", format!("auditing {keys} keys"))
                .await?;
        }
        Ok(())
    }

    async fn update(
        &self,
        old: Arc<ConfigMap>,
        new: Arc<ConfigMap>,
        _ctx: &WatchContext,
    ) -> Result<(), kube::Error> {
        if !audited(&new) {
            return Ok(());
        }
        let changes = Changes::between(old.data.as_ref(), new.data.as_ref());
        if !changes.is_empty() {
            self.publish(&new, "DataChanged", changes.to_string())
                .await?;
        }
        Ok(())
    }

    async fn delete(&self, cm: Arc<ConfigMap>, _ctx: &WatchContext) -> Result<(), kube::Error> {
        if audited(&cm) {
            kubeforge::tracing::info!(namespace = ?cm.metadata.namespace, name = ?cm.metadata.name, "audited ConfigMap deleted");
        }
        Ok(())
    }
}
// ANCHOR_END: watcher

impl ConfigAudit {
    async fn publish(&self, cm: &ConfigMap, reason: &str, note: String) -> Result<(), kube::Error> {
        self.recorder
            .publish(cm, EventType::Normal, reason, "Audit", Some(note))
            .await
    }
}

fn audited(cm: &ConfigMap) -> bool {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(LABEL))
        .is_some_and(|v| v == "true")
}

/// The keys a data change added, changed and removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Keys that appeared.
    pub added: Vec<String>,
    /// Keys whose value changed.
    pub changed: Vec<String>,
    /// Keys that disappeared.
    pub removed: Vec<String>,
}

impl Changes {
    /// What changed from `old` to `new` (keys in order).
    pub fn between(
        old: Option<&BTreeMap<String, String>>,
        new: Option<&BTreeMap<String, String>>,
    ) -> Self {
        let empty = BTreeMap::new();
        let (old, new) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
        let mut changes = Changes::default();
        for (key, value) in new {
            match old.get(key) {
                None => changes.added.push(key.clone()),
                Some(before) if before != value => changes.changed.push(key.clone()),
                Some(_) => {}
            }
        }
        changes.removed = old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect();
        changes
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

impl std::fmt::Display for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts = [
            ("added", &self.added),
            ("changed", &self.changed),
            ("removed", &self.removed),
        ];
        let mut first = true;
        for (what, keys) in parts.into_iter().filter(|(_, keys)| !keys.is_empty()) {
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            write!(f, "{what}: {}", keys.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_should_name_added_changed_and_removed_keys() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        let old = map(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let new = map(&[("a", "1"), ("b", "20"), ("d", "4")]);
        let changes = Changes::between(Some(&old), Some(&new));
        assert_eq!(changes.to_string(), "added: d; changed: b; removed: c");
        assert!(Changes::between(Some(&old), Some(&old)).is_empty());
        assert_eq!(
            Changes::between(None, Some(&map(&[("x", "1")]))).added,
            ["x"]
        );
    }
}
