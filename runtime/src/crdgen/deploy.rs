//! `crdgen --deploy`: everything an operator needs in a cluster besides its CRDs — its
//! ServiceAccount, the RBAC its wiring derives (cluster-wide, or namespaced when it watches one
//! namespace), a Role for its leader-election Lease, and a Deployment with probes, the metrics
//! port, resource requests and a restricted security context.

use serde_json::{Value, json};

use crate::rbac::{Rules, leader_election_role, registered_rules};

/// What `crdgen --deploy` is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeployOptions {
    /// The operator's name: the ServiceAccount, roles, bindings and Deployment are named after
    /// it (so two operators in one cluster do not overwrite each other's).
    pub name: String,
    /// The container image.
    pub image: String,
    /// Where the operator runs (default: its name).
    pub namespace: String,
    /// The one namespace it watches (`--namespace` of the operator); `None`: every namespace.
    pub watch_namespace: Option<String>,
}

const METRICS_PORT: u16 = 8080;
const HEALTH_PORT: u16 = 8081;

/// The manifests, in the order to apply them.
pub fn manifests(options: &DeployOptions) -> Vec<Value> {
    let DeployOptions {
        name,
        namespace,
        watch_namespace,
        ..
    } = options;
    let labels = json!({
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/managed-by": "kubeforge",
    });
    let meta = |namespace: Option<&str>| {
        let mut meta = json!({ "name": name, "labels": labels });
        if let Some(ns) = namespace {
            meta["namespace"] = json!(ns);
        }
        meta
    };
    let subject = json!([{ "kind": "ServiceAccount", "name": name, "namespace": namespace }]);
    let rules = registered_rules().without("coordination.k8s.io", "leases");
    let (cluster_rules, namespaced_rules) = rules.split_by_scope();

    let mut out = vec![
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": namespace } }),
        json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(Some(namespace)) }),
    ];
    let role_pair = |kind: &str, namespace: Option<&str>, rules: &Rules| -> [Value; 2] {
        let binding = if kind == "Role" {
            "RoleBinding"
        } else {
            "ClusterRoleBinding"
        };
        [
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": kind,
                "metadata": meta(namespace),
                "rules": rules.policy_rules(),
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": binding,
                "metadata": meta(namespace),
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name },
                "subjects": subject,
            }),
        ]
    };
    match watch_namespace {
        // Every namespace: one ClusterRole.
        None => out.extend(role_pair("ClusterRole", None, &rules)),
        // One namespace: a Role there, and a ClusterRole only for cluster-scoped kinds.
        Some(watched) => {
            if !cluster_rules.is_empty() {
                out.extend(role_pair("ClusterRole", None, &cluster_rules));
            }
            out.extend(role_pair("Role", Some(watched), &namespaced_rules));
        }
    }
    // The Lease, in the operator's own namespace only.
    let election = format!("{name}-leader-election");
    let mut role =
        serde_json::to_value(leader_election_role(&election, namespace)).unwrap_or(Value::Null);
    role["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    role["kind"] = json!("Role");
    role["metadata"]["labels"] = labels.clone();
    out.push(role);
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": { "name": election, "namespace": namespace, "labels": labels },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": election },
        "subjects": subject,
    }));
    out.push(deployment(options, &labels, meta(Some(namespace))));
    out.push(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": format!("{name}-metrics"), "namespace": namespace, "labels": labels,
        },
        "spec": {
            "selector": { "app.kubernetes.io/name": name },
            "ports": [{ "name": "metrics", "port": METRICS_PORT, "targetPort": "metrics" }],
        },
    }));
    out
}

fn deployment(options: &DeployOptions, labels: &Value, meta: Value) -> Value {
    let mut args = vec![
        "--leader-elect".to_owned(),
        format!("--metrics-bind-address=:{METRICS_PORT}"),
        format!("--health-probe-bind-address=:{HEALTH_PORT}"),
    ];
    if let Some(watched) = &options.watch_namespace {
        args.push(format!("--namespace={watched}"));
    }
    let probe = |path: &str, period: u32| {
        json!({
            "httpGet": { "path": path, "port": "health" },
            "periodSeconds": period,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        })
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app.kubernetes.io/name": options.name } },
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "serviceAccountName": options.name,
                    // The manager's shutdown grace period is 30 s.
                    "terminationGracePeriodSeconds": 40,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "seccompProfile": { "type": "RuntimeDefault" },
                    },
                    "containers": [{
                        "name": "operator",
                        "image": options.image,
                        "args": args,
                        "env": [
                            // The leader-election identity.
                            { "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
                            { "name": "LOG_FORMAT", "value": "json" },
                        ],
                        "ports": [
                            { "name": "metrics", "containerPort": METRICS_PORT },
                            { "name": "health", "containerPort": HEALTH_PORT },
                        ],
                        "livenessProbe": probe("/healthz", 20),
                        "readinessProbe": probe("/readyz", 10),
                        "resources": {
                            "requests": { "cpu": "10m", "memory": "64Mi" },
                            "limits": { "memory": "256Mi" },
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": { "drop": ["ALL"] },
                        },
                    }],
                },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(watch: Option<&str>) -> DeployOptions {
        DeployOptions {
            name: "shop-operator".to_owned(),
            image: "registry.example.com/shop-operator:1.0".to_owned(),
            namespace: "shop-system".to_owned(),
            watch_namespace: watch.map(str::to_owned),
        }
    }

    fn kinds(manifests: &[Value]) -> Vec<String> {
        manifests
            .iter()
            .map(|m| {
                format!(
                    "{}/{}",
                    m["kind"].as_str().unwrap_or_default(),
                    m["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
            .collect()
    }

    #[test]
    fn deploy_should_name_everything_after_the_operator() {
        let all = manifests(&options(None));
        assert_eq!(
            kinds(&all),
            [
                "Namespace/shop-system",
                "ServiceAccount/shop-operator",
                "ClusterRole/shop-operator",
                "ClusterRoleBinding/shop-operator",
                "Role/shop-operator-leader-election",
                "RoleBinding/shop-operator-leader-election",
                "Deployment/shop-operator",
                "Service/shop-operator-metrics",
            ]
        );
        let deployment = &all[6];
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "registry.example.com/shop-operator:1.0");
        assert_eq!(
            container["securityContext"]["allowPrivilegeEscalation"],
            false
        );
        assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
        let leases = &all[4]["rules"][0];
        assert_eq!(leases["resources"], json!(["leases"]), "{leases}");
    }

    #[test]
    fn deploy_for_one_namespace_should_bind_a_role_there() {
        let all = manifests(&options(Some("shop")));
        let names = kinds(&all);
        assert!(
            names.contains(&"Role/shop-operator".to_owned()),
            "{names:?}"
        );
        let role = all
            .iter()
            .find(|m| m["kind"] == "Role" && m["metadata"]["name"] == "shop-operator");
        assert_eq!(
            role.map(|r| &r["metadata"]["namespace"]),
            Some(&json!("shop"))
        );
        let args = &all
            .iter()
            .find(|m| m["kind"] == "Deployment")
            .map(|d| d["spec"]["template"]["spec"]["containers"][0]["args"].clone());
        assert!(
            args.as_ref().is_some_and(|a| a
                .as_array()
                .is_some_and(|a| a.contains(&json!("--namespace=shop")))),
            "{args:?}"
        );
    }
}
