//! The admission check of the annotations generated conversions keep another version's fields
//! in (`conversion.kubeforge.dev/<version>`, see `generated.rs`).
//!
//! The annotation is part of the object, so anyone may write it. A conversion that meets one
//! that does not fit drops it (a bad annotation must never fail a read: every list of the kind
//! through that version in the namespace would fail), so one written by hand would be lost
//! silently. Instead, a webhook of the kind's validating configuration is asked whenever such
//! an annotation is created or changed (its match condition, `config::KEPT_CHANGED`): it refuses one
//! that names no version of the kind or holds what the version cannot read, with why. It is
//! registered for every version of the kind, so the apiserver converts nothing (converting
//! would drop the annotation before the check sees it).
//!
//! One that got in anyway (written before the check existed, or outside the operator's
//! namespaces) is still dropped by the conversion, and [`DropEvents`] tells its object's owner:
//! a Warning event `ConversionAnnotationDropped` on the object, once per annotation value.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::core::admission::Operation;

use super::KindConversions;
use super::admission::{Hook, HookVersion, Reviewed, Verdict, answered, decode};
use super::generated::Dropped;

/// The hook of one kind: [`KindConversions::check_kept`] on the new object.
pub(crate) struct KeptAnnotations(pub(crate) Arc<KindConversions>);

impl Hook for KeptAnnotations {
    fn review(
        &self,
        body: &[u8],
        _: Client,
        _: Option<&HookVersion>,
    ) -> BoxFuture<'static, Reviewed> {
        let decoded = match decode::<serde_json::Value>(body, None) {
            Ok(decoded) => decoded,
            Err(reviewed) => return async move { reviewed }.boxed(),
        };
        let checked = match (&decoded.request.operation, &decoded.raw) {
            (Operation::Create | Operation::Update, Some(object)) => self.0.check_kept(object),
            _ => Ok(()),
        };
        let verdict = match checked {
            Ok(()) => Verdict::allow(),
            Err(why) => Verdict::deny_with_code(422, format!("metadata.annotations: {why}")),
        };
        answered(&decoded.request, verdict)
    }
}

/// Events about the annotations conversions dropped: one Warning per object, annotation and
/// value while this process runs (the annotation stays stored, so every read drops it again;
/// the event says so once).
pub(crate) struct DropEvents {
    recorder: crate::events::Recorder,
    seen: std::sync::Mutex<std::collections::HashSet<(Option<String>, Dropped)>>,
}

/// How many reported drops are remembered before the memory starts again (then each is
/// reported once more: the recorder's aggregation counts it on the earlier event).
const SEEN_AT_MOST: usize = 10_000;

impl DropEvents {
    pub(crate) fn new(client: Client) -> Self {
        Self {
            recorder: crate::events::Recorder::new(client, "kubeforge-conversion"),
            seen: std::sync::Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// Publishes, in the background, an event for each of `drops` not reported yet.
    pub(crate) fn report(self: &Arc<Self>, drops: Vec<(ObjectReference, Dropped)>) {
        let fresh: Vec<_> = {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if seen.len() > SEEN_AT_MOST {
                seen.clear();
            }
            drops
                .into_iter()
                .filter(|(object, dropped)| seen.insert((object.uid.clone(), dropped.clone())))
                .collect()
        };
        if fresh.is_empty() {
            return;
        }
        let events = Arc::clone(self);
        tokio::spawn(async move {
            for (object, dropped) in fresh {
                let note = format!(
                    "the annotation {} was dropped when the object was converted ({}); it stays \
                     stored: correct or remove it",
                    dropped.annotation, dropped.why
                );
                let published = events
                    .recorder
                    .publish_ref(
                        object,
                        crate::events::EventType::Warning,
                        "ConversionAnnotationDropped",
                        "Convert",
                        Some(note),
                    )
                    .await;
                if let Err(error) = published {
                    tracing::debug!(%error, "event about a dropped conversion annotation not published");
                }
            }
        });
    }
}
