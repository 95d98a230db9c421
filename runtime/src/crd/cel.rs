//! Client-side evaluation of a kind's CEL rules (`x-kubernetes-validations`), as the apiserver
//! evaluates them on a create or an update, with the Kubernetes CEL libraries of `kube-cel`.
//!
//! The kind's structural schema (the one its CRD carries) is compiled once into a tree of the
//! nodes that hold rules. Each such node gets its own `kube-cel` [`CompiledSchema`]: the node's
//! schema with its own rules only, so that `kube-cel` converts the value as the schema types it
//! (formats, escaped field names, int-or-string, embedded resources) and evaluates the rules with
//! its libraries. Walking the object and deciding what each rule sees is done here, the way the
//! apiserver does it:
//!
//! - the object is admitted as the apiserver admits it first: `null`s of non-nullable fields
//!   dropped, schema `default`s applied, numbers of `type: number` fields made doubles;
//! - rules are not evaluated on `null` values;
//! - the rules on the root of the schema (`root_rule(..)`, `self` is the whole object) see only
//!   `name` and `generateName` of `metadata`;
//! - `oldSelf` is the old value at the same place: by field name in objects and maps, by key in
//!   list-maps (`x-kubernetes-list-type: map`), none in other lists; transition rules are skipped
//!   where there is no old value; with `optionalOldSelf`, `oldSelf` is an optional
//!   (`optional.none()` on a create), which `kube-cel` alone binds to `null`;
//! - on an update, a failing rule that does not use `oldSelf` is not reported when the value it
//!   validates is unchanged (validation ratcheting);
//! - errors are worded as the apiserver words them: `Invalid value: "<type>": <message>`,
//!   `Forbidden: <message>`, `Required value: <message>` or `Duplicate value: "<type>"` (by
//!   `reason`), at the rule's node or its `fieldPath`; `messageExpression` results are trimmed,
//!   and empty or multi-line results fall back to `message`; runtime errors read
//!   `<error> evaluating rule: <message or rule>`;
//! - when a marker error that blocks CEL on the apiserver was found (enum, max length, max items
//!   or max properties), the rules are not evaluated and the apiserver's note says so.

use std::fmt;

use garde::error::{Kind, PathComponentKind};
use garde::{Error, Path, Report};
use kube_cel::cel::{ExecutionError, Program};
use kube_cel::{CompiledSchema, ErrorKind, ValidationError};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::validate::ValidationContext;

const VALIDATIONS: &str = "x-kubernetes-validations";

/// The apiserver's note when marker errors kept it from evaluating CEL rules.
const NOT_CHECKED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// `oldSelf` as an optional, for rules with `optionalOldSelf` (`kube-cel` binds `null` when there
/// is no old value, the old value otherwise). Replaces each `oldSelf` of such a rule: a binding
/// through a comprehension would not do, as `cel` unwraps the optionals it iterates over.
const OLD_SELF_AS_OPTIONAL: &str = "(oldSelf == null ? optional.none() : optional.of(oldSelf))";

/// The apiserver's limit on a `messageExpression` result, in bytes.
const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5000;

/// The CEL rules of one kind, compiled once from its structural schema.
///
/// Generated code keeps one per kind in a `static` and calls [`KindRules::check`] from the root
/// type's `validate_into`.
#[derive(Debug)]
pub struct KindRules {
    /// The structural schema, for admitting objects (nulls, defaults, numbers).
    schema: Value,
    /// `None`: the kind has no rule.
    root: Option<Node>,
}

impl KindRules {
    /// Compiles the rules of the structural `openAPIV3Schema` `schema`.
    #[must_use]
    pub fn new(schema: &Value) -> Self {
        let mut root = Node::build(schema);
        if let Some(root) = &mut root {
            root.resource_root = is_resource_root(schema);
        }
        Self {
            root,
            schema: schema.clone(),
        }
    }

