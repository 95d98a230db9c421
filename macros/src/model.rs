//! Model: the typed, defaulted view of what the user wrote (kind options, fields with their
//! serialized names, type shapes and markers), spans kept for `validate.rs`.

use proc_macro2::Span;
use syn::{Fields, Ident, LitStr, Type};

use crate::attrs::{Keyed, RawKind, RawMarkers, RawPrintColumn, RawRule, RawScale};
use crate::errors::Errors;

/// The scope of a kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// The typed kind options.
pub struct Kind {
    pub group: LitStr,
    pub version: LitStr,
    pub kind: LitStr,
    pub plural: String,
    pub singular: String,
    pub scope: Scope,
    pub status: Option<Type>,
    pub shortnames: Vec<LitStr>,
    pub categories: Vec<LitStr>,
    pub printcolumns: Vec<RawPrintColumn>,
    pub scale: Option<RawScale>,
    pub rules: Vec<RawRule>,
    pub selectable_fields: Vec<LitStr>,
    pub labels: Vec<(LitStr, LitStr)>,
    pub annotations: Vec<(LitStr, LitStr)>,
    pub deprecated: Option<Option<LitStr>>,
    pub served: bool,
    pub storage: bool,
    pub crate_path: syn::Path,
    /// JSONPaths marked `unchecked`.
    pub unchecked: Vec<String>,
}

/// English plural of a lower-case kind, as kubebuilder derives it (`webapp` → `webapps`,
/// `policy` → `policies`, `ingress` → `ingresses`).
pub fn pluralize(singular: &str) -> String {
    let ends = |s: &str| singular.ends_with(s);
    if ends("s") || ends("x") || ends("z") || ends("ch") || ends("sh") {
        format!("{singular}es")
    } else if ends("y")
        && !singular
            .chars()
            .rev()
            .nth(1)
            .is_some_and(|c| "aeiou".contains(c))
    {
        format!("{}ies", &singular[..singular.len() - 1])
    } else {
        format!("{singular}s")
    }
}

pub fn default_crate() -> syn::Path {
    syn::parse_quote!(::kubeforge)
}

/// Builds the kind model; missing required keys are reported at `call_site` (the attribute).
pub fn kind(raw: RawKind, errors: &mut Errors) -> Option<Kind> {
    let missing = |errors: &mut Errors, key: &str, example: &str| {
        errors.at(
            Span::call_site(),
            format!("missing key `{key}`: add `{key} = {example}` to #[custom_resource(...)]"),
        );
    };
    if raw.group.is_none() {
        missing(errors, "group", "\"apps.example.com\"");
    }
    if raw.version.is_none() {
        missing(errors, "version", "\"v1\"");
    }
    if raw.kind.is_none() {
        missing(errors, "kind", "\"WebApp\"");
    }
    let scope = match (&raw.namespaced, &raw.cluster) {
        (
            Some(Keyed {
                value: true,
                key: _,
            }),
            Some(Keyed {
                value: true,
                key: cluster,
            }),
        ) => {
            errors.at(
                *cluster,
                "`cluster` and `namespaced` are both set; a kind has exactly one scope",
            );
            Scope::Namespaced
        }
        (_, Some(Keyed { value: true, .. })) => Scope::Cluster,
        (Some(Keyed { value: true, .. }), _) => Scope::Namespaced,
        _ => {
            errors.at(
                Span::call_site(),
                "missing scope: add `namespaced` or `cluster` to #[custom_resource(...)]",
            );
            Scope::Namespaced
        }
    };
    // With the kind known, missing group/version (already reported) get placeholders so that the
    // root type can still be emitted and the user's other code does not fail in cascade.
    let placeholder = |s: &str| LitStr::new(s, Span::call_site());
    let kind = raw.kind?;
    let group = raw
        .group
        .unwrap_or_else(|| placeholder("invalid.kubeforge.dev"));
    let version = raw.version.unwrap_or_else(|| placeholder("v1"));
    let singular = raw
        .singular
        .as_ref()
        .map_or_else(|| kind.value().to_lowercase(), LitStr::value);
    let plural = raw
        .plural
        .as_ref()
        .map_or_else(|| pluralize(&kind.value().to_lowercase()), LitStr::value);
    if let Some(served) = &raw.served
        && !served.value
        && raw.storage.as_ref().is_none_or(|s| s.value)
    {
        errors.at(
            served.key,
            "the storage version must be served; add `storage = false` (another version stores)",
        );
    }
    Some(Kind {
        group,
        version,
        kind,
        plural,
        singular,
        scope,
        status: raw.status,
        shortnames: raw.shortnames,
        categories: raw.categories,
        printcolumns: raw.printcolumns,
        scale: raw.scale,
        rules: raw.rules,
        selectable_fields: raw.selectable_fields,
        labels: raw.labels,
        annotations: raw.annotations,
        deprecated: raw.deprecated.map(|d| d.value),
        served: raw.served.as_ref().is_none_or(|s| s.value),
        storage: raw.storage.is_none_or(|s| s.value),
        crate_path: raw.crate_path.unwrap_or_else(default_crate),
        unchecked: raw.unchecked,
    })
}

