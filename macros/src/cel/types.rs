//! The CEL types of schema values, as the apiserver derives them from a structural schema
//! (`SchemaDeclType` in k8s.io/apiserver/pkg/cel/common/schemas.go), built from the Rust field
//! types and markers the way the CRD schema is, with the size bounds its cost estimator uses
//! (`maxLength`, `maxItems`, `maxProperties`, else the largest request).
//!
//! Only what the syntax of one macro invocation shows is typed: any other type (a user's struct
//! or enum, k8s-openapi types, `serde_json::Value`, int-or-string) is `dyn`, with which everything
//! type-checks.

use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

use syn::Type;

use crate::fields::{Field, Node};
use crate::markers::Markers;

/// The largest request the apiserver accepts: `MaxRequestSizeBytes` of
/// k8s.io/apiserver/pkg/apis/cel/config.go (3 MiB). Unbounded strings, lists and maps are as
/// large as fits in it.
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// The serialized sizes the apiserver assumes (k8s.io/apiserver/pkg/cel/limits.go).
const MIN_STRING_SIZE: u64 = 2; // ""
const MIN_BOOL_SIZE: u64 = 4; // true
const MIN_NUMBER_SIZE: u64 = 1; // 0
const MIN_DURATION_SIZE_JSON: u64 = 3;
const MAX_DURATION_SIZE_JSON: u64 = 32;
const JSON_DATE_SIZE: u64 = 12;
const MIN_DATETIME_SIZE_JSON: u64 = 21;
const MAX_DATETIME_SIZE_JSON: u64 = 32;

/// A CEL type, with the size bounds of the values of this schema node.
#[derive(Clone, Debug)]
pub struct Ty {
    pub kind: Kind,
    /// The largest `size()` of a value (characters of a string, bytes, items, entries), as the
    /// apiserver's estimator sees it: `None` when this macro cannot tell.
    pub size: Size,
}

#[derive(Clone, Debug)]
pub enum Kind {
    /// Unknown: anything type-checks.
    Dyn,
    Int,
    Uint,
    Double,
    String,
    Bool,
    Bytes,
    Null,
    Timestamp,
    Duration,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    /// A struct of this invocation: its JSON fields (by JSON name).
    Object(Rc<Object>),
    /// A type value (`int`, `type(x)`).
    Type,
    /// A value of a Kubernetes library (`Quantity`, `URL`, `IP`, `CIDR`, `Semver`, `Format`).
    Opaque(&'static str),
    Optional(Box<Ty>),
}

/// An upper bound of a size, and why it is that large when no marker bounds it.
#[derive(Clone, Debug, Default)]
pub struct Size {
    pub max: Option<u64>,
    /// Set when the bound is the apiserver's default (derived from the request size).
    pub hint: Option<Rc<Hint>>,
}

/// A missing bound: what has none, and how to set it.
#[derive(Debug, PartialEq, Eq)]
pub struct Hint {
    /// "`items` has no `max_items`".
    pub what: String,
    pub fix: Fix,
}

/// How to bound a size.
#[derive(Debug, PartialEq, Eq)]
pub enum Fix {
    /// A marker (`max_items = …`, `items(max_length = …)`) on a field.
    Marker { marker: String, field: String },
    /// Markers cannot reach the node: "a newtype with `#[validate(max_items = …)]` for ...".
    Newtype(String),
}

/// A struct's JSON fields.
#[derive(Debug)]
pub struct Object {
    pub name: String,
    pub fields: BTreeMap<String, Ty>,
    /// Fields of other types are flattened in: unknown names are not errors.
    pub open: bool,
    /// Why a field the object lacks cannot be read, said in its error instead of the list of
    /// the fields: `(name, "the kind has no status: ..")`; the name `*` stands for any field
    /// without an entry of its own and no near miss among the fields.
    pub absent: Vec<(String, String)>,
}

impl Size {
    pub fn exact(n: u64) -> Self {
        Size {
            max: Some(n),
            hint: None,
        }
    }
}

impl Ty {
    pub fn new(kind: Kind) -> Self {
        Ty {
            kind,
            size: Size::default(),
        }
    }

    pub fn dynamic() -> Self {
        Ty::new(Kind::Dyn)
    }

    fn sized(kind: Kind, max: u64) -> Self {
        Ty {
            kind,
            size: Size::exact(max),
        }
    }

    pub fn list(elem: Ty) -> Self {
        Ty::new(Kind::List(Box::new(elem)))
    }

