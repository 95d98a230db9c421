//! The sharder: under a Lease of its own (`<group>-sharder`), one replica of the group watches
//! the members' Leases and the sharded objects' metadata, and writes [`plan`]'s moves as label
//! patches guarded by each object's `resourceVersion`.
//!
//! Its writes go through a client fenced by *its* Lease: a sharder frozen past its renew
//! deadline sees every Lease as stale when it thaws, and would move everything — the fence
//! refuses those writes, and by then another replica has taken the sharder Lease.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DynamicObject, ListParams, PartialObjectMeta, Patch, PatchParams};
use kube::{Api, Client};
use prometheus::proto::MetricFamily;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::informer::{Informer, InformerConfig};
use crate::leader::{Gate, LeaderElector, fenced};
use crate::runner::Runnable;
use crate::scope::KindType;
use crate::store::MemoryStore;
use crate::{BoxError, ObjectKey};

use super::members::{Listing, LiveMembers};
use super::membership::{MEMBER_OF_LABEL, Membership};
use super::metrics::ShardMetrics;
use super::plan::{Move, Placement, plan};
use super::ring::Ring;

/// Patches that may be in flight at once.
const CONCURRENT_PATCHES: usize = 16;

/// How often the sharder looks at every object even when the members did not change.
const FULL_PASS_EVERY: Duration = Duration::from_secs(60);

/// How many times in a row a move refused for a conflict is planned again, at once, from the
/// object as the apiserver has it: an object that keeps changing would otherwise lose the race
/// against its informer pass after pass.
const MOVE_ATTEMPTS: usize = 4;

/// After how many of its lease durations without a change a member's Lease that is not live is
/// deleted.
const DEPARTED_AFTER: u32 = 10;

/// One object of a sharded kind as the sharder sees it.
pub(crate) struct Placed {
    pub(crate) key: ObjectKey,
    pub(crate) resource_version: String,
    pub(crate) owner: Option<String>,
    pub(crate) draining: bool,
}

/// A sharded kind, type-erased for the sharder.
pub(crate) trait ShardedKind: Send + Sync {
    /// The kind's plural (for logs and metrics).
    fn plural(&self) -> String;
    /// Starts the kind's informer, and wakes `notify` at each change of its objects, until
    /// `stop`.
    fn start(&self, notify: Arc<Notify>, stop: CancellationToken);
    /// Waits until the kind's informer has listed its objects.
    fn synced(&self) -> BoxFuture<'_, ()>;
    /// Where each object is (all of them), forgetting the changed ones.
    fn placements<'a>(&'a self, membership: &'a Membership) -> BoxFuture<'a, Vec<Placed>>;
    /// Where the objects changed since the last call are (those deleted meanwhile left out).
    fn changed<'a>(&'a self, membership: &'a Membership) -> BoxFuture<'a, Vec<Placed>>;
    /// Marks `key` as changed (a move that failed is planned again at the next pass).
    fn touch(&self, key: ObjectKey);
    /// Where the object is now, read from the apiserver (`None`: gone).
    fn fetch<'a>(
        &'a self,
        key: &'a ObjectKey,
        membership: &'a Membership,
    ) -> BoxFuture<'a, Result<Option<Placed>, kube::Error>>;
    /// Merge-patches the object's metadata with `patch`.
    fn patch<'a>(
        &'a self,
        key: &'a ObjectKey,
        patch: serde_json::Value,
    ) -> BoxFuture<'a, Result<(), kube::Error>>;
}

/// How the sharder reads a sharded kind's objects: their metadata, whatever the kind.
type Meta = PartialObjectMeta<DynamicObject>;

/// [`ShardedKind`] for one kind: a metadata-only informer over all its objects. Not generic:
/// the kind is data (its [`ApiResource`]), so this code — an informer, its store and run loop,
/// the sharder's reads and patches — is compiled once in kubeforge rather than once per sharded
/// kind in the operator's crate.
pub(crate) struct Erased {
    informer: Arc<Informer<Meta>>,
    /// The kind's objects, read and patched one at a time.
    ty: KindType<DynamicObject>,
    reader: Client,
    writer: Client,
    /// The objects changed since the last pass over them.
    changed: Arc<std::sync::Mutex<HashSet<ObjectKey>>>,
}

