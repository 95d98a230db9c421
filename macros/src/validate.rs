//! Checks: rules that span several keys or need knowledge of Kubernetes (names, column types,
//! regexes, marker vs. field type), on the typed model. One function per check; each error
//! points at the offending token.

use proc_macro2::Span;
use syn::LitStr;

use crate::errors::Errors;
use crate::fields::{Field, Node, SerdeField, Shape};
use crate::markers::Markers;
use crate::model::{
    ColumnStep, JsonPath, Kind, OneOf, Operand, PrintColumn, Rule, Scale, parse_column_path,
    parse_path,
};

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && !s.ends_with('-')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

const COLUMN_TYPES: &[&str] = &["integer", "number", "string", "boolean", "date"];
const COLUMN_FORMATS: &[&str] = &[
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "date",
    "date-time",
    "password",
];
const RULE_REASONS: &[&str] = &[
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

/// A simple JSONPath, as Kubernetes accepts for subresources and selectable fields: `.a.b[0].c`
/// (no filters; printer columns take more: `check_column_path`).
pub fn check_json_path(lit: &LitStr, errors: &mut Errors) -> bool {
    let path = lit.value();
    let ok = parse_path(&path).is_some();
    if !ok {
        errors.spanned(
            lit,
            format!("invalid JSONPath `{path}`: expected a simple path like `.spec.replicas`"),
        );
    }
    ok
}

/// A printer column's JSONPath: what the apiserver's table printer parses (filters, `[*]`,
/// slices, `['key']`, ...). What kubeforge cannot resolve at compile time (`..`, `.*`, unions,
/// filters on more than fields) needs `unchecked`. `None` when it is refused (reported at the
/// literal).
fn check_column_path(path: &JsonPath, errors: &mut Errors) -> Option<Vec<ColumnStep>> {
    let value = path.lit.value();
    let steps = match parse_column_path(&value) {
        Ok(steps) => steps,
        Err(message) => {
            errors.spanned(&path.lit, format!("invalid JSONPath `{value}`: {message}"));
            return None;
        }
    };
    let opaque = steps.iter().find_map(|s| match s {
        ColumnStep::Opaque(what) => Some(what),
        _ => None,
    });
    if let Some(what) = opaque
        && !path.unchecked
    {
        errors.spanned(
            &path.lit,
            format!("{what} in `{value}` cannot be checked at compile time; the apiserver accepts it: add `unchecked` to the printcolumn"),
        );
        return None;
    }
    for step in &steps {
        if let ColumnStep::Filter(f) = step
            && let Some((op, Operand::Bool)) = &f.compare
            && op.orders()
        {
            errors.spanned(
                &path.lit,
                format!("the filter `{}` orders booleans, which the apiserver cannot do; compare them with `==` or `!=`", f.raw),
            );
            return None;
        }
    }
    Some(steps)
}

/// The first step of a path must be `spec`, `status` (when the kind has a status) or `metadata`.
fn check_root(lit: &LitStr, kind: &Kind, errors: &mut Errors) {
    let Some(steps) = parse_path(&lit.value()) else {
        return;
    };
    check_root_name(steps.first().map(|s| s.name.as_str()), lit, kind, errors);
}

fn check_root_name(first: Option<&str>, lit: &LitStr, kind: &Kind, errors: &mut Errors) {
    match first {
        Some("spec" | "metadata") => {}
        Some("status") if kind.status.is_some() => {}
        Some("status") => errors.spanned(
            lit,
            "this path reads `.status`, but the kind has no status: add `status = YourStatus`",
        ),
        _ => errors.spanned(
            lit,
            "a JSONPath of a kind starts with `.spec`, `.status` or `.metadata`",
        ),
    }
}

/// The CEL rules of a kind, a struct or a field.
pub fn rules(rules: &[Rule], errors: &mut Errors) {
    for rule in rules {
        if rule.cel.value().trim().is_empty() {
            errors.spanned(&rule.cel, "the CEL expression is empty");
        } else if let Err(message) = crate::cel::check(&rule.cel.value()) {
            errors.spanned(&rule.cel, format!("CEL rule does not parse: {message}"));
        }
        if let Some(reason) = &rule.reason
            && !RULE_REASONS.contains(&reason.value().as_str())
        {
            errors.spanned(
                reason,
                format!(
                    "unknown reason; expected one of: {}",
                    RULE_REASONS.join(", ")
                ),
            );
        }
        if let Some(path) = &rule.field_path {
            check_json_path(path, errors);
        }
        if let Some(expr) = &rule.message_expression
            && let Err(message) = crate::cel::check(&expr.value())
        {
            errors.spanned(
                expr,
                format!("CEL message expression does not parse: {message}"),
            );
        }
    }
    crate::cel::check_untyped(rules, errors);
}

/// The `admission_rule(..)`s and `admission_policy(..)` of a kind whose spec struct `spec` has
/// `fields`: the rules parse and read only what exists (see `cel::check_admission`).
pub fn admission(kind: &Kind, fields: &[Field], spec: &syn::Ident, errors: &mut Errors) {
    for rule in &kind.admission_rules {
        if rule.cel.value().trim().is_empty() {
            errors.spanned(&rule.cel, "the CEL expression is empty");
        } else if let Err(message) = crate::cel::check(&rule.cel.value()) {
            errors.spanned(&rule.cel, format!("CEL rule does not parse: {message}"));
        }
        if let Some(expr) = &rule.message_expression
            && let Err(message) = crate::cel::check(&expr.value())
        {
            errors.spanned(
                expr,
                format!("CEL message expression does not parse: {message}"),
            );
        }
    }
    let policy = &kind.admission_policy;
    if let Some(key) = policy.key
        && kind.admission_rules.is_empty()
    {
        errors.at(
            key,
            "`admission_policy(..)` sets the policy of the kind's `admission_rule(..)`s, but it has none",
        );
    }
    if let Some((lit, _)) = &policy.namespace_selector
        && kind.scope == crate::model::Scope::Cluster
    {
        errors.spanned(
            lit,
            "a cluster-scoped kind has no namespace: leave `namespace_selector` out",
        );
    }
    crate::cel::check_admission(
        &kind.admission_rules,
        &kind.kind.value(),
        fields,
        spec,
        errors,
    );
}

/// The kind options.
pub fn kind(kind: &Kind, errors: &mut Errors) {
    names(kind, errors);
    printcolumns(kind, errors);
    if let Some(scale) = &kind.scale {
        self::scale(scale, kind, errors);
    }
    for p in &kind.selectable_fields {
        if check_json_path(&p.lit, errors) {
            check_root(&p.lit, kind, errors);
        }
    }
    rules(&kind.rules, errors);
    rules(&kind.root_rules, errors);
}

/// The `root_rule(..)`s of a kind whose spec struct `spec` has `fields`, typed against the whole
/// object (see `cel::check_root`); their syntax, reasons and field paths are checked by [`kind`].
pub fn root_rules(kind: &Kind, fields: &[Field], spec: &syn::Ident, errors: &mut Errors) {
    crate::cel::check_root(
        &kind.root_rules,
        &kind.kind.value(),
        (spec, fields),
        kind.status.as_ref(),
        errors,
    );
}

/// Group, version, kind, short names and categories.
fn names(kind: &Kind, errors: &mut Errors) {
    if !kind.group.value().contains('.') || !is_dns_subdomain(&kind.group.value()) {
        errors.spanned(
            &kind.group,
            "the group must be a lower-case DNS subdomain with at least one dot, like `apps.example.com`",
        );
    }
    if !is_dns_label(&kind.version.value()) {
        errors.spanned(
            &kind.version,
            "the version must be a lower-case DNS label, like `v1` or `v1beta1`",
        );
    }
    let k = kind.kind.value();
    if !k.starts_with(|c: char| c.is_ascii_uppercase())
        || !k.chars().all(|c| c.is_ascii_alphanumeric())
    {
        errors.spanned(
            &kind.kind,
            "the kind must be UpperCamelCase ASCII, like `WebApp`",
        );
    }
    for name in kind.shortnames.iter().chain(&kind.categories) {
        if !is_dns_label(&name.value()) {
            errors.spanned(name, "must be a lower-case DNS label");
        }
    }
}

/// The generated type is named after the kind: the spec struct needs another name.
pub fn root_name(kind: &Kind, spec: &syn::Ident, errors: &mut Errors) {
    if *spec == kind.kind.value() {
        errors.spanned(
            &kind.kind,
            format!("the kind is the name of the generated type; rename the spec struct (e.g. `{spec}Spec`)"),
        );
    }
}

fn printcolumns(kind: &Kind, errors: &mut Errors) {
    let mut names: Vec<String> = Vec::new();
    for col in &kind.printcolumns {
        let name = col.name.value();
        if names.contains(&name) {
            errors.spanned(&col.name, format!("duplicate printer column `{name}`"));
        }
        names.push(name);
        if let Some(steps) = check_column_path(&col.json_path, errors) {
            // A path that starts with `..` (unchecked) reads from the whole object.
            match steps.first() {
                Some(ColumnStep::Field(first)) => {
                    check_root_name(Some(first), &col.json_path.lit, kind, errors);
                }
                Some(ColumnStep::Opaque(_)) => {}
                _ => check_root_name(None, &col.json_path.lit, kind, errors),
            }
        }
        column_type_and_format(col, errors);
    }
}

fn column_type_and_format(col: &PrintColumn, errors: &mut Errors) {
    if !COLUMN_TYPES.contains(&col.type_.value().as_str()) {
        errors.spanned(
            &col.type_,
            format!(
                "unknown column type; expected one of: {}",
                COLUMN_TYPES.join(", ")
            ),
        );
    }
    if let Some(f) = &col.format
        && !COLUMN_FORMATS.contains(&f.value().as_str())
    {
        errors.spanned(
            f,
            format!(
                "unknown column format; expected one of: {}",
                COLUMN_FORMATS.join(", ")
            ),
        );
    }
}

fn scale(scale: &Scale, kind: &Kind, errors: &mut Errors) {
    let prefixed = |path: &JsonPath, prefixes: &[&str]| {
        let value = path.lit.value();
        prefixes.iter().any(|p| value.starts_with(p))
    };
    for (path, prefix, message) in [
        (
            &scale.spec,
            ".spec.",
            "the spec replicas path must start with `.spec.`",
        ),
        (
            &scale.status,
            ".status.",
            "the status replicas path must start with `.status.`",
        ),
    ] {
        if check_json_path(&path.lit, errors) && !prefixed(path, &[prefix]) {
            errors.spanned(&path.lit, message);
        }
    }
    if let Some(p) = &scale.selector
        && check_json_path(&p.lit, errors)
        && !prefixed(p, &[".status.", ".spec."])
    {
        errors.spanned(
            &p.lit,
            "the label selector path must start with `.spec.` or `.status.`",
        );
    }
    if kind.status.is_none() {
        errors.at(
            scale.span,
            "the scale subresource needs a status: add `status = YourStatus`",
        );
    }
}

fn wrong_shape(errors: &mut Errors, key: Span, marker: &str, applies: &str, field: &Field) {
    errors.at(
        key,
        format!("`{marker}` applies to {applies}, but {}", field.described()),
    );
}

/// [`wrong_shape`] with a hint at the marker to use instead.
fn wrong_shape_hint(
    errors: &mut Errors,
    key: Span,
    (marker, applies): (&str, &str),
    field: &Field,
    hint: Option<&str>,
) {
    errors.at(
        key,
        format!(
            "`{marker}` applies to {applies}, but {}{}",
            field.described(),
            hint.unwrap_or_default()
        ),
    );
}

/// Which kinds of markers a field's shape accepts (`Other` accepts all: it is not checked).
struct Accepts {
    numeric: bool,
    string: bool,
    array: bool,
    map: bool,
}

impl Accepts {
    fn of(shape: Shape) -> Self {
        Accepts {
            numeric: matches!(
                shape,
                Shape::Integer | Shape::Number | Shape::IntOrString | Shape::Other
            ),
            string: matches!(shape, Shape::String | Shape::IntOrString | Shape::Other),
            array: matches!(shape, Shape::Array | Shape::Other),
            map: matches!(shape, Shape::Map | Shape::Other),
        }
    }
}

/// Marker rules of one field.
pub fn field(field: &Field, errors: &mut Errors) {
    let m = &field.markers;
    let accepts = Accepts::of(field.shape);
    if field.has_markers && field.serde.flatten {
        errors.spanned(
            &field.ident,
            "markers on a `#[serde(flatten)]` field have no schema node to attach to; put them on the fields of the flattened type",
        );
    }
    numbers(field, accepts.numeric, errors);
    sizes(field, &accepts, errors);
    unique_items(field, accepts.array, errors);
    pattern(field, accepts.string, errors);
    list_type(field, accepts.array, errors);
    map_type(field, accepts.map, errors);
    if let (Some(_), Some(no)) = (&m.format, &m.no_format)
        && no.value
    {
        errors.at(no.key, "`no_format` and `format` exclude each other");
    }
    if let (Some(ios), Some(s)) = (&m.int_or_string, &m.schemaless)
        && ios.value
        && s.value
    {
        errors.at(s.key, "`schemaless` and `int_or_string` exclude each other");
    }
    defaults_and_enum(field, errors);
    items(field, accepts.array, errors);
    values(field, accepts.map, errors);
    embedded_resource(field, errors);
    nullable(field, errors);
    preserve_unknown_fields(field, errors);
    openapi_type(field, errors);
    presence(field, errors);
    external_docs(field, errors);
    byte_string(field, errors);
    rules(&m.rules, errors);
    crate::cel::check_field(field, errors);
}

/// `type = ".."`: one of the OpenAPI types, not next to markers that decide the type themselves.
fn openapi_type(field: &Field, errors: &mut Errors) {
    let m = &field.markers;
    let Some(t) = &m.type_ else { return };
    let value = t.value();
    if !crate::markers::TYPES.contains(&value.as_str()) {
        errors.spanned(
            t,
            format!(
                "unknown type; expected one of: {}",
                crate::markers::TYPES.join(", ")
            ),
        );
    }
    if Markers::is_set(&m.int_or_string) {
        errors.spanned(
            t,
            "`type` and `int_or_string` exclude each other: an int-or-string node has no type",
        );
    }
    if Markers::is_set(&m.embedded_resource) && value != "object" {
        errors.spanned(
            t,
            "an `embedded_resource` is an object: use `type = \"object\"` or leave `type` out",
        );
    }
}

/// `required` / `optional`: what the apiserver requires, against what serde can read.
fn presence(field: &Field, errors: &mut Errors) {
    let m = &field.markers;
    let (Some(required), Some(optional)) = (&m.required, &m.optional) else {
        if let Some(optional) = m.optional.as_ref().filter(|o| o.value)
            && !field.is_option
            && !field.serde.default
        {
            errors.at(
                optional.key,
                format!(
                    "`optional` lets the apiserver store objects without `{}`, which serde cannot read into this type: add `#[serde(default)]` or make it an `Option`",
                    field.json_name
                ),
            );
        }
        return;
    };
    if required.value && optional.value {
        errors.at(optional.key, "`required` and `optional` exclude each other");
    }
}

/// `external_docs(url = "..")`: the URL cannot be empty.
fn external_docs(field: &Field, errors: &mut Errors) {
    if let Some(docs) = &field.markers.external_docs
        && let Some(url) = &docs.value.url
        && url.value().trim().is_empty()
    {
        errors.spanned(url, "the URL of `external_docs` is empty");
    }
}

/// k8s-openapi's `ByteString` has no JSON schema: point at the string with `format = "byte"`.
fn byte_string(field: &Field, errors: &mut Errors) {
    if field.node != Node::Field {
        // Reported once, at the field's type (which holds the element's).
        return;
    }
    let Some(ty) = crate::fields::byte_string(&field.ty) else {
        return;
    };
    let fix = match field.shape {
        Shape::Array => "`Vec<String>` with `#[validate(items(format = \"byte\"))]`",
        Shape::Map => "a map of `String` with `#[validate(values(format = \"byte\"))]`",
        _ => "`String` with `#[validate(format = \"byte\")]`",
    };
    errors.spanned(
        ty,
        format!("k8s-openapi's `ByteString` has no JSON schema; use {fix} (base64 text, as the apiserver stores it)"),
    );
}

/// `embedded_resource` needs an object: a scalar or a list can never hold one.
fn embedded_resource(field: &Field, errors: &mut Errors) {
    let Some(flag) = &field.markers.embedded_resource else {
        return;
    };
    if !flag.value {
        return;
    }
    if matches!(
        field.shape,
        Shape::Integer
            | Shape::Number
            | Shape::String
            | Shape::Bool
            | Shape::Array
            | Shape::IntOrString
    ) {
        errors.at(
            flag.key,
            format!(
                "`embedded_resource` needs an object, but {}; use `k8s_openapi::apimachinery::pkg::runtime::RawExtension`, `serde_json::Value`, a `serde_json::Map` or a struct with `apiVersion`, `kind` and `metadata`",
                field.described()
            ),
        );
    }
}

/// `nullable`: the apiserver then stores `null`, which serde reads only into an `Option` (or a
/// type it cannot see, such as `serde_json::Value`).
fn nullable(field: &Field, errors: &mut Errors) {
    let Some(flag) = field.markers.nullable.as_ref().filter(|f| f.value) else {
        return;
    };
    if field.is_option || matches!(field.shape, Shape::Other) {
        return;
    }
    let what = match field.node {
        Node::Field => "the field's type",
        Node::Items => "the element type",
        Node::Values => "the value type",
    };
    errors.at(
        flag.key,
        format!(
            "`nullable` lets the apiserver store `null`, which serde reads only into an `Option`, but {}: make {what} an `Option<..>`",
            field.described()
        ),
    );
}

/// `preserve_unknown_fields` keeps the fields an object's schema does not list: a scalar or a
/// list has none.
fn preserve_unknown_fields(field: &Field, errors: &mut Errors) {
    let Some(flag) = field.markers.preserve_unknown_fields.as_ref() else {
        return;
    };
    if matches!(field.shape, Shape::Map | Shape::Other) {
        return;
    }
    wrong_shape(
        errors,
        flag.key,
        "preserve_unknown_fields",
        "objects (a struct, a map, `serde_json::Value`)",
        field,
    );
}

/// `minimum`, `maximum`, `multiple_of` and the exclusive flags.
fn numbers(field: &Field, numeric: bool, errors: &mut Errors) {
    let m = &field.markers;
    for (n, name) in [
        (&m.minimum, "minimum"),
        (&m.maximum, "maximum"),
        (&m.multiple_of, "multiple_of"),
    ] {
        let Some(n) = n else { continue };
        if !numeric {
            wrong_shape(errors, n.span, name, "integer and number fields", field);
        } else if field.shape == Shape::Integer && !n.is_integer {
            errors.at(
                n.span,
                format!(
                    "`{name}` of integer field `{}` must be an integer",
                    field.ident
                ),
            );
        }
    }
    if let Some(multiple) = &m.multiple_of
        && multiple.value.as_f64().is_some_and(|v| v <= 0.0)
    {
        errors.at(multiple.span, "`multiple_of` must be greater than 0");
    }
    for (flag, name, bound) in [
        (&m.exclusive_minimum, "exclusive_minimum", &m.minimum),
        (&m.exclusive_maximum, "exclusive_maximum", &m.maximum),
    ] {
        if let Some(flag) = flag
            && flag.value
            && bound.is_none()
        {
            let bound = name.trim_start_matches("exclusive_");
            errors.at(flag.key, format!("`{name}` needs `{bound}` to be set"));
        }
    }
    if let (Some(min), Some(max)) = (&m.minimum, &m.maximum)
        && min.value.as_f64() > max.value.as_f64()
    {
        errors.at(max.span, "`maximum` is smaller than `minimum`");
    }
}

/// Length, item and property counts: on the right shape, the minimum not above the maximum.
fn sizes(field: &Field, accepts: &Accepts, errors: &mut Errors) {
    let m = &field.markers;
    let bounds = [
        (
            &m.min_length,
            &m.max_length,
            "length",
            accepts.string,
            "string fields",
        ),
        (
            &m.min_items,
            &m.max_items,
            "items",
            accepts.array,
            "list fields",
        ),
        (
            &m.min_properties,
            &m.max_properties,
            "properties",
            accepts.map,
            "map and object fields",
        ),
    ];
    for (lo, hi, noun, fits, applies) in bounds {
        for (k, bound) in [(lo, "min"), (hi, "max")] {
            if let Some(k) = k
                && !fits
            {
                wrong_shape(errors, k.key, &format!("{bound}_{noun}"), applies, field);
            }
        }
    }
    for (lo, hi, noun, _, _) in bounds {
        if let (Some(lo), Some(hi)) = (lo, hi)
            && lo.value > hi.value
        {
            errors.at(hi.key, format!("`max_{noun}` is smaller than its minimum"));
        }
    }
}

fn unique_items(field: &Field, array: bool, errors: &mut Errors) {
    let m = &field.markers;
    let Some(u) = &m.unique_items else { return };
    if !array {
        wrong_shape(errors, u.key, "unique_items", "list fields", field);
    }
    if let Some(lt) = &m.list_type
        && lt.value() != "set"
    {
        errors.at(
            u.key,
            "`unique_items` is `list_type = \"set\"` in Kubernetes; it conflicts with this list type",
        );
    }
}

fn pattern(field: &Field, string: bool, errors: &mut Errors) {
    let Some(p) = &field.markers.pattern else {
        return;
    };
    if !string {
        wrong_shape(errors, p.span(), "pattern", "string fields", field);
    }
    if let Err(e) = regex_syntax::Parser::new().parse(&p.value()) {
        let detail = e.to_string();
        let last = detail.lines().last().unwrap_or_default().trim().to_owned();
        errors.spanned(p, format!("invalid regular expression: {last}"));
    }
}

fn list_type(field: &Field, array: bool, errors: &mut Errors) {
    let m = &field.markers;
    let keys_need_map = |errors: &mut Errors| {
        if let Some(k) = m.list_map_keys.first() {
            errors.spanned(k, "`list_map_keys` needs `list_type = \"map\"`");
        }
    };
    let Some(lt) = &m.list_type else {
        keys_need_map(errors);
        return;
    };
    if !array {
        wrong_shape_hint(
            errors,
            lt.span(),
            ("list_type", "list fields"),
            field,
            (field.shape == Shape::Map).then_some("; for a map use `map_type`"),
        );
    }
    match lt.value().as_str() {
        "atomic" | "set" => keys_need_map(errors),
        "map" => {
            if m.list_map_keys.is_empty() {
                errors.spanned(
                    lt,
                    "`list_type = \"map\"` needs `list_map_keys = [\"...\"]`",
                );
            }
        }
        _ => errors.spanned(lt, "unknown list type; expected one of: atomic, set, map"),
    }
}

fn map_type(field: &Field, map: bool, errors: &mut Errors) {
    let Some(mt) = &field.markers.map_type else {
        return;
    };
    if !map {
        let applies = "map and object fields";
        wrong_shape_hint(
            errors,
            mt.span(),
            ("map_type", applies),
            field,
            (field.shape == Shape::Array).then_some("; for a list use `list_type`"),
        );
    }
    if !matches!(mt.value().as_str(), "atomic" | "granular") {
        errors.spanned(mt, "unknown map type; expected one of: atomic, granular");
    }
}

/// `default` and `enum` values must fit the field's type; a `null` default needs `nullable`.
fn defaults_and_enum(field: &Field, errors: &mut Errors) {
    let m = &field.markers;
    let shape = field.shape;
    let describe = |kind: &str, what: &str| format!("{what} is {kind}, but {}", field.described());
    if let Some(d) = &m.default
        && let Some(kind) = json_mismatch(&d.value, shape)
    {
        errors.at(d.key, describe(kind, "the default"));
    }
    if let Some(e) = &m.enum_values
        && let Some(kind) = e.value.iter().find_map(|v| json_mismatch(v, shape))
    {
        errors.at(e.key, describe(kind, "an `enum` value"));
    }
    if let Some(e) = &m.example
        && let Some(kind) = json_mismatch(&e.value, shape)
    {
        errors.at(e.key, describe(kind, "the example"));
    }
    if let Some(d) = &m.default
        && d.value.is_null()
        && !Markers::is_set(&m.nullable)
    {
        errors.at(d.key, "a `null` default needs `nullable`");
    }
}

/// `items(..)`: the markers of each element, checked against the element type.
fn items(field: &Field, array: bool, errors: &mut Errors) {
    let Some(items) = &field.markers.items else {
        return;
    };
    if !array {
        wrong_shape(errors, items.key, "items", "list fields", field);
    }
    self::field(&element(field, &items.value, Node::Items), errors);
}

/// `values(..)`: the markers of each value of a map, checked against the value type.
fn values(field: &Field, map: bool, errors: &mut Errors) {
    let Some(values) = &field.markers.values else {
        return;
    };
    if !map {
        wrong_shape(errors, values.key, "values", "map fields", field);
    }
    self::field(&element(field, &values.value, Node::Values), errors);
}

/// A list element or map value of `field` (`node`), as a field of its own for the checks: the
/// element's type when the field's type names it (`Vec<T>`, `BTreeMap<String, T>`), else `()`
/// (checked as another type).
fn element(field: &Field, markers: &Markers, node: Node) -> Field {
    let declared = markers
        .type_
        .as_ref()
        .map(|t| crate::fields::shape_of_type(&t.value()));
    let (ty, shape) = match node {
        Node::Items => (crate::fields::element_type(&field.ty), field.element_shape),
        _ => (crate::fields::value_type(&field.ty), field.value_shape),
    };
    let ty: syn::Type = ty.unwrap_or_else(|| syn::parse_quote!(()));
    Field {
        ident: field.ident.clone(),
        node,
        inner_ty: crate::fields::inner_type(&ty),
        json_name: field.json_name.clone(),
        serde: SerdeField::default(),
        shape: declared.unwrap_or(shape),
        // Markers reach one level down only: `items(..)` takes no `items(..)`.
        element_shape: Shape::Other,
        value_shape: Shape::Other,
        is_option: crate::fields::is_option(&ty),
        ty,
        markers: markers.clone(),
        has_markers: true,
    }
}

/// What a type carrying `#[validate(..)]` is, for the markers it accepts.
pub enum TypeKind {
    /// `struct Name(String)`: the markers of its inner type.
    Newtype(Box<syn::Type>),
    /// A tuple struct of several fields (a JSON array kept as sent).
    Tuple,
    /// A struct with named fields (an object).
    Struct,
    /// An enum of unit variants (a string).
    UnitEnum,
    /// An enum with data (an object, or what its tagging makes of it).
    DataEnum,
}

/// Markers on a type (`#[validate(..)]` above a `#[kubeforge::schema]` type): they apply wherever
/// the type is used. A newtype takes the markers of its inner type, checked as on a field of that
/// type; a struct or an enum those of an object (counts of properties, merge type) and the ones
/// that describe any value. `required` / `optional` belong to the field that uses the type.
pub fn type_markers(ident: &syn::Ident, kind: &TypeKind, markers: &Markers, errors: &mut Errors) {
    for flag in [&markers.required, &markers.optional].into_iter().flatten() {
        errors.at(
            flag.key,
            format!(
                "whether a field must be present is said on the field: put `required` / `optional` on the fields of type `{ident}`"
            ),
        );
    }
    let shape = match kind {
        TypeKind::Newtype(inner) => return newtype_markers(ident, inner, markers, errors),
        TypeKind::UnitEnum => Shape::String,
        TypeKind::Tuple | TypeKind::Struct | TypeKind::DataEnum => Shape::Other,
    };
    misplaced_markers(ident, kind, markers, errors);
    let object = matches!(kind, TypeKind::Struct | TypeKind::DataEnum);
    let pseudo = Field {
        ident: ident.clone(),
        node: Node::Field,
        inner_ty: syn::parse_quote!(()),
        json_name: ident.to_string(),
        serde: SerdeField::default(),
        shape,
        element_shape: Shape::Other,
        value_shape: Shape::Other,
        is_option: false,
        ty: syn::parse_quote!(()),
        markers: Markers {
            required: None,
            optional: None,
            ..markers.clone()
        },
        has_markers: true,
    };
    // The markers every value takes (default, example, rules, docs) and the object ones.
    defaults_and_enum(&pseudo, errors);
    if object {
        map_type(&pseudo, true, errors);
    }
    embedded_resource(&pseudo, errors);
    external_docs(&pseudo, errors);
    rules(&markers.rules, errors);
}

/// A newtype's markers, checked as on a field of its inner type.
fn newtype_markers(ident: &syn::Ident, inner: &syn::Type, markers: &Markers, errors: &mut Errors) {
    let declared = markers
        .type_
        .as_ref()
        .map(|t| crate::fields::shape_of_type(&t.value()));
    let pseudo = Field {
        ident: ident.clone(),
        node: Node::Field,
        inner_ty: crate::fields::inner_type(inner),
        json_name: ident.to_string(),
        serde: SerdeField::default(),
        shape: declared.unwrap_or_else(|| crate::fields::shape(inner)),
        element_shape: crate::fields::element_shape(inner),
        value_shape: crate::fields::value_shape(inner),
        is_option: crate::fields::is_option(inner),
        ty: inner.clone(),
        markers: Markers {
            required: None,
            optional: None,
            ..markers.clone()
        },
        has_markers: true,
    };
    field(&pseudo, errors);
}

/// The markers a struct, an enum or a tuple struct does not take, each reported at its key.
fn misplaced_markers(ident: &syn::Ident, kind: &TypeKind, m: &Markers, errors: &mut Errors) {
    let what = match kind {
        TypeKind::UnitEnum => "an enum of unit variants (a string)",
        TypeKind::Tuple => "a tuple struct (a list kept as sent)",
        _ => "a struct or enum (an object)",
    };
    let object = matches!(kind, TypeKind::Struct | TypeKind::DataEnum);
    let string = matches!(kind, TypeKind::UnitEnum);
    let mut spans: Vec<(Span, &str)> = Vec::new();
    spans.extend(m.minimum.as_ref().map(|n| (n.span, "minimum")));
    spans.extend(m.maximum.as_ref().map(|n| (n.span, "maximum")));
    spans.extend(m.multiple_of.as_ref().map(|n| (n.span, "multiple_of")));
    for (marker, flag) in [
        ("exclusive_minimum", &m.exclusive_minimum),
        ("exclusive_maximum", &m.exclusive_maximum),
        ("unique_items", &m.unique_items),
        ("int_or_string", &m.int_or_string),
    ] {
        spans.extend(flag.as_ref().map(|f| (f.key, marker)));
    }
    spans.extend(m.min_items.as_ref().map(|c| (c.key, "min_items")));
    spans.extend(m.max_items.as_ref().map(|c| (c.key, "max_items")));
    if !string {
        spans.extend(m.min_length.as_ref().map(|c| (c.key, "min_length")));
        spans.extend(m.max_length.as_ref().map(|c| (c.key, "max_length")));
        spans.extend(m.pattern.as_ref().map(|p| (p.span(), "pattern")));
        spans.extend(m.format.as_ref().map(|f| (f.span(), "format")));
    }
    spans.extend(m.enum_values.as_ref().map(|e| (e.key, "enum")));
    if !object {
        spans.extend(m.min_properties.as_ref().map(|c| (c.key, "min_properties")));
        spans.extend(m.max_properties.as_ref().map(|c| (c.key, "max_properties")));
        spans.extend(m.map_type.as_ref().map(|t| (t.span(), "map_type")));
    }
    spans.extend(m.list_type.as_ref().map(|t| (t.span(), "list_type")));
    spans.extend(m.list_map_keys.first().map(|k| (k.span(), "list_map_keys")));
    spans.extend(m.items.as_ref().map(|i| (i.key, "items")));
    spans.extend(m.values.as_ref().map(|v| (v.key, "values")));
    spans.extend(m.type_.as_ref().map(|t| (t.span(), "type")));
    for (span, marker) in spans {
        let hint = if marker == "enum" && string {
            "; the variants are its values already"
        } else {
            "; put it on the fields of the type, or on a newtype (`struct Name(String)`) that carries the value"
        };
        errors.at(
            span,
            format!("`{marker}` does not apply to `{ident}`, {what}{hint}"),
        );
    }
}

/// Struct-level rules: every field a rule reads from `self`/`oldSelf` must be a JSON field of the
/// struct (not checkable through `#[serde(flatten)]` fields, which add names of another type).
pub fn rule_fields(rules: &[Rule], fields: &[Field], type_name: &syn::Ident, errors: &mut Errors) {
    crate::cel::check_struct(rules, fields, type_name, errors);
    if fields
        .iter()
        .any(|f| f.serde.flatten || f.serde.transparent)
    {
        return;
    }
    let names: Vec<&str> = fields
        .iter()
        .filter(|f| !f.serde.skip)
        .map(|f| f.json_name.as_str())
        .collect();
    for rule in rules {
        let Some(used) = crate::cel::self_fields(&rule.cel.value()) else {
            continue;
        };
        for name in used.iter().filter(|u| !names.contains(&u.as_str())) {
            let hint = crate::errors::did_you_mean(name, &names);
            let hint = if hint.is_empty() {
                format!(" (its JSON fields: {})", names.join(", "))
            } else {
                hint
            };
            errors.spanned(
                &rule.cel,
                format!("CEL rule reads `self.{name}`, but `{type_name}` has no JSON field `{name}`{hint}"),
            );
        }
    }
}

/// `exactly_one_of` & co.: every name is a JSON field of the struct, named once, that may be
/// absent (a field that is always set makes the rule always or never hold). Names are not
/// checkable through `#[serde(flatten)]` fields.
pub fn one_ofs(groups: &[OneOf], fields: &[Field], type_name: &syn::Ident, errors: &mut Errors) {
    let unknowable = fields
        .iter()
        .any(|f| f.serde.flatten || f.serde.transparent);
    let names: Vec<&str> = fields
        .iter()
        .filter(|f| !f.serde.skip)
        .map(|f| f.json_name.as_str())
        .collect();
    for group in groups {
        let key = group.name();
        let mut seen: Vec<String> = Vec::new();
        for lit in &group.fields {
            let name = lit.value();
            if seen.contains(&name) {
                errors.spanned(lit, format!("`{name}` is named twice"));
                continue;
            }
            seen.push(name.clone());
            let Some(field) = fields.iter().find(|f| !f.serde.skip && f.json_name == name) else {
                if !unknowable {
                    let hint = crate::errors::did_you_mean(&name, &names);
                    let hint = if hint.is_empty() {
                        format!(" (its JSON fields: {})", names.join(", "))
                    } else {
                        hint
                    };
                    errors.spanned(
                        lit,
                        format!("`{key}` names `{name}`, but `{type_name}` has no JSON field `{name}`{hint}"),
                    );
                }
                continue;
            };
            let required = Markers::is_set(&field.markers.required);
            if required || (!field.is_option && !field.serde.default) {
                errors.spanned(
                    lit,
                    format!("`{key}` counts the fields that are set, but `{name}` is always set: make it an `Option` (or give it `#[serde(default)]`)"),
                );
            }
        }
    }
}

/// `Some(description)` when a JSON literal cannot be a value of a field of `shape`.
fn json_mismatch(value: &serde_json::Value, shape: Shape) -> Option<&'static str> {
    use serde_json::Value;
    let (fits, kind) = match value {
        Value::Null => (true, "null"),
        Value::Bool(_) => (shape == Shape::Bool, "a bool"),
        Value::Number(n) if n.is_f64() => (shape == Shape::Number, "a fractional number"),
        Value::Number(_) => (
            matches!(shape, Shape::Integer | Shape::Number | Shape::IntOrString),
            "a number",
        ),
        Value::String(_) => (
            matches!(shape, Shape::String | Shape::IntOrString),
            "a string",
        ),
        Value::Array(_) => (shape == Shape::Array, "a list"),
        Value::Object(_) => (shape == Shape::Map, "an object"),
    };
    (!fits && shape != Shape::Other).then_some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> LitStr {
        LitStr::new(s, proc_macro2::Span::call_site())
    }

    #[test]
    fn check_json_path_should_accept_simple_paths_only() {
        let mut errors = Errors::default();
        assert!(check_json_path(&lit(".spec.replicas"), &mut errors));
        assert!(check_json_path(
            &lit(".status.conditions[0].type"),
            &mut errors
        ));
        assert!(!check_json_path(&lit("spec.replicas"), &mut errors));
        assert!(!check_json_path(&lit(".spec..replicas"), &mut errors));
        assert!(!check_json_path(&lit(".spec.x[a]"), &mut errors));
        assert_eq!(errors.messages().len(), 3);
    }

    #[test]
    fn check_column_path_should_need_unchecked_for_what_it_cannot_resolve() {
        let mut errors = Errors::default();
        let path = |s: &str, unchecked| JsonPath {
            lit: lit(s),
            unchecked,
        };
        let ready = path(r#".status.conditions[?(@.type=="Ready")].status"#, false);
        assert_eq!(
            check_column_path(&ready, &mut errors).map(|s| s.len()),
            Some(4)
        );
        assert!(check_column_path(&path("..name", true), &mut errors).is_some());
        assert!(check_column_path(&path("..name", false), &mut errors).is_none());
        assert!(check_column_path(&path(".spec.a[?(@.on >= true)]", false), &mut errors).is_none());
        assert!(check_column_path(&path(".spec.a[?(@.b == 1", true), &mut errors).is_none());
        assert_eq!(
            errors.messages(),
            [
                "the recursive descent `..` in `..name` cannot be checked at compile time; the apiserver accepts it: add `unchecked` to the printcolumn",
                "the filter `[?(@.on >= true)]` orders booleans, which the apiserver cannot do; compare them with `==` or `!=`",
                "invalid JSONPath `.spec.a[?(@.b == 1`: the apiserver cannot parse it (unterminated filter) and would show neither this column nor the ones after it",
            ]
        );
    }

    fn field_errors(ty: syn::Type, marker: syn::Attribute) -> Vec<String> {
        let mut errors = Errors::default();
        let mut fields: syn::FieldsNamed = syn::parse_quote!({ #marker pub f: #ty });
        let mut fields = syn::Fields::Named(std::mem::replace(&mut fields, syn::parse_quote!({})));
        let model = crate::fields::fields(&mut fields, None, &mut errors);
        field(&model[0], &mut errors);
        errors.messages()
    }

    #[test]
    fn field_should_reject_markers_on_the_wrong_type() {
        assert_eq!(
            field_errors(
                syn::parse_quote!(String),
                syn::parse_quote!(#[validate(minimum = 1)])
            ),
            ["`minimum` applies to integer and number fields, but field `f` is a string"]
        );
        assert_eq!(
            field_errors(
                syn::parse_quote!(Option<i32>),
                syn::parse_quote!(#[validate(max_items = 1)])
            ),
            ["`max_items` applies to list fields, but field `f` is an integer"]
        );
        assert!(
            field_errors(
                syn::parse_quote!(Option<i32>),
                syn::parse_quote!(#[validate(minimum = 1)])
            )
            .is_empty()
        );
    }

    #[test]
    fn items_and_values_should_take_the_markers_of_lists_maps_and_objects() {
        for (ty, marker) in [
            (
                syn::parse_quote!(Vec<Vec<String>>),
                syn::parse_quote!(#[validate(items(min_items = 1, max_items = 2, unique_items))]),
            ),
            (
                syn::parse_quote!(Vec<BTreeMap<String, String>>),
                syn::parse_quote!(#[validate(items(min_properties = 1, max_properties = 3))]),
            ),
            (
                syn::parse_quote!(BTreeMap<String, Option<String>>),
                syn::parse_quote!(#[validate(values(nullable, rule(cel = "self.size() > 1")))]),
            ),
            (
                syn::parse_quote!(Vec<serde_json::Value>),
                syn::parse_quote!(#[validate(items(embedded_resource, preserve_unknown_fields))]),
            ),
            (
                syn::parse_quote!(Option<Vec<Inner>>),
                syn::parse_quote!(#[validate(items(preserve_unknown_fields, rule(cel = "has(self.a)")))]),
            ),
        ] {
            let ty: syn::Type = ty;
            let errors = field_errors(ty.clone(), marker);
            assert!(errors.is_empty(), "{}: {errors:?}", quote::quote!(#ty));
        }
    }

    #[test]
    fn items_and_values_should_reject_what_does_not_fit_the_element() {
        assert_eq!(
            field_errors(
                syn::parse_quote!(Vec<String>),
                syn::parse_quote!(#[validate(items(max_items = 1, unique_items, min_properties = 1))])
            ),
            [
                "`max_items` applies to list fields, but each item of `f` is a string",
                "`min_properties` applies to map and object fields, but each item of `f` is a string",
                "`unique_items` applies to list fields, but each item of `f` is a string",
            ]
        );
        assert_eq!(
            field_errors(
                syn::parse_quote!(BTreeMap<String, i32>),
                syn::parse_quote!(#[validate(values(nullable, preserve_unknown_fields, embedded_resource))])
            ),
            [
                "`embedded_resource` needs an object, but each value of `f` is an integer; use `k8s_openapi::apimachinery::pkg::runtime::RawExtension`, `serde_json::Value`, a `serde_json::Map` or a struct with `apiVersion`, `kind` and `metadata`",
                "`nullable` lets the apiserver store `null`, which serde reads only into an `Option`, but each value of `f` is an integer: make the value type an `Option<..>`",
                "`preserve_unknown_fields` applies to objects (a struct, a map, `serde_json::Value`), but each value of `f` is an integer",
            ]
        );
        let e = field_errors(
            syn::parse_quote!(Vec<String>),
            syn::parse_quote!(#[validate(items(rule(cel = "self > 1")))]),
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("string") && e[0].contains("int"), "{e:?}");
    }

    #[test]
    fn field_should_reject_invalid_regex_and_list_types() {
        let e = field_errors(
            syn::parse_quote!(String),
            syn::parse_quote!(#[validate(pattern = "a(")]),
        );
        assert!(e[0].starts_with("invalid regular expression"), "{e:?}");
        let e = field_errors(
            syn::parse_quote!(Vec<String>),
            syn::parse_quote!(#[validate(list_type = "map")]),
        );
        assert_eq!(
            e,
            ["`list_type = \"map\"` needs `list_map_keys = [\"...\"]`"]
        );
    }

    #[test]
    fn field_should_report_in_the_order_of_the_checks() {
        let e = field_errors(
            syn::parse_quote!(bool),
            syn::parse_quote!(#[validate(maximum = 1, minimum = 2, min_length = 3, max_items = 1, min_items = 2, max_properties = 1)]),
        );
        assert_eq!(
            e,
            [
                "`minimum` applies to integer and number fields, but field `f` is a bool",
                "`maximum` applies to integer and number fields, but field `f` is a bool",
                "`maximum` is smaller than `minimum`",
                "`min_length` applies to string fields, but field `f` is a bool",
                "`min_items` applies to list fields, but field `f` is a bool",
                "`max_items` applies to list fields, but field `f` is a bool",
                "`max_properties` applies to map and object fields, but field `f` is a bool",
                "`max_items` is smaller than its minimum",
            ]
        );
    }

    #[test]
    fn the_column_type_message_should_list_the_column_types() {
        let mut errors = Errors::default();
        crate::attrs::parse_kind(
            quote::quote!(printcolumn(name = "a", json_path = ".spec.a")),
            &mut errors,
        );
        let expected = format!(
            "a printer column needs `type = ...`, one of: {}",
            COLUMN_TYPES.join(", ")
        );
        assert_eq!(errors.messages(), [expected]);
    }
}
