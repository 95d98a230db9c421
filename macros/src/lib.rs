//! Procedural macros of kubeforge. Use them through the `kubeforge` crate, which re-exports them.
//!
//! This crate only routes: each attribute is a one-line entry point into `pipeline.rs`
//! (`#[custom_resource]`, `#[kubeforge::schema]`), `controller/` (`#[controller]`) or `view/`
//! (`#[kubeforge::view]`). Both
//! schema macros run the same stages: attributes (`attrs.rs`, read by the table-driven
//! `key = value` parser of `keys.rs`; field markers in `markers.rs`) → typed model (`model.rs`,
//! `fields.rs`) → checks (`validate.rs`, `cel.rs`) → expansion (`expand.rs`).
//!
//! The reference of every key and marker is on [`macro@custom_resource`] (also for
//! [`macro@schema`]) and [`macro@controller`]: the files `docs/src/reference/*.md` it includes are
//! rendered from the key tables the macros parse with (`reference.rs`, a test), so the
//! documentation, the book and the parser agree.

mod attrs;
mod cel;
mod controller;
mod errors;
mod expand;
mod fields;
mod keys;
mod markers;
mod model;
mod pipeline;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod timing;
mod validate;
mod view;

use proc_macro::TokenStream;

/// Turns a spec struct into a complete Kubernetes kind.
///
/// Put it on the spec struct (named fields, no generics). It derives `Serialize`, `Deserialize`
/// and `JsonSchema` for the struct (do not derive them yourself; derive `Clone` and `Debug`, the
/// root type needs them), generates the root type named after `kind` with `metadata`, `spec` and
/// (with `status = ..`) `status`, and implements `kube::Resource`, `HasSpec`/`HasStatus`, serde,
/// `schemars::JsonSchema`, `garde::Validate` and `kubeforge::crd::CustomResource` for it, plus
/// `Kind::new(name, spec)` and `Kind::crd()`, and registers the CRD for `kubeforge::crdgen`.
///
#[doc = include_str!("../../docs/src/reference/custom-resource.md")]
///
#[doc = include_str!("../../docs/src/reference/markers.md")]
///
/// # More about markers
///
/// Misplaced markers say where they go: `exactly_one_of` & co. on a field ("put the marker on the
/// type"), `map_type` on a list ("use `list_type`"), `list_type` on a map, `struct_type` (use
/// `map_type`). A `k8s_openapi::ByteString` field is an error (it has no JSON schema): use
/// `String` with `format = "byte"` (`items(..)` / `values(..)` for lists and maps). With
/// `#[serde(with = "module")]`, schemars reads `module` as the type of the schema: use
/// `serialize_with` / `deserialize_with` next to `type = ".."`.
///
/// # Compile-time JSONPaths
///
/// The JSONPaths of printer columns, selectable fields and `scale` must name fields (by their
/// JSON names) of the spec/status structs and of nested structs annotated with
/// `#[kubeforge::schema]` (through lists with `[n]`, maps by key, newtypes), with a type that fits (an `integer` column needs an integer field;
/// scale replicas an integer; the selector a string; selectable fields a string, integer or bool).
/// Paths into other types (k8s-openapi types, enums) or through `#[serde(flatten)]` fields cannot
/// be resolved: mark them `unchecked`. `.metadata...` paths are not checked.
///
/// # Compile-time CEL checks
///
/// Rules and message expressions are type-checked against `self` (the spec or struct, the
/// field's value, or for `root_rule(..)` the whole object with only `name` and `generateName` of
/// its `metadata`) and fail at the rule, naming the CEL types: unknown functions or variables, no
/// overload for the operands (`self.name == 1`, `int + double`, `size(self.replicas)`), fields
/// of scalars or lists, a rule that is not a bool. Types the macro cannot see (other structs,
/// k8s-openapi types, int-or-string) are `dyn`: anything goes. The cost is estimated as the
/// apiserver does from `max_items`, `max_length`, `max_properties`: a rule it would refuse as too
/// expensive fails, naming the missing bounds.
///
/// Descriptions come from doc comments; a field is required unless it is an `Option` or has
/// `#[serde(default)]`; serde's rename, rename_all, flatten, skip and enum tagging are respected.
/// `#[serde(default)]` only makes a field optional: the schema gets a `default` (which the
/// apiserver then stores in every object that omits the field) only from the `default` /
/// `default_json` markers.
///
/// A `Quantity` field (also as list elements and map values, and the quantities inside
/// k8s-openapi types such as `ResourceRequirements`) gets the pattern upstream API types carry,
/// so the apiserver and `validate()` refuse `storage: "lots"`; a `pattern` or `type` marker of
/// the field replaces it.
///
/// `embedded_resource` fits `RawExtension`, `serde_json::Value`, `serde_json::Map` and structs:
/// the node becomes `type: object` and keeps unknown fields unless the struct lists properties.
/// A `RawExtension` field keeps unknown fields with or without the marker, as upstream types do.
///
///
/// # Examples
///
/// See the `kubeforge::crd` module docs (a runnable example) and `examples/src/webapp.rs`.
#[proc_macro_attribute]
pub fn custom_resource(args: TokenStream, input: TokenStream) -> TokenStream {
    pipeline::custom_resource(args.into(), input.into()).into()
}

