//! The `WebApp` operator written imperatively, for comparison with `webapp_operator.rs` (the same
//! behaviour with dependents): each WebApp becomes a ConfigMap (its environment), a Deployment and a
//! Service, all owned by it; its status reports the Deployment's progress with conditions; the
//! scale subresource resizes it; a finalizer removes its row from a registry ConfigMap (standing
//! in for a record in an outside system) before the WebApp is deleted.
//!
//! The local control plane has no kubelet, so pods are created but never run: `Ready` here means
//! the Deployment controller created every requested pod for the current spec
//! (`readyReplicas` is reported as the cluster says, 0 locally).

use std::collections::BTreeMap;
use std::sync::Arc;

use kubeforge::crd::{PROGRESSING, READY};
use kubeforge::k8s_openapi::api::apps::v1::Deployment;
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Service};
use kubeforge::prelude::*;
use kubeforge::serde_json::{self, json};
use kubeforge::{kube, tracing};

use crate::webapp::{Exposure, WebApp};

/// The WebApp controller.
pub struct WebAppController {
    /// Publishes events about WebApps.
    pub recorder: Arc<Recorder>,
}

#[kubeforge::controller(
    for = WebApp,
    name = "webapp-imperative",
    owns(Deployment, Service, ConfigMap),
    concurrency = 4,
    finalizer = "apps.kubeforge.dev/registry",
    predicates(generation_changed, labels_changed),
)]
impl WebAppController {
    async fn reconcile(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> {
        let name = app.name_any();
        let labels = selector_labels(&name);

        let env: BTreeMap<String, String> = app
            .spec
            .env
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect();
        let config: ConfigMap = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": format!("{name}-env"), "labels": labels },
            "data": env,
        }))?;
        ctx.apply_owned(app.as_ref(), MANAGER, config).await?;

        let mut pod_labels = app.spec.pod_labels.clone();
        pod_labels.extend(labels.clone());
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
                        "envFrom": [{ "configMapRef": { "name": format!("{name}-env") } }],
                        "resources": app.spec.resources,
                    }]}
                }
            }
        }))?;
        let deployment = ctx.apply_owned(app.as_ref(), MANAGER, deployment).await?;
        tracing::debug!(webapp = %name, "children applied");

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
                "ports": [{
                    "port": app.spec.port,
                    "targetPort": app.spec.target_port.clone().map_or(json!(app.spec.port), |t| json!(t)),
                }],
            }
        }))?;
        ctx.apply_owned(app.as_ref(), MANAGER, service).await?;

        register(&app, ctx).await?;
        self.update_status(&app, &deployment, ctx).await?;
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

/// Field manager of everything the operator writes.
pub const MANAGER: &str = "webapp-operator";
/// Name of the registry ConfigMap (one per namespace): a row per WebApp, `name: image`.
pub const REGISTRY: &str = "webapp-registry";

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the apiserver failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// A child object could not be built.
    #[error("building a child object: {0}")]
    Build(#[from] serde_json::Error),
    /// A dependent could not be applied (`webapp_operator.rs`).
    #[error(transparent)]
    Dependents(#[from] kubeforge::dependents::DependentsError),
}

/// Records `name: image` in the namespace's registry (the "outside system").
pub async fn register(app: &WebApp, ctx: &Context<WebApp>) -> Result<(), Error> {
    let row: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": REGISTRY },
        "data": { app.name_any(): app.spec.image },
    }))?;
    // Server-side apply with one field manager per app: each app owns exactly its row.
    ctx.api::<ConfigMap>()
        .patch(
            REGISTRY,
            &PatchParams::apply(&format!("{MANAGER}-{}", app.name_any())).force(),
            &Patch::Apply(&row),
        )
        .await?;
    Ok(())
}

/// Removes the app's row from the registry; whether this call removed it (`false`: gone
/// already, removed by an earlier run of the cleanup, or no registry). Idempotent: a JSON-patch
/// `remove` of an absent row fails (422) and changes nothing.
pub async fn unregister(app: &WebApp, ctx: &Context<WebApp>) -> Result<bool, Error> {
    let key = app.name_any().replace('~', "~0").replace('/', "~1");
    let patch: json_patch::Patch =
        serde_json::from_value(json!([{ "op": "remove", "path": format!("/data/{key}") }]))?;
    let registry: Api<ConfigMap> = ctx.api();
    match registry
        .patch(REGISTRY, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 422 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Publishes an event about `app`; a failure is logged, never the reconcile's.
pub async fn publish(
    recorder: &Recorder,
    app: &WebApp,
    type_: EventType,
    reason: &str,
    action: &str,
    note: &str,
) {
    let published = recorder.publish(app, type_, reason, action, Some(note.to_owned()));
    if let Err(error) = published.await {
        tracing::warn!(%error, "publishing an event failed");
    }
}

impl WebAppController {
    async fn update_status(
        &self,
        app: &WebApp,
        deployment: &Deployment,
        ctx: &Context<WebApp>,
    ) -> Result<(), Error> {
        let generation = app.meta().generation.unwrap_or(0);
        let dep_status = deployment.status.clone().unwrap_or_default();
        let rolled_out = dep_status.observed_generation >= deployment.metadata.generation
            && dep_status.updated_replicas.unwrap_or(0) == app.spec.replicas
            && dep_status.replicas.unwrap_or(0) == app.spec.replicas;
        let mut status = app.status.clone().unwrap_or_default();
        let before = status.clone();
        status.replicas = dep_status.replicas.unwrap_or(0);
        status.ready_replicas = dep_status.ready_replicas.unwrap_or(0);
        status.selector = Some(
            selector_labels(&app.name_any())
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
        );
        status.observed_generation = Some(generation);
        let message = format!("{}/{} pods created", status.replicas, app.spec.replicas);
        status.conditions.mark(
            READY,
            rolled_out,
            if rolled_out {
                "RolledOut"
            } else {
                "RollingOut"
            },
            &message,
            generation,
        );
        status.conditions.mark(
            PROGRESSING,
            !rolled_out,
            if rolled_out {
                "Complete"
            } else {
                "CreatingPods"
            },
            &message,
            generation,
        );
        if status != before {
            let became_ready = rolled_out && !before.conditions.is_true(READY);
            tracing::info!(
                webapp = %app.name_any(),
                ready = rolled_out,
                "status: {message}{}",
                if became_ready { ", Ready" } else { "" }
            );
            ctx.patch_status(&Patch::Merge(json!({ "status": status })))
                .await?;
            if became_ready {
                publish(
                    &self.recorder,
                    app,
                    EventType::Normal,
                    "RolledOut",
                    "Reconcile",
                    &message,
                )
                .await;
            }
        }
        Ok(())
    }
}

/// The labels that tie a WebApp's children and pods together.
pub fn selector_labels(name: &str) -> BTreeMap<String, String> {
    [
        ("app.kubernetes.io/name".to_owned(), "webapp".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), name.to_owned()),
    ]
    .into()
}
