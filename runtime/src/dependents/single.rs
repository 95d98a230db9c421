//! Reconciling a dependent that builds one child.

use std::sync::Arc;

use kube::ResourceExt;

use super::child::{self, Written};
use super::declare::{Build, Dependent};
use super::policy::{self, Deletion};
use super::{Outcome, State, Writing, publish};
use crate::BoxError;
use crate::controller::{Context, Kind};
use crate::events::EventType;
use crate::scope::Scoped;

impl<P, C, K> Dependent<P, C, K>
where
    P: Kind,
    K: Kind + crate::views::Writable,
    K::Scope: Scoped,
{
    /// The dependent's reconcile, with its events: `ApplyFailed` (Warning) when it failed,
    /// `Created` when it created the child.
    pub(super) async fn reconcile_one(
        &self,
        build: &Build<P, C, K>,
        controller: &C,
        primary: &P,
        ctx: &Context<P>,
        writing: Writing<'_>,
    ) -> Outcome {
        let Writing { recorder, manager } = writing;
        let mut outcome = Outcome::new(self.name, State::NotReady);
        match self
            .step(build, controller, primary, ctx, manager, &mut outcome)
            .await
        {
            Ok(state) => outcome.state = state,
            Err(error) => {
                let note = format!("{}: {error}", self.name);
                publish(
                    recorder,
                    primary,
                    EventType::Warning,
                    "ApplyFailed",
                    "Apply",
                    note,
                )
                .await;
                outcome.state = State::Failed(error.to_string());
                outcome.error = Some(error);
            }
        }
        if let State::Conflict(message) = &outcome.state {
            let note = format!("{}: {message}", self.name);
            publish(
                recorder,
                primary,
                EventType::Warning,
                "Conflict",
                "Apply",
                note,
            )
            .await;
            // Not an error: retrying cannot resolve it. The primary is checked again after
            // `Dependents::conflict_recheck` (see `Reconciled::action`).
        }
        if outcome.created {
            let name = outcome
                .object
                .as_ref()
                .and_then(|o| o.downcast_ref::<K>())
                .map(ResourceExt::name_any)
                .unwrap_or_default();
            let note = format!("created {} {name} ({})", K::kind(&()), self.name);
            publish(
                recorder,
                primary,
                EventType::Normal,
                "Created",
                "Create",
                note,
            )
            .await;
        }
        outcome
    }

    /// One dependent's reconcile; fills in the outcome's object and flags.
    async fn step(
        &self,
        build: &Build<P, C, K>,
        controller: &C,
        primary: &P,
        ctx: &Context<P>,
        manager: &str,
        outcome: &mut Outcome,
    ) -> Result<State, BoxError> {
        if let Some(active) = &self.when
            && !active(controller, primary)
        {
            return self
                .deactivate(build, controller, primary, ctx, manager, outcome)
                .await;
        }
        if let Some(holds) = &self.precondition
            && !holds(controller, primary)
        {
            return Ok(State::Blocked);
        }
        let mut desired = build(controller, primary, ctx).await?;
        let key = child::place(primary, ctx, &mut desired, None)?;
        match child::write(primary, ctx, desired, &key, self.create_only, manager).await? {
            Written::Foreign(message) => Ok(State::Conflict(message)),
            Written::Stored {
                object,
                created,
                written,
            } => {
                outcome.created = created;
                outcome.written = written;
                outcome.held = policy::held(object.as_ref());
                let state = self.state_of(object.as_ref());
                outcome.object = Some(object as Arc<_>);
                Ok(state)
            }
        }
    }

    /// Where a stored child stands: being deleted ([`State::Terminating`]), else ready or not
    /// by the dependent's rule.
    pub(super) fn state_of(&self, object: &K) -> State {
        if policy::being_deleted(object) {
            State::Terminating
        } else if (self.ready)(object) {
            State::Ready
        } else {
            State::NotReady
        }
    }

    /// The activation condition is false: the child, if it exists and is owned by `primary` (a
    /// child of that name it does not own is left alone), is pruned by the dependent's policy:
    /// deleted (done once it is gone), released or kept.
    async fn deactivate(
        &self,
        build: &Build<P, C, K>,
        controller: &C,
        primary: &P,
        ctx: &Context<P>,
        manager: &str,
        outcome: &mut Outcome,
    ) -> Result<State, BoxError> {
        // Where the child would be: the desired function only reads.
        let mut desired = build(controller, primary, ctx).await?;
        let Ok(key) = child::place(primary, ctx, &mut desired, None) else {
            return Ok(State::Inactive);
        };
        let Some(current) = child::current::<P, K>(ctx, &key).await? else {
            return Ok(State::Inactive);
        };
        if !child::owns(primary, current.as_ref()) {
            return Ok(State::Inactive);
        }
        match policy::on_prune(self.prune, current.as_ref()) {
            Deletion::Keep => return Ok(State::Inactive),
            Deletion::Orphan => {
                outcome.written |= policy::release(primary, ctx, current.as_ref(), manager).await?;
                return Ok(State::Inactive);
            }
            Deletion::Delete => {}
        }
        if current.meta().deletion_timestamp.is_some() {
            return Ok(State::Deleting);
        }
        if child::delete(ctx, current.as_ref()).await? {
            outcome.written = true;
            Ok(State::Deleting)
        } else {
            Ok(State::Inactive)
        }
    }
}
