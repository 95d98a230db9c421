//! What runners and runnables report: a runnable's [`Lifecycle`] (its readiness check) and a
//! runner's own metrics, merged with its children's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{IntCounter, IntGauge, Opts};

use crate::health::{Check, check};

/// Where a runnable is in its life; see [`Lifecycle`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Stage {
    /// Not run yet.
    #[default]
    NotStarted,
    /// Started, not working yet (a controller waiting for its informers to sync).
    Starting,
    /// Working.
    Running,
    /// Returned after its shutdown.
    Stopped,
    /// Returned with this error.
    Failed(String),
}

/// A runnable's stage, shared between the runnable (which sets it) and its readiness check
/// (which reads it): ready only while [`Stage::Running`].
///
/// ```
/// use kubeforge::runner::{Lifecycle, Stage};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let lifecycle = Lifecycle::default();
/// let check = lifecycle.check();
/// assert_eq!(check().await, Err("not started".to_owned()));
/// lifecycle.set(Stage::Running);
/// assert_eq!(check().await, Ok(()));
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Lifecycle(Arc<Mutex<Stage>>);

impl Lifecycle {
    /// Moves to `stage`.
    pub fn set(&self, stage: Stage) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = stage;
    }

    /// The current stage.
    pub fn stage(&self) -> Stage {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A readiness check that passes while the runnable is [`Stage::Running`] and otherwise says
    /// where it is.
    pub fn check(&self) -> Check {
        let me = self.clone();
        check(move || {
            let stage = me.stage();
            async move {
                match stage {
                    Stage::Running => Ok(()),
                    Stage::NotStarted => Err("not started".to_owned()),
                    Stage::Starting => {
                        Err("starting: waiting for its informers to sync".to_owned())
                    }
                    Stage::Stopped => Err("stopped".to_owned()),
                    Stage::Failed(error) => Err(format!("failed: {error}")),
                }
            }
        })
    }
}

/// A runner's own series: `kubeforge_runner_runnables{runner}` (runnables running now) and
/// `kubeforge_runner_failures_total{runner}` (runnables that failed or panicked).
#[derive(Clone)]
pub(super) struct Stats {
    pub(super) name: Arc<str>,
    /// `None` only if the series could not be built (their names are constant and valid).
    running: Option<IntGauge>,
    failures: Option<IntCounter>,
}

impl Stats {
    pub(super) fn new(name: &str) -> Self {
        let opts = |metric: &str, help: &str| Opts::new(metric, help).const_label("runner", name);
        Self {
            name: name.into(),
            running: IntGauge::with_opts(opts(
                "kubeforge_runner_runnables",
                "Runnables currently running under the runner.",
            ))
            .ok(),
            failures: IntCounter::with_opts(opts(
                "kubeforge_runner_failures_total",
                "Runnables of the runner that failed or panicked.",
            ))
            .ok(),
        }
    }

    pub(super) fn set_running(&self, n: usize) {
        if let Some(running) = &self.running {
            running.set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    pub(super) fn failed(&self) {
        if let Some(failures) = &self.failures {
            failures.inc();
        }
    }

    /// These series followed by `children`'s, merged by family.
    pub(super) fn families(&self, children: Vec<MetricFamily>) -> Vec<MetricFamily> {
        let mut all = Vec::new();
        if let Some(running) = &self.running {
            all.extend(running.collect());
        }
        if let Some(failures) = &self.failures {
            all.extend(failures.collect());
        }
        all.extend(children);
        merge_families(all)
    }
}

/// Merges families of the same name (series gathered from several runners), sorted by name.
pub fn merge_families(families: Vec<MetricFamily>) -> Vec<MetricFamily> {
    let mut merged: BTreeMap<String, MetricFamily> = BTreeMap::new();
    for mut family in families {
        match merged.get_mut(family.name()) {
            Some(existing) => existing.mut_metric().extend(family.take_metric()),
            None => {
                merged.insert(family.name().to_owned(), family);
            }
        }
    }
    merged.into_values().collect()
}
