//! The user's side of a controller: the reconcile logic, and the wiring `#[controller]` generates.

use std::future::Future;
use std::sync::Arc;

use super::{Action, Context, Controller, ErrorPolicy, Kind, Wiring};

/// A controller declared with `#[kubeforge::controller(...)]`: how to build its [`Controller`]
/// and which RBAC rules its wiring needs. Add it to a manager with
/// [`Manager::controller`](crate::manager::Manager::controller).
pub trait ControllerSpec: Reconciler<Self::Kind> + Sized {
    /// The primary kind (`for = ...`).
    type Kind: Kind;
    /// The controller's name (metrics label, logs); defaults to the lowercased kind.
    const NAME: &'static str;
    /// The finalizer the controller holds deleted objects with, if any.
    const FINALIZER: Option<&'static str>;
    /// The controller wired to `wiring` (its cache, client, namespace and informer options).
    fn controller(wiring: &Wiring) -> Controller<Self::Kind>;
    /// The RBAC rules the wiring needs.
    fn rbac() -> crate::rbac::Rules;
}

/// The user's reconcile logic for kind `K`.
///
/// # Errors
///
/// `reconcile` and `cleanup` fail with [`Self::Error`](Reconciler::Error), any
/// [`ReconcileError`](crate::ReconcileError): a type implementing [`std::error::Error`] (a
/// `thiserror` enum, `kube::Error`), `anyhow::Error` (`anyhow::Result<Action>`; enable the
/// `anyhow` feature so that retry policies can downcast it), or [`BoxError`](crate::BoxError)
/// (`Box<dyn std::error::Error + Send + Sync>`, which `?` converts every error into).
/// [`error_policy`](Reconciler::error_policy) gets the error as returned; the logs, the
/// `RetriesExhausted` event and the controller's [`RetryPolicy`](crate::retry::RetryPolicy) get
/// it as a `dyn Error`, with its source chain.
///
/// ```
/// use std::sync::Arc;
/// use kubeforge::BoxError;
/// use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// use kubeforge::prelude::*;
///
/// struct Copier;
///
/// impl Reconciler<ConfigMap> for Copier {
///     type Error = BoxError;
///
///     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &Context<ConfigMap>) -> Result<Action, BoxError> {
///         let source = cm.labels().get("copy-of").ok_or("no copy-of label")?; // &str
///         let secrets = ctx.cache().store::<Secret>(&Lookup::scope(ctx.key().namespace.as_deref()))?; // NotCached
///         let key = ObjectKey { name: source.clone(), ..ctx.key().clone() };
///         let _secret = secrets.get(&key).await?.ok_or(format!("no secret {key}"))?; // StoreError, String
///         Ok(Action::Done)
///     }
/// }
/// ```
pub trait Reconciler<K>: Send + Sync + 'static {
    /// The reconcile error (see [Errors](Reconciler#errors)).
    type Error: crate::ReconcileError;

    /// Makes the world match `obj` (the latest cached version). Must be idempotent.
    fn reconcile(
        &self,
        obj: Arc<K>,
        ctx: &Context<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// Cleans up what `obj` created outside Kubernetes before it is deleted. Called only when
    /// the controller has a [`ControllerConfig::finalizer`](super::ControllerConfig::finalizer); the finalizer is removed once this
    /// returns `Ok`. The default does nothing.
    fn cleanup(
        &self,
        obj: Arc<K>,
        ctx: &Context<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        let _ = (obj, ctx);
        async { Ok(Action::Done) }
    }

    /// How to retry after `error`. The default retries with exponential backoff.
    fn error_policy(&self, obj: &K, error: &Self::Error, ctx: &Context<K>) -> ErrorPolicy {
        let _ = (obj, error, ctx);
        ErrorPolicy::Backoff
    }
}

/// A shared reconciler reconciles like the one it shares (a controller that is started again,
/// for example when its CRD comes back, keeps its reconciler).
impl<K, R: Reconciler<K>> Reconciler<K> for Arc<R> {
    type Error = R::Error;

    fn reconcile(
        &self,
        obj: Arc<K>,
        ctx: &Context<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        (**self).reconcile(obj, ctx)
    }

    fn cleanup(
        &self,
        obj: Arc<K>,
        ctx: &Context<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        (**self).cleanup(obj, ctx)
    }

    fn error_policy(&self, obj: &K, error: &Self::Error, ctx: &Context<K>) -> ErrorPolicy {
        (**self).error_policy(obj, error, ctx)
    }
}
