//! Changing a kind's storage version: objects already stored stay encoded in the old version
//! until they are written again, and the old version cannot be removed from the CRD while
//! `status.storedVersions` lists it. A migration writes every object back unchanged (the
//! apiserver re-encodes it in the current storage version, converting through the conversion
//! webhook) and then leaves only the storage version in `storedVersions`.
//!
//! A manager runs it on its own (see `Manager::storage_migration`): for the kinds of its
//! controllers that have several versions, on the leader, when the CRD's `storedVersions` lists
//! more than the storage version. The steps of a storage-version change:
//!
//! 1. release N+1 serves both versions, the new one `storage` (the old one `storage = false`, its
//!    `conversion(hub = ..)` pointing at the new one); its operator migrates on start;
//! 2. release N+2 stops serving the old version, and a later one removes it (`crdgen --compat`
//!    tells whether the old version may still be stored).
//!
//! It is safe beside other writers: each object is written back with the `resourceVersion` it
//! was read with, so a concurrent write wins (its write re-encoded the object) and nothing it
//! changed is lost. It is resumable: after each page the list's continue token is kept in an
//! annotation of the CRD ([`PROGRESS_ANNOTATION`]), and a migration of the same storage version
//! starts from there (from the beginning when the token expired). It is rate-limited
//! ([`MigrateOptions::per_second`]).

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

/// The annotation of the CRD that holds a migration's progress (JSON: the storage version it
/// migrates to, the continue token of the next page, the objects rewritten so far).
pub const PROGRESS_ANNOTATION: &str = "kubeforge.dev/storage-migration";

/// What a migration did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Migration {
    /// The storage version objects were written in.
    pub storage_version: String,
    /// Objects written back (by this run and, when it resumed, by the run it took over from).
    pub rewritten: usize,
    /// `status.storedVersions` before.
    pub stored_before: Vec<String>,
    /// Whether `status.storedVersions` now lists only the storage version (`false` when the
    /// migration was limited to a namespace: objects elsewhere may still be stored in the old
    /// version).
    pub pruned: bool,
}

impl Migration {
    /// Whether there was anything to do: `storedVersions` listed more than the storage version.
    #[must_use]
    pub fn was_needed(&self) -> bool {
        self.stored_before
            .iter()
            .any(|v| *v != self.storage_version)
    }
}

/// How a migration runs.
#[derive(Clone, Debug)]
pub struct MigrateOptions {
    /// Only the objects of these namespaces (a namespaced operator; the namespaces one after the
    /// other); `storedVersions` is then left as it is. Ignored for a cluster-scoped kind.
    pub namespaces: crate::Namespaces,
    /// Objects written back per second at most (default 50: a background task, not a burst
    /// that starves the controllers' writes).
    pub per_second: u32,
    /// Objects per list page (default 100).
    pub page_size: u32,
}

impl Default for MigrateOptions {
    fn default() -> Self {
        Self {
            namespaces: crate::Namespaces::all(),
            per_second: 50,
            page_size: 100,
        }
    }
}

/// The progress kept in [`PROGRESS_ANNOTATION`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Progress {
    to: String,
    /// The namespace the continue token lists, when the migration goes namespace by namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    namespace: String,
    #[serde(rename = "continue")]
    continue_token: String,
    rewritten: usize,
}

/// Writes every object of the CRD `crd_name` back in its storage version, then sets
/// `status.storedVersions` to that version alone (see the [module docs](self)), with the default
/// [`MigrateOptions`]. Does nothing when `storedVersions` lists only the storage version.
///
/// # Errors
///
/// As [`migrate`].
pub async fn migrate_storage(client: &Client, crd_name: &str) -> kube::Result<Migration> {
    migrate(client, crd_name, &MigrateOptions::default(), |_| {}).await
}

