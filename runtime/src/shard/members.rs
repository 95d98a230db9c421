//! Which members of a shard group are live, from their Leases, by client-go's observed-time rule:
//! a member is live until its Lease has shown no change for its lease duration *on the
//! observer's clock*, counted from when the observer first saw the current state. No timestamp is
//! compared across machines, and an observer that just started counts every held Lease as fresh
//! (it waits a whole lease duration before it declares anyone gone).

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
    since: Instant,
}

/// The members' Leases as observed (see the [module docs](self)).
#[derive(Debug, Default)]
pub(crate) struct LiveMembers {
    seen: HashMap<String, Seen>,
}

impl LiveMembers {
    /// Records the Leases of one list at `now`; Leases no longer listed are forgotten.
    pub(crate) fn observe(&mut self, leases: &[Lease], now: Instant, default: Duration) {
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
                        since: now,
                    },
                );
            } else if let Some(seen) = self.seen.get_mut(&name) {
                seen.duration = duration;
                seen.resource_version = lease.metadata.resource_version.clone();
            }
            listed.insert(name);
        }
        self.seen.retain(|name, _| listed.contains(name));
    }

    /// (name, resourceVersion) of the Leases unchanged for `factor` of their durations before
    /// `now`: their members are long gone.
    pub(crate) fn departed(&self, now: Instant, factor: u32) -> Vec<(String, String)> {
        self.seen
            .iter()
            .filter(|(_, seen)| now.saturating_duration_since(seen.since) >= seen.duration * factor)
            .filter_map(|(name, seen)| Some((name.clone(), seen.resource_version.clone()?)))
            .collect()
    }

    /// The members whose Lease is held and has changed within its duration before `now`.
    pub(crate) fn live(&self, now: Instant) -> HashSet<String> {
        self.seen
            .values()
            .filter(|seen| now.saturating_duration_since(seen.since) < seen.duration)
            .filter_map(|seen| seen.holder.clone())
            .collect()
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

    #[test]
    fn a_member_should_stay_live_until_its_lease_has_not_changed_for_its_duration() {
        let start = Instant::now();
        let s = Duration::from_secs;
        let mut members = LiveMembers::default();
        let default = s(15);
        // First seen: live for a whole duration, however old its renew time looks.
        members.observe(
            &[lease("a", Some("a"), 1), lease("b", Some("b"), 1)],
            start,
            default,
        );
        assert_eq!(members.live(start + s(5)).len(), 2);
        // `a` renews, `b` does not.
        members.observe(
            &[lease("a", Some("a"), 4), lease("b", Some("b"), 1)],
            start + s(4),
            default,
        );
        let live = members.live(start + s(7));
        assert!(live.contains("a") && !live.contains("b"), "{live:?}");
        // A released Lease (no holder) is nobody's, and a Lease that is gone is forgotten.
        members.observe(&[lease("a", None, 8)], start + s(8), default);
        assert!(members.live(start + s(8)).is_empty());
        // `b` comes back: fresh again.
        members.observe(&[lease("b", Some("b"), 9)], start + s(9), default);
        assert_eq!(members.live(start + s(14)), HashSet::from(["b".to_owned()]));
        assert!(members.live(start + s(15)).is_empty());
        // Unchanged for ten durations: departed.
        assert!(members.departed(start + s(68), 10).is_empty());
        let departed = members.departed(start + s(69), 10);
        assert_eq!(departed, vec![("b".to_owned(), "7".to_owned())]);
    }
}
