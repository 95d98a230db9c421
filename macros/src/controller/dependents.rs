//! `dependents(secret(create_only), service(ready), statefulset(depends_on(secret, service),
//! ready), backup(when = backup_enabled))`: parsed into [`DependentArg`]s, then checked against
//! the impl block (each names a method building the child; `depends_on` names dependents and
//! has no cycle) into [`Dependent`]s in reconcile order.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::meta::ParseNestedMeta;
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::{Expr, FnArg, Ident, ImplItem, ItemImpl, Path, ReturnType, Token, Type};

use crate::errors::{Errors, did_you_mean};
use crate::keys::{self, HandKey};

/// How a dependent's readiness is judged.
pub enum Ready {
    /// `ready`: the kind's built-in rule (`Readiness`).
    Builtin,
    /// `ready = path`: a `fn(&Child) -> bool`.
    With(Path),
}

/// One `dependents(..)` entry as written.
pub struct DependentArg {
    pub name: Ident,
    /// `for_each = items`: one child per item of the method `items`.
    pub for_each: Option<Path>,
    pub create_only: bool,
    pub when: Option<Path>,
    pub precondition: Option<Path>,
    pub ready: Option<Ready>,
    pub depends_on: Vec<Ident>,
    /// `prune = delete|orphan|keep`: the `Deletion` variant for a child no longer built.
    pub prune: Option<Ident>,
    /// `on_owner_delete = delete|orphan`: the `Deletion` variant when the owner is deleted.
    pub on_owner_delete: Option<Ident>,
}

/// The values of `prune` and `on_owner_delete`: the word, its `Deletion` variant, and whether
/// `on_owner_delete` takes it.
const POLICIES: &[(&str, &str, bool)] = &[
    ("delete", "Delete", true),
    ("orphan", "Orphan", true),
    ("keep", "Keep", false),
];

/// A checked dependent: the entry, the kind its method builds, what the method returns (the
/// kind, a `Vec` of it for a collection, or a `Result` of either) and whether it is `async`.
pub struct Dependent {
    pub arg: DependentArg,
    pub kind: Type,
    pub returns: Type,
    pub is_async: bool,
    /// What the method builds: one child, a `Vec` of children, or one per item.
    pub shape: Shape,
    /// `when`, `precondition` and `ready = ..` as expressions: a method of the impl block by
    /// its bare name (`<Self>::name`), else the path as written.
    pub when: Option<TokenStream>,
    pub precondition: Option<TokenStream>,
    pub ready: Option<TokenStream>,
}

/// What a dependent method builds.
pub enum Shape {
    /// One child.
    One,
    /// `-> Vec<Child>`: a collection.
    Many,
    /// `for_each = items`: one child per item.
    ForEach(Box<ForEach>),
}

/// The items of a `for_each` dependent.
pub struct ForEach {
    /// The items method of the impl block.
    pub items: Ident,
    /// Whether it is `async`.
    pub is_async: bool,
    /// What it returns (`Vec<Item>` or a `Result` of it).
    pub returns: Type,
    /// What the dependent method borrows of an item (`Item`, or `str` for `String` items).
    pub item: Type,
}

