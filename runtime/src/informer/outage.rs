//! The outage lifecycle of an informer's list/watch, as its logs tell it.
//!
//! kube's watcher hides most of what happens to a watch: it resumes a closed watch silently, and
//! it reports an error on each failed attempt. Logged as such, an outage was either invisible
//! (a watch re-established, a relist after `410 Gone`: `debug` in kube) or one line per retry.
//! [`Lifecycle`] turns what the informer sees into one line per event:
//!
//! | event | level | message | fields (besides `kind`, `namespace`, `labels`, `fields`) |
//! |---|---|---|---|
//! | a list/watch that worked fails | `warn` | `list/watch failed; retrying` | `error`, `retry_in` |
//! | each further failed attempt | `debug` | `list/watch failed again; retrying` | `error`, `retry_in`, `failures` |
//! | the apiserver answers again | `info` | `list/watch recovered` | `down`, `retries` |
//! | a relist starts | `info` | `relisting` | `reason` |
//! | the relist is complete | `info` | `relisted` | `objects`, `took` |
//! | the first list is complete | `debug` | `informer synced` | `objects`, `took` |
//!
//! "Answers again" is the first response to a list or watch of the informer after the failure
//! (the informer's client reports them, [`super::answering`]), or any event. The apiserver
//! closing a watch after its timeout (every few minutes), resumed at once, is no outage: nothing
//! is logged above `debug`. `410 Gone` is no failure either: the apiserver answered, the
//! informer's resourceVersion is too old, and the relist that follows says so in its `reason`.

use std::time::Duration;

use tokio::time::Instant;

/// Whether the list/watch works.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Health {
    /// Working (or not tried yet).
    Healthy,
    /// Failing since `since`, after `failures` failed attempts.
    Failing { since: Instant, failures: u32 },
}

/// What happened to the list/watch, worth a line of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Transition {
    /// A list/watch that worked failed: an outage starts (`warn`).
    Failed,
    /// Another failed attempt of the same outage, the `failures`-th (`debug`).
    FailedAgain {
        /// Failed attempts since the outage started, this one included.
        failures: u32,
    },
    /// The apiserver answered again after `down`, on the `retries`-th retry (`info`).
    Recovered {
        /// Since the first failure.
        down: Duration,
        /// Retries it took: one per failed attempt.
        retries: u32,
    },
    /// A relist starts, because of `reason` (`info`).
    Relisting {
        /// Why: `410 Gone`, the error that ended the watch, or the informer's own decision.
        reason: String,
    },
    /// A relist is complete (`info`).
    Relisted {
        /// Since the relist started (its retries included).
        took: Duration,
    },
    /// The informer's first list is complete (`debug`: no outage).
    Synced {
        /// Since the list started (its retries included).
        took: Duration,
    },
}

/// The reason of a relist after `410 Gone`.
pub(super) const GONE: &str = "resourceVersion too old (410 Gone)";

/// The state behind the informer's outage lines: healthy or failing, and the (re)list in
/// progress. Pure: the caller says what happened and when, and logs what it returns.
#[derive(Debug)]
pub(super) struct Lifecycle {
    health: Health,
    /// Why the next relist happens: the last error seen outside a list, or the informer's
    /// decision.
    cause: Option<String>,
    /// When the (re)list in progress started (its first attempt).
    listing: Option<Instant>,
    /// Whether a list has completed once.
    synced: bool,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self {
            health: Health::Healthy,
            cause: None,
            listing: None,
            synced: false,
        }
    }
}

impl Lifecycle {
    /// An attempt failed with `error` (a transport error, a status other than `410`).
    pub(super) fn failed(&mut self, error: &str, now: Instant) -> Transition {
        if self.listing.is_none() {
            self.cause = Some(format!("the watch failed: {error}"));
        }
        match &mut self.health {
            Health::Healthy => {
                self.health = Health::Failing {
                    since: now,
                    failures: 1,
                };
                Transition::Failed
            }
            Health::Failing { failures, .. } => {
                *failures += 1;
                Transition::FailedAgain {
                    failures: *failures,
                }
            }
        }
    }

    /// The apiserver said `410 Gone`: it answers (which may end an outage), and the relist that
    /// follows is because of it.
    pub(super) fn gone(&mut self, now: Instant) -> Option<Transition> {
        self.relist_because(GONE.to_owned());
        self.answered(now)
    }

    /// The next relist happens because of `reason` (the informer decided it).
    pub(super) fn relist_because(&mut self, reason: String) {
        self.cause = Some(reason);
    }

    /// The apiserver answered a list or watch, or sent an event: an outage is over.
    pub(super) fn answered(&mut self, now: Instant) -> Option<Transition> {
        match std::mem::replace(&mut self.health, Health::Healthy) {
            Health::Healthy => None,
            Health::Failing { since, failures } => Some(Transition::Recovered {
                down: now.saturating_duration_since(since),
                retries: failures,
            }),
        }
    }

