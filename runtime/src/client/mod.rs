//! Write helpers on top of [`kube::Api`]: conflict-safe read-modify-write and owned children.
//!
//! - [`update_object`] is app-sdk's `UpdateObject`: get, modify, replace with the fresh
//!   `resourceVersion`, and on `409 Conflict` start over from a fresh copy — so concurrent writers
//!   never lose each other's updates.
//! - [`apply_owned`] server-side-applies a child object with a controller owner reference to its
//!   parent, which is what `owns` in a controller watches and what garbage collection follows.

mod connect;
pub(crate) mod metrics;
mod named;
mod rate_limit;

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use connect::{ConnectionConfig, DeadlineError, IdleTimeout, connect, connect_with};
pub use named::{Readable, RequestFailed, name_error, readable, request};
pub use rate_limit::{RateLimitLayer, RateLimited, rate_limited_client};

/// Which part of the object [`update_object`] writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Target {
    /// The main resource (status changes are ignored by kinds with a status subresource).
    #[default]
    Main,
    /// The `status` subresource.
    Status,
}

/// Why [`update_object`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError<E: std::error::Error + 'static> {
    /// A request failed (other than a conflict that could be retried).
    #[error("update of {name}: {}", readable(.source))]
    Api {
        /// The object's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The callback refused to modify the object.
    #[error("update of {name} refused by the callback: {source}")]
    Callback {
        /// The object's name.
        name: String,
        /// The callback's error.
        #[source]
        source: E,
    },
    /// Every attempt hit a conflict.
    #[error("update of {name}: still conflicting after {attempts} attempts")]
    Conflicts {
        /// The object's name.
        name: String,
        /// Attempts made.
        attempts: u32,
    },
}

/// Reads `name`, lets `modify` change it, and writes it back with the `resourceVersion` it read,
/// retrying from a fresh read after each `409 Conflict` (up to `max_attempts` attempts in all).
///
/// `modify` gets the object and whether this is a retry; it may refuse with an error. The
/// updated object is returned.
///
/// # Errors
///
/// [`UpdateError::Api`] for a failed request, [`UpdateError::Callback`] when `modify` refuses,
/// [`UpdateError::Conflicts`] when every attempt conflicted.
///
/// # Examples
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kubeforge::client::{Target, update_object};
///
/// # async fn doc(api: kube::Api<ConfigMap>) -> Result<(), Box<dyn std::error::Error>> {
/// update_object(&api, "counter", Target::Main, 10, |cm: &mut ConfigMap, _retry| {
///     let data = cm.data.get_or_insert_default();
///     let n: i64 = data.get("n").and_then(|v| v.parse().ok()).unwrap_or(0);
///     data.insert("n".into(), (n + 1).to_string());
///     Ok::<_, std::convert::Infallible>(())
/// })
/// .await?;
/// # Ok(()) }
/// ```
pub async fn update_object<K, E, F>(
    api: &Api<K>,
    name: &str,
    target: Target,
    max_attempts: u32,
    mut modify: F,
) -> Result<K, UpdateError<E>>
where
    K: Resource + crate::views::Writable + Clone + Serialize + DeserializeOwned + Debug,
    E: std::error::Error + 'static,
    F: FnMut(&mut K, bool) -> Result<(), E>,
{
    let api_error = |source| UpdateError::Api {
        name: name.to_owned(),
        source,
    };
    let attempts = max_attempts.max(1);
    for attempt in 0..attempts {
        let mut obj = api.get(name).await.map_err(api_error)?;
        modify(&mut obj, attempt > 0).map_err(|source| UpdateError::Callback {
            name: name.to_owned(),
            source,
        })?;
        let written = match target {
            Target::Main => api.replace(name, &PostParams::default(), &obj).await,
            Target::Status => api.replace_status(name, &PostParams::default(), &obj).await,
        };
        match written {
            Ok(updated) => return Ok(updated),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                tracing::debug!(%name, attempt, "update conflicted; retrying with a fresh copy");
            }
            Err(e) => return Err(api_error(e)),
        }
    }
    Err(UpdateError::Conflicts {
        name: name.to_owned(),
        attempts,
    })
}

/// The controller owner reference to `owner` (`controller: true`, `blockOwnerDeletion: true`: a
/// foreground deletion of the owner waits for the child),
/// or `None` if `owner` has no name or UID yet (it was never stored).
pub fn owner_reference<P: Resource<DynamicType = ()>>(owner: &P) -> Option<OwnerReference> {
    // kube's `controller_owner_ref` leaves `blockOwnerDeletion` unset: a foreground deletion of
    // the owner would not wait for the child.
    owner
        .controller_owner_ref(&())
        .map(|reference| OwnerReference {
            block_owner_deletion: Some(true),
            ..reference
        })
}