/// [`migrate_storage`] with `options`; `progress` is called with the count of objects written
/// back after each one.
///
/// # Errors
///
/// The CRD does not exist or has no storage version, the storage version changed while it ran,
/// or a list, write or patch failed otherwise than by a conflict or a missing object.
pub async fn migrate(
    client: &Client,
    crd_name: &str,
    options: &MigrateOptions,
    mut progress: impl FnMut(usize),
) -> kube::Result<Migration> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get(crd_name).await?;
    let storage = storage_version(&crd, crd_name)?;
    let stored_before = crd
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default();
    let mut migration = Migration {
        storage_version: storage.clone(),
        rewritten: 0,
        stored_before,
        pruned: false,
    };
    if !migration.was_needed() {
        return Ok(migration);
    }
    let resource = ApiResource {
        group: crd.spec.group.clone(),
        version: storage.clone(),
        api_version: format!("{}/{}", crd.spec.group, storage),
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
    };
    // Resume a migration to the same version; a token of another version's means nothing.
    let resumed = saved_progress(&crd).filter(|p| p.to == storage);
    let mut state = resumed.unwrap_or(Progress {
        to: storage.clone(),
        ..Progress::default()
    });
    // A cluster-scoped kind has every object in one list, whatever the namespaces.
    let namespaces = if crd.spec.scope == "Cluster" {
        crate::Namespaces::all()
    } else {
        options.namespaces.clone()
    };
    let pages = Pages {
        client,
        crds: &crds,
        crd_name,
        resource: &resource,
        options,
    };
    if namespaces.is_all() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        pages.migrate(&api, &mut state, &mut progress).await?;
    } else {
        // Resume in the namespace the saved token lists; the ones before it are done.
        let mut done = namespaces.contains(&state.namespace);
        for ns in namespaces.iter() {
            if done && ns != state.namespace {
                continue;
            }
            done = false;
            if state.namespace != ns {
                state.namespace = ns.to_owned();
                state.continue_token.clear();
            }
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
            pages.migrate(&api, &mut state, &mut progress).await?;
        }
    }
    migration.rewritten = state.rewritten;
    if namespaces.is_all() {
        prune_stored_versions(&crds, crd_name, &storage).await?;
        migration.pruned = true;
    }
    save_progress(&crds, crd_name, None).await?;
    Ok(migration)
}

fn storage_version(crd: &CustomResourceDefinition, crd_name: &str) -> kube::Result<String> {
    crd.spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone())
        .ok_or_else(|| {
            kube::Error::Service(format!("CRD {crd_name} has no storage version").into())
        })
}

fn saved_progress(crd: &CustomResourceDefinition) -> Option<Progress> {
    let text = crd
        .metadata
        .annotations
        .as_ref()?
        .get(PROGRESS_ANNOTATION)?;
    serde_json::from_str(text).ok()
}

