//! Copies the data of every ConfigMap labelled `copy=true` into an owned Secret `<name>-copy`:
//! the runtime used by hand, without macros (the book's "runtime by hand" code).

// ANCHOR: all
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubeforge::prelude::*;
use kubeforge::{kube, serde_json};
use std::sync::Arc;

struct Settings;

impl Reconciler<ConfigMap> for Settings {
    type Error = kube::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, kube::Error> {
        // Level-triggered: `cm` is the latest cached version; make the world match it.
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": format!("{}-copy", ctx.key().name) },
            "stringData": cm.data.clone().unwrap_or_default(),
        }))
        .map_err(kube::Error::SerdeError)?;
        ctx.apply_owned(&cm, "settings-controller", secret).await?;
        Ok(Action::Done)
    }
}

#[kubeforge::tokio::main(crate = "kubeforge::tokio")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // kube's config inference; kubeforge's client notices dead connections in seconds.
    let client = kubeforge::client::connect(kube::Config::infer().await?)?;
    let manager = Manager::new(client.clone());
    let controller = Controller::new(
        "settings",
        manager.wiring(),
        Api::<ConfigMap>::all(client.clone()),
        InformerConfig::default().labels("copy=true"),
    )
    // The copies are written, never read back: cache their metadata only.
    .owns(Api::<Secret>::all(client), Owns::metadata())
    .config(ControllerConfig::default().concurrency(4));
    manager.add_controller(controller, Settings).run().await?; // until SIGTERM / ctrl-c
    Ok(())
}
// ANCHOR_END: all
