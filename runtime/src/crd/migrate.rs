//! Changing a kind's storage version: objects already stored stay encoded in the old version
//! until they are written again, and the old version cannot be removed from the CRD while
//! `status.storedVersions` lists it. [`migrate_storage`] writes every object back unchanged (the
//! apiserver re-encodes it in the current storage version, converting through the conversion
//! webhook) and then leaves only the storage version in `storedVersions`.
//!
//! The steps of a storage-version change:
//!
//! 1. deploy the operator with both versions served and the new one `storage` (the old one
//!    `storage = false`, its `conversion(hub = ..)` pointing at the new one);
//! 2. run [`migrate_storage`] (once, from any replica or a job);
//! 3. only then stop serving the old version, and later remove it.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

/// What [`migrate_storage`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Migration {
    /// The storage version objects were written in.
    pub storage_version: String,
    /// Objects written back.
    pub rewritten: usize,
    /// `status.storedVersions` before.
    pub stored_before: Vec<String>,
}

/// Writes every object of the CRD `crd_name` back in its storage version, then sets
/// `status.storedVersions` to that version alone (see the [module docs](self)). Objects deleted
/// meanwhile are skipped; a conflict is not a failure (the other write re-encoded the object).
///
/// # Errors
///
/// The CRD does not exist or has no storage version, or a list, write or status patch failed
/// otherwise than by a conflict or a missing object.
pub async fn migrate_storage(client: &Client, crd_name: &str) -> kube::Result<Migration> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get(crd_name).await?;
    let Some(storage) = crd.spec.versions.iter().find(|v| v.storage) else {
        return Err(kube::Error::Service(
            format!("CRD {crd_name} has no storage version").into(),
        ));
    };
    let resource = ApiResource {
        group: crd.spec.group.clone(),
        version: storage.name.clone(),
        api_version: format!("{}/{}", crd.spec.group, storage.name),
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut rewritten = 0;
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        for object in page.items {
            if rewrite(client, &resource, object).await? {
                rewritten += 1;
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    let stored_before = crd
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default();
    let status = serde_json::json!({ "status": { "storedVersions": [storage.name] } });
    crds.patch_status(crd_name, &PatchParams::default(), &Patch::Merge(status))
        .await?;
    Ok(Migration {
        storage_version: storage.name.clone(),
        rewritten,
        stored_before,
    })
}

/// Writes `object` back unchanged; `false` when it is gone.
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
        // A conflict: another write re-encoded it meanwhile.
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}
