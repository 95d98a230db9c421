//! Dependents: the children of a kind declared as desired-state functions, applied by the
//! framework, instead of built, applied and read back by hand in `reconcile`.
//!
//! A [`Dependent`] names one child: a function that builds it from the primary object, and
//! options — [`create_only`](Dependent::create_only) (made once, never updated: a generated
//! password), [`when`](Dependent::when) (an activation condition: the child exists only while
//! it holds, and is deleted when it turns false), [`precondition`](Dependent::precondition) (the
//! child is left as it is until it holds), [`ready`](Dependent::ready) (built-ins for the
//! workload kinds in [`ready`]) and [`depends_on`](Dependent::depends_on) (reconciled only once
//! those are ready). [`Dependents`] holds a controller's dependents in an order that respects
//! `depends_on` and reconciles them:
//!
//! 1. each dependent in order: skipped while one it depends on is not ready; deleted while its
//!    activation condition is false (and counted as deleting until it is gone from the cache);
//!    left alone while its precondition is false; otherwise built and, **only if the stored
//!    child does not already hold every field the desired one sets** (see `matcher`),
//!    server-side applied with a controller owner reference as the controller's field manager
//!    (a create-only one is created only when absent);
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

mod matcher;
pub mod ready;

use std::any::Any;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch};
use kube::core::object::HasStatus;
use serde::Serialize;

use crate::BoxError;
use crate::cache::Lookup;
use crate::controller::{Context, Kind};
use crate::crd::{Conditions, PROGRESSING, READY};
use crate::events::{EventType, Recorder};
use crate::scope::Scoped;

pub use ready::Readiness;

/// The condition type that is true while writing a dependent fails.
pub const DEGRADED: &str = "Degraded";

type Build<P, C, K> = Box<
    dyn for<'a> Fn(&'a C, &'a P, &'a Context<P>) -> BoxFuture<'a, Result<K, BoxError>>
        + Send
        + Sync,
>;

/// What a desired-state function returns: the child, or `Result<Child, E>` when building it
/// can fail (an error converting into a [`BoxError`]; the dependent is then `Failed`).
#[diagnostic::on_unimplemented(
    message = "a dependent builds a Kubernetes kind (or a `Result` of one), not `{Self}`",
    label = "not a kind a dependent can build",
    note = "return a k8s-openapi resource such as `Secret`, or a kind #[kubeforge::custom_resource] generates"
)]
pub trait Desired<K> {
    /// The child, or why there is none.
    ///
    /// # Errors
    ///
    /// The function's own error, boxed.
    fn into_desired(self) -> Result<K, BoxError>;
}

impl<K: Kind> Desired<K> for K {
    fn into_desired(self) -> Result<K, BoxError> {
        Ok(self)
    }
}

impl<K: Kind, E: Into<BoxError>> Desired<K> for Result<K, E> {
    fn into_desired(self) -> Result<K, BoxError> {
        self.map_err(Into::into)
    }
}
type Test<P, C> = Box<dyn Fn(&C, &P) -> bool + Send + Sync>;

/// One child of the primary kind `P`, built by a function of the controller `C`.
pub struct Dependent<P, C, K> {
    name: &'static str,
    desired: Build<P, C, K>,
    create_only: bool,
    when: Option<Test<P, C>>,
    precondition: Option<Test<P, C>>,
    ready: Box<dyn Fn(&K) -> bool + Send + Sync>,
    depends_on: Vec<&'static str>,
}

impl<P, C, K> Dependent<P, C, K> {
    /// A dependent named `name` (in conditions, events and [`Reconciled::get`]), built by
    /// `desired` (returning the child or a `Result` of it); ready as soon as it exists.
    pub fn new<R: Desired<K>>(
        name: &'static str,
        desired: impl Fn(&C, &P, &Context<P>) -> R + Send + Sync + 'static,
    ) -> Self
    where
        K: Send + 'static,
    {
        Self::build(
            name,
            Box::new(move |c, p, ctx| {
                let built = desired(c, p, ctx).into_desired();
                Box::pin(std::future::ready(built))
            }),
        )
    }