    /// Whether the schema has no CEL rule at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// Evaluates the rules on `obj` (a create, or an update from the old object of `ctx`) and
    /// appends their errors to `report` under `parent()`. `markers_from`: the index of the first
    /// marker error of `obj` in `report`, to tell whether the apiserver would evaluate the rules.
    pub fn check<K: Serialize + ?Sized>(
        &self,
        obj: &K,
        ctx: &ValidationContext,
        parent: &mut dyn FnMut() -> Path,
        report: &mut Report,
        markers_from: usize,
    ) {
        let Some(root) = &self.root else {
            return;
        };
        if report
            .iter()
            .skip(markers_from)
            .any(|(_, error)| blocks_cel(error.message()))
        {
            report.append(
                parent(),
                Error::new(format!("Invalid value: null: {NOT_CHECKED}")),
            );
            return;
        }
        let new = match serde_json::to_value(obj) {
            Ok(new) => self.admit(new),
            Err(e) => {
                report.append(
                    parent(),
                    Error::new(format!("the CEL rules cannot be evaluated: {e}")),
                );
                return;
            }
        };
        let old = match ctx.old() {
            None => None,
            Some(Ok(old)) => Some(self.admit(old.clone())),
            Some(Err(e)) => {
                report.append(
                    parent(),
                    Error::new(format!("the transition rules cannot be evaluated: {e}")),
                );
                return;
            }
        };
        let mut errors = Vec::new();
        root.walk(&new, old.as_ref(), &mut Vec::new(), &mut errors);
        for (at, message) in errors {
            let path = at.iter().fold(parent(), |path, segment| match segment {
                Segment::Field(name) => path.join(name.as_str()),
                Segment::Index(i) => path.join(*i),
                Segment::Key(key) => path.join(MapKey(key.clone())),
            });
            report.append(path, Error::new(message));
        }
    }

    /// The object as the apiserver validates it: nulls of non-nullable fields dropped, defaults
    /// applied (numbers become doubles where rules are evaluated, see [`NodeRules::evaluate`]).
    fn admit(&self, mut value: Value) -> Value {
        drop_nulls(&mut value, &self.schema);
        kube_cel::apply_defaults(&self.schema, &value)
    }
}

/// Marker errors after which the apiserver does not evaluate CEL rules (its "blocking" errors:
/// not-supported enum values, too long, too many items or properties).
fn blocks_cel(message: &str) -> bool {
    message.starts_with("Unsupported value:")
        || message.starts_with("may not be more than")
        || message.starts_with("must have at most")
}

/// One step of a field path.
#[derive(Debug, Clone)]
enum Segment {
    /// A field: `.name`.
    Field(String),
    /// A list element: `[i]`.
    Index(usize),
    /// A map entry: `[key]`, as the apiserver writes it.
    Key(String),
}

/// A map key in a `garde` path, written `[key]` right after its map as the apiserver writes it.
struct MapKey(String);

impl fmt::Display for MapKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.0)
    }
}

impl PathComponentKind for MapKey {
    fn component_kind() -> Kind {
        // No separator before it: `map[key]`.
        Kind::None
    }
}

/// A schema node with rules, or with rules below it.
#[derive(Debug)]
struct Node {
    rules: Option<NodeRules>,
    properties: Vec<(String, Node)>,
    additional: Option<Box<Node>>,
    items: Option<Box<Node>>,
    /// `x-kubernetes-list-map-keys` of a list-map: its items correlate with old items by key.
    map_keys: Option<Vec<String>>,
    /// The root of a kind's schema: its rules (`root_rule(..)`) see only `name` and
    /// `generateName` of `metadata`.
    resource_root: bool,
}

/// Whether `schema` is the root of a kind's schema (`apiVersion`, `kind`, `metadata`).
fn is_resource_root(schema: &Value) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| {
            ["apiVersion", "kind", "metadata"]
                .iter()
                .all(|k| p.contains_key(*k))
        })
}

/// The object as the rules on its root see it: `metadata` cut to `name` and `generateName`, the
/// only fields of it the apiserver exposes to a CRD's rules.
fn as_root_rules_see_it(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        metadata.retain(|key, _| key == "name" || key == "generateName");
    }
    object
}

