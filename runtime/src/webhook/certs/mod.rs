//! The webhook server's certificate: from a directory (cert-manager, a mounted Secret),
//! reloaded when its files change, or self-signed — a CA and a serving certificate generated on
//! first start and kept in a Secret so every replica serves the same one, renewed before it
//! expires.
//!
//! [`ServingCerts::start`] returns once a certificate is available; [`ServingCerts::run`] keeps
//! it fresh until shutdown. The server takes [`ServingCerts::server_config`] (or
//! [`ServingCerts::resolver`]): the certificate is swapped in place, so new TLS handshakes get
//! the new one and open connections keep theirs. Whoever injects the CA bundle into webhook
//! configurations watches [`ServingCerts::ca_bundle`].
//!
//! ```no_run
//! # async fn example(client: kube::Client) -> Result<(), kubeforge::webhook::certs::CertError> {
//! use kubeforge::webhook::certs::{CertSource, SelfSigned, ServingCerts};
//! use tokio_util::sync::CancellationToken;
//!
//! let source = CertSource::SelfSigned(
//!     SelfSigned::new("operators", "webapp-operator-webhook-cert")
//!         .dns_names(["webapp-operator-webhook.operators.svc"]),
//! );
//! let certs = ServingCerts::start(source, Some(client)).await?;
//! let acceptor = tokio_rustls::TlsAcceptor::from(certs.server_config());
//! let bundle = certs.ca_bundle(); // PEM, for the configurations' `caBundle`
//! tokio::spawn(certs.clone().run(CancellationToken::new()));
//! # let _ = (acceptor, bundle);
//! # Ok(())
//! # }
//! ```
//!
//! # Self-signed: one Secret shared by the replicas
//!
//! The Secret (type `kubernetes.io/tls`, label `app.kubernetes.io/managed-by: kubeforge`) holds
//! `tls.crt`, `tls.key`, `ca.crt` (the bundle clients trust) and `ca.key` (to sign renewals);
//! annotations `kubeforge.dev/serving-not-after`, `kubeforge.dev/ca-not-after`,
//! `kubeforge.dev/previous-ca-not-after` (RFC 3339) and `kubeforge.dev/ca-name` say what X.509
//! would, so nothing parses certificates.
//!
//! - **Start**: the first replica creates the Secret; one that loses the race (`AlreadyExists`)
//!   reads and serves the winner's.
//! - **Every `check_interval`** each replica reads the Secret again (and serves what another
//!   replica renewed). When the serving certificate has less than `renew_before` left, it is
//!   renewed — a new key and certificate signed by the same CA — with a write that carries the
//!   Secret's resourceVersion; the loser of a `Conflict` serves the winner's. The CA is
//!   unchanged, so clients need nothing new and a renewal costs no failed call.
//! - **CA rotation**: when the CA has less than a third of `ca_validity` left, a new CA is
//!   made and `ca.crt` holds both, the new one first, until the old one expires. The serving
//!   certificate (signed by the old CA) is kept until its own renewal, which the new CA signs:
//!   by then every client has had the new bundle for a while.
//! - **A deleted or corrupted Secret** (say, garbage in `tls.crt`) is written again with the
//!   certificate and CA the replica serves (a fresh CA if it serves none yet), so clients keep
//!   trusting it. To start over with a new CA, delete the Secret while no replica runs.
//! - API errors while running are logged and retried at the next check, never fatal.
//!
//! # A directory
//!
//! `tls.crt` and `tls.key` (a chain and its key) and optionally `ca.crt` (the bundle) are read
//! every `poll`; a changed pair is served once it loads, and a pair caught half written is logged
//! and the previous one kept.

mod config;
mod error;
mod generate;
mod material;
mod reload;
mod resolver;
mod secret;
#[cfg(test)]
mod tests;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use kube::Client;
use rustls::server::ResolvesServerCert;
use tokio::sync::{Mutex, watch};
use tokio_util::sync::CancellationToken;

pub use config::{CertSource, SelfSigned};
pub use error::CertError;
pub use material::CertInfo;

use material::Material;
use reload::Snapshot;
use resolver::Current;

/// The webhook server's certificate, kept fresh; cheap to clone (the server, the CA-bundle
/// injector and [`ServingCerts::run`] share one).
#[derive(Clone)]
pub struct ServingCerts {
    shared: Arc<Shared>,
}

struct Shared {
    source: CertSource,
    client: Option<Client>,
    current: Arc<Current>,
    config: Arc<rustls::ServerConfig>,
    info: RwLock<CertInfo>,
    bundle: watch::Sender<Option<Vec<u8>>>,
    /// What is served; held across a refresh so that refreshes do not interleave.
    state: Mutex<State>,
}

struct State {
    material: Material,
    /// A directory's files as last read, loaded or not (a broken pair is reported once).
    seen: Option<Snapshot>,
}

impl std::fmt::Debug for ServingCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCerts")
            .field("source", &self.shared.source)
            .field("current", &self.current())
            .finish_non_exhaustive()
    }
}

