//! `#[controller(...)]` on an impl block: parse the arguments, check the methods, expand the
//! `Reconciler` and `ControllerSpec` impls (or, with `watcher`, the `Watcher` and `WatcherSpec`
//! impls: see `watcher.rs`) and the RBAC registration.

mod attrs;
mod dependents;
mod expand;
mod watcher;

/// The tables and lists the controller's attributes are parsed with, for the reference
/// (`reference.rs`).
#[cfg(test)]
pub(crate) mod reference {
    pub(crate) use super::attrs::{
        BUILTIN_PREDICATES, CONTROLLER, DEQUEUE_POLICIES, EXPONENTIAL, OWNS_OPTIONS, RBAC_RULE,
        WATCH_MAPPERS, WATCH_OPTIONS,
    };
    pub(crate) use super::dependents::OPTIONS as DEPENDENT_OPTIONS;
}

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::{FnArg, ImplItem, ImplItemFn, ItemImpl, LitStr, Path, ReturnType, Type};

use crate::errors::{Errors, did_you_mean, misspelling_of};
use crate::keys::Keyed;
use crate::model::default_crate;
use attrs::{ControllerArgs, DequeueArg, ExponentialAttrs, Owned, PredicateArg, RetryAttr, Watch};
use watcher::WatcherModel;

/// What the impl block declares, checked (boxed: the models are large).
pub enum Checked {
    Reconciler(Box<Model>),
    Watcher(Box<WatcherModel>),
}

/// The checked model of a reconciler, the expansion works from.
pub struct Model {
    /// The path generated code names kubeforge by (`::kubeforge` unless `crate = "..."`).
    pub krate: Path,
    pub self_ty: Type,
    pub kind: Type,
    pub name: String,
    pub owns: Vec<Owned>,
    pub watches: Vec<Watch>,
    pub concurrency: Option<u64>,
    /// `every = ..` in milliseconds.
    pub every_ms: Option<u64>,
    /// `reconcile_timeout = ..` in milliseconds.
    pub reconcile_timeout_ms: Option<u64>,
    /// `labels = ..` / `fields = ..` of the primary kind (its predicates stay in `predicates`).
    pub primary: attrs::Select,
    /// `reconcile_on = path`.
    pub reconcile_on: Option<syn::Path>,
    pub finalizer: Option<LitStr>,
    /// `field_manager = ".."`: the field manager of the dependents' applies.
    pub field_manager: Option<LitStr>,
    pub predicates: Vec<PredicateArg>,
    /// `retry = ..`; `None` keeps the runtime's default policy.
    pub retry: Option<RetryArg>,
    /// `dequeue = ..`; `None` keeps the runtime's default (`DequeueAll`).
    pub dequeue: Option<DequeueArg>,
    /// `store = ..`: the store backend of the primary kind's cache; `None` keeps the wiring's
    /// informer defaults (in memory).
    pub store: Option<Keyed<String>>,
    pub error_ty: Type,
    /// The user's `reconcile`; without one (dependents only) the generated reconcile returns
    /// `Action::Done` after the dependents.
    pub reconcile: Option<ImplItemFn>,
    /// `dependents(..)`, checked, in reconcile order.
    pub dependents: Vec<dependents::Dependent>,
    /// A `status` method: custom status fields, written with the dependents' conditions.
    pub has_status_fn: bool,
    pub cleanup: Option<ImplItemFn>,
    pub has_error_policy: bool,
    /// `rbac(..)`: extra RBAC rules.
    pub rbac: Vec<attrs::RbacRule>,
}

/// How failed reconciles are retried (`retry = ..`).
pub enum RetryArg {
    /// `exponential(..)` with its defaults applied: `ExponentialRetry::new(base, max, attempts)`.
    Exponential {
        base_ms: u64,
        max_ms: u64,
        /// `u32::MAX`: no limit.
        attempts: u32,
    },
    /// The user's expression of a `RetryPolicy` type.
    Expr(syn::Expr),
}

/// `exponential(..)`'s defaults: client-go's controller backoff, 5 ms doubling up to 1000 s,
/// never giving up.
const DEFAULT_BASE_MS: u64 = 5;
const DEFAULT_MAX_MS: u64 = 1_000_000;
const UNLIMITED_ATTEMPTS: u32 = u32::MAX;

/// The methods `#[controller]` forwards to; a method whose name misspells one of them is reported.
const HOOKS: &[&str] = &["reconcile", "cleanup", "error_policy"];