/// The JSON shape of a field's Rust type, as far as the syntax tells (through `Option`, `Box`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Shape {
    Integer,
    Number,
    String,
    Bool,
    Array,
    Map,
    /// `IntOrString`, `Quantity`.
    IntOrString,
    /// Any other type (a struct, an enum, a k8s-openapi type): not checked.
    Other,
}

impl Shape {
    pub fn describe(self) -> &'static str {
        match self {
            Shape::Integer => "an integer",
            Shape::Number => "a floating-point number",
            Shape::String => "a string",
            Shape::Bool => "a bool",
            Shape::Array => "a list",
            Shape::Map => "a map",
            Shape::IntOrString => "an int-or-string",
            Shape::Other => "another type",
        }
    }
}

fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        _ => None,
    }
}

fn first_generic(seg: &syn::PathSegment) -> Option<&Type> {
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(a) => a.args.iter().find_map(|arg| match arg {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        }),
        _ => None,
    }
}

pub fn shape(ty: &Type) -> Shape {
    let Some(seg) = last_segment(ty) else {
        return match ty {
            Type::Reference(r) => shape(&r.elem),
            Type::Array(_) | Type::Slice(_) => Shape::Array,
            _ => Shape::Other,
        };
    };
    match seg.ident.to_string().as_str() {
        "Option" | "Box" | "Arc" | "Rc" => first_generic(seg).map_or(Shape::Other, shape),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" | "u8" | "u16" | "u32" | "u64" | "u128"
        | "usize" => Shape::Integer,
        "f32" | "f64" => Shape::Number,
        "String" | "str" | "Time" | "MicroTime" => Shape::String,
        "IntOrString" | "Quantity" => Shape::IntOrString,
        "bool" => Shape::Bool,
        "Vec" | "VecDeque" | "BTreeSet" | "HashSet" => Shape::Array,
        "BTreeMap" | "HashMap" => Shape::Map,
        _ => Shape::Other,
    }
}

/// The shape of a list's elements (`Other` when the type is not a known list).
pub fn element_shape(ty: &Type) -> Shape {
    match last_segment(&inner_type(ty)) {
        Some(seg)
            if matches!(
                seg.ident.to_string().as_str(),
                "Vec" | "VecDeque" | "BTreeSet" | "HashSet"
            ) =>
        {
            first_generic(seg).map_or(Shape::Other, shape)
        }
        _ => Shape::Other,
    }
}

/// The type without `Option<..>` / `Box<..>` wrappers (what a JSONPath descends into).
pub fn inner_type(ty: &Type) -> Type {
    if let Some(seg) = last_segment(ty)
        && matches!(seg.ident.to_string().as_str(), "Option" | "Box")
        && let Some(inner) = first_generic(seg)
    {
        return inner_type(inner);
    }
    ty.clone()
}

/// serde's `rename_all` rules.
pub fn rename(name: &str, rule: &str) -> Option<String> {
    let words: Vec<&str> = name.split('_').filter(|w| !w.is_empty()).collect();
    let cap = |w: &str| {
        let mut c = w.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect::<String>())
            .unwrap_or_default()
    };
    Some(match rule {
        "lowercase" => name.to_lowercase(),
        "UPPERCASE" => name.to_uppercase(),
        "snake_case" => name.to_owned(),
        "SCREAMING_SNAKE_CASE" => name.to_uppercase(),
        "kebab-case" => name.replace('_', "-"),
        "SCREAMING-KEBAB-CASE" => name.replace('_', "-").to_uppercase(),
        "PascalCase" => words.iter().map(|w| cap(w)).collect(),
        "camelCase" => words
            .iter()
            .enumerate()
            .map(|(i, w)| if i == 0 { (*w).to_owned() } else { cap(w) })
            .collect(),
        _ => return None,
    })
}