    /// As [`new`](Self::new), with an asynchronous desired-state function (one that reads the
    /// cache, say), written as a function returning a boxed future.
    pub fn new_async<R: Desired<K> + 'static>(
        name: &'static str,
        desired: impl for<'a> Fn(&'a C, &'a P, &'a Context<P>) -> BoxFuture<'a, R>
        + Send
        + Sync
        + 'static,
    ) -> Self
    where
        K: Send + 'static,
    {
        Self::build(
            name,
            Box::new(move |c, p, ctx| {
                let building = desired(c, p, ctx);
                Box::pin(async move { building.await.into_desired() })
            }),
        )
    }

    fn build(name: &'static str, desired: Build<P, C, K>) -> Self {
        Self {
            name,
            desired,
            create_only: false,
            when: None,
            precondition: None,
            ready: Box::new(|_| true),
            depends_on: Vec::new(),
        }
    }

    /// Created when absent, never updated (a generated password survives spec edits and
    /// restarts).
    #[must_use]
    pub fn create_only(mut self) -> Self {
        self.create_only = true;
        self
    }

    /// Exists only while `active` holds; deleted when it turns false.
    #[must_use]
    pub fn when(mut self, active: impl Fn(&C, &P) -> bool + Send + Sync + 'static) -> Self {
        self.when = Some(Box::new(active));
        self
    }

    /// Reconciled only while `holds` holds; left as it is (and counted as not ready) otherwise.
    #[must_use]
    pub fn precondition(mut self, holds: impl Fn(&C, &P) -> bool + Send + Sync + 'static) -> Self {
        self.precondition = Some(Box::new(holds));
        self
    }

    /// Ready when `ready` says so of the stored object.
    #[must_use]
    pub fn ready(mut self, ready: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.ready = Box::new(ready);
        self
    }

    /// Ready by the kind's built-in rule (see [`ready`]).
    #[must_use]
    pub fn ready_builtin(self) -> Self
    where
        K: Readiness + 'static,
    {
        self.ready(K::is_ready)
    }

    /// Reconciled only once the dependents named are ready.
    #[must_use]
    pub fn depends_on(mut self, names: &[&'static str]) -> Self {
        self.depends_on.extend_from_slice(names);
        self
    }
}

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
    /// Its activation condition is false and it is being deleted.
    Deleting,
    /// Writing or reading it failed (the message).
    Failed(String),
}

impl State {
    /// Whether the dependent needs nothing more (ready, or inactive and gone).
    pub fn is_done(&self) -> bool {
        matches!(self, State::Ready | State::Inactive)
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
            .finish_non_exhaustive()
    }
}

/// What a reconcile of the dependents found and did, in reconcile order.
#[derive(Debug, Default)]
pub struct Reconciled {
    /// Each dependent's outcome, in the order they were reconciled.
    pub outcomes: Vec<Outcome>,
}

impl Reconciled {
    /// The stored object of dependent `name`, if it exists and is of kind `K`.
    pub fn get<K: Send + Sync + 'static>(&self, name: &str) -> Option<Arc<K>> {
        let object = self.outcome(name)?.object.clone()?;
        object.downcast::<K>().ok()
    }

    /// Where dependent `name` stands.
    pub fn state(&self, name: &str) -> Option<&State> {
        self.outcome(name).map(|o| &o.state)
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
        let failed = self
            .outcomes
            .iter()
            .find(|o| matches!(o.state, State::Failed(_)));
        let pending: Vec<&Outcome> = self
            .outcomes
            .iter()
            .filter(|o| !o.state.is_done())
            .collect();
        let describe = |o: &Outcome| match &o.state {
            State::Waiting { on } => format!("{} waits for {on}", o.name),
            State::Blocked => format!("{}: precondition not met", o.name),
            State::Deleting => format!("{} is being deleted", o.name),
            State::Failed(e) => format!("{}: {e}", o.name),
            _ => format!("{} is not ready", o.name),
        };
        let message = pending
            .iter()
            .map(|o| describe(o))
            .collect::<Vec<_>>()
            .join("; ");
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
            (Some(f), _) => (
                PROGRESSING,
                false,
                format!("{}Failed", camel(f.name)),
                message.clone(),
            ),
            (None, Some(first)) => (
                PROGRESSING,
                true,
                format!("{}NotReady", camel(first.name)),
                message.clone(),
            ),
            (None, None) => (PROGRESSING, false, "Complete".to_owned(), String::new()),
        };
        let degraded = match failed {
            Some(f) => (
                DEGRADED,
                true,
                format!("{}Failed", camel(f.name)),
                describe(f),
            ),
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
    /// Patching the primary's status failed.
    #[error("status of the dependents: {0}")]
    Status(#[source] kube::Error),
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
        recorder: &'a Recorder,
    ) -> BoxFuture<'a, Outcome>;
}

/// A controller's dependents, in reconcile order. Build with [`Dependents::new`].
pub struct Dependents<P, C> {
    order: Vec<Box<dyn Erased<P, C>>>,
    recorder: OnceLock<Recorder>,
}

/// The dependents being declared; [`build`](Self::build) orders and checks them.
pub struct DependentsBuilder<P, C> {
    declared: Vec<Box<dyn Erased<P, C>>>,
}

