//! Trace and span ids, and the switch the rest of the runtime reads to know whether spans are
//! exported. Always compiled (the worker asks [`exporting`] on every reconcile): without the
//! `otlp` feature, or with it and export off, that is one relaxed atomic load.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};

use kubeforge_shared::random::Rng;

static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether an OTLP exporter is installed (`--otlp-traces`): the worker then links the
/// reconciles of one generation into one trace.
pub(crate) fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

#[cfg(feature = "otlp")]
pub(super) fn set_exporting(on: bool) {
    EXPORTING.store(on, Ordering::Relaxed);
}

/// The ids a span is exported with. `parent` 0: a root span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TraceIds {
    pub(crate) trace: u128,
    pub(crate) span: u64,
    pub(crate) parent: u64,
}

impl TraceIds {
    /// A new trace, this span its root.
    pub(crate) fn root() -> Self {
        Self {
            trace: trace_id(),
            span: span_id(),
            parent: 0,
        }
    }

    /// A new span in `trace`, a child of `parent`.
    pub(crate) fn child_of(trace: u128, parent: u64) -> Self {
        Self {
            trace,
            span: span_id(),
            parent,
        }
    }
}

thread_local! {
    static RNG: RefCell<Rng> = RefCell::new(Rng::from_clock());
    static PENDING: Cell<Option<TraceIds>> = const { Cell::new(None) };
}

/// A random span id, never 0 (0 means "no span" in OTLP).
pub(crate) fn span_id() -> u64 {
    RNG.with(|rng| {
        let mut rng = rng.borrow_mut();
        loop {
            let id = rng.next_u64();
            if id != 0 {
                return id;
            }
        }
    })
}

/// A random trace id, never 0.
pub(crate) fn trace_id() -> u128 {
    (u128::from(span_id()) << 64) | u128::from(span_id())
}

/// Runs `make` (which creates one span) with `ids` waiting for the exporter's layer: the span
/// created first on this thread inside `make` takes them instead of fresh ones (span creation is
/// synchronous, so nothing else on this thread can take them).
pub(crate) fn with_ids<R>(ids: TraceIds, make: impl FnOnce() -> R) -> R {
    PENDING.with(|pending| pending.set(Some(ids)));
    let made = make();
    PENDING.with(|pending| pending.set(None));
    made
}

/// The ids [`with_ids`] left for the span being created, if any.
#[cfg(feature = "otlp")]
pub(super) fn take_pending() -> Option<TraceIds> {
    PENDING.with(Cell::take)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_zero_and_differ() {
        let a = TraceIds::root();
        let b = TraceIds::root();
        assert_ne!(a.trace, 0);
        assert_ne!(a.span, 0);
        assert_eq!(a.parent, 0);
        assert_ne!(a.trace, b.trace);
        let c = TraceIds::child_of(a.trace, a.span);
        assert_eq!((c.trace, c.parent), (a.trace, a.span));
        assert_ne!(c.span, a.span);
    }
}
