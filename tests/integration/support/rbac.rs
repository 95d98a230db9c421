//! Roles for the test operators run under ServiceAccounts of their own.

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::PostParams;
use kubeforge::testing::TestNamespace;
use serde_json::{Value, json};

/// A Role `name` with `rules` in the namespace, bound to the ServiceAccounts `accounts` there.
pub async fn grant(ns: &TestNamespace, name: &str, rules: Value, accounts: &[&str]) {
    grant_in(&ns.client(), ns.name(), name, rules, accounts).await;
}

/// As [`grant`], in namespace `ns` through `client` (a namespace of a dedicated plane).
pub async fn grant_in(
    client: &kube::Client,
    ns: &str,
    name: &str,
    rules: Value,
    accounts: &[&str],
) {
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": name },
        "rules": rules,
    }))
    .unwrap();
    kube::Api::<Role>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let subjects: Vec<_> = accounts
        .iter()
        .map(|account| json!({ "kind": "ServiceAccount", "name": account, "namespace": ns }))
        .collect();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name },
        "subjects": subjects,
    }))
    .unwrap();
    kube::Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}
