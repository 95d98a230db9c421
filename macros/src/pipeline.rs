//! The two attribute macros as pipelines of the same stages: attributes (`attrs.rs`, field markers
//! in `markers.rs`) → typed model (`model.rs`, `fields.rs`) → checks (`validate.rs`) → expansion
//! (`expand.rs`). On any error the user's item is still emitted (markers removed, derives added)
//! next to the `compile_error!`s, so one mistake does not cascade into errors about missing items.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Item, ItemStruct};

use crate::errors::Errors;
use crate::{attrs, expand, fields, markers, model, validate};

const DERIVED: &[&str] = &["Serialize", "Deserialize", "JsonSchema"];

/// Reports derives the macro adds itself and removes them from the item (they would conflict
/// with ours and add a second, confusing error).
fn check_own_derives(attrs: &mut [syn::Attribute], errors: &mut Errors, macro_name: &str) {
    for attr in attrs.iter_mut().filter(|a| a.path().is_ident("derive")) {
        let Ok(paths) = attr.parse_args_with(
            syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated,
        ) else {
            continue;
        };
        let kept: Vec<&syn::Path> = paths
            .iter()
            .filter(|path| match path.segments.last() {
                Some(last) if DERIVED.contains(&last.ident.to_string().as_str()) => {
                    errors.spanned(
                        path,
                        format!(
                            "remove this derive: #[{macro_name}] derives `{}` itself",
                            last.ident
                        ),
                    );
                    false
                }
                _ => true,
            })
            .collect();
        if kept.len() != paths.len() {
            *attr = syn::parse_quote!(#[derive(#(#kept),*)]);
        }
    }
}

fn check_generics(generics: &syn::Generics, errors: &mut Errors) {
    if !generics.params.is_empty() {
        errors.spanned(
            generics,
            "generic types are not supported by kubeforge's schema macros",
        );
    }
}

fn named_struct(
    item: Item,
    macro_name: &str,
    errors: &mut Errors,
) -> Result<ItemStruct, TokenStream> {
    match item {
        Item::Struct(s) if matches!(s.fields, syn::Fields::Named(_)) => Ok(s),
        Item::Struct(s) => {
            errors.spanned(
                &s.fields,
                format!("#[{macro_name}] needs a struct with named fields (a tuple or unit struct has no JSON object schema)"),
            );
            Err(quote!(#s))
        }
        Item::Enum(e) => {
            errors.spanned(
                e.enum_token,
                format!("#[{macro_name}] goes on the spec struct, not an enum; use #[kubeforge::schema] for enums used inside the spec"),
            );
            Err(quote!(#e))
        }
        other => {
            errors.spanned(
                &other,
                format!("#[{macro_name}] goes on a struct with named fields"),
            );
            Err(quote!(#other))
        }
    }
}

/// `#[custom_resource(...)]`: attributes → model → checks → expansion.
pub fn custom_resource(args: TokenStream, input: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let item: Item = match syn::parse2(input) {
        Ok(item) => item,
        Err(e) => return e.to_compile_error(),
    };
    let attrs = attrs::parse_kind(args, &mut errors);
    let mut spec = match named_struct(item, "custom_resource", &mut errors) {
        Ok(s) => s,
        Err(item) => {
            let errs = errors.check().err().map(|e| e.to_compile_error());
            return quote!(#item #errs);
        }
    };
    check_own_derives(&mut spec.attrs, &mut errors, "custom_resource");
    check_generics(&spec.generics, &mut errors);
    let convert_from = take_convert_attrs(&mut spec, &mut errors);
    let fields = struct_fields(&mut spec, &mut errors);
    for field in &fields {
        validate::field(field, &mut errors);
    }
    let mut kind = model::kind(attrs, &mut errors);
    conversion_renames(kind.as_mut(), convert_from, &fields, &mut errors);
    if let Some(kind) = &kind {
        validate::kind(kind, &mut errors);
        validate::root_name(kind, &spec.ident, &mut errors);
        validate::admission(kind, &fields, &spec.ident, &mut errors);
        validate::root_rules(kind, &fields, &spec.ident, &mut errors);
    }
    let user_rules = kind.as_ref().map_or(&[][..], |k| &k.rules);
    validate::rule_fields(user_rules, &fields, &spec.ident, &mut errors);
    let one_ofs = kind.as_ref().map_or(&[][..], |k| &k.one_ofs);
    validate::one_ofs(one_ofs, &fields, &spec.ident, &mut errors);
    let krate = kind
        .as_ref()
        .map_or_else(model::default_crate, |k| k.crate_path.clone());
    let container = expand::Container {
        optional: kind.as_ref().and_then(|k| k.optional_spec).is_some(),
        type_markers: None,
        one_ofs: one_ofs.iter().map(model::OneOf::json).collect(),
    };
    let spec_tokens = expand::schema_struct(&mut spec, &fields, user_rules, &container, &krate);
    expand_kind(spec_tokens, kind.as_ref(), &spec, errors)
}

/// Takes `#[convert(from = "..")]` off the spec's fields: `(field, the hub's name)`.
fn take_convert_attrs(
    spec: &mut ItemStruct,
    errors: &mut Errors,
) -> Vec<(syn::Ident, syn::LitStr)> {
    let mut out = Vec::new();
    for field in spec.fields.iter_mut() {
        let Some(ident) = field.ident.clone() else {
            continue;
        };
        field.attrs.retain(|attr| {
            if !attr.path().is_ident("convert") {
                return true;
            }
            let parsed = attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("from") {
                    out.push((ident.clone(), meta.value()?.parse::<syn::LitStr>()?));
                    Ok(())
                } else {
                    Err(meta.error("expected `#[convert(from = \"the hub's field name\")]`"))
                }
            });
            if let Err(e) = parsed {
                errors.push(e);
            }
            false
        });
    }
    out
}

/// Records the renames of `#[convert(from = "..")]` in the kind's conversion (by JSON names);
/// an error where there is no `conversion(hub = .., generate)` to use them.
fn conversion_renames(
    kind: Option<&mut model::Kind>,
    convert_from: Vec<(syn::Ident, syn::LitStr)>,
    fields: &[fields::Field],
    errors: &mut Errors,
) {
    let generated = kind
        .and_then(|k| k.conversion.as_mut())
        .filter(|c| c.generate);
    let Some(conversion) = generated else {
        for (_, lit) in convert_from {
            errors.at(
                lit.span(),
                "`#[convert(from = ..)]` needs `conversion(hub = .., generate)` on the kind",
            );
        }
        return;
    };
    for (ident, lit) in convert_from {
        if let Some(field) = fields.iter().find(|f| f.ident == ident) {
            conversion
                .renames
                .push((field.json_name.clone(), lit.value()));
        }
    }
}

/// The fields of a struct with named fields (markers taken off), with serde's container keys.
fn struct_fields(item: &mut ItemStruct, errors: &mut Errors) -> Vec<fields::Field> {
    let rename_all = fields::container_rename_all(&item.attrs);
    let mut fields = fields::fields(&mut item.fields, rename_all.as_deref(), errors);
    let transparent = fields::container_transparent(&item.attrs);
    let default = fields::container_default(&item.attrs);
    for field in &mut fields {
        field.serde.transparent |= transparent;
        field.serde.default |= default;
    }
    fields
}

/// The spec struct, then the root type: checked when there is no error; as a dummy (no JSONPath
/// checks) next to the errors, so that code using it keeps compiling and only the reported errors
/// remain; not at all when the kind is unknown or names the spec struct itself.
fn expand_kind(
    spec_tokens: TokenStream,
    kind: Option<&model::Kind>,
    spec: &ItemStruct,
    errors: Errors,
) -> TokenStream {
    match (kind, errors.check()) {
        (Some(kind), Ok(())) => {
            let root = expand::kind(kind, spec, true);
            quote!(#spec_tokens #root)
        }
        (Some(kind), Err(errs)) if spec.ident != kind.kind.value() => {
            let root = expand::kind(kind, spec, false);
            let errs = errs.to_compile_error();
            quote!(#spec_tokens #root #errs)
        }
        (_, result) => {
            let errs = result.err().map(|e| e.to_compile_error());
            quote!(#spec_tokens #errs)
        }
    }
}

/// `#[kubeforge::schema(...)]`: attributes → model → checks → expansion, for an enum, a tuple
/// struct or a struct with named fields.
pub fn schema(args: TokenStream, input: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let item: Item = match syn::parse2(input) {
        Ok(item) => item,
        Err(e) => return e.to_compile_error(),
    };
    let options = model::schema(attrs::parse_schema(args, &mut errors));
    validate::rules(&options.rules, &mut errors);
    let mut item = item;
    let container = type_markers(&mut item, &mut errors);
    let tokens = match item {
        Item::Enum(e) => schema_enum(e, &options, &container, &mut errors),
        Item::Struct(s) if matches!(s.fields, syn::Fields::Unnamed(_)) => {
            schema_tuple(s, &options, &container, &mut errors)
        }
        other => match named_struct(other, "schema", &mut errors) {
            Ok(s) => schema_struct(s, &options, container, &mut errors),
            Err(item) => item,
        },
    };
    let errs = errors.check().err().map(|e| e.to_compile_error());
    quote!(#tokens #errs)
}

/// `exactly_one_of` & co. name sibling fields: only a struct with named fields has them.
fn reject_one_ofs(options: &model::Schema, errors: &mut Errors) {
    for group in &options.one_ofs {
        errors.at(
            group.key,
            format!(
                "`{}` names fields of a struct with named fields; on an enum, use struct variants or a `rule(..)`",
                group.name()
            ),
        );
    }
}

/// `#[validate(..)]` on the type itself: taken off the item and checked against what the type
/// is (a newtype gets its inner type's markers; a struct or enum those of an object).
fn type_markers(item: &mut Item, errors: &mut Errors) -> expand::Container {
    let (attrs, ident) = match item {
        Item::Enum(e) => (&mut e.attrs, e.ident.clone()),
        Item::Struct(s) => (&mut s.attrs, s.ident.clone()),
        _ => return expand::Container::default(),
    };
    let Some(markers) = markers::take(attrs, errors) else {
        return expand::Container::default();
    };
    let what = match &*item {
        Item::Struct(s) => match &s.fields {
            syn::Fields::Unnamed(f) if f.unnamed.len() == 1 => {
                validate::TypeKind::Newtype(Box::new(f.unnamed[0].ty.clone()))
            }
            syn::Fields::Unnamed(_) => validate::TypeKind::Tuple,
            _ => validate::TypeKind::Struct,
        },
        Item::Enum(e) if e.variants.iter().all(|v| v.fields.is_empty()) => {
            validate::TypeKind::UnitEnum
        }
        _ => validate::TypeKind::DataEnum,
    };
    validate::type_markers(&ident, &what, &markers, errors);
    expand::Container {
        type_markers: Some((ident.to_string(), markers)),
        ..expand::Container::default()
    }
}

fn schema_enum(
    mut e: syn::ItemEnum,
    options: &model::Schema,
    container: &expand::Container,
    errors: &mut Errors,
) -> TokenStream {
    reject_one_ofs(options, errors);
    check_own_derives(&mut e.attrs, errors, "schema");
    check_generics(&e.generics, errors);
    let model = fields::enumeration(&mut e, errors);
    for variant in &model.variants {
        for field in &variant.fields {
            validate::field(field, errors);
        }
    }
    expand::schema_enum(
        &mut e,
        &model,
        &options.rules,
        container,
        &options.crate_path,
    )
}

/// Newtypes and tuple structs: serde's shape, no markers on positional fields.
fn schema_tuple(
    mut s: ItemStruct,
    options: &model::Schema,
    container: &expand::Container,
    errors: &mut Errors,
) -> TokenStream {
    reject_one_ofs(options, errors);
    check_own_derives(&mut s.attrs, errors, "schema");
    check_generics(&s.generics, errors);
    for field in s.fields.iter_mut() {
        markers::reject(
            &mut field.attrs,
            "markers on tuple struct fields are not supported; put them on the type (`#[validate(..)]` above the struct applies to its value) or use named fields",
            errors,
        );
    }
    expand::schema_tuple(&s, &options.rules, container, &options.crate_path)
}

fn schema_struct(
    mut s: ItemStruct,
    options: &model::Schema,
    container: expand::Container,
    errors: &mut Errors,
) -> TokenStream {
    check_own_derives(&mut s.attrs, errors, "schema");
    check_generics(&s.generics, errors);
    let fields = struct_fields(&mut s, errors);
    for field in &fields {
        validate::field(field, errors);
    }
    validate::rule_fields(&options.rules, &fields, &s.ident, errors);
    validate::one_ofs(&options.one_ofs, &fields, &s.ident, errors);
    let container = expand::Container {
        one_ofs: options.one_ofs.iter().map(model::OneOf::json).collect(),
        ..container
    };
    let conditions = expand::conditions_status(&s.ident, &fields, &options.crate_path);
    let tokens = expand::schema_struct(
        &mut s,
        &fields,
        &options.rules,
        &container,
        &options.crate_path,
    );
    quote!(#tokens #conditions)
}

#[cfg(test)]
pub(crate) mod tests {
    use quote::quote;

    use super::*;

    pub(crate) fn pretty(tokens: TokenStream) -> String {
        prettyplease::unparse(&syn::parse2(tokens).expect("the expansion parses as a file"))
    }

    /// Compares with `macros/snapshots/<name>`; `KUBEFORGE_BLESS=1` rewrites the file.
    pub(crate) fn snapshot(name: &str, actual: &str) {
        let path = format!("{}/snapshots/{name}", env!("CARGO_MANIFEST_DIR"));
        if std::env::var_os("KUBEFORGE_BLESS").is_some() {
            std::fs::write(&path, actual).expect("write snapshot");
            return;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            expected == actual,
            "expansion differs from {path}; review and rerun with KUBEFORGE_BLESS=1\n{actual}"
        );
    }

    #[test]
    fn custom_resource_should_expand_like_the_snapshot() {
        let out = custom_resource(
            quote!(group = "apps.example.com", version = "v1", kind = "WebApp", namespaced,
                status = WebAppStatus, shortname = "wa",
                printcolumn(name = "Replicas", json_path = ".spec.replicas", type = "integer"),
                scale(spec = ".spec.replicas", status = ".status.replicas"),
                rule(cel = "self.replicas >= 0", message = "not negative")),
            quote! {
                /// Spec.
                #[derive(Clone, Debug)]
                #[serde(rename_all = "camelCase")]
                pub struct WebAppSpec {
                    /// Number of pods.
                    #[validate(minimum = 1, maximum = 100)]
                    pub replicas: i32,
                    #[serde(default)]
                    pub image_name: Option<String>,
                }
            },
        );
        snapshot("custom_resource.rs", &pretty(out));
    }

    #[test]
    fn schema_should_expand_like_the_snapshot() {
        let out = schema(
            quote!(rule(cel = "self.a <= self.b")),
            quote! {
                #[derive(Clone, Debug)]
                pub struct Range {
                    #[validate(minimum = 0)]
                    pub a: i64,
                    #[validate(pattern = "^x", max_length = 8)]
                    pub name: String,
                    pub b: i64,
                    #[serde(skip)]
                    pub cache: i64,
                    #[serde(default, skip_serializing_if = "Vec::is_empty")]
                    #[validate(min_items = 1)]
                    pub hosts: Vec<String>,
                }
            },
        );
        snapshot("schema.rs", &pretty(out));
    }

    #[test]
    fn custom_resource_should_emit_the_item_next_to_the_errors() {
        let out = custom_resource(
            quote!(group = "apps.example.com", kind = "Thing", namespaced),
            quote!(
                #[derive(Clone, Debug)]
                pub struct ThingSpec {
                    #[validate(minimum = 1)]
                    pub n: i32,
                }
            ),
        )
        .to_string();
        assert!(out.contains("pub struct ThingSpec"), "{out}");
        assert!(out.contains("compile_error"), "{out}");
        assert!(out.contains("missing key `version`"), "{out}");
        assert!(!out.contains("validate ("), "markers are consumed: {out}");
        assert!(
            out.contains("pub struct Thing "),
            "the root type is still emitted (no cascade): {out}"
        );
    }
}
