//! Small helpers and fixtures shared by the integration tests.

pub mod jaeger;
pub mod load;
pub mod logs;
pub mod process;
pub mod rbac;
pub mod widget;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

/// A ConfigMap named `name` holding `data`.
pub fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

/// Polls `check` every 100 ms until it returns `Some`, panicking with `what` after `timeout`.
pub async fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The HTTP status code of an API error, or a panic with the unexpected outcome.
pub fn status_code<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> u16 {
    match result {
        Err(kube::Error::Api(status)) => status.code,
        other => panic!("expected an API error status, got {other:?}"),
    }
}

/// Whether a `get` found nothing (404); any other error fails the test.
pub fn is_not_found<T>(result: Result<T, kube::Error>) -> bool {
    match result {
        Ok(_) => false,
        Err(kube::Error::Api(status)) if status.code == 404 => true,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// `impl kube::Resource` and `Writable` for a hand-written namespaced test kind with a `metadata` field.
#[macro_export]
macro_rules! test_resource {
    ($ty:ty, group = $group:expr, kind = $kind:literal, plural = $plural:literal) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;
            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                "v1".into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &kube::api::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut kube::api::ObjectMeta {
                &mut self.metadata
            }
        }

        // A full kind kubeforge may write (a hand-written kind says so; see `kubeforge::views`).
        impl kubeforge::views::Writable for $ty {}
    };
}

/// A client of ServiceAccount `account` in `ns`, bound to exactly the ClusterRole `crdgen
/// --rbac` prints (created as `<account>-<namespace>`, labelled for the namespace's cleanup),
/// once the binding has taken effect (the account can list `K`).
pub async fn generated_role_client<K>(
    ns: &kubeforge::testing::TestNamespace,
    account: &str,
) -> kube::Client
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
    use kube::api::{ListParams, PostParams};
    let plane = kubeforge::testing::ControlPlane::shared().unwrap();
    let role_name = format!("{account}-{}", ns.name());
    let mut role = kubeforge::rbac::cluster_role(&role_name);
    role.metadata.labels = Some(
        [(
            "kubeforge.dev/test-namespace".to_owned(),
            ns.name().to_owned(),
        )]
        .into(),
    );
    kube::Api::<ClusterRole>::all(ns.client())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": account },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name },
        "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": ns.name() }],
    }))
    .unwrap();
    ns.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let client = plane
        .service_account_client(ns.name(), account)
        .await
        .unwrap();
    eventually(
        "the binding to take effect",
        std::time::Duration::from_secs(30),
        async || {
            kube::Api::<K>::namespaced(client.clone(), ns.name())
                .list(&ListParams::default())
                .await
                .ok()
        },
    )
    .await;
    client
}
