//! Emits the `Reconciler` and `ControllerSpec` impls and the RBAC registration. No decisions here.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use super::Model;
use super::attrs::PredicateArg;

pub fn expand(model: &Model) -> TokenStream {
    let Model {
        self_ty,
        kind,
        name,
        error_ty,
        ..
    } = model;
    let kf = quote!(::kubeforge);
    let ctx_ty = quote!(#kf::controller::Context<#kind>);
    let action = quote!(#kf::controller::Action);
    let future = quote!(impl ::core::future::Future<Output = ::core::result::Result<#action, Self::Error>> + ::core::marker::Send);

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

    let owns = model.owns.iter().map(|t| {
        quote_spanned! {t.span()=>
            .owns(#kf::controller::api_for::<#t>(client.clone(), namespace), cache.informer_defaults())
        }
    });
    let owns_metadata = model.owns_metadata.iter().map(|t| {
        quote_spanned! {t.span()=>
            .owns(#kf::controller::api_for::<#kf::kube::core::PartialObjectMeta<#t>>(client.clone(), namespace), cache.informer_defaults())
        }
    });
    let owns_uncached = model.owns_uncached.iter().map(|t| {
        quote_spanned! {t.span()=>
            .owns_uncached(#kf::controller::api_for::<#t>(client.clone(), namespace), cache.informer_defaults())
        }
    });
    let watches = model.watches.iter().map(|w| {
        let (t, map) = (&w.kind, &w.map);
        quote_spanned! {map.span()=>
            .watches(
                #kf::controller::api_for::<#t>(client.clone(), namespace),
                cache.informer_defaults(),
                {
                    let cache = cache.clone();
                    move |obj: &#t| -> ::std::vec::Vec<#kf::ObjectKey> { #map(obj, &cache) }
                },
            )
        }
    });
    let predicates = model.predicates.iter().map(|p| match p {
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
            quote!(.with_predicate(#kf::controller::#ty))
        }
        PredicateArg::Custom(path) => quote_spanned! {path.span()=>
            .with_predicate(#path as fn(&#kind, &#kind) -> bool)
        },
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
        .map(|t| quote!(.owned::<#t>()));
    let watched_rules = model.watches.iter().map(|w| {
        let t = &w.kind;
        quote!(.watched::<#t>())
    });

    // The kind must be a kubeforge kind; this assertion puts the error on the user's type.
    let assert_kind = quote_spanned! {kind.span()=>
        const _: fn() = || {
            fn assert_kind<K: #kf::controller::Kind>() {}
            assert_kind::<#kind>();
        };
    };
    let assert_children = model
        .owns
        .iter()
        .chain(&model.owns_metadata)
        .chain(&model.owns_uncached)
        .chain(model.watches.iter().map(|w| &w.kind))
        .map(|t| {
            quote_spanned! {t.span()=>
                const _: fn() = || {
                    fn assert_kind<K: #kf::controller::Kind>() {}
                    assert_kind::<#t>();
                };
            }
        });

    quote! {
        #assert_kind
        #(#assert_children)*

        impl #kf::controller::Reconciler<#kind> for #self_ty {
            type Error = #error_ty;
            #reconcile
            #cleanup
            #error_policy
        }

        impl #kf::controller::ControllerSpec for #self_ty {
            type Kind = #kind;
            const NAME: &'static str = #name;
            const FINALIZER: ::core::option::Option<&'static str> = #finalizer_const;

            fn controller(cache: &#kf::cache::Cache, namespace: ::core::option::Option<&str>) -> #kf::controller::Controller<#kind> {
                let client = cache.client();
                #kf::controller::Controller::new(
                    <Self as #kf::controller::ControllerSpec>::NAME,
                    cache,
                    #kf::controller::api_for::<#kind>(client.clone(), namespace),
                    cache.informer_defaults(),
                )
                #(#owns)*
                #(#owns_metadata)*
                #(#owns_uncached)*
                #(#watches)*
                #(#predicates)*
                .config(#kf::controller::ControllerConfig::default() #concurrency #finalizer)
            }

            fn rbac() -> #kf::rbac::Rules {
                #kf::rbac::Rules::new()
                    .primary::<#kind>(#has_finalizer)
                    #(#owned_rules)*
                    #(#watched_rules)*
                    .events()
                    .leases()
            }
        }

        #kf::__private::inventory::submit! {
            #kf::rbac::ControllerRegistration {
                name: #name,
                rules: <#self_ty as #kf::controller::ControllerSpec>::rbac,
            }
        }
    }
}
