//! Server-side sharding: the hash ranges of Kubernetes' `shardSelector` (the
//! `ShardedListAndWatch` feature gate, alpha since 1.36), and the assignment of those ranges to
//! the members of a shard group.
//!
//! The apiserver hashes a field of each object (`object.metadata.uid`, or
//! `object.metadata.namespace`) with 64-bit FNV-1a and serves a list or watch only the objects
//! whose hash falls in the ranges of the request's `shardSelector`
//! (`shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || ...`).
//! The group splits the hash space into [`SLOTS`] equal slots; the sharder writes which member
//! serves each slot in the group's assignment (an annotation of the Lease
//! `<group>-ranges`), and each member watches the union of its slots. A move is a change of
//! that assignment: no object is written.
//!
//! **No two owners** ([`rebalance`]): a slot leaves a live member in two steps. The sharder marks
//! it [`Slot::Moving`] at a new epoch; the member stops starting reconciles of its objects,
//! waits for those running to end, and acknowledges the epoch on its membership Lease; only
//! then does the sharder give the slot to its new member. A member whose Lease expired loses
//! its slots at once (its own fence closed before that: see [`crate::shard`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The number of equal slots the 64-bit hash space is split into (each `2^58` hashes wide).
pub const SLOTS: usize = 64;

/// The annotation of the ranges Lease holding the assignment (JSON, [`Assignment`]).
pub const ASSIGNMENT_ANNOTATION: &str = "shard.kubeforge.dev/assignment";
/// The annotation of a member's Lease: the last assignment epoch it has fully applied (its
/// drains done).
pub const ACKED_ANNOTATION: &str = "shard.kubeforge.dev/acked-epoch";
/// The annotation of a member's Lease: its mode (`ranges` or `labels`; absent on releases
/// without range mode, which shard by labels).
pub const MODE_ANNOTATION: &str = "shard.kubeforge.dev/mode";
/// The annotation of a member's Lease: the slots it serves (a 64-bit mask in hex; informative).
pub const SERVING_ANNOTATION: &str = "shard.kubeforge.dev/slots";

/// The field the apiserver hashes to place an object in a range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RangeKey {
    /// `object.metadata.uid`: objects spread evenly whatever their namespaces. Owned objects
    /// have UIDs of their own, so their informers are not narrowed (each replica caches them
    /// all; an event of a child owned by another replica's object finds no owner in the cache).
    #[default]
    Uid,
    /// `object.metadata.namespace`: a namespace's objects, owned ones included, go to one
    /// replica (as even as the namespaces are; a cluster-scoped kind has one namespace, "").
    Namespace,
}

impl RangeKey {
    /// The field path of the selector.
    pub fn field(self) -> &'static str {
        match self {
            Self::Uid => "object.metadata.uid",
            Self::Namespace => "object.metadata.namespace",
        }
    }

    /// The value the apiserver hashes for an object with this UID and namespace.
    pub fn value<'a>(self, uid: Option<&'a str>, namespace: Option<&'a str>) -> &'a str {
        match self {
            Self::Uid => uid.unwrap_or_default(),
            Self::Namespace => namespace.unwrap_or_default(),
        }
    }
}

/// 64-bit FNV-1a, the apiserver's shard hash.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The slot of a hash.
pub fn slot_of(hash: u64) -> usize {
    // SLOTS = 64 = 2^6: the top six bits.
    usize::try_from(hash >> 58).unwrap_or(0)
}

/// A set of slots (bit `i`: slot `i`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SlotSet(pub u64);

impl SlotSet {
    /// Every slot.
    pub const ALL: SlotSet = SlotSet(u64::MAX);

    /// Whether `slot` is in the set.
    pub fn contains(self, slot: usize) -> bool {
        slot < SLOTS && self.0 & (1 << slot) != 0
    }

    /// The set with `slot` added.
    #[must_use]
    pub fn with(self, slot: usize) -> SlotSet {
        SlotSet(self.0 | (1 << slot))
    }

    /// The slots in `self` and not in `other`.
    #[must_use]
    pub fn minus(self, other: SlotSet) -> SlotSet {
        SlotSet(self.0 & !other.0)
    }

