//! The watcher mode, `#[controller(for = Kind, watcher, ..)]`: event handlers (`add`, `update`,
//! `delete`, `sync`) run by the runtime's `WatcherController` instead of a reconciler. Checks the
//! keys of the two modes against each other, and the handlers into a [`WatcherModel`].

use quote::ToTokens;
use syn::{ImplItemFn, ItemImpl, LitStr, Path, Type};

use super::attrs::{ControllerArgs, DequeueArg};
use super::{
    RetryArg, Signature, check_block, check_method, default_name, find_fn, primary_kind, retry_arg,
};
use crate::errors::Errors;
use crate::keys::Keyed;
use crate::model::default_crate;

/// The checked model of a watcher, the expansion works from.
pub struct WatcherModel {
    /// The path generated code names kubeforge by (`::kubeforge` unless `crate = "..."`).
    pub krate: Path,
    pub self_ty: Type,
    pub kind: Type,
    pub name: String,
    /// `workers = N`; `None` keeps the runtime's default (4).
    pub workers: Option<u64>,
    /// `event_timeout = ".."` in milliseconds; `None`: no limit.
    pub event_timeout_ms: Option<u64>,
    /// `retry = ..`; `None` keeps the runtime's default policy.
    pub retry: Option<RetryArg>,
    /// `dequeue = ..`; `None` keeps the runtime's default (`DequeueAll`).
    pub dequeue: Option<DequeueArg>,
    /// `opinionated = ".."`: the opinionated watcher's finalizer.
    pub opinionated: Option<LitStr>,
    /// `store = ..`: the store backend of the kind's cache; `None` keeps the wiring's informer
    /// defaults (in memory).
    pub store: Option<Keyed<String>>,
    /// `rbac(..)`: extra RBAC rules.
    pub rbac: Vec<super::attrs::RbacRule>,
    /// `indexes(..)` / `transform = ..` of the kind's cache (its selectors are reconciler-only).
    pub primary: super::attrs::Select,
    /// The error type all the handlers return.
    pub error_ty: Type,
    pub add: ImplItemFn,
    pub update: Option<ImplItemFn>,
    pub delete: Option<ImplItemFn>,
    pub sync: Option<ImplItemFn>,
}

/// The handlers a watcher forwards to (`add` required); a method whose name misspells one of
/// them is reported.
const HANDLERS: [&str; 4] = ["add", "update", "delete", "sync"];

/// A reconciler's methods: in a watcher, they would never run.
const RECONCILER_METHODS: &[&str] = &["reconcile", "cleanup", "error_policy"];

/// `add`, `delete` and `sync`.
const ONE_OBJECT: Signature = Signature {
    takes: "the object and the context",
    inputs: 3,
    ok: "()",
    shape: "async fn {name}(&self, obj: Arc<Kind>, ctx: &WatchContext) -> Result<(), Error>",
};

/// `update`.
const OLD_AND_NEW: Signature = Signature {
    takes: "the old object, the new object and the context",
    inputs: 4,
    ok: "()",
    shape: "async fn update(&self, old: Arc<Kind>, new: Arc<Kind>, ctx: &WatchContext) -> Result<(), Error>",
};

/// The keys of one mode given in the other: a reconciler's keys with `watcher`, a watcher's
/// keys without it. Each is reported at its key.
pub fn check_mode_keys(args: &ControllerArgs, errors: &mut Errors) {
    if args.is_watcher() {
        for key in &args.reconciler_keys {
            let why = match key.value {
                "concurrency" => "a watcher's is `workers = N`",
                "finalizer" => {
                    "a watcher's `delete` runs once the object is gone; `opinionated = \"domain/name\"` holds every object with that finalizer until `delete` ran"
                }
                "predicates" => {
                    "a watcher gets every event (`update` gets the old and the new object to compare)"
                }
                _ => "a watcher handles the events of its `for` kind only",
            };
            errors.at(
                key.key,
                format!("`{}` is a reconciler's key: {why}", key.value),
            );
        }
        return;
    }
    if let Some(workers) = &args.workers {
        errors.at(
            workers.key,
            "`workers` is a watcher's key: add `watcher` to #[controller(...)] for event handlers, or write `concurrency = N` for a reconciler",
        );
    }
    if let Some(timeout) = &args.event_timeout {
        errors.at(
            timeout.key,
            "`event_timeout` is a watcher's key: add `watcher` to #[controller(...)] for event handlers",
        );
    }
    if let Some(finalizer) = &args.opinionated {
        errors.at(
            finalizer.span(),
            "`opinionated` is a watcher's key: add `watcher` to #[controller(...)] for event handlers (a reconciler holds deleted objects with `finalizer = \"..\"`)",
        );
    }
}

