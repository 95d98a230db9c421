//! The compatibility gate (`crdgen --compat`, [`kubeforge::crd::compat`]) checked against the
//! apiserver (issue #48): for each evolution case, the gate's verdict on the two CRDs is compared
//! with what the apiserver then does to objects stored under the old CRD.
//!
//! Each case has its own CRD group (`<case>.<run>.oracle.kubeforge.dev`), so the cases run
//! concurrently. The oracle:
//!
//! 1. applies the old CRD and stores the case's objects (valid under it) through the versions
//!    the case names;
//! 2. applies the new CRD (an update the apiserver refuses is an outcome: `scope-changed`), and
//!    waits until every served version serves it (a printer column that only the new CRD has);
//! 3. for every object and every served version of the new CRD: reads it (it must hold what was
//!    stored), writes it back unchanged (nothing may be lost, read back through the version it
//!    was created in), creates a copy of what it read; creates the original request again (the
//!    same values must be stored); reads `/scale` where the old CRD had it; lists (the list's
//!    kind); then updates a field through every served version (server-side apply by a second
//!    field manager, plus the status, through `/status` where the old version had it) and checks
//!    the update is there and nothing else was lost.
//!
//! Observed class: `breaking` when a step was refused or data was lost or changed, else
//! `needs-migration` when `status.storedVersions` still lists a version that is no longer the
//! storage version (the objects work now, but the old version cannot be dropped before a
//! migration), else `safe`. Values the new schema adds (defaults) are not a loss; a stored `null`
//! read back as absent is not a loss (a `null` read back as a value is). The gate's class is the
//! most severe of its findings (`safe` when none); it must equal the observed one, except
//! `needs-review`, which the gate says when it cannot decide (two regexes) and which matches
//! either: those cases show both outcomes.
//!
//! The table of cases and outcomes is `docs/src/reference/compat-oracle.md`, checked against the
//! run (`KUBEFORGE_BLESS=1` rewrites it).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};
use kubeforge::crd::compat::{Class, Finding, RULES, compare};
use kubeforge::testing::TestNamespace;
use serde_json::{Value, json};

/// The domain under which every case's group lives.
const DOMAIN: &str = "oracle.kubeforge.dev";
/// The label on every CRD this suite creates (value: the run), for clean-up by hand.
const LABEL: &str = "kubeforge.dev/compat-oracle";
/// The (rule, class) pairs of [`RULES`] no case covers, and why.
const NOT_COVERED: &[(&str, Class, &str)] = &[(
    "field-removed",
    Class::NeedsMigration,
    "a field removed from a version converted by a webhook: the outcome is the webhook's, which \
     the conversion tests cover (tests/integration/conversion.rs, upgrade.rs)",
)];
/// How many cases run at once.
const CONCURRENCY: usize = 8;
/// The bound of each wait for the apiserver (a CRD served, a CRD gone): generous for a loaded
/// 2-core machine, where a CRD is usually served within a second.
const WAIT: Duration = Duration::from_secs(90);

