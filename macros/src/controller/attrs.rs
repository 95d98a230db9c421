//! Parses `#[controller(...)]`'s arguments into [`ControllerArgs`], keeping spans and collecting
//! every error.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::meta::ParseNestedMeta;
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Ident, Lit, LitStr, Path, Token, Type};

use crate::errors::{Errors, did_you_mean, misspelling_of};
use crate::keys::{self, HandKey, Key, Keyed, Table, Value};

/// A `watches(Kind, map = path)` or `watches(Kind, map_async = path)` entry.
pub struct Watch {
    pub kind: Type,
    pub map: Path,
    /// `map_async`: the mapper is an `async fn(Arc<W>, Cache) -> Vec<ObjectKey>`.
    pub is_async: bool,
    /// `store = memcached`: the store backend the kind's cache lives in (see [`store_name`]).
    pub store: Option<Keyed<String>>,
    /// `labels = ".."`, `fields = ".."`, `predicates(..)`: which objects are watched, and which
    /// of their updates count.
    pub select: Select,
}

/// The selectors and built-in predicates of an owned or watched kind.
#[derive(Default)]
pub struct Select {
    /// `labels = "app=web"`: a label selector.
    pub labels: Option<LitStr>,
    /// `fields = "metadata.name=x"`: a field selector.
    pub fields: Option<LitStr>,
    /// `predicates(generation_changed, ..)`: the built-ins named.
    pub predicates: Vec<Ident>,
    /// `predicates(Self::f, ..)`: functions `fn(&ObjectMeta, &ObjectMeta) -> bool`.
    pub custom: Vec<Path>,
    /// `indexes(Self::f, ..)`: custom indexes of the cached objects, each a
    /// `fn(&K) -> Vec<String>` named after its last path segment.
    pub indexes: Vec<Path>,
    /// `transform = Self::f`: a `fn(&mut K)` applied to each object before it is cached.
    pub transform: Option<Path>,
}

/// The syntax and doc of `indexes(..)`, the same for every kind's options.
const INDEXES_DOC: &str = "custom indexes of the cached objects: `fn(&K) -> Vec<String>` paths such as `Self::by_node`, each an index named after the function (`\"by_node\"`), which `ctx.indexed::<K>(\"by_node\", value)` queries";
/// The doc of `transform = ..`.
const TRANSFORM_DOC: &str = "a `fn(&mut K)` path applied to each object before it is cached (after `managedFields` are stripped): drop what the operator never reads; the first source of a shared informer decides it";

/// `indexes(Self::f, ..)` into `select`: each a path ending in the index's name.
fn select_indexes(select: &mut Select, paths: impl IntoIterator<Item = Path>, errors: &mut Errors) {
    for path in paths {
        match path.segments.last() {
            Some(last) if !select.indexes.iter().any(|p| same_last(p, &last.ident)) => {
                select.indexes.push(path);
            }
            Some(last) => errors.at(
                last.ident.span(),
                format!(
                    "duplicate index `{}`: an index is named after its function",
                    last.ident
                ),
            ),
            None => errors.spanned(&path, "name the index function: `indexes(Self::by_node)`"),
        }
    }
}

/// Whether `path` ends in `ident`.
fn same_last(path: &Path, ident: &Ident) -> bool {
    path.segments
        .last()
        .is_some_and(|last| last.ident == *ident)
}

/// The keys a `watches(Kind, map = path, ..)` entry takes after its mapper.
#[derive(Default)]
pub struct WatchOptions {
    store: Option<Keyed<String>>,
    select: Select,
}

pub const WATCH_OPTIONS: Table<WatchOptions> = Table {
    what: "`watches(..)`",
    doc: "The options of a watched kind, after its mapper: \
          `watches(W, map = path, store = memcached, labels = \"..\", fields = \"..\", \
          predicates(labels_changed))`.",
    keys: &[
        Key::new(
            "store",
            Value::Custom(|w: &mut WatchOptions, meta, _| {
                w.store = Some(store_key(meta)?);
                Ok(())
            }),
        )
        .syntax(STORE_SYNTAX)
        .doc("the store backend `W`'s cache keeps its objects in, as the top-level `store`"),
        Key::new(
            "labels",
            Value::Custom(|w: &mut WatchOptions, meta, e| {
                w.select.labels = Some(selector(meta, e)?);
                Ok(())
            }),
        )
        .syntax("`\"app=web\"`")
        .doc("watch only the objects this label selector selects: `watches(ConfigMap, ..)` alone caches every ConfigMap the operator can see; the RBAC rules stay those of the kind"),
        Key::new(
            "fields",
            Value::Custom(|w: &mut WatchOptions, meta, e| {
                w.select.fields = Some(selector(meta, e)?);
                Ok(())
            }),
        )
        .syntax("`\"metadata.name=x\"`")
        .doc("watch only the objects this field selector selects"),
        Key::new(
            "predicates",
            Value::Custom(|w: &mut WatchOptions, meta, e| {
                let content;
                syn::parenthesized!(content in meta.input);
                let paths = Punctuated::<Path, Token![,]>::parse_terminated(&content)?;
                select_predicates(&mut w.select, paths, e);
                Ok(())
            }),
        )
        .syntax("`(p, ..)`")
        .doc("of the watched objects' updates, only those a predicate accepts count: built-ins (see *Built-in predicates*) or `fn(&ObjectMeta, &ObjectMeta) -> bool` paths such as `Self::f` (they see the metadata, as the watch may cache no more)"),
        Key::new(
            "indexes",
            Value::Custom(|w: &mut WatchOptions, meta, e| {
                let content;
                syn::parenthesized!(content in meta.input);
                let paths = Punctuated::<Path, Token![,]>::parse_terminated(&content)?;
                select_indexes(&mut w.select, paths, e);
                Ok(())
            }),
        )
        .syntax("`(f, ..)`")
        .doc(INDEXES_DOC),
        Key::new(
            "transform",
            Value::Custom(|w: &mut WatchOptions, meta, _| {
                w.select.transform = Some(meta.value()?.parse()?);
                Ok(())
            }),
        )
        .syntax("a path")
        .doc(TRANSFORM_DOC),
    ],
};

/// The value of `store = ..` as the reference writes it.
const STORE_SYNTAX: &str = "`memcached` or `\"name\"`";

/// The mapper a `watches(Kind, ..)` entry takes right after its kind, one of these.
pub const WATCH_MAPPERS: &[HandKey] = &[
    HandKey {
        name: "map",
        syntax: "path",
        doc: "a `fn(&W, &Cache) -> Vec<ObjectKey>` naming the primaries to reconcile when a `W` changes",
    },
    HandKey {
        name: "map_async",
        syntax: "path",
        doc: "the same with an `async fn(Arc<W>, Cache) -> Vec<ObjectKey>`: a mapper that reads cache stores (their reads are asynchronous)",
    },
];

/// `labels = ".."` / `fields = ".."`: a non-empty selector string.
fn selector(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<LitStr> {
    let lit: LitStr = meta.value()?.parse()?;
    if lit.value().trim().is_empty() {
        errors.spanned(&lit, "an empty selector selects everything: leave it out");
    }
    Ok(lit)
}

/// The predicates of an owned or watched kind: the built-ins by name, the others paths of
/// `fn(&ObjectMeta, &ObjectMeta) -> bool` functions (`Self::f`).
fn select_predicates(
    select: &mut Select,
    paths: impl IntoIterator<Item = Path>,
    errors: &mut Errors,
) {
    let builtins = keys::hand_names(BUILTIN_PREDICATES);
    for path in paths {
        let Some(ident) = path.get_ident() else {
            select.custom.push(path);
            continue;
        };
        if builtins.contains(&ident.to_string().as_str()) {
            select.predicates.push(ident.clone());
        } else {
            errors.at(
                ident.span(),
                format!(
                    "unknown predicate `{ident}`; the built-ins are {}{} (or name a function `Self::f` of `fn(&ObjectMeta, &ObjectMeta) -> bool`)",
                    builtins.join(", "),
                    did_you_mean(&ident.to_string(), &builtins)
                ),
            );
        }
    }
}

/// What the cache keeps of an owned kind: `owns(A, B(metadata), C(uncached))`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    Full,
    Metadata,
    Uncached,
}

/// An `owns(...)` entry: the kind and its options.
pub struct Owned {
    pub kind: Type,
    pub weight: Weight,
    /// `any_owner`: every owner reference to the primary counts, not only the controller one.
    pub any_owner: bool,
    /// `store = memcached`: the store backend the kind's cache lives in (see [`store_name`]).
    pub store: Option<Keyed<String>>,
    /// `labels = ".."`, `fields = ".."`, `predicates(..)`.
    pub select: Select,
}

