//! The webhook server's certificate: from a directory (cert-manager, a mounted Secret), reloaded
//! when its files change, or self-signed — a CA and a serving certificate generated on first
//! start and kept in a Secret, so every replica serves the same one, renewed before it expires.
//!
//! The Secret (`kubernetes.io/tls`) holds `tls.crt`, `tls.key`, `ca.crt` (the bundle clients
//! trust: the CA, and the previous CA for a while after a CA rotation) and `ca.key`; annotations
//! `kubeforge.dev/serving-not-after`, `kubeforge.dev/ca-not-after` (RFC 3339) and
//! `kubeforge.dev/ca-name` (the CA's common name, to sign renewals) say what X.509 would, so
//! nothing parses certificates. Replicas agree through the Secret: the first to start creates it
//! (the others read the winner's on `AlreadyExists`), a renewal is written with the Secret's
//! resourceVersion (the loser of a conflict takes the winner's), and every replica re-reads it
//! every `check_interval`. The serving certificate is swapped in place: new TLS handshakes get the
//! new one, open connections keep theirs, and since the CA stays the same, clients need nothing
//! new — a renewal costs no failed call.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Client};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const SERVING_NOT_AFTER: &str = "kubeforge.dev/serving-not-after";
const CA_NOT_AFTER: &str = "kubeforge.dev/ca-not-after";
const CA_NAME: &str = "kubeforge.dev/ca-name";

/// Where the webhook server's certificate comes from.
#[derive(Clone, Debug)]
pub enum CertSource {
    /// A directory holding `tls.crt` and `tls.key` (and optionally `ca.crt`), polled every `poll`
    /// for changes; a pair that does not load is logged and the previous one kept.
    Dir {
        /// The directory.
        path: PathBuf,
        /// How often it is read again.
        poll: Duration,
    },
    /// A self-signed CA and serving certificate kept in a Secret.
    SelfSigned(SelfSigned),
}

/// Where and how the self-signed certificate is kept.
#[derive(Clone, Debug)]
pub struct SelfSigned {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub secret_name: String,
    /// DNS names of the serving certificate.
    pub dns_names: Vec<String>,
    /// IP addresses of the serving certificate.
    pub ip_addresses: Vec<IpAddr>,
    /// Lifetime of a serving certificate (default 365 days).
    pub validity: Duration,
    /// Lifetime of the CA (default 10 years; rotated when a third is left).
    pub ca_validity: Duration,
    /// Renew the serving certificate when less than this is left (default a third of `validity`).
    pub renew_before: Option<Duration>,
    /// How often each replica reads the Secret again (default 60 s).
    pub check_interval: Duration,
}

impl SelfSigned {
    /// The Secret `namespace/secret_name`, default lifetimes, no names yet.
    #[must_use]
    pub fn new(namespace: impl Into<String>, secret_name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            secret_name: secret_name.into(),
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            validity: Duration::from_secs(365 * 24 * 3600),
            ca_validity: Duration::from_secs(10 * 365 * 24 * 3600),
            renew_before: None,
            check_interval: Duration::from_secs(60),
        }
    }

    /// The serving certificate's DNS names.
    #[must_use]
    pub fn dns_names(mut self, names: Vec<String>) -> Self {
        self.dns_names = names;
        self
    }

    /// The serving certificate's IP addresses.
    #[must_use]
    pub fn ip_addresses(mut self, ips: Vec<IpAddr>) -> Self {
        self.ip_addresses = ips;
        self
    }

    /// The serving certificate's lifetime.
    #[must_use]
    pub fn validity(mut self, validity: Duration) -> Self {
        self.validity = validity;
        self
    }

    /// How often the Secret is read again.
    #[must_use]
    pub fn check_interval(mut self, interval: Duration) -> Self {
        self.check_interval = interval;
        self
    }

    fn renew_before(&self) -> Duration {
        self.renew_before.unwrap_or(self.validity / 3)
    }
}

