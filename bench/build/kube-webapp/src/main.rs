//! The WebApp operator with kube-runtime alone: each WebApp becomes a Deployment and a Service it
//! owns (server-side apply), its status reports the Deployment's progress with a Ready
//! condition. `build-bench-kube crd` prints the CRD. The baseline of `bench/build/run`.

mod kind;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, CustomResourceExt, Resource, ResourceExt};
use serde_json::json;

use kind::{Exposure, WebApp};

const MANAGER: &str = "webapp-operator";

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("building a child object: {0}")]
    Build(#[from] serde_json::Error),
    #[error("the WebApp has no namespace")]
    NoNamespace,
}

struct Ctx {
    client: Client,
}

fn selector_labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app.kubernetes.io/instance".to_owned(), name.to_owned())])
}

async fn reconcile(app: Arc<WebApp>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = app.name_any();
    let ns = app.namespace().ok_or(Error::NoNamespace)?;
    let owner = app
        .controller_owner_ref(&())
        .into_iter()
        .collect::<Vec<_>>();
    let labels = selector_labels(&name);
    let params = PatchParams::apply(MANAGER).force();

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
        "metadata": { "name": name, "labels": labels, "ownerReferences": owner },
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
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let deployment = deployments
        .patch(&name, &params, &Patch::Apply(&deployment))
        .await?;

    let service: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": name, "labels": labels, "ownerReferences": owner },
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
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    services
        .patch(&name, &params, &Patch::Apply(&service))
        .await?;

    let status = deployment.status.unwrap_or_default();
    let ready = status.ready_replicas.unwrap_or(0) >= app.spec.replicas;
    let condition = Condition {
        type_: "Ready".into(),
        status: if ready { "True" } else { "False" }.into(),
        reason: if ready {
            "AllReplicasReady"
        } else {
            "Progressing"
        }
        .into(),
        message: format!(
            "{}/{} replicas ready",
            status.ready_replicas.unwrap_or(0),
            app.spec.replicas
        ),
        observed_generation: app.meta().generation,
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
    };
    let apps: Api<WebApp> = Api::namespaced(ctx.client.clone(), &ns);
    let status = json!({ "status": {
        "replicas": status.replicas.unwrap_or(0),
        "readyReplicas": status.ready_replicas.unwrap_or(0),
        "selector": format!("app.kubernetes.io/instance={name}"),
        "observedGeneration": app.meta().generation,
        "conditions": [condition],
    }});
    apps.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_app: Arc<WebApp>, error: &Error, _ctx: Arc<Ctx>) -> Action {
    tracing::warn!(%error, "reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("crd") {
        println!("{}", serde_json::to_string_pretty(&WebApp::crd())?);
        return Ok(());
    }
    let client = Client::try_default().await?;
    let apps: Api<WebApp> = Api::all(client.clone());
    Controller::new(apps, watcher::Config::default())
        .owns(
            Api::<Deployment>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
        )
        .run(reconcile, error_policy, Arc::new(Ctx { client }))
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::warn!(%error, "reconcile error");
            }
        })
        .await;
    Ok(())
}
