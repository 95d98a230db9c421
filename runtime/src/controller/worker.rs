//! A worker: takes a key, reads the cached object, runs reconcile or cleanup (catching panics,
//! applying the timeout) and decides what happens to the key.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use kube::{Api, Resource};
use tokio::time::Instant;
use tracing::Instrument;

use crate::ObjectKey;
use crate::queue::WorkQueue;
use crate::scope::{AnyKind, KindType};
use crate::store::Reader;

use super::outcome::{self, Next, Outcome};
use super::retries::{Retries, Scheduled};
use super::stalled;
use super::trigger::{self, Trigger};
use super::{Action, Context, ControllerConfig, ReconcileResult, Reconciler, Wiring, finalizer};
use crate::BoxError;
use crate::retry::RetryError;

pub(super) struct Worker<K: Resource, R> {
    pub(super) name: Arc<str>,
    pub(super) wiring: Arc<Wiring>,
    pub(super) store: Reader<K>,
    pub(super) reconciler: R,
    pub(super) queue: WorkQueue<ObjectKey>,
    pub(super) retries: Arc<Retries>,
    /// Publishes the Warning event when the retry policy gives up (created on first use).
    pub(super) recorder: std::sync::OnceLock<Arc<crate::events::Recorder>>,
    pub(super) config: ControllerConfig,
    pub(super) ids: AtomicU64,
    /// Cleanups by object UID: cleanup runs at most once per UID (see `finalizer.rs`).
    pub(super) finalized: std::sync::Mutex<finalizer::Finalized>,
    /// Whether the kind's status has conditions, for the `Stalled` condition (looked up once).
    pub(super) conditions: std::sync::OnceLock<bool>,
    /// The keys this process marked `Stalled`.
    pub(super) stalled: stalled::Stalled,
    /// The trace of each object's current generation, while spans are exported.
    /// The primary kind's type information.
    pub(super) ty: KindType<K>,
    pub(super) traces: super::trace_link::GenerationTraces,
}

