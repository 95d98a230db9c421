//! Active-active sharding across replicas: several replicas of an operator split the objects
//! of its controllers' kinds between them, with Kubernetes itself as the engine — Leases for
//! membership; for assignment, the apiserver's hash ranges (`shardSelector`) where it serves
//! them, else labels and label-selected watches.
//!
//! **Two modes** ([`ShardMode`], `--shard-mode`; decided and logged when the manager starts):
//! - **Hash ranges** ([`ranges`]), where the apiserver runs with the `ShardedListAndWatch`
//!   feature gate (alpha since Kubernetes 1.36): the apiserver hashes each object's UID (or
//!   namespace) and serves each replica's lists and watches only the objects of its ranges.
//!   The sharder assigns the 64 slots of the hash space to the members in the Lease
//!   `<group>-ranges`; a move is a change of that assignment — no object is written, no object
//!   carries a label of ours, and the sharder watches no object. A slot leaves a live member in
//!   two steps: marked moving, the member starts no more reconciles of its objects, waits for
//!   those running, and acknowledges the epoch on its membership Lease; only then does the
//!   sharder give the slot to its new member (see [`ranges::rebalance`]). From a member whose
//!   Lease expired, at once. The sharder assigns no range while a live member shards by labels
//!   (a release without range mode during a rolling upgrade): a new group's members serve
//!   nothing until then, and a group already in range mode keeps its ranges where they are.
//!   With UIDs hashed, owned kinds are not narrowed (children have UIDs of their own: each
//!   replica caches them all); with namespaces hashed, a namespace's objects and children go to
//!   one replica.
//! - **Labels** (the rest of these docs), where the gate is off: `auto`, the default, falls
//!   back to them; `ranges` refuses to start there.
//!
//! Turn it on with [`Manager::shards`](crate::manager::Manager::shards) (or `--shards <group>`
//! on the command line, [`crate::cli`]); it replaces leader election (each replica works, on
//! its own objects).
//!
//! ```no_run
//! use kubeforge::manager::Manager;
//! use kubeforge::shard::ShardConfig;
//!
//! # fn doc(client: kube::Client) {
//! let manager = Manager::new(client).shards(ShardConfig::new("my-operator", "operators"));
//! # }
//! ```
//!
//! **Membership.** Each replica of a sharded controller holds a membership Lease
//! (`<group>-<identity>`, labelled `shard.kubeforge.dev/group: <group>`), renewed like the
//! leader Lease; the live members are those whose Lease has not expired as observed by the
//! reader (client-go's observed-time rule, so no clock is compared across machines).
//!
//! **Assignment.** A consistent-hash [`Ring`] over the live members gives each object of the
//! sharded kind an owner; the assignment is written on the object as the label
//! `shard.kubeforge.dev/<group>: <member>`, and each replica's informers select only their own
//! label, so memory and watch traffic per replica shrink with the number of replicas. Owned and
//! watched kinds follow their owner's shard (the ring hashes the owner's key).
//!
//! **Handoff without two writers** ([`plan`]): an object moves away from a live owner only after
//! that owner acknowledged a drain mark (it stops, then removes its labels); from an owner whose
//! membership Lease expired, at once. The fence carries over from leader election: a replica's
//! controllers check *their membership Lease* before each reconcile and as each write leaves
//! (the `Gate` and the fenced client), so a replica frozen past its Lease writes nothing when it
//! thaws, and the sharder only reassigns its objects once that Lease has expired.
//!
//! **The sharder** runs under leader election on one replica: it watches the members' Leases and
//! the objects' labels (metadata only), and applies [`plan`]'s moves as label patches guarded by
//! the object's `resourceVersion`. A move refused for a conflict (the object changed since the
//! sharder's informer saw it — usually not its labels) is planned again at once from the object
//! as the apiserver has it, so objects that keep changing do not wait for a later pass; the
//! owner's drain acknowledgement does the same. Passes follow the objects' events, spaced by
//! their cost but never more than a retry period apart. Assignments are made first (an object
//! without a live owner is reconciled by nobody), drains last, and a pass starts moves for a
//! retry period (four round trips of the apiserver when it answers slower than that): the rest
//! are planned again by a pass at once, from fresher objects, so the drains the owners
//! acknowledged meanwhile are assigned without waiting for a long pass to end.