/// Why a certificate could not be had.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Generating a key or certificate failed.
    #[error("generating the webhook certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A certificate or key does not load.
    #[error("the webhook certificate in {place} does not load: {why}")]
    Load {
        /// The Secret or directory.
        place: String,
        /// Why.
        why: String,
    },
    /// Reading or writing the Secret failed.
    #[error("{action} Secret {namespace}/{name}: {source}")]
    Secret {
        /// What was done.
        action: &'static str,
        /// The Secret's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The self-signed source needs a client.
    #[error("a self-signed webhook certificate needs a client to keep its Secret")]
    NoClient,
}

/// The serving certificate and where it came from; see [`ServingCerts::current`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    /// When the serving certificate expires (`None` from a directory: nothing parses it).
    pub not_after: Option<SystemTime>,
    /// A short fingerprint of the certificate (FNV-1a of its DER), for logs and tests.
    pub fingerprint: String,
}

/// What a Secret (or directory) holds, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Material {
    cert_pem: String,
    key_pem: String,
    ca_bundle: Option<String>,
    /// The CA's key and common name (self-signed only).
    ca: Option<(String, String)>,
    not_after: Option<SystemTime>,
    ca_not_after: Option<SystemTime>,
}

/// The certificate the server serves, swapped in place; cheap to clone.
#[derive(Clone)]
pub struct ServingCerts {
    inner: Arc<Inner>,
}

struct Inner {
    source: CertSource,
    client: Option<Client>,
    current: RwLock<Arc<CertifiedKey>>,
    info: RwLock<CertInfo>,
    material: Mutex<Material>,
    /// The Secret's resourceVersion the material came from.
    version: Mutex<Option<String>>,
    bundle: watch::Sender<Option<Vec<u8>>>,
}

impl std::fmt::Debug for ServingCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCerts")
            .field("source", &self.inner.source)
            .field("current", &self.current())
            .finish()
    }
}

#[derive(Debug)]
struct Resolver(Arc<Inner>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.0.current.read().unwrap_or_else(|e| e.into_inner()),
        ))
    }
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").finish_non_exhaustive()
    }
}

impl ServingCerts {
    /// Loads the certificate (a directory), or loads or bootstraps it (self-signed: the Secret is
    /// created when absent, replaced when it does not load, renewed when it expires soon).
    ///
    /// # Errors
    ///
    /// The directory's pair does not load; the Secret cannot be read or written.
    pub async fn start(source: CertSource, client: Option<Client>) -> Result<Self, CertError> {
        let (material, version) = match &source {
            CertSource::Dir { path, .. } => (read_dir(path)?, None),
            CertSource::SelfSigned(config) => {
                let client = client.as_ref().ok_or(CertError::NoClient)?;
                let (material, version) = ensure_secret(client, config).await?;
                (material, version)
            }
        };
        let key = certified_key(&material, &place(&source))?;
        let info = info_of(&key, material.not_after);
        let bundle = material.ca_bundle.clone().map(String::into_bytes);
        Ok(Self {
            inner: Arc::new(Inner {
                source,
                client,
                current: RwLock::new(Arc::new(key)),
                info: RwLock::new(info),
                material: Mutex::new(material),
                version: Mutex::new(version),
                bundle: watch::channel(bundle).0,
            }),
        })
    }

    /// The resolver for a rustls server config: always the current certificate.
    #[must_use]
    pub fn resolver(&self) -> Arc<dyn ResolvesServerCert> {
        Arc::new(Resolver(Arc::clone(&self.inner)))
    }

    /// A rustls server config (ring, HTTP/1.1) serving the current certificate.
    #[must_use]
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions();
        let mut config = match builder {
            Ok(builder) => builder
                .with_no_client_auth()
                .with_cert_resolver(self.resolver()),
            // ring supports the default versions: unreachable, but never a panic.
            Err(_) => rustls::ServerConfig::builder()
                .with_no_client_auth()
                .with_cert_resolver(self.resolver()),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }

