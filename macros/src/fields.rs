//! Fields: the user's struct fields and enum variants as serde serializes them (JSON names after
//! rename/rename_all, flatten, skip, tagging), with the JSON shape of each type and the field's
//! `#[validate]` markers taken off the item.

use syn::meta::ParseNestedMeta;
use syn::{Fields, Ident, LitStr, Type};

use crate::errors::Errors;
use crate::keys;
use crate::markers::{self, Markers};

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

/// The shape a `type = ".."` marker gives a field.
pub fn shape_of_type(openapi_type: &str) -> Shape {
    match openapi_type {
        "string" => Shape::String,
        "integer" => Shape::Integer,
        "number" => Shape::Number,
        "boolean" => Shape::Bool,
        "array" => Shape::Array,
        "object" => Shape::Map,
        _ => Shape::Other,
    }
}

/// Whether the type is `Option<..>` (serde: may be absent).
pub fn is_option(ty: &Type) -> bool {
    last_segment(ty).is_some_and(|seg| seg.ident == "Option")
}

/// The first `ByteString` in the type (through `Option`, lists, maps, `Box`): k8s-openapi's
/// base64 bytes, which have no JSON schema.
pub fn byte_string(ty: &Type) -> Option<&Type> {
    let seg = last_segment(ty)?;
    if seg.ident == "ByteString" {
        return Some(ty);
    }
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(a) => a.args.iter().find_map(|arg| match arg {
            syn::GenericArgument::Type(t) => byte_string(t),
            _ => None,
        }),
        _ => None,
    }
}

/// The shape of a list's elements (`Other` when the type is not a known list).
pub fn element_shape(ty: &Type) -> Shape {
    element_type(ty).map_or(Shape::Other, |t| shape(&t))
}

/// The shape of a map's values (`Other` when the type is not a known map).
pub fn value_shape(ty: &Type) -> Shape {
    value_type(ty).map_or(Shape::Other, |t| shape(&t))
}

/// The element type of a known list type (through `Option` / `Box`).
pub fn element_type(ty: &Type) -> Option<Type> {
    let inner = inner_type(ty);
    let seg = last_segment(&inner)?;
    matches!(
        seg.ident.to_string().as_str(),
        "Vec" | "VecDeque" | "BTreeSet" | "HashSet"
    )
    .then(|| first_generic(seg).cloned())
    .flatten()
}

/// The value type of a known map type (through `Option` / `Box`).
pub fn value_type(ty: &Type) -> Option<Type> {
    let inner = inner_type(ty);
    let seg = last_segment(&inner)?;
    if !matches!(seg.ident.to_string().as_str(), "BTreeMap" | "HashMap") {
        return None;
    }
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|arg| match arg {
                syn::GenericArgument::Type(t) => Some(t.clone()),
                _ => None,
            })
            .nth(1),
        _ => None,
    }
}

/// The pattern upstream API types give `resource.Quantity` (kubebuilder emits it too): without
/// it the apiserver stores `"lots"`, and whatever reads the quantity fails later.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

fn is_quantity(ty: &Type) -> bool {
    last_segment(&inner_type(ty)).is_some_and(|seg| seg.ident == "Quantity")
}

/// Quantities, also as list elements and map values, get [`QUANTITY_PATTERN`] unless a
/// `pattern` says otherwise.
fn quantity_patterns(markers: &mut Markers, ty: &Type, span: proc_macro2::Span) {
    let pattern = || Some(LitStr::new(QUANTITY_PATTERN, span));
    if is_quantity(ty) {
        if markers.pattern.is_none() && markers.type_.is_none() {
            markers.pattern = pattern();
        }
        return;
    }
    for (nested, element) in [
        (&mut markers.items, element_type(ty)),
        (&mut markers.values, value_type(ty)),
    ] {
        if element.as_ref().is_some_and(is_quantity) {
            let nested = &mut nested
                .get_or_insert_with(|| keys::Keyed {
                    value: Box::default(),
                    key: span,
                })
                .value;
            if nested.pattern.is_none() && nested.type_.is_none() {
                nested.pattern = pattern();
            }
        }
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

/// Reads the keys of every `#[serde(...)]` attribute with `read`; what `read` leaves of a key is
/// skipped (unknown serde keys and errors are serde's to report).
fn serde_keys(
    attrs: &[syn::Attribute],
    mut read: impl FnMut(&ParseNestedMeta<'_>) -> syn::Result<()>,
) {
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            read(&meta)?;
            keys::skip_value(&meta)
        });
    }
}

fn string(meta: &ParseNestedMeta<'_>) -> syn::Result<String> {
    Ok(meta.value()?.parse::<LitStr>()?.value())
}