/// Where `object` is.
fn placed(object: &Meta, membership: &Membership) -> Placed {
    let labels = object.metadata.labels.as_ref();
    Placed {
        key: ObjectKey::of(object),
        resource_version: object.metadata.resource_version.clone().unwrap_or_default(),
        owner: labels.and_then(|l| l.get(membership.owner_label()).cloned()),
        draining: membership.is_draining(&object.metadata),
    }
}

impl Erased {
    /// The objects of the kind `ty` in `namespace` (all namespaces: `None`) that `selected`'s selectors select, read with
    /// `reader`; of each object the informer keeps only its name, namespace,
    /// `resourceVersion` and the `labels` it is given (the shard labels): all the sharder
    /// reads.
    pub(crate) fn new(
        reader: Client,
        writer: Client,
        ty: KindType<DynamicObject>,
        namespace: Option<&str>,
        selected: InformerConfig,
        labels: [String; 2],
    ) -> Self {
        let listed = ty.erased::<Meta>();
        let api = listed.api(reader.clone(), namespace);
        let keep: crate::informer::Transform<Meta> = Arc::new(move |object: &mut Meta| {
            let meta = &mut object.metadata;
            let shard_labels = meta.labels.take().map(|mut all| {
                all.retain(|key, _| labels.contains(key));
                all
            });
            *meta = kube::api::ObjectMeta {
                name: meta.name.take(),
                namespace: meta.namespace.take(),
                resource_version: meta.resource_version.take(),
                labels: shard_labels.filter(|l| !l.is_empty()),
                ..kube::api::ObjectMeta::default()
            };
        });
        Self {
            informer: Arc::new(
                Informer::dynamic_metadata(api, listed, selected, Arc::new(MemoryStore::new()))
                    .transform(keep),
            ),
            ty,
            reader,
            writer,
            changed: Arc::default(),
        }
    }
}

impl ShardedKind for Erased {
    fn plural(&self) -> String {
        self.ty.dynamic_type().plural.clone()
    }

    fn start(&self, notify: Arc<Notify>, stop: CancellationToken) {
        let mut events = self.informer.subscribe();
        crate::task::spawn(Arc::clone(&self.informer).run(stop.clone()));
        let changed = Arc::clone(&self.changed);
        crate::task::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    event = events.recv() => match event {
                        Some(event) => {
                            let key = ObjectKey::of(&**event.object());
                            changed.lock().unwrap_or_else(|e| e.into_inner()).insert(key);
                            notify.notify_one();
                        }
                        None => return,
                    },
                }
            }
        });
    }

    fn changed<'a>(&'a self, membership: &'a Membership) -> BoxFuture<'a, Vec<Placed>> {
        async move {
            let keys = std::mem::take(&mut *self.changed.lock().unwrap_or_else(|e| e.into_inner()));
            let store = self.informer.store();
            let mut placements = Vec::with_capacity(keys.len());
            for key in keys {
                if let Ok(Some(object)) = store.get(&key).await {
                    placements.push(placed(&object, membership));
                }
            }
            placements
        }
        .boxed()
    }

    fn touch(&self, key: ObjectKey) {
        self.changed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key);
    }

    fn fetch<'a>(
        &'a self,
        key: &'a ObjectKey,
        membership: &'a Membership,
    ) -> BoxFuture<'a, Result<Option<Placed>, kube::Error>> {
        async move {
            let api = self.ty.api(self.reader.clone(), key.namespace.as_deref());
            let object = api.get_metadata_opt(&key.name).await?;
            Ok(object.map(|o| placed(&o, membership)))
        }
        .boxed()
    }

    fn synced(&self) -> BoxFuture<'_, ()> {
        self.informer.wait_for_sync().boxed()
    }

    fn placements<'a>(&'a self, membership: &'a Membership) -> BoxFuture<'a, Vec<Placed>> {
        async move {
            self.changed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
            let objects = self.informer.store().list().await.unwrap_or_default();
            // Objects being deleted move too: their new owner runs the cleanup a finalizer holds
            // them for.
            objects.iter().map(|o| placed(o, membership)).collect()
        }
        .boxed()
    }

    fn patch<'a>(
        &'a self,
        key: &'a ObjectKey,
        patch: serde_json::Value,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        async move {
            let api = self.ty.api(self.writer.clone(), key.namespace.as_deref());
            api.patch_metadata(&key.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(drop)
        }
        .boxed()
    }
}

