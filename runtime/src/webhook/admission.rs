//! What a kind implements to be admitted: [`Validator`] (allow or deny a create, update or
//! delete, with warnings) and [`Defaulter`] (change the object before it is stored; the
//! framework computes the JSON patch), and the [`Verdict`] both return.

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Client;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub(crate) use super::versions::HookVersion;

/// What a validating or defaulting webhook answers: allowed (with warnings for the client), or
/// denied with a message the client sees (`admission webhook "..." denied the request: <message>`).
///
/// ```
/// use kubeforge::webhook::Verdict;
///
/// let verdict = Verdict::allow().warn("spec.image: prefer a digest to a tag");
/// assert!(verdict.is_allowed());
/// let verdict = Verdict::deny("spec.image: registry evil.example is not allowed");
/// assert_eq!(verdict.message(), Some("spec.image: registry evil.example is not allowed"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    denied: Option<String>,
    code: Option<u16>,
    warnings: Vec<String>,
}

impl Verdict {
    /// Allowed.
    #[must_use]
    pub fn allow() -> Self {
        Self::default()
    }

    /// Denied with `message` (HTTP code 403 for the client).
    #[must_use]
    pub fn deny(message: impl Into<String>) -> Self {
        Self {
            denied: Some(message.into()),
            code: Some(403),
            warnings: Vec::new(),
        }
    }

    /// Denied with `message` and an HTTP code of your choice (e.g. 422 for an invalid object).
    #[must_use]
    pub fn deny_with_code(code: u16, message: impl Into<String>) -> Self {
        Self {
            code: Some(code),
            ..Self::deny(message)
        }
    }

    /// Adds a warning the client prints (`kubectl` shows `Warning: ...`); kept short (the
    /// apiserver truncates warnings over 256 characters).
    #[must_use]
    pub fn warn(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// Whether the request is allowed.
    #[must_use]
    pub fn is_allowed(&self) -> bool {
        self.denied.is_none()
    }

    /// The denial message.
    #[must_use]
    pub fn message(&self) -> Option<&str> {
        self.denied.as_deref()
    }

    /// The warnings.
    #[must_use]
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// `self` denied when `other` is, warnings of both: for a defaulter and a validator of the
    /// same request, or several checks of one validator.
    #[must_use]
    pub fn and(mut self, other: Verdict) -> Self {
        self.warnings.extend(other.warnings);
        if self.denied.is_none() {
            self.denied = other.denied;
            self.code = other.code;
        }
        self
    }

    fn respond(self, mut response: AdmissionResponse) -> AdmissionResponse {
        if let Some(message) = self.denied {
            response = response.deny(message);
            response.result.code = self.code.unwrap_or(403);
            response.result.reason = "Forbidden".to_owned();
        }
        if !self.warnings.is_empty() {
            response.warnings = Some(self.warnings);
        }
        response
    }
}

/// The request a webhook answers, besides the object: who asks, what operation, whether it is a
/// dry run (then make no change outside the object: the apiserver stores nothing), and a client
/// for reads a rule needs (a ConfigMap of allowed registries, a quota).
///
/// Webhooks are served by every replica, leader or not, so this client is not fenced by leader
/// election: use it to read; a webhook that writes declares `side_effects` (see the kind's
/// `webhooks(..)`).
#[derive(Clone)]
pub struct AdmissionContext {
    operation: Operation,
    dry_run: bool,
    user: String,
    groups: Vec<String>,
    namespace: Option<String>,
    name: String,
    sub_resource: Option<String>,
    client: Client,
}

impl std::fmt::Debug for AdmissionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionContext")
            .field("operation", &self.operation)
            .field("dry_run", &self.dry_run)
            .field("user", &self.user)
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl AdmissionContext {
    fn new<K: kube::Resource>(request: &AdmissionRequest<K>, client: Client) -> Self {
        Self {
            operation: request.operation.clone(),
            dry_run: request.dry_run,
            user: request.user_info.username.clone().unwrap_or_default(),
            groups: request.user_info.groups.clone().unwrap_or_default(),
            namespace: request.namespace.clone(),
            name: request.name.clone(),
            sub_resource: request.sub_resource.clone(),
            client,
        }
    }

    /// `CREATE`, `UPDATE` or `DELETE`.
    #[must_use]
    pub fn operation(&self) -> &Operation {
        &self.operation
    }

    /// Whether the request is a dry run: nothing will be stored, so make no other change.
    #[must_use]
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// The requesting user's name.
    #[must_use]
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The requesting user's groups.
    #[must_use]
    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// The object's namespace (`None` for cluster-scoped kinds).
    #[must_use]
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The object's name (empty on a create with `generateName`).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The subresource (`status`, `scale`), if the request is for one.
    #[must_use]
    pub fn sub_resource(&self) -> Option<&str> {
        self.sub_resource.as_deref()
    }

    /// A client (not fenced by leader election; see the type's docs).
    #[must_use]
    pub fn client(&self) -> Client {
        self.client.clone()
    }
}

/// Validates a kind's objects before the apiserver stores them: a rule the schema (markers, CEL)
/// cannot express, typically one that reads other objects. Every method allows by default.
///
/// Implementing it wires the validating webhook (served by the manager, registered by `crdgen`
/// and by the running manager); `#[custom_resource(.., webhooks(validate))]` says so explicitly
/// and fails to compile without the impl.
///
/// ```
/// use kubeforge::webhook::{AdmissionContext, Validator, Verdict};
/// # use kubeforge::prelude::*;
/// # #[custom_resource(group = "demo.example.com", version = "v1", kind = "Site", namespaced)]
/// # #[derive(Clone, Debug)]
/// # pub struct SiteSpec { pub image: String }
///
/// impl Validator for Site {
///     async fn validate_create(&self, _: &AdmissionContext) -> Verdict {
///         if self.spec.image.starts_with("registry.example.com/") {
///             Verdict::allow()
///         } else {
///             Verdict::deny("spec.image: only images from registry.example.com")
///         }
///     }
///
///     async fn validate_update(&self, old: &Self, ctx: &AdmissionContext) -> Verdict {
///         self.validate_create(ctx).await
///     }
/// }
/// ```
pub trait Validator: Sized + Send + Sync {
    /// A create (also a create through server-side apply or a patch that creates).
    fn validate_create(&self, ctx: &AdmissionContext) -> impl Future<Output = Verdict> + Send {
        let _ = ctx;
        async { Verdict::allow() }
    }

