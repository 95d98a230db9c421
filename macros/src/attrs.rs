//! Parse: reads the raw keys of `#[custom_resource(...)]`, `#[kubeforge::schema(...)]` and the
//! field markers `#[validate(...)]` into structs that keep every token's span. No defaults and no
//! cross-key rules here (see `model.rs` and `validate.rs`); unknown and duplicate keys are reported
//! here, the duplicate at its second occurrence.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Expr, ExprLit, ExprUnary, Lit, LitBool, LitStr, Type, UnOp};

use crate::errors::{Errors, did_you_mean};

/// A value with the span of the key that set it.
#[derive(Clone)]
pub struct Keyed<T> {
    pub value: T,
    pub key: Span,
}

/// Keys seen so far in one attribute, to report duplicates at their second occurrence.
struct Seen(Vec<String>);

impl Seen {
    fn first(&mut self, meta: &ParseNestedMeta<'_>, name: &str, errors: &mut Errors) -> bool {
        if self.0.iter().any(|k| k == name) {
            errors.spanned(
                &meta.path,
                format!("duplicate key `{name}`; it is already set above"),
            );
            false
        } else {
            self.0.push(name.to_owned());
            true
        }
    }
}

fn key_name(meta: &ParseNestedMeta<'_>) -> String {
    meta.path
        .get_ident()
        .map(ToString::to_string)
        .unwrap_or_else(|| quote::ToTokens::to_token_stream(&meta.path).to_string())
}

fn unknown(meta: &ParseNestedMeta<'_>, name: &str, known: &[&str], what: &str) -> syn::Error {
    let hint = did_you_mean(name, known);
    let hint = if hint.is_empty() {
        format!("; expected one of: {}", known.join(", "))
    } else {
        hint
    };
    syn::Error::new_spanned(&meta.path, format!("unknown {what} key `{name}`{hint}"))
}

/// Skips the value of a key that errored so that parsing continues with the next key.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        let _: syn::Token![=] = meta.input.parse()?;
        let _: Expr = meta.input.parse()?;
    } else if meta.input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in meta.input);
        let _: TokenStream = content.parse()?;
    }
    Ok(())
}

fn lit_str(meta: &ParseNestedMeta<'_>) -> syn::Result<LitStr> {
    meta.value()?.parse()
}

/// The value of `crate = "path"` (every macro accepts it): the path generated code names kubeforge
/// by instead of `::kubeforge`, for crates that re-export or rename it. `None` (and an error at
/// the literal) when it is not a path.
pub fn crate_path(lit: &LitStr, errors: &mut Errors) -> Option<syn::Path> {
    match lit.parse::<syn::Path>() {
        Ok(path) => Some(path),
        Err(_) => {
            errors.spanned(
                lit,
                format!(
                    "`crate` must be the path of the kubeforge crate, such as \"::kubeforge\" or \"kf\"; `{}` is not a path",
                    lit.value()
                ),
            );
            None
        }
    }
}

/// `flag` or `flag = true|false`.
fn flag(meta: &ParseNestedMeta<'_>) -> syn::Result<bool> {
    if meta.input.peek(syn::Token![=]) {
        let b: LitBool = meta.value()?.parse()?;
        Ok(b.value)
    } else {
        Ok(true)
    }
}

/// A JSON number literal (optionally negative), kept with its span.
#[derive(Clone)]
pub struct Number {
    pub value: serde_json::Number,
    pub is_integer: bool,
    pub span: Span,
}

fn number(meta: &ParseNestedMeta<'_>) -> syn::Result<Number> {
    let expr: Expr = meta.value()?.parse()?;
    expr_number(&expr)
}

