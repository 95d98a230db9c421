//! Emits the `Reconciler` and `ControllerSpec` impls (a watcher's `Watcher` and `WatcherSpec`)
//! and the RBAC registration, or their dummies when the macro failed. No decisions here; one
//! function per generated item.
//!
//! Every kind the attribute names besides the primary is checked exactly once, where the user
//! named it: the wiring (`ControllerSpec::controller` and `rbac`) is generic over the kinds, and
//! a single `const` instantiates it with the user's types through a bound that fails as a whole
//! (`__IsKind<M>`: two impls, so the compiler reports the bound, not each missing supertrait of
//! `Kind`). A type that is not a kind gives one error at its name, not one per builder call. The
//! primary kind is checked by `ControllerSpec::Kind`'s own bound.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ImplItemFn, ItemImpl, LitStr, Path, Type};

use super::attrs::{DequeueArg, PredicateArg, Select, Weight};
use super::watcher::WatcherModel;
use super::{Model, RetryArg};
use crate::keys::Keyed;

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
            .map(|o| &o.kind)
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

    /// The type parameters of the generic wiring.
    fn params(&self) -> Vec<&Ident> {
        self.others.iter().map(|(_, _, p)| p).collect()
    }
}

/// The model with what every generated item needs.
struct Expander<'a> {
    model: &'a Model,
    kf: &'a Path,
    kinds: Kinds<'a>,
    /// The argument names of the mappers and custom predicates the wiring takes, in order.
    mapper_args: Vec<Ident>,
    /// The primary's custom predicates, then those of the owned and watched kinds.
    predicate_args: Vec<Ident>,
    /// The custom predicates' argument names of each owned kind, then of each watched kind.
    owned_predicate_args: Vec<Vec<Ident>>,
    watched_predicate_args: Vec<Vec<Ident>>,
    /// The index functions and transforms of every source, passed like the predicates.
    cache_fns: CacheFns,
    /// The dependents through the generic wiring (see `dependents::Expansion`).
    dependents: super::dependents::Expansion,
}

