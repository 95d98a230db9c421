//! View types: typed projections of a kind, so that the cache holds only the fields an operator
//! reads.
//!
//! An operator that watches Pods, Secrets, Nodes or Deployments caches every field of every
//! object although it reads a few. A *view* is a struct declaring only those fields, for the same
//! group, version and kind as a full type; [`#[kubeforge::view(of = Full)]`](macro@crate::view)
//! makes it one:
//!
//! ```
//! use kubeforge::k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
//! use kubeforge::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//!
//! #[kubeforge::view(of = Pod)]
//! pub struct PodView {
//!     pub metadata: ObjectMeta,
//!     pub spec: Option<PodSpecView>,
//!     pub status: Option<PodStatusView>,
//! }
//!
//! #[kubeforge::view(of = PodSpec)]
//! pub struct PodSpecView {
//!     pub node_name: Option<String>,
//!     pub containers: Vec<ContainerView>,
//! }
//!
//! #[kubeforge::view(of = Container)]
//! pub struct ContainerView {
//!     pub name: String,
//!     pub image: Option<String>,
//! }
//!
//! #[kubeforge::view(of = PodStatus)]
//! pub struct PodStatusView {
//!     pub phase: Option<String>,
//! }
//!
//! let pod: Pod = kubeforge::serde_json::from_value(kubeforge::serde_json::json!({
//!     "metadata": { "name": "web-0" },
//!     "spec": {
//!         "nodeName": "node-1",
//!         "containers": [{ "name": "web", "image": "nginx", "args": ["-g", "daemon off;"] }]
//!     },
//!     "status": { "phase": "Running", "podIP": "10.0.0.7" }
//! }))
//! .unwrap();
//! let view = PodView::project(&pod);
//! assert_eq!(view.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some("node-1"));
//! // Decoded straight from the same JSON, unknown fields skipped: the same view.
//! let decoded: PodView =
//!     kubeforge::serde_json::from_value(kubeforge::serde_json::to_value(&pod).unwrap()).unwrap();
//! assert_eq!(decoded, view);
//! ```
//!
//! What the macro checks and generates:
//!
//! - **Checked against the full type at compile time.** Every field must be a field of the full
//!   type, of the full field's type or a view of it ([`ViewOf`]), inside the same `Option`, `Vec`
//!   and `BTreeMap` layers; a misspelled or mistyped field is an error at the field. The check is
//!   the projection itself, `View::project(&full)` (and `From<&Full>`), which the compiler types.
//! - **Decoded directly** from the apiserver's JSON: serde's `Deserialize` with k8s-openapi's
//!   names (`rename_all = "camelCase"`: `node_name` is `nodeName`, `type_` is `type`; a field
//!   the full type names otherwise takes a `#[serde(rename = "..")]`) that skips every field the
//!   view lacks; no full object is built. A missing field takes its default.
//! - **A kind** when it has `metadata: ObjectMeta`: it implements `kube::Resource` with the full
//!   kind's kind, group, version, plural and scope, [`View`], `Clone`, `Debug`, `PartialEq`,
//!   `Default` and serde, so it can be the `for`, an `owns` or a `watches` kind of a controller
//!   and be read from the cache. The cache keys informers by type: a view and its full type
//!   watched in one manager are two informers, each read through its own type. Without
//!   `metadata` a view is a *part* (`PodSpecView` above), used inside other views.
//! - **Read-only.** A view implements `Serialize` (a remote store keeps cached objects as JSON)
//!   but not [`Writable`], which every write of kubeforge requires: `Context::patch_status` /
//!   `replace_status` of a view primary, `apply_owned` / `create_owned` of a view child, a
//!   dependent of a view kind and [`client::update_object`](crate::client::update_object) do not
//!   compile. Write through the full type instead (`ctx.api::<Pod>()`, a `Pod` built to apply):
//!   a view written back would erase every field it does not hold. `kube::Api<View>` itself is
//!   kube's and still has `replace` and `create`; do not call them.
//!
//! [`Writable`] is implemented for every k8s-openapi kind (a blanket impl over
//! `k8s_openapi::Resource`, which views do not implement) and by `#[custom_resource]`. A kind
//! whose `kube::Resource` is written by hand or derived by kube-derive says it is a full kind
//! with one line, `impl kubeforge::views::Writable for MyKind {}`: Rust's coherence rules allow
//! no second blanket impl (over kube's `DynamicObject` or kube-derive's kinds) beside the first.
//!
//! Read-your-writes: a write through the full type is recorded for the full type's informers,
//! so a reconcile of the view does not wait for it to reach the view's informer.

