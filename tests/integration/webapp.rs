//! The WebApp example operator, wired by `#[controller]`, running under a ServiceAccount bound
//! only to the ClusterRole that `crdgen --rbac` prints.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, LimitRange, ResourceQuota, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kubeforge::controller::ControllerSpec;
use kubeforge::crd::READY;
use kubeforge::events::Recorder;
use kubeforge::manager::Manager;
use kubeforge::testing::{TestNamespace, apply_crds};
use kubeforge_examples::webapp::{WebApp, WebAppSpec};
use kubeforge_examples::webapp_operator::{REGISTRY, WebAppController};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, generated_role_client, is_not_found, status_code};

fn spec(replicas: i32) -> WebAppSpec {
    serde_json::from_value(
        json!({ "image": "registry.example.com/shop:1.4", "replicas": replicas }),
    )
    .unwrap()
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: converge under the generated RBAC, then clean up"
)]
async fn webapp_operator_should_converge_under_its_generated_rbac_and_clean_up() {
    let ns = TestNamespace::new().await.unwrap();
    let admin = ns.client();
    apply_crds(&admin, [WebApp::crd()], Duration::from_secs(30))
        .await
        .unwrap();

    // The operator's identity: a ServiceAccount bound to exactly the generated ClusterRole.
    let operator = generated_role_client::<WebApp>(&ns, "webapp-operator").await;
    // Outside the role: the operator may not read ResourceQuotas or create Pods.
    let quotas: Api<ResourceQuota> = Api::namespaced(operator.clone(), ns.name());
    assert_eq!(status_code(quotas.list(&ListParams::default()).await), 403);
    // A kind none of the binary's controllers touches (other tests' controllers watch Pods).
    let limits: LimitRange = serde_json::from_value(json!({
        "metadata": { "name": "intruder" },
        "spec": { "limits": [{ "type": "Container", "max": { "cpu": "1" } }] },
    }))
    .unwrap();
    assert_eq!(
        status_code(
            Api::<LimitRange>::namespaced(operator.clone(), ns.name())
                .create(&PostParams::default(), &limits)
                .await
        ),
        403
    );

    let recorder = Arc::new(Recorder::new(operator.clone(), "webapp-operator"));
    let manager = Manager::new(operator)
        .namespace(Some(ns.name().to_owned()))
        .controller(WebAppController { recorder });
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));

    let apps = ns.api::<WebApp>();
    apps.create(&PostParams::default(), &WebApp::new("shop", spec(2)))
        .await
        .unwrap();
    let ready = async |replicas: i32| -> Option<WebApp> {
        let app = apps.get("shop").await.ok()?;
        let status = app.status.clone()?;
        (status.conditions.is_true(READY)
            && status.replicas == replicas
            && status.observed_generation == app.metadata.generation)
            .then_some(app)
    };
    let app = eventually(
        "the WebApp to be Ready with 2 pods",
        Duration::from_secs(60),
        async || ready(2).await,
    )
    .await;
    let finalizer = <WebAppController as ControllerSpec>::FINALIZER.unwrap();
    assert!(app.finalizers().iter().any(|f| f == finalizer));
    assert_eq!(
        app.status.as_ref().unwrap().selector.as_deref(),
        Some("app.kubernetes.io/instance=shop,app.kubernetes.io/name=webapp")
    );

    // The children, owned by the WebApp.
    let deployment = ns.api::<Deployment>().get("shop").await.unwrap();
    assert_eq!(deployment.spec.replicas, Some(2));
    for owner in [
        deployment.owner_references(),
        ns.api::<Service>()
            .get("shop")
            .await
            .unwrap()
            .owner_references(),
        ns.api::<ConfigMap>()
            .get("shop-env")
            .await
            .unwrap()
            .owner_references(),
    ] {
        assert_eq!(
            (
                owner[0].kind.as_str(),
                owner[0].name.as_str(),
                owner[0].controller
            ),
            ("WebApp", "shop", Some(true))
        );
    }
    let registry = ns.api::<ConfigMap>().get(REGISTRY).await.unwrap();
    assert_eq!(
        registry.data.unwrap()["shop"],
        "registry.example.com/shop:1.4"
    );

    // Editing spec.replicas changes the Deployment and the status.
    apps.patch(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "replicas": 3 } })),
    )
    .await
    .unwrap();
    eventually("3 replicas", Duration::from_secs(60), async || {
        ready(3).await
    })
    .await;

    // The scale subresource (what `kubectl scale` and autoscalers use) is tied to spec.replicas.
    let scale = apps.get_scale("shop").await.unwrap();
    assert_eq!(scale.status.as_ref().map(|s| s.replicas), Some(3));
    assert_eq!(
        scale.status.and_then(|s| s.selector).as_deref(),
        Some("app.kubernetes.io/instance=shop,app.kubernetes.io/name=webapp")
    );
    apps.patch_scale(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "replicas": 1 } })),
    )
    .await
    .unwrap();
    eventually(
        "1 replica after scaling",
        Duration::from_secs(60),
        async || ready(1).await,
    )
    .await;
    assert_eq!(
        ns.api::<Deployment>()
            .get("shop")
            .await
            .unwrap()
            .spec
            .replicas,
        Some(1)
    );

    // `kubectl get` shows the printer columns. The version is named: another test may have
    // installed v2 (the kind's other version) on the shared plane, which kubectl would prefer,
    // and reading v1 objects through it needs a conversion no operator serves here.
    let run = concat!(env!("CARGO_MANIFEST_DIR"), "/../controlplane/run");
    let table = std::process::Command::new(run)
        .args([
            "kubectl",
            "-n",
            ns.name(),
            "get",
            "webapps.v1.apps.kubeforge.dev",
        ])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "IMAGE", "REPLICAS", "READY", "AGE"],
        "{table}"
    );
    assert!(table.contains("registry.example.com/shop:1.4"), "{table}");

    // An event was recorded when the app rolled out.
    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("RolledOut")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("shop")),
        "{events:#?}"
    );

    // Deleting the WebApp runs cleanup (the registry row goes), then the children are collected.
    apps.delete("shop", &DeleteParams::default()).await.unwrap();
    eventually(
        "the WebApp to be gone",
        Duration::from_secs(60),
        async || is_not_found(apps.get("shop").await).then_some(()),
    )
    .await;
    let registry = ns.api::<ConfigMap>().get(REGISTRY).await.unwrap();
    assert!(
        !registry.data.unwrap_or_default().contains_key("shop"),
        "cleanup removed the row"
    );
    eventually(
        "the Deployment to be garbage-collected",
        Duration::from_secs(60),
        async || is_not_found(ns.api::<Deployment>().get("shop").await).then_some(()),
    )
    .await;

    shutdown.cancel();
    running.await.unwrap().unwrap();
    let role_name = format!("webapp-operator-{}", ns.name());
    let _ = Api::<ClusterRole>::all(admin)
        .delete(&role_name, &DeleteParams::default())
        .await;
}

