//! Attributes: the key tables of `#[custom_resource(...)]`, `#[kubeforge::schema(...)]` and their
//! sub-attributes (`printcolumn(..)`, `scale(..)`, `rule(..)`, `selectable_field(..)`,
//! `label(..)`/`annotation(..)`, `deprecated(..)`), read by the table parser of `keys.rs` into
//! structs that hold what the user wrote: every value optional, spans kept, no defaults. Unknown,
//! duplicate and missing keys and values of the wrong kind are reported here; `model.rs` turns
//! these structs into the typed model, applying every default in one place.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::{LitStr, Type};

use crate::errors::Errors;
use crate::keys::{self, Key, Keyed, Table, Value};

/// `rule(cel = "...", message = "...", message_expression = "...", reason = "...",
/// field_path = "...", optional_old_self)`.
#[derive(Default)]
pub struct RuleAttrs {
    pub cel: Option<LitStr>,
    pub message: Option<LitStr>,
    pub message_expression: Option<LitStr>,
    pub reason: Option<LitStr>,
    pub field_path: Option<LitStr>,
    pub optional_old_self: Option<bool>,
}

pub const RULE: Table<RuleAttrs> = Table {
    what: "rule",
    keys: &[
        Key::required(
            "cel",
            Value::Str(|r, v| r.cel = Some(v)),
            "a rule needs `cel = \"...\"`",
        ),
        Key::new("message", Value::Str(|r, v| r.message = Some(v))),
        Key::new(
            "message_expression",
            Value::Str(|r, v| r.message_expression = Some(v)),
        ),
        Key::new("reason", Value::Str(|r, v| r.reason = Some(v))),
        Key::new("field_path", Value::Str(|r, v| r.field_path = Some(v))),
        Key::new(
            "optional_old_self",
            Value::Flag(|r, v| r.optional_old_self = Some(v.value)),
        ),
    ],
};

/// `printcolumn(name = .., json_path = .., type = .., format = .., description = .., priority = ..,
/// unchecked)`.
#[derive(Default)]
pub struct PrintColumnAttrs {
    pub name: Option<LitStr>,
    pub json_path: Option<LitStr>,
    pub type_: Option<LitStr>,
    pub format: Option<LitStr>,
    pub description: Option<LitStr>,
    pub priority: Option<Keyed<u64>>,
    /// `unchecked`: the JSONPath is not resolved at compile time.
    pub unchecked: bool,
}

const PRINTCOLUMN: Table<PrintColumnAttrs> = Table {
    what: "printcolumn",
    keys: &[
        Key::required(
            "name",
            Value::Str(|c, v| c.name = Some(v)),
            "a printer column needs `name = \"...\"`",
        ),
        Key::required(
            "json_path",
            Value::Str(|c, v| c.json_path = Some(v)),
            "a printer column needs `json_path = \".spec...\"`",
        ),
        Key::required(
            "type",
            Value::Str(|c, v| c.type_ = Some(v)),
            "a printer column needs `type = ...`, one of: integer, number, string, boolean, date",
        ),
        Key::new("format", Value::Str(|c, v| c.format = Some(v))),
        Key::new("description", Value::Str(|c, v| c.description = Some(v))),
        Key::new("priority", Value::Unsigned(|c, v| c.priority = Some(v))),
        Key::new("unchecked", Value::Flag(|c, v| c.unchecked = v.value)),
    ],
};

/// `scale(spec = .., status = .., selector = .., unchecked)`.
#[derive(Default)]
pub struct ScaleAttrs {
    pub spec: Option<LitStr>,
    pub status: Option<LitStr>,
    pub selector: Option<LitStr>,
    /// `unchecked`: the JSONPaths are not resolved at compile time.
    pub unchecked: bool,
}

const SCALE: Table<ScaleAttrs> = Table {
    what: "scale",
    keys: &[
        Key::required(
            "spec",
            Value::Str(|s, v| s.spec = Some(v)),
            "`scale` needs `spec = \".spec.replicas\"`",
        ),
        Key::required(
            "status",
            Value::Str(|s, v| s.status = Some(v)),
            "`scale` needs `status = \".status.replicas\"`",
        ),
        Key::new("selector", Value::Str(|s, v| s.selector = Some(v))),
        Key::new("unchecked", Value::Flag(|s, v| s.unchecked = v.value)),
    ],
};

/// `selectable_field(json_path = .., unchecked)`.
#[derive(Default)]
pub struct SelectableFieldAttrs {
    pub json_path: Option<LitStr>,
    pub unchecked: bool,
}

const SELECTABLE_FIELD: Table<SelectableFieldAttrs> = Table {
    what: "selectable_field",
    keys: &[
        Key::required(
            "json_path",
            Value::Str(|f, v| f.json_path = Some(v)),
            "expected `selectable_field(json_path = \"...\")`",
        ),
        Key::new("unchecked", Value::Flag(|f, v| f.unchecked = v.value)),
    ],
};