impl Node {
    fn build(schema: &Value) -> Option<Node> {
        let object = schema.as_object()?;
        let properties: Vec<(String, Node)> = object
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(name, schema)| Some((name.clone(), Node::build(schema)?)))
            .collect();
        let additional = object
            .get("additionalProperties")
            .and_then(Node::build)
            .map(Box::new);
        let items = object.get("items").and_then(Node::build).map(Box::new);
        let rules = NodeRules::build(schema);
        if rules.is_none() && properties.is_empty() && additional.is_none() && items.is_none() {
            return None;
        }
        let map_keys = (object.get("x-kubernetes-list-type").and_then(Value::as_str)
            == Some("map"))
        .then(|| {
            object
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|key| key.as_str().map(str::to_owned))
                .collect()
        });
        Some(Node {
            rules,
            properties,
            additional,
            items,
            map_keys,
            resource_root: false,
        })
    }

    fn walk(
        &self,
        value: &Value,
        old: Option<&Value>,
        path: &mut Vec<Segment>,
        errors: &mut Vec<(Vec<Segment>, String)>,
    ) {
        // The apiserver validates non-null values only.
        if value.is_null() {
            return;
        }
        let old = old.filter(|old| !old.is_null());
        if let Some(rules) = &self.rules {
            // Compared whole: an update of the labels alone changes the object.
            let unchanged = old == Some(value);
            if self.resource_root {
                let old = old.map(as_root_rules_see_it);
                let value = as_root_rules_see_it(value);
                rules.evaluate(&value, old.as_ref(), unchanged, path, errors);
            } else {
                rules.evaluate(value, old, unchanged, path, errors);
            }
        }
        if let Some(object) = value.as_object() {
            for (name, child) in &self.properties {
                if let Some(value) = object.get(name) {
                    path.push(Segment::Field(name.clone()));
                    child.walk(value, old.and_then(|old| old.get(name)), path, errors);
                    path.pop();
                }
            }
            if let Some(child) = &self.additional {
                for (key, value) in object {
                    path.push(Segment::Key(key.clone()));
                    child.walk(value, old.and_then(|old| old.get(key)), path, errors);
                    path.pop();
                }
            }
        }
        if let (Some(child), Some(list)) = (&self.items, value.as_array()) {
            let old_list = old.and_then(Value::as_array);
            for (i, item) in list.iter().enumerate() {
                // Only list-map entries have an old value (the entry with the same keys).
                let old_item = match (&self.map_keys, old_list) {
                    (Some(keys), Some(old_list)) => old_list
                        .iter()
                        .find(|old| keys.iter().all(|key| old.get(key) == item.get(key))),
                    _ => None,
                };
                path.push(Segment::Index(i));
                child.walk(item, old_item, path, errors);
                path.pop();
            }
        }
    }
}

/// The rules of one node, compiled by `kube-cel` against the node's schema.
#[derive(Debug)]
struct NodeRules {
    /// The node's schema without the rules of the nodes below it, to type numbers.
    schema: Value,
    /// The node's `type`, which runtime errors show (empty for int-or-string nodes).
    ty: String,
    compiled: CompiledSchema,
    rules: Vec<RuleInfo>,
}

/// What the apiserver reports for one rule.
#[derive(Debug)]
struct RuleInfo {
    /// The rule as compiled (unique in its node: it ends with a comment naming its index).
    compiled: String,
    /// The rule as written.
    rule: String,
    /// `message`, or the apiserver's default.
    message: String,
    has_message_expression: bool,
    reason: Option<String>,
    /// `fieldPath`, as segments below the node.
    field_path: Vec<Segment>,
    uses_old_self: bool,
}

impl NodeRules {
    fn build(schema: &Value) -> Option<NodeRules> {
        let raw = schema.get(VALIDATIONS)?.as_array()?;
        if raw.is_empty() {
            return None;
        }
        let mut rules = Vec::with_capacity(raw.len());
        let mut compiled_rules = Vec::with_capacity(raw.len());
        for (i, raw) in raw.iter().enumerate() {
            let text = |key: &str| raw.get(key).and_then(Value::as_str);
            let rule = text("rule").unwrap_or_default().to_owned();
            let message = match text("message") {
                Some(message) if !message.is_empty() => message.to_owned(),
                _ => format!("failed rule: {}", rule.trim()),
            };
            let uses_old_self = Program::compile(&rule)
                .is_ok_and(|program| program.references().has_variable("oldSelf"));
            let optional_old_self =
                uses_old_self && raw.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
            // A comment makes the compiled text unique, so that an error names its rule.
            let optional = |expression: &str| {
                if optional_old_self {
                    replace_old_self(expression, OLD_SELF_AS_OPTIONAL)
                } else {
                    expression.to_owned()
                }
            };
            let compiled = format!("{}\n// kubeforge rule {i}", optional(&rule));
            let message_expression = text("messageExpression").map(optional);
            let mut entry = json!({
                "rule": compiled,
                "message": message,
                "optionalOldSelf": optional_old_self,
            });
            if let (Some(expression), Some(entry)) = (&message_expression, entry.as_object_mut()) {
                entry.insert(
                    "messageExpression".to_owned(),
                    Value::String(expression.clone()),
                );
            }
            compiled_rules.push(entry);
            rules.push(RuleInfo {
                compiled,
                rule,
                message,
                has_message_expression: message_expression.is_some(),
                reason: text("reason").map(str::to_owned),
                field_path: text("fieldPath").map(field_path).unwrap_or_default(),
                uses_old_self,
            });
        }
        let mut own = schema.clone();
        strip_rules_below(&mut own);
        if let Some(own) = own.as_object_mut() {
            own.insert(VALIDATIONS.to_owned(), Value::Array(compiled_rules));
        }
        Some(NodeRules {
            compiled: kube_cel::compile_schema(&own),
            ty: own
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            schema: own,
            rules,
        })
    }

