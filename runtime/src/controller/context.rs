//! What a reconcile gets besides the object.

use std::fmt::Debug;
use std::sync::Arc;

use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::ObjectKey;
use crate::cache::Cache;
use crate::scope::Scoped;

use super::{Kind, Wiring, precondition};

/// What a reconcile gets besides the object: a client, the shared cache, and facts about the run.
pub struct Context<K> {
    pub(super) wiring: Arc<Wiring>,
    pub(super) key: ObjectKey,
    pub(super) retries: u32,
    /// The controller's retries, which hold what this key's reconciles carry across retries
    /// (looked up only when a reconcile asks).
    pub(super) keys: Arc<super::retries::Retries>,
    pub(super) controller: Arc<str>,
    /// The object being reconciled: its UID guards status writes.
    pub(super) object: Arc<K>,
    /// What the dependents declared in `#[controller(dependents(..))]` stored, before the
    /// controller's own `reconcile` runs (a `dependents::Reconciled`, read and written by that
    /// module's methods of `Context`).
    pub(crate) dependents: std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>,
    /// What queued the key since its last run.
    pub(super) triggers: Vec<super::Trigger>,
}

impl<K> Debug for Context<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("controller", &self.controller)
            .field("key", &self.key)
            .field("retries", &self.retries)
            .field("triggers", &self.triggers)
            .finish_non_exhaustive()
    }
}

impl<K> Context<K> {
    /// The API client. Under leader election its writes are fenced: once this replica's lease
    /// is no longer valid, anything but a read fails with
    /// [`NotLeader`](crate::leader::NotLeader) instead of reaching the apiserver.
    pub fn client(&self) -> Client {
        self.wiring.client()
    }

    /// The manager's shared cache (stores of every watched kind).
    pub fn cache(&self) -> &Cache {
        self.wiring.cache()
    }

    /// What the controller is wired to (cache, client, gate, namespace).
    pub fn wiring(&self) -> &Wiring {
        &self.wiring
    }

