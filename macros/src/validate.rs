//! Validate: rules that span several keys or need knowledge of Kubernetes (names, column types,
//! regexes, marker vs. field type). Each error points at the offending token.

use syn::LitStr;

use crate::attrs::{RawMarkers, RawRule};
use crate::errors::Errors;
use crate::model::{Field, Kind, Shape};

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

/// One step of a simple JSONPath: a field name and how many `[n]` indexes follow it.
pub struct PathStep {
    pub name: String,
    pub indexes: usize,
}

/// Splits `.a.b[0].c` into steps; `None` if it is not a simple path.
pub fn parse_path(path: &str) -> Option<Vec<PathStep>> {
    let rest = path.strip_prefix('.')?;
    rest.split('.')
        .map(|seg| {
            let name = seg.split('[').next().unwrap_or_default();
            let valid_name = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            let mut indexes = 0;
            for idx in seg[name.len()..].split_inclusive(']') {
                let digits = idx.strip_prefix('[').and_then(|i| i.strip_suffix(']'))?;
                if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                    return None;
                }
                indexes += 1;
            }
            valid_name.then(|| PathStep {
                name: name.to_owned(),
                indexes,
            })
        })
        .collect()
}

/// A JSONPath as Kubernetes accepts in printer columns and subresources: `.a.b[0].c` (simple
/// paths; no filters).
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

