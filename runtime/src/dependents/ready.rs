//! When a stored dependent counts as ready: built-ins for the workload kinds, as `kubectl rollout
//! status` and the Service controller judge them. Any other kind is ready once it exists (pass
//! a function of your own with [`Dependent::ready`](super::Dependent::ready)).

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};

/// A kind with a built-in readiness rule.
pub trait Readiness {
    /// Whether the stored object is ready.
    fn is_ready(&self) -> bool;
}

/// The current spec rolled out: the controller saw this generation and every replica is updated
/// and available (`kubectl rollout status`).
impl Readiness for Deployment {
    fn is_ready(&self) -> bool {
        let wanted = self.spec.replicas.unwrap_or(1);
        self.status.as_ref().is_some_and(|s| {
            s.observed_generation >= self.metadata.generation
                && s.updated_replicas.unwrap_or(0) >= wanted
                && s.available_replicas.unwrap_or(0) >= wanted
                && s.replicas.unwrap_or(0) == wanted
        })
    }
}

/// Every replica of the current revision ready.
impl Readiness for StatefulSet {
    fn is_ready(&self) -> bool {
        let wanted = self.spec.replicas.unwrap_or(1);
        self.status.as_ref().is_some_and(|s| {
            s.observed_generation >= self.metadata.generation
                && s.ready_replicas.unwrap_or(0) >= wanted
                && s.updated_replicas.unwrap_or(0) >= wanted
        })
    }
}

/// A pod ready on every node it should run on.
impl Readiness for DaemonSet {
    fn is_ready(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.observed_generation >= self.metadata.generation
                && s.number_ready >= s.desired_number_scheduled
                && s.updated_number_scheduled.unwrap_or(0) >= s.desired_number_scheduled
        })
    }
}

/// The Job completed (its `Complete` condition is true).
impl Readiness for Job {
    fn is_ready(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Complete" && c.status == "True")
            })
    }
}

/// A cluster IP assigned (or none wanted); a `LoadBalancer` also needs an ingress point.
impl Readiness for Service {
    fn is_ready(&self) -> bool {
        let spec = self.spec.clone().unwrap_or_default();
        let has_ip = spec.cluster_ip.is_some_and(|ip| !ip.is_empty());
        let balanced = spec.type_.as_deref() != Some("LoadBalancer")
            || self
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .is_some_and(|i| !i.is_empty());
        has_ip && balanced
    }
}

/// Bound to a volume.
impl Readiness for PersistentVolumeClaim {
    fn is_ready(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Bound")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn from<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("valid object")
    }

    #[test]
    fn a_deployment_should_be_ready_once_every_replica_of_this_generation_is_available() {
        let rolled: Deployment = from(json!({
            "metadata": { "generation": 2 }, "spec": { "replicas": 2, "selector": {}, "template": {} },
            "status": { "observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2 },
        }));
        assert!(rolled.is_ready());
        let stale: Deployment = from(json!({
            "metadata": { "generation": 3 }, "spec": { "replicas": 2, "selector": {}, "template": {} },
            "status": { "observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2 },
        }));
        assert!(!stale.is_ready());
        assert!(!Deployment::default().is_ready());
    }

    #[test]
    fn a_service_should_be_ready_with_an_ip_and_a_balancer_with_an_ingress() {
        let ip: Service = from(json!({ "spec": { "clusterIP": "10.0.0.1" } }));
        assert!(ip.is_ready());
        let lb: Service =
            from(json!({ "spec": { "clusterIP": "10.0.0.1", "type": "LoadBalancer" } }));
        assert!(!lb.is_ready());
        let job: Job =
            from(json!({ "status": { "conditions": [{ "type": "Complete", "status": "True" }] } }));
        assert!(job.is_ready());
    }
}
