//! Dependents: the children of a kind declared as desired-state functions, applied by the
//! framework, instead of built, applied and read back by hand in `reconcile`.
//!
//! A [`Dependent`] names one child: a function that builds it from the primary object, and
//! options — [`create_only`](Dependent::create_only) (made once, never updated: a generated
//! password), [`when`](Dependent::when) (an activation condition: the child exists only while
//! it holds, and is pruned — deleted, unless its [`Deletion`] policy says otherwise — when it
//! turns false), [`precondition`](Dependent::precondition) (the
//! child is left as it is until it holds), [`ready`](Dependent::ready) (built-ins for the
//! workload kinds in [`ready`]) and [`depends_on`](Dependent::depends_on) (reconciled only once
//! those are ready). A dependent can also be a collection of children of one kind:
//! [`Dependent::many`] (a function returning `Vec<Child>`) or [`Dependent::for_each`] (one
//! child per item of a list: per target namespace, say). Each child of a collection is applied
//! on its own, those the dependent made earlier and no longer builds are pruned (found by the
//! owner reference and the [`DEPENDENT_LABEL`]), and each child's state is in
//! [`Reconciled::items`]. A child never overwrites an object of its name that the primary does
//! not own: that is [`State::Conflict`], not an error — the primary is checked again after
//! [`CONFLICT_RECHECK`] ([`Reconciled::action`]).
//!
//! What pruning does, and what happens to the children when the primary is deleted, is a
//! [`Deletion`] policy per dependent ([`Dependent::prune`], [`Dependent::on_owner_delete`]):
//! deleted, released (`Orphan`: owner reference and label removed, [`RELEASED_ANNOTATION`]
//! added, the object kept; only the primary that released it takes it back) or kept. The kinds
//! that hold other objects (Namespace, PersistentVolumeClaim, PersistentVolume) are released by
//! default, and so is a pruned object others hold with finalizers; deleting them is an explicit
//! opt-in. Releasing children on owner deletion needs them released before the garbage
//! collector sees the owner gone: the primary carries [`FINALIZER`] while a dependent does so,
//! and the controller's worker reconciles a primary being deleted while it carries it.
//! [`Dependents`] holds a controller's dependents in an order that respects `depends_on` and
//! reconciles them:
//!
//! 1. each dependent in order: skipped while one it depends on is not ready; pruned by its
//!    policy while its activation condition is false (and counted as deleting until it is gone
//!    from the cache); left alone while its precondition is false; otherwise built and, **only
//!    if the stored child does not already hold every field the desired one sets** (see
//!    `matcher`) and is not being deleted (then it is [`State::Terminating`], not ready),
//!    server-side applied with a controller owner reference as the field manager
//!    ([`DependentsBuilder::field_manager`], default the controller's name; a create-only one is
//!    created only when absent);
//! 2. a Normal `Created` event when one was created, a Warning `ApplyFailed` when writing one
//!    failed;
//! 3. with [`Dependents::run`], the primary's status: `Ready`, `Progressing` and `Degraded`
//!    conditions whose reasons name the first dependent that is not ready or failed, and
//!    `observedGeneration`, plus the caller's own fields — patched once, only when something
//!    changed (so the framework's own status write does not start another reconcile loop).
//!
//! Reads of the stored children come from the cache when the controller owns the kind with
//! full objects, from the apiserver otherwise.
//!
//! ```no_run
//! use std::sync::Arc;
//! use kubeforge::dependents::{Dependent, Dependents};
//! use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use kubeforge::prelude::*;
//!
//! struct Mirror;
//!
//! fn secret(_: &Mirror, cm: &ConfigMap, _: &Context<ConfigMap>) -> Secret {
//!     let mut secret = Secret::default();
//!     secret.metadata.name = Some(format!("{}-password", cm.name_any()));
//!     secret.string_data = Some([("password".to_owned(), "generated".to_owned())].into());
//!     secret
//! }
//!
//! fn copy(_: &Mirror, cm: &ConfigMap, _: &Context<ConfigMap>) -> ConfigMap {
//!     let mut copy = ConfigMap::default();
//!     copy.metadata.name = Some(format!("{}-copy", cm.name_any()));
//!     copy.data = cm.data.clone();
//!     copy
//! }
//!
//! # fn doc() -> Result<(), kubeforge::dependents::DependentsError> {
//! let dependents = Dependents::new()
//!     .with(Dependent::new("secret", secret).create_only())
//!     .with(Dependent::new("copy", copy).depends_on(&["secret"]))
//!     .build()?;
//! # let _: Dependents<ConfigMap, Mirror> = dependents;
//! # Ok(()) }
//! ```

mod child;
mod collection;
mod declare;
mod matcher;
mod policy;
pub mod ready;
mod single;