    pub fn is_dyn(&self) -> bool {
        matches!(self.kind, Kind::Dyn)
    }

    /// The type without any size bound (a value computed by the rule, not read from the
    /// object: the apiserver estimates it from the expression, not from the schema).
    pub fn strip(&self) -> Ty {
        let kind = match &self.kind {
            Kind::List(e) => Kind::List(Box::new(e.strip())),
            Kind::Map(k, v) => Kind::Map(Box::new(k.strip()), Box::new(v.strip())),
            Kind::Optional(t) => Kind::Optional(Box::new(t.strip())),
            Kind::Object(o) => Kind::Object(Rc::new(Object {
                name: o.name.clone(),
                fields: o
                    .fields
                    .iter()
                    .map(|(k, v)| (k.clone(), v.strip()))
                    .collect(),
                open: o.open,
                absent: o.absent.clone(),
            })),
            other => other.clone(),
        };
        Ty::new(kind)
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Dyn => f.write_str("dyn"),
            Kind::Int => f.write_str("int"),
            Kind::Uint => f.write_str("uint"),
            Kind::Double => f.write_str("double"),
            Kind::String => f.write_str("string"),
            Kind::Bool => f.write_str("bool"),
            Kind::Bytes => f.write_str("bytes"),
            Kind::Null => f.write_str("null"),
            Kind::Timestamp => f.write_str("timestamp"),
            Kind::Duration => f.write_str("duration"),
            Kind::List(e) => write!(f, "list({e})"),
            Kind::Map(k, v) => write!(f, "map({k}, {v})"),
            Kind::Object(o) => write!(f, "object `{}`", o.name),
            Kind::Type => f.write_str("type"),
            Kind::Opaque(name) => f.write_str(name),
            Kind::Optional(t) => write!(f, "optional({t})"),
        }
    }
}

/// Where a schema node is, to say which marker bounds it.
#[derive(Clone)]
enum Place {
    /// The field itself (`max_items = ..`).
    Field(String),
    /// The items of a list field (`items(..)`).
    Items(String),
    /// The values of a map field (`values(..)`).
    Values(String),
    /// Deeper: no marker reaches it.
    Nested(String),
}

impl Place {
    fn subject(&self) -> String {
        match self {
            Place::Field(f) => format!("`{f}` has"),
            Place::Items(f) => format!("the items of `{f}` have"),
            Place::Values(f) => format!("the values of `{f}` have"),
            Place::Nested(f) => format!("values nested in `{f}` have"),
        }
    }

    fn hint(&self, marker: &str) -> Rc<Hint> {
        let newtype = |what: &str| {
            Fix::Newtype(format!(
                "a newtype with `#[validate({marker} = …)]` for {what}"
            ))
        };
        let on = |marker: String, field: &str| Fix::Marker {
            marker,
            field: field.to_owned(),
        };
        let fix = match self {
            Place::Field(f) => on(format!("`{marker} = …`"), f),
            Place::Items(f) => on(format!("`items({marker} = …)`"), f),
            Place::Values(f) => on(format!("`values({marker} = …)`"), f),
            Place::Nested(f) => newtype(&format!("the values nested in `{f}`")),
        };
        Rc::new(Hint {
            what: format!("{} no `{marker}`", self.subject()),
            fix,
        })
    }

    /// The place of this node's items or values.
    fn inner(&self, items: bool) -> Place {
        match self {
            Place::Field(f) if items => Place::Items(f.clone()),
            Place::Field(f) => Place::Values(f.clone()),
            Place::Items(f) | Place::Values(f) | Place::Nested(f) => Place::Nested(f.clone()),
        }
    }
}

/// A type with the smallest serialized size of its values (`MinSerializedSize`), which bounds
/// how many fit in a list or map without `max_items` / `max_properties`; `None` when unknown.
struct Built {
    ty: Ty,
    min_size: Option<u64>,
}

impl Built {
    fn unknown() -> Self {
        Built {
            ty: Ty::dynamic(),
            min_size: None,
        }
    }
}

/// The type of `self` in a rule on `field` (the field's own schema node, or each element or
/// value for the checks of `items(..)` / `values(..)`).
pub fn of_field(field: &Field) -> Ty {
    of_field_sized(field).0
}

/// [`of_field`], with the smallest serialized size of the node's values (`None`: unknown).
pub fn of_field_sized(field: &Field) -> (Ty, Option<u64>) {
    if field.serde.flatten {
        return (Ty::dynamic(), None);
    }
    let name = field.ident.to_string().trim_start_matches("r#").to_owned();
    let place = match field.node {
        Node::Field => Place::Field(name),
        Node::Items => Place::Items(name),
        Node::Values => Place::Values(name),
    };
    let built = build(
        Some(&field.ty),
        &field.markers,
        &place,
        field.serde.serialize_with,
    );
    (built.ty, built.min_size)
}

