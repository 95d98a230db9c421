//! Compile-time JSONPath resolution: `JsonField` impls naming the JSON fields of the schema types,
//! and the `const` checks that resolve each JSONPath of a kind through them.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::LitStr;

use crate::fields::{Field, Shape};
use crate::model::{Kind, parse_path};

/// FNV-1a of a JSON name; must match `kubeforge::crd::__checks::name_hash`.
pub(super) fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn shape_tokens(shape: Shape, krate: &syn::Path) -> TokenStream {
    let variant = format_ident!("{}", format!("{shape:?}"));
    quote!(#krate::crd::__checks::JsonShape::#variant)
}

/// One `JsonField` impl per serialized field, for compile-time JSONPath resolution. Flattened
/// and skipped fields have no own JSON name; transparent structs have no fields in JSON.
pub(super) fn json_field_impls(
    ident: &syn::Ident,
    fields: &[Field],
    krate: &syn::Path,
) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let impls = fields
        .iter()
        .filter(|f| !f.serde.skip && !f.serde.flatten && !f.serde.transparent)
        .map(|f| {
            let hash = name_hash(&f.json_name);
            let ty = &f.inner_ty;
            let shape = shape_tokens(f.shape, krate);
            quote! {
                impl #p::JsonField<#hash> for #ident {
                    type Ty = #ty;
                    const SHAPE: #p::JsonShape = #shape;
                }
            }
        });
    quote!(#(#impls)*)
}

/// JSONPath resolution through a type that is its only field in JSON (a newtype or a
/// `#[serde(transparent)]` struct): fields of the inner type, elements of an inner list.
pub(super) fn transparent_paths(
    ident: &syn::Ident,
    inner: &syn::Type,
    krate: &syn::Path,
) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let inner = crate::fields::inner_type(inner);
    let fields = quote! {
        impl<const __NAME: u64> #p::JsonField<__NAME> for #ident
        where
            #inner: #p::JsonField<__NAME>,
        {
            type Ty = <#inner as #p::JsonField<__NAME>>::Ty;
            const SHAPE: #p::JsonShape = <#inner as #p::JsonField<__NAME>>::SHAPE;
        }
    };
    let elements = (crate::fields::shape(&inner) == Shape::Array).then(|| {
        quote! {
            impl #p::JsonElement for #ident {
                type Elem = <#inner as #p::JsonElement>::Elem;
            }
        }
    });
    quote!(#fields #elements)
}

fn respan(tokens: TokenStream, span: proc_macro2::Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            if let proc_macro2::TokenTree::Group(g) = &tree {
                let mut group = proc_macro2::Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                tree = proc_macro2::TokenTree::Group(group);
            } else {
                tree.set_span(span);
            }
            tree
        })
        .collect()
}

/// A `const` block that resolves `path` through the `JsonField` impls of the spec or status type
/// and checks the leaf's shape; every token carries the path literal's span, so a typo or a
/// wrong type is reported at the literal.
fn path_check(
    kind: &Kind,
    spec: &syn::Ident,
    lit: &LitStr,
    allowed: &[Shape],
    message: &str,
) -> TokenStream {
    let krate = &kind.crate_path;
    let p = quote!(#krate::crd::__checks);
    if kind.is_unchecked(&lit.value()) {
        return quote!();
    }
    let Some(steps) = parse_path(&lit.value()) else {
        return quote!();
    };
    let span = lit.span();
    // Re-spanned so that an unknown first field is reported at the literal, not at the type.
    let root = match steps.first().map(|s| s.name.as_str()) {
        Some("spec") => respan(quote!(#spec), span),
        Some("status") => match &kind.status {
            Some(status) => respan(quote!(#status), span),
            None => return quote!(),
        },
        // `.metadata` is ObjectMeta: known to Kubernetes, not to kubeforge's tables.
        _ => return quote!(),
    };
    if steps.len() == 1 {
        return quote!();
    }
    let mut ty = root;
    let mut shape = quote!(#p::JsonShape::Other);
    for step in &steps[1..] {
        let hash = name_hash(&step.name);
        shape = quote_spanned!(span=> <#ty as #p::JsonField<#hash>>::SHAPE);
        ty = quote_spanned!(span=> <#ty as #p::JsonField<#hash>>::Ty);
        for _ in 0..step.indexes {
            ty = quote_spanned!(span=> <#ty as #p::JsonElement>::Elem);
            shape = quote!(#p::JsonShape::Other);
        }
    }
    let allowed = allowed.iter().map(|s| shape_tokens(*s, krate));
    quote_spanned! {span=>
        const _: () = {
            // Resolving the type fails to compile when a step names no field.
            let _ = ::core::marker::PhantomData::<#ty>;
            if !#shape.is_one_of(&[#(#allowed),*]) {
                ::core::panic!(#message);
            }
        };
    }
}

/// The compile-time checks of every JSONPath of the kind.
pub(super) fn path_checks(kind: &Kind, spec: &syn::Ident) -> TokenStream {
    let mut out = TokenStream::new();
    for col in &kind.printcolumns {
        let (allowed, noun): (&[Shape], &str) = match col.type_.value().as_str() {
            "integer" => (&[Shape::Integer], "an integer"),
            "number" => (&[Shape::Integer, Shape::Number], "a number"),
            "boolean" => (&[Shape::Bool], "a bool"),
            "date" => (&[Shape::String], "a date string"),
            _ => (&[Shape::String, Shape::IntOrString], "a string"),
        };
        let path = &col.json_path.lit;
        let message = format!(
            "printer column `{}` has type {}, but `{}` is not {noun}",
            col.name.value(),
            col.type_.value(),
            path.value()
        );
        out.extend(path_check(kind, spec, path, allowed, &message));
    }
    if let Some(scale) = &kind.scale {
        for (path, what) in [
            (&scale.spec, "spec replicas"),
            (&scale.status, "status replicas"),
        ] {
            let message = format!(
                "the scale {what} path `{}` must be an integer",
                path.lit.value()
            );
            out.extend(path_check(
                kind,
                spec,
                &path.lit,
                &[Shape::Integer],
                &message,
            ));
        }
        if let Some(path) = &scale.selector {
            let message = format!(
                "the scale label selector path `{}` must be a string",
                path.lit.value()
            );
            out.extend(path_check(
                kind,
                spec,
                &path.lit,
                &[Shape::String],
                &message,
            ));
        }
    }
    for path in &kind.selectable_fields {
        let message = format!(
            "selectable field `{}` must be a string, integer or bool",
            path.lit.value()
        );
        let allowed = [Shape::String, Shape::Integer, Shape::Bool];
        out.extend(path_check(kind, spec, &path.lit, &allowed, &message));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime's `name_hash` test asserts the same value: both sides must agree.
    #[test]
    fn name_hash_should_be_fnv1a() {
        assert_eq!(name_hash("replicas"), 13652072405990351292);
    }
}