impl<K, R> Worker<K, R>
where
    K: AnyKind,
    R: Reconciler<K>,
{
    pub(super) async fn process(&self, key: &ObjectKey) {
        if let Some(wait) = self.config.read_your_writes
            && !self
                .wiring
                .writes()
                .caught_up(std::any::TypeId::of::<K>(), key, wait, || {
                    self.store.resource_version(key)
                })
                .await
        {
            tracing::debug!(%key, ?wait, "informer did not deliver our last write in time; reconciling the cached version");
        }
        if !self.wiring.gate().allows() {
            // Leadership is not (or no longer) valid: do nothing, try again later. If it was
            // lost, the manager is about to stop this controller anyway.
            self.queue.add_after(key.clone(), Duration::from_secs(1));
            return;
        }
        let obj = match self.store.get(key).await {
            Ok(Some(obj)) => obj,
            Ok(None) => {
                // Deleted: nothing to reconcile (cleanup, if any, ran while the finalizer held
                // it).
                self.retries.forget(key);
                if crate::otlp::ids::exporting() {
                    self.traces.forget(key);
                }
                return;
            }
            Err(error) => {
                // The cache's backend failed (a remote store unreachable): not a deletion; the
                // key is retried like a failed reconcile.
                tracing::warn!(controller = %self.name, %key, %error, "reading the cache failed; retrying with backoff");
                self.config.metrics.reconciled(
                    &self.name,
                    crate::controller::ReconcileResult::Error,
                    Duration::ZERO,
                );
                let _ = self.retries.next(Next::RateLimited, key, Some(&error));
                return;
            }
        };
        if let Some(membership) = self.wiring.shard()
            && membership.is_draining(obj.meta())
        {
            self.let_go(key, &obj, membership).await;
            return;
        }
        // With hash ranges: only while the object's range is this replica's, and a range let
        // go waits for the reconciles running in it (the guard lives until this one ends).
        let _serving = match self.wiring.shard().map(|m| m.admit(obj.meta())) {
            Some(crate::shard::Serving::No) => {
                tracing::debug!(controller = %self.name, %key, "not in this replica's shard ranges; skipped");
                self.retries.forget(key);
                return;
            }
            Some(crate::shard::Serving::Yes(guard)) => guard,
            None => None,
        };
        let triggers = self.retries.triggers().take(key);
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let make_span = || {
            tracing::info_span!(
                "reconcile",
                controller = %self.name,
                namespace = key.namespace.as_deref().unwrap_or(""),
                name = %key.name,
                reconcile_id = %format_args!("{id:x}"),
                trigger = %trigger::describe(&triggers),
                generation = obj.meta().generation,
                outcome = tracing::field::Empty,
                error = tracing::field::Empty,
            )
        };
        // Exported spans: the reconciles of one generation share a trace (`trace_link.rs`).
        let span = if crate::otlp::ids::exporting() {
            let ids = self.traces.ids(key, obj.meta().generation, &triggers);
            crate::otlp::ids::with_ids(ids, make_span)
        } else {
            make_span()
        };
        self.process_object(key, obj, triggers)
            .instrument(span)
            .await;
    }

    /// The sharder asked this replica to let the object go: no reconcile of it runs (this
    /// worker holds its key), so acknowledge by taking its shard labels off.
    async fn let_go(&self, key: &ObjectKey, obj: &K, membership: &crate::shard::Membership) {
        // The kind as data: the release is the same code for every kind.
        let kind = self.ty.erased::<kube::api::DynamicObject>();
        let api = kind.api(self.wiring.client(), obj.meta().namespace.as_deref());
        match membership.release(&api, obj.meta()).await {
            Ok(released) => {
                if released {
                    tracing::debug!(controller = %self.name, %key, "drained: the object goes to another replica");
                }
                self.retries.forget(key);
            }
            Err(error) => {
                let error = crate::text::concise(&error);
                tracing::warn!(controller = %self.name, %key, %error, "acknowledging a drain failed; retrying");
                self.queue.add_after(key.clone(), Duration::from_secs(1));
            }
        }
    }

    async fn process_object(&self, key: &ObjectKey, obj: Arc<K>, triggers: Vec<Trigger>) {
        let deleting = obj.meta().deletion_timestamp.is_some();
        let finalizer = self.config.finalizer.as_deref();
        let has_finalizer = |o: &K, f: &str| o.meta().finalizers.iter().flatten().any(|x| x == f);
        let ctx = Context {
            wiring: Arc::clone(&self.wiring),
            key: key.clone(),
            retries: self.retries.attempts(key),
            keys: Arc::clone(&self.retries),
            controller: self.name.clone(),
            object: Arc::clone(&obj),
            dependents: std::sync::OnceLock::new(),
            triggers,
        };
        let started = Instant::now();
        let uid = obj.meta().uid.clone().unwrap_or_default();
        let (outcome, cleanup) = match finalizer {
            Some(f) if deleting && has_finalizer(&obj, f) => match self.stage(&uid) {
                // The finalizer came off already; the cache still shows the object as it was.
                finalizer::Stage::Released => {
                    tracing::debug!(%uid, "cleanup already done and finalizer removed; waiting for the deletion to reach the cache");
                    self.retries.forget(key);
                    return;
                }
                // Cleanup succeeded before but removing the finalizer failed: only retry that.
                finalizer::Stage::Cleaned => (Outcome::Finished(Ok(Action::Done)), true),
                finalizer::Stage::Pending => (
                    self.guarded(self.reconciler.cleanup(Arc::clone(&obj), &ctx))
                        .await,
                    true,
                ),
            },
            // Held by the dependents' finalizer: the reconcile releases the children that
            // outlive their owner, then takes the finalizer off (see `dependents`).
            _ if deleting && has_finalizer(&obj, finalizer::RELEASE_DEPENDENTS) => (
                self.guarded(self.reconciler.reconcile(Arc::clone(&obj), &ctx))
                    .await,
                false,
            ),
            _ if deleting => {
                // Being deleted and not held by our finalizer: nothing left to reconcile.
                self.retries.forget(key);
                return;
            }
            Some(f) if !has_finalizer(&obj, f) => {
                let Some(updated) = self.add_finalizer(key, &obj, f, started).await else {
                    return;
                };
                (
                    self.guarded(self.reconciler.reconcile(updated, &ctx)).await,
                    false,
                )
            }
            _ => (
                self.guarded(self.reconciler.reconcile(Arc::clone(&obj), &ctx))
                    .await,
                false,
            ),
        };
        let mut took = started.elapsed();
        if cleanup && let (Outcome::Finished(Ok(_)), Some(f)) = (&outcome, finalizer) {
            self.finalized().cleaned(&uid);
            if let Err(error) =
                finalizer::remove(&self.api_for(&obj), &self.ty, &self.wiring, &obj, f).await
            {
                let text = crate::text::concise(&error);
                tracing::warn!(error = %text, "removing the finalizer failed; retrying");
                self.metric(ReconcileResult::Error, started.elapsed());
                self.retry(key, &obj, &error);
                return;
            }
            self.finalized().released(&uid, std::time::Instant::now());
            tracing::debug!("cleanup done; finalizer removed");
            took = started.elapsed();
        }
        self.settle(key, &obj, &ctx, outcome, took);
    }

    /// Decides what happens to the key after a run, logs and counts it, and carries it out
    /// through the retries.
    fn settle(
        &self,
        key: &ObjectKey,
        obj: &Arc<K>,
        ctx: &Context<K>,
        outcome: Outcome<R::Error>,
        took: Duration,
    ) {
        let (next, result) = outcome::decide(&outcome, |error| {
            self.reconciler.error_policy(obj, error, ctx)
        });
        // The error as the retry policy, the logs and the events see it.
        let error: Option<BoxError> = match outcome {
            Outcome::Finished(Ok(_)) => None,
            Outcome::Finished(Err(error)) => {
                let error = crate::error::boxed(error);
                self.failed(error.as_ref(), next, ctx.retries);
                Some(error)
            }
            Outcome::Panicked(message) => {
                tracing::error!(panic = %message, "reconcile panicked; retrying with backoff");
                self.config.metrics.panicked(&self.name);
                Some(Box::new(Panicked(message)))
            }
            Outcome::TimedOut => {
                tracing::warn!(timeout = ?self.config.reconcile_timeout, "reconcile timed out; retrying with backoff");
                Some(Box::new(TimedOut))
            }
        };
        self.metric(result, took);
        let span = tracing::Span::current();
        span.record("outcome", result.as_str());
        if let Some(error) = &error {
            span.record("error", crate::text::concise(error.as_ref()).as_str());
        }
        crate::memory::reconciled();
        // A success clears the `Stalled` this process set, or one found at start-up.
        if error.is_none()
            && self.has_conditions()
            && (self.stalled.take(key) || ctx.triggers().contains(&Trigger::StartUp))
        {
            self.mark_stalled(obj, None);
        }
        let error = error.as_deref();
        if let Scheduled::Exhausted(attempts) = self.retries.next(next, key, error) {
            self.exhausted(obj, attempts, error);
        }
    }

    /// Logs a reconcile (or cleanup) that returned an error, and counts a terminal one.
    fn failed(&self, error: &RetryError, next: Next, retries: u32) {
        let error = crate::text::concise(error);
        match next {
            Next::RateLimited => {
                tracing::warn!(%error, retries, "reconcile failed; retrying with backoff");
            }
            Next::After(delay, _) => {
                tracing::warn!(%error, ?delay, "reconcile failed; retrying after the requested delay");
            }
            Next::Terminal | Next::Forget | Next::ForgetThenAfter(..) => {
                tracing::error!(%error, "reconcile failed with a terminal error; not retrying until the object changes");
                self.config.metrics.terminal_error(&self.name);
            }
        }
    }

    /// Whether the kind's status has conditions (a registered `#[custom_resource]` whose
    /// schema says so).
    fn has_conditions(&self) -> bool {
        *self.conditions.get_or_init(|| {
            stalled::has_conditions(&self.ty.group(), &self.ty.version(), &self.ty.kind())
        })
    }

    /// Sets (`Some(message)`) or clears the object's `Stalled` condition, in the background
    /// (only when that changes it). The write is the key's own, like a reconcile's status
    /// patch: its watch event starts no reconcile (a flight is open from before the request
    /// until its answer is recorded).
    fn mark_stalled(&self, obj: &Arc<K>, message: Option<String>) {
        let Some((name, patch)) = stalled::patch(obj.as_ref(), message.as_deref()) else {
            return;
        };
        let api = self.api_for(obj);
        let key = ObjectKey::of(obj.as_ref());
        let flight = self.wiring.flight(key.clone());
        let writer = crate::writes::Writer::new(&self.name, &key);
        let wiring = Arc::clone(&self.wiring);
        crate::task::spawn(async move {
            match stalled::send(&api, &name, &patch).await {
                Ok(written) => wiring.record_write_by(&written, Some(writer)),
                Err(error) => {
                    tracing::debug!(error = %crate::client::readable(&error), "writing the Stalled condition failed; the object changed or is gone");
                }
            }
            drop(flight);
        });
    }

    /// The retry policy gave up on the object: say so in its events, and in its `Stalled`
    /// condition if its status has conditions.
    fn exhausted(&self, obj: &Arc<K>, attempts: u32, error: Option<&RetryError>) {
        let reason = error.map_or_else(
            || "it asked to run again".to_owned(),
            |e| crate::text::concise(e),
        );
        tracing::error!(attempts, error = %reason, "giving up on the object after repeated failures; waiting for it to change");
        let recorder = Arc::clone(self.recorder.get_or_init(|| {
            Arc::new(crate::events::Recorder::new(
                self.wiring.client(),
                self.name.to_string(),
            ))
        }));
        let regarding = self.ty.object_ref(obj);
        let note = format!(
            "reconcile failed {attempts} times in a row, giving up until the object changes: {}",
            crate::text::truncate(reason, 512)
        );
        if self.has_conditions() {
            self.stalled.marked(&ObjectKey::of(obj.as_ref()));
            self.mark_stalled(obj, Some(note.clone()));
        }
        crate::task::spawn(async move {
            let published = recorder
                .publish_ref(
                    regarding,
                    crate::events::EventType::Warning,
                    "RetriesExhausted",
                    "Reconcile",
                    Some(note),
                )
                .await;
            if let Err(error) = published {
                tracing::debug!(error = %crate::client::readable(&error), "publishing the retries-exhausted event failed");
            }
        });
    }

    /// Adds the finalizer before the first reconcile; the object with it, or `None` when the
    /// key is settled for now (the object is gone, or the write failed and is retried).
    async fn add_finalizer(
        &self,
        key: &ObjectKey,
        obj: &K,
        f: &str,
        started: Instant,
    ) -> Option<Arc<K>> {
        let writer = crate::writes::Writer::new(&self.name, key);
        match finalizer::add(
            &self.api_for(obj),
            &self.ty,
            &self.wiring,
            obj,
            f,
            Some(writer),
        )
        .await
        {
            Ok(Some(updated)) => Some(updated),
            Ok(None) => {
                tracing::debug!(
                    "object deleted before its finalizer could be added; nothing to do"
                );
                self.retries.forget(key);
                None
            }
            Err(error) => {
                if error.is_stale_cache() {
                    // The object changed (finalizers) or was replaced (UID) since it was cached.
                    tracing::debug!(error = %crate::text::concise(&error), "object changed since it was cached; adding the finalizer again later");
                } else {
                    let text = crate::text::concise(&error);
                    tracing::warn!(error = %text, "adding the finalizer failed; retrying");
                }
                self.metric(ReconcileResult::Error, started.elapsed());
                self.retry(key, obj, &error);
                None
            }
        }
    }

    /// A failed finalizer write: retried like a failed reconcile.
    fn retry(&self, key: &ObjectKey, obj: &K, error: &finalizer::FinalizerError) {
        if let Scheduled::Exhausted(attempts) =
            self.retries.next(Next::RateLimited, key, Some(error))
        {
            self.exhausted(&Arc::new(obj.clone()), attempts, Some(error));
        }
    }

    fn metric(&self, result: ReconcileResult, took: Duration) {
        self.config.metrics.reconciled(&self.name, result, took);
    }

    /// Runs a reconcile or cleanup future, catching panics and applying the timeout.
    async fn guarded<F>(&self, fut: F) -> Outcome<R::Error>
    where
        F: Future<Output = Result<Action, R::Error>>,
    {
        self.config.metrics.active_workers(&self.name, 1);
        let caught = AssertUnwindSafe(fut).catch_unwind();
        let outcome = match self.config.reconcile_timeout {
            Some(limit) => match tokio::time::timeout(limit, caught).await {
                Ok(result) => {
                    result.map_or_else(|p| Outcome::Panicked(panic_message(&p)), Outcome::Finished)
                }
                Err(_) => Outcome::TimedOut,
            },
            None => caught
                .await
                .map_or_else(|p| Outcome::Panicked(panic_message(&p)), Outcome::Finished),
        };
        self.config.metrics.active_workers(&self.name, -1);
        outcome
    }

    fn api_for(&self, obj: &K) -> Api<K> {
        self.ty
            .api(self.wiring.client(), obj.meta().namespace.as_deref())
    }

    fn finalized(&self) -> std::sync::MutexGuard<'_, finalizer::Finalized> {
        self.finalized.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stage(&self, uid: &str) -> finalizer::Stage {
        self.finalized().stage(uid)
    }
}

pub(crate) fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned())
}

/// A panicked reconcile, as the retry policy sees it.
#[derive(Debug, thiserror::Error)]
#[error("the reconcile panicked: {0}")]
struct Panicked(String);

/// A reconcile that ran past its timeout, as the retry policy sees it.
#[derive(Debug, thiserror::Error)]
#[error("the reconcile timed out")]
struct TimedOut;
