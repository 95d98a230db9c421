//! The structural rewrite pass: turns a schemars (JSON Schema 2020-12, inlined) schema into an
//! OpenAPI v3 schema the apiserver accepts as *structural*.
//!
//! Rules (see the Kubernetes documentation "Specifying a structural schema"):
//! - no `$ref`, `$schema`, `$defs`, `const` (becomes `enum`); no `title` or `examples` from
//!   schemars (the type name, `# Heading` doc lines), only the `title` / `example` markers;
//! - every node has a `type`, except nodes with `x-kubernetes-int-or-string` or
//!   `x-kubernetes-preserve-unknown-fields`;
//! - `anyOf`/`oneOf` never carry structure: branches of enums are merged into the parent
//!   (`properties` of every object branch, `enum` of string branches); only `oneOf` of
//!   `required` lists is kept for externally tagged enums;
//! - `nullable` only where the user asked for it (Rust `Option` means "may be absent");
//! - `additionalProperties` never next to `properties`, never a boolean.
//!
//! kubeforge's own markers travel through schemars as `x-kubeforge-*` extension keys and are
//! interpreted here.

use serde_json::{Map, Value, json};

/// Marker key: replace the node by `x-kubernetes-int-or-string: true`.
pub(crate) const INT_OR_STRING: &str = "x-kubeforge-int-or-string";
/// Marker key: drop the generated schema, keep unknown fields.
pub(crate) const SCHEMALESS: &str = "x-kubeforge-schemaless";
/// `no_format`: the node keeps no `format` (the one its type implies goes too).
pub(crate) const NO_FORMAT: &str = "x-kubeforge-no-format";
/// Marker key: constraints merged into the node's `items` schema.
pub(crate) const ITEMS: &str = "x-kubeforge-items";
/// Marker key: the node's `default` (the `default` / `default_json` markers).
pub(crate) const DEFAULT: &str = "x-kubeforge-default";
/// Marker key: field-level CEL rules, appended to the node's `x-kubernetes-validations`.
pub(crate) const FIELD_VALIDATIONS: &str = "x-kubeforge-validations";
/// Marker key: constraints merged into the node's `additionalProperties` schema (map values).
pub(crate) const VALUES: &str = "x-kubeforge-values";
/// Marker key: the OpenAPI type replacing the derived one; structure that does not fit goes.
pub(crate) const TYPE: &str = "x-kubeforge-type";
/// Marker key: the node's `title`.
pub(crate) const TITLE: &str = "x-kubeforge-title";
/// Marker key: the node's `example`.
pub(crate) const EXAMPLE: &str = "x-kubeforge-example";
/// Marker key on a property: `true` adds it to the parent's `required`, `false` removes it.
pub(crate) const REQUIRED: &str = "x-kubeforge-required";
/// Prefix of the markers a type carries (`#[validate(..)]` on a `#[kubeforge::schema]` type),
/// one key per type (`x-kubeforge-type-markers:Name`): where the type is used, they are merged
/// into the node under the field's own markers, the tighter bound winning.
pub(crate) const TYPE_MARKERS: &str = "x-kubeforge-type-markers:";
/// `exactly_one_of` & co. of a struct: `[{"kind": "exactly", "fields": ["a", "b"]}]`, made CEL
/// rules here (after the struct's own rules).
pub(crate) const ONE_OF: &str = "x-kubeforge-one-of";

const PRESERVE: &str = "x-kubernetes-preserve-unknown-fields";
const INT_OR_STRING_K8S: &str = "x-kubernetes-int-or-string";
const VALIDATIONS: &str = "x-kubernetes-validations";

/// Keys that describe a node's documentation or value constraints (not its structure), kept when
/// a node is replaced by a merged or an int-or-string schema.
const VALUE_KEYS: &[&str] = &[
    "description",
    "title",
    "example",
    "externalDocs",
    TYPE,
    "default",
    "nullable",
    VALIDATIONS,
    FIELD_VALIDATIONS,
    ONE_OF,
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-embedded-resource",
    PRESERVE,
    INT_OR_STRING_K8S,
];

/// Rewrites `schema` (as produced by schemars with inlined subschemas) into a structural schema.
///
/// The pass is total: a shape that cannot be expressed structurally (an enum mixing unit and
/// data variants, a tuple) becomes a node with `x-kubernetes-preserve-unknown-fields: true`, which
/// the apiserver accepts and which stores the value as given.
///
/// # Examples
///
/// ```
/// let schema = serde_json::json!({"type": ["integer", "null"], "format": "uint32", "minimum": 0});
/// let structural = kubeforge::crd::structural_schema(schema);
/// assert_eq!(structural, serde_json::json!({"type": "integer", "format": "int64", "minimum": 0}));
/// ```
pub fn structural_schema(mut schema: Value) -> Value {
    rewrite(&mut schema);
    schema
}

fn preserve() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(PRESERVE.to_owned(), Value::Bool(true));
    m
}

fn rewrite(node: &mut Value) {
    let mut map = match std::mem::take(node) {
        Value::Object(map) => map,
        // `true` (anything, e.g. serde_json::Value) and `false` alike: keep what is sent.
        Value::Bool(_) | Value::Null => preserve(),
        other => {
            *node = other;
            return;
        }
    };
    rewrite_map(&mut map);
    *node = Value::Object(map);
}

fn rewrite_map(map: &mut Map<String, Value>) {
    // Option<T> first: the inner schema is merged under the field's keys and rewritten once,
    // with them (markers of nested fields would be lost by a second pass).
    unwrap_nullable(map);
    // Then the markers of the types used here, narrowed by the field's own.
    let both = merge_type_markers(map);
    own_keys(map);
    push_down(map);
    required_overrides(map);
    // Children first, so that branch merging sees rewritten branches.
    rewrite_children(map);
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(mut branches)) = map.remove(key) {
            if key == "allOf" && branches.iter().all(only_value_constraints) {
                // Constraints that must all hold (a type's and a field's patterns): kept.
                map.insert(key.to_owned(), Value::Array(branches));
                continue;
            }
            for branch in &mut branches {
                rewrite(branch);
            }
            merge_branches(map, key, branches);
        }
    }
    one_of_rules(map);
    quantity_pattern(map);
    apply_markers(map);
    unique_items(map);
    fix_format(map);
    if map.remove(NO_FORMAT) == Some(Value::Bool(true)) {
        map.remove("format");
    }
    infer_type(map);
    open_objects(map);
    all_of(map, both);
}

