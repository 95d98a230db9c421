//! `crdgen --deploy`: the whole output applied to the real apiserver (the CRDs as a server-side
//! dry run, the rest for real), and the operator's ServiceAccount can then do what its wiring
//! needs, and take its Lease only in its own namespace.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{
    Api, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::discovery::{self, Scope};
use kubeforge::testing::{ControlPlane, TestNamespace, apply_crds};
use kubeforge_examples::webapp::WebApp;

use crate::support::{eventually, status_code};

/// A controller that reads the apiserver's `/metrics` (a path that is not a resource): its
/// `rbac(non_resource_urls = ..)` rule reaches the ClusterRole of `crdgen --deploy`.
pub struct ScrapesApiserver;

#[kubeforge::controller(
    for = k8s_openapi::api::core::v1::ConfigMap,
    name = "scrapes-apiserver",
    rbac(non_resource_urls = ["/metrics"], verbs = ["get"]),
)]
impl ScrapesApiserver {
    async fn reconcile(
        &self,
        _: std::sync::Arc<k8s_openapi::api::core::v1::ConfigMap>,
        _: &kubeforge::controller::Context<k8s_openapi::api::core::v1::ConfigMap>,
    ) -> Result<kubeforge::controller::Action, kube::Error> {
        Ok(kubeforge::controller::Action::Done)
    }
}

/// `GET /metrics` on the apiserver as `client`: the status code.
async fn get_metrics(client: &kube::Client) -> u16 {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    match client.request_text(request).await {
        Ok(_) => 200,
        Err(kube::Error::Api(status)) => status.code,
        Err(e) => panic!("GET /metrics: {e}"),
    }
}

/// The documents of a multi-document YAML stream.
fn documents(yaml: &str) -> Vec<serde_json::Value> {
    yaml.split("\n---\n")
        .flat_map(|doc| doc.strip_prefix("---\n").or(Some(doc)))
        .filter(|doc| !doc.trim().is_empty() && doc.trim() != "---")
        .map(|doc| serde_norway::from_str(doc).unwrap())
        .collect()
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: apply the deploy manifests, then check each grant the wiring needs"
)]
async fn deploy_manifests_should_apply_and_grant_what_the_wiring_needs() {
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    let client = ns.client();
    let name = format!("deploy-{}", ns.name());
    // The CRDs are only dry-run below; the operator's list needs the kind installed (run alone,
    // no other test has installed it).
    apply_crds(&client, [WebApp::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let args: Vec<String> = [
        "--deploy",
        "--all",
        "--image",
        "registry.example.com/webapp-operator:1.0",
        "--name",
        &name,
        "--namespace",
        ns.name(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut out = String::new();
    assert!(kubeforge::crdgen::run(&args, &mut out).unwrap());
    let docs = documents(&out);
    assert!(docs.len() > 8, "{out}");

    let mut applied = Vec::new();
    let mut cluster_scoped = Vec::new();
    for doc in &docs {
        let mut doc = doc.clone();
        if doc["kind"] == "CustomResourceDefinition" && doc["spec"].get("conversion").is_some() {
            // The conversion webhook at the operator's Service; not dry-run against the shared
            // CRDs, whose conversion points at whichever test's operator runs (a URL: a CRD
            // with both would be refused). `faults::webhooks` applies a printed one for real.
            let service = &doc["spec"]["conversion"]["webhook"]["clientConfig"]["service"];
            assert_eq!(
                (&service["name"], &service["namespace"]),
                (
                    &serde_json::json!(format!("{name}-webhook")),
                    &serde_json::json!(ns.name())
                ),
                "{doc}"
            );
            doc["spec"].as_object_mut().unwrap().remove("conversion");
        }
        let object: DynamicObject = serde_json::from_value(doc).unwrap();
        let types = object.types.clone().unwrap();
        let gvk = GroupVersionKind::try_from(&types).unwrap();
        let (resource, caps) = discovery::pinned_kind(&client, &gvk).await.unwrap();
        let object_name = object.metadata.name.clone().unwrap();
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Cluster => Api::all_with(client.clone(), &resource),
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                object.metadata.namespace.as_deref().unwrap_or(ns.name()),
                &resource,
            ),
        };
        let mut params = PatchParams::apply("kubeforge-deploy-test").force();
        // The CRDs are shared with the other tests: checked by the apiserver, not stored.
        // So are the webhook configurations of the test kinds (they would send every test's
        // objects of those kinds to a Service that does not exist).
        params.dry_run = matches!(
            types.kind.as_str(),
            "CustomResourceDefinition"
                | "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
        );
        api.patch(&object_name, &params, &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("{} {object_name}: {e}", types.kind));
        if caps.scope == Scope::Cluster && types.kind != "Namespace" && !params.dry_run {
            cluster_scoped.push((resource.clone(), object_name.clone()));
        }
        applied.push(format!("{}/{object_name}", types.kind));
    }
    for expected in [
        format!("ServiceAccount/{name}"),
        format!("ClusterRole/{name}"),
        format!("ClusterRoleBinding/{name}"),
        format!("Role/{name}-leader-election"),
        format!("Deployment/{name}"),
    ] {
        assert!(applied.contains(&expected), "{expected} in {applied:?}");
    }

    // As the operator: what its wiring needs, everywhere; its Lease only at home.
    let operator = plane
        .service_account_client(ns.name(), &name)
        .await
        .unwrap();
    assert!(
        out.contains("nonResourceURLs:\n  - /metrics\n"),
        "the non-resource rule of `rbac(..)` in the ClusterRole: {out}"
    );
    eventually(
        "the bindings to take effect",
        Duration::from_secs(30),
        async || {
            Api::<WebApp>::all(operator.clone())
                .list(&ListParams::default().limit(1))
                .await
                .ok()
        },
    )
    .await;
    let lease = |namespace: &str| -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "operator", "namespace": namespace },
        }))
        .unwrap()
    };
    // `rbac(non_resource_urls = ["/metrics"], verbs = ["get"])`: without it, 403.
    assert_eq!(
        get_metrics(&operator).await,
        200,
        "GET /metrics as the operator"
    );
    Api::<Lease>::namespaced(operator.clone(), ns.name())
        .create(&PostParams::default(), &lease(ns.name()))
        .await
        .expect("its own Lease");
    let elsewhere = Api::<Lease>::namespaced(operator.clone(), "default")
        .create(&PostParams::default(), &lease("default"))
        .await;
    assert_eq!(
        status_code(elsewhere),
        403,
        "no Leases outside its namespace"
    );

    for (resource, object_name) in cluster_scoped {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let _ = api.delete(&object_name, &DeleteParams::default()).await;
    }
}

#[test]
fn crdgen_should_name_the_cluster_role_after_the_operator() {
    let mut out = String::new();
    kubeforge::crdgen::run_named(&["--rbac".to_owned()], Some("shop-operator"), &mut out).unwrap();
    assert!(
        out.contains("kind: ClusterRole\nmetadata:\n  name: shop-operator\n"),
        "{out}"
    );
    // One binding of it runs every mode of the binary: leader election and shard membership
    // need the Leases (`--deploy` narrows them to a Role in the operator's namespace).
    let leases = out
        .split("- apiGroups:")
        .find(|rule| rule.contains("coordination.k8s.io"))
        .unwrap_or_else(|| panic!("no Lease rule:\n{out}"));
    for verb in ["get", "list", "watch", "create", "update", "delete"] {
        assert!(
            leases.contains(&format!("- {verb}\n")),
            "{verb} missing:\n{leases}"
        );
    }
}