/// The first step of a path must be `spec`, `status` (when the kind has a status) or `metadata`.
fn check_root(lit: &LitStr, kind: &Kind, errors: &mut Errors) {
    let Some(steps) = parse_path(&lit.value()) else {
        return;
    };
    match steps.first().map(|s| s.name.as_str()) {
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

pub fn rules(rules: &[RawRule], errors: &mut Errors) {
    for rule in rules {
        match &rule.cel {
            None => errors.at(rule.span, "a rule needs `cel = \"...\"`"),
            Some(cel) if cel.value().trim().is_empty() => {
                errors.spanned(cel, "the CEL expression is empty");
            }
            Some(cel) => {
                if let Err(message) = crate::cel::check(&cel.value()) {
                    errors.spanned(cel, format!("CEL rule does not parse: {message}"));
                }
            }
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
}

pub fn kind(kind: &Kind, errors: &mut Errors) {
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
    let mut names: Vec<String> = Vec::new();
    for col in &kind.printcolumns {
        let missing = |errors: &mut Errors, message: String| {
            if !col.had_unknown {
                errors.at(col.span, message);
            }
        };
        match &col.name {
            None => missing(errors, "a printer column needs `name = \"...\"`".to_owned()),
            Some(name) => {
                if names.contains(&name.value()) {
                    errors.spanned(name, format!("duplicate printer column `{}`", name.value()));
                }
                names.push(name.value());
            }
        }
        match &col.json_path {
            None => missing(
                errors,
                "a printer column needs `json_path = \".spec...\"`".to_owned(),
            ),
            Some(p) => {
                if check_json_path(p, errors) {
                    check_root(p, kind, errors);
                }
            }
        }
        match &col.type_ {
            None => missing(
                errors,
                format!(
                    "a printer column needs `type = ...`, one of: {}",
                    COLUMN_TYPES.join(", ")
                ),
            ),
            Some(t) if !COLUMN_TYPES.contains(&t.value().as_str()) => errors.spanned(
                t,
                format!(
                    "unknown column type; expected one of: {}",
                    COLUMN_TYPES.join(", ")
                ),
            ),
            Some(_) => {}
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
    if let Some(scale) = &kind.scale {
        match &scale.spec {
            None => errors.at(scale.span, "`scale` needs `spec = \".spec.replicas\"`"),
            Some(p) => {
                if check_json_path(p, errors) && !p.value().starts_with(".spec.") {
                    errors.spanned(p, "the spec replicas path must start with `.spec.`");
                }
            }
        }
        match &scale.status {
            None => errors.at(scale.span, "`scale` needs `status = \".status.replicas\"`"),
            Some(p) => {
                if check_json_path(p, errors) && !p.value().starts_with(".status.") {
                    errors.spanned(p, "the status replicas path must start with `.status.`");
                }
            }
        }
        if let Some(p) = &scale.selector
            && check_json_path(p, errors)
            && !p.value().starts_with(".status.")
            && !p.value().starts_with(".spec.")
        {
            errors.spanned(
                p,
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
    for p in &kind.selectable_fields {
        if check_json_path(p, errors) {
            check_root(p, kind, errors);
        }
    }
    rules(&kind.rules, errors);
}

fn wrong_shape(
    errors: &mut Errors,
    key: proc_macro2::Span,
    marker: &str,
    applies: &str,
    field: &Field,
) {
    errors.at(
        key,
        format!(
            "`{marker}` applies to {applies}, but field `{}` is {}",
            field.ident,
            field.shape.describe()
        ),
    );
}

/// Marker rules of one field.
pub fn field(field: &Field, errors: &mut Errors) {
    let m: &RawMarkers = &field.markers;
    let shape = field.shape;
    let numeric = matches!(
        shape,
        Shape::Integer | Shape::Number | Shape::IntOrString | Shape::Other
    );
    let string = matches!(shape, Shape::String | Shape::IntOrString | Shape::Other);
    let array = matches!(shape, Shape::Array | Shape::Other);
    let map = matches!(shape, Shape::Map | Shape::Other);
    if field.has_markers && field.serde.flatten {
        errors.spanned(
            &field.ident,
            "markers on a `#[serde(flatten)]` field have no schema node to attach to; put them on the fields of the flattened type",
        );
    }
    for (n, name) in [
        (&m.minimum, "minimum"),
        (&m.maximum, "maximum"),
        (&m.multiple_of, "multiple_of"),
    ] {
        if let Some(n) = n {
            if !numeric {
                wrong_shape(errors, n.span, name, "integer and number fields", field);
            } else if shape == Shape::Integer && !n.is_integer {
                errors.at(
                    n.span,
                    format!(
                        "`{name}` of integer field `{}` must be an integer",
                        field.ident
                    ),
                );
            }
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
            errors.at(
                flag.key,
                format!(
                    "`{name}` needs `{}` to be set",
                    name.trim_start_matches("exclusive_")
                ),
            );
        }
    }
    if let (Some(min), Some(max)) = (&m.minimum, &m.maximum)
        && min.value.as_f64() > max.value.as_f64()
    {
        errors.at(max.span, "`maximum` is smaller than `minimum`");
    }
    for (k, name) in [(&m.min_length, "min_length"), (&m.max_length, "max_length")] {
        if let Some(k) = k
            && !string
        {
            wrong_shape(errors, k.key, name, "string fields", field);
        }
    }
    for (k, name) in [(&m.min_items, "min_items"), (&m.max_items, "max_items")] {
        if let Some(k) = k
            && !array
        {
            wrong_shape(errors, k.key, name, "list fields", field);
        }
    }
    for (k, name) in [
        (&m.min_properties, "min_properties"),
        (&m.max_properties, "max_properties"),
    ] {
        if let Some(k) = k
            && !map
        {
            wrong_shape(errors, k.key, name, "map and object fields", field);
        }
    }
    for (lo, hi, name) in [
        (&m.min_length, &m.max_length, "max_length"),
        (&m.min_items, &m.max_items, "max_items"),
        (&m.min_properties, &m.max_properties, "max_properties"),
    ] {
        if let (Some(lo), Some(hi)) = (lo, hi)
            && lo.value > hi.value
        {
            errors.at(hi.key, format!("`{name}` is smaller than its minimum"));
        }
    }
    if let Some(u) = &m.unique_items {
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
    if let Some(p) = &m.pattern {
        if !string {
            wrong_shape(errors, p.span(), "pattern", "string fields", field);
        }
        if let Err(e) = regex_syntax::Parser::new().parse(&p.value()) {
            let detail = e.to_string();
            let last = detail.lines().last().unwrap_or_default().trim().to_owned();
            errors.spanned(p, format!("invalid regular expression: {last}"));
        }
    }
    if let Some(lt) = &m.list_type {
        if !array {
            wrong_shape(errors, lt.span(), "list_type", "list fields", field);
        }
        match lt.value().as_str() {
            "atomic" | "set" => {
                if let Some(k) = m.list_map_keys.first() {
                    errors.spanned(k, "`list_map_keys` needs `list_type = \"map\"`");
                }
            }
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
    } else if let Some(k) = m.list_map_keys.first() {
        errors.spanned(k, "`list_map_keys` needs `list_type = \"map\"`");
    }
    if let Some(mt) = &m.map_type {
        if !map {
            wrong_shape(
                errors,
                mt.span(),
                "map_type",
                "map and object fields",
                field,
            );
        }
        if !matches!(mt.value().as_str(), "atomic" | "granular") {
            errors.spanned(mt, "unknown map type; expected one of: atomic, granular");
        }
    }
    if let (Some(ios), Some(s)) = (&m.int_or_string, &m.schemaless)
        && ios.value
        && s.value
    {
        errors.at(s.key, "`schemaless` and `int_or_string` exclude each other");
    }
    if let Some(d) = &m.default
        && let Some(kind) = json_mismatch(&d.value, shape)
    {
        errors.at(
            d.key,
            format!(
                "the default is {kind}, but field `{}` is {}",
                field.ident,
                shape.describe()
            ),
        );
    }
    if let Some(e) = &m.enum_values
        && let Some(kind) = e.value.iter().find_map(|v| json_mismatch(v, shape))
    {
        errors.at(
            e.key,
            format!(
                "an `enum` value is {kind}, but field `{}` is {}",
                field.ident,
                shape.describe()
            ),
        );
    }
    if let Some(d) = &m.default
        && d.value.is_null()
        && !m.nullable.as_ref().is_some_and(|n| n.value)
    {
        errors.at(d.key, "a `null` default needs `nullable`");
    }
    if let Some(items) = &m.items {
        if !array {
            wrong_shape(errors, items.key, "items", "list fields", field);
        }
        let element = Field {
            ident: field.ident.clone(),
            inner_ty: field.inner_ty.clone(),
            json_name: field.json_name.clone(),
            serde: crate::model::SerdeField::default(),
            shape: field.element_shape,
            element_shape: Shape::Other,
            markers: (*items.value).clone(),
            has_markers: true,
        };
        self::field(&element, errors);
    }
    rules(&m.rules, errors);
}

/// Struct-level rules: every field a rule reads from `self`/`oldSelf` must be a JSON field of the
/// struct (not checkable through `#[serde(flatten)]` fields, which add names of another type).
pub fn rule_fields(
    rules: &[RawRule],
    fields: &[Field],
    type_name: &syn::Ident,
    errors: &mut Errors,
) {
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
        let Some(cel) = &rule.cel else { continue };
        let Some(used) = crate::cel::self_fields(&cel.value()) else {
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
                cel,
                format!("CEL rule reads `self.{name}`, but `{type_name}` has no JSON field `{name}`{hint}"),
            );
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

    fn field_errors(ty: syn::Type, marker: syn::Attribute) -> Vec<String> {
        let mut errors = Errors::default();
        let mut fields: syn::FieldsNamed = syn::parse_quote!({ #marker pub f: #ty });
        let mut fields = syn::Fields::Named(std::mem::replace(&mut fields, syn::parse_quote!({})));
        let model = crate::model::fields(&mut fields, None, &mut errors);
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
}
