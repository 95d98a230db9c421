//! Field markers, `#[validate(...)]`, shared by `#[custom_resource]` and `#[kubeforge::schema]`:
//! their key table, the typed [`Markers`] of one field, and taking them off the user's fields
//! (the attribute macro consumes them: `validate` is not a registered attribute). Their checks
//! are in `validate.rs`, their schema and client-side checks in `expand/markers.rs`.

use syn::meta::ParseNestedMeta;
use syn::{Attribute, LitStr};

use crate::attrs::RULE;
use crate::errors::Errors;
use crate::keys::{self, Key, Keyed, Number, Table, Value};
use crate::model::Rule;

/// The markers of one field. No key has a default: an absent marker adds nothing.
#[derive(Default, Clone)]
pub struct Markers {
    pub minimum: Option<Number>,
    pub maximum: Option<Number>,
    pub exclusive_minimum: Option<Keyed<bool>>,
    pub exclusive_maximum: Option<Keyed<bool>>,
    pub multiple_of: Option<Number>,
    pub min_length: Option<Keyed<u64>>,
    pub max_length: Option<Keyed<u64>>,
    pub pattern: Option<LitStr>,
    pub enum_values: Option<Keyed<Vec<serde_json::Value>>>,
    pub format: Option<LitStr>,
    pub min_items: Option<Keyed<u64>>,
    pub max_items: Option<Keyed<u64>>,
    pub unique_items: Option<Keyed<bool>>,
    pub min_properties: Option<Keyed<u64>>,
    pub max_properties: Option<Keyed<u64>>,
    pub rules: Vec<Rule>,
    pub default: Option<Keyed<serde_json::Value>>,
    pub nullable: Option<Keyed<bool>>,
    pub preserve_unknown_fields: Option<Keyed<bool>>,
    pub embedded_resource: Option<Keyed<bool>>,
    pub int_or_string: Option<Keyed<bool>>,
    pub schemaless: Option<Keyed<bool>>,
    pub list_type: Option<LitStr>,
    pub list_map_keys: Vec<LitStr>,
    pub map_type: Option<LitStr>,
    /// `items(...)`: constraints of each element of a list.
    pub items: Option<Keyed<Box<Markers>>>,
    /// `values(...)`: constraints of each value of a map.
    pub values: Option<Keyed<Box<Markers>>>,
    /// `type = ".."`: the OpenAPI type replacing the one derived from the Rust type.
    pub type_: Option<LitStr>,
    /// `title = ".."`.
    pub title: Option<LitStr>,
    /// `example = <literal>` / `example_json = "{..}"`.
    pub example: Option<Keyed<serde_json::Value>>,
    /// `immutable`: a transition rule `self == oldSelf`.
    pub immutable: Option<Keyed<bool>>,
    /// `required`: listed in the parent's `required` whatever serde implies.
    pub required: Option<Keyed<bool>>,
    /// `optional`: left out of the parent's `required` whatever serde implies.
    pub optional: Option<Keyed<bool>>,
    /// `external_docs(url = "..", description = "..")`.
    pub external_docs: Option<Keyed<ExternalDocs>>,
    /// Not a marker: the type `validate()` checks, `type` unless serde serializes the field with
    /// a function of its own (`with`, `serialize_with`), whose JSON `validate()` does not see.
    pub client_type: Option<String>,
}

/// `external_docs(url = "..", description = "..")`.
#[derive(Default, Clone)]
pub struct ExternalDocs {
    pub url: Option<LitStr>,
    pub description: Option<LitStr>,
}

const EXTERNAL_DOCS: Table<ExternalDocs> = Table {
    what: "`external_docs`",
    keys: &[
        Key::required(
            "url",
            Value::Str(|d, v| d.url = Some(v)),
            "`external_docs` needs `url = \"https://...\"`",
        ),
        Key::new("description", Value::Str(|d, v| d.description = Some(v))),
    ],
};

/// The OpenAPI types `type = ".."` accepts.
pub const TYPES: &[&str] = &["string", "integer", "number", "boolean", "object", "array"];

impl Markers {
    /// Whether a flag marker is set (`x` or `x = true`).
    pub fn is_set(flag: &Option<Keyed<bool>>) -> bool {
        flag.as_ref().is_some_and(|f| f.value)
    }
}