/// Entry point: the user's impl block, plus the generated impls — or, on errors, dummy impls of
/// the traits next to the `compile_error!`s, so code using the controller reports nothing more.
pub fn controller(args: TokenStream, input: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let item: ItemImpl = match syn::parse2(input.clone()) {
        Ok(item) => item,
        Err(_) => {
            let message = "#[controller] goes on an inherent impl block: `impl MyController { async fn reconcile(...) ... }`";
            let mut out = syn::Error::new(Span::call_site(), message).to_compile_error();
            out.extend(input);
            return out;
        }
    };
    let args = ControllerArgs::parse(args, &mut errors);
    let krate = args.crate_path.clone().unwrap_or_else(default_crate);
    let kind = args.for_kind.clone();
    let is_watcher = args.is_watcher();
    let checked = check(args, &item, &mut errors);
    let mut out = item.to_token_stream();
    match (checked, errors.check()) {
        (Some(Checked::Reconciler(model)), Ok(())) => out.extend(expand::expand(&model)),
        (Some(Checked::Watcher(model)), Ok(())) => out.extend(expand::expand_watcher(&model)),
        (_, result) => {
            // Trait impls are rejected, and a dummy could collide with the user's own impl.
            if item.trait_.is_none() {
                let dummy = if is_watcher {
                    expand::watcher_dummy
                } else {
                    expand::dummy
                };
                out.extend(dummy(&krate, &item, kind.as_ref()));
            }
            let error = result.err().unwrap_or_else(|| {
                syn::Error::new(
                    Span::call_site(),
                    "#[controller] could not read this impl block",
                )
            });
            out.extend(error.to_compile_error());
        }
    }
    out
}

/// Checks the keys against the mode (`watcher` or not), then the impl block for that mode.
fn check(args: ControllerArgs, item: &ItemImpl, errors: &mut Errors) -> Option<Checked> {
    watcher::check_mode_keys(&args, errors);
    if args.is_watcher() {
        watcher::check(args, item, errors).map(|model| Checked::Watcher(Box::new(model)))
    } else {
        check_reconciler(args, item, errors).map(|model| Checked::Reconciler(Box::new(model)))
    }
}