    /// How many slots.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The slots, in order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        (0..SLOTS).filter(move |&slot| self.contains(slot))
    }

    /// The `shardSelector` serving exactly these slots (adjacent slots merged into one range).
    /// An empty set selects the single hash 0 — the apiserver refuses an empty selector, and
    /// the worker's own check refuses that object should one ever hash there.
    pub fn selector(self, key: RangeKey) -> String {
        let field = key.field();
        let bound = |slot: usize| -> String {
            if slot >= SLOTS {
                "0x10000000000000000".to_owned()
            } else {
                format!("0x{:016x}", (slot as u64) << 58)
            }
        };
        if self.is_empty() {
            return format!("shardRange({field}, '0x0000000000000000', '0x0000000000000001')");
        }
        let mut out = String::new();
        let mut slot = 0;
        while slot < SLOTS {
            if !self.contains(slot) {
                slot += 1;
                continue;
            }
            let start = slot;
            while slot < SLOTS && self.contains(slot) {
                slot += 1;
            }
            if !out.is_empty() {
                out.push_str(" || ");
            }
            let _ = write!(
                out,
                "shardRange({field}, '{}', '{}')",
                bound(start),
                bound(slot)
            );
        }
        out
    }
}

/// Who serves a slot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Slot {
    /// Nobody (no member was live when it was last assigned).
    #[default]
    Free,
    /// `member` serves it.
    Owned {
        /// The member.
        member: String,
    },
    /// Leaving `from` (which serves none of its objects any more once it acknowledged epoch
    /// `since`) for `to`.
    Moving {
        /// The member it leaves.
        from: String,
        /// The member it goes to.
        to: String,
        /// The epoch at which it started to move.
        since: u64,
    },
}

impl Slot {
    /// The member allowed to serve the slot now.
    pub fn server(&self) -> Option<&str> {
        match self {
            Self::Owned { member } => Some(member),
            Self::Free | Self::Moving { .. } => None,
        }
    }
}

/// The assignment of the slots of one group, as the sharder writes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    /// Grows by one at each change.
    pub epoch: u64,
    /// The hashed field.
    pub key: RangeKey,
    /// Slot `i`'s state (`SLOTS` of them).
    pub slots: Vec<Slot>,
}

impl Assignment {
    /// An assignment where every slot is free.
    pub fn empty(key: RangeKey) -> Self {
        Self {
            epoch: 0,
            key,
            slots: vec![Slot::Free; SLOTS],
        }
    }

    /// The slots `member` may serve.
    pub fn served_by(&self, member: &str) -> SlotSet {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.server() == Some(member))
            .fold(SlotSet::default(), |set, (i, _)| set.with(i))
    }

    /// How many slots each member serves, or will once its moves complete.
    fn targets(&self) -> BTreeMap<&str, usize> {
        let mut counts = BTreeMap::new();
        for slot in &self.slots {
            match slot {
                Slot::Owned { member } | Slot::Moving { to: member, .. } => {
                    *counts.entry(member.as_str()).or_insert(0) += 1;
                }
                Slot::Free => {}
            }
        }
        counts
    }
}

/// What the sharder knows of a live member: the last epoch it acknowledged.
pub type Acked = BTreeMap<String, u64>;

