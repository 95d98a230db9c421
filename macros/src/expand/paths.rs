//! Compile-time JSONPath resolution: `JsonField` impls naming the JSON fields of the schema types,
//! and the `const` checks that resolve each JSONPath of a kind through them.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::LitStr;

use crate::fields::{Field, Shape};
use crate::model::{ColumnStep, Filter, Kind, Operand, PrintColumn, parse_column_path, parse_path};

/// FNV-1a of a JSON name: `kubeforge::crd::__checks::name_hash` is the same function.
pub(super) fn name_hash(name: &str) -> u64 {
    kubeforge_shared::hash::fnv1a(name.as_bytes())
}

fn shape_tokens(shape: Shape, krate: &syn::Path) -> TokenStream {
    let variant = format_ident!("{}", format!("{shape:?}"));
    quote!(#krate::crd::__checks::JsonShape::#variant)
}

/// One `JsonField` impl per serialized field, for compile-time JSONPath resolution, and the
/// `JsonFields` table of them all (for the fields a printer column's filter compares). Flattened
/// and skipped fields have no own JSON name (a flattened field makes the table open);
/// transparent structs have no fields in JSON.
pub(super) fn json_field_impls(
    ident: &syn::Ident,
    fields: &[Field],
    krate: &syn::Path,
) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let named: Vec<&Field> = fields
        .iter()
        .filter(|f| !f.serde.skip && !f.serde.flatten && !f.serde.transparent)
        .collect();
    let impls = named.iter().map(|f| {
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
    let type_name = ident.to_string();
    let names = named
        .iter()
        .map(|f| f.json_name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let table = named.iter().map(|f| {
        let name = &f.json_name;
        let shape = shape_tokens(f.shape, krate);
        quote!((#name, #shape))
    });
    let open = fields.iter().any(|f| f.serde.flatten && !f.serde.skip);
    quote! {
        #(#impls)*
        impl #p::JsonFields for #ident {
            const TYPE: &'static str = #type_name;
            const FIELDS: &'static [(&'static str, #p::JsonShape)] = &[#(#table),*];
            const NAMES: &'static str = #names;
            const OPEN: bool = #open;
        }
    }
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

pub(super) fn respan(tokens: TokenStream, span: proc_macro2::Span) -> TokenStream {
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

/// The steps of a simple path (scale, selectable fields) as column steps.
fn simple_steps(path: &str) -> Option<Vec<ColumnStep>> {
    let steps = parse_path(path)?;
    Some(
        steps
            .into_iter()
            .flat_map(|s| {
                std::iter::once(ColumnStep::Field(s.name))
                    .chain(std::iter::repeat_n(ColumnStep::Elements, s.indexes))
            })
            .collect(),
    )
}

/// A `const` block that resolves a path through the `JsonField` impls of the spec or status type
/// and checks the leaf's shape, and one per field a filter reads (looked up in the `JsonFields`
/// table of the list's element type); every token carries the path literal's span, so a typo or
/// a wrong type is reported at the literal.
fn path_check(
    kind: &Kind,
    spec: &syn::Ident,
    lit: &LitStr,
    steps: Option<Vec<ColumnStep>>,
    allowed: &[Shape],
    message: &str,
    subject: &str,
) -> TokenStream {
    let krate = &kind.crate_path;
    let p = quote!(#krate::crd::__checks);
    if kind.is_unchecked(&lit.value()) {
        return quote!();
    }
    let Some(steps) = steps else {
        return quote!();
    };
    let span = lit.span();
    // Re-spanned so that an unknown first field is reported at the literal, not at the type.
    let root = match steps.first() {
        Some(ColumnStep::Field(first)) if first == "spec" => respan(quote!(#spec), span),
        Some(ColumnStep::Field(first)) if first == "status" => match &kind.status {
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
    let mut filters = TokenStream::new();
    for step in &steps[1..] {
        match step {
            ColumnStep::Field(name) => {
                let hash = name_hash(name);
                shape = quote_spanned!(span=> <#ty as #p::JsonField<#hash>>::SHAPE);
                ty = quote_spanned!(span=> <#ty as #p::JsonField<#hash>>::Ty);
            }
            ColumnStep::Elements => {
                ty = quote_spanned!(span=> <#ty as #p::JsonElement>::Elem);
                shape = quote!(#p::JsonShape::Other);
            }
            ColumnStep::Filter(filter) => {
                ty = quote_spanned!(span=> <#ty as #p::JsonElement>::Elem);
                shape = quote!(#p::JsonShape::Other);
                let site = FilterSite {
                    column: subject,
                    raw: &filter.raw,
                    p: &p,
                    span,
                };
                filters.extend(filter_checks(&ty, filter, &site));
            }
            // Only with `unchecked` (reported otherwise).
            ColumnStep::Opaque(_) => return quote!(),
        }
    }
    let allowed = allowed.iter().map(|s| shape_tokens(*s, krate));
    // A format string: a filter's quoted literal may hold braces.
    let message = message.replace('{', "{{").replace('}', "}}");
    quote_spanned! {span=>
        const _: () = {
            // Resolving the type fails to compile when a step names no field.
            let _ = ::core::marker::PhantomData::<#ty>;
            if !#shape.is_one_of(&[#(#allowed),*]) {
                ::core::panic!(#message);
            }
        };
        #filters
    }
}

/// Where the checks of a filter's fields report: the column, the filter, the literal's span.
struct FilterSite<'a> {
    column: &'a str,
    raw: &'a str,
    p: &'a TokenStream,
    span: proc_macro2::Span,
}

/// The checks of the fields a filter reads from the list's elements (`elem`): on the left, and
/// on the right when it reads a field too; a field compared with a literal must be comparable.
fn filter_checks(elem: &TokenStream, filter: &Filter, site: &FilterSite) -> TokenStream {
    let literal = match &filter.compare {
        Some((_, Operand::Str(_))) => Some((quote!(String), "a string")),
        Some((_, Operand::Int)) => Some((quote!(Integer), "an integer")),
        Some((_, Operand::Float)) => Some((quote!(Number), "a number")),
        Some((_, Operand::Bool)) => Some((quote!(Bool), "a bool")),
        Some((_, Operand::Path(_))) | None => None,
    };
    let mut out = operand_check(elem, &filter.left, literal, site);
    if let Some((_, Operand::Path(right))) = &filter.compare {
        out.extend(operand_check(elem, right, None, site));
    }
    out
}

/// `@.a.b` of a filter: `a` is looked up in the element's `JsonFields` (the panic lists its JSON
/// fields), the rest resolves through `JsonField` as a path does; compared with a literal, the
/// field's shape must compare with it.
fn operand_check(
    elem: &TokenStream,
    fields: &[String],
    literal: Option<(TokenStream, &str)>,
    site: &FilterSite,
) -> TokenStream {
    let FilterSite {
        column,
        raw,
        p,
        span,
    } = *site;
    let Some((first, rest)) = fields.split_first() else {
        // `@` alone: the element itself (its shape is not known here).
        return quote!();
    };
    let read = format!("@.{}", fields.join("."));
    let missing =
        format!("{column}: the filter `{raw}` reads `{read}`, but the list's elements (`");
    let missing_tail = format!("`) have no JSON field `{first}`; their JSON fields: ");
    let table = quote_spanned!(span=> <#elem as #p::JsonFields>);
    let mut out = quote_spanned! {span=>
        const _: () = {
            const __SHAPE: ::core::option::Option<#p::JsonShape> =
                #p::field_shape(#table::FIELDS, #table::OPEN, #first);
            if __SHAPE.is_none() {
                const __PARTS: &[&str] = &[#missing, #table::TYPE, #missing_tail, #table::NAMES];
                const __MESSAGE: [u8; #p::message_len(__PARTS)] = #p::message(__PARTS);
                ::core::panic!("{}", #p::message_str(&__MESSAGE));
            }
        };
    };
    let Some((literal, literal_noun)) = literal else {
        return out;
    };
    // The shape of the field compared: from the table, or through `JsonField` below it.
    let shape = if rest.is_empty() {
        quote_spanned!(span=> #p::field_shape(#table::FIELDS, #table::OPEN, #first))
    } else {
        let hash = name_hash(first);
        let mut ty = quote_spanned!(span=> <#elem as #p::JsonField<#hash>>::Ty);
        let mut shape = quote!();
        for name in rest {
            let hash = name_hash(name);
            shape = quote_spanned!(span=> <#ty as #p::JsonField<#hash>>::SHAPE);
            ty = quote_spanned!(span=> <#ty as #p::JsonField<#hash>>::Ty);
        }
        quote_spanned!(span=> ::core::option::Option::Some(#shape))
    };
    let head = format!("{column}: the filter `{raw}` compares `{read}`, which is ");
    let tail = format!(", with {literal_noun}; the apiserver cannot compare them");
    out.extend(quote_spanned! {span=>
        const _: () = {
            const __FIELD: ::core::option::Option<#p::JsonShape> = #shape;
            const __FITS: bool = match __FIELD {
                ::core::option::Option::Some(s) => #p::compares(s, #p::FilterLiteral::#literal),
                ::core::option::Option::None => true,
            };
            if !__FITS {
                const __WHAT: &str = match __FIELD {
                    ::core::option::Option::Some(s) => s.describe(),
                    ::core::option::Option::None => "",
                };
                const __PARTS: &[&str] = &[#head, __WHAT, #tail];
                const __MESSAGE: [u8; #p::message_len(__PARTS)] = #p::message(__PARTS);
                ::core::panic!("{}", #p::message_str(&__MESSAGE));
            }
        };
    });
    out
}

/// A printer column's steps; `None` when the path is refused (reported by `validate.rs`).
fn column_steps(col: &PrintColumn) -> Option<Vec<ColumnStep>> {
    parse_column_path(&col.json_path.lit.value()).ok()
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
        let steps = column_steps(col);
        let subject = format!("printer column `{}`", col.name.value());
        out.extend(path_check(
            kind, spec, path, steps, allowed, &message, &subject,
        ));
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
                simple_steps(&path.lit.value()),
                &[Shape::Integer],
                &message,
                "",
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
                simple_steps(&path.lit.value()),
                &[Shape::String],
                &message,
                "",
            ));
        }
    }
    for path in &kind.selectable_fields {
        let message = format!(
            "selectable field `{}` must be a string, integer or bool",
            path.lit.value()
        );
        let allowed = [Shape::String, Shape::Integer, Shape::Bool];
        let steps = simple_steps(&path.lit.value());
        out.extend(path_check(
            kind, spec, &path.lit, steps, &allowed, &message, "",
        ));
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