/// The node's own keys: what schemars adds that a structural schema refuses, defaults, titles
/// and examples only from the markers.
fn own_keys(map: &mut Map<String, Value>) {
    for key in [
        "$schema",
        "$id",
        "$defs",
        "definitions",
        "$comment",
        "title",
        "examples",
        "readOnly",
        "writeOnly",
        "deprecated",
    ] {
        map.remove(key);
    }
    if map.remove("$ref").is_some() {
        // A recursive type: the apiserver cannot express it; keep the value as sent.
        map.retain(|k, _| VALUE_KEYS.contains(&k.as_str()));
        map.insert(PRESERVE.to_owned(), Value::Bool(true));
    }
    if let Some(value) = map.remove("const") {
        map.insert("enum".to_owned(), Value::Array(vec![value]));
    }
    // A schema default comes only from the `default` marker: the one schemars derives from
    // `#[serde(default)]` (which only makes a field optional) is dropped.
    map.remove("default");
    if let Some(default) = map.remove(DEFAULT) {
        map.insert("default".to_owned(), default);
    }
    // Titles and examples only from the markers.
    for (marker, key) in [(TITLE, "title"), (EXAMPLE, "example")] {
        if let Some(value) = map.remove(marker) {
            map.insert(key.to_owned(), value);
        }
    }
    // Consumed by the parent (`required_overrides`); a root node has none.
    map.remove(REQUIRED);
}

/// Rewrites the properties, items and map values of the node.
fn rewrite_children(map: &mut Map<String, Value>) {
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for child in props.values_mut() {
            rewrite(child);
        }
    }
    if let Some(items) = map.get_mut("items") {
        rewrite(items);
    }
    if map.remove("prefixItems").is_some() {
        // Tuples: no structural equivalent; keep the elements as sent.
        map.insert("type".to_owned(), json!("array"));
        map.insert("items".to_owned(), Value::Object(preserve()));
    }
    match map.remove("additionalProperties") {
        Some(Value::Bool(true)) => {
            map.insert(PRESERVE.to_owned(), Value::Bool(true));
        }
        Some(mut schema @ Value::Object(_)) => {
            rewrite(&mut schema);
            if map.contains_key("properties") {
                // A struct with a flattened map: structural schemas cannot say both.
                map.insert(PRESERVE.to_owned(), Value::Bool(true));
            } else {
                map.insert("additionalProperties".to_owned(), schema);
            }
        }
        _ => {}
    }
}

/// Constraints that cannot be merged into one key (two patterns): each must hold. Added after
/// the branches were merged, so they stay an `allOf` of value validations.
fn all_of(map: &mut Map<String, Value>, both: Vec<(String, Value)>) {
    if both.is_empty() {
        return;
    }
    // One branch per constraint; a bound keeps its exclusive flag in its branch.
    let mut branches: Vec<Value> = Vec::new();
    for (k, v) in both {
        let flag_of_last = matches!(k.as_str(), "exclusiveMinimum" | "exclusiveMaximum");
        match branches.last_mut() {
            Some(Value::Object(last)) if flag_of_last => {
                last.insert(k, v);
            }
            _ => branches.push(json!({ k: v })),
        }
    }
    match map.get_mut("allOf") {
        Some(Value::Array(existing)) => existing.extend(branches),
        _ => {
            map.insert("allOf".to_owned(), Value::Array(branches));
        }
    }
}

/// Merges the markers of the types this node is made of (`x-kubeforge-type-markers:*`) into it.
/// A key the field does not set is taken from the type; where both set one, the tighter bound
/// wins (bounds, lengths, counts), rules and flags add up, and value constraints that cannot be
/// merged (two different patterns, formats, enums or multiples) are returned, to be required
/// both. Descriptive keys (title, example, default, merge types) stay the field's.
fn merge_type_markers(map: &mut Map<String, Value>) -> Vec<(String, Value)> {
    let keys: Vec<String> = map
        .keys()
        .filter(|k| k.starts_with(TYPE_MARKERS))
        .cloned()
        .collect();
    let mut both = Vec::new();
    for key in keys {
        let Some(Value::Object(mut markers)) = map.remove(&key) else {
            continue;
        };
        // A bound with its exclusive flag is one constraint.
        for (bound, flag) in [
            ("minimum", "exclusiveMinimum"),
            ("maximum", "exclusiveMaximum"),
        ] {
            let Some(type_bound) = markers.remove(bound) else {
                continue;
            };
            let type_flag = markers.remove(flag);
            match map.get(bound) {
                None => {
                    map.insert(bound.to_owned(), type_bound);
                    if let Some(f) = type_flag {
                        map.insert(flag.to_owned(), f);
                    }
                }
                Some(field_bound) if *field_bound == type_bound => {
                    if type_flag == Some(Value::Bool(true)) {
                        map.insert(flag.to_owned(), Value::Bool(true));
                    }
                }
                Some(_) => {
                    both.push((bound.to_owned(), type_bound));
                    if let Some(f) = type_flag {
                        both.push((flag.to_owned(), f));
                    }
                }
            }
        }
        for (k, type_value) in markers {
            let Some(field_value) = map.get_mut(&k) else {
                map.insert(k, type_value);
                continue;
            };
            let tighter = |pick_max: bool, field: &Value, ty: &Value| -> Option<Value> {
                let (f, t) = (field.as_f64()?, ty.as_f64()?);
                let take_type = if pick_max { t > f } else { t < f };
                Some(if take_type { ty.clone() } else { field.clone() })
            };
            match k.as_str() {
                "minLength" | "minItems" | "minProperties" => {
                    if let Some(v) = tighter(true, field_value, &type_value) {
                        *field_value = v;
                    }
                }
                "maxLength" | "maxItems" | "maxProperties" => {
                    if let Some(v) = tighter(false, field_value, &type_value) {
                        *field_value = v;
                    }
                }
                "uniqueItems" | "x-kubernetes-preserve-unknown-fields"
                    if type_value == Value::Bool(true) =>
                {
                    *field_value = Value::Bool(true);
                }
                FIELD_VALIDATIONS | VALIDATIONS => {
                    if let (Value::Array(field_rules), Value::Array(type_rules)) =
                        (&mut *field_value, type_value)
                    {
                        let mut rules = type_rules;
                        rules.append(field_rules);
                        *field_rules = rules;
                    }
                }
                "pattern" | "format" | "enum" | "multipleOf" if *field_value != type_value => {
                    both.push((k, type_value));
                }
                _ => {}
            }
        }
    }
    both
}