/// `key = ".."` or `key(serialize = "..", deserialize = "..")`: the serialize side.
fn serialize_side(meta: &ParseNestedMeta<'_>) -> syn::Result<Option<String>> {
    if meta.input.peek(syn::Token![=]) {
        return string(meta).map(Some);
    }
    let mut out = None;
    meta.parse_nested_meta(|inner| {
        let value = string(&inner)?;
        if inner.path.is_ident("serialize") {
            out = Some(value);
        }
        Ok(())
    })?;
    Ok(out)
}

/// What serde does with a field.
#[derive(Default)]
pub struct SerdeField {
    pub rename: Option<String>,
    pub flatten: bool,
    pub skip: bool,
    pub default: bool,
    /// `with = ".."` / `serialize_with = ".."`: the JSON is not the Rust type's own.
    pub serialize_with: bool,
    /// The container is `#[serde(transparent)]`: the field is the value itself.
    pub transparent: bool,
    /// `skip_serializing_if = ".."`: the field is not sent when the predicate holds, so its
    /// markers do not apply then.
    pub skip_serializing_if: Option<syn::ExprPath>,
}

fn serde_field(attrs: &[syn::Attribute]) -> SerdeField {
    let mut out = SerdeField::default();
    serde_keys(attrs, |meta| {
        if meta.path.is_ident("rename") {
            if let Some(name) = serialize_side(meta)? {
                out.rename = Some(name);
            }
        } else if meta.path.is_ident("flatten") {
            out.flatten = true;
        } else if meta.path.is_ident("skip") || meta.path.is_ident("skip_serializing") {
            out.skip = true;
        } else if meta.path.is_ident("default") {
            out.default = true;
        } else if meta.path.is_ident("with") || meta.path.is_ident("serialize_with") {
            out.serialize_with = true;
        } else if meta.path.is_ident("skip_serializing_if") {
            // A path serde cannot read is serde's to report.
            out.skip_serializing_if = meta.value()?.parse::<LitStr>()?.parse().ok();
        }
        Ok(())
    });
    out
}

/// Whether the container is `#[serde(default)]` (every field may be absent).
pub fn container_default(attrs: &[syn::Attribute]) -> bool {
    let mut found = false;
    serde_keys(attrs, |meta| {
        found |= meta.path.is_ident("default");
        Ok(())
    });
    found
}

/// Whether the container is `#[serde(transparent)]`.
pub fn container_transparent(attrs: &[syn::Attribute]) -> bool {
    let mut found = false;
    serde_keys(attrs, |meta| {
        found |= meta.path.is_ident("transparent");
        Ok(())
    });
    found
}

/// `#[serde(rename_all = "...")]` on the container (the serialize side).
pub fn container_rename_all(attrs: &[syn::Attribute]) -> Option<String> {
    let mut out = None;
    serde_keys(attrs, |meta| {
        if meta.path.is_ident("rename_all")
            && let Some(rule) = serialize_side(meta)?
        {
            out = Some(rule);
        }
        Ok(())
    });
    out
}

/// Which schema node a [`Field`] stands for: the field's own, or (for the checks of `items(..)`
/// and `values(..)`) each element of a list field or each value of a map field.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Node {
    Field,
    Items,
    Values,
}

/// One named field of a struct, with its markers.
pub struct Field {
    pub ident: Ident,
    /// The node the markers are on (always [`Node::Field`] for a struct's fields).
    pub node: Node,
    /// The field's type without `Option`/`Box`.
    pub inner_ty: Type,
    /// The JSON name (after serde rename / rename_all).
    pub json_name: String,
    pub serde: SerdeField,
    pub shape: Shape,
    /// The shape of the elements, for lists.
    pub element_shape: Shape,
    /// The shape of the values, for maps.
    pub value_shape: Shape,
    /// The declared type is `Option<..>`.
    pub is_option: bool,
    /// The field's type as written.
    pub ty: Type,
    pub markers: Markers,
    /// Whether the field had any `#[validate]` attribute.
    pub has_markers: bool,
}

impl Field {
    /// What the node is, for messages: "field `f` is a string", "each item of `f` is a string".
    pub fn described(&self) -> String {
        let what = self.shape.describe();
        match self.node {
            Node::Field => format!("field `{}` is {what}", self.ident),
            Node::Items => format!("each item of `{}` is {what}", self.ident),
            Node::Values => format!("each value of `{}` is {what}", self.ident),
        }
    }
}

