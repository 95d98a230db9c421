//! Giving the operating system back the memory a (re)list freed.
//!
//! An informer's initial list decodes every object of its kind at once: the response pages,
//! their JSON buffers and the objects' intermediate forms are freed once the objects are in the
//! store, but glibc's allocator keeps freed memory in its arenas (one per thread that allocated)
//! and returns only the top of each heap. At 50,000 cached objects that is tens of MiB that stay
//! resident for the life of the operator although nothing uses them.
//!
//! The same holds after a burst of reconciles (an operator's start-up reconciles every cached
//! object): requests, answers and the records of their writes are freed between the objects.
//!
//! So when informers finish a (re)list, or controllers a burst of [`BURST`] reconciles,
//! kubeforge asks glibc to return the free pages of every arena (`malloc_trim(0)`), on a blocking
//! thread (the call walks every arena: a few milliseconds per 100 MiB of heap): after a
//! (re)list once no other list has finished within [`LIST_SETTLE`] — without waiting for the
//! reconciles the list starts, which at 50,000 objects run for minutes while the list's free
//! pages stay resident (a few MiB with kubeforge's streamed lists; measured in the book's
//! Performance chapter) —, and after a burst of reconciles once they have stopped for
//! [`SETTLE`]. Live memory is untouched; what the allocator would reuse it takes back from the
//! system when needed. Elsewhere than on glibc (musl, macOS) this does nothing: those allocators
//! give memory back by themselves.
//!
//! [`release_after_lists`] turns it off for the whole process (for an operator that shares its
//! process with latency-critical work, or uses another global allocator).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How long lists and reconciles must have stopped before the memory a burst of reconciles
/// freed is given back.
pub const SETTLE: Duration = Duration::from_secs(2);

/// How long no other (re)list must have finished before the memory lists freed is given back
/// (informers that start together finish their lists within moments of each other).
pub const LIST_SETTLE: Duration = Duration::from_millis(500);

/// Reconciles in a burst after which the memory the burst freed is given back once the
/// controllers have settled: an operator's start-up reconciles every cached object, and what
/// those reconciles allocated and freed (requests, answers, records of their writes) stays
/// resident otherwise. A finished (re)list counts as a whole burst.
pub const BURST: u64 = 1_000;

static ENABLED: AtomicBool = AtomicBool::new(true);
/// Work done in this process: one per reconcile, [`BURST`] per (re)list.
static WORK: AtomicU64 = AtomicU64::new(0);
/// `WORK` when the last release was made.
static RELEASED_AT: AtomicU64 = AtomicU64::new(0);
/// A task waits for the work to settle.
static SETTLING: AtomicBool = AtomicBool::new(false);
/// (Re)lists finished in this process.
static LISTS: AtomicU64 = AtomicU64::new(0);
/// A task waits for the lists to settle.
static LISTS_SETTLING: AtomicBool = AtomicBool::new(false);

/// Whether the memory freed by informers' (re)lists and bursts of reconciles is given back to
/// the operating system (default `true`; see the [module documentation](self)). Process-wide.
///
/// # Examples
///
/// ```
/// // This operator runs with a global allocator of its own: leave glibc alone.
/// kubeforge::memory::release_after_lists(false);
/// ```
pub fn release_after_lists(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
}

/// Asks the allocator to return the free pages it holds to the operating system, now, on the
/// calling thread; whether it released anything (always `false` off glibc).
pub fn release() -> bool {
    imp::release()
}

/// An informer finished a (re)list.
pub(crate) fn listed() {
    worked(BURST);
    LISTS.fetch_add(1, Ordering::Relaxed);
    release_when_settled(&LISTS_SETTLING, &LISTS, LIST_SETTLE, |_| {}, "lists");
}

/// A controller finished a reconcile.
pub(crate) fn reconciled() {
    worked(1);
}

/// Counts `amount` of work; once a [`BURST`] has been done since the last release, releases the
/// freed memory after the work has stopped for [`SETTLE`] (one waiting task at a time).
fn worked(amount: u64) {
    let done = WORK.fetch_add(amount, Ordering::Relaxed) + amount;
    if done.saturating_sub(RELEASED_AT.load(Ordering::Relaxed)) < BURST {
        return;
    }
    release_when_settled(
        &SETTLING,
        &WORK,
        SETTLE,
        |at| RELEASED_AT.store(at, Ordering::Relaxed),
        "lists and reconciles",
    );
}

/// Unless a task is waiting already (`settling`), spawns one that waits until `counter` has not
/// moved for `settle`, passes its value to `settled`, and gives the free memory back on a
/// blocking thread. Without a Tokio runtime, nothing happens.
fn release_when_settled(
    settling: &'static AtomicBool,
    counter: &'static AtomicU64,
    settle: Duration,
    settled: fn(u64),
    after: &'static str,
) {
    if !ENABLED.load(Ordering::Relaxed) || settling.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        settling.store(false, Ordering::Release);
        return;
    };
    runtime.spawn(async move {
        // Lets later work schedule a release if this task is dropped (its runtime ends).
        struct Waiting(&'static AtomicBool);
        impl Drop for Waiting {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let waiting = Waiting(settling);
        loop {
            let before = counter.load(Ordering::Relaxed);
            tokio::time::sleep(settle).await;
            if counter.load(Ordering::Relaxed) == before {
                settled(before);
                break;
            }
        }
        // Work from now on schedules a release of its own.
        drop(waiting);
        if ENABLED.load(Ordering::Relaxed) {
            let released = tokio::task::spawn_blocking(release).await.unwrap_or(false);
            tracing::debug!(released, after, "gave freed memory back to the system");
        }
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod imp {
    pub(super) fn release() -> bool {
        // SAFETY: `malloc_trim` takes no pointer and has no precondition; glibc serializes it
        // with every other allocator call.
        unsafe { libc::malloc_trim(0) == 1 }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    pub(super) fn release() -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_should_give_back_what_a_burst_freed() {
        // A burst of small allocations freed below one that stays: glibc cannot trim the top
        // of the heap by itself and keeps the pages until asked.
        let burst: Vec<Vec<u8>> = (0..200_000).map(|i| vec![i as u8; 200]).collect();
        let stays = vec![1u8; 64];
        drop(burst);
        let released = release();
        drop(stays);
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(released, "glibc had free pages to return after the burst");
        } else {
            assert!(!released);
        }
    }
}
