//! [`CertError`]: which step failed, and why.

use std::path::PathBuf;

/// Why a webhook certificate could not be had or kept fresh.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Generating a key or signing a certificate failed.
    #[error("generating the webhook {what}: {source}")]
    Generate {
        /// What was being generated (`CA`, `serving certificate`).
        what: &'static str,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// Reading, creating or replacing the Secret failed: `get Secret ns/name: 403 Forbidden:
    /// …`.
    #[error(
        "{action} Secret {namespace}/{name}: {}",
        crate::client::readable(.source)
    )]
    Secret {
        /// `get`, `create` or `replace`.
        action: &'static str,
        /// The Secret's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Other replicas kept writing the Secret between our read and our write.
    #[error("Secret {namespace}/{name} kept changing under us; gave up after {attempts} attempts")]
    Contended {
        /// The Secret's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// How many read-then-write rounds were tried.
        attempts: u32,
    },
    /// A file of a certificate directory could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A certificate, key or annotation does not parse, or the key does not match the
    /// certificate.
    #[error("the webhook certificate in {place} does not load: {reason}")]
    Parse {
        /// The directory or Secret (`Secret ns/name`).
        place: String,
        /// What is wrong.
        reason: String,
    },
    /// Building the TLS server configuration failed.
    #[error("building the webhook TLS configuration: {0}")]
    Tls(#[source] rustls::Error),
    /// A self-signed certificate needs a client to keep its Secret.
    #[error("a self-signed webhook certificate needs a Kubernetes client to keep its Secret")]
    NoClient,
    /// The settings contradict each other.
    #[error("invalid webhook certificate settings: {0}")]
    Config(String),
}

impl CertError {
    /// Whether trying again may succeed: an API error of the Secret other than a refusal (a
    /// timeout, `429`, `5xx`, a connection), a lost race, a directory's files missing or caught
    /// half written. Not: contradictory settings, no client, the apiserver refusing the request
    /// (`400`, `401`, `403`, `404` for a missing namespace, `422`), a certificate that cannot
    /// be generated or served.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Secret { source, .. } => !matches!(
                source.as_ref(),
                kube::Error::Api(status) if matches!(status.code, 400 | 401 | 403 | 404 | 422)
            ),
            Self::Contended { .. } | Self::Read { .. } | Self::Parse { .. } => true,
            Self::Generate { .. } | Self::Tls(_) | Self::NoClient | Self::Config(_) => false,
        }
    }

    /// A closure turning rcgen's error into [`CertError::Generate`] for `what`.
    pub(super) fn generate(what: &'static str) -> impl FnOnce(rcgen::Error) -> Self {
        move |source| Self::Generate { what, source }
    }

    /// A parse error for `place`.
    pub(super) fn parse(place: &str, reason: impl Into<String>) -> Self {
        Self::Parse {
            place: place.to_owned(),
            reason: reason.into(),
        }
    }
}
