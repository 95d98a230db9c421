//! A test operator for shutdown on signals: it reconciles the ConfigMaps labelled `signal=true` in
//! its namespace, each by sleeping for the milliseconds in its data key `sleep_ms` (default 0,
//! standing for slow work or a call stuck on a dead connection), then annotating it with
//! `signal/done=<the resourceVersion it reconciled>`. A ConfigMap already annotated is left alone.
//!
//! On stdout it prints `started` before the manager runs, and `begin <name>` / `end <name>` around
//! each reconcile that does the work (`end` only once the annotation is written), so the signal
//! tests can tell which reconciles were in flight at a signal and whether they finished.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kubeforge::cli::or_exit;
use kubeforge::controller::{Action, Context, Controller, Reconciler};
use kubeforge::informer::InformerConfig;

const DONE: &str = "signal/done";

struct SlowWork;

impl Reconciler<ConfigMap> for SlowWork {
    type Error = kube::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, kube::Error> {
        let meta = &cm.metadata;
        if meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(DONE))
        {
            return Ok(Action::Done);
        }
        let sleep_ms = cm
            .data
            .as_ref()
            .and_then(|d| d.get("sleep_ms"))
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(0);
        let name = &ctx.key().name;
        println!("begin {name}");
        tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
        // The UID makes the write fail, rather than land on a namesake, if the object was replaced.
        let done = serde_json::json!({ "metadata": {
            "uid": meta.uid,
            "annotations": { DONE: meta.resource_version },
        }});
        ctx.api::<ConfigMap>()
            .patch(name, &PatchParams::default(), &Patch::Merge(done))
            .await?;
        println!("end {name}");
        Ok(Action::Done)
    }
}

#[tokio::main]
async fn main() {
    let options = kubeforge::cli::parse!();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let namespace = options
        .namespace
        .first()
        .cloned()
        .unwrap_or_else(|| "default".to_owned());
    let manager = or_exit(options.manager(client.clone()));
    let controller = Controller::new(
        "signal",
        manager.wiring(),
        Api::<ConfigMap>::namespaced(client, &namespace),
        InformerConfig::default().labels("signal=true"),
    );
    let manager = manager.add_controller(controller, SlowWork);
    println!("started");
    or_exit(manager.run().await);
}
