//! Emits the `Reconciler` and `ControllerSpec` impls and the RBAC registration, or their dummies
//! when the macro failed. No decisions here.
//!
//! Every kind the attribute names besides the primary is checked exactly once, where the user
//! named it: the wiring (`ControllerSpec::controller` and `rbac`) is generic over the kinds, and
//! a single `const` instantiates it with the user's types through a bound that fails as a whole
//! (`__IsKind<M>`: two impls, so the compiler reports the bound, not each missing supertrait of
//! `Kind`). A type that is not a kind gives one error at its name, not one per builder call. The
//! primary kind is checked by `ControllerSpec::Kind`'s own bound.

use proc_macro2::{Ident, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ItemImpl, Path, Type};

use super::Model;
use super::attrs::PredicateArg;

/// The kinds named besides the primary, each once (by their tokens), with the type parameter
/// that stands for it in the generic wiring.
struct Kinds<'a> {
    others: Vec<(String, &'a Type, Ident)>,
}

impl<'a> Kinds<'a> {
    fn new(model: &'a Model) -> Self {
        let primary = model.kind.to_token_stream().to_string();
        let mut others: Vec<(String, &Type, Ident)> = Vec::new();
        let named = model
            .owns
            .iter()
            .chain(&model.owns_metadata)
            .chain(&model.owns_uncached)
            .chain(model.watches.iter().map(|w| &w.kind));
        for ty in named {
            let key = ty.to_token_stream().to_string();
            if key != primary && !others.iter().any(|(k, _, _)| *k == key) {
                let param = format_ident!("__K{}", others.len());
                others.push((key, ty, param));
            }
        }
        Kinds { others }
    }

    /// What stands for a type of the model in the generic wiring: `__K<n>`, or `__S::Kind` for
    /// the primary (the only type of the model `new` does not collect).
    fn of(&self, ty: &Type) -> TokenStream {
        let key = ty.to_token_stream().to_string();
        self.others.iter().find(|(k, _, _)| *k == key).map_or_else(
            || quote!(__S::Kind),
            |(_, _, param)| param.to_token_stream(),
        )
    }
}