/// Keeps `progress` in the CRD's annotation (or removes it).
async fn save_progress(
    crds: &Api<CustomResourceDefinition>,
    crd_name: &str,
    progress: Option<&Progress>,
) -> kube::Result<()> {
    let value = match progress {
        Some(p) => {
            serde_json::Value::String(serde_json::to_string(p).map_err(kube::Error::SerdeError)?)
        }
        None => serde_json::Value::Null,
    };
    let patch =
        serde_json::json!({ "metadata": { "annotations": { PROGRESS_ANNOTATION: value } } });
    crds.patch(crd_name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
}

/// Leaves only `storage` in `status.storedVersions`, unless the storage version changed
/// meanwhile (a newer release: its own migration prunes). The patch is tested against the
/// `resourceVersion` it was decided on.
async fn prune_stored_versions(
    crds: &Api<CustomResourceDefinition>,
    crd_name: &str,
    storage: &str,
) -> kube::Result<()> {
    loop {
        let crd = crds.get_status(crd_name).await?;
        if storage_version(&crd, crd_name)? != storage {
            return Err(kube::Error::Service(
                format!(
                    "CRD {crd_name}: the storage version changed from {storage} while its objects \
                     were migrated; the new version's migration prunes storedVersions"
                )
                .into(),
            ));
        }
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": crd.metadata.resource_version },
            "status": { "storedVersions": [storage] },
        });
        match crds
            .patch_status(crd_name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes `object` back unchanged, with the `resourceVersion` it was read with; `false` when it
/// is gone. A conflict is a success: another write re-encoded the object, and it is kept.
async fn rewrite(
    client: &Client,
    resource: &ApiResource,
    object: DynamicObject,
) -> kube::Result<bool> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let api: Api<DynamicObject> = match &object.metadata.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    match api.replace(&name, &PostParams::default(), &object).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// What [`migrate`] rewrites page by page, for one list at a time.
struct Pages<'a> {
    client: &'a Client,
    crds: &'a Api<CustomResourceDefinition>,
    crd_name: &'a str,
    resource: &'a ApiResource,
    options: &'a MigrateOptions,
}

impl Pages<'_> {
    /// Rewrites what `api` lists from `state`'s continue token on, saving the token after
    /// each page.
    async fn migrate(
        &self,
        api: &Api<DynamicObject>,
        state: &mut Progress,
        progress: &mut impl FnMut(usize),
    ) -> kube::Result<()> {
        let pause = Duration::from_secs(1) / self.options.per_second.max(1);
        loop {
            let mut params = ListParams::default().limit(self.options.page_size.max(1));
            if !state.continue_token.is_empty() {
                params = params.continue_token(&state.continue_token);
            }
            let page = match api.list(&params).await {
                Ok(page) => page,
                // The saved token expired (410 after a compaction) or is not one (400): start
                // over; rewriting twice is harmless.
                Err(kube::Error::Api(s))
                    if matches!(s.code, 400 | 410) && !state.continue_token.is_empty() =>
                {
                    tracing::info!(
                        crd = self.crd_name,
                        "storage migration: the saved position expired; starting over"
                    );
                    state.continue_token.clear();
                    continue;
                }
                Err(e) => return Err(e),
            };
            for object in page.items {
                tokio::time::sleep(pause).await;
                if rewrite(self.client, self.resource, object).await? {
                    state.rewritten += 1;
                    progress(state.rewritten);
                }
            }
            state.continue_token = page.metadata.continue_.unwrap_or_default();
            if state.continue_token.is_empty() {
                break;
            }
            save_progress(self.crds, self.crd_name, Some(state)).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(stored: &[&str], annotation: Option<&str>) -> CustomResourceDefinition {
        let mut crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "shops.shop.example.com" },
            "spec": {
                "group": "shop.example.com", "scope": "Namespaced",
                "names": { "kind": "Shop", "plural": "shops" },
                "versions": [
                    { "name": "v1", "served": true, "storage": false },
                    { "name": "v2", "served": true, "storage": true },
                ],
            },
            "status": { "storedVersions": stored },
        }))
        .unwrap();
        if let Some(text) = annotation {
            crd.metadata.annotations =
                Some([(PROGRESS_ANNOTATION.to_owned(), text.to_owned())].into());
        }
        crd
    }

    #[test]
    fn a_migration_should_be_needed_only_while_another_version_is_stored() {
        let needed = |stored: &[&str]| {
            Migration {
                storage_version: "v2".into(),
                stored_before: stored.iter().map(|s| (*s).to_owned()).collect(),
                ..Migration::default()
            }
            .was_needed()
        };
        assert!(needed(&["v1", "v2"]));
        assert!(needed(&["v1"]));
        assert!(!needed(&["v2"]));
        assert!(!needed(&[]));
        assert_eq!(storage_version(&crd(&[], None), "x").unwrap(), "v2");
    }

    #[test]
    fn progress_should_round_trip_through_the_annotation_and_ignore_garbage() {
        let progress = Progress {
            to: "v2".into(),
            namespace: String::new(),
            continue_token: "abc".into(),
            rewritten: 200,
        };
        let text = serde_json::to_string(&progress).unwrap();
        assert_eq!(text, r#"{"to":"v2","continue":"abc","rewritten":200}"#);
        let in_namespace = Progress {
            namespace: "shop".into(),
            ..progress.clone()
        };
        let saved = serde_json::to_string(&in_namespace).unwrap();
        assert_eq!(
            saved,
            r#"{"to":"v2","namespace":"shop","continue":"abc","rewritten":200}"#
        );
        assert_eq!(
            serde_json::from_str::<Progress>(&saved).unwrap(),
            in_namespace
        );
        assert_eq!(saved_progress(&crd(&["v1"], Some(&text))), Some(progress));
        assert_eq!(saved_progress(&crd(&["v1"], Some("not json"))), None);
        assert_eq!(saved_progress(&crd(&["v1"], None)), None);
    }
}