/// Every marker. The first ten, the scalar constraints, are also those of `items(...)`.
const MARKER_KEYS: &[Key<Markers>] = &[
    Key::new("minimum", Value::Number(|m, v| m.minimum = Some(v))),
    Key::new("maximum", Value::Number(|m, v| m.maximum = Some(v))),
    Key::new(
        "exclusive_minimum",
        Value::Flag(|m, v| m.exclusive_minimum = Some(v)),
    ),
    Key::new(
        "exclusive_maximum",
        Value::Flag(|m, v| m.exclusive_maximum = Some(v)),
    ),
    Key::new("multiple_of", Value::Number(|m, v| m.multiple_of = Some(v))),
    Key::new("min_length", Value::Unsigned(|m, v| m.min_length = Some(v))),
    Key::new("max_length", Value::Unsigned(|m, v| m.max_length = Some(v))),
    Key::new("pattern", Value::Str(|m, v| m.pattern = Some(v))),
    Key::new("enum", Value::JsonArray(|m, v| m.enum_values = Some(v))),
    Key::new("format", Value::Str(|m, v| m.format = Some(v))),
    Key::new(
        "int_or_string",
        Value::Flag(|m, v| m.int_or_string = Some(v)),
    ),
    Key::new("map_type", Value::Str(|m, v| m.map_type = Some(v))),
    Key::new("type", Value::Str(|m, v| m.type_ = Some(v))),
    Key::new("min_items", Value::Unsigned(|m, v| m.min_items = Some(v))),
    Key::new("max_items", Value::Unsigned(|m, v| m.max_items = Some(v))),
    Key::new("unique_items", Value::Flag(|m, v| m.unique_items = Some(v))),
    Key::new(
        "min_properties",
        Value::Unsigned(|m, v| m.min_properties = Some(v)),
    ),
    Key::new(
        "max_properties",
        Value::Unsigned(|m, v| m.max_properties = Some(v)),
    ),
    Key::repeatable("rule", Value::Custom(rule)),
    Key::new("default", Value::Json(|m, v| m.default = Some(v))),
    Key::new("default_json", Value::Custom(default_json)),
    Key::new("nullable", Value::Flag(|m, v| m.nullable = Some(v))),
    Key::new(
        "preserve_unknown_fields",
        Value::Flag(|m, v| m.preserve_unknown_fields = Some(v)),
    ),
    Key::new(
        "embedded_resource",
        Value::Flag(|m, v| m.embedded_resource = Some(v)),
    ),
    Key::new("schemaless", Value::Flag(|m, v| m.schemaless = Some(v))),
    Key::new("list_type", Value::Str(|m, v| m.list_type = Some(v))),
    Key::new(
        "list_map_keys",
        Value::StrList(|m, v| m.list_map_keys.extend(v)),
    ),
    Key::new("items", Value::Custom(items)),
    Key::new("values", Value::Custom(values)),
    Key::new("title", Value::Str(|m, v| m.title = Some(v))),
    Key::new("example", Value::Json(|m, v| m.example = Some(v))),
    Key::new("example_json", Value::Custom(example_json)),
    Key::new("immutable", Value::Flag(|m, v| m.immutable = Some(v))),
    Key::new("required", Value::Flag(|m, v| m.required = Some(v))),
    Key::new("optional", Value::Flag(|m, v| m.optional = Some(v))),
    Key::new("external_docs", Value::Custom(external_docs)),
    // Markers of a struct or of a map, written on a field: reported with where they go.
    Key::new("exactly_one_of", Value::Custom(type_level)),
    Key::new("at_most_one_of", Value::Custom(type_level)),
    Key::new("at_least_one_of", Value::Custom(type_level)),
    Key::new("struct_type", Value::Custom(struct_type)),
];

const MARKERS: Table<Markers> = Table {
    what: "`validate`",
    keys: MARKER_KEYS,
};

/// How many of the first [`MARKER_KEYS`] are allowed in `items(...)` and `values(...)`.
const ELEMENT_KEYS: usize = 13;

/// Markers allowed inside `items(...)`: the value constraints of each list element, its map
/// type, int-or-string and type.
const ITEMS: Table<Markers> = Table {
    what: "`items`",
    keys: MARKER_KEYS.split_at(ELEMENT_KEYS).0,
};

/// Markers allowed inside `values(...)`: those of `items(...)`, for each value of a map.
const VALUES: Table<Markers> = Table {
    what: "`values`",
    keys: MARKER_KEYS.split_at(ELEMENT_KEYS).0,
};