/// The options an `owns(...)` entry takes in parentheses, read by [`owned`].
pub const OWNS_OPTIONS: &[HandKey] = &[
    HandKey {
        name: "full",
        syntax: "flag",
        doc: "the kind is cached in full (the default)",
    },
    HandKey {
        name: "metadata",
        syntax: "flag",
        doc: "the kind is cached as metadata only (`PartialObjectMeta`)",
    },
    HandKey {
        name: "uncached",
        syntax: "flag",
        doc: "the kind is not cached: only keys, `resourceVersion`s and owner references are kept (for reconcilers that never read it from the cache)",
    },
    HandKey {
        name: "any_owner",
        syntax: "flag",
        doc: "every owner reference to the primary counts, not only the controller one (combines with `metadata` / `uncached`)",
    },
    HandKey {
        name: "store",
        syntax: STORE_SYNTAX,
        doc: "the store backend the kind's cache keeps its objects in, as the top-level `store`; combines with `metadata` and `any_owner`, not with `uncached` (which keeps no objects)",
    },
    HandKey {
        name: "labels",
        syntax: "`\"app=web\"`",
        doc: "watch only the children this label selector selects",
    },
    HandKey {
        name: "fields",
        syntax: "`\"metadata.name=x\"`",
        doc: "watch only the children this field selector selects",
    },
    HandKey {
        name: "predicates",
        syntax: "`(p, ..)`",
        doc: "of the children's updates, only those a predicate accepts count: built-ins or `fn(&ObjectMeta, &ObjectMeta) -> bool` paths such as `Self::f`",
    },
    HandKey {
        name: "indexes",
        syntax: "`(f, ..)`",
        doc: "custom indexes of the cached children (`fn(&C) -> Vec<String>`; with `metadata`, of `PartialObjectMeta<C>`), each named after its function, which `ctx.indexed` queries; not with `uncached`",
    },
    HandKey {
        name: "transform",
        syntax: "a path",
        doc: "a `fn(&mut C)` (with `metadata`, of `PartialObjectMeta<C>`) applied to each child before it is cached; not with `uncached`",
    },
];

/// One option of an owned kind as written: a word (`metadata`), `name = value`
/// (`store = memcached`) or `name(a, b)` (`predicates(generation_changed)`).
struct OwnedOption {
    name: Ident,
    value: Option<Expr>,
    list: Option<Vec<Path>>,
}

/// A predicate named in `predicates(...)`.
pub enum PredicateArg {
    /// One of the built-ins, by its snake_case name.
    Builtin(Ident),
    /// A custom predicate function `fn(&K, &K) -> bool`.
    Custom(Path),
}

/// `retry = ..` as written.
pub enum RetryAttr {
    /// `exponential(base = "1s", max = "5m", attempts = 10)` (or a bare `exponential`), spanned
    /// at `exponential`.
    Exponential(Keyed<ExponentialAttrs>),
    /// Any other expression: a value of a `RetryPolicy` type, such as `Self::retry_policy()`.
    Expr(Expr),
}

/// The keys of `exponential(..)`, each optional; durations in milliseconds, spanned at their
/// literals.
#[derive(Default)]
pub struct ExponentialAttrs {
    pub base: Option<Keyed<u64>>,
    pub max: Option<Keyed<u64>>,
    pub attempts: Option<Keyed<u64>>,
}

pub const EXPONENTIAL: Table<ExponentialAttrs> = Table {
    what: "`exponential(..)`",
    doc: "`retry = exponential(..)` (or a bare `exponential`): failed reconciles of a key are \
          retried after `base`, then after twice as long each time up to `max`, giving up after \
          `attempts` failures in a row. Without `retry`, the policy is `exponential` with its \
          defaults, client-go's controller backoff. Durations are written as in Go and \
          Kubernetes and on the operator's command line: numbers with the units `ns`, `us`, \
          `ms`, `s`, `m`, `h` (`\"500ms\"`, `\"1.5s\"`, `\"1m30s\"`), in whole milliseconds; \
          they are checked at compile time, with `base` above 0 and at most `max`, and \
          `attempts` at least 1. A key given up on gets a Warning event `RetriesExhausted` on its object and \
          counts in `kubeforge_retries_total{outcome=\"exhausted\"}`; it runs again when the \
          object changes.",
    keys: &[
        Key::new(
            "base",
            Value::Custom(|e: &mut ExponentialAttrs, meta, _| {
                e.base = Some(duration(meta)?);
                Ok(())
            }),
        )
        .syntax(DURATION_SYNTAX)
        .doc("the first delay (default `\"5ms\"`)"),
        Key::new(
            "max",
            Value::Custom(|e: &mut ExponentialAttrs, meta, _| {
                e.max = Some(duration(meta)?);
                Ok(())
            }),
        )
        .syntax(DURATION_SYNTAX)
        .doc("the longest delay (default `\"1000s\"`)"),
        Key::new(
            "attempts",
            Value::Unsigned(|e: &mut ExponentialAttrs, n| e.attempts = Some(n)),
        )
        .doc("give up after this many failures in a row (default: never)"),
    ],
};

/// A duration's value as the reference writes it.
const DURATION_SYNTAX: &str = "`\"1m30s\"` (duration)";

/// `dequeue = ..`: which new events drop a key's pending retry (the runtime's `Dequeue*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DequeueArg {
    /// `all`: any new event.
    All,
    /// `generation_changed`: spec changes, creations and deletions.
    OnGeneration,
    /// `same_action`: an event of the pending retry's action, or a deletion.
    SameAction,
    /// `none`: no event.
    None,
}

/// The words `dequeue = ..` takes, in the order of [`DequeueArg`].
pub const DEQUEUE_POLICIES: &[(HandKey, DequeueArg)] = &[
    (
        HandKey {
            name: "all",
            syntax: "",
            doc: "(default) any event reconciles now",
        },
        DequeueArg::All,
    ),
    (
        HandKey {
            name: "generation_changed",
            syntax: "",
            doc: "only spec changes (generation bumps), creations and deletions do, so a status-only update (often the controller's own) waits and the key keeps its backoff",
        },
        DequeueArg::OnGeneration,
    ),
    (
        HandKey {
            name: "same_action",
            syntax: "",
            doc: "an event of the retry's action (create, update, ...) or a deletion",
        },
        DequeueArg::SameAction,
    ),
    (
        HandKey {
            name: "none",
            syntax: "",
            doc: "never: the retry runs when it is due",
        },
        DequeueArg::None,
    ),
];

/// A key of the watcher mode (`workers = 16`, `event_timeout = "5s"`): its value (a duration in
/// milliseconds) spanned at the literal, and the span of the key, where "only for a watcher" is
/// reported.
pub struct WatcherKey {
    pub key: Span,
    pub value: Keyed<u64>,
}

/// `rbac(group = "", resources = ["configmaps"], verbs = ["create"], resource_names = [..])`:
/// a rule the wiring cannot see (objects the reconciler writes but does not own or watch); or
/// `rbac(non_resource_urls = ["/metrics"], verbs = ["get"])`: paths of the apiserver that are
/// not resources.
#[derive(Default)]
pub struct RbacRule {
    pub group: Option<LitStr>,
    pub resources: Vec<LitStr>,
    pub verbs: Vec<LitStr>,
    pub resource_names: Vec<LitStr>,
    pub non_resource_urls: Vec<LitStr>,
}

pub const RBAC_RULE: Table<RbacRule> = Table {
    what: "`rbac(..)`",
    doc: "An RBAC rule the wiring cannot see (objects the reconciler writes without owning or \
          watching them, or paths of the apiserver that are not resources, such as `/metrics`), \
          added to the rules `crdgen --rbac` / `--deploy` print. Either `group` and `resources` \
          or `non_resource_urls`, with `verbs`. Repeatable, also in the watcher mode.",
    keys: &[
        Key::new("group", Value::Str(|r: &mut RbacRule, v| r.group = Some(v)))
            .doc("the API group, `\"\"` for the core group (with `resources`)"),
        Key::new(
            "resources",
            Value::StrList(|r: &mut RbacRule, v| r.resources = v),
        )
        .doc("lower-case plural resources, with their subresources (`\"deployments/scale\"`); others are compile errors"),
        Key::required(
            "verbs",
            Value::StrList(|r: &mut RbacRule, v| r.verbs = v),
            "`rbac(..)` needs `verbs = [\"..\"]`",
        )
        .doc("the verbs (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, `*`, ...; on non-resource URLs the HTTP methods in lower case: `get`, `post`, `put`, `patch`, `delete`, `head`, `*`); unknown verbs are compile errors"),
        Key::new(
            "resource_names",
            Value::StrList(|r: &mut RbacRule, v| r.resource_names = v),
        )
        .doc("limits the rule to the objects of these names"),
        Key::new(
            "non_resource_urls",
            Value::StrList(|r: &mut RbacRule, v| r.non_resource_urls = v),
        )
        .doc("paths that are not resources (`\"/metrics\"`, `\"/healthz/*\"`: a `*` only as the last character), instead of `group` and `resources`; granted by the ClusterRole whatever the namespaces watched (a Role cannot grant them)"),
    ],
};