    /// An update; `old` is the stored object.
    fn validate_update(
        &self,
        old: &Self,
        ctx: &AdmissionContext,
    ) -> impl Future<Output = Verdict> + Send {
        let _ = (old, ctx);
        async { Verdict::allow() }
    }
}

/// Validates deletes of a kind's objects (`self` is the stored object): a rule such as "not
/// while it is in use". Implementing it registers a validating webhook for `DELETE` (and only
/// then: a kind without it is never blocked from deletion by its operator, even while the
/// operator is down); `#[custom_resource(.., webhooks(validate_delete))]` says so explicitly.
///
/// An object the webhook cannot decode as the kind is never blocked from deletion.
///
/// ```
/// use kubeforge::webhook::{AdmissionContext, DeleteValidator, Verdict};
/// # use kubeforge::prelude::*;
/// # #[custom_resource(group = "demo.example.com", version = "v1", kind = "Site", namespaced)]
/// # #[derive(Clone, Debug)]
/// # pub struct SiteSpec { pub image: String }
///
/// impl DeleteValidator for Site {
///     async fn validate_delete(&self, _: &AdmissionContext) -> Verdict {
///         match self.metadata.labels.as_ref().and_then(|l| l.get("protected")) {
///             Some(_) => Verdict::deny("remove the label `protected` first"),
///             None => Verdict::allow(),
///         }
///     }
/// }
/// ```
pub trait DeleteValidator: Sized + Send + Sync {
    /// A delete; `self` is the stored object.
    fn validate_delete(&self, ctx: &AdmissionContext) -> impl Future<Output = Verdict> + Send;
}

/// Sets defaults on a kind's objects before they are validated and stored (defaults that depend
/// on other fields or on the cluster; constant defaults belong in the schema:
/// `#[validate(default = ..)]`). Change `self`; the framework sends the JSON patch from the
/// object as received to the object as left.
///
/// Implementing it wires the mutating webhook; `#[custom_resource(.., webhooks(default))]` says
/// so explicitly and fails to compile without the impl.
///
/// ```
/// use kubeforge::webhook::{AdmissionContext, Defaulter, Verdict};
/// # use kubeforge::prelude::*;
/// # #[custom_resource(group = "demo.example.com", version = "v1", kind = "Site", namespaced)]
/// # #[derive(Clone, Debug)]
/// # pub struct SiteSpec { pub image: String }
///
/// impl Defaulter for Site {
///     async fn apply_defaults(&mut self, _: &AdmissionContext) -> Verdict {
///         if !self.spec.image.contains(':') {
///             self.spec.image.push_str(":latest");
///             return Verdict::allow().warn("spec.image: no tag given, using :latest");
///         }
///         Verdict::allow()
///     }
/// }
/// ```
pub trait Defaulter: Sized + Send + Sync {
    /// Changes `self` (create and update); a denial refuses the request.
    fn apply_defaults(&mut self, ctx: &AdmissionContext) -> impl Future<Output = Verdict> + Send;
}

/// A webhook of one kind version, type-erased: reads the review's request as its kind and answers.
#[doc(hidden)]
pub trait Hook: Send + Sync {
    /// Answers the `AdmissionReview` in `body`; `version`, when the kind converts, brings the
    /// objects sent in another version of the kind to the hook's.
    fn review(
        &self,
        body: &[u8],
        client: Client,
        version: Option<&HookVersion>,
    ) -> BoxFuture<'static, Reviewed>;
}

/// A review's response, and what the metrics record of it (read by the server: feature
/// `webhooks`).
#[doc(hidden)]
#[cfg_attr(not(feature = "webhooks"), allow(dead_code))]
pub struct Reviewed {
    pub(crate) response: AdmissionResponse,
    pub(crate) operation: Option<Operation>,
}

/// A review's request, its objects decoded as `K` (each `Err` with why when it is not a `K`).
pub(super) struct Decoded<K> {
    pub(super) request: AdmissionRequest<DynamicObject>,
    pub(super) object: Option<Result<K, String>>,
    old: Option<Result<K, String>>,
    /// The object as received.
    pub(super) raw: Option<serde_json::Value>,
}

impl<K> Decoded<K> {
    /// The `apiVersion` the new object was sent in, when it is not the hook's (it was
    /// converted): the version a defaulter's changes go back to.
    fn sent_in(&self, version: Option<&HookVersion>) -> Option<String> {
        let sent = self.raw.as_ref()?["apiVersion"].as_str()?;
        version
            .filter(|v| v.api_version != sent)
            .map(|_| sent.to_owned())
    }
}

/// Decodes an `AdmissionReview` and its objects as `K`. An unreadable review is answered with
/// `invalid` (the apiserver then applies the failure policy); an object that is not a `K` is
/// an `Err` with why, for the hook to decide (never a panic).
/// An object sent in another version of the kind is converted to the hook's first (`version`);
/// one that does not convert is an `Err` too.
#[allow(clippy::result_large_err)]
pub(super) fn decode<K: DeserializeOwned>(
    body: &[u8],
    version: Option<&HookVersion>,
) -> Result<Decoded<K>, Reviewed> {
    let review: kube::core::admission::AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(|e| Reviewed {
            response: AdmissionResponse::invalid(format!(
                "kubeforge: cannot decode the AdmissionReview: {e}"
            )),
            operation: None,
        })?;
    let request: AdmissionRequest<DynamicObject> = review.try_into().map_err(|_| Reviewed {
        response: AdmissionResponse::invalid("kubeforge: the AdmissionReview has no request"),
        operation: None,
    })?;
    // Each object serialized once: the new one's JSON is also what a defaulter's patch is
    // computed from.
    let raw = request
        .object
        .as_ref()
        .and_then(|o| serde_json::to_value(o).ok());
    let old_raw = request
        .old_object
        .as_ref()
        .and_then(|o| serde_json::to_value(o).ok());
    let typed = |o: &Option<serde_json::Value>| -> Option<Result<K, String>> {
        o.as_ref().map(|o| {
            let o = match version {
                Some(version) => version.to_hook(o)?,
                None => o.clone(),
            };
            serde_json::from_value::<K>(o).map_err(|e| e.to_string())
        })
    };
    Ok(Decoded {
        object: typed(&raw),
        old: typed(&old_raw),
        request,
        raw,
    })
}

/// `request` answered with `verdict` at once (an object the hook cannot read).
pub(super) fn answered(
    request: &AdmissionRequest<DynamicObject>,
    verdict: Verdict,
) -> BoxFuture<'static, Reviewed> {
    let reviewed = Reviewed {
        response: verdict.respond(AdmissionResponse::from(request)),
        operation: Some(request.operation.clone()),
    };
    async move { reviewed }.boxed()
}