    /// The PEM CA bundle clients must trust (`None` from a directory without `ca.crt`), updated
    /// on change.
    #[must_use]
    pub fn ca_bundle(&self) -> watch::Receiver<Option<Vec<u8>>> {
        self.inner.bundle.subscribe()
    }

    /// The serving certificate now.
    #[must_use]
    pub fn current(&self) -> CertInfo {
        self.inner
            .info
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps the certificate fresh until `shutdown` (see the [module docs](self)); API and file
    /// errors are logged and retried at the next check, never fatal.
    ///
    /// # Errors
    ///
    /// None today; the signature leaves room for fatal conditions.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), CertError> {
        let interval = match &self.inner.source {
            CertSource::Dir { poll, .. } => *poll,
            CertSource::SelfSigned(config) => config.check_interval,
        };
        loop {
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = shutdown.cancelled() => return Ok(()),
            }
            if let Err(error) = self.refresh(false).await {
                tracing::warn!(%error, "webhook certificate check failed; retrying at the next check");
            }
        }
    }

    /// Renews now: a self-signed serving certificate is replaced in the Secret (and served); a
    /// directory is read again.
    ///
    /// # Errors
    ///
    /// As [`ServingCerts::start`].
    pub async fn renew_now(&self) -> Result<(), CertError> {
        self.refresh(true).await
    }

    async fn refresh(&self, force: bool) -> Result<(), CertError> {
        match &self.inner.source {
            CertSource::Dir { path, .. } => {
                let material = read_dir(path)?;
                self.install(material, None)
            }
            CertSource::SelfSigned(config) => {
                let client = self.inner.client.as_ref().ok_or(CertError::NoClient)?;
                let (material, version) = if force {
                    renew_secret(client, config).await?
                } else {
                    ensure_secret(client, config).await?
                };
                self.install(material, version)
            }
        }
    }

    /// Serves `material` if it differs from what is served.
    fn install(&self, material: Material, version: Option<String>) -> Result<(), CertError> {
        let mut current = self
            .inner
            .material
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *self.inner.version.lock().unwrap_or_else(|e| e.into_inner()) = version;
        if *current == material {
            return Ok(());
        }
        let key = certified_key(&material, &place(&self.inner.source))?;
        let info = info_of(&key, material.not_after);
        tracing::info!(fingerprint = %info.fingerprint, not_after = ?material.not_after, "serving a new webhook certificate");
        *self
            .inner
            .current
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
        *self.inner.info.write().unwrap_or_else(|e| e.into_inner()) = info;
        let bundle = material.ca_bundle.clone().map(String::into_bytes);
        self.inner.bundle.send_if_modified(|b| {
            let changed = *b != bundle;
            *b = bundle;
            changed
        });
        *current = material;
        Ok(())
    }
}

fn place(source: &CertSource) -> String {
    match source {
        CertSource::Dir { path, .. } => path.display().to_string(),
        CertSource::SelfSigned(c) => format!("Secret {}/{}", c.namespace, c.secret_name),
    }
}

fn info_of(key: &CertifiedKey, not_after: Option<SystemTime>) -> CertInfo {
    let der = key.cert.first().map_or(&[][..], |c| c.as_ref());
    let hash = der.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    });
    CertInfo {
        not_after,
        fingerprint: format!("{hash:016x}"),
    }
}

/// The rustls key of `material`.
fn certified_key(material: &Material, place: &str) -> Result<CertifiedKey, CertError> {
    let load = |why: String| CertError::Load {
        place: place.to_owned(),
        why,
    };
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(material.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| load(format!("tls.crt: {e}")))?;
    if chain.is_empty() {
        return Err(load("tls.crt holds no certificate".to_owned()));
    }
    let key = PrivateKeyDer::from_pem_slice(material.key_pem.as_bytes())
        .map_err(|e| load(format!("tls.key: {e}")))?;
    let key = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| load(format!("tls.key: {e}")))?;
    let certified = CertifiedKey::new(chain, key);
    certified
        .keys_match()
        .map_err(|e| load(format!("tls.key does not match tls.crt: {e}")))?;
    Ok(certified)
}