/// Checks the impl block of a watcher: `add` and the other handlers present, of the right shape,
/// with one error type, and no reconciler methods.
pub fn check(
    mut args: ControllerArgs,
    item: &ItemImpl,
    errors: &mut Errors,
) -> Option<WatcherModel> {
    // Before anything can end the checks: its errors are reported with the others.
    let retry = args.retry.take().map(|r| retry_arg(r, errors));
    let misspelled = check_block(item, &HANDLERS, errors)?;
    let reconciler_methods = reconciler_methods(item, errors);
    let kind = primary_kind(args.for_kind.take(), errors);
    let [add, update, delete, sync] = HANDLERS.map(|name| find_fn(item, name));
    let krate = args.crate_path.clone().unwrap_or_else(default_crate);
    let error_ty = check_handlers([&add, &update, &delete, &sync], &krate, errors);
    let Some(add) = add else {
        if !misspelled.contains(&"add") && !reconciler_methods {
            errors.spanned(
                &item.self_ty,
                "a watcher needs `async fn add(&self, obj: Arc<Kind>, ctx: &WatchContext) -> Result<(), Error>` in this impl block",
            );
        }
        return None;
    };
    let kind = kind?;
    let name = args
        .name
        .as_ref()
        .map_or_else(|| default_name(&kind), LitStr::value);
    Some(WatcherModel {
        krate,
        self_ty: (*item.self_ty).clone(),
        kind,
        name,
        workers: args.workers.map(|n| n.value.value),
        event_timeout_ms: args.event_timeout.map(|t| t.value.value),
        retry: retry.flatten(),
        dequeue: args.dequeue,
        opinionated: args.opinionated,
        store: args.store,
        rbac: args.rbac,
        primary: std::mem::take(&mut args.primary),
        error_ty: error_ty?,
        add,
        update,
        delete,
        sync,
    })
}

/// Reports `reconcile`, `cleanup` and `error_policy` in a watcher; whether there was one.
fn reconciler_methods(item: &ItemImpl, errors: &mut Errors) -> bool {
    let mut found = false;
    for name in RECONCILER_METHODS {
        if let Some(f) = find_fn(item, name) {
            errors.at(
                f.sig.ident.span(),
                format!("`{name}` is a reconciler's method: a watcher (`watcher` in #[controller(...)]) has the event handlers `add`, `update`, `delete` and `sync`; leave out `watcher` for a reconciler"),
            );
            found = true;
        }
    }
    found
}

/// Checks each handler present; returns their one error type (the first handler's).
fn check_handlers(
    handlers: [&Option<ImplItemFn>; 4],
    krate: &Path,
    errors: &mut Errors,
) -> Option<Type> {
    let mut first: Option<(String, Type)> = None;
    let mut all_ok = true;
    for f in handlers.into_iter().flatten() {
        let Some(error) = check_handler(f, krate, errors) else {
            all_ok = false;
            continue;
        };
        let name = f.sig.ident.to_string();
        match &first {
            None => first = Some((name, error)),
            Some((first_name, first_error)) => {
                if first_error.to_token_stream().to_string() != error.to_token_stream().to_string()
                {
                    errors.spanned(
                        &error,
                        format!("`{name}` must return the same error type as `{first_name}`"),
                    );
                    all_ok = false;
                }
            }
        }
    }
    first.filter(|_| all_ok).map(|(_, error)| error)
}

/// Checks one handler's signature; returns its error type.
fn check_handler(f: &ImplItemFn, krate: &Path, errors: &mut Errors) -> Option<Type> {
    let sig = if f.sig.ident == "update" {
        &OLD_AND_NEW
    } else {
        &ONE_OBJECT
    };
    let (ok, error) = check_method(f, sig, krate, errors)?;
    if !matches!(&ok, Type::Tuple(unit) if unit.elems.is_empty()) {
        let name = &f.sig.ident;
        let shape = sig.shape.replace("{name}", &name.to_string());
        errors.spanned(
            &ok,
            format!("`{name}` must return `Result<(), YourError>`: `{shape}`"),
        );
        return None;
    }
    Some(error)
}

