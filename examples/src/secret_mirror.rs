//! `SecretMirror`: a cluster-scoped kind whose operator copies one Secret into every namespace
//! whose labels match a selector, and keeps the copies in step with the source and with the
//! namespaces' labels. It shows `watches` with mappers: a change of the source Secret or of any
//! Namespace leads back to the mirrors concerned through the shared cache.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kubeforge::crd::{Conditions, READY};
use kubeforge::k8s_openapi::api::core::v1::{Namespace, Secret};
use kubeforge::kube::api::DeleteParams;
use kubeforge::kube::core::Selector;
use kubeforge::prelude::*;
use kubeforge::serde_json::{self, json};
use kubeforge::{kube, tracing};

/// Copies `source` into every namespace whose labels include all of `namespaceSelector`.
#[kubeforge::custom_resource(
    group = "apps.kubeforge.dev",
    version = "v1",
    kind = "SecretMirror",
    cluster,
    status = SecretMirrorStatus,
    shortname = "smir",
    printcolumn(name = "Source", json_path = ".spec.source.name", type = "string"),
    printcolumn(name = "Copies", json_path = ".status.copies", type = "integer"),
)]
#[derive(Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SecretMirrorSpec {
    /// The Secret to copy.
    pub source: SecretReference,
    /// Labels a namespace must carry (all of them) to receive a copy; empty selects none.
    #[validate(min_properties = 1)]
    pub namespace_selector: BTreeMap<String, String>,
}

/// Namespace and name of a Secret.
#[kubeforge::schema]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretReference {
    /// The Secret's namespace.
    #[validate(min_length = 1)]
    pub namespace: String,
    /// The Secret's name.
    #[validate(min_length = 1)]
    pub name: String,
}

/// Where the copies are.
#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SecretMirrorStatus {
    /// Number of copies.
    #[serde(default)]
    pub copies: i32,
    /// Namespaces holding a copy, sorted.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// `Ready`: every selected namespace has an up-to-date copy.
    #[serde(default)]
    pub conditions: Conditions,
}

/// Why a mirror could not be reconciled.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// A request to the apiserver failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// A copy could not be built.
    #[error("building a copy: {0}")]
    Build(#[from] serde_json::Error),
    /// The cache does not hold a kind the reconcile reads (the wiring changed).
    #[error(transparent)]
    NotCached(#[from] kubeforge::cache::NotCached),
    /// The cache's store could not be read (a remote store unreachable).
    #[error(transparent)]
    Store(#[from] kubeforge::store::StoreError),
}

/// The SecretMirror controller.
pub struct SecretMirrorController;

/// Field manager of the copies.
const MANAGER: &str = "secret-mirror";

#[kubeforge::controller(
    for = SecretMirror,
    owns(Secret),
    watches(Secret, map_async = Self::mirrors_of_source),
    watches(Namespace, map_async = Self::every_mirror),
)]
impl SecretMirrorController {
    async fn reconcile(
        &self,
        mirror: Arc<SecretMirror>,
        ctx: &Context<SecretMirror>,
    ) -> Result<Action, MirrorError> {
        let cache = ctx.cache();
        // The Secrets the wiring watches: those of the manager's namespace, or of all.
        let watched = Lookup::scope(ctx.wiring().namespace.as_deref());
        let secrets = cache.store::<Secret>(&watched)?;
        let namespaces = cache.store::<Namespace>(&Lookup::all())?;
        let source_ref = &mirror.spec.source;
        let source = secrets
            .get(&ObjectKey::namespaced(
                &source_ref.namespace,
                &source_ref.name,
            ))
            .await?;

        let selector: Selector = mirror
            .spec
            .namespace_selector
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let wanted: BTreeSet<String> = match &source {
            None => BTreeSet::new(),
            Some(_) if mirror.spec.namespace_selector.is_empty() => BTreeSet::new(),
            Some(_) => namespaces
                .list_selected(None, &selector)
                .await?
                .iter()
                .filter(|ns| ns.metadata.deletion_timestamp.is_none())
                .map(|ns| ns.name_any())
                .filter(|ns| *ns != source_ref.namespace)
                .collect(),
        };

        if let Some(source) = &source {
            for namespace in &wanted {
                let copy: Secret = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {
                        "name": source_ref.name,
                        "namespace": namespace,
                        "labels": { "apps.kubeforge.dev/mirror": mirror.name_any() },
                    },
                    "type": source.type_,
                    "data": source.data,
                }))?;
                let api: Api<Secret> = Api::namespaced(ctx.client(), namespace);
                let written =
                    kubeforge::client::apply_owned(&api, mirror.as_ref(), MANAGER, copy).await?;
                ctx.record_write(&written);
            }
        }
        // Copies in namespaces that are no longer selected (or of a source that is gone).
        let uid = mirror.meta().uid.clone().unwrap_or_default();
        for stale in secrets.owned_by(&uid).await? {
            let namespace = stale.namespace().unwrap_or_default();
            if !wanted.contains(&namespace) {
                let api: Api<Secret> = Api::namespaced(ctx.client(), &namespace);
                match api
                    .delete(&stale.name_any(), &DeleteParams::default())
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }

        let mut status = mirror.status.clone().unwrap_or_default();
        let before = status.clone();
        status.copies = i32::try_from(wanted.len()).unwrap_or(i32::MAX);
        status.namespaces = wanted.into_iter().collect();
        let generation = mirror.meta().generation.unwrap_or(0);
        match &source {
            Some(_) => status.conditions.mark(
                READY,
                true,
                "Mirrored",
                &format!("{} copies", status.copies),
                generation,
            ),
            None => status.conditions.mark(
                READY,
                false,
                "SourceMissing",
                &format!(
                    "secret {}/{} not found",
                    source_ref.namespace, source_ref.name
                ),
                generation,
            ),
        };
        if status != before {
            tracing::info!(mirror = %mirror.name_any(), copies = status.copies, "status updated");
            ctx.patch_status(&Patch::Merge(json!({ "status": status })))
                .await?;
        }
        Ok(Action::Done)
    }
}

impl SecretMirrorController {
    /// A Secret concerns the mirrors that copy it.
    async fn mirrors_of_source(secret: Arc<Secret>, cache: Cache) -> Vec<ObjectKey> {
        let (namespace, name) = (secret.namespace().unwrap_or_default(), secret.name_any());
        Self::mirrors_where(&cache, |m| {
            m.spec.source.namespace == namespace && m.spec.source.name == name
        })
        .await
    }

    /// A Namespace's labels can change any mirror's targets.
    async fn every_mirror(_namespace: Arc<Namespace>, cache: Cache) -> Vec<ObjectKey> {
        Self::mirrors_where(&cache, |_| true).await
    }

    /// The keys of the cached mirrors that pass `filter` (none if the cache cannot be read:
    /// the mirrors' own events and retries reconcile them then).
    async fn mirrors_where(
        cache: &Cache,
        filter: impl Fn(&SecretMirror) -> bool,
    ) -> Vec<ObjectKey> {
        let Ok(mirrors) = cache.store::<SecretMirror>(&Lookup::all()) else {
            return Vec::new();
        };
        match mirrors.list().await {
            Ok(listed) => listed
                .iter()
                .filter(|m| filter(m))
                .map(|m| ObjectKey::of(m.as_ref()))
                .collect(),
            Err(error) => {
                tracing::warn!(%error, "listing the cached mirrors failed");
                Vec::new()
            }
        }
    }
}