fn read_dir(path: &std::path::Path) -> Result<Material, CertError> {
    let read = |file: &str| std::fs::read_to_string(path.join(file));
    let load = |file: &str, e: std::io::Error| CertError::Load {
        place: path.display().to_string(),
        why: format!("{file}: {e}"),
    };
    let material = Material {
        cert_pem: read("tls.crt").map_err(|e| load("tls.crt", e))?,
        key_pem: read("tls.key").map_err(|e| load("tls.key", e))?,
        ca_bundle: read("ca.crt").ok(),
        ca: None,
        not_after: None,
        ca_not_after: None,
    };
    // A half-written pair does not load: refused here, the served one stays.
    certified_key(&material, &path.display().to_string())?;
    Ok(material)
}

/// A CA: its certificate, key and name.
struct Ca {
    cert_pem: String,
    key: rcgen::KeyPair,
    name: String,
    not_after: SystemTime,
}

/// `t` as rcgen's date-time.
fn datetime(t: SystemTime) -> time::OffsetDateTime {
    time::OffsetDateTime::from(t)
}

/// A new CA named `name`, valid for `validity`.
fn new_ca(validity: Duration) -> Result<Ca, CertError> {
    let now = SystemTime::now();
    let stamp = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let name = format!("kubeforge webhook CA {stamp}");
    let key = rcgen::KeyPair::generate()?;
    let params = ca_params(&name, now, now + validity)?;
    let cert_pem = params.self_signed(&key)?.pem();
    Ok(Ca {
        cert_pem,
        key,
        name,
        not_after: now + validity,
    })
}

/// The CA's parameters: the same ones sign renewals, so the issuer's name and key identifier
/// match the CA certificate's without parsing it.
fn ca_params(
    name: &str,
    not_before: SystemTime,
    not_after: SystemTime,
) -> Result<rcgen::CertificateParams, CertError> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.not_before = datetime(not_before - Duration::from_secs(300));
    params.not_after = datetime(not_after);
    Ok(params)
}

/// A serving certificate for `config`'s names, signed by `ca`: `(cert_pem, key_pem, not_after)`.
fn new_serving(ca: &Ca, config: &SelfSigned) -> Result<(String, String, SystemTime), CertError> {
    let now = SystemTime::now();
    let not_after = (now + config.validity).min(ca.not_after);
    let mut params = rcgen::CertificateParams::new(config.dns_names.clone())?;
    for ip in &config.ip_addresses {
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress(*ip));
    }
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kubeforge webhook");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
    ];
    params.use_authority_key_identifier_extension = true;
    params.not_before = datetime(now - Duration::from_secs(300));
    params.not_after = datetime(not_after);
    let key = rcgen::KeyPair::generate()?;
    let issuer_params = ca_params(&ca.name, now, ca.not_after)?;
    let issuer = rcgen::Issuer::from_params(&issuer_params, &ca.key);
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem(), not_after))
}

/// Fresh material: a new CA (keeping `previous_ca` in the bundle) and a serving certificate.
fn generate(config: &SelfSigned, previous_ca: Option<&str>) -> Result<Material, CertError> {
    let ca = new_ca(config.ca_validity)?;
    serving_material(&ca, config, previous_ca)
}

fn serving_material(
    ca: &Ca,
    config: &SelfSigned,
    previous_ca: Option<&str>,
) -> Result<Material, CertError> {
    let (cert_pem, key_pem, not_after) = new_serving(ca, config)?;
    let mut bundle = ca.cert_pem.clone();
    if let Some(previous) = previous_ca {
        bundle.push_str(previous);
    }
    Ok(Material {
        cert_pem,
        key_pem,
        ca_bundle: Some(bundle),
        ca: Some((ca.key.serialize_pem(), ca.name.clone())),
        not_after: Some(not_after),
        ca_not_after: Some(ca.not_after),
    })
}