#[cfg(test)]
mod tests {
    use proc_macro2::TokenStream;
    use quote::quote;

    use super::super::{Checked, controller};
    use super::*;

    fn check_of(args: TokenStream, item: TokenStream) -> (Option<WatcherModel>, Vec<String>) {
        let mut errors = Errors::default();
        let args = ControllerArgs::parse(args, &mut errors);
        let item: ItemImpl = syn::parse2(item).unwrap();
        let model = match super::super::check(args, &item, &mut errors) {
            Some(Checked::Watcher(model)) => Some(*model),
            _ => None,
        };
        (model, errors.messages())
    }

    fn errors_of(args: TokenStream, item: TokenStream) -> Vec<String> {
        check_of(args, item).1
    }

    #[test]
    fn check_should_accept_a_complete_watcher() {
        let (model, errors) = check_of(
            quote!(for = WebApp, watcher, workers = 8, event_timeout = "5s", name = "audit"),
            quote!(impl W {
                async fn add(&self, a: Arc<WebApp>, c: &WatchContext) -> Result<(), E> { Ok(()) }
                async fn update(&self, o: Arc<WebApp>, n: Arc<WebApp>, c: &WatchContext) -> Result<(), E> { Ok(()) }
                async fn delete(&self, a: Arc<WebApp>, c: &WatchContext) -> Result<(), E> { Ok(()) }
                async fn sync(&self, a: Arc<WebApp>, c: &WatchContext) -> Result<(), E> { Ok(()) }
                fn helper(&self) {}
            }),
        );
        assert!(errors.is_empty(), "{errors:?}");
        let model = model.expect("a watcher model");
        assert_eq!(model.name, "audit");
        assert_eq!(
            (model.workers, model.event_timeout_ms),
            (Some(8), Some(5_000))
        );
        assert!(model.update.is_some() && model.delete.is_some() && model.sync.is_some());

        let (model, errors) = check_of(
            quote!(for = apps::WebApp, watcher),
            quote!(impl W { async fn add(&self, a: Arc<WebApp>, c: &WatchContext) -> Result<(), E> { Ok(()) } }),
        );
        assert!(errors.is_empty(), "{errors:?}");
        let model = model.expect("a watcher model");
        assert_eq!(model.name, "webapp");
        assert!(model.update.is_none() && model.delete.is_none() && model.sync.is_none());
    }

    #[test]
    fn check_mode_keys_should_report_the_keys_of_the_other_mode_at_the_key() {
        let add = quote!(impl W { async fn add(&self, a: Arc<K>, c: &WatchContext) -> Result<(), E> { Ok(()) } });
        let errors = errors_of(
            quote!(for = K, watcher, owns(Pod), owns(Job), watches(Secret, map = Self::f),
                concurrency = 2, finalizer = "a.example.com/b", predicates(labels_changed)),
            add,
        );
        assert_eq!(
            errors,
            [
                "`owns` is a reconciler's key: a watcher handles the events of its `for` kind only",
                "`watches` is a reconciler's key: a watcher handles the events of its `for` kind only",
                "`concurrency` is a reconciler's key: a watcher's is `workers = N`",
                "`finalizer` is a reconciler's key: a watcher's `delete` runs once the object is gone; `opinionated = \"domain/name\"` holds every object with that finalizer until `delete` ran",
                "`predicates` is a reconciler's key: a watcher gets every event (`update` gets the old and the new object to compare)",
            ]
        );
        let reconcile = quote!(impl C { async fn reconcile(&self, a: Arc<K>, c: &Context<K>) -> Result<Action, E> { Ok(Action::Done) } });
        let errors = errors_of(
            quote!(for = K, workers = 4, event_timeout = "1s"),
            reconcile,
        );
        assert_eq!(
            errors,
            [
                "`workers` is a watcher's key: add `watcher` to #[controller(...)] for event handlers, or write `concurrency = N` for a reconciler",
                "`event_timeout` is a watcher's key: add `watcher` to #[controller(...)] for event handlers",
            ]
        );
    }

