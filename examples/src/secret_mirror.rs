//! `SecretMirror`: a cluster-scoped kind whose operator copies one Secret into every namespace
//! whose labels match a selector and lets the ServiceAccounts named in `readers` read the copy
//! there. Each target namespace gets three children — the copy, a Role that can read it and a
//! RoleBinding granting that Role — declared as dependents `for_each` target: the framework
//! applies them per namespace, deletes those of namespaces no longer selected, leaves alone an
//! object of the same name it does not own (and says so), and keeps the status. A change of the
//! source Secret or of any Namespace leads back to the mirrors concerned (`watches` with
//! mappers). The same operator written by hand is `secret_mirror_imperative.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kubeforge::crd::Conditions;
use kubeforge::dependents::{Reconciled, State};
use kubeforge::k8s_openapi::api::core::v1::{Namespace, Secret};
use kubeforge::k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kubeforge::kube::core::Selector;
use kubeforge::prelude::*;
use kubeforge::serde_json::{self, json};
use kubeforge::{kube, tracing};

/// Copies `source` into every namespace whose labels include all of `namespaceSelector`, and
/// lets the ServiceAccounts `readers` of each such namespace read the copy.
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
    /// ServiceAccounts (of each target namespace) allowed to read the copy there.
    #[serde(default)]
    pub readers: Vec<String>,
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
    /// Number of namespaces whose copy, Role and RoleBinding are all in place.
    #[serde(default)]
    pub copies: i32,
    /// Those namespaces, sorted.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// What is not in place yet, one entry per child: `team-b: copy: ...`.
    #[serde(default)]
    pub not_ready: Vec<String>,
    /// The generation last acted upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing`, `Degraded`.
    #[serde(default)]
    pub conditions: Conditions,
}

/// Why a mirror could not be reconciled.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// A request to the apiserver failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// A child could not be built.
    #[error("building a child: {0}")]
    Build(#[from] serde_json::Error),
    /// The cache does not hold a kind the reconcile reads (the wiring changed).
    #[error(transparent)]
    NotCached(#[from] kubeforge::cache::NotCached),
    /// The cache's store could not be read (a remote store unreachable).
    #[error(transparent)]
    Store(#[from] kubeforge::store::StoreError),
    /// The source Secret does not exist: its copies are kept as they are until it does.
    #[error("the source Secret {0} does not exist")]
    SourceMissing(String),
    /// Children failed (the imperative version: one message for all).
    #[error("{0}")]
    Children(String),
}

// ANCHOR: controller
/// The SecretMirror controller, written with dependents.
pub struct SecretMirrorController;

#[kubeforge::controller(
    for = SecretMirror,
    dependents(
        copy(for_each = targets),
        reader(for_each = targets),
        reader_binding(for_each = targets, depends_on(reader)),
    ),
    watches(Secret, map_async = mirrors_of_source),
    watches(Namespace, map_async = every_mirror),
)]
impl SecretMirrorController {
    async fn targets(
        &self,
        mirror: &SecretMirror,
        ctx: &Context<SecretMirror>,
    ) -> Result<Vec<String>, MirrorError> {
        targets(mirror, ctx.cache()).await
    }

    async fn copy(
        &self,
        mirror: &SecretMirror,
        namespace: &str,
        ctx: &Context<SecretMirror>,
    ) -> Result<Secret, MirrorError> {
        let source = source(mirror, ctx.cache(), ctx).await?;
        copy_of(mirror, source.as_deref(), namespace)
    }

    fn reader(&self, mirror: &SecretMirror, namespace: &str, _: &Context<SecretMirror>) -> Role {
        reader_role(mirror, namespace)
    }

    fn reader_binding(
        &self,
        mirror: &SecretMirror,
        namespace: &str,
        _: &Context<SecretMirror>,
    ) -> RoleBinding {
        reader_binding(mirror, namespace)
    }

    fn status(&self, mirror: &SecretMirror, done: &Reconciled, status: &mut SecretMirrorStatus) {
        let mut ready: BTreeMap<&str, bool> = BTreeMap::new();
        let mut not_ready = Vec::new();
        for outcome in &done.outcomes {
            for item in &outcome.items {
                let done = item.state == State::Ready;
                if item.state != State::Deleting {
                    *ready.entry(&item.item).or_insert(true) &= done;
                }
                if !done {
                    not_ready.push(format!("{}: {}: {}", item.item, outcome.name, item.state));
                }
            }
        }
        let namespaces = ready
            .into_iter()
            .filter(|(_, r)| *r)
            .map(|(ns, _)| ns.to_owned());
        set_status(mirror, status, namespaces.collect(), not_ready);
    }
}

// ANCHOR_END: controller

// What both versions share: the targets, the children, the status and the mappers.