    /// A (re)list starts. A new attempt of the list in progress is no new relist; the first
    /// list is no relist.
    pub(super) fn list_started(&mut self, now: Instant) -> Option<Transition> {
        if self.listing.is_some() {
            return None;
        }
        self.listing = Some(now);
        let cause = self.cause.take();
        self.synced.then(|| Transition::Relisting {
            reason: cause.unwrap_or_else(|| "the watch ended and could not resume".to_owned()),
        })
    }

    /// The (re)list in progress is complete.
    pub(super) fn list_done(&mut self, now: Instant) -> Transition {
        let took = self.listing.take().map_or(Duration::ZERO, |started| {
            now.saturating_duration_since(started)
        });
        let first = !self.synced;
        self.synced = true;
        self.cause = None;
        if first {
            Transition::Synced { took }
        } else {
            Transition::Relisted { took }
        }
    }
}

/// `error`'s text (a client error in it [`readable`](crate::client::readable)), with its root
/// cause in parentheses when the text does not say it already
/// (kube's watch errors stop at "error reading a body from connection"; the cause says "stream
/// closed because of a broken pipe", "connection refused", "the apiserver sent nothing for …").
pub(super) fn with_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let text = crate::text::said(error);
    let chain = crate::text::chain(error);
    let cause = chain
        .last()
        .map(|root| crate::text::said(*root))
        .unwrap_or_default();
    if cause.is_empty() || text.contains(&cause) {
        text
    } else {
        format!("{text} ({cause})")
    }
}

/// A duration for a log line, to a tenth of a unit (`63.2s`, `12.0ms`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Rounded(pub(super) Duration);

impl std::fmt::Display for Rounded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.1?}", self.0)
    }
}

/// What an informer's outage lines name: its kind, namespace and selectors.
#[derive(Debug)]
pub(super) struct Subject {
    pub(super) kind: String,
    pub(super) namespace: Option<String>,
    pub(super) labels: Option<String>,
    pub(super) fields: Option<String>,
}

impl Subject {
    /// Logs a failed attempt: the first of an outage at `warn`, the others at `debug`.
    pub(super) fn failure(&self, transition: &Transition, error: &str, retry_in: Duration) {
        let (kind, namespace) = (&self.kind, self.namespace.as_deref());
        let (labels, fields) = (self.labels.as_deref(), self.fields.as_deref());
        let retry_in = Rounded(retry_in);
        match transition {
            Transition::FailedAgain { failures } => tracing::debug!(
                %kind, namespace, labels, fields, error, %retry_in, failures,
                "list/watch failed again; retrying"
            ),
            _ => tracing::warn!(
                %kind, namespace, labels, fields, error, %retry_in,
                "list/watch failed; retrying"
            ),
        }
    }

