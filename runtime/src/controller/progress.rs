//! Whether a running controller makes progress: its liveness check.
//!
//! A controller is stuck when it has work waiting, every worker is busy, and no reconcile has
//! finished for the stall timeout (reconciles hanging on a dead connection, a deadlock in user
//! code): then `/healthz` fails and the kubelet restarts the operator. Idle controllers, and
//! busy ones that keep finishing reconciles, are alive.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::ObjectKey;
use crate::health::{Check, check};
use crate::queue::WorkQueue;

/// The progress of one controller's workers.
#[derive(Debug)]
pub(crate) struct Progress {
    workers: AtomicUsize,
    busy: AtomicUsize,
    last_finished: Mutex<Option<Instant>>,
    queue: OnceLock<WorkQueue<ObjectKey>>,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            workers: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            last_finished: Mutex::new(None),
            queue: OnceLock::new(),
        }
    }
}

impl Progress {
    /// The controller started `workers` workers on `queue`.
    pub(crate) fn started(&self, workers: usize, queue: WorkQueue<ObjectKey>) {
        self.workers.store(workers, Ordering::Relaxed);
        let _ = self.queue.set(queue);
        *self.lock() = Some(Instant::now());
    }

    /// A worker took a key.
    pub(crate) fn begin(&self) {
        self.busy.fetch_add(1, Ordering::Relaxed);
    }

    /// A worker finished a key.
    pub(crate) fn end(&self) {
        self.busy.fetch_sub(1, Ordering::Relaxed);
        *self.lock() = Some(Instant::now());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.last_finished.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Why the controller is stuck, if it is: work waiting, every worker busy, nothing finished
    /// for `stall`.
    pub(crate) fn stuck(&self, stall: Duration) -> Option<String> {
        let workers = self.workers.load(Ordering::Relaxed);
        let busy = self.busy.load(Ordering::Relaxed);
        let waiting = self.queue.get().map_or(0, WorkQueue::len);
        let since = (*self.lock())?.elapsed();
        (workers > 0 && busy >= workers && waiting > 0 && since >= stall).then(|| {
            format!(
                "stuck: all {workers} workers busy, {waiting} keys waiting, no reconcile finished for {}s",
                since.as_secs()
            )
        })
    }

    /// The liveness check: fails while the controller is stuck for `stall`.
    pub(crate) fn check(self: &Arc<Self>, stall: Duration) -> Check {
        let me = Arc::clone(self);
        check(move || {
            let stuck = me.stuck(stall);
            async move { stuck.map_or(Ok(()), Err) }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_controller_should_be_stuck_only_with_work_waiting_and_every_worker_hung() {
        let progress = Progress::default();
        let queue = WorkQueue::new();
        progress.started(2, queue.clone());
        let stall = Duration::from_secs(60);
        progress.begin();
        progress.begin();
        tokio::time::advance(Duration::from_secs(120)).await;
        assert_eq!(progress.stuck(stall), None, "busy but nothing waiting");
        queue.add(ObjectKey::namespaced("a", "b"));
        let stuck = progress.stuck(stall).expect("stuck");
        assert!(
            stuck.contains("all 2 workers busy, 1 keys waiting"),
            "{stuck}"
        );
        progress.end();
        assert_eq!(progress.stuck(stall), None, "a worker finished and is free");
        progress.begin();
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(progress.stuck(stall), None, "finished 30 s ago");
    }
}
