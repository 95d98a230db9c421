//! Reconciling a collection: every child built is applied (each on its own: one refused child
//! does not hold up the others), children this dependent made that are no longer built are
//! deleted, and the outcome reports each child and the aggregate.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::child::{self, Written};
use super::declare::{BuildMany, Built, Dependent};
use super::policy::{self, Deletion};
use super::{Item, Outcome, Reconciled, State, Writing, publish};
use crate::BoxError;
use crate::ObjectKey;
use crate::controller::{Context, Kind};
use crate::events::{EventType, Recorder};
use crate::scope::Scoped;

impl<P, C, K> Dependent<P, C, K>
where
    P: Kind,
    K: Kind + crate::views::Writable,
    K::Scope: Scoped,
{
    /// The collection's reconcile (see the module docs), with an event per child created,
    /// refused or in conflict.
    pub(super) async fn reconcile_many(
        &self,
        build: &BuildMany<P, C, K>,
        controller: &C,
        primary: &P,
        ctx: &Context<P>,
        writing: Writing<'_>,
        done: &Reconciled,
    ) -> Outcome {
        let mut outcome = Outcome::new(self.name, State::NotReady);
        let active = self.when.as_ref().is_none_or(|w| w(controller, primary));
        if active
            && let Some(holds) = &self.precondition
            && !holds(controller, primary)
        {
            outcome.state = State::Blocked;
            return outcome;
        }
        // Everything built keeps its place: a child waiting or refused is not pruned.
        let mut wanted = BTreeSet::new();
        if active {
            match build(controller, primary, ctx).await {
                Ok(built) => {
                    for built in built {
                        let item = self
                            .item(built, primary, ctx, done, writing.manager, &mut wanted)
                            .await;
                        outcome.items.push(item);
                    }
                }
                Err(error) => {
                    outcome.state = State::Failed(error.to_string());
                    outcome.error = Some(error);
                    return outcome;
                }
            }
        }
        if let Err(error) = self
            .prune_stale(primary, ctx, &wanted, writing.manager, &mut outcome)
            .await
        {
            outcome.error = Some(error);
        }
        outcome.written |= outcome.items.iter().any(|i| i.created);
        outcome.held |= outcome.items.iter().any(|i| i.held);
        self.aggregate(&mut outcome, active);
        self.publish_items(primary, writing.recorder, &outcome)
            .await;
        outcome
    }

    /// Places and writes one built child.
    async fn item(
        &self,
        built: Built<K>,
        primary: &P,
        ctx: &Context<P>,
        done: &Reconciled,
        manager: &str,
        wanted: &mut BTreeSet<ObjectKey>,
    ) -> Item {
        let mut item = Item {
            item: built.item.clone().unwrap_or_default(),
            namespace: None,
            name: None,
            state: State::NotReady,
            created: false,
            held: false,
            object: None,
        };
        let placed = built.child.and_then(|mut desired| {
            let key = child::place(primary, ctx, &mut desired, Some(self.name))?;
            Ok((desired, key))
        });
        let (desired, key) = match placed {
            Ok(placed) => placed,
            Err(error) => {
                item.state = State::Failed(error.to_string());
                return item;
            }
        };
        item.namespace.clone_from(&key.namespace);
        item.name = Some(key.name.clone());
        if built.item.is_none() {
            item.item = key.to_string();
        }
        if !wanted.insert(key.clone()) {
            item.state = State::Failed(format!("{key} is built twice"));
            return item;
        }
        if let Some(on) = self.waits_for(done, built.item.as_deref()) {
            item.state = State::Waiting { on };
            return item;
        }
        match child::write(primary, ctx, desired, &key, self.create_only, manager).await {
            Ok(Written::Foreign(message)) => item.state = State::Conflict(message),
            Ok(Written::Stored {
                object, created, ..
            }) => {
                item.created = created;
                item.held = policy::held(object.as_ref());
                item.state = self.state_of(object.as_ref());
                item.object = Some(object as Arc<_>);
            }
            Err(error) => item.state = State::Failed(error.to_string()),
        }
        item
    }

    /// Prunes the children this dependent made for `primary` that are not `wanted`, by the
    /// dependent's policy: deleted (each reported as [`State::Deleting`] until it is gone),
    /// released (no longer ours: not reported again) or kept (left as it is, not reported).
    async fn prune_stale(
        &self,
        primary: &P,
        ctx: &Context<P>,
        wanted: &BTreeSet<ObjectKey>,
        manager: &str,
        outcome: &mut Outcome,
    ) -> Result<(), BoxError> {
        let made = child::labelled::<P, K>(primary, ctx, self.name).await?;
        for stale in made {
            let key = ObjectKey::of(stale.as_ref());
            if wanted.contains(&key) {
                continue;
            }
            match policy::on_prune(self.prune, stale.as_ref()) {
                Deletion::Keep => {
                    outcome.held |= policy::held(stale.as_ref());
                    continue;
                }
                Deletion::Orphan => {
                    outcome.written |=
                        policy::release(primary, ctx, stale.as_ref(), manager).await?;
                    continue;
                }
                Deletion::Delete => {}
            }
            let deleting = stale.meta().deletion_timestamp.is_some()
                || child::delete(ctx, stale.as_ref()).await?;
            outcome.written |= stale.meta().deletion_timestamp.is_none() && deleting;
            if deleting {
                outcome.items.push(Item {
                    item: key.to_string(),
                    namespace: key.namespace.clone(),
                    name: Some(key.name.clone()),
                    state: State::Deleting,
                    created: false,
                    held: false,
                    object: None,
                });
            }
        }
        Ok(())
    }

    /// The collection's state from its children's: failed or in conflict if any is (the error
    /// the reconcile returns, so it is retried), else not ready while any is, else ready.
    fn aggregate(&self, outcome: &mut Outcome, active: bool) {
        let total = outcome
            .items
            .iter()
            .filter(|i| i.state != State::Deleting)
            .count();
        let ready = outcome
            .items
            .iter()
            .filter(|i| i.state == State::Ready)
            .count();
        // A child being pruned is no longer wanted: it does not hold an active collection back
        // (an inactive one is done once every child is gone).
        let pending: Vec<String> = outcome
            .items
            .iter()
            .filter(|i| !i.state.is_done() && (i.state != State::Deleting || !active))
            .map(|i| super::describe(&i.item, &i.state))
            .collect();
        let summary = format!("{ready} of {total} ready; {}", pending.join("; "));
        let failed = outcome
            .items
            .iter()
            .any(|i| matches!(i.state, State::Failed(_)));
        let conflict = outcome
            .items
            .iter()
            .any(|i| matches!(i.state, State::Conflict(_)));
        outcome.state = match (failed, conflict, pending.first()) {
            (true, _, _) => State::Failed(summary.clone()),
            (false, true, _) => State::Conflict(summary.clone()),
            (false, false, Some(_)) => {
                let waits = outcome.items.iter().find_map(|i| match i.state {
                    State::Waiting { on } => Some(on),
                    _ => None,
                });
                let all_waiting = outcome.items.iter().all(|i| {
                    matches!(
                        i.state,
                        State::Waiting { .. } | State::Ready | State::Deleting
                    )
                });
                match waits {
                    Some(on) if all_waiting && ready == 0 => State::Waiting { on },
                    _ => State::NotReady,
                }
            }
            (false, false, None) if !active => State::Inactive,
            (false, false, None) => State::Ready,
        };
        if !pending.is_empty() {
            outcome.summary = Some(summary);
        }
        // A failure is retried; a conflict is not an error (retrying cannot resolve it): the
        // primary is checked again after `Dependents::conflict_recheck`.
        if outcome.error.is_none() && matches!(outcome.state, State::Failed(_)) {
            outcome.error = outcome.summary.clone().map(Into::into);
        }
        if let Some(error) = &outcome.error
            && !outcome.state.is_failure()
        {
            outcome.state = State::Failed(error.to_string());
        }
    }

    /// An event per child created (Normal `Created`), refused (Warning `ApplyFailed`) or in
    /// conflict (Warning `Conflict`).
    async fn publish_items(&self, primary: &P, recorder: &Recorder, outcome: &Outcome) {
        for item in &outcome.items {
            let (type_, reason, action, note) = match &item.state {
                _ if item.created => (
                    EventType::Normal,
                    "Created",
                    "Create",
                    format!("created {} {} ({})", K::kind(&()), item.item, self.name),
                ),
                State::Failed(e) => (
                    EventType::Warning,
                    "ApplyFailed",
                    "Apply",
                    format!("{} {}: {e}", self.name, item.item),
                ),
                State::Conflict(e) => (
                    EventType::Warning,
                    "Conflict",
                    "Apply",
                    format!("{} {}: {e}", self.name, item.item),
                ),
                _ => continue,
            };
            publish(recorder, primary, type_, reason, action, note).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn item(name: &str, state: State) -> Item {
        Item {
            item: name.to_owned(),
            namespace: None,
            name: None,
            state,
            created: false,
            held: false,
            object: None,
        }
    }

    fn copies() -> Dependent<ConfigMap, (), ConfigMap> {
        Dependent::many("copy", |(), _: &ConfigMap, _| Vec::<ConfigMap>::new())
    }

    fn aggregate(items: Vec<Item>) -> Outcome {
        let mut outcome = Outcome::new("copy", State::NotReady);
        outcome.items = items;
        copies().aggregate(&mut outcome, true);
        outcome
    }

    #[test]
    fn the_aggregate_should_prefer_failures_to_conflicts_and_name_the_children() {
        let outcome = aggregate(vec![
            item("a", State::Ready),
            item("c", State::Conflict("c is theirs".into())),
            item("d", State::Failed("refused".into())),
        ]);
        assert!(matches!(&outcome.state, State::Failed(s) if s.starts_with("1 of 3 ready")));
        assert_eq!(
            outcome.summary.as_deref(),
            Some("1 of 3 ready; c: c is theirs; d: refused")
        );
        assert!(outcome.error.is_some(), "a failure is retried");

        let conflict = aggregate(vec![
            item("a", State::Ready),
            item("c", State::Conflict("theirs".into())),
        ]);
        assert!(matches!(conflict.state, State::Conflict(_)));
        assert!(
            conflict.error.is_none(),
            "a conflict is rechecked, not retried"
        );
    }

    #[test]
    fn the_aggregate_should_be_ready_when_every_wanted_child_is() {
        let ready = aggregate(vec![item("a", State::Ready), item("b", State::Ready)]);
        assert_eq!(ready.state, State::Ready);
        assert!(ready.summary.is_none() && ready.error.is_none());
        assert_eq!(aggregate(Vec::new()).state, State::Ready);
        // A child being pruned does not make the wanted ones less ready.
        let pruning = aggregate(vec![item("a", State::Ready), item("b", State::Deleting)]);
        assert_eq!(pruning.state, State::Ready);
        assert!(pruning.summary.is_none(), "{:?}", pruning.summary);
        // A wanted child being deleted (re-added while its old self terminates) is not ready.
        let back = aggregate(vec![item("a", State::Ready), item("b", State::Terminating)]);
        assert_eq!(back.state, State::NotReady);
        assert_eq!(
            back.summary.as_deref(),
            Some("1 of 2 ready; b is being deleted (made again once gone)")
        );
        let waiting = aggregate(vec![item("a", State::Waiting { on: "role" })]);
        assert_eq!(waiting.state, State::Waiting { on: "role" });
    }

    #[test]
    fn depends_on_should_hold_item_by_item_between_collections() {
        let binding = copies().depends_on(&["role"]);
        let mut roles = Outcome::new("role", State::NotReady);
        roles.items = vec![item("a", State::Ready), item("b", State::NotReady)];
        let done = Reconciled {
            outcomes: vec![roles],
            ..Reconciled::default()
        };
        assert_eq!(binding.waits_for(&done, Some("a")), None);
        assert_eq!(binding.waits_for(&done, Some("b")), Some("role"));
        // An item the other collection does not have: its aggregate decides.
        assert_eq!(binding.waits_for(&done, Some("z")), Some("role"));
        assert_eq!(
            binding.waits_for(&Reconciled::default(), None),
            Some("role")
        );
    }
}
