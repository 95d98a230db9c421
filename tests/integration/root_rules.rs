//! `root_rule(..)`: CEL rules on the root of a kind's schema, where `self` is the whole object,
//! against the real apiserver. A rule on the name (`self.metadata.name`) rejects a create; a rule
//! spanning spec and status rejects a status update through the status subresource (replaced or
//! merge-patched) that breaks it. Each time the apiserver's 422 and `validate()` /
//! `validate_update(&old)` give the same errors, and valid objects pass both.

use std::time::Duration;

use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Status;
use kube::{Api, ResourceExt};
use kubeforge::crd::Validate;
use kubeforge::testing::{TestNamespace, apply_crds};
use serde_json::json;

/// A pool whose name starts with `pool-` and whose status never counts more replicas than its
/// spec asks for.
#[kubeforge::custom_resource(
    group = "root-rules-test.kubeforge.dev",
    version = "v1",
    kind = "Pool",
    namespaced,
    status = PoolStatus,
    root_rule(
        cel = "self.metadata.name.startsWith('pool-')",
        message = "a Pool's name starts with pool-"
    ),
    root_rule(
        cel = "!has(self.status) || !has(self.status.replicas) || self.status.replicas <= self.spec.replicas",
        message_expression = "'status.replicas %d exceeds spec.replicas %d'.format([self.status.replicas, self.spec.replicas])",
        field_path = ".status.replicas"
    )
)]
#[derive(Clone, Debug)]
pub struct PoolSpec {
    pub replicas: i32,
}

/// The replicas counted.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct PoolStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}

/// A verdict: `Ok`, or the errors as sorted `(field, message)` (the field is empty at the root).
type Verdict = Result<(), Vec<(String, String)>>;

fn server_verdict<T>(what: &str, result: Result<T, kube::Error>) -> Verdict {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 422 => Err(causes(&status)),
        Err(e) => panic!("{what}: unexpected error {e}"),
    }
}

fn causes(status: &Status) -> Vec<(String, String)> {
    let mut causes: Vec<(String, String)> = status
        .details
        .iter()
        .flat_map(|details| &details.causes)
        // The apiserver names the root `<nil>` (a nil field path); the report leaves it empty.
        .map(|cause| (cause.field.replace("<nil>", ""), cause.message.clone()))
        .collect();
    if causes.is_empty() {
        causes.push((String::new(), status.message.clone()));
    }
    causes.sort();
    causes
}

fn client_verdict(result: Result<(), kubeforge::crd::ValidationReport>) -> Verdict {
    result.map_err(|report| {
        let mut lines: Vec<(String, String)> = report
            .iter()
            .map(|(path, error)| (path.to_string(), error.message().to_owned()))
            .collect();
        lines.sort();
        lines
    })
}

async fn pools() -> (TestNamespace, Api<Pool>) {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [Pool::crd()], Duration::from_secs(30))
        .await
        .expect("the apiserver accepts the CRD");
    let api = ns.api();
    (ns, api)
}

fn rejected(message: &str, field: &str) -> Verdict {
    Err(vec![(field.to_owned(), message.to_owned())])
}

#[tokio::test]
async fn a_root_rule_should_reject_a_bad_name_on_create_like_validate() {
    let (_ns, api) = pools().await;
    let bad = Pool::new("web-1", PoolSpec { replicas: 1 });
    let server = server_verdict("web-1", api.create(&PostParams::default(), &bad).await);
    let expected = rejected("Invalid value: a Pool's name starts with pool-", "");
    assert_eq!(server, expected, "the apiserver");
    assert_eq!(client_verdict(bad.validate()), server, "validate()");

    let good = Pool::new("pool-1", PoolSpec { replicas: 1 });
    assert_eq!(client_verdict(good.validate()), Ok(()));
    api.create(&PostParams::default(), &good)
        .await
        .expect("the apiserver accepts pool-1");
}

#[tokio::test]
async fn a_root_rule_should_reject_a_status_update_that_breaks_it_like_validate_update() {
    let (_ns, api) = pools().await;
    let created = api
        .create(
            &PostParams::default(),
            &Pool::new("pool-a", PoolSpec { replicas: 2 }),
        )
        .await
        .expect("the apiserver accepts pool-a");
    let expected = rejected(
        "Invalid value: status.replicas 3 exceeds spec.replicas 2",
        "status.replicas",
    );

    // Replaced through the status subresource.
    let mut over = created.clone();
    over.status = Some(PoolStatus { replicas: Some(3) });
    let server = server_verdict(
        "replace_status",
        api.replace_status("pool-a", &PostParams::default(), &over)
            .await,
    );
    assert_eq!(server, expected, "the apiserver, replace_status");
    assert_eq!(
        client_verdict(over.validate_update(&created)),
        server,
        "validate_update()"
    );

    // Merge-patched through the status subresource.
    let patch = json!({"status": {"replicas": 3}});
    let server = server_verdict(
        "patch_status",
        api.patch_status("pool-a", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!(server, expected, "the apiserver, patch_status");

    // Within the spec: both accept it.
    let mut within = created.clone();
    within.status = Some(PoolStatus { replicas: Some(2) });
    assert_eq!(client_verdict(within.validate_update(&created)), Ok(()));
    let stored = api
        .replace_status("pool-a", &PostParams::default(), &within)
        .await
        .expect("the apiserver accepts status.replicas 2");
    assert_eq!(stored.status.as_ref().and_then(|s| s.replicas), Some(2));
    assert_ne!(stored.resource_version(), created.resource_version());
}
