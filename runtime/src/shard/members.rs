//! Which members of a shard group are live, from their Leases, by client-go's observed-time rule:
//! a member is live until its Lease has shown no change for its lease duration *on the
//! observer's clock*, counted from when the observer first saw the current state. No timestamp is
//! compared across machines, and an observer that just started counts every held Lease as fresh
//! (it waits a whole lease duration before it declares anyone gone).
//!
//! Both ends of that duration are taken on the safe side of a listing's round trip: a state is
//! first seen when the response that shows it *arrived*, and it is shown unchanged as of when a
//! later listing was *sent* (the apiserver read it after that). A slow response (an overloaded
//! apiserver, a connection stalled behind other traffic) therefore never makes a Lease that
//! was renewed meanwhile look expired: a member is declared gone only by a listing sent a whole
//! lease duration after its current state was first seen.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::time::Instant;

/// What the observer last saw of one Lease, and since when.
#[derive(Clone, Debug)]
struct Seen {
    resource_version: Option<String>,
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    duration: Duration,
    /// When the response that first showed this state arrived.
    since: Instant,
    /// When the last listing that still showed it was sent.
    confirmed: Instant,
}

impl Seen {
    /// Held, and not shown unchanged by a listing sent a lease duration after it was first seen.
    fn live(&self) -> bool {
        self.holder.is_some() && self.confirmed < self.since + self.duration
    }
}

/// One listing of the Leases: when its request was sent and when its response arrived.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Listing {
    pub(crate) sent: Instant,
    pub(crate) received: Instant,
}

/// The members' Leases as observed (see the [module docs](self)).
#[derive(Clone, Debug, Default)]
pub(crate) struct LiveMembers {
    seen: HashMap<String, Seen>,
}

impl LiveMembers {
    /// Records the Leases of one listing; Leases no longer listed are forgotten.
    pub(crate) fn observe(&mut self, leases: &[Lease], listing: Listing, default: Duration) {
        let mut listed = HashSet::new();
        for lease in leases {
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            let spec = lease.spec.clone().unwrap_or_default();
            let holder = spec.holder_identity.filter(|h| !h.is_empty());
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(default, Duration::from_secs);
            let changed = self
                .seen
                .get(&name)
                .is_none_or(|seen| seen.holder != holder || seen.renew_time != spec.renew_time);
            if changed {
                self.seen.insert(
                    name.clone(),
                    Seen {
                        resource_version: lease.metadata.resource_version.clone(),
                        holder,
                        renew_time: spec.renew_time,
                        duration,
                        since: listing.received,
                        confirmed: listing.sent,
                    },
                );
            } else if let Some(seen) = self.seen.get_mut(&name) {
                seen.duration = duration;
                seen.resource_version = lease.metadata.resource_version.clone();
                seen.confirmed = seen.confirmed.max(listing.sent);
            }
            listed.insert(name);
        }
        self.seen.retain(|name, _| listed.contains(name));
    }

    /// (name, resourceVersion) of the Leases shown unchanged `factor` of their durations after
    /// they were first seen: their members are long gone.
    pub(crate) fn departed(&self, factor: u32) -> Vec<(String, String)> {
        self.seen
            .values()
            .zip(self.seen.keys())
            .filter(|(seen, _)| {
                seen.confirmed.saturating_duration_since(seen.since) >= seen.duration * factor
            })
            .filter_map(|(seen, name)| Some((name.clone(), seen.resource_version.clone()?)))
            .collect()
    }

    /// The live members: each one's Lease is held and no listing sent a lease duration after
    /// its current state was first seen has shown it unchanged.
    pub(crate) fn live(&self) -> HashSet<String> {
        self.seen
            .values()
            .filter(|seen| seen.live())
            .filter_map(|seen| seen.holder.clone())
            .collect()
    }

    /// When a listing sent then could first show a live member gone (the earliest of their
    /// states' first sight plus their durations), if any member is live.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.seen
            .values()
            .filter(|seen| seen.live())
            .map(|seen| seen.since + seen.duration)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::jiff::Timestamp;
    use kube::api::ObjectMeta;

    use super::*;

