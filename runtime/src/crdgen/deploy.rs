//! `crdgen --deploy`: everything an operator needs in a cluster besides its CRDs — its
//! ServiceAccount, the RBAC its wiring derives (cluster-wide, or namespaced when it watches one
//! namespace), a Role for its leader-election Lease, and a Deployment with probes, the metrics
//! port, resource requests and a restricted security context; when kinds have webhooks, the
//! webhook configurations (service mode; the running operator injects the CA bundle), the Service
//! in front of the webhook port and the RBAC the operator needs to manage both and its
//! certificate Secret.

use serde_json::{Value, json};

use crate::rbac::{Rules, leader_election_role, registered_rules};
use crate::webhook::{Configurations, Endpoint, KindConversions, KindWebhooks};

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
    /// The namespaces it watches, comma-separated (`--namespace` of the operator); `None`:
    /// every namespace.
    pub watch_namespace: Option<String>,
}

impl DeployOptions {
    /// The namespaces [`DeployOptions::watch_namespace`] names.
    fn watched(&self) -> crate::Namespaces {
        match &self.watch_namespace {
            None => crate::Namespaces::all(),
            Some(list) => crate::Namespaces::set(list.split(',').map(str::trim)),
        }
    }
}

const METRICS_PORT: u16 = 8080;
const HEALTH_PORT: u16 = 8081;
const WEBHOOK_PORT: u16 = 9443;

/// The manifests, in the order to apply them, for the kinds and webhooks linked into this binary.
pub fn manifests(options: &DeployOptions) -> Vec<Value> {
    manifests_for(
        options,
        &crate::webhook::registered(),
        &crate::webhook::registered_conversions(),
    )
}

/// The manifests for `webhooks` (the kinds that have admission webhooks) and `conversions` (the
/// kinds whose versions convert through a webhook).
pub fn manifests_for(
    options: &DeployOptions,
    webhooks: &[KindWebhooks],
    conversions: &[KindConversions],
) -> Vec<Value> {
    let DeployOptions {
        name, namespace, ..
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
    let rules = registered_rules()
        .without("coordination.k8s.io", "leases")
        .merge(crate::rbac::registered_migration_rules());
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
    let watched = options.watched();
    if watched.is_all() {
        // Every namespace: one ClusterRole.
        out.extend(role_pair("ClusterRole", None, &rules));
    } else {
        // A set of namespaces: a Role in each, and a ClusterRole only for cluster-scoped kinds.
        if !cluster_rules.is_empty() {
            out.extend(role_pair("ClusterRole", None, &cluster_rules));
        }
        for ns in watched.iter() {
            out.extend(role_pair("Role", Some(ns), &namespaced_rules));
        }
    }
    // The Lease, in the operator's own namespace only.
    out.extend(lease_access(name, namespace, &labels, &subject));
    let serves_webhooks = !webhooks.is_empty() || !conversions.is_empty();
    if serves_webhooks {
        out.extend(webhook_manifests(
            options,
            webhooks,
            conversions,
            &labels,
            &subject,
        ));
    }
    out.push(deployment(
        options,
        &labels,
        meta(Some(namespace)),
        serves_webhooks,
    ));
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

/// The Role and RoleBinding of the operator's leader-election Lease, in its own namespace.
fn lease_access(name: &str, namespace: &str, labels: &Value, subject: &Value) -> [Value; 2] {
    let election = format!("{name}-leader-election");
    let mut role =
        serde_json::to_value(leader_election_role(&election, namespace)).unwrap_or(Value::Null);
    role["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    role["kind"] = json!("Role");
    role["metadata"]["labels"] = labels.clone();
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": { "name": election, "namespace": namespace, "labels": labels },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": election },
        "subjects": subject,
    });
    [role, binding]
}

/// The webhook Service, the RBAC for the certificate Secret and the configurations, and the
/// configurations themselves.
fn webhook_manifests(
    options: &DeployOptions,
    webhooks: &[KindWebhooks],
    conversions: &[KindConversions],
    labels: &Value,
    subject: &Value,
) -> Vec<Value> {
    let DeployOptions {
        name, namespace, ..
    } = options;
    let service = format!("{name}-webhook");
    let access = format!("{name}-webhooks");
    let rbac = |kind: &str, namespace: Option<&str>, rules: Value| {
        let mut meta = json!({ "name": access, "labels": labels });
        if let Some(ns) = namespace {
            meta["namespace"] = json!(ns);
        }
        let binding = format!("{kind}Binding");
        [
            json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": rules }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": binding, "metadata": meta,
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": access },
                "subjects": subject,
            }),
        ]
    };
    let mut out = Vec::new();
    // One source for these rules (`rbac::webhook_rules`): the self-signed certificate's Secret
    // in the operator's namespace; the managed configurations and the conversion stanza of the
    // CRDs whose versions convert, cluster-wide.
    let (cluster, certificate) = crate::rbac::webhook_rules(webhooks, conversions);
    let rules = |rules: crate::rbac::Rules| {
        serde_json::to_value(rules.policy_rules()).unwrap_or(Value::Null)
    };
    out.extend(rbac("Role", Some(namespace), rules(certificate)));
    if !cluster.is_empty() {
        out.extend(rbac("ClusterRole", None, rules(cluster)));
    }
    out.push(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": service, "namespace": namespace, "labels": labels },
        "spec": {
            "selector": { "app.kubernetes.io/name": name },
            "ports": [{ "name": "webhook", "port": 443, "targetPort": "webhook" }],
        },
    }));
    let configurations = Configurations {
        name: name.clone(),
        endpoint: Endpoint::Service {
            namespace: namespace.clone(),
            name: service,
            port: 443,
        },
        namespace_selector: options.watched().selector(),
        ca_bundle: None,
    };
    let typed = |value: Value, kind: &str| {
        let mut value = value;
        value["apiVersion"] = json!("admissionregistration.k8s.io/v1");
        value["kind"] = json!(kind);
        value
    };
    if let Some(validating) = configurations.validating(webhooks, conversions) {
        let value = serde_json::to_value(validating).unwrap_or(Value::Null);
        out.push(typed(value, "ValidatingWebhookConfiguration"));
    }
    if let Some(mutating) = configurations.mutating(webhooks) {
        let value = serde_json::to_value(mutating).unwrap_or(Value::Null);
        out.push(typed(value, "MutatingWebhookConfiguration"));
    }
    out
}