use std::collections::BTreeMap;

use crate::scope::Kind;

/// `Self` holds the fields it declares of `Full`: the full value itself (every `Clone` type is a
/// view of itself) or a `#[kubeforge::view(of = Full)]` of it. `project` copies them out.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a view of `{Full}`",
    label = "the full type's field is `{Full}`",
    note = "a view's field has the full type's field type, or a #[kubeforge::view(of = ..)] of it, inside the same `Option`, `Vec` and `BTreeMap` layers"
)]
pub trait ViewOf<Full>: Sized {
    /// The view's fields of `full`.
    fn project(full: &Full) -> Self;
}

impl<T: Clone> ViewOf<T> for T {
    fn project(full: &T) -> T {
        full.clone()
    }
}

/// A view of a kind: what `#[kubeforge::view(of = Full)]` implements for a view with
/// `metadata`.
pub trait View: Kind {
    /// The full kind the view projects, through which it is written.
    type Full: Kind + Writable;
}

/// A kind that may be written to the apiserver: every k8s-openapi kind and every
/// `#[custom_resource]` kind, never a [`View`] (whose write would erase the fields it lacks).
/// Every write path of kubeforge requires it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be written to the apiserver: kubeforge writes full kinds only, and a #[kubeforge::view] is read-only",
    label = "not a writable kind",
    note = "a view holds some fields of its kind, and writing it would erase the others: write through the full type it views (`ctx.api::<Full>()`, or a full object built to apply)",
    note = "a kind whose `kube::Resource` is written by hand or derived by kube-derive declares itself full: `impl kubeforge::views::Writable for MyKind {{}}`; generic code bounds its kind by `Writable`"
)]
pub trait Writable {}

#[diagnostic::do_not_recommend]
impl<K: k8s_openapi::Resource> Writable for K {}

/// `each` of the value of an `Option` field (the projection of `Option<Full>` into
/// `Option<View>`).
#[doc(hidden)]
pub fn __option<F, V>(full: &Option<F>, each: impl FnOnce(&F) -> V) -> Option<V> {
    full.as_ref().map(each)
}

/// `each` of every element of a `Vec` field.
#[doc(hidden)]
#[allow(clippy::ptr_arg, reason = "checks that the full field is a `Vec`")]
pub fn __vec<F, V>(full: &Vec<F>, each: impl FnMut(&F) -> V) -> Vec<V> {
    full.iter().map(each).collect()
}

/// `each` of every value of a `BTreeMap` field.
#[doc(hidden)]
pub fn __map<K: Clone + Ord, F, V>(
    full: &BTreeMap<K, F>,
    mut each: impl FnMut(&F) -> V,
) -> BTreeMap<K, V> {
    full.iter().map(|(k, v)| (k.clone(), each(v))).collect()
}

/// `V::project(full)`, the leaf of a field's projection.
#[doc(hidden)]
pub fn __leaf<F, V: ViewOf<F>>(full: &F) -> V {
    V::project(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Part {
        name: String,
        extra: u32,
    }

    #[derive(Debug, PartialEq)]
    struct PartView {
        name: String,
    }

    impl ViewOf<Part> for PartView {
        fn project(full: &Part) -> Self {
            PartView {
                name: __leaf(&full.name),
            }
        }
    }

    #[test]
    fn projections_should_keep_the_layers_and_project_their_contents() {
        let part = Part {
            name: "a".into(),
            extra: 1,
        };
        assert_eq!(part.extra, 1);
        let some: Option<PartView> = __option(&Some(part.clone()), __leaf);
        assert_eq!(some, Some(PartView { name: "a".into() }));
        let list: Vec<PartView> = __vec(&vec![part.clone(), part.clone()], __leaf);
        assert_eq!(list.len(), 2);
        let map: BTreeMap<String, PartView> =
            __map(&BTreeMap::from([("k".to_owned(), part)]), __leaf);
        assert_eq!(map["k"], PartView { name: "a".into() });
        let same: String = __leaf(&"x".to_owned());
        assert_eq!(same, "x");
    }
}
