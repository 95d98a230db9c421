//! The consistent-hash ring that maps an object to the live member that owns it.
//!
//! Each member is placed at [`Ring::TOKENS`] points of a 64-bit circle (the hash of
//! `<member>#<i>`); an object belongs to the member of the first point at or after the hash of its
//! key. Adding or removing one member of `n` moves about `1/n` of the objects, and only to or from
//! that member. The hash is FNV-1a finished with splitmix64: stable across processes, builds and
//! platforms (every replica and the sharder must agree), and well spread for short, similar keys.

/// A ring over a set of members.
#[derive(Clone, Debug, Default)]
pub struct Ring {
    /// (point, index into `members`), sorted by point.
    points: Vec<(u64, usize)>,
    members: Vec<String>,
}

impl Ring {
    /// Points per member: with 1024 the members' arcs are even within about 1 %, so how evenly a
    /// set of keys splits is the keys' own chance (±3 % at 1,000 keys a member); with 128, a
    /// member's arc was 9 % off for some names.
    pub const TOKENS: usize = 1024;

    /// A ring over `members` (duplicates count once; order does not matter).
    pub fn new<I, S>(members: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut members: Vec<String> = members.into_iter().map(Into::into).collect();
        members.sort();
        members.dedup();
        let mut points = Vec::with_capacity(members.len() * Self::TOKENS);
        for (index, member) in members.iter().enumerate() {
            for token in 0..Self::TOKENS {
                points.push((hash(format!("{member}#{token}").as_bytes()), index));
            }
        }
        // Ties (vanishingly rare) break by member name, so every replica agrees.
        points.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| members[a.1].cmp(&members[b.1])));
        Self { points, members }
    }

    /// The members, sorted.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// The member that owns `key` (`None` on an empty ring).
    pub fn owner(&self, key: &str) -> Option<&str> {
        let at = hash(key.as_bytes());
        let i = self.points.partition_point(|(point, _)| *point < at);
        let (_, member) = self.points.get(i).or_else(|| self.points.first())?;
        Some(&self.members[*member])
    }
}

/// FNV-1a (64 bits) finished with splitmix64.
pub(crate) fn hash(bytes: &[u8]) -> u64 {
    kubeforge_shared::hash::mix(kubeforge_shared::hash::fnv1a(bytes))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("ns-{}/object-{i}", i % 7)).collect()
    }

    fn shares(ring: &Ring, keys: &[String]) -> HashMap<String, usize> {
        let mut shares = HashMap::new();
        for key in keys {
            *shares
                .entry(ring.owner(key).unwrap().to_owned())
                .or_default() += 1;
        }
        shares
    }

    #[test]
    fn an_empty_ring_should_own_nothing_and_one_member_everything() {
        assert_eq!(Ring::default().owner("a/b"), None);
        let ring = Ring::new(["only"]);
        assert!(keys(100).iter().all(|k| ring.owner(k) == Some("only")));
    }

    #[test]
    fn three_members_should_each_own_about_a_third() {
        let keys = keys(3000);
        let ring = Ring::new(["replica-a", "replica-b", "replica-c"]);
        for (member, n) in shares(&ring, &keys) {
            assert!((850..=1150).contains(&n), "{member}: {n} of 3000");
        }
    }

    #[test]
    fn a_member_joining_should_take_keys_only_from_the_others_and_about_its_share() {
        let keys = keys(3000);
        let before = Ring::new(["a", "b", "c"]);
        let after = Ring::new(["c", "a", "b", "d"]);
        let mut moved = 0;
        for key in &keys {
            let (old, new) = (before.owner(key).unwrap(), after.owner(key).unwrap());
            if old != new {
                assert_eq!(
                    new, "d",
                    "{key} moved from {old} to {new}, not to the new member"
                );
                moved += 1;
            }
        }
        assert!(
            (600..=900).contains(&moved),
            "{moved} of 3000 moved (a quarter is 750)"
        );
    }

    #[test]
    fn the_ring_should_not_depend_on_member_order_or_duplicates() {
        let one = Ring::new(["x", "y", "z"]);
        let two = Ring::new(["z", "x", "y", "x"]);
        assert_eq!(one.members(), two.members());
        assert!(keys(500).iter().all(|k| one.owner(k) == two.owner(k)));
    }

    #[test]
    fn the_hash_should_be_stable() {
        // Every replica and the sharder must agree, whatever they were built with.
        assert_eq!(hash(b""), 0xc381_7c01_6ba4_ff30);
        assert_eq!(hash(b"replica-a#0"), 0x87e6_33d3_abec_0722);
        assert_ne!(hash(b"a"), hash(b"b"));
    }
}