    /// Evaluates the rules on `value` (its old value: `old`, `unchanged` when the update left it
    /// as it was) at `path`; the errors go to `errors`.
    fn evaluate(
        &self,
        value: &Value,
        old: Option<&Value>,
        unchanged: bool,
        path: &[Segment],
        errors: &mut Vec<(Vec<Segment>, String)>,
    ) {
        let as_typed = |value: &Value| {
            let mut value = value.clone();
            numbers_as_doubles(&mut value, &self.schema);
            value
        };
        let typed_old = old.map(as_typed);
        let Err(failures) =
            kube_cel::validate_compiled(&self.compiled, &as_typed(value), typed_old.as_ref())
        else {
            return;
        };
        // Ratcheting: an update that leaves the value as it was keeps rules without `oldSelf`
        // from failing it (`unchanged`).
        // The apiserver shows scalar values, not objects and lists.
        let shown = |kind: &str| match go_value(value) {
            Some(value) => format!("{kind}: {value}"),
            None => kind.to_owned(),
        };
        for failure in failures.iter() {
            let rule = self.rules.iter().find(|rule| rule.compiled == failure.rule);
            let (at, body) = match (&failure.kind, rule) {
                (ErrorKind::ValidationFailure, Some(rule)) => {
                    if unchanged && !rule.uses_old_self {
                        continue;
                    }
                    let message = rule.message_of(&failure.message);
                    let body = match rule.reason.as_deref() {
                        Some("FieldValueForbidden") => format!("Forbidden: {message}"),
                        Some("FieldValueRequired") => format!("Required value: {message}"),
                        Some("FieldValueDuplicate") => shown("Duplicate value"),
                        _ => format!("{}: {message}", shown("Invalid value")),
                    };
                    (&rule.field_path[..], body)
                }
                // Runtime errors show the node's type where failures show its value.
                (ErrorKind::EvaluationError, Some(rule)) => (
                    &[][..],
                    format!(
                        "Invalid value: {}: {} evaluating rule: {}",
                        go_quote(&self.ty),
                        runtime_error(failure),
                        rule.error_string()
                    ),
                ),
                // Compile errors, unsupported functions, non-boolean results: the rule could
                // not be evaluated here, and the object is not taken for valid.
                _ => (
                    &[][..],
                    format!("Invalid value: {}: {}", go_quote(&self.ty), failure.message),
                ),
            };
            let mut path = path.to_vec();
            path.extend(at.iter().cloned());
            errors.push((path, body));
        }
    }
}

/// A scalar value as the apiserver prints it in an error (Go's `%q` for strings, `%v` for the
/// rest); `None` for objects and lists, which it leaves out.
fn go_value(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("null".to_owned()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) if !n.is_f64() => i.to_string(),
            (_, Some(u), _) if !n.is_f64() => u.to_string(),
            (_, _, Some(f)) => go_float(f),
            _ => n.to_string(),
        }),
        Value::String(s) => Some(go_quote(s)),
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// Go's `%v` of a float64: the shortest representation, with an exponent below 1e-4 and from
/// 1e6 on (`1e+06`, `1.5e-05`).
fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".to_owned()
        } else if f > 0.0 {
            "+Inf".to_owned()
        } else {
            "-Inf".to_owned()
        };
    }
    // Rust's `{:e}` is the shortest representation too: `1.5e-5`, `1e21`.
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        format!("{f}")
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

