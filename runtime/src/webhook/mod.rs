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

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

mod admission;
pub mod certs;
mod config;
mod conversion;
mod generated;
mod roundtrip;
mod running;
mod server;

pub use admission::{AdmissionContext, Defaulter, Hooks, Validator, Verdict};

/// Used by the code `#[custom_resource]` generates.
#[doc(hidden)]
pub mod __private {
    pub use super::admission::__private::*;
    pub use super::admission::{Hook, Reviewed};
    pub use super::conversion::{
        Holds, another_version, assert_hub_of_another_version, assert_hub_of_the_same_kind,
        assert_hub_stored, from_hub, same_kind, to_hub,
    };
    pub use super::generated::convert_json;
    pub use super::roundtrip::{Side, check_round_trips, normalize};
}
pub use config::{Configurations, Endpoint};
pub use conversion::{
    ConversionRegistration, Convert, KindConversions, VersionConversion, registered_conversions,
};
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

/// How the manager serves webhooks (see the [module docs](self)).
///
/// ```
/// use kubeforge::webhook::WebhookOptions;
///
/// // Local development: the apiserver calls https://127.0.0.1:<port>.
/// let local = WebhookOptions::new("webapp-operator").port(0).url("https://127.0.0.1");
/// // In the cluster: through the Service crdgen --deploy writes.
/// let deployed = WebhookOptions::new("webapp-operator").service("operators", "webapp-operator-webhook");
/// # let _ = (local, deployed);
/// ```
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    pub(crate) name: String,
    pub(crate) bind: SocketAddr,
    pub(crate) cert_dir: Option<PathBuf>,
    pub(crate) endpoint: Option<WebhookEndpoint>,
    pub(crate) secret: Option<(String, String)>,
    pub(crate) namespace_selector: Option<LabelSelector>,
    pub(crate) manage_configurations: bool,
    pub(crate) validity: Option<Duration>,
    pub(crate) check_interval: Option<Duration>,
    /// `(group, kind)` served besides the manager's primary kinds.
    pub(crate) kinds: Vec<(String, String)>,
    pub(crate) all_registered: bool,
}

/// Where the apiserver reaches this operator's webhook server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum WebhookEndpoint {
    /// `namespace/name` Service, port 443.
    Service(String, String),
    /// `https://host` or `https://host:port`; without a port, the server's bound port.
    Url(String),
}

impl WebhookOptions {
    /// Options for the operator `name` (names the configurations and the certificate Secret):
    /// port 9443 on every address, self-signed certificates, the apiserver calling
    /// `https://127.0.0.1:<port>` until [`WebhookOptions::service`] or [`WebhookOptions::url`]
    /// says otherwise.
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 9443),
            cert_dir: None,
            endpoint: None,
            secret: None,
            namespace_selector: None,
            manage_configurations: true,
            validity: None,
            check_interval: None,
            kinds: Vec::new(),
            all_registered: false,
        }
    }

    /// Also serve `K`'s webhooks (by default the manager serves those of the kinds its
    /// controllers and watchers are `for`: a binary may link kinds another operator serves).
    #[must_use]
    pub fn serve<K: kube::Resource<DynamicType = ()>>(mut self) -> Self {
        self.kinds
            .push((K::group(&()).into_owned(), K::kind(&()).into_owned()));
        self
    }

    /// Serve the webhooks of every kind linked into the binary (a webhook-only operator).
    #[must_use]
    pub fn serve_all_registered(mut self) -> Self {
        self.all_registered = true;
        self
    }

    /// Whether the webhooks of `group`/`kind` are served, given the manager's primary kinds.
    pub(crate) fn serves(&self, group: &str, kind: &str, primary: &[(String, String)]) -> bool {
        self.all_registered || listed(&self.kinds, group, kind) || listed(primary, group, kind)
    }

    /// The port (0: any free port, reported by `Manager::on_listening` as `webhook`).
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.bind.set_port(port);
        self
    }

    /// The address to listen on (default every address).
    #[must_use]
    pub fn bind_address(mut self, ip: IpAddr) -> Self {
        self.bind.set_ip(ip);
        self
    }

    /// Serve the certificate in `dir` (`tls.crt`, `tls.key`, optional `ca.crt` injected into the
    /// configurations), reloaded when the files change.
    #[must_use]
    pub fn cert_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cert_dir = Some(dir.into());
        self
    }

    /// The apiserver calls the Service `namespace/name` (port 443).
    #[must_use]
    pub fn service(mut self, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        self.endpoint = Some(WebhookEndpoint::Service(namespace.into(), name.into()));
        self
    }

    /// The apiserver calls `base` (`https://host[:port]`; without a port, the bound one).
    #[must_use]
    pub fn url(mut self, base: impl Into<String>) -> Self {
        self.endpoint = Some(WebhookEndpoint::Url(base.into()));
        self
    }

    /// Where the self-signed certificate is kept (default `<name>-webhook-cert` in the Service's
    /// namespace, else the client's default namespace).
    #[must_use]
    pub fn secret(mut self, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        self.secret = Some((namespace.into(), name.into()));
        self
    }

    /// Only objects in namespaces matching `selector` go through the webhooks (a namespaced
    /// manager sets its own namespace unless this is given).
    #[must_use]
    pub fn namespace_selector(mut self, selector: LabelSelector) -> Self {
        self.namespace_selector = Some(selector);
        self
    }

    /// Whether the manager applies the webhook configurations itself (default `true`; turn it
    /// off when they are deployed with their CA bundle by other means).
    #[must_use]
    pub fn manage_configurations(mut self, manage: bool) -> Self {
        self.manage_configurations = manage;
        self
    }

    /// Lifetime of self-signed serving certificates (default 365 days; renewed when a third is
    /// left).
    #[must_use]
    pub fn certificate_validity(mut self, validity: Duration) -> Self {
        self.validity = Some(validity);
        self
    }

    /// How often each replica re-reads the certificate Secret or directory (default 60 s).
    #[must_use]
    pub fn certificate_check_interval(mut self, interval: Duration) -> Self {
        self.check_interval = Some(interval);
        self
    }
}
