//! Server-side sharding at run time ([`super::ranges`] holds the pure logic): deciding the mode
//! when the manager starts, the sharder's assignment of hash ranges, and each member's side —
//! following the assignment, letting ranges go once their reconciles ended, acknowledging on
//! its membership Lease.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::BoxError;
use crate::leader::LeaderElector;
use crate::runner::Runnable;

use super::members::Listing;
use super::membership::{MEMBER_OF_LABEL, Membership, Mode};
use super::ranges::{
    ACKED_ANNOTATION, ASSIGNMENT_ANNOTATION, Acked, Assignment, MODE_ANNOTATION, RangeKey,
    SERVING_ANNOTATION, SlotSet, rebalance,
};
use super::sharder::Sharder;

/// The name of the Lease holding a group's assignment of ranges.
pub(crate) fn ranges_lease(group: &str) -> String {
    format!("{group}-ranges")
}

/// Whether the apiserver serves `shardSelector` (the `ShardedListAndWatch` feature gate): a
/// list of the Leases in `namespace` with a selector of the whole hash space answers with
/// `metadata.shardInfo` only if the gate is on (when it is off, the parameter is ignored).
///
/// # Errors
///
/// The request failing (the apiserver unreachable, RBAC refusing the list).
pub async fn serves_shard_selectors(client: &Client, namespace: &str) -> Result<bool, kube::Error> {
    let selector = SlotSet::ALL.selector(RangeKey::Uid);
    let url = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases?limit=1&shardSelector={}",
        crate::text::query_escape(&selector)
    );
    let request = http::Request::get(url)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    let list: serde_json::Value = client.request(request).await?;
    Ok(list
        .pointer("/metadata/shardInfo/selector")
        .is_some_and(|s| s.as_str().is_some_and(|s| !s.is_empty())))
}

