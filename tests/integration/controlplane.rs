//! The local control plane is a real Kubernetes: these tests check semantics that only a real
//! apiserver, etcd and controller-manager provide.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Api, ResourceExt};
use kubeforge::testing::{ControlPlane, TestNamespace, apply_crds};
use serde_json::json;

use crate::support::{configmap, eventually, is_not_found, status_code};

#[tokio::test]
async fn apiserver_should_report_the_pinned_release() {
    let pinned = include_str!("../../controlplane/versions.env")
        .lines()
        .find_map(|l| l.strip_prefix("K8S_VERSION="))
        .expect("versions.env pins K8S_VERSION")
        .trim();
    let client = ControlPlane::shared().unwrap().client().await.unwrap();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.git_version, pinned);
}

#[tokio::test]
async fn configmap_should_support_create_get_patch_delete() {
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<ConfigMap>();

    let created = api
        .create(
            &PostParams::default(),
            &configmap("settings", &[("mode", "fast")]),
        )
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some(), "the server assigns a uid");
    assert!(created.metadata.resource_version.is_some());

    let fetched = api.get("settings").await.unwrap();
    assert_eq!(fetched.data.unwrap()["mode"], "fast");

    let patched = api
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "mode": "safe", "extra": "1" } })),
        )
        .await
        .unwrap();
    let data = patched.data.unwrap();
    assert_eq!(
        (data["mode"].as_str(), data["extra"].as_str()),
        ("safe", "1")
    );
    assert_ne!(
        patched.metadata.resource_version,
        created.metadata.resource_version
    );

    api.delete("settings", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(status_code(api.get("settings").await), 404);
}

#[tokio::test]
async fn update_with_stale_resource_version_should_conflict() {
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<ConfigMap>();
    let original = api
        .create(
            &PostParams::default(),
            &configmap("contended", &[("n", "0")]),
        )
        .await
        .unwrap();

    let mut first = original.clone();
    first.data = Some([("n".to_owned(), "1".to_owned())].into());
    api.replace("contended", &PostParams::default(), &first)
        .await
        .unwrap();

    // `original` still carries the old resourceVersion: optimistic concurrency must refuse it.
    let mut stale = original;
    stale.data = Some([("n".to_owned(), "2".to_owned())].into());
    let result = api
        .replace("contended", &PostParams::default(), &stale)
        .await;
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 409);
            assert_eq!(status.reason, "Conflict");
        }
        other => panic!("expected 409 Conflict, got {other:?}"),
    }
    assert_eq!(api.get("contended").await.unwrap().data.unwrap()["n"], "1");
}