/// Derives serde, `JsonSchema` and `garde::Validate` for a type used inside a kind.
///
/// `#[kubeforge::schema]` / `#[kubeforge::schema(rule(..), exactly_one_of = [..], at_most_one_of = [..],
/// at_least_one_of = [..], crate = "..")]` (the groups as on [`macro@custom_resource`], on structs
/// with named fields)
///
/// For the types used inside a spec or status (structs with markers, enums): derives serde and
/// `JsonSchema`, consumes `#[validate]` markers and implements `garde::Validate` (nested types
/// are validated through `Option`, `Vec` and maps automatically).
///
/// The field markers are those of [`macro@custom_resource`]. On enums they go on the fields of
/// struct variants (not on tuple-variant fields); `validate()` reports them at the path serde's
/// tagging gives them (`external.gitRepo.url`, `internal.seconds`, `adjacent.<content>.x`, ...).
/// Newtypes and tuple structs are supported (markers do not go on their positional fields).
///
/// **Markers on types**, as kubebuilder's markers above a type: `#[validate(..)]` on the type
/// itself applies wherever the type is used. A newtype takes the markers of its inner type
/// (`#[validate(min_length = 1, max_length = 63, pattern = "..")] struct Name(String);`, also
/// `items(..)` on a newtype of a list); a struct or an enum those of an object
/// (`min_properties`, `max_properties`, `map_type`) and those of any value (`rule(..)`,
/// `immutable`, `default`, `nullable`, `title`, `example`, `external_docs`,
/// `preserve_unknown_fields`, `embedded_resource`). A field of such a type narrows them with its
/// own: where both set a bound, length or count the tighter one wins; rules add up; two
/// different patterns, formats, enums or multiples must both hold (an `allOf`). `validate()`
/// checks both the type's and the field's. `required` / `optional` stay on fields; a marker that
/// does not fit the type is a compile error naming what the type is.
#[proc_macro_attribute]
pub fn schema(args: TokenStream, input: TokenStream) -> TokenStream {
    pipeline::schema(args.into(), input.into()).into()
}