impl<P: Kind, C: Send + Sync + 'static> Dependents<P, C> {
    /// No dependents yet.
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> DependentsBuilder<P, C> {
        DependentsBuilder {
            declared: Vec::new(),
        }
    }

    /// The dependents' names, in reconcile order.
    pub fn names(&self) -> Vec<&'static str> {
        self.order.iter().map(|d| d.name()).collect()
    }

    /// Reconciles every dependent, in order (see the module docs), without touching the
    /// primary's status.
    pub async fn reconcile(&self, controller: &C, primary: &P, ctx: &Context<P>) -> Reconciled {
        let recorder = self
            .recorder
            .get_or_init(|| Recorder::new(ctx.client(), ctx.controller_name()));
        let mut reconciled = Reconciled::default();
        for dependent in &self.order {
            let waiting = dependent.depends_on().iter().find(|on| {
                reconciled
                    .state(on)
                    .is_none_or(|state| *state != State::Ready)
            });
            let outcome = match waiting {
                Some(on) => Outcome::new(dependent.name(), State::Waiting { on }),
                None => {
                    dependent
                        .reconcile(controller, primary, ctx, recorder)
                        .await
                }
            };
            reconciled.outcomes.push(outcome);
        }
        reconciled
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
        P: HasStatus<Status: ConditionsStatus + Clone + PartialEq + Default + Serialize>,
    {
        let mut reconciled = self.reconcile(controller, primary, ctx).await;
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
    /// Declares `dependent`.
    #[must_use]
    pub fn with<K: Kind>(mut self, dependent: Dependent<P, C, K>) -> Self
    where
        K::Scope: Scoped,
    {
        self.declared.push(Box::new(dependent));
        self
    }

    /// The dependents in the order declared, unchecked: `#[controller(dependents(..))]` orders
    /// and checks them at compile time.
    #[doc(hidden)]
    pub fn __ordered(self) -> Dependents<P, C> {
        Dependents {
            order: self.declared,
            recorder: OnceLock::new(),
        }
    }

    /// The dependents in an order where each comes after those it depends on (otherwise in
    /// declaration order).
    ///
    /// # Errors
    ///
    /// A duplicate name, a `depends_on` naming no dependent, or a cycle.
    pub fn build(self) -> Result<Dependents<P, C>, DependentsError> {
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
    // 0: not visited, 1: on the path, 2: placed.
    let mut mark = vec![0u8; names.len()];
    let mut order = Vec::with_capacity(names.len());
    let mut path = Vec::new();
    fn visit(
        i: usize,
        deps: &[Vec<usize>],
        mark: &mut [u8],
        order: &mut Vec<usize>,
        path: &mut Vec<usize>,
    ) -> Result<(), Vec<usize>> {
        match mark[i] {
            2 => return Ok(()),
            1 => {
                let start = path.iter().position(|&p| p == i).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(i);
                return Err(cycle);
            }
            _ => {}
        }
        mark[i] = 1;
        path.push(i);
        for &j in &deps[i] {
            visit(j, deps, mark, order, path)?;
        }
        path.pop();
        mark[i] = 2;
        order.push(i);
        Ok(())
    }
    for i in 0..names.len() {
        visit(i, &deps, &mut mark, &mut order, &mut path)
            .map_err(|cycle| DependentsError::Cycle(cycle.iter().map(|&i| names[i]).collect()))?;
    }
    Ok(order)
}

impl<P, C, K> Erased<P, C> for Dependent<P, C, K>
where
    P: Kind,
    C: Send + Sync + 'static,
    K: Kind,
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
        recorder: &'a Recorder,
    ) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let mut outcome = Outcome::new(self.name, State::NotReady);
            match self.step(controller, primary, ctx, &mut outcome).await {
                Ok(state) => outcome.state = state,
                Err(error) => {
                    let note = format!("{}: {error}", self.name);
                    if let Err(e) = recorder
                        .publish(
                            primary,
                            EventType::Warning,
                            "ApplyFailed",
                            "Apply",
                            Some(note),
                        )
                        .await
                    {
                        tracing::debug!(error = %e, "event not published");
                    }
                    outcome.state = State::Failed(error.to_string());
                    outcome.error = Some(error);
                }
            }
            if outcome.created {
                let note = format!(
                    "created {} {} ({})",
                    K::kind(&()),
                    outcome
                        .object
                        .as_ref()
                        .and_then(|o| o.downcast_ref::<K>())
                        .map(ResourceExt::name_any)
                        .unwrap_or_default(),
                    self.name
                );
                if let Err(e) = recorder
                    .publish(primary, EventType::Normal, "Created", "Create", Some(note))
                    .await
                {
                    tracing::debug!(error = %e, "event not published");
                }
            }
            outcome
        })
    }
}