/// The verbs of rules on non-resource URLs: the HTTP methods, in lower case.
const NON_RESOURCE_VERBS: &[&str] = &[
    "get", "post", "put", "patch", "delete", "head", "options", "*",
];

/// The verbs Kubernetes RBAC knows.
const RBAC_VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "*",
    "use",
    "bind",
    "escalate",
    "impersonate",
    "approve",
    "sign",
];

impl RbacRule {
    /// Reports what the apiserver would refuse or ignore: unknown verbs, empty or upper-case
    /// resources.
    fn check(&self, key: Span, errors: &mut Errors) {
        if !self.non_resource_urls.is_empty() {
            self.check_non_resource(errors);
            return;
        }
        if self.group.is_none() {
            errors.at(
                key,
                "`rbac(..)` needs `group = \"..\"` (`\"\"` for the core group), or `non_resource_urls = [\"..\"]`",
            );
        }
        if self.resources.is_empty() {
            errors.at(
                key,
                "`rbac(..)` needs `resources = [\"..\"]`, or `non_resource_urls = [\"..\"]`",
            );
        }
        for verb in &self.verbs {
            if !RBAC_VERBS.contains(&verb.value().as_str()) {
                let hint = did_you_mean(&verb.value(), RBAC_VERBS);
                errors.spanned(verb, format!("unknown RBAC verb `{}`{hint}", verb.value()));
            }
        }
        for resource in &self.resources {
            let value = resource.value();
            let base = value.split('/').next().unwrap_or_default();
            if base.is_empty() || base.chars().any(|c| c.is_ascii_uppercase() || c == ' ') {
                errors.spanned(
                    resource,
                    "a resource is the lower-case plural name (`configmaps`, `deployments/scale`)",
                );
            }
        }
    }

    /// A non-resource rule: no group, resources or names with it, the paths absolute with `*`
    /// only at the end, the verbs HTTP methods.
    fn check_non_resource(&self, errors: &mut Errors) {
        if let Some(group) = &self.group {
            errors.spanned(
                group,
                "`non_resource_urls` and `group` cannot be in one `rbac(..)`: a rule is on resources or on non-resource URLs",
            );
        }
        if let Some(resource) = self.resources.first() {
            errors.spanned(
                resource,
                "`non_resource_urls` and `resources` cannot be in one `rbac(..)`: a rule is on resources or on non-resource URLs",
            );
        }
        if let Some(name) = self.resource_names.first() {
            errors.spanned(
                name,
                "`resource_names` limits a rule on resources; non-resource URLs have no names",
            );
        }
        for url in &self.non_resource_urls {
            let value = url.value();
            let star = value.find('*');
            if !value.starts_with('/') || star.is_some_and(|at| at + 1 != value.len()) {
                errors.spanned(
                    url,
                    format!("`{value}` is not a non-resource URL: a path starting with `/`, with `*` only as its last character (`/metrics`, `/healthz/*`)"),
                );
            }
        }
        for verb in &self.verbs {
            if !NON_RESOURCE_VERBS.contains(&verb.value().as_str()) {
                errors.spanned(
                    verb,
                    format!(
                        "`{}` is not a verb of non-resource URLs (the HTTP methods in lower case: get, post, put, patch, delete, head, options, *)",
                        verb.value()
                    ),
                );
            }
        }
    }
}

/// The keys of `#[controller(...)]`, with the span of each key for error messages.
#[derive(Default)]
pub struct ControllerArgs {
    pub for_kind: Option<Type>,
    pub owns: Vec<Owned>,
    pub watches: Vec<Watch>,
    pub concurrency: Option<Keyed<u64>>,
    pub finalizer: Option<LitStr>,
    pub predicates: Vec<PredicateArg>,
    pub name: Option<LitStr>,
    pub retry: Option<RetryAttr>,
    pub dequeue: Option<DequeueArg>,
    /// `crate = "path"`: how generated code names kubeforge.
    pub crate_path: Option<Path>,
    /// `watcher`: event handlers (`add`, `update`, `delete`, `sync`) instead of a reconciler.
    pub watcher: Option<Keyed<bool>>,
    /// `workers = N` (watcher mode).
    pub workers: Option<WatcherKey>,
    /// `event_timeout = "5s"` (watcher mode).
    pub event_timeout: Option<WatcherKey>,
    /// `opinionated = "example.com/watch"` (watcher mode): the opinionated watcher's finalizer.
    pub opinionated: Option<LitStr>,
    /// `store = memcached`: the store backend the primary kind's cache lives in (both modes).
    pub store: Option<Keyed<String>>,
    /// `rbac(..)`: extra RBAC rules (both modes).
    pub rbac: Vec<RbacRule>,
    /// `dependents(..)`: children built by methods of the impl block, applied by the framework.
    pub dependents: Vec<super::dependents::DependentArg>,
    /// `field_manager = ".."`: the field manager of the dependents' applies.
    pub field_manager: Option<LitStr>,
    /// `every = "30s"`: a timer per object.
    pub every: Option<Keyed<u64>>,
    /// `reconcile_timeout = "30s"`: a reconcile running longer is cancelled and retried.
    pub reconcile_timeout: Option<Keyed<u64>>,
    /// `labels = ".."` / `fields = ".."`: the primary kind's selectors.
    pub primary: Select,
    /// `reconcile_on = path`: a function of the wiring returning a stream of keys.
    pub reconcile_on: Option<Path>,
    /// The keys only a reconciler takes (`owns`, `watches`, `concurrency`, `finalizer`,
    /// `predicates`), each at its first occurrence, for the watcher mode's errors.
    pub reconciler_keys: Vec<Keyed<&'static str>>,
}