/// Declares a controller on an inherent impl block.
///
/// ```text
/// #[kubeforge::controller(for = WebApp, owns(Deployment, Service), watches(Secret, map = Self::apps_for_secret),
///     concurrency = 4, finalizer = "apps.example.com/cleanup", predicates(generation_changed),
///     retry = exponential(base = "1s", max = "5m"), dequeue = generation_changed)]
/// impl WebAppController {
///     async fn reconcile(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> { .. }
///     async fn cleanup(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> { .. }
///     fn apps_for_secret(secret: &Secret, cache: &Cache) -> Vec<ObjectKey> { .. }
/// }
/// ```
///
#[doc = include_str!("../../docs/src/reference/controller.md")]
///
/// # The impl block
///
/// The impl block must define `async fn reconcile(&self, obj: Arc<Kind>, ctx: &Context<Kind>) ->
/// Result<Action, Error>`; `cleanup` has the same shape; an optional `fn error_policy(&self, obj:
/// &Kind, error: &Error, ctx: &Context<Kind>) -> ErrorPolicy` chooses how errors are retried.
/// `Error` is any `kubeforge::ReconcileError`: a type implementing `std::error::Error` (a
/// `thiserror` enum, `kube::Error`), `anyhow::Error` or `kubeforge::BoxError`; a one-parameter
/// alias such as `anyhow::Result<Action>` names it too (also for a watcher's handlers). The
/// macro implements `Reconciler` and `ControllerSpec` (add the controller with
/// `Manager::controller(MyController { .. })`) and registers the RBAC rules the wiring needs for
/// `crdgen --rbac`. Every kind named in the attribute must be a Kubernetes kind (a
/// `#[custom_resource]` kind or a k8s-openapi resource); one that is not is reported once, where
/// it is named. When the attribute or the impl block is wrong, the impl block is kept and the
/// traits get placeholder impls, so the macro's errors are the only ones reported.
///
/// # Watchers
///
/// With `watcher`, the impl block defines event handlers instead of `reconcile`: a reconciler
/// gets the latest state of an object however many events led to it, a watcher is told about
/// every event.
///
/// ```text
/// #[kubeforge::controller(for = ConfigMap, watcher, workers = 16, event_timeout = "30s",
///     retry = exponential(base = "1s", max = "5m"))]
/// impl Audit {
///     async fn add(&self, obj: Arc<ConfigMap>, ctx: &WatchContext) -> Result<(), Error> { .. }
///     async fn update(&self, old: Arc<ConfigMap>, new: Arc<ConfigMap>, ctx: &WatchContext) -> Result<(), Error> { .. }
///     async fn delete(&self, obj: Arc<ConfigMap>, ctx: &WatchContext) -> Result<(), Error> { .. }
///     async fn sync(&self, obj: Arc<ConfigMap>, ctx: &WatchContext) -> Result<(), Error> { .. }
/// }
/// ```
///
/// `add` is required (it also gets every object of the initial list); `update` (the old and the
/// new object), `delete` (the last known state) and `sync` (a resync of an unchanged object)
/// are optional and do nothing when left out; all return the same error type. The events of one
/// object run in order on one worker; those of different objects run in parallel on `workers`
/// workers. A handler that fails, panics or runs past `event_timeout` is retried under `retry`,
/// and `dequeue` says which newer events of the object drop its pending retry. The macro
/// implements `kubeforge::watcher::Watcher` and `WatcherSpec` (add the watcher with
/// `Manager::watcher(Audit)`) and registers its RBAC rules (the kind, events and leases) for
/// `crdgen --rbac`.
#[proc_macro_attribute]
pub fn controller(args: TokenStream, input: TokenStream) -> TokenStream {
    controller::controller(args.into(), input.into()).into()
}

/// Makes a struct a read-only *view* of a full type: a projection holding only the fields it
/// declares, checked against the full type at compile time and decoded straight from the
/// apiserver's JSON. A view with `metadata: ObjectMeta` is a kind a controller can watch and
/// read (`for`, `owns`, `watches`), never write. See `kubeforge::views` for the guide.
///
/// ```text
/// #[kubeforge::view(of = k8s_openapi::api::core::v1::Pod)]
/// struct PodView {
///     metadata: ObjectMeta,
///     spec: Option<PodSpecView>, // a view of `PodSpec`, itself a #[kubeforge::view]
/// }
/// ```
///
/// It derives `Clone`, `Debug`, `Default`, `PartialEq`, `Serialize` and `Deserialize` (serde
/// fields in camelCase, as k8s-openapi names them; a missing field takes its default), and
/// implements `ViewOf<Full>`, `project(&Full)`, `From<&Full>`, and for a view of a kind
/// `kube::Resource` (the full kind's names and scope) and `kubeforge::views::View`.
///
#[doc = include_str!("../../docs/src/reference/view.md")]
#[proc_macro_attribute]
pub fn view(args: TokenStream, input: TokenStream) -> TokenStream {
    view::view(args.into(), input.into()).into()
}