/// Objects that hold arbitrary content keep it: an object schema that names no properties and
/// no value schema — k8s-openapi's `RawExtension` (upstream preserves its unknown fields) and
/// other opaque objects; as a closed `type: object` the apiserver would prune everything stored
/// in it (a Rust struct, even an empty one, always lists its `properties`) — and an
/// `x-kubernetes-embedded-resource` node, which the apiserver accepts only as an object with
/// properties or with unknown fields preserved.
fn open_objects(map: &mut Map<String, Value>) {
    let raw_extension = type_of_map(map) == Some("object")
        && !map.contains_key("properties")
        && !map.contains_key("additionalProperties");
    let embedded = map.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
    if embedded {
        map.insert("type".to_owned(), json!("object"));
        // The apiserver requires an embedded resource's `metadata` to be an object.
        if let Some(Value::Object(metadata)) = map
            .get_mut("properties")
            .and_then(|p| p.get_mut("metadata"))
        {
            metadata.insert("type".to_owned(), json!("object"));
        }
    }
    if raw_extension || (embedded && !map.contains_key("properties")) {
        map.insert(PRESERVE.to_owned(), Value::Bool(true));
    }
}

fn type_of_map(map: &Map<String, Value>) -> Option<&str> {
    map.get("type").and_then(Value::as_str)
}

/// The apiserver forbids `uniqueItems: true` (schemars emits it for sets): a list of scalars
/// becomes `x-kubernetes-list-type: set`, which the apiserver enforces; otherwise it is dropped.
fn unique_items(map: &mut Map<String, Value>) {
    if map.remove("uniqueItems") != Some(Value::Bool(true))
        || map.contains_key("x-kubernetes-list-type")
    {
        return;
    }
    let scalar = map
        .get("items")
        .and_then(type_of)
        .is_some_and(|t| matches!(t, "string" | "integer" | "number" | "boolean"));
    if scalar {
        map.insert("x-kubernetes-list-type".to_owned(), json!("set"));
    }
}

/// `Option<T>` as schemars writes it, `type: [T, "null"]` or `anyOf: [T, {type: null}]`: the
/// schema of `T` merged under the outer keys (the field's description and markers win).
fn unwrap_nullable(map: &mut Map<String, Value>) {
    loop {
        strip_null_type(map);
        let mut merged = false;
        for key in ["anyOf", "oneOf"] {
            let Some(Value::Array(branches)) = map.get_mut(key) else {
                continue;
            };
            branches.retain(|b| !is_null_schema(b));
            if branches.len() != 1 {
                continue;
            }
            let only = branches.remove(0);
            map.remove(key);
            let inner = match only {
                Value::Object(inner) => inner,
                // `true`: any value.
                _ => preserve(),
            };
            merge_under(map, inner);
            merged = true;
        }
        if !merged {
            return;
        }
    }
}

/// The `items(..)` and `values(..)` markers of a node, merged into its `items` and
/// `additionalProperties` schemas before those are rewritten (so that markers such as
/// `int_or_string` among them are interpreted there).
fn push_down(map: &mut Map<String, Value>) {
    for (marker, child) in [(ITEMS, "items"), (VALUES, "additionalProperties")] {
        let Some(Value::Object(constraints)) = map.remove(marker) else {
            continue;
        };
        match map.get_mut(child) {
            Some(Value::Object(schema)) => schema.extend(constraints),
            // Any value (`serde_json::Value` elements): the constraints are the whole schema.
            Some(schema @ Value::Bool(true)) => *schema = Value::Object(constraints),
            _ => {}
        }
    }
}

/// The `required` / `optional` markers of the properties (and `optional_spec`), which override
/// what serde implies: each property's `x-kubeforge-required` adds it to or removes it from
/// this node's `required`.
fn required_overrides(map: &mut Map<String, Value>) {
    let Some(Value::Object(properties)) = map.get_mut("properties") else {
        return;
    };
    let changes: Vec<(String, bool)> = properties
        .iter_mut()
        .filter_map(
            |(name, child)| match child.as_object_mut()?.remove(REQUIRED)? {
                Value::Bool(required) => Some((name.clone(), required)),
                _ => None,
            },
        )
        .collect();
    if changes.is_empty() {
        return;
    }
    let mut required = match map.remove("required") {
        Some(Value::Array(r)) => r,
        _ => Vec::new(),
    };
    for (name, is_required) in changes {
        let name = Value::String(name);
        if !is_required {
            required.retain(|r| *r != name);
        } else if !required.contains(&name) {
            required.push(name);
        }
    }
    if !required.is_empty() {
        map.insert("required".to_owned(), Value::Array(required));
    }
}