pub fn expand(model: &Model) -> TokenStream {
    let custom = model
        .predicates
        .iter()
        .filter(|p| matches!(p, PredicateArg::Custom(_)))
        .count();
    let kf = &model.krate;
    let kinds = Kinds::new(model);
    let dependents = super::dependents::expansion(
        &model.krate,
        &model.kind,
        &model.self_ty,
        &model.dependents,
        model.field_manager.as_ref(),
        &|ty| kinds.of(ty),
    );
    let mut next = 0;
    let mut args = |n: usize| -> Vec<Ident> {
        let out = (next..next + n)
            .map(|i| format_ident!("meta_predicate{i}"))
            .collect();
        next += n;
        out
    };
    let owned_predicate_args: Vec<Vec<Ident>> = model
        .owns
        .iter()
        .map(|o| args(o.select.custom.len()))
        .collect();
    let watched_predicate_args: Vec<Vec<Ident>> = model
        .watches
        .iter()
        .map(|w| args(w.select.custom.len()))
        .collect();
    let predicate_args = (0..custom)
        .map(|i| format_ident!("predicate{i}"))
        .chain(owned_predicate_args.iter().flatten().cloned())
        .chain(watched_predicate_args.iter().flatten().cloned())
        .collect();
    let cache_fns = CacheFns::new(model, &kinds);
    let ex = Expander {
        model,
        kf: &model.krate,
        kinds,
        mapper_args: (0..model.watches.len())
            .map(|i| format_ident!("map{i}"))
            .collect(),
        predicate_args,
        owned_predicate_args,
        watched_predicate_args,
        cache_fns,
        dependents,
    };
    let reconciler = ex.reconciler_impl();
    let wiring = ex.wiring();
    let spec = quote!(#kf::controller::ControllerSpec);
    let registration = registration(&model.krate, &model.self_ty, &model.name, &spec);
    if model.dependents.is_empty() {
        quote! {
            #reconciler
            const _: () = { #wiring };
            #registration
        }
    } else {
        // With dependents the reconciler goes inside the block: its `reconcile` builds them
        // through the generic wiring.
        quote! {
            const _: () = { #reconciler #wiring };
            #registration
        }
    }
}

impl Expander<'_> {
    /// `impl Reconciler<Kind>`: forwards to the user's inherent methods; spans point at their
    /// signatures so type errors (wrong parameter types, a future that is not Send) show there.
    fn reconciler_impl(&self) -> TokenStream {
        let Model {
            self_ty,
            kind,
            error_ty,
            ..
        } = self.model;
        let kf = self.kf;
        let ctx_ty = quote!(#kf::controller::Context<#kind>);
        let action = quote!(#kf::controller::Action);
        let future = quote!(impl ::core::future::Future<Output = ::core::result::Result<#action, Self::Error>> + ::core::marker::Send);
        let reconcile = match self.model.dependents.is_empty() {
            true => {
                let span = self
                    .model
                    .reconcile
                    .as_ref()
                    .map_or_else(Span::call_site, |r| r.sig.span());
                quote_spanned! {span=>
                    fn reconcile(&self, obj: ::std::sync::Arc<#kind>, ctx: &#ctx_ty) -> #future {
                        <#self_ty>::reconcile(self, obj, ctx)
                    }
                }
            }
            false => self.dependents_reconcile(&ctx_ty, &future),
        };
        let cleanup = self.model.cleanup.as_ref().map(|f| {
            let span = f.sig.span();
            quote_spanned! {span=>
                fn cleanup(&self, obj: ::std::sync::Arc<#kind>, ctx: &#ctx_ty) -> #future {
                    <#self_ty>::cleanup(self, obj, ctx)
                }
            }
        });
        let error_policy = self.model.has_error_policy.then(|| {
            quote! {
                fn error_policy(&self, obj: &#kind, error: &Self::Error, ctx: &#ctx_ty) -> #kf::controller::ErrorPolicy {
                    <#self_ty>::error_policy(self, obj, error, ctx)
                }
            }
        });
        quote! {
            #[automatically_derived]
            impl #kf::controller::Reconciler<#kind> for #self_ty {
                type Error = #error_ty;
                #reconcile
                #cleanup
                #error_policy
            }
        }
    }

    /// `reconcile` with dependents: they run first (one `Dependents` per controller type,
    /// built on first use), the status is written with their conditions (and the `status`
    /// method's fields), then the user's `reconcile` if there is one, seeing what they stored.
    fn dependents_reconcile(&self, ctx_ty: &TokenStream, future: &TokenStream) -> TokenStream {
        let Model { self_ty, kind, .. } = self.model;
        let kf = self.kf;
        let args = &self.dependents.args;
        let custom = if self.model.has_status_fn {
            quote!(|done: &#kf::dependents::Reconciled, status: &mut _| <#self_ty>::status(self, &obj, done, status))
        } else {
            quote!(|_: &#kf::dependents::Reconciled, _: &mut _| {})
        };
        // A primary being deleted (held by the dependents' finalizer) is not reconciled further;
        // while a dependent conflicts, the primary is checked again after the recheck interval.
        let then = match &self.model.reconcile {
            Some(reconcile) => {
                let span = reconcile.sig.span();
                quote_spanned! {span=>
                    if done.owner_deleted() {
                        return ::core::result::Result::Ok(#kf::controller::Action::Done);
                    }
                    let recheck = done.action();
                    ctx.__set_dependents(done);
                    <#self_ty>::reconcile(self, obj, ctx)
                        .await
                        .map(|action| #kf::dependents::__or_recheck(action, recheck))
                }
            }
            None => quote! {
                ::core::result::Result::Ok(done.action())
            },
        };
        let span = self
            .model
            .reconcile
            .as_ref()
            .map_or_else(Span::call_site, |r| r.sig.span());
        let run = quote_spanned! {span=>
            let done = dependents.run(self, &obj, ctx, #custom).await?;
        };
        quote! {
            fn reconcile(&self, obj: ::std::sync::Arc<#kind>, ctx: &#ctx_ty) -> #future {
                static DEPENDENTS: ::std::sync::OnceLock<#kf::dependents::Dependents<#kind, #self_ty>> =
                    ::std::sync::OnceLock::new();
                async move {
                    let dependents = DEPENDENTS.get_or_init(|| (__WIRING.dependents)(#(#args),*));
                    #run
                    #then
                }
            }
        }
    }

    /// `__Wiring`'s `dependents` field, the generic `__dependents` (with the async methods'
    /// helpers) and the field's initializer; nothing without dependents.
    fn dependents_wiring(&self) -> (TokenStream, TokenStream, TokenStream) {
        if self.model.dependents.is_empty() {
            return Default::default();
        }
        let kf = self.kf;
        let spec = quote!(#kf::controller::ControllerSpec);
        let kind_trait = quote!(#kf::controller::Kind);
        let kinds = self.kinds.params();
        let super::dependents::Expansion {
            pointer_tys,
            params,
            body,
            helpers,
            ..
        } = &self.dependents;
        let writable = self.writable_children();
        let built = quote!(#kf::dependents::Dependents<__S::Kind, __S>);
        let field = quote!(dependents: fn(#(#pointer_tys),*) -> #built,);
        let function = quote! {
            #helpers
            fn __dependents<__S: #spec, #(#kinds: #kind_trait),*>(#(#params: #pointer_tys),*) -> #built #writable {
                #body
            }
        };
        let init = quote!(dependents: __dependents::<__S, #(#kinds),*>,);
        (field, function, init)
    }

    /// `where` the dependents' children are `Writable` (nothing without dependents).
    fn writable_children(&self) -> TokenStream {
        let children = &self.dependents.children;
        if children.is_empty() {
            return TokenStream::new();
        }
        let kf = self.kf;
        quote!(where #(#children: #kf::views::Writable),*)
    }

    /// `where` the primary is `Writable`, when it is also a dependent's child (the other
    /// children are `__IsChild` parameters of `__wiring`).
    fn writable_primary(&self) -> TokenStream {
        let kf = self.kf;
        let primary = quote!(__S::Kind).to_string();
        if self
            .dependents
            .children
            .iter()
            .any(|c| c.to_string() == primary)
        {
            quote!(where __S::Kind: #kf::views::Writable)
        } else {
            TokenStream::new()
        }
    }

    /// The types of the mappers and custom predicates, as the generic wiring takes them.
    fn fn_pointer_types(&self) -> (Vec<TokenStream>, Vec<TokenStream>) {
        let kf = self.kf;
        let mappers = self
            .model
            .watches
            .iter()
            .map(|watch| {
                let w = self.kinds.of(&watch.kind);
                let keys = quote!(::std::vec::Vec<#kf::ObjectKey>);
                if watch.is_async {
                    quote!(fn(::std::sync::Arc<#w>, #kf::cache::Cache) -> ::core::pin::Pin<::std::boxed::Box<dyn ::core::future::Future<Output = #keys> + ::core::marker::Send + 'static>>)
                } else {
                    quote!(fn(&#w, &#kf::cache::Cache) -> #keys)
                }
            })
            .collect();
        let primary = quote!(fn(&__S::Kind, &__S::Kind) -> bool);
        let meta = quote!(fn(&#kf::kube::api::ObjectMeta, &#kf::kube::api::ObjectMeta) -> bool);
        let metas = self.owned_predicate_args.iter().flatten().count()
            + self.watched_predicate_args.iter().flatten().count();
        let customs = self.predicate_args.len() - metas;
        let predicates = std::iter::repeat_n(primary, customs)
            .chain(std::iter::repeat_n(meta, metas))
            .collect();
        (mappers, predicates)
    }

    /// Everything inside the `const _: () = { .. }` block: the kind check, the generic wiring,
    /// its one instantiation with the user's kinds, and `impl ControllerSpec`.
    fn wiring(&self) -> TokenStream {
        let kf = self.kf;
        let spec = quote!(#kf::controller::ControllerSpec);
        let wiring_ty = quote!(#kf::controller::Wiring);
        let params = self.kinds.params();
        let markers: Vec<Ident> = (0..params.len()).map(|i| format_ident!("__M{i}")).collect();
        // The user's types, at their spans: where a type that is not a kind is reported.
        let user_kinds: Vec<&Type> = self.kinds.others.iter().map(|(_, ty, _)| *ty).collect();
        let (mapper_tys, predicate_tys) = self.fn_pointer_types();
        let cache_tys = &self.cache_fns.tys;
        let is_kind = self.is_kind_trait();
        let controller_fn = self.controller_fn();
        let rbac_fn = self.rbac_fn();
        let spec_impl = self.spec_impl();
        let self_ty = &self.model.self_ty;
        let (dependents_field, dependents_fn, dependents_init) = self.dependents_wiring();
        let writable = self.writable_primary();
        // A dependent's child is written: `__IsChild` (a kind that is `Writable`), one error
        // for a type that is not a kind and for a read-only view alike.
        let checks: Vec<TokenStream> = params
            .iter()
            .map(|param| {
                let child = self
                    .dependents
                    .children
                    .iter()
                    .any(|c| c.to_string() == param.to_string());
                if child {
                    quote!(__IsChild)
                } else {
                    quote!(__IsKind)
                }
            })
            .collect();
        quote! {
            #is_kind

            struct __Wiring<__S: #spec, #(#params),*> {
                controller: fn(&#wiring_ty, #(#mapper_tys,)* #(#predicate_tys,)* #(#cache_tys,)*) -> #kf::controller::Controller<__S::Kind>,
                rbac: fn() -> #kf::rbac::Rules,
                #dependents_field
                kinds: ::core::marker::PhantomData<fn() -> (#(#params,)*)>,
            }

            #controller_fn
            #rbac_fn
            #dependents_fn

            const fn __wiring<__S: #spec, #(#params: #checks<#markers>, #markers),*>() -> __Wiring<__S, #(#params),*> #writable {
                __Wiring {
                    controller: __controller::<__S, #(#params),*>,
                    rbac: __rbac::<__S, #(#params),*>,
                    #dependents_init
                    kinds: ::core::marker::PhantomData,
                }
            }

            // The one place the user's kinds meet the wiring's bounds.
            const __WIRING: __Wiring<#self_ty, #(#user_kinds),*> = __wiring::<#self_ty, #(#user_kinds, _),*>();

            #spec_impl
        }
    }

    /// `__IsKind<M>`: "is a kind" as one bound with one error message.
    fn is_kind_trait(&self) -> TokenStream {
        let kind_trait = {
            let kf = self.kf;
            quote!(#kf::controller::Kind)
        };
        let writable = {
            let kf = self.kf;
            quote!(#kf::views::Writable)
        };
        let is_child = (!self.dependents.children.is_empty()).then(|| {
            quote! {
            #[diagnostic::on_unimplemented(
                message = "`{Self}` is not a Kubernetes kind kubeforge can write",
                label = "not a writable Kubernetes kind",
                note = "a dependent's child is a full kind kubeforge applies: a type #[kubeforge::custom_resource(kind = \"...\")] generates, a k8s-openapi resource such as `ConfigMap`, or a kind written by hand with `impl kubeforge::views::Writable for MyKind {{}}`",
                note = "a #[kubeforge::view] is read-only (writing it would erase the fields it lacks): build the full type it views"
            )]
            trait __IsChild<M>: __IsKind<M> + #writable {}
            impl<T: #kind_trait + #writable> __IsChild<()> for T {}
            impl<T: #kind_trait + #writable + __Unimplemented> __IsChild<u8> for T {}
            }
        });
        quote! {
            #[diagnostic::on_unimplemented(
                message = "`{Self}` is not a Kubernetes kind kubeforge can watch",
                label = "not a Kubernetes kind",
                note = "name the type #[kubeforge::custom_resource(kind = \"...\")] generates (not its spec struct), or a k8s-openapi resource such as `ConfigMap`",
                note = "a kind implements `kube::Resource<DynamicType = ()>` with a `Scoped` scope, `Clone`, `Debug`, `Serialize`, `DeserializeOwned`, `Send` and `Sync`",
                note = "a #[kubeforge::view] is a kind when it has `metadata: ObjectMeta`; a view without it is a part of one"
            )]
            trait __IsKind<M>: #kind_trait {}
            trait __Unimplemented {}
            impl<T: #kind_trait> __IsKind<()> for T {}
            // Never holds; its only job is to make `T: __IsKind<_>` a choice between two impls,
            // which the compiler reports as one unsatisfied bound.
            impl<T: #kind_trait + __Unimplemented> __IsKind<u8> for T {}

            #is_child
        }
    }

    /// `__controller`: the builder calls, generic over the kinds.
    fn controller_fn(&self) -> TokenStream {
        let kf = self.kf;
        let spec = quote!(#kf::controller::ControllerSpec);
        let kind_trait = quote!(#kf::controller::Kind);
        let params = self.kinds.params();
        let (mapper_tys, predicate_tys) = self.fn_pointer_types();
        let (mapper_args, predicate_args) = (&self.mapper_args, &self.predicate_args);
        let (cache_args, cache_tys) = (&self.cache_fns.args, &self.cache_fns.tys);
        let owns = self.owns_calls();
        let watches = self.watches_calls();
        let predicates = self.predicate_calls();
        let concurrency = self.model.concurrency.map(|n| {
            let n = proc_macro2::Literal::u64_unsuffixed(n);
            quote!(.concurrency(#n))
        });
        let finalizer = self
            .model
            .finalizer
            .as_ref()
            .map(|f| quote!(.finalizer(#f)));
        let retry = self.exponential_call();
        let dequeue = dequeue_call(kf, self.model.dequeue);
        let primary_informer = {
            let config = informer_config(self.model.store.as_ref());
            let labels = self
                .model
                .primary
                .labels
                .as_ref()
                .map(|l| quote!(.labels(#l)));
            let fields = self
                .model
                .primary
                .fields
                .as_ref()
                .map(|f| quote!(.fields(#f)));
            let cache = &self.cache_fns.primary;
            quote!(#config #labels #fields #cache)
        };
        let reconcile_timeout = self
            .model
            .reconcile_timeout_ms
            .map(|ms| quote!(.reconcile_timeout(::core::time::Duration::from_millis(#ms))));
        let every = self
            .model
            .every_ms
            .map(|ms| quote!(.every(::core::time::Duration::from_millis(#ms))));
        let reconcile_on = self.model.reconcile_on.as_ref().map(|path| {
            // Spanned at the user's path: a function of the wrong type is reported there.
            let call = quote::quote_spanned!(syn::spanned::Spanned::span(path)=> #path(wiring));
            quote!(.reconcile_on(#call))
        });
        quote! {
            fn __controller<__S: #spec, #(#params: #kind_trait),*>(
                wiring: &#kf::controller::Wiring,
                #(#mapper_args: #mapper_tys,)*
                #(#predicate_args: #predicate_tys,)*
                #(#cache_args: #cache_tys,)*
            ) -> #kf::controller::Controller<__S::Kind> {
                let client = wiring.cache().client();
                let namespaces = &wiring.namespaces;
                #kf::controller::Controller::new(
                    <__S as #spec>::NAME,
                    wiring,
                    #kf::controller::apis_for::<__S::Kind>(&client, namespaces),
                    #primary_informer,
                )
                #(#owns)*
                #(#watches)*
                #(#predicates)*
                #every
                #reconcile_on
                .config(#kf::controller::ControllerConfig::default() #concurrency #reconcile_timeout #finalizer #retry #dequeue)
            }
        }
    }

    /// `.retry(ExponentialRetry::new(base, max, attempts))` for `retry = exponential(..)`.
    fn exponential_call(&self) -> Option<TokenStream> {
        match &self.model.retry {
            Some(retry @ RetryArg::Exponential { .. }) => Some(retry_call(self.kf, retry)),
            _ => None,
        }
    }

    /// `.retry(<expression>)` for `retry = <expression>`, after the wiring's options, in
    /// `ControllerSpec::controller`: the expression is the user's, so `Self` in it must be the
    /// controller.
    fn retry_expr_call(&self) -> Option<TokenStream> {
        let kf = self.kf;
        let retry = match &self.model.retry {
            Some(retry @ RetryArg::Expr(_)) => retry_call(kf, retry),
            _ => return None,
        };
        Some(quote!(.configure(|config: #kf::controller::ControllerConfig| config #retry)))
    }

    /// `.owns_full | owns_metadata | owns_uncached(api, Owns::full() | metadata() | uncached()
    /// [.any_owner()] [.informer(..)])` per owned kind; `.informer(..)` only with `store = ..`.
    fn owns_calls(&self) -> Vec<TokenStream> {
        let kf = self.kf;
        self.model
            .owns
            .iter()
            .zip(&self.owned_predicate_args)
            .zip(&self.cache_fns.owned)
            .map(|((owned, custom), cache)| {
                let t = self.kinds.of(&owned.kind);
                // The form of the weight: compiles one kind of informer for the child, where
                // `owns` (which chooses at run time) would compile three.
                let (weight, owns) = match owned.weight {
                    Weight::Full => (quote!(full), quote!(owns_full)),
                    Weight::Metadata => (quote!(metadata), quote!(owns_metadata)),
                    Weight::Uncached => (quote!(uncached), quote!(owns_uncached)),
                };
                let any_owner = owned.any_owner.then(|| quote!(.any_owner()));
                let informer = select_calls(kf, owned.store.as_ref(), &owned.select, custom, cache);
                quote! {
                    .#owns(
                        #kf::controller::apis_for::<#t>(&client, namespaces),
                        #kf::controller::Owns::#weight() #any_owner #informer,
                    )
                }
            })
            .collect()
    }

    /// `.watches(api, Watches::map(..) [.informer(..)])` per watched kind; the mapper gets the
    /// cache; `.informer(..)` only with `store = ..`.
    fn watches_calls(&self) -> Vec<TokenStream> {
        let kf = self.kf;
        let keys = quote!(::std::vec::Vec<#kf::ObjectKey>);
        self.model
            .watches
            .iter()
            .zip(&self.mapper_args)
            .zip(&self.watched_predicate_args)
            .zip(&self.cache_fns.watched)
            .map(|(((w, map), custom), cache)| {
                let t = self.kinds.of(&w.kind);
                let informer = select_calls(kf, w.store.as_ref(), &w.select, custom, cache);
                let watches = if w.is_async {
                    quote! {
                        #kf::controller::Watches::map_async({
                            let cache = wiring.cache().clone();
                            move |obj: ::std::sync::Arc<#t>| #map(obj, cache.clone())
                        })
                    }
                } else {
                    quote! {
                        #kf::controller::Watches::map({
                            let cache = wiring.cache().clone();
                            move |obj: &#t| -> #keys { #map(obj, &cache) }
                        })
                    }
                };
                quote! {
                    .watches(
                        #kf::controller::apis_for::<#t>(&client, namespaces),
                        #watches #informer,
                    )
                }
            })
            .collect()
    }

    /// `.predicate(..)` per predicate: built-ins by their type, custom ones from the arguments.
    fn predicate_calls(&self) -> Vec<TokenStream> {
        let kf = self.kf;
        let mut custom = self.predicate_args.iter();
        self.model
            .predicates
            .iter()
            .filter_map(|p| match p {
                PredicateArg::Builtin(ident) => {
                    let ty =
                        format_ident!("{}", camel_case(&ident.to_string()), span = ident.span());
                    Some(quote!(.predicate(#kf::controller::#ty)))
                }
                // One argument per custom predicate, in order.
                PredicateArg::Custom(_) => custom.next().map(|arg| quote!(.predicate(#arg))),
            })
            .collect()
    }

    /// `__rbac`: the rules the wiring needs, generic over the kinds.
    fn rbac_fn(&self) -> TokenStream {
        let kf = self.kf;
        let spec = quote!(#kf::controller::ControllerSpec);
        let kind_trait = quote!(#kf::controller::Kind);
        let params = self.kinds.params();
        // Owned children get `blockOwnerDeletion`, which needs `update` on the owner's finalizers.
        let has_finalizer = self.model.finalizer.is_some() || !self.model.owns.is_empty();
        let owned = self.model.owns.iter().map(|o| {
            let t = self.kinds.of(&o.kind);
            quote!(.owned::<#t>())
        });
        let watched = self.model.watches.iter().map(|w| {
            let t = self.kinds.of(&w.kind);
            quote!(.watched::<#t>())
        });
        let extra = extra_rules(kf, &self.model.rbac);
        quote! {
            fn __rbac<__S: #spec, #(#params: #kind_trait),*>() -> #kf::rbac::Rules {
                #kf::rbac::Rules::new()
                    .primary::<__S::Kind>(#has_finalizer)
                    #(#owned)*
                    #(#watched)*
                    .events()
                    .leases()
                    #extra
            }
        }
    }

    /// `impl ControllerSpec`, calling the instantiated wiring with the user's functions.
    fn spec_impl(&self) -> TokenStream {
        let kf = self.kf;
        let Model {
            self_ty,
            kind,
            name,
            ..
        } = self.model;
        let finalizer = match &self.model.finalizer {
            Some(f) => quote!(::core::option::Option::Some(#f)),
            None => quote!(::core::option::Option::None),
        };
        let mappers = self.model.watches.iter().map(|w| {
            let map = &w.map;
            if w.is_async {
                // A closure that captures nothing coerces to the wiring's fn pointer.
                quote!(|obj, cache| ::std::boxed::Box::pin(#map(obj, cache)))
            } else {
                quote!(#map)
            }
        });
        let predicates = self
            .model
            .predicates
            .iter()
            .filter_map(|p| match p {
                PredicateArg::Custom(path) => Some(path),
                PredicateArg::Builtin(_) => None,
            })
            .chain(self.model.owns.iter().flat_map(|o| &o.select.custom))
            .chain(self.model.watches.iter().flat_map(|w| &w.select.custom));
        let retry = self.retry_expr_call();
        let cache_paths = &self.cache_fns.paths;
        quote! {
            #[automatically_derived]
            impl #kf::controller::ControllerSpec for #self_ty {
                type Kind = #kind;
                const NAME: &'static str = #name;
                const FINALIZER: ::core::option::Option<&'static str> = #finalizer;

                fn controller(wiring: &#kf::controller::Wiring) -> #kf::controller::Controller<Self::Kind> {
                    (__WIRING.controller)(wiring, #(#mappers,)* #(#predicates,)* #(#cache_paths,)*) #retry
                }

                fn rbac() -> #kf::rbac::Rules {
                    (__WIRING.rbac)()
                }
            }
        }
    }
}

/// `.retry(..)`: `ExponentialRetry::new(base, max, attempts)` for `retry = exponential(..)`, or
/// the user's expression, spanned at it so that a type error points there.
fn retry_call(kf: &Path, retry: &RetryArg) -> TokenStream {
    match retry {
        RetryArg::Exponential {
            base_ms,
            max_ms,
            attempts,
        } => {
            let (base, max) = (millis(*base_ms), millis(*max_ms));
            let attempts = proc_macro2::Literal::u32_unsuffixed(*attempts);
            quote!(.retry(#kf::retry::ExponentialRetry::new(#base, #max, #attempts)))
        }
        RetryArg::Expr(expr) => quote_spanned!(expr.span()=> .retry(#expr)),
    }
}

/// `.dequeue(Dequeue*)` for `dequeue = ..`.
fn dequeue_call(kf: &Path, dequeue: Option<DequeueArg>) -> Option<TokenStream> {
    let policy = match dequeue? {
        DequeueArg::All => quote!(DequeueAll),
        DequeueArg::OnGeneration => quote!(DequeueOnGeneration),
        DequeueArg::SameAction => quote!(DequeueSameAction),
        DequeueArg::None => quote!(DequeueNone),
    };
    Some(quote!(.dequeue(#kf::retry::#policy)))
}

/// The informer options of a kind: the wiring's defaults, in the store backend `store = ..`
/// names (spanned at the key).
fn informer_config(store: Option<&Keyed<String>>) -> TokenStream {
    match store {
        None => quote!(wiring.informer_defaults.clone()),
        Some(store) => {
            let name = LitStr::new(&store.value, store.key);
            quote_spanned!(store.key=> wiring.informer_defaults.clone().store_named(#name))
        }
    }
}

/// `.informer(..)` and `.predicate(..)` of an owned or watched kind: its store backend,
/// selectors and built-in predicates; nothing when none is set (the runtime then takes the
/// wiring's defaults).
fn select_calls(
    kf: &Path,
    store: Option<&Keyed<String>>,
    select: &Select,
    custom: &[Ident],
    cache: &TokenStream,
) -> TokenStream {
    let informer = if store.is_none()
        && select.labels.is_none()
        && select.fields.is_none()
        && cache.is_empty()
    {
        None
    } else {
        let config = informer_config(store);
        let labels = select.labels.as_ref().map(|l| quote!(.labels(#l)));
        let fields = select.fields.as_ref().map(|f| quote!(.fields(#f)));
        Some(quote!(.informer(#config #labels #fields #cache)))
    };
    let predicates = select
        .predicates
        .iter()
        .map(|ident| {
            let ty = format_ident!("{}", camel_case(&ident.to_string()), span = ident.span());
            quote!(.predicate(#kf::controller::#ty))
        })
        .chain(custom.iter().map(|arg| quote!(.predicate(#arg))));
    quote!(#informer #(#predicates)*)
}

/// `Duration::from_millis(ms)`.
fn millis(ms: u64) -> TokenStream {
    let ms = proc_macro2::Literal::u64_unsuffixed(ms);
    quote!(::core::time::Duration::from_millis(#ms))
}

/// Registers the rules of `spec`'s `rbac()` under the controller's name, for `crdgen`.
fn registration(kf: &Path, self_ty: &Type, name: &str, spec: &TokenStream) -> TokenStream {
    quote! {
        #kf::__private::inventory::submit! {
            #kf::rbac::ControllerRegistration {
                name: #name,
                rules: <#self_ty as #spec>::rbac,
            }
        }
    }
}

/// `generation_changed` → `GenerationChanged`.
fn camel_case(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or_else(String::new, |f| {
                f.to_uppercase().collect::<String>() + c.as_str()
            })
        })
        .collect()
}

/// On errors: the traits implemented with inert bodies (a reconcile that never finishes, an
/// unwired controller, no RBAC rules), so code using the controller
/// (`Manager::controller(MyController)`) compiles and only the macro's errors are reported; the
/// `compile_error!`s beside them keep the program from ever running. The
/// kind is the user's when known (a placeholder kind without `for = ...`).
pub fn dummy(kf: &Path, item: &ItemImpl, kind: Option<&Type>) -> TokenStream {
    let Some((self_ty, kind)) = dummy_types(kf, item, kind) else {
        return TokenStream::new();
    };
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
            fn controller(wiring: &#kf::controller::Wiring) -> #kf::controller::Controller<Self::Kind> {
                #kf::controller::Controller::new(
                    Self::NAME,
                    wiring,
                    #kf::controller::apis_for(&wiring.cache().client(), &wiring.namespaces),
                    wiring.informer_defaults.clone(),
                )
            }
            fn rbac() -> #kf::rbac::Rules {
                #kf::rbac::Rules::new()
            }
        }
    }
}

/// The type a dummy is implemented for and its kind: the user's when known, a placeholder kind
/// without `for = ...`. `None` for a generic impl block: an error of its own, and without its
/// generics a dummy cannot be named.
fn dummy_types<'a>(
    kf: &Path,
    item: &'a ItemImpl,
    kind: Option<&Type>,
) -> Option<(&'a Type, TokenStream)> {
    if !item.generics.params.is_empty() {
        return None;
    }
    let kind = kind.map_or_else(
        || quote!(#kf::k8s_openapi::api::core::v1::ConfigMap),
        ToTokens::to_token_stream,
    );
    Some((&item.self_ty, kind))
}

/// The watcher mode: `impl Watcher<Kind>`, `impl WatcherSpec` and the RBAC registration.
pub fn expand_watcher(model: &WatcherModel) -> TokenStream {
    let kf = &model.krate;
    let handlers = watcher_impl(model);
    let spec_impl = watcher_spec_impl(model);
    let spec = quote!(#kf::watcher::WatcherSpec);
    let registration = registration(kf, &model.self_ty, &model.name, &spec);
    quote! {
        #handlers
        #spec_impl
        #registration
    }
}

/// `impl Watcher<Kind>`: forwards each handler the impl block defines to the user's inherent
/// method (the others keep the trait's do-nothing default); spans point at the user's
/// signatures so type errors (wrong parameter types, a future that is not Send) show there.
fn watcher_impl(model: &WatcherModel) -> TokenStream {
    let WatcherModel {
        krate: kf,
        self_ty,
        kind,
        error_ty,
        ..
    } = model;
    let obj = quote!(::std::sync::Arc<#kind>);
    let ctx = quote!(&#kf::watcher::WatchContext);
    let future = quote!(
        impl ::core::future::Future<Output = ::core::result::Result<(), Self::Error>>
        + ::core::marker::Send
    );
    let one_object = |f: &ImplItemFn| {
        let name = &f.sig.ident;
        quote_spanned! {f.sig.span()=>
            fn #name(&self, obj: #obj, ctx: #ctx) -> #future {
                <#self_ty>::#name(self, obj, ctx)
            }
        }
    };
    let add = one_object(&model.add);
    let update = model.update.as_ref().map(|f| {
        quote_spanned! {f.sig.span()=>
            fn update(&self, old: #obj, new: #obj, ctx: #ctx) -> #future {
                <#self_ty>::update(self, old, new, ctx)
            }
        }
    });
    let delete = model.delete.as_ref().map(one_object);
    let sync = model.sync.as_ref().map(one_object);
    quote! {
        #[automatically_derived]
        impl #kf::watcher::Watcher<#kind> for #self_ty {
            type Error = #error_ty;
            #add
            #update
            #delete
            #sync
        }
    }
}

/// `impl WatcherSpec`: the `WatcherController` of the kind in the wiring's namespace with the
/// options given, and the RBAC rules of a watcher (the kind, events, leases).
fn watcher_spec_impl(model: &WatcherModel) -> TokenStream {
    let WatcherModel {
        krate: kf,
        self_ty,
        kind,
        name,
        ..
    } = model;
    let spec = quote!(#kf::watcher::WatcherSpec);
    let workers = model.workers.map(|n| {
        let n = proc_macro2::Literal::u64_unsuffixed(n);
        quote!(.workers(#n))
    });
    let event_timeout = model.event_timeout_ms.map(|ms| {
        let timeout = millis(ms);
        quote!(.event_timeout(#timeout))
    });
    let opinionated = model.opinionated.as_ref().map(|f| quote!(.opinionated(#f)));
    let holds = model.opinionated.is_some();
    let extra = extra_rules(kf, &model.rbac);
    // In `watcher()`, where `Self` in a `retry` expression is the watcher.
    let retry = model.retry.as_ref().map(|retry| retry_call(kf, retry));
    let dequeue = dequeue_call(kf, model.dequeue);
    // `new` takes the wiring's informer defaults; `with_informer` the store `store = ..` names.
    let cache = watcher_cache_calls(&model.primary);
    let (constructor, informer) = match (&model.store, cache.is_empty()) {
        (None, true) => (quote!(new), None),
        (store, _) => {
            let config = informer_config(store.as_ref());
            (quote!(with_informer), Some(quote!(#config #cache,)))
        }
    };
    quote! {
        #[automatically_derived]
        impl #spec for #self_ty {
            type Kind = #kind;
            const NAME: &'static str = #name;

            fn watcher(wiring: &#kf::controller::Wiring) -> #kf::watcher::WatcherController<Self::Kind> {
                #kf::watcher::WatcherController::#constructor(
                    <Self as #spec>::NAME,
                    wiring,
                    #kf::controller::apis_for::<Self::Kind>(&wiring.cache().client(), &wiring.namespaces),
                    #informer
                )
                #workers
                #event_timeout
                #opinionated
                #retry
                #dequeue
            }

            fn rbac() -> #kf::rbac::Rules {
                #kf::rbac::Rules::new()
                    .primary::<Self::Kind>(#holds)
                    .events()
                    .leases()
                    #extra
            }
        }
    }
}

/// On errors in the watcher mode: `Watcher` and `WatcherSpec` with inert bodies (an `add` that
/// never finishes, no options, no RBAC rules), as [`dummy`] does for a reconciler, so that
/// `Manager::watcher(MyWatcher)` compiles and only the macro's errors are reported.
pub fn watcher_dummy(kf: &Path, item: &ItemImpl, kind: Option<&Type>) -> TokenStream {
    let Some((self_ty, kind)) = dummy_types(kf, item, kind) else {
        return TokenStream::new();
    };
    let spec = quote!(#kf::watcher::WatcherSpec);
    quote! {
        #[automatically_derived]
        impl #kf::watcher::Watcher<#kind> for #self_ty {
            type Error = ::core::convert::Infallible;
            fn add(
                &self,
                _: ::std::sync::Arc<#kind>,
                _: &#kf::watcher::WatchContext,
            ) -> impl ::core::future::Future<Output = ::core::result::Result<(), Self::Error>> + ::core::marker::Send {
                ::core::future::pending()
            }
        }

        #[automatically_derived]
        impl #spec for #self_ty {
            type Kind = #kind;
            const NAME: &'static str = "";
            fn watcher(wiring: &#kf::controller::Wiring) -> #kf::watcher::WatcherController<Self::Kind> {
                #kf::watcher::WatcherController::new(
                    <Self as #spec>::NAME,
                    wiring,
                    #kf::controller::apis_for(&wiring.cache().client(), &wiring.namespaces),
                )
            }
            fn rbac() -> #kf::rbac::Rules {
                #kf::rbac::Rules::new()
            }
        }
    }
}

/// The `.allow(..)` / `.allow_named(..)` calls of `rbac(..)` rules.
fn extra_rules(kf: &Path, rules: &[super::attrs::RbacRule]) -> TokenStream {
    let _ = kf;
    let non_resource = rules
        .iter()
        .filter(|rule| !rule.non_resource_urls.is_empty())
        .flat_map(|rule| {
            let verbs = &rule.verbs;
            rule.non_resource_urls
                .iter()
                .map(move |url| quote!(.allow_non_resource(#url, &[#(#verbs),*])))
        });
    let calls = rules.iter().flat_map(|rule| {
        let group = rule
            .group
            .clone()
            .unwrap_or_else(|| syn::LitStr::new("", proc_macro2::Span::call_site()));
        let verbs = &rule.verbs;
        let names = &rule.resource_names;
        rule.resources.iter().map(move |resource| {
            if names.is_empty() {
                quote!(.allow(#group, #resource, &[#(#verbs),*]))
            } else {
                quote!(.allow_named(#group, #resource, &[#(#verbs),*], &[#(#names),*]))
            }
        })
    });
    quote!(#(#calls)* #(#non_resource)*)
}

/// The index functions and transforms of the sources (`indexes(..)`, `transform = ..`), passed
/// to the generic wiring as fn pointers like the custom predicates (`Self` is not in scope
/// there), and the config calls that use them.
struct CacheFns {
    /// The argument names, in order.
    args: Vec<Ident>,
    /// Their fn pointer types.
    tys: Vec<TokenStream>,
    /// The user's paths, which the spec passes.
    paths: Vec<Path>,
    /// `.index::<K>(..)` / `.transform::<K>(..)` of the primary's informer config.
    primary: TokenStream,
    /// The same, per owned kind and per watched kind.
    owned: Vec<TokenStream>,
    watched: Vec<TokenStream>,
}

impl CacheFns {
    fn new(model: &Model, kinds: &Kinds<'_>) -> Self {
        let kf = &model.krate;
        let mut fns = CacheFns {
            args: Vec::new(),
            tys: Vec::new(),
            paths: Vec::new(),
            primary: TokenStream::new(),
            owned: Vec::new(),
            watched: Vec::new(),
        };
        fns.primary = fns.calls(&model.primary, &quote!(__S::Kind));
        for owned in &model.owns {
            let t = kinds.of(&owned.kind);
            let calls = match owned.weight {
                Weight::Full => fns.calls(&owned.select, &quote!(#t)),
                Weight::Metadata => fns.calls(
                    &owned.select,
                    &quote!(#kf::kube::core::PartialObjectMeta<#t>),
                ),
                // Refused when parsed: an uncached kind keeps no objects.
                Weight::Uncached => TokenStream::new(),
            };
            fns.owned.push(calls);
        }
        for watched in &model.watches {
            let t = kinds.of(&watched.kind);
            let calls = fns.calls(&watched.select, &quote!(#t));
            fns.watched.push(calls);
        }
        fns
    }

    /// The config calls of one source whose cached objects are `obj`, adding their arguments.
    fn calls(&mut self, select: &Select, obj: &TokenStream) -> TokenStream {
        let mut calls = Vec::new();
        for path in &select.indexes {
            let arg = format_ident!("cache_fn{}", self.args.len());
            let name = path
                .segments
                .last()
                .map(|last| LitStr::new(&last.ident.to_string(), last.ident.span()));
            self.args.push(arg.clone());
            self.tys
                .push(quote!(fn(&#obj) -> ::std::vec::Vec<::std::string::String>));
            self.paths.push(path.clone());
            calls.push(quote!(.index::<#obj>(#name, #arg)));
        }
        if let Some(path) = &select.transform {
            let arg = format_ident!("cache_fn{}", self.args.len());
            self.args.push(arg.clone());
            self.tys.push(quote!(fn(&mut #obj)));
            self.paths.push(path.clone());
            calls.push(quote!(.transform::<#obj>(#arg)));
        }
        quote!(#(#calls)*)
    }
}

/// `.index::<Self::Kind>(..)` / `.transform::<Self::Kind>(..)` of a watcher's informer: in
/// `WatcherSpec::watcher`, where `Self` is the watcher, so the user's paths are used as they are.
fn watcher_cache_calls(select: &Select) -> TokenStream {
    let indexes = select.indexes.iter().map(|path| {
        let name = path
            .segments
            .last()
            .map(|last| LitStr::new(&last.ident.to_string(), last.ident.span()));
        quote!(.index::<Self::Kind>(#name, #path))
    });
    let transform = select
        .transform
        .as_ref()
        .map(|path| quote!(.transform::<Self::Kind>(#path)));
    quote!(#(#indexes)* #transform)
}
