//! One small generator (xorshift64*) for everything kubeforge draws: backoff and lease jitter,
//! the suffix of a default leader-election identity and of a test namespace's name (seeded from
//! the clock and the process: replicas must not move in lockstep or share a name, nothing needs
//! to be secret) and generated test objects (seeded with a constant: the same cases on every
//! run).

use std::sync::atomic::{AtomicU64, Ordering};

/// xorshift64*: fast, small state, good enough for jitter and test data; not for secrets.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator that draws the same numbers for the same `seed`.
    #[must_use]
    pub const fn seeded(seed: u64) -> Self {
        // The state must not be zero.
        Self(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// A generator seeded from the clock, the process id and a process-wide counter: two made
    /// in the same nanosecond, in one process or in two, still differ.
    #[must_use]
    pub fn from_clock() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        Self::seeded(clock_seed(nanos, std::process::id(), count))
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// A number in `lo..=hi` (`lo` when the range is empty).
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo).saturating_add(1))
    }

    /// A coin toss.
    pub fn chance(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    /// One of `items` (`None` when empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(usize::try_from(self.below(items.len() as u64)).unwrap_or(0))
    }

    /// A fraction in `0.0..1.0`.
    pub fn fraction(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `base` scaled by a factor drawn in `low..high` (jitter: `0.8..1.2` is ± 20 %).
    pub fn jitter(
        &mut self,
        base: std::time::Duration,
        low: f64,
        high: f64,
    ) -> std::time::Duration {
        base.mul_f64(low + (high - low) * self.fraction())
    }
}

/// The seed of [`Rng::from_clock`]: the clock reading, the process and the count of generators
/// made before in it, each moving a different part of the seed before the bits are spread.
const fn clock_seed(nanos: u64, process: u32, count: u64) -> u64 {
    crate::hash::mix(nanos ^ (process as u64).rotate_left(40) ^ count.rotate_left(20))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn seeded_generators_should_repeat_and_clock_ones_should_differ() {
        let (mut a, mut b) = (Rng::seeded(7), Rng::seeded(7));
        assert_eq!(
            (0..5).map(|_| a.next_u64()).collect::<Vec<_>>(),
            (0..5).map(|_| b.next_u64()).collect::<Vec<_>>()
        );
        assert_ne!(Rng::from_clock().next_u64(), Rng::from_clock().next_u64());
        // Two processes (or two generators of one) reading the same nanosecond.
        let now = 1_790_000_000_123_456_789;
        assert_ne!(clock_seed(now, 7, 0), clock_seed(now, 8, 0));
        assert_ne!(clock_seed(now, 7, 0), clock_seed(now, 7, 1));
        let mut rng = Rng::seeded(0);
        for _ in 0..1000 {
            let f = rng.fraction();
            assert!((0.0..1.0).contains(&f));
            let d = rng.jitter(Duration::from_secs(10), 0.8, 1.2);
            assert!(
                d >= Duration::from_secs(8) && d < Duration::from_secs(12),
                "{d:?}"
            );
            assert!((3..=5).contains(&rng.between(3, 5)));
        }
        assert_eq!(rng.pick::<u8>(&[]), None);
    }
}