fn expr_number(expr: &Expr) -> syn::Result<Number> {
    let err = || syn::Error::new_spanned(expr, "expected a number literal");
    let (negative, lit) = match expr {
        Expr::Lit(ExprLit { lit, .. }) => (false, lit),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match &**expr {
            Expr::Lit(ExprLit { lit, .. }) => (true, lit),
            _ => return Err(err()),
        },
        _ => return Err(err()),
    };
    let sign = if negative { "-" } else { "" };
    let (text, is_integer) = match lit {
        Lit::Int(i) => (format!("{sign}{}", i.base10_digits()), true),
        Lit::Float(f) => (format!("{sign}{}", f.base10_digits()), false),
        _ => return Err(err()),
    };
    let value: serde_json::Number = serde_json::from_str(&text).map_err(|_| err())?;
    Ok(Number {
        value,
        is_integer,
        span: syn::spanned::Spanned::span(expr),
    })
}

fn unsigned(meta: &ParseNestedMeta<'_>) -> syn::Result<Keyed<u64>> {
    let n = number(meta)?;
    match n.value.as_u64() {
        Some(v) if n.is_integer => Ok(Keyed {
            value: v,
            key: n.span,
        }),
        _ => Err(syn::Error::new(n.span, "expected a non-negative integer")),
    }
}

/// Converts a Rust literal expression (`3`, `-1.5`, `"x"`, `true`, `[..]`) to JSON.
pub fn expr_json(expr: &Expr) -> syn::Result<serde_json::Value> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(serde_json::Value::String(s.value())),
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Ok(serde_json::Value::Bool(b.value)),
        Expr::Array(array) => array
            .elems
            .iter()
            .map(expr_json)
            .collect::<syn::Result<Vec<_>>>()
            .map(serde_json::Value::Array),
        Expr::Path(p) if p.path.is_ident("null") => Ok(serde_json::Value::Null),
        Expr::Lit(_) | Expr::Unary(_) => {
            expr_number(expr).map(|n| serde_json::Value::Number(n.value))
        }
        _ => Err(syn::Error::new_spanned(
            expr,
            "expected a literal (number, string, bool, `null`) or an array of literals; \
             use `default_json = \"...\"` for objects",
        )),
    }
}

/// `rule(cel = "...", message = "...", message_expression = "...", reason = "...", field_path = "...")`.
#[derive(Clone)]
pub struct RawRule {
    pub span: Span,
    pub cel: Option<LitStr>,
    pub message: Option<LitStr>,
    pub message_expression: Option<LitStr>,
    pub reason: Option<LitStr>,
    pub field_path: Option<LitStr>,
    pub optional_old_self: Option<bool>,
}

const RULE_KEYS: &[&str] = &[
    "cel",
    "message",
    "message_expression",
    "reason",
    "field_path",
    "optional_old_self",
];

