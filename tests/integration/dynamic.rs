//! A controller of a kind known only at run time (`Controller::dynamic` over `DynamicObject`):
//! the kind is found by discovery from its group, version and kind, as an operator reading them
//! from a configuration file would. On the real apiserver it reconciles the objects, owns a
//! static child kind (a child's change or deletion reconciles its dynamic owner), writes the
//! status, holds deleted objects with its finalizer until the cleanup ran once, and a sharded
//! manager refuses it at start-up instead of reconciling it on every replica.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::discovery::Scope;
use kubeforge::KindType;
use kubeforge::controller::{
    Action, Context, Controller, ControllerConfig, Owns, Reconciler, Wiring,
};
use kubeforge::informer::InformerConfig;
use kubeforge::testing::{TestNamespace, apply_crds};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;

const GROUP: &str = "dynamic.kubeforge.dev";
const FINALIZER: &str = "dynamic.kubeforge.dev/cleanup";

fn gadget_crd() -> CustomResourceDefinition {
    gadget_crd_in(GROUP)
}

fn gadget_crd_in(group: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": { "name": format!("gadgets.{group}") },
        "spec": {
            "group": group,
            "names": { "kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList" },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": { "type": "object", "properties": { "size": { "type": "integer" } } },
                        "status": { "type": "object", "properties": { "observed": { "type": "integer" } } },
                    },
                } },
            }],
        },
    }))
    .unwrap()
}

/// Keeps a ConfigMap `<name>-size` saying the gadget's size, and the size in its status.
struct Gadgets {
    resource: ApiResource,
    cleanups: Arc<AtomicUsize>,
}

impl Reconciler<DynamicObject> for Gadgets {
    type Error = kube::Error;

    async fn reconcile(
        &self,
        gadget: Arc<DynamicObject>,
        ctx: &Context<DynamicObject>,
    ) -> Result<Action, kube::Error> {
        let ns = gadget.metadata.namespace.clone().unwrap_or_default();
        let name = gadget.metadata.name.clone().unwrap_or_default();
        let size = gadget.data["spec"]["size"].as_i64().unwrap_or_default();
        let owner = OwnerReference {
            api_version: self.resource.api_version.clone(),
            kind: self.resource.kind.clone(),
            name: name.clone(),
            uid: gadget.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let child = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("{name}-size")),
                namespace: Some(ns.clone()),
                owner_references: Some(vec![owner]),
                ..Default::default()
            },
            data: Some([("size".to_owned(), size.to_string())].into()),
            ..Default::default()
        };
        let params = PatchParams::apply("dynamic-gadgets").force();
        Api::<ConfigMap>::namespaced(ctx.client(), &ns)
            .patch(&format!("{name}-size"), &params, &Patch::Apply(&child))
            .await?;
        if gadget.data["status"]["observed"].as_i64() != Some(size) {
            let status = json!({ "status": { "observed": size } });
            Api::<DynamicObject>::namespaced_with(ctx.client(), &ns, &self.resource)
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
        }
        Ok(Action::Done)
    }

    async fn cleanup(
        &self,
        _gadget: Arc<DynamicObject>,
        _ctx: &Context<DynamicObject>,
    ) -> Result<Action, kube::Error> {
        self.cleanups.fetch_add(1, Ordering::SeqCst);
        Ok(Action::Done)
    }
}