use std::any::Any;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::api::Patch;
use kube::core::object::HasStatus;
use serde::Serialize;

use crate::BoxError;
use crate::controller::{Action, Context, Kind};
use crate::crd::{Conditions, PROGRESSING, READY};
use crate::events::{EventType, Recorder};
use crate::scope::Scoped;

pub use child::DEPENDENT_LABEL;
pub use declare::{Dependent, Desired, DesiredMany, Items};
pub use policy::{Deletion, FINALIZER, RELEASED_ANNOTATION};
pub use ready::Readiness;

use declare::Desire;

/// The condition type that is true while writing a dependent fails.
pub const DEGRADED: &str = "Degraded";

/// Where a dependent stands after a reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Stored and ready.
    Ready,
    /// Stored, not ready yet.
    NotReady,
    /// Not reconciled: a dependent it depends on is not ready.
    Waiting {
        /// The first dependent it waits for.
        on: &'static str,
    },
    /// Not reconciled: its precondition does not hold.
    Blocked,
    /// Its activation condition is false and it does not exist.
    Inactive,
    /// No longer built (its activation condition is false, or a collection no longer builds
    /// it) and being deleted. A collection's child in this state does not hold the collection
    /// back: it is not wanted.
    Deleting,
    /// Wanted, but the stored object is being deleted (a `deletionTimestamp`, a Namespace in
    /// phase `Terminating`): not ready (what depends on it waits), nothing is written into it,
    /// and it is made again once it is gone.
    Terminating,
    /// Writing or reading it failed (the message).
    Failed(String),
    /// An object of its name exists that the primary does not own: left as it is (the message
    /// names it and its controller).
    Conflict(String),
}

impl State {
    /// Whether the dependent needs nothing more (ready, or inactive and gone).
    pub fn is_done(&self) -> bool {
        matches!(self, State::Ready | State::Inactive)
    }

    /// Whether it failed or conflicts with an object it does not own.
    pub fn is_failure(&self) -> bool {
        matches!(self, State::Failed(_) | State::Conflict(_))
    }
}

impl std::fmt::Display for State {
    /// How the state reads after a dependent's name: `ready`, `waits for secret`, the error.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            State::Ready => f.write_str("ready"),
            State::NotReady => f.write_str("not ready"),
            State::Waiting { on } => write!(f, "waits for {on}"),
            State::Blocked => f.write_str("precondition not met"),
            State::Inactive => f.write_str("inactive"),
            State::Deleting => f.write_str("being deleted"),
            State::Terminating => f.write_str("being deleted (made again once gone)"),
            State::Failed(e) | State::Conflict(e) => f.write_str(e),
        }
    }
}

/// One child of a collection after a reconcile.
pub struct Item {
    /// The item it was built for (`for_each`), or its namespace and name (`many`).
    pub item: String,
    /// Its namespace, when built.
    pub namespace: Option<String>,
    /// Its name, when built.
    pub name: Option<String>,
    /// Where it stands: [`State::Deleting`] for a child no longer wanted and being deleted.
    pub state: State,
    /// Whether this reconcile created it.
    pub created: bool,
    /// Whether it carries finalizers (others hold it).
    held: bool,
    object: Option<Arc<dyn Any + Send + Sync>>,
}

impl Item {
    /// Its stored object, if it exists and is of kind `K`.
    pub fn object<K: Send + Sync + 'static>(&self) -> Option<Arc<K>> {
        self.object.clone()?.downcast::<K>().ok()
    }
}

impl Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Item")
            .field("item", &self.item)
            .field("state", &self.state)
            .field("created", &self.created)
            .finish_non_exhaustive()
    }
}

/// One dependent's outcome.
pub struct Outcome {
    /// Its name.
    pub name: &'static str,
    /// Where it stands.
    pub state: State,
    /// Whether this reconcile created it.
    pub created: bool,
    /// Whether this reconcile wrote it (created, applied or deleted).
    pub written: bool,
    /// A collection's children, in the order built, then those being deleted.
    pub items: Vec<Item>,
    /// A collection's aggregate: which children are not ready, failed or conflict.
    summary: Option<String>,
    /// Whether a stored child carries finalizers (others hold it): released, not deleted, when
    /// the owner is deleted, unless the dependent says otherwise.
    held: bool,
    object: Option<Arc<dyn Any + Send + Sync>>,
    error: Option<BoxError>,
}

impl Outcome {
    fn new(name: &'static str, state: State) -> Self {
        Self {
            name,
            state,
            created: false,
            written: false,
            items: Vec::new(),
            summary: None,
            held: false,
            object: None,
            error: None,
        }
    }
}

impl Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outcome")
            .field("name", &self.name)
            .field("state", &self.state)
            .field("created", &self.created)
            .field("written", &self.written)
            .field("items", &self.items)
            .finish_non_exhaustive()
    }
}