/// The keys of `#[controller(...)]`, read by the macros' one key parser ([`crate::keys`]).
pub const CONTROLLER: Table<ControllerArgs> = Table {
    what: "#[controller]",
    doc: "On an inherent impl block. The keys marked *(watcher)* are for the watcher mode \
          (`watcher`); `owns`, `dependents`, `watches`, `concurrency`, `reconcile_timeout`, \
          `labels`, `fields`, `finalizer` and `predicates` are for reconcilers only.",
    keys: &[
        Key::new("for", Value::Type(|a: &mut ControllerArgs, ty| a.for_kind = Some(ty)))
            .required_later()
            .doc("the primary kind"),
        Key::repeatable("owns", Value::Custom(owns))
            .syntax("`(A, B(option, ..), ..)`")
            .doc("kinds whose controller owner reference leads to the primary, cached in full unless an option says otherwise: see *`owns(..)` options*"),
        Key::repeatable(
            "dependents",
            Value::Custom(|a: &mut ControllerArgs, meta, e| {
                a.reconciler_key("dependents", meta);
                super::dependents::parse(meta, &mut a.dependents, e)
            }),
        )
        .syntax("`(method, method(option, ..), ..)`")
        .doc("children built by methods of the impl block (`fn name(&self, obj: &Kind, ctx: &Context<Kind>) -> Child`, or `-> Vec<Child>`, `async fn`, `-> Result<.., E>`), applied by the framework in dependency order, their kinds owned: see *`dependents(..)` options*"),
        Key::new(
            "field_manager",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.reconciler_key("field_manager", meta);
                a.field_manager = Some(meta.value()?.parse()?);
                Ok(())
            }),
        )
        .syntax("`\"..\"`")
        .doc("the field manager of the dependents' server-side applies and releases (default: the controller's name); name the manager of the operator the objects come from (a hand-written one being replaced) so that each field keeps one owner instead of two; needs `dependents(..)`"),
        Key::repeatable("watches", Value::Custom(watches))
            .syntax("`(W, map = path, option, ..)`")
            .doc("any kind, with a mapper naming the primaries to reconcile: see *`watches(..)`*"),
        Key::new(
            "concurrency",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.reconciler_key("concurrency", meta);
                a.concurrency = Some(keys::unsigned(meta)?);
                Ok(())
            }),
        )
        .syntax("integer")
        .doc("maximum concurrent reconciles, at least 1 (default 4)"),
        Key::new(
            "reconcile_timeout",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.reconciler_key("reconcile_timeout", meta);
                a.reconcile_timeout = Some(duration(meta)?);
                Ok(())
            }),
        )
        .syntax(DURATION_SYNTAX)
        .doc("a reconcile running longer is cancelled (its future dropped) and retried with backoff (`ControllerConfig::reconcile_timeout`; default 5 min); above 0"),
        Key::new(
            "labels",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.reconciler_key("labels", meta);
                a.primary.labels = Some(meta.value()?.parse()?);
                Ok(())
            }),
        )
        .syntax("`\"..\"`")
        .doc("a label selector on the primary kind (`\"app=web,tier!=cache\"`): its informer lists and watches only the matching objects, so the others are neither cached nor reconciled"),
        Key::new(
            "fields",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.reconciler_key("fields", meta);
                a.primary.fields = Some(meta.value()?.parse()?);
                Ok(())
            }),
        )
        .syntax("`\"..\"`")
        .doc("a field selector on the primary kind (`\"metadata.name!=skip\"`; the fields the apiserver can select on for that kind)"),
        Key::new(
            "indexes",
            Value::Custom(|a: &mut ControllerArgs, meta, e| {
                let content;
                syn::parenthesized!(content in meta.input);
                let paths = Punctuated::<Path, Token![,]>::parse_terminated(&content)?;
                select_indexes(&mut a.primary, paths, e);
                Ok(())
            }),
        )
        .syntax("`(f, ..)`")
        .doc("custom indexes of the cached primary objects: `fn(&K) -> Vec<String>` paths such as `Self::by_node`, each an index named after the function, which `ctx.indexed::<K>(\"by_node\", value)` queries; also in the watcher mode"),
        Key::new(
            "transform",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.primary.transform = Some(meta.value()?.parse()?);
                Ok(())
            }),
        )
        .syntax("a path")
        .doc("a `fn(&mut K)` path applied to each primary object before it is cached (after `managedFields` are stripped): drop what the operator never reads; also in the watcher mode"),
        Key::new(
            "every",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.reconciler_key("every", meta);
                a.every = Some(duration(meta)?);
                Ok(())
            }),
        )
        .syntax(DURATION_SYNTAX)
        .doc("a timer per object (kopf's timers): every cached object is reconciled once per period, with up to 10 % jitter, from a period after it is first seen until it is deleted; the reconcile's trigger is `Trigger::Timer`; above 0"),
        Key::new(
            "reconcile_on",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.reconciler_key("reconcile_on", meta);
                a.reconcile_on = Some(meta.value()?.parse()?);
                Ok(())
            }),
        )
        .syntax("a path")
        .doc("a function `fn(&Wiring) -> impl Stream<Item = ObjectKey> + Send + 'static`: the keys it yields are reconciled too (changes an external system announces), with the trigger `Trigger::External`"),
        Key::new(
            "finalizer",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.reconciler_key("finalizer", meta);
                a.finalizer = Some(meta.value()?.parse()?);
                Ok(())
            }),
        )
        .syntax("`\"domain/name\"`")
        .doc("hold deleted objects until `cleanup` succeeds (requires `async fn cleanup`); a qualified name such as `apps.example.com/cleanup`"),
        Key::new("predicates", Value::Custom(predicates))
            .syntax("`(p, ..)`")
            .doc("built-in predicates (see *Built-in predicates*) or `fn(&K, &K) -> bool` paths such as `Self::f`; they filter the primary kind's updates only (creations, deletions and resyncs always count), and an update counts when one of them accepts it"),
        Key::new("name", Value::Str(|a: &mut ControllerArgs, lit| a.name = Some(lit)))
            .doc("the controller's (or watcher's) name (default: the lower-case kind)"),
        Key::new("retry", Value::Custom(retry))
            .syntax("`exponential(..)` or an expression")
            .doc("how failed reconciles are retried: see *`retry = exponential(..)`*; or any expression of a `kubeforge::retry::RetryPolicy` type, such as `Self::retry_policy()` (`Self` is the controller)"),
        Key::new("dequeue", Value::Custom(dequeue))
            .syntax("a word")
            .doc("what a new event for a key with a pending retry does: drop the retry and reconcile now, or wait for the retry; see *`dequeue` policies*"),
        Key::new("watcher", Value::Flag(|a: &mut ControllerArgs, flag| a.watcher = Some(flag)))
            .doc("event handlers (`add`, `update`, `delete`, `sync`) instead of a reconciler: see *Watchers* in the `#[controller]` documentation"),
        Key::new(
            "workers",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.workers = Some(WatcherKey {
                    value: keys::unsigned(meta)?,
                    key: keys::key_span(meta),
                });
                Ok(())
            }),
        )
        .syntax("integer")
        .doc("*(watcher)* workers handling events, at least 1 (default 4); the events of one object always go to the same worker"),
        Key::new(
            "event_timeout",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.event_timeout = Some(WatcherKey {
                    value: duration(meta)?,
                    key: keys::key_span(meta),
                });
                Ok(())
            }),
        )
        .syntax(DURATION_SYNTAX)
        .doc("*(watcher)* cancel a handler that runs longer and retry its event (default: no limit); above 0"),
        Key::new(
            "opinionated",
            Value::Str(|a: &mut ControllerArgs, lit| a.opinionated = Some(lit)),
        )
        .doc("*(watcher)* app-sdk's opinionated watcher, with this finalizer (`\"domain/name\"`): every object gets it before `add`, so `delete` runs exactly once per object (also for one deleted while the operator was down) before the finalizer comes off; objects holding it at start-up go to `sync`, not `add`; updates that did not change the generation are skipped. Pair it with `dequeue = generation_changed`"),
        Key::new(
            "store",
            Value::Custom(|a: &mut ControllerArgs, meta, _| {
                a.store = Some(store_key(meta)?);
                Ok(())
            }),
        )
        .syntax(STORE_SYNTAX)
        .doc("the store backend the primary kind's cache keeps its objects in (`InformerConfig::store_named`) instead of memory: `memcached` (configured by the operator's `--memcached-servers`) or a backend added with `Manager::store_backend`. A controller whose cache has no backend of that name fails at start-up, saying so. Also in the watcher mode"),
        Key::new(
            "crate",
            Value::CratePath(|a: &mut ControllerArgs, path| a.crate_path = Some(path)),
        )
        .doc("path of the kubeforge crate in generated code (default `::kubeforge`)"),
        Key::repeatable(
            "rbac",
            Value::Custom(|a: &mut ControllerArgs, meta, e| {
                let rule = keys::nested(meta, &RBAC_RULE, e)?;
                rule.value.check(rule.key, e);
                a.rbac.push(rule.value);
                Ok(())
            }),
        )
        .syntax("`(..)`")
        .doc("an RBAC rule the wiring cannot see: see *`rbac(..)`*"),
        Key::repeatable("owns_metadata", Value::Custom(renamed))
            .syntax("`(A)`")
            .doc("not a key any more: a compile error saying to write `owns(A(metadata))`"),
        Key::repeatable("owns_uncached", Value::Custom(renamed))
            .syntax("`(A)`")
            .doc("not a key any more: a compile error saying to write `owns(A(uncached))`"),
    ],
};

/// The predicates `predicates(..)` names without a path.
pub const BUILTIN_PREDICATES: &[HandKey] = &[
    HandKey {
        name: "generation_changed",
        syntax: "",
        doc: "`metadata.generation` changed: spec changes, not status or metadata-only ones (controller-runtime's `GenerationChangedPredicate`)",
    },
    HandKey {
        name: "labels_changed",
        syntax: "",
        doc: "the labels changed",
    },
    HandKey {
        name: "annotations_changed",
        syntax: "",
        doc: "the annotations changed",
    },
    HandKey {
        name: "resource_version_changed",
        syntax: "",
        doc: "`metadata.resourceVersion` changed: every real update (re-deliveries of the same version are filtered out)",
    },
];

