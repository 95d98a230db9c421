//! The Secret that replicas share: its layout ([`encode`], [`decode`]) and the read-then-write
//! round that keeps it current ([`sync`]).
//!
//! Layout: type `kubernetes.io/tls`; `tls.crt`, `tls.key`, `ca.crt` (the CA, then the previous
//! CA while it is valid), `ca.key`; annotations `kubeforge.dev/serving-not-after`,
//! `kubeforge.dev/ca-not-after`, `kubeforge.dev/previous-ca-not-after` (RFC 3339) and
//! `kubeforge.dev/ca-name`; label `app.kubernetes.io/managed-by: kubeforge`.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use super::config::SelfSigned;
use super::error::CertError;
use super::generate;
use super::material::{CaMaterial, Material, pem_blocks};

/// When the serving certificate expires (RFC 3339).
pub(super) const SERVING_NOT_AFTER: &str = "kubeforge.dev/serving-not-after";
/// When the CA expires (RFC 3339).
const CA_NOT_AFTER: &str = "kubeforge.dev/ca-not-after";
/// When the previous CA, second in `ca.crt`, expires (RFC 3339).
const PREVIOUS_CA_NOT_AFTER: &str = "kubeforge.dev/previous-ca-not-after";
/// The CA's common name, to sign renewals under it.
const CA_NAME: &str = "kubeforge.dev/ca-name";
/// How many read-then-write rounds [`sync`] tries before giving up.
const ATTEMPTS: u32 = 5;

fn rfc3339(t: SystemTime) -> String {
    Timestamp::try_from(t).map_or_else(|_| String::new(), |t| t.to_string())
}

/// `Secret ns/name`, for errors.
pub(super) fn place(config: &SelfSigned) -> String {
    format!("Secret {}/{}", config.namespace, config.secret_name)
}

/// The material in `secret`, checked to load (serving pair, CA key and annotations).
pub(super) fn decode(secret: &Secret, place: &str) -> Result<Material, CertError> {
    let (no_data, no_annotations) = (BTreeMap::new(), BTreeMap::new());
    let data = secret.data.as_ref().unwrap_or(&no_data);
    let text = |key: &str| -> Result<String, CertError> {
        let bytes = data
            .get(key)
            .ok_or_else(|| CertError::parse(place, format!("no {key}")))?;
        String::from_utf8(bytes.0.clone())
            .map_err(|_| CertError::parse(place, format!("{key} is not PEM text")))
    };
    let annotations = secret
        .metadata
        .annotations
        .as_ref()
        .unwrap_or(&no_annotations);
    let time = |key: &str| -> Result<SystemTime, CertError> {
        let value = annotations
            .get(key)
            .ok_or_else(|| CertError::parse(place, format!("no annotation {key}")))?;
        let t: Timestamp = value
            .parse()
            .map_err(|e| CertError::parse(place, format!("annotation {key}: {e}")))?;
        Ok(SystemTime::from(t))
    };
    let blocks = pem_blocks(&text("ca.crt")?);
    let mut blocks = blocks.into_iter();
    let ca_cert = blocks
        .next()
        .ok_or_else(|| CertError::parse(place, "ca.crt holds no certificate"))?;
    let previous = match (
        blocks.next(),
        annotations.contains_key(PREVIOUS_CA_NOT_AFTER),
    ) {
        (Some(cert), true) => Some((cert, time(PREVIOUS_CA_NOT_AFTER)?)),
        _ => None,
    };
    let ca = CaMaterial {
        cert_pem: ca_cert,
        key_pem: text("ca.key")?,
        name: annotations
            .get(CA_NAME)
            .cloned()
            .ok_or_else(|| CertError::parse(place, format!("no annotation {CA_NAME}")))?,
        not_after: time(CA_NOT_AFTER)?,
        previous,
    };
    rcgen::KeyPair::from_pem(&ca.key_pem)
        .map_err(|e| CertError::parse(place, format!("ca.key: {e}")))?;
    let material = Material {
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
        ca_bundle: Some(ca.bundle()),
        not_after: Some(time(SERVING_NOT_AFTER)?),
        ca: Some(ca),
    };
    material.certified_key(place)?;
    Ok(material)
}