impl ServingCerts {
    /// Loads the certificate (a directory), or loads or bootstraps it (self-signed: reads the
    /// Secret; when absent, generates a CA and a serving certificate and creates it; when
    /// another replica created it first, serves theirs; when it does not load, replaces it;
    /// when it is due for renewal, renews it). Returns once a certificate is available.
    ///
    /// # Errors
    ///
    /// Contradictory settings ([`CertError::Config`]), no client for a self-signed source, the
    /// directory's pair not loading, or the Secret not readable or writable (the caller retries).
    pub async fn start(source: CertSource, client: Option<Client>) -> Result<Self, CertError> {
        let (material, seen) = match &source {
            CertSource::Dir { path, poll } => {
                if poll.is_zero() {
                    return Err(CertError::Config("poll must not be zero".to_owned()));
                }
                let snapshot = reload::snapshot(path)?;
                (reload::load(&snapshot, path)?, Some(snapshot))
            }
            CertSource::SelfSigned(config) => {
                config.check()?;
                let client = client.as_ref().ok_or(CertError::NoClient)?;
                (secret::sync(client, config, None, false).await?, None)
            }
        };
        let key = Arc::new(material.certified_key(&place(&source))?);
        let info = material::info(&key, material.not_after);
        tracing::info!(source = %place(&source), sha256 = %info.sha256, not_after = ?info.not_after, "serving the webhook certificate");
        let current = Arc::new(Current::new(key));
        let config = resolver::server_config(Arc::clone(&current) as Arc<dyn ResolvesServerCert>)?;
        Ok(Self {
            shared: Arc::new(Shared {
                bundle: watch::channel(material.bundle_bytes()).0,
                source,
                client,
                current,
                config,
                info: RwLock::new(info),
                state: Mutex::new(State { material, seen }),
            }),
        })
    }

    /// A resolver for a rustls server config that always hands out the current certificate.
    #[must_use]
    pub fn resolver(&self) -> Arc<dyn ResolvesServerCert> {
        Arc::clone(&self.shared.current) as Arc<dyn ResolvesServerCert>
    }

    /// A rustls server config with [`ServingCerts::resolver`]: ring, the safe default protocol
    /// versions, ALPN `http/1.1`.
    #[must_use]
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        Arc::clone(&self.shared.config)
    }

    /// The PEM CA bundle clients must trust (`None` for a directory without `ca.crt`); changes
    /// when a renewal or reload changes it.
    #[must_use]
    pub fn ca_bundle(&self) -> watch::Receiver<Option<Vec<u8>>> {
        self.shared.bundle.subscribe()
    }

    /// The serving certificate now.
    #[must_use]
    pub fn current(&self) -> CertInfo {
        self.shared
            .info
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps the certificate fresh until `shutdown`: every `check_interval` (self-signed: reads
    /// the Secret, renews what is due) or `poll` (a directory: reads the files). Errors are
    /// logged and retried at the next check.
    ///
    /// # Errors
    ///
    /// None today: every failure is retried. The signature leaves room for fatal ones.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), CertError> {
        let every = self.interval();
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = shutdown.cancelled() => return Ok(()),
            }
            if let Err(error) = self.refresh(false).await {
                tracing::warn!(%error, retry_in = ?every, "keeping the webhook certificate fresh failed");
            }
        }
    }

    /// Renews now: a self-signed source writes a new serving certificate to the Secret (signed
    /// by the same CA) and serves it; a directory is read again.
    ///
    /// # Errors
    ///
    /// The Secret cannot be read or written, or the directory's pair does not load (the
    /// previous certificate is still served).
    pub async fn renew_now(&self) -> Result<(), CertError> {
        self.refresh(true).await
    }

    async fn refresh(&self, force: bool) -> Result<(), CertError> {
        let mut state = self.shared.state.lock().await;
        let material = match &self.shared.source {
            CertSource::Dir { path, .. } => {
                let snapshot = reload::snapshot(path)?;
                if !force && state.seen.as_ref() == Some(&snapshot) {
                    return Ok(());
                }
                state.seen = Some(snapshot.clone());
                reload::load(&snapshot, path)?
            }
            CertSource::SelfSigned(config) => {
                let client = self.shared.client.as_ref().ok_or(CertError::NoClient)?;
                secret::sync(client, config, Some(&state.material), force).await?
            }
        };
        if material == state.material {
            return Ok(());
        }
        let key = Arc::new(material.certified_key(&place(&self.shared.source))?);
        let info = material::info(&key, material.not_after);
        tracing::info!(sha256 = %info.sha256, not_after = ?info.not_after, "serving a new webhook certificate");
        self.shared.current.set(key);
        *self.shared.info.write().unwrap_or_else(|e| e.into_inner()) = info;
        let bundle = material.bundle_bytes();
        self.shared.bundle.send_if_modified(|b| {
            let changed = *b != bundle;
            *b = bundle;
            changed
        });
        state.material = material;
        Ok(())
    }

    /// How often [`ServingCerts::run`] looks again.
    fn interval(&self) -> Duration {
        match &self.shared.source {
            CertSource::Dir { poll, .. } => *poll,
            CertSource::SelfSigned(config) => config.check_interval,
        }
    }
}

/// The directory or Secret, for errors and logs.
fn place(source: &CertSource) -> String {
    match source {
        CertSource::Dir { path, .. } => path.display().to_string(),
        CertSource::SelfSigned(config) => secret::place(config),
    }
}