/// The options of a dependent, `dependents(name(option, ..))`, read by [`option`].
pub const OPTIONS: &[HandKey] = &[
    HandKey {
        name: "for_each",
        syntax: "path",
        doc: "one child per item: the method `items` of the impl block, `fn items(&self, obj: &Kind, ctx: &Context<Kind>) -> Vec<Item>`, gives the items, and the dependent method takes `item: &Item` after `obj`",
    },
    HandKey {
        name: "create_only",
        syntax: "flag",
        doc: "created when absent, never updated (a generated password survives spec edits and restarts)",
    },
    HandKey {
        name: "when",
        syntax: "path",
        doc: "the child exists only while this `fn(&self, obj: &Kind) -> bool` holds (a method of the impl block by its bare name, or a path); pruned when it turns false (a collection: all of it), deleted unless `prune` or the kind's default says otherwise",
    },
    HandKey {
        name: "precondition",
        syntax: "path",
        doc: "the child is reconciled only while this `fn(&self, obj: &Kind) -> bool` holds; left as it is (and counted as not ready) otherwise",
    },
    HandKey {
        name: "ready",
        syntax: "flag or `= path`",
        doc: "when the child counts as ready: alone, by the kind's built-in rule (`Readiness`); with a path, when that `fn(&Child) -> bool` says so of the stored object (of each, for a collection). Without it, ready as soon as it exists",
    },
    HandKey {
        name: "prune",
        syntax: "`delete`, `orphan` or `keep`",
        doc: "what happens to a child no longer built (dropped from a collection, or `when` turned false): deleted; released (`orphan`: owner reference and `kubeforge.dev/dependent` label removed, object kept; taken back if this primary builds it again); or left as it is, still owned (`keep`). Default: `orphan` for a Namespace, PersistentVolumeClaim or PersistentVolume and for an object carrying finalizers (others hold it), `delete` otherwise",
    },
    HandKey {
        name: "on_owner_delete",
        syntax: "`delete` or `orphan`",
        doc: "what happens to the children when the primary is deleted: deleted by the garbage collector, or released before the primary goes (`orphan`: the primary carries the finalizer `kubeforge.dev/release-dependents` until they are; with the operator down, the primary waits for it). Default: `orphan` for a Namespace, PersistentVolumeClaim or PersistentVolume and for an object carrying finalizers (others hold it; from the reconcile that sees them), `delete` otherwise",
    },
    HandKey {
        name: "depends_on",
        syntax: "`(a, b, ..)`",
        doc: "reconciled only once the dependents named are ready (names of this `dependents(..)`, no cycles)",
    },
];

