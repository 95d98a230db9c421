//! The evolution cases: an old CRD, a new one, objects valid under the old one, the updates, and
//! the findings the gate must report. Each CRD is written with `@G` for the case's group.

use kubeforge::crd::compat::Class;
use serde_json::{Value, json};

/// One evolution of a CRD.
pub(super) struct Case {
    /// The case's id (a DNS label: it is part of the group).
    pub(super) name: &'static str,
    /// What changes, for the table.
    pub(super) change: &'static str,
    /// The findings the gate must report for it (rule, class).
    pub(super) rules: Vec<(&'static str, Class)>,
    /// The CRD before (`None`: there was none), with `@G` for the group.
    pub(super) old: Option<Value>,
    /// The CRD after (`None`: it is deleted).
    pub(super) new: Option<Value>,
    /// The specs of objects valid under `old`, each created through every served version.
    pub(super) objects: Vec<Value>,
    /// Spec fields set by the update through a version, besides `note`.
    pub(super) updates: Vec<(&'static str, Value)>,
}

impl Case {
    fn new(name: &'static str, change: &'static str, old: Value, new: Value) -> Self {
        Case {
            name,
            change,
            rules: Vec::new(),
            old: Some(old),
            new: Some(new),
            objects: Vec::new(),
            updates: Vec::new(),
        }
    }

    fn rule(mut self, rule: &'static str, class: Class) -> Self {
        self.rules.push((rule, class));
        self
    }

    /// An object created through v1.
    fn object(mut self, spec: Value) -> Self {
        self.objects.push(spec);
        self
    }

    fn update(mut self, version: &'static str, spec: Value) -> Self {
        self.updates.push((version, spec));
        self
    }
}

/// A CRD `widgets.@G` with `versions`.
fn crd(versions: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.@G"},
        "spec": {
            "group": "@G",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": versions,
        }
    })
}

/// A version whose `spec` has the schema `spec` (and whose `status` holds a `note`).
fn version(name: &str, served: bool, storage: bool, spec: Value) -> Value {
    json!({
        "name": name, "served": served, "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": spec,
            "status": {"type": "object", "properties": {
                "note": {"type": "string"}, "replicas": {"type": "integer"}}},
        }}},
    })
}

/// A spec schema with `note` (the field every update sets) and `properties`.
fn fields(properties: Value) -> Value {
    let mut all = json!({"note": {"type": "string"}});
    all.as_object_mut()
        .unwrap()
        .extend(properties.as_object().unwrap().clone());
    json!({"type": "object", "properties": all})
}

/// `schema` with the keys of `extra` added.
fn with(mut schema: Value, extra: Value) -> Value {
    schema
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    schema
}

/// One version v1, served and stored, with the spec schema `spec`.
fn one(spec: Value) -> Value {
    crd(json!([version("v1", true, true, spec)]))
}

/// The spec field `f` changed from `old` to `new` (in the only version, v1).
fn field(name: &'static str, change: &'static str, old: Value, new: Value) -> Case {
    Case::new(
        name,
        change,
        one(fields(json!({"f": old}))),
        one(fields(json!({"f": new}))),
    )
}

/// A CRD with the two versions `v1` and `v2` (the given schemas; `served`, storage first).
fn two(v1: (bool, bool, Value), v2: (bool, bool, Value)) -> Value {
    crd(json!([
        version("v1", v1.0, v1.1, v1.2),
        version("v2", v2.0, v2.1, v2.2)
    ]))
}

/// A bound: its tightened and loosened rules, its keyword, the field's schema, a loose and a
/// tight value, a value only the loose one accepts, a value both accept.
type Bound = (
    &'static str,
    &'static str,
    &'static str,
    Value,
    i64,
    i64,
    Value,
    Value,
);

