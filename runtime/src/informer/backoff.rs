//! How long an informer waits before retrying a failed list or watch.
//!
//! kube's default watcher backoff grows to 30 s while the apiserver is unreachable and is only
//! reset by an event, so after an outage the first answer of the apiserver (`410 Gone`: the
//! informer's resourceVersion was compacted away meanwhile) cost another full backoff before the
//! relist: convergence took 90 s after the apiserver came back. Here the delay is capped low
//! (5 s by default), a `410 Gone` is relisted at once, and any answer of the apiserver (an event, a
//! list page, a watch accepted) resets the delay — not kube's `Init`, sent before each attempt to
//! list, so a relist failing again and again backs off too.

use std::time::Duration;

use kube::runtime::watcher;

/// Retry delays of an informer's list/watch: exponential from `initial`, doubled per failure in
/// a row up to `max`, with ±20 % jitter; reset by any answer of the apiserver, skipped for
/// `410 Gone` (relisted at once). The defaults (200 ms, 5 s) bound the extra wait after an
/// outage to 5 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchBackoff {
    /// The delay after a first failure.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(200),
            max: Duration::from_secs(5),
        }
    }
}

/// Failures in a row and the next delay.
#[derive(Debug)]
pub(super) struct Backoff {
    policy: WatchBackoff,
    /// Failures since the apiserver last answered or said `410 Gone` (what the delay grows
    /// with).
    streak: u32,
    rng: kubeforge_shared::random::Rng,
}

impl Backoff {
    pub(super) fn new(policy: WatchBackoff) -> Self {
        Self {
            policy,
            streak: 0,
            rng: kubeforge_shared::random::Rng::from_clock(),
        }
    }

    /// The apiserver answered (an event, a list page, a watch accepted): the list/watch works.
    pub(super) fn succeeded(&mut self) {
        self.streak = 0;
    }

    /// The delay before retrying after `error`.
    pub(super) fn failed(&mut self, error: &watcher::Error) -> Duration {
        if is_gone(error) {
            // The apiserver answered: the resourceVersion is too old. Relist now.
            self.streak = 0;
            return Duration::ZERO;
        }
        let base = crate::queue::exponential(self.policy.initial, self.policy.max, self.streak);
        self.streak += 1;
        self.jitter(base)
    }

    /// `base` ± 20 %.
    fn jitter(&mut self, base: Duration) -> Duration {
        self.rng.jitter(base, 0.8, 1.2)
    }
}

/// Whether the apiserver said `410 Gone` (the informer's resourceVersion is too old).
pub(super) fn is_gone(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => {
            matches!(e, kube::Error::Api(status) if status.code == 410)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn unreachable() -> watcher::Error {
        watcher::Error::WatchStartFailed(kube::Error::Service("connection refused".into()))
    }

    #[test]
    fn backoff_should_double_up_to_its_cap_and_reset_on_an_event() {
        let mut b = Backoff::new(WatchBackoff::default());
        let delays: Vec<Duration> = (0..8).map(|_| b.failed(&unreachable())).collect();
        let within = |d: Duration, base: f64| {
            let s = d.as_secs_f64();
            s >= base * 0.8 - 1e-9 && s <= base * 1.2 + 1e-9
        };
        for (d, base) in delays.iter().zip([0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]) {
            assert!(within(*d, base), "{d:?} is not {base} s ± 20 %");
        }
        b.succeeded();
        assert!(within(b.failed(&unreachable()), 0.2));
    }

    #[test]
    fn gone_should_relist_at_once_and_reset_the_delay() {
        let mut b = Backoff::new(WatchBackoff::default());
        for _ in 0..6 {
            b.failed(&unreachable());
        }
        let gone = watcher::Error::WatchError(Box::new(
            Status::failure("too old", "Expired").with_code(410),
        ));
        assert_eq!(b.failed(&gone), Duration::ZERO);
        assert!(b.failed(&unreachable()) <= Duration::from_millis(240));
    }
}
