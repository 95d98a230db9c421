//! The SecretMirror example operator, both ways (with dependents `for_each` target namespace,
//! and written by hand), under a ServiceAccount bound to exactly the rules of its own
//! `#[controller]` (cluster-wide: the kind is cluster-scoped). Per target namespace a copy, a
//! Role and a RoleBinding: a namespace selected later gets its three, one no longer selected
//! loses its three while the others stay, an object of the copy's name that the mirror does not
//! own is left alone and reported, a copy the apiserver refuses (a quota) is reported without
//! holding up the others and lands once the quota goes, the source's changes reach every copy,
//! a reader can read its copy and nothing else, and deleting the mirror collects its children.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use kubeforge::controller::ControllerSpec;
use kubeforge::crd::READY;
use kubeforge::dependents::DEGRADED;
use kubeforge::manager::Manager;
use kubeforge::testing::{ControlPlane, TestNamespace, apply_crds};
use kubeforge_examples::secret_mirror::{
    SecretMirror, SecretMirrorController, SecretMirrorSpec, SecretMirrorStatus, reader_name,
};
use kubeforge_examples::secret_mirror_imperative::ImperativeSecretMirrorController;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, is_not_found, status_code};

#[tokio::test]
async fn secret_mirror_with_dependents_should_keep_three_children_per_namespace() {
    scenario::<SecretMirrorController>(|m| m.controller(SecretMirrorController)).await;
}

#[tokio::test]
async fn secret_mirror_written_by_hand_should_keep_three_children_per_namespace() {
    scenario::<ImperativeSecretMirrorController>(|m| {
        m.controller(ImperativeSecretMirrorController)
    })
    .await;
}

/// A client of a ServiceAccount in `ns` bound cluster-wide to exactly the rules controller `C`
/// registers (what `crdgen --rbac` prints for it), once the binding has taken effect.
async fn controller_client<C: ControllerSpec>(ns: &TestNamespace, account: &str) -> Client {
    let admin = ns.client();
    let name = format!("{account}-{}", ns.name());
    let rules = kubeforge::rbac::registered()
        .into_iter()
        .find(|r| r.name == C::NAME)
        .map(|r| (r.rules)())
        .unwrap_or_else(|| panic!("no registration of {}", C::NAME));
    let labels = json!({ "kubeforge.dev/test-namespace": ns.name() });
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels },
        "rules": rules.policy_rules(),
    }))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": ns.name() }],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let plane = ControlPlane::shared().unwrap();
    let client = plane
        .service_account_client(ns.name(), account)
        .await
        .unwrap();
    eventually(
        "the binding to take effect",
        Duration::from_secs(30),
        async || {
            Api::<SecretMirror>::all(client.clone())
                .list(&Default::default())
                .await
                .ok()
        },
    )
    .await;
    client
}

/// The copy's token in `ns`, and whether the copy is owned (has owner references).
async fn copy(client: &Client, ns: &str) -> Option<(String, bool)> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt("shared")
        .await
        .ok()??;
    let token = String::from_utf8(secret.data.as_ref()?.get("token")?.0.clone()).ok()?;
    Some((token, !secret.owner_references().is_empty()))
}

/// Whether the mirror's Role and RoleBinding exist in `ns`.
async fn reader_children(client: &Client, ns: &str, mirror: &str) -> (bool, bool) {
    let spec = serde_json::from_value(json!({
        "source": { "namespace": "-", "name": "-" }, "namespaceSelector": { "-": "-" },
    }))
    .unwrap();
    let name = reader_name(&SecretMirror::new(mirror, spec));
    let role = Api::<Role>::namespaced(client.clone(), ns)
        .get_opt(&name)
        .await
        .unwrap();
    let binding = Api::<RoleBinding>::namespaced(client.clone(), ns)
        .get_opt(&name)
        .await
        .unwrap();
    (role.is_some(), binding.is_some())
}

async fn create_namespace(client: &Client, name: &str, labels: BTreeMap<String, String>) {
    let mut labels = labels;
    labels.insert("kubeforge.dev/test-namespace".to_owned(), "true".to_owned());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Sets (`Some`) or removes (`None`) the selector label of namespace `ns`.
async fn select(client: &Client, ns: &str, label: &str, value: Option<&str>) {
    Api::<Namespace>::all(client.clone())
        .patch(
            ns,
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { label: value } } })),
        )
        .await
        .unwrap();
}

/// A ValidatingAdmissionPolicy refusing every Secret written in one namespace.
struct Refusal {
    client: Client,
    namespace: String,
    name: String,
}