/// The type of `self` in a rule on a struct with these fields (`dyn` for a transparent struct).
pub fn of_struct(name: &str, fields: &[Field]) -> Ty {
    if fields.iter().any(|f| f.serde.transparent) {
        return Ty::dynamic();
    }
    let object = Object {
        name: name.to_owned(),
        fields: fields
            .iter()
            .filter(|f| !f.serde.skip && !f.serde.flatten)
            .map(|f| (f.json_name.clone(), of_field(f)))
            .collect(),
        open: fields.iter().any(|f| f.serde.flatten),
        absent: Vec::new(),
    };
    Ty::new(Kind::Object(Rc::new(object)))
}

/// The type of a value of the Rust type `ty` with no markers (a kind's status: `dyn` unless it
/// is a type this macro knows, such as a map or a list of strings).
pub fn of_type(ty: &Type) -> Ty {
    build(
        Some(ty),
        &Markers::default(),
        &Place::Nested("status".to_owned()),
        false,
    )
    .ty
}

fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        _ => None,
    }
}

fn generics(seg: &syn::PathSegment) -> Vec<&Type> {
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|arg| match arg {
                syn::GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The node of Rust type `ty` (`None`: only the markers say what it is) with markers `m`.
fn build(ty: Option<&Type>, m: &Markers, place: &Place, serialize_with: bool) -> Built {
    let set = |flag: &Option<crate::keys::Keyed<bool>>| Markers::is_set(flag);
    if set(&m.int_or_string) {
        return int_or_string(m, place);
    }
    if set(&m.schemaless) || set(&m.preserve_unknown_fields) || set(&m.embedded_resource) {
        return Built::unknown();
    }
    if let Some(t) = &m.type_ {
        return match t.value().as_str() {
            "string" => string(m, place),
            "integer" => scalar(Kind::Int, MIN_NUMBER_SIZE),
            "number" => scalar(Kind::Double, MIN_NUMBER_SIZE),
            "boolean" => scalar(Kind::Bool, MIN_BOOL_SIZE),
            "array" => list(Built::unknown(), m, place),
            _ => Built::unknown(),
        };
    }
    if serialize_with {
        return Built::unknown();
    }
    let Some(ty) = ty else {
        return Built::unknown();
    };
    let ty = match ty {
        Type::Reference(r) => &*r.elem,
        Type::Paren(p) => &*p.elem,
        Type::Group(g) => &*g.elem,
        other => other,
    };
    if let Type::Array(array) = ty {
        let element = build(
            Some(&array.elem),
            &Markers::default(),
            &place.inner(true),
            false,
        );
        let mut built = list(element, m, place);
        if let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(n),
            ..
        }) = &array.len
            && let Ok(n) = n.base10_parse::<u64>()
        {
            built.ty.size = Size::exact(m.max_items.as_ref().map_or(n, |k| k.value.min(n)));
        }
        return built;
    }
    let Some(seg) = last_segment(ty) else {
        return Built::unknown();
    };
    let args = generics(seg);
    match seg.ident.to_string().as_str() {
        "Option" | "Box" | "Arc" | "Rc" => match args.first() {
            Some(inner) => build(Some(inner), m, place, false),
            None => Built::unknown(),
        },
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" | "u8" | "u16" | "u32" | "u64" | "u128"
        | "usize" => scalar(Kind::Int, MIN_NUMBER_SIZE),
        "f32" | "f64" => scalar(Kind::Double, MIN_NUMBER_SIZE),
        "bool" => scalar(Kind::Bool, MIN_BOOL_SIZE),
        "String" | "str" => string(m, place),
        "IntOrString" | "Quantity" => int_or_string(m, place),
        "Vec" | "VecDeque" | "BTreeSet" | "HashSet" => {
            let items = m.items.as_ref().map(|i| &*i.value);
            let element = build(
                args.first().copied(),
                items.unwrap_or(&Markers::default()),
                &place.inner(true),
                false,
            );
            list(element, m, place)
        }
        "BTreeMap" | "HashMap" if args.len() == 2 => {
            let values = m.values.as_ref().map(|v| &*v.value);
            let value = build(
                Some(args[1]),
                values.unwrap_or(&Markers::default()),
                &place.inner(false),
                false,
            );
            map(value, m, place)
        }
        _ => Built::unknown(),
    }
}