impl<P, C, K> Dependent<P, C, K>
where
    P: Kind,
    K: Kind,
    K::Scope: Scoped,
{
    /// One dependent's reconcile; fills in the outcome's object and flags.
    async fn step(
        &self,
        controller: &C,
        primary: &P,
        ctx: &Context<P>,
        outcome: &mut Outcome,
    ) -> Result<State, BoxError> {
        if let Some(active) = &self.when
            && !active(controller, primary)
        {
            return self.deactivate(controller, primary, ctx, outcome).await;
        }
        if let Some(holds) = &self.precondition
            && !holds(controller, primary)
        {
            return Ok(State::Blocked);
        }
        let mut desired = (self.desired)(controller, primary, ctx).await?;
        let name = desired.meta().name.clone().unwrap_or_default();
        if name.is_empty() {
            return Err(format!("the desired {} has no name", K::kind(&())).into());
        }
        if <K::Scope as Scoped>::NAMESPACED && desired.meta().namespace.is_none() {
            desired.meta_mut().namespace = primary.meta().namespace.clone();
        }
        // The owner reference the write will carry, so the comparison sees it too.
        crate::client::owned_by(&mut desired, primary, "dependent")?;
        ctx.label_for_shard(&mut desired);
        let current = current::<P, K>(ctx, &name).await?;
        let stored = match current {
            Some(current) if self.create_only || unchanged(&desired, &current) => current,
            Some(_) => {
                outcome.written = true;
                Arc::new(
                    ctx.apply_owned(primary, ctx.controller_name(), desired)
                        .await?,
                )
            }
            None if self.create_only => {
                let (stored, created) = ctx.create_owned(primary, desired).await?;
                outcome.created = created;
                outcome.written = created;
                Arc::new(stored)
            }
            None => {
                let stored = ctx
                    .apply_owned(primary, ctx.controller_name(), desired)
                    .await?;
                outcome.created = true;
                outcome.written = true;
                Arc::new(stored)
            }
        };
        let state = if (self.ready)(&stored) {
            State::Ready
        } else {
            State::NotReady
        };
        outcome.object = Some(stored);
        Ok(state)
    }

    /// The activation condition is false: delete the child if it exists and is owned by
    /// `primary` (a child of that name it does not own is left alone); done once it is gone.
    async fn deactivate(
        &self,
        controller: &C,
        primary: &P,
        ctx: &Context<P>,
        outcome: &mut Outcome,
    ) -> Result<State, BoxError> {
        // Where the child would be: the desired function only reads.
        let desired = (self.desired)(controller, primary, ctx).await?;
        let name = desired.meta().name.clone().unwrap_or_default();
        if name.is_empty() {
            return Ok(State::Inactive);
        }
        let Some(current) = current::<P, K>(ctx, &name).await? else {
            return Ok(State::Inactive);
        };
        let owned = primary
            .meta()
            .uid
            .as_ref()
            .is_some_and(|uid| current.owner_references().iter().any(|r| &r.uid == uid));
        if !owned {
            return Ok(State::Inactive);
        }
        if current.meta().deletion_timestamp.is_some() {
            return Ok(State::Deleting);
        }
        match ctx
            .api::<K>()
            .delete(&name, &DeleteParams::background())
            .await
        {
            Ok(_) => {
                outcome.written = true;
                Ok(State::Deleting)
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(State::Inactive),
            Err(error) => Err(error.into()),
        }
    }
}

/// Whether `current` holds every field of `desired` (see `matcher`).
fn unchanged<K: Serialize>(desired: &K, current: &K) -> bool {
    match (serde_json::to_value(desired), serde_json::to_value(current)) {
        (Ok(want), Ok(have)) => matcher::holds(&want, &have),
        _ => false,
    }
}

/// The stored child `name` of kind `K` in the primary's namespace: from the cache when it holds
/// full objects of `K`, else from the apiserver.
async fn current<P, K>(ctx: &Context<P>, name: &str) -> Result<Option<Arc<K>>, kube::Error>
where
    P: Kind,
    K: Kind,
    K::Scope: Scoped,
{
    let namespace = if <K::Scope as Scoped>::NAMESPACED {
        ctx.key().namespace.clone()
    } else {
        None
    };
    let lookup = Lookup::scope(namespace.as_deref());
    if let Ok(store) = ctx.cache().store::<K>(&lookup) {
        let key = crate::ObjectKey {
            namespace,
            name: name.to_owned(),
        };
        if let Ok(found) = store.get(&key).await {
            return Ok(found);
        }
    }
    Ok(ctx.api::<K>().get_opt(name).await?.map(Arc::new))
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
    fn conditions_should_name_the_first_dependent_not_ready_or_failed() {
        let ready = Reconciled {
            outcomes: vec![
                outcome("secret", State::Ready),
                outcome("backup", State::Inactive),
            ],
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