impl ControllerArgs {
    /// Reads the arguments and checks each value on its own (the impl block is checked later).
    pub fn parse(args: TokenStream, errors: &mut Errors) -> Self {
        let args = keys::parse_args(args, &CONTROLLER, errors);
        if let Some(n) = &args.concurrency
            && n.value == 0
        {
            errors.at(n.key, "`concurrency` must be a whole number of at least 1");
        }
        if let Some(timeout) = &args.reconcile_timeout
            && timeout.value == 0
        {
            errors.at(
                timeout.key,
                "`reconcile_timeout` must be more than 0 (leave it out for no limit)",
            );
        }
        if let Some(every) = &args.every
            && every.value == 0
        {
            errors.at(
                every.key,
                "`every` must be more than 0: it is how often each object is reconciled",
            );
        }
        if let Some(finalizer) = &args.finalizer
            && !valid_finalizer(&finalizer.value())
        {
            errors.at(
                finalizer.span(),
                "a finalizer must be a qualified name like `example.com/cleanup` (a DNS subdomain, `/`, a name)",
            );
        }
        if let Some(name) = &args.name
            && name.value().is_empty()
        {
            errors.at(name.span(), "the controller name must not be empty");
        }
        if let Some(finalizer) = &args.opinionated
            && !valid_finalizer(&finalizer.value())
        {
            errors.at(
                finalizer.span(),
                "the opinionated watcher's finalizer must be a qualified name like `example.com/watch` (a DNS subdomain, `/`, a name)",
            );
        }
        if let Some(workers) = &args.workers
            && workers.value.value == 0
        {
            errors.at(
                workers.value.key,
                "`workers` must be a whole number of at least 1",
            );
        }
        if let Some(timeout) = &args.event_timeout
            && timeout.value.value == 0
        {
            errors.at(
                timeout.value.key,
                "`event_timeout` must be more than 0: a handler running longer is cancelled and its event retried (leave it out for no limit)",
            );
        }
        args
    }

    /// Whether `watcher` is set: event handlers instead of a reconciler.
    pub fn is_watcher(&self) -> bool {
        self.watcher.as_ref().is_some_and(|w| w.value)
    }

    /// Notes a key only a reconciler takes, at its first occurrence.
    fn reconciler_key(&mut self, name: &'static str, meta: &ParseNestedMeta<'_>) {
        if !self.reconciler_keys.iter().any(|k| k.value == name) {
            self.reconciler_keys.push(Keyed {
                value: name,
                key: keys::key_span(meta),
            });
        }
    }
}

/// `owns(A, B(metadata), C(uncached, any_owner), D(store = memcached))`.
fn owns(
    args: &mut ControllerArgs,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    args.reconciler_key("owns", meta);
    let content;
    syn::parenthesized!(content in meta.input);
    let before = args.owns.len();
    while !content.is_empty() {
        let kind: Type = content.parse()?;
        let options = if content.peek(syn::token::Paren) {
            let options;
            syn::parenthesized!(options in content);
            Punctuated::<OwnedOption, Token![,]>::parse_terminated_with(
                &options,
                OwnedOption::parse,
            )?
            .into_iter()
            .collect()
        } else {
            Vec::new()
        };
        args.owns.push(owned(kind, &options, errors));
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    if args.owns.len() == before {
        errors.spanned(&meta.path, "`owns(...)` needs at least one kind");
    }
    Ok(())
}

impl OwnedOption {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name = Ident::parse_any(input)?;
        let mut list = None;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else {
            if input.peek(syn::token::Paren) {
                let content;
                syn::parenthesized!(content in input);
                let paths = Punctuated::<Path, Token![,]>::parse_terminated(&content)?;
                list = Some(paths.into_iter().collect());
            }
            None
        };
        Ok(OwnedOption { name, value, list })
    }
}

impl Owned {
    /// A kind owned with full objects cached and no options (a dependent's kind).
    pub fn full(kind: Type) -> Self {
        Owned {
            kind,
            weight: Weight::Full,
            any_owner: false,
            store: None,
            select: Select::default(),
        }
    }
}

/// One `owns` entry: the kind and the options in parentheses after it.
fn owned(kind: Type, options: &[OwnedOption], errors: &mut Errors) -> Owned {
    let mut entry = Owned::full(kind);
    let mut weights = Vec::new();
    // The first `store` key, valid or not, for "duplicate" and "uncached".
    let mut store_key: Option<Span> = None;
    for OwnedOption {
        name: option,
        value,
        list,
    } in options
    {
        let name = option.to_string();
        if select_option(
            &mut entry.select,
            option,
            value.as_ref(),
            list.as_deref(),
            errors,
        ) {
            continue;
        }
        match (name.as_str(), value) {
            ("store", Some(value)) => {
                if store_key.is_some() {
                    errors.at(
                        option.span(),
                        "duplicate option `store`; it is already set above",
                    );
                    continue;
                }
                store_key = Some(option.span());
                match store_name(option.span(), value) {
                    Ok(store) => entry.store = Some(store),
                    Err(error) => errors.push(error),
                }
            }
            ("store", None) => errors.at(
                option.span(),
                "`store` needs the name of a store backend: `store = memcached`",
            ),
            ("full" | "metadata" | "uncached" | "any_owner", Some(value)) => errors.spanned(
                value,
                format!("`{name}` takes no value: write `{name}` alone"),
            ),
            ("full", None) => weights.push((option, Weight::Full)),
            ("metadata", None) => weights.push((option, Weight::Metadata)),
            ("uncached", None) => weights.push((option, Weight::Uncached)),
            ("any_owner", None) => entry.any_owner = true,
            _ => errors.at(
                option.span(),
                format!(
                    "unknown option `{name}` of an owned kind; expected one of {}{}",
                    keys::hand_names(OWNS_OPTIONS).join(", "),
                    did_you_mean(&name, &keys::hand_names(OWNS_OPTIONS))
                ),
            ),
        }
    }
    if let [_, (second, _), ..] = weights.as_slice() {
        errors.at(
            second.span(),
            "an owned kind is cached one way: `full`, `metadata` or `uncached`",
        );
    }
    if let Some((_, weight)) = weights.first() {
        entry.weight = *weight;
    }
    if entry.weight == Weight::Uncached {
        let cached = entry.select.indexes.first().map(|p| (p, "indexes"));
        let cached = cached.or(entry.select.transform.as_ref().map(|p| (p, "transform")));
        if let Some((path, what)) = cached {
            errors.spanned(
                path,
                format!("an uncached kind keeps no objects: it has nothing to `{what}`"),
            );
        }
    }
    if entry.weight == Weight::Uncached
        && let Some(key) = store_key
    {
        errors.at(
            key,
            "an uncached kind keeps only keys and versions in memory: it has no store to choose",
        );
        entry.store = None;
    }
    entry
}

/// `labels = ".."`, `fields = ".."` and `predicates(..)` of an owned kind, and a list given to any
/// other option; `false` for the options [`owned`] reads itself.
fn select_option(
    select: &mut Select,
    option: &Ident,
    value: Option<&Expr>,
    list: Option<&[Path]>,
    errors: &mut Errors,
) -> bool {
    let name = option.to_string();
    if name == "indexes" {
        match list {
            Some(paths) => select_indexes(select, paths.iter().cloned(), errors),
            None => errors.at(
                option.span(),
                "write the index functions in parentheses: `indexes(Self::by_node)`",
            ),
        }
        return true;
    }
    if name == "transform" {
        match value {
            Some(Expr::Path(path)) if path.qself.is_none() => {
                select.transform = Some(path.path.clone());
            }
            Some(other) => errors.spanned(
                other,
                "`transform` takes a function path: `transform = Self::slim`",
            ),
            None => errors.at(
                option.span(),
                "`transform` takes a function path: `transform = Self::slim`",
            ),
        }
        return true;
    }
    if name == "predicates" {
        match list {
            Some(paths) => select_predicates(select, paths.iter().cloned(), errors),
            None => errors.at(
                option.span(),
                "write the predicates in parentheses: `predicates(generation_changed)`",
            ),
        }
        return true;
    }
    if let Some(first) = list.and_then(|l| l.first()) {
        errors.spanned(first, format!("`{name}` takes no list"));
        return true;
    }
    if name != "labels" && name != "fields" {
        return false;
    }
    let usage = format!("`{name}` takes a selector string, e.g. `{name} = \"app=web\"`");
    match value {
        Some(Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        })) if !lit.value().trim().is_empty() => {
            let slot = if name == "labels" {
                &mut select.labels
            } else {
                &mut select.fields
            };
            *slot = Some(lit.clone());
        }
        Some(other) => errors.spanned(other, usage),
        None => errors.at(option.span(), usage),
    }
    true
}

