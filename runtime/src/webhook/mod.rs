//! Admission webhooks served by the manager over HTTPS, with certificates it manages itself.
//!
//! A kind gets a validating webhook by implementing [`Validator`] (creates and updates), one for
//! deletes by implementing [`DeleteValidator`] (only then are deletes sent to the operator), and a
//! mutating (defaulting) one by implementing [`Defaulter`];
//! `#[custom_resource(.., webhooks(validate, validate_delete, default))]` says so explicitly (and
//! fails to compile without the impls), and sets the registration: `failure_policy` (`"Fail"`,
//! default, or `"Ignore"`), `side_effects` (`"None"`, default, or `"NoneOnDryRun"`),
//! `timeout_seconds` (1–30, default 10), `operations` (`["CREATE", "UPDATE"]`, default both),
//! `match_policy` (`"Equivalent"`, default, or `"Exact"`), `reinvocation_policy` (the defaulter's:
//! `"IfNeeded"`, default, or `"Never"`), `metadata_updates` (`"Skip"`, default: an update that
//! changes nothing but `metadata` is not sent to the validator nor the defaulter, see
//! [`config`]; or `"Send"`), `namespace_selector` and `object_selector` (label
//! selectors in `kubectl -l` syntax, checked at compile time). Nothing else is registered by
//! hand: every `#[custom_resource]` records its webhooks here ([`registered`]).
//!
//! With [`WebhookOptions`] set (`Manager::webhooks`, or the `--webhook-*` flags of
//! [`cli::Options`](crate::cli)), the manager, on **every replica** (webhooks do not wait for
//! leadership):
//!
//! 1. gets its serving certificate: from `--webhook-cert-dir` (`tls.crt`/`tls.key`, reloaded
//!    when they change: cert-manager, a mounted Secret), or else self-signed — a CA and a serving
//!    certificate created on first start and kept in a Secret so every replica serves the same,
//!    renewed before expiry without a restart (see [`certs`]);
//! 2. serves `POST /<operator>/validate/<group>/<version>/<plural>`,
//!    `/<operator>/validate-delete/..`, `/<operator>/mutate/..` and `/<operator>/convert/<group>/<plural>`
//!    (also without the `/<operator>` prefix, the paths of earlier releases)
//!    (`AdmissionReview` v1) on one HTTPS port (`--webhook-port`, 9443), each review answered
//!    within its kind's timeout (a hook that does not answer in time gets a 504 and the failure
//!    policy decides), with controller-runtime's metrics: `controller_runtime_webhook_requests_total`
//!    (`webhook`, `code`), `controller_runtime_webhook_requests_in_flight` and
//!    `controller_runtime_webhook_latency_seconds` (`webhook`), plus
//!    `kubeforge_webhook_rejections_total` (`webhook`, `kind`, `operation`);
//! 3. applies the `ValidatingWebhookConfiguration` / `MutatingWebhookConfiguration` named after
//!    the operator with the CA bundle injected, points the CRDs of the kinds it converts at its
//!    conversion webhook, and applies both again when the bundle changes and every minute (a
//!    configuration deleted by hand or a CRD applied again with another endpoint is repaired)
//!    (managed configurations: no cert-manager, no `caBundle` by hand). A namespaced manager
//!    selects its namespace only (`namespaceSelector`);
//! 4. reports `webhook` on `/readyz`: ready once a TLS handshake with the server, through the
//!    address the apiserver calls when it is known, succeeds.
//!
//! `crdgen --deploy` prints the same configurations (service mode, bundle injected at run time),
//! the Service in front of the port, and the RBAC the manager needs for the above
//! ([`rbac::webhook_rules`](crate::rbac::webhook_rules), also part of `crdgen --rbac`).
//!
//! # When the operator is down
//!
//! The manager never removes its configurations and never weakens a CRD's conversion, in any
//! mode (a deployed operator, or one run locally with `--webhook-url`): stopped, crashed or
//! being upgraded, its webhooks stay registered, so the apiserver **refuses** what they cover
//! instead of admitting it unchecked or storing it converted by `strategy: None` (which drops
//! the fields the other version does not have):
//!
//! | request while no replica answers | with `failure_policy = "Fail"` (default) | with `"Ignore"` |
//! |---|---|---|
//! | create / update of the kind | refused: `failed calling webhook "validate-v1...": ... Post "https://.../<operator>/validate/..."` (the path names the operator) | admitted without the webhook |
//! | delete | admitted, unless the kind implements [`DeleteValidator`] | admitted |
//! | any read or write through a version that needs a conversion | refused: `conversion webhook for <group>/<version> ... failed: ... /<operator>/convert/...` | (conversion has no failure policy) |
//! | reads and writes through the storage version that need no conversion | served | served |
//!
//! An object the webhook cannot decode as its kind is never blocked from deletion, and an update
//! that makes it decode again is judged as a create. For local development this is the same:
//! start the operator again and the writes go through. To work with the kind without its
//! operator, delete its configurations explicitly (`kubectl delete
//! validatingwebhookconfiguration,mutatingwebhookconfiguration <operator>`: the admission rules
//! are then not applied) — there is no such switch for the conversion, which cannot be turned off
//! without losing data.
//!
//! Dry runs: the apiserver calls webhooks on dry-run requests too (our configurations declare
//! `sideEffects: None`); [`AdmissionContext::dry_run`] tells a hook that nothing will be stored.