/// The Gadget CRD installed, and the kind found as an operator that knows it only by name finds
/// it: by discovery.
async fn discovered(client: &kube::Client) -> (ApiResource, KindType<DynamicObject>) {
    apply_crds(client, [gadget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Gadget");
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let ty = KindType::dynamic(resource.clone(), capabilities.scope == Scope::Namespaced);
    (resource, ty)
}

/// A kind in a group the apiserver has never served: `apply_crds` returns once discovery lists
/// it, not only once the CRD is Established (the apiserver publishes a new group's discovery
/// document a little after; CI lost a run to a `404` from `pinned_kind` in between).
#[tokio::test]
async fn a_kind_in_a_new_group_should_be_discoverable_once_its_crd_is_applied() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for i in 0..5 {
        let group = format!("{}-{i}.found.kubeforge.dev", ns.name());
        apply_crds(&client, [gadget_crd_in(&group)], Duration::from_secs(30))
            .await
            .unwrap();
        let gvk = GroupVersionKind::gvk(&group, "v1", "Gadget");
        let found = kube::discovery::pinned_kind(&client, &gvk).await;
        crds.delete(&format!("gadgets.{group}"), &DeleteParams::default())
            .await
            .unwrap();
        let (resource, _) = found.unwrap_or_else(|e| panic!("{group} right after apply_crds: {e}"));
        assert_eq!(resource.plural, "gadgets");
    }
}

#[tokio::test]
async fn a_controller_of_a_kind_known_at_run_time_should_reconcile_own_and_finalize_it() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let (resource, ty) = discovered(&client).await;
    let gadgets = Api::<DynamicObject>::namespaced_with(client.clone(), ns.name(), &resource);
    let wiring = Wiring::new(client.clone());
    let controller = Controller::dynamic(
        "gadgets",
        &wiring,
        gadgets.clone(),
        ty,
        InformerConfig::default(),
    )
    .owns(ns.api::<ConfigMap>(), Owns::full())
    .config(ControllerConfig::default().finalizer(FINALIZER));
    let cleanups = Arc::new(AtomicUsize::new(0));
    let reconciler = Gadgets {
        resource: resource.clone(),
        cleanups: Arc::clone(&cleanups),
    };
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(controller.run(reconciler, shutdown.clone()));

    let mut gadget = DynamicObject::new("g", &resource).within(ns.name());
    gadget.data = json!({ "spec": { "size": 3 } });
    gadgets
        .create(&PostParams::default(), &gadget)
        .await
        .unwrap();
    let maps = ns.api::<ConfigMap>();
    let size_is = async |n: &str| {
        let cm = maps.get_opt("g-size").await.ok().flatten()?;
        (cm.data?.get("size")? == n).then_some(())
    };
    eventually("g-size says 3", Duration::from_secs(60), async || {
        size_is("3").await
    })
    .await;
    eventually("g's status says 3", Duration::from_secs(60), async || {
        let g = gadgets.get("g").await.ok()?;
        let held = g
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&FINALIZER.to_owned());
        (held && g.data["status"]["observed"] == 3).then_some(())
    })
    .await;

    // A change of the dynamic object reconciles it; so does the deletion of its owned child.
    let bigger = json!({ "spec": { "size": 5 } });
    gadgets
        .patch("g", &PatchParams::default(), &Patch::Merge(&bigger))
        .await
        .unwrap();
    eventually("g-size says 5", Duration::from_secs(60), async || {
        size_is("5").await
    })
    .await;
    maps.delete("g-size", &DeleteParams::default())
        .await
        .unwrap();
    eventually("g-size back", Duration::from_secs(60), async || {
        size_is("5").await
    })
    .await;

    // Deleted: held by the finalizer until the cleanup ran, once.
    gadgets.delete("g", &DeleteParams::default()).await.unwrap();
    eventually("g gone", Duration::from_secs(60), async || {
        gadgets.get_opt("g").await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(cleanups.load(Ordering::SeqCst), 1, "cleanup ran once");
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_sharded_manager_should_refuse_a_kind_known_at_run_time() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let (resource, ty) = discovered(&client).await;
    let manager = kubeforge::manager::Manager::new(client.clone())
        .namespace(Some(ns.name().to_owned()))
        .shards(kubeforge::shard::ShardConfig::new(
            "dynamic-refused",
            ns.name(),
        ));
    let gadgets = Api::<DynamicObject>::namespaced_with(client, ns.name(), &resource);
    let controller = Controller::dynamic(
        "gadgets",
        manager.wiring(),
        gadgets,
        ty,
        InformerConfig::default(),
    );
    let cleanups = Arc::new(AtomicUsize::new(0));
    let manager = manager.add_controller(controller, Gadgets { resource, cleanups });
    let stopped = tokio::time::timeout(
        Duration::from_secs(60),
        manager.run_until(CancellationToken::new()),
    )
    .await
    .expect("the manager stops by itself");
    let error = stopped.expect_err("refused").to_string();
    assert!(error.contains("known at run time"), "{error}");
}

/// A ConfigMap that owns a Gadget (a kind known at run time) and follows others that name it.
struct Owner {
    resource: ApiResource,
    runs: Arc<AtomicUsize>,
}

impl Reconciler<ConfigMap> for Owner {
    type Error = kube::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, kube::Error> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let ns = cm.metadata.namespace.clone().unwrap_or_default();
        let name = cm.metadata.name.clone().unwrap_or_default();
        let size: i64 = cm
            .data
            .as_ref()
            .and_then(|d| d.get("size"))
            .and_then(|s| s.parse().ok())
            .unwrap_or_default();
        let gadget = json!({
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": {
                "name": format!("{name}-gadget"),
                "ownerReferences": [{
                    "apiVersion": "v1", "kind": "ConfigMap", "name": name,
                    "uid": cm.metadata.uid, "controller": true,
                }],
            },
            "spec": { "size": size },
        });
        Api::<DynamicObject>::namespaced_with(ctx.client(), &ns, &self.resource)
            .patch(
                &format!("{name}-gadget"),
                &PatchParams::apply("dynamic-owner").force(),
                &Patch::Apply(&gadget),
            )
            .await?;
        Ok(Action::Done)
    }
}