/// Reads the fields of a struct and takes their `#[validate(...)]` attributes out of `fields`
/// (the attribute macro consumes them: they are not a registered attribute).
pub fn fields(fields: &mut Fields, rename_all: Option<&str>, errors: &mut Errors) -> Vec<Field> {
    let mut out = Vec::new();
    for field in fields.iter_mut() {
        let markers = markers::take(&mut field.attrs, errors);
        let has_markers = markers.is_some();
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
        let mut markers = markers.unwrap_or_default();
        if !serde.serialize_with {
            quantity_patterns(&mut markers, &field.ty, ident.span());
            client_types(&mut markers);
        }
        // `type = ".."` says what the JSON is, whatever the Rust type.
        let declared = markers.type_.as_ref().map(|t| shape_of_type(&t.value()));
        out.push(Field {
            node: Node::Field,
            shape: declared.unwrap_or_else(|| shape(&field.ty)),
            element_shape: element_shape(&field.ty),
            value_shape: value_shape(&field.ty),
            is_option: is_option(&field.ty),
            ty: field.ty.clone(),
            inner_ty: inner_type(&field.ty),
            ident,
            json_name,
            serde,
            has_markers,
            markers,
        });
    }
    out
}

/// The types `validate()` checks: those of `type = ".."` here and in `items(..)`, `values(..)`
/// (only where the field's JSON is its Rust type's own).
fn client_types(markers: &mut Markers) {
    markers.client_type = markers.type_.as_ref().map(LitStr::value);
    for nested in [&mut markers.items, &mut markers.values]
        .into_iter()
        .flatten()
    {
        client_types(&mut nested.value);
    }
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

/// serde's container keys of an enum.
#[derive(Default)]
struct EnumSerde {
    tag: Option<String>,
    content: Option<String>,
    untagged: bool,
    rename_all: Option<String>,
    rename_all_fields: Option<String>,
}

fn enum_serde(attrs: &[syn::Attribute]) -> EnumSerde {
    let mut out = EnumSerde::default();
    serde_keys(attrs, |meta| {
        let assigned = meta.input.peek(syn::Token![=]);
        if meta.path.is_ident("tag") {
            out.tag = Some(string(meta)?);
        } else if meta.path.is_ident("content") {
            out.content = Some(string(meta)?);
        } else if meta.path.is_ident("untagged") {
            out.untagged = true;
        } else if meta.path.is_ident("rename_all") && assigned {
            out.rename_all = Some(string(meta)?);
        } else if meta.path.is_ident("rename_all_fields") && assigned {
            out.rename_all_fields = Some(string(meta)?);
        }
        Ok(())
    });
    out
}

/// Builds the enum model and takes the `#[validate]` markers out of struct-variant fields
/// (markers on tuple-variant fields are reported).
pub fn enumeration(item: &mut syn::ItemEnum, errors: &mut Errors) -> Enum {
    let serde = enum_serde(&item.attrs);
    let tagging = match (serde.untagged, serde.tag, serde.content) {
        (true, _, _) => Tagging::Untagged,
        (false, Some(_), Some(content)) => Tagging::Adjacent { content },
        (false, Some(_), None) => Tagging::Internal,
        (false, None, _) => Tagging::External,
    };
    let variants = item
        .variants
        .iter_mut()
        .map(|variant| {
            let renamed = serde_field(&variant.attrs).rename;
            let plain = variant.ident.to_string();
            let json_name = renamed.unwrap_or_else(|| {
                serde
                    .rename_all
                    .as_deref()
                    .and_then(|rule| rename_variant(&plain, rule))
                    .unwrap_or(plain)
            });
            let fields = match &mut variant.fields {
                named @ Fields::Named(_) => {
                    let rule = container_rename_all(&variant.attrs)
                        .or_else(|| serde.rename_all_fields.clone());
                    fields(named, rule.as_deref(), errors)
                }
                other => {
                    for field in other.iter_mut() {
                        markers::reject(
                            &mut field.attrs,
                            "markers on tuple-variant fields are not supported; use a struct variant or a struct with #[kubeforge::schema]",
                            errors,
                        );
                    }
                    Vec::new()
                }
            };
            Variant { json_name, fields }
        })
        .collect();
    Enum { tagging, variants }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn serde_readers_should_skip_keys_they_do_not_know() {
        let field: syn::Field = syn::parse_quote! {
            #[serde(default = "x::y", skip_serializing_if = "Option::is_none", rename(deserialize = "a", serialize = "b"), flatten)]
            f: i32
        };
        let serde = serde_field(&field.attrs);
        assert_eq!(serde.rename.as_deref(), Some("b"));
        assert!(serde.default && serde.flatten && !serde.skip);
        assert!(serde.skip_serializing_if.is_some());
        let item: syn::ItemStruct = syn::parse_quote! {
            #[serde(deny_unknown_fields, bound(serialize = "T: X"), rename_all(serialize = "camelCase"), transparent)]
            struct S;
        };
        assert_eq!(
            container_rename_all(&item.attrs).as_deref(),
            Some("camelCase")
        );
        assert!(container_transparent(&item.attrs));
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
}