/// The Secrets the wiring watches: those of the manager's namespaces, or of all.
fn watched<K>(ctx: &Context<K>) -> Lookup {
    Lookup::namespaces(ctx.wiring().namespaces.clone())
}

/// The mirror's source Secret, from the cache.
pub async fn source<K>(
    mirror: &SecretMirror,
    cache: &Cache,
    ctx: &Context<K>,
) -> Result<Option<Arc<Secret>>, MirrorError> {
    let source = &mirror.spec.source;
    let key = ObjectKey::namespaced(&source.namespace, &source.name);
    Ok(cache.store::<Secret>(&watched(ctx))?.get(&key).await?)
}

/// The namespaces that get a copy: those selected and not being deleted, but the source's own.
pub async fn targets(mirror: &SecretMirror, cache: &Cache) -> Result<Vec<String>, MirrorError> {
    if mirror.spec.namespace_selector.is_empty() {
        return Ok(Vec::new());
    }
    let selector: Selector = mirror.spec.namespace_selector.clone().into_iter().collect();
    let namespaces = cache.store::<Namespace>(&Lookup::all())?;
    let mut selected: Vec<String> = namespaces
        .list_selected(None, &selector)
        .await?
        .iter()
        .filter(|ns| ns.metadata.deletion_timestamp.is_none())
        .map(|ns| ns.name_any())
        .filter(|ns| *ns != mirror.spec.source.namespace)
        .collect();
    selected.sort();
    Ok(selected)
}

/// The copy of `source` in `namespace`; an error while the source does not exist (the copy
/// there stays as it is).
pub fn copy_of(
    mirror: &SecretMirror,
    source: Option<&Secret>,
    namespace: &str,
) -> Result<Secret, MirrorError> {
    let Some(source) = source else {
        let source = &mirror.spec.source;
        return Err(MirrorError::SourceMissing(format!(
            "{}/{}",
            source.namespace, source.name
        )));
    };
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": mirror.spec.source.name,
            "namespace": namespace,
            "labels": { "apps.kubeforge.dev/mirror": mirror.name_any() },
        },
        "type": source.type_,
        "data": source.data,
    }))?)
}

/// The name of the Role and RoleBinding that let the readers read the copy.
pub fn reader_name(mirror: &SecretMirror) -> String {
    format!("{}-mirror-reader", mirror.name_any())
}

/// A Role in `namespace` that can read the copy there.
pub fn reader_role(mirror: &SecretMirror, namespace: &str) -> Role {
    let mut role = Role::default();
    role.metadata.name = Some(reader_name(mirror));
    role.metadata.namespace = Some(namespace.to_owned());
    role.rules = Some(vec![kubeforge::k8s_openapi::api::rbac::v1::PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["secrets".to_owned()]),
        resource_names: Some(vec![mirror.spec.source.name.clone()]),
        verbs: vec!["get".to_owned()],
        ..Default::default()
    }]);
    role
}

/// A RoleBinding in `namespace` granting the reader Role to the mirror's readers.
pub fn reader_binding(mirror: &SecretMirror, namespace: &str) -> RoleBinding {
    let subjects: Vec<_> = mirror
        .spec
        .readers
        .iter()
        .map(|name| json!({ "kind": "ServiceAccount", "name": name, "namespace": namespace }))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": { "name": reader_name(mirror), "namespace": namespace },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": reader_name(mirror) },
        "subjects": subjects,
    }))
    .unwrap_or_default()
}

/// The status fields besides the dependents' conditions: the namespaces served and what is
/// not in place.
pub fn set_status(
    mirror: &SecretMirror,
    status: &mut SecretMirrorStatus,
    namespaces: Vec<String>,
    not_ready: Vec<String>,
) {
    status.copies = i32::try_from(namespaces.len()).unwrap_or(i32::MAX);
    status.namespaces = namespaces;
    status.not_ready = not_ready;
    tracing::debug!(mirror = %mirror.name_any(), copies = status.copies, "status");
}

/// A Secret concerns the mirrors that copy it.
pub async fn mirrors_of_source(secret: Arc<Secret>, cache: Cache) -> Vec<ObjectKey> {
    let (namespace, name) = (secret.namespace().unwrap_or_default(), secret.name_any());
    mirrors_where(&cache, |m| {
        m.spec.source.namespace == namespace && m.spec.source.name == name
    })
    .await
}

/// A Namespace's labels can change any mirror's targets.
pub async fn every_mirror(_namespace: Arc<Namespace>, cache: Cache) -> Vec<ObjectKey> {
    mirrors_where(&cache, |_| true).await
}

/// The keys of the cached mirrors that pass `filter` (none if the cache cannot be read: the
/// mirrors' own events and retries reconcile them then).
async fn mirrors_where(cache: &Cache, filter: impl Fn(&SecretMirror) -> bool) -> Vec<ObjectKey> {
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