/// Go's `%q` of a string.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl RuleInfo {
    /// The message the apiserver reports from `evaluated` (what `kube-cel` made of
    /// `messageExpression` and `message`): a `messageExpression` result trimmed; `message` if
    /// the result is empty, multi-line or too long.
    fn message_of(&self, evaluated: &str) -> String {
        if !self.has_message_expression || evaluated == self.message {
            return self.message.clone();
        }
        let trimmed = evaluated.trim();
        if trimmed.is_empty()
            || trimmed.contains(['\n', '\r'])
            || trimmed.len() > MAX_MESSAGE_EXPRESSION_BYTES
        {
            self.message.clone()
        } else {
            trimmed.to_owned()
        }
    }

    /// The rule in runtime errors: its message if it has one, its expression otherwise.
    fn error_string(&self) -> &str {
        if self.message.starts_with("failed rule: ") {
            self.rule.trim()
        } else {
            self.message.trim()
        }
    }
}

/// A CEL runtime error in cel-go's words where they are known, `kube-cel`'s otherwise.
fn runtime_error(failure: &ValidationError) -> String {
    let cause =
        std::error::Error::source(failure).and_then(|cause| cause.downcast_ref::<ExecutionError>());
    match cause {
        Some(ExecutionError::NoSuchKey(key)) => format!("no such key: {key}"),
        Some(ExecutionError::DivisionByZero(_)) => "division by zero".to_owned(),
        Some(ExecutionError::RemainderByZero(_)) => "modulus by zero".to_owned(),
        Some(cause) => cause.to_string(),
        None => failure.message.clone(),
    }
}

/// `expression` with each reference to the variable `oldSelf` replaced by `with` (not field
/// selections `x.oldSelf`, string literals or comments).
fn replace_old_self(expression: &str, with: &str) -> String {
    let chars: Vec<char> = expression.chars().collect();
    let mut out = String::with_capacity(expression.len());
    let mut i = 0;
    // The last character read outside whitespace, comments and literals.
    let mut previous = ' ';
    // Whether `previous` ends an identifier that is a raw-string prefix (`r`, `br`, ...).
    let mut raw_prefix = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            let end = chars[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(chars.len(), |n| i + n);
            out.extend(&chars[i..end]);
            i = end;
        } else if c == '\'' || c == '"' {
            let raw = raw_prefix;
            let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
            let quote_len = if triple { 3 } else { 1 };
            let mut end = i + quote_len;
            while end < chars.len() {
                if chars[end] == '\\' && !raw {
                    end += 2;
                } else if chars[end] == c
                    && (!triple
                        || (chars.get(end + 1) == Some(&c) && chars.get(end + 2) == Some(&c)))
                {
                    end += quote_len;
                    break;
                } else {
                    end += 1;
                }
            }
            let end = end.min(chars.len());
            out.extend(&chars[i..end]);
            previous = c;
            raw_prefix = false;
            i = end;
        } else if c.is_alphabetic() || c == '_' {
            let end = chars[i..]
                .iter()
                .position(|&c| !(c.is_alphanumeric() || c == '_'))
                .map_or(chars.len(), |n| i + n);
            let word: String = chars[i..end].iter().collect();
            if word == "oldSelf" && previous != '.' {
                out.push_str(with);
            } else {
                out.push_str(&word);
            }
            raw_prefix = matches!(word.to_ascii_lowercase().as_str(), "r" | "br" | "rb");
            previous = chars[end - 1];
            i = end;
        } else {
            out.push(c);
            if !c.is_whitespace() {
                previous = c;
            }
            raw_prefix = false;
            i += 1;
        }
    }
    out
}

/// A rule's `fieldPath` (`.a.b`, `.a['b.c']`, `.list[0]`) as segments.
fn field_path(path: &str) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut rest = path.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            segments.push(Segment::Field(after[..end].to_owned()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("['") {
            let end = after.find("']").unwrap_or(after.len());
            segments.push(Segment::Field(after[..end].to_owned()));
            rest = after.get(end + 2..).unwrap_or_default();
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').unwrap_or(after.len());
            match after[..end].parse() {
                Ok(i) => segments.push(Segment::Index(i)),
                Err(_) => segments.push(Segment::Field(after[..end].to_owned())),
            }
            rest = after.get(end + 1..).unwrap_or_default();
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            segments.push(Segment::Field(rest[..end].to_owned()));
            rest = &rest[end..];
        }
    }
    segments
}