/// Decides the mode of a group configured with `mode` against the apiserver (retrying while it
/// cannot be reached, for up to `patience`).
pub(crate) async fn decide(
    client: &Client,
    namespace: &str,
    mode: super::ShardMode,
    patience: Duration,
) -> Result<Mode, String> {
    let key = match mode {
        super::ShardMode::Labels => return Ok(Mode::Labels),
        super::ShardMode::Ranges(key) | super::ShardMode::Auto(key) => key,
    };
    let deadline = Instant::now() + patience;
    let serves = loop {
        match serves_shard_selectors(client, namespace).await {
            Ok(serves) => break serves,
            Err(error) if Instant::now() < deadline => {
                tracing::warn!(error = %crate::text::concise(&error), "asking the apiserver whether it serves shard selectors failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(error) => {
                return Err(format!(
                    "could not ask the apiserver whether it serves shard selectors: {}",
                    crate::text::concise(&error)
                ));
            }
        }
    };
    match (serves, mode) {
        (true, _) => {
            tracing::info!(
                key = key.field(),
                "sharding by hash ranges (the apiserver serves shardSelector)"
            );
            Ok(Mode::Ranges(key))
        }
        (false, super::ShardMode::Auto(_)) => {
            tracing::info!(
                "the apiserver ignores shardSelector (feature gate ShardedListAndWatch off): sharding by labels"
            );
            Ok(Mode::Labels)
        }
        (false, _) => Err(
            "shard mode `ranges` needs an apiserver that serves shardSelector (feature gate \
             ShardedListAndWatch); this one ignores it: turn the gate on, or use mode `auto` \
             or `labels`"
                .to_owned(),
        ),
    }
}

fn parse(lease: &Lease) -> Option<Assignment> {
    let text = lease
        .metadata
        .annotations
        .as_ref()?
        .get(ASSIGNMENT_ANNOTATION)?;
    match serde_json::from_str(text) {
        Ok(assignment) => Some(assignment),
        Err(error) => {
            tracing::error!(%error, "the shard group's assignment does not parse; ignored");
            None
        }
    }
}

impl Sharder {
    /// Leads the group in range mode: lists the members' Leases every retry period (faster
    /// while ranges move), and writes the next assignment whenever it changes.
    pub(super) async fn lead_ranges(
        &self,
        key: RangeKey,
        writer: Client,
        leading: CancellationToken,
    ) {
        let group = self.membership.group().to_owned();
        tracing::info!(%group, key = key.field(), "assigning shard ranges");
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.lease_namespace);
        let records: Api<Lease> = Api::namespaced(writer.clone(), &self.lease_namespace);
        let name = ranges_lease(&group);
        let selector = format!("{MEMBER_OF_LABEL}={group}");
        let mut members = self.observed();
        let mut held_off = BTreeSet::new();
        // Members started together: let their Leases appear before the first assignment.
        tokio::select! {
            () = leading.cancelled() => return,
            () = tokio::time::sleep(self.retry_period) => {}
        }
        loop {
            let sent = Instant::now();
            let mut moving = false;
            match leases.list(&ListParams::default().labels(&selector)).await {
                Ok(list) => {
                    let listing = Listing {
                        sent,
                        received: Instant::now(),
                    };
                    members.observe(&list.items, listing, self.lease_duration);
                    self.remember(&members);
                    self.forget_departed(&members, &writer).await;
                    let live: BTreeSet<String> = members.live().into_iter().collect();
                    self.metrics.set_live(live.len());
                    let acked = acknowledged(&list.items);
                    // Members sharding by labels (a release without range mode in a rolling
                    // upgrade, or `--shard-mode labels`) serve the objects labelled for them:
                    // ranges are not assigned while one is live (members of a new group serve
                    // nothing until then).
                    let labelled = by_labels(&list.items, &live);
                    if labelled.is_empty() {
                        held_off.clear();
                        match self.assign(&records, &name, key, &live, &acked).await {
                            Ok(still_moving) => moving = still_moving,
                            Err(error) => {
                                tracing::warn!(error = %crate::text::concise(&error), "writing the shard assignment failed; trying again");
                            }
                        }
                    } else if labelled != held_off {
                        tracing::warn!(members = ?labelled, "members of the group shard by labels: no range is assigned until they are gone");
                        held_off = labelled;
                    }
                }
                Err(error) => {
                    tracing::warn!(error = %crate::text::concise(&error), "listing the members' leases failed; sharding paused");
                }
            }
            // While ranges move, their sources' acknowledgements are looked for often; a
            // member may expire between two listings: list again right then.
            let mut wait = if moving {
                self.retry_period.min(Duration::from_millis(200))
            } else {
                self.retry_period
            };
            if let Some(at) = members.next_expiry() {
                wait = wait.min(at.saturating_duration_since(Instant::now()));
            }
            tokio::select! {
                () = leading.cancelled() => return,
                () = tokio::time::sleep(wait.max(Duration::from_millis(20))) => {}
            }
        }
    }

    /// Reads the assignment, writes the next one if it changes; whether slots are still moving.
    async fn assign(
        &self,
        records: &Api<Lease>,
        name: &str,
        key: RangeKey,
        live: &BTreeSet<String>,
        acked: &Acked,
    ) -> Result<bool, kube::Error> {
        let Some(mut lease) = records.get_opt(name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    annotations: Some(BTreeMap::from([(
                        ASSIGNMENT_ANNOTATION.to_owned(),
                        json(&Assignment::empty(key)),
                    )])),
                    ..ObjectMeta::default()
                },
                spec: None,
            };
            records.create(&PostParams::default(), &lease).await?;
            return Ok(true);
        };
        let current = parse(&lease).unwrap_or_else(|| Assignment::empty(key));
        if current.key != key {
            tracing::error!(
                recorded = current.key.field(),
                configured = key.field(),
                lease = name,
                "the group's ranges hash another field than this replica is configured with; not assigning (delete the Lease to start over with the new one, once every replica runs with it)"
            );
            return Ok(false);
        }
        let Some(next) = rebalance(&current, live, acked) else {
            return Ok(current
                .slots
                .iter()
                .any(|slot| !matches!(slot, super::ranges::Slot::Owned { .. })));
        };
        let moving = next
            .slots
            .iter()
            .filter(|slot| matches!(slot, super::ranges::Slot::Moving { .. }))
            .count();
        let counts: BTreeMap<&str, usize> = live
            .iter()
            .map(|m| (m.as_str(), next.served_by(m).len()))
            .collect();
        lease
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ASSIGNMENT_ANNOTATION.to_owned(), json(&next));
        // `replace` carries the resourceVersion read: a concurrent writer (a sharder that lost
        // its Lease without knowing) makes this one fail, and the next pass reads again.
        records
            .replace(name, &PostParams::default(), &lease)
            .await?;
        for _ in 0..moving {
            self.metrics.moved("range");
        }
        tracing::info!(epoch = next.epoch, ?counts, moving, "shard ranges assigned");
        Ok(moving > 0 || next.slots.iter().any(|s| s.server().is_none()))
    }
}