//!
//! **Failure cases.** A replica killed (`kill -9`): its Lease stops changing; a lease duration
//! after its last renewal was seen (at most a retry period after the renewal: the sharder lists
//! the Leases that often, and again the moment a Lease can have expired) the sharder assigns
//! all its objects to the others, in passes that follow each other at once, however much they
//! change meanwhile — the bound is
//! a lease duration plus a retry period after the last renewal, plus the time the label patches
//! take (its Lease stays behind, not live, until it is deleted). A Lease counts as unchanged
//! only from listings *sent* after its state was first seen, so a slow response never makes a
//! renewed Lease look expired. A replica frozen (SIGSTOP, a paused VM) past its renew deadline: its gate
//! closes before its Lease expires for the sharder, so when it thaws it writes nothing to the
//! objects it lost (and exits, as a leader that lost its Lease does). A clean shutdown releases
//! the Lease after the replica's last reconcile, and its objects move at once. The sharder killed
//! or frozen: another replica takes the sharder Lease after its duration; it starts by counting
//! every member as live for a whole lease duration, so it never moves objects away from a member
//! it has not watched long enough. A replica that loses the sharder Lease (its renewals came
//! late on a starved machine) and takes it back keeps what it observed before: a member it saw
//! gone stays gone (the observed-time rule holds across the gap) instead of being given objects
//! for another lease duration. The apiserver unreachable: no Lease can be listed, and a pass
//! without a fresh list declares nobody gone. Objects not moving while the sharder is away is
//! the cost: they stay with their owner, which keeps reconciling them.
//!
//! **What follows its owner.** Children written through the [`Context`](crate::controller::Context)
//! helpers (`apply_owned`, `create_owned`, declarative dependents) carry their owner's shard
//! label, and the informers of owned kinds are narrowed like the primary's, so each replica
//! caches only its own children; a child `create_owned` finds created by the owner's previous
//! shard is relabelled. A child written otherwise must carry the label
//! ([`Context::label_for_shard`](crate::controller::Context::label_for_shard)) to be seen. Kinds
//! a controller only `watches` are not sharded (each replica caches them whole). Watchers are not
//! sharded either (a watcher has no worker holding a key that could acknowledge a drain): a
//! sharded manager with a watcher refuses to run.
//!
//! **Identities** must be unique in the group (`$POD_NAME`): two processes with one identity
//! would both hold its Lease. The sharder deletes the Leases of members gone for ten lease
//! durations (a Deployment's replicas get new names at each rollout).

mod assign;
mod members;
mod membership;
mod metrics;
mod plan;
pub mod ranges;
mod ring;
mod sharder;

use std::sync::Arc;
use std::time::Duration;

pub(crate) use membership::Serving;
pub use membership::{DRAIN_LABEL_PREFIX, MEMBER_OF_LABEL, Membership, Mode, OWNER_LABEL_PREFIX};
pub use plan::{Move, Placement, plan};
pub use ranges::RangeKey;
pub use ring::Ring;

pub use assign::serves_shard_selectors;
pub(crate) use assign::{RangeMember, decide};
pub(crate) use metrics::ShardMetrics;
pub(crate) use sharder::Sharder;

use crate::leader::{LeaderElectionConfig, LeaderElectionError};

/// Options of a shard group: its name, where its Leases live, this replica's identity and the
/// Leases' timings (the same rules as leader election's, defaults 15 s / 10 s / 2 s).
#[derive(Clone, Debug)]
pub struct ShardConfig {
    /// The group's name (a DNS-1123 label of at most 63 characters): the label
    /// `shard.kubeforge.dev/<group>` and the Leases' names derive from it.
    pub group: String,
    /// The Leases' namespace, identity, timings and connection (its `lease_name` is unused).
    pub lease: LeaderElectionConfig,
    /// How objects are assigned to members (default: hash ranges of UIDs where the apiserver
    /// serves them, else labels).
    pub mode: ShardMode,
}

/// How a shard group assigns objects to its members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardMode {
    /// Hash ranges where the apiserver serves `shardSelector` (feature gate
    /// `ShardedListAndWatch`), labels where it does not (decided, and logged, when the manager
    /// starts). The default, with [`RangeKey::Uid`].
    Auto(RangeKey),
    /// Labels written on the objects (`shard.kubeforge.dev/<group>: <member>`).
    Labels,
    /// Hash ranges only: the manager fails to start where the apiserver ignores them.
    Ranges(RangeKey),
}

impl Default for ShardMode {
    fn default() -> Self {
        Self::Auto(RangeKey::Uid)
    }
}

impl std::str::FromStr for ShardMode {
    type Err = String;

    /// `auto`, `labels`, `ranges`, each range mode optionally with its key: `ranges:namespace`,
    /// `auto:uid`.
    fn from_str(text: &str) -> Result<Self, String> {
        let (mode, key) = text.split_once(':').unwrap_or((text, "uid"));
        let key = match key {
            "uid" => RangeKey::Uid,
            "namespace" => RangeKey::Namespace,
            other => {
                return Err(format!(
                    "unknown shard range key {other:?} (uid or namespace)"
                ));
            }
        };
        match mode {
            "auto" => Ok(Self::Auto(key)),
            "ranges" => Ok(Self::Ranges(key)),
            "labels" if !text.contains(':') => Ok(Self::Labels),
            _ => Err(format!(
                "unknown shard mode {text:?} (auto, labels, ranges; ranges and auto take :uid or :namespace)"
            )),
        }
    }
}