/// The sharder's runnable (on every replica; it works only while it holds its Lease).
pub(crate) struct Sharder {
    pub(crate) membership: Arc<Membership>,
    pub(crate) elector: Arc<LeaderElector>,
    /// Reads (the Leases, the objects' metadata).
    pub(crate) client: Client,
    pub(crate) lease_namespace: String,
    pub(crate) lease_duration: Duration,
    pub(crate) retry_period: Duration,
    pub(crate) metrics: Arc<ShardMetrics>,
    /// What this replica observed of the members' Leases, kept from one term as sharder to the
    /// next: a member found gone stays gone when the sharder Lease is lost and taken back
    /// (see [`Sharder::observed`]).
    pub(crate) observed: std::sync::Mutex<LiveMembers>,
}

impl Sharder {
    /// What this replica last observed of the members' Leases, to start a term with. The
    /// observations stay true across a gap: a member is counted gone only by a listing sent a
    /// lease duration after its Lease's current state was first seen, and one that renewed
    /// meanwhile shows a new state, fresh again. So a sharder that lost its Lease (its renewals
    /// came late on a starved machine) and took it back seconds later does not count a dead
    /// member as live for another lease duration — giving it objects nobody reconciles — as a
    /// replica that never watched the Leases must.
    pub(super) fn observed(&self) -> LiveMembers {
        self.observed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps `members` for the next term (see [`Sharder::observed`]).
    pub(super) fn remember(&self, members: &LiveMembers) {
        members.clone_into(&mut self.observed.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Campaigns for the sharder Lease, shards while holding it, and campaigns again when it
    /// is lost (the replica's own work does not depend on it).
    async fn campaign(self: Arc<Self>, shutdown: CancellationToken) -> Result<(), BoxError> {
        let gate = Gate::open();
        let elector = Arc::clone(&self.elector);
        gate.install(move || elector.lease_valid());
        let writer = fenced(self.client.clone(), gate);
        while !shutdown.is_cancelled() {
            let this = Arc::clone(&self);
            let writer = writer.clone();
            let outcome = self
                .elector
                .run(shutdown.clone(), move |leading| this.lead(writer, leading))
                .await;
            if let Err(lost) = outcome {
                tracing::warn!(error = %lost, "sharder lease lost; campaigning again");
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    () = tokio::time::sleep(self.retry_period) => {}
                }
            }
        }
        Ok(())
    }

    async fn lead(self: Arc<Self>, writer: Client, leading: CancellationToken) {
        if let super::Mode::Ranges(key) = self.membership.mode() {
            return self.lead_ranges(key, writer, leading).await;
        }
        tracing::info!(group = %self.membership.group(), "sharding");
        let notify = Arc::new(Notify::new());
        let mut kinds: Vec<Arc<dyn ShardedKind>> = Vec::new();
        self.add_kinds(&mut kinds, &writer, &notify, &leading);
        let synced = futures::future::join_all(kinds.iter().map(|k| k.synced()));
        tokio::select! {
            () = leading.cancelled() => return,
            _ = synced => {}
        }
        let mut pass = Pass {
            members: self.observed(),
            ..Pass::default()
        };
        // Members started together: let their Leases appear before the first assignment (the
        // informers' first events do not cut this short).
        tokio::select! {
            () = leading.cancelled() => return,
            () = tokio::time::sleep(self.retry_period) => {}
        }
        let mut wait = Duration::ZERO;
        let mut took = Duration::ZERO;
        let mut listed = true;
        let mut left = false;
        loop {
            // A member's Lease may expire between two listings: list again right then, so that
            // its objects move a lease duration after its last renewal was seen (not after a
            // failed listing: that waits for the retry period).
            let expiry = match pass.members.next_expiry() {
                Some(at) if listed => at,
                _ => Instant::now() + wait,
            };
            if left {
                // Moves the last pass had no time for: planned again at once, from the objects
                // as the informer has them now.
                if leading.is_cancelled() {
                    return;
                }
            } else {
                tokio::select! {
                    () = leading.cancelled() => return,
                    () = notify.notified() => {
                        // Let a burst of events settle into one pass; a large pass spaces the
                        // next ones out (an update storm must not keep the sharder planning),
                        // by at most a retry period (a change is planned within one).
                        let settle =
                            Duration::from_millis(50).max(took * 4).min(self.retry_period);
                        tokio::select! {
                            () = leading.cancelled() => return,
                            () = tokio::time::sleep(settle) => {}
                        }
                    }
                    () = tokio::time::sleep(wait) => {}
                    () = tokio::time::sleep_until(expiry) => {}
                }
            }
            wait = self.retry_period;
            // Controllers started later (following their CRD) register their kinds then.
            self.add_kinds(&mut kinds, &writer, &notify, &leading);
            let started = Instant::now();
            let outcome = self.pass(&kinds, &mut pass, &writer).await;
            listed = outcome.is_ok();
            left = outcome.as_ref().is_ok_and(|left| *left);
            if let Err(error) = outcome {
                // Without a fresh view of the Leases nobody may be declared gone: skip the pass.
                tracing::warn!(error = %crate::text::concise(&error), "listing the members' leases failed; sharding paused");
            }
            took = started.elapsed();
        }
    }

    /// Adds, and starts, the views of the kinds registered since the last call (the registry
    /// only grows).
    fn add_kinds(
        &self,
        kinds: &mut Vec<Arc<dyn ShardedKind>>,
        writer: &Client,
        notify: &Arc<Notify>,
        leading: &CancellationToken,
    ) {
        for factory in self.membership.kinds().iter().skip(kinds.len()) {
            let kind = factory(self.client.clone(), writer.clone());
            kind.start(Arc::clone(notify), leading.clone());
            kinds.push(kind);
        }
    }

    /// One planning pass over every sharded kind; whether moves were left for the next one (a
    /// pass starts moves for a retry period at most, see [`Sharder::place`]).
    async fn pass(
        &self,
        kinds: &[Arc<dyn ShardedKind>],
        state: &mut Pass,
        writer: &Client,
    ) -> Result<bool, kube::Error> {
        // The Leases are listed once a retry period, and as soon as a listing could show a
        // member gone; in between, passes (after object events) use the members seen then.
        let now = Instant::now();
        let fresh = state
            .listed_at
            .is_some_and(|sent| now.saturating_duration_since(sent) < self.retry_period)
            && state.members.next_expiry().is_none_or(|at| at > now);
        if !fresh {
            let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.lease_namespace);
            let selector = format!("{MEMBER_OF_LABEL}={}", self.membership.group());
            let sent = Instant::now();
            let list = leases
                .list(&ListParams::default().labels(&selector))
                .await?;
            let listing = Listing {
                sent,
                received: Instant::now(),
            };
            state.listed_at = Some(sent);
            state.round_trip = listing.received - listing.sent;
            state
                .members
                .observe(&list.items, listing, self.lease_duration);
            self.remember(&state.members);
            self.forget_departed(&state.members, writer).await;
        }
        let live = state.members.live();
        self.metrics.set_live(live.len());
        let ring = Ring::new(live.iter().cloned());
        // A change of the members moves objects nobody touched: look at all of them then (and
        // every full-pass period, in case anything was missed); otherwise at the changed ones.
        let full = state.last_live.as_ref() != Some(&live)
            || state
                .last_full
                .is_none_or(|at| at.elapsed() >= FULL_PASS_EVERY);
        if full {
            state.last_full = Some(Instant::now());
        }
        state.kinds.resize_with(kinds.len(), KindMoves::default);
        // Moves start for a retry period, or for four round trips of the last listing where
        // the apiserver answers slower than that: each round of moves waits for its answers,
        // and a pass that only had time for one would spend most of its time waiting.
        let window = self.retry_period.max(state.round_trip * 4);
        let mut left = false;
        for (kind, moves) in kinds.iter().zip(&mut state.kinds) {
            let placed = if full {
                kind.placements(&self.membership).await
            } else {
                kind.changed(&self.membership).await
            };
            left |= self
                .place(kind.as_ref(), &placed, full, (&ring, &live), moves, window)
                .await;
        }
        state.last_live = Some(live);
        Ok(left)
    }

    /// Plans and applies the moves of `placed`, objects of `kind` (all of them when `full`), by
    /// the ring over the live members; whether some were left for the next pass.
    ///
    /// Assignments go first (an object without a live owner is reconciled by nobody), then
    /// undrains, then drains. Moves start, and conflicts are retried, for `window` (the first
    /// [`CONCURRENT_PATCHES`] moves start whenever it ends: each pass makes progress, however
    /// late the runtime runs); the rest are left to the next pass, planned at once from the
    /// objects as the informer has them then. Applied all in one pass, a hundred moves took
    /// 17–30 s on a loaded apiserver, most refused at least once because the object had changed
    /// since the pass began; meanwhile the drains the owners acknowledged waited for the pass to
    /// end before they were assigned.
    async fn place(
        &self,
        kind: &dyn ShardedKind,
        placed: &[Placed],
        full: bool,
        (ring, live): (&Ring, &HashSet<String>),
        state: &mut KindMoves,
        window: Duration,
    ) -> bool {
        self.observe_drains(placed, state);
        // Objects whose last move has not reached the informer yet wait for it (an object
        // missing from a full pass is gone).
        let current: HashMap<&ObjectKey, &str> = placed
            .iter()
            .map(|p| (&p.key, p.resource_version.as_str()))
            .collect();
        state.pending.retain(|key, rv| match current.get(key) {
            Some(now) => now == rv,
            None => !full,
        });
        let by_key: HashMap<String, &Placed> = placed
            .iter()
            .filter(|p| !state.pending.contains_key(&p.key))
            .map(|p| (p.key.to_string(), p))
            .collect();
        let placements: Vec<Placement> = by_key
            .iter()
            .map(|(key, p)| Placement {
                key: key.clone(),
                owner: p.owner.clone(),
                draining: p.draining,
            })
            .collect();
        let mut moves = plan(&placements, ring, live);
        if moves.is_empty() {
            return false;
        }
        moves.sort_by_key(urgency);
        tracing::debug!(kind = %kind.plural(), moves = moves.len(), live = live.len(), full, "sharding moves");
        let steps: Vec<(Move, ObjectKey, String)> = moves
            .into_iter()
            .filter_map(|step| {
                let key = match &step {
                    Move::Assign { key, .. } | Move::Drain { key, .. } | Move::Undrain { key } => {
                        key
                    }
                };
                let placed = by_key.get(key)?;
                Some((step, placed.key.clone(), placed.resource_version.clone()))
            })
            .collect();
        let deadline = Instant::now() + window;
        let applied: Vec<_> = futures::stream::iter(steps.into_iter().enumerate())
            .map(|(i, step)| {
                let first = i < CONCURRENT_PATCHES;
                self.apply(kind, step, (ring, live), (deadline, first))
            })
            .buffer_unordered(CONCURRENT_PATCHES)
            .collect()
            .await;
        let mut left = false;
        for outcome in applied {
            match outcome {
                Applied::Moved(key, rv, drained) => {
                    if drained {
                        state.drains.insert(key.clone(), Instant::now());
                    }
                    state.pending.insert(key, rv);
                }
                Applied::Left => left = true,
                Applied::Not => {}
            }
        }
        left
    }

    /// Deletes the Leases of members gone for [`DEPARTED_AFTER`] lease durations (released at a
    /// clean shutdown, or never renewed again): replicas of a Deployment get new identities, and
    /// their Leases would pile up. Guarded by the `resourceVersion` seen, so a member that came
    /// back meanwhile keeps its Lease.
    pub(super) async fn forget_departed(&self, members: &LiveMembers, writer: &Client) {
        let leases: Api<Lease> = Api::namespaced(writer.clone(), &self.lease_namespace);
        for (name, rv) in members.departed(DEPARTED_AFTER) {
            let params = kube::api::DeleteParams {
                preconditions: Some(kube::api::Preconditions {
                    resource_version: Some(rv),
                    uid: None,
                }),
                ..kube::api::DeleteParams::default()
            };
            match leases.delete(&name, &params).await {
                Ok(_) => {
                    tracing::info!(lease = %name, "deleted the Lease of a departed shard member")
                }
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(error) => {
                    tracing::debug!(lease = %name, error = %crate::text::concise(&error), "deleting a departed member's Lease failed");
                }
            }
        }
    }

    /// Carries out one move, unless `deadline` has passed and it is not one of the `first`
    /// (then it is left to the next pass). A move refused for a conflict (the object changed
    /// since the informer saw it — usually not its labels) is planned again at once from the
    /// object as the apiserver has it now, up to [`MOVE_ATTEMPTS`] times and until `deadline`,
    /// then left to the next pass.
    async fn apply(
        &self,
        kind: &dyn ShardedKind,
        (mut step, key, mut rv): (Move, ObjectKey, String),
        (ring, live): (&Ring, &HashSet<String>),
        (deadline, first): (Instant, bool),
    ) -> Applied {
        if !first && Instant::now() >= deadline {
            kind.touch(key);
            return Applied::Left;
        }
        for attempt in 1..=MOVE_ATTEMPTS {
            // Retried within the pass's window only: a retry after it would hold the pass up.
            let retry = || attempt < MOVE_ATTEMPTS && Instant::now() < deadline;
            let error = match self.patch(kind, &step, &key, &rv).await {
                Ok(what) => return Applied::Moved(key, rv, what == "drain"),
                // Gone meanwhile: nothing to move.
                Err(kube::Error::Api(e)) if e.code == 404 => return Applied::Not,
                Err(kube::Error::Api(e)) if e.code == 409 && retry() => {
                    match kind.fetch(&key, &self.membership).await {
                        Ok(Some(_)) if !retry() => {
                            kind.touch(key);
                            return Applied::Left;
                        }
                        Ok(Some(now)) => {
                            let placement = Placement {
                                key: key.to_string(),
                                owner: now.owner,
                                draining: now.draining,
                            };
                            // Nothing left to do (moved, or acknowledged, meanwhile): the
                            // object's event brings it back to a pass.
                            let Some(next) = plan(&[placement], ring, live).pop() else {
                                return Applied::Not;
                            };
                            step = next;
                            rv = now.resource_version;
                            continue;
                        }
                        Ok(None) => return Applied::Not,
                        Err(error) => error,
                    }
                }
                Err(error) => error,
            };
            kind.touch(key.clone());
            match &error {
                kube::Error::Api(e) if e.code == 409 => {
                    tracing::debug!(%key, ?step, attempts = attempt, "sharding move kept conflicting; planned again at the next pass");
                    return Applied::Left;
                }
                _ => {
                    tracing::warn!(%key, ?step, error = %crate::text::concise(&error), "sharding move failed");
                }
            }
            return Applied::Not;
        }
        Applied::Not
    }

    /// One label patch of `step`, guarded by `rv`: what kind of move it was.
    async fn patch(
        &self,
        kind: &dyn ShardedKind,
        step: &Move,
        key: &ObjectKey,
        rv: &str,
    ) -> Result<&'static str, kube::Error> {
        let (owner, drain) = (self.membership.owner_label(), self.membership.drain_label());
        let (labels, what) = match step {
            Move::Assign { to, .. } => (serde_json::json!({ owner: to, drain: null }), "assign"),
            Move::Drain { .. } => (serde_json::json!({ drain: "true" }), "drain"),
            Move::Undrain { .. } => (serde_json::json!({ drain: null }), "undrain"),
        };
        let patch = serde_json::json!({ "metadata": { "resourceVersion": rv, "labels": labels } });
        kind.patch(key, patch).await?;
        tracing::debug!(%key, ?step, "sharding move applied");
        self.metrics.moved(what);
        Ok(what)
    }