/// Property tests: random member names and random keys (similar ones, as object keys are).
#[cfg(test)]
mod properties {
    use std::collections::{BTreeSet, HashMap};

    use proptest::prelude::*;
    use proptest::sample::Index;

    use super::*;

    /// Member names: a pod-like suffix, or any short name.
    fn member() -> impl Strategy<Value = String> {
        prop_oneof!["operator-[0-9a-f]{5}", "[a-z][a-z0-9-]{0,12}"]
    }

    fn members(range: std::ops::Range<usize>) -> impl Strategy<Value = BTreeSet<String>> {
        prop::collection::btree_set(member(), range)
    }

    /// `n` keys from a seed: `<namespace>/<name>` with a few namespaces and numbered or random
    /// names (xorshift: fast, and shrinking a seed is cheap).
    fn keys(seed: u64, n: usize) -> Vec<String> {
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        (0..n)
            .map(|i| {
                let r = next();
                let namespace = r % 5;
                if r & 32 == 0 {
                    format!("ns-{namespace}/object-{i}")
                } else {
                    format!("team-{namespace}/{:x}", next() >> (r % 40))
                }
            })
            .collect()
    }

    /// The most keys of `n` one of `m` members may own. A member's arc is the sum of the gaps
    /// before its `TOKENS` points among `m * TOKENS`: a Beta(T, (m-1)T) share, relative standard
    /// deviation `sqrt((1 - 1/m) / T)` (3 % at 1,024 tokens); its keys are a binomial draw on
    /// that share. Six standard deviations of each: a sound ring never fails it (1e-9 a member).
    fn bounds(n: usize, m: usize) -> (f64, f64) {
        let (n, m, t) = (n as f64, m as f64, Ring::TOKENS as f64);
        let fair = n / m;
        let arc = 6.0 * ((1.0 - 1.0 / m) / t).sqrt();
        let draw = 6.0 * (fair * (1.0 - 1.0 / m)).sqrt();
        (fair * (1.0 - arc) - draw, fair * (1.0 + arc) + draw)
    }

    fn owners(ring: &Ring, keys: &[String]) -> Vec<String> {
        keys.iter()
            .map(|k| ring.owner(k).expect("a member").to_owned())
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// With `m` members, each owns its fair share of 2,000 keys within [`bounds`] (which
        /// are within 2x the fair share).
        #[test]
        fn each_member_should_own_about_its_fair_share(members in members(1..9), seed in any::<u64>()) {
            const N: usize = 2000;
            let ring = Ring::new(members.iter().cloned());
            let (low, high) = bounds(N, members.len());
            prop_assert!(high <= 2.0 * N as f64 / members.len() as f64);
            let mut shares: HashMap<String, usize> = HashMap::new();
            for owner in owners(&ring, &keys(seed, N)) {
                *shares.entry(owner).or_default() += 1;
            }
            for member in &members {
                let share = shares.get(member).copied().unwrap_or(0) as f64;
                prop_assert!(
                    (low..=high).contains(&share),
                    "{} owns {} of {} keys, expected {:.0}..={:.0} ({} members)",
                    member, share, N, low, high, members.len()
                );
            }
        }

        /// A member joining takes keys from the others and moves no other key; a member leaving
        /// gives its keys to the others and moves no other key. Order and duplicates of the
        /// member list do not matter.
        #[test]
        fn one_member_joining_or_leaving_should_move_only_its_own_keys(
            members in members(1..8),
            joining in member(),
            leaving in any::<Index>(),
            order in any::<Index>(),
            seed in any::<u64>(),
        ) {
            prop_assume!(!members.contains(&joining));
            let keys = keys(seed, 1000);
            let before = owners(&Ring::new(members.iter().cloned()), &keys);

            let joined = owners(&Ring::new(members.iter().cloned().chain([joining.clone()])), &keys);
            for ((key, old), new) in keys.iter().zip(&before).zip(&joined) {
                prop_assert!(old == new || *new == joining, "{} moved from {} to {}", key, old, new);
            }

            let members: Vec<String> = members.into_iter().collect();
            let gone = &members[leaving.index(members.len())];
            let rest = members.iter().filter(|m| *m != gone).cloned();
            let left = Ring::new(rest);
            for (key, old) in keys.iter().zip(&before) {
                let new = left.owner(key);
                prop_assert!(
                    new == Some(old.as_str()) || old == gone,
                    "{} moved from {} to {:?} when {} left", key, old, new, gone
                );
            }

            // Rotated, with one member twice.
            let mut shuffled = members.clone();
            shuffled.rotate_left(order.index(members.len()));
            shuffled.push(members[order.index(members.len())].clone());
            prop_assert_eq!(owners(&Ring::new(shuffled), &keys), before);
        }
    }
}