/// `type = ".."`: the node gets that type; what only another type can have goes (properties
/// of a string, items of an object, lengths of a number, a format or enum values of another
/// type), and an object without properties keeps unknown fields (see [`open_objects`]).
fn apply_type(map: &mut Map<String, Value>, openapi_type: &str) {
    const OBJECT: &[&str] = &[
        "properties",
        "additionalProperties",
        "required",
        "minProperties",
        "maxProperties",
        "x-kubernetes-map-type",
        "x-kubernetes-embedded-resource",
        "oneOf",
    ];
    const ARRAY: &[&str] = &[
        "items",
        "minItems",
        "maxItems",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
    ];
    const STRING: &[&str] = &["minLength", "maxLength", "pattern"];
    const NUMBER: &[&str] = &[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ];
    let mut drop: Vec<&str> = vec![INT_OR_STRING_K8S];
    for (keys, owner) in [(OBJECT, "object"), (ARRAY, "array"), (STRING, "string")] {
        if openapi_type != owner {
            drop.extend(keys);
        }
    }
    if !matches!(openapi_type, "integer" | "number") {
        drop.extend(NUMBER);
    }
    if openapi_type != "object" {
        drop.push(PRESERVE);
    }
    for key in drop {
        map.remove(key);
    }
    fix_format(map);
    let format_fits = |format: &str| match openapi_type {
        "integer" => matches!(format, "int32" | "int64"),
        "number" => matches!(format, "float" | "double" | "int32" | "int64"),
        "string" => !matches!(format, "int32" | "int64" | "float" | "double"),
        _ => false,
    };
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !format_fits(f))
    {
        map.remove("format");
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| json_type_fits(openapi_type, v));
        if values.is_empty() {
            map.remove("enum");
        }
    }
    map.insert("type".to_owned(), json!(openapi_type));
}