pub fn expand(model: &Model) -> TokenStream {
    let Model {
        krate: kf,
        self_ty,
        kind,
        name,
        error_ty,
        ..
    } = model;
    let kinds = Kinds::new(model);
    let ctx_ty = quote!(#kf::controller::Context<#kind>);
    let action = quote!(#kf::controller::Action);
    let future = quote!(impl ::core::future::Future<Output = ::core::result::Result<#action, Self::Error>> + ::core::marker::Send);
    let spec = quote!(#kf::controller::ControllerSpec);
    let kind_trait = quote!(#kf::controller::Kind);
    let cache_ty = quote!(#kf::cache::Cache);
    let keys = quote!(::std::vec::Vec<#kf::ObjectKey>);

    // Forward to the user's inherent methods; spans point at their signatures so type errors
    // (wrong parameter types, a future that is not Send) show up there.
    let reconcile_span = model.reconcile.sig.span();
    let reconcile = quote_spanned! {reconcile_span=>
        fn reconcile(&self, obj: ::std::sync::Arc<#kind>, ctx: &#ctx_ty) -> #future {
            <#self_ty>::reconcile(self, obj, ctx)
        }
    };
    let cleanup = model.cleanup.as_ref().map(|f| {
        let span = f.sig.span();
        quote_spanned! {span=>
            fn cleanup(&self, obj: ::std::sync::Arc<#kind>, ctx: &#ctx_ty) -> #future {
                <#self_ty>::cleanup(self, obj, ctx)
            }
        }
    });
    let error_policy = model.has_error_policy.then(|| {
        quote! {
            fn error_policy(&self, obj: &#kind, error: &Self::Error, ctx: &#ctx_ty) -> #kf::controller::ErrorPolicy {
                <#self_ty>::error_policy(self, obj, error, ctx)
            }
        }
    });

    // The generic wiring: one type parameter per kind besides the primary; mappers and custom
    // predicates come in as function pointers from the concrete side.
    let params: Vec<&Ident> = kinds.others.iter().map(|(_, _, p)| p).collect();
    let markers: Vec<Ident> = (0..params.len()).map(|i| format_ident!("__M{i}")).collect();
    // The user's types, at their spans: where a type that is not a kind is reported.
    let user_kinds: Vec<&Type> = kinds.others.iter().map(|(_, ty, _)| *ty).collect();
    let mapper_args: Vec<Ident> = (0..model.watches.len())
        .map(|i| format_ident!("map{i}"))
        .collect();
    let mapper_tys: Vec<TokenStream> = model
        .watches
        .iter()
        .map(|w| {
            let w = kinds.of(&w.kind);
            quote!(fn(&#w, &#cache_ty) -> #keys)
        })
        .collect();
    let mapper_values = model.watches.iter().map(|w| &w.map);
    let custom_predicates: Vec<&Path> = model
        .predicates
        .iter()
        .filter_map(|p| match p {
            PredicateArg::Custom(path) => Some(path),
            PredicateArg::Builtin(_) => None,
        })
        .collect();
    let predicate_args: Vec<Ident> = (0..custom_predicates.len())
        .map(|i| format_ident!("predicate{i}"))
        .collect();
    let predicate_ty = quote!(fn(&__S::Kind, &__S::Kind) -> bool);
    let predicate_tys = vec![predicate_ty; custom_predicates.len()];

    let owns = model.owns.iter().map(|t| {
        let t = kinds.of(t);
        quote! {
            .owns(#kf::controller::api_for::<#t>(client.clone(), namespace), cache.informer_defaults())
        }
    });
    let owns_metadata = model.owns_metadata.iter().map(|t| {
        let t = kinds.of(t);
        quote! {
            .owns(#kf::controller::api_for::<#kf::kube::core::PartialObjectMeta<#t>>(client.clone(), namespace), cache.informer_defaults())
        }
    });
    let owns_uncached = model.owns_uncached.iter().map(|t| {
        let t = kinds.of(t);
        quote! {
            .owns_uncached(#kf::controller::api_for::<#t>(client.clone(), namespace), cache.informer_defaults())
        }
    });
    let watches = model.watches.iter().zip(&mapper_args).map(|(w, map)| {
        let t = kinds.of(&w.kind);
        quote! {
            .watches(
                #kf::controller::api_for::<#t>(client.clone(), namespace),
                cache.informer_defaults(),
                {
                    let cache = cache.clone();
                    move |obj: &#t| -> #keys { #map(obj, &cache) }
                },
            )
        }
    });
    let mut custom = predicate_args.iter();
    let predicates = model.predicates.iter().filter_map(|p| match p {
        PredicateArg::Builtin(ident) => {
            let ty = format_ident!(
                "{}",
                ident
                    .to_string()
                    .split('_')
                    .map(|w| {
                        let mut c = w.chars();
                        c.next().map_or_else(String::new, |f| {
                            f.to_uppercase().collect::<String>() + c.as_str()
                        })
                    })
                    .collect::<String>(),
                span = ident.span()
            );
            Some(quote!(.with_predicate(#kf::controller::#ty)))
        }
        // One argument per custom predicate, in order.
        PredicateArg::Custom(_) => custom.next().map(|arg| quote!(.with_predicate(#arg))),
    });
    let concurrency = model.concurrency.as_ref().map(|n| quote!(.concurrency(#n)));
    let finalizer = model.finalizer.as_ref().map(|f| quote!(.finalizer(#f)));
    let has_finalizer = model.finalizer.is_some();
    let finalizer_const = match &model.finalizer {
        Some(f) => quote!(::core::option::Option::Some(#f)),
        None => quote!(::core::option::Option::None),
    };

    let owned_rules = model
        .owns
        .iter()
        .chain(&model.owns_metadata)
        .chain(&model.owns_uncached)
        .map(|t| {
            let t = kinds.of(t);
            quote!(.owned::<#t>())
        });
    let watched_rules = model.watches.iter().map(|w| {
        let t = kinds.of(&w.kind);
        quote!(.watched::<#t>())
    });

    quote! {
        #[automatically_derived]
        impl #kf::controller::Reconciler<#kind> for #self_ty {
            type Error = #error_ty;
            #reconcile
            #cleanup
            #error_policy
        }

        const _: () = {
            #[diagnostic::on_unimplemented(
                message = "`{Self}` is not a Kubernetes kind kubeforge can watch",
                label = "not a Kubernetes kind",
                note = "name the type #[kubeforge::custom_resource(kind = \"...\")] generates (not its spec struct), or a k8s-openapi resource such as `ConfigMap`",
                note = "a kind implements `kube::Resource<DynamicType = ()>` with a `Scoped` scope, `Clone`, `Debug`, `Serialize`, `DeserializeOwned`, `Send` and `Sync`"
            )]
            trait __IsKind<M>: #kind_trait {}
            trait __Unimplemented {}
            impl<T: #kind_trait> __IsKind<()> for T {}
            // Never holds; its only job is to make `T: __IsKind<_>` a choice between two impls,
            // which the compiler reports as one unsatisfied bound.
            impl<T: #kind_trait + __Unimplemented> __IsKind<u8> for T {}

            struct __Wiring<__S: #spec, #(#params),*> {
                controller: fn(&#cache_ty, ::core::option::Option<&str>, #(#mapper_tys,)* #(#predicate_tys,)*) -> #kf::controller::Controller<__S::Kind>,
                rbac: fn() -> #kf::rbac::Rules,
                kinds: ::core::marker::PhantomData<fn() -> (#(#params,)*)>,
            }

            fn __controller<__S: #spec, #(#params: #kind_trait),*>(
                cache: &#cache_ty,
                namespace: ::core::option::Option<&str>,
                #(#mapper_args: #mapper_tys,)*
                #(#predicate_args: #predicate_tys,)*
            ) -> #kf::controller::Controller<__S::Kind> {
                let client = cache.client();
                #kf::controller::Controller::new(
                    <__S as #spec>::NAME,
                    cache,
                    #kf::controller::api_for::<__S::Kind>(client.clone(), namespace),
                    cache.informer_defaults(),
                )
                #(#owns)*
                #(#owns_metadata)*
                #(#owns_uncached)*
                #(#watches)*
                #(#predicates)*
                .config(#kf::controller::ControllerConfig::default() #concurrency #finalizer)
            }

            fn __rbac<__S: #spec, #(#params: #kind_trait),*>() -> #kf::rbac::Rules {
                #kf::rbac::Rules::new()
                    .primary::<__S::Kind>(#has_finalizer)
                    #(#owned_rules)*
                    #(#watched_rules)*
                    .events()
                    .leases()
            }

            const fn __wiring<__S: #spec, #(#params: __IsKind<#markers>, #markers),*>() -> __Wiring<__S, #(#params),*> {
                __Wiring {
                    controller: __controller::<__S, #(#params),*>,
                    rbac: __rbac::<__S, #(#params),*>,
                    kinds: ::core::marker::PhantomData,
                }
            }

            // The one place the user's kinds meet the wiring's bounds.
            const __WIRING: __Wiring<#self_ty, #(#user_kinds),*> = __wiring::<#self_ty, #(#user_kinds, _),*>();

            #[automatically_derived]
            impl #spec for #self_ty {
                type Kind = #kind;
                const NAME: &'static str = #name;
                const FINALIZER: ::core::option::Option<&'static str> = #finalizer_const;

                fn controller(cache: &#cache_ty, namespace: ::core::option::Option<&str>) -> #kf::controller::Controller<Self::Kind> {
                    (__WIRING.controller)(cache, namespace, #(#mapper_values,)* #(#custom_predicates,)*)
                }

                fn rbac() -> #kf::rbac::Rules {
                    (__WIRING.rbac)()
                }
            }
        };

        #kf::__private::inventory::submit! {
            #kf::rbac::ControllerRegistration {
                name: #name,
                rules: <#self_ty as #kf::controller::ControllerSpec>::rbac,
            }
        }
    }
}

/// On errors: the traits implemented with inert bodies (a reconcile that never finishes, an
/// unwired controller, no RBAC rules), so code using the controller
/// (`Manager::controller(MyController)`) compiles and only the macro's errors are reported; the
/// `compile_error!`s beside them keep the program from ever running. The
/// kind is the user's when known (a placeholder kind without `for = ...`).
pub fn dummy(kf: &Path, item: &ItemImpl, kind: Option<&Type>) -> TokenStream {
    // A generic impl block is an error of its own; without its generics a dummy cannot be named.
    if !item.generics.params.is_empty() {
        return TokenStream::new();
    }
    let self_ty = &item.self_ty;
    let kind = kind.map_or_else(
        || quote!(#kf::k8s_openapi::api::core::v1::ConfigMap),
        ToTokens::to_token_stream,
    );
    quote! {
        #[automatically_derived]
        impl #kf::controller::Reconciler<#kind> for #self_ty {
            type Error = ::core::convert::Infallible;
            fn reconcile(
                &self,
                _: ::std::sync::Arc<#kind>,
                _: &#kf::controller::Context<#kind>,
            ) -> impl ::core::future::Future<Output = ::core::result::Result<#kf::controller::Action, Self::Error>> + ::core::marker::Send {
                ::core::future::pending()
            }
        }

        #[automatically_derived]
        impl #kf::controller::ControllerSpec for #self_ty {
            type Kind = #kind;
            const NAME: &'static str = "";
            const FINALIZER: ::core::option::Option<&'static str> = ::core::option::Option::None;
            fn controller(cache: &#kf::cache::Cache, namespace: ::core::option::Option<&str>) -> #kf::controller::Controller<Self::Kind> {
                #kf::controller::Controller::new(
                    Self::NAME,
                    cache,
                    #kf::controller::api_for(cache.client(), namespace),
                    cache.informer_defaults(),
                )
            }
            fn rbac() -> #kf::rbac::Rules {
                #kf::rbac::Rules::new()
            }
        }
    }
}