impl Refusal {
    /// In force once a Secret written there is refused.
    async fn new(client: &Client, namespace: &str, test: &str) -> Self {
        let name = format!("no-secrets-{namespace}");
        let labels = json!({ "kubeforge.dev/test-namespace": test });
        let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": labels },
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [{ "apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"], "resources": ["secrets"] }],
                    "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": namespace } },
                },
                "validations": [{ "expression": "false", "message": "no copies here" }],
            },
        }))
        .unwrap();
        Api::<ValidatingAdmissionPolicy>::all(client.clone())
            .create(&PostParams::default(), &policy)
            .await
            .unwrap();
        let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": labels },
            "spec": { "policyName": name, "validationActions": ["Deny"] },
        }))
        .unwrap();
        Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
        let refusal = Self {
            client: client.clone(),
            namespace: namespace.to_owned(),
            name,
        };
        eventually(
            "the policy to refuse",
            Duration::from_secs(60),
            async || refusal.probe().await.is_err().then_some(()),
        )
        .await;
        refusal
    }

    /// Writes a probe Secret (deleting it again if that worked).
    async fn probe(&self) -> Result<(), kube::Error> {
        let secrets = Api::<Secret>::namespaced(self.client.clone(), &self.namespace);
        let probe: Secret =
            serde_json::from_value(json!({ "metadata": { "name": "probe" } })).unwrap();
        secrets.create(&PostParams::default(), &probe).await?;
        secrets.delete("probe", &DeleteParams::default()).await?;
        Ok(())
    }

    /// Deletes the policy, returning once a Secret can be written again.
    async fn lift(&self) {
        let params = DeleteParams::default();
        let _ = Api::<ValidatingAdmissionPolicyBinding>::all(self.client.clone())
            .delete(&self.name, &params)
            .await;
        let _ = Api::<ValidatingAdmissionPolicy>::all(self.client.clone())
            .delete(&self.name, &params)
            .await;
        eventually(
            "the policy to be lifted",
            Duration::from_secs(60),
            async || self.probe().await.ok(),
        )
        .await;
    }
}