/// The CA of `material`, if it holds one that loads.
fn ca_of(material: &Material) -> Option<Ca> {
    let (key_pem, name) = material.ca.as_ref()?;
    let key = rcgen::KeyPair::from_pem(key_pem).ok()?;
    // The first certificate of the bundle is the current CA.
    let bundle = material.ca_bundle.as_deref()?;
    let end = bundle.find("-----END CERTIFICATE-----")? + "-----END CERTIFICATE-----\n".len();
    Some(Ca {
        cert_pem: bundle.get(..end).unwrap_or(bundle).to_owned(),
        key,
        name: name.clone(),
        not_after: material.ca_not_after?,
    })
}

/// What needs doing with `material` now.
fn renewal(
    material: &Material,
    config: &SelfSigned,
    force: bool,
) -> Option<Result<Material, CertError>> {
    let now = SystemTime::now();
    let left = |t: Option<SystemTime>| {
        t.and_then(|t| t.duration_since(now).ok())
            .unwrap_or_default()
    };
    let Some(ca) = ca_of(material) else {
        return Some(generate(config, None));
    };
    if left(material.ca_not_after) < config.ca_validity / 3 {
        tracing::info!("webhook CA expires soon: rotating it (the old one stays in the bundle)");
        return Some(generate(config, Some(&ca.cert_pem)));
    }
    if force || left(material.not_after) < config.renew_before() {
        // Keep the bundle as it is (it may hold the previous CA still).
        return Some(serving_material(&ca, config, None).map(|m| Material {
            ca_bundle: material.ca_bundle.clone(),
            ..m
        }));
    }
    None
}

fn secret_material(secret: &Secret) -> Option<Material> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| -> Option<String> {
        data.get(key)
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
    };
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    let time = |key: &str| -> Option<SystemTime> {
        let ts: k8s_openapi::jiff::Timestamp = annotations.get(key)?.parse().ok()?;
        let secs = u64::try_from(ts.as_second()).ok()?;
        Some(UNIX_EPOCH + Duration::from_secs(secs))
    };
    let material = Material {
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
        ca_bundle: text("ca.crt"),
        ca: text("ca.key").zip(annotations.get(CA_NAME).cloned()),
        not_after: time(SERVING_NOT_AFTER),
        ca_not_after: time(CA_NOT_AFTER),
    };
    certified_key(&material, "Secret").ok()?;
    Some(material)
}

