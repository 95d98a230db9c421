//! What a Secret or directory holds, as PEM text, and what the server makes of it: a rustls
//! [`CertifiedKey`] and a [`CertInfo`].

use std::sync::Arc;
use std::time::SystemTime;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::error::CertError;

/// The serving certificate, as [`ServingCerts::current`](super::ServingCerts::current) reports
/// it (for logs and tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    /// When the serving certificate expires: known for self-signed certificates (from the
    /// Secret's annotation), `None` for a directory (nothing parses X.509).
    pub not_after: Option<SystemTime>,
    /// The SHA-256 fingerprint of the serving certificate's DER, lowercase hex.
    pub sha256: String,
}

/// A serving certificate and key, the bundle clients trust, and — self-signed — the CA that
/// signs renewals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Material {
    /// `tls.crt`: the serving certificate (a chain from a directory).
    pub cert_pem: String,
    /// `tls.key`.
    pub key_pem: String,
    /// `ca.crt`: the bundle clients trust (from a directory, optional).
    pub ca_bundle: Option<String>,
    /// When the serving certificate expires (self-signed only).
    pub not_after: Option<SystemTime>,
    /// The CA (self-signed only).
    pub ca: Option<CaMaterial>,
}

/// A self-signed source's CA, and the one it replaced while that one is still valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CaMaterial {
    /// The CA certificate (the first of `ca.crt`).
    pub cert_pem: String,
    /// `ca.key`.
    pub key_pem: String,
    /// Its common name: renewals are signed under this issuer name.
    pub name: String,
    /// When it expires.
    pub not_after: SystemTime,
    /// The previous CA's certificate and expiry, kept in `ca.crt` until then.
    pub previous: Option<(String, SystemTime)>,
}

impl CaMaterial {
    /// `ca.crt`: this CA, then the previous one.
    pub(super) fn bundle(&self) -> String {
        let mut bundle = self.cert_pem.clone();
        if let Some((previous, _)) = &self.previous {
            bundle.push_str(previous);
        }
        bundle
    }
}

impl Material {
    /// The rustls key for the server, checked: the chain parses, the key parses and matches.
    pub(super) fn certified_key(&self, place: &str) -> Result<CertifiedKey, CertError> {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| CertError::parse(place, format!("tls.crt: {e}")))?;
        if chain.is_empty() {
            return Err(CertError::parse(place, "tls.crt holds no certificate"));
        }
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| CertError::parse(place, format!("tls.key: {e}")))?;
        let key = rustls::crypto::ring::sign::any_supported_type(&key)
            .map_err(|e| CertError::parse(place, format!("tls.key: {e}")))?;
        let certified = CertifiedKey::new(chain, key);
        certified
            .keys_match()
            .map_err(|e| CertError::parse(place, format!("tls.key does not match tls.crt: {e}")))?;
        Ok(certified)
    }

    /// `ca.crt` as bytes.
    pub(super) fn bundle_bytes(&self) -> Option<Vec<u8>> {
        self.ca_bundle.clone().map(String::into_bytes)
    }
}

/// What [`CertInfo`] says of `key`.
pub(super) fn info(key: &Arc<CertifiedKey>, not_after: Option<SystemTime>) -> CertInfo {
    let der = key.end_entity_cert().map_or(&[][..], |c| c.as_ref());
    CertInfo {
        not_after,
        sha256: sha256_hex(der),
    }
}

/// SHA-256 of `data` in lowercase hex, with ring's implementation as rustls exposes it.
fn sha256_hex(data: &[u8]) -> String {
    let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256;
    let Some(hash) = suite.tls13().map(|s| s.common.hash_provider.hash(data)) else {
        return String::new();
    };
    hash.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The PEM certificates of `bundle`, each with its armour and a final newline.
pub(super) fn pem_blocks(bundle: &str) -> Vec<String> {
    const END: &str = "-----END CERTIFICATE-----";
    let mut blocks = Vec::new();
    let mut rest = bundle;
    while let (Some(start), Some(end)) = (rest.find("-----BEGIN CERTIFICATE-----"), rest.find(END))
    {
        if end < start {
            rest = &rest[end + END.len()..];
            continue;
        }
        blocks.push(format!("{}\n", &rest[start..end + END.len()]));
        rest = &rest[end + END.len()..];
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_blocks_should_split_a_bundle_and_skip_stray_text() {
        let a = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----";
        let b = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----";
        let bundle = format!("junk\n{a}\n\n{b}\ntrailing");
        assert_eq!(
            pem_blocks(&bundle),
            vec![format!("{a}\n"), format!("{b}\n")]
        );
        assert!(pem_blocks("-----END CERTIFICATE-----").is_empty());
    }

    #[test]
    fn sha256_hex_should_match_a_known_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