fn scalar(kind: Kind, min_size: u64) -> Built {
    // A number or bool read from the object: its schema node has no `MaxElements` (0).
    Built {
        ty: Ty::sized(kind, 0),
        min_size: Some(min_size),
    }
}

/// The size of a string without `max_length`: as long as fits in a request, less the quotes.
fn request_sized(place: &Place, marker: &str) -> Size {
    Size {
        max: Some(MAX_REQUEST_SIZE_BYTES - 2),
        hint: Some(place.hint(marker)),
    }
}

/// A string node: `format` may make it bytes, a duration or a timestamp.
fn string(m: &Markers, place: &Place) -> Built {
    let max_length = m.max_length.as_ref().map(|k| k.value);
    let format = m.format.as_ref().map(syn::LitStr::value);
    let (kind, size, min_size) = match format.as_deref() {
        Some("byte") => (
            Kind::Bytes,
            max_length.map_or_else(|| request_sized(place, "max_length"), Size::exact),
            MIN_STRING_SIZE,
        ),
        Some("duration") => (
            Kind::Duration,
            Size::exact(MAX_DURATION_SIZE_JSON),
            MIN_DURATION_SIZE_JSON,
        ),
        Some("date") => (Kind::Timestamp, Size::exact(JSON_DATE_SIZE), JSON_DATE_SIZE),
        Some("date-time") => (
            Kind::Timestamp,
            Size::exact(MAX_DATETIME_SIZE_JSON),
            MIN_DATETIME_SIZE_JSON,
        ),
        _ => {
            // `maxLength` counts code points, the estimator bytes: up to 4 per code point.
            let size = match (max_length, &m.enum_values) {
                (Some(n), _) => Size::exact(n.saturating_mul(4)),
                (None, Some(values)) => Size::exact(
                    values
                        .value
                        .iter()
                        .filter_map(|v| v.as_str().map(|s| s.len() as u64))
                        .max()
                        .unwrap_or(0),
                ),
                (None, None) => request_sized(place, "max_length"),
            };
            (Kind::String, size, MIN_STRING_SIZE)
        }
    };
    Built {
        ty: Ty { kind, size },
        min_size: Some(min_size),
    }
}

/// `x-kubernetes-int-or-string`: `dyn`, as long as its `max_length` allows.
fn int_or_string(m: &Markers, place: &Place) -> Built {
    let size = m.max_length.as_ref().map_or_else(
        || request_sized(place, "max_length"),
        |k| Size::exact(k.value.saturating_mul(4)),
    );
    Built {
        ty: Ty {
            kind: Kind::Dyn,
            size,
        },
        min_size: Some(MIN_NUMBER_SIZE),
    }
}

/// A list of `element`: `max_items`, else as many of the smallest elements as fit in a request
/// (`estimateMaxArrayItemsFromMinSize`: one comma each, less the brackets).
fn list(element: Built, m: &Markers, place: &Place) -> Built {
    let size = match (&m.max_items, element.min_size) {
        (Some(n), _) => Size::exact(n.value),
        (None, Some(min)) => Size {
            max: Some((MAX_REQUEST_SIZE_BYTES - 2) / (min + 1)),
            hint: Some(place.hint("max_items")),
        },
        (None, None) => Size::default(),
    };
    Built {
        ty: Ty {
            kind: Kind::List(Box::new(element.ty)),
            size,
        },
        min_size: Some(2),
    }
}

