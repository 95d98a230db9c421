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
    doc: "A CEL validation rule (`x-kubernetes-validations`): on the spec in \
          `#[custom_resource(..)]` (`rule(..)`), on the whole object there (`root_rule(..)`), on \
          the struct in `#[kubeforge::schema(..)]`, on the field's value in `#[validate(..)]`. The rule and its message expression are parsed, \
          type-checked against `self` and cost-estimated at compile time (see *Compile-time CEL \
          checks* in the `#[custom_resource]` documentation); on the spec, every `self.x` / `oldSelf.x` must be a JSON field of the spec. \
          `validate()` evaluates the rules client-side with `kube-cel` (with the `cel` feature), \
          transition rules (`oldSelf`) in `validate_update(&old)`.",
    keys: &[
        Key::required(
            "cel",
            Value::Str(|r: &mut RuleAttrs, v| r.cel = Some(v)),
            "a rule needs `cel = \"...\"`",
        )
        .doc("the rule, a CEL expression returning a bool; `self` is the value it is on, `oldSelf` the previous one (a transition rule, checked on updates only)"),
        Key::new("message", Value::Str(|r: &mut RuleAttrs, v| r.message = Some(v)))
            .doc("the message when the rule fails (default: the apiserver's `failed rule: <rule>`)"),
        Key::new(
            "message_expression",
            Value::Str(|r: &mut RuleAttrs, v| r.message_expression = Some(v)),
        )
        .doc("a CEL expression returning the message (a string), type-checked like the rule"),
        Key::new("reason", Value::Str(|r: &mut RuleAttrs, v| r.reason = Some(v))).doc(
            "the error's reason: `FieldValueInvalid` (the apiserver's default), `FieldValueForbidden`, `FieldValueRequired` or `FieldValueDuplicate`",
        ),
        Key::new("field_path", Value::Str(|r: &mut RuleAttrs, v| r.field_path = Some(v)))
            .doc("the JSONPath, relative to `self`, the error is reported at (such as `.replicas`)"),
        Key::new(
            "optional_old_self",
            Value::Flag(|r: &mut RuleAttrs, v| r.optional_old_self = Some(v.value)),
        )
        .doc("a transition rule also runs on creation or when the field was absent, with `oldSelf` an optional (`oldSelf.hasValue()`)"),
    ],
};

/// `admission_rule(cel = "...", message = "...", message_expression = "...", reason = "...",
/// operations = [..])`.
#[derive(Default)]
pub struct AdmissionRuleAttrs {
    pub cel: Option<LitStr>,
    pub message: Option<LitStr>,
    pub message_expression: Option<LitStr>,
    pub reason: Option<LitStr>,
    pub operations: Option<Vec<LitStr>>,
}

pub const ADMISSION_RULE: Table<AdmissionRuleAttrs> = Table {
    what: "admission_rule",
    doc: "A rule the apiserver checks when the kind is written, through a \
          `ValidatingAdmissionPolicy` (`admissionregistration.k8s.io/v1`) and its binding that \
          `crdgen` prints next to the CRD: unlike `rule(..)`, it may read the object's \
          `metadata`, the request (user, operation) and the namespace, and it needs no \
          webhook. The variables are `object` and `oldObject` (the kind: `metadata`, `spec`, \
          `status`; `oldObject` is `null` on a create, `object` on a delete), `request` \
          (`operation`, `userInfo.username`, `userInfo.groups`, `name`, `namespace`, `dryRun`, \
          ..) and `namespaceObject`. The rule and its message expression are parsed and \
          type-checked at compile time: every field read from `object.spec`, \
          `object.metadata`, `request` and the others must exist. \
          `obj.validate_admission(&attributes)` evaluates the rules client-side (with the \
          `cel` feature); rules that read `request.userInfo` need the user, rules that read \
          `namespaceObject` are left to the apiserver.",
    keys: &[
        Key::required(
            "cel",
            Value::Str(|r: &mut AdmissionRuleAttrs, v| r.cel = Some(v)),
            "an admission rule needs `cel = \"...\"`",
        )
        .doc("the rule, a CEL expression returning a bool (`object.metadata.name.size() <= 40`)"),
        Key::new("message", Value::Str(|r: &mut AdmissionRuleAttrs, v| r.message = Some(v)))
            .doc("the message when the rule fails (default: `failed expression: <rule>`)"),
        Key::new(
            "message_expression",
            Value::Str(|r: &mut AdmissionRuleAttrs, v| r.message_expression = Some(v)),
        )
        .doc("a CEL expression returning the message (a string), type-checked like the rule"),
        Key::new("reason", Value::Str(|r: &mut AdmissionRuleAttrs, v| r.reason = Some(v))).doc(
            "the refusal's reason (and HTTP code): `Invalid` (default, 422), `Forbidden` (403), `Unauthorized` (401) or `RequestEntityTooLarge` (413)",
        ),
        Key::new(
            "operations",
            Value::StrList(|r: &mut AdmissionRuleAttrs, v| r.operations = Some(v)),
        )
        .doc("the operations the rule checks: `\"CREATE\"`, `\"UPDATE\"`, `\"DELETE\"` (default: `[\"UPDATE\"]` for a rule that reads `oldObject`, else `[\"CREATE\", \"UPDATE\"]`)"),
    ],
};

