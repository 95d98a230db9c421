//! Controllers that follow their CRD: started when the CRD of their kind is Established, stopped
//! when it is deleted, started again when it comes back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use tokio_util::sync::CancellationToken;

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{IntGauge, Opts};

use crate::BoxError;
use crate::controller::Wiring;
use crate::health::{Check, check};
use crate::informer::{Event, InformerConfig};
use crate::runner::{DynamicMultiRunner, Runnable, RunnableId};

/// Builds the runnable of a controller (again) from the wiring.
pub(super) type Start = Arc<dyn Fn(&Wiring) -> Arc<dyn Runnable> + Send + Sync>;

/// Watches one CRD and keeps its controller in `dynamic` while the CRD is Established.
pub(super) struct CrdFollower {
    pub(super) crd: String,
    pub(super) controller: String,
    pub(super) start: Start,
    pub(super) wiring: Wiring,
    pub(super) dynamic: DynamicMultiRunner,
    /// Whether the CRD is Established now (the readiness check and the metric read it).
    pub(super) established: AtomicBool,
}

/// Whether `crd` has the condition `Established=True`.
fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

impl CrdFollower {
    async fn follow(self: Arc<Self>, shutdown: CancellationToken) -> Result<(), BoxError> {
        let api = Api::<CustomResourceDefinition>::all(self.wiring.cache().client());
        let config = InformerConfig::default().fields(format!("metadata.name={}", self.crd));
        let informer = self.wiring.cache().informer(api, config);
        let mut events = informer.subscribe();
        let mut running: Option<RunnableId> = None;
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => break,
                event = events.recv() => event,
            };
            let Some(event) = event else { break };
            let established = match &event {
                Event::Applied { new, .. } | Event::Resync(new) => is_established(new),
                Event::Deleted(_) => false,
            };
            self.established.store(established, Ordering::Relaxed);
            match (established, running) {
                (true, None) => {
                    tracing::info!(crd = %self.crd, controller = %self.controller, "CRD established; starting the controller");
                    running = Some(self.dynamic.add((self.start)(&self.wiring)));
                }
                (false, Some(id)) => {
                    tracing::info!(crd = %self.crd, controller = %self.controller, "CRD gone; stopping the controller");
                    self.dynamic.remove(id);
                    running = None;
                }
                _ => {}
            }
        }
        if let Some(id) = running {
            self.dynamic.remove(id);
        }
        Ok(())
    }
}

/// The follower as a runnable of the manager. Its readiness check `crd-<name>` passes while the
/// CRD is Established; its metric is `kubeforge_crd_established{crd, controller}`.
pub(super) struct Following(pub(super) Arc<CrdFollower>);

impl Runnable for Following {
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Arc::clone(&self.0).follow(shutdown).boxed()
    }

    fn health_checks(&self) -> Vec<(String, Check)> {
        let ready = self.0.established.load(Ordering::Relaxed);
        let crd = self.0.crd.clone();
        vec![(
            format!("crd-{crd}"),
            check(move || {
                let crd = crd.clone();
                async move {
                    ready
                        .then_some(())
                        .ok_or_else(|| format!("CRD {crd} is not established"))
                }
            }),
        )]
    }

    fn metrics(&self) -> Vec<MetricFamily> {
        established_metric(
            &self.0.crd,
            &self.0.controller,
            self.0.established.load(Ordering::Relaxed),
        )
    }
}

/// `kubeforge_crd_established{crd, controller}`: whether `crd` is Established.
pub(crate) fn established_metric(
    crd: &str,
    controller: &str,
    established: bool,
) -> Vec<MetricFamily> {
    let opts = Opts::new(
        "kubeforge_crd_established",
        "Whether the CRD a controller follows is Established (1) or not (0).",
    )
    .const_label("crd", crd)
    .const_label("controller", controller);
    IntGauge::with_opts(opts)
        .map(|gauge| {
            gauge.set(i64::from(established));
            gauge.collect()
        })
        .unwrap_or_default()
}