    #[test]
    fn opinionated_should_take_a_qualified_finalizer_in_watcher_mode_only() {
        let add = quote!(impl W { async fn add(&self, a: Arc<K>, c: &WatchContext) -> Result<(), E> { Ok(()) } });
        let (model, errors) = check_of(
            quote!(for = K, watcher, opinionated = "apps.example.com/watch"),
            add.clone(),
        );
        assert!(errors.is_empty(), "{errors:?}");
        let finalizer = model.and_then(|m| m.opinionated).map(|f| f.value());
        assert_eq!(finalizer.as_deref(), Some("apps.example.com/watch"));
        assert_eq!(
            errors_of(quote!(for = K, watcher, opinionated = "watch"), add),
            [
                "the opinionated watcher's finalizer must be a qualified name like `example.com/watch` (a DNS subdomain, `/`, a name)"
            ]
        );
        let reconcile = quote!(impl C { async fn reconcile(&self, a: Arc<K>, c: &Context<K>) -> Result<Action, E> { Ok(Action::Done) } });
        let errors = errors_of(quote!(for = K, opinionated = "a.example.com/w"), reconcile);
        assert!(
            errors[0].starts_with("`opinionated` is a watcher's key"),
            "{errors:?}"
        );
    }

    #[test]
    fn check_should_report_reconciler_methods_and_a_missing_add_once() {
        let reconciler_method = "is a reconciler's method: a watcher (`watcher` in #[controller(...)]) has the event handlers `add`, `update`, `delete` and `sync`; leave out `watcher` for a reconciler";
        let errors = errors_of(
            quote!(for = K, watcher),
            quote!(impl W {
                async fn reconcile(&self, a: Arc<K>, c: &Context<K>) -> Result<Action, E> { Ok(Action::Done) }
                fn error_policy(&self, a: &K, e: &E, c: &Context<K>) -> ErrorPolicy { ErrorPolicy::Backoff }
            }),
        );
        assert_eq!(
            errors,
            [
                format!("`reconcile` {reconciler_method}"),
                format!("`error_policy` {reconciler_method}"),
            ],
            "no \"needs `add`\" on top"
        );
        let errors = errors_of(
            quote!(for = K, watcher),
            quote!(impl W { fn helper(&self) {} }),
        );
        assert_eq!(
            errors,
            [
                "a watcher needs `async fn add(&self, obj: Arc<Kind>, ctx: &WatchContext) -> Result<(), Error>` in this impl block"
            ]
        );
    }

    #[test]
    fn check_should_name_misspelled_handlers_instead_of_missing_ones() {
        let errors = errors_of(
            quote!(for = K, watcher),
            quote!(impl W {
                async fn ad(&self, a: Arc<K>, c: &WatchContext) -> Result<(), E> { Ok(()) }
                async fn udpate(&self, o: Arc<K>, n: Arc<K>, c: &WatchContext) -> Result<(), E> { Ok(()) }
                async fn delete_children(&self) {}
                fn synced(k: &K) -> bool { true }
            }),
        );
        assert_eq!(
            errors,
            [
                "unknown method `ad`; did you mean `add`?",
                "unknown method `udpate`; did you mean `update`?",
            ]
        );
    }

    #[test]
    fn check_should_report_malformed_handlers_like_reconcile() {
        let errors = errors_of(
            quote!(for = K, watcher),
            quote!(impl W {
                fn add(&self, a: Arc<K>, c: &WatchContext) -> Result<(), E> { Ok(()) }
                async fn update(&self, n: Arc<K>, c: &WatchContext) -> Result<(), E> { Ok(()) }
                async fn delete(self, a: Arc<K>, c: &WatchContext) -> Result<(), E> { Ok(()) }
                async fn sync(&self, a: Arc<K>, c: &WatchContext) -> Result<bool, E> { Ok(true) }
            }),
        );
        let one =
            "`async fn {name}(&self, obj: Arc<Kind>, ctx: &WatchContext) -> Result<(), Error>`";
        let shape = |name: &str| one.replace("{name}", name);
        assert_eq!(
            errors,
            [
                format!("`add` must be an async fn: {}", shape("add")),
                "`update` takes `&self`, the old object, the new object and the context: `async fn update(&self, old: Arc<Kind>, new: Arc<Kind>, ctx: &WatchContext) -> Result<(), Error>`".to_owned(),
                format!("`delete` takes `&self`, the object and the context: {}", shape("delete")),
                format!("`sync` must return `Result<(), YourError>`: {}", shape("sync")),
            ]
        );
        let errors = errors_of(
            quote!(for = K, watcher),
            quote!(impl W {
                async fn add(&self, a: Arc<K>, c: &WatchContext) -> Result<(), E> { Ok(()) }
                async fn delete(&self, a: Arc<K>, c: &WatchContext) -> Result<(), Other> { Ok(()) }
                async fn sync(&self, a: Arc<K>, c: &WatchContext) {}
            }),
        );
        assert_eq!(
            errors,
            [
                "`delete` must return the same error type as `add`".to_owned(),
                format!("`sync` must return `Result<(), Error>`: {}", shape("sync")),
            ]
        );
    }