/// Writes `material` into `secret` (keys, annotations, label), keeping what else it holds.
pub(super) fn encode(secret: &mut Secret, material: &Material) {
    let data = secret.data.get_or_insert_with(BTreeMap::new);
    let mut put = |key: &str, value: &str| {
        data.insert(key.to_owned(), ByteString(value.as_bytes().to_vec()));
    };
    put("tls.crt", &material.cert_pem);
    put("tls.key", &material.key_pem);
    if let Some(bundle) = &material.ca_bundle {
        put("ca.crt", bundle);
    }
    let annotations = secret
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    let mut note = |key: &str, value: String| annotations.insert(key.to_owned(), value);
    if let Some(not_after) = material.not_after {
        note(SERVING_NOT_AFTER, rfc3339(not_after));
    }
    if let Some(ca) = &material.ca {
        put("ca.key", &ca.key_pem);
        note(CA_NAME, ca.name.clone());
        note(CA_NOT_AFTER, rfc3339(ca.not_after));
        match &ca.previous {
            Some((_, end)) => note(PREVIOUS_CA_NOT_AFTER, rfc3339(*end)),
            None => annotations.remove(PREVIOUS_CA_NOT_AFTER),
        };
    }
    secret
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(
            "app.kubernetes.io/managed-by".to_owned(),
            "kubeforge".to_owned(),
        );
}

/// A new Secret for `config` holding `material`.
pub(super) fn new_secret(config: &SelfSigned, material: &Material) -> Secret {
    let mut secret = Secret {
        metadata: ObjectMeta {
            name: Some(config.secret_name.clone()),
            namespace: Some(config.namespace.clone()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        ..Secret::default()
    };
    encode(&mut secret, material);
    secret
}

/// Brings the Secret up to date and returns what it holds: created when absent, replaced when
/// it does not load, renewed when due (or `force`d). An absent or corrupted Secret is written
/// with `served` (what this replica serves, so clients keep trusting the same CA) when there is
/// one, else with a new CA. Writes carry the resourceVersion they were computed from; a replica
/// that loses a race (`AlreadyExists`, `Conflict`, or the Secret deleted under a replace) reads
/// again and takes the winner's.
///
/// # Errors
///
/// The Secret cannot be read or written, a certificate cannot be generated, or other replicas
/// won [`ATTEMPTS`] races in a row.
pub(super) async fn sync(
    client: &Client,
    config: &SelfSigned,
    served: Option<&Material>,
    mut force: bool,
) -> Result<Material, CertError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &config.namespace);
    for _ in 0..ATTEMPTS {
        match round(&api, config, served, force).await? {
            Some(material) => return Ok(material),
            // Another replica wrote in between: read theirs (a renewal satisfies a forced one).
            None => force = false,
        }
    }
    Err(CertError::Contended {
        namespace: config.namespace.clone(),
        name: config.secret_name.clone(),
        attempts: ATTEMPTS,
    })
}

/// One read-then-write round: `None` when another replica wrote (or deleted) in between.
async fn round(
    api: &Api<Secret>,
    config: &SelfSigned,
    served: Option<&Material>,
    force: bool,
) -> Result<Option<Material>, CertError> {
    let place = place(config);
    let failed = |action: &'static str| {
        move |source| CertError::Secret {
            action,
            namespace: config.namespace.clone(),
            name: config.secret_name.clone(),
            source: Box::new(source),
        }
    };
    let now = SystemTime::now();
    // A replica's own material (or a new CA), brought up to date.
    let ours = || -> Result<Material, CertError> {
        match served.filter(|m| m.ca.is_some()) {
            Some(m) => Ok(generate::refresh(m, config, now, force)?.unwrap_or_else(|| m.clone())),
            None => generate::bootstrap(config, now),
        }
    };
    let Some(mut secret) = api
        .get_opt(&config.secret_name)
        .await
        .map_err(failed("get"))?
    else {
        tracing::info!(secret = %place, "creating the webhook certificate Secret");
        let secret = new_secret(config, &ours()?);
        return match api.create(&PostParams::default(), &secret).await {
            Ok(created) => decode(&created, &place).map(Some),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(e) => Err(failed("create")(e)),
        };
    };
    let write = match decode(&secret, &place) {
        Ok(stored) => match generate::refresh(&stored, config, now, force)? {
            None => return Ok(Some(stored)),
            Some(renewed) => renewed,
        },
        Err(error) => {
            tracing::warn!(%error, "the webhook certificate Secret does not load: replacing it");
            ours()?
        }
    };
    encode(&mut secret, &write);
    match api
        .replace(&config.secret_name, &PostParams::default(), &secret)
        .await
    {
        Ok(replaced) => decode(&replaced, &place).map(Some),
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(None),
        Err(e) => Err(failed("replace")(e)),
    }
}