/// Whether `value` is a JSON value of the OpenAPI type `openapi_type`.
pub(crate) fn json_type_fits(openapi_type: &str, value: &Value) -> bool {
    match (openapi_type, value) {
        ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type") == Some(&json!("null"))
}

fn strip_null_type(map: &mut Map<String, Value>) {
    let Some(Value::Array(types)) = map.get("type") else {
        return;
    };
    let types: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
    match types.as_slice() {
        [] => {
            map.remove("type");
        }
        [one] => {
            map.insert("type".to_owned(), one.clone());
        }
        many if many.len() == 2
            && many.contains(&json!("integer"))
            && many.contains(&json!("string")) =>
        {
            map.remove("type");
            map.insert(INT_OR_STRING_K8S.to_owned(), Value::Bool(true));
        }
        _ => {
            map.remove("type");
            map.insert(PRESERVE.to_owned(), Value::Bool(true));
        }
    }
}

/// Merges `inner` under `outer`: `outer`'s keys (description, markers from the field) win.
fn merge_under(outer: &mut Map<String, Value>, inner: Map<String, Value>) {
    for (k, v) in inner {
        match (k.as_str(), outer.get_mut(&k)) {
            (VALIDATIONS | FIELD_VALIDATIONS, Some(Value::Array(existing))) => {
                if let Value::Array(more) = v {
                    existing.extend(more);
                }
            }
            (_, Some(_)) => {}
            (_, None) => {
                outer.insert(k, v);
            }
        }
    }
}

fn type_of(branch: &Value) -> Option<&str> {
    branch.get("type").and_then(Value::as_str)
}

/// Merges the branches of an `anyOf`/`oneOf`/`allOf` (enums, untagged enums, flattened enums)
/// into `map`, keeping only what a structural schema allows.
fn merge_branches(map: &mut Map<String, Value>, key: &str, branches: Vec<Value>) {
    let types: Vec<Option<&str>> = branches.iter().map(type_of).collect();
    let all = |t: &str| types.iter().all(|b| *b == Some(t));
    if branches.is_empty() {
        return;
    }
    if key == "allOf" || all("object") {
        merge_object_branches(map, key, branches);
    } else if types
        .iter()
        .all(|t| matches!(t, Some("integer" | "string")))
        && types.contains(&Some("integer"))
        && types.contains(&Some("string"))
    {
        map.remove("type");
        map.insert(INT_OR_STRING_K8S.to_owned(), Value::Bool(true));
    } else if let Some(Some(first)) = types.first()
        && types.iter().all(|t| t == &Some(*first))
    {
        // Same scalar type in every branch (unit variants with docs, untagged scalars).
        let enums: Option<Vec<Value>> = branches
            .iter()
            .map(|b| b.get("enum").and_then(Value::as_array).cloned())
            .collect::<Option<Vec<_>>>()
            .map(|lists| lists.into_iter().flatten().collect());
        map.insert("type".to_owned(), json!(first));
        if let Some(mut values) = enums {
            dedup(&mut values);
            map.insert("enum".to_owned(), Value::Array(values));
        }
    } else {
        // Mixed shapes (unit and data variants together): store as sent.
        map.retain(|k, _| VALUE_KEYS.contains(&k.as_str()));
        map.insert(PRESERVE.to_owned(), Value::Bool(true));
    }
}

fn dedup(values: &mut Vec<Value>) {
    let mut seen = Vec::new();
    values.retain(|v| {
        if seen.contains(v) {
            false
        } else {
            seen.push(v.clone());
            true
        }
    });
}

fn merge_object_branches(map: &mut Map<String, Value>, key: &str, branches: Vec<Value>) {
    let mut properties = match map.remove("properties") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    let mut required_sets: Vec<Vec<Value>> = Vec::new();
    let mut externally_tagged = key == "oneOf";
    let mut preserve_unknown = false;
    let mut branch_tags: Vec<Map<String, Value>> = Vec::new();
    for branch in branches {
        let Value::Object(mut branch) = branch else {
            continue;
        };
        let props = match branch.remove("properties") {
            Some(Value::Object(p)) => p,
            _ => Map::new(),
        };
        let required = match branch.remove("required") {
            Some(Value::Array(r)) => r,
            _ => Vec::new(),
        };
        if branch.get(PRESERVE) == Some(&Value::Bool(true)) {
            preserve_unknown = true;
        }
        externally_tagged &= props.len() == 1 && required.len() == 1;
        branch_tags.push(
            props
                .iter()
                .filter_map(|(name, schema)| match schema.get("enum") {
                    Some(Value::Array(values)) if values.len() == 1 && values[0].is_string() => {
                        Some((name.clone(), values[0].clone()))
                    }
                    _ => None,
                })
                .collect::<Map<String, Value>>(),
        );
        for (name, schema) in props {
            match properties.get_mut(&name) {
                None => {
                    properties.insert(name, schema);
                }
                Some(existing) => merge_property(existing, schema),
            }
        }
        required_sets.push(required);
    }
    map.insert("type".to_owned(), json!("object"));
    if !properties.is_empty() {
        map.insert("properties".to_owned(), Value::Object(properties));
    }
    if preserve_unknown {
        map.insert(PRESERVE.to_owned(), Value::Bool(true));
    }
    if key == "allOf" {
        let mut required: Vec<Value> = match map.remove("required") {
            Some(Value::Array(r)) => r,
            _ => Vec::new(),
        };
        required.extend(required_sets.into_iter().flatten());
        dedup(&mut required);
        if !required.is_empty() {
            map.insert("required".to_owned(), Value::Array(required));
        }
    } else if externally_tagged {
        let one_of = required_sets
            .into_iter()
            .map(|r| json!({ "required": r }))
            .collect();
        map.insert("oneOf".to_owned(), Value::Array(one_of));
    } else {
        // Internally tagged / untagged: what every branch requires is required.
        let mut sets = required_sets.iter().cloned();
        let first = sets.next().unwrap_or_default();
        let common: Vec<Value> = sets.fold(first, |acc, set| {
            acc.into_iter().filter(|v| set.contains(v)).collect()
        });
        let rules = tag_rules(&branch_tags, &required_sets, &common);
        if !common.is_empty() {
            map.insert("required".to_owned(), Value::Array(common));
        }
        if !rules.is_empty() {
            match map.get_mut(VALIDATIONS) {
                Some(Value::Array(existing)) => existing.extend(rules),
                _ => {
                    map.insert(VALIDATIONS.to_owned(), Value::Array(rules));
                }
            }
        }
    }
}

/// An internally tagged enum loses its per-variant `required` lists when the branches are merged;
/// one CEL rule per variant restores them: `self.type != 'Sleep' || has(self.seconds)`.
fn tag_rules(tags: &[Map<String, Value>], required: &[Vec<Value>], common: &[Value]) -> Vec<Value> {
    let Some(first) = tags.first() else {
        return Vec::new();
    };
    let Some(tag) = first
        .keys()
        .find(|name| tags.iter().all(|t| t.contains_key(*name)))
    else {
        return Vec::new();
    };
    tags.iter()
        .zip(required)
        .filter_map(|(branch, required)| {
            let value = branch.get(tag)?.as_str()?;
            let own: Vec<&str> = required
                .iter()
                .filter(|r| !common.contains(r))
                .filter_map(Value::as_str)
                .collect();
            if own.is_empty() {
                return None;
            }
            let has: Vec<String> = own
                .iter()
                .map(|f| format!("has(self.{})", cel_field(f)))
                .collect();
            let rule = format!(
                "self.{} != {} || ({})",
                cel_field(tag),
                cel_string(value),
                has.join(" && ")
            );
            let message = format!("{} is required when {tag} is {value}", own.join(", "));
            Some(json!({ "rule": rule, "message": message }))
        })
        .collect()
}

/// The pattern upstream API types give `resource.Quantity` (the macro adds it to fields of type
/// `Quantity`; this catches the quantities inside k8s-openapi types, such as
/// `ResourceRequirements`, recognised by k8s-openapi's description of the type).
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

fn quantity_pattern(map: &mut Map<String, Value>) {
    let quantity = map.get(INT_OR_STRING_K8S) == Some(&Value::Bool(true))
        && map
            .get("description")
            .and_then(Value::as_str)
            .is_some_and(|d| {
                d.starts_with("Quantity is a fixed-point representation of a number.")
            });
    if quantity && !map.contains_key("pattern") {
        map.insert("pattern".to_owned(), json!(QUANTITY_PATTERN));
    }
}

/// `exactly_one_of`, `at_most_one_of`, `at_least_one_of` as CEL rules over the presence of the
/// fields, with a message naming them: `[has(self.a), has(self.b)].filter(x, x).size() == 1`,
/// "exactly one of a, b must be set".
fn one_of_rules(map: &mut Map<String, Value>) {
    let Some(Value::Array(groups)) = map.remove(ONE_OF) else {
        return;
    };
    let rules: Vec<Value> = groups
        .iter()
        .filter_map(|group| {
            let fields: Vec<&str> = group
                .get("fields")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let (op, message) = match group.get("kind")?.as_str()? {
                "exactly" => ("== 1", "exactly one of {} must be set"),
                "at_most" => ("<= 1", "at most one of {} may be set"),
                _ => (">= 1", "at least one of {} must be set"),
            };
            let has: Vec<String> = fields
                .iter()
                .map(|f| format!("has(self.{})", cel_field(f)))
                .collect();
            Some(json!({
                "rule": format!("[{}].filter(x, x).size() {op}", has.join(", ")),
                "message": message.replace("{}", &fields.join(", ")),
            }))
        })
        .collect();
    match map.get_mut(VALIDATIONS) {
        Some(Value::Array(existing)) => existing.extend(rules),
        _ => {
            map.insert(VALIDATIONS.to_owned(), Value::Array(rules));
        }
    }
}

/// A property name as Kubernetes CEL spells it (reserved words and `_ . - /` escaped).
fn cel_field(name: &str) -> String {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    if RESERVED.contains(&name) {
        return format!("__{name}__");
    }
    name.replace("__", "__underscores__")
        .replace('.', "__dot__")
        .replace('-', "__dash__")
        .replace('/', "__slash__")
}

/// A CEL string literal.
fn cel_string(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A property present in several branches (the tag of an internally tagged enum): union of enums.
fn merge_property(existing: &mut Value, other: Value) {
    let (Some(Value::Array(a)), Some(Value::Array(b))) =
        (existing.get("enum").cloned(), other.get("enum").cloned())
    else {
        return;
    };
    let mut values = a;
    values.extend(b);
    dedup(&mut values);
    if let Value::Object(m) = existing {
        m.insert("enum".to_owned(), Value::Array(values));
    }
}

fn apply_markers(map: &mut Map<String, Value>) {
    let openapi_type = match map.remove(TYPE) {
        Some(Value::String(t)) => Some(t),
        _ => None,
    };
    if map.remove(SCHEMALESS) == Some(Value::Bool(true)) {
        map.retain(|k, _| VALUE_KEYS.contains(&k.as_str()));
        map.insert(PRESERVE.to_owned(), Value::Bool(true));
    }
    if map.remove(INT_OR_STRING) == Some(Value::Bool(true)) {
        map.retain(|k, _| VALUE_KEYS.contains(&k.as_str()) || is_value_constraint(k));
        map.remove(PRESERVE);
        map.insert(INT_OR_STRING_K8S.to_owned(), Value::Bool(true));
    }
    if let Some(Value::Array(rules)) = map.remove(FIELD_VALIDATIONS) {
        match map.get_mut(VALIDATIONS) {
            Some(Value::Array(existing)) => existing.extend(rules),
            _ => {
                map.insert(VALIDATIONS.to_owned(), Value::Array(rules));
            }
        }
    }
    if map.contains_key(INT_OR_STRING_K8S) {
        map.remove("type");
        map.remove("format");
    }
    if let Some(openapi_type) = openapi_type {
        apply_type(map, &openapi_type);
    }
}

/// A branch made of value constraints only (`{"pattern": ".."}`), as an `allOf` of the type
/// markers' leftovers is.
fn only_value_constraints(branch: &Value) -> bool {
    branch.as_object().is_some_and(|b| {
        !b.is_empty()
            && b.keys().all(|k| {
                is_value_constraint(k)
                    || matches!(
                        k.as_str(),
                        "format" | "minItems" | "maxItems" | "minProperties" | "maxProperties"
                    )
            })
    })
}

fn is_value_constraint(key: &str) -> bool {
    matches!(
        key,
        "minimum"
            | "maximum"
            | "exclusiveMinimum"
            | "exclusiveMaximum"
            | "multipleOf"
            | "minLength"
            | "maxLength"
            | "pattern"
            | "enum"
    )
}

/// Kubernetes knows `int32`/`int64`/`float`/`double`; schemars emits Rust widths.
fn fix_format(map: &mut Map<String, Value>) {
    let Some(format) = map.get("format").and_then(Value::as_str) else {
        return;
    };
    let mapped = match format {
        "int8" | "int16" | "uint8" | "uint16" => "int32",
        "uint32" | "uint64" | "uint" | "int" | "uint128" | "int128" => "int64",
        _ => return,
    };
    map.insert("format".to_owned(), json!(mapped));
}

fn infer_type(map: &mut Map<String, Value>) {
    if map.contains_key("type")
        || map.get(PRESERVE) == Some(&Value::Bool(true))
        || map.get(INT_OR_STRING_K8S) == Some(&Value::Bool(true))
    {
        return;
    }
    if map.contains_key("properties") || map.contains_key("additionalProperties") {
        map.insert("type".to_owned(), json!("object"));
    } else if map.contains_key("items") {
        map.insert("type".to_owned(), json!("array"));
    } else {
        map.insert(PRESERVE.to_owned(), Value::Bool(true));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opaque_objects_and_embedded_resources_should_keep_unknown_fields() {
        let raw =
            json!({"description": "RawExtension is used to hold extensions", "type": "object"});
        assert_eq!(structural_schema(raw)[PRESERVE], true);
        let empty_struct = json!({"type": "object", "properties": {}});
        assert!(structural_schema(empty_struct).get(PRESERVE).is_none());
        let embedded_value = json!({"x-kubernetes-embedded-resource": true});
        let s = structural_schema(embedded_value);
        assert_eq!((&s["type"], &s[PRESERVE]), (&json!("object"), &json!(true)));
        let typed = json!({"x-kubernetes-embedded-resource": true, "type": "object",
            "properties": {"kind": {"type": "string"}, "metadata": true}});
        let s = structural_schema(typed);
        assert!(s.get(PRESERVE).is_none(), "{s}");
        assert_eq!(s["properties"]["metadata"]["type"], "object", "{s}");
    }

    #[test]
    fn only_the_default_marker_should_give_a_schema_default() {
        let s = structural_schema(json!({"type": "object", "properties": {
            "serde": {"type": "integer", "default": 0},
            "marked": {"type": "integer", "default": 0, DEFAULT: 3},
        }}));
        assert!(s["properties"]["serde"].get("default").is_none(), "{s}");
        assert_eq!(s["properties"]["marked"]["default"], 3, "{s}");
    }

    #[test]
    fn structural_should_drop_null_from_option_types() {
        let s = structural_schema(json!({"type": ["string", "null"], "description": "x"}));
        assert_eq!(s, json!({"type": "string", "description": "x"}));
    }

    #[test]
    fn structural_should_unwrap_any_of_with_null() {
        let s = structural_schema(json!({
            "description": "outer",
            "anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "description": "inner"}, {"type": "null"}]
        }));
        assert_eq!(
            s,
            json!({"type": "object", "description": "outer", "properties": {"a": {"type": "string"}}})
        );
    }

    #[test]
    fn structural_should_turn_any_value_into_preserve_unknown_fields() {
        assert_eq!(structural_schema(json!(true)), json!({PRESERVE: true}));
        let s = structural_schema(json!({"type": "object", "additionalProperties": true}));
        assert_eq!(s, json!({"type": "object", PRESERVE: true}));
    }

    #[test]
    fn structural_should_merge_unit_variant_branches_into_enum() {
        let s = structural_schema(json!({
            "oneOf": [
                {"type": "string", "const": "A", "description": "a"},
                {"type": "string", "enum": ["B", "C"]}
            ]
        }));
        assert_eq!(s, json!({"type": "string", "enum": ["A", "B", "C"]}));
    }

    #[test]
    fn structural_should_hoist_externally_tagged_variants() {
        let s = structural_schema(json!({
            "oneOf": [
                {"type": "object", "properties": {"A": {"type": "integer"}}, "required": ["A"], "additionalProperties": false},
                {"type": "object", "properties": {"B": {"type": "string"}}, "required": ["B"], "additionalProperties": false}
            ]
        }));
        assert_eq!(
            s,
            json!({
                "type": "object",
                "properties": {"A": {"type": "integer"}, "B": {"type": "string"}},
                "oneOf": [{"required": ["A"]}, {"required": ["B"]}]
            })
        );
    }

    #[test]
    fn structural_should_merge_internally_tagged_variants() {
        let s = structural_schema(json!({
            "oneOf": [
                {"type": "object", "properties": {"kind": {"type": "string", "const": "a"}, "x": {"type": "integer"}}, "required": ["kind", "x"]},
                {"type": "object", "properties": {"kind": {"type": "string", "const": "b"}}, "required": ["kind"]}
            ]
        }));
        assert_eq!(
            s,
            json!({
                "type": "object",
                "properties": {"kind": {"type": "string", "enum": ["a", "b"]}, "x": {"type": "integer"}},
                "required": ["kind"],
                VALIDATIONS: [{"rule": "self.kind != 'a' || (has(self.x))", "message": "x is required when kind is a"}]
            })
        );
    }

    #[test]
    fn structural_should_preserve_mixed_enums() {
        let s = structural_schema(json!({
            "description": "d",
            "oneOf": [
                {"type": "string", "enum": ["A"]},
                {"type": "object", "properties": {"B": {"type": "string"}}, "required": ["B"]}
            ]
        }));
        assert_eq!(s, json!({"description": "d", PRESERVE: true}));
    }

    #[test]
    fn structural_should_apply_int_or_string_marker() {
        let s = structural_schema(
            json!({"type": "string", "description": "port", INT_OR_STRING: true}),
        );
        assert_eq!(s, json!({"description": "port", INT_OR_STRING_K8S: true}));
        let untagged = structural_schema(
            json!({"anyOf": [{"type": "integer", "format": "int32"}, {"type": "string"}]}),
        );
        assert_eq!(untagged, json!({INT_OR_STRING_K8S: true}));
    }

    #[test]
    fn structural_should_append_field_rules_to_type_rules() {
        let s = structural_schema(json!({
            "type": "object",
            "properties": {},
            VALIDATIONS: [{"rule": "a"}],
            FIELD_VALIDATIONS: [{"rule": "b"}]
        }));
        assert_eq!(
            s,
            json!({"type": "object", "properties": {}, VALIDATIONS: [{"rule": "a"}, {"rule": "b"}]})
        );
    }

    #[test]
    fn structural_should_move_item_markers_into_items() {
        let s = structural_schema(json!({
            "type": ["array", "null"],
            "items": {"type": "string"},
            ITEMS: {"maxLength": 3}
        }));
        assert_eq!(
            s,
            json!({"type": "array", "items": {"type": "string", "maxLength": 3}})
        );
    }

    #[test]
    fn structural_should_turn_unique_items_into_set_lists() {
        let set = structural_schema(
            json!({"type": "array", "uniqueItems": true, "items": {"type": "string"}}),
        );
        assert_eq!(
            set,
            json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"})
        );
        let objects = structural_schema(
            json!({"type": "array", "uniqueItems": true, "items": {"type": "object", "properties": {}}}),
        );
        assert_eq!(
            objects,
            json!({"type": "array", "items": {"type": "object", "properties": {}}})
        );
    }

    #[test]
    fn structural_should_remove_refs_and_null_defaults() {
        let s =
            structural_schema(json!({"$ref": "#/$defs/Node", "default": null, "description": "n"}));
        assert_eq!(s, json!({"description": "n", PRESERVE: true}));
    }

    #[test]
    fn structural_should_map_rust_integer_formats() {
        let s = structural_schema(json!({"type": "integer", "format": "uint8", "minimum": 0}));
        assert_eq!(
            s,
            json!({"type": "integer", "format": "int32", "minimum": 0})
        );
    }

    #[test]
    fn markers_of_fields_of_optional_structs_should_survive_the_rewrite() {
        // Regression: the inner schema of `Option<Struct>` was rewritten twice, which dropped
        // the `default` markers of its fields.
        let s = structural_schema(json!({"anyOf": [
            {"type": "object", "properties": {"a": {"type": "integer", DEFAULT: 3}}},
            {"type": "null"}
        ]}));
        assert_eq!(s["properties"]["a"]["default"], 3, "{s}");
    }

    #[test]
    fn no_format_should_drop_the_format_the_type_implies() {
        assert_eq!(
            structural_schema(
                json!({"type": "integer", "format": "int64", NO_FORMAT: true, "minimum": 0})
            ),
            json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(
            structural_schema(
                json!({"type": ["number", "null"], "format": "double", NO_FORMAT: true})
            ),
            json!({"type": "number"})
        );
        assert_eq!(
            structural_schema(
                json!({"type": "array", "items": {"type": "integer", "format": "uint32"},
                ITEMS: {NO_FORMAT: true}})
            ),
            json!({"type": "array", "items": {"type": "integer"}})
        );
        assert_eq!(
            structural_schema(json!({"type": "integer", "format": "int32"})),
            json!({"type": "integer", "format": "int32"}),
            "kept without the marker"
        );
    }

    #[test]
    fn type_marker_should_replace_the_type_and_drop_what_does_not_fit() {
        let flag = structural_schema(json!({"type": ["boolean", "null"], TYPE: "string"}));
        assert_eq!(flag, json!({"type": "string"}));
        let any = structural_schema(json!({"description": "d", SCHEMALESS: true, TYPE: "string"}));
        assert_eq!(any, json!({"description": "d", "type": "string"}));
        let opaque = structural_schema(json!({TYPE: "object"}));
        assert_eq!(opaque, json!({"type": "object", PRESERVE: true}));
        let number = structural_schema(
            json!({"type": "integer", "format": "uint32", "minimum": 0, "enum": [1, "a"], TYPE: "integer"}),
        );
        assert_eq!(
            number,
            json!({"type": "integer", "format": "int64", "minimum": 0, "enum": [1]})
        );
        let list = structural_schema(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], TYPE: "array"}),
        );
        assert_eq!(list, json!({"type": "array"}));
    }

    #[test]
    fn items_and_values_markers_should_be_interpreted_in_the_child() {
        let s = structural_schema(json!({
            "type": "object",
            "additionalProperties": {"type": "string"},
            VALUES: {"format": "byte", "maxLength": 8}
        }));
        assert_eq!(
            s["additionalProperties"],
            json!({"type": "string", "format": "byte", "maxLength": 8})
        );
        let s = structural_schema(
            json!({"type": "array", "items": true, ITEMS: {INT_OR_STRING: true}}),
        );
        assert_eq!(s["items"], json!({INT_OR_STRING_K8S: true}));
        let s = structural_schema(json!({
            "type": "array",
            "items": {"type": "object", "additionalProperties": {"type": "string"}},
            ITEMS: {"x-kubernetes-map-type": "atomic"}
        }));
        assert_eq!(s["items"]["x-kubernetes-map-type"], "atomic");
    }

    #[test]
    fn required_markers_should_override_what_serde_implies() {
        let s = structural_schema(json!({
            "type": "object",
            "required": ["a", "spec"],
            "properties": {
                "a": {"type": "string", REQUIRED: false},
                "b": {"anyOf": [{"type": "string"}, {"type": "null"}], REQUIRED: true},
                "spec": {"type": "object", "properties": {}, REQUIRED: false},
            }
        }));
        assert_eq!(s["required"], json!(["b"]), "{s}");
        assert!(s["properties"]["b"].get(REQUIRED).is_none(), "{s}");
    }

    #[test]
    fn titles_and_examples_should_come_only_from_markers() {
        let s = structural_schema(json!({
            "title": "ThingSpec",
            "type": "object",
            "properties": {"a": {"type": "string", "title": "A", TITLE: "Name", EXAMPLE: "x"}}
        }));
        assert!(s.get("title").is_none(), "{s}");
        assert_eq!(
            s["properties"]["a"],
            json!({"type": "string", "title": "Name", "example": "x"})
        );
    }

    #[test]
    fn type_markers_should_merge_under_the_fields_with_the_tighter_bound() {
        let label = json!({
            "minLength": 2, "maxLength": 10, "pattern": "^[a-z]+$",
            FIELD_VALIDATIONS: [{"rule": "self != 'x'"}],
        });
        let port = json!({"minimum": 0, "exclusiveMinimum": true, "maximum": 65535});
        let s = structural_schema(json!({
            "type": "object",
            "properties": {
                // Only the type's markers.
                "plain": {"type": "string", "x-kubeforge-type-markers:Label": label},
                // Tighter and looser field bounds, a second pattern, a rule each.
                "field": {
                    "type": "string", "minLength": 1, "maxLength": 4, "pattern": "^[a-c]+$",
                    FIELD_VALIDATIONS: [{"rule": "self != 'y'"}],
                    "x-kubeforge-type-markers:Label": label,
                },
                // The same lower bound: the exclusive flag is kept; another upper bound: both.
                "port": {
                    "anyOf": [{"type": "integer", "format": "int32", "minimum": 0, "maximum": 100,
                        "x-kubeforge-type-markers:Port": port}, {"type": "null"}],
                },
            }
        }));
        let p = &s["properties"];
        assert_eq!(
            p["plain"],
            json!({"type": "string", "minLength": 2, "maxLength": 10, "pattern": "^[a-z]+$",
                "x-kubernetes-validations": [{"rule": "self != 'x'"}]}),
            "{s}"
        );
        assert_eq!(
            p["field"],
            json!({"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-c]+$",
                "x-kubernetes-validations": [{"rule": "self != 'x'"}, {"rule": "self != 'y'"}],
                "allOf": [{"pattern": "^[a-z]+$"}]}),
            "{s}"
        );
        assert_eq!(
            p["port"],
            json!({"type": "integer", "format": "int32", "minimum": 0, "exclusiveMinimum": true,
                "maximum": 100, "allOf": [{"maximum": 65535}]}),
            "{s}"
        );
        // A second pass (never made today) keeps the `allOf` of value constraints as it is.
        assert_eq!(structural_schema(p["field"].clone()), p["field"]);
    }

    #[test]
    fn one_of_groups_should_become_cel_rules_with_escaped_names() {
        let s = structural_schema(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "x-y": {"type": "string"}},
            VALIDATIONS: [{"rule": "true"}],
            ONE_OF: [
                {"kind": "exactly", "fields": ["a", "x-y"]},
                {"kind": "at_least", "fields": ["in", "b"]},
            ],
        }));
        assert_eq!(
            s[VALIDATIONS],
            json!([
                {"rule": "true"},
                {"rule": "[has(self.a), has(self.x__dash__y)].filter(x, x).size() == 1",
                 "message": "exactly one of a, x-y must be set"},
                {"rule": "[has(self.__in__), has(self.b)].filter(x, x).size() >= 1",
                 "message": "at least one of in, b must be set"},
            ])
        );
    }
}