/// `admission_policy(failure_policy = "..", validation_actions = [..], namespace_selector = "..")`.
#[derive(Default)]
pub struct AdmissionPolicyAttrs {
    pub failure_policy: Option<LitStr>,
    pub validation_actions: Option<Vec<LitStr>>,
    pub namespace_selector: Option<LitStr>,
}

pub const ADMISSION_POLICY: Table<AdmissionPolicyAttrs> = Table {
    what: "admission_policy",
    doc: "The settings of the `ValidatingAdmissionPolicy` and binding generated from the \
          kind's `admission_rule(..)`s (named `<plural>.<group>`).",
    keys: &[
        Key::new(
            "failure_policy",
            Value::Str(|p: &mut AdmissionPolicyAttrs, v| p.failure_policy = Some(v)),
        )
        .doc("`\"Fail\"` (default) or `\"Ignore\"`: what the apiserver does when a rule cannot be evaluated"),
        Key::new(
            "validation_actions",
            Value::StrList(|p: &mut AdmissionPolicyAttrs, v| p.validation_actions = Some(v)),
        )
        .doc("what a failed rule does: `\"Deny\"` (default), `\"Warn\"`, `\"Audit\"` (`Deny` and `Warn` not together)"),
        Key::new(
            "namespace_selector",
            Value::Str(|p: &mut AdmissionPolicyAttrs, v| p.namespace_selector = Some(v)),
        )
        .doc("the binding checks only objects in namespaces with these labels, in `kubectl -l` syntax (`\"!example.com/unchecked\"`; checked at compile time; namespaced kinds only)"),
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

pub const PRINTCOLUMN: Table<PrintColumnAttrs> = Table {
    what: "printcolumn",
    doc: "An additional printer column of `kubectl get`.",
    keys: &[
        Key::required(
            "name",
            Value::Str(|c: &mut PrintColumnAttrs, v| c.name = Some(v)),
            "a printer column needs `name = \"...\"`",
        )
        .doc("the column's header"),
        Key::required(
            "json_path",
            Value::Str(|c: &mut PrintColumnAttrs, v| c.json_path = Some(v)),
            "a printer column needs `json_path = \".spec...\"`",
        )
        .doc("the JSONPath the apiserver's table printer takes (client-go's): `.field`, `['key']`, `[n]`, `[a:b]`, `[*]` and filters `[?(@.f OP lit)]` (OP one of `==`, `!=`, `<`, `<=`, `>`, `>=`; a quoted string, a number or `true`/`false`, or `@.g`), `[?(@.f)]` (has `f`), e.g. `.status.conditions[?(@.type==\"Ready\")].status`. Every field is checked at compile time, a filter's on the list's element type (with the literal's type), and `type` against the last field. A path the table printer cannot parse (it would show neither that column nor the next ones) or an unknown operator is a compile error; `..`, `.*` and unions `[a,b]` need `unchecked`"),
        Key::required(
            "type",
            Value::Str(|c: &mut PrintColumnAttrs, v| c.type_ = Some(v)),
            "a printer column needs `type = ...`, one of: integer, number, string, boolean, date",
        )
        .doc("`integer`, `number`, `string`, `boolean` or `date`; checked against the field the path ends at"),
        Key::new("format", Value::Str(|c: &mut PrintColumnAttrs, v| c.format = Some(v)))
            .doc("`int32`, `int64`, `float`, `double`, `byte`, `date`, `date-time` or `password`"),
        Key::new("description", Value::Str(|c: &mut PrintColumnAttrs, v| c.description = Some(v)))
            .doc("the column's description"),
        Key::new("priority", Value::Unsigned(|c: &mut PrintColumnAttrs, v| c.priority = Some(v)))
            .doc("0 (default) shows the column always, more only with `kubectl get -o wide`"),
        Key::new("unchecked", Value::Flag(|c: &mut PrintColumnAttrs, v| c.unchecked = v.value))
            .doc("do not resolve the JSONPath at compile time"),
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

pub const SCALE: Table<ScaleAttrs> = Table {
    what: "scale",
    doc: "The scale subresource (`kubectl scale`, the HorizontalPodAutoscaler).",
    keys: &[
        Key::required(
            "spec",
            Value::Str(|s: &mut ScaleAttrs, v| s.spec = Some(v)),
            "`scale` needs `spec = \".spec.replicas\"`",
        )
        .doc("JSONPath of the desired replicas, an integer field under `.spec`"),
        Key::required(
            "status",
            Value::Str(|s: &mut ScaleAttrs, v| s.status = Some(v)),
            "`scale` needs `status = \".status.replicas\"`",
        )
        .doc("JSONPath of the observed replicas, an integer field under `.status`"),
        Key::new(
            "selector",
            Value::Str(|s: &mut ScaleAttrs, v| s.selector = Some(v)),
        )
        .doc("JSONPath of the label selector (in its string form), a string field under `.status`"),
        Key::new(
            "unchecked",
            Value::Flag(|s: &mut ScaleAttrs, v| s.unchecked = v.value),
        )
        .doc("do not resolve the JSONPaths at compile time"),
    ],
};

/// `selectable_field(json_path = .., unchecked)`.
#[derive(Default)]
pub struct SelectableFieldAttrs {
    pub json_path: Option<LitStr>,
    pub unchecked: bool,
}

pub const SELECTABLE_FIELD: Table<SelectableFieldAttrs> = Table {
    what: "selectable_field",
    doc: "A field `kubectl get --field-selector` can select on.",
    keys: &[
        Key::required(
            "json_path",
            Value::Str(|f: &mut SelectableFieldAttrs, v| f.json_path = Some(v)),
            "expected `selectable_field(json_path = \"...\")`",
        )
        .doc("JSONPath of the field, a string, integer or bool"),
        Key::new(
            "unchecked",
            Value::Flag(|f: &mut SelectableFieldAttrs, v| f.unchecked = v.value),
        )
        .doc("do not resolve the JSONPath at compile time"),
    ],
};

/// `label(key = .., value = ..)` and `annotation(key = .., value = ..)`.
#[derive(Default)]
pub struct KeyValueAttrs {
    pub key: Option<LitStr>,
    pub value: Option<LitStr>,
}

const KEY_VALUE_MISSING: &str = "expected `key = \"...\"` and `value = \"...\"`";

pub const KEY_VALUE: Table<KeyValueAttrs> = Table {
    what: "label/annotation",
    doc: "A label or an annotation of the CRD object itself (not of the kind's objects).",
    keys: &[
        Key::required(
            "key",
            Value::Str(|l: &mut KeyValueAttrs, v| l.key = Some(v)),
            KEY_VALUE_MISSING,
        )
        .doc("the label's or annotation's key"),
        Key::required(
            "value",
            Value::Str(|l: &mut KeyValueAttrs, v| l.value = Some(v)),
            KEY_VALUE_MISSING,
        )
        .doc("its value"),
    ],
};

/// `deprecated` or `deprecated(warning = "..")`.
#[derive(Default)]
pub struct DeprecatedAttrs {
    pub warning: Option<LitStr>,
}

pub const DEPRECATED: Table<DeprecatedAttrs> = Table {
    what: "deprecated",
    doc: "The version is deprecated: the apiserver warns the clients that use it. `deprecated` \
          alone gives the apiserver's default warning.",
    keys: &[Key::new(
        "warning",
        Value::Str(|d: &mut DeprecatedAttrs, v| d.warning = Some(v)),
    )
    .doc("the warning returned to clients instead of the default one")],
};

/// `webhooks(validate, validate_delete, default, failure_policy = .., side_effects = ..,
/// timeout_seconds = .., operations = [..], match_policy = .., reinvocation_policy = ..,
/// metadata_updates = .., namespace_selector = "..", object_selector = "..")`.
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
    pub metadata_updates: Option<LitStr>,
    pub namespace_selector: Option<LitStr>,
    pub object_selector: Option<LitStr>,
}

pub const WEBHOOKS: Table<WebhooksAttrs> = Table {
    what: "webhooks",
    doc: "Admission webhooks (see `kubeforge::webhook`). Implementing `Validator` / \
          `DeleteValidator` / `Defaulter` for the kind wires them on its own (deletes are \
          validated only with a `DeleteValidator`); these keys make a missing impl a compile \
          error at the key, and set the webhook configurations.",
    keys: &[
        Key::new("validate", Value::Flag(|w: &mut WebhooksAttrs, v| w.validate = Some(v)))
            .doc("the kind implements `Validator` (a compile error at the key if not)"),
        Key::new(
            "validate_delete",
            Value::Flag(|w: &mut WebhooksAttrs, v| w.validate_delete = Some(v)),
        )
        .doc("the kind implements `DeleteValidator`"),
        Key::new("default", Value::Flag(|w: &mut WebhooksAttrs, v| w.default = Some(v)))
            .doc("the kind implements `Defaulter`"),
        Key::new(
            "failure_policy",
            Value::Str(|w: &mut WebhooksAttrs, v| w.failure_policy = Some(v)),
        )
        .doc("`\"Fail\"` (default) or `\"Ignore\"`: what the apiserver does when the webhook cannot be called"),
        Key::new("side_effects", Value::Str(|w: &mut WebhooksAttrs, v| w.side_effects = Some(v)))
            .doc("`\"None\"` (default) or `\"NoneOnDryRun\"`"),
        Key::new(
            "timeout_seconds",
            Value::Unsigned(|w: &mut WebhooksAttrs, v| w.timeout_seconds = Some(v)),
        )
        .doc("1 to 30 (default 10)"),
        Key::new("operations", Value::StrList(|w: &mut WebhooksAttrs, v| w.operations = Some(v)))
            .doc("the operations of the validating and defaulting webhooks: `\"CREATE\"`, `\"UPDATE\"` (default both); deletes come from `DeleteValidator`"),
        Key::new("match_policy", Value::Str(|w: &mut WebhooksAttrs, v| w.match_policy = Some(v)))
            .doc("`\"Equivalent\"` (default) or `\"Exact\"`"),
        Key::new(
            "reinvocation_policy",
            Value::Str(|w: &mut WebhooksAttrs, v| w.reinvocation_policy = Some(v)),
        )
        .doc("the defaulting webhook's: `\"IfNeeded\"` (default) or `\"Never\"`"),
        Key::new(
            "metadata_updates",
            Value::Str(|w: &mut WebhooksAttrs, v| w.metadata_updates = Some(v)),
        )
        .doc("`\"Skip\"` (default: an update that changes only `metadata` — finalizers, labels, annotations, owner references — is not sent to the validator and the defaulter, so a stopped operator blocks no cascading delete nor finalizer removal) or `\"Send\"` (the hooks judge metadata too)"),
        Key::new(
            "namespace_selector",
            Value::Str(|w: &mut WebhooksAttrs, v| w.namespace_selector = Some(v)),
        )
        .doc("only objects in namespaces with these labels, in `kubectl -l` syntax (`\"env in (prod)\"`; checked at compile time)"),
        Key::new(
            "object_selector",
            Value::Str(|w: &mut WebhooksAttrs, v| w.object_selector = Some(v)),
        )
        .doc("only objects with these labels, in `kubectl -l` syntax (`\"!skip\"`; checked at compile time)"),
    ],
};

/// `conversion(hub = path::to::StorageVersion, generate)`.
#[derive(Default)]
pub struct ConversionAttrs {
    pub hub: Option<Type>,
    /// `generate`: the conversions are written by the macro (fields added, removed, renamed).
    pub generate: bool,
}

pub const CONVERSION: Table<ConversionAttrs> = Table {
    what: "conversion",
    doc: "This version converts to and from the storage version of the same kind (checked at \
          compile time). What the other version cannot hold is kept in an annotation, so a round \
          trip loses nothing. Served as the CRD's conversion webhook by a manager serving the \
          kind; a generated `#[test]` checks round trips of arbitrary objects of both versions.",
    keys: &[
        Key::required(
            "hub",
            Value::Type(|c: &mut ConversionAttrs, v| c.hub = Some(v)),
            "`conversion` needs `hub = <the storage version's kind type>`",
        )
        .doc("the storage version's kind type; without `generate`, the conversions are `TryFrom` both ways (`From` gives it)"),
        Key::new("generate", Value::Flag(|c: &mut ConversionAttrs, v| c.generate = v.value))
            .doc("the conversions are generated, for fields added (with a default), removed, or renamed (`#[convert(from = \"hubName\")]` on a spec field)"),
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
    /// `root_rule(..)`: rules on the root of the schema (`self` is the whole object).
    pub root_rules: Vec<RuleAttrs>,
    pub admission_rules: Vec<AdmissionRuleAttrs>,
    pub admission_policy: Option<Keyed<AdmissionPolicyAttrs>>,
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

/// The "sibling fields" documentation of `exactly_one_of` & co.
macro_rules! one_of_doc {
    ($message:literal) => {
        concat!(
            "sibling fields by their JSON names (checked at compile time; each must be an `Option` or `#[serde(default)]`, not `required`): a CEL rule with the message `",
            $message,
            "`"
        )
    };
}

pub const KIND: Table<KindAttrs> = Table {
    what: "`custom_resource`",
    doc: "Put it on the spec struct. The generated root type is named after `kind`; the nested \
          sub-attributes are below.",
    keys: &[
        Key::new("group", Value::Str(|k: &mut KindAttrs, v| k.group = Some(v)))
            .required_later()
            .doc("API group, such as `apps.example.com`"),
        Key::new("version", Value::Str(|k: &mut KindAttrs, v| k.version = Some(v)))
            .required_later()
            .doc("version, such as `v1`"),
        Key::new("kind", Value::Str(|k: &mut KindAttrs, v| k.kind = Some(v)))
            .required_later()
            .doc("kind, such as `WebApp`: the name of the generated type"),
        Key::new("plural", Value::Str(|k: &mut KindAttrs, v| k.plural = Some(v)))
            .doc("plural resource name (default: the lower-case kind, English plural)"),
        Key::new("singular", Value::Str(|k: &mut KindAttrs, v| k.singular = Some(v)))
            .doc("singular resource name (default: the lower-case kind)"),
        Key::new("namespaced", Value::Flag(|k: &mut KindAttrs, v| k.namespaced = Some(v)))
            .doc("the kind is namespaced; exactly one of `namespaced` and `cluster` is required"),
        Key::new("cluster", Value::Flag(|k: &mut KindAttrs, v| k.cluster = Some(v)))
            .doc("the kind is cluster-scoped; exactly one of `namespaced` and `cluster` is required"),
        Key::new("status", Value::Type(|k: &mut KindAttrs, v| k.status = Some(v)))
            .doc("status type; enables the status subresource"),
        Key::repeatable("shortname", Value::Str(|k: &mut KindAttrs, v| k.shortnames.push(v)))
            .doc("short name for `kubectl`"),
        Key::repeatable("category", Value::Str(|k: &mut KindAttrs, v| k.categories.push(v)))
            .doc("category such as `all`"),
        Key::repeatable(
            "printcolumn",
            Value::Custom(|k: &mut KindAttrs, meta, e| {
                keys::push_nested(&mut k.printcolumns, meta, &PRINTCOLUMN, e)
            }),
        )
        .syntax("`(..)`")
        .doc("an additional printer column: see `printcolumn(..)`"),
        Key::new(
            "scale",
            Value::Custom(|k: &mut KindAttrs, meta, e| {
                k.scale = Some(keys::nested(meta, &SCALE, e)?);
                Ok(())
            }),
        )
        .syntax("`(..)`")
        .doc("the scale subresource: see `scale(..)`"),
        Key::repeatable(
            "rule",
            Value::Custom(|k: &mut KindAttrs, meta, e| keys::push_nested(&mut k.rules, meta, &RULE, e)),
        )
        .syntax("`(..)`")
        .doc("a CEL rule on the spec (`self` is the spec): see `rule(..)`"),
        Key::repeatable(
            "root_rule",
            Value::Custom(|k: &mut KindAttrs, meta, e| {
                keys::push_nested(&mut k.root_rules, meta, &RULE, e)
            }),
        )
        .syntax("`(..)`")
        .doc("a CEL rule on the root of the CRD's schema, with the keys of `rule(..)`: `self` is the whole object — `apiVersion`, `kind`, `metadata` (only `name` and `generateName`: the apiserver exposes no other field of it to CRD rules), `spec` and `status` (the kind's status type; reading it is an error on a kind without one) — so one rule can span spec and status (`!has(self.status) || self.status.replicas <= self.spec.replicas`) or check the name. Type-checked and cost-estimated at compile time, every field read from `self`, `self.metadata` and `self.spec` must exist; checked by the apiserver on every write, the status subresource's included, and by `validate()` / `validate_update(&old)`"),
        Key::repeatable(
            "admission_rule",
            Value::Custom(|k: &mut KindAttrs, meta, e| {
                keys::push_nested(&mut k.admission_rules, meta, &ADMISSION_RULE, e)
            }),
        )
        .syntax("`(..)`")
        .doc("a rule of the kind's ValidatingAdmissionPolicy (it may read `metadata`, the request and the namespace): see `admission_rule(..)`"),
        Key::new(
            "admission_policy",
            Value::Custom(|k: &mut KindAttrs, meta, e| {
                k.admission_policy = Some(keys::nested(meta, &ADMISSION_POLICY, e)?);
                Ok(())
            }),
        )
        .syntax("`(..)`")
        .doc("the settings of that policy and its binding: see `admission_policy(..)`"),
        Key::repeatable(
            "selectable_field",
            Value::Custom(|k: &mut KindAttrs, meta, e| {
                keys::push_nested(&mut k.selectable_fields, meta, &SELECTABLE_FIELD, e)
            }),
        )
        .syntax("`(..)`")
        .doc("a selectable field: see `selectable_field(..)`"),
        Key::repeatable(
            "label",
            Value::Custom(|k: &mut KindAttrs, meta, e| keys::push_nested(&mut k.labels, meta, &KEY_VALUE, e)),
        )
        .syntax("`(..)`")
        .doc("a label of the CRD object: see `label(..)` / `annotation(..)`"),
        Key::repeatable(
            "annotation",
            Value::Custom(|k: &mut KindAttrs, meta, e| keys::push_nested(&mut k.annotations, meta, &KEY_VALUE, e)),
        )
        .syntax("`(..)`")
        .doc("an annotation of the CRD object: see `label(..)` / `annotation(..)`"),
        Key::new("deprecated", Value::Custom(deprecated))
            .syntax("flag or `(..)`")
            .doc("the version is deprecated: see `deprecated(..)`"),
        Key::new("served", Value::Flag(|k: &mut KindAttrs, v| k.served = Some(v)))
            .doc("whether the apiserver serves the version (default `true`)"),
        Key::new("storage", Value::Flag(|k: &mut KindAttrs, v| k.storage = Some(v)))
            .doc("whether the version is the storage version (default `true`)"),
        Key::new("crate", Value::CratePath(|k: &mut KindAttrs, v| k.crate_path = Some(v)))
            .doc("path of the kubeforge crate in generated code (default `::kubeforge`), for crates that re-export or rename it"),
        Key::repeatable(
            "exactly_one_of",
            Value::Custom(|k: &mut KindAttrs, meta, e| OneOf::read(&mut k.one_ofs, meta, e)),
        )
        .syntax(ONE_OF_SYNTAX)
        .doc(one_of_doc!("exactly one of a, b must be set")),
        Key::repeatable(
            "at_most_one_of",
            Value::Custom(|k: &mut KindAttrs, meta, e| OneOf::read(&mut k.one_ofs, meta, e)),
        )
        .syntax(ONE_OF_SYNTAX)
        .doc(one_of_doc!("at most one of a, b may be set")),
        Key::repeatable(
            "at_least_one_of",
            Value::Custom(|k: &mut KindAttrs, meta, e| OneOf::read(&mut k.one_ofs, meta, e)),
        )
        .syntax(ONE_OF_SYNTAX)
        .doc(one_of_doc!("at least one of a, b must be set")),
        Key::new(
            "optional_spec",
            Value::Flag(|k: &mut KindAttrs, v| k.optional_spec = Some(v)),
        )
        .doc("the CRD does not require `spec`; an object without it reads as `Spec::default()` (the spec type must implement `Default`)"),
        Key::new(
            "conversion",
            Value::Custom(|k: &mut KindAttrs, meta, e| {
                k.conversion = Some(keys::nested(meta, &CONVERSION, e)?);
                Ok(())
            }),
        )
        .syntax("`(..)`")
        .doc("conversions to and from the storage version: see `conversion(..)`"),
        Key::new(
            "webhooks",
            Value::Custom(|k: &mut KindAttrs, meta, e| {
                k.webhooks = Some(keys::nested(meta, &WEBHOOKS, e)?);
                Ok(())
            }),
        )
        .syntax("`(..)`")
        .doc("admission webhooks: see `webhooks(..)`"),
    ],
};

/// The value of `exactly_one_of` & co. as the reference writes it.
const ONE_OF_SYNTAX: &str = "`[\"a\", \"b\", ..]`";

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

pub const SCHEMA: Table<SchemaAttrs> = Table {
    what: "`schema`",
    doc: "On the types used inside a spec or status: `#[kubeforge::schema]` alone, or with \
          these keys on a struct with named fields.",
    keys: &[
        Key::repeatable(
            "rule",
            Value::Custom(|s: &mut SchemaAttrs, meta, e| {
                keys::push_nested(&mut s.rules, meta, &RULE, e)
            }),
        )
        .syntax("`(..)`")
        .doc("a CEL rule on the struct (`self` is the struct): see `rule(..)`"),
        Key::new(
            "crate",
            Value::CratePath(|s: &mut SchemaAttrs, v| s.crate_path = Some(v)),
        )
        .doc("path of the kubeforge crate in generated code (default `::kubeforge`)"),
        Key::repeatable(
            "exactly_one_of",
            Value::Custom(|s: &mut SchemaAttrs, meta, e| OneOf::read(&mut s.one_ofs, meta, e)),
        )
        .syntax(ONE_OF_SYNTAX)
        .doc(one_of_doc!("exactly one of a, b must be set")),
        Key::repeatable(
            "at_most_one_of",
            Value::Custom(|s: &mut SchemaAttrs, meta, e| OneOf::read(&mut s.one_ofs, meta, e)),
        )
        .syntax(ONE_OF_SYNTAX)
        .doc(one_of_doc!("at most one of a, b may be set")),
        Key::repeatable(
            "at_least_one_of",
            Value::Custom(|s: &mut SchemaAttrs, meta, e| OneOf::read(&mut s.one_ofs, meta, e)),
        )
        .syntax(ONE_OF_SYNTAX)
        .doc(one_of_doc!("at least one of a, b must be set")),
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
