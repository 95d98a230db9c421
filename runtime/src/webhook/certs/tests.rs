//! Unit tests: real TLS handshakes against generated certificates, the renewal rules, the
//! Secret layout and directory reloads.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::generate::{bootstrap, refresh};
use super::material::{Material, pem_blocks};
use super::resolver::{Current, server_config};
use super::secret::{decode, new_secret};
use super::*;

const NAME: &str = "hooks.ns.svc";
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn config() -> SelfSigned {
    SelfSigned::new("ns", "hooks-cert")
        .dns_names([NAME, "localhost"])
        .ip_addresses([LOOPBACK])
}

/// A server config serving `material` alone.
fn serving(material: &Material) -> Arc<rustls::ServerConfig> {
    let key = Arc::new(material.certified_key("test").unwrap());
    server_config(Arc::new(Current::new(key))).unwrap()
}

/// A client trusting the certificates of the PEM `roots` only.
fn connector(roots: &str) -> tokio_rustls::TlsConnector {
    let mut store = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(roots.as_bytes()) {
        store.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// A handshake over an in-memory pipe with a server serving `material`, by a client trusting
/// `roots` and asking for `name`: the server's certificate, or why the client refused it.
async fn handshake(material: &Material, roots: &str, name: &str) -> Result<Vec<u8>, String> {
    let acceptor = tokio_rustls::TlsAcceptor::from(serving(material));
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(async move { acceptor.accept(server_io).await.map(drop) });
    let name = ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
    let result = connector(roots).connect(name, client_io).await;
    let _ = server.await;
    let tls = result.map_err(|e| e.to_string())?;
    Ok(peer(&tls))
}

fn peer(tls: &tokio_rustls::client::TlsStream<impl Sized>) -> Vec<u8> {
    let certs = tls.get_ref().1.peer_certificates().unwrap();
    certs[0].to_vec()
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

fn bundle(material: &Material) -> String {
    material.ca_bundle.clone().unwrap()
}

/// A loopback TLS echo server for `config`: its address.
async fn echo_server(config: Arc<rustls::ServerConfig>) -> std::net::SocketAddr {
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let (mut read, mut write) = tokio::io::split(tls);
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    addr
}

/// A TLS connection to `addr` asking for `name`, trusting `roots`.
async fn connect(
    addr: std::net::SocketAddr,
    roots: &str,
    name: ServerName<'static>,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, std::io::Error> {
    let tcp = TcpStream::connect(addr).await?;
    connector(roots).connect(name, tcp).await
}

async fn echoes(tls: &mut tokio_rustls::client::TlsStream<TcpStream>) -> bool {
    let mut buf = [0_u8; 4];
    tls.write_all(b"ping").await.is_ok()
        && tls.read_exact(&mut buf).await.is_ok()
        && &buf == b"ping"
}

#[tokio::test]
async fn a_generated_certificate_should_verify_against_its_ca_for_its_names_only() {
    let material = bootstrap(&config(), SystemTime::now()).unwrap();
    let ca = bundle(&material);
    assert_eq!(pem_blocks(&ca).len(), 1);
    let served = handshake(&material, &ca, NAME).await.unwrap();
    assert_eq!(served, der(&material.cert_pem));
    handshake(&material, &ca, "localhost").await.unwrap();

    let other_name = handshake(&material, &ca, "other.ns.svc").await;
    assert!(
        other_name.is_err(),
        "a name not in dns_names: {other_name:?}"
    );
    let stranger = bootstrap(&config(), SystemTime::now()).unwrap();
    let other_ca = handshake(&material, &bundle(&stranger), NAME).await;
    assert!(
        other_ca.is_err(),
        "another CA does not vouch for it: {other_ca:?}"
    );
}

#[tokio::test]
async fn a_generated_certificate_should_verify_for_its_ip_address_over_tcp() {
    let material = bootstrap(&config(), SystemTime::now()).unwrap();
    let ca = bundle(&material);
    let addr = echo_server(serving(&material)).await;
    let mut tls = connect(addr, &ca, ServerName::IpAddress(LOOPBACK.into()))
        .await
        .unwrap();
    assert!(echoes(&mut tls).await);
    let other_ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let refused = connect(addr, &ca, ServerName::IpAddress(other_ip.into())).await;
    assert!(refused.is_err(), "an address not in ip_addresses");
}

#[tokio::test]
async fn a_renewal_should_keep_the_ca_and_happen_only_when_due() {
    let config = config();
    let now = SystemTime::now();
    let first = bootstrap(&config, now).unwrap();
    assert!(
        refresh(&first, &config, now, false).unwrap().is_none(),
        "nothing due"
    );

    let renewed = refresh(&first, &config, now, true).unwrap().unwrap();
    assert_ne!(renewed.cert_pem, first.cert_pem);
    assert_ne!(renewed.key_pem, first.key_pem, "a new key");
    assert_eq!(renewed.ca, first.ca, "the same CA");
    handshake(&renewed, &bundle(&first), NAME).await.unwrap();

    let mut aging = first.clone();
    aging.not_after = Some(now + config.renew_before - Duration::from_secs(1));
    let due = refresh(&aging, &config, now, false).unwrap().unwrap();
    assert_eq!(
        due.not_after,
        Some(generate::whole_seconds(now) + config.validity)
    );
}

#[tokio::test]
async fn a_ca_rotation_should_keep_both_cas_in_the_bundle_until_the_old_one_expires() {
    let config = config();
    let now = SystemTime::now();
    let mut aging = bootstrap(&config, now).unwrap();
    let old_ca = bundle(&aging);
    // The CA close to its end (as its annotation says).
    aging.ca.as_mut().unwrap().not_after = now + config.ca_validity / 4;

    let rotated = refresh(&aging, &config, now, false).unwrap().unwrap();
    let both = bundle(&rotated);
    let blocks = pem_blocks(&both);
    assert_eq!(blocks.len(), 2, "{both}");
    assert_eq!(blocks[1], old_ca, "the old CA second");
    assert_ne!(blocks[0], old_ca, "a new CA first");
    assert_eq!(
        rotated.cert_pem, aging.cert_pem,
        "serving certificate kept until renewal"
    );
    handshake(&rotated, &both, NAME).await.unwrap();
    handshake(&rotated, &old_ca, NAME).await.unwrap();

    // The next renewal is signed by the new CA: trusted through the new CA alone.
    let renewed = refresh(&rotated, &config, now, true).unwrap().unwrap();
    assert_eq!(bundle(&renewed), both);
    handshake(&renewed, &blocks[0], NAME).await.unwrap();
    assert!(handshake(&renewed, &old_ca, NAME).await.is_err());

    // The old CA expired: it leaves the bundle.
    let mut expired = renewed.clone();
    expired.ca.as_mut().unwrap().previous.as_mut().unwrap().1 = now - Duration::from_secs(1);
    let pruned = refresh(&expired, &config, now, false).unwrap().unwrap();
    assert_eq!(bundle(&pruned), blocks[0]);
    assert_eq!(pruned.cert_pem, renewed.cert_pem);
}

#[test]
fn the_secret_should_round_trip_and_a_corrupt_one_should_not_load() {
    let config = config();
    let now = SystemTime::now();
    let mut material = bootstrap(&config, now).unwrap();
    material.ca.as_mut().unwrap().not_after = now + Duration::from_secs(3600);
    let material = refresh(&material, &config, now, false).unwrap().unwrap();
    let secret = new_secret(&config, &material);
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let labels = secret.metadata.labels.clone().unwrap();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "kubeforge");
    let notes = secret.metadata.annotations.clone().unwrap();
    assert!(notes[secret::SERVING_NOT_AFTER].ends_with('Z'), "{notes:?}");
    assert_eq!(
        decode(&secret, "test").unwrap(),
        material,
        "with the previous CA"
    );

    let mut corrupt = secret.clone();
    let data = corrupt.data.as_mut().unwrap();
    data.insert("tls.crt".into(), ByteString(b"garbage".to_vec()));
    assert!(matches!(
        decode(&corrupt, "test"),
        Err(CertError::Parse { .. })
    ));
    let mut unannotated = secret.clone();
    unannotated.metadata.annotations = None;
    assert!(decode(&unannotated, "test").is_err());
}

#[tokio::test]
async fn settings_that_would_renew_forever_or_lack_a_client_should_be_refused() {
    let bad = config().renew_before(Duration::from_secs(400 * 24 * 3600));
    let refused = ServingCerts::start(CertSource::SelfSigned(bad), None).await;
    assert!(matches!(refused, Err(CertError::Config(_))), "{refused:?}");
    let no_client = ServingCerts::start(CertSource::SelfSigned(config()), None).await;
    assert!(matches!(no_client, Err(CertError::NoClient)));
    let short = config().validity(Duration::from_secs(3600));
    assert_eq!(short.renew_before, Duration::from_secs(1200));
}

/// A fresh directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("kubeforge-certs-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, material: &Material) {
        write_pair(&self.0, &material.cert_pem, &material.key_pem);
        std::fs::write(self.0.join("ca.crt"), bundle(material)).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write_pair(dir: &Path, cert: &str, key: &str) {
    std::fs::write(dir.join("tls.crt"), cert).unwrap();
    std::fs::write(dir.join("tls.key"), key).unwrap();
}

async fn dir_certs(dir: &TempDir) -> ServingCerts {
    let source = CertSource::Dir {
        path: dir.0.clone(),
        poll: Duration::from_millis(20),
    };
    ServingCerts::start(source, None).await.unwrap()
}

/// Waits (up to 10 s) until `certs` serves `material`.
async fn until_serving(certs: &ServingCerts, material: &Material) {
    let want = material::info(&Arc::new(material.certified_key("test").unwrap()), None).sha256;
    for _ in 0..500 {
        if certs.current().sha256 == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("still serving {:?}", certs.current());
}

#[tokio::test]
async fn a_swap_should_give_new_handshakes_the_new_certificate_and_keep_open_ones() {
    let (first, second) = (
        bootstrap(&config(), SystemTime::now()).unwrap(),
        bootstrap(&config(), SystemTime::now()).unwrap(),
    );
    let dir = TempDir::new();
    dir.write(&first);
    let certs = dir_certs(&dir).await;
    let addr = echo_server(certs.server_config()).await;
    let trust_both = format!("{}{}", bundle(&first), bundle(&second));
    let mut open = connect(addr, &trust_both, NAME.try_into().unwrap())
        .await
        .unwrap();
    assert_eq!(peer(&open), der(&first.cert_pem));

    dir.write(&second);
    certs.renew_now().await.unwrap();
    let mut fresh = connect(addr, &trust_both, NAME.try_into().unwrap())
        .await
        .unwrap();
    assert_eq!(
        peer(&fresh),
        der(&second.cert_pem),
        "a new handshake gets the new one"
    );
    assert!(echoes(&mut fresh).await);
    assert!(echoes(&mut open).await, "the open connection keeps working");
    assert_eq!(peer(&open), der(&first.cert_pem));
    assert_eq!(
        certs.ca_bundle().borrow().clone(),
        Some(bundle(&second).into_bytes())
    );
}

#[tokio::test]
async fn a_directory_should_reload_rewritten_files_and_ignore_a_half_written_pair() {
    let config = config();
    let materials: Vec<Material> = (0..3)
        .map(|_| bootstrap(&config, SystemTime::now()).unwrap())
        .collect();
    let dir = TempDir::new();
    dir.write(&materials[0]);
    let certs = dir_certs(&dir).await;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(certs.clone().run(shutdown.clone()));
    assert_eq!(certs.interval(), Duration::from_millis(20));

    dir.write(&materials[1]);
    until_serving(&certs, &materials[1]).await;
    let mut bundles = certs.ca_bundle();
    assert_eq!(
        bundles.borrow_and_update().clone(),
        Some(bundle(&materials[1]).into_bytes())
    );

    // Half written: the new certificate, the old key.
    std::fs::write(dir.0.join("tls.crt"), &materials[2].cert_pem).unwrap();
    let refused = certs.renew_now().await;
    assert!(
        matches!(refused, Err(CertError::Parse { .. })),
        "{refused:?}"
    );
    tokio::time::sleep(certs.interval() * 5).await;
    until_serving(&certs, &materials[1]).await;
    assert!(!bundles.has_changed().unwrap());

    // The other half arrives.
    dir.write(&materials[2]);
    until_serving(&certs, &materials[2]).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