/// Validating webhook of `K`.
pub(crate) struct Validating<K>(std::marker::PhantomData<fn() -> K>);

impl<K> Hook for Validating<K>
where
    K: Validator + DeserializeOwned + Send + Sync + 'static,
{
    fn review(
        &self,
        body: &[u8],
        client: Client,
        version: Option<&HookVersion>,
    ) -> BoxFuture<'static, Reviewed> {
        let decoded = match decode::<K>(body, version) {
            Ok(decoded) => decoded,
            Err(reviewed) => return async move { reviewed }.boxed(),
        };
        let Decoded {
            request,
            object,
            old,
            ..
        } = decoded;
        // A new object that is not a `K` cannot be admitted: it would be stored unreadable.
        let object = match object {
            Some(Ok(object)) => Some(object),
            Some(Err(why)) => {
                let verdict = Verdict::deny_with_code(
                    422,
                    format!("kubeforge: the object cannot be read: {why}"),
                );
                return answered(&request, verdict);
            }
            None => None,
        };
        async move {
            let ctx = AdmissionContext::new(&request, client);
            let response = AdmissionResponse::from(&request);
            let verdict = match (&request.operation, &object, old) {
                (Operation::Create, Some(new), _) => new.validate_create(&ctx).await,
                (Operation::Update, Some(new), Some(Ok(old))) => {
                    new.validate_update(&old, &ctx).await
                }
                // The stored object is not a `K` (stored through another schema, or before a
                // change of the kind): an update that repairs it is judged as a create.
                (Operation::Update, Some(new), Some(Err(why))) => {
                    new.validate_create(&ctx).await.warn(format!(
                        "kubeforge: the stored object could not be read ({why}); validated as new"
                    ))
                }
                _ => Verdict::allow(),
            };
            Reviewed {
                response: verdict.respond(response),
                operation: Some(request.operation),
            }
        }
        .boxed()
    }
}