fn rule(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<RawRule> {
    let mut rule = RawRule {
        span: meta.path.segments[0].ident.span(),
        cel: None,
        message: None,
        message_expression: None,
        reason: None,
        field_path: None,
        optional_old_self: None,
    };
    let mut seen = Seen(Vec::new());
    meta.parse_nested_meta(|inner| {
        let name = key_name(&inner);
        if !RULE_KEYS.contains(&name.as_str()) {
            errors.push(unknown(&inner, &name, RULE_KEYS, "rule"));
            return skip_value(&inner);
        }
        let first = seen.first(&inner, &name, errors);
        match name.as_str() {
            "optional_old_self" => {
                let v = flag(&inner)?;
                if first {
                    rule.optional_old_self = Some(v);
                }
            }
            _ => {
                let v = lit_str(&inner)?;
                if first {
                    *match name.as_str() {
                        "cel" => &mut rule.cel,
                        "message" => &mut rule.message,
                        "message_expression" => &mut rule.message_expression,
                        "reason" => &mut rule.reason,
                        _ => &mut rule.field_path,
                    } = Some(v);
                }
            }
        }
        Ok(())
    })?;
    Ok(rule)
}

/// `printcolumn(name = .., json_path = .., type = .., format = .., description = .., priority = ..)`.
pub struct RawPrintColumn {
    pub span: Span,
    pub name: Option<LitStr>,
    pub json_path: Option<LitStr>,
    pub type_: Option<LitStr>,
    pub format: Option<LitStr>,
    pub description: Option<LitStr>,
    pub priority: Option<Keyed<u64>>,
    /// An unknown key was reported: do not also report the keys it probably meant as missing.
    pub had_unknown: bool,
    /// `unchecked`: the JSONPath is not resolved at compile time.
    pub unchecked: bool,
}

const PRINTCOLUMN_KEYS: &[&str] = &[
    "name",
    "json_path",
    "type",
    "format",
    "description",
    "priority",
    "unchecked",
];

/// `scale(spec = .., status = .., selector = ..)`.
pub struct RawScale {
    pub span: Span,
    pub spec: Option<LitStr>,
    pub status: Option<LitStr>,
    pub selector: Option<LitStr>,
}

const SCALE_KEYS: &[&str] = &["spec", "status", "selector", "unchecked"];

/// The raw keys of `#[custom_resource(...)]`.
#[derive(Default)]
pub struct RawKind {
    pub group: Option<LitStr>,
    pub version: Option<LitStr>,
    pub kind: Option<LitStr>,
    pub plural: Option<LitStr>,
    pub singular: Option<LitStr>,
    pub namespaced: Option<Keyed<bool>>,
    pub cluster: Option<Keyed<bool>>,
    pub status: Option<Type>,
    pub shortnames: Vec<LitStr>,
    pub categories: Vec<LitStr>,
    pub printcolumns: Vec<RawPrintColumn>,
    pub scale: Option<RawScale>,
    pub rules: Vec<RawRule>,
    pub selectable_fields: Vec<LitStr>,
    pub labels: Vec<(LitStr, LitStr)>,
    pub annotations: Vec<(LitStr, LitStr)>,
    pub deprecated: Option<Keyed<Option<LitStr>>>,
    pub served: Option<Keyed<bool>>,
    pub storage: Option<Keyed<bool>>,
    pub crate_path: Option<syn::Path>,
    /// JSONPaths marked `unchecked` (not resolved at compile time).
    pub unchecked: Vec<String>,
}

pub const KIND_KEYS: &[&str] = &[
    "group",
    "version",
    "kind",
    "plural",
    "singular",
    "namespaced",
    "cluster",
    "status",
    "shortname",
    "category",
    "printcolumn",
    "scale",
    "rule",
    "selectable_field",
    "label",
    "annotation",
    "deprecated",
    "served",
    "storage",
    "crate",
];

/// Keys that may appear several times.
const REPEATABLE: &[&str] = &[
    "shortname",
    "category",
    "printcolumn",
    "rule",
    "selectable_field",
    "label",
    "annotation",
];

fn key_value(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<(LitStr, LitStr)> {
    let mut key = None;
    let mut value = None;
    let mut seen = Seen(Vec::new());
    meta.parse_nested_meta(|inner| {
        let name = key_name(&inner);
        let slot = match name.as_str() {
            "key" => &mut key,
            "value" => &mut value,
            _ => {
                errors.push(unknown(
                    &inner,
                    &name,
                    &["key", "value"],
                    "label/annotation",
                ));
                return skip_value(&inner);
            }
        };
        let v = lit_str(&inner)?;
        if seen.first(&inner, &name, errors) {
            *slot = Some(v);
        }
        Ok(())
    })?;
    match (key, value) {
        (Some(k), Some(v)) => Ok((k, v)),
        _ => Err(meta.error("expected `key = \"...\"` and `value = \"...\"`")),
    }
}

/// Parses `#[custom_resource(...)]`'s arguments; errors go to `errors`.
pub fn parse_kind(args: TokenStream, errors: &mut Errors) -> RawKind {
    let mut raw = RawKind::default();
    let mut seen = Seen(Vec::new());
    let parser = syn::meta::parser(|meta| {
        let name = key_name(&meta);
        if !KIND_KEYS.contains(&name.as_str()) {
            errors.push(unknown(&meta, &name, KIND_KEYS, "`custom_resource`"));
            return skip_value(&meta);
        }
        let first = REPEATABLE.contains(&name.as_str()) || seen.first(&meta, &name, errors);
        let key = meta.path.segments[0].ident.span();
        match name.as_str() {
            "group" | "version" | "kind" | "plural" | "singular" => {
                let v = lit_str(&meta)?;
                if first {
                    *match name.as_str() {
                        "group" => &mut raw.group,
                        "version" => &mut raw.version,
                        "kind" => &mut raw.kind,
                        "plural" => &mut raw.plural,
                        _ => &mut raw.singular,
                    } = Some(v);
                }
            }
            "namespaced" | "cluster" | "served" | "storage" => {
                let v = Keyed {
                    value: flag(&meta)?,
                    key,
                };
                if first {
                    *match name.as_str() {
                        "namespaced" => &mut raw.namespaced,
                        "cluster" => &mut raw.cluster,
                        "served" => &mut raw.served,
                        _ => &mut raw.storage,
                    } = Some(v);
                }
            }
            "status" => {
                let ty: Type = meta.value()?.parse()?;
                if first {
                    raw.status = Some(ty);
                }
            }
            "crate" => {
                let path = crate_path(&lit_str(&meta)?, errors);
                if first {
                    raw.crate_path = path;
                }
            }
            "shortname" => raw.shortnames.push(lit_str(&meta)?),
            "category" => raw.categories.push(lit_str(&meta)?),
            "selectable_field" => {
                let mut path = None;
                let mut unchecked = false;
                meta.parse_nested_meta(|inner| {
                    if inner.path.is_ident("json_path") {
                        path = Some(lit_str(&inner)?);
                        Ok(())
                    } else if inner.path.is_ident("unchecked") {
                        unchecked = flag(&inner)?;
                        Ok(())
                    } else {
                        let n = key_name(&inner);
                        let known = &["json_path", "unchecked"];
                        errors.push(unknown(&inner, &n, known, "selectable_field"));
                        skip_value(&inner)
                    }
                })?;
                match path {
                    Some(p) => {
                        if unchecked {
                            raw.unchecked.push(p.value());
                        }
                        raw.selectable_fields.push(p);
                    }
                    None => errors.spanned(
                        &meta.path,
                        "expected `selectable_field(json_path = \"...\")`",
                    ),
                }
            }
            "label" => raw.labels.push(key_value(&meta, errors)?),
            "annotation" => raw.annotations.push(key_value(&meta, errors)?),
            "deprecated" => {
                let mut warning = None;
                if meta.input.peek(syn::token::Paren) {
                    meta.parse_nested_meta(|inner| {
                        if inner.path.is_ident("warning") {
                            warning = Some(lit_str(&inner)?);
                            Ok(())
                        } else {
                            let n = key_name(&inner);
                            errors.push(unknown(&inner, &n, &["warning"], "deprecated"));
                            skip_value(&inner)
                        }
                    })?;
                }
                if first {
                    raw.deprecated = Some(Keyed {
                        value: warning,
                        key,
                    });
                }
            }
            "rule" => raw.rules.push(rule(&meta, errors)?),
            "printcolumn" => {
                let mut col = RawPrintColumn {
                    span: key,
                    name: None,
                    json_path: None,
                    type_: None,
                    format: None,
                    description: None,
                    priority: None,
                    had_unknown: false,
                    unchecked: false,
                };
                let mut seen = Seen(Vec::new());
                meta.parse_nested_meta(|inner| {
                    let n = key_name(&inner);
                    if !PRINTCOLUMN_KEYS.contains(&n.as_str()) {
                        col.had_unknown = true;
                        errors.push(unknown(&inner, &n, PRINTCOLUMN_KEYS, "printcolumn"));
                        return skip_value(&inner);
                    }
                    let first = seen.first(&inner, &n, errors);
                    if n == "unchecked" {
                        col.unchecked = flag(&inner)?;
                        return Ok(());
                    }
                    if n == "priority" {
                        let p = unsigned(&inner)?;
                        if first {
                            col.priority = Some(p);
                        }
                        return Ok(());
                    }
                    let v = lit_str(&inner)?;
                    if first {
                        *match n.as_str() {
                            "name" => &mut col.name,
                            "json_path" => &mut col.json_path,
                            "type" => &mut col.type_,
                            "format" => &mut col.format,
                            _ => &mut col.description,
                        } = Some(v);
                    }
                    Ok(())
                })?;
                if col.unchecked
                    && let Some(p) = &col.json_path
                {
                    raw.unchecked.push(p.value());
                }
                raw.printcolumns.push(col);
            }
            "scale" => {
                let mut scale = RawScale {
                    span: key,
                    spec: None,
                    status: None,
                    selector: None,
                };
                let mut seen = Seen(Vec::new());
                let mut scale_unchecked = false;
                meta.parse_nested_meta(|inner| {
                    let n = key_name(&inner);
                    if !SCALE_KEYS.contains(&n.as_str()) {
                        errors.push(unknown(&inner, &n, SCALE_KEYS, "scale"));
                        return skip_value(&inner);
                    }
                    if n == "unchecked" {
                        scale_unchecked = flag(&inner)?;
                        return Ok(());
                    }
                    let v = lit_str(&inner)?;
                    if seen.first(&inner, &n, errors) {
                        *match n.as_str() {
                            "spec" => &mut scale.spec,
                            "status" => &mut scale.status,
                            _ => &mut scale.selector,
                        } = Some(v);
                    }
                    Ok(())
                })?;
                if scale_unchecked {
                    raw.unchecked.extend(
                        [&scale.spec, &scale.status, &scale.selector]
                            .into_iter()
                            .flatten()
                            .map(LitStr::value),
                    );
                }
                if first {
                    raw.scale = Some(scale);
                }
            }
            _ => unreachable!("every key of KIND_KEYS is handled"),
        }
        Ok(())
    });
    if let Err(e) = parser.parse2(args) {
        errors.push(e);
    }
    raw
}

/// The raw keys of `#[kubeforge::schema(...)]` (struct-level rules, crate path).
#[derive(Default)]
pub struct RawSchema {
    pub rules: Vec<RawRule>,
    pub crate_path: Option<syn::Path>,
}

const SCHEMA_KEYS: &[&str] = &["rule", "crate"];

/// Parses `#[kubeforge::schema(...)]`'s arguments.
pub fn parse_schema(args: TokenStream, errors: &mut Errors) -> RawSchema {
    let mut raw = RawSchema::default();
    let parser = syn::meta::parser(|meta| {
        let name = key_name(&meta);
        match name.as_str() {
            "rule" => raw.rules.push(rule(&meta, errors)?),
            "crate" => raw.crate_path = crate_path(&lit_str(&meta)?, errors),
            _ => {
                errors.push(unknown(&meta, &name, SCHEMA_KEYS, "`schema`"));
                return skip_value(&meta);
            }
        }
        Ok(())
    });
    if let Err(e) = parser.parse2(args) {
        errors.push(e);
    }
    raw
}

/// The raw field markers of `#[validate(...)]` on one field.
#[derive(Default, Clone)]
pub struct RawMarkers {
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
    pub rules: Vec<RawRule>,
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
    pub items: Option<Keyed<Box<RawMarkers>>>,
}

pub const MARKER_KEYS: &[&str] = &[
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
    "min_items",
    "max_items",
    "unique_items",
    "min_properties",
    "max_properties",
    "rule",
    "default",
    "default_json",
    "nullable",
    "preserve_unknown_fields",
    "embedded_resource",
    "int_or_string",
    "schemaless",
    "list_type",
    "list_map_keys",
    "map_type",
    "items",
];

/// Parses one `#[validate(...)]` attribute into `markers` (a field may carry several).
pub fn parse_markers(attr: &syn::Attribute, markers: &mut RawMarkers, errors: &mut Errors) {
    let mut seen = Seen(Vec::new());
    let result = attr.parse_nested_meta(|meta| marker(&meta, markers, &mut seen, errors, false));
    if let Err(e) = result {
        errors.push(e);
    }
}

/// Markers allowed inside `items(...)`: the scalar constraints of each list element.
pub const ITEM_KEYS: &[&str] = &[
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
];

fn marker(
    meta: &ParseNestedMeta<'_>,
    markers: &mut RawMarkers,
    seen: &mut Seen,
    errors: &mut Errors,
    in_items: bool,
) -> syn::Result<()> {
    {
        let name = key_name(meta);
        let (known, what) = if in_items {
            (ITEM_KEYS, "`items`")
        } else {
            (MARKER_KEYS, "`validate`")
        };
        if !known.contains(&name.as_str()) {
            errors.push(unknown(meta, &name, known, what));
            return skip_value(meta);
        }
        let first = name == "rule" || seen.first(meta, &name, errors);
        let key = meta.path.segments[0].ident.span();
        let m = &mut *markers;
        match name.as_str() {
            "items" => {
                let mut items = RawMarkers::default();
                let mut inner_seen = Seen(Vec::new());
                meta.parse_nested_meta(|inner| {
                    marker(&inner, &mut items, &mut inner_seen, errors, true)
                })?;
                if first {
                    m.items = Some(Keyed {
                        value: Box::new(items),
                        key,
                    });
                }
            }
            "minimum" | "maximum" | "multiple_of" => {
                let n = number(meta)?;
                if first {
                    *match name.as_str() {
                        "minimum" => &mut m.minimum,
                        "maximum" => &mut m.maximum,
                        _ => &mut m.multiple_of,
                    } = Some(n);
                }
            }
            "exclusive_minimum"
            | "exclusive_maximum"
            | "unique_items"
            | "nullable"
            | "preserve_unknown_fields"
            | "embedded_resource"
            | "int_or_string"
            | "schemaless" => {
                let v = Keyed {
                    value: flag(meta)?,
                    key,
                };
                if first {
                    *match name.as_str() {
                        "exclusive_minimum" => &mut m.exclusive_minimum,
                        "exclusive_maximum" => &mut m.exclusive_maximum,
                        "unique_items" => &mut m.unique_items,
                        "nullable" => &mut m.nullable,
                        "preserve_unknown_fields" => &mut m.preserve_unknown_fields,
                        "embedded_resource" => &mut m.embedded_resource,
                        "int_or_string" => &mut m.int_or_string,
                        _ => &mut m.schemaless,
                    } = Some(v);
                }
            }
            "min_length" | "max_length" | "min_items" | "max_items" | "min_properties"
            | "max_properties" => {
                let v = unsigned(meta)?;
                if first {
                    *match name.as_str() {
                        "min_length" => &mut m.min_length,
                        "max_length" => &mut m.max_length,
                        "min_items" => &mut m.min_items,
                        "max_items" => &mut m.max_items,
                        "min_properties" => &mut m.min_properties,
                        _ => &mut m.max_properties,
                    } = Some(v);
                }
            }
            "pattern" | "format" | "list_type" | "map_type" => {
                let v = lit_str(meta)?;
                if first {
                    *match name.as_str() {
                        "pattern" => &mut m.pattern,
                        "format" => &mut m.format,
                        "list_type" => &mut m.list_type,
                        _ => &mut m.map_type,
                    } = Some(v);
                }
            }
            "enum" => {
                let expr: Expr = meta.value()?.parse()?;
                let values = match expr_json(&expr)? {
                    serde_json::Value::Array(values) if !values.is_empty() => values,
                    _ => {
                        return Err(syn::Error::new_spanned(
                            &expr,
                            "expected a non-empty array, e.g. `enum = [\"a\", \"b\"]`",
                        ));
                    }
                };
                if first {
                    m.enum_values = Some(Keyed { value: values, key });
                }
            }
            "default" => {
                let expr: Expr = meta.value()?.parse()?;
                let value = expr_json(&expr)?;
                if first {
                    m.default = Some(Keyed { value, key });
                }
            }
            "default_json" => {
                let lit = lit_str(meta)?;
                let value: serde_json::Value = serde_json::from_str(&lit.value())
                    .map_err(|e| syn::Error::new_spanned(&lit, format!("invalid JSON: {e}")))?;
                if m.default.is_some() {
                    errors.spanned(&meta.path, "`default` is already set");
                } else {
                    m.default = Some(Keyed { value, key });
                }
            }
            "list_map_keys" => {
                let expr: Expr = meta.value()?.parse()?;
                let Expr::Array(array) = &expr else {
                    return Err(syn::Error::new_spanned(
                        &expr,
                        "expected an array of strings, e.g. `list_map_keys = [\"name\"]`",
                    ));
                };
                for elem in &array.elems {
                    match elem {
                        Expr::Lit(ExprLit {
                            lit: Lit::Str(s), ..
                        }) => m.list_map_keys.push(s.clone()),
                        other => errors.spanned(other, "expected a string literal"),
                    }
                }
            }
            "rule" => m.rules.push(rule(meta, errors)?),
            _ => unreachable!("every key of MARKER_KEYS is handled"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    #[test]
    fn parse_kind_should_read_every_key() {
        let mut errors = Errors::default();
        let raw = parse_kind(
            quote!(group = "g.dev", version = "v1", kind = "K", namespaced, status = S,
                shortname = "k", shortname = "kk", category = "all",
                printcolumn(name = "R", json_path = ".spec.r", type = "integer", priority = 1),
                scale(spec = ".spec.r", status = ".status.r"),
                rule(cel = "self.a", message = "m"),
                selectable_field(json_path = ".spec.r"),
                label(key = "a/b", value = "c"), deprecated(warning = "old"), storage = false),
            &mut errors,
        );
        let messages = errors.messages();
        assert!(messages.is_empty(), "{messages:?}");
        assert_eq!(raw.group.map(|g| g.value()).as_deref(), Some("g.dev"));
        assert_eq!(raw.shortnames.len(), 2);
        assert_eq!(
            raw.printcolumns[0].priority.as_ref().map(|p| p.value),
            Some(1)
        );
        assert!(raw.scale.is_some());
        assert_eq!(
            raw.rules[0].cel.as_ref().map(LitStr::value).as_deref(),
            Some("self.a")
        );
        assert_eq!(raw.storage.map(|s| s.value), Some(false));
        assert_eq!(
            raw.deprecated
                .and_then(|d| d.value)
                .map(|w| w.value())
                .as_deref(),
            Some("old")
        );
    }

    #[test]
    fn parse_kind_should_report_unknown_and_duplicate_keys() {
        let mut errors = Errors::default();
        parse_kind(
            quote!(group = "a", shortnames = "x", group = "b", version = "v1"),
            &mut errors,
        );
        assert_eq!(
            errors.messages(),
            [
                "unknown `custom_resource` key `shortnames`; did you mean `shortname`?",
                "duplicate key `group`; it is already set above"
            ]
        );
    }

    #[test]
    fn parse_markers_should_read_numbers_and_literals() {
        let attr: syn::Attribute = syn::parse_quote!(#[validate(minimum = -5, maximum = 2.5, enum = ["a", "b"], default = 3, list_map_keys = ["name"])]);
        let mut markers = RawMarkers::default();
        let mut errors = Errors::default();
        parse_markers(&attr, &mut markers, &mut errors);
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
}