/// What serde does with a field.
#[derive(Default)]
pub struct SerdeField {
    pub rename: Option<String>,
    pub flatten: bool,
    pub skip: bool,
    pub default: bool,
    /// The container is `#[serde(transparent)]`: the field is the value itself.
    pub transparent: bool,
}

fn serde_field(attrs: &[syn::Attribute]) -> SerdeField {
    let mut out = SerdeField::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        // Unknown serde keys are serde's to report; read what matters and skip the rest.
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") {
                if meta.input.peek(syn::Token![=]) {
                    out.rename = Some(meta.value()?.parse::<LitStr>()?.value());
                } else {
                    meta.parse_nested_meta(|inner| {
                        if inner.path.is_ident("serialize") {
                            out.rename = Some(inner.value()?.parse::<LitStr>()?.value());
                        } else {
                            let _: LitStr = inner.value()?.parse()?;
                        }
                        Ok(())
                    })?;
                }
            } else if meta.path.is_ident("flatten") {
                out.flatten = true;
            } else if meta.path.is_ident("skip") || meta.path.is_ident("skip_serializing") {
                out.skip = true;
            } else if meta.path.is_ident("default") {
                out.default = true;
                if meta.input.peek(syn::Token![=]) {
                    let _: LitStr = meta.value()?.parse()?;
                }
            } else if meta.input.peek(syn::Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            } else if meta.input.peek(syn::token::Paren) {
                let content;
                syn::parenthesized!(content in meta.input);
                let _: proc_macro2::TokenStream = content.parse()?;
            }
            Ok(())
        });
    }
    out
}

/// Whether the container is `#[serde(transparent)]`.
pub fn container_transparent(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("serde"))
        .any(|attr| {
            let mut found = false;
            let _ = attr.parse_nested_meta(|meta| {
                found |= meta.path.is_ident("transparent");
                if meta.input.peek(syn::Token![=]) {
                    let _: syn::Expr = meta.value()?.parse()?;
                } else if meta.input.peek(syn::token::Paren) {
                    let content;
                    syn::parenthesized!(content in meta.input);
                    let _: proc_macro2::TokenStream = content.parse()?;
                }
                Ok(())
            });
            found
        })
}

/// `#[serde(rename_all = "...")]` on the container (the serialize side).
pub fn container_rename_all(attrs: &[syn::Attribute]) -> Option<String> {
    let mut out = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename_all") {
                if meta.input.peek(syn::Token![=]) {
                    out = Some(meta.value()?.parse::<LitStr>()?.value());
                } else {
                    meta.parse_nested_meta(|inner| {
                        let v: LitStr = inner.value()?.parse()?;
                        if inner.path.is_ident("serialize") {
                            out = Some(v.value());
                        }
                        Ok(())
                    })?;
                }
            } else if meta.input.peek(syn::Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            } else if meta.input.peek(syn::token::Paren) {
                let content;
                syn::parenthesized!(content in meta.input);
                let _: proc_macro2::TokenStream = content.parse()?;
            }
            Ok(())
        });
    }
    out
}

/// One named field of a struct, with its markers.
pub struct Field {
    pub ident: Ident,
    /// The field's type without `Option`/`Box`.
    pub inner_ty: Type,
    /// The JSON name (after serde rename / rename_all).
    pub json_name: String,
    pub serde: SerdeField,
    pub shape: Shape,
    /// The shape of the elements, for lists.
    pub element_shape: Shape,
    pub markers: RawMarkers,
    /// Whether the field had any `#[validate]` attribute.
    pub has_markers: bool,
}

/// Reads the fields of a struct and takes their `#[validate(...)]` attributes out of `fields`
/// (the attribute macro consumes them: they are not a registered attribute).
pub fn fields(fields: &mut Fields, rename_all: Option<&str>, errors: &mut Errors) -> Vec<Field> {
    let mut out = Vec::new();
    for field in fields.iter_mut() {
        let mut markers = RawMarkers::default();
        let mut has_markers = false;
        field.attrs.retain(|attr| {
            if attr.path().is_ident("validate") {
                crate::attrs::parse_markers(attr, &mut markers, errors);
                has_markers = true;
                false
            } else {
                true
            }
        });
        let Some(ident) = field.ident.clone() else {
            continue;
        };
        let serde = serde_field(&field.attrs);
        let plain = ident.to_string().trim_start_matches("r#").to_owned();
        let json_name = serde.rename.clone().unwrap_or_else(|| {
            rename_all
                .and_then(|rule| rename(&plain, rule))
                .unwrap_or(plain)
        });
        out.push(Field {
            shape: shape(&field.ty),
            element_shape: element_shape(&field.ty),
            inner_ty: inner_type(&field.ty),
            ident,
            json_name,
            serde,
            markers,
            has_markers,
        });
    }
    out
}

