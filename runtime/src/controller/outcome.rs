//! What happens to a key after a run: controller-runtime's `reconcileHandler` as a pure function
//! (`retries.rs` carries the decision out).
//!
//! | outcome | next |
//! |---|---|
//! | `Ok(Action::Done)` | [`Next::Forget`]: the key's backoff is reset |
//! | `Ok(Action::Requeue)` | [`Next::RateLimited`]: again soon, through the key's backoff (a key that asks to run again and again slows down like a failing one) |
//! | `Ok(Action::RequeueAfter(d))` | [`Next::ForgetThenAfter`]: backoff reset, again after `d` (at low priority, or the one `RequeueAfterAt` gives) |
//! | `Err` + [`ErrorPolicy::Backoff`] | [`Next::RateLimited`] |
//! | `Err` + [`ErrorPolicy::RetryAfter`]`(d)` | [`Next::After`]: again after `d`, the failure still counted (at low priority, or the one `RetryAfterAt` gives) |
//! | `Err` + [`ErrorPolicy::Terminal`] | [`Next::Terminal`]: forgotten until the object changes |
//! | panic, timeout | [`Next::RateLimited`] |

use std::time::Duration;

use super::{Action, ErrorPolicy, ReconcileResult};
use crate::queue::Priority;

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
    /// Reset the backoff, run again after the delay, queued at the priority.
    ForgetThenAfter(Duration, Priority),
    /// Run again after the delay, queued at the priority; the failure count stays.
    After(Duration, Priority),
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
        Outcome::Finished(Ok(Action::RequeueAfter(delay))) => (
            Next::ForgetThenAfter(*delay, Priority::Low),
            ReconcileResult::RequeueAfter,
        ),
        Outcome::Finished(Ok(Action::RequeueAfterAt(delay, priority))) => (
            Next::ForgetThenAfter(*delay, *priority),
            ReconcileResult::RequeueAfter,
        ),
        Outcome::Finished(Err(error)) => match policy(error) {
            ErrorPolicy::Backoff => (Next::RateLimited, ReconcileResult::Error),
            ErrorPolicy::RetryAfter(delay) => {
                (Next::After(delay, Priority::Low), ReconcileResult::Error)
            }
            ErrorPolicy::RetryAfterAt(delay, priority) => {
                (Next::After(delay, priority), ReconcileResult::Error)
            }
            ErrorPolicy::Terminal => (Next::Terminal, ReconcileResult::Error),
        },
        Outcome::Panicked(_) | Outcome::TimedOut => (Next::RateLimited, ReconcileResult::Error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            (
                Next::ForgetThenAfter(second, Priority::Low),
                ReconcileResult::RequeueAfter
            )
        );
        assert_eq!(
            decide(
                &finished(Action::requeue_after(second).priority(Priority::High)),
                never
            )
            .0,
            Next::ForgetThenAfter(second, Priority::High)
        );
        assert_eq!(
            decide(&failed(), |_| ErrorPolicy::Backoff).0,
            Next::RateLimited
        );
        assert_eq!(
            decide(&failed(), |_| ErrorPolicy::RetryAfter(second)).0,
            Next::After(second, Priority::Low)
        );
        assert_eq!(
            decide(&failed(), |_| ErrorPolicy::RetryAfter(second)
                .priority(Priority::High))
            .0,
            Next::After(second, Priority::High)
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
}
