//! Admission webhooks served by the manager over HTTPS, with certificates it manages itself.
//!
//! A kind gets a validating webhook by implementing [`Validator`] and a mutating (defaulting) one
//! by implementing [`Defaulter`]; `#[custom_resource(.., webhooks(validate, default))]` says so
//! explicitly (and fails to compile without the impls), and sets the webhook's
//! `failure_policy` (`"Fail"`, default, or `"Ignore"`), `side_effects` (`"None"`, default, or
//! `"NoneOnDryRun"`) and `timeout_seconds` (1–30, default 10). Nothing else is registered by
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
//! 2. serves `POST /validate/<group>/<version>/<plural>` and `/mutate/<group>/<version>/<plural>`
//!    (`AdmissionReview` v1) on one HTTPS port (`--webhook-port`, 9443), each review answered
//!    within its kind's timeout (a hook that does not answer in time gets a 504 and the failure
//!    policy decides), with controller-runtime's metrics: `controller_runtime_webhook_requests_total`
//!    (`webhook`, `code`), `controller_runtime_webhook_requests_in_flight` and
//!    `controller_runtime_webhook_latency_seconds` (`webhook`), plus
//!    `kubeforge_webhook_rejections_total` (`webhook`, `kind`, `operation`);
//! 3. applies the `ValidatingWebhookConfiguration` / `MutatingWebhookConfiguration` named after
//!    the operator with the CA bundle injected, and applies them again when the bundle changes
//!    (managed configurations: no cert-manager, no `caBundle` by hand). A namespaced manager
//!    selects its namespace only (`namespaceSelector`);
//! 4. reports `webhook` on `/readyz`: ready once a TLS handshake with the server, through the
//!    address the apiserver calls when it is known, succeeds.
//!
//! `crdgen --deploy` prints the same configurations (service mode, bundle injected at run time),
//! the Service in front of the port, and the RBAC the manager needs for the above.
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
mod options;
mod roundtrip;
#[cfg(feature = "webhooks")]
mod running;
#[cfg(feature = "webhooks")]
mod server;

pub use admission::{AdmissionContext, Defaulter, Hooks, Validator, Verdict};

/// Used by the code `#[custom_resource]` generates.
#[doc(hidden)]
pub mod __private {
    pub use super::admission::__private::*;
    pub use super::admission::{Hook, Reviewed};
    pub use super::conversion::{
        Holds, another_version, assert_hub_of_another_version, assert_hub_of_the_same_kind,
        assert_hub_stored, assert_hub_with_the_same_names, from_hub, same_kind, same_names, to_hub,
    };
    pub use super::generated::convert_json;
    pub use super::roundtrip::{Side, arbitrary_objects, check_round_trips, normalize, validate};
}
pub use config::{Configurations, Endpoint};
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
}

/// The settings of a kind's webhooks (`webhooks(failure_policy = .., side_effects = ..,
/// timeout_seconds = ..)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `Fail` (default: refuse the request when the webhook cannot be called) or `Ignore`.
    pub failure_policy: &'static str,
    /// `None` (default) or `NoneOnDryRun`.
    pub side_effects: &'static str,
    /// How long the apiserver waits (1–30 s, default 10).
    pub timeout_seconds: u8,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            failure_policy: "Fail",
            side_effects: "None",
            timeout_seconds: 10,
        }
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
