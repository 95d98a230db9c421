//! A certificate directory (`tls.crt`, `tls.key`, optional `ca.crt`): read, and noticed when it
//! changes.
//!
//! The files are small, so every poll reads them and compares their bytes with the last read
//! (no mtime granularity to trip over, and a Secret volume's symlink swap is just new content).
//! A changed pair that does not load — cert-manager or the kubelet caught between two writes —
//! is reported once and retried when the files change again.

use std::io::ErrorKind;
use std::path::Path;

use super::error::CertError;
use super::material::Material;

/// The raw bytes of the three files (`ca.crt` absent: `None`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Snapshot {
    cert: Vec<u8>,
    key: Vec<u8>,
    ca: Option<Vec<u8>>,
}

/// Reads the files of `dir`.
pub(super) fn snapshot(dir: &Path) -> Result<Snapshot, CertError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|source| CertError::Read { path, source })
    };
    let ca = match read("ca.crt") {
        Ok(bytes) => Some(bytes),
        Err(CertError::Read { source, .. }) if source.kind() == ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    Ok(Snapshot {
        cert: read("tls.crt")?,
        key: read("tls.key")?,
        ca,
    })
}

/// The material of `snapshot`, checked to load (chain and key parse, key matches).
pub(super) fn load(snapshot: &Snapshot, dir: &Path) -> Result<Material, CertError> {
    let place = dir.display().to_string();
    let text = |name: &str, bytes: &[u8]| {
        String::from_utf8(bytes.to_vec())
            .map_err(|_| CertError::parse(&place, format!("{name} is not PEM text")))
    };
    let material = Material {
        cert_pem: text("tls.crt", &snapshot.cert)?,
        key_pem: text("tls.key", &snapshot.key)?,
        ca_bundle: snapshot
            .ca
            .as_deref()
            .map(|ca| text("ca.crt", ca))
            .transpose()?,
        not_after: None,
        ca: None,
    };
    material.certified_key(&place)?;
    Ok(material)
}