/// `label(key = .., value = ..)` and `annotation(key = .., value = ..)`.
#[derive(Default)]
pub struct KeyValueAttrs {
    pub key: Option<LitStr>,
    pub value: Option<LitStr>,
}

const KEY_VALUE_MISSING: &str = "expected `key = \"...\"` and `value = \"...\"`";

const KEY_VALUE: Table<KeyValueAttrs> = Table {
    what: "label/annotation",
    keys: &[
        Key::required("key", Value::Str(|l, v| l.key = Some(v)), KEY_VALUE_MISSING),
        Key::required(
            "value",
            Value::Str(|l, v| l.value = Some(v)),
            KEY_VALUE_MISSING,
        ),
    ],
};

/// `deprecated` or `deprecated(warning = "..")`.
#[derive(Default)]
pub struct DeprecatedAttrs {
    pub warning: Option<LitStr>,
}

const DEPRECATED: Table<DeprecatedAttrs> = Table {
    what: "deprecated",
    keys: &[Key::new("warning", Value::Str(|d, v| d.warning = Some(v)))],
};

/// `webhooks(validate, validate_delete, default, failure_policy = .., side_effects = ..,
/// timeout_seconds = .., operations = [..], match_policy = .., reinvocation_policy = ..,
/// namespace_selector = "..", object_selector = "..")`.
#[derive(Default)]
pub struct WebhooksAttrs {
    /// `validate`: the kind implements `Validator` (checked at compile time).
    pub validate: Option<Keyed<bool>>,
    /// `validate_delete`: the kind implements `DeleteValidator`.
    pub validate_delete: Option<Keyed<bool>>,
    /// `default`: the kind implements `Defaulter`.
    pub default: Option<Keyed<bool>>,
    pub failure_policy: Option<LitStr>,
    pub side_effects: Option<LitStr>,
    pub timeout_seconds: Option<Keyed<u64>>,
    pub operations: Option<Vec<LitStr>>,
    pub match_policy: Option<LitStr>,
    pub reinvocation_policy: Option<LitStr>,
    pub namespace_selector: Option<LitStr>,
    pub object_selector: Option<LitStr>,
}

const WEBHOOKS: Table<WebhooksAttrs> = Table {
    what: "webhooks",
    keys: &[
        Key::new("validate", Value::Flag(|w, v| w.validate = Some(v))),
        Key::new(
            "validate_delete",
            Value::Flag(|w, v| w.validate_delete = Some(v)),
        ),
        Key::new("default", Value::Flag(|w, v| w.default = Some(v))),
        Key::new(
            "failure_policy",
            Value::Str(|w, v| w.failure_policy = Some(v)),
        ),
        Key::new("side_effects", Value::Str(|w, v| w.side_effects = Some(v))),
        Key::new(
            "timeout_seconds",
            Value::Unsigned(|w, v| w.timeout_seconds = Some(v)),
        ),
        Key::new("operations", Value::StrList(|w, v| w.operations = Some(v))),
        Key::new("match_policy", Value::Str(|w, v| w.match_policy = Some(v))),
        Key::new(
            "reinvocation_policy",
            Value::Str(|w, v| w.reinvocation_policy = Some(v)),
        ),
        Key::new(
            "namespace_selector",
            Value::Str(|w, v| w.namespace_selector = Some(v)),
        ),
        Key::new(
            "object_selector",
            Value::Str(|w, v| w.object_selector = Some(v)),
        ),
    ],
};

/// `conversion(hub = path::to::StorageVersion, generate)`.
#[derive(Default)]
pub struct ConversionAttrs {
    pub hub: Option<Type>,
    /// `generate`: the conversions are written by the macro (fields added, removed, renamed).
    pub generate: bool,
}

const CONVERSION: Table<ConversionAttrs> = Table {
    what: "conversion",
    keys: &[
        Key::required(
            "hub",
            Value::Type(|c, v| c.hub = Some(v)),
            "`conversion` needs `hub = <the storage version's kind type>`",
        ),
        Key::new("generate", Value::Flag(|c, v| c.generate = v.value)),
    ],
};

/// The keys of `#[custom_resource(...)]`. The required ones (`group`, `version`, `kind`, a scope)
/// are checked by `model::kind`, which gives placeholders so that the root type is still emitted.
#[derive(Default)]
pub struct KindAttrs {
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
    pub printcolumns: Vec<PrintColumnAttrs>,
    pub scale: Option<Keyed<ScaleAttrs>>,
    pub rules: Vec<RuleAttrs>,
    pub selectable_fields: Vec<SelectableFieldAttrs>,
    pub labels: Vec<KeyValueAttrs>,
    pub annotations: Vec<KeyValueAttrs>,
    pub deprecated: Option<DeprecatedAttrs>,
    pub served: Option<Keyed<bool>>,
    pub storage: Option<Keyed<bool>>,
    pub crate_path: Option<syn::Path>,
    pub one_ofs: Vec<OneOf>,
    pub optional_spec: Option<Keyed<bool>>,
    pub webhooks: Option<Keyed<WebhooksAttrs>>,
    pub conversion: Option<Keyed<ConversionAttrs>>,
}