/// What a reconcile of the dependents found and did, in reconcile order.
#[derive(Debug, Default)]
pub struct Reconciled {
    /// Each dependent's outcome, in the order they were reconciled.
    pub outcomes: Vec<Outcome>,
    /// When to look again: after the conflict recheck interval while a dependent (or a child)
    /// conflicts with an object the primary does not own.
    recheck: Option<Duration>,
    /// The primary is being deleted: its children were released or left to the garbage
    /// collector, nothing was applied.
    owner_deleted: bool,
}

impl Reconciled {
    /// The stored object of dependent `name`, if it exists and is of kind `K`.
    pub fn get<K: Send + Sync + 'static>(&self, name: &str) -> Option<Arc<K>> {
        let object = self.outcome(name)?.object.clone()?;
        object.downcast::<K>().ok()
    }

    /// The children of collection `name` (empty for a single dependent or an unknown name).
    pub fn items(&self, name: &str) -> &[Item] {
        self.outcome(name).map_or(&[], |o| o.items.as_slice())
    }

    /// The stored objects of collection `name` that are of kind `K`, in the order built.
    pub fn objects<K: Send + Sync + 'static>(&self, name: &str) -> Vec<Arc<K>> {
        self.items(name)
            .iter()
            .filter(|i| i.state != State::Deleting)
            .filter_map(Item::object)
            .collect()
    }

    /// Where dependent `name` stands.
    pub fn state(&self, name: &str) -> Option<&State> {
        self.outcome(name).map(|o| &o.state)
    }

    /// What the reconcile returns for the dependents: `RequeueAfter` the conflict recheck
    /// interval (see [`DependentsBuilder::conflict_recheck`]) while one conflicts with an object
    /// the primary does not own — a conflict is not an error, retrying with backoff cannot
    /// resolve it — else `Done`.
    pub fn action(&self) -> Action {
        self.recheck.map_or(Action::Done, Action::requeue_after)
    }

    /// Whether the primary is being deleted: nothing was applied, the children that orphan on
    /// owner deletion were released and [`FINALIZER`] removed. Nothing more is to be done.
    pub fn owner_deleted(&self) -> bool {
        self.owner_deleted
    }

    /// Whether every dependent is ready (or inactive and gone).
    pub fn all_ready(&self) -> bool {
        self.outcomes.iter().all(|o| o.state.is_done())
    }

    fn outcome(&self, name: &str) -> Option<&Outcome> {
        self.outcomes.iter().find(|o| o.name == name)
    }

    /// The `Ready`, `Progressing` and `Degraded` conditions this outcome implies: (type,
    /// status, reason, message). Reasons name the first dependent that failed or is not ready
    /// (`StatefulsetNotReady`, `SecretFailed`).
    pub fn conditions(&self) -> [(&'static str, bool, String, String); 3] {
        let failed = self.outcomes.iter().find(|o| o.state.is_failure());
        let pending: Vec<&Outcome> = self
            .outcomes
            .iter()
            .filter(|o| !o.state.is_done())
            .collect();
        let describe = |o: &Outcome| match (&o.state, &o.summary) {
            (_, Some(summary)) => format!("{}: {summary}", o.name),
            (state, None) => describe(o.name, state),
        };
        let message = pending
            .iter()
            .map(|o| describe(o))
            .collect::<Vec<_>>()
            .join("; ");
        let failure = |o: &Outcome| match o.state {
            State::Conflict(_) => format!("{}Conflict", camel(o.name)),
            _ => format!("{}Failed", camel(o.name)),
        };
        let ready = match pending.first() {
            None => (READY, true, "AllDependentsReady".to_owned(), String::new()),
            Some(first) => (
                READY,
                false,
                format!("{}NotReady", camel(first.name)),
                message.clone(),
            ),
        };
        let progressing = match (failed, pending.first()) {
            (Some(f), _) => (PROGRESSING, false, failure(f), message.clone()),
            (None, Some(first)) => (
                PROGRESSING,
                true,
                format!("{}NotReady", camel(first.name)),
                message.clone(),
            ),
            (None, None) => (PROGRESSING, false, "Complete".to_owned(), String::new()),
        };
        let degraded = match failed {
            Some(f) => (DEGRADED, true, failure(f), describe(f)),
            None => (DEGRADED, false, "NoFailures".to_owned(), String::new()),
        };
        [ready, progressing, degraded]
    }

    /// The first failure's error, taken out.
    fn take_error(&mut self) -> Option<(&'static str, BoxError)> {
        self.outcomes
            .iter_mut()
            .find_map(|o| o.error.take().map(|e| (o.name, e)))
    }
}

