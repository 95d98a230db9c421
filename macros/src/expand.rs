//! Expand: emits tokens from the checked model. No decisions here beyond choosing templates.
//!
//! Every path goes through `<crate>::__private` (default `::kubeforge`), so the user's crate needs
//! no direct dependency on serde, schemars, garde, kube or inventory.
//!
//! This file emits the schema types (`#[kubeforge::schema]` structs, enums, tuple structs, and the
//! spec struct of a kind); `expand/markers.rs` turns markers into schema keys and client-side
//! checks, `expand/paths.rs` emits the compile-time JSONPath resolution, and `expand/root.rs`
//! the root type of a kind with its impls.

mod admission;
mod markers;
mod paths;
mod root;

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use serde_json::Value;
use syn::{Ident, ItemStruct, Type};

use crate::fields::{Enum, Field, Tagging};
use crate::model::Rule;
use markers::{checks_const, extend_attr, has_checks, marker_schema, rule_json};
use paths::{json_field_impls, transparent_paths};
pub use root::kind;

fn json_tokens(value: &Value) -> TokenStream {
    // JSON text is a valid token stream for schemars' `extend` (a `json!`-like macro).
    serde_json::to_string(value)
        .ok()
        .and_then(|s| syn::parse_str(&s).ok())
        .unwrap_or_else(|| quote!(null))
}

