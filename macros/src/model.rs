//! Model: the typed, defaulted kind options (printer columns, scale, rules, ... as typed values),
//! built from the attribute structs of `attrs.rs` in one place: every default of a key is applied
//! here and nowhere else. Spans are kept for `validate.rs`.

use proc_macro2::Span;
use syn::{LitStr, Type};

use crate::attrs::{
    AdmissionPolicyAttrs, AdmissionRuleAttrs, DeprecatedAttrs, KeyValueAttrs, KindAttrs,
    PrintColumnAttrs, RuleAttrs, ScaleAttrs, SchemaAttrs, SelectableFieldAttrs,
};
pub use crate::attrs::{OneOf, OneOfKind};
use crate::errors::Errors;
use crate::keys::Keyed;
pub use jsonpath::{ColumnStep, Filter, Operand, parse_column_path};

mod jsonpath;
pub mod reads;
pub mod selector;

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
    pub printcolumns: Vec<PrintColumn>,
    pub scale: Option<Scale>,
    pub rules: Vec<Rule>,
    /// `root_rule(..)`: rules on the root of the CRD's schema (`self` is the whole object).
    pub root_rules: Vec<Rule>,
    /// `admission_rule(..)`: the rules of the kind's ValidatingAdmissionPolicy.
    pub admission_rules: Vec<AdmissionRule>,
    /// `admission_policy(..)`, defaults applied.
    pub admission_policy: AdmissionPolicy,
    pub selectable_fields: Vec<JsonPath>,
    pub labels: Vec<KeyValue>,
    pub annotations: Vec<KeyValue>,
    /// `Some(warning)` when the version is deprecated (`""`: no warning).
    pub deprecated: Option<String>,
    pub served: bool,
    pub storage: bool,
    pub crate_path: syn::Path,
    /// `exactly_one_of` & co. over fields of the spec.
    pub one_ofs: Vec<OneOf>,
    /// `optional_spec`: the CRD does not require `spec` (the spec type must be `Default`).
    pub optional_spec: Option<Span>,
    /// `webhooks(..)`: the webhooks asked for explicitly, and their settings.
    pub webhooks: Webhooks,
    /// `conversion(hub = .., generate)`: the storage version this version converts to and from.
    pub conversion: Option<Conversion>,
}

/// `conversion(hub = .., generate)` and the spec's `#[convert(from = "..")]` renames.
pub struct Conversion {
    pub hub: Type,
    pub generate: bool,
    /// `(JSON name here, JSON name in the hub)`, filled in by the pipeline from the fields.
    pub renames: Vec<(String, String)>,
}

/// `webhooks(..)`, defaults applied: the traits the kind must implement (with the span of the
/// key, where a missing impl is reported) and the settings of its webhook configurations.
pub struct Webhooks {
    pub validate: Option<Span>,
    pub validate_delete: Option<Span>,
    pub default: Option<Span>,
    pub failure_policy: String,
    pub side_effects: String,
    pub timeout_seconds: u8,
    /// `CREATE` and/or `UPDATE`.
    pub operations: Vec<String>,
    pub match_policy: String,
    pub reinvocation_policy: String,
    /// `Skip` (default) or `Send`: whether metadata-only updates reach the hooks.
    pub metadata_updates: String,
    pub namespace_selector: Option<selector::Selector>,
    pub object_selector: Option<selector::Selector>,
}