/// Every case, in the order of the table.
#[allow(
    clippy::too_many_lines,
    reason = "the table of cases, one entry each, grouped by what changes"
)]
pub(super) fn cases() -> Vec<Case> {
    use Class::{Breaking, NeedsMigration, NeedsReview, Safe};
    let s = json!({"type": "string"});
    let int = json!({"type": "integer"});
    let f = fields(json!({"f": {"type": "string"}}));
    let mut cases = vec![
        // Fields.
        Case::new(
            "field-removed",
            "`spec.f` removed",
            one(f.clone()),
            one(fields(json!({}))),
        )
        .rule("field-removed", Breaking)
        .object(json!({"f": "x"})),
        Case::new(
            "field-removed-preserved",
            "`spec.f` removed where unknown fields are preserved",
            one(with(
                f.clone(),
                json!({"x-kubernetes-preserve-unknown-fields": true}),
            )),
            one(with(
                fields(json!({})),
                json!({"x-kubernetes-preserve-unknown-fields": true}),
            )),
        )
        .rule("field-removed", Safe)
        .object(json!({"f": "x"})),
        Case::new(
            "field-added",
            "optional `spec.g` added",
            one(f.clone()),
            one(fields(json!({"f": s, "g": s}))),
        )
        .rule("field-added", Safe)
        .object(json!({"f": "x"}))
        .update("v1", json!({"g": "new"})),
        Case::new(
            "required-added",
            "`spec.f` made required",
            one(f.clone()),
            one(with(f.clone(), json!({"required": ["f"]}))),
        )
        .rule("required-added", Breaking)
        .object(json!({}))
        .object(json!({"f": "x"})),
        Case::new(
            "required-added-default",
            "`spec.f` made required, with a default",
            one(f.clone()),
            one(with(
                fields(json!({"f": {"type": "string", "default": "d"}})),
                json!({"required": ["f"]}),
            )),
        )
        .rule("required-added", Safe)
        .rule("default-added", Safe)
        .object(json!({})),
        Case::new(
            "required-removed",
            "`spec.f` no longer required",
            one(with(f.clone(), json!({"required": ["f"]}))),
            one(f.clone()),
        )
        .rule("required-removed", Safe)
        .object(json!({"f": "x"})),
        // Types.
        field("type-changed", "integer to string", int.clone(), s.clone())
            .rule("type-changed", Breaking)
            .object(json!({"f": 1})),
        field(
            "type-widened",
            "string to int-or-string",
            s.clone(),
            json!({"x-kubernetes-int-or-string": true}),
        )
        .rule("type-changed", Safe)
        .object(json!({"f": "x"}))
        .update("v1", json!({"f": 3})),
        field(
            "type-int-or-string-anyof",
            "integer to int-or-string in controller-gen's form (`anyOf` integer/string)",
            int.clone(),
            json!({"anyOf": [{"type": "integer"}, {"type": "string"}],
                   "x-kubernetes-int-or-string": true}),
        )
        .rule("type-changed", Safe)
        .object(json!({"f": 3}))
        .update("v1", json!({"f": "50%"})),
        field(
            "type-untyped",
            "integer to untyped (`x-kubernetes-preserve-unknown-fields`)",
            int.clone(),
            json!({"x-kubernetes-preserve-unknown-fields": true}),
        )
        .rule("type-changed", Safe)
        .object(json!({"f": 3})),
        // Enums.
        field(
            "enum-value-removed",
            "enum [a, b] to [a]",
            json!({"type": "string", "enum": ["a", "b"]}),
            json!({"type": "string", "enum": ["a"]}),
        )
        .rule("enum-value-removed", Breaking)
        .object(json!({"f": "a"}))
        .object(json!({"f": "b"})),
        field(
            "enum-value-added",
            "enum [a] to [a, b]",
            json!({"type": "string", "enum": ["a"]}),
            json!({"type": "string", "enum": ["a", "b"]}),
        )
        .rule("enum-value-added", Safe)
        .object(json!({"f": "a"}))
        .update("v1", json!({"f": "b"})),
        field(
            "enum-removed",
            "enum [a] removed",
            json!({"type": "string", "enum": ["a"]}),
            s.clone(),
        )
        .rule("enum-removed", Safe)
        .object(json!({"f": "a"})),
        field(
            "enum-added",
            "an enum [a] where there was none",
            s.clone(),
            json!({"type": "string", "enum": ["a"]}),
        )
        .rule("enum-added", Breaking)
        .object(json!({"f": "z"})),
    ];
    // Bounds: tightened from the loose value to the tight one, with an object valid under the
    // loose one only; loosened the other way, with an object valid under the tight one.
    let bounds: [Bound; 8] = [
        (
            "minimum-tightened",
            "minimum-loosened",
            "minimum",
            int.clone(),
            0,
            5,
            json!(1),
            json!(6),
        ),
        (
            "maximum-tightened",
            "maximum-loosened",
            "maximum",
            int.clone(),
            10,
            5,
            json!(8),
            json!(3),
        ),
        (
            "min-length-tightened",
            "min-length-loosened",
            "minLength",
            s.clone(),
            1,
            3,
            json!("ab"),
            json!("abcd"),
        ),
        (
            "max-length-tightened",
            "max-length-loosened",
            "maxLength",
            s.clone(),
            5,
            2,
            json!("abcd"),
            json!("a"),
        ),
        (
            "min-items-tightened",
            "min-items-loosened",
            "minItems",
            json!({"type": "array", "items": {"type": "string"}}),
            1,
            3,
            json!(["a", "b"]),
            json!(["a", "b", "c"]),
        ),
        (
            "max-items-tightened",
            "max-items-loosened",
            "maxItems",
            json!({"type": "array", "items": {"type": "string"}}),
            5,
            2,
            json!(["a", "b", "c"]),
            json!(["a"]),
        ),
        (
            "min-properties-tightened",
            "min-properties-loosened",
            "minProperties",
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            1,
            3,
            json!({"a": "1", "b": "2"}),
            json!({"a": "1", "b": "2", "c": "3"}),
        ),
        (
            "max-properties-tightened",
            "max-properties-loosened",
            "maxProperties",
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            5,
            2,
            json!({"a": "1", "b": "2", "c": "3"}),
            json!({"a": "1"}),
        ),
    ];
    for (tightened, loosened, keyword, schema, loose, tight, only_loose, both) in bounds {
        let bounded = |v: i64| with(schema.clone(), json!({keyword: v}));
        cases.push(
            field(
                tightened,
                keyword_change(keyword, true),
                bounded(loose),
                bounded(tight),
            )
            .rule(tightened, Breaking)
            .object(json!({"f": only_loose})),
        );
        cases.push(
            field(
                loosened,
                keyword_change(keyword, false),
                bounded(tight),
                bounded(loose),
            )
            .rule(loosened, Safe)
            .object(json!({"f": both})),
        );
    }
    let p = |pattern: &str| json!({"type": "string", "pattern": pattern});
    cases.extend([
        // Patterns, formats, multipleOf.
        field("pattern-added", "a pattern `^[a-z]+$` where there was none", s.clone(), p("^[a-z]+$"))
            .rule("pattern-added", Breaking)
            .object(json!({"f": "X1"})),
        field("pattern-loosened", "pattern `^[a-z]+$` to `[a-z]+` (anchors removed)", p("^[a-z]+$"), p("[a-z]+"))
            .rule("pattern-loosened", Safe)
            .object(json!({"f": "abc"}))
            .update("v1", json!({"f": "ABC-abc"})),
        field(
            "pattern-alternative",
            "pattern `^[a-z]+$` to `^[a-z]+$|^[0-9]+$` (an alternative added)",
            p("^[a-z]+$"),
            p("^[a-z]+$|^[0-9]+$"),
        )
        .rule("pattern-loosened", Safe)
        .object(json!({"f": "abc"}))
        .update("v1", json!({"f": "123"})),
        field(
            "pattern-changed-wider",
            "pattern `^[a-z]+$` to `^[a-z0-9]+$` (wider, not decidable from the text)",
            p("^[a-z]+$"),
            p("^[a-z0-9]+$"),
        )
        .rule("pattern-changed", NeedsReview)
        .object(json!({"f": "abc"}))
        .update("v1", json!({"f": "abc1"})),
        field(
            "pattern-changed-narrower",
            "pattern `^[a-z0-9]+$` to `^[a-z]+$` (narrower, not decidable from the text)",
            p("^[a-z0-9]+$"),
            p("^[a-z]+$"),
        )
        .rule("pattern-changed", NeedsReview)
        .object(json!({"f": "abc1"})),
        field("pattern-removed", "pattern `^[a-z]+$` removed", p("^[a-z]+$"), s.clone())
            .rule("pattern-removed", Safe)
            .object(json!({"f": "abc"})),
        field(
            "format-changed",
            "format `uuid` where there was none",
            s.clone(),
            json!({"type": "string", "format": "uuid"}),
        )
        .rule("format-changed", Breaking)
        .object(json!({"f": "not-a-uuid"})),
        field(
            "format-removed",
            "format `uuid` removed",
            json!({"type": "string", "format": "uuid"}),
            s.clone(),
        )
        .rule("format-removed", Safe)
        .object(json!({"f": "8d6f1a52-1b0e-4a57-9d43-0b8f2e3c5a11"})),
        field(
            "multiple-of-changed",
            "multipleOf 2 where there was none",
            int.clone(),
            json!({"type": "integer", "multipleOf": 2}),
        )
        .rule("multiple-of-changed", Breaking)
        .object(json!({"f": 3})),
        field(
            "multiple-of-loosened",
            "multipleOf 6 to 3, which divides it",
            json!({"type": "integer", "multipleOf": 6}),
            json!({"type": "integer", "multipleOf": 3}),
        )
        .rule("multiple-of-loosened", Safe)
        .object(json!({"f": 12})),
        field(
            "multiple-of-not-a-divisor",
            "multipleOf 6 to 4, which does not divide it",
            json!({"type": "integer", "multipleOf": 6}),
            json!({"type": "integer", "multipleOf": 4}),
        )
        .rule("multiple-of-changed", Breaking)
        .object(json!({"f": 6})),
        field(
            "multiple-of-removed",
            "multipleOf 2 removed",
            json!({"type": "integer", "multipleOf": 2}),
            int.clone(),
        )
        .rule("multiple-of-removed", Safe)
        .object(json!({"f": 4})),
        // Lists and maps.
        field(
            "list-type-changed",
            "a list of strings from atomic to set",
            json!({"type": "array", "items": {"type": "string"}}),
            json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}),
        )
        .rule("list-type-changed", Breaking)
        .object(json!({"f": ["a", "a"]})),
        field(
            "list-map-keys-changed",
            "a map list's keys from [name, port] to [name]",
            ports(json!(["name", "port"])),
            ports(json!(["name"])),
        )
        .rule("list-map-keys-changed", Breaking)
        .object(json!({"f": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]})),
        field(
            "list-atomic-to-map",
            "an atomic list made a map list keyed by name",
            json!({"type": "array", "items": {"type": "object", "required": ["name"],
                   "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}),
            ports(json!(["name"])),
        )
        .rule("list-type-changed", Breaking)
        .rule("list-map-keys-changed", Breaking)
        .object(json!({"f": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]})),
        field(
            "map-type-changed",
            "a map from granular to atomic (an applier's own keys replace the others')",
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            json!({"type": "object", "additionalProperties": {"type": "string"},
                   "x-kubernetes-map-type": "atomic"}),
        )
        .rule("map-type-changed", Breaking)
        .object(json!({"f": {"a": "1"}}))
        .update("v1", json!({"f": {"b": "2"}})),
        // Defaults and flags.
        field(
            "default-changed",
            "default 1 to 2",
            json!({"type": "integer", "default": 1}),
            json!({"type": "integer", "default": 2}),
        )
        .rule("default-changed", Breaking)
        .object(json!({})),
        field("default-removed", "default 1 removed", json!({"type": "integer", "default": 1}), int.clone())
            .rule("default-removed", Breaking)
            .object(json!({})),
        field("default-added", "default 1 added", int.clone(), json!({"type": "integer", "default": 1}))
            .rule("default-added", Safe)
            .object(json!({})),
        field(
            "nullable-removed",
            "`nullable` removed from an optional field",
            json!({"type": "string", "nullable": true}),
            s.clone(),
        )
        .rule("nullable-removed", Safe)
        .object(json!({"f": null}))
        .object(json!({"f": "x"})),
        field(
            "nullable-removed-default",
            "`nullable` removed from an optional field with a default",
            json!({"type": "string", "nullable": true, "default": "d"}),
            json!({"type": "string", "default": "d"}),
        )
        .rule("nullable-removed", Breaking)
        .object(json!({"f": null})),
        Case::new(
            "nullable-removed-required",
            "`nullable` removed from a required field",
            one(with(fields(json!({"f": {"type": "string", "nullable": true}})), json!({"required": ["f"]}))),
            one(with(f.clone(), json!({"required": ["f"]}))),
        )
        .rule("nullable-removed", Breaking)
        .object(json!({"f": null})),
        field("nullable-added", "`nullable` added", s.clone(), json!({"type": "string", "nullable": true}))
            .rule("nullable-added", Safe)
            .object(json!({"f": "x"}))
            .update("v1", json!({"f": null})),
        field(
            "preserve-unknown-removed",
            "`x-kubernetes-preserve-unknown-fields` removed",
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            json!({"type": "object", "properties": {"known": {"type": "string"}}}),
        )
        .rule("preserve-unknown-fields-removed", Breaking)
        .object(json!({"f": {"x": 1}})),
        field(
            "preserve-unknown-added",
            "`x-kubernetes-preserve-unknown-fields` added",
            json!({"type": "object", "properties": {"known": {"type": "string"}}}),
            json!({"type": "object", "properties": {"known": {"type": "string"}},
                   "x-kubernetes-preserve-unknown-fields": true}),
        )
        .rule("preserve-unknown-fields-added", Safe)
        .object(json!({"f": {"known": "k"}}))
        .update("v1", json!({"f": {"other": 1}})),
        field(
            "embedded-resource-changed",
            "`x-kubernetes-embedded-resource` added",
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                   "x-kubernetes-embedded-resource": true}),
        )
        .rule("embedded-resource-changed", Breaking)
        .object(json!({"f": {"x": 1}})),
        // CEL rules.
        field(
            "validation-added",
            "a CEL rule `self.size() <= 3`",
            s.clone(),
            json!({"type": "string", "x-kubernetes-validations": [{"rule": "self.size() <= 3"}]}),
        )
        .rule("validation-added", Breaking)
        .object(json!({"f": "abcd"})),
        field(
            "validation-added-transition",
            "a transition rule `self == oldSelf` (the field becomes immutable)",
            s.clone(),
            json!({"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}),
        )
        .rule("validation-added-transition", Breaking)
        .object(json!({"f": "a"}))
        .update("v1", json!({"f": "b"})),
        field(
            "validation-added-ratcheting",
            "a rule with `optionalOldSelf` that still judges new values: `oldSelf.hasValue() || self.size() <= 3`",
            s.clone(),
            json!({"type": "string", "x-kubernetes-validations": [
                {"rule": "oldSelf.hasValue() || self.size() <= 3", "optionalOldSelf": true}]}),
        )
        .rule("validation-added-ratcheting", Breaking)
        .object(json!({"f": "abcd"})),
        field(
            "validation-removed",
            "the CEL rule `self.size() <= 3` removed",
            json!({"type": "string", "x-kubernetes-validations": [{"rule": "self.size() <= 3"}]}),
            s.clone(),
        )
        .rule("validation-removed", Safe)
        .object(json!({"f": "abc"}))
        .update("v1", json!({"f": "abcdef"})),
        // Composition.
        field("composition-changed", "a `oneOf` [a, b] added", pair(None), pair(Some(("oneOf", ["a", "b"]))))
            .rule("composition-changed", Breaking)
            .object(json!({"f": {"a": "1", "b": "2"}})),
        field("composition-removed", "the `oneOf` [a, b] removed", pair(Some(("oneOf", ["a", "b"]))), pair(None))
            .rule("composition-removed", Safe)
            .object(json!({"f": {"a": "1"}}))
            .update("v1", json!({"f": {"b": "2"}})),
        field(
            "composition-reordered",
            "the branches of an `anyOf` reordered",
            pair(Some(("anyOf", ["a", "b"]))),
            pair(Some(("anyOf", ["b", "a"]))),
        )
        .object(json!({"f": {"a": "1"}}))
        .object(json!({"f": {"b": "1"}})),
        Case::new(
            "composition-loosened",
            "a branch added to an `anyOf`",
            one(fields(json!({"f": with(pair(None), json!({"anyOf": [{"required": ["a"]}]}))}))),
            one(fields(json!({"f": pair(Some(("anyOf", ["a", "b"])))}))),
        )
        .rule("composition-loosened", Safe)
        .object(json!({"f": {"a": "1"}})),
        // Versions.
        Case::new("version-added", "a served version v2 with the same schema", one(f.clone()), two((true, true, f.clone()), (true, false, f.clone())))
            .rule("version-added", Safe)
            .object(json!({"f": "x"})),
        Case::new(
            "version-removed",
            "the served version v2 removed",
            two((true, true, f.clone()), (true, false, f.clone())),
            one(f.clone()),
        )
        .rule("version-removed", Breaking)
        .object(json!({"f": "x"}))
        .object(json!({"f": "y"})),
        Case::new(
            "version-removed-unserved",
            "the version v2, not served, removed",
            two((true, true, f.clone()), (false, false, f.clone())),
            one(f.clone()),
        )
        .rule("version-removed", Safe)
        .object(json!({"f": "x"})),
        Case::new(
            "version-unserved",
            "v2 no longer served",
            two((true, true, f.clone()), (true, false, f.clone())),
            two((true, true, f.clone()), (false, false, f.clone())),
        )
        .rule("version-unserved", Breaking)
        .object(json!({"f": "y"})),
        Case::new(
            "version-served",
            "v2 served again",
            two((true, true, f.clone()), (false, false, f.clone())),
            two((true, true, f.clone()), (true, false, f.clone())),
        )
        .rule("version-served", Safe)
        .object(json!({"f": "x"})),
        Case::new(
            "storage-version-changed",
            "the storage version from v1 to v2, same schema",
            two((true, true, f.clone()), (true, false, f.clone())),
            two((true, false, f.clone()), (true, true, f.clone())),
        )
        .rule("storage-version-changed", NeedsMigration)
        .object(json!({"f": "x"})),
        Case::new(
            "storage-version-reshaped",
            "the storage version from v1 to v2, which has `g` instead of `f`, without a conversion webhook",
            two((true, true, f.clone()), (true, false, fields(json!({"f": s, "g": s})))),
            two((true, false, f.clone()), (true, true, fields(json!({"g": s})))),
        )
        .rule("storage-version-changed", Breaking)
        .object(json!({"f": "x"})),
        Case::new(
            "stored-version-removed",
            "v1, the storage version, removed (v2 stores)",
            two((true, true, f.clone()), (true, false, f.clone())),
            crd(json!([version("v2", true, true, f.clone())])),
        )
        .rule("stored-version-removed", NeedsMigration)
        .rule("version-removed", Breaking)
        .object(json!({"f": "x"})),
        Case::new(
            "served-version-lacks-field",
            "a new served version v2 without the stored field `f`",
            one(f.clone()),
            two((true, true, f.clone()), (true, false, fields(json!({})))),
        )
        .rule("version-added", Safe)
        .rule("served-version-lacks-field", Breaking)
        .object(json!({"f": "x"})),
        Case::new(
            "served-version-type-differs",
            "a new served version v2 where `f` is an integer (a string in the storage version)",
            one(f.clone()),
            two((true, true, f.clone()), (true, false, fields(json!({"f": int})))),
        )
        .rule("version-added", Safe)
        .rule("served-version-type-differs", Breaking)
        .object(json!({"f": "x"})),
        Case::new(
            "served-version-field-dropped",
            "`g` added only to v2, served, not stored, no conversion webhook",
            two((true, true, f.clone()), (true, false, f.clone())),
            two((true, true, f.clone()), (true, false, fields(json!({"f": s, "g": s})))),
        )
        .rule("field-added", Safe)
        .rule("served-version-field-dropped", Breaking)
        .object(json!({"f": "x"}))
        .update("v2", json!({"g": "new"})),
        // Subresources and printer columns.
        Case::new("subresource-added-status", "a status subresource added", one(f.clone()), status(one(f.clone())))
            .rule("subresource-added", Breaking)
            .object(json!({"f": "x"})),
        Case::new("subresource-added-scale", "a scale subresource added", one(replicas()), scale(one(replicas()), ".spec.replicas"))
            .rule("subresource-added", Safe)
            .object(json!({"replicas": 2})),
        Case::new("subresource-removed", "the status subresource removed", status(one(f.clone())), one(f.clone()))
            .rule("subresource-removed", Breaking)
            .object(json!({"f": "x"})),
        Case::new(
            "subresource-changed",
            "the scale subresource reads `spec.size` instead of `spec.replicas`",
            scale(one(replicas()), ".spec.replicas"),
            scale(one(replicas()), ".spec.size"),
        )
        .rule("subresource-changed", Breaking)
        .object(json!({"replicas": 2, "size": 5})),
        Case::new(
            "printer-columns-changed",
            "a printer column added",
            one(f.clone()),
            columns(one(f.clone())),
        )
        .rule("printer-columns-changed", Safe)
        .object(json!({"f": "x"})),
    ]);
    // Names and scope.
    let renamed = |pointer: &str, value: Value| {
        let mut new = one(f.clone());
        let mut at = &mut new;
        for key in pointer.split('/').skip(1) {
            at = &mut at[key];
        }
        *at = value;
        new
    };
    let mut plural = renamed("/spec/names/plural", json!("gadgets"));
    plural["metadata"]["name"] = json!("gadgets.@G");
    let mut group = renamed("/spec/group", json!("moved-@G"));
    group["metadata"]["name"] = json!("widgets.moved-@G");
    let mut kind = renamed("/spec/names/kind", json!("Gadget"));
    kind["spec"]["names"]["listKind"] = json!("WidgetList");
    kind["spec"]["names"]["singular"] = json!("widget");
    cases.extend([
        Case::new(
            "scope-changed",
            "the scope from Namespaced to Cluster",
            one(f.clone()),
            renamed("/spec/scope", json!("Cluster")),
        )
        .rule("scope-changed", Breaking)
        .object(json!({"f": "x"})),
        Case::new(
            "kind-changed",
            "the kind from Widget to Gadget (plural, singular, list kind kept)",
            one(f.clone()),
            kind,
        )
        .rule("kind-changed", Breaking)
        .object(json!({"f": "x"})),
        Case::new(
            "singular-changed",
            "the singular name from widget to gizmo",
            one(f.clone()),
            renamed("/spec/names/singular", json!("gizmo")),
        )
        .rule("singular-changed", Safe)
        .object(json!({"f": "x"})),
        Case::new(
            "list-kind-changed",
            "the list kind from WidgetList to Widgets",
            one(f.clone()),
            renamed("/spec/names/listKind", json!("Widgets")),
        )
        .rule("list-kind-changed", Breaking)
        .object(json!({"f": "x"})),
        Case::new(
            "plural-changed",
            "the plural from widgets to gadgets (a new CRD name)",
            one(f.clone()),
            plural,
        )
        .rule("plural-changed", Breaking)
        .object(json!({"f": "x"})),
        Case::new(
            "group-changed",
            "the group changed (a new CRD name)",
            one(f.clone()),
            group,
        )
        .rule("group-changed", Breaking)
        .object(json!({"f": "x"})),
        Case::new(
            "short-names-changed",
            "a short name added",
            one(f.clone()),
            renamed("/spec/names/shortNames", json!(["wdg"])),
        )
        .rule("short-names-changed", Safe)
        .object(json!({"f": "x"})),
        Case::new(
            "categories-changed",
            "a category added",
            one(f.clone()),
            renamed("/spec/names/categories", json!(["oracle"])),
        )
        .rule("categories-changed", Safe)
        .object(json!({"f": "x"})),
        Case {
            name: "crd-removed",
            change: "the CRD is no longer generated (deleted)",
            rules: vec![("crd-removed", Breaking)],
            old: Some(one(f.clone())),
            new: None,
            objects: vec![json!({"f": "x"})],
            updates: Vec::new(),
        },
        Case {
            name: "crd-added",
            change: "a new CRD",
            rules: vec![("crd-added", Safe)],
            old: None,
            new: Some(one(f.clone())),
            objects: Vec::new(),
            updates: Vec::new(),
        },
    ]);
    cases
}