/// How serde represents an enum's variants.
pub enum Tagging {
    /// `{"Variant": content}` (the default).
    External,
    /// `#[serde(tag = "..")]`: the fields next to the tag.
    Internal,
    /// `#[serde(tag = "..", content = "..")]`: the content under its own key.
    Adjacent { content: String },
    /// `#[serde(untagged)]`: the content alone.
    Untagged,
}

/// One variant: its JSON name and, for struct variants, its fields with markers.
pub struct Variant {
    pub json_name: String,
    pub fields: Vec<Field>,
}

/// An enum with `#[kubeforge::schema]`.
pub struct Enum {
    pub tagging: Tagging,
    pub variants: Vec<Variant>,
}

/// Reads serde's container keys of an enum: (tag, content, untagged, rename_all,
/// rename_all_fields).
fn enum_serde(
    attrs: &[syn::Attribute],
) -> (
    Option<String>,
    Option<String>,
    bool,
    Option<String>,
    Option<String>,
) {
    let (mut tag, mut content, mut untagged, mut rename_all, mut rename_all_fields) =
        (None, None, false, None, None);
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            let string = |meta: &syn::meta::ParseNestedMeta<'_>| -> syn::Result<String> {
                Ok(meta.value()?.parse::<LitStr>()?.value())
            };
            if meta.path.is_ident("tag") {
                tag = Some(string(&meta)?);
            } else if meta.path.is_ident("content") {
                content = Some(string(&meta)?);
            } else if meta.path.is_ident("untagged") {
                untagged = true;
            } else if meta.path.is_ident("rename_all") && meta.input.peek(syn::Token![=]) {
                rename_all = Some(string(&meta)?);
            } else if meta.path.is_ident("rename_all_fields") && meta.input.peek(syn::Token![=]) {
                rename_all_fields = Some(string(&meta)?);
            } else if meta.input.peek(syn::Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            } else if meta.input.peek(syn::token::Paren) {
                let inner;
                syn::parenthesized!(inner in meta.input);
                let _: proc_macro2::TokenStream = inner.parse()?;
            }
            Ok(())
        });
    }
    (tag, content, untagged, rename_all, rename_all_fields)
}

/// Builds the enum model and takes the `#[validate]` markers out of struct-variant fields
/// (markers on tuple-variant fields are reported).
pub fn enumeration(item: &mut syn::ItemEnum, errors: &mut Errors) -> Enum {
    let (tag, content, untagged, rename_all, rename_all_fields) = enum_serde(&item.attrs);
    let tagging = match (untagged, tag, content) {
        (true, _, _) => Tagging::Untagged,
        (false, Some(_), Some(content)) => Tagging::Adjacent { content },
        (false, Some(_), None) => Tagging::Internal,
        (false, None, _) => Tagging::External,
    };
    let variants = item
        .variants
        .iter_mut()
        .map(|variant| {
            let serde = serde_field(&variant.attrs);
            let plain = variant.ident.to_string();
            let json_name = serde.rename.clone().unwrap_or_else(|| {
                rename_all
                    .as_deref()
                    .and_then(|rule| rename_variant(&plain, rule))
                    .unwrap_or(plain)
            });
            let fields = match &mut variant.fields {
                named @ Fields::Named(_) => {
                    let rule = container_rename_all(&variant.attrs).or_else(|| rename_all_fields.clone());
                    fields(named, rule.as_deref(), errors)
                }
                other => {
                    for field in other.iter_mut() {
                        field.attrs.retain(|a| {
                            if a.path().is_ident("validate") {
                                errors.spanned(
                                    a,
                                    "markers on tuple-variant fields are not supported; use a struct variant or a struct with #[kubeforge::schema]",
                                );
                                false
                            } else {
                                true
                            }
                        });
                    }
                    Vec::new()
                }
            };
            Variant { json_name, fields }
        })
        .collect();
    Enum { tagging, variants }
}