/// `watches(Kind, map = Self::mapper)` or `watches(Kind, map_async = Self::mapper)`, then the
/// options ([`WATCH_OPTIONS`]: `store = memcached`).
fn watches(
    args: &mut ControllerArgs,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    args.reconciler_key("watches", meta);
    let content;
    syn::parenthesized!(content in meta.input);
    let kind: Type = content.parse()?;
    content.parse::<Token![,]>()?;
    let map_key = Ident::parse_any(&content)?;
    if !keys::hand_names(WATCH_MAPPERS).contains(&map_key.to_string().as_str()) {
        return Err(syn::Error::new(
            map_key.span(),
            format!(
                "expected `map = <fn>` or `map_async = <async fn>` in `watches(Kind, map = Self::mapper)`, found `{map_key}`"
            ),
        ));
    }
    let is_async = map_key == "map_async";
    content.parse::<Token![=]>()?;
    let map: Path = content.parse()?;
    if !content.is_empty() {
        content.parse::<Token![,]>()?;
    }
    let options = keys::parse_args(content.parse()?, &WATCH_OPTIONS, errors);
    args.watches.push(Watch {
        kind,
        map,
        is_async,
        store: options.store,
        select: options.select,
    });
    Ok(())
}

/// `store = <name>` read by the key parser: the backend's name, spanned at the key.
fn store_key(meta: &ParseNestedMeta<'_>) -> syn::Result<Keyed<String>> {
    let key = keys::key_span(meta);
    store_name(key, &meta.value()?.parse()?)
}

/// The value of `store = ..`: the name of a store backend the cache was given, an identifier
/// (`memcached`) or a string (`"redis"`), not empty; spanned at the key `key`. The runtime
/// checks at start-up that the cache has a backend of that name.
fn store_name(key: Span, value: &Expr) -> syn::Result<Keyed<String>> {
    let name = match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit),
            attrs,
        }) if attrs.is_empty() => {
            if lit.value().trim().is_empty() {
                return Err(syn::Error::new(
                    lit.span(),
                    "the name of a store backend must not be empty, such as `memcached`",
                ));
            }
            lit.value()
        }
        Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => {
            match path.path.get_ident() {
                Some(ident) => ident.unraw().to_string(),
                None => return Err(not_a_store_name(value)),
            }
        }
        _ => return Err(not_a_store_name(value)),
    };
    Ok(Keyed { value: name, key })
}

fn not_a_store_name(value: &Expr) -> syn::Error {
    syn::Error::new_spanned(
        value,
        "`store` takes the name of a store backend: an identifier such as `memcached` or a string such as \"redis\"",
    )
}

/// `predicates(generation_changed, Self::custom, ...)`.
fn predicates(
    args: &mut ControllerArgs,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    args.reconciler_key("predicates", meta);
    let content;
    syn::parenthesized!(content in meta.input);
    for path in Punctuated::<Path, Token![,]>::parse_terminated(&content)? {
        let builtins = keys::hand_names(BUILTIN_PREDICATES);
        match path.get_ident() {
            Some(ident) if builtins.contains(&ident.to_string().as_str()) => {
                args.predicates.push(PredicateArg::Builtin(ident.clone()));
            }
            Some(ident) => errors.at(
                ident.span(),
                format!(
                    "unknown predicate `{ident}`; the built-ins are {}{} (or name a function `Self::f`)",
                    builtins.join(", "),
                    did_you_mean(&ident.to_string(), &builtins)
                ),
            ),
            None => args.predicates.push(PredicateArg::Custom(path)),
        }
    }
    Ok(())
}

/// `owns_metadata(A)` and `owns_uncached(A)` became options of `owns`: says how to write them.
fn renamed(
    _: &mut ControllerArgs,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    let name = meta
        .path
        .get_ident()
        .map(Ident::to_string)
        .unwrap_or_default();
    let option = name.trim_start_matches("owns_");
    errors.spanned(
        &meta.path,
        format!("`{name}(A)` is written `owns(A({option}))`"),
    );
    let content;
    syn::parenthesized!(content in meta.input);
    content.parse::<TokenStream>()?;
    Ok(())
}

/// What `retry = ..` takes, for its errors.
const RETRY_FORMS: &str = "`exponential(base = \"5ms\", max = \"1000s\", attempts = 10)` or an expression of a `RetryPolicy` type such as `Self::retry_policy()`";

/// `retry = exponential(..)`, or `retry = <expression>` of a `RetryPolicy` type.
fn retry(
    args: &mut ControllerArgs,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    let input = meta.value()?;
    if is_exponential(input) {
        let name: Ident = input.parse()?;
        let list = if input.peek(syn::token::Paren) {
            let content;
            syn::parenthesized!(content in input);
            content.parse::<TokenStream>()?
        } else {
            TokenStream::new()
        };
        let value = keys::parse_args(list, &EXPONENTIAL, errors);
        args.retry = Some(RetryAttr::Exponential(Keyed {
            value,
            key: name.span(),
        }));
        return Ok(());
    }
    let expr: Expr = input.parse()?;
    if let Expr::Lit(_) = expr {
        errors.spanned(&expr, format!("`retry` takes {RETRY_FORMS}"));
    } else if let Some(name) = called_name(&expr)
        && let Some(known) = misspelling_of(&name, &["exponential"])
    {
        errors.spanned(
            &expr,
            format!("unknown retry policy `{name}`; did you mean `{known}`?"),
        );
    } else {
        args.retry = Some(RetryAttr::Expr(expr));
    }
    Ok(())
}

/// Whether the value is `exponential` or `exponential(..)` on its own (`exponential(..).x()`
/// is an expression).
fn is_exponential(input: ParseStream<'_>) -> bool {
    let alone = |fork: ParseStream<'_>| -> syn::Result<bool> {
        let name: Ident = fork.parse()?;
        if fork.peek(syn::token::Paren) {
            let list;
            syn::parenthesized!(list in fork);
            list.parse::<TokenStream>()?;
        }
        Ok(name == "exponential" && (fork.is_empty() || fork.peek(Token![,])))
    };
    alone(&input.fork()).unwrap_or(false)
}

/// `f` of a call `f(..)` to a bare name.
fn called_name(expr: &Expr) -> Option<String> {
    let Expr::Call(call) = expr else {
        return None;
    };
    match &*call.func {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(Ident::to_string),
        _ => None,
    }
}

/// A duration string (`exponential(..)`'s `base` and `max`, `event_timeout`), in milliseconds,
/// spanned at the literal.
fn duration(meta: &ParseNestedMeta<'_>) -> syn::Result<Keyed<u64>> {
    let name = keys::key_name(meta);
    let lit: LitStr = meta.value()?.parse()?;
    match duration_ms(&lit.value()) {
        Ok(ms) => Ok(Keyed {
            value: ms,
            key: lit.span(),
        }),
        Err(problem) => Err(syn::Error::new(
            lit.span(),
            format!("`{name} = {:?}` {problem}", lit.value()),
        )),
    }
}

/// Parses a Go/Kubernetes duration (`"500ms"`, `"1m30s"`, `"1.5s"`: the grammar of
/// `kubeforge_shared::duration`, as on the operator's command line) into whole milliseconds;
/// the error says what is wrong with it.
pub fn duration_ms(text: &str) -> Result<u64, String> {
    let duration = kubeforge_shared::duration::parse(text).map_err(|e| e.to_string())?;
    if duration.subsec_nanos() % 1_000_000 != 0 {
        return Err("is not a whole number of milliseconds".to_owned());
    }
    u64::try_from(duration.as_millis()).map_err(|_| "is too long".to_owned())
}

/// `dequeue = all | generation_changed | same_action | none`.
fn dequeue(
    args: &mut ControllerArgs,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    let expr: Expr = meta.value()?.parse()?;
    let word = match &expr {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(Ident::to_string),
        _ => None,
    }
    .unwrap_or_else(|| quote::ToTokens::to_token_stream(&expr).to_string());
    match DEQUEUE_POLICIES.iter().find(|(key, _)| key.name == word) {
        Some((_, policy)) => args.dequeue = Some(*policy),
        None => {
            let names: Vec<&str> = DEQUEUE_POLICIES.iter().map(|(key, _)| key.name).collect();
            errors.spanned(
                &expr,
                format!(
                    "unknown dequeue policy `{word}`; expected one of {}{}",
                    names.join(", "),
                    did_you_mean(&word, &names)
                ),
            );
        }
    }
    Ok(())
}