/// The next assignment from `current` for the `live` members (with their acknowledged epochs),
/// or `None` when nothing changes. Each slot ends up with one target member, the targets
/// balanced (every member within one slot of the others) with as few moves as possible; a slot
/// whose server is live moves in two steps (`Moving`, then `Owned` once the server
/// acknowledged), from a member that is gone in one.
pub fn rebalance(
    current: &Assignment,
    live: &BTreeSet<String>,
    acked: &Acked,
) -> Option<Assignment> {
    let mut next = current.clone();
    next.slots.resize(SLOTS, Slot::Free);
    let epoch = current.epoch + 1;
    // 1. Complete the moves whose source let go (or is gone); cancel those whose target is gone.
    for slot in &mut next.slots {
        if let Slot::Moving { from, to, since } = slot {
            let released = !live.contains(from.as_str())
                || acked.get(from.as_str()).is_some_and(|a| a >= since);
            if released {
                *slot = if live.contains(to.as_str()) {
                    Slot::Owned { member: to.clone() }
                } else {
                    Slot::Free
                };
            }
        }
    }
    // 2. Slots of members that are gone are free (a slot still moving away from a live member
    //    whose target went keeps moving; its target is chosen again below).
    for slot in &mut next.slots {
        if let Slot::Owned { member } = slot
            && !live.contains(member.as_str())
        {
            *slot = Slot::Free;
        }
    }
    // 3. Balance the targets: each live member gets `base` slots, the first `extra` of them
    //    (those holding the most now, then by name) one more.
    if !live.is_empty() {
        let n = live.len();
        let (base, extra) = (SLOTS / n, SLOTS % n);
        let counts = next.targets();
        let mut order: Vec<&String> = live.iter().collect();
        order.sort_by_key(|m| {
            (
                std::cmp::Reverse(counts.get(m.as_str()).copied().unwrap_or(0)),
                *m,
            )
        });
        let quota: BTreeMap<String, usize> = order
            .iter()
            .enumerate()
            .map(|(i, m)| ((*m).clone(), base + usize::from(i < extra)))
            .collect();
        let mut have: BTreeMap<String, usize> = live.iter().map(|m| (m.clone(), 0)).collect();
        // Targets over quota give up their highest slots; every target is counted.
        let mut pool = Vec::new();
        for (i, slot) in next.slots.iter().enumerate() {
            let target = match slot {
                Slot::Owned { member } | Slot::Moving { to: member, .. } => member,
                Slot::Free => {
                    pool.push(i);
                    continue;
                }
            };
            let held = have.entry(target.clone()).or_insert(0);
            *held += 1;
        }
        for (member, held) in &mut have {
            let mut over = held.saturating_sub(quota.get(member).copied().unwrap_or(0));
            for i in (0..SLOTS).rev() {
                if over == 0 {
                    break;
                }
                let target = match &next.slots[i] {
                    Slot::Owned { member: m } | Slot::Moving { to: m, .. } => m,
                    Slot::Free => continue,
                };
                if target == member {
                    pool.push(i);
                    over -= 1;
                    *held -= 1;
                }
            }
        }
        pool.sort_unstable();
        let mut pool = pool.into_iter();
        for member in live {
            let want = quota.get(member).copied().unwrap_or(0);
            let held = have.get(member).copied().unwrap_or(0);
            for _ in held..want {
                let Some(i) = pool.next() else { break };
                next.slots[i] = retarget(&next.slots[i], member, epoch);
            }
        }
    } else {
        // Nobody live: every slot that can be freed is (moves from a live source cannot exist).
        for slot in &mut next.slots {
            if !matches!(slot, Slot::Moving { .. }) {
                *slot = Slot::Free;
            }
        }
    }
    if next.slots == current.slots && next.key == current.key {
        return None;
    }
    next.epoch = epoch;
    Some(next)
}