#[tokio::test]
async fn watch_should_see_added_modified_deleted() {
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<ConfigMap>();
    // Only our object: the root-CA publisher adds `kube-root-ca.crt` to new namespaces meanwhile.
    let start = api.list(&ListParams::default()).await.unwrap();
    let rv = start.metadata.resource_version.unwrap();
    let mut events = api
        .watch(
            &WatchParams::default()
                .fields("metadata.name=watched")
                .timeout(60),
            &rv,
        )
        .await
        .unwrap()
        .boxed();

    api.create(&PostParams::default(), &configmap("watched", &[("v", "1")]))
        .await
        .unwrap();
    api.patch(
        "watched",
        &PatchParams::default(),
        &Patch::Merge(json!({ "data": { "v": "2" } })),
    )
    .await
    .unwrap();
    api.delete("watched", &DeleteParams::default())
        .await
        .unwrap();

    let mut seen = Vec::new();
    let collect = async {
        while let Some(event) = events.try_next().await.unwrap() {
            match event {
                WatchEvent::Added(cm) => seen.push(("ADDED", cm.data.unwrap()["v"].clone())),
                WatchEvent::Modified(cm) => seen.push(("MODIFIED", cm.data.unwrap()["v"].clone())),
                WatchEvent::Deleted(cm) => {
                    seen.push(("DELETED", cm.data.unwrap()["v"].clone()));
                    break;
                }
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(e) => panic!("watch error: {e:?}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), collect)
        .await
        .expect("the watch delivered all three events");
    let expected = [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "2")];
    let seen: Vec<(&str, &str)> = seen.iter().map(|(t, v)| (*t, v.as_str())).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn owned_configmap_should_be_garbage_collected_after_owner_deletion() {
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<ConfigMap>();
    let owner = api
        .create(&PostParams::default(), &configmap("owner", &[]))
        .await
        .unwrap();
    let mut child = configmap("child", &[]);
    child.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".to_owned(),
        kind: "ConfigMap".to_owned(),
        name: "owner".to_owned(),
        uid: owner.uid().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    api.create(&PostParams::default(), &child).await.unwrap();
    // An unowned bystander must survive: the collector follows owner references only.
    api.create(&PostParams::default(), &configmap("bystander", &[]))
        .await
        .unwrap();

    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the garbage collector to delete the owned ConfigMap",
        Duration::from_secs(60),
        async || is_not_found(api.get("child").await).then_some(()),
    )
    .await;
    api.get("bystander").await.unwrap();
}

/// A CRD with a structural schema: an integer bound and a CEL rule.
fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.plane-test.kubeforge.dev" },
        "spec": {
            "group": "plane-test.kubeforge.dev",
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": {
                        "type": "object",
                        "required": ["replicas"],
                        "properties": { "replicas": { "type": "integer", "minimum": 1 } },
                        "x-kubernetes-validations": [
                            { "rule": "self.replicas <= 10", "message": "at most ten replicas" }
                        ]
                    }}
                }}
            }]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn crd_should_become_established_and_enforce_its_schema() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();

    let gvk = GroupVersionKind::gvk("plane-test.kubeforge.dev", "v1", "Widget");
    let resource = ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    let widget = |name: &str, replicas: serde_json::Value| {
        serde_json::from_value::<DynamicObject>(json!({
            "apiVersion": "plane-test.kubeforge.dev/v1", "kind": "Widget",
            "metadata": { "name": name }, "spec": { "replicas": replicas },
        }))
        .unwrap()
    };

    api.create(&PostParams::default(), &widget("ok", json!(3)))
        .await
        .unwrap();
    assert_eq!(api.get("ok").await.unwrap().data["spec"]["replicas"], 3);

    for (name, replicas, message) in [
        ("wrong-type", json!("three"), "spec.replicas: Invalid value"),
        (
            "too-small",
            json!(0),
            "should be greater than or equal to 1",
        ),
        ("too-many", json!(11), "at most ten replicas"),
    ] {
        match api
            .create(&PostParams::default(), &widget(name, replicas))
            .await
        {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{name}: {status:?}");
                assert!(
                    status.message.contains(message),
                    "{name}: {}",
                    status.message
                );
            }
            other => panic!("{name}: expected 422 Invalid, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn namespace_should_wait_for_finalizers_then_disappear() {
    let client = ControlPlane::shared().unwrap().client().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let name = format!("kf-ns-lifecycle-{}", std::process::id());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &name);
    let mut held = configmap("held", &[]);
    held.metadata.finalizers = Some(vec!["kubeforge.dev/hold".to_owned()]);
    configmaps
        .create(&PostParams::default(), &held)
        .await
        .unwrap();

    namespaces
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    // The namespace controller deletes the content but cannot finish while a finalizer holds it.
    eventually(
        "the namespace controller to report the remaining finalizer",
        Duration::from_secs(60),
        async || {
            let ns = namespaces.get(&name).await.unwrap();
            let status = ns.status.unwrap_or_default();
            let waiting = status
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "NamespaceFinalizersRemaining" && c.status == "True");
            (status.phase.as_deref() == Some("Terminating") && waiting).then_some(())
        },
    )
    .await;
    assert!(
        configmaps
            .get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    configmaps
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
        )
        .await
        .unwrap();
    eventually(
        "the namespace to be gone",
        Duration::from_secs(60),
        async || is_not_found(namespaces.get(&name).await).then_some(()),
    )
    .await;
}

