//! `#[controller(...)]` on an impl block: parse the arguments, check the methods, expand the
//! `Reconciler` and `ControllerSpec` impls and the RBAC registration.

mod attrs;
mod expand;

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::{FnArg, ImplItem, ImplItemFn, ItemImpl, LitStr, Path, ReturnType, Type};

use crate::errors::{Errors, did_you_mean, misspelling_of};
use crate::model::default_crate;
use attrs::{ControllerArgs, Owned, PredicateArg, Watch};

/// The checked model the expansion works from.
pub struct Model {
    /// The path generated code names kubeforge by (`::kubeforge` unless `crate = "..."`).
    pub krate: Path,
    pub self_ty: Type,
    pub kind: Type,
    pub name: String,
    pub owns: Vec<Owned>,
    pub watches: Vec<Watch>,
    pub concurrency: Option<u64>,
    pub finalizer: Option<LitStr>,
    pub predicates: Vec<PredicateArg>,
    pub error_ty: Type,
    pub reconcile: ImplItemFn,
    pub cleanup: Option<ImplItemFn>,
    pub has_error_policy: bool,
}

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
    let model = check(args, &item, &mut errors);
    let mut out = item.to_token_stream();
    match (model, errors.check()) {
        (Some(model), Ok(())) => out.extend(expand::expand(&model)),
        (_, result) => {
            // Trait impls are rejected, and a dummy could collide with the user's own impl.
            if item.trait_.is_none() {
                out.extend(expand::dummy(&krate, &item, kind.as_ref()));
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

fn check(args: ControllerArgs, item: &ItemImpl, errors: &mut Errors) -> Option<Model> {
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
    let find = |name: &str| find_fn(item, name);
    let misspelled = misspelled_hooks(item, errors);
    let Some(kind) = args.for_kind else {
        errors.at(
            Span::call_site(),
            "#[controller] needs the primary kind: `#[controller(for = MyKind, ...)]`",
        );
        return None;
    };
    let Some(reconcile) = find("reconcile") else {
        if !misspelled.contains(&"reconcile") {
            errors.spanned(
                &item.self_ty,
                "#[controller] needs `async fn reconcile(&self, obj: Arc<Kind>, ctx: &Context<Kind>) -> Result<Action, Error>` in this impl block",
            );
        }
        return None;
    };
    let error_ty = check_method(&reconcile, errors);
    let cleanup = find("cleanup");
    check_cleanup(
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
        krate: args.crate_path.unwrap_or_else(default_crate),
        self_ty: (*item.self_ty).clone(),
        kind,
        name,
        owns: args.owns,
        watches: args.watches,
        concurrency: args.concurrency.map(|n| n.value),
        finalizer: args.finalizer,
        predicates: args.predicates,
        error_ty: error_ty?,
        reconcile,
        cleanup,
        has_error_policy: find("error_policy").is_some(),
    })
}

/// The method `name` of the impl block.
fn find_fn(item: &ItemImpl, name: &str) -> Option<ImplItemFn> {
    item.items.iter().find_map(|i| match i {
        ImplItem::Fn(f) if f.sig.ident == name => Some(f.clone()),
        _ => None,
    })
}

/// `async fn reconsile(&self, ..)` is a typo, not a helper: says so instead of "missing", and
/// returns the hooks it reported.
fn misspelled_hooks(item: &ItemImpl, errors: &mut Errors) -> Vec<&'static str> {
    let mut misspelled = Vec::new();
    for f in item.items.iter().filter_map(|i| match i {
        ImplItem::Fn(f) if f.sig.receiver().is_some() => Some(f),
        _ => None,
    }) {
        let name = f.sig.ident.to_string();
        if let Some(hook) = misspelling_of(&name, HOOKS)
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
    let cleanup_error = check_method(cleanup, errors);
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

/// Checks `async fn name(&self, obj, ctx) -> Result<Action, E>`; returns `E`.
fn check_method(f: &ImplItemFn, errors: &mut Errors) -> Option<Type> {
    let name = f.sig.ident.to_string();
    let shape = format!(
        "`async fn {name}(&self, obj: Arc<Kind>, ctx: &Context<Kind>) -> Result<Action, Error>`"
    );
    if f.sig.asyncness.is_none() {
        errors.at(
            f.sig.fn_token.span,
            format!("`{name}` must be an async fn: {shape}"),
        );
    }
    let receiver_ok = matches!(f.sig.inputs.first(), Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none());
    if !receiver_ok || f.sig.inputs.len() != 3 {
        errors.spanned(
            &f.sig.inputs,
            format!("`{name}` takes `&self`, the object and the context: {shape}"),
        );
    }
    let ReturnType::Type(_, ty) = &f.sig.output else {
        errors.spanned(
            &f.sig,
            format!("`{name}` must return `Result<Action, Error>`: {shape}"),
        );
        return None;
    };
    let error = match &**ty {
        Type::Path(path) => path.path.segments.last().and_then(|last| {
            if last.ident != "Result" {
                return None;
            }
            match &last.arguments {
                syn::PathArguments::AngleBracketed(args) if args.args.len() == 2 => {
                    match &args.args[1] {
                        syn::GenericArgument::Type(t) => Some(t.clone()),
                        _ => None,
                    }
                }
                _ => None,
            }
        }),
        _ => None,
    };
    if error.is_none() {
        errors.spanned(ty, format!("`{name}` must return `Result<Action, YourError>` (spelled out, with both parameters): {shape}"));
    }
    error
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
    fn controller_should_expand_like_the_snapshot() {
        let out = controller(
            quote!(for = WebApp, owns(Deployment, Service, Pod(metadata), ConfigMap(uncached, any_owner)),
                watches(Secret, map = Self::apps_for_secret), watches(Service, map = Self::apps_for_service),
                concurrency = 2, finalizer = "apps.example.com/cleanup",
                predicates(generation_changed, Self::changed), crate = "kf"),
            quote!(impl WebAppController {
                async fn reconcile(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> { Ok(Action::Done) }
                async fn cleanup(&self, app: Arc<WebApp>, ctx: &Context<WebApp>) -> Result<Action, Error> { Ok(Action::Done) }
                fn error_policy(&self, app: &WebApp, error: &Error, ctx: &Context<WebApp>) -> ErrorPolicy { ErrorPolicy::Backoff }
            }),
        );
        crate::pipeline::tests::snapshot("controller.rs", &crate::pipeline::tests::pretty(out));
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