    /// Drain time: from the drain mark to the object seen without an owner (or back with one).
    fn observe_drains(&self, placed: &[Placed], state: &mut KindMoves) {
        if state.drains.is_empty() {
            return;
        }
        for p in placed {
            if !p.draining
                && let Some(since) = state.drains.remove(&p.key)
            {
                self.metrics.drained(since.elapsed());
            }
        }
    }
}

/// What became of one move.
enum Applied {
    /// Patched: the object, the resourceVersion the move was made from, whether it was a
    /// drain.
    Moved(ObjectKey, String, bool),
    /// Left to the next pass (no time left in this one, or it kept conflicting).
    Left,
    /// Nothing to do (any more), or failed (planned again at the next pass).
    Not,
}

/// The order moves are made in: assignments first (an object without a live owner is
/// reconciled by nobody until it has one), then undrains (the owner keeps it), then drains
/// (the object is served meanwhile).
fn urgency(step: &Move) -> u8 {
    match step {
        Move::Assign { .. } => 0,
        Move::Undrain { .. } => 1,
        Move::Drain { .. } => 2,
    }
}

/// What the sharder carries from one pass to the next.
#[derive(Default)]
struct Pass {
    members: LiveMembers,
    /// The live members of the last pass.
    last_live: Option<HashSet<String>>,
    /// When the last pass over every object started.
    last_full: Option<Instant>,
    /// When the last listing of the members' Leases was sent.
    listed_at: Option<Instant>,
    /// How long that listing took to come back.
    round_trip: Duration,
    /// Per sharded kind, in the membership's registration order.
    kinds: Vec<KindMoves>,
}