#[tokio::test]
async fn service_account_should_be_denied_until_rbac_allows_it() {
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    let sa_client = plane
        .service_account_client(ns.name(), "reader")
        .await
        .unwrap();
    let as_reader: Api<ConfigMap> = Api::namespaced(sa_client, ns.name());
    assert_eq!(
        status_code(as_reader.list(&ListParams::default()).await),
        403
    );

    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "configmap-reader" },
        "rules": [PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".to_owned()]),
            verbs: vec!["get".to_owned(), "list".to_owned()],
            ..PolicyRule::default()
        }],
    }))
    .unwrap();
    ns.api::<Role>()
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some("reader-reads".to_owned()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: "configmap-reader".to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: "reader".to_owned(),
            namespace: Some(ns.name().to_owned()),
            ..Subject::default()
        }]),
    };
    ns.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    // The RBAC authorizer reads bindings from an informer: allow it a moment to see the new one.
    eventually(
        "the binding to take effect",
        Duration::from_secs(30),
        async || as_reader.list(&ListParams::default()).await.ok(),
    )
    .await;
    // Only what the role grants: writing is still refused.
    assert_eq!(
        status_code(
            as_reader
                .create(&PostParams::default(), &configmap("nope", &[]))
                .await
        ),
        403
    );
}

/// `apply_crds` of a kind's one-version CRD where the live CRD converts through a webhook whose
/// endpoint another writer set since (to the unconfigured one, where a clean-up leaves it), as happens on the
/// shared plane when tests install a kind's versions and its `K::crd()` in turn: the apply is
/// accepted and keeps the conversion (before #48 it was refused: server-side apply dropped the
/// `strategy` its field manager had applied and kept the other writer's `webhook`,
/// `spec.conversion.strategy: Required value`, and every later test of the kind failed).
#[tokio::test]
async fn apply_crds_should_keep_a_conversion_another_writer_repointed() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let group = format!("{}.apply-crds.kubeforge.dev", ns.name());
    let crd = |versions: &[&str],
               conversion: Option<serde_json::Value>|
     -> CustomResourceDefinition {
        let versions: Vec<_> = versions
            .iter()
            .enumerate()
            .map(|(i, v)| json!({
                "name": v, "served": true, "storage": i == 0,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } },
            }))
            .collect();
        let mut crd = json!({
            "metadata": { "name": format!("gears.{group}") },
            "spec": {
                "group": group, "scope": "Namespaced",
                "names": { "kind": "Gear", "plural": "gears" },
                "versions": versions,
            },
        });
        if let Some(conversion) = conversion {
            crd["spec"]["conversion"] = conversion;
        }
        serde_json::from_value(crd).unwrap()
    };
    let service = |name: &str| {
        json!({ "strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": { "service": { "namespace": "default", "name": name, "path": "/convert" } },
    } })
    };
    let timeout = Duration::from_secs(30);
    // Both versions, converted by a webhook: what `crd::crds()` gives a multi-version kind.
    apply_crds(
        &client,
        [crd(&["v1", "v2"], Some(service("first")))],
        timeout,
    )
    .await
    .unwrap();
    // Another writer points the conversion at the unconfigured endpoint (where a clean-up
    // leaves it) without restating the strategy: it owns the endpoint now, the strategy stays
    // apply_crds' alone.
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let name = format!("gears.{group}");
    let unconfigured = kubeforge::crd::conversion::unconfigured(&api.get(&name).await.unwrap());
    let endpoint = unconfigured.webhook.and_then(|w| w.client_config).unwrap();
    let elsewhere =
        json!({ "spec": { "conversion": { "webhook": { "clientConfig": endpoint } } } });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(elsewhere))
        .await
        .unwrap();
    // The first version's own CRD, without a conversion: what `K::crd()` gives.
    apply_crds(&client, [crd(&["v1"], None)], timeout)
        .await
        .unwrap();
    let live = api.get(&name).await.unwrap();
    let conversion = live.spec.conversion.unwrap();
    assert_eq!(conversion.strategy, "Webhook");
    let endpoint = conversion.webhook.and_then(|w| w.client_config).unwrap();
    assert!(
        kubeforge::crd::conversion::is_unconfigured(&endpoint),
        "{endpoint:?}"
    );
    api.delete(&name, &DeleteParams::default()).await.unwrap();
}
