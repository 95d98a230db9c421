//! How late the machine runs while a test waits, so that a bound derived from configured timings
//! (a lease duration, a retry period) can add what a busy machine costs instead of a wall-clock
//! guess, and a wait for work that must keep advancing fails when it stops, not when it is slow.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The worst delays measured since [`Delays::start`]: how late a 100 ms sleep woke in this
/// process, how long the apiserver took to answer a read, and what the caller
/// [noted](Delays::note) (the operators' own lateness). Stops measuring when dropped.
pub struct Delays {
    worst: Arc<Mutex<Worst>>,
    stop: CancellationToken,
}

#[derive(Clone, Copy, Debug, Default)]
struct Worst {
    late: Duration,
    read: Duration,
    noted: Duration,
}

impl Delays {
    /// Measures every 100 ms: the lateness of a sleep of this test's runtime, and the round
    /// trip of a read of namespace `namespace` through `client`.
    pub fn start(client: kube::Client, namespace: &str) -> Delays {
        let worst = Arc::new(Mutex::new(Worst::default()));
        let stop = CancellationToken::new();
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        let (measured, token, namespace) = (Arc::clone(&worst), stop.clone(), namespace.to_owned());
        tokio::spawn(async move {
            let tick = Duration::from_millis(100);
            while !token.is_cancelled() {
                let slept = Instant::now();
                tokio::time::sleep(tick).await;
                let late = slept.elapsed().saturating_sub(tick);
                let sent = Instant::now();
                let read = tokio::select! {
                    () = token.cancelled() => return,
                    _ = api.get_opt(&namespace) => sent.elapsed(),
                };
                let mut worst = measured.lock().unwrap();
                worst.late = worst.late.max(late);
                worst.read = worst.read.max(read);
            }
        });
        Delays { worst, stop }
    }

    /// Adds a delay measured elsewhere (how late an operator's runtime ran).
    pub fn note(&self, delay: Duration) {
        let mut worst = self.worst.lock().unwrap();
        worst.noted = worst.noted.max(delay);
    }

    /// The worst delay one step of work may take beyond its nominal time: the worst lateness
    /// of a runtime (this test's or a noted one) plus the worst read.
    pub fn worst(&self) -> Duration {
        let worst = *self.worst.lock().unwrap();
        worst.late.max(worst.noted) + worst.read
    }

    /// The measurements, for a test's report.
    pub fn describe(&self) -> String {
        let worst = *self.worst.lock().unwrap();
        format!(
            "worst sleep lateness {:?} here, {:?} in the operators; worst read {:?}",
            worst.late, worst.noted, worst.read
        )
    }
}

impl Drop for Delays {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Polls `check` every 100 ms until it returns `Some`. What it reports done (keys of the things
/// finished: objects converged, moved, ...) is the progress: the wait fails with `what` when no
/// key new to it came for `stall()` — evaluated at each poll, so a bound that adds the
/// delays measured meanwhile stretches with them. Work that stops fails the test; work that is
/// slow but advancing does not.
pub async fn progressing<T, K>(
    what: &str,
    mut stall: impl FnMut() -> Duration,
    mut check: impl AsyncFnMut() -> (K, Option<T>),
) -> T
where
    K: IntoIterator<Item = String>,
{
    let mut seen: HashSet<String> = HashSet::new();
    let mut since = Instant::now();
    let started = since;
    loop {
        let (done, value) = check().await;
        let before = seen.len();
        seen.extend(done);
        if seen.len() > before {
            since = Instant::now();
        }
        if let Some(value) = value {
            return value;
        }
        let bound = stall();
        assert!(
            since.elapsed() < bound,
            "waiting for {what}: nothing new for {:?} (bound {bound:?}), {} done in {:?}",
            since.elapsed(),
            seen.len(),
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