/// Validating webhook of `K`'s deletes.
pub(crate) struct ValidatingDelete<K>(std::marker::PhantomData<fn() -> K>);

impl<K> Hook for ValidatingDelete<K>
where
    K: DeleteValidator + DeserializeOwned + Send + Sync + 'static,
{
    fn review(
        &self,
        body: &[u8],
        client: Client,
        version: Option<&HookVersion>,
    ) -> BoxFuture<'static, Reviewed> {
        let Decoded { request, old, .. } = match decode::<K>(body, version) {
            Ok(decoded) => decoded,
            Err(reviewed) => return async move { reviewed }.boxed(),
        };
        async move {
            let ctx = AdmissionContext::new(&request, client);
            let response = AdmissionResponse::from(&request);
            let verdict = match (&request.operation, old) {
                (Operation::Delete, Some(Ok(old))) => old.validate_delete(&ctx).await,
                // Never blocked from deletion for being unreadable: it could never go.
                (Operation::Delete, Some(Err(why))) => Verdict::allow().warn(format!(
                    "kubeforge: deleted without validation: the object cannot be read: {why}"
                )),
                _ => Verdict::allow(),
            };
            Reviewed {
                response: verdict.respond(response),
                operation: Some(request.operation),
            }
        }
        .boxed()
    }
}

/// Defaulting webhook of `K`.
pub(crate) struct Defaulting<K>(std::marker::PhantomData<fn() -> K>);