/// One scenario at a time: both controllers reconcile every SecretMirror of the cluster (the
/// kind is cluster-scoped), so two running together would write each other's mirrors.
static ONE_CONTROLLER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: create, mirror, change, delete and check the mirrors after each step"
)]
async fn scenario<C: ControllerSpec>(add: impl FnOnce(Manager) -> Manager) {
    let _turn = ONE_CONTROLLER.lock().await;
    let source_ns = TestNamespace::new().await.unwrap();
    let client = source_ns.client();
    apply_crds(&client, [SecretMirror::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    // Targets, selected by a label unique to this run: a and b now, e later; c holds a Secret
    // of the copy's name made by someone else; in d an admission policy refuses any Secret.
    let label = format!("mirror-test.kubeforge.dev/{}", source_ns.name());
    let [a, b, c, d, e] = ["a", "b", "c", "d", "e"].map(|n| format!("{}-{n}", source_ns.name()));
    for ns in [&a, &b, &c, &d] {
        create_namespace(&client, ns, [(label.clone(), "yes".to_owned())].into()).await;
    }
    create_namespace(&client, &e, BTreeMap::new()).await;
    let theirs: Secret = serde_json::from_value(json!({
        "metadata": { "name": "shared" }, "stringData": { "token": "theirs" },
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), &c)
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    let refusal = Refusal::new(&client, &d, source_ns.name()).await;
    let source: Secret = serde_json::from_value(json!({
        "metadata": { "name": "shared" }, "stringData": { "token": "v1" },
    }))
    .unwrap();
    source_ns
        .api::<Secret>()
        .create(&PostParams::default(), &source)
        .await
        .unwrap();

    let operator = controller_client::<C>(&source_ns, "secret-mirror").await;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(add(Manager::new(operator)).run_until(shutdown.clone()));

    let name = format!("mirror-{}", source_ns.name());
    let spec: SecretMirrorSpec = serde_json::from_value(json!({
        "source": { "namespace": source_ns.name(), "name": "shared" },
        "namespaceSelector": { label.clone(): "yes" },
        "readers": ["reader"],
    }))
    .unwrap();
    let mirrors: Api<SecretMirror> = Api::all(client.clone());
    mirrors
        .create(&PostParams::default(), &SecretMirror::new(&name, spec))
        .await
        .unwrap();
    let status = async || -> Option<SecretMirrorStatus> { mirrors.get(&name).await.ok()?.status };

    // a and b served; c's Secret left as it was; d refused by the apiserver; both reported.
    let reported = eventually(
        "a and b served, c and d reported",
        Duration::from_secs(90),
        async || {
            let status = status().await?;
            let names = |ns: &str| {
                status
                    .not_ready
                    .iter()
                    .filter(|n| n.starts_with(&format!("{ns}: copy: ")))
                    .count()
            };
            (status.namespaces == [a.clone(), b.clone()] && names(&c) == 1 && names(&d) == 1)
                .then_some(status)
        },
    )
    .await;
    for ns in [&a, &b] {
        assert_eq!(
            copy(&client, ns).await,
            Some(("v1".to_owned(), true)),
            "{ns}"
        );
        assert_eq!(
            reader_children(&client, ns, &name).await,
            (true, true),
            "{ns}"
        );
    }
    assert_eq!(
        copy(&client, &c).await,
        Some(("theirs".to_owned(), false)),
        "not taken over"
    );
    assert_eq!(copy(&client, &d).await, None);
    let conflict = reported
        .not_ready
        .iter()
        .find(|n| n.starts_with(&format!("{c}: copy")))
        .unwrap();
    assert!(conflict.contains("not owned by"), "{reported:?}");
    let refused = reported
        .not_ready
        .iter()
        .find(|n| n.starts_with(&format!("{d}: copy")))
        .unwrap();
    // The refusal names the request: verb, kind, namespace and name.
    assert!(refused.contains("no copies here"), "{reported:?}");
    assert!(
        refused.contains(&format!("apply Secret {d}/shared")),
        "{reported:?}"
    );
    assert!(reported.conditions.is_true(DEGRADED), "{reported:?}");
    assert!(!reported.conditions.is_true(READY), "{reported:?}");
    assert_eq!(reported.copies, 2);

    // A reader of a can read the copy there, and not the other Secrets.
    let plane = ControlPlane::shared().unwrap();
    let reader = plane.service_account_client(&a, "reader").await.unwrap();
    eventually(
        "the reader to read its copy",
        Duration::from_secs(30),
        async || {
            Api::<Secret>::namespaced(reader.clone(), &a)
                .get("shared")
                .await
                .ok()
        },
    )
    .await;
    let other = Api::<Secret>::namespaced(reader.clone(), source_ns.name())
        .get("shared")
        .await;
    assert_eq!(status_code(other), 403);
    let a_copy_uid = Api::<Secret>::namespaced(client.clone(), &a)
        .get("shared")
        .await
        .unwrap()
        .uid();

    // b leaves, e joins, d's policy goes (a label change on d brings the mirror back now,
    // rather than at its next retry), the source changes.
    select(&client, &b, &label, None).await;
    select(&client, &e, &label, Some("yes")).await;
    refusal.lift().await;
    select(&client, &d, "touched", Some("yes")).await;
    source_ns
        .api::<Secret>()
        .patch(
            "shared",
            &PatchParams::default(),
            &Patch::Merge(json!({ "stringData": { "token": "v2" } })),
        )
        .await
        .unwrap();
    eventually(
        "b's children gone, d and e served, copies at v2",
        Duration::from_secs(90),
        async || {
            for ns in [&a, &d, &e] {
                if copy(&client, ns).await != Some(("v2".to_owned(), true))
                    || reader_children(&client, ns, &name).await != (true, true)
                {
                    return None;
                }
            }
            (copy(&client, &b).await.is_none()
                && reader_children(&client, &b, &name).await == (false, false))
                .then_some(())
        },
    )
    .await;
    let a_copy = Api::<Secret>::namespaced(client.clone(), &a)
        .get("shared")
        .await
        .unwrap();
    assert_eq!(
        a_copy.uid(),
        a_copy_uid,
        "a's copy stayed (updated, not recreated)"
    );
    let now = eventually(
        "the status to follow",
        Duration::from_secs(60),
        async || {
            let status = status().await?;
            // b's children are gone once nothing but c's copy is reported.
            (status.namespaces == [a.clone(), d.clone(), e.clone()] && status.not_ready.len() == 1)
                .then_some(status)
        },
    )
    .await;
    assert_eq!(now.not_ready.len(), 1, "only c's copy: {now:?}");
    assert!(
        now.not_ready[0].starts_with(&format!("{c}: copy: ")),
        "{now:?}"
    );
    assert_eq!(copy(&client, &c).await, Some(("theirs".to_owned(), false)));

    // Deleting the mirror: its children are collected (owner references across scopes), the
    // Secret it never owned stays.
    mirrors
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the children to be collected",
        Duration::from_secs(90),
        async || {
            for ns in [&a, &d, &e] {
                if copy(&client, ns).await.is_some()
                    || reader_children(&client, ns, &name).await != (false, false)
                {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    assert!(is_not_found(mirrors.get(&name).await));
    assert_eq!(copy(&client, &c).await, Some(("theirs".to_owned(), false)));
    refusal.lift().await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    for ns in [&a, &b, &c, &d, &e] {
        let _ = Api::<Namespace>::all(client.clone())
            .delete(ns, &DeleteParams::background())
            .await;
    }
}