fn opt_str(s: Option<String>) -> TokenStream {
    match s {
        Some(s) => quote!(::core::option::Option::Some(#s)),
        None => quote!(::core::option::Option::None),
    }
}

pub fn crate_str(krate: &syn::Path, module: &str) -> String {
    let module = format_ident!("{module}");
    quote!(#krate::__private::#module)
        .to_string()
        .replace(' ', "")
}

/// The derives and schema attributes of a struct or enum.
pub fn derive_attrs(krate: &syn::Path, rules: &[Rule]) -> TokenStream {
    let serde_crate = crate_str(krate, "serde");
    let schemars_crate = crate_str(krate, "schemars");
    let rules = (!rules.is_empty()).then(|| {
        let v = json_tokens(&Value::Array(rules.iter().map(rule_json).collect()));
        quote!(#[schemars(extend("x-kubernetes-validations" = #v))])
    });
    quote! {
        #[derive(#krate::__private::serde::Serialize, #krate::__private::serde::Deserialize, #krate::__private::schemars::JsonSchema)]
        #[serde(crate = #serde_crate)]
        #[schemars(crate = #schemars_crate)]
        #rules
    }
}

/// Schema keys of a struct or enum itself (not of its fields).
#[derive(Default)]
pub struct Container {
    /// The struct's node leaves its parent's `required` (`optional_spec`).
    pub optional: bool,
    /// `#[validate(..)]` on the type: (the type's name, its markers).
    pub type_markers: Option<(String, crate::markers::Markers)>,
    /// `exactly_one_of` & co. ([`crate::model::OneOf::json`]): the structural pass makes them
    /// CEL rules, after the user's.
    pub one_ofs: Vec<Value>,
}

impl Container {
    fn schema(&self) -> serde_json::Map<String, Value> {
        let mut s = serde_json::Map::new();
        if self.optional {
            s.insert(markers::REQUIRED.to_owned(), Value::Bool(false));
        }
        if !self.one_ofs.is_empty() {
            s.insert(
                markers::ONE_OF.to_owned(),
                Value::Array(self.one_ofs.clone()),
            );
        }
        if let Some((name, m)) = &self.type_markers {
            // Under a key of the type's own: where the type is used, the structural pass
            // merges it under the field's markers (the tighter bound wins).
            s.insert(
                format!("{}{name}", markers::TYPE_MARKERS),
                Value::Object(marker_schema(m)),
            );
        }
        s
    }

    /// The attribute adding [`Container::schema`], if any.
    fn extend(&self) -> Option<TokenStream> {
        extend_attr(&self.schema())
    }

    /// The client-side checks of the type's markers on the whole value, at the parent's path.
    fn checks(&self, krate: &syn::Path) -> TokenStream {
        let Some((_, m)) = self.type_markers.as_ref().filter(|(_, m)| has_checks(m)) else {
            return quote!();
        };
        let p = quote!(#krate::crd::__checks);
        let constant = checks_const(m, krate);
        quote! {
            {
                #constant
                let mut __path = || __parent();
                let __value = #p::to_json(self, &mut __path, __report);
                #p::check(&__value, &__CHECKS, &mut __path, __report);
            }
        }
    }
}

/// Adds one `#[schemars(extend(..))]` per field with markers.
fn add_field_extends(item_fields: &mut syn::Fields, fields: &[Field]) {
    for (field, model) in item_fields.iter_mut().zip(fields) {
        if let Some(extend) = extend_attr(&marker_schema(&model.markers)) {
            field.attrs.push(syn::parse_quote!(#extend));
        }
        if crate::fields::byte_string(&model.ty).is_some() {
            // Reported by `validate::byte_string`; a stand-in schema keeps the derive from adding
            // a second error about the missing `JsonSchema` impl.
            field
                .attrs
                .push(syn::parse_quote!(#[schemars(with = "::std::string::String")]));
        }
    }
}

/// The body of `validate_into` for the fields of a struct.
fn validate_fields(fields: &[Field], krate: &syn::Path) -> TokenStream {
    validate_fields_with(fields, krate, &quote!(__parent), |f| {
        let ident = &f.ident;
        quote!(&self.#ident)
    })
}

/// Validation of `fields`, each reached through `access` (a reference expression), with paths
/// below the path closure `parent`.
fn validate_fields_with(
    fields: &[Field],
    krate: &syn::Path,
    parent: &TokenStream,
    access: impl Fn(&Field) -> TokenStream,
) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let per_field = fields.iter().filter(|f| !f.serde.skip).map(|f| {
        let value = access(f);
        let name = &f.json_name;
        let path = if f.serde.flatten || f.serde.transparent {
            quote!(let mut __path = || #parent();)
        } else {
            quote!(let mut __path = || #parent().join(#name);)
        };
        // A field serde leaves out is not sent: the apiserver sees it absent (only `required`
        // fails), and nothing inside it.
        let skipped = f
            .serde
            .skip_serializing_if
            .as_ref()
            .map(|predicate| quote!(#predicate(#value)));
        let checks = has_checks(&f.markers).then(|| {
            let constant = checks_const(&f.markers, krate);
            let json = quote!(#p::to_json(#value, &mut __path, __report));
            let json = match &skipped {
                Some(skipped) => quote!(if #skipped { #p::ABSENT } else { #json }),
                None => json,
            };
            quote! {
                #constant
                let __value = #json;
                #p::check(&__value, &__CHECKS, &mut __path, __report);
            }
        });
        let dive = quote! {
            #[allow(unused_imports)]
            use #p::{DiveNone as _, DiveValidate as _};
            (&#p::Dive(#value)).dive(&mut __path, __report);
        };
        let dive = match &skipped {
            Some(skipped) => quote!(if !#skipped { #dive }),
            None => quote!({ #dive }),
        };
        quote! {
            {
                #path
                #checks
                #dive
            }
        }
    });
    quote!(#(#per_field)*)
}

fn validate_impl(ident: &syn::Ident, body: TokenStream, krate: &syn::Path) -> TokenStream {
    let g = quote!(#krate::__private::garde);
    quote! {
        impl #g::Validate for #ident {
            type Context = ();

            #[allow(unused_variables, unused_mut, clippy::redundant_closure)]
            fn validate_into(
                &self,
                __ctx: &(),
                __parent: &mut dyn ::core::ops::FnMut() -> #g::Path,
                __report: &mut #g::Report,
            ) {
                #body
            }
        }
    }
}

/// A struct with markers: the struct (derives added, markers consumed) and its `Validate` impl.
pub fn schema_struct(
    item: &mut ItemStruct,
    fields: &[Field],
    rules: &[Rule],
    container: &Container,
    krate: &syn::Path,
) -> TokenStream {
    add_field_extends(&mut item.fields, fields);
    let derives = derive_attrs(krate, rules);
    let container_extend = container.extend();
    let own = container.checks(krate);
    let fields_body = validate_fields(fields, krate);
    let body = quote!(#own #fields_body);
    let validate = validate_impl(&item.ident, body, krate);
    let json_fields = match fields {
        [only] if only.serde.transparent => transparent_paths(&item.ident, &only.inner_ty, krate),
        _ => json_field_impls(&item.ident, fields, krate),
    };
    quote! {
        #derives
        #container_extend
        #item
        #validate
        #json_fields
    }
}

/// `impl ConditionsStatus` for a status struct with the fields `conditions: Conditions` and
/// `observed_generation: Option<i64>` (as written), which dependents maintain; nothing otherwise.
pub fn conditions_status(
    ident: &Ident,
    fields: &[Field],
    krate: &syn::Path,
) -> Option<TokenStream> {
    let last = |ty: &Type| match ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    };
    let conditions = fields.iter().find(|f| {
        f.ident == "conditions" && !f.is_option && last(&f.ty).as_deref() == Some("Conditions")
    })?;
    let generation = fields.iter().find(|f| {
        f.ident == "observed_generation"
            && f.is_option
            && last(&f.inner_ty).as_deref() == Some("i64")
    })?;
    let (c, g) = (&conditions.ident, &generation.ident);
    Some(quote! {
        #[automatically_derived]
        impl #krate::dependents::ConditionsStatus for #ident {
            fn conditions(&mut self) -> &mut #krate::crd::Conditions {
                &mut self.#c
            }
            fn observed_generation(&mut self) -> &mut ::core::option::Option<i64> {
                &mut self.#g
            }
        }
    })
}

/// An enum: derives, markers of struct-variant fields as schema extensions, and a `Validate`
/// impl that checks them and dives into every variant's fields, at the paths serde's tagging
/// gives them.
pub fn schema_enum(
    item: &mut syn::ItemEnum,
    model: &Enum,
    rules: &[Rule],
    container: &Container,
    krate: &syn::Path,
) -> TokenStream {
    let derives = derive_attrs(krate, rules);
    let container_extend = container.extend();
    let own = container.checks(krate);
    let p = quote!(#krate::crd::__checks);
    for (variant, vm) in item.variants.iter_mut().zip(&model.variants) {
        add_field_extends(&mut variant.fields, &vm.fields);
    }
    let arms = item
        .variants
        .iter()
        .zip(&model.variants)
        .map(|(v, vm)| variant_arm(v, &vm.json_name, &vm.fields, &model.tagging, krate));
    let body = if item.variants.is_empty() {
        quote!(#own)
    } else {
        quote! {
            #own
            #[allow(unused_imports)]
            use #p::{DiveNone as _, DiveValidate as _};
            match self { #(#arms)* }
        }
    };
    let validate = validate_impl(&item.ident, body, krate);
    quote! {
        #derives
        #container_extend
        #item
        #validate
    }
}

/// The `match` arm of one variant in the enum's `validate_into`.
fn variant_arm(
    v: &syn::Variant,
    tag: &str,
    fields: &[Field],
    tagging: &Tagging,
    krate: &syn::Path,
) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let name = &v.ident;
    let count = v.fields.len();
    // Where the variant's content is: externally tagged under its name, adjacently tagged
    // under the content key, otherwise at the enum's own path.
    let prefix = match tagging {
        Tagging::External => quote!(let mut __variant = || __parent().join(#tag);),
        Tagging::Adjacent { content } => {
            quote!(let mut __variant = || __parent().join(#content);)
        }
        Tagging::Internal | Tagging::Untagged => quote!(let mut __variant = || __parent();),
    };
    match &v.fields {
        syn::Fields::Unit => quote!(Self::#name => {}),
        syn::Fields::Unnamed(_) => {
            let binds: Vec<syn::Ident> = (0..count).map(|i| format_ident!("__f{i}")).collect();
            let dives = binds.iter().enumerate().map(|(i, b)| {
                let path = if count == 1 {
                    quote!(let mut __path = || __variant();)
                } else {
                    quote!(let mut __path = || __variant().join(#i);)
                };
                quote! { { #path (&#p::Dive(#b)).dive(&mut __path, __report); } }
            });
            quote! {
                Self::#name(#(#binds),*) => {
                    #prefix
                    #(#dives)*
                }
            }
        }
        syn::Fields::Named(_) => {
            let idents: Vec<&syn::Ident> = fields.iter().map(|f| &f.ident).collect();
            let body = validate_fields_with(fields, krate, &quote!(__variant), |f| {
                let ident = &f.ident;
                quote!(#ident)
            });
            quote! {
                Self::#name { #(#idents),* } => {
                    #prefix
                    #body
                }
            }
        }
    }
}

/// A tuple struct: derives, and a `Validate` impl that dives into each field (a newtype is its
/// field in JSON, so the path does not change; other tuples are JSON arrays).
pub fn schema_tuple(
    item: &ItemStruct,
    rules: &[Rule],
    container: &Container,
    krate: &syn::Path,
) -> TokenStream {
    let derives = derive_attrs(krate, rules);
    let container_extend = container.extend();
    let own = container.checks(krate);
    let p = quote!(#krate::crd::__checks);
    let newtype = item.fields.len() == 1;
    let dives = (0..item.fields.len()).map(|i| {
        let index = syn::Index::from(i);
        let path = if newtype {
            quote!(let mut __path = || __parent();)
        } else {
            quote!(let mut __path = || __parent().join(#i);)
        };
        quote! {
            {
                #path
                (&#p::Dive(&self.#index)).dive(&mut __path, __report);
            }
        }
    });
    let body = quote! {
        #own
        #[allow(unused_imports)]
        use #p::{DiveNone as _, DiveValidate as _};
        #(#dives)*
    };
    let validate = validate_impl(&item.ident, body, krate);
    let forward = match item.fields.iter().next() {
        Some(field) if newtype => transparent_paths(&item.ident, &field.ty, krate),
        _ => quote!(),
    };
    quote! {
        #derives
        #container_extend
        #item
        #validate
        #forward
    }
}