impl<K> Context<K> {
    /// The stored object of dependent `name` (declared in `#[controller(dependents(..))]`),
    /// for a `reconcile` that runs after the dependents: `None` before they ran, if it does not
    /// exist (inactive, waiting) or is not of kind `C`.
    pub fn dependent<C: Send + Sync + 'static>(&self, name: &str) -> Option<Arc<C>> {
        self.dependents()?.get(name)
    }

    /// What the dependents' reconcile found and did (`None` before they ran).
    pub fn dependents(&self) -> Option<&Reconciled> {
        self.dependents.get()?.downcast_ref()
    }

    #[doc(hidden)]
    pub fn __set_dependents(&self, reconciled: Reconciled) {
        let _ = self.dependents.set(Box::new(reconciled));
    }
}

/// The user's `action` after the dependents' `recheck` ([`Reconciled::action`]): the user's,
/// unless it is `Done` and the dependents want a recheck.
#[doc(hidden)]
pub fn __or_recheck(action: Action, recheck: Action) -> Action {
    match action {
        Action::Done => recheck,
        action => action,
    }
}

/// How a dependent (or one child of a collection) that is not done reads in a condition.
fn describe(name: &str, state: &State) -> String {
    match state {
        State::Waiting { .. } => format!("{name} {state}"),
        State::Deleting | State::Terminating | State::NotReady => format!("{name} is {state}"),
        _ => format!("{name}: {state}"),
    }
}