const KIND: Table<KindAttrs> = Table {
    what: "`custom_resource`",
    keys: &[
        Key::new("group", Value::Str(|k, v| k.group = Some(v))),
        Key::new("version", Value::Str(|k, v| k.version = Some(v))),
        Key::new("kind", Value::Str(|k, v| k.kind = Some(v))),
        Key::new("plural", Value::Str(|k, v| k.plural = Some(v))),
        Key::new("singular", Value::Str(|k, v| k.singular = Some(v))),
        Key::new("namespaced", Value::Flag(|k, v| k.namespaced = Some(v))),
        Key::new("cluster", Value::Flag(|k, v| k.cluster = Some(v))),
        Key::new("status", Value::Type(|k, v| k.status = Some(v))),
        Key::repeatable("shortname", Value::Str(|k, v| k.shortnames.push(v))),
        Key::repeatable("category", Value::Str(|k, v| k.categories.push(v))),
        Key::repeatable(
            "printcolumn",
            Value::Custom(|k, meta, e| {
                keys::push_nested(&mut k.printcolumns, meta, &PRINTCOLUMN, e)
            }),
        ),
        Key::new(
            "scale",
            Value::Custom(|k, meta, e| {
                k.scale = Some(keys::nested(meta, &SCALE, e)?);
                Ok(())
            }),
        ),
        Key::repeatable(
            "rule",
            Value::Custom(|k, meta, e| keys::push_nested(&mut k.rules, meta, &RULE, e)),
        ),
        Key::repeatable(
            "selectable_field",
            Value::Custom(|k, meta, e| {
                keys::push_nested(&mut k.selectable_fields, meta, &SELECTABLE_FIELD, e)
            }),
        ),
        Key::repeatable(
            "label",
            Value::Custom(|k, meta, e| keys::push_nested(&mut k.labels, meta, &KEY_VALUE, e)),
        ),
        Key::repeatable(
            "annotation",
            Value::Custom(|k, meta, e| keys::push_nested(&mut k.annotations, meta, &KEY_VALUE, e)),
        ),
        Key::new("deprecated", Value::Custom(deprecated)),
        Key::new("served", Value::Flag(|k, v| k.served = Some(v))),
        Key::new("storage", Value::Flag(|k, v| k.storage = Some(v))),
        Key::new("crate", Value::CratePath(|k, v| k.crate_path = Some(v))),
        Key::repeatable(
            "exactly_one_of",
            Value::Custom(|k, meta, e| OneOf::read(&mut k.one_ofs, meta, e)),
        ),
        Key::repeatable(
            "at_most_one_of",
            Value::Custom(|k, meta, e| OneOf::read(&mut k.one_ofs, meta, e)),
        ),
        Key::repeatable(
            "at_least_one_of",
            Value::Custom(|k, meta, e| OneOf::read(&mut k.one_ofs, meta, e)),
        ),
        Key::new(
            "optional_spec",
            Value::Flag(|k, v| k.optional_spec = Some(v)),
        ),
        Key::new(
            "conversion",
            Value::Custom(|k, meta, e| {
                k.conversion = Some(keys::nested(meta, &CONVERSION, e)?);
                Ok(())
            }),
        ),
        Key::new(
            "webhooks",
            Value::Custom(|k, meta, e| {
                k.webhooks = Some(keys::nested(meta, &WEBHOOKS, e)?);
                Ok(())
            }),
        ),
    ],
};

fn deprecated(
    kind: &mut KindAttrs,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    let attrs = if meta.input.peek(syn::token::Paren) {
        keys::nested(meta, &DEPRECATED, errors)?.value
    } else {
        DeprecatedAttrs::default()
    };
    kind.deprecated = Some(attrs);
    Ok(())
}

/// Parses `#[custom_resource(...)]`'s arguments; errors go to `errors`.
pub fn parse_kind(args: TokenStream, errors: &mut Errors) -> KindAttrs {
    keys::parse_args(args, &KIND, errors)
}

/// The keys of `#[kubeforge::schema(...)]`: struct-level rules and the crate path.
#[derive(Default)]
pub struct SchemaAttrs {
    pub rules: Vec<RuleAttrs>,
    pub crate_path: Option<syn::Path>,
    pub one_ofs: Vec<OneOf>,
}