fn rule(m: &mut Markers, meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<()> {
    let attrs = keys::nested(meta, &RULE, errors)?.value;
    m.rules.extend(Rule::from_attrs(attrs));
    Ok(())
}

/// `default_json = "{..}"`: a default that is not a literal, such as an object.
fn default_json(
    m: &mut Markers,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    json_string(&mut m.default, "default", meta, errors)
}

/// A JSON value written as a string literal, into `slot` unless the key `name` set it already.
fn json_string(
    slot: &mut Option<Keyed<serde_json::Value>>,
    name: &str,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    let lit: LitStr = meta.value()?.parse()?;
    let value: serde_json::Value = serde_json::from_str(&lit.value())
        .map_err(|e| syn::Error::new_spanned(&lit, format!("invalid JSON: {e}")))?;
    if slot.is_some() {
        errors.spanned(&meta.path, format!("`{name}` is already set"));
    } else {
        *slot = Some(Keyed {
            value,
            key: keys::key_span(meta),
        });
    }
    Ok(())
}

fn items(m: &mut Markers, meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<()> {
    m.items = Some(element(meta, &ITEMS, errors)?);
    Ok(())
}

fn values(m: &mut Markers, meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<()> {
    m.values = Some(element(meta, &VALUES, errors)?);
    Ok(())
}

/// The markers of a list's items or a map's values, read with `table`.
fn element(
    meta: &ParseNestedMeta<'_>,
    table: &Table<Markers>,
    errors: &mut Errors,
) -> syn::Result<Keyed<Box<Markers>>> {
    let Keyed { value, key } = keys::nested(meta, table, errors)?;
    Ok(Keyed {
        value: Box::new(value),
        key,
    })
}

/// `example_json = "{..}"`: an example that is not a literal, such as an object.
fn example_json(
    m: &mut Markers,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    json_string(&mut m.example, "example", meta, errors)
}

fn external_docs(
    m: &mut Markers,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    m.external_docs = Some(keys::nested(meta, &EXTERNAL_DOCS, errors)?);
    Ok(())
}

/// `exactly_one_of` & co. on a field: they name sibling fields, so they go on the struct.
fn type_level(_: &mut Markers, meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<()> {
    let name = keys::key_name(meta);
    errors.spanned(
        &meta.path,
        format!(
            "`{name}` is a marker of the struct (it names sibling fields): put it on the type with #[kubeforge::schema({name} = [..])], or in #[custom_resource(..)] for the spec"
        ),
    );
    keys::skip_value(meta)
}

/// `struct_type = ".."` (kubebuilder's `structType`): Kubernetes spells it `x-kubernetes-map-type`.
fn struct_type(
    _: &mut Markers,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    errors.spanned(
        &meta.path,
        "a struct's merge type is `map_type = \"atomic\"` / `\"granular\"` (Kubernetes spells it `x-kubernetes-map-type` on structs and maps alike)",
    );
    keys::skip_value(meta)
}

/// Parses one `#[validate(...)]` attribute into `markers` (a field may carry several).
pub fn parse(attr: &Attribute, markers: &mut Markers, errors: &mut Errors) {
    keys::parse_attr(attr, &MARKERS, markers, errors);
}

/// Takes the `#[validate(...)]` attributes out of `attrs`: their markers, `None` when there
/// were none.
pub fn take(attrs: &mut Vec<Attribute>, errors: &mut Errors) -> Option<Markers> {
    let mut markers: Option<Markers> = None;
    attrs.retain(|attr| {
        if attr.path().is_ident("validate") {
            parse(attr, markers.get_or_insert_default(), errors);
            false
        } else {
            true
        }
    });
    markers
}

/// Removes and reports `#[validate(...)]` attributes where markers are not supported.
pub fn reject(attrs: &mut Vec<Attribute>, message: &str, errors: &mut Errors) {
    attrs.retain(|attr| {
        if attr.path().is_ident("validate") {
            errors.spanned(attr, message);
            false
        } else {
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_should_read_numbers_and_literals() {
        let attr: syn::Attribute = syn::parse_quote!(#[validate(minimum = -5, maximum = 2.5, enum = ["a", "b"], default = 3, list_map_keys = ["name"])]);
        let mut markers = Markers::default();
        let mut errors = Errors::default();
        parse(&attr, &mut markers, &mut errors);
        let messages = errors.messages();
        assert!(messages.is_empty(), "{messages:?}");
        assert_eq!(
            markers.minimum.map(|n| n.value.to_string()).as_deref(),
            Some("-5")
        );
        assert_eq!(
            markers.maximum.map(|n| n.value.to_string()).as_deref(),
            Some("2.5")
        );
        assert_eq!(markers.enum_values.map(|e| e.value.len()), Some(2));
        assert_eq!(markers.default.map(|d| d.value), Some(serde_json::json!(3)));
        assert_eq!(markers.list_map_keys.len(), 1);
    }

    #[test]
    fn items_should_accept_only_the_element_markers() {
        let names: Vec<&str> = ITEMS.keys.iter().map(|k| k.name).collect();
        assert_eq!(
            names,
            [
                "minimum",
                "maximum",
                "exclusive_minimum",
                "exclusive_maximum",
                "multiple_of",
                "min_length",
                "max_length",
                "pattern",
                "enum",
                "format",
                "int_or_string",
                "map_type",
                "type"
            ]
        );
    }

    #[test]
    fn parse_should_report_bad_values_and_go_on() {
        let attr: syn::Attribute = syn::parse_quote!(#[validate(min_length = -1, enum = [], default = 1, default_json = "2", list_map_keys = ["a", 1], max_length = 3)]);
        let mut markers = Markers::default();
        let mut errors = Errors::default();
        parse(&attr, &mut markers, &mut errors);
        assert_eq!(
            errors.messages(),
            [
                "expected a non-negative integer",
                "expected a non-empty array, e.g. `enum = [\"a\", \"b\"]`",
                "`default` is already set",
                "expected a string literal",
            ]
        );
        assert_eq!(markers.max_length.map(|m| m.value), Some(3));
    }
}
