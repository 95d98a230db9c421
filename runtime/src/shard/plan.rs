//! What the sharder does about each object, given where the ring wants it and where it is: the
//! handoff protocol, as a pure function.
//!
//! An object is labelled with its owner (`shard.kubeforge.dev/<group>: <member>`); an owner
//! reconciles only objects labelled with its name and not marked for draining. When the ring
//! wants an object elsewhere:
//!
//! - unlabelled, or labelled with a member that is not live (its membership Lease expired — it
//!   has stopped writing, see the fence in the module docs): **assign** it to the ring's choice;
//! - labelled with a live member: **drain** it (`drain.shard.kubeforge.dev/<group>: "true"`); the
//!   owner finishes the reconcile in flight, stops, and acknowledges by removing both labels —
//!   the object is then unlabelled and assigned on the next pass. Until then nobody else works on
//!   it, so at no time do two replicas reconcile it.
//!
//! A drained object the ring wants back with its owner (membership changed again) is
//! **undrained** instead of making a round trip.

use std::collections::HashSet;

use super::ring::Ring;

/// Where an object is: its key (what the ring hashes), its owner label and its drain mark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// `namespace/name` (or an owner's key, for children that follow their owner).
    pub key: String,
    /// The member named by the shard label, if any.
    pub owner: Option<String>,
    /// Whether the drain label is set.
    pub draining: bool,
}

/// One step of the sharder on one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Move {
    /// Label the object with `to` (it was unlabelled, or its owner is gone).
    Assign {
        /// The object's key.
        key: String,
        /// The member it goes to.
        to: String,
    },
    /// Ask `from`, live, to let the object go.
    Drain {
        /// The object's key.
        key: String,
        /// Its owner.
        from: String,
    },
    /// Take the drain mark off: the ring wants it with its owner again.
    Undrain {
        /// The object's key.
        key: String,
    },
}

/// The moves that bring `objects` to where `ring` wants them, given the `live` members.
pub fn plan(objects: &[Placement], ring: &Ring, live: &HashSet<String>) -> Vec<Move> {
    let mut moves = Vec::new();
    for object in objects {
        let Some(wanted) = ring.owner(&object.key) else {
            continue;
        };
        let key = || object.key.clone();
        match &object.owner {
            None => moves.push(Move::Assign {
                key: key(),
                to: wanted.to_owned(),
            }),
            Some(owner) if owner == wanted => {
                if object.draining {
                    moves.push(Move::Undrain { key: key() });
                }
            }
            Some(owner) if !live.contains(owner) => moves.push(Move::Assign {
                key: key(),
                to: wanted.to_owned(),
            }),
            Some(owner) if !object.draining => moves.push(Move::Drain {
                key: key(),
                from: owner.clone(),
            }),
            // Draining: the owner has not acknowledged yet.
            Some(_) => {}
        }
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(key: &str, owner: Option<&str>, draining: bool) -> Placement {
        Placement {
            key: key.to_owned(),
            owner: owner.map(str::to_owned),
            draining,
        }
    }

    fn live(members: &[&str]) -> HashSet<String> {
        members.iter().map(|m| (*m).to_owned()).collect()
    }

    /// A key the ring gives to `member`, and the first other member.
    fn key_of(ring: &Ring, member: &str) -> String {
        (0..)
            .map(|i| format!("ns/o{i}"))
            .find(|k| ring.owner(k) == Some(member))
            .unwrap_or_default()
    }

    #[test]
    fn plan_should_assign_unlabelled_objects_and_leave_placed_ones() {
        let ring = Ring::new(["a", "b"]);
        let (ka, kb) = (key_of(&ring, "a"), key_of(&ring, "b"));
        let moves = plan(
            &[at(&ka, None, false), at(&kb, Some("b"), false)],
            &ring,
            &live(&["a", "b"]),
        );
        assert_eq!(
            moves,
            [Move::Assign {
                key: ka,
                to: "a".into()
            }]
        );
    }

    #[test]
    fn plan_should_drain_from_a_live_owner_and_wait_for_its_acknowledgement() {
        let ring = Ring::new(["a", "b"]);
        let ka = key_of(&ring, "a");
        // b holds an object the ring now gives to a: drain it, then wait.
        let first = plan(&[at(&ka, Some("b"), false)], &ring, &live(&["a", "b"]));
        assert_eq!(
            first,
            [Move::Drain {
                key: ka.clone(),
                from: "b".into()
            }]
        );
        let waiting = plan(&[at(&ka, Some("b"), true)], &ring, &live(&["a", "b"]));
        assert!(waiting.is_empty(), "{waiting:?}");
        // b acknowledged (labels removed): assign.
        let acknowledged = plan(&[at(&ka, None, false)], &ring, &live(&["a", "b"]));
        assert_eq!(
            acknowledged,
            [Move::Assign {
                key: ka,
                to: "a".into()
            }]
        );
    }

    #[test]
    fn plan_should_reassign_at_once_from_a_member_that_is_gone() {
        let ring = Ring::new(["a"]);
        let ka = key_of(&ring, "a");
        for draining in [false, true] {
            let moves = plan(&[at(&ka, Some("dead"), draining)], &ring, &live(&["a"]));
            assert_eq!(
                moves,
                [Move::Assign {
                    key: ka.clone(),
                    to: "a".into()
                }]
            );
        }
    }

    #[test]
    fn plan_should_undrain_an_object_the_ring_gives_back_to_its_owner() {
        let ring = Ring::new(["a", "b"]);
        let ka = key_of(&ring, "a");
        let moves = plan(&[at(&ka, Some("a"), true)], &ring, &live(&["a", "b"]));
        assert_eq!(moves, [Move::Undrain { key: ka }]);
        assert!(plan(&[at("x/y", None, false)], &Ring::default(), &live(&[])).is_empty());
    }
}