/// Each member's last acknowledged epoch, from the annotations of the Leases it holds.
fn acknowledged(leases: &[Lease]) -> Acked {
    leases
        .iter()
        .filter_map(|lease| {
            let holder = lease.spec.as_ref()?.holder_identity.clone()?;
            let epoch = lease
                .metadata
                .annotations
                .as_ref()?
                .get(ACKED_ANNOTATION)?
                .parse()
                .ok()?;
            Some((holder, epoch))
        })
        .collect()
}

/// The live members whose Lease does not say they shard by ranges.
fn by_labels(leases: &[Lease], live: &BTreeSet<String>) -> BTreeSet<String> {
    leases
        .iter()
        .filter_map(|lease| {
            let holder = lease.spec.as_ref()?.holder_identity.clone()?;
            let ranges = lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(MODE_ANNOTATION))
                .is_some_and(|mode| mode == "ranges");
            (!ranges && live.contains(&holder)).then_some(holder)
        })
        .collect()
}

fn json(assignment: &Assignment) -> String {
    serde_json::to_string(assignment).unwrap_or_default()
}

/// A member's side of range mode: follows the group's assignment, serves its slots, lets the
/// others go once no reconcile of theirs runs, and acknowledges each epoch on its membership
/// Lease.
pub(crate) struct RangeMember {
    pub(crate) membership: Arc<Membership>,
    pub(crate) elector: Arc<LeaderElector>,
    pub(crate) client: Client,
    pub(crate) lease_namespace: String,
}

impl RangeMember {
    async fn follow(self: Arc<Self>, shutdown: CancellationToken) -> Result<(), BoxError> {
        let Mode::Ranges(key) = self.membership.mode() else {
            return Ok(());
        };
        let name = ranges_lease(self.membership.group());
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.lease_namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut assignments = watcher::watcher(api, config)
            .default_backoff()
            .applied_objects()
            .boxed();
        let mut applied = 0_u64;
        loop {
            let next = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                next = assignments.next() => next,
            };
            match next {
                None => return Ok(()),
                Some(Err(error)) => {
                    tracing::debug!(error = %crate::text::concise(&error), "watching the shard assignment failed; retrying");
                }
                Some(Ok(lease)) => {
                    let Some(assignment) = parse(&lease) else {
                        continue;
                    };
                    if assignment.epoch <= applied && applied > 0 {
                        continue;
                    }
                    if assignment.key != key {
                        tracing::error!(
                            recorded = assignment.key.field(),
                            configured = key.field(),
                            "the group's ranges hash another field than this replica is configured with; serving nothing"
                        );
                        self.membership.serve(SlotSet::default());
                        continue;
                    }
                    tokio::select! {
                        () = shutdown.cancelled() => return Ok(()),
                        () = self.apply(&assignment) => {}
                    }
                    applied = assignment.epoch;
                }
            }
        }
    }

    /// Serves the slots `assignment` gives this member; once the reconciles running in the
    /// slots it lost have ended, acknowledges its epoch.
    async fn apply(&self, assignment: &Assignment) {
        let mine = assignment.served_by(self.membership.member());
        let before = self.membership.serving();
        let leaving = before.minus(mine);
        let joining = mine.minus(before);
        self.membership.serve(mine);
        if !leaving.is_empty() {
            let started = Instant::now();
            self.membership.drained(leaving).await;
            tracing::debug!(slots = leaving.len(), took = ?started.elapsed(), "shard ranges let go");
        }
        self.elector.annotate(BTreeMap::from([
            (ACKED_ANNOTATION.to_owned(), assignment.epoch.to_string()),
            (SERVING_ANNOTATION.to_owned(), format!("{:016x}", mine.0)),
        ]));
        tracing::info!(
            epoch = assignment.epoch,
            serving = mine.len(),
            gained = joining.len(),
            lost = leaving.len(),
            "shard ranges applied"
        );
    }
}

impl Runnable for Arc<RangeMember> {
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Arc::clone(self).follow(shutdown).boxed()
    }

    fn needs_leader_election(&self) -> bool {
        false
    }
}

impl std::fmt::Debug for RangeMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeMember")
            .field("membership", &self.membership)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;

    use super::*;

    #[test]
    fn acknowledgements_should_be_read_from_the_holders_leases() {
        let lease = |holder: &str, acked: Option<&str>| Lease {
            metadata: ObjectMeta {
                annotations: acked
                    .map(|a| BTreeMap::from([(ACKED_ANNOTATION.to_owned(), a.to_owned())])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.to_owned()),
                ..LeaseSpec::default()
            }),
        };
        let acked = acknowledged(&[
            lease("a", Some("7")),
            lease("b", None),
            lease("c", Some("x")),
        ]);
        assert_eq!(acked, BTreeMap::from([("a".to_owned(), 7)]));
    }
}