    /// Records a write this reconcile made without the helpers below (see
    /// [`Wiring::record_write`]); its watch event is then known as this reconcile's own (see
    /// [`ControllerConfig::skip_own_writes`](super::ControllerConfig::skip_own_writes)).
    pub fn record_write<C: Resource + 'static>(&self, written: &C) {
        let writer = crate::writes::Writer::new(&self.controller, &self.key);
        self.wiring.record_write_by(written, Some(writer));
    }

    /// The cached objects of kind `C` in the controller's namespaces for which the custom index
    /// `index` ([`InformerConfig::index`](crate::informer::InformerConfig::index), the
    /// `indexes(..)` key of `#[controller]`) produced `value`: read from the informers of `C`
    /// without selectors, else from those of the one selector `C` is watched with (with several,
    /// name the informer: `ctx.cache().store::<C>(&lookup)?.by_index(..)`).
    ///
    /// # Errors
    ///
    /// [`NotCached`](crate::cache::NotCached) when no informer of `C` covers the namespaces; the
    /// store's error when its backend fails. An index nobody registered answers nothing.
    pub async fn indexed<C: Kind>(
        &self,
        index: &str,
        value: &str,
    ) -> Result<Vec<Arc<C>>, crate::BoxError> {
        let store = self.wiring.cache().store_in::<C>(&self.wiring.namespaces)?;
        Ok(store.by_index(index, value).await?)
    }

    /// The key being reconciled.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// Why this reconcile runs: what queued its key since its last run, first first (at most
    /// 8, each once). Several events before a worker takes the key make one run with all their
    /// triggers; empty when nothing the controller records queued it (a key added to the queue
    /// by hand, a wait for leadership). The reconcile's span carries them as `trigger`.
    ///
    /// ```
    /// use kubeforge::controller::{Context, Trigger};
    /// # fn doc<K>(ctx: &Context<K>) {
    /// if ctx.triggers().iter().any(|t| matches!(t, Trigger::Changed { generation_changed: true })) {
    ///     // the spec changed: roll out
    /// }
    /// # }
    /// ```
    pub fn triggers(&self) -> &[super::Trigger] {
        &self.triggers
    }

    /// How many times this key has failed in a row (0 on a first attempt or after a success).
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// The value of type `T` an earlier attempt of this key stored with [`Context::set_state`],
    /// if the attempts since have all failed (app-sdk's per-request state). The state of a key is
    /// dropped when a reconcile succeeds (also with `RequeueAfter`), on a terminal error, when
    /// the retry policy gives up and when the object is deleted.
    ///
    /// ```no_run
    /// # use kubeforge::controller::Context;
    /// # fn doc(ctx: &Context<kubeforge::k8s_openapi::api::core::v1::ConfigMap>) {
    /// // Remember which backup the first attempt started, so a retry resumes it.
    /// let backup: String = ctx.state::<String>().unwrap_or_else(|| {
    ///     let id = "backup-1".to_owned();
    ///     ctx.set_state(id.clone());
    ///     id
    /// });
    /// # }
    /// ```
    pub fn state<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        let state = self.keys.existing_state(&self.key)?;
        let state = state.lock().unwrap_or_else(|e| e.into_inner());
        state
            .get(&std::any::TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
            .cloned()
    }

    /// Stores `value` for the next attempts of this key (see [`Context::state`]); one value per
    /// type.
    pub fn set_state<T: Send + Sync + 'static>(&self, value: T) {
        let state = self.keys.state(&self.key);
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        state.insert(std::any::TypeId::of::<T>(), Box::new(value));
    }

    /// The controller's name.
    pub fn controller_name(&self) -> &str {
        &self.controller
    }

    /// Patches the status of the object being reconciled and records the write for
    /// read-your-writes (see [`ControllerConfig::read_your_writes`](super::ControllerConfig::read_your_writes)).
    ///
    /// The patch can only land on the object being reconciled, never on another object created
    /// under the same name since: it carries the object's UID as a precondition. A JSON merge
    /// patch is sent as the equivalent JSON patch led by a `test` of the UID (the status
    /// subresource of a custom resource ignores `metadata` in a merge patch); if the cached
    /// object the reconcile started from is too stale to compute that equivalent safely, the
    /// apiserver answers `422` and the reconcile is retried. A strategic merge patch carries
    /// `metadata.uid`; an apply carries the reconciled object's `resourceVersion` as well (the
    /// status of a custom resource ignores an apply's UID), so it fails with `409` if the object
    /// changed since it was read.
    ///
    /// # Errors
    ///
    /// The apiserver's error: `422 Invalid` (`409 Conflict` for an apply) when the object was
    /// replaced by another of the same name.
    pub async fn patch_status<P: serde::Serialize + Debug>(
        &self,
        patch: &Patch<P>,
    ) -> Result<K, kube::Error>
    where
        K: Kind + crate::views::Writable,
    {
        let api = self.api::<K>();
        let params = PatchParams::default();
        let meta = self.object.meta();
        let _flight = self.wiring.flight(self.key.clone());
        let written = match meta.uid.as_deref() {
            Some(uid) => {
                let guarded =
                    precondition::guard(patch, uid, meta.resource_version.as_deref(), || {
                        serde_json::to_value(self.object.as_ref())
                    })
                    .map_err(kube::Error::SerdeError)?;
                api.patch_status(&self.key.name, &params, &guarded).await
            }
            None => api.patch_status(&self.key.name, &params, patch).await,
        }
        .map_err(|e| self.name_error("patch the status of", e))?;
        self.record_write(&written);
        Ok(written)
    }

    /// Replaces the status of the object being reconciled (optimistic concurrency: `obj` carries
    /// the resourceVersion it was read at) and records the write for read-your-writes. Without
    /// a UID of its own, `obj` gets the reconciled object's, which the apiserver checks.
    ///
    /// # Errors
    ///
    /// The apiserver's error; `409 Conflict` if the object changed since `obj` was read or is
    /// another object of the same name.
    pub async fn replace_status(&self, obj: &K) -> Result<K, kube::Error>
    where
        K: Kind + crate::views::Writable,
    {
        let api = self.api::<K>();
        let params = kube::api::PostParams::default();
        let _flight = self.wiring.flight(self.key.clone());
        let written = match (&obj.meta().uid, &self.object.meta().uid) {
            (None, Some(uid)) => {
                let mut with_uid = obj.clone();
                with_uid.meta_mut().uid = Some(uid.clone());
                api.replace_status(&self.key.name, &params, &with_uid).await
            }
            _ => api.replace_status(&self.key.name, &params, obj).await,
        }
        .map_err(|e| self.name_error("replace the status of", e))?;
        self.record_write(&written);
        Ok(written)
    }

    /// Server-side-applies `child` with a controller owner reference to `owner` (see
    /// [`apply_owned`](crate::client::apply_owned)) in the child's namespace (that of the object
    /// being reconciled when the child names none), as field manager `manager`, and records the
    /// write.
    ///
    /// # Errors
    ///
    /// The apiserver's error naming the request (`apply Secret team-a/shared: ...`), an owner
    /// without a UID, or a namespaced child without a namespace under a cluster-scoped owner.
    pub async fn apply_owned<C>(
        &self,
        owner: &K,
        manager: &str,
        mut child: C,
    ) -> Result<C, kube::Error>
    where
        K: Resource<DynamicType = ()>,
        C: Resource<DynamicType = ()>
            + crate::views::Writable
            + Clone
            + serde::Serialize
            + DeserializeOwned
            + Debug
            + 'static,
        C::Scope: Scoped,
    {
        let api = self.api_for(&mut child, "apply")?;
        self.label_for_shard(&mut child);
        let _flight = self.flight_to(&child);
        let written = crate::client::apply_owned(&api, owner, manager, child).await?;
        self.record_write(&written);
        Ok(written)
    }

    /// Creates `child` with a controller owner reference to `owner` unless it exists (see
    /// [`create_owned`](crate::client::create_owned)) in the child's namespace (that of the
    /// object being reconciled when the child names none): the stored object and whether this
    /// call created it. Records the write.
    ///
    /// # Errors
    ///
    /// As [`apply_owned`](Self::apply_owned).
    pub async fn create_owned<C>(&self, owner: &K, mut child: C) -> Result<(C, bool), kube::Error>
    where
        K: Resource<DynamicType = ()>,
        C: Resource<DynamicType = ()>
            + crate::views::Writable
            + Clone
            + serde::Serialize
            + DeserializeOwned
            + Debug
            + 'static,
        C::Scope: Scoped,
    {
        let api = self.api_for(&mut child, "create")?;
        self.label_for_shard(&mut child);
        let _flight = self.flight_to(&child);
        let (mut stored, created) = crate::client::create_owned(&api, owner, child).await?;
        if created {
            self.record_write(&stored);
        } else if let Some(membership) = self.wiring.shard()
            && membership.mode() == crate::shard::Mode::Labels
        {
            // Created by the owner's previous shard: take it along, so this replica's narrowed
            // informer sees it.
            if !membership.is_mine(stored.meta()) {
                let patch = serde_json::json!({ "metadata": { "labels": {
                    membership.owner_label(): membership.member(),
                }}});
                let name = stored.meta().name.clone().unwrap_or_default();
                stored = api
                    .patch(
                        &name,
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(patch),
                    )
                    .await
                    .map_err(|e| {
                        let what =
                            crate::client::request("patch", &C::kind(&()), api.namespace(), &name);
                        crate::client::name_error(&what, e)
                    })?;
                self.record_write(&stored);
            }
        }
        Ok((stored, created))
    }

    /// Labels `child` with this replica's shard when the manager shards (children follow their
    /// owner's shard, see [`crate::shard`]); does nothing otherwise.
    pub fn label_for_shard<C: Resource>(&self, child: &mut C) {
        if let Some(membership) = self.wiring.shard() {
            membership.label(child.meta_mut());
        }
    }

    /// `error` of a request about the object being reconciled, naming it.
    fn name_error(&self, verb: &str, error: kube::Error) -> kube::Error
    where
        K: Kind,
    {
        let what = crate::client::request(
            verb,
            &K::kind(&()),
            self.key.namespace.as_deref(),
            &self.key.name,
        );
        crate::client::name_error(&what, error)
    }

    /// The [`Api`] `child` is written through: its own namespace, given that of the object being
    /// reconciled when it names none (a namespaced child of a cluster-scoped owner must name
    /// one).
    fn api_for<C>(&self, child: &mut C, verb: &str) -> Result<Api<C>, kube::Error>
    where
        C: Resource<DynamicType = ()>,
        C::Scope: Scoped,
    {
        if !<C::Scope as Scoped>::NAMESPACED {
            return Ok(<C::Scope as Scoped>::api::<C>(self.client(), None));
        }
        let meta = child.meta_mut();
        if meta.namespace.is_none() {
            meta.namespace = self.key.namespace.clone();
        }
        match &meta.namespace {
            Some(namespace) => Ok(<C::Scope as Scoped>::api::<C>(
                self.client(),
                Some(namespace),
            )),
            None => Err(kube::Error::Service(
                format!(
                    "{}: a namespaced child of the cluster-scoped {} needs metadata.namespace",
                    crate::client::request(
                        verb,
                        &C::kind(&()),
                        None,
                        meta.name.as_deref().unwrap_or("<unnamed>")
                    ),
                    self.key.name
                )
                .into(),
            )),
        }
    }

    /// Opens a flight to `child`, about to be written in the namespace of the object being
    /// reconciled (see [`crate::writes::OwnWrites`]).
    fn flight_to<C>(&self, child: &C) -> crate::writes::Flight
    where
        C: Resource,
        C::Scope: Scoped,
    {
        let meta = child.meta();
        let namespace = if <C::Scope as Scoped>::NAMESPACED {
            meta.namespace
                .clone()
                .or_else(|| self.key.namespace.clone())
        } else {
            None
        };
        self.wiring.flight(ObjectKey {
            namespace,
            name: meta.name.clone().unwrap_or_default(),
        })
    }

    /// An [`Api`] for kind `C` in the namespace of the object being reconciled (all namespaces
    /// for a cluster-scoped primary; the namespace is ignored for a cluster-scoped `C`).
    pub fn api<C>(&self) -> Api<C>
    where
        C: Resource<DynamicType = ()>,
        C::Scope: Scoped,
    {
        <C::Scope as Scoped>::api::<C>(self.client(), self.key.namespace.as_deref())
    }
}