/// `prefix/name` where the prefix is a DNS subdomain (kubebuilder's finalizer convention).
fn valid_finalizer(value: &str) -> bool {
    let Some((domain, name)) = value.split_once('/') else {
        return false;
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    domain.contains('.')
        && domain.split('.').all(label_ok)
        && !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn parse(tokens: TokenStream) -> (ControllerArgs, Vec<String>) {
        let mut errors = Errors::default();
        let args = ControllerArgs::parse(tokens, &mut errors);
        (args, errors.messages())
    }

    #[test]
    fn reconcile_timeout_should_be_above_zero_and_reconcilers_only() {
        let (_, errors) = parse(quote!(for = Db, reconcile_timeout = "0s"));
        assert_eq!(
            errors,
            ["`reconcile_timeout` must be more than 0 (leave it out for no limit)"]
        );
        let (args, errors) = parse(quote!(for = Db, labels = "a=b", reconcile_timeout = "2s"));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(args.reconcile_timeout.map(|t| t.value), Some(2000));
        assert_eq!(
            args.reconciler_keys
                .iter()
                .map(|k| k.value)
                .collect::<Vec<_>>(),
            ["labels", "reconcile_timeout"]
        );
    }

    #[test]
    fn args_should_parse_every_key() {
        let (args, errors) = parse(quote!(
            for = WebApp, owns(Deployment, Service), watches(Secret, map = Self::by_secret),
            owns(Pod(metadata)), owns(ConfigMap(uncached), Job(uncached, any_owner)), owns(CronJob(uncached)),
            concurrency = 4, finalizer = "apps.example.com/cleanup",
            predicates(generation_changed, Self::custom), name = "webapp", crate = "kf"
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(args.for_kind.is_some());
        let weights: Vec<_> = args.owns.iter().map(|o| o.weight).collect();
        use Weight::{Full, Metadata, Uncached};
        assert_eq!(
            weights,
            [Full, Full, Metadata, Uncached, Uncached, Uncached]
        );
        let any: Vec<_> = args.owns.iter().map(|o| o.any_owner).collect();
        assert_eq!(any, [false, false, false, false, true, false]);
        let job = &args.owns[4].kind;
        assert_eq!(
            quote!(#job).to_string(),
            "Job",
            "options are taken off the type"
        );
        assert_eq!(args.watches.len(), 1);
        assert_eq!(args.predicates.len(), 2);
        assert_eq!(args.finalizer.unwrap().value(), "apps.example.com/cleanup");
        assert!(args.crate_path.is_some_and(|p| p.is_ident("kf")));
    }

    #[test]
    fn args_should_report_every_bad_key() {
        let (_, errors) = parse(quote!(
            for = WebApp, concurency = 4, concurrency = 0, finalizer = "cleanup",
            predicates(generation_change), name = "a", name = "b"
        ));
        // Parse errors in order, then the checks of the values read.
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert_eq!(
            errors[0],
            "unknown #[controller] key `concurency`; did you mean `concurrency`?"
        );
        assert!(
            errors[1].contains("did you mean `generation_changed`"),
            "{errors:?}"
        );
        assert_eq!(errors[2], "duplicate key `name`; it is already set above");
        assert!(errors[3].contains("at least 1"), "{errors:?}");
        assert!(errors[4].contains("qualified name"), "{errors:?}");
    }

    #[test]
    fn owns_should_report_unknown_and_conflicting_options_and_the_old_keys() {
        let (_, errors) = parse(quote!(
            for = WebApp, owns(Pod(metdata), Job(metadata, uncached)), owns_uncached(ConfigMap)
        ));
        assert_eq!(
            errors,
            [
                "unknown option `metdata` of an owned kind; expected one of full, metadata, uncached, any_owner, store, labels, fields, predicates, indexes, transform; did you mean `metadata`?",
                "an owned kind is cached one way: `full`, `metadata` or `uncached`",
                "`owns_uncached(A)` is written `owns(A(uncached))`",
            ]
        );
    }

    fn stores(args: &ControllerArgs) -> (Option<String>, Vec<Option<String>>, Vec<Option<String>>) {
        let name = |s: &Option<Keyed<String>>| s.as_ref().map(|s| s.value.clone());
        (
            name(&args.store),
            args.owns.iter().map(|o| name(&o.store)).collect(),
            args.watches.iter().map(|w| name(&w.store)).collect(),
        )
    }

    #[test]
    fn store_should_be_read_at_the_top_in_owns_and_in_watches() {
        let (args, errors) = parse(quote!(
            for = Db, store = memcached,
            owns(Deployment(store = memcached), Service, Pod(metadata, store = "redis", any_owner)),
            owns(Job(any_owner, store = r#type, full)),
            watches(Secret, map = Self::f, store = memcached),
            watches(ConfigMap, map_async = Self::g, store = "redis",),
            watches(Node, map = Self::h,)
        ));
        assert!(errors.is_empty(), "{errors:?}");
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            stores(&args),
            (
                some("memcached"),
                vec![some("memcached"), None, some("redis"), some("type")],
                vec![some("memcached"), some("redis"), None],
            )
        );
        let weights: Vec<_> = args.owns.iter().map(|o| (o.weight, o.any_owner)).collect();
        use Weight::{Full, Metadata};
        assert_eq!(
            weights,
            [(Full, false), (Full, false), (Metadata, true), (Full, true)],
            "`store` leaves the other options as they were"
        );
        assert!(args.watches[1].is_async);

        let (args, errors) = parse(quote!(for = Db, watcher, store = "redis"));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(stores(&args).0.as_deref(), Some("redis"));
        assert!(args.reconciler_keys.is_empty(), "both modes take `store`");
        assert_eq!(
            stores(&parse(quote!(for = Db, owns(A), watches(B, map = f))).0),
            (None, vec![None], vec![None])
        );
    }

    #[test]
    fn store_should_report_values_that_are_not_names_and_duplicates() {
        let not_a_name = "`store` takes the name of a store backend: an identifier such as `memcached` or a string such as \"redis\"";
        let empty = "the name of a store backend must not be empty, such as `memcached`";
        for value in [quote!(3), quote!(a::b), quote!(Self::store()), quote!(true)] {
            let (args, errors) = parse(quote!(for = Db, store = #value, concurrency = 2));
            assert_eq!(errors, [not_a_name], "{value}");
            assert!(args.store.is_none());
            assert_eq!(
                args.concurrency.map(|c| c.value),
                Some(2),
                "goes on after {value}"
            );
        }
        let (args, errors) = parse(quote!(for = Db, store = "", store = " "));
        assert!(args.store.is_none());
        assert_eq!(
            errors,
            [
                empty,
                "duplicate key `store`; it is already set above",
                empty
            ]
        );
        let (args, errors) = parse(quote!(for = Db, store = memcached, store = redis));
        assert_eq!(
            stores(&args).0.as_deref(),
            Some("memcached"),
            "the first is kept"
        );
        assert_eq!(errors, ["duplicate key `store`; it is already set above"]);
    }

    #[test]
    fn owns_store_should_report_uncached_kinds_duplicates_and_misspellings() {
        let (args, errors) = parse(quote!(
            for = Db,
            owns(A(uncached, store = memcached), B(store = memcached, uncached), C(metadata, store = memcached)),
            owns(D(store = a, store = b), E(store = 3, store = b), F(stor = memcached), G(store), H(metadata = true))
        ));
        let uncached =
            "an uncached kind keeps only keys and versions in memory: it has no store to choose";
        assert_eq!(
            errors,
            [
                uncached,
                uncached,
                "duplicate option `store`; it is already set above",
                "`store` takes the name of a store backend: an identifier such as `memcached` or a string such as \"redis\"",
                "duplicate option `store`; it is already set above",
                "unknown option `stor` of an owned kind; expected one of full, metadata, uncached, any_owner, store, labels, fields, predicates, indexes, transform; did you mean `store`?",
                "`store` needs the name of a store backend: `store = memcached`",
                "`metadata` takes no value: write `metadata` alone",
            ]
        );
        let name = |i: usize| args.owns[i].store.as_ref().map(|s| s.value.as_str());
        assert_eq!(
            [name(0), name(1), name(2), name(3), name(4)],
            [None, None, Some("memcached"), Some("a"), None]
        );
    }

    #[test]
    fn indexes_and_transforms_should_be_read_for_every_source_and_misuse_reported() {
        let (args, errors) = parse(quote!(
            for = Db,
            indexes(Self::by_app, by_node), transform = Self::slim,
            owns(A(indexes(Self::by_x), transform = Self::t), B(uncached, indexes(Self::y)), C(transform = 3)),
            owns(D(indexes(Self::z, other::z)), E(indexes)),
            watches(W, map = Self::m, indexes(Self::w), transform = Self::tw)
        ));
        assert_eq!(
            errors,
            [
                "an uncached kind keeps no objects: it has nothing to `indexes`",
                "`transform` takes a function path: `transform = Self::slim`",
                "duplicate index `z`: an index is named after its function",
                "write the index functions in parentheses: `indexes(Self::by_node)`",
            ]
        );
        let last = |paths: &[Path]| -> Vec<String> {
            paths
                .iter()
                .map(|p| p.segments.last().unwrap().ident.to_string())
                .collect()
        };
        assert_eq!(last(&args.primary.indexes), ["by_app", "by_node"]);
        assert!(args.primary.transform.is_some());
        assert_eq!(last(&args.owns[0].select.indexes), ["by_x"]);
        assert!(args.owns[0].select.transform.is_some());
        assert_eq!(last(&args.watches[0].select.indexes), ["w"]);
        assert!(args.watches[0].select.transform.is_some());
    }

    #[test]
    fn watches_store_should_report_bad_values_duplicates_and_misspellings() {
        let (args, errors) = parse(quote!(
            for = Db,
            watches(A, map = Self::f, store = 3),
            watches(B, map = Self::f, stor = memcached),
            watches(C, map_async = Self::f, store = a, store = b),
            watches(D, map = Self::f, store = d)
        ));
        assert_eq!(
            errors,
            [
                "`store` takes the name of a store backend: an identifier such as `memcached` or a string such as \"redis\"",
                "unknown `watches(..)` key `stor`; did you mean `store`?",
                "duplicate key `store`; it is already set above",
            ]
        );
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(stores(&args).2, [None, None, some("a"), some("d")]);
    }

    #[test]
    fn retry_should_read_exponential_with_any_keys_and_other_expressions() {
        let (args, errors) = parse(quote!(
            for = WebApp, retry = exponential(base = "1s", max = "1m30s", attempts = 10)
        ));
        assert!(errors.is_empty(), "{errors:?}");
        let Some(RetryAttr::Exponential(e)) = args.retry else {
            panic!("not exponential");
        };
        let values = (e.value.base.map(|b| b.value), e.value.max.map(|m| m.value));
        assert_eq!(values, (Some(1_000), Some(90_000)));
        assert_eq!(e.value.attempts.map(|a| a.value), Some(10));

        for defaults in [
            quote!(retry = exponential()),
            quote!(retry = exponential, name = "x"),
        ] {
            let (args, errors) = parse(defaults);
            assert!(errors.is_empty(), "{errors:?}");
            let Some(RetryAttr::Exponential(e)) = args.retry else {
                panic!("not exponential");
            };
            assert!(e.value.base.is_none() && e.value.max.is_none() && e.value.attempts.is_none());
        }

        for expr in [
            quote!(Self::policy()),
            quote!(my::policy()),
            quote!(exponential(1).limit(3)),
        ] {
            let (args, errors) = parse(quote!(retry = #expr, concurrency = 2));
            assert!(errors.is_empty(), "{errors:?}");
            let Some(RetryAttr::Expr(e)) = args.retry else {
                panic!("not an expression: {expr}");
            };
            assert_eq!(quote!(#e).to_string(), expr.to_string());
            assert_eq!(args.concurrency.map(|c| c.value), Some(2));
        }
    }

    #[test]
    fn retry_should_report_bad_durations_unknown_keys_and_misspellings() {
        let (_, errors) = parse(quote!(
            retry = exponential(
                base = "1.5x",
                max = "5 m",
                atempts = 3,
                attempts = -1,
                max = "2x"
            )
        ));
        let forms = "write numbers with units (ns, us, ms, s, m, h), such as \"500ms\", \"5m\" or \"1m30s\"";
        assert_eq!(
            errors,
            [
                format!("`base = \"1.5x\"` is not a duration: {forms}"),
                format!("`max = \"5 m\"` is not a duration: {forms}"),
                "unknown `exponential(..)` key `atempts`; did you mean `attempts`?".to_owned(),
                "expected a non-negative integer".to_owned(),
                "duplicate key `max`; it is already set above".to_owned(),
                format!("`max = \"2x\"` is not a duration: {forms}"),
            ]
        );
        assert_eq!(
            parse(quote!(retry = exponentail(base = "1s"))).1,
            ["unknown retry policy `exponentail`; did you mean `exponential`?"]
        );
        let (args, errors) = parse(quote!(retry = "5m"));
        assert!(args.retry.is_none());
        assert_eq!(
            errors,
            [
                "`retry` takes `exponential(base = \"5ms\", max = \"1000s\", attempts = 10)` or an expression of a `RetryPolicy` type such as `Self::retry_policy()`"
            ]
        );
    }

    #[test]
    fn duration_ms_should_read_go_durations() {
        // The grammar is `kubeforge_shared::duration`'s (tested there); here, milliseconds and
        // its errors.
        assert_eq!(duration_ms("1h1m1s1ms"), Ok(3_661_001));
        assert_eq!(duration_ms("1.5s"), Ok(1_500));
        assert_eq!(duration_ms("0s"), Ok(0));
        let invalid = kubeforge_shared::duration::DurationError::Invalid.to_string();
        assert_eq!(duration_ms("1 s"), Err(invalid));
        assert_eq!(
            duration_ms("5"),
            Err(
                "is not a duration: it needs a unit; write \"5s\" for seconds (or ms, m, h)"
                    .to_owned()
            )
        );
        assert_eq!(duration_ms("-1s"), Err("is negative".to_owned()));
        assert_eq!(
            duration_ms("1us"),
            Err("is not a whole number of milliseconds".to_owned())
        );
        assert_eq!(
            duration_ms("99999999999999999999s"),
            Err("is too long".to_owned())
        );
    }

    #[test]
    fn dequeue_should_read_its_four_words_and_report_others() {
        for (word, policy) in [
            (quote!(all), DequeueArg::All),
            (quote!(generation_changed), DequeueArg::OnGeneration),
            (quote!(same_action), DequeueArg::SameAction),
            (quote!(none), DequeueArg::None),
        ] {
            let (args, errors) = parse(quote!(dequeue = #word));
            assert!(errors.is_empty(), "{errors:?}");
            assert_eq!(args.dequeue, Some(policy));
        }
        let (args, errors) = parse(quote!(dequeue = generation, dequeue = DequeueAll));
        assert!(args.dequeue.is_none());
        assert_eq!(
            errors,
            [
                "unknown dequeue policy `generation`; expected one of all, generation_changed, same_action, none; did you mean `generation_changed`?",
                "duplicate key `dequeue`; it is already set above",
                "unknown dequeue policy `DequeueAll`; expected one of all, generation_changed, same_action, none",
            ]
        );
    }

    #[test]
    fn args_should_read_the_watcher_keys_and_note_the_reconcilers() {
        let (args, errors) = parse(quote!(
            for = WebApp, watcher, workers = 16, event_timeout = "1m30s",
            owns(Pod), owns(Job), concurrency = 2, finalizer = "apps.example.com/x",
            predicates(generation_changed), watches(Secret, map = Self::f)
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(args.is_watcher());
        assert_eq!(args.workers.map(|w| w.value.value), Some(16));
        assert_eq!(args.event_timeout.map(|t| t.value.value), Some(90_000));
        let noted: Vec<_> = args.reconciler_keys.iter().map(|k| k.value).collect();
        assert_eq!(
            noted,
            ["owns", "concurrency", "finalizer", "predicates", "watches"],
            "each reconciler key once, in order"
        );
        assert_eq!(args.concurrency.map(|c| c.value), Some(2));
        assert!(args.finalizer.is_some());

        let (args, errors) = parse(quote!(for = WebApp, watcher = false, concurrency = 3));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(!args.is_watcher());
        assert!(!parse(quote!(for = WebApp)).0.is_watcher());
    }

    #[test]
    fn watcher_keys_should_report_zero_workers_and_bad_timeouts() {
        let (_, errors) = parse(quote!(
            watcher,
            workers = -1,
            event_timeout = "5 s",
            workers = 0,
            event_timeout = "0ms"
        ));
        assert_eq!(
            errors,
            [
                "expected a non-negative integer",
                "`event_timeout = \"5 s\"` is not a duration: write numbers with units (ns, us, ms, s, m, h), such as \"500ms\", \"5m\" or \"1m30s\"",
                "duplicate key `workers`; it is already set above",
                "duplicate key `event_timeout`; it is already set above",
            ]
        );
        let (_, errors) = parse(quote!(watcher, workers = 0, event_timeout = "0s"));
        assert_eq!(
            errors,
            [
                "`workers` must be a whole number of at least 1",
                "`event_timeout` must be more than 0: a handler running longer is cancelled and its event retried (leave it out for no limit)",
            ]
        );
    }

    #[test]
    fn finalizer_names_should_be_qualified() {
        assert!(valid_finalizer("apps.example.com/cleanup"));
        assert!(!valid_finalizer("cleanup"));
        assert!(!valid_finalizer("example/cleanup"));
        assert!(!valid_finalizer("Apps.example.com/x"));
        assert!(!valid_finalizer("apps.example.com/"));
    }
}