/// The child schemas of a schema node.
fn children_mut(schema: &mut Map<String, Value>) -> impl Iterator<Item = &mut Value> {
    schema.iter_mut().flat_map(|(key, value)| {
        let children: Vec<&mut Value> = match (key.as_str(), value) {
            ("properties", Value::Object(properties)) => properties.values_mut().collect(),
            ("items" | "additionalProperties" | "not", child @ Value::Object(_)) => vec![child],
            ("allOf" | "anyOf" | "oneOf", Value::Array(branches)) => branches.iter_mut().collect(),
            _ => Vec::new(),
        };
        children
    })
}

/// Removes the rules of every node below `schema` (each node's rules are compiled on their own).
fn strip_rules_below(schema: &mut Value) {
    fn strip(schema: &mut Value) {
        if let Value::Object(object) = schema {
            object.remove(VALIDATIONS);
            children_mut(object).for_each(strip);
        }
    }
    if let Value::Object(object) = schema {
        children_mut(object).for_each(strip);
    }
}

/// Drops the `null` fields whose schema is not `nullable` (the apiserver prunes them).
fn drop_nulls(value: &mut Value, schema: &Value) {
    let nullable = |schema: Option<&Value>| {
        schema
            .and_then(|s| s.get("nullable"))
            .and_then(Value::as_bool)
            == Some(true)
    };
    match value {
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|s| s.is_object());
            let child_schema = |key: &str| properties.and_then(|p| p.get(key)).or(additional);
            object.retain(|key, value| !value.is_null() || nullable(child_schema(key)));
            for (key, value) in object.iter_mut() {
                if let Some(schema) = child_schema(key) {
                    drop_nulls(value, schema);
                }
            }
        }
        Value::Array(items) => {
            if let Some(schema) = schema.get("items") {
                items.iter_mut().for_each(|item| drop_nulls(item, schema));
            }
        }
        _ => {}
    }
}

/// Makes the numbers of `type: number` nodes doubles, as the apiserver types them for CEL.
fn numbers_as_doubles(value: &mut Value, schema: &Value) {
    match value {
        Value::Number(number) if schema.get("type").and_then(Value::as_str) == Some("number") => {
            if let Some(double) = number
                .as_f64()
                .filter(|_| !number.is_f64())
                .and_then(serde_json::Number::from_f64)
            {
                *number = double;
            }
        }
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|s| s.is_object());
            for (key, value) in object.iter_mut() {
                if let Some(schema) = properties.and_then(|p| p.get(key)).or(additional) {
                    numbers_as_doubles(value, schema);
                }
            }
        }
        Value::Array(items) => {
            if let Some(schema) = schema.get("items") {
                items
                    .iter_mut()
                    .for_each(|item| numbers_as_doubles(item, schema));
            }
        }
        _ => {}
    }
}

