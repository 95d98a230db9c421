//! `#[kubeforge::view]`: views of a kind and of its parts, nested, in `Option`, `Vec` and
//! `BTreeMap`; a view as the primary, owned and watched kind of a controller; projected from and
//! decoded like the full type.

use std::collections::BTreeMap;
use std::sync::Arc;

use kubeforge::ObjectKey;
use kubeforge::cache::Cache;
use kubeforge::controller::{Action, Context};
use kubeforge::k8s_openapi::api::apps::v1::ReplicaSet;
use kubeforge::k8s_openapi::api::core::v1::{
    Container, Node, Pod, PodCondition, PodSpec, PodStatus,
};
use kubeforge::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubeforge::kube::Resource;
use kubeforge::serde_json::json;

#[derive(Debug)]
pub struct Error;
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error")
    }
}
impl std::error::Error for Error {}

#[kubeforge::view(of = Pod)]
pub struct PodView {
    pub metadata: ObjectMeta,
    pub spec: Option<PodSpecView>,
    pub status: Option<PodStatusView>,
}

#[kubeforge::view(of = PodSpec)]
pub struct PodSpecView {
    pub node_name: Option<String>,
    pub containers: Vec<ContainerView>,
    pub node_selector: Option<BTreeMap<String, String>>,
}

#[kubeforge::view(of = Container)]
pub struct ContainerView {
    pub name: String,
    pub image: Option<String>,
}

#[kubeforge::view(of = PodStatus)]
pub struct PodStatusView {
    pub phase: Option<String>,
    /// The full part type itself, not a view of it.
    pub conditions: Option<Vec<PodCondition>>,
}

/// A cluster-scoped kind, with the crate path spelled out.
#[kubeforge::view(of = Node, crate = "::kubeforge")]
pub struct NodeView {
    pub metadata: ObjectMeta,
}

#[kubeforge::view(of = ReplicaSet)]
pub struct ReplicaSetView {
    pub metadata: ObjectMeta,
}

pub struct Placement;

#[kubeforge::controller(for = ReplicaSetView, owns(PodView), watches(NodeView, map = Self::by_node))]
impl Placement {
    async fn reconcile(
        &self,
        _rs: Arc<ReplicaSetView>,
        ctx: &Context<ReplicaSetView>,
    ) -> Result<Action, Error> {
        // Reads of the views' informers.
        let _ = ctx.cache();
        Ok(Action::Done)
    }
    fn by_node(node: &NodeView, _cache: &Cache) -> Vec<ObjectKey> {
        vec![ObjectKey::of(node)]
    }
}

pub fn main() {
    assert_eq!(PodView::kind(&()), "Pod");
    assert_eq!(PodView::plural(&()), "pods");
    assert_eq!(PodView::api_version(&()), "v1");
    assert_eq!(NodeView::kind(&()), "Node");
    assert_eq!(ReplicaSetView::api_version(&()), "apps/v1");
    let json = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "web-0", "namespace": "default", "labels": { "app": "web" } },
        "spec": {
            "nodeName": "node-1",
            "nodeSelector": { "disk": "ssd" },
            "containers": [{ "name": "web", "image": "nginx", "args": ["a"], "env": [{ "name": "A", "value": "1" }] }]
        },
        "status": { "phase": "Running", "podIP": "10.0.0.1", "conditions": [{ "type": "Ready", "status": "True" }] }
    });
    let pod: Pod = kubeforge::serde_json::from_value(json.clone()).unwrap();
    let projected = PodView::project(&pod);
    let decoded: PodView = kubeforge::serde_json::from_value(json).unwrap();
    assert_eq!(projected, decoded);
    assert_eq!(PodView::from(&pod), decoded);
    let spec = decoded.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("node-1"));
    assert_eq!(spec.containers[0].image.as_deref(), Some("nginx"));
    assert_eq!(spec.node_selector.as_ref().unwrap()["disk"], "ssd");
    let status = decoded.status.as_ref().unwrap();
    assert_eq!(status.conditions.as_ref().unwrap()[0].type_, "Ready");
    // What a remote store keeps: the view's JSON, decoded back to the same view.
    let stored = kubeforge::serde_json::to_string(&decoded).unwrap();
    assert!(
        !stored.contains("podIP") && !stored.contains("args"),
        "{stored}"
    );
    let back: PodView = kubeforge::serde_json::from_str(&stored).unwrap();
    assert_eq!(back, decoded);
}
