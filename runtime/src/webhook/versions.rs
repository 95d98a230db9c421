//! Admission of a kind that has several versions, in the hook's own version.
//!
//! A hook is written for one version of its kind (`impl Validator for v2::Shop`). Were its
//! webhook registered for that version only, the apiserver would convert every request made
//! through another version before calling it — through the conversion webhook, *before* the
//! schema has checked the object: a field of the wrong type written through an old version
//! would come back as a conversion failure instead of the schema's error. So the webhooks of a
//! kind that converts are registered for every version this binary converts, and the objects
//! are converted here, in process ([`HookVersion`]): an object that does not convert is an
//! object the hook cannot read (the defaulter leaves it to the schema validation that follows,
//! the validator, which runs after it, refuses it), and a defaulter's changes go back to the
//! version the object was sent in.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::KindConversions;

/// The version a hook is written for, and its kind's conversions.
#[derive(Clone, Debug)]
pub struct HookVersion {
    /// `group/version` of the hook's type.
    pub(crate) api_version: String,
    pub(crate) conversions: Arc<KindConversions>,
}

impl HookVersion {
    /// The hook version of `group`/`kind` at `version`: `None` when the kind has no conversion
    /// linked into this binary, or `version` is not one of its versions.
    #[must_use]
    pub fn of(group: &str, kind: &str, version: &str) -> Option<Self> {
        let conversions = conversions_of(group, kind)?;
        conversions.versions().contains(&version).then(|| Self {
            api_version: format!("{group}/{version}"),
            conversions,
        })
    }

    /// `object` in the hook's version.
    ///
    /// # Errors
    ///
    /// It does not convert (the conversion's message).
    pub(crate) fn to_hook(&self, object: &Value) -> Result<Value, String> {
        if object["apiVersion"].as_str() == Some(self.api_version.as_str()) {
            return Ok(object.clone());
        }
        self.conversions
            .convert(object.clone(), &self.api_version)
            .map_err(|e| format!("cannot convert it to {}: {e}", self.api_version))
    }

    /// `object` (in the hook's version) back in `api_version`.
    ///
    /// # Errors
    ///
    /// It does not convert (the conversion's message).
    pub(crate) fn back(&self, object: Value, api_version: &str) -> Result<Value, String> {
        self.conversions
            .convert(object, api_version)
            .map_err(|e| format!("cannot convert it back to {api_version}: {e}"))
    }
}

/// The conversions of `group`/`kind` linked into this binary (looked up once).
pub(crate) fn conversions_of(group: &str, kind: &str) -> Option<Arc<KindConversions>> {
    type Table = HashMap<(&'static str, &'static str), Arc<KindConversions>>;
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            super::registered_conversions()
                .into_iter()
                .map(|c| ((c.hub.group, c.hub.kind), Arc::new(c)))
                .collect()
        })
        .get(&(group, kind))
        .cloned()
}