/// `snake_case` or `kebab-case` as `CamelCase` (a condition reason's form).
fn camel(name: &str) -> String {
    name.split(['_', '-'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// A status that carries the conditions and `observedGeneration` dependents maintain.
/// `#[kubeforge::schema]` implements it for a struct with the fields `conditions: Conditions`
/// and `observed_generation: Option<i64>`.
#[diagnostic::on_unimplemented(
    message = "the status `{Self}` has no `conditions` and `observed_generation` for dependents to maintain",
    note = "give the #[kubeforge::schema] status struct the fields `conditions: Conditions` and `observed_generation: Option<i64>`"
)]
pub trait ConditionsStatus {
    /// Its conditions.
    fn conditions(&mut self) -> &mut Conditions;
    /// Its `observedGeneration`.
    fn observed_generation(&mut self) -> &mut Option<i64>;
}

/// A mistake in how dependents are declared, or the failure of a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum DependentsError {
    /// Two dependents of one name.
    #[error("two dependents are named `{0}`")]
    Duplicate(&'static str),
    /// `depends_on` names no dependent.
    #[error("dependent `{dependent}` depends on `{on}`, which is not a dependent")]
    Unknown {
        /// The dependent declaring it.
        dependent: &'static str,
        /// The unknown name.
        on: &'static str,
    },
    /// `depends_on` goes round in a circle.
    #[error("dependents depend on each other in a cycle: {}", .0.join(" -> "))]
    Cycle(Vec<&'static str>),
    /// Writing or reading a dependent failed.
    #[error("dependent `{dependent}`: {source}")]
    Dependent {
        /// Its name.
        dependent: &'static str,
        /// The apiserver's error, or the desired-state function's.
        #[source]
        source: BoxError,
    },
    /// Keep on owner deletion: a child that keeps its owner reference is deleted by the garbage
    /// collector.
    #[error(
        "dependent `{0}`: `keep` applies to pruning only (a child that keeps its owner reference is deleted with its owner by the garbage collector); write `orphan`"
    )]
    KeepOnOwnerDelete(&'static str),
    /// Adding or removing [`FINALIZER`] on the primary failed.
    #[error("the dependents' finalizer: {0}")]
    Finalizer(#[source] BoxError),
    /// Patching the primary's status failed.
    #[error("status of the dependents: {}", crate::client::readable(.0))]
    Status(#[source] kube::Error),
}

/// How the dependents write: the recorder of their events and the field manager of their
/// applies.
#[derive(Clone, Copy)]
struct Writing<'a> {
    recorder: &'a Recorder,
    manager: &'a str,
}

/// One dependent with its kind erased.
trait Erased<P, C>: Send + Sync {
    fn name(&self) -> &'static str;
    fn depends_on(&self) -> &[&'static str];
    fn reconcile<'a>(
        &'a self,
        controller: &'a C,
        primary: &'a P,
        ctx: &'a Context<P>,
        writing: Writing<'a>,
        done: &'a Reconciled,
    ) -> BoxFuture<'a, Outcome>;
    /// Its policy when the owner is deleted (declared, or its kind's default).
    fn on_owner_delete(&self) -> Deletion;
    /// Whether the policy when the owner is deleted is the dependent's own.
    fn declares_on_owner_delete(&self) -> bool;
    /// Whether the policy when the owner is deleted was declared `keep`.
    fn keeps_on_owner_delete(&self) -> bool;
    /// Releases its children of `primary` (being deleted) whose policy when the owner is
    /// deleted is `orphan`; how many.
    fn release<'a>(
        &'a self,
        controller: &'a C,
        primary: &'a P,
        ctx: &'a Context<P>,
        manager: &'a str,
    ) -> BoxFuture<'a, Result<usize, BoxError>>;
}

/// A controller's dependents, in reconcile order. Build with [`Dependents::new`].
pub struct Dependents<P, C> {
    order: Vec<Box<dyn Erased<P, C>>>,
    recorder: OnceLock<Recorder>,
    settings: Settings,
}

/// The dependents being declared; [`build`](Self::build) orders and checks them.
pub struct DependentsBuilder<P, C> {
    declared: Vec<Box<dyn Erased<P, C>>>,
    settings: Settings,
}

/// How the dependents of a controller are written.
struct Settings {
    /// The field manager of the applies (`None`: the controller's name).
    field_manager: Option<String>,
    /// How long after a conflict the primary is checked again.
    conflict_recheck: Duration,
}

/// How long after a conflict with an object the primary does not own it is checked again,
/// unless [`DependentsBuilder::conflict_recheck`] says otherwise.
pub const CONFLICT_RECHECK: Duration = Duration::from_secs(30);

impl Default for Settings {
    fn default() -> Self {
        Self {
            field_manager: None,
            conflict_recheck: CONFLICT_RECHECK,
        }
    }
}

impl<P: Kind, C: Send + Sync + 'static> Dependents<P, C> {
    /// No dependents yet.
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> DependentsBuilder<P, C> {
        DependentsBuilder {
            declared: Vec::new(),
            settings: Settings::default(),
        }
    }

    /// The field manager of the dependents' applies: the one set with
    /// [`DependentsBuilder::field_manager`], else the controller's name.
    pub fn field_manager<'a>(&'a self, ctx: &'a Context<P>) -> &'a str {
        self.settings
            .field_manager
            .as_deref()
            .unwrap_or_else(|| ctx.controller_name())
    }

    /// Whether a dependent releases its children when the primary is deleted (the primary then
    /// carries [`FINALIZER`]).
    pub fn releases_on_owner_delete(&self) -> bool {
        self.order
            .iter()
            .any(|d| d.on_owner_delete() == Deletion::Orphan)
    }

    /// The dependents' names, in reconcile order.
    pub fn names(&self) -> Vec<&'static str> {
        self.order.iter().map(|d| d.name()).collect()
    }

    /// Reconciles every dependent, in order (see the module docs), without touching the
    /// primary's status. While a dependent releases its children on owner deletion (or once a
    /// child others hold with finalizers is seen, under a dependent with no policy of its own)
    /// the primary carries [`FINALIZER`] (added here, taken off only when the primary is being
    /// deleted); once the primary is being deleted, nothing
    /// is applied: those children are released, the finalizer removed, and
    /// [`Reconciled::owner_deleted`] is true.
    ///
    /// # Errors
    ///
    /// Adding or removing the finalizer, or releasing a child, failed.
    pub async fn reconcile(
        &self,
        controller: &C,
        primary: &P,
        ctx: &Context<P>,
    ) -> Result<Reconciled, DependentsError> {
        let manager = self.field_manager(ctx);
        let deleting = primary.meta().deletion_timestamp.is_some();
        let release = self.releases_on_owner_delete();
        if deleting {
            let mut reconciled = Reconciled {
                owner_deleted: true,
                ..Reconciled::default()
            };
            for dependent in &self.order {
                let mut outcome = Outcome::new(dependent.name(), State::Deleting);
                // Declared or by default `orphan`, or undeclared: each child by its own
                // finalizers.
                if dependent.on_owner_delete() == Deletion::Orphan
                    || !dependent.declares_on_owner_delete()
                {
                    let released = dependent
                        .release(controller, primary, ctx, manager)
                        .await
                        .map_err(|source| DependentsError::Dependent {
                            dependent: dependent.name(),
                            source,
                        })?;
                    outcome.written = released > 0;
                    outcome.state = State::Inactive;
                }
                reconciled.outcomes.push(outcome);
            }
            policy::finalizer(primary, ctx, false)
                .await
                .map_err(DependentsError::Finalizer)?;
            return Ok(reconciled);
        }
        // Added before any child is made, while a dependent releases on owner deletion; while
        // only a child others hold needs it, once that child is seen.
        let holds = primary
            .meta()
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER);
        if release && !holds {
            policy::finalizer(primary, ctx, true)
                .await
                .map_err(DependentsError::Finalizer)?;
        }
        let holds = holds || release;
        let recorder = self
            .recorder
            .get_or_init(|| Recorder::new(ctx.client(), ctx.controller_name()));
        let writing = Writing { recorder, manager };
        let mut reconciled = Reconciled::default();
        for dependent in &self.order {
            let outcome = dependent
                .reconcile(controller, primary, ctx, writing, &reconciled)
                .await;
            reconciled.outcomes.push(outcome);
        }
        let conflict = reconciled.outcomes.iter().any(|o| {
            matches!(o.state, State::Conflict(_))
                || o.items
                    .iter()
                    .any(|i| matches!(i.state, State::Conflict(_)))
        });
        reconciled.recheck = conflict.then_some(self.settings.conflict_recheck);
        let held = self
            .order
            .iter()
            .zip(&reconciled.outcomes)
            .any(|(d, o)| o.held && !d.declares_on_owner_delete());
        // Never taken off before the primary is deleted: a reconcile that did not reach a held
        // child (one it depends on not ready) does not say it is gone.
        if held && !holds {
            policy::finalizer(primary, ctx, true)
                .await
                .map_err(DependentsError::Finalizer)?;
        }
        Ok(reconciled)
    }

    /// Reconciles the dependents, then writes the primary's status: the conditions and
    /// `observedGeneration` (see [`Reconciled::conditions`]) and what `custom` sets, in one
    /// patch, only if anything changed.
    ///
    /// # Errors
    ///
    /// The first dependent that failed (after the status says so), or the status patch.
    pub async fn run(
        &self,
        controller: &C,
        primary: &P,
        ctx: &Context<P>,
        custom: impl FnOnce(&Reconciled, &mut P::Status),
    ) -> Result<Reconciled, DependentsError>
    where
        P: HasStatus<Status: ConditionsStatus + Clone + PartialEq + Default + Serialize>
            + crate::views::Writable,
    {
        let mut reconciled = self.reconcile(controller, primary, ctx).await?;
        if reconciled.owner_deleted {
            return Ok(reconciled);
        }
        let mut status = primary.status().cloned().unwrap_or_default();
        let before = status.clone();
        let generation = primary.meta().generation.unwrap_or(0);
        for (type_, holds, reason, message) in reconciled.conditions() {
            status
                .conditions()
                .mark(type_, holds, &reason, &message, generation);
        }
        *status.observed_generation() = Some(generation);
        custom(&reconciled, &mut status);
        if status != before {
            let patch = serde_json::json!({ "status": status });
            ctx.patch_status(&Patch::Merge(&patch))
                .await
                .map_err(DependentsError::Status)?;
        }
        match reconciled.take_error() {
            Some((dependent, source)) => Err(DependentsError::Dependent { dependent, source }),
            None => Ok(reconciled),
        }
    }
}