impl<K> Hook for Defaulting<K>
where
    K: Defaulter + DeserializeOwned + Serialize + Send + Sync + 'static,
{
    fn review(
        &self,
        body: &[u8],
        client: Client,
        version: Option<&HookVersion>,
    ) -> BoxFuture<'static, Reviewed> {
        let decoded = match decode::<K>(body, version) {
            Ok(decoded) => decoded,
            Err(reviewed) => return async move { reviewed }.boxed(),
        };
        // Sent in another version: the defaulter's changes are converted back to it.
        let back = decoded.sent_in(version).zip(version.cloned());
        let Decoded {
            request,
            object,
            raw,
            ..
        } = decoded;
        let object = match object {
            Some(Ok(object)) => Some(object),
            // Not a `K`: left alone; the schema validation that follows says what is wrong.
            Some(Err(why)) => {
                let verdict =
                    Verdict::allow().warn(format!("kubeforge: defaults not applied: {why}"));
                return answered(&request, verdict);
            }
            None => None,
        };
        async move {
            let ctx = AdmissionContext::new(&request, client);
            let response = AdmissionResponse::from(&request);
            let operation = Some(request.operation.clone());
            let (Some(mut object), Some(raw)) = (object, raw) else {
                return Reviewed {
                    response,
                    operation,
                };
            };
            // The object as the type sees it before the defaulter: the patch holds only what
            // the defaulter changed, not what serde filled in (`serde(default)`).
            let before = serde_json::to_value(&object);
            let verdict = object.apply_defaults(&ctx).await;
            let changes = before.map_err(|e| e.to_string()).and_then(|before| {
                let after = serde_json::to_value(&object).map_err(|e| e.to_string())?;
                let (before, after) = match &back {
                    Some((sent, version)) => {
                        (version.back(before, sent)?, version.back(after, sent)?)
                    }
                    None => (before, after),
                };
                patch_from(&raw, &before, &after).map_err(|e| e.to_string())
            });
            let response = match changes {
                Ok(Some(patch)) if verdict.is_allowed() => {
                    response.with_patch(patch).unwrap_or_else(|e| {
                        AdmissionResponse::invalid(format!("kubeforge: defaulting patch: {e}"))
                    })
                }
                Ok(_) => response,
                Err(e) => AdmissionResponse::invalid(format!(
                    "kubeforge: cannot write the defaulted object back: {e}"
                )),
            };
            Reviewed {
                response: verdict.respond(response),
                operation,
            }
        }
        .boxed()
    }
}

/// The JSON patch that makes `raw` (the object as received) hold what the defaulter changed:
/// the changes from `before` (the decoded object, serialized before the defaulter ran) to
/// `object` (after it), and nothing else; `None` when it changed nothing.
fn patch_from<K: Serialize>(
    raw: &serde_json::Value,
    before: &serde_json::Value,
    object: &K,
) -> Result<Option<json_patch::Patch>, serde_json::Error> {
    let after = serde_json::to_value(object)?;
    let mut desired = raw.clone();
    for operation in json_patch::diff(before, &after).0 {
        use json_patch::PatchOperation::{Add, Remove, Replace};
        match operation {
            Add(json_patch::AddOperation { path, .. })
            | Replace(json_patch::ReplaceOperation { path, .. }) => {
                set_path(&mut desired, &after, path.as_str());
            }
            Remove(json_patch::RemoveOperation { path }) => {
                remove_path(&mut desired, path.as_str())
            }
            // `diff` emits only the three above.
            _ => {}
        }
    }
    for key in ["apiVersion", "kind"] {
        if let (Some(desired), Some(raw)) = (desired.as_object_mut(), raw.as_object()) {
            match raw.get(key) {
                Some(value) => desired.insert(key.to_owned(), value.clone()),
                None => desired.remove(key),
            };
        }
    }
    let patch = json_patch::diff(raw, &desired);
    Ok((!patch.0.is_empty()).then_some(patch))
}

/// The JSON-pointer tokens of `path`, unescaped.
fn tokens(path: &str) -> Vec<String> {
    path.split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// Sets `path` in `target` to its value in `source`; where `target` lacks a parent, the
/// shallowest missing one is copied from `source` whole.
fn set_path(target: &mut serde_json::Value, source: &serde_json::Value, path: &str) {
    let tokens = tokens(path);
    let mut target = target;
    let mut source = source;
    for (i, token) in tokens.iter().enumerate() {
        let Some(next_source) = child(source, token) else {
            return;
        };
        let last = i + 1 == tokens.len();
        let present = child(target, token).is_some();
        if last || !present {
            match target {
                serde_json::Value::Object(map) => {
                    map.insert(token.clone(), next_source.clone());
                }
                serde_json::Value::Array(items) => match token.parse::<usize>() {
                    Ok(i) if i < items.len() => items[i] = next_source.clone(),
                    Ok(i) if i == items.len() => items.push(next_source.clone()),
                    _ => {}
                },
                _ => {}
            }
            return;
        }
        let Some(next_target) = child_mut(target, token) else {
            return;
        };
        target = next_target;
        source = next_source;
    }
}

/// Removes `path` from `target` when present.
fn remove_path(target: &mut serde_json::Value, path: &str) {
    let tokens = tokens(path);
    let Some((last, parents)) = tokens.split_last() else {
        return;
    };
    let mut target = target;
    for token in parents {
        let Some(next) = child_mut(target, token) else {
            return;
        };
        target = next;
    }
    match target {
        serde_json::Value::Object(map) => {
            map.remove(last);
        }
        serde_json::Value::Array(items) => {
            if let Ok(i) = last.parse::<usize>()
                && i < items.len()
            {
                items.remove(i);
            }
        }
        _ => {}
    }
}

fn child<'a>(value: &'a serde_json::Value, token: &str) -> Option<&'a serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map.get(token),
        serde_json::Value::Array(items) => items.get(token.parse::<usize>().ok()?),
        _ => None,
    }
}