#[test]
fn crdgen_rbac_should_print_the_wiring_rules() {
    let yaml = kubeforge::crdgen::rbac_yaml().unwrap();
    assert!(
        yaml.starts_with("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"),
        "{yaml}"
    );
    for line in [
        "- deployments",
        "- services",
        "- configmaps",
        "- webapps/status",
        "- webapps/finalizers",
        "- apps.kubeforge.dev",
    ] {
        assert!(yaml.contains(line), "missing {line}:\n{yaml}");
    }
    assert!(
        yaml.contains("- secretmirrors"),
        "the second example's rules too:\n{yaml}"
    );
    assert!(
        !yaml.contains("limitranges"),
        "no controller touches LimitRanges:\n{yaml}"
    );
    let _ = WebApp::new("x", spec(1)).name_any();
}

/// `Manager::informer_defaults` reaches every kind the generated wiring watches (also when set
/// after the controller was added), and `controller_customized` overrides the macro's options
/// at run time.
#[tokio::test]
async fn controller_customized_should_apply_run_time_options_over_the_generated_wiring() {
    let ns = TestNamespace::new().await.unwrap();
    let admin = ns.client();
    apply_crds(&admin, [WebApp::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let recorder = Arc::new(Recorder::new(admin.clone(), "webapp-operator"));
    let mut manager = Manager::new(admin.clone())
        .namespace(Some(ns.name().to_owned()))
        .metrics_bind_address("127.0.0.1:0".parse().unwrap())
        .controller_customized(WebAppController { recorder }, |wired| {
            wired.configure(|config| config.concurrency(1))
        })
        .informer_defaults(
            kubeforge::informer::InformerConfig::default().keep_managed_fields(true),
        );
    let mut listening = manager.on_listening();
    let cache = manager.cache().clone();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    let (_, metrics) = listening.recv().await.unwrap();

    let apps = ns.api::<WebApp>();
    apps.create(&PostParams::default(), &WebApp::new("kept", spec(1)))
        .await
        .unwrap();
    // The primary and an owned kind are cached with their managedFields (stripped by default).
    let key = kubeforge::ObjectKey::namespaced(ns.name(), "kept");
    eventually(
        "the WebApp and its ConfigMap cached with managedFields",
        Duration::from_secs(60),
        async || {
            let here = kubeforge::cache::Lookup::namespace(ns.name());
            let app = cache.store::<WebApp>(&here).ok()?.get(&key).await.ok()??;
            let env = kubeforge::ObjectKey::namespaced(ns.name(), "kept-env");
            let cm = cache
                .store::<ConfigMap>(&here)
                .ok()?
                .get(&env)
                .await
                .ok()??;
            (!app.managed_fields().is_empty() && !cm.managed_fields().is_empty()).then_some(())
        },
    )
    .await;
    // `concurrency = 4` in the attribute, 1 from `configure`.
    let (_, scrape) = crate::manager::http_get(metrics, "/metrics").await;
    let workers = format!(
        "controller_runtime_max_concurrent_reconciles{{controller=\"{}\"}}",
        WebAppController::NAME
    );
    let workers = scrape
        .lines()
        .find_map(|l| l.strip_prefix(&workers))
        .map(str::trim);
    assert_eq!(workers, Some("1"), "{scrape}");

    // The finalizer needs the running operator to let the WebApp go.
    apps.delete("kept", &DeleteParams::default()).await.unwrap();
    eventually(
        "the WebApp to be gone",
        Duration::from_secs(60),
        async || is_not_found(apps.get("kept").await).then_some(()),
    )
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