/// Evaluates the admission rule `rule` on `object` (its old version: `old`) and `input` with
/// `kube-cel`'s ValidatingAdmissionPolicy evaluator: `Err` with the message when it fails (or
/// cannot be evaluated, which a `Fail` policy refuses too). `None`: not evaluated here (never
/// with the `cel` feature).
#[allow(
    clippy::unnecessary_wraps,
    reason = "the signature of `no_cel.rs`'s twin"
)]
pub(crate) fn admission_rule(
    rule: &super::admission::AdmissionRuleInfo,
    object: &Value,
    old: Option<&Value>,
    input: &super::admission::AdmissionInput,
) -> Option<Result<(), String>> {
    let (username, groups) = input.user.clone().unwrap_or_default();
    let request = kube_cel::AdmissionRequest {
        operation: input.operation.to_owned(),
        username,
        groups,
        name: input.name.clone(),
        namespace: input.namespace.clone(),
        dry_run: input.dry_run,
        kind: kube_cel::GroupVersionKind {
            group: input.group.to_owned(),
            version: input.version.to_owned(),
            kind: input.kind.to_owned(),
        },
        resource: kube_cel::GroupVersionResource {
            group: input.group.to_owned(),
            version: input.version.to_owned(),
            resource: input.plural.to_owned(),
        },
        ..kube_cel::AdmissionRequest::default()
    };
    let mut evaluator = kube_cel::VapEvaluator::builder()
        .object(object.clone())
        .request(request);
    if let Some(old) = old {
        evaluator = evaluator.old_object(old.clone());
    }
    let expression = kube_cel::VapExpression {
        expression: rule.cel.to_owned(),
        message: Some(rule.default_message()),
        message_expression: rule.message_expression.map(str::to_owned),
    };
    let result = evaluator.build().evaluate(&[expression]).into_iter().next();
    Some(match result {
        Some(r) if r.passed => Ok(()),
        Some(r) => Err(r.message.unwrap_or_else(|| rule.default_message())),
        None => Err(rule.default_message()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "x-kubernetes-validations": [
                        {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                        {"rule": "!has(self.name) || self.name.size() < 4", "reason": "FieldValueForbidden", "fieldPath": ".name",
                         "messageExpression": "'name ' + self.name + ' is too long'"},
                    ],
                    "properties": {
                        "min": {"type": "integer", "default": 0},
                        "max": {"type": "integer", "default": 10},
                        "name": {"type": "string"},
                        "ratio": {"type": "number", "x-kubernetes-validations": [{"rule": "self == 1.0"}]},
                        "frozen": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "frozen"}]},
                        "grow": {"type": "integer", "x-kubernetes-validations": [{
                            "rule": "!oldSelf.hasValue() || self >= oldSelf.value()",
                            "optionalOldSelf": true, "messageExpression": "oldSelf.hasValue() ? 'shrank' : 'new'"}]},
                        "items": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
                                      "x-kubernetes-validations": [{"rule": "self.n >= oldSelf.n", "message": "n shrank"}]},
                        },
                        "labels": {"type": "object", "additionalProperties": {"type": "string",
                            "x-kubernetes-validations": [{"rule": "self != ''", "reason": "FieldValueRequired", "message": "empty"}]}},
                        "maybe": {"type": "string", "nullable": true, "x-kubernetes-validations": [{"rule": "self == 'x'"}]},
                    }
                }
            }
        })
    }

    fn run(rules: &KindRules, new: Value, old: Option<Value>) -> Vec<String> {
        let ctx = match &old {
            Some(old) => ValidationContext::update(old),
            None => ValidationContext::create(),
        };
        let mut report = Report::new();
        rules.check(&new, &ctx, &mut Path::empty, &mut report, 0);
        report
            .iter()
            .map(|(path, error)| format!("{path}: {error}"))
            .collect()
    }

    #[test]
    fn rules_should_be_reported_in_the_apiservers_words() {
        let rules = KindRules::new(&schema());
        assert!(!rules.is_empty());
        assert!(
            run(&rules, json!({"spec": {}}), None).is_empty(),
            "defaults"
        );
        assert_eq!(
            run(
                &rules,
                json!({"spec": {"min": 5, "max": 1, "name": "long"}}),
                None
            ),
            [
                "spec: Invalid value: min must not exceed max",
                "spec.name: Forbidden: name long is too long",
            ]
        );
        assert!(run(&rules, json!({"spec": {"ratio": 1}}), None).is_empty());
        assert_eq!(
            run(&rules, json!({"spec": {"ratio": 2}}), None),
            ["spec.ratio: Invalid value: 2: failed rule: self == 1.0"]
        );
        assert_eq!(
            run(&rules, json!({"spec": {"labels": {"a.b": ""}}}), None),
            ["spec.labels[a.b]: Required value: empty"]
        );
        assert!(run(&rules, json!({"spec": {"maybe": null, "min": null}}), None).is_empty());
    }

    #[test]
    fn transition_rules_should_see_the_old_value_at_the_same_place() {
        let rules = KindRules::new(&schema());
        let old = json!({"spec": {"frozen": "a", "grow": 2, "items": [{"name": "a", "n": 1}, {"name": "b", "n": 5}]}});
        assert!(
            run(&rules, old.clone(), None).is_empty(),
            "create skips them"
        );
        assert_eq!(
            run(&rules, old.clone(), Some(old.clone())),
            Vec::<String>::new()
        );
        let new = json!({"spec": {"frozen": "b", "grow": 1, "items": [{"name": "b", "n": 5}, {"name": "c", "n": 0}, {"name": "a", "n": 0}]}});
        assert_eq!(
            run(&rules, new, Some(old)),
            [
                "spec.frozen: Invalid value: \"b\": frozen",
                "spec.grow: Invalid value: 1: shrank",
                "spec.items[2]: Invalid value: n shrank",
            ]
        );
    }

    #[test]
    fn unchanged_values_should_be_ratcheted() {
        let rules = KindRules::new(&schema());
        let old = json!({"spec": {"min": 5, "max": 1}});
        assert_eq!(run(&rules, old.clone(), None).len(), 1);
        assert!(run(&rules, old.clone(), Some(old.clone())).is_empty());
        assert_eq!(
            run(&rules, json!({"spec": {"min": 6, "max": 1}}), Some(old)).len(),
            1
        );
    }

    #[test]
    fn old_self_should_be_replaced_outside_literals_and_selections() {
        assert_eq!(
            replace_old_self(
                r#"oldSelf.hasValue() && self.oldSelf == 'oldSelf' && r"\oldSelf" != oldSelf.value() // oldSelf"#,
                "X"
            ),
            r#"X.hasValue() && self.oldSelf == 'oldSelf' && r"\oldSelf" != X.value() // oldSelf"#
        );
        assert_eq!(
            replace_old_self(r#"'''it's oldSelf''' + "\"" + oldSelfish + (oldSelf)"#, "X"),
            r#"'''it's oldSelf''' + "\"" + oldSelfish + (X)"#
        );
    }

    #[test]
    fn values_should_be_shown_as_go_shows_them() {
        assert_eq!(go_value(&json!("a\"b")).as_deref(), Some(r#""a\"b""#));
        assert_eq!(go_value(&json!(-1)).as_deref(), Some("-1"));
        assert_eq!(go_value(&json!(1.5)).as_deref(), Some("1.5"));
        assert_eq!(go_value(&json!(2.0)).as_deref(), Some("2"));
        assert_eq!(go_value(&json!(1_000_000.0)).as_deref(), Some("1e+06"));
        assert_eq!(go_value(&json!(123_456.0)).as_deref(), Some("123456"));
        assert_eq!(go_value(&json!(0.000_015)).as_deref(), Some("1.5e-05"));
        assert_eq!(go_value(&json!({"a": 1})), None);
    }

    #[test]
    fn field_paths_should_parse() {
        let rendered = |path: &str| {
            field_path(path)
                .iter()
                .map(|s| match s {
                    Segment::Field(f) => format!("F{f}"),
                    Segment::Index(i) => format!("I{i}"),
                    Segment::Key(k) => format!("K{k}"),
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(rendered(".a.b"), "Fa Fb");
        assert_eq!(rendered(".a['b.c'][2]"), "Fa Fb.c I2");
    }

    #[test]
    fn a_kind_without_rules_should_compile_to_nothing() {
        let rules =
            KindRules::new(&json!({"type": "object", "properties": {"spec": {"type": "object"}}}));
        assert!(rules.is_empty());
    }

    /// A kind's schema with rules on its root (`root_rule(..)`).
    fn root_rules() -> KindRules {
        let replicas = json!({"type": "object", "properties": {"replicas": {"type": "integer"}}});
        KindRules::new(&crate::crd::kind_schema(
            replicas.clone(),
            Some(replicas),
            vec![
                json!({"rule": "self.metadata.name.startsWith('web-')", "message": "bad name"}),
                json!({"rule": "!has(self.status) || self.status.replicas <= self.spec.replicas",
                       "message": "status exceeds spec"}),
                // The apiserver refuses to compile it; here it shows what the rules see.
                json!({"rule": "!has(self.metadata.labels) && !has(self.metadata.namespace)",
                       "message": "metadata not cut"}),
            ],
        ))
    }

    #[test]
    fn root_rules_should_see_the_object_with_only_the_name_of_its_metadata() {
        let rules = root_rules();
        let object = |name: &str, status: u32| {
            json!({"apiVersion": "g.dev/v1", "kind": "Web",
                   "metadata": {"name": name, "namespace": "ns", "labels": {"a": "b"}},
                   "spec": {"replicas": 2}, "status": {"replicas": status}})
        };
        assert!(run(&rules, object("web-a", 2), None).is_empty());
        assert_eq!(
            run(&rules, object("a", 3), None),
            [
                ": Invalid value: bad name",
                ": Invalid value: status exceeds spec"
            ]
        );
        // A status update that breaks the rule; one that changes only the labels is not
        // ratcheted (the object changed), one that changes nothing is.
        assert_eq!(
            run(&rules, object("web-a", 3), Some(object("web-a", 2))),
            [": Invalid value: status exceeds spec"]
        );
        let mut relabelled = object("web-a", 3);
        relabelled["metadata"]["labels"] = json!({"a": "c"});
        assert_eq!(
            run(&rules, relabelled, Some(object("web-a", 3))),
            [": Invalid value: status exceeds spec"]
        );
        assert!(run(&rules, object("web-a", 3), Some(object("web-a", 3))).is_empty());
    }
}