fn child_mut<'a>(
    value: &'a mut serde_json::Value,
    token: &str,
) -> Option<&'a mut serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map.get_mut(token),
        serde_json::Value::Array(items) => items.get_mut(token.parse::<usize>().ok()?),
        _ => None,
    }
}

/// The webhooks of one kind version, as `#[custom_resource]` finds them (see
/// [`__private::Probe`]).
#[derive(Clone, Default)]
pub struct Hooks {
    pub(crate) validate: Option<Arc<dyn Hook>>,
    pub(crate) validate_delete: Option<Arc<dyn Hook>>,
    pub(crate) default: Option<Arc<dyn Hook>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("validate", &self.validate.is_some())
            .field("validate_delete", &self.validate_delete.is_some())
            .field("default", &self.default.is_some())
            .finish()
    }
}

impl Hooks {
    /// Whether the kind has neither webhook.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.validate.is_none() && self.validate_delete.is_none() && self.default.is_none()
    }
}

/// Used by the code `#[custom_resource]` generates: finds whether a kind implements
/// [`Validator`] / [`Defaulter`] without naming the traits as bounds (autoref specialization,
/// in the concrete context of the generated code), so that the trait impls alone wire the
/// webhooks.
#[doc(hidden)]
pub mod __private {
    use super::*;

    /// Probes `K`'s webhook traits: `(&&Probe::<K>::new()).validator()`.
    pub struct Probe<K>(std::marker::PhantomData<fn() -> K>);

    impl<K> Probe<K> {
        /// A probe.
        #[must_use]
        pub const fn new() -> Self {
            Self(std::marker::PhantomData)
        }
    }

    impl<K> Default for Probe<K> {
        fn default() -> Self {
            Self::new()
        }
    }

    /// Chosen when `K: Validator`.
    pub trait ViaValidator {
        /// The validating hook.
        fn validator(&self) -> Option<Arc<dyn Hook>>;
    }
    impl<K> ViaValidator for &Probe<K>
    where
        K: Validator + DeserializeOwned + Send + Sync + 'static,
    {
        fn validator(&self) -> Option<Arc<dyn Hook>> {
            Some(Arc::new(Validating::<K>(std::marker::PhantomData)))
        }
    }
    /// Chosen otherwise.
    pub trait NoValidator {
        /// No hook.
        fn validator(&self) -> Option<Arc<dyn Hook>> {
            None
        }
    }
    impl<K> NoValidator for Probe<K> {}

    /// Chosen when `K: DeleteValidator`.
    pub trait ViaDeleteValidator {
        /// The hook validating deletes.
        fn delete_validator(&self) -> Option<Arc<dyn Hook>>;
    }
    impl<K> ViaDeleteValidator for &Probe<K>
    where
        K: DeleteValidator + DeserializeOwned + Send + Sync + 'static,
    {
        fn delete_validator(&self) -> Option<Arc<dyn Hook>> {
            Some(Arc::new(ValidatingDelete::<K>(std::marker::PhantomData)))
        }
    }
    /// Chosen otherwise.
    pub trait NoDeleteValidator {
        /// No hook.
        fn delete_validator(&self) -> Option<Arc<dyn Hook>> {
            None
        }
    }
    impl<K> NoDeleteValidator for Probe<K> {}

    /// Chosen when `K: Defaulter`.
    pub trait ViaDefaulter {
        /// The defaulting hook.
        fn defaulter(&self) -> Option<Arc<dyn Hook>>;
    }
    impl<K> ViaDefaulter for &Probe<K>
    where
        K: Defaulter + DeserializeOwned + Serialize + Send + Sync + 'static,
    {
        fn defaulter(&self) -> Option<Arc<dyn Hook>> {
            Some(Arc::new(Defaulting::<K>(std::marker::PhantomData)))
        }
    }
    /// Chosen otherwise.
    pub trait NoDefaulter {
        /// No hook.
        fn defaulter(&self) -> Option<Arc<dyn Hook>> {
            None
        }
    }
    impl<K> NoDefaulter for Probe<K> {}

