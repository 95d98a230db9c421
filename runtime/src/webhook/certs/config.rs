//! Where the certificate comes from: [`CertSource`] and the settings of a self-signed one,
//! [`SelfSigned`].

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::error::CertError;

const DAY: Duration = Duration::from_secs(24 * 3600);

/// Where the webhook server's certificate comes from.
#[derive(Clone, Debug)]
pub enum CertSource {
    /// A directory holding `tls.crt` and `tls.key` (and optionally `ca.crt`), as cert-manager or
    /// a mounted Secret provide it. The files are read again every `poll`; a changed pair that
    /// does not load (half written) is logged and the previous one kept.
    Dir {
        /// The directory.
        path: PathBuf,
        /// How often the files are read again.
        poll: Duration,
    },
    /// Self-managed: a CA and a serving certificate generated on first start and kept in a
    /// Secret, so every replica serves the same one; renewed before it expires.
    SelfSigned(SelfSigned),
}

/// Where and how a self-signed certificate is kept.
///
/// ```
/// use std::time::Duration;
/// use kubeforge::webhook::certs::SelfSigned;
///
/// let config = SelfSigned::new("operators", "webapp-operator-webhook-cert")
///     .dns_names(["webapp-operator-webhook.operators.svc"])
///     .validity(Duration::from_secs(30 * 24 * 3600)); // renewed with 10 days left
/// assert_eq!(config.renew_before, Duration::from_secs(10 * 24 * 3600));
/// ```
#[derive(Clone, Debug)]
pub struct SelfSigned {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub secret_name: String,
    /// DNS names of the serving certificate (`svc.ns.svc`, `svc.ns.svc.cluster.local`,
    /// `localhost`...).
    pub dns_names: Vec<String>,
    /// IP addresses of the serving certificate (`127.0.0.1` for local development).
    pub ip_addresses: Vec<IpAddr>,
    /// Lifetime of a serving certificate (default 365 days).
    pub validity: Duration,
    /// Lifetime of the CA (default 10 years). A new CA is made when less than a third is left;
    /// the old one stays in the bundle until it expires.
    pub ca_validity: Duration,
    /// Renew the serving certificate when less than this is left (default a third of
    /// `validity`; must be shorter than `validity` and than `ca_validity`).
    pub renew_before: Duration,
    /// How often each replica reads the Secret again and checks expiry (default 60 s).
    pub check_interval: Duration,
}

impl SelfSigned {
    /// The Secret `namespace/secret_name`, default lifetimes, no names yet.
    #[must_use]
    pub fn new(namespace: impl Into<String>, secret_name: impl Into<String>) -> Self {
        let validity = 365 * DAY;
        Self {
            namespace: namespace.into(),
            secret_name: secret_name.into(),
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            validity,
            ca_validity: 10 * 365 * DAY,
            renew_before: validity / 3,
            check_interval: Duration::from_secs(60),
        }
    }

    /// The serving certificate's DNS names.
    #[must_use]
    pub fn dns_names<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.dns_names = names.into_iter().map(Into::into).collect();
        self
    }

    /// The serving certificate's IP addresses.
    #[must_use]
    pub fn ip_addresses(mut self, ips: impl IntoIterator<Item = IpAddr>) -> Self {
        self.ip_addresses = ips.into_iter().collect();
        self
    }

    /// The serving certificate's lifetime; also sets `renew_before` to a third of it (call
    /// [`SelfSigned::renew_before`] afterwards to choose otherwise).
    #[must_use]
    pub fn validity(mut self, validity: Duration) -> Self {
        self.validity = validity;
        self.renew_before = validity / 3;
        self
    }

    /// The CA's lifetime.
    #[must_use]
    pub fn ca_validity(mut self, validity: Duration) -> Self {
        self.ca_validity = validity;
        self
    }

    /// Renew the serving certificate when less than `left` remains.
    #[must_use]
    pub fn renew_before(mut self, left: Duration) -> Self {
        self.renew_before = left;
        self
    }

    /// How often the Secret is read again (and expiry checked).
    #[must_use]
    pub fn check_interval(mut self, interval: Duration) -> Self {
        self.check_interval = interval;
        self
    }

    /// Rejects settings that would renew at every check or never look again.
    pub(super) fn check(&self) -> Result<(), CertError> {
        let invalid = |why: &str| Err(CertError::Config(why.to_owned()));
        if self.renew_before >= self.validity {
            return invalid("renew_before must be shorter than validity");
        }
        if self.renew_before >= self.ca_validity {
            return invalid("renew_before must be shorter than ca_validity");
        }
        if self.check_interval.is_zero() {
            return invalid("check_interval must not be zero");
        }
        if self.dns_names.is_empty() && self.ip_addresses.is_empty() {
            return invalid("the serving certificate needs a DNS name or an IP address");
        }
        Ok(())
    }
}
