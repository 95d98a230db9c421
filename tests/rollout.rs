//! `Rollout`, the kind of the tracing test (`integration/otlp_traces.rs`, run as the
//! `traced-operator` process): a Deployment per Rollout, and `Ready` once the cluster's
//! Deployment controller has created every pod of the current spec. Reaching `Ready` takes
//! several reconciles of one generation (the spec change, then the Deployment's status
//! updates), which is what one trace per generation shows.

use std::sync::Arc;

use kubeforge::BoxError;
use kubeforge::crd::{Conditions, READY};
use kubeforge::k8s_openapi::api::apps::v1::Deployment;
use kubeforge::prelude::*;
use kubeforge::serde_json::{self, json};

/// A Deployment of `replicas` pods of `image`.
#[kubeforge::custom_resource(
    group = "tracing.kubeforge.dev",
    version = "v1",
    kind = "Rollout",
    namespaced,
    status = RolloutStatus
)]
#[derive(Clone, Debug, PartialEq)]
pub struct RolloutSpec {
    /// The image.
    pub image: String,
    /// The pods.
    pub replicas: i32,
}

/// Whether the current spec is rolled out.
#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The generation this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: every pod of this generation was created.
    #[serde(default)]
    pub conditions: Conditions,
}

/// Applies each Rollout's Deployment and reports when it is rolled out.
pub struct RolloutController;

#[kubeforge::controller(for = Rollout, owns(Deployment))]
impl RolloutController {
    async fn reconcile(
        &self,
        rollout: Arc<Rollout>,
        ctx: &Context<Rollout>,
    ) -> Result<Action, BoxError> {
        let name = rollout.name_any();
        let deployment: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": name },
            "spec": {
                "replicas": rollout.spec.replicas,
                "selector": { "matchLabels": { "rollout": name } },
                "template": {
                    "metadata": { "labels": { "rollout": name } },
                    "spec": { "containers": [{ "name": "app", "image": rollout.spec.image }] },
                },
            },
        }))?;
        let applied = ctx
            .apply_owned(rollout.as_ref(), "traced-operator", deployment)
            .await?;
        let generation = rollout.metadata.generation.unwrap_or_default();
        let ready = rolled_out(&applied);
        let mut status = rollout.status.clone().unwrap_or_default();
        status.observed_generation = Some(generation);
        let (reason, message) = if ready {
            (
                "RolledOut",
                format!("{} pods created", rollout.spec.replicas),
            )
        } else {
            ("RollingOut", "waiting for the Deployment's pods".to_owned())
        };
        status
            .conditions
            .mark(READY, ready, reason, &message, generation);
        if rollout.status.as_ref() != Some(&status) {
            ctx.patch_status(&Patch::Merge(json!({ "status": status })))
                .await?;
        }
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