/// `dependents(a, b(create_only), ..)`: appends to `out`.
pub fn parse(
    meta: &ParseNestedMeta<'_>,
    out: &mut Vec<DependentArg>,
    errors: &mut Errors,
) -> syn::Result<()> {
    let content;
    syn::parenthesized!(content in meta.input);
    let before = out.len();
    while !content.is_empty() {
        let name = Ident::parse_any(&content)?;
        let mut arg = DependentArg {
            name,
            for_each: None,
            create_only: false,
            when: None,
            precondition: None,
            ready: None,
            depends_on: Vec::new(),
            prune: None,
            on_owner_delete: None,
        };
        if content.peek(syn::token::Paren) {
            let options;
            syn::parenthesized!(options in content);
            while !options.is_empty() {
                option(&options, &mut arg, errors)?;
                if options.is_empty() {
                    break;
                }
                options.parse::<Token![,]>()?;
            }
        }
        out.push(arg);
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    if out.len() == before {
        errors.spanned(
            &meta.path,
            "`dependents(...)` needs at least one method name",
        );
    }
    Ok(())
}

/// One option of a dependent.
fn option(input: ParseStream<'_>, arg: &mut DependentArg, errors: &mut Errors) -> syn::Result<()> {
    let option = Ident::parse_any(input)?;
    let name = option.to_string();
    let value: Option<Expr> = if input.peek(Token![=]) {
        input.parse::<Token![=]>()?;
        Some(input.parse()?)
    } else {
        None
    };
    let path = |value: Option<Expr>, errors: &mut Errors| match value {
        Some(Expr::Path(p)) => Some(p.path),
        Some(other) => {
            errors.spanned(&other, format!("`{name}` takes the path of a function"));
            None
        }
        None => {
            errors.at(
                option.span(),
                format!("`{name}` needs a function: `{name} = my_function`"),
            );
            None
        }
    };
    match name.as_str() {
        "create_only" => {
            flag(&option, value.as_ref(), errors);
            arg.create_only = true;
        }
        "for_each" => arg.for_each = path(value, errors),
        "when" => arg.when = path(value, errors),
        "precondition" => arg.precondition = path(value, errors),
        "ready" => {
            arg.ready = match value {
                None => Some(Ready::Builtin),
                Some(_) => path(value, errors).map(Ready::With),
            }
        }
        "prune" => arg.prune = policy(&option, value, true, errors),
        "on_owner_delete" => arg.on_owner_delete = policy(&option, value, false, errors),
        "depends_on" => {
            if let Some(value) = &value {
                errors.spanned(value, "write `depends_on(a, b)`");
            }
            let list;
            syn::parenthesized!(list in input);
            let names =
                Punctuated::<Ident, Token![,]>::parse_terminated_with(&list, Ident::parse_any)?;
            arg.depends_on.extend(names);
        }
        _ => errors.at(
            option.span(),
            format!(
                "unknown option `{name}` of a dependent; expected one of {}{}",
                keys::hand_names(OPTIONS).join(", "),
                did_you_mean(&name, &keys::hand_names(OPTIONS))
            ),
        ),
    }
    Ok(())
}

/// `prune = orphan`, `on_owner_delete = delete`: the `Deletion` variant named, with its span.
/// `keep` only prunes (`pruning`): a child that keeps its owner reference is deleted with its
/// owner by the garbage collector.
fn policy(
    option: &Ident,
    value: Option<Expr>,
    pruning: bool,
    errors: &mut Errors,
) -> Option<Ident> {
    let allowed: Vec<&str> = POLICIES
        .iter()
        .filter(|(_, _, owner)| pruning || *owner)
        .map(|(word, _, _)| *word)
        .collect();
    let word = match value {
        Some(Expr::Path(p)) if p.path.get_ident().is_some() => p.path.get_ident().cloned(),
        Some(other) => {
            errors.spanned(
                &other,
                format!("`{option}` takes one of {}", allowed.join(", ")),
            );
            return None;
        }
        None => {
            errors.at(
                option.span(),
                format!("`{option}` needs a policy: `{option} = {}`", allowed[1]),
            );
            return None;
        }
    }?;
    let name = word.to_string();
    match POLICIES.iter().find(|(w, _, _)| *w == name) {
        Some((_, _, false)) if !pruning => {
            errors.at(
                word.span(),
                format!(
                    "`{option} = {name}` cannot keep a child: one that keeps its owner reference is deleted with its owner by the garbage collector; write `{option} = orphan` to keep it"
                ),
            );
            None
        }
        Some((_, variant, _)) => Some(Ident::new(variant, word.span())),
        None => {
            errors.at(
                word.span(),
                format!(
                    "unknown policy `{name}` of `{option}`; expected one of {}{}",
                    allowed.join(", "),
                    did_you_mean(&name, &allowed)
                ),
            );
            None
        }
    }
}

fn flag(option: &Ident, value: Option<&Expr>, errors: &mut Errors) {
    if let Some(value) = value {
        errors.spanned(
            value,
            format!("`{option}` takes no value: write `{option}` alone"),
        );
    }
}

/// Checks the entries against the impl block; the dependents in reconcile order (each after
/// those it depends on, otherwise as declared). Errors point at the offending name.
pub fn check(
    args: Vec<DependentArg>,
    item: &ItemImpl,
    kf: &Path,
    errors: &mut Errors,
) -> Vec<Dependent> {
    let methods: Vec<&syn::ImplItemFn> = item
        .items
        .iter()
        .filter_map(|i| match i {
            ImplItem::Fn(f) => Some(f),
            _ => None,
        })
        .collect();
    let method_names: Vec<String> = methods.iter().map(|m| m.sig.ident.to_string()).collect();
    let mut checked: Vec<Dependent> = Vec::new();
    let mut seen: HashMap<String, Span> = HashMap::new();
    for arg in args {
        let name = arg.name.to_string();
        if seen.insert(name.clone(), arg.name.span()).is_some() {
            errors.at(
                arg.name.span(),
                format!("`{name}` is declared as a dependent twice"),
            );
            continue;
        }
        let Some(method) = methods.iter().find(|m| m.sig.ident == arg.name) else {
            let names: Vec<&str> = method_names.iter().map(String::as_str).collect();
            errors.at(
                arg.name.span(),
                format!(
                    "no method `{name}` in this impl block: a dependent is `fn {name}(&self, obj: &Kind, ctx: &Context<Kind>) -> Child`{}",
                    did_you_mean(&name, &names)
                ),
            );
            continue;
        };
        let Some(returns) = signature(method, arg.for_each.is_some(), errors) else {
            continue;
        };
        let for_each = match &arg.for_each {
            Some(items) => match for_each(items, method, &methods, errors) {
                Some(for_each) => Some(for_each),
                None => continue,
            },
            None => None,
        };
        {
            let self_ty = &item.self_ty;
            let resolve = |p: &Option<Path>| p.as_ref().map(|p| function(p, self_ty, item));
            let (kind, many) = built_kind(&returns);
            let shape = match (for_each, many) {
                (Some(_), true) => {
                    errors.spanned(
                        &returns,
                        format!("a `for_each` dependent builds one child per item: `{name}` returns the child, not a `Vec`"),
                    );
                    continue;
                }
                (Some(for_each), false) => Shape::ForEach(Box::new(for_each)),
                (None, true) => Shape::Many,
                (None, false) => Shape::One,
            };
            let ready = arg.ready.as_ref().map(|r| match r {
                Ready::Builtin => quote_spanned!(arg.name.span()=> <#kind as #kf::dependents::Readiness>::is_ready),
                Ready::With(path) => function(path, self_ty, item),
            });
            checked.push(Dependent {
                when: resolve(&arg.when),
                precondition: resolve(&arg.precondition),
                ready,
                arg,
                kind,
                returns,
                is_async: method.sig.asyncness.is_some(),
                shape,
            });
        }
    }
    let known = dependencies_known(&checked, errors);
    if !known {
        return checked;
    }
    order(checked, errors)
}

/// Whether every `depends_on` names a dependent; an error at each name that does not.
fn dependencies_known(checked: &[Dependent], errors: &mut Errors) -> bool {
    let names: Vec<String> = checked.iter().map(|d| d.arg.name.to_string()).collect();
    let mut known = true;
    for dependent in checked {
        for on in &dependent.arg.depends_on {
            if !names.contains(&on.to_string()) {
                known = false;
                let all: Vec<&str> = names.iter().map(String::as_str).collect();
                errors.at(
                    on.span(),
                    format!(
                        "`{on}` is not a dependent of this controller{}",
                        did_you_mean(&on.to_string(), &all)
                    ),
                );
            }
        }
    }
    known
}

/// The child kind of what a dependent returns, and whether it is a collection: `T` of a
/// `Result<T, E>`, then `K` of a `Vec<K>`.
fn built_kind(returns: &Type) -> (Type, bool) {
    let ok = first_argument(returns, "Result").unwrap_or_else(|| returns.clone());
    match first_argument(&ok, "Vec") {
        Some(kind) => (kind, true),
        None => (ok, false),
    }
}

/// `A` of `Wrapper<A, ..>` (by the last segment's name), if `ty` is one.
fn first_argument(ty: &Type, wrapper: &str) -> Option<Type> {
    if let Type::Path(p) = ty
        && let Some(last) = p.path.segments.last()
        && last.ident == wrapper
        && let syn::PathArguments::AngleBracketed(args) = &last.arguments
        && let Some(syn::GenericArgument::Type(inner)) = args.args.first()
    {
        return Some(inner.clone());
    }
    None
}

/// Checks `for_each = items`: `items` is a method of the impl block returning `Vec<Item>` (or
/// a `Result` of it), and the dependent method takes `&Item` third.
fn for_each(
    items: &Path,
    method: &syn::ImplItemFn,
    methods: &[&syn::ImplItemFn],
    errors: &mut Errors,
) -> Option<ForEach> {
    let shape = |name: &dyn std::fmt::Display| {
        format!(
            "`for_each` names a method of this impl block: `fn {name}(&self, obj: &Kind, ctx: &Context<Kind>) -> Vec<Item>`"
        )
    };
    let Some(ident) = items.get_ident() else {
        errors.spanned(items, shape(&items.to_token_stream()));
        return None;
    };
    let Some(found) = methods.iter().find(|m| m.sig.ident == *ident) else {
        let names: Vec<String> = methods.iter().map(|m| m.sig.ident.to_string()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        errors.at(
            ident.span(),
            format!(
                "no method `{ident}` in this impl block: {}{}",
                shape(ident),
                did_you_mean(&ident.to_string(), &names)
            ),
        );
        return None;
    };
    let takes_self = matches!(found.sig.inputs.first(), Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none());
    let returns = match &found.sig.output {
        ReturnType::Type(_, ty) if takes_self && found.sig.inputs.len() == 3 => (**ty).clone(),
        _ => {
            errors.spanned(&found.sig, shape(ident));
            return None;
        }
    };
    let listed = first_argument(&returns, "Result").unwrap_or_else(|| returns.clone());
    let Some(item) = first_argument(&listed, "Vec") else {
        errors.spanned(
            &returns,
            format!("{}: it returns the items as a `Vec`", shape(ident)),
        );
        return None;
    };
    // The dependent method's third parameter: a borrow of an item (`&Item`, or `&str` for
    // `String` items: `Item: Borrow<..>`).
    let param = match method.sig.inputs.iter().nth(2) {
        Some(FnArg::Typed(param)) => param,
        _ => return None,
    };
    let Type::Reference(borrowed) = &*param.ty else {
        errors.spanned(
            &param.ty,
            format!(
                "`{}` is built for each item of `{ident}`, which are `{}`: take `&{}`",
                method.sig.ident,
                item.to_token_stream(),
                item.to_token_stream()
            ),
        );
        return None;
    };
    let borrowed = (*borrowed.elem).clone();
    Some(ForEach {
        items: ident.clone(),
        is_async: found.sig.asyncness.is_some(),
        returns,
        item: borrowed,
    })
}

/// What a dependent method returns, after checking its shape (with `for_each`, it takes the
/// item third).
fn signature(method: &syn::ImplItemFn, per_item: bool, errors: &mut Errors) -> Option<Type> {
    let sig = &method.sig;
    let (item, inputs) = if per_item {
        ("item: &Item, ", 4)
    } else {
        ("", 3)
    };
    let shape = format!(
        "a dependent is `fn {}(&self, obj: &Kind, {item}ctx: &Context<Kind>) -> Child` (or `-> Vec<Child>`, or `async fn`, or `-> Result<.., E>`)",
        sig.ident
    );
    let takes_self = matches!(sig.inputs.first(), Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none());
    if !per_item && takes_self && sig.inputs.len() == 4 {
        errors.spanned(
            &sig.inputs,
            format!(
                "`{}` takes an item: declare where the items come from with `{}(for_each = items_method)`",
                sig.ident, sig.ident
            ),
        );
        return None;
    }
    if !takes_self || sig.inputs.len() != inputs {
        errors.spanned(&sig.inputs, shape);
        return None;
    }
    match &sig.output {
        ReturnType::Type(_, ty) if !matches!(**ty, Type::Tuple(ref t) if t.elems.is_empty()) => {
            Some((**ty).clone())
        }
        _ => {
            errors.at(sig.ident.span(), format!("{shape}: it returns the child"));
            None
        }
    }
}

/// Topological order, ties in declaration order; a cycle is reported at the first name in it.
fn order(checked: Vec<Dependent>, errors: &mut Errors) -> Vec<Dependent> {
    let index: HashMap<String, usize> = checked
        .iter()
        .enumerate()
        .map(|(i, d)| (d.arg.name.to_string(), i))
        .collect();
    let deps: Vec<Vec<usize>> = checked
        .iter()
        .map(|d| {
            let on = d.arg.depends_on.iter();
            on.filter_map(|on| index.get(&on.to_string()).copied())
                .collect()
        })
        .collect();
    match kubeforge_shared::graph::order(&deps) {
        Ok(order) => {
            let mut slots: Vec<Option<Dependent>> = checked.into_iter().map(Some).collect();
            order.into_iter().filter_map(|i| slots[i].take()).collect()
        }
        Err(cycle) => {
            let names: Vec<String> = cycle
                .iter()
                .map(|&i| checked[i].arg.name.to_string())
                .collect();
            let at = &checked[cycle[0]].arg;
            let span = at
                .depends_on
                .iter()
                .find(|d| d == &&checked[cycle[1]].arg.name)
                .map_or(at.name.span(), Ident::span);
            errors.at(
                span,
                format!(
                    "dependents depend on each other in a cycle: {}",
                    names.join(" -> ")
                ),
            );
            checked
        }
    }
}

/// A function named by an option: a method of the impl block by its bare name, else the path.
fn function(path: &Path, self_ty: &Type, item: &ItemImpl) -> TokenStream {
    if let Some(ident) = path.get_ident() {
        let is_method = item
            .items
            .iter()
            .any(|i| matches!(i, ImplItem::Fn(f) if f.sig.ident == *ident));
        if is_method {
            return quote_spanned!(ident.span()=> <#self_ty>::#ident);
        }
    }
    path.to_token_stream()
}

/// What the expansion needs of the dependents: the generic wiring builds them from function
/// pointers (each child type a parameter bounded by `Kind`), so a child that is not a kind is
/// reported once, where the wiring is instantiated with the user's types.
pub struct Expansion {
    /// The types of the function pointers `__dependents` takes, in order (generic side).
    pub pointer_tys: Vec<TokenStream>,
    /// Their parameter names.
    pub params: Vec<Ident>,
    /// `__dependents`'s body: `Dependents::new().with(..)..__ordered()` over its parameters.
    pub body: TokenStream,
    /// The user's functions passed to it, in order (concrete side).
    pub args: Vec<TokenStream>,
    /// A function returning a boxed future per `async` method.
    pub helpers: TokenStream,
    /// The children's kinds in the generic wiring, once each: kubeforge writes them, so they
    /// must be `Writable` (a read-only view is not).
    pub children: Vec<TokenStream>,
}

impl Expansion {
    /// The pointer types, arguments and helpers of a `for_each` dependent: its items method and
    /// its per-item method, each behind a helper returning a boxed future.
    fn for_each(
        &mut self,
        kf: &Path,
        kind: &Type,
        self_ty: &Type,
        d: &Dependent,
        each: &ForEach,
        returns_g: &TokenStream,
    ) {
        let name = &d.arg.name;
        let returns = &d.returns;
        let items_helper = format_ident!("__items_{}", name);
        let each_helper = format_ident!("__each_{}", name);
        let items_ret = &each.returns;
        let item = &each.item;
        let items = &each.items;
        let boxed = |output: &TokenStream| quote!(::core::pin::Pin<::std::boxed::Box<dyn ::core::future::Future<Output = #output> + ::core::marker::Send + 'a>>);
        let items_out = boxed(&items_ret.to_token_stream());
        let each_out_g = boxed(returns_g);
        let each_out = boxed(&returns.to_token_stream());
        self.pointer_tys.push(quote!(for<'a> fn(&'a __S, &'a __S::Kind, &'a #kf::controller::Context<__S::Kind>) -> #items_out));
        self.pointer_tys.push(quote!(for<'a> fn(&'a __S, &'a __S::Kind, &'a #item, &'a #kf::controller::Context<__S::Kind>) -> #each_out_g));
        self.args.push(items_helper.to_token_stream());
        self.args.push(each_helper.to_token_stream());
        let list = if each.is_async {
            quote!(<#self_ty>::#items(controller, obj, ctx).await)
        } else {
            quote!(<#self_ty>::#items(controller, obj, ctx))
        };
        let one = if d.is_async {
            quote!(<#self_ty>::#name(controller, obj, item, ctx).await)
        } else {
            quote!(<#self_ty>::#name(controller, obj, item, ctx))
        };
        self.helpers.extend(quote! {
            fn #items_helper<'a>(
                controller: &'a #self_ty,
                obj: &'a #kind,
                ctx: &'a #kf::controller::Context<#kind>,
            ) -> #items_out {
                ::std::boxed::Box::pin(async move { #list })
            }
            fn #each_helper<'a>(
                controller: &'a #self_ty,
                obj: &'a #kind,
                item: &'a #item,
                ctx: &'a #kf::controller::Context<#kind>,
            ) -> #each_out {
                ::std::boxed::Box::pin(async move { #one })
            }
        });
    }

    /// The options of dependent `d` (the `i`th), as builder calls over parameters of
    /// `__dependents` where they name functions.
    fn options(
        &mut self,
        kf: &Path,
        d: &Dependent,
        i: usize,
        child_g: &TokenStream,
    ) -> Vec<TokenStream> {
        let mut options = Vec::new();
        if d.arg.create_only {
            options.push(quote!(.create_only()));
        }
        for (function, method, letter) in [
            (&d.when, "when", 'w'),
            (&d.precondition, "precondition", 'p'),
        ] {
            if let Some(function) = function {
                let param = format_ident!("__{letter}{i}");
                let method = format_ident!("{method}");
                self.pointer_tys.push(quote!(fn(&__S, &__S::Kind) -> bool));
                self.args.push(function.clone());
                options.push(quote!(.#method(#param)));
                self.params.push(param);
            }
        }
        if let Some(ready) = &d.ready {
            let param = format_ident!("__r{i}");
            self.pointer_tys.push(quote!(fn(&#child_g) -> bool));
            self.args.push(ready.clone());
            options.push(quote!(.ready(#param)));
            self.params.push(param);
        }
        if !d.arg.depends_on.is_empty() {
            let names = d.arg.depends_on.iter().map(ToString::to_string);
            options.push(quote!(.depends_on(&[#(#names),*])));
        }
        for (variant, method) in [
            (&d.arg.prune, "prune"),
            (&d.arg.on_owner_delete, "on_owner_delete"),
        ] {
            if let Some(variant) = variant {
                let method = format_ident!("{method}");
                options.push(quote!(.#method(#kf::dependents::Deletion::#variant)));
            }
        }
        options
    }
}

/// The pieces of [`Expansion`]; `of` names a kind in the generic wiring (`__K<n>`).
pub fn expansion(
    kf: &Path,
    kind: &Type,
    self_ty: &Type,
    dependents: &[Dependent],
    field_manager: Option<&syn::LitStr>,
    of: &dyn Fn(&Type) -> TokenStream,
) -> Expansion {
    let mut out = Expansion {
        pointer_tys: Vec::new(),
        params: Vec::new(),
        body: TokenStream::new(),
        args: Vec::new(),
        helpers: TokenStream::new(),
        children: Vec::new(),
    };
    let ctx_g = quote!(&#kf::controller::Context<__S::Kind>);
    let mut entries = Vec::new();
    for (i, d) in dependents.iter().enumerate() {
        let name = &d.arg.name;
        let label = name.to_string();
        let child_g = of(&d.kind);
        if !out
            .children
            .iter()
            .any(|c| c.to_string() == child_g.to_string())
        {
            out.children.push(child_g.clone());
        }
        let returns_g = generic_return(&d.returns, &child_g);
        let desired = format_ident!("__desired{i}");
        let returns = &d.returns;
        let new = match &d.shape {
            Shape::ForEach(each) => {
                let each_param = format_ident!("__e{i}");
                out.for_each(kf, kind, self_ty, d, each, &returns_g);
                out.params.push(desired.clone());
                out.params.push(each_param.clone());
                quote!(for_each_async(#label, #desired, #each_param))
            }
            shape if d.is_async => {
                let helper = format_ident!("__dependent_{}", name);
                out.pointer_tys.push(quote!(for<'a> fn(&'a __S, &'a __S::Kind, &'a #kf::controller::Context<__S::Kind>) -> ::core::pin::Pin<::std::boxed::Box<dyn ::core::future::Future<Output = #returns_g> + ::core::marker::Send + 'a>>));
                out.args.push(helper.to_token_stream());
                out.helpers.extend(quote! {
                    fn #helper<'a>(
                        controller: &'a #self_ty,
                        obj: &'a #kind,
                        ctx: &'a #kf::controller::Context<#kind>,
                    ) -> ::core::pin::Pin<::std::boxed::Box<dyn ::core::future::Future<Output = #returns> + ::core::marker::Send + 'a>> {
                        ::std::boxed::Box::pin(<#self_ty>::#name(controller, obj, ctx))
                    }
                });
                match shape {
                    Shape::Many => quote!(many_async(#label, #desired)),
                    _ => quote!(new_async(#label, #desired)),
                }
            }
            shape => {
                out.pointer_tys
                    .push(quote!(fn(&__S, &__S::Kind, #ctx_g) -> #returns_g));
                out.args
                    .push(quote_spanned!(name.span()=> <#self_ty>::#name));
                match shape {
                    Shape::Many => quote!(many(#label, #desired)),
                    _ => quote!(new(#label, #desired)),
                }
            }
        };
        if !matches!(d.shape, Shape::ForEach(_)) {
            out.params.push(desired);
        }
        let options = out.options(kf, d, i, &child_g);
        entries.push(quote! {
            .with(#kf::dependents::Dependent::<__S::Kind, __S, #child_g>::#new #(#options)*)
        });
    }
    let manager = field_manager.map(|m| quote!(.field_manager(#m)));
    out.body = quote! {
        #kf::dependents::Dependents::<__S::Kind, __S>::new() #(#entries)* #manager .__ordered()
    };
    out
}

/// The return type as the generic wiring sees it: the child replaced by its parameter (inside
/// `Result<.., E>` — or an alias such as `anyhow::Result<..>` — and `Vec<..>`, their first
/// argument).
fn generic_return(returns: &Type, child_g: &TokenStream) -> TokenStream {
    let mut generic = returns.clone();
    if let Type::Path(p) = &mut generic
        && let Some(last) = p.path.segments.last_mut()
        && (last.ident == "Result" || last.ident == "Vec")
        && let syn::PathArguments::AngleBracketed(args) = &mut last.arguments
        && let Some(syn::GenericArgument::Type(inner)) = args.args.first_mut()
        && let Ok(param) = syn::parse2::<Type>(generic_return(inner, child_g))
    {
        *inner = param;
        return generic.to_token_stream();
    }
    child_g.clone()
}

/// Whether the spans of `ty` and `other` name the same type as written.
pub fn same_type(ty: &Type, other: &Type) -> bool {
    ty.to_token_stream().to_string() == other.to_token_stream().to_string()
}
