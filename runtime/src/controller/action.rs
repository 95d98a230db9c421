use std::time::Duration;

pub use crate::queue::Priority;

/// What a successful reconcile asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing: the object is reconciled until it (or something it owns or watches) changes.
    Done,
    /// Reconcile again soon: after the key's next backoff delay, as after a failure (5 ms, then
    /// doubling), so a key that keeps asking slows down instead of spinning. Never concurrently.
    Requeue,
    /// Reconcile again after this delay (periodic checks of the outside world), queued at
    /// [`Priority::Low`], behind fresh events.
    RequeueAfter(Duration),
    /// [`Action::RequeueAfter`] queued at the given priority: `Priority::High` when the next
    /// run is what a user waits for (a resource being provisioned), not a periodic check.
    RequeueAfterAt(Duration, Priority),
}

impl Action {
    /// [`Action::Done`].
    pub fn done() -> Self {
        Self::Done
    }

    /// [`Action::Requeue`].
    pub fn requeue() -> Self {
        Self::Requeue
    }

    /// [`Action::RequeueAfter`].
    pub fn requeue_after(delay: Duration) -> Self {
        Self::RequeueAfter(delay)
    }

    /// Queues the requeue at `priority`: `Action::requeue_after(d).priority(Priority::High)`.
    /// [`Action::Done`] and [`Action::Requeue`] (which goes through the key's backoff, at
    /// low priority) are returned unchanged.
    #[must_use]
    pub fn priority(self, priority: Priority) -> Self {
        match self {
            Self::RequeueAfter(delay) | Self::RequeueAfterAt(delay, _) => {
                Self::RequeueAfterAt(delay, priority)
            }
            other => other,
        }
    }
}

/// What to do after a reconcile failed; chosen by [`Reconciler::error_policy`](super::Reconciler::error_policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorPolicy {
    /// Retry with the per-key exponential backoff (the default).
    Backoff,
    /// Retry after exactly this delay (queued at [`Priority::Low`], as every retry).
    RetryAfter(Duration),
    /// [`ErrorPolicy::RetryAfter`] queued at the given priority.
    RetryAfterAt(Duration, Priority),
    /// Do not retry: the error is permanent until the object changes (logged and counted).
    Terminal,
}

impl ErrorPolicy {
    /// Queues the retry at `priority`: `ErrorPolicy::RetryAfter(d).priority(Priority::High)`.
    /// The other policies are returned unchanged (a backoff retry is queued at low priority).
    #[must_use]
    pub fn priority(self, priority: Priority) -> Self {
        match self {
            Self::RetryAfter(delay) | Self::RetryAfterAt(delay, _) => {
                Self::RetryAfterAt(delay, priority)
            }
            other => other,
        }
    }
}
