//! The certificate rustls hands out, swapped in place: every new handshake reads the current
//! one; an open connection keeps the one it was made with.

use std::sync::{Arc, RwLock};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::error::CertError;

/// The current certificate and key.
#[derive(Debug)]
pub(super) struct Current(RwLock<Arc<CertifiedKey>>);

impl Current {
    pub(super) fn new(key: Arc<CertifiedKey>) -> Self {
        Self(RwLock::new(key))
    }

    /// The certificate new handshakes get.
    pub(super) fn get(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.0.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Serves `key` from the next handshake on.
    pub(super) fn set(&self, key: Arc<CertifiedKey>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = key;
    }
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.get())
    }
}

/// A server config (ring, the safe default protocol versions, ALPN `http/1.1`) that serves
/// whatever `resolver` holds.
pub(super) fn server_config(
    resolver: Arc<dyn ResolvesServerCert>,
) -> Result<Arc<rustls::ServerConfig>, CertError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(CertError::Tls)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
