//! [`WebhookOptions`]: how the manager serves webhooks (feature `webhooks`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::listed;

/// How the manager serves webhooks (see the [module docs](super)).
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