fn secret_of(config: &SelfSigned, material: &Material, version: Option<String>) -> Secret {
    let stamp = |t: Option<SystemTime>| {
        let secs = t
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        k8s_openapi::jiff::Timestamp::from_second(i64::try_from(secs).unwrap_or(0))
            .map(|t| t.to_string())
            .unwrap_or_default()
    };
    let mut data = BTreeMap::new();
    let mut put = |key: &str, value: &str| {
        data.insert(key.to_owned(), ByteString(value.as_bytes().to_vec()));
    };
    put("tls.crt", &material.cert_pem);
    put("tls.key", &material.key_pem);
    if let Some(bundle) = &material.ca_bundle {
        put("ca.crt", bundle);
    }
    let mut annotations = BTreeMap::from([
        (SERVING_NOT_AFTER.to_owned(), stamp(material.not_after)),
        (CA_NOT_AFTER.to_owned(), stamp(material.ca_not_after)),
    ]);
    if let Some((key, name)) = &material.ca {
        put("ca.key", key);
        annotations.insert(CA_NAME.to_owned(), name.clone());
    }
    Secret {
        metadata: ObjectMeta {
            name: Some(config.secret_name.clone()),
            namespace: Some(config.namespace.clone()),
            resource_version: version,
            annotations: Some(annotations),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                "kubeforge".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(data),
        ..Secret::default()
    }
}

type Versioned = (Material, Option<String>);

/// The Secret's material, created when absent, replaced when it does not load, renewed when
/// due (or `force`d). A lost race (409 on create or replace) reads the winner's.
async fn sync_secret(
    client: &Client,
    config: &SelfSigned,
    force: bool,
) -> Result<Versioned, CertError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &config.namespace);
    let failed = |action: &'static str| {
        move |source| CertError::Secret {
            action,
            namespace: config.namespace.clone(),
            name: config.secret_name.clone(),
            source: Box::new(source),
        }
    };
    for _ in 0..5 {
        let existing = api
            .get_opt(&config.secret_name)
            .await
            .map_err(failed("reading"))?;
        let (write, version) = match &existing {
            None => (generate(config, None)?, None),
            Some(secret) => {
                let version = secret.metadata.resource_version.clone();
                match secret_material(secret) {
                    Some(material) => match renewal(&material, config, force) {
                        None => return Ok((material, version)),
                        Some(renewed) => (renewed?, version),
                    },
                    None => {
                        tracing::warn!(secret = %config.secret_name, "the webhook certificate Secret does not load; replacing it");
                        (generate(config, None)?, version)
                    }
                }
            }
        };
        let secret = secret_of(config, &write, version.clone());
        let written = match version {
            None => api.create(&PostParams::default(), &secret).await,
            Some(_) => {
                api.replace(&config.secret_name, &PostParams::default(), &secret)
                    .await
            }
        };
        match written {
            Ok(secret) => return Ok((write, secret.metadata.resource_version)),
            // Another replica wrote first: use theirs.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(failed("writing")(e)),
        }
    }
    let secret = api
        .get(&config.secret_name)
        .await
        .map_err(failed("reading"))?;
    let version = secret.metadata.resource_version.clone();
    secret_material(&secret)
        .map(|m| (m, version))
        .ok_or_else(|| CertError::Load {
            place: format!("Secret {}/{}", config.namespace, config.secret_name),
            why: "still unreadable after five attempts".to_owned(),
        })
}

async fn ensure_secret(client: &Client, config: &SelfSigned) -> Result<Versioned, CertError> {
    sync_secret(client, config, false).await
}