fn check_reconciler(
    mut args: ControllerArgs,
    item: &ItemImpl,
    errors: &mut Errors,
) -> Option<Model> {
    // Before anything can end the checks: its errors are reported with the others.
    let retry = args.retry.take().map(|r| retry_arg(r, errors));
    let misspelled = check_block(item, HOOKS, errors)?;
    let find = |name: &str| find_fn(item, name);
    let kind = primary_kind(args.for_kind.take(), errors)?;
    let krate = args.crate_path.clone().unwrap_or_else(default_crate);
    let declared = std::mem::take(&mut args.dependents);
    let has_dependents = !declared.is_empty();
    if let (Some(manager), false) = (&args.field_manager, has_dependents) {
        errors.spanned(
            manager,
            "`field_manager` names the field manager of the dependents' applies: this controller declares no `dependents(..)`",
        );
    }
    let dependents = dependents::check(declared, item, &krate, errors);
    for dependent in &dependents {
        if !args
            .owns
            .iter()
            .any(|o| dependents::same_type(&o.kind, &dependent.kind))
        {
            args.owns.push(Owned::full(dependent.kind.clone()));
        }
    }
    let reconcile = find("reconcile");
    if reconcile.is_none() && !has_dependents {
        if !misspelled.contains(&"reconcile") {
            let hint = if find("add").is_some() {
                ", or `watcher` in #[controller(...)] for the event handlers `add`, `update`, `delete` and `sync`"
            } else {
                " in this impl block"
            };
            errors.spanned(
                &item.self_ty,
                format!("#[controller] needs `async fn reconcile(&self, obj: Arc<Kind>, ctx: &Context<Kind>) -> Result<Action, Error>`{hint}"),
            );
        }
        return None;
    }
    let cleanup = find("cleanup");
    // With dependents alone, the error type is `cleanup`'s (it must convert from
    // `DependentsError`: `BoxError` and `anyhow::Error` do), else `DependentsError`.
    let error_ty = match (&reconcile, &cleanup) {
        (Some(reconcile), _) => {
            check_method(reconcile, &RECONCILE, &krate, errors).map(|(_, error)| error)
        }
        // `check_cleanup` below reports what is wrong with it.
        (None, Some(cleanup)) => check_method(cleanup, &RECONCILE, &krate, &mut Errors::default())
            .map(|(_, error)| error),
        (None, None) => Some(syn::parse_quote!(#krate::dependents::DependentsError)),
    };
    check_cleanup(
        &krate,
        cleanup.as_ref(),
        error_ty.as_ref(),
        args.finalizer.as_ref(),
        misspelled.contains(&"cleanup"),
        errors,
    );
    let name = args
        .name
        .as_ref()
        .map_or_else(|| default_name(&kind), LitStr::value);
    Some(Model {
        krate,
        self_ty: (*item.self_ty).clone(),
        kind,
        name,
        owns: args.owns,
        watches: args.watches,
        concurrency: args.concurrency.map(|n| n.value),
        every_ms: args.every.map(|n| n.value),
        reconcile_timeout_ms: args.reconcile_timeout.map(|n| n.value),
        primary: args.primary,
        reconcile_on: args.reconcile_on,
        finalizer: args.finalizer,
        field_manager: args.field_manager,
        predicates: args.predicates,
        retry: retry.flatten(),
        dequeue: args.dequeue,
        store: args.store,
        error_ty: error_ty?,
        reconcile,
        dependents,
        has_status_fn: has_dependents && find("status").is_some(),
        cleanup,
        has_error_policy: find("error_policy").is_some(),
        rbac: args.rbac,
    })
}

/// What both modes check of the impl block first: inherent (`None` for a trait impl: nothing
/// more is checked), not generic, no method misspelling one of `hooks`. Returns the hooks
/// reported as misspelled.
fn check_block(
    item: &ItemImpl,
    hooks: &[&'static str],
    errors: &mut Errors,
) -> Option<Vec<&'static str>> {
    if let Some((_, trait_path, _)) = &item.trait_ {
        errors.spanned(
            trait_path,
            "#[controller] goes on an inherent impl block, not a trait impl",
        );
        return None;
    }
    if !item.generics.params.is_empty() {
        errors.spanned(
            &item.generics,
            "#[controller] does not support generic controllers",
        );
    }
    Some(misspelled_hooks(item, hooks, errors))
}

/// `for = ..`, which both modes need.
fn primary_kind(for_kind: Option<Type>, errors: &mut Errors) -> Option<Type> {
    if for_kind.is_none() {
        errors.at(
            Span::call_site(),
            "#[controller] needs the primary kind: `#[controller(for = MyKind, ...)]`",
        );
    }
    for_kind
}

/// `retry = ..` as the model holds it: `exponential(..)` with its defaults applied and its keys
/// checked together; `None` (with the errors) when they do not fit.
fn retry_arg(attr: RetryAttr, errors: &mut Errors) -> Option<RetryArg> {
    let e = match attr {
        RetryAttr::Expr(expr) => return Some(RetryArg::Expr(expr)),
        RetryAttr::Exponential(e) => e.value,
    };
    // `base` and `max` first: they usually come first in the list, and so do their errors.
    let backoff = backoff(&e, errors);
    let attempts = match &e.attempts {
        None => Some(UNLIMITED_ATTEMPTS),
        Some(n) => match u32::try_from(n.value) {
            Ok(0) => {
                errors.at(n.key, "`attempts` must be at least 1: it counts the failures before giving up (leave it out to retry without limit)");
                None
            }
            Ok(attempts) => Some(attempts),
            Err(_) => {
                errors.at(
                    n.key,
                    format!(
                        "`attempts` must be at most {} (leave it out to retry without limit)",
                        u32::MAX
                    ),
                );
                None
            }
        },
    };
    let ((base_ms, max_ms), attempts) = (backoff?, attempts?);
    Some(RetryArg::Exponential {
        base_ms,
        max_ms,
        attempts,
    })
}

/// `exponential(..)`'s `base` and `max` with their defaults: `base` more than zero and at most
/// `max`.
fn backoff(e: &ExponentialAttrs, errors: &mut Errors) -> Option<(u64, u64)> {
    let base_ms = e.base.as_ref().map_or(DEFAULT_BASE_MS, |b| b.value);
    let max_ms = e.max.as_ref().map_or(DEFAULT_MAX_MS, |m| m.value);
    let shown = |ms: u64, given: bool| {
        let default = if given { "" } else { " by default" };
        format!("{}{default}", show_duration(ms))
    };
    let (base_given, max_given) = (e.base.is_some(), e.max.is_some());
    if let Some(base) = &e.base
        && base.value == 0
    {
        errors.at(base.key, "`base` must be more than 0: the delay starts at `base` and doubles, so a zero `base` retries at once, forever");
        return None;
    }
    if base_ms <= max_ms {
        return Some((base_ms, max_ms));
    }
    let message = format!(
        "`base` ({}) must not be longer than `max` ({}): the delay starts at `base` and doubles up to `max`",
        shown(base_ms, base_given),
        shown(max_ms, max_given)
    );
    let at = e.base.as_ref().or(e.max.as_ref());
    errors.at(at.map_or_else(Span::call_site, |k| k.key), message);
    None
}

/// A duration in milliseconds the way it is written in `exponential(..)`: `1m30s`, `5ms`.
fn show_duration(ms: u64) -> String {
    let parts = [
        (ms / 3_600_000, "h"),
        (ms / 60_000 % 60, "m"),
        (ms / 1_000 % 60, "s"),
        (ms % 1_000, "ms"),
    ];
    let shown: String = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    if shown.is_empty() {
        "0s".to_owned()
    } else {
        shown
    }
}

/// The method `name` of the impl block.
fn find_fn(item: &ItemImpl, name: &str) -> Option<ImplItemFn> {
    item.items.iter().find_map(|i| match i {
        ImplItem::Fn(f) if f.sig.ident == name => Some(f.clone()),
        _ => None,
    })
}

/// `async fn reconsile(&self, ..)` is a typo of one of `hooks`, not a helper: says so instead
/// of "missing", and returns the hooks it reported.
fn misspelled_hooks(
    item: &ItemImpl,
    hooks: &[&'static str],
    errors: &mut Errors,
) -> Vec<&'static str> {
    let mut misspelled = Vec::new();
    for f in item.items.iter().filter_map(|i| match i {
        ImplItem::Fn(f) if f.sig.receiver().is_some() => Some(f),
        _ => None,
    }) {
        let name = f.sig.ident.to_string();
        if let Some(hook) = misspelling_of(&name, hooks)
            && find_fn(item, hook).is_none()
        {
            errors.at(
                f.sig.ident.span(),
                format!("unknown method `{name}`{}", did_you_mean(&name, &[hook])),
            );
            misspelled.push(hook);
        }
    }
    misspelled
}

/// `cleanup` and the finalizer come together, and `cleanup` fails like `reconcile`.
fn check_cleanup(
    krate: &Path,
    cleanup: Option<&ImplItemFn>,
    reconcile_error: Option<&Type>,
    finalizer: Option<&LitStr>,
    cleanup_misspelled: bool,
    errors: &mut Errors,
) {
    let Some(cleanup) = cleanup else {
        if let Some(finalizer) = finalizer
            && !cleanup_misspelled
        {
            errors.at(
                finalizer.span(),
                "a finalizer needs `async fn cleanup(&self, obj: Arc<Kind>, ctx: &Context<Kind>) -> Result<Action, Error>` in this impl block to run before deletion",
            );
        }
        return;
    };
    let cleanup_error = check_method(cleanup, &RECONCILE, krate, errors).map(|(_, error)| error);
    if let (Some(a), Some(b)) = (reconcile_error, &cleanup_error)
        && a.to_token_stream().to_string() != b.to_token_stream().to_string()
    {
        errors.spanned(
            b,
            "`cleanup` must return the same error type as `reconcile`",
        );
    }
    if finalizer.is_none() {
        errors.at(
            cleanup.sig.ident.span(),
            "`cleanup` only runs with a finalizer: add `finalizer = \"example.com/cleanup\"` to #[controller(...)]",
        );
    }
}

/// The shape of a method `#[controller]` forwards to, for [`check_method`]'s messages.
struct Signature {
    /// The arguments besides `&self`, as the messages name them: "the object and the context".
    takes: &'static str,
    /// The number of arguments, `&self` included.
    inputs: usize,
    /// The `Ok` type, as the messages write it.
    ok: &'static str,
    /// The method, `{name}` standing for its name.
    shape: &'static str,
}

/// `reconcile` and `cleanup`.
const RECONCILE: Signature = Signature {
    takes: "the object and the context",
    inputs: 3,
    ok: "Action",
    shape: "async fn {name}(&self, obj: Arc<Kind>, ctx: &Context<Kind>) -> Result<Action, Error>",
};

/// Checks `async fn name(&self, ..) -> Result<T, E>` with the arguments `sig` counts; returns
/// `T` and `E`.
fn check_method(
    f: &ImplItemFn,
    sig: &Signature,
    krate: &Path,
    errors: &mut Errors,
) -> Option<(Type, Type)> {
    let name = f.sig.ident.to_string();
    let shape = format!("`{}`", sig.shape.replace("{name}", &name));
    if f.sig.asyncness.is_none() {
        errors.at(
            f.sig.fn_token.span,
            format!("`{name}` must be an async fn: {shape}"),
        );
    }
    let receiver_ok = matches!(f.sig.inputs.first(), Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none());
    if !receiver_ok || f.sig.inputs.len() != sig.inputs {
        errors.spanned(
            &f.sig.inputs,
            format!("`{name}` takes `&self`, {}: {shape}", sig.takes),
        );
    }
    let ok = sig.ok;
    let ReturnType::Type(_, ty) = &f.sig.output else {
        errors.spanned(
            &f.sig,
            format!("`{name}` must return `Result<{ok}, Error>`: {shape}"),
        );
        return None;
    };
    let types = result_types(ty, krate);
    if types.is_none() {
        errors.spanned(ty, format!("`{name}` must return `Result<{ok}, YourError>` (or an alias such as `anyhow::Result<{ok}>`): {shape}"));
    }
    types
}

/// `T` and `E` of `Result<T, E>` (any path ending in `Result`); of a one-parameter alias
/// (`anyhow::Result<T>`), `E` is `<anyhow::Result<T> as ResultError>::Error`.
fn result_types(ty: &Type, krate: &Path) -> Option<(Type, Type)> {
    let Type::Path(path) = ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    if last.ident != "Result" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match (args.args.len(), args.args.first(), args.args.last()) {
        (2, Some(syn::GenericArgument::Type(ok)), Some(syn::GenericArgument::Type(error))) => {
            Some((ok.clone(), error.clone()))
        }
        (1, Some(syn::GenericArgument::Type(ok)), _) => Some((
            ok.clone(),
            syn::parse_quote_spanned!(syn::spanned::Spanned::span(ty)=> <#ty as #krate::__private::ResultError>::Error),
        )),
        _ => None,
    }
}

/// The kind's last path segment, lowercased (`apps::WebApp` → `webapp`).
fn default_name(kind: &Type) -> String {
    match kind {
        Type::Path(p) => p.path.segments.last().map_or_else(
            || "controller".to_owned(),
            |s| s.ident.to_string().to_lowercase(),
        ),
        _ => "controller".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn errors_of(args: TokenStream, item: TokenStream) -> Vec<String> {
        let mut errors = Errors::default();
        let args = ControllerArgs::parse(args, &mut errors);
        let item: ItemImpl = syn::parse2(item).unwrap();
        let _ = check(args, &item, &mut errors);
        errors.messages()
    }

    #[test]
    fn check_should_accept_a_complete_controller() {
        let errors = errors_of(
            quote!(for = WebApp, finalizer = "apps.example.com/cleanup"),
            quote!(impl C {
                async fn reconcile(&self, a: Arc<WebApp>, c: &Context<WebApp>) -> Result<Action, Error> { Ok(Action::Done) }
                async fn cleanup(&self, a: Arc<WebApp>, c: &Context<WebApp>) -> Result<Action, Error> { Ok(Action::Done) }
            }),
        );
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn check_should_report_missing_and_malformed_methods() {
        let missing = errors_of(quote!(for = WebApp), quote!(impl C {}));
        assert!(
            missing[0].contains("needs `async fn reconcile"),
            "{missing:?}"
        );

        let sync = errors_of(
            quote!(for = WebApp),
            quote!(impl C { fn reconcile(&self, a: Arc<WebApp>, c: &Context<WebApp>) -> Result<Action, Error> { Ok(Action::Done) } }),
        );
        assert!(sync[0].contains("must be an async fn"), "{sync:?}");

        let no_result = errors_of(
            quote!(for = WebApp),
            quote!(impl C { async fn reconcile(&self, a: Arc<WebApp>, c: &Context<WebApp>) -> Action { Ok(Action::Done) } }),
        );
        assert!(
            no_result[0].contains("must return `Result<Action, YourError>`"),
            "{no_result:?}"
        );

        let orphan_cleanup = errors_of(
            quote!(for = WebApp),
            quote!(impl C {
                async fn reconcile(&self, a: Arc<WebApp>, c: &Context<WebApp>) -> Result<Action, E> { Ok(Action::Done) }
                async fn cleanup(&self, a: Arc<WebApp>, c: &Context<WebApp>) -> Result<Action, E> { Ok(Action::Done) }
            }),
        );
        assert!(
            orphan_cleanup[0].contains("only runs with a finalizer"),
            "{orphan_cleanup:?}"
        );
    }

    #[test]
    fn check_should_name_misspelled_methods_instead_of_missing_ones() {
        let reconcile = errors_of(
            quote!(for = WebApp),
            quote!(impl C {
                async fn reconsile(&self, a: Arc<WebApp>, c: &Context<WebApp>) -> Result<Action, E> { Ok(Action::Done) }
                fn reconcile_children(&self) {}
            }),
        );
        assert_eq!(
            reconcile,
            ["unknown method `reconsile`; did you mean `reconcile`?"]
        );

        let cleanup = errors_of(
            quote!(for = WebApp, finalizer = "apps.example.com/cleanup"),
            quote!(impl C {
                async fn reconcile(&self, a: Arc<WebApp>, c: &Context<WebApp>) -> Result<Action, E> { Ok(Action::Done) }
                async fn cleaup(&self, a: Arc<WebApp>, c: &Context<WebApp>) -> Result<Action, E> { Ok(Action::Done) }
            }),
        );
        assert_eq!(
            cleanup,
            ["unknown method `cleaup`; did you mean `cleanup`?"]
        );

        let helper = errors_of(
            quote!(for = WebApp),
            quote!(impl C {
                async fn reconcile(&self, a: Arc<WebApp>, c: &Context<WebApp>) -> Result<Action, E> { Ok(Action::Done) }
                fn cleanup_all(&self) {}
                fn reconciler(cache: &Cache) {}
            }),
        );
        assert!(helper.is_empty(), "{helper:?}");
    }

    #[test]
    fn check_should_point_event_handlers_without_watcher_to_the_key() {
        let errors = errors_of(
            quote!(for = WebApp),
            quote!(impl C { async fn add(&self, a: Arc<WebApp>, c: &WatchContext) -> Result<(), E> { Ok(()) } }),
        );
        assert_eq!(
            errors,
            [
                "#[controller] needs `async fn reconcile(&self, obj: Arc<Kind>, ctx: &Context<Kind>) -> Result<Action, Error>`, or `watcher` in #[controller(...)] for the event handlers `add`, `update`, `delete` and `sync`"
            ]
        );
    }

    fn retry_of(args: TokenStream) -> (Option<RetryArg>, Vec<String>) {
        let mut errors = Errors::default();
        let args = ControllerArgs::parse(args, &mut errors);
        let retry = args.retry.and_then(|r| retry_arg(r, &mut errors));
        (retry, errors.messages())
    }

    fn exponential_of(args: TokenStream) -> (u64, u64, u32) {
        match retry_of(args) {
            (
                Some(RetryArg::Exponential {
                    base_ms,
                    max_ms,
                    attempts,
                }),
                errors,
            ) if errors.is_empty() => (base_ms, max_ms, attempts),
            (_, errors) => panic!("not exponential: {errors:?}"),
        }
    }

    #[test]
    fn retry_arg_should_apply_client_go_defaults_to_missing_keys() {
        let all = quote!(retry = exponential(base = "1s", max = "5m", attempts = 10));
        assert_eq!(exponential_of(all), (1_000, 300_000, 10));
        let none = quote!(retry = exponential());
        assert_eq!(exponential_of(none), (5, 1_000_000, u32::MAX));
        let base = quote!(retry = exponential(base = "1s"));
        assert_eq!(exponential_of(base), (1_000, 1_000_000, u32::MAX));
        let equal = quote!(retry = exponential(base = "1m", max = "60s", attempts = 1));
        assert_eq!(exponential_of(equal), (60_000, 60_000, 1));
        let (retry, errors) = retry_of(quote!(retry = Self::policy()));
        assert!(matches!(retry, Some(RetryArg::Expr(_))), "{errors:?}");
    }

    #[test]
    fn retry_arg_should_report_attempts_zero_and_base_longer_than_max() {
        let explain = ": the delay starts at `base` and doubles up to `max`";
        let cases = [
            (
                quote!(retry = exponential(base = "1h", max = "1m30s", attempts = 0)),
                vec![
                    format!("`base` (1h) must not be longer than `max` (1m30s){explain}"),
                    "`attempts` must be at least 1: it counts the failures before giving up (leave it out to retry without limit)".to_owned(),
                ],
            ),
            (
                quote!(retry = exponential(base = "2000s")),
                vec![format!("`base` (33m20s) must not be longer than `max` (16m40s by default){explain}")],
            ),
            (
                quote!(retry = exponential(max = "1ms", attempts = 4294967296)),
                vec![
                    format!("`base` (5ms by default) must not be longer than `max` (1ms){explain}"),
                    "`attempts` must be at most 4294967295 (leave it out to retry without limit)".to_owned(),
                ],
            ),
            (
                quote!(retry = exponential(base = "0ms", max = "0s")),
                vec!["`base` must be more than 0: the delay starts at `base` and doubles, so a zero `base` retries at once, forever".to_owned()],
            ),
        ];
        for (args, expected) in cases {
            let (retry, errors) = retry_of(args);
            assert!(retry.is_none());
            assert_eq!(errors, expected);
        }
    }

    #[test]
    fn check_should_report_retry_errors_with_the_other_errors() {
        let errors = errors_of(
            quote!(retry = exponential(attempts = 0), dequeue = nothing),
            quote!(impl C {}),
        );
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(
            errors[0].starts_with("unknown dequeue policy `nothing`"),
            "{errors:?}"
        );
        assert!(
            errors[1].starts_with("`attempts` must be at least 1"),
            "{errors:?}"
        );
        assert!(errors[2].contains("needs the primary kind"), "{errors:?}");
    }

    #[test]
    fn show_duration_should_write_durations_as_they_are_read() {
        assert_eq!(show_duration(5), "5ms");
        assert_eq!(show_duration(1_000_000), "16m40s");
        assert_eq!(show_duration(3_661_001), "1h1m1s1ms");
        assert_eq!(show_duration(0), "0s");
    }

    #[test]
    fn controller_should_expand_like_the_snapshot() {
        let out = controller(
            quote!(for = WebApp, owns(Deployment, Service, Pod(metadata), ConfigMap(uncached, any_owner)),
                watches(Secret, map = Self::apps_for_secret), watches(Service, map = Self::apps_for_service),
                concurrency = 2, finalizer = "apps.example.com/cleanup",
                predicates(generation_changed, Self::changed),
                retry = exponential(base = "1s", max = "5m", attempts = 10), dequeue = generation_changed,
                crate = "kf"),
            quote!(impl WebAppController {
                async fn reconcile(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> { Ok(Action::Done) }
                async fn cleanup(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> { Ok(Action::Done) }
                fn error_policy(&self, app: &WebApp, error: &Error, ctx: &Context<WebApp>) -> ErrorPolicy { ErrorPolicy::Backoff }
            }),
        );
        crate::pipeline::tests::snapshot("controller.rs", &crate::pipeline::tests::pretty(out));
    }

    #[test]
    fn controller_with_dependents_should_expand_like_the_snapshot() {
        let out = controller(
            quote!(for = Database, owns(Service(metadata)),
                dependents(password(create_only), service(ready),
                    statefulset(depends_on(password, service), ready = sts_ready),
                    backup(when = has_backup, precondition = paused)),
                finalizer = "db.example.com/volumes", crate = "kf"),
            quote!(impl DatabaseController {
                fn password(&self, db: &Database, ctx: &Context<Database>) -> Secret { Secret::default() }
                fn service(&self, db: &Database, ctx: &Context<Database>) -> Service { Service::default() }
                async fn statefulset(&self, db: &Database, ctx: &Context<Database>) -> Result<StatefulSet, BoxError> { Ok(StatefulSet::default()) }
                fn backup(&self, db: &Database, ctx: &Context<Database>) -> anyhow::Result<CronJob> { Ok(CronJob::default()) }
                fn has_backup(&self, db: &Database) -> bool { true }
                fn status(&self, db: &Database, done: &Reconciled, status: &mut DatabaseStatus) {}
                async fn cleanup(&self, db: Arc<Database>, ctx: &Context<Database>) -> Result<Action, BoxError> { Ok(Action::Done) }
            }),
        );
        crate::pipeline::tests::snapshot(
            "controller_dependents.rs",
            &crate::pipeline::tests::pretty(out),
        );
    }

    #[test]
    fn controller_should_evaluate_a_retry_expression_where_self_is_the_controller() {
        let out = controller(
            quote!(for = WebApp, retry = Self::policy(), dequeue = none),
            quote!(impl WebAppController {
                async fn reconcile(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> { Ok(Action::Done) }
            }),
        );
        let out = crate::pipeline::tests::pretty(out);
        let in_spec = out
            .split_once("impl ::kubeforge::controller::ControllerSpec for WebAppController")
            .map(|(_, spec)| spec.split_whitespace().collect::<String>());
        assert!(
            in_spec.is_some_and(|spec| spec.contains(
                ".configure(|config:::kubeforge::controller::ControllerConfig|{config.retry(Self::policy())})"
            )),
            "{out}"
        );
        assert!(
            out.contains(".dequeue(::kubeforge::retry::DequeueNone)"),
            "{out}"
        );
    }

    #[test]
    fn controller_should_pass_index_functions_and_transforms_to_each_informer() {
        let out = controller(
            quote!(for = Db, indexes(Self::by_app), transform = Self::slim,
                owns(Pod(metadata, indexes(Self::by_node))),
                watches(Secret, map = Self::m, transform = Self::tw)),
            quote!(impl DbController {
                async fn reconcile(&self, db: Arc<Db>, ctx: &Context<Db>) -> Result<Action, Error> { Ok(Action::Done) }
            }),
        );
        let out = crate::pipeline::tests::pretty(out);
        let compact: String = out.split_whitespace().collect();
        for expected in [
            ".index::<__S::Kind>(\"by_app\",cache_fn0).transform::<__S::Kind>(cache_fn1),)",
            ".informer(wiring.informer_defaults.clone().index::<::kubeforge::kube::core::PartialObjectMeta<__K0>,>(\"by_node\",cache_fn2)",
            ".transform::<__K1>(cache_fn3)",
            "cache_fn0:fn(&__S::Kind)->::std::vec::Vec<::std::string::String>,",
            "cache_fn1:fn(&mut__S::Kind),",
            "Self::by_app,Self::slim,Self::by_node,Self::tw,",
        ] {
            assert!(compact.contains(expected), "{expected} in {out}");
        }
    }

    #[test]
    fn controller_should_select_its_primary_kind_and_bound_its_reconciles() {
        let out = controller(
            quote!(for = Db, labels = "tier=db", fields = "metadata.name!=skip", reconcile_timeout = "1m30s"),
            quote!(impl DbController {
                async fn reconcile(&self, db: Arc<Db>, ctx: &Context<Db>) -> Result<Action, Error> { Ok(Action::Done) }
            }),
        );
        let out = crate::pipeline::tests::pretty(out);
        let compact: String = out.split_whitespace().collect();
        for expected in [
            "(&client,namespaces),wiring.informer_defaults.clone().labels(\"tier=db\").fields(\"metadata.name!=skip\"),)",
            ".reconcile_timeout(::core::time::Duration::from_millis(90000u64))",
        ] {
            assert!(compact.contains(expected), "{expected} in {out}");
        }
    }

    #[test]
    fn custom_predicates_of_owned_and_watched_kinds_should_be_passed_as_metadata_fn_pointers() {
        let out = controller(
            quote!(for = Db, predicates(Self::p), owns(Secret(predicates(labels_changed, Self::o))),
                watches(ConfigMap, map = Self::by_config, predicates(Self::w))),
            quote!(impl DbController {
                async fn reconcile(&self, db: Arc<Db>, ctx: &Context<Db>) -> Result<Action, Error> { Ok(Action::Done) }
            }),
        );
        let compact: String = crate::pipeline::tests::pretty(out)
            .split_whitespace()
            .collect();
        let meta =
            "fn(&::kubeforge::kube::api::ObjectMeta,&::kubeforge::kube::api::ObjectMeta,)->bool";
        for expected in [
            format!("predicate0:fn(&__S::Kind,&__S::Kind)->bool,meta_predicate0:{meta},meta_predicate1:{meta},"),
            "::kubeforge::controller::Owns::full().predicate(::kubeforge::controller::LabelsChanged).predicate(meta_predicate0),".to_owned(),
            ".predicate(meta_predicate1),".to_owned(),
            "(wiring,Self::by_config,Self::p,Self::o,Self::w)".to_owned(),
        ] {
            assert!(compact.contains(&expected), "{expected} in {compact}");
        }
    }

    #[test]
    fn controller_should_put_each_chosen_store_in_its_informer_config() {
        let out = controller(
            quote!(for = Db, store = memcached,
                owns(Deployment(store = "redis"), Service, Pod(metadata, any_owner, store = memcached)),
                watches(Secret, map = Self::by_secret, store = memcached),
                watches(ConfigMap, map_async = Self::by_config, store = "redis"),
                watches(Node, map = Self::by_node)),
            quote!(impl DbController {
                async fn reconcile(&self, db: Arc<Db>, ctx: &Context<Db>) -> Result<Action, Error> { Ok(Action::Done) }
            }),
        );
        let out = crate::pipeline::tests::pretty(out);
        let compact: String = out.split_whitespace().collect();
        let kf = "::kubeforge::controller";
        let config =
            |name: &str| format!("wiring.informer_defaults.clone().store_named(\"{name}\")");
        for expected in [
            format!(
                "{kf}::apis_for::<__S::Kind>(&client,namespaces),{},)",
                config("memcached")
            ),
            format!("{kf}::Owns::full().informer({}),", config("redis")),
            format!("{kf}::Owns::full(),"),
            format!(
                "{kf}::Owns::metadata().any_owner().informer({}),",
                config("memcached")
            ),
            format!(
                "&__K3|->::std::vec::Vec<::kubeforge::ObjectKey>{{map0(obj,&cache)}}}}).informer({}),",
                config("memcached")
            ),
            format!("map1(obj,cache.clone())}}).informer({}),", config("redis")),
            "map2(obj,&cache)}}),)".to_owned(),
        ] {
            assert!(compact.contains(&expected), "{expected} in {out}");
        }
        assert_eq!(compact.matches(".informer(").count(), 4, "{out}");

        let out = controller(
            quote!(for = Db, owns(Deployment), watches(Secret, map = Self::by_secret)),
            quote!(impl DbController {
                async fn reconcile(&self, db: Arc<Db>, ctx: &Context<Db>) -> Result<Action, Error> { Ok(Action::Done) }
            }),
        );
        let out = crate::pipeline::tests::pretty(out);
        assert!(
            !out.contains(".informer(") && !out.contains("store_named"),
            "{out}"
        );
    }

    #[test]
    fn controller_should_emit_the_item_and_dummies_next_to_the_errors() {
        let out = controller(
            quote!(for = WebApp),
            quote!(impl WebAppController {
                async fn reconsile(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> { Ok(Action::Done) }
            }),
        );
        let out = crate::pipeline::tests::pretty(out);
        assert!(out.contains("impl WebAppController {"), "{out}");
        assert!(
            out.contains("impl ::kubeforge::controller::Reconciler<WebApp> for WebAppController"),
            "{out}"
        );
        assert!(
            out.contains("impl ::kubeforge::controller::ControllerSpec for WebAppController"),
            "{out}"
        );
        assert!(out.contains("did you mean `reconcile`"), "{out}");
        assert!(!out.contains("unwrap"), "{out}");
        assert!(
            !out.contains("inventory"),
            "no registration of a broken controller: {out}"
        );
    }

    #[test]
    fn default_name_should_be_the_lowercased_kind() {
        let kind: Type = syn::parse_quote!(crate::apps::WebApp);
        assert_eq!(default_name(&kind), "webapp");
    }
}