#[tokio::test]
async fn a_static_controller_should_own_and_watch_a_kind_known_at_run_time() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let (resource, ty) = discovered(&client).await;
    let gadgets = Api::<DynamicObject>::namespaced_with(client.clone(), ns.name(), &resource);
    let wiring = Wiring::new(client.clone());
    // Gadgets labelled `for=<ConfigMap>` reconcile that ConfigMap.
    let follows = kubeforge::controller::Watches::map(|gadget: &DynamicObject| {
        let ns = gadget.metadata.namespace.clone().unwrap_or_default();
        gadget
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("for"))
            .map(|name| vec![kubeforge::ObjectKey::namespaced(ns, name.clone())])
            .unwrap_or_default()
    });
    let controller = Controller::new(
        "gadget-owner",
        &wiring,
        ns.api::<ConfigMap>(),
        InformerConfig::default().labels("gadget-owner=yes"),
    )
    .owns_dynamic(gadgets.clone(), &ty, Owns::full())
    .watches_dynamic(gadgets.clone(), &ty, follows);
    let idle = controller.idle();
    let runs = Arc::new(AtomicUsize::new(0));
    let reconciler = Owner {
        resource: resource.clone(),
        runs: Arc::clone(&runs),
    };
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(controller.run(reconciler, shutdown.clone()));

    let mut cm = crate::support::configmap("cfg", &[("size", "1")]);
    cm.metadata.labels = Some([("gadget-owner".to_owned(), "yes".to_owned())].into());
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let size_is = async |n: i64| {
        let g = gadgets.get_opt("cfg-gadget").await.ok().flatten()?;
        (g.data["spec"]["size"].as_i64() == Some(n)).then_some(())
    };
    eventually(
        "cfg-gadget of size 1",
        Duration::from_secs(60),
        async || size_is(1).await,
    )
    .await;
    // The owned dynamic child deleted: its owner reconciles and makes it again.
    gadgets
        .delete("cfg-gadget", &DeleteParams::default())
        .await
        .unwrap();
    eventually("cfg-gadget back", Duration::from_secs(60), async || {
        size_is(1).await
    })
    .await;

    // A gadget of nobody's that names the ConfigMap reconciles it on each change.
    let mut foreign = DynamicObject::new("foreign", &resource).within(ns.name());
    foreign.metadata.labels = Some([("for".to_owned(), "cfg".to_owned())].into());
    foreign.data = json!({ "spec": { "size": 7 } });
    // Nothing queued, in flight or pending: the next reconcile is the foreign gadget's.
    idle.wait(Duration::from_millis(500)).await;
    let before = runs.load(Ordering::SeqCst);
    gadgets
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    eventually(
        "cfg reconciled for the foreign gadget",
        Duration::from_secs(60),
        async || (runs.load(Ordering::SeqCst) > before).then_some(()),
    )
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