impl<P: Kind, C: Send + Sync + 'static> DependentsBuilder<P, C> {
    /// Declares `dependent` (a child kubeforge writes: never a read-only view).
    #[must_use]
    pub fn with<K: Kind + crate::views::Writable>(mut self, dependent: Dependent<P, C, K>) -> Self
    where
        K::Scope: Scoped,
    {
        self.declared.push(Box::new(dependent));
        self
    }

    /// The field manager of the dependents' applies and releases (default: the controller's
    /// name). Set it to the manager of the operator the objects come from (a hand-written one
    /// being replaced) so that they keep one owner instead of two.
    #[must_use]
    pub fn field_manager(mut self, manager: impl Into<String>) -> Self {
        self.settings.field_manager = Some(manager.into());
        self
    }

    /// How long after a conflict with an object the primary does not own the primary is
    /// reconciled again (default [`CONFLICT_RECHECK`], 30 s; see [`Reconciled::action`]).
    #[must_use]
    pub fn conflict_recheck(mut self, after: Duration) -> Self {
        self.settings.conflict_recheck = after;
        self
    }

    /// The dependents in the order declared, unchecked: `#[controller(dependents(..))]` orders
    /// and checks them at compile time.
    #[doc(hidden)]
    pub fn __ordered(self) -> Dependents<P, C> {
        Dependents {
            order: self.declared,
            recorder: OnceLock::new(),
            settings: self.settings,
        }
    }

    /// The dependents in an order where each comes after those it depends on (otherwise in
    /// declaration order).
    ///
    /// # Errors
    ///
    /// A duplicate name, a `depends_on` naming no dependent, or a cycle.
    pub fn build(self) -> Result<Dependents<P, C>, DependentsError> {
        if let Some(keeps) = self.declared.iter().find(|d| d.keeps_on_owner_delete()) {
            return Err(DependentsError::KeepOnOwnerDelete(keeps.name()));
        }
        let names: Vec<&'static str> = self.declared.iter().map(|d| d.name()).collect();
        let edges: Vec<Vec<&'static str>> = self
            .declared
            .iter()
            .map(|d| d.depends_on().to_vec())
            .collect();
        let order = topological(&names, &edges)?;
        let mut slots: Vec<Option<Box<dyn Erased<P, C>>>> =
            self.declared.into_iter().map(Some).collect();
        Ok(Dependents {
            order: order.into_iter().filter_map(|i| slots[i].take()).collect(),
            recorder: OnceLock::new(),
            settings: self.settings,
        })
    }
}