/// `slot` given to `member` at `epoch`: at once when nobody serves it, else a move from its
/// server (a move back to its source is no move).
fn retarget(slot: &Slot, member: &str, epoch: u64) -> Slot {
    match slot {
        Slot::Free => Slot::Owned {
            member: member.to_owned(),
        },
        Slot::Owned { member: from } | Slot::Moving { from, .. } if from == member => Slot::Owned {
            member: member.to_owned(),
        },
        Slot::Owned { member: from } => Slot::Moving {
            from: from.clone(),
            to: member.to_owned(),
            since: epoch,
        },
        Slot::Moving { from, since, .. } => Slot::Moving {
            from: from.clone(),
            to: member.to_owned(),
            since: *since,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(members: &[&str]) -> BTreeSet<String> {
        members.iter().map(|m| (*m).to_owned()).collect()
    }

    fn acked(pairs: &[(&str, u64)]) -> Acked {
        pairs.iter().map(|(m, e)| ((*m).to_owned(), *e)).collect()
    }

    fn count(a: &Assignment, member: &str) -> usize {
        a.served_by(member).len()
    }

    #[test]
    fn the_hash_should_be_the_apiservers() {
        // Go: fnv.New64a over "" and "a" (hash/fnv test vectors).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(slot_of(0), 0);
        assert_eq!(slot_of(u64::MAX), 63);
        assert_eq!(slot_of(1 << 58), 1);
    }

    #[test]
    fn selectors_should_merge_adjacent_slots() {
        assert_eq!(
            SlotSet::ALL.selector(RangeKey::Uid),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
        );
        let set = SlotSet::default().with(0).with(1).with(63);
        assert_eq!(
            set.selector(RangeKey::Namespace),
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x0800000000000000') \
             || shardRange(object.metadata.namespace, '0xfc00000000000000', '0x10000000000000000')"
        );
        assert!(
            SlotSet::default()
                .selector(RangeKey::Uid)
                .contains("'0x0000000000000001'")
        );
    }

    #[test]
    fn a_first_assignment_should_give_free_slots_at_once_and_evenly() {
        let a = rebalance(
            &Assignment::empty(RangeKey::Uid),
            &live(&["a", "b", "c"]),
            &Acked::new(),
        )
        .expect("changed");
        assert_eq!(a.epoch, 1);
        assert!(a.slots.iter().all(|s| s.server().is_some()));
        let counts: Vec<usize> = ["a", "b", "c"].iter().map(|m| count(&a, m)).collect();
        assert_eq!(counts.iter().sum::<usize>(), SLOTS);
        assert!(counts.iter().all(|&c| c == 21 || c == 22), "{counts:?}");
        assert_eq!(rebalance(&a, &live(&["a", "b", "c"]), &Acked::new()), None);
    }

    #[test]
    fn a_joining_member_should_get_slots_only_after_their_server_acknowledged() {
        let one = rebalance(
            &Assignment::empty(RangeKey::Uid),
            &live(&["a"]),
            &Acked::new(),
        )
        .expect("changed");
        assert_eq!(count(&one, "a"), SLOTS);
        let moving = rebalance(&one, &live(&["a", "b"]), &acked(&[("a", 1)])).expect("changed");
        assert_eq!(moving.epoch, 2);
        // Half the slots leave `a`; nobody serves them until `a` acknowledges epoch 2.
        assert_eq!(count(&moving, "a"), 32);
        assert_eq!(count(&moving, "b"), 0);
        assert_eq!(
            rebalance(&moving, &live(&["a", "b"]), &acked(&[("a", 1), ("b", 2)])),
            None,
            "nothing may change before `a` acknowledged"
        );
        let done = rebalance(&moving, &live(&["a", "b"]), &acked(&[("a", 2)])).expect("changed");
        assert_eq!((count(&done, "a"), count(&done, "b")), (32, 32));
        // Only slots `a` gave up went to `b`.
        for (before, after) in one.slots.iter().zip(&done.slots) {
            assert!(before.server() == after.server() || after.server() == Some("b"));
        }
    }

    #[test]
    fn a_member_gone_should_lose_its_slots_at_once_even_while_they_move() {
        let two = rebalance(
            &Assignment::empty(RangeKey::Uid),
            &live(&["a", "b"]),
            &Acked::new(),
        )
        .expect("changed");
        let moving = rebalance(&two, &live(&["a", "b", "c"]), &Acked::new()).expect("changed");
        assert!(
            moving
                .slots
                .iter()
                .any(|s| matches!(s, Slot::Moving { .. }))
        );
        // `a` is gone: its slots, and those moving away from it, go to the others at once.
        let after = rebalance(&moving, &live(&["b", "c"]), &Acked::new()).expect("changed");
        assert!(
            after
                .slots
                .iter()
                .all(|s| !matches!(s, Slot::Moving { from, .. } if from == "a"))
        );
        assert!(after.slots.iter().all(|s| s.server() != Some("a")));
        // `b`'s own moves to `c` still wait for `b`.
        let waiting = after
            .slots
            .iter()
            .filter(|s| matches!(s, Slot::Moving { from, .. } if from == "b"))
            .count();
        assert_eq!(count(&after, "b") + count(&after, "c") + waiting, SLOTS);
        let settled =
            rebalance(&after, &live(&["b", "c"]), &acked(&[("b", after.epoch)])).expect("changed");
        assert_eq!((count(&settled, "b"), count(&settled, "c")), (32, 32));
    }

    #[test]
    fn a_move_whose_target_leaves_should_go_back_or_elsewhere() {
        let one = rebalance(
            &Assignment::empty(RangeKey::Uid),
            &live(&["a"]),
            &Acked::new(),
        )
        .expect("changed");
        let moving = rebalance(&one, &live(&["a", "b"]), &Acked::new()).expect("changed");
        // `b` is gone before `a` let go: the slots stay with `a`, no move left.
        let back = rebalance(&moving, &live(&["a"]), &Acked::new()).expect("changed");
        assert_eq!(count(&back, "a"), SLOTS);
        assert!(back.slots.iter().all(|s| matches!(s, Slot::Owned { .. })));
    }

    #[test]
    fn the_assignment_should_round_trip_as_json() {
        let a = rebalance(
            &Assignment::empty(RangeKey::Namespace),
            &live(&["a"]),
            &Acked::new(),
        )
        .expect("changed");
        let text = serde_json::to_string(&a).expect("json");
        assert!(text.contains(r#""key":"namespace""#), "{text}");
        assert_eq!(serde_json::from_str::<Assignment>(&text).expect("parse"), a);
    }
}
