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
    pub no_format: Option<Keyed<bool>>,
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

pub const EXTERNAL_DOCS: Table<ExternalDocs> = Table {
    what: "`external_docs`",
    doc: "The `externalDocs` of the field's schema.",
    keys: &[
        Key::required(
            "url",
            Value::Str(|d: &mut ExternalDocs, v| d.url = Some(v)),
            "`external_docs` needs `url = \"https://...\"`",
        )
        .doc("`url`"),
        Key::new(
            "description",
            Value::Str(|d: &mut ExternalDocs, v| d.description = Some(v)),
        )
        .doc("`description`"),
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

/// What `validate()` checks of a marker the apiserver also enforces.
const CHECKED: &str = "✓";
/// What `validate()` checks of a marker it leaves to the apiserver.
const SERVER_ONLY: &str = "—";

/// Every marker. The first [`ELEMENT_KEYS`] (the value constraints, counts, rules and the
/// `x-kubernetes-*` flags of one node) are also those of `items(...)` and `values(...)`.
const MARKER_KEYS: &[Key<Markers>] = &[
    Key::new("minimum", Value::Number(|m: &mut Markers, v| m.minimum = Some(v)))
        .doc("`minimum`")
        .client(CHECKED),
    Key::new("maximum", Value::Number(|m: &mut Markers, v| m.maximum = Some(v)))
        .doc("`maximum`")
        .client(CHECKED),
    Key::new(
        "exclusive_minimum",
        Value::Flag(|m: &mut Markers, v| m.exclusive_minimum = Some(v)),
    )
    .doc("`exclusiveMinimum: true`: the minimum itself is out")
    .client(CHECKED),
    Key::new(
        "exclusive_maximum",
        Value::Flag(|m: &mut Markers, v| m.exclusive_maximum = Some(v)),
    )
    .doc("`exclusiveMaximum: true`: the maximum itself is out")
    .client(CHECKED),
    Key::new("multiple_of", Value::Number(|m: &mut Markers, v| m.multiple_of = Some(v)))
        .doc("`multipleOf`")
        .client(CHECKED),
    Key::new("min_length", Value::Unsigned(|m: &mut Markers, v| m.min_length = Some(v)))
        .doc("`minLength` of a string, in Unicode code points")
        .client(CHECKED),
    Key::new("max_length", Value::Unsigned(|m: &mut Markers, v| m.max_length = Some(v)))
        .doc("`maxLength` of a string, in Unicode code points")
        .client(CHECKED),
    Key::new("pattern", Value::Str(|m: &mut Markers, v| m.pattern = Some(v)))
        .doc("`pattern`, a regular expression (checked at compile time)")
        .client(CHECKED),
    Key::new("enum", Value::JsonArray(|m: &mut Markers, v| m.enum_values = Some(v)))
        .doc("`enum`: the allowed values")
        .client(CHECKED),
    Key::new("format", Value::Str(|m: &mut Markers, v| m.format = Some(v)))
        .doc("`format`, such as `date-time`, `byte` (base64: the field for binary data, instead of `k8s_openapi::ByteString`, which has no schema), `uuid`, `hostname`")
        .client("✓ for `date-time`, `date`, `uuid`, `ipv4`, `ipv6`, `cidr` and `byte` (standard base64 with padding); other formats only by the apiserver"),
    Key::new("no_format", Value::Flag(|m: &mut Markers, v| m.no_format = Some(v)))
        .doc("no `format` in the schema, not even the one the type implies (`int64` for `i64`, `int32` for `i32`, `double` for `f64`, `float` for `f32`, `date-time` for a timestamp): for a schema that must match another generator's output (controller-gen writes no `format` for Go's `int` or `float64`)")
        .client(SERVER_ONLY),
    Key::new(
        "int_or_string",
        Value::Flag(|m: &mut Markers, v| m.int_or_string = Some(v)),
    )
    .doc("`x-kubernetes-int-or-string: true`")
    .client(SERVER_ONLY),
    Key::new("map_type", Value::Str(|m: &mut Markers, v| m.map_type = Some(v)))
        .doc("`x-kubernetes-map-type`, `\"atomic\"` or `\"granular\"`, of a map; on a struct field, the struct's (kubebuilder's `structType`)")
        .client(SERVER_ONLY),
    Key::new("type", Value::Str(|m: &mut Markers, v| m.type_ = Some(v)))
        .doc("`type`, one of `string`, `integer`, `number`, `boolean`, `object`, `array`, replacing the derived one (kubebuilder's `Type=`); what only another type has goes (properties of a string, items of an object, a format or enum values of another type); `object` without properties keeps unknown fields. Markers are checked against this type. With `schemaless`: kubebuilder's `Schemaless` + `Type=`")
        .client("✓ the JSON type, unless serde serializes the field with `with` / `serialize_with`"),
    Key::new("min_items", Value::Unsigned(|m: &mut Markers, v| m.min_items = Some(v)))
        .doc("`minItems` of a list")
        .client(CHECKED),
    Key::new("max_items", Value::Unsigned(|m: &mut Markers, v| m.max_items = Some(v)))
        .doc("`maxItems` of a list")
        .client(CHECKED),
    Key::new("unique_items", Value::Flag(|m: &mut Markers, v| m.unique_items = Some(v)))
        .doc("`x-kubernetes-list-type: set` (the apiserver forbids `uniqueItems`)")
        .client(CHECKED),
    Key::new(
        "min_properties",
        Value::Unsigned(|m: &mut Markers, v| m.min_properties = Some(v)),
    )
    .doc("`minProperties` of a map or an object")
    .client(CHECKED),
    Key::new(
        "max_properties",
        Value::Unsigned(|m: &mut Markers, v| m.max_properties = Some(v)),
    )
    .doc("`maxProperties` of a map or an object")
    .client(CHECKED),
    Key::repeatable("rule", Value::Custom(rule))
        .syntax("`(..)`")
        .doc("`x-kubernetes-validations` (`self` is the field's value; inside `items(..)` / `values(..)`, each element or value, kubebuilder's `XValidation` on an element type): see `rule(..)`")
        .client("✓ evaluated with `kube-cel` (the Kubernetes CEL libraries; `cel` feature) on the kind's schema; transition rules (`oldSelf`) by `validate_update(&old)`"),
    Key::new("nullable", Value::Flag(|m: &mut Markers, v| m.nullable = Some(v)))
        .doc("`nullable: true`: the apiserver keeps `null` instead of pruning it; the field or element must be an `Option` (or a `serde_json::Value`), which reads `null`")
        .client(SERVER_ONLY),
    Key::new(
        "preserve_unknown_fields",
        Value::Flag(|m: &mut Markers, v| m.preserve_unknown_fields = Some(v)),
    )
    .doc("`x-kubernetes-preserve-unknown-fields: true`: the apiserver keeps the fields the schema does not list; on an object (a struct, a map, `serde_json::Value`)")
    .client(SERVER_ONLY),
    Key::new(
        "embedded_resource",
        Value::Flag(|m: &mut Markers, v| m.embedded_resource = Some(v)),
    )
    .doc("`x-kubernetes-embedded-resource: true`; fits `RawExtension`, `serde_json::Value`, `serde_json::Map` and structs: the node becomes `type: object` and keeps unknown fields unless the struct lists properties")
    .client(SERVER_ONLY),
    Key::new("default", Value::Json(|m: &mut Markers, v| m.default = Some(v)))
        .doc("`default`: the apiserver stores it in every object that omits the field (`#[serde(default)]` alone gives no schema default)")
        .client(SERVER_ONLY),
    Key::new("default_json", Value::Custom(default_json))
        .syntax("`\"{..}\"` (JSON text)")
        .doc("`default`, written as JSON (for objects)")
        .client(SERVER_ONLY),
    Key::new("schemaless", Value::Flag(|m: &mut Markers, v| m.schemaless = Some(v)))
        .doc("no schema of the field's type (kubebuilder's `Schemaless`)")
        .client(SERVER_ONLY),
    Key::new("list_type", Value::Str(|m: &mut Markers, v| m.list_type = Some(v)))
        .doc("`x-kubernetes-list-type`, `\"atomic\"`, `\"set\"` or `\"map\"`")
        .client("✓ set uniqueness; map-key uniqueness only by the apiserver"),
    Key::new(
        "list_map_keys",
        Value::StrList(|m: &mut Markers, v| m.list_map_keys.extend(v)),
    )
    .doc("`x-kubernetes-list-map-keys` of a `list_type = \"map\"`")
    .client(SERVER_ONLY),
    Key::new("items", Value::Custom(items))
        .syntax("`(..)`")
        .doc("the constraints of each element of a list: see `items(..)`")
        .client(CHECKED),
    Key::new("values", Value::Custom(values))
        .syntax("`(..)`")
        .doc("the constraints of each value of a map: see `values(..)`")
        .client(CHECKED),
    Key::new("title", Value::Str(|m: &mut Markers, v| m.title = Some(v)))
        .doc("`title` (only from this marker: schemars' titles are dropped)")
        .client(SERVER_ONLY),
    Key::new("example", Value::Json(|m: &mut Markers, v| m.example = Some(v)))
        .doc("`example`")
        .client(SERVER_ONLY),
    Key::new("example_json", Value::Custom(example_json))
        .syntax("`\"{..}\"` (JSON text)")
        .doc("`example`, written as JSON (for objects)")
        .client(SERVER_ONLY),
    Key::new("immutable", Value::Flag(|m: &mut Markers, v| m.immutable = Some(v)))
        .doc("the transition rule `self == oldSelf`, message `is immutable` (not evaluated when an optional field is added or removed)")
        .client("on update (`validate_update(&old)`)"),
    Key::new("required", Value::Flag(|m: &mut Markers, v| m.required = Some(v)))
        .doc("the field is in the parent's `required` whatever serde implies (such as an `Option` the apiserver must receive)")
        .client("✓ `Required value` when `None`"),
    Key::new("optional", Value::Flag(|m: &mut Markers, v| m.optional = Some(v)))
        .doc("the field is left out of the parent's `required`; it must be an `Option` or have `#[serde(default)]` (on it or the struct), or serde could not read the objects the apiserver then accepts")
        .client(SERVER_ONLY),
    Key::new("external_docs", Value::Custom(external_docs))
        .syntax("`(..)`")
        .doc("`externalDocs`: see `external_docs(..)`")
        .client(SERVER_ONLY),
    // Markers of a struct or of a map, written on a field: reported with where they go.
    Key::new("exactly_one_of", Value::Custom(type_level))
        .syntax(TYPE_LEVEL_SYNTAX)
        .doc(TYPE_LEVEL_DOC)
        .client(SERVER_ONLY),
    Key::new("at_most_one_of", Value::Custom(type_level))
        .syntax(TYPE_LEVEL_SYNTAX)
        .doc(TYPE_LEVEL_DOC)
        .client(SERVER_ONLY),
    Key::new("at_least_one_of", Value::Custom(type_level))
        .syntax(TYPE_LEVEL_SYNTAX)
        .doc(TYPE_LEVEL_DOC)
        .client(SERVER_ONLY),
    Key::new("struct_type", Value::Custom(struct_type))
        .syntax("`\"..\"`")
        .doc("not a field marker: a compile error saying that a struct's merge type is `map_type`")
        .client(SERVER_ONLY),
];

/// The value of the struct-level markers on a field, as the reference writes it.
const TYPE_LEVEL_SYNTAX: &str = "`[\"a\", \"b\", ..]`";
/// The reference's text for the struct-level markers on a field.
const TYPE_LEVEL_DOC: &str = "not a field marker: a compile error saying to put it on the type, `#[kubeforge::schema(..)]` or, for the spec, `#[custom_resource(..)]`";

pub const MARKERS: Table<Markers> = Table {
    what: "`validate`",
    doc: "On fields of a `#[custom_resource]` or `#[kubeforge::schema]` struct (several \
          `#[validate(..)]` on one field add up), and on types \
          (see *Markers on types* in the `#[kubeforge::schema]` documentation). Each \
          marker goes into the OpenAPI schema, which the apiserver enforces; the last column \
          says what the generated `garde::Validate` impl checks client-side, with the \
          apiserver's semantics.",
    keys: MARKER_KEYS,
};

/// How many of the first [`MARKER_KEYS`] are allowed in `items(...)` and `values(...)`.
const ELEMENT_KEYS: usize = 23;

/// Markers allowed inside `items(...)`: the value constraints of each list element, its map
/// type, int-or-string and type, its counts (an element that is a list or a map), its rules and
/// its `nullable` / `preserve_unknown_fields` / `embedded_resource` flags.
pub const ITEMS: Table<Markers> = Table {
    what: "`items`",
    doc: "The constraints of each element of a list (`Vec`, `BTreeSet`, ...), checked by \
          `validate()` as on a field.",
    keys: MARKER_KEYS.split_at(ELEMENT_KEYS).0,
};

/// Markers allowed inside `values(...)`: those of `items(...)`, for each value of a map.
pub const VALUES: Table<Markers> = Table {
    what: "`values`",
    doc: "The constraints of each value of a map (`BTreeMap<String, _>`, `HashMap`), such as \
          `values(format = \"byte\")`, checked by `validate()` as on a field.",
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
                "no_format",
                "int_or_string",
                "map_type",
                "type",
                "min_items",
                "max_items",
                "unique_items",
                "min_properties",
                "max_properties",
                "rule",
                "nullable",
                "preserve_unknown_fields",
                "embedded_resource"
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