/// Indices of `names` with each after what it depends on (`edges[i]`), ties in declaration
/// order.
fn topological(
    names: &[&'static str],
    edges: &[Vec<&'static str>],
) -> Result<Vec<usize>, DependentsError> {
    let mut index = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        if index.insert(*name, i).is_some() {
            return Err(DependentsError::Duplicate(name));
        }
    }
    let mut deps: Vec<Vec<usize>> = Vec::with_capacity(names.len());
    for (i, on) in edges.iter().enumerate() {
        let mut of = Vec::new();
        for name in on {
            let Some(&j) = index.get(name) else {
                return Err(DependentsError::Unknown {
                    dependent: names[i],
                    on: name,
                });
            };
            of.push(j);
        }
        deps.push(of);
    }
    kubeforge_shared::graph::order(&deps)
        .map_err(|cycle| DependentsError::Cycle(cycle.iter().map(|&i| names[i]).collect()))
}

impl<P, C, K> Erased<P, C> for Dependent<P, C, K>
where
    P: Kind,
    C: Send + Sync + 'static,
    K: Kind + crate::views::Writable,
    K::Scope: Scoped,
{
    fn name(&self) -> &'static str {
        self.name
    }

    fn depends_on(&self) -> &[&'static str] {
        &self.depends_on
    }

    fn reconcile<'a>(
        &'a self,
        controller: &'a C,
        primary: &'a P,
        ctx: &'a Context<P>,
        writing: Writing<'a>,
        done: &'a Reconciled,
    ) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            match &self.desired {
                Desire::One(build) => {
                    if let Some(on) = self.waits_for(done, None) {
                        return Outcome::new(self.name, State::Waiting { on });
                    }
                    self.reconcile_one(build, controller, primary, ctx, writing)
                        .await
                }
                Desire::Many(build) => {
                    self.reconcile_many(build, controller, primary, ctx, writing, done)
                        .await
                }
            }
        })
    }

    fn on_owner_delete(&self) -> Deletion {
        policy::on_owner_delete::<K>(self.on_owner_delete)
    }

    fn declares_on_owner_delete(&self) -> bool {
        self.on_owner_delete.is_some()
    }

    fn keeps_on_owner_delete(&self) -> bool {
        self.on_owner_delete == Some(Deletion::Keep)
    }

    fn release<'a>(
        &'a self,
        controller: &'a C,
        primary: &'a P,
        ctx: &'a Context<P>,
        manager: &'a str,
    ) -> BoxFuture<'a, Result<usize, BoxError>> {
        Box::pin(async move {
            let children: Vec<Arc<K>> = match &self.desired {
                Desire::Many(_) => child::labelled::<P, K>(primary, ctx, self.name).await?,
                Desire::One(build) => {
                    let mut desired = build(controller, primary, ctx).await?;
                    let key = child::place(primary, ctx, &mut desired, None)?;
                    child::current::<P, K>(ctx, &key)
                        .await?
                        .into_iter()
                        .collect()
                }
            };
            let mut released = 0;
            for object in children {
                let orphan = policy::on_owner_delete_of(self.on_owner_delete, object.as_ref())
                    == Deletion::Orphan;
                if orphan
                    && child::owns(primary, object.as_ref())
                    && object.meta().deletion_timestamp.is_none()
                    && policy::release(primary, ctx, object.as_ref(), manager).await?
                {
                    released += 1;
                }
            }
            Ok(released)
        })
    }
}

impl<P, C, K> Dependent<P, C, K> {
    /// The first dependent this one (or its child for `item`) waits for: one of `depends_on`
    /// not ready — for an item, that dependent's child of the same item when it has one.
    fn waits_for(&self, done: &Reconciled, item: Option<&str>) -> Option<&'static str> {
        self.depends_on.iter().copied().find(|on| {
            let Some(outcome) = done.outcome(on) else {
                return true;
            };
            let same_item = item.and_then(|item| outcome.items.iter().find(|i| i.item == item));
            match same_item {
                Some(child) => child.state != State::Ready,
                None => outcome.state != State::Ready,
            }
        })
    }
}