    fn lease(name: &str, holder: Option<&str>, renewed: i64) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(Into::into),
                lease_duration_seconds: Some(6),
                renew_time: Some(MicroTime(
                    Timestamp::from_second(renewed).expect("valid timestamp"),
                )),
                ..LeaseSpec::default()
            }),
        }
    }

    /// A listing sent at `at` whose response arrived `rtt` later.
    fn listing(at: Instant, rtt: Duration) -> Listing {
        Listing {
            sent: at,
            received: at + rtt,
        }
    }

    #[test]
    fn a_member_should_stay_live_until_its_lease_has_not_changed_for_its_duration() {
        let start = Instant::now();
        let s = Duration::from_secs;
        let at = |secs| listing(start + s(secs), Duration::ZERO);
        let mut members = LiveMembers::default();
        let default = s(15);
        // First seen: live for a whole duration, however old its renew time looks.
        members.observe(
            &[lease("a", Some("a"), 1), lease("b", Some("b"), 1)],
            at(0),
            default,
        );
        // `a` renews, `b` does not.
        members.observe(
            &[lease("a", Some("a"), 4), lease("b", Some("b"), 1)],
            at(4),
            default,
        );
        assert_eq!(members.live().len(), 2);
        assert_eq!(members.next_expiry(), Some(start + s(6)));
        members.observe(
            &[lease("a", Some("a"), 4), lease("b", Some("b"), 1)],
            at(7),
            default,
        );
        let live = members.live();
        assert!(live.contains("a") && !live.contains("b"), "{live:?}");
        assert_eq!(members.next_expiry(), Some(start + s(10)));
        // A released Lease (no holder) is nobody's, and a Lease that is gone is forgotten.
        members.observe(&[lease("a", None, 8)], at(8), default);
        assert!(members.live().is_empty());
        assert_eq!(members.next_expiry(), None);
        // `b` comes back: fresh again, until a listing sent a duration later shows it unchanged.
        members.observe(&[lease("b", Some("b"), 9)], at(9), default);
        members.observe(&[lease("b", Some("b"), 9)], at(14), default);
        assert_eq!(members.live(), HashSet::from(["b".to_owned()]));
        assert_eq!(members.next_expiry(), Some(start + s(15)));
        members.observe(&[lease("b", Some("b"), 9)], at(15), default);
        assert!(members.live().is_empty());
        // Unchanged for ten durations: departed.
        members.observe(&[lease("b", Some("b"), 9)], at(68), default);
        assert!(members.departed(10).is_empty());
        members.observe(&[lease("b", Some("b"), 9)], at(69), default);
        assert_eq!(members.departed(10), vec![("b".to_owned(), "7".to_owned())]);
    }

    #[test]
    fn a_slow_listing_should_not_make_a_renewed_lease_look_expired() {
        let start = Instant::now();
        let s = Duration::from_secs;
        let mut members = LiveMembers::default();
        members.observe(&[lease("a", Some("a"), 1)], listing(start, s(0)), s(6));
        // Sent at 1 s, its response held up for 9 s (the member renewed meanwhile, but this
        // listing read the Lease before): arriving at 10 s, it does not show `a` gone.
        members.observe(
            &[lease("a", Some("a"), 1)],
            listing(start + s(1), s(9)),
            s(6),
        );
        assert_eq!(members.live(), HashSet::from(["a".to_owned()]));
        // A listing sent at 6 s that still shows the same state does.
        members.observe(
            &[lease("a", Some("a"), 1)],
            listing(start + s(6), s(1)),
            s(6),
        );
        assert!(members.live().is_empty());
        // Renewed, seen in a response that arrived late: fresh from its arrival.
        members.observe(
            &[lease("a", Some("a"), 7)],
            listing(start + s(7), s(5)),
            s(6),
        );
        members.observe(
            &[lease("a", Some("a"), 7)],
            listing(start + s(17), s(0)),
            s(6),
        );
        assert_eq!(members.live(), HashSet::from(["a".to_owned()]));
        assert_eq!(members.next_expiry(), Some(start + s(18)));
    }

    #[test]
    fn observations_kept_across_a_gap_should_still_count_a_member_gone() {
        // What a sharder saw in its last term carries over to its next one (kept by the
        // replica, `Sharder::observed`): listings stopped while it did not hold its Lease.
        let start = Instant::now();
        let s = Duration::from_secs;
        let mut kept = LiveMembers::default();
        kept.observe(
            &[lease("a", Some("a"), 1), lease("b", Some("b"), 1)],
            listing(start, s(0)),
            s(6),
        );
        let mut members = kept.clone();
        // Twenty seconds later, in its next term: `a` renewed meanwhile (fresh from now), `b`
        // did not (gone at once, not a lease duration from now as for a new observer).
        members.observe(
            &[lease("a", Some("a"), 19), lease("b", Some("b"), 1)],
            listing(start + s(20), s(1)),
            s(6),
        );
        assert_eq!(members.live(), HashSet::from(["a".to_owned()]));
        assert_eq!(members.next_expiry(), Some(start + s(27)));
        let mut fresh = LiveMembers::default();
        fresh.observe(
            &[lease("a", Some("a"), 19), lease("b", Some("b"), 1)],
            listing(start + s(20), s(1)),
            s(6),
        );
        assert_eq!(fresh.live().len(), 2, "a new observer counts both live");
    }
}
