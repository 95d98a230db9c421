use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Decides how long a failed item waits before it is retried.
///
/// [`WorkQueue::add_rate_limited`](super::WorkQueue::add_rate_limited) asks [`RateLimiter::when`]
/// for the delay (which also counts a failure); [`RateLimiter::forget`] resets the item's history
/// after a success.
pub trait RateLimiter<T>: Send + Sync {
    /// The delay before the next attempt of `item`; records one more failure.
    fn when(&self, item: &T) -> Duration;
    /// Clears the failure history of `item`.
    fn forget(&self, item: &T);
    /// How many failures of `item` have been recorded since the last [`RateLimiter::forget`].
    fn retries(&self, item: &T) -> u32;
}

/// Per-item exponential backoff: `base * 2^failures`, capped at `max`.
///
/// The defaults (5 ms .. 1000 s) are client-go's.
#[derive(Debug)]
pub struct ExponentialBackoff<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32>>,
}

impl<T> ExponentialBackoff<T> {
    /// Backoff from `base` doubling up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Default for ExponentialBackoff<T> {
    fn default() -> Self {
        Self::new(Duration::from_millis(5), Duration::from_secs(1000))
    }
}

/// `base * 2^exp`, saturating at `max`.
pub(crate) fn exponential(base: Duration, max: Duration, exp: u32) -> Duration {
    let factor = 2u32.checked_pow(exp).unwrap_or(u32::MAX);
    base.checked_mul(factor).map_or(max, |d| d.min(max))
}

impl<T: Hash + Eq + Clone + Send> RateLimiter<T> for ExponentialBackoff<T> {
    fn when(&self, item: &T) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(item.clone()).or_insert(0);
        let exp = *count;
        *count = count.saturating_add(1);
        exponential(self.base, self.max, exp)
    }

    fn forget(&self, item: &T) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(item);
    }

    fn retries(&self, item: &T) -> u32 {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(item)
            .copied()
            .unwrap_or(0)
    }
}

/// An overall token bucket shared by all items: `qps` tokens per second, at most `burst` saved.
///
/// Each retry reserves a token; when none is left the retry is delayed until one will be. The
/// defaults (10 qps, burst 100) are client-go's. It keeps a storm of failures from hammering the
/// apiserver even while each item's own backoff is still short.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Option<Instant>)>,
}

impl TokenBucket {
    /// A bucket refilled at `qps` tokens per second holding at most `burst` (starts full).
    ///
    /// # Errors
    ///
    /// Rejects a `qps` that is not a positive finite number and a `burst` of zero.
    pub fn new(qps: f64, burst: u32) -> Result<Self, InvalidRateLimit> {
        if !(qps.is_finite() && qps > 0.0) || burst == 0 {
            return Err(InvalidRateLimit { qps, burst });
        }
        Ok(Self {
            qps,
            burst: f64::from(burst),
            state: Mutex::new((f64::from(burst), None)),
        })
    }
}

impl Default for TokenBucket {
    fn default() -> Self {
        Self {
            qps: 10.0,
            burst: 100.0,
            state: Mutex::new((100.0, None)),
        }
    }
}

/// A [`TokenBucket`] was configured with a non-positive rate or a zero burst.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid token bucket: qps {qps} must be positive and finite, burst {burst} at least 1")]
pub struct InvalidRateLimit {
    /// The rejected rate.
    pub qps: f64,
    /// The rejected burst.
    pub burst: u32,
}

impl<T> RateLimiter<T> for TokenBucket {
    fn when(&self, _item: &T) -> Duration {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, last) = &mut *state;
        if let Some(last) = *last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.qps;
            *tokens = (*tokens + refill).min(self.burst);
        }
        *last = Some(now);
        *tokens -= 1.0;
        if *tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-*tokens / self.qps)
        }
    }

    fn forget(&self, _item: &T) {}

    fn retries(&self, _item: &T) -> u32 {
        0
    }
}

/// Combines two limiters: the delay is the longer of the two (client-go's `MaxOfRateLimiter`).
#[derive(Debug, Default)]
pub struct MaxOf<A, B>(pub A, pub B);

impl<T, A: RateLimiter<T>, B: RateLimiter<T>> RateLimiter<T> for MaxOf<A, B> {
    fn when(&self, item: &T) -> Duration {
        self.0.when(item).max(self.1.when(item))
    }
    fn forget(&self, item: &T) {
        self.0.forget(item);
        self.1.forget(item);
    }
    fn retries(&self, item: &T) -> u32 {
        self.0.retries(item).max(self.1.retries(item))
    }
}

/// client-go's default controller rate limiter: per-item exponential backoff 5 ms .. 1000 s,
/// combined with an overall 10 qps / 100 burst token bucket.
pub fn default_rate_limiter<T: Hash + Eq + Clone + Send>()
-> MaxOf<ExponentialBackoff<T>, TokenBucket> {
    MaxOf(ExponentialBackoff::default(), TokenBucket::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_should_double_per_item_and_cap() {
        let limiter = ExponentialBackoff::new(Duration::from_millis(5), Duration::from_secs(1));
        let delays: Vec<_> = (0..10).map(|_| limiter.when(&"a")).collect();
        assert_eq!(delays[0], Duration::from_millis(5));
        assert_eq!(delays[1], Duration::from_millis(10));
        assert_eq!(delays[7], Duration::from_millis(640));
        assert_eq!(delays[8], Duration::from_secs(1), "capped");
        assert_eq!(limiter.retries(&"a"), 10);
        assert_eq!(limiter.when(&"b"), Duration::from_millis(5), "per item");
        limiter.forget(&"a");
        assert_eq!(limiter.retries(&"a"), 0);
        assert_eq!(
            limiter.when(&"a"),
            Duration::from_millis(5),
            "reset by forget"
        );
    }

    #[test]
    fn exponential_should_saturate_instead_of_overflowing() {
        let max = Duration::from_secs(1000);
        assert_eq!(exponential(Duration::from_millis(5), max, 200), max);
        assert_eq!(exponential(Duration::from_secs(u64::MAX / 2), max, 3), max);
    }

    #[tokio::test(start_paused = true)]
    async fn token_bucket_should_allow_burst_then_space_by_rate() {
        let bucket = TokenBucket::new(10.0, 3).unwrap();
        let when = |b: &TokenBucket| RateLimiter::<()>::when(b, &());
        assert_eq!(when(&bucket), Duration::ZERO);
        assert_eq!(when(&bucket), Duration::ZERO);
        assert_eq!(when(&bucket), Duration::ZERO);
        // Burst used up: each further reservation waits one more tenth of a second.
        assert_eq!(when(&bucket), Duration::from_millis(100));
        assert_eq!(when(&bucket), Duration::from_millis(200));
        tokio::time::advance(Duration::from_secs(1)).await;
        // One second refills 10 tokens but the bucket holds at most 3, so one is free again.
        assert_eq!(when(&bucket), Duration::ZERO);
    }

    #[test]
    fn token_bucket_should_reject_invalid_settings() {
        assert!(TokenBucket::new(0.0, 1).is_err());
        assert!(TokenBucket::new(f64::NAN, 1).is_err());
        assert!(TokenBucket::new(1.0, 0).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn default_limiter_should_take_the_longer_delay() {
        let limiter = default_rate_limiter::<&str>();
        assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
        assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
        assert_eq!(limiter.retries(&"a"), 2);
    }
}