const SCHEMA: Table<SchemaAttrs> = Table {
    what: "`schema`",
    keys: &[
        Key::repeatable(
            "rule",
            Value::Custom(|s, meta, e| keys::push_nested(&mut s.rules, meta, &RULE, e)),
        ),
        Key::new("crate", Value::CratePath(|s, v| s.crate_path = Some(v))),
        Key::repeatable(
            "exactly_one_of",
            Value::Custom(|s, meta, e| OneOf::read(&mut s.one_ofs, meta, e)),
        ),
        Key::repeatable(
            "at_most_one_of",
            Value::Custom(|s, meta, e| OneOf::read(&mut s.one_ofs, meta, e)),
        ),
        Key::repeatable(
            "at_least_one_of",
            Value::Custom(|s, meta, e| OneOf::read(&mut s.one_ofs, meta, e)),
        ),
    ],
};

/// Parses `#[kubeforge::schema(...)]`'s arguments.
pub fn parse_schema(args: TokenStream, errors: &mut Errors) -> SchemaAttrs {
    keys::parse_args(args, &SCHEMA, errors)
}

/// Which count of a group of sibling fields may be set.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OneOfKind {
    /// `exactly_one_of`.
    Exactly,
    /// `at_most_one_of`.
    AtMost,
    /// `at_least_one_of`.
    AtLeast,
}

/// `exactly_one_of = ["a", "b"]`, `at_most_one_of`, `at_least_one_of` on a struct: a CEL rule
/// over the presence of sibling fields.
#[derive(Clone)]
pub struct OneOf {
    pub kind: OneOfKind,
    /// The key, where the generated rule's errors point.
    pub key: Span,
    /// The JSON names of the fields, as written.
    pub fields: Vec<LitStr>,
}

impl OneOf {
    /// The key as written.
    pub fn name(&self) -> &'static str {
        match self.kind {
            OneOfKind::Exactly => "exactly_one_of",
            OneOfKind::AtMost => "at_most_one_of",
            OneOfKind::AtLeast => "at_least_one_of",
        }
    }

    /// Reads `key = ["a", "b"]` into `list`.
    pub fn read(
        list: &mut Vec<OneOf>,
        meta: &syn::meta::ParseNestedMeta<'_>,
        errors: &mut Errors,
    ) -> syn::Result<()> {
        let name = crate::keys::key_name(meta);
        let kind = match name.as_str() {
            "exactly_one_of" => OneOfKind::Exactly,
            "at_most_one_of" => OneOfKind::AtMost,
            _ => OneOfKind::AtLeast,
        };
        let key = crate::keys::key_span(meta);
        let expr: syn::Expr = meta.value()?.parse()?;
        let syn::Expr::Array(array) = &expr else {
            return Err(syn::Error::new_spanned(
                &expr,
                format!(
                    "expected the JSON names of sibling fields, e.g. `{name} = [\"a\", \"b\"]`"
                ),
            ));
        };
        let mut fields = Vec::new();
        for elem in &array.elems {
            match elem {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => fields.push(s.clone()),
                other => errors.spanned(other, "expected a string literal: a JSON field name"),
            }
        }
        if array.elems.len() < 2 {
            errors.spanned(&expr, format!("`{name}` needs at least two fields"));
        }
        list.push(OneOf { kind, key, fields });
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
        let attrs = parse_kind(
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
        assert_eq!(attrs.group.map(|g| g.value()).as_deref(), Some("g.dev"));
        assert_eq!(attrs.shortnames.len(), 2);
        assert_eq!(
            attrs.printcolumns[0].priority.as_ref().map(|p| p.value),
            Some(1)
        );
        assert!(attrs.scale.is_some());
        assert_eq!(
            attrs.rules[0].cel.as_ref().map(LitStr::value).as_deref(),
            Some("self.a")
        );
        assert_eq!(attrs.storage.map(|s| s.value), Some(false));
        assert_eq!(
            attrs
                .deprecated
                .and_then(|d| d.warning)
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
    fn sub_attributes_should_report_missing_keys_unless_one_was_misspelled() {
        let mut errors = Errors::default();
        parse_kind(
            quote!(printcolumn(name = "A"), scale(spec = ".spec.r", unchecked),
                printcolumn(name = "B", jsonpath = ".spec.b", type = "string"),
                label(key = "k"), selectable_field(unchecked), rule(message = "m")),
            &mut errors,
        );
        assert_eq!(
            errors.messages(),
            [
                "a printer column needs `json_path = \".spec...\"`",
                "a printer column needs `type = ...`, one of: integer, number, string, boolean, date",
                "`scale` needs `status = \".status.replicas\"`",
                "unknown printcolumn key `jsonpath`; did you mean `json_path`?",
                "expected `key = \"...\"` and `value = \"...\"`",
                "expected `selectable_field(json_path = \"...\")`",
                "a rule needs `cel = \"...\"`",
            ]
        );
    }
}