/// The words for a bound tightened or loosened.
fn keyword_change(keyword: &'static str, tightened: bool) -> &'static str {
    let text = if tightened {
        format!("{keyword} tightened")
    } else {
        format!("{keyword} loosened")
    };
    text.leak()
}

/// A map list of `{name, port}` keyed by `keys`.
fn ports(keys: Value) -> Value {
    json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": keys,
           "items": {"type": "object", "required": ["name", "port"],
                     "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}})
}

/// An object with the strings `a` and `b`, with `keyword` over `required` branches.
fn pair(composition: Option<(&str, [&str; 2])>) -> Value {
    let mut schema =
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}});
    if let Some((keyword, [x, y])) = composition {
        schema[keyword] = json!([{"required": [x]}, {"required": [y]}]);
    }
    schema
}

/// A spec with `replicas` and `size`.
fn replicas() -> Value {
    fields(json!({"replicas": {"type": "integer"}, "size": {"type": "integer"}}))
}

/// `crd` with a status subresource in every version.
fn status(mut crd: Value) -> Value {
    for version in crd["spec"]["versions"].as_array_mut().unwrap() {
        version["subresources"]["status"] = json!({});
    }
    crd
}

/// `crd` with a scale subresource reading `spec_path`.
fn scale(mut crd: Value, spec_path: &str) -> Value {
    for version in crd["spec"]["versions"].as_array_mut().unwrap() {
        version["subresources"]["scale"] = json!({
            "specReplicasPath": spec_path, "statusReplicasPath": ".status.replicas"});
    }
    crd
}

/// `crd` with a printer column.
fn columns(mut crd: Value) -> Value {
    for version in crd["spec"]["versions"].as_array_mut().unwrap() {
        version["additionalPrinterColumns"] =
            json!([{"name": "F", "type": "string", "jsonPath": ".spec.f"}]);
    }
    crd
}
