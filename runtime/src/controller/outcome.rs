//! What happens to a key after a run: controller-runtime's `reconcileHandler` as a pure function.
//!
//! | outcome | next |
//! |---|---|
//! | `Ok(Action::Done)` | [`Next::Forget`]: the key's backoff is reset |
//! | `Ok(Action::Requeue)` | [`Next::RateLimited`]: again soon, through the key's backoff (a key that asks to run again and again slows down like a failing one) |
//! | `Ok(Action::RequeueAfter(d))` | [`Next::ForgetThenAfter`]: backoff reset, again after `d` |
//! | `Err` + [`ErrorPolicy::Backoff`] | [`Next::RateLimited`] |
//! | `Err` + [`ErrorPolicy::RetryAfter`]`(d)` | [`Next::After`]: again after `d`, the failure still counted |
//! | `Err` + [`ErrorPolicy::Terminal`] | [`Next::Terminal`]: forgotten until the object changes |
//! | panic, timeout | [`Next::RateLimited`] |

use std::time::Duration;

use crate::ObjectKey;
use crate::queue::WorkQueue;

use super::{Action, ErrorPolicy, ReconcileResult};

/// How a run of a key ended.
#[derive(Debug)]
pub(super) enum Outcome<E> {
    /// The reconcile (or cleanup) returned.
    Finished(Result<Action, E>),
    /// It panicked (the message).
    Panicked(String),
    /// It ran past the reconcile timeout.
    TimedOut,
}

/// What the worker does with the key next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Reset the key's backoff; nothing is queued.
    Forget,
    /// Reset the backoff, run again after the delay.
    ForgetThenAfter(Duration),
    /// Run again after the delay; the failure count stays.
    After(Duration),
    /// Run again after the key's next backoff delay.
    RateLimited,
    /// A terminal error: reset the backoff, do not retry until the object changes.
    Terminal,
}

/// The next step for a key and the result label for metrics; `policy` is asked only for an error.
pub(super) fn decide<E>(
    outcome: &Outcome<E>,
    policy: impl FnOnce(&E) -> ErrorPolicy,
) -> (Next, ReconcileResult) {
    match outcome {
        Outcome::Finished(Ok(Action::Done)) => (Next::Forget, ReconcileResult::Success),
        Outcome::Finished(Ok(Action::Requeue)) => (Next::RateLimited, ReconcileResult::Requeue),
        Outcome::Finished(Ok(Action::RequeueAfter(delay))) => {
            (Next::ForgetThenAfter(*delay), ReconcileResult::RequeueAfter)
        }
        Outcome::Finished(Err(error)) => match policy(error) {
            ErrorPolicy::Backoff => (Next::RateLimited, ReconcileResult::Error),
            ErrorPolicy::RetryAfter(delay) => (Next::After(delay), ReconcileResult::Error),
            ErrorPolicy::Terminal => (Next::Terminal, ReconcileResult::Error),
        },
        Outcome::Panicked(_) | Outcome::TimedOut => (Next::RateLimited, ReconcileResult::Error),
    }
}

/// Carries `next` out on `queue` for `key`.
pub(super) fn apply(next: Next, queue: &WorkQueue<ObjectKey>, key: &ObjectKey) {
    match next {
        Next::Forget | Next::Terminal => queue.forget(key),
        Next::ForgetThenAfter(delay) => {
            queue.forget(key);
            queue.add_after(key.clone(), delay);
        }
        Next::After(delay) => queue.add_after(key.clone(), delay),
        Next::RateLimited => queue.add_rate_limited(key.clone()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::time::Instant;

    use super::*;
    use crate::queue::{NoMetrics, default_rate_limiter};

    #[derive(Debug)]
    struct Failed;

    fn finished(action: Action) -> Outcome<Failed> {
        Outcome::Finished(Ok(action))
    }

    fn failed() -> Outcome<Failed> {
        Outcome::Finished(Err(Failed))
    }

    #[test]
    fn outcomes_should_map_to_controller_runtime_semantics() {
        let never = |_: &Failed| -> ErrorPolicy { panic!("policy asked without an error") };
        assert_eq!(
            decide(&finished(Action::Done), never),
            (Next::Forget, ReconcileResult::Success)
        );
        assert_eq!(
            decide(&finished(Action::Requeue), never),
            (Next::RateLimited, ReconcileResult::Requeue)
        );
        let second = Duration::from_secs(1);
        assert_eq!(
            decide(&finished(Action::RequeueAfter(second)), never),
            (Next::ForgetThenAfter(second), ReconcileResult::RequeueAfter)
        );
        assert_eq!(
            decide(&failed(), |_| ErrorPolicy::Backoff).0,
            Next::RateLimited
        );
        assert_eq!(
            decide(&failed(), |_| ErrorPolicy::RetryAfter(second)).0,
            Next::After(second)
        );
        assert_eq!(
            decide(&failed(), |_| ErrorPolicy::Terminal),
            (Next::Terminal, ReconcileResult::Error)
        );
        assert_eq!(
            decide(&Outcome::<Failed>::TimedOut, never).0,
            Next::RateLimited
        );
        assert_eq!(
            decide(&Outcome::<Failed>::Panicked("boom".into()), never).0,
            Next::RateLimited
        );
    }

    /// Ends the current run of the taken `key` with `outcome` as a worker would (decide, apply,
    /// done) and returns how long until the queue hands the key out again (`None`: not within an
    /// hour); the key is then taken again, ready for the next run.
    async fn next_run(
        queue: &WorkQueue<ObjectKey>,
        key: &ObjectKey,
        outcome: Outcome<Failed>,
    ) -> Option<Duration> {
        let (next, _) = decide(&outcome, |_| ErrorPolicy::Backoff);
        apply(next, queue, key);
        queue.done(key);
        let start = Instant::now();
        tokio::select! {
            got = queue.get() => {
                assert_eq!(got.as_ref(), Some(key));
                Some(start.elapsed())
            }
            () = tokio::time::sleep(Duration::from_secs(3600)) => None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_should_back_off_like_a_failure_and_success_should_reset_it() {
        let queue = WorkQueue::with(default_rate_limiter(), Arc::new(NoMetrics));
        let key = ObjectKey::namespaced("ns", "a");
        queue.add(key.clone());
        assert_eq!(queue.get().await.as_ref(), Some(&key));
        let ms = Duration::from_millis;
        // Asking to run again, again and again: 5 ms, 10 ms, 20 ms — not a busy loop.
        assert_eq!(
            next_run(&queue, &key, finished(Action::Requeue)).await,
            Some(ms(5))
        );
        assert_eq!(
            next_run(&queue, &key, finished(Action::Requeue)).await,
            Some(ms(10))
        );
        assert_eq!(next_run(&queue, &key, failed()).await, Some(ms(20)));
        // RequeueAfter resets the backoff: after it, a failure starts from 5 ms again.
        assert_eq!(
            next_run(&queue, &key, finished(Action::RequeueAfter(ms(700)))).await,
            Some(ms(700))
        );
        assert_eq!(next_run(&queue, &key, failed()).await, Some(ms(5)));
        // Done: forgotten and not queued again.
        assert_eq!(next_run(&queue, &key, finished(Action::Done)).await, None);
        assert_eq!(queue.num_requeues(&key), 0);
    }
}