/// Gives `child` the controller owner reference to `owner` (replacing any earlier reference to
/// it) and no `resourceVersion`, for a write by `what`; returns the child's name.
pub(crate) fn owned_by<P, C>(child: &mut C, owner: &P, what: &str) -> Result<String, kube::Error>
where
    P: Resource<DynamicType = ()>,
    C: Resource,
{
    let reference = owner_reference(owner).ok_or_else(|| {
        kube::Error::Service(
            format!(
                "{what}: owner {} has no uid yet",
                owner.meta().name.as_deref().unwrap_or("<unnamed>")
            )
            .into(),
        )
    })?;
    let meta = child.meta_mut();
    let references = meta.owner_references.get_or_insert_default();
    references.retain(|r| r.uid != reference.uid);
    references.push(reference);
    meta.resource_version = None;
    Ok(meta.name.clone().unwrap_or_default())
}

/// Server-side-applies `child` as field manager `manager`, with a controller owner reference to
/// `owner` added, and returns the object the server stored. Conflicts with other managers are
/// forced: the controller owns the fields it sets.
///
/// `child` needs `apiVersion` and `kind` in its serialized form (k8s-openapi types add them).
///
/// # Errors
///
/// Fails when `owner` has no UID (never stored), or when the apply request fails.
pub async fn apply_owned<P, C>(
    api: &Api<C>,
    owner: &P,
    manager: &str,
    mut child: C,
) -> Result<C, kube::Error>
where
    P: Resource<DynamicType = ()>,
    C: Resource<DynamicType: Default>
        + crate::views::Writable
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug,
{
    let name = owned_by(&mut child, owner, "apply_owned")?;
    child.meta_mut().managed_fields = None;
    api.patch(
        &name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&child),
    )
    .await
    .map_err(|e| name_error(&describe("apply", api, &name), e))
}

/// `verb Kind namespace/name` of a request through `api`.
fn describe<C>(verb: &str, api: &Api<C>, name: &str) -> String
where
    C: Resource<DynamicType: Default>,
{
    request(
        verb,
        &C::kind(&C::DynamicType::default()),
        api.namespace(),
        name,
    )
}

/// Creates `child` with a controller owner reference to `owner` unless an object of its name
/// exists: the stored object, and whether this call created it. An existing object is returned
/// as it is, never overwritten — for what must be made once, such as a generated password.
///
/// # Errors
///
/// Fails when `owner` has no UID (never stored), or when the request fails (other than because
/// the object exists).
///
/// # Examples
///
/// ```no_run
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// use kube::Api;
///
/// # async fn doc(secrets: Api<Secret>, owner: ConfigMap) -> Result<(), kube::Error> {
/// let mut secret = Secret::default();
/// secret.metadata.name = Some("db-password".into());
/// secret.string_data = Some([("password".to_owned(), "generated".to_owned())].into());
/// let (_, created) = kubeforge::client::create_owned(&secrets, &owner, secret).await?;
/// if created {
///     println!("generated a password");
/// }
/// # Ok(()) }
/// ```
pub async fn create_owned<P, C>(
    api: &Api<C>,
    owner: &P,
    mut child: C,
) -> Result<(C, bool), kube::Error>
where
    P: Resource<DynamicType = ()>,
    C: Resource<DynamicType: Default>
        + crate::views::Writable
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug,
{
    let name = owned_by(&mut child, owner, "create_owned")?;
    match api.create(&PostParams::default(), &child).await {
        Ok(created) => Ok((created, true)),
        Err(kube::Error::Api(status)) if status.code == 409 && status.reason == "AlreadyExists" => {
            let stored = api
                .get(&name)
                .await
                .map_err(|e| name_error(&describe("get", api, &name), e))?;
            Ok((stored, false))
        }
        Err(error) => Err(name_error(&describe("create", api, &name), error)),
    }
}

/// Lists every object matching `params`, `page_size` at a time (the apiserver's `limit` /
/// `continue` paging), so a huge collection never arrives as one response.
///
/// # Errors
///
/// The apiserver's error; `410 Gone` if the continue token expired between pages (start over).
pub async fn list_paged<K>(
    api: &Api<K>,
    params: &kube::api::ListParams,
    page_size: u32,
) -> Result<Vec<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut params = params.clone().limit(page_size.max(1));
    let mut items = Vec::new();
    loop {
        let page = api.list(&params).await?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}