/// The moves in progress on the objects of one kind.
#[derive(Default)]
struct KindMoves {
    /// Object → the resourceVersion a move was made from, until the informer shows a newer one.
    pending: HashMap<ObjectKey, String>,
    /// Drains in progress and when they were asked for.
    drains: HashMap<ObjectKey, Instant>,
}

impl Runnable for Arc<Sharder> {
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Arc::clone(self).campaign(shutdown).boxed()
    }

    fn metrics(&self) -> Vec<MetricFamily> {
        self.metrics.gather(&self.membership)
    }

    fn needs_leader_election(&self) -> bool {
        false
    }
}

impl Debug for Sharder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharder")
            .field("membership", &self.membership)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A sharded kind whose patches and reads each take `took` (on tokio's paused clock); with
    /// `conflicts`, each object's first patch is refused for a conflict, the others succeed. It
    /// records when each patch started and what it did, and the keys touched.
    #[derive(Default)]
    struct Slow {
        took: Duration,
        conflicts: bool,
        patched: Mutex<Vec<(Instant, &'static str)>>,
        refused: Mutex<HashSet<ObjectKey>>,
        touched: Mutex<Vec<ObjectKey>>,
    }

    impl ShardedKind for Slow {
        fn plural(&self) -> String {
            "things".to_owned()
        }
        fn start(&self, _: Arc<Notify>, _: CancellationToken) {}
        fn synced(&self) -> BoxFuture<'_, ()> {
            async {}.boxed()
        }
        fn placements<'a>(&'a self, _: &'a Membership) -> BoxFuture<'a, Vec<Placed>> {
            async { Vec::new() }.boxed()
        }
        fn changed<'a>(&'a self, _: &'a Membership) -> BoxFuture<'a, Vec<Placed>> {
            async { Vec::new() }.boxed()
        }
        fn touch(&self, key: ObjectKey) {
            self.touched.lock().unwrap().push(key);
        }
        fn fetch<'a>(
            &'a self,
            key: &'a ObjectKey,
            _: &'a Membership,
        ) -> BoxFuture<'a, Result<Option<Placed>, kube::Error>> {
            async move {
                tokio::time::sleep(self.took).await;
                let mut now = object(&key.name, None);
                now.resource_version = "2".to_owned();
                Ok(Some(now))
            }
            .boxed()
        }
        fn patch<'a>(
            &'a self,
            key: &'a ObjectKey,
            patch: serde_json::Value,
        ) -> BoxFuture<'a, Result<(), kube::Error>> {
            async move {
                let labels = &patch["metadata"]["labels"];
                let what = if labels["drain.shard.kubeforge.dev/g"] == "true" {
                    "drain"
                } else {
                    "assign"
                };
                self.patched.lock().unwrap().push((Instant::now(), what));
                tokio::time::sleep(self.took).await;
                if self.conflicts && self.refused.lock().unwrap().insert(key.clone()) {
                    let status = kube::core::Status {
                        code: 409,
                        reason: "Conflict".to_owned(),
                        ..kube::core::Status::default()
                    };
                    return Err(kube::Error::Api(status.boxed()));
                }
                Ok(())
            }
            .boxed()
        }
    }

    fn sharder() -> Sharder {
        // Never contacted: `place` writes through the kind.
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("static url"));
        let client = Client::try_from(config).expect("offline client");
        let election = crate::leader::LeaderElectionConfig::new("g-sharder", "ns").identity("a");
        Sharder {
            membership: Arc::new(Membership::new("g", "a")),
            elector: Arc::new(LeaderElector::new(client.clone(), election).expect("valid")),
            client,
            lease_namespace: "ns".to_owned(),
            lease_duration: Duration::from_secs(6),
            retry_period: Duration::from_secs(1),
            metrics: Arc::new(ShardMetrics::new("g")),
            observed: std::sync::Mutex::default(),
        }
    }

    fn object(name: &str, owner: Option<&str>) -> Placed {
        Placed {
            key: ObjectKey::namespaced("ns", name),
            resource_version: "1".to_owned(),
            owner: owner.map(str::to_owned),
            draining: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_pass_should_assign_first_and_leave_the_moves_it_has_no_time_for() {
        let sharder = sharder();
        let kind = Slow {
            took: Duration::from_millis(300),
            ..Slow::default()
        };
        // `b` joined: about half of `a`'s 200 objects are to be drained; 20 new objects have
        // no owner yet, listed last.
        let live: HashSet<String> = ["a".to_owned(), "b".to_owned()].into();
        let ring = Ring::new(live.iter().cloned());
        let mut placed: Vec<Placed> = (0..200)
            .map(|i| object(&format!("o{i}"), Some("a")))
            .collect();
        placed.extend((0..20).map(|i| object(&format!("new{i}"), None)));
        let drains = placed
            .iter()
            .filter(|p| p.owner.is_some() && ring.owner(&p.key.to_string()) == Some("b"))
            .count();
        assert!(drains > 64, "{drains}");
        let started = Instant::now();
        let deadline = started + sharder.retry_period;
        let mut moves = KindMoves::default();
        let left = sharder
            .place(
                &kind,
                &placed,
                true,
                (&ring, &live),
                &mut moves,
                sharder.retry_period,
            )
            .await;
        let patched = kind.patched.into_inner().unwrap();
        let touched = kind.touched.into_inner().unwrap();
        // Every assignment before any drain.
        let kinds: Vec<&str> = patched.iter().map(|(_, what)| *what).collect();
        assert_eq!(&kinds[..20], &["assign"; 20][..], "{kinds:?}");
        assert!(kinds[20..].iter().all(|k| *k == "drain"), "{kinds:?}");
        // None started after the deadline: 16 at a time, 300 ms each, for a second.
        assert!(patched.iter().all(|(at, _)| *at < deadline));
        assert_eq!(patched.len(), 64);
        // The rest is left to the next pass, which comes at once.
        assert!(left);
        assert_eq!(touched.len(), 20 + drains - patched.len());
        assert_eq!(moves.pending.len(), patched.len());
        assert!(started.elapsed() < Duration::from_millis(1300));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pass_should_make_progress_however_slow_its_patches() {
        // Each patch takes longer than the whole retry period: the first round still starts.
        let sharder = sharder();
        let kind = Slow {
            took: Duration::from_millis(1500),
            ..Slow::default()
        };
        let live: HashSet<String> = ["a".to_owned()].into();
        let ring = Ring::new(live.iter().cloned());
        let placed: Vec<Placed> = (0..40).map(|i| object(&format!("o{i}"), None)).collect();
        let mut moves = KindMoves::default();
        let left = sharder
            .place(
                &kind,
                &placed,
                true,
                (&ring, &live),
                &mut moves,
                sharder.retry_period,
            )
            .await;
        assert!(left);
        assert_eq!(kind.patched.into_inner().unwrap().len(), CONCURRENT_PATCHES);
        assert_eq!(
            kind.touched.into_inner().unwrap().len(),
            40 - CONCURRENT_PATCHES
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_conflict_should_be_retried_within_the_window_and_left_to_the_next_pass_after_it() {
        let sharder = sharder();
        let live: HashSet<String> = ["a".to_owned()].into();
        let ring = Ring::new(live.iter().cloned());
        let placed: Vec<Placed> = (0..40).map(|i| object(&format!("o{i}"), None)).collect();
        let window = sharder.retry_period;
        // Refused at 0.3 s, read again by 0.6 s: patched again within the window, done at 0.9 s;
        // the next 16 start then, and are refused at 1.2 s, after the window: left.
        let quick = Slow {
            took: Duration::from_millis(300),
            conflicts: true,
            ..Slow::default()
        };
        let mut moves = KindMoves::default();
        let left = sharder
            .place(&quick, &placed, true, (&ring, &live), &mut moves, window)
            .await;
        assert!(left);
        assert_eq!(quick.patched.into_inner().unwrap().len(), 16 + 16 + 16);
        assert_eq!(moves.pending.len(), 16);
        assert_eq!(quick.touched.into_inner().unwrap().len(), 40 - 16);
        // Refused at 0.6 s, read again by 1.2 s — after the window: left for the next pass,
        // which plans it from the object as the informer has it then.
        let slow = Slow {
            took: Duration::from_millis(600),
            conflicts: true,
            ..Slow::default()
        };
        let mut moves = KindMoves::default();
        let started = Instant::now();
        let left = sharder
            .place(&slow, &placed, true, (&ring, &live), &mut moves, window)
            .await;
        assert!(left);
        assert_eq!(slow.patched.into_inner().unwrap().len(), CONCURRENT_PATCHES);
        assert!(moves.pending.is_empty());
        assert_eq!(slow.touched.into_inner().unwrap().len(), 40);
        assert!(started.elapsed() <= Duration::from_millis(1200));
    }
}