impl ShardConfig {
    /// A group named `group` whose Leases live in `namespace`; the identity is
    /// [`LeaderElectionConfig::new`]'s (`$POD_NAME`, or the host name with a random suffix).
    pub fn new(group: impl Into<String>, namespace: impl Into<String>) -> Self {
        let group = group.into();
        let lease = LeaderElectionConfig::new(group.clone(), namespace);
        Self {
            group,
            lease,
            mode: ShardMode::default(),
        }
    }

    /// Sets how objects are assigned ([`ShardMode`]; default hash ranges of UIDs where the
    /// apiserver serves them, else labels).
    #[must_use]
    pub fn mode(mut self, mode: ShardMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets this replica's identity (a label value: at most 63 characters of `[A-Za-z0-9_.-]`).
    #[must_use]
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.lease.identity = identity.into();
        self
    }

    /// Sets the Leases' timings (lease duration, renew deadline, retry period).
    #[must_use]
    pub fn timings(mut self, lease: Duration, renew: Duration, retry: Duration) -> Self {
        self.lease = self.lease.timings(lease, renew, retry);
        self
    }

    /// Renew the membership Lease, and the sharder's, each over a connection of its own (see
    /// [`LeaderElectionConfig::connection`]). Without it the sharder's renewals share the
    /// replica's connection with its controllers, and on a loaded machine they time out behind
    /// that traffic: each lost sharder Lease restarts the sharding (its informers list every
    /// object again, and the moves in flight are refused by its fence).
    #[must_use]
    pub fn connection(mut self, config: kube::Config) -> Self {
        self.lease = self.lease.connection(config);
        self
    }

    /// This replica's membership (what its controllers are wired with).
    pub(crate) fn membership(&self) -> Arc<Membership> {
        Arc::new(Membership::new(&self.group, &self.lease.identity))
    }

    /// The election of this replica's membership Lease, `<group>-member-<identity>`, labelled
    /// with the group: held by this replica alone, it is "won" at once, and renewed like a
    /// leader's; its validity is the gate of every reconcile and write of this replica.
    pub(crate) fn member_election(&self) -> Result<LeaderElectionConfig, LeaderElectionError> {
        self.validate()?;
        let mut election = self.lease.clone();
        election.lease_name = format!(
            "{}-member-{}",
            self.group,
            membership::dns_fragment(&self.lease.identity)
        );
        election.labels = [(MEMBER_OF_LABEL.to_owned(), self.group.clone())].into();
        Ok(election)
    }

    /// The sharder's election: Lease `<group>-sharder`, over a connection of its own when one
    /// is configured (as the membership's).
    pub(crate) fn sharder_election(&self) -> LeaderElectionConfig {
        let mut election = self.lease.clone();
        election.lease_name = format!("{}-sharder", self.group);
        election
    }

    /// Checks the group, the identity and the timings (what the manager would refuse when it
    /// runs).
    ///
    /// # Errors
    ///
    /// [`LeaderElectionError::InvalidConfig`] naming what is wrong.
    pub fn check(&self) -> Result<(), LeaderElectionError> {
        self.member_election()?.validate()
    }

    fn validate(&self) -> Result<(), LeaderElectionError> {
        let invalid = |message: String| Err(LeaderElectionError::InvalidConfig(message));
        let group = &self.group;
        let dns_label = !group.is_empty()
            && group.len() <= 63
            && group
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !group.starts_with('-')
            && !group.ends_with('-');
        if !dns_label {
            return invalid(format!(
                "shard group {group:?} must be a DNS-1123 label (lower-case alphanumerics and '-', at most 63)"
            ));
        }
        if !membership::valid_label_value(&self.lease.identity) {
            return invalid(format!(
                "shard member identity {:?} must be a label value (at most 63 of [A-Za-z0-9_.-], alphanumeric at both ends)",
                self.lease.identity
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_should_name_the_leases_after_the_group_and_refuse_bad_names() {
        let config = ShardConfig::new("web", "ops").identity("Host_1");
        let member = config.member_election().expect("valid");
        assert_eq!(member.lease_name, "web-member-host-1");
        assert_eq!(member.identity, "Host_1");
        assert_eq!(
            member.labels.get(MEMBER_OF_LABEL).map(String::as_str),
            Some("web")
        );
        assert_eq!(config.sharder_election().lease_name, "web-sharder");
        assert!(
            ShardConfig::new("Web", "ops")
                .identity("a")
                .member_election()
                .is_err()
        );
        assert!(
            ShardConfig::new("web", "ops")
                .identity("a/b")
                .member_election()
                .is_err()
        );
    }
}