/// serde's `rename_all` for variant names (UpperCamelCase identifiers).
fn rename_variant(name: &str, rule: &str) -> Option<String> {
    let mut snake = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            snake.push('_');
        }
        snake.extend(c.to_lowercase());
    }
    match rule {
        "PascalCase" => Some(name.to_owned()),
        "camelCase" => {
            let mut c = name.chars();
            c.next()
                .map(|f| f.to_lowercase().chain(c).collect::<String>())
        }
        "lowercase" => Some(name.to_lowercase()),
        "UPPERCASE" => Some(name.to_uppercase()),
        _ => rename(&snake, rule),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pluralize_should_follow_english_rules() {
        assert_eq!(pluralize("webapp"), "webapps");
        assert_eq!(pluralize("policy"), "policies");
        assert_eq!(pluralize("gateway"), "gateways");
        assert_eq!(pluralize("ingress"), "ingresses");
    }

    #[test]
    fn rename_should_apply_serde_rules() {
        assert_eq!(
            rename("min_replicas", "camelCase").as_deref(),
            Some("minReplicas")
        );
        assert_eq!(
            rename("min_replicas", "PascalCase").as_deref(),
            Some("MinReplicas")
        );
        assert_eq!(
            rename("min_replicas", "kebab-case").as_deref(),
            Some("min-replicas")
        );
        assert_eq!(rename("x", "nonsense"), None);
    }

    #[test]
    fn rename_variant_should_apply_serde_rules() {
        assert_eq!(
            rename_variant("NodePort", "camelCase").as_deref(),
            Some("nodePort")
        );
        assert_eq!(
            rename_variant("NodePort", "snake_case").as_deref(),
            Some("node_port")
        );
        assert_eq!(
            rename_variant("NodePort", "kebab-case").as_deref(),
            Some("node-port")
        );
        assert_eq!(
            rename_variant("NodePort", "SCREAMING_SNAKE_CASE").as_deref(),
            Some("NODE_PORT")
        );
        assert_eq!(
            rename_variant("NodePort", "lowercase").as_deref(),
            Some("nodeport")
        );
    }

    #[test]
    fn enumeration_should_read_tagging_and_variant_fields() {
        let mut errors = Errors::default();
        let mut item: syn::ItemEnum = syn::parse_quote! {
            #[serde(tag = "kind", content = "spec", rename_all = "camelCase")]
            enum E {
                #[serde(rename = "git")]
                GitRepo { #[validate(min_length = 1)] repo_url: String },
                Image(String),
            }
        };
        let model = enumeration(&mut item, &mut errors);
        let messages = errors.messages();
        assert!(messages.is_empty(), "{messages:?}");
        assert!(matches!(&model.tagging, Tagging::Adjacent { content } if content == "spec"));
        assert_eq!(model.variants[0].json_name, "git");
        assert_eq!(model.variants[0].fields[0].json_name, "repo_url");
        assert!(model.variants[0].fields[0].markers.min_length.is_some());
        assert_eq!(model.variants[1].json_name, "image");
        let stripped = quote::quote!(#item).to_string();
        assert!(
            !stripped.contains("validate"),
            "markers are consumed: {stripped}"
        );
    }

    #[test]
    fn shape_should_see_through_option() {
        let ty: Type = syn::parse_quote!(Option<Vec<String>>);
        assert_eq!(shape(&ty), Shape::Array);
        let ty: Type = syn::parse_quote!(Option<i32>);
        assert_eq!(shape(&ty), Shape::Integer);
        let ty: Type = syn::parse_quote!(std::collections::BTreeMap<String, String>);
        assert_eq!(shape(&ty), Shape::Map);
        let ty: Type = syn::parse_quote!(Quantity);
        assert_eq!(shape(&ty), Shape::IntOrString);
        let ty: Type = syn::parse_quote!(LabelSelector);
        assert_eq!(shape(&ty), Shape::Other);
    }

    #[test]
    fn kind_should_report_missing_keys_and_double_scope() {
        let mut errors = Errors::default();
        let raw =
            crate::attrs::parse_kind(quote::quote!(kind = "K", namespaced, cluster), &mut errors);
        assert!(
            kind(raw, &mut errors).is_some(),
            "the kind is known: the root type can be emitted"
        );
        let messages = errors.messages();
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with("missing key `group`"))
        );
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with("missing key `version`"))
        );
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with("`cluster` and `namespaced` are both set"))
        );
    }
}