/// One of `allowed` (else an error at the literal and `default`).
fn choice(lit: Option<LitStr>, allowed: &[&str], default: &str, errors: &mut Errors) -> String {
    let Some(lit) = lit else {
        return default.to_owned();
    };
    let value = lit.value();
    if !allowed.contains(&value.as_str()) {
        errors.at(
            lit.span(),
            format!(
                "expected one of {}",
                allowed
                    .iter()
                    .map(|a| format!("\"{a}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        return default.to_owned();
    }
    value
}

impl Webhooks {
    fn from_attrs(
        attrs: Option<crate::keys::Keyed<crate::attrs::WebhooksAttrs>>,
        errors: &mut Errors,
    ) -> Self {
        let attrs = attrs.map(|a| a.value).unwrap_or_default();
        let timeout_seconds = match attrs.timeout_seconds {
            Some(t) if (1..=30).contains(&t.value) => t.value as u8,
            Some(t) => {
                errors.at(
                    t.key,
                    "`timeout_seconds` must be between 1 and 30 (the apiserver's limits)",
                );
                10
            }
            None => 10,
        };
        let operations = match attrs.operations {
            None => vec!["CREATE".to_owned(), "UPDATE".to_owned()],
            Some(list) => operations(list, errors),
        };
        let selector = |lit: Option<LitStr>, errors: &mut Errors| {
            let lit = lit?;
            match selector::parse(&lit.value()) {
                Ok(s) => Some(s),
                Err(e) => {
                    errors.at(lit.span(), e);
                    None
                }
            }
        };
        Self {
            validate: attrs.validate.filter(|v| v.value).map(|v| v.key),
            validate_delete: attrs.validate_delete.filter(|v| v.value).map(|v| v.key),
            default: attrs.default.filter(|v| v.value).map(|v| v.key),
            failure_policy: choice(attrs.failure_policy, &["Fail", "Ignore"], "Fail", errors),
            side_effects: choice(
                attrs.side_effects,
                &["None", "NoneOnDryRun"],
                "None",
                errors,
            ),
            timeout_seconds,
            operations,
            match_policy: choice(
                attrs.match_policy,
                &["Equivalent", "Exact"],
                "Equivalent",
                errors,
            ),
            reinvocation_policy: choice(
                attrs.reinvocation_policy,
                &["IfNeeded", "Never"],
                "IfNeeded",
                errors,
            ),
            metadata_updates: choice(attrs.metadata_updates, &["Skip", "Send"], "Skip", errors),
            namespace_selector: selector(attrs.namespace_selector, errors),
            object_selector: selector(attrs.object_selector, errors),
        }
    }
}

/// `operations = [..]`: `CREATE` and `UPDATE`, once each, at least one; `DELETE` comes from
/// `DeleteValidator` (said at the literal).
fn operations(list: Vec<LitStr>, errors: &mut Errors) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for lit in &list {
        let value = lit.value();
        match value.as_str() {
            "CREATE" | "UPDATE" if !out.contains(&value) => out.push(value),
            "CREATE" | "UPDATE" => errors.at(lit.span(), format!("`{value}` is listed twice")),
            "DELETE" => errors.at(
                lit.span(),
                "deletes are validated by implementing `DeleteValidator` (a webhook of its own, \
                 registered only then); `operations` lists `CREATE` and `UPDATE`",
            ),
            _ => errors.at(lit.span(), "expected \"CREATE\" or \"UPDATE\""),
        }
    }
    if out.is_empty() {
        if list.is_empty() {
            errors.at(
                proc_macro2::Span::call_site(),
                "`operations` needs \"CREATE\", \"UPDATE\" or both",
            );
        }
        return vec!["CREATE".to_owned(), "UPDATE".to_owned()];
    }
    out
}

impl Kind {
    /// Whether `path` is marked `unchecked` (in any printer column, scale or selectable field
    /// that names it): it is not resolved at compile time.
    pub fn is_unchecked(&self, path: &str) -> bool {
        let columns = self.printcolumns.iter().map(|c| &c.json_path);
        let scale = self.scale.iter().flat_map(Scale::paths);
        columns
            .chain(scale)
            .chain(&self.selectable_fields)
            .any(|p| p.unchecked && p.lit.value() == path)
    }
}

/// A JSONPath of the kind (printer column, scale, selectable field). Printer columns take what
/// the apiserver's table printer parses ([`parse_column_path`]); scale paths and selectable fields
/// are simple paths ([`parse_path`]).
pub struct JsonPath {
    pub lit: LitStr,
    /// `unchecked`: not resolved at compile time.
    pub unchecked: bool,
}

/// An additional printer column.
pub struct PrintColumn {
    pub name: LitStr,
    pub json_path: JsonPath,
    pub type_: LitStr,
    pub format: Option<LitStr>,
    pub description: Option<LitStr>,
    pub priority: i32,
}

impl PrintColumn {
    /// `None` when a required key is missing (already reported by the parser).
    fn from_attrs(attrs: PrintColumnAttrs) -> Option<Self> {
        Some(PrintColumn {
            name: attrs.name?,
            json_path: JsonPath {
                lit: attrs.json_path?,
                unchecked: attrs.unchecked,
            },
            type_: attrs.type_?,
            format: attrs.format,
            description: attrs.description,
            priority: attrs
                .priority
                .map_or(0, |p| i32::try_from(p.value).unwrap_or(i32::MAX)),
        })
    }
}

/// The scale subresource.
pub struct Scale {
    /// The `scale` key, where errors about the whole subresource point.
    pub span: Span,
    pub spec: JsonPath,
    pub status: JsonPath,
    pub selector: Option<JsonPath>,
}

impl Scale {
    fn from_attrs(attrs: Keyed<ScaleAttrs>) -> Option<Self> {
        let Keyed { value: a, key } = attrs;
        let path = |lit| JsonPath {
            lit,
            unchecked: a.unchecked,
        };
        Some(Scale {
            span: key,
            spec: path(a.spec?),
            status: path(a.status?),
            selector: a.selector.map(path),
        })
    }

    /// The paths in the order they are checked: spec, status, selector.
    pub fn paths(&self) -> impl Iterator<Item = &JsonPath> {
        [&self.spec, &self.status].into_iter().chain(&self.selector)
    }
}

/// A CEL validation rule (`x-kubernetes-validations`).
#[derive(Clone)]
pub struct Rule {
    pub cel: LitStr,
    pub message: Option<LitStr>,
    pub message_expression: Option<LitStr>,
    pub reason: Option<LitStr>,
    pub field_path: Option<LitStr>,
    pub optional_old_self: Option<bool>,
    /// The estimated costs of the rule and of its message expression with `self` typed, set by
    /// the typed check (`cel::check_typed`) and emitted next to the rule for the runtime's
    /// CRD-wide cost check; shared by clones, since the check may see a clone.
    pub costs: std::rc::Rc<std::cell::Cell<Option<RuleCosts>>>,
}

/// The estimated costs of a rule (and of its message expression), before any cardinality.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleCosts {
    pub rule: u64,
    pub message_expression: Option<u64>,
}

impl Rule {
    /// `None` without `cel` (already reported by the parser).
    pub fn from_attrs(attrs: RuleAttrs) -> Option<Self> {
        Some(Rule {
            cel: attrs.cel?,
            message: attrs.message,
            message_expression: attrs.message_expression,
            reason: attrs.reason,
            field_path: attrs.field_path,
            optional_old_self: attrs.optional_old_self,
            costs: std::rc::Rc::default(),
        })
    }
}

/// An `admission_rule(..)`, defaults applied.
pub struct AdmissionRule {
    pub cel: LitStr,
    pub message: Option<LitStr>,
    pub message_expression: Option<LitStr>,
    /// `Invalid`, `Forbidden`, `Unauthorized` or `RequestEntityTooLarge`.
    pub reason: String,
    /// `CREATE`, `UPDATE` and/or `DELETE`, in that order.
    pub operations: Vec<String>,
}

/// The operations an admission rule may check, in the order the policy lists them.
pub const ADMISSION_OPERATIONS: &[&str] = &["CREATE", "UPDATE", "DELETE"];

impl AdmissionRule {
    /// `None` without `cel` (already reported by the parser).
    fn from_attrs(attrs: AdmissionRuleAttrs, errors: &mut Errors) -> Option<Self> {
        let cel = attrs.cel?;
        let reason = choice(
            attrs.reason,
            &[
                "Invalid",
                "Forbidden",
                "Unauthorized",
                "RequestEntityTooLarge",
            ],
            "Invalid",
            errors,
        );
        let operations = match attrs.operations {
            Some(lits) => admission_operations(&lits, errors),
            // A rule that reads `oldObject` fails on a create, where it is `null`.
            None if reads::reads(&cel.value())
                .unwrap_or_default()
                .iter()
                .any(|r| r.split('.').next() == Some("oldObject")) =>
            {
                vec!["UPDATE".to_owned()]
            }
            None => vec!["CREATE".to_owned(), "UPDATE".to_owned()],
        };
        Some(AdmissionRule {
            cel,
            message: attrs.message,
            message_expression: attrs.message_expression,
            reason,
            operations,
        })
    }
}

/// `operations = [..]`: known, each once, at least one; in [`ADMISSION_OPERATIONS`] order.
fn admission_operations(lits: &[LitStr], errors: &mut Errors) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for lit in lits {
        let op = lit.value();
        if !ADMISSION_OPERATIONS.contains(&op.as_str()) {
            errors.spanned(lit, "expected one of \"CREATE\", \"UPDATE\", \"DELETE\"");
        } else if seen.contains(&op) {
            errors.spanned(lit, format!("`{op}` is named twice"));
        } else {
            seen.push(op);
        }
    }
    if lits.is_empty() {
        errors.at(
            Span::call_site(),
            "`operations` needs at least one of \"CREATE\", \"UPDATE\", \"DELETE\"",
        );
    }
    ADMISSION_OPERATIONS
        .iter()
        .filter(|op| seen.iter().any(|s| s == *op))
        .map(|op| (*op).to_owned())
        .collect()
}

/// `admission_policy(..)`, defaults applied.
pub struct AdmissionPolicy {
    /// The key, when written (an error without `admission_rule`s).
    pub key: Option<Span>,
    /// `Fail` or `Ignore`.
    pub failure_policy: String,
    /// `Deny`, `Warn`, `Audit`.
    pub validation_actions: Vec<String>,
    pub namespace_selector: Option<(LitStr, selector::Selector)>,
}

impl AdmissionPolicy {
    fn from_attrs(attrs: Option<Keyed<AdmissionPolicyAttrs>>, errors: &mut Errors) -> Self {
        let key = attrs.as_ref().map(|a| a.key);
        let attrs = attrs.map(|a| a.value).unwrap_or_default();
        let mut actions: Vec<String> = Vec::new();
        for lit in attrs.validation_actions.iter().flatten() {
            let action = choice(Some(lit.clone()), &["Deny", "Warn", "Audit"], "", errors);
            if actions.contains(&action) {
                errors.spanned(lit, format!("`{action}` is named twice"));
            } else if action == "Warn" && actions.iter().any(|a| a == "Deny")
                || action == "Deny" && actions.iter().any(|a| a == "Warn")
            {
                errors.spanned(
                    lit,
                    "`Deny` and `Warn` do not go together (the apiserver refuses the binding): a denied request already returns the message",
                );
            } else if !action.is_empty() {
                actions.push(action);
            }
        }
        if actions.is_empty() {
            if attrs.validation_actions.as_ref().is_some_and(Vec::is_empty) {
                errors.at(
                    key.unwrap_or_else(Span::call_site),
                    "`validation_actions` needs at least one of \"Deny\", \"Warn\", \"Audit\"",
                );
            }
            actions.push("Deny".to_owned());
        }
        let namespace_selector =
            attrs
                .namespace_selector
                .and_then(|lit| match selector::parse(&lit.value()) {
                    Ok(parsed) => Some((lit, parsed)),
                    Err(message) => {
                        errors.spanned(&lit, message);
                        None
                    }
                });
        AdmissionPolicy {
            key,
            failure_policy: choice(attrs.failure_policy, &["Fail", "Ignore"], "Fail", errors),
            validation_actions: actions,
            namespace_selector,
        }
    }
}

/// `exactly_one_of`, `at_most_one_of`, `at_least_one_of` (read in `attrs.rs`) as the schema marker
/// the structural pass turns into a CEL rule (`[has(self.a), has(self.b)].filter(x, x).size() ==
/// 1`, with a message that names the fields).
impl OneOf {
    pub fn json(&self) -> serde_json::Value {
        let kind = match self.kind {
            OneOfKind::Exactly => "exactly",
            OneOfKind::AtMost => "at_most",
            OneOfKind::AtLeast => "at_least",
        };
        let fields: Vec<String> = self.fields.iter().map(LitStr::value).collect();
        serde_json::json!({ "kind": kind, "fields": fields })
    }
}

fn rules(attrs: Vec<RuleAttrs>) -> Vec<Rule> {
    attrs.into_iter().filter_map(Rule::from_attrs).collect()
}

/// A label or annotation of the CRD object.
pub struct KeyValue {
    pub key: LitStr,
    pub value: LitStr,
}

fn key_values(attrs: Vec<KeyValueAttrs>) -> Vec<KeyValue> {
    attrs
        .into_iter()
        .filter_map(|a| {
            Some(KeyValue {
                key: a.key?,
                value: a.value?,
            })
        })
        .collect()
}

fn selectable_field(attrs: SelectableFieldAttrs) -> Option<JsonPath> {
    Some(JsonPath {
        lit: attrs.json_path?,
        unchecked: attrs.unchecked,
    })
}

fn deprecated(attrs: Option<DeprecatedAttrs>) -> Option<String> {
    attrs.map(|d| d.warning.as_ref().map(LitStr::value).unwrap_or_default())
}

pub fn default_crate() -> syn::Path {
    syn::parse_quote!(::kubeforge)
}

/// Builds the kind model; missing required keys are reported at `call_site` (the attribute).
pub fn kind(attrs: KindAttrs, errors: &mut Errors) -> Option<Kind> {
    required_keys(&attrs, errors);
    let scope = scope(&attrs, errors);
    // With the kind known, missing group/version (already reported) get placeholders so that the
    // root type can still be emitted and the user's other code does not fail in cascade.
    let placeholder = |s: &str| LitStr::new(s, Span::call_site());
    let kind = attrs.kind?;
    let lower = kind.value().to_lowercase();
    let singular = attrs
        .singular
        .as_ref()
        .map_or_else(|| lower.clone(), LitStr::value);
    let plural = attrs
        .plural
        .as_ref()
        .map_or_else(|| kubeforge_shared::names::plural(&lower), LitStr::value);
    served_storage(attrs.served.as_ref(), attrs.storage.as_ref(), errors);
    Some(Kind {
        group: attrs
            .group
            .unwrap_or_else(|| placeholder("invalid.kubeforge.dev")),
        version: attrs.version.unwrap_or_else(|| placeholder("v1")),
        kind,
        plural,
        singular,
        scope,
        status: attrs.status,
        shortnames: attrs.shortnames,
        categories: attrs.categories,
        printcolumns: attrs
            .printcolumns
            .into_iter()
            .filter_map(PrintColumn::from_attrs)
            .collect(),
        scale: attrs.scale.and_then(Scale::from_attrs),
        rules: rules(attrs.rules),
        root_rules: rules(attrs.root_rules),
        admission_rules: attrs
            .admission_rules
            .into_iter()
            .filter_map(|a| AdmissionRule::from_attrs(a, errors))
            .collect(),
        admission_policy: AdmissionPolicy::from_attrs(attrs.admission_policy, errors),
        selectable_fields: attrs
            .selectable_fields
            .into_iter()
            .filter_map(selectable_field)
            .collect(),
        labels: key_values(attrs.labels),
        annotations: key_values(attrs.annotations),
        deprecated: deprecated(attrs.deprecated),
        served: attrs.served.is_none_or(|s| s.value),
        storage: attrs.storage.is_none_or(|s| s.value),
        crate_path: attrs.crate_path.unwrap_or_else(default_crate),
        one_ofs: attrs.one_ofs,
        optional_spec: attrs.optional_spec.filter(|o| o.value).map(|o| o.key),
        webhooks: Webhooks::from_attrs(attrs.webhooks, errors),
        conversion: attrs.conversion.and_then(|c| {
            let generate = c.value.generate;
            c.value.hub.map(|hub| Conversion {
                hub,
                generate,
                renames: Vec::new(),
            })
        }),
    })
}

fn required_keys(attrs: &KindAttrs, errors: &mut Errors) {
    for (value, key, example) in [
        (&attrs.group, "group", "\"apps.example.com\""),
        (&attrs.version, "version", "\"v1\""),
        (&attrs.kind, "kind", "\"WebApp\""),
    ] {
        if value.is_none() {
            errors.at(
                Span::call_site(),
                format!("missing key `{key}`: add `{key} = {example}` to #[custom_resource(...)]"),
            );
        }
    }
}

fn scope(attrs: &KindAttrs, errors: &mut Errors) -> Scope {
    let set = |flag: &Option<Keyed<bool>>| flag.as_ref().filter(|f| f.value).map(|f| f.key);
    match (set(&attrs.namespaced), set(&attrs.cluster)) {
        (Some(_), Some(cluster)) => {
            errors.at(
                cluster,
                "`cluster` and `namespaced` are both set; a kind has exactly one scope",
            );
            Scope::Namespaced
        }
        (_, Some(_)) => Scope::Cluster,
        (Some(_), _) => Scope::Namespaced,
        (None, None) => {
            errors.at(
                Span::call_site(),
                "missing scope: add `namespaced` or `cluster` to #[custom_resource(...)]",
            );
            Scope::Namespaced
        }
    }
}

/// `served = false` needs `storage = false`: the storage version must be served.
fn served_storage(
    served: Option<&Keyed<bool>>,
    storage: Option<&Keyed<bool>>,
    errors: &mut Errors,
) {
    if let Some(served) = served
        && !served.value
        && storage.is_none_or(|s| s.value)
    {
        errors.at(
            served.key,
            "the storage version must be served; add `storage = false` (another version stores)",
        );
    }
}

/// The typed options of `#[kubeforge::schema(...)]`.
pub struct Schema {
    pub rules: Vec<Rule>,
    pub crate_path: syn::Path,
    /// `exactly_one_of` & co. over fields of the struct.
    pub one_ofs: Vec<OneOf>,
}

pub fn schema(attrs: SchemaAttrs) -> Schema {
    Schema {
        rules: rules(attrs.rules),
        crate_path: attrs.crate_path.unwrap_or_else(default_crate),
        one_ofs: attrs.one_ofs,
    }
}

/// One step of a simple JSONPath (scale, selectable fields, a rule's `field_path`): a field name
/// and how many `[n]` indexes follow it.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_of_should_become_a_schema_marker() {
        let mut errors = Errors::default();
        let attrs = crate::attrs::parse_schema(
            quote::quote!(exactly_one_of = ["a", "x-y"], at_least_one_of = ["in", "b"]),
            &mut errors,
        );
        assert!(errors.messages().is_empty());
        let groups: Vec<serde_json::Value> = attrs.one_ofs.iter().map(OneOf::json).collect();
        assert_eq!(
            groups,
            [
                serde_json::json!({"kind": "exactly", "fields": ["a", "x-y"]}),
                serde_json::json!({"kind": "at_least", "fields": ["in", "b"]}),
            ]
        );
    }

    #[test]
    fn one_of_should_need_two_string_fields() {
        let mut errors = Errors::default();
        crate::attrs::parse_schema(
            quote::quote!(at_most_one_of = ["a"], exactly_one_of = [1, "b"]),
            &mut errors,
        );
        assert_eq!(
            errors.messages(),
            [
                "`at_most_one_of` needs at least two fields",
                "expected a string literal: a JSON field name",
            ]
        );
    }

    #[test]
    fn kind_should_report_missing_keys_and_double_scope() {
        let mut errors = Errors::default();
        let attrs =
            crate::attrs::parse_kind(quote::quote!(kind = "K", namespaced, cluster), &mut errors);
        assert!(
            kind(attrs, &mut errors).is_some(),
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

    #[test]
    fn kind_should_apply_the_defaults_of_every_key() {
        let mut errors = Errors::default();
        let attrs = crate::attrs::parse_kind(
            quote::quote!(group = "g.dev", version = "v1", kind = "Policy", cluster, deprecated,
                printcolumn(name = "R", json_path = ".spec.r", type = "integer", priority = 9999999999),
                scale(spec = ".spec.r", status = ".status.r", unchecked)),
            &mut errors,
        );
        let kind = kind(attrs, &mut errors).expect("a complete kind");
        assert!(errors.messages().is_empty());
        assert_eq!(
            (kind.singular.as_str(), kind.plural.as_str()),
            ("policy", "policies")
        );
        assert_eq!(kind.scope, Scope::Cluster);
        assert!(kind.served && kind.storage);
        assert_eq!(kind.deprecated.as_deref(), Some(""));
        assert_eq!(kind.printcolumns[0].priority, i32::MAX);
        assert!(kind.is_unchecked(".status.r") && !kind.is_unchecked(".spec.x"));
        assert_eq!(kind.crate_path, default_crate());
    }
}