    /// Logs a transition other than a failure.
    pub(super) fn report(&self, transition: &Transition, objects: usize) {
        let (kind, namespace) = (&self.kind, self.namespace.as_deref());
        let (labels, fields) = (self.labels.as_deref(), self.fields.as_deref());
        match transition {
            Transition::Failed | Transition::FailedAgain { .. } => {}
            Transition::Recovered { down, retries } => tracing::info!(
                %kind, namespace, labels, fields, down = %Rounded(*down), retries,
                "list/watch recovered"
            ),
            Transition::Relisting { reason } => tracing::info!(
                %kind, namespace, labels, fields, reason = reason.as_str(),
                "relisting"
            ),
            Transition::Relisted { took } => tracing::info!(
                %kind, namespace, labels, fields, objects, took = %Rounded(*took),
                "relisted"
            ),
            Transition::Synced { took } => tracing::debug!(
                %kind, namespace, labels, fields, objects, took = %Rounded(*took),
                "informer synced"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, secs: u64) -> Instant {
        start + Duration::from_secs(secs)
    }

    /// A lifecycle after its first list.
    fn synced(start: Instant) -> Lifecycle {
        let mut l = Lifecycle::default();
        assert_eq!(l.list_started(start), None, "the first list is no relist");
        assert_eq!(
            l.list_done(start),
            Transition::Synced {
                took: Duration::ZERO
            }
        );
        l
    }

    #[test]
    fn an_outage_should_be_one_failure_then_quiet_retries_then_one_recovery() {
        let t = Instant::now();
        let mut l = synced(t);
        assert_eq!(l.failed("connection reset", at(t, 10)), Transition::Failed);
        for failures in 2..=6 {
            assert_eq!(
                l.failed("connection refused", at(t, 10 + u64::from(failures))),
                Transition::FailedAgain { failures }
            );
        }
        assert_eq!(
            l.answered(at(t, 73)),
            Some(Transition::Recovered {
                down: Duration::from_secs(63),
                retries: 6
            })
        );
        assert_eq!(l.answered(at(t, 74)), None, "recovered once");
        // A later failure is a new outage.
        assert_eq!(l.failed("ping timeout", at(t, 500)), Transition::Failed);
    }

    #[test]
    fn answers_while_healthy_should_say_nothing() {
        // The apiserver closes watches every few minutes; each is resumed at once.
        let t = Instant::now();
        let mut l = synced(t);
        for s in 0..10 {
            assert_eq!(l.answered(at(t, 300 * s)), None);
        }
    }

    #[test]
    fn gone_should_relist_with_its_reason_and_end_an_outage() {
        let t = Instant::now();
        let mut l = synced(t);
        assert_eq!(l.gone(at(t, 5)), None, "410 while healthy is no failure");
        assert_eq!(
            l.list_started(at(t, 5)),
            Some(Transition::Relisting {
                reason: GONE.to_owned()
            })
        );
        assert_eq!(
            l.list_done(at(t, 7)),
            Transition::Relisted {
                took: Duration::from_secs(2)
            }
        );

        // After an outage, the 410 is the apiserver's first answer.
        assert_eq!(
            l.failed("connection refused", at(t, 10)),
            Transition::Failed
        );
        assert_eq!(
            l.gone(at(t, 40)),
            Some(Transition::Recovered {
                down: Duration::from_secs(30),
                retries: 1
            })
        );
        assert_eq!(
            l.list_started(at(t, 40)),
            Some(Transition::Relisting {
                reason: GONE.to_owned()
            })
        );
    }

    #[test]
    fn retries_of_a_relist_should_be_one_relist_and_one_outage() {
        let t = Instant::now();
        let mut l = synced(t);
        l.gone(at(t, 1));
        assert!(matches!(
            l.list_started(at(t, 1)),
            Some(Transition::Relisting { .. })
        ));
        // The apiserver goes away during the relist: each retry starts the list again.
        assert_eq!(l.failed("connection refused", at(t, 2)), Transition::Failed);
        for failures in 2..=5 {
            assert_eq!(l.list_started(at(t, u64::from(failures))), None);
            assert_eq!(
                l.failed("connection refused", at(t, u64::from(failures))),
                Transition::FailedAgain { failures }
            );
        }
        assert_eq!(l.list_started(at(t, 20)), None);
        assert_eq!(
            l.answered(at(t, 21)),
            Some(Transition::Recovered {
                down: Duration::from_secs(19),
                retries: 5
            })
        );
        assert_eq!(
            l.list_done(at(t, 22)),
            Transition::Relisted {
                took: Duration::from_secs(21)
            }
        );
    }

    #[test]
    fn a_failed_first_list_should_warn_once_and_recover_without_a_relist() {
        let t = Instant::now();
        let mut l = Lifecycle::default();
        assert_eq!(l.list_started(t), None);
        assert_eq!(l.failed("connection refused", at(t, 1)), Transition::Failed);
        assert_eq!(l.list_started(at(t, 2)), None);
        assert!(l.answered(at(t, 3)).is_some());
        assert_eq!(
            l.list_done(at(t, 4)),
            Transition::Synced {
                took: Duration::from_secs(4)
            }
        );
    }

    #[test]
    fn a_relist_should_name_the_error_or_the_decision_behind_it() {
        let t = Instant::now();
        let mut l = synced(t);
        l.failed("no resourceVersion", at(t, 1));
        assert_eq!(
            l.list_started(at(t, 2)),
            Some(Transition::Relisting {
                reason: "the watch failed: no resourceVersion".to_owned()
            })
        );
        l.list_done(at(t, 3));
        l.relist_because("switching to lenient decoding".to_owned());
        assert_eq!(
            l.list_started(at(t, 4)),
            Some(Transition::Relisting {
                reason: "switching to lenient decoding".to_owned()
            })
        );
    }

    #[test]
    fn failures_should_name_their_root_cause_once() {
        let refused =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let error = kube::runtime::watcher::Error::WatchStartFailed(kube::Error::Service(
            Box::new(refused),
        ));
        assert_eq!(
            with_cause(&error),
            "failed to start watching object: connection refused"
        );
        #[derive(Debug, thiserror::Error)]
        #[error("error reading a body from connection")]
        struct Body(#[source] std::io::Error);
        let broken = Body(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            "stream closed because of a broken pipe",
        ));
        let error =
            kube::runtime::watcher::Error::WatchFailed(kube::Error::Service(Box::new(broken)));
        assert_eq!(
            with_cause(&error),
            "watch stream failed: error reading a body from connection (stream \
             closed because of a broken pipe)"
        );
        // Issue 33, item 4: an apiserver answer was a `Status { .. }` dump.
        let forbidden = kube::core::Status::failure(
            "widgets.example.com is forbidden: User \"system:serviceaccount:a:b\" cannot watch",
            "Forbidden",
        )
        .with_code(403);
        let error =
            kube::runtime::watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(forbidden)));
        assert_eq!(
            with_cause(&error),
            "failed to start watching object: 403 Forbidden: widgets.example.com is forbidden: \
             User \"system:serviceaccount:a:b\" cannot watch"
        );
    }

    #[test]
    fn durations_should_be_logged_to_a_tenth() {
        assert_eq!(Rounded(Duration::from_millis(63_249)).to_string(), "63.2s");
        assert_eq!(Rounded(Duration::from_micros(12_040)).to_string(), "12.0ms");
    }
}