    #[test]
    fn controller_should_expand_a_watcher_like_the_snapshot() {
        let out = controller(
            quote!(for = WebApp, watcher, workers = 16, event_timeout = "1m30s",
                opinionated = "apps.example.com/audit",
                retry = exponential(base = "1s", max = "5m", attempts = 10), dequeue = same_action,
                name = "audit", crate = "kf"),
            quote!(impl Audit {
                async fn add(&self, app: Arc<WebApp>, ctx: &WatchContext) -> Result<(), Error> { Ok(()) }
                async fn update(&self, old: Arc<WebApp>, new: Arc<WebApp>, ctx: &WatchContext) -> Result<(), Error> { Ok(()) }
                async fn delete(&self, app: Arc<WebApp>, ctx: &WatchContext) -> Result<(), Error> { Ok(()) }
                async fn sync(&self, app: Arc<WebApp>, ctx: &WatchContext) -> Result<(), Error> { Ok(()) }
            }),
        );
        crate::pipeline::tests::snapshot(
            "controller_watcher.rs",
            &crate::pipeline::tests::pretty(out),
        );
    }

    #[test]
    fn controller_should_pass_a_retry_expression_where_self_is_the_watcher() {
        let out = controller(
            quote!(for = WebApp, watcher, retry = Self::policy()),
            quote!(impl Audit {
                async fn add(&self, app: Arc<WebApp>, ctx: &WatchContext) -> Result<(), Error> { Ok(()) }
            }),
        );
        let out = crate::pipeline::tests::pretty(out);
        let in_spec = out
            .split_once("impl ::kubeforge::watcher::WatcherSpec for Audit")
            .map(|(_, spec)| spec.split_whitespace().collect::<String>());
        assert!(
            in_spec.is_some_and(|spec| spec.contains(".retry(Self::policy())")),
            "{out}"
        );
        assert!(!out.contains("fn update"), "{out}");
    }

    #[test]
    fn controller_should_give_a_watcher_its_store() {
        let add = quote!(impl Audit {
            async fn add(&self, app: Arc<WebApp>, ctx: &WatchContext) -> Result<(), Error> { Ok(()) }
        });
        let out = controller(
            quote!(for = WebApp, watcher, store = memcached, workers = 2),
            add.clone(),
        );
        let compact: String = crate::pipeline::tests::pretty(out)
            .split_whitespace()
            .collect();
        assert!(
            compact.contains("::kubeforge::watcher::WatcherController::with_informer(<Selfas::kubeforge::watcher::WatcherSpec>::NAME,wiring,::kubeforge::controller::apis_for::<Self::Kind,>(&wiring.cache().client(),&wiring.namespaces),wiring.informer_defaults.clone().store_named(\"memcached\"),).workers(2)"),
            "{compact}"
        );
        let out = crate::pipeline::tests::pretty(controller(quote!(for = WebApp, watcher), add));
        assert!(
            out.contains("WatcherController::new(") && !out.contains("store_named"),
            "{out}"
        );
    }

    #[test]
    fn controller_should_emit_the_item_and_watcher_dummies_next_to_the_errors() {
        let out = controller(
            quote!(for = WebApp, watcher, concurrency = 2),
            quote!(impl Audit {
                async fn add(&self, app: Arc<WebApp>, ctx: &WatchContext) -> Result<(), Error> { Ok(()) }
            }),
        );
        let out = crate::pipeline::tests::pretty(out);
        assert!(out.contains("impl Audit {"), "{out}");
        assert!(
            out.contains("impl ::kubeforge::watcher::Watcher<WebApp> for Audit"),
            "{out}"
        );
        assert!(
            out.contains("impl ::kubeforge::watcher::WatcherSpec for Audit"),
            "{out}"
        );
        assert!(out.contains("a watcher's is `workers = N`"), "{out}");
        assert!(!out.contains("Reconciler"), "{out}");
        assert!(!out.contains("unwrap"), "{out}");
        assert!(
            !out.contains("inventory"),
            "no registration of a broken watcher: {out}"
        );
    }
}