    /// The hooks found.
    #[must_use]
    pub fn hooks(
        validate: Option<Arc<dyn Hook>>,
        validate_delete: Option<Arc<dyn Hook>>,
        default: Option<Arc<dyn Hook>>,
    ) -> Hooks {
        Hooks {
            validate,
            validate_delete,
            default,
        }
    }

    /// Fails to compile unless `K: Validator` (for `webhooks(validate)`).
    pub const fn assert_validator<K: Validator>() {}

    /// Fails to compile unless `K: DeleteValidator` (for `webhooks(validate_delete)`).
    pub const fn assert_delete_validator<K: DeleteValidator>() {}

    /// Fails to compile unless `K: Defaulter` (for `webhooks(default)`).
    pub const fn assert_defaulter<K: Defaulter>() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patch_should_leave_type_meta_and_unchanged_fields_alone() {
        let raw = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1"}});
        let same: k8s_openapi::api::core::v1::ConfigMap =
            serde_json::from_value(raw.clone()).unwrap();
        let before = serde_json::to_value(&same).unwrap();
        assert!(patch_from(&raw, &before, &same).unwrap().is_none());
        let mut changed = same.clone();
        changed
            .data
            .get_or_insert_default()
            .insert("y".into(), "2".into());
        let patch = patch_from(&raw, &before, &changed).unwrap().unwrap();
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([{"op": "add", "path": "/data/y", "value": "2"}])
        );
    }

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Sparse {
        spec: SparseSpec,
    }
    #[derive(serde::Serialize, serde::Deserialize)]
    struct SparseSpec {
        #[serde(default = "standard")]
        tier: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replicas: Option<i32>,
        #[serde(default)]
        ports: Vec<i32>,
        #[serde(default)]
        nested: Nested,
    }
    #[derive(Default, serde::Serialize, serde::Deserialize)]
    struct Nested {
        #[serde(default)]
        a: i32,
        #[serde(default)]
        b: i32,
    }
    fn standard() -> String {
        "standard".to_owned()
    }

    /// What serde fills in (`tier`, `ports`, `nested`) is not sent back; what the defaulter
    /// sets is, even below a parent the request lacks.
    #[test]
    fn patch_should_hold_only_what_the_defaulter_changed() {
        let raw = json!({"spec": {}});
        let mut object: Sparse = serde_json::from_value(raw.clone()).unwrap();
        let before = serde_json::to_value(&object).unwrap();
        assert!(patch_from(&raw, &before, &object).unwrap().is_none());
        object.spec.replicas = Some(1);
        object.spec.nested.b = 2;
        let patch = patch_from(&raw, &before, &object).unwrap().unwrap();
        let mut patched = raw.clone();
        json_patch::patch(&mut patched, &patch).unwrap();
        assert_eq!(
            patched,
            json!({"spec": {"replicas": 1, "nested": {"a": 0, "b": 2}}})
        );
        // A field the request has and the defaulter changes is replaced; one it removes goes.
        let raw = json!({"spec": {"tier": "premium", "replicas": 3, "ports": [1, 2]}});
        let mut object: Sparse = serde_json::from_value(raw.clone()).unwrap();
        let before = serde_json::to_value(&object).unwrap();
        object.spec.tier = "gold".into();
        object.spec.replicas = None;
        object.spec.ports.push(3);
        let patch = patch_from(&raw, &before, &object).unwrap().unwrap();
        let mut patched = raw.clone();
        json_patch::patch(&mut patched, &patch).unwrap();
        assert_eq!(
            patched,
            json!({"spec": {"tier": "gold", "ports": [1, 2, 3]}})
        );
    }

    #[test]
    fn verdicts_should_combine_warnings_and_keep_the_first_denial() {
        let v = Verdict::allow()
            .warn("a")
            .and(Verdict::deny("no").warn("b"))
            .and(Verdict::deny("later"));
        assert_eq!(v.message(), Some("no"));
        assert_eq!(v.warnings(), ["a", "b"]);
    }
}
