//! The WebApp operator with kubeforge: each WebApp becomes a Deployment and a Service it owns
//! (server-side apply), its status reports the Deployment's progress with a Ready condition.
//! `build-bench-kubeforge crd` prints the CRD. Built by `bench/build/run` against the kube-rs twin.

mod kind;

use std::collections::BTreeMap;
use std::sync::Arc;

use kubeforge::crd::READY;
use kubeforge::k8s_openapi::api::apps::v1::Deployment;
use kubeforge::k8s_openapi::api::core::v1::Service;
use kubeforge::kube;
use kubeforge::prelude::*;
use kubeforge::serde_json::{self, json};

use kind::{Exposure, WebApp};

const MANAGER: &str = "webapp-operator";

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("building a child object: {0}")]
    Build(#[from] serde_json::Error),
}

struct WebAppController;

fn selector_labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app.kubernetes.io/instance".to_owned(), name.to_owned())])
}

// The children are watched for their owner only (kube-runtime's `owns` idiom, a metadata watch
// without a cache): this reconciler reads them from its own apply's answer, never from a cache.
#[kubeforge::controller(for = WebApp, owns(Deployment(uncached), Service(uncached)))]
impl WebAppController {
    async fn reconcile(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> {
        let name = app.name_any();
        let labels = selector_labels(&name);
        let mut pod_labels = app.spec.pod_labels.clone();
        pod_labels.extend(labels.clone());
        let env: Vec<_> = app
            .spec
            .env
            .iter()
            .map(|e| json!({ "name": e.name, "value": e.value }))
            .collect();
        let deployment: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": name, "labels": labels },
            "spec": {
                "replicas": app.spec.replicas,
                "selector": { "matchLabels": labels },
                "template": {
                    "metadata": { "labels": pod_labels },
                    "spec": { "containers": [{
                        "name": "app",
                        "image": app.spec.image,
                        "ports": [{ "containerPort": app.spec.port }],
                        "env": env,
                    }]}
                }
            }
        }))?;
        let deployment = ctx.apply_owned(app.as_ref(), MANAGER, deployment).await?;
        let service: Service = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": { "name": name, "labels": labels },
            "spec": {
                "type": match app.spec.exposure {
                    Exposure::Internal => "ClusterIP",
                    Exposure::NodePort => "NodePort",
                    Exposure::LoadBalancer => "LoadBalancer",
                },
                "selector": labels,
                "ports": [{ "port": app.spec.port }],
            }
        }))?;
        ctx.apply_owned(app.as_ref(), MANAGER, service).await?;

        let dep = deployment.status.unwrap_or_default();
        let generation = app.meta().generation.unwrap_or(0);
        let ready = dep.ready_replicas.unwrap_or(0) >= app.spec.replicas;
        let mut status = app.status.clone().unwrap_or_default();
        status.replicas = dep.replicas.unwrap_or(0);
        status.ready_replicas = dep.ready_replicas.unwrap_or(0);
        status.selector = Some(format!("app.kubernetes.io/instance={name}"));
        status.observed_generation = Some(generation);
        let message = format!(
            "{}/{} replicas ready",
            status.ready_replicas, app.spec.replicas
        );
        let reason = if ready {
            "AllReplicasReady"
        } else {
            "Progressing"
        };
        status
            .conditions
            .mark(READY, ready, reason, &message, generation);
        ctx.patch_status(&Patch::Merge(json!({ "status": status })))
            .await?;
        Ok(Action::Done)
    }
}

#[kubeforge::tokio::main(crate = "kubeforge::tokio")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("crd") {
        println!("{}", serde_json::to_string_pretty(&WebApp::crd())?);
        return Ok(());
    }
    let client = kube::Client::try_default().await?;
    Manager::new(client)
        .controller(WebAppController)
        .run()
        .await?;
    Ok(())
}
