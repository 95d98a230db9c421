//! Active-active sharding across replicas (#19) — the pure parts so far: the ring and the
//! sharder's plan. Not wired into the manager yet; what follows is the design they serve.
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
//! the object's `resourceVersion`.

mod plan;
mod ring;

pub use plan::{Move, Placement, plan};
pub use ring::Ring;