async fn renew_secret(client: &Client, config: &SelfSigned) -> Result<Versioned, CertError> {
    sync_secret(client, config, true).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> SelfSigned {
        SelfSigned::new("ns", "cert")
            .dns_names(vec!["hooks.ns.svc".to_owned()])
            .ip_addresses(vec![IpAddr::from([127, 0, 0, 1])])
    }

    /// A TLS handshake with a server holding `material`, trusting `ca` only, for `name`.
    async fn handshake(material: &Material, ca: &str, name: &str) -> Result<Vec<u8>, String> {
        let key = certified_key(material, "test").map_err(|e| e.to_string())?;
        let certs = ServingCerts {
            inner: Arc::new(Inner {
                source: CertSource::SelfSigned(config()),
                client: None,
                info: RwLock::new(info_of(&key, None)),
                current: RwLock::new(Arc::new(key)),
                material: Mutex::new(material.clone()),
                version: Mutex::new(None),
                bundle: watch::channel(None).0,
            }),
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(certs.server_config());
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(async move { acceptor.accept(server_io).await.map(|_| ()) });
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
            roots
                .add(cert.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        }
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name =
            rustls::pki_types::ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(client))
            .connect(name, client_io)
            .await
            .map_err(|e| e.to_string())?;
        let _ = server.await;
        let peer = tls.get_ref().1.peer_certificates().unwrap_or_default();
        Ok(peer.first().map(|c| c.to_vec()).unwrap_or_default())
    }

    #[tokio::test]
    async fn a_generated_certificate_should_be_trusted_through_its_ca_for_its_names_only() {
        let material = generate(&config(), None).unwrap();
        let ca = material.ca_bundle.clone().unwrap();
        assert!(handshake(&material, &ca, "hooks.ns.svc").await.is_ok());
        assert!(handshake(&material, &ca, "127.0.0.1").await.is_ok());
        let wrong = handshake(&material, &ca, "other.ns.svc").await;
        assert!(wrong.is_err(), "{wrong:?}");
        let stranger = generate(&config(), None).unwrap();
        let untrusted = handshake(&material, &stranger.ca_bundle.unwrap(), "hooks.ns.svc").await;
        assert!(
            untrusted.is_err(),
            "another CA does not vouch for it: {untrusted:?}"
        );
    }

    #[tokio::test]
    async fn a_renewal_should_keep_the_ca_and_a_ca_rotation_should_keep_the_old_one_trusted() {
        let config = config();
        let first = generate(&config, None).unwrap();
        let renewed = renewal(&first, &config, true).unwrap().unwrap();
        assert_ne!(renewed.cert_pem, first.cert_pem);
        assert_eq!(renewed.ca_bundle, first.ca_bundle, "same CA");
        assert!(renewal(&renewed, &config, false).is_none(), "nothing due");
        let old_ca = first.ca_bundle.clone().unwrap();
        let renewed_peer = handshake(&renewed, &old_ca, "hooks.ns.svc").await.unwrap();
        assert!(!renewed_peer.is_empty());

        // The CA close to its end: a new CA signs, the bundle holds both.
        let mut aging = renewed.clone();
        aging.ca_not_after = Some(SystemTime::now() + Duration::from_secs(3600));
        let rotated = renewal(&aging, &config, false).unwrap().unwrap();
        let bundle = rotated.ca_bundle.clone().unwrap();
        assert_eq!(bundle.matches("BEGIN CERTIFICATE").count(), 2, "{bundle}");
        assert!(bundle.ends_with(&old_ca), "the old CA stays trusted");
        handshake(&rotated, &bundle, "hooks.ns.svc").await.unwrap();
    }

    #[test]
    fn a_secret_should_round_trip_and_a_corrupt_one_should_not_load() {
        let config = config();
        let material = generate(&config, None).unwrap();
        let secret = secret_of(&config, &material, None);
        let back = secret_material(&secret).unwrap();
        assert_eq!(back.cert_pem, material.cert_pem);
        assert_eq!(back.ca, material.ca);
        let secs = |t: Option<SystemTime>| t.unwrap().duration_since(UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs(back.not_after), secs(material.not_after));
        let mut corrupt = secret.clone();
        corrupt
            .data
            .as_mut()
            .unwrap()
            .insert("tls.crt".into(), ByteString(b"garbage".to_vec()));
        assert!(secret_material(&corrupt).is_none());
    }

    #[tokio::test]
    async fn a_directory_should_reload_a_new_pair_and_keep_the_old_one_over_a_half_written_pair() {
        let dir = std::env::temp_dir().join(format!("kubeforge-certs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |m: &Material| {
            std::fs::write(dir.join("tls.crt"), &m.cert_pem).unwrap();
            std::fs::write(dir.join("tls.key"), &m.key_pem).unwrap();
            std::fs::write(dir.join("ca.crt"), m.ca_bundle.as_deref().unwrap()).unwrap();
        };
        let first = generate(&config(), None).unwrap();
        write(&first);
        let source = CertSource::Dir {
            path: dir.clone(),
            poll: Duration::from_millis(10),
        };
        let certs = ServingCerts::start(source, None).await.unwrap();
        let before = certs.current();
        let second = generate(&config(), None).unwrap();
        write(&second);
        certs.renew_now().await.unwrap();
        let after = certs.current();
        assert_ne!(before.fingerprint, after.fingerprint);
        assert_eq!(
            certs.ca_bundle().borrow().clone(),
            second.ca_bundle.clone().map(String::into_bytes)
        );
        // Half written: the new certificate with the old key.
        std::fs::write(
            dir.join("tls.crt"),
            generate(&config(), None).unwrap().cert_pem,
        )
        .unwrap();
        assert!(certs.renew_now().await.is_err());
        assert_eq!(certs.current(), after, "still serving the last good pair");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
