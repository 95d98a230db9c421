//! Procedural macros of kubeforge. Use them through the `kubeforge` crate, which re-exports them.
//!
//! This crate only routes: each attribute is a one-line entry point into `pipeline.rs`
//! (`#[custom_resource]`, `#[kubeforge::schema]`) or `controller/` (`#[controller]`). Both
//! schema macros run the same stages: attributes (`attrs.rs`, read by the table-driven
//! `key = value` parser of `keys.rs`; field markers in `markers.rs`) → typed model (`model.rs`,
//! `fields.rs`) → checks (`validate.rs`, `cel.rs`) → expansion (`expand.rs`).
//!
//! The reference of every key and marker is on [`macro@custom_resource`] and [`macro@schema`].

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
mod timing;
mod validate;

use proc_macro::TokenStream;

/// Turns a spec struct into a complete Kubernetes kind.
///
/// # Kind-level keys
///
/// Put it on the spec struct (named fields, no generics). It derives `Serialize`, `Deserialize`
/// and `JsonSchema` for the struct (do not derive them yourself; derive `Clone` and `Debug`, the
/// root type needs them), generates the root type named after `kind` with `metadata`, `spec` and
/// (with `status = ..`) `status`, and implements `kube::Resource`, `HasSpec`/`HasStatus`, serde,
/// `schemars::JsonSchema`, `garde::Validate` and `kubeforge::crd::CustomResource` for it, plus
/// `Kind::new(name, spec)` and `Kind::crd()`, and registers the CRD for `kubeforge::crdgen`.
///
/// | key | meaning |
/// |---|---|
/// | `group = "apps.example.com"` | API group (required) |
/// | `version = "v1"` | version (required) |
/// | `kind = "WebApp"` | kind, the name of the generated type (required) |
/// | `namespaced` / `cluster` | scope (exactly one is required) |
/// | `status = WebAppStatus` | status type; enables the status subresource |
/// | `plural = ".."`, `singular = ".."` | resource names (default: lower-case kind, English plural) |
/// | `shortname = ".."` | short name; repeatable |
/// | `category = ".."` | category such as `all`; repeatable |
/// | `printcolumn(name, json_path, type, format, description, priority)` | additional printer column; repeatable. `json_path` is the JSONPath the apiserver's table printer takes (client-go's): `.field`, `['key']`, `[n]`, `[a:b]`, `[*]` and filters `[?(@.f OP lit)]` (OP one of `==`, `!=`, `<`, `<=`, `>`, `>=`; a quoted string, a number or `true`/`false`, or `@.g`), `[?(@.f)]` (has `f`), e.g. `.status.conditions[?(@.type=="Ready")].status`; every field is checked at compile time, a filter's on the list's element type (with the literal's type), and `type` against the last field. A path the table printer cannot parse (it would show neither that column nor the next ones) or an unknown operator is a compile error; `..`, `.*` and unions `[a,b]` need `unchecked` |
/// | `scale(spec = ".spec.replicas", status = ".status.replicas", selector = ".status.selector")` | scale subresource |
/// | `unchecked` inside `printcolumn(..)`, `selectable_field(..)`, `scale(..)` | do not resolve the JSONPath at compile time |
/// | `rule(cel, message, message_expression, reason, field_path, optional_old_self)` | CEL rule on the spec (`self` is the spec); repeatable; parsed, type-checked and cost-estimated at compile time (see *Compile-time CEL checks*), and every `self.x` / `oldSelf.x` must be a JSON field of the spec |
/// | `selectable_field(json_path = ".spec.x")` | selectable field; repeatable |
/// | `label(key = "..", value = "..")`, `annotation(key = "..", value = "..")` | metadata of the CRD object; repeatable |
/// | `deprecated` / `deprecated(warning = "..")` | the version is deprecated |
/// | `served = false`, `storage = false` | version flags (both default to `true`) |
/// | `rbac(group = "", resources = ["services"], verbs = ["create", "delete"], resource_names = ["web"])` | an RBAC rule the wiring cannot see (objects the reconciler writes without owning or watching them), added to the rules `crdgen --rbac` / `--deploy` print; `resource_names` limits it to those objects; unknown verbs and resources that are not lower-case plurals are compile errors; repeatable, also in the watcher mode |
/// | `crate = "::kubeforge"` | path of the kubeforge crate in generated code |
/// | `exactly_one_of = ["a", "b"]`, `at_most_one_of = [..]`, `at_least_one_of = [..]` | groups of sibling fields of the spec (JSON names, checked at compile time; each must be an `Option` or `#[serde(default)]`, not `required`), as CEL rules with the messages `exactly one of a, b must be set`, `at most one of a, b may be set`, `at least one of a, b must be set`; repeatable. Also on `#[kubeforge::schema(..)]` structs |
/// | `optional_spec` | the CRD does not require `spec`; an object without it reads as `Spec::default()` (the spec type must implement `Default`) |
/// | `conversion(hub = path::to::StorageVersionKind)`, `conversion(hub = .., generate)` | this version converts to and from the storage version of the same kind (checked at compile time) through `TryFrom` both ways (`From` gives it), or, with `generate`, through generated conversions for fields added (with a default), removed, or renamed (`#[convert(from = "hubName")]` on a spec field); what the other version cannot hold is kept in an annotation, so a round trip loses nothing. Served as the CRD's conversion webhook by a manager serving the kind; a generated `#[test]` checks round trips of arbitrary objects of both versions |
/// | `webhooks(validate, validate_delete, default, failure_policy = "Fail", side_effects = "None", timeout_seconds = 10, operations = ["CREATE", "UPDATE"], match_policy = "Equivalent", reinvocation_policy = "IfNeeded", namespace_selector = "env in (prod)", object_selector = "!skip")` | admission webhooks (see `kubeforge::webhook`): implementing `Validator` / `DeleteValidator` / `Defaulter` for the kind wires them on its own (deletes are validated only with a `DeleteValidator`); `validate` / `validate_delete` / `default` here make a missing impl a compile error at the key; `failure_policy` is `"Fail"` (default) or `"Ignore"`, `side_effects` `"None"` (default) or `"NoneOnDryRun"`, `timeout_seconds` 1–30 (default 10), `operations` the validating and defaulting webhooks' (`"CREATE"`, `"UPDATE"`, default both), `match_policy` `"Equivalent"` (default) or `"Exact"`, `reinvocation_policy` (the defaulter's) `"IfNeeded"` (default) or `"Never"`, the selectors in `kubectl -l` syntax (checked at compile time) |
///
/// # `#[validate(...)]` — field markers
///
/// On fields of a `#[custom_resource]` or `#[kubeforge::schema]` struct. Each marker goes into
/// the OpenAPI schema (enforced by the apiserver) and, where marked ✓, into the generated
/// `garde::Validate` impl with the apiserver's semantics.
///
/// | marker | schema | client |
/// |---|---|---|
/// | `minimum = n`, `maximum = n`, `exclusive_minimum`, `exclusive_maximum`, `multiple_of = n` | numeric bounds | ✓ |
/// | `min_length = n`, `max_length = n` (Unicode code points), `pattern = "re"` (checked at compile time) | string | ✓ |
/// | `enum = [..]` | allowed values | ✓ |
/// | `format = ".."` | format | ✓ for date-time, date, uuid, ipv4, ipv6, cidr; others server-only |
/// | `min_items`, `max_items`, `unique_items` (emitted as `x-kubernetes-list-type: set`: the apiserver forbids `uniqueItems`) | lists | ✓ |
/// | `min_properties`, `max_properties` | maps / objects | ✓ |
/// | `rule(cel = "..", message = "..", ..)` | `x-kubernetes-validations` | ✓ evaluated with `kube-cel` (the Kubernetes CEL libraries) on the kind's schema; transition rules (`oldSelf`) by `validate_update(&old)` |
/// | `default = <literal or array>`, `default_json = "{..}"` | server-side default | — |
/// | `nullable` | `nullable: true` | — |
/// | `preserve_unknown_fields`, `embedded_resource`, `int_or_string`, `schemaless` | `x-kubernetes-*` | — |
/// | `list_type = "atomic" / "set" / "map"`, `list_map_keys = [..]` | list semantics | ✓ set uniqueness; map-key uniqueness server-only |
/// | `map_type = "atomic" / "granular"` | map semantics; on a struct field, the struct's (kubebuilder's `structType`) | — |
/// | `items(minimum, maximum, exclusive_*, multiple_of, min_length, max_length, pattern, enum, format, int_or_string, map_type, type)` | constraints of each list element | ✓ |
/// | `values(..)`, the keys of `items(..)` | constraints of each value of a map (`values(format = "byte")`) | ✓ |
/// | `type = "string"` (`integer`, `number`, `boolean`, `object`, `array`) | replaces the derived type (kubebuilder's `Type=`); what only another type has goes (properties of a string, items of an object, a format or enum values of another type); `object` without properties keeps unknown fields. Markers are checked against this type. With `schemaless`: kubebuilder's `Schemaless` + `Type=` | ✓ the JSON type, unless serde serializes the field with `with` / `serialize_with` |
/// | `immutable` | transition rule `self == oldSelf`, message `is immutable` (not evaluated when an optional field is added or removed) | on update |
/// | `title = ".."`, `example = <literal>`, `example_json = "{..}"` | `title`, `example` (only from these markers: schemars' titles are dropped) | — |
/// | `external_docs(url = "..", description = "..")` | `externalDocs` | — |
/// | `required` | the field is in the parent's `required` whatever serde implies (e.g. an `Option` the apiserver must receive) | ✓ `Required value` when `None` |
/// | `optional` | the field is left out of `required`; the field must be an `Option` or have `#[serde(default)]` (on it or the struct), or serde could not read the objects the apiserver then accepts | — |
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
/// Rules and message expressions are type-checked against `self` (the spec or struct, or the
/// field's value) and fail at the rule, naming the CEL types: unknown functions or variables, no
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
/// | key | meaning |
/// |---|---|
/// | `for = Kind` | the primary kind (required) |
/// | `owns(A, B, ..)` | kinds whose controller owner reference leads to the primary, cached in full |
/// | `owns(A(metadata))` | as `owns`, cached as metadata only (`PartialObjectMeta`) |
/// | `owns(A(uncached))` | as `owns`, not cached: only keys, `resourceVersion`s and owner references are kept (for reconcilers that never read `A` from the cache) |
/// | `owns(A(any_owner))` | every owner reference to the primary counts, not only the controller one (combines with `metadata` / `uncached`) |
/// | `watches(W, map = path)` | any kind, with `fn(&W, &Cache) -> Vec<ObjectKey>` naming the primaries to reconcile (repeatable) |
/// | `watches(W, map_async = path)` | the same with `async fn(Arc<W>, Cache) -> Vec<ObjectKey>`: a mapper that reads cache stores (their reads are asynchronous) |
/// | `store = memcached` / `store = "name"` | the store backend the primary kind's cache keeps its objects in (`InformerConfig::store_named`) instead of memory: `memcached` (configured by the operator's `--memcached-servers`) or a backend added with `Manager::store_backend`. A controller whose cache has no backend of that name fails at start-up, saying so. Also in the watcher mode |
/// | `owns(A(store = memcached))` | as `owns`, with `A`'s cache in that store backend; combines with `metadata` and `any_owner`, not with `uncached` (which keeps no objects) |
/// | `watches(W, map = path, store = memcached)` | as `watches` (also with `map_async`), with `W`'s cache in that store backend |
/// | `concurrency = N` | maximum concurrent reconciles (default 4) |
/// | `finalizer = "domain/name"` | hold deleted objects until `cleanup` succeeds (requires `async fn cleanup`) |
/// | `predicates(p, ..)` | `generation_changed`, `labels_changed`, `annotations_changed`, `resource_version_changed`, or a `fn(&K, &K) -> bool`; they filter the primary kind's updates only (creations, deletions and resyncs always count) |
/// | `owns(A(labels = "app=web", fields = "..", predicates(generation_changed)))` | watch only the children the selectors select, and of their updates only those a built-in predicate accepts; combines with the other options of `owns` |
/// | `watches(W, map = path, labels = "..", fields = "..", predicates(labels_changed))` | the same for a watched kind: `watches(ConfigMap, ..)` alone caches every ConfigMap the operator can see; the RBAC rules stay those of the kind |
/// | `name = "..."` | the controller's (or watcher's) name (default: the lowercased kind) |
/// | `retry = exponential(base = "1s", max = "5m", attempts = 10)` | how failed reconciles are retried: per key, after `base`, then doubling up to `max`, giving up after `attempts` failures in a row. Every key is optional: `base = "5ms"`, `max = "1000s"`, no `attempts` limit, client-go's controller backoff (also the policy without `retry`). Durations are written as in Kubernetes with integers and the units `ms`, `s`, `m`, `h` (`"500ms"`, `"1m30s"`); checked at compile time, with `base` above 0 and at most `max`, and `attempts` at least 1. A key given up on gets a Warning event `RetriesExhausted` on its object and counts in `kubeforge_retries_total{outcome="exhausted"}`; it runs again when the object changes |
/// | `retry = expr` | any expression of a `kubeforge::retry::RetryPolicy` type, such as `Self::retry_policy()` (`Self` is the controller) |
/// | `dequeue = all` / `generation_changed` / `same_action` / `none` | what a new event for a key with a pending retry does: drop the retry and reconcile now, or wait for the retry. `all` (default): any event reconciles now. `generation_changed`: only spec changes (generation bumps), creations and deletions do, so a status-only update (often the controller's own) waits and the key keeps its backoff. `same_action`: an event of the retry's action (create, update, ...) or a deletion. `none`: never |
/// | `watcher` | event handlers instead of a reconciler: see [Watchers](#watchers). Takes `for`, `name`, `retry`, `dequeue`, `store`, `crate`, `workers`, `event_timeout` and `opinionated`; not `owns`, `watches`, `concurrency`, `finalizer` or `predicates` |
/// | `workers = N` | (watcher) workers handling events, at least 1 (default 4); the events of one object always go to the same worker |
/// | `event_timeout = "30s"` | (watcher) cancel a handler that runs longer and retry its event (default: no limit); a duration as in `retry`, above 0 |
/// | `opinionated = "domain/name"` | (watcher) app-sdk's opinionated watcher: every object gets this finalizer before `add`, so `delete` runs exactly once per object (also for one deleted while the operator was down) before the finalizer comes off; objects holding it at start-up go to `sync`, not `add`; updates that did not change the generation are skipped. Pair it with `dequeue = generation_changed` |
/// | `rbac(group = "", resources = ["services"], verbs = ["create", "delete"], resource_names = ["web"])` | an RBAC rule the wiring cannot see (objects the reconciler writes without owning or watching them), added to the rules `crdgen --rbac` / `--deploy` print; `resource_names` limits it to those objects; unknown verbs and resources that are not lower-case plurals are compile errors; repeatable, also in the watcher mode |
/// | `crate = "::kubeforge"` | path of the kubeforge crate in generated code |
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