/// One evolution of a CRD.
struct Case {
    /// The case's id (a DNS label: it is part of the group).
    name: &'static str,
    /// What changes, for the table.
    change: &'static str,
    /// The findings the gate must report for it (rule, class).
    rules: Vec<(&'static str, Class)>,
    /// The CRD before (`None`: there was none), with `@G` for the group.
    old: Option<Value>,
    /// The CRD after (`None`: it is deleted).
    new: Option<Value>,
    /// The specs of objects valid under `old`, each created through every served version.
    objects: Vec<Value>,
    /// Spec fields set by the update through a version, besides `note`.
    updates: Vec<(&'static str, Value)>,
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

/// Every case, in the order of the table.
#[allow(clippy::too_many_lines)]
fn cases() -> Vec<Case> {
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
    let bounds: [(
        &'static str,
        &'static str,
        &str,
        Value,
        i64,
        i64,
        Value,
        Value,
    ); 8] = [
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

/// `crd` with `@G` replaced by `group`.
fn instantiate(crd: &Value, group: &str) -> Value {
    serde_json::from_str(&crd.to_string().replace("@G", group)).unwrap()
}

/// `crd` with a printer column named after `generation` in every version: a version serves the
/// CRD of that generation once a Table of it shows the column.
fn probed(crd: &Value, generation: u32) -> Value {
    let mut crd = crd.clone();
    for version in crd["spec"]["versions"].as_array_mut().unwrap() {
        let column = json!({"name": format!("oracle-{generation}"), "type": "string",
                            "jsonPath": ".metadata.name"});
        match version["additionalPrinterColumns"].as_array_mut() {
            Some(columns) => columns.push(column),
            None => version["additionalPrinterColumns"] = json!([column]),
        }
    }
    crd
}

/// The parts of a CRD the oracle uses.
#[derive(Clone)]
struct Shape {
    name: String,
    group: String,
    plural: String,
    kind: String,
    list_kind: String,
    namespaced: bool,
    /// (name, served, storage, status subresource, scale subresource).
    versions: Vec<(String, bool, bool, bool, bool)>,
}

impl Shape {
    fn of(crd: &Value) -> Self {
        let spec = &crd["spec"];
        let kind = spec["names"]["kind"].as_str().unwrap().to_owned();
        Shape {
            name: crd["metadata"]["name"].as_str().unwrap().to_owned(),
            group: spec["group"].as_str().unwrap().to_owned(),
            plural: spec["names"]["plural"].as_str().unwrap().to_owned(),
            list_kind: spec["names"]["listKind"]
                .as_str()
                .map_or_else(|| format!("{kind}List"), str::to_owned),
            kind,
            namespaced: spec["scope"] == "Namespaced",
            versions: (spec["versions"].as_array().unwrap().iter())
                .map(|v| {
                    (
                        v["name"].as_str().unwrap().to_owned(),
                        v["served"] == true,
                        v["storage"] == true,
                        v["subresources"].get("status").is_some(),
                        v["subresources"].get("scale").is_some(),
                    )
                })
                .collect(),
        }
    }

    fn served(&self) -> Vec<String> {
        (self.versions.iter())
            .filter(|v| v.1)
            .map(|v| v.0.clone())
            .collect()
    }

    fn version(&self, name: &str) -> Option<&(String, bool, bool, bool, bool)> {
        self.versions.iter().find(|v| v.0 == name)
    }

    fn storage(&self) -> String {
        (self.versions.iter().find(|v| v.2))
            .map(|v| v.0.clone())
            .unwrap_or_default()
    }

    fn api(&self, client: &Client, ns: &str, version: &str) -> Api<DynamicObject> {
        let resource = ApiResource {
            group: self.group.clone(),
            version: version.to_owned(),
            api_version: format!("{}/{version}", self.group),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        };
        if self.namespaced {
            Api::namespaced_with(client.clone(), ns, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        }
    }

    fn path(&self, ns: &str, version: &str) -> String {
        if self.namespaced {
            format!(
                "/apis/{}/{version}/namespaces/{ns}/{}",
                self.group, self.plural
            )
        } else {
            format!("/apis/{}/{version}/{}", self.group, self.plural)
        }
    }
}

/// What one case did: the gate's findings and class, what the apiserver did.
struct Row {
    findings: Vec<Finding>,
    gate: Class,
    observed: Class,
    /// What happened, in a few words (the first problem, or what went through).
    what: String,
    problems: Vec<String>,
}

/// A short form of an API error: `422 Invalid` (with the message of a server error).
fn said(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if status.code >= 500 => {
            format!("{} {}", status.code, status.message)
        }
        kube::Error::Api(status) => format!("{} {}", status.code, status.reason),
        other => other.to_string(),
    }
}

/// The object's data: everything but `metadata` and `apiVersion`.
fn data(object: &DynamicObject) -> Value {
    let mut value = serde_json::to_value(object).unwrap();
    let map = value.as_object_mut().unwrap();
    map.remove("metadata");
    map.remove("apiVersion");
    value
}

/// Where `actual` does not hold `expected`: a missing or different value (a `null` expected may
/// be absent); values only `actual` has are fine (defaults).
fn lost(expected: &Value, actual: Option<&Value>, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Null, None | Some(Value::Null)) => None,
        (_, None) => Some(format!("{path} lost")),
        (Value::Object(want), Some(Value::Object(have))) => want
            .iter()
            .find_map(|(k, v)| lost(v, have.get(k), &format!("{path}.{k}"))),
        (Value::Array(want), Some(Value::Array(have))) if want.len() == have.len() => want
            .iter()
            .zip(have)
            .enumerate()
            .find_map(|(i, (w, h))| lost(w, Some(h), &format!("{path}[{i}]"))),
        (want, Some(have)) if want == have => None,
        (want, Some(have)) => Some(format!("{path} changed from {want} to {have}")),
    }
}

/// JSON merge patch of `patch` onto `target`.
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(target), Some(patch)) => {
            for (k, v) in patch {
                if v.is_null() {
                    target.remove(k);
                } else {
                    merge(target.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// Applies `crd` (labelled with the run): creates it, or replaces the live one's spec.
async fn apply(client: &Client, crd: &Value, run: &str) -> Result<(), kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd: CustomResourceDefinition = serde_json::from_value(crd.clone()).unwrap();
    crd.metadata
        .labels
        .get_or_insert_default()
        .insert(LABEL.to_owned(), run.to_owned());
    let name = crd.metadata.name.clone().unwrap();
    match api.get_opt(&name).await? {
        None => api.create(&PostParams::default(), &crd).await.map(|_| ()),
        Some(live) => {
            crd.metadata.resource_version = live.metadata.resource_version;
            api.replace(&name, &PostParams::default(), &crd)
                .await
                .map(|_| ())
        }
    }
}

/// Waits until every served version of `shape` serves the CRD of `generation` (its probe
/// column is in a Table); `Some` when the apiserver will not serve it (its names are refused:
/// `NamesAccepted` is False).
async fn served(
    client: &Client,
    ns: &str,
    shape: &Shape,
    generation: u32,
) -> Result<Option<String>, String> {
    let column = format!("oracle-{generation}");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for version in shape.served() {
        let deadline = Instant::now() + WAIT;
        loop {
            let request = http::Request::get(shape.path(ns, &version))
                .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
                .body(Vec::new())
                .unwrap();
            let last = match client.request::<Value>(request).await {
                Ok(table) => {
                    let columns = table["columnDefinitions"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    if columns.iter().any(|c| c["name"] == column.as_str()) {
                        break;
                    }
                    "an older CRD".to_owned()
                }
                Err(e) => said(&e),
            };
            let conditions = crds
                .get(&shape.name)
                .await
                .ok()
                .and_then(|c| c.status?.conditions);
            let refused = (conditions.iter().flatten())
                .find(|c| c.type_ == "NamesAccepted" && c.status == "False");
            if let Some(refused) = refused {
                return Ok(Some(format!(
                    "the apiserver does not serve the new CRD: NamesAccepted False ({}: {})",
                    refused.reason.clone().unwrap_or_default(),
                    refused.message.clone().unwrap_or_default()
                )));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} {version} not serving the CRD of generation {generation} after {WAIT:?}: {last}",
                    shape.name
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(None)
}

/// An object of `shape` through `version` named `name` with `spec`.
fn object(shape: &Shape, version: &str, name: &str, kind: &str, body: &Value) -> DynamicObject {
    let mut value = body.clone();
    value["apiVersion"] = json!(format!("{}/{version}", shape.group));
    value["kind"] = json!(kind);
    value["metadata"] = json!({"name": name});
    serde_json::from_value(value).unwrap()
}

/// An object stored under the old CRD.
struct Stored {
    name: String,
    version: String,
    /// What the client sent (its spec).
    sent: Value,
    /// The object as stored (its data).
    data: Value,
    /// The replicas `/scale` read, where the old version had it.
    replicas: Option<i32>,
}

/// Runs one case on the plane.
#[allow(clippy::too_many_lines)]
async fn run(case: &Case, client: &Client, ns: &str, run: &str) -> Result<Row, String> {
    let group = format!("{}.{run}.{DOMAIN}", case.name);
    let old = case.old.as_ref().map(|c| instantiate(c, &group));
    let new = case.new.as_ref().map(|c| instantiate(c, &group));
    let parse = |v: &Option<Value>| -> Vec<CustomResourceDefinition> {
        v.iter()
            .map(|v| serde_json::from_value(v.clone()).unwrap())
            .collect()
    };
    let findings = compare(&parse(&old), &parse(&new));
    let gate = findings
        .iter()
        .map(|f| f.class)
        .min()
        .unwrap_or(Class::Safe);
    let context = |what: &str| format!("{}: {what}", case.name);

    // The old CRD and its objects.
    let mut stored = Vec::new();
    let old_shape = old.as_ref().map(Shape::of);
    if let (Some(old), Some(shape)) = (&old, &old_shape) {
        apply(client, &probed(old, 1), run)
            .await
            .map_err(|e| context(&format!("applying the old CRD: {e}")))?;
        if let Some(refused) = served(client, ns, shape, 1).await? {
            return Err(context(&refused));
        }
        let through = shape.served();
        let all = case.objects.iter().enumerate();
        for ((i, spec), version) in all.flat_map(|o| through.iter().map(move |v| (o, v))) {
            let name = format!("o{i}-{version}");
            let api = shape.api(client, ns, version);
            let body = json!({"spec": spec});
            let created = api
                .create(
                    &PostParams::default(),
                    &object(shape, version, &name, &shape.kind, &body),
                )
                .await
                .map_err(|e| {
                    context(&format!(
                        "creating {name} through {version} under the old CRD: {e}"
                    ))
                })?;
            let has_scale = shape.version(version).is_some_and(|v| v.4);
            let replicas = if has_scale {
                let scale = api
                    .get_scale(&name)
                    .await
                    .map_err(|e| context(&e.to_string()))?;
                scale.spec.and_then(|s| s.replicas)
            } else {
                None
            };
            stored.push(Stored {
                name,
                version: (*version).to_owned(),
                sent: body,
                data: data(&created),
                replicas,
            });
        }
    }

    // The new CRD.
    let mut problems = Vec::new();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let new_shape = match &new {
        None => {
            let shape = old_shape.clone().unwrap();
            crds.delete(&shape.name, &DeleteParams::default())
                .await
                .map_err(|e| context(&e.to_string()))?;
            let deadline = Instant::now() + WAIT;
            while crds
                .get_opt(&shape.name)
                .await
                .map_err(|e| context(&e.to_string()))?
                .is_some()
            {
                if Instant::now() > deadline {
                    return Err(context("the old CRD still there after its deletion"));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // Nothing is served any more: the objects are read through the old versions.
            let mut gone = shape;
            for v in &mut gone.versions {
                v.1 = true;
            }
            gone
        }
        Some(new) => {
            let shape = Shape::of(new);
            if let Err(e) = apply(client, &probed(new, 2), run).await {
                let message = match &e {
                    kube::Error::Api(status) => status.message.clone(),
                    other => other.to_string(),
                };
                problems.push(format!(
                    "the apiserver refuses the new CRD ({}): {message}",
                    said(&e)
                ));
                shape
            } else {
                if let Some(refused) = served(client, ns, &shape, 2).await? {
                    problems.push(refused);
                }
                shape
            }
        }
    };
    let refused = !problems.is_empty();
    let versions = if refused {
        Vec::new()
    } else {
        new_shape.served()
    };
    let old_version = |v: &str| old_shape.as_ref().and_then(|s| s.version(v).cloned());

    for object_ in &stored {
        let name = &object_.name;
        let check_api = |v: &str| new_shape.api(client, ns, v);
        // Where to look after a write: the version it was created through, else the storage one.
        let home = if versions.contains(&object_.version) {
            object_.version.clone()
        } else {
            new_shape.storage()
        };
        for v in &versions {
            let api = check_api(v);
            let read = match api.get(name).await {
                Ok(read) => read,
                Err(e) => {
                    problems.push(format!("read {name} through {v}: {}", said(&e)));
                    continue;
                }
            };
            if let Some(loss) = lost(&object_.data, Some(&data(&read)), "") {
                problems.push(format!(
                    "read {name} through {v}: {}",
                    loss.trim_start_matches('.')
                ));
            }
            match api.replace(name, &PostParams::default(), &read).await {
                Err(e) => problems.push(format!("write {name} back through {v}: {}", said(&e))),
                Ok(_) => match check_api(&home).get(name).await {
                    Ok(after) => {
                        if let Some(loss) = lost(&object_.data, Some(&data(&after)), "") {
                            problems.push(format!(
                                "write {name} back through {v}, read through {home}: {}",
                                loss.trim_start_matches('.')
                            ));
                        }
                    }
                    Err(e) => problems.push(format!("read {name} through {home}: {}", said(&e))),
                },
            }
            let copy_name = format!("{name}-{v}-copy");
            let copy = object(&new_shape, v, &copy_name, &new_shape.kind, &data(&read));
            match api.create(&PostParams::default(), &copy).await {
                Err(e) => {
                    problems.push(format!("create a copy of {name} through {v}: {}", said(&e)))
                }
                Ok(created) => {
                    if let Some(loss) = lost(&data(&read), Some(&data(&created)), "") {
                        problems.push(format!(
                            "create a copy of {name} through {v}: {}",
                            loss.trim_start_matches('.')
                        ));
                    }
                }
            }
            if old_version(v).is_some_and(|o| o.4) {
                match api.get_scale(name).await {
                    Err(e) => {
                        problems.push(format!("read /scale of {name} through {v}: {}", said(&e)))
                    }
                    Ok(scale) => {
                        let now = scale.spec.and_then(|s| s.replicas);
                        if now != object_.replicas {
                            let said =
                                |r: Option<i32>| r.map_or("none".to_owned(), |r| r.to_string());
                            problems.push(format!(
                                "read /scale of {name} through {v}: replicas {} instead of {}",
                                said(now),
                                said(object_.replicas)
                            ));
                        }
                    }
                }
            }
        }
        // The client's original request again, through its version, with its kind.
        let again = format!("{name}-again");
        let old_kind = old_shape.as_ref().map_or("Widget", |s| s.kind.as_str());
        if versions.contains(&object_.version) {
            let body = object(
                &new_shape,
                &object_.version,
                &again,
                old_kind,
                &object_.sent,
            );
            match check_api(&object_.version)
                .create(&PostParams::default(), &body)
                .await
            {
                Err(e) => problems.push(format!(
                    "create {name} again through {}: {}",
                    object_.version,
                    said(&e)
                )),
                Ok(created) => {
                    if let Some(loss) = lost(&object_.data, Some(&data(&created)), "") {
                        problems.push(format!(
                            "create {name} again through {}: {}",
                            object_.version,
                            loss.trim_start_matches('.')
                        ));
                    }
                }
            }
        } else {
            problems.push(format!(
                "create {name} again through {}: not served",
                object_.version
            ));
        }
        // An update of a field through every served version: a merge patch of the spec (what
        // most clients send), then server-side apply by another field manager (with the status
        // where the old version had no status subresource, else through `/status`).
        for v in &versions {
            let api = check_api(v);
            let Ok(current) = api.get(name).await else {
                continue;
            };
            let mut patched = json!({"note": format!("patched through {v}")});
            for (_, extra) in case.updates.iter().filter(|(uv, _)| uv == v) {
                merge(&mut patched, extra);
            }
            let patch = json!({"spec": patched});
            let params = PatchParams::default();
            let merge_patch = Patch::Merge(&patch);
            if let Err(e) = api.patch(name, &params, &merge_patch).await {
                problems.push(format!("patch {name} through {v}: {}", said(&e)));
            } else {
                let mut expected = data(&current);
                merge(&mut expected, &patch);
                match api.get(name).await {
                    Ok(after) => {
                        if let Some(loss) = lost(&expected, Some(&data(&after)), "") {
                            let loss = loss.trim_start_matches('.').to_owned();
                            problems.push(format!("patch {name} through {v}: {loss}"));
                        }
                    }
                    Err(e) => problems.push(format!("read {name} through {v}: {}", said(&e))),
                }
            }
            let Ok(current) = api.get(name).await else {
                continue;
            };
            let mut spec = json!({"note": format!("applied through {v}")});
            for (_, extra) in case.updates.iter().filter(|(uv, _)| uv == v) {
                merge(&mut spec, extra);
            }
            let status_subresource = old_version(v).is_some_and(|o| o.3);
            let status = json!({"note": format!("status through {v}")});
            let mut body = json!({"spec": spec});
            if !status_subresource {
                body["status"] = status.clone();
            }
            let mut expected = data(&current);
            merge(&mut expected, &body);
            let apply = object(&new_shape, v, name, &new_shape.kind, &body);
            let params = PatchParams::apply("compat-oracle").force();
            if let Err(e) = api.patch(name, &params, &Patch::Apply(&apply)).await {
                problems.push(format!("apply {name} through {v}: {}", said(&e)));
                continue;
            }
            if status_subresource {
                let patch = json!({"status": status});
                if let Err(e) = api
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    problems.push(format!(
                        "update the status of {name} through {v}/status: {}",
                        said(&e)
                    ));
                } else {
                    merge(&mut expected, &patch);
                }
            }
            match api.get(name).await {
                Ok(after) => {
                    if let Some(loss) = lost(&expected, Some(&data(&after)), "") {
                        problems.push(format!(
                            "apply {name} through {v}: {}",
                            loss.trim_start_matches('.')
                        ));
                    }
                }
                Err(e) => problems.push(format!("read {name} through {v}: {}", said(&e))),
            }
        }
    }
    // Lists: their kind.
    if let Some(old) = &old_shape {
        for v in &versions {
            match new_shape
                .api(client, ns, v)
                .list(&ListParams::default())
                .await
            {
                Ok(list) if list.types.kind != old.list_kind => problems.push(format!(
                    "list through {v}: a {} instead of a {}",
                    list.types.kind, old.list_kind
                )),
                Ok(_) => {}
                Err(e) => problems.push(format!("list through {v}: {}", said(&e))),
            }
        }
    }
    // A migration still to do: the stored versions.
    let mut migration = None;
    if !refused && new.is_some() {
        let live = crds
            .get(&new_shape.name)
            .await
            .map_err(|e| context(&e.to_string()))?;
        let storage = new_shape.storage();
        let stored_versions = (live.status.and_then(|s| s.stored_versions)).unwrap_or_default();
        let behind: Vec<_> = stored_versions.iter().filter(|v| **v != storage).collect();
        if !behind.is_empty() {
            migration = Some(format!(
                "every step works; status.storedVersions still lists {behind:?} besides {storage}: \
                 the objects stored as the old version must be migrated before it is dropped"
            ));
        }
    }
    // Clean up: both CRDs (their objects go with them).
    for shape in [old_shape.as_ref(), Some(&new_shape)].into_iter().flatten() {
        let _ = crds.delete(&shape.name, &DeleteParams::background()).await;
    }
    let stable = |text: &str| text.replace(&format!(".{run}.{DOMAIN}"), &format!(".{DOMAIN}"));
    let problems: Vec<String> = problems.iter().map(|p| stable(p)).collect();
    let (observed, what) = if let Some(first) = problems.first() {
        (Class::Breaking, first.clone())
    } else if let Some(migration) = migration {
        (Class::NeedsMigration, migration)
    } else if stored.is_empty() {
        (Class::Safe, "nothing was stored before".to_owned())
    } else {
        (
            Class::Safe,
            "every step accepted; every object intact through every served version".to_owned(),
        )
    };
    Ok(Row {
        findings,
        gate,
        observed,
        what,
        problems,
    })
}

/// Whether the gate's class agrees with the apiserver's behaviour.
fn agrees(row: &Row) -> bool {
    row.gate == row.observed || row.gate == Class::NeedsReview
}

/// The book's table of the cases and their outcomes.
fn table(cases: &[Case], rows: &[Row]) -> String {
    let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ");
    let mut out = String::from(
        "<!-- generated by tests/integration/compat_oracle.rs (KUBEFORGE_BLESS=1 rewrites it) -->\n\
         # Compatibility verdicts checked against the apiserver\n\n\
         Each row is one case of the oracle test `compat_oracle::gate_should_match_the_apiserver` \
         (see [Checking compatibility between releases](../webhooks.md#checking-compatibility-between-releases)): \
         the old CRD is applied and objects valid under it are stored, the new CRD is applied, then \
         each object is read through every served version, written back unchanged, copied, created \
         again, and updated through every served version. *Gate* is `crdgen --compat`'s class (the \
         most severe finding); *apiserver* is what happened: `breaking` when a step was refused or \
         data was lost or changed, `needs-migration` when everything works but \
         `status.storedVersions` still lists the old storage version, `safe` otherwise. \
         `needs-review` is the gate's answer where it cannot decide (two regexes); those cases show \
         both outcomes.\n\n\
         | case | change | gate's findings | gate | apiserver | what happened |\n\
         |---|---|---|---|---|---|\n",
    );
    for (case, row) in cases.iter().zip(rows) {
        let findings: BTreeSet<String> = (row.findings.iter())
            .map(|f| format!("`{}` ({})", f.rule, f.class))
            .collect();
        let findings = if findings.is_empty() {
            "none".to_owned()
        } else {
            findings.into_iter().collect::<Vec<_>>().join(", ")
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            case.name,
            cell(case.change),
            findings,
            row.gate,
            row.observed,
            cell(&row.what)
        ));
    }
    out
}

#[tokio::test]
async fn gate_should_match_the_apiserver() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let run = ns.name().to_owned();
    let cases = cases();
    let started = Instant::now();
    let rows: Vec<Result<Row, String>> = futures::stream::iter(&cases)
        .map(|case| run_case(case, &client, ns.name(), &run))
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let mut failures = Vec::new();
    let mut done = Vec::new();
    for (case, row) in cases.iter().zip(rows) {
        let row = match row {
            Ok(row) => row,
            Err(e) => {
                failures.push(format!("{}: the case could not run: {e}", case.name));
                continue;
            }
        };
        if !agrees(&row) {
            failures.push(format!(
                "{}: the gate says {} ({}), the apiserver {}: {}",
                case.name,
                row.gate,
                (row.findings.iter())
                    .map(|f| format!("{} {}", f.class, f.rule))
                    .collect::<Vec<_>>()
                    .join(", "),
                row.observed,
                row.problems.join("; ")
            ));
        }
        for (rule, class) in &case.rules {
            if !row
                .findings
                .iter()
                .any(|f| f.rule == *rule && f.class == *class)
            {
                failures.push(format!(
                    "{}: the gate reports no {class} {rule} (it reports {})",
                    case.name,
                    (row.findings.iter())
                        .map(|f| format!("{} {}", f.class, f.rule))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        done.push((case, row));
    }
    eprintln!("compat oracle: {} cases in {elapsed:.1?}", cases.len());
    assert!(
        failures.is_empty(),
        "{} case(s) disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let rows: Vec<Row> = done.into_iter().map(|(_, row)| row).collect();
    // Every rule in each of its classes has a case.
    let reported: BTreeSet<(&str, Class)> = (rows.iter().flat_map(|r| &r.findings))
        .map(|f| (f.rule, f.class))
        .collect();
    let uncovered: Vec<String> = (RULES.iter())
        .flat_map(|(rule, classes)| classes.iter().map(move |class| (*rule, *class)))
        .filter(|pair| !reported.contains(pair))
        .filter(|(rule, class)| !NOT_COVERED.iter().any(|(r, c, _)| r == rule && c == class))
        .map(|(rule, class)| format!("{class} {rule}"))
        .collect();
    assert!(uncovered.is_empty(), "no case reports {uncovered:?}");
    check_table(&table(&cases, &rows));
}

async fn run_case(case: &Case, client: &Client, ns: &str, run_id: &str) -> Result<Row, String> {
    run(case, client, ns, run_id).await
}

/// Compares the table with the book's, or writes it with `KUBEFORGE_BLESS=1`.
fn check_table(rendered: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/src/reference/compat-oracle.md");
    if std::env::var_os("KUBEFORGE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, rendered).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == rendered,
        "docs/src/reference/compat-oracle.md is stale: run KUBEFORGE_BLESS=1 cargo test -p kubeforge-tests -- compat_oracle\n{}",
        (committed.lines().zip(rendered.lines()))
            .find(|(a, b)| a != b)
            .map_or_else(String::new, |(a, b)| format!("- {a}\n+ {b}"))
    );
}