mod admission;
mod arbitrary;
#[cfg(feature = "webhooks")]
pub mod certs;
mod config;
mod conversion;
mod generated;
#[cfg(feature = "webhooks")]
mod kept;
#[cfg(feature = "webhooks")]
mod options;
#[cfg(feature = "webhooks")]
mod repair;
mod roundtrip;
#[cfg(feature = "webhooks")]
mod running;
#[cfg(feature = "webhooks")]
mod server;
mod versions;
/// For the metrics reference (`metrics/reference.rs`).
#[cfg(all(test, feature = "webhooks"))]
pub(crate) use server::WebhookMetrics;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

pub use admission::{AdmissionContext, Defaulter, DeleteValidator, Hooks, Validator, Verdict};
pub use versions::HookVersion;

/// Used by the code `#[custom_resource]` generates.
#[doc(hidden)]
pub mod __private {
    pub use super::admission::__private::*;
    pub use super::admission::{Hook, Reviewed};
    pub use super::conversion::{
        Holds, another_version, assert_hub_of_another_version, assert_hub_of_the_same_kind,
        assert_hub_stored, assert_hub_with_the_same_names, assert_same_subresources, from_hub,
        same_kind, same_names, same_subresources, to_hub,
    };
    pub use super::generated::convert_json;
    pub use super::roundtrip::{Side, arbitrary_objects, check_round_trips, normalize, validate};
}
pub use config::{
    Configurations, Endpoint, KEPT_CHANGED, KEPT_CHANGED_NAME, METADATA_NAME, METADATA_ONLY,
};
pub use conversion::{
    ConversionRegistration, Convert, KindConversions, VersionConversion, registered_conversions,
};
#[cfg(feature = "webhooks")]
pub(crate) use options::WebhookEndpoint;
#[cfg(feature = "webhooks")]
pub use options::WebhookOptions;
#[cfg(feature = "webhooks")]
pub(crate) use running::start;

/// A kind version's webhooks and their settings, as its `#[custom_resource]` registered them.
#[derive(Clone, Debug)]
pub struct KindWebhooks {
    /// API group.
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural resource name.
    pub plural: &'static str,
    /// Namespaced (else cluster-scoped).
    pub namespaced: bool,
    /// The hooks found.
    pub hooks: Hooks,
    /// The settings of `webhooks(..)`.
    pub settings: Settings,
}

impl KindWebhooks {
    /// `/validate/<group>/<version>/<plural>`.
    #[must_use]
    pub fn validate_path(&self) -> String {
        format!("/validate/{}/{}/{}", self.group, self.version, self.plural)
    }

    /// `/mutate/<group>/<version>/<plural>`.
    #[must_use]
    pub fn mutate_path(&self) -> String {
        format!("/mutate/{}/{}/{}", self.group, self.version, self.plural)
    }

    /// `/validate-delete/<group>/<version>/<plural>`.
    #[must_use]
    pub fn validate_delete_path(&self) -> String {
        format!(
            "/validate-delete/{}/{}/{}",
            self.group, self.version, self.plural
        )
    }
}

