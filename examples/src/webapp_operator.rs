//! The `WebApp` operator, with dependents: each WebApp becomes a ConfigMap (its environment), a
//! Deployment and a Service, declared as desired-state methods and applied by the framework, which
//! also keeps `Ready` / `Progressing` / `Degraded` and `observedGeneration` in the status; the
//! `status` method adds the pod counts and the scale selector, and the `reconcile` that runs after
//! the dependents records the app in a registry ConfigMap (standing in for an outside system) and
//! publishes `RolledOut`. A finalizer removes the registry row before the WebApp is deleted.
//! `webapp_imperative.rs` is the same operator written by hand, for comparison.
//!
//! The local control plane has no kubelet, so pods are created but never run: the Deployment is
//! ready here when its controller created every requested pod for the current spec
//! (`readyReplicas` is reported as the cluster says, 0 locally).

use std::collections::BTreeMap;
use std::sync::Arc;

use kubeforge::crd::READY;
use kubeforge::dependents::Reconciled;
use kubeforge::k8s_openapi::api::apps::v1::Deployment;
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Service};
use kubeforge::prelude::*;
use kubeforge::serde_json::{self, json};
use kubeforge::tracing;

use crate::webapp::{Exposure, WebApp, WebAppStatus};
pub use crate::webapp_imperative::{Error, MANAGER, REGISTRY, selector_labels};
use crate::webapp_imperative::{publish, register, unregister};

/// The WebApp controller.
pub struct WebAppController {
    /// Publishes events about WebApps.
    pub recorder: Arc<Recorder>,
}

#[kubeforge::controller(
    for = WebApp,
    dependents(env, deployment(depends_on(env), ready = rolled_out), service),
    concurrency = 4,
    finalizer = "apps.kubeforge.dev/registry",
    predicates(generation_changed, labels_changed),
)]
impl WebAppController {
    fn env(&self, app: &WebApp, _: &Context<WebApp>) -> Result<ConfigMap, Error> {
        let env: BTreeMap<&str, &str> =
            app.spec.env.iter().map(|e| (&*e.name, &*e.value)).collect();
        Ok(serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": format!("{}-env", app.name_any()), "labels": selector_labels(&app.name_any()) },
            "data": env,
        }))?)
    }

    fn deployment(&self, app: &WebApp, _: &Context<WebApp>) -> Result<Deployment, Error> {
        let name = app.name_any();
        let labels = selector_labels(&name);
        let mut pod_labels = app.spec.pod_labels.clone();
        pod_labels.extend(labels.clone());
        Ok(serde_json::from_value(json!({
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
                        "envFrom": [{ "configMapRef": { "name": format!("{name}-env") } }],
                        "resources": app.spec.resources,
                    }]}
                }
            }
        }))?)
    }

    fn service(&self, app: &WebApp, _: &Context<WebApp>) -> Result<Service, Error> {
        let name = app.name_any();
        let labels = selector_labels(&name);
        Ok(serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": { "name": name, "labels": labels },
            "spec": {
                "type": match app.spec.exposure {
                    Exposure::Internal => "ClusterIP",
                    Exposure::NodePort => "NodePort",
                    Exposure::LoadBalancer => "LoadBalancer",
                },
                "selector": labels,
                "ports": [{
                    "port": app.spec.port,
                    "targetPort": app.spec.target_port.clone().map_or(json!(app.spec.port), |t| json!(t)),
                }],
            }
        }))?)
    }

    /// Pod counts and the scale subresource's selector, next to the framework's conditions.
    fn status(&self, app: &WebApp, done: &Reconciled, status: &mut WebAppStatus) {
        let deployment = done.get::<Deployment>("deployment");
        let counts = deployment
            .and_then(|d| d.status.clone())
            .unwrap_or_default();
        status.replicas = counts.replicas.unwrap_or(0);
        status.ready_replicas = counts.ready_replicas.unwrap_or(0);
        let selector: Vec<String> = selector_labels(&app.name_any())
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        status.selector = Some(selector.join(","));
    }

    /// After the dependents: the registry row, and `RolledOut` when the app turned ready.
    async fn reconcile(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> {
        register(&app, ctx).await?;
        let was_ready = app
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.is_true(READY));
        if ctx.dependents().is_some_and(Reconciled::all_ready) && !was_ready {
            let note = format!("{} pods created", app.spec.replicas);
            tracing::info!(webapp = %app.name_any(), "rolled out");
            publish(
                &self.recorder,
                &app,
                EventType::Normal,
                "RolledOut",
                "Reconcile",
                &note,
            )
            .await;
        }
        Ok(Action::Done)
    }

    async fn cleanup(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> {
        // Remove our row from the registry; the children go with garbage collection. Cleanup
        // is at-least-once (a failover can run it again on the next leader): only the run that
        // removed the row says so.
        if !unregister(&app, ctx).await? {
            return Ok(Action::Done);
        }
        let note = "removed from the registry";
        publish(
            &self.recorder,
            &app,
            EventType::Normal,
            "Unregistered",
            "Cleanup",
            note,
        )
        .await;
        Ok(Action::Done)
    }
}

/// The Deployment controller created every requested pod for the current spec.
fn rolled_out(deployment: &Deployment) -> bool {
    let wanted = deployment.spec.replicas.unwrap_or(1);
    deployment.status.as_ref().is_some_and(|s| {
        s.observed_generation >= deployment.metadata.generation
            && s.updated_replicas.unwrap_or(0) == wanted
            && s.replicas.unwrap_or(0) == wanted
    })
}