/// Publishes an event about `primary`, logging (not failing) when it cannot.
async fn publish<P: Kind>(
    recorder: &Recorder,
    primary: &P,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    if let Err(e) = recorder
        .publish(primary, type_, reason, action, Some(note))
        .await
    {
        tracing::debug!(error = %crate::client::readable(&e), "event not published");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(
        names: &[&'static str],
        edges: &[&[&'static str]],
    ) -> Result<Vec<&'static str>, String> {
        let edges: Vec<Vec<&'static str>> = edges.iter().map(|e| e.to_vec()).collect();
        topological(names, &edges)
            .map(|o| o.into_iter().map(|i| names[i]).collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn topological_should_put_each_after_what_it_depends_on_and_keep_declaration_order() {
        assert_eq!(
            order(&["sts", "svc", "secret"], &[&["secret", "svc"], &[], &[]]),
            Ok(vec!["secret", "svc", "sts"])
        );
        assert_eq!(
            order(&["a", "b", "c"], &[&[], &[], &[]]),
            Ok(vec!["a", "b", "c"])
        );
    }

    #[test]
    fn topological_should_name_cycles_unknown_and_duplicate_dependents() {
        assert_eq!(
            order(&["a", "b", "c"], &[&["c"], &["a"], &["b"]]),
            Err("dependents depend on each other in a cycle: a -> c -> b -> a".to_owned())
        );
        assert_eq!(
            order(&["a"], &[&["zz"]]),
            Err("dependent `a` depends on `zz`, which is not a dependent".to_owned())
        );
        assert_eq!(
            order(&["a", "a"], &[&[], &[]]),
            Err("two dependents are named `a`".to_owned())
        );
    }

    fn outcome(name: &'static str, state: State) -> Outcome {
        Outcome::new(name, state)
    }

    #[test]
    fn keep_on_owner_deletion_should_be_refused_and_a_conflict_rechecked() {
        use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
        let namespace = |_: &(), _: &ConfigMap, _: &Context<ConfigMap>| Namespace::default();
        let kept = Dependents::<ConfigMap, ()>::new()
            .with(Dependent::new("ns", namespace).on_owner_delete(Deletion::Keep))
            .build();
        assert_eq!(
            kept.err().map(|e| e.to_string()),
            Some("dependent `ns`: `keep` applies to pruning only (a child that keeps its owner reference is deleted with its owner by the garbage collector); write `orphan`".to_owned())
        );
        let default = Dependents::<ConfigMap, ()>::new()
            .with(Dependent::new("ns", namespace))
            .build()
            .unwrap();
        assert!(
            default.releases_on_owner_delete(),
            "a Namespace is released"
        );
        let deleted = Dependents::<ConfigMap, ()>::new()
            .with(Dependent::new("ns", namespace).on_owner_delete(Deletion::Delete))
            .build()
            .unwrap();
        assert!(!deleted.releases_on_owner_delete());

        let conflict = Reconciled {
            outcomes: vec![outcome("copy", State::Conflict("theirs".into()))],
            recheck: Some(CONFLICT_RECHECK),
            ..Reconciled::default()
        };
        assert_eq!(conflict.action(), Action::RequeueAfter(CONFLICT_RECHECK));
        assert_eq!(
            __or_recheck(Action::Done, conflict.action()),
            Action::RequeueAfter(CONFLICT_RECHECK)
        );
        let soon = Action::requeue_after(Duration::from_secs(1));
        assert_eq!(__or_recheck(soon, conflict.action()), soon);
        assert_eq!(Reconciled::default().action(), Action::Done);
    }

    #[test]
    fn conditions_should_name_the_first_dependent_not_ready_or_failed() {
        let ready = Reconciled {
            outcomes: vec![
                outcome("secret", State::Ready),
                outcome("backup", State::Inactive),
            ],
            ..Reconciled::default()
        };
        let [r, p, d] = ready.conditions();
        assert_eq!((r.1, r.2.as_str()), (true, "AllDependentsReady"));
        assert_eq!((p.1, p.2.as_str()), (false, "Complete"));
        assert_eq!((d.1, d.2.as_str()), (false, "NoFailures"));

        let waiting = Reconciled {
            outcomes: vec![
                outcome("secret", State::Ready),
                outcome("stateful_set", State::NotReady),
                outcome("backup-job", State::Waiting { on: "stateful_set" }),
            ],
            ..Reconciled::default()
        };
        let [r, p, _] = waiting.conditions();
        assert_eq!((r.1, r.2.as_str()), (false, "StatefulSetNotReady"));
        assert_eq!(
            r.3,
            "stateful_set is not ready; backup-job waits for stateful_set"
        );
        assert_eq!((p.1, p.2.as_str()), (true, "StatefulSetNotReady"));

        let failed = Reconciled {
            outcomes: vec![
                outcome("secret", State::Failed("forbidden".into())),
                outcome("service", State::NotReady),
            ],
            ..Reconciled::default()
        };
        let [r, p, d] = failed.conditions();
        assert_eq!((r.1, r.2.as_str()), (false, "SecretNotReady"));
        assert_eq!((p.1, p.2.as_str()), (false, "SecretFailed"));
        assert_eq!(
            (d.1, d.2.as_str(), d.3.as_str()),
            (true, "SecretFailed", "secret: forbidden")
        );
    }
}