/// A map of string keys to `value`: `max_properties`, else as many of the smallest entries as
/// fit in a request (`estimateMaxAdditionalPropertiesFromMinSize`: key, quotes, colon, comma).
fn map(value: Built, m: &Markers, place: &Place) -> Built {
    let size = match (&m.max_properties, value.min_size) {
        (Some(n), _) => Size::exact(n.value),
        (None, Some(min)) => Size {
            max: Some((MAX_REQUEST_SIZE_BYTES - 2) / (min + 6)),
            hint: Some(place.hint("max_properties")),
        },
        (None, None) => Size::default(),
    };
    // The key type of a schema map is the shared `StringType`, whose `MaxElements` is 0.
    let key = Ty::sized(Kind::String, 0);
    Built {
        ty: Ty {
            kind: Kind::Map(Box::new(key), Box::new(value.ty)),
            size,
        },
        min_size: Some(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(ty: syn::Type, marker: Option<syn::Attribute>) -> Field {
        let mut errors = crate::errors::Errors::default();
        let marker = marker.into_iter();
        let mut fields: syn::FieldsNamed = syn::parse_quote!({ #(#marker)* pub items: #ty });
        let mut fields = syn::Fields::Named(std::mem::replace(&mut fields, syn::parse_quote!({})));
        let mut model = crate::fields::fields(&mut fields, None, &mut errors);
        assert!(errors.messages().is_empty());
        model.remove(0)
    }

    #[test]
    fn of_field_should_map_rust_types_like_the_crd_schema() {
        let cases: Vec<(syn::Type, &str)> = vec![
            (syn::parse_quote!(i32), "int"),
            (syn::parse_quote!(Option<u64>), "int"),
            (syn::parse_quote!(f32), "double"),
            (syn::parse_quote!(Box<String>), "string"),
            (syn::parse_quote!(bool), "bool"),
            (syn::parse_quote!(Vec<Option<String>>), "list(string)"),
            (
                syn::parse_quote!(std::collections::BTreeMap<String, Vec<i64>>),
                "map(string, list(int))",
            ),
            (syn::parse_quote!([u8; 4]), "list(int)"),
            (syn::parse_quote!(IntOrString), "dyn"),
            (syn::parse_quote!(serde_json::Value), "dyn"),
            (syn::parse_quote!(Time), "dyn"),
            (syn::parse_quote!(MyStruct), "dyn"),
            (syn::parse_quote!((i32, i32)), "dyn"),
        ];
        for (ty, expected) in cases {
            let shown = quote::quote!(#ty).to_string();
            assert_eq!(of_field(&field(ty, None)).to_string(), expected, "{shown}");
        }
    }

    #[test]
    fn of_field_should_follow_the_markers_that_change_the_json_type() {
        let ty = |ty: syn::Type, attr: syn::Attribute| of_field(&field(ty, Some(attr))).to_string();
        assert_eq!(
            ty(
                syn::parse_quote!(String),
                syn::parse_quote!(#[validate(format = "byte")])
            ),
            "bytes"
        );
        assert_eq!(
            ty(
                syn::parse_quote!(String),
                syn::parse_quote!(#[validate(format = "date-time")])
            ),
            "timestamp"
        );
        assert_eq!(
            ty(
                syn::parse_quote!(String),
                syn::parse_quote!(#[validate(format = "duration")])
            ),
            "duration"
        );
        assert_eq!(
            ty(
                syn::parse_quote!(i32),
                syn::parse_quote!(#[validate(int_or_string)])
            ),
            "dyn"
        );
        assert_eq!(
            ty(
                syn::parse_quote!(f64),
                syn::parse_quote!(#[validate(type = "integer")])
            ),
            "int"
        );
        assert_eq!(
            ty(
                syn::parse_quote!(Vec<String>),
                syn::parse_quote!(#[validate(items(format = "byte"))])
            ),
            "list(bytes)"
        );
    }

    #[test]
    fn of_field_should_bound_sizes_as_the_apiserver_does() {
        let size =
            |ty: syn::Type, attr: Option<syn::Attribute>| of_field(&field(ty, attr)).size.max;
        // No bound: as much as fits in a 3 MiB request: 3145726 characters, or elements of
        // 2 bytes (`""`) plus a comma, or entries of 2 + 6 bytes.
        assert_eq!(size(syn::parse_quote!(String), None), Some(3_145_726));
        assert_eq!(size(syn::parse_quote!(Vec<String>), None), Some(1_048_575));
        assert_eq!(size(syn::parse_quote!(Vec<i32>), None), Some(1_572_863));
        assert_eq!(size(syn::parse_quote!(Vec<bool>), None), Some(629_145));
        assert_eq!(
            size(syn::parse_quote!(HashMap<String, String>), None),
            Some(393_215)
        );
        // `max_length` counts code points: 4 bytes each.
        assert_eq!(
            size(
                syn::parse_quote!(String),
                Some(syn::parse_quote!(#[validate(max_length = 64)]))
            ),
            Some(256)
        );
        assert_eq!(
            size(
                syn::parse_quote!(String),
                Some(syn::parse_quote!(#[validate(enum = ["a", "abc"])]))
            ),
            Some(3)
        );
        assert_eq!(
            size(
                syn::parse_quote!(Vec<String>),
                Some(syn::parse_quote!(#[validate(max_items = 10)]))
            ),
            Some(10)
        );
        assert_eq!(size(syn::parse_quote!(Vec<MyStruct>), None), None);
    }
}
