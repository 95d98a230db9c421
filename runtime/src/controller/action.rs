use std::time::Duration;

/// What a successful reconcile asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing: the object is reconciled until it (or something it owns or watches) changes.
    Done,
    /// Reconcile again soon: after the key's next backoff delay, as after a failure (5 ms, then
    /// doubling), so a key that keeps asking slows down instead of spinning. Never concurrently.
    Requeue,
    /// Reconcile again after this delay (periodic checks of the outside world).
    RequeueAfter(Duration),
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
}

/// What to do after a reconcile failed; chosen by [`Reconciler::error_policy`](super::Reconciler::error_policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorPolicy {
    /// Retry with the per-key exponential backoff (the default).
    Backoff,
    /// Retry after exactly this delay.
    RetryAfter(Duration),
    /// Do not retry: the error is permanent until the object changes (logged and counted).
    Terminal,
}
