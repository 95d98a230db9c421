//! Making certificates: a CA, a serving certificate signed by it, and what is due when
//! ([`refresh`]): a new serving certificate, a new CA, dropping an expired previous CA.
//!
//! Nothing here parses X.509: a renewal is signed under the CA's key and *name* (kept beside the
//! certificate), which gives the same issuer name and authority key identifier the CA
//! certificate has. Every time is passed in, so the rules are tested without waiting.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use super::config::SelfSigned;
use super::error::CertError;
use super::material::{CaMaterial, Material};

/// Certificates start this much before they are made (clock skew between machines).
const BACKDATE: Duration = Duration::from_secs(300);

/// `t` rounded down to the second (X.509 and the annotations keep seconds).
pub(super) fn whole_seconds(t: SystemTime) -> SystemTime {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// The CA's parameters. The same ones make the issuer of a renewal.
fn ca_params(
    name: &str,
    not_before: SystemTime,
    not_after: SystemTime,
) -> Result<CertificateParams, CertError> {
    let mut params =
        CertificateParams::new(Vec::<String>::new()).map_err(CertError::generate("CA"))?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.distinguished_name.push(DnType::CommonName, name);
    params.not_before = (not_before - BACKDATE).into();
    params.not_after = not_after.into();
    Ok(params)
}

/// A new CA valid for `validity` from `now` (named after the second it was made).
pub(super) fn new_ca(validity: Duration, now: SystemTime) -> Result<CaMaterial, CertError> {
    let now = whole_seconds(now);
    let stamp = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let name = format!("kubeforge webhook CA {stamp}");
    let key = KeyPair::generate().map_err(CertError::generate("CA key"))?;
    let not_after = now + validity;
    let cert = ca_params(&name, now, not_after)?
        .self_signed(&key)
        .map_err(CertError::generate("CA"))?;
    Ok(CaMaterial {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        name,
        not_after,
        previous: None,
    })
}

/// A serving certificate for `config`'s names signed by `ca`, valid for `config.validity` but
/// not past the CA: `(cert_pem, key_pem, not_after)`.
fn sign_serving(
    ca: &CaMaterial,
    config: &SelfSigned,
    now: SystemTime,
) -> Result<(String, String, SystemTime), CertError> {
    let failed = CertError::generate("serving certificate");
    let now = whole_seconds(now);
    let not_after = (now + config.validity).min(ca.not_after);
    let mut params = CertificateParams::new(config.dns_names.clone()).map_err(failed)?;
    params
        .subject_alt_names
        .extend(config.ip_addresses.iter().map(|ip| SanType::IpAddress(*ip)));
    params
        .distinguished_name
        .push(DnType::CommonName, "kubeforge webhook");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.use_authority_key_identifier_extension = true;
    params.not_before = (now - BACKDATE).into();
    params.not_after = not_after.into();
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(CertError::generate("CA key (ca.key)"))?;
    let issuer_params = ca_params(&ca.name, now, ca.not_after)?;
    let issuer = Issuer::from_params(&issuer_params, &ca_key);
    let key = KeyPair::generate().map_err(CertError::generate("serving key"))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(CertError::generate("serving certificate"))?;
    Ok((cert.pem(), key.serialize_pem(), not_after))
}

/// A new CA and a serving certificate signed by it.
pub(super) fn bootstrap(config: &SelfSigned, now: SystemTime) -> Result<Material, CertError> {
    let ca = new_ca(config.ca_validity, now)?;
    let mut material = Material {
        cert_pem: String::new(),
        key_pem: String::new(),
        ca_bundle: None,
        not_after: None,
        ca: None,
    };
    resign(&mut material, ca, config, now)?;
    Ok(material)
}

/// Replaces `material`'s serving certificate with one signed by `ca`, which becomes its CA.
fn resign(
    material: &mut Material,
    ca: CaMaterial,
    config: &SelfSigned,
    now: SystemTime,
) -> Result<(), CertError> {
    let (cert_pem, key_pem, not_after) = sign_serving(&ca, config, now)?;
    material.cert_pem = cert_pem;
    material.key_pem = key_pem;
    material.not_after = Some(not_after);
    material.ca_bundle = Some(ca.bundle());
    material.ca = Some(ca);
    Ok(())
}

/// What is due for a self-signed `material` at `now` (`force`: a new serving certificate in any
/// case), applied to a copy; `None` when nothing is. `material` must hold a CA.
///
/// - a previous CA that has expired leaves the bundle;
/// - a CA with less than a third of `ca_validity` left (or less than `renew_before`, which no
///   serving certificate it signs could outlive) is replaced by a new one, the old one staying
///   in the bundle until it expires. The serving certificate is *not* re-signed then: clients
///   that still hold the old bundle keep working until the next renewal, by which time they
///   have the new bundle;
/// - a serving certificate with less than `renew_before` left is replaced by one signed by the
///   current (newest) CA.
pub(super) fn refresh(
    material: &Material,
    config: &SelfSigned,
    now: SystemTime,
    force: bool,
) -> Result<Option<Material>, CertError> {
    let Some(ca) = &material.ca else {
        return bootstrap(config, now).map(Some);
    };
    let left = |t: SystemTime| t.duration_since(now).unwrap_or_default();
    let mut ca = ca.clone();
    let mut changed = false;
    if ca
        .previous
        .as_ref()
        .is_some_and(|(_, end)| left(*end).is_zero())
    {
        tracing::info!("the previous webhook CA has expired: dropping it from the bundle");
        ca.previous = None;
        changed = true;
    }
    let ca_left = left(ca.not_after);
    if ca_left < config.ca_validity / 3 || ca_left <= config.renew_before {
        tracing::info!(ca = %ca.name, "the webhook CA expires soon: making a new one (the old one stays trusted until it expires)");
        let mut next = new_ca(config.ca_validity, now)?;
        next.previous = (!ca_left.is_zero()).then(|| (ca.cert_pem.clone(), ca.not_after));
        ca = next;
        changed = true;
    }
    let mut next = material.clone();
    let serving_left = material.not_after.map_or(Duration::ZERO, left);
    if force || serving_left < config.renew_before {
        resign(&mut next, ca, config, now)?;
    } else if changed {
        next.ca_bundle = Some(ca.bundle());
        next.ca = Some(ca);
    } else {
        return Ok(None);
    }
    Ok(Some(next))
}