/// The settings of a kind's webhooks, as `webhooks(..)` gives them (every one has the default
/// an operator author expects when left out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `Fail` (default: refuse the request when the webhook cannot be called) or `Ignore`.
    pub failure_policy: &'static str,
    /// `None` (default) or `NoneOnDryRun`.
    pub side_effects: &'static str,
    /// How long the apiserver waits (1–30 s, default 10).
    pub timeout_seconds: u8,
    /// The operations the validating and the defaulting webhook are called for (`CREATE`,
    /// `UPDATE`; default both). Deletes are validated when the kind implements
    /// [`DeleteValidator`], by a webhook of their own.
    pub operations: &'static [&'static str],
    /// `Equivalent` (default: also requests through another version of the kind) or `Exact`.
    pub match_policy: &'static str,
    /// The defaulting webhook's `IfNeeded` (default: called again when another mutating
    /// webhook changed the object after it) or `Never`.
    pub reinvocation_policy: &'static str,
    /// Whether an update that changes nothing but `metadata` (finalizers, labels, annotations,
    /// owner references) is sent to the validator and the defaulter: `false` (default,
    /// `metadata_updates = "Skip"`: a match condition leaves them out, so a stopped operator
    /// blocks no cascading delete and no removal of another party's finalizer) or `true`
    /// (`"Send"`: the hooks judge metadata too, and those updates wait for the operator).
    pub metadata_updates: bool,
    /// Only objects in namespaces whose labels match.
    pub namespace_selector: Option<Selector>,
    /// Only objects whose labels match.
    pub object_selector: Option<Selector>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            failure_policy: "Fail",
            side_effects: "None",
            timeout_seconds: 10,
            operations: &["CREATE", "UPDATE"],
            match_policy: "Equivalent",
            reinvocation_policy: "IfNeeded",
            metadata_updates: false,
            namespace_selector: None,
            object_selector: None,
        }
    }
}

/// A label selector written as a string in `webhooks(namespace_selector = "..")` (`key=value`,
/// `key!=value`, `key`, `!key`, `key in (a, b)`, `key notin (a, b)`, comma-separated), parsed
/// at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selector {
    /// `key=value` terms.
    pub match_labels: &'static [(&'static str, &'static str)],
    /// The other terms: key, operator (`In`, `NotIn`, `Exists`, `DoesNotExist`), values.
    pub match_expressions: &'static [(&'static str, &'static str, &'static [&'static str])],
}

impl Selector {
    /// The Kubernetes `LabelSelector`.
    #[must_use]
    pub fn label_selector(&self) -> LabelSelector {
        let labels: BTreeMap<String, String> = self
            .match_labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let expressions: Vec<LabelSelectorRequirement> = self
            .match_expressions
            .iter()
            .map(|(key, operator, values)| LabelSelectorRequirement {
                key: (*key).to_owned(),
                operator: (*operator).to_owned(),
                values: (!values.is_empty())
                    .then(|| values.iter().map(|v| (*v).to_owned()).collect()),
            })
            .collect();
        LabelSelector {
            match_labels: (!labels.is_empty()).then_some(labels),
            match_expressions: (!expressions.is_empty()).then_some(expressions),
        }
    }
}

/// Both selectors (their terms ANDed), or either.
pub(crate) fn both(a: Option<LabelSelector>, b: Option<LabelSelector>) -> Option<LabelSelector> {
    match (a, b) {
        (Some(a), Some(b)) => {
            let mut labels = a.match_labels.unwrap_or_default();
            labels.extend(b.match_labels.unwrap_or_default());
            let mut expressions = a.match_expressions.unwrap_or_default();
            expressions.extend(b.match_expressions.unwrap_or_default());
            Some(LabelSelector {
                match_labels: (!labels.is_empty()).then_some(labels),
                match_expressions: (!expressions.is_empty()).then_some(expressions),
            })
        }
        (a, b) => a.or(b),
    }
}

/// Whether `(group, kind)` is in `kinds`.
pub(crate) fn listed(kinds: &[(String, String)], group: &str, kind: &str) -> bool {
    kinds.iter().any(|(g, k)| g == group && k == kind)
}

/// One kind version's webhooks; submitted by the code `#[custom_resource]` generates.
#[derive(Debug)]
pub struct Registration {
    /// Finds the kind's webhooks.
    pub webhooks: fn() -> KindWebhooks,
}

inventory::collect!(Registration);

/// The webhooks of every `#[custom_resource]` linked into this binary that has any, sorted by
/// group, plural and version.
#[must_use]
pub fn registered() -> Vec<KindWebhooks> {
    let mut kinds: Vec<KindWebhooks> = inventory::iter::<Registration>
        .into_iter()
        .map(|r| (r.webhooks)())
        .filter(|k| !k.hooks.is_empty())
        .collect();
    kinds.sort_by_key(|k| (k.group, k.plural, k.version));
    kinds
}