fn deployment(options: &DeployOptions, labels: &Value, meta: Value, webhooks: bool) -> Value {
    let mut args = vec![
        "--leader-elect".to_owned(),
        format!("--metrics-bind-address=:{METRICS_PORT}"),
        format!("--health-probe-bind-address=:{HEALTH_PORT}"),
    ];
    if let Some(watched) = &options.watch_namespace {
        args.push(format!("--namespace={watched}"));
    }
    let mut ports = vec![
        json!({ "name": "metrics", "containerPort": METRICS_PORT }),
        json!({ "name": "health", "containerPort": HEALTH_PORT }),
    ];
    if webhooks {
        args.push(format!("--webhook-port={WEBHOOK_PORT}"));
        args.push(format!(
            "--webhook-service={}/{}-webhook",
            options.namespace, options.name
        ));
        args.push(format!("--webhook-name={}", options.name));
        ports.push(json!({ "name": "webhook", "containerPort": WEBHOOK_PORT }));
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
                        "ports": ports,
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

    #[test]
    fn deploy_for_a_set_of_namespaces_should_bind_a_role_in_each() {
        let all = manifests(&options(Some("shop,billing")));
        let roles: Vec<_> = all
            .iter()
            .filter(|m| m["kind"] == "Role" || m["kind"] == "RoleBinding")
            .filter(|m| m["metadata"]["name"] == "shop-operator")
            .map(|m| {
                let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                format!("{}/{}", text(&m["kind"]), text(&m["metadata"]["namespace"]))
            })
            .collect();
        for expected in [
            "Role/shop",
            "RoleBinding/shop",
            "Role/billing",
            "RoleBinding/billing",
        ] {
            assert!(roles.contains(&expected.to_owned()), "{roles:?}");
        }
        assert!(
            !all.iter().any(|m| m["kind"] == "ClusterRole"
                && m["metadata"]["name"] == "shop-operator"
                && m["rules"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|r| r["resources"]
                        .as_array()
                        .is_some_and(|r| r.contains(&json!("configmaps")))))),
            "namespaced rules in a ClusterRole"
        );
    }

    struct Allow;
    impl crate::webhook::__private::Hook for Allow {
        fn review(
            &self,
            _: &[u8],
            _: kube::Client,
            _: Option<&crate::webhook::HookVersion>,
        ) -> futures::future::BoxFuture<'static, crate::webhook::__private::Reviewed> {
            unreachable!("not called")
        }
    }

    #[test]
    fn deploy_with_webhooks_should_add_the_service_configurations_rbac_and_flags() {
        let hook: std::sync::Arc<dyn crate::webhook::__private::Hook> = std::sync::Arc::new(Allow);
        let kind = KindWebhooks {
            group: "shop.example.com",
            version: "v1",
            kind: "Cart",
            plural: "carts",
            namespaced: true,
            hooks: crate::webhook::__private::hooks(
                Some(std::sync::Arc::clone(&hook)),
                None,
                Some(hook),
            ),
            settings: crate::webhook::Settings::default(),
        };
        let all = manifests_for(&options(Some("shop")), &[kind], &[]);
        let names = kinds(&all);
        for expected in [
            "Service/shop-operator-webhook",
            "Role/shop-operator-webhooks",
            "ClusterRole/shop-operator-webhooks",
            "ValidatingWebhookConfiguration/shop-operator",
            "MutatingWebhookConfiguration/shop-operator",
        ] {
            assert!(
                names.contains(&expected.to_owned()),
                "{expected} in {names:?}"
            );
        }
        let validating = all
            .iter()
            .find(|m| m["kind"] == "ValidatingWebhookConfiguration")
            .unwrap();
        let webhook = &validating["webhooks"][0];
        assert_eq!(webhook["name"], "validate-v1.carts.shop.example.com");
        assert_eq!(
            webhook["clientConfig"]["service"],
            json!({ "namespace": "shop-system", "name": "shop-operator-webhook", "path": "/shop-operator/validate/shop.example.com/v1/carts", "port": 443 })
        );
        assert_eq!(
            webhook["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            "shop"
        );
        let deployment = all.iter().find(|m| m["kind"] == "Deployment").unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let args = container["args"].as_array().unwrap();
        assert!(
            args.contains(&json!(
                "--webhook-service=shop-system/shop-operator-webhook"
            )),
            "{args:?}"
        );
        assert!(
            container["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "webhook")
        );
        assert!(
            !kinds(&manifests_for(&options(None), &[], &[]))
                .iter()
                .any(|k| k.contains("webhook"))
        );
    }
}
