//! `#[custom_resource]` kinds against the real apiserver: every field marker accepted/rejected as
//! the schema says (and the same verdict from `obj.validate()`), defaults, pruning, CEL rules,
//! printer columns, the scale and status subresources, selectable fields, several versions.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Api, Resource};
use kubeforge::crd::{Validate, merge_crds};
use kubeforge::testing::{TestNamespace, apply_crds};
use kubeforge_examples::webapp::{WebApp, WebAppSpec, WebAppStatus};
use serde_json::{Value, json};

const GROUP: &str = "crd-test.kubeforge.dev";

/// One field per marker; every field optional so that each case sets exactly one.
#[kubeforge::custom_resource(
    group = "crd-test.kubeforge.dev",
    version = "v1",
    kind = "Marked",
    namespaced,
    selectable_field(json_path = ".spec.color"),
    rule(
        cel = "!has(self.min) || !has(self.max) || self.min <= self.max",
        message = "min must not exceed max"
    ),
    rule(
        cel = "!has(self.fives) || self.fives < 1000",
        message_expression = "self.fives > 5000 ? 'far too many fives' : 'too many fives'",
        reason = "FieldValueForbidden",
        field_path = ".fives"
    )
)]
#[derive(Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct MarkedSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(minimum = 1)]
    pub min: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(maximum = 10)]
    pub max: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(minimum = 0, exclusive_minimum)]
    pub positive: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(maximum = 1, exclusive_maximum)]
    pub below_one: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(multiple_of = 5)]
    pub fives: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(min_length = 3)]
    pub short: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_length = 3)]
    pub long: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(pattern = "^[a-z]+$")]
    pub lower: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(enum = ["red", "green"])]
    pub color: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(format = "date-time")]
    pub when: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(min_items = 1)]
    pub some: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_items = 2)]
    pub few: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(unique_items)]
    pub unique: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(min_properties = 1)]
    pub non_empty: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_properties = 1)]
    pub single: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(rule(cel = "self == oldSelf", message = "frozen is immutable"))]
    pub frozen: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(items(pattern = "^[a-z]+$", max_length = 3))]
    pub words: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(rule(cel = "self % 2 == 0", message = "must be even"))]
    pub even: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(list_type = "map", list_map_keys = ["name"])]
    pub keyed: Option<Vec<Keyed>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested: Option<Nested>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(default = 3)]
    pub defaulted: Option<i32>,
    #[serde(default = "seven")]
    pub serde_defaulted: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(nullable)]
    pub maybe: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(int_or_string)]
    pub loose_port: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(embedded_resource)]
    pub template: Option<serde_json::Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(preserve_unknown_fields)]
    pub open: Option<Open>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(schemaless)]
    pub raw: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(map_type = "atomic", max_properties = 2)]
    pub atomic: Option<BTreeMap<String, String>>,
}

/// A struct whose unknown fields are kept (`preserve_unknown_fields` on the field using it).
#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Open {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known: Option<String>,
}

fn seven() -> i32 {
    7
}

/// A list-map entry.
#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Keyed {
    pub name: String,
    #[serde(default)]
    pub value: i32,
}

/// Markers on a nested struct are validated at their path.
#[kubeforge::schema(rule(cel = "self.low <= self.high", message = "low must not exceed high"))]
#[derive(Clone, Debug)]
pub struct Nested {
    #[validate(minimum = 0)]
    pub low: i32,
    pub high: i32,
}

/// Version 1 of a kind with two versions (deprecated, not the storage version).
mod gadget_v1 {
    #[kubeforge::custom_resource(
        group = "crd-test.kubeforge.dev",
        version = "v1",
        kind = "Gadget",
        namespaced,
        storage = false,
        deprecated(warning = "use crd-test.kubeforge.dev/v2 Gadget")
    )]
    #[derive(Clone, Debug)]
    pub struct GadgetSpec {
        pub size: i32,
    }
}

/// Version 2 of the kind, the storage version.
mod gadget_v2 {
    #[kubeforge::custom_resource(
        group = "crd-test.kubeforge.dev",
        version = "v2",
        kind = "Gadget",
        namespaced
    )]
    #[derive(Clone, Debug)]
    pub struct GadgetSpec {
        pub size: i32,
    }
}

/// `embedded_resource` on every type a user would put there, and a plain `RawExtension`.
#[kubeforge::custom_resource(
    group = "crd-test.kubeforge.dev",
    version = "v1",
    kind = "Holder",
    namespaced
)]
#[derive(Clone, Debug, Default)]
pub struct HolderSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(embedded_resource)]
    pub raw: Option<k8s_openapi::apimachinery::pkg::runtime::RawExtension>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(embedded_resource)]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(embedded_resource)]
    pub map: Option<serde_json::Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(embedded_resource)]
    pub typed: Option<Embedded>,
    /// No marker: still keeps what is stored in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain: Option<k8s_openapi::apimachinery::pkg::runtime::RawExtension>,
}

/// A typed embedded object.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct Embedded {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// `#[serde(default)]` fields next to markers a schema default would contradict.
#[kubeforge::custom_resource(
    group = "crd-test.kubeforge.dev",
    version = "v1",
    kind = "Optionals",
    namespaced
)]
#[derive(Clone, Debug, Default)]
pub struct OptionalsSpec {
    #[serde(default)]
    pub count: i32,
    #[serde(default)]
    #[validate(min_properties = 1)]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(default = 3)]
    pub replicas: Option<i32>,
}

/// An object of kind `kind` of this group in `ns`.
fn dynamic_api(ns: &TestNamespace, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, "v1", kind);
    Api::namespaced_with(ns.client(), ns.name(), &ApiResource::from_gvk(&gvk))
}

/// Every type that can hold an embedded resource gives a CRD the apiserver accepts, and keeps
/// what is stored in it; a plain `RawExtension` keeps its content too (it was pruned).
#[tokio::test]
async fn embedded_resources_and_raw_extensions_should_be_accepted_and_keep_their_content() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [Holder::crd()], Duration::from_secs(30))
        .await
        .expect("the apiserver accepts the CRD");
    let embedded = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "inner"}, "data": {"a": "b"},
    });
    let spec = json!({
        "raw": embedded, "value": embedded, "map": embedded,
        "typed": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inner"}},
        "plain": {"anything": {"nested": [1, "two"]}},
    });
    let holder: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Holder",
        "metadata": {"name": "h"}, "spec": spec,
    }))
    .unwrap();
    let api = dynamic_api(&ns, "Holder");
    let created = api.create(&PostParams::default(), &holder).await.unwrap();
    let spec = &created.data["spec"];
    for field in ["raw", "value", "map"] {
        assert_eq!(spec[field]["data"], json!({"a": "b"}), "{field}: {spec}");
        assert_eq!(spec[field]["metadata"]["name"], "inner", "{field}: {spec}");
    }
    assert_eq!(spec["typed"]["kind"], "ConfigMap", "{spec}");
    assert_eq!(
        spec["plain"],
        json!({"anything": {"nested": [1, "two"]}}),
        "a RawExtension keeps unknown fields"
    );
    // An embedded resource must carry apiVersion and kind: the apiserver checks it.
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Holder",
        "metadata": {"name": "bad"}, "spec": {"raw": {"data": {}}},
    }))
    .unwrap();
    let refused = api.create(&PostParams::default(), &bad).await;
    assert!(
        refused.is_err(),
        "an embedded resource without kind: {refused:?}"
    );
}

/// `#[serde(default)]` makes a field optional and writes no schema default: the CRD is accepted
/// (a `{}` default contradicted `min_properties = 1`) and the apiserver stores only the
/// marker's default.
#[tokio::test]
async fn serde_default_should_make_a_field_optional_without_a_schema_default() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [Optionals::crd()], Duration::from_secs(30))
        .await
        .expect("the apiserver accepts the CRD");
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Optionals",
        "metadata": {"name": "o"}, "spec": {},
    }))
    .unwrap();
    let created = dynamic_api(&ns, "Optionals")
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    assert_eq!(created.data["spec"], json!({"replicas": 3}));
}

async fn marked_namespace() -> (TestNamespace, Api<DynamicObject>) {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [Marked::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Marked");
    let api = Api::namespaced_with(ns.client(), ns.name(), &ApiResource::from_gvk(&gvk));
    (ns, api)
}

fn marked(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Marked",
        "metadata": { "name": name }, "spec": spec,
    }))
    .unwrap()
}

/// The server's verdict on creating `spec`: `Ok` or the 422 message.
async fn server_verdict(api: &Api<DynamicObject>, name: &str, spec: &Value) -> Result<(), String> {
    match api
        .create(&PostParams::default(), &marked(name, spec.clone()))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 422 => Err(status.message),
        Err(e) => panic!("{name}: unexpected error {e}"),
    }
}

/// `obj.validate()`'s verdict on `spec`.
fn client_verdict(spec: &Value) -> Result<(), String> {
    let obj: Marked =
        serde_json::from_value(json!({ "metadata": {"name": "x"}, "spec": spec })).unwrap();
    obj.validate().map_err(|report| report.to_string())
}

struct Case {
    field: &'static str,
    valid: Value,
    invalid: Value,
    /// In the apiserver's message and (unless server-only) in `validate()`'s.
    message: &'static str,
    server_only: bool,
}

fn case(field: &'static str, valid: Value, invalid: Value, message: &'static str) -> Case {
    Case {
        field,
        valid,
        invalid,
        message,
        server_only: false,
    }
}

fn server_only(field: &'static str, valid: Value, invalid: Value, message: &'static str) -> Case {
    Case {
        field,
        valid,
        invalid,
        message,
        server_only: true,
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "a table of cases, one entry per schema shape: splitting it would only scatter the table"
)]
fn cases() -> Vec<Case> {
    vec![
        case(
            "min",
            json!(1),
            json!(0),
            "should be greater than or equal to 1",
        ),
        case(
            "max",
            json!(10),
            json!(11),
            "should be less than or equal to 10",
        ),
        case("positive", json!(0.5), json!(0), "should be greater than 0"),
        case("belowOne", json!(0.5), json!(1), "should be less than 1"),
        case("fives", json!(10), json!(7), "should be a multiple of 5"),
        case(
            "short",
            json!("abc"),
            json!("ab"),
            "should be at least 3 chars long",
        ),
        case(
            "long",
            json!("abc"),
            json!("abcd"),
            "may not be more than 3 bytes",
        ),
        case(
            "lower",
            json!("abc"),
            json!("aBc"),
            "should match '^[a-z]+$'",
        ),
        case(
            "color",
            json!("red"),
            json!("blue"),
            "Unsupported value: \"blue\": supported values: \"red\", \"green\"",
        ),
        case(
            "when",
            json!("2024-01-02T03:04:05Z"),
            json!("yesterday"),
            "must be of type date-time",
        ),
        case(
            "some",
            json!(["a"]),
            json!([]),
            "should have at least 1 items",
        ),
        case(
            "few",
            json!(["a", "b"]),
            json!(["a", "b", "c"]),
            "must have at most 2 items",
        ),
        case(
            "unique",
            json!(["a", "b"]),
            json!(["a", "a"]),
            "Duplicate value: \"a\"",
        ),
        case(
            "nonEmpty",
            json!({"a": "b"}),
            json!({}),
            "should have at least 1 properties",
        ),
        case(
            "single",
            json!({"a": "b"}),
            json!({"a": "b", "c": "d"}),
            "must have at most 1 item",
        ),
        case(
            "nested",
            json!({"low": 0, "high": 1}),
            json!({"low": -1, "high": 1}),
            "should be greater than or equal to 0",
        ),
        case(
            "words",
            json!(["abc", "de"]),
            json!(["abc", "DE"]),
            "should match '^[a-z]+$'",
        ),
        // CEL rules: validate() evaluates them too (kube-cel), with the same message.
        case("even", json!(2), json!(3), "must be even"),
        case(
            "nested",
            json!({"low": 1, "high": 1}),
            json!({"low": 2, "high": 1}),
            "low must not exceed high",
        ),
        server_only(
            "keyed",
            json!([{"name": "a"}, {"name": "b"}]),
            json!([{"name": "a"}, {"name": "a", "value": 1}]),
            "spec.keyed[1]: Duplicate value: {\"name\":\"a\"}",
        ),
        server_only(
            "template",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
            json!({"apiVersion": "v1", "metadata": {"name": "x"}}),
            "kind: Required value",
        ),
    ]
}

#[tokio::test]
async fn markers_should_get_the_same_verdict_from_apiserver_and_validate() {
    let (_ns, api) = marked_namespace().await;
    let mut failures = Vec::new();
    for (i, case) in cases().into_iter().enumerate() {
        let valid = json!({ case.field: case.valid });
        let invalid = json!({ case.field: case.invalid });
        let (server_ok, client_ok) = (
            server_verdict(&api, &format!("case-{i}-valid"), &valid).await,
            client_verdict(&valid),
        );
        if server_ok.is_err() || client_ok.is_err() {
            failures.push(format!(
                "{}: valid {valid} -> server {server_ok:?}, client {client_ok:?}",
                case.field
            ));
        }
        let server_err = server_verdict(&api, &format!("case-{i}-invalid"), &invalid).await;
        let client_err = client_verdict(&invalid);
        if !server_err.as_ref().is_err_and(|m| m.contains(case.message)) {
            failures.push(format!(
                "{}: invalid {invalid} -> server {server_err:?}, expected {:?}",
                case.field, case.message
            ));
        }
        // Both sides name the element: `spec.words[1]`.
        if case.field == "words" {
            let located = server_err
                .as_ref()
                .is_err_and(|m| m.contains("spec.words[1]"))
                && client_err
                    .as_ref()
                    .is_err_and(|m| m.contains("spec.words[1]"));
            if !located {
                failures.push(format!(
                    "words: {server_err:?} / {client_err:?} do not name spec.words[1]"
                ));
            }
        }
        let client_as_expected = if case.server_only {
            client_err.is_ok()
        } else {
            client_err
                .as_ref()
                .is_err_and(|m| m.contains(case.message) && m.contains(case.field))
        };
        if !client_as_expected {
            failures.push(format!(
                "{}: invalid {invalid} -> validate() {client_err:?}, expected {:?}",
                case.field, case.message
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn kind_level_rule_should_be_enforced_by_the_apiserver() {
    let (_ns, api) = marked_namespace().await;
    assert_eq!(
        server_verdict(&api, "ordered", &json!({"min": 2, "max": 3})).await,
        Ok(())
    );
    let err = server_verdict(&api, "unordered", &json!({"min": 5, "max": 3}))
        .await
        .unwrap_err();
    assert!(err.contains("min must not exceed max"), "{err}");
}

#[tokio::test]
async fn rule_options_and_transition_rules_should_be_enforced() {
    let (_ns, api) = marked_namespace().await;
    let err = server_verdict(&api, "too-many-fives", &json!({"fives": 1000}))
        .await
        .unwrap_err();
    assert!(
        err.contains("spec.fives: Forbidden: too many fives"),
        "reason, fieldPath and messageExpression: {err}"
    );

    let created = api
        .create(
            &PostParams::default(),
            &marked("frozen", json!({"frozen": "a"})),
        )
        .await
        .unwrap();
    let mut changed = created.clone();
    changed.data["spec"]["frozen"] = json!("b");
    match api
        .replace("frozen", &PostParams::default(), &changed)
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert!(s.message.contains("frozen is immutable"), "{}", s.message)
        }
        other => panic!("expected the transition rule to reject the update, got {other:?}"),
    }
    let mut same = created;
    same.data["spec"]["min"] = json!(5);
    api.replace("frozen", &PostParams::default(), &same)
        .await
        .unwrap();
}

#[tokio::test]
async fn defaults_should_be_applied_by_the_apiserver() {
    let (_ns, api) = marked_namespace().await;
    let created = api
        .create(&PostParams::default(), &marked("defaults", json!({})))
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["defaulted"], 3, "marker default");
    assert!(
        created.data["spec"].get("serdeDefaulted").is_none(),
        "#[serde(default)] makes a field optional; it writes no schema default"
    );
    // Reading the object, serde fills in its own default.
    let typed: Marked = serde_json::from_value(serde_json::to_value(&created).unwrap()).unwrap();
    assert_eq!(
        (typed.spec.defaulted, typed.spec.serde_defaulted),
        (Some(3), 7)
    );
}

#[tokio::test]
async fn pruning_should_keep_nullable_and_free_form_fields_only() {
    let (_ns, api) = marked_namespace().await;
    let spec = json!({
        "maybe": null,
        "min": null,
        "bogus": "dropped",
        "free": {"any": {"nested": [1, "two", {"three": true}]}},
        "nested": {"low": 0, "high": 1, "extra": "dropped"},
        "open": {"known": "k", "unknown": {"kept": true}},
        "raw": [1, {"two": 2}],
        "atomic": {"a": "b"},
    });
    let created = api
        .create(&PostParams::default(), &marked("pruned", spec))
        .await
        .unwrap();
    let spec = created.data["spec"].as_object().unwrap();
    assert_eq!(spec.get("maybe"), Some(&Value::Null), "nullable keeps null");
    assert!(
        !spec.contains_key("min"),
        "null of a non-nullable field is pruned"
    );
    assert!(!spec.contains_key("bogus"), "unknown fields are pruned");
    assert_eq!(
        spec["free"],
        json!({"any": {"nested": [1, "two", {"three": true}]}})
    );
    assert_eq!(spec["nested"], json!({"low": 0, "high": 1}));
    assert_eq!(
        spec["open"],
        json!({"known": "k", "unknown": {"kept": true}})
    );
    assert_eq!(spec["raw"], json!([1, {"two": 2}]));
    assert_eq!(spec["atomic"], json!({"a": "b"}));
}

#[tokio::test]
async fn int_or_string_should_accept_numbers_and_strings() {
    let (_ns, api) = marked_namespace().await;
    for (name, value) in [("number", json!(8080)), ("name", json!("http"))] {
        let spec = json!({"port": value, "loosePort": value});
        let created = api
            .create(&PostParams::default(), &marked(name, spec))
            .await
            .unwrap();
        assert_eq!(created.data["spec"]["port"], value);
        assert_eq!(created.data["spec"]["loosePort"], value);
    }
    let typed: Marked =
        serde_json::from_value(json!({"metadata": {}, "spec": {"port": "http"}})).unwrap();
    assert_eq!(typed.spec.port, Some(IntOrString::String("http".into())));
    let err = server_verdict(&api, "boolean", &json!({"port": true}))
        .await
        .unwrap_err();
    assert!(err.contains("spec.port"), "{err}");
}

#[tokio::test]
async fn selectable_field_should_filter_lists() {
    let (ns, api) = marked_namespace().await;
    for (name, color) in [("r", "red"), ("g", "green")] {
        api.create(
            &PostParams::default(),
            &marked(name, json!({"color": color})),
        )
        .await
        .unwrap();
    }
    let typed: Api<Marked> = ns.api();
    let red = typed
        .list(&ListParams::default().fields("spec.color=red"))
        .await
        .unwrap();
    let names: Vec<_> = red
        .items
        .iter()
        .filter_map(|m| m.metadata.name.clone())
        .collect();
    assert_eq!(names, ["r"]);
}

fn webapp_spec(replicas: i32) -> WebAppSpec {
    serde_json::from_value(json!({"image": "registry.example.com/shop:1.4", "replicas": replicas}))
        .unwrap()
}

async fn webapp_namespace() -> (TestNamespace, Api<WebApp>) {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [WebApp::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let api = ns.api::<WebApp>();
    (ns, api)
}

#[tokio::test]
async fn webapp_should_round_trip_typed_and_apply_defaults() {
    let (_ns, api) = webapp_namespace().await;
    let created = api
        .create(&PostParams::default(), &WebApp::new("shop", webapp_spec(2)))
        .await
        .unwrap();
    assert_eq!(created.spec.port, 8080);
    assert_eq!(created.spec.replicas, 2);
    assert!(created.metadata.uid.is_some());
    let mut bad = WebApp::new("bad", webapp_spec(2));
    bad.spec.min_replicas = Some(3);
    let refused = bad
        .validate()
        .expect_err("validate() evaluates the CEL rule too");
    assert!(refused.to_string().contains("minReplicas"), "{refused}");
    match api.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(s)) => assert!(
            s.message.contains("minReplicas must not exceed replicas"),
            "{}",
            s.message
        ),
        other => panic!("expected a CEL rejection, got {other:?}"),
    }
    let mut invalid = WebApp::new("invalid", webapp_spec(101));
    invalid.spec.image = "UPPER".into();
    let report = invalid.validate().unwrap_err().to_string();
    assert!(
        report.contains("spec.replicas: should be less than or equal to 100"),
        "{report}"
    );
    assert!(report.contains("spec.image: should match"), "{report}");
}

#[tokio::test]
async fn printer_columns_should_appear_in_the_table_response() {
    let (ns, api) = webapp_namespace().await;
    api.create(&PostParams::default(), &WebApp::new("shop", webapp_spec(3)))
        .await
        .unwrap();
    let url = format!(
        "{}?fieldSelector=metadata.name%3Dshop",
        WebApp::url_path(&(), Some(ns.name()))
    );
    let request = http::Request::get(url)
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value =
        serde_json::from_str(&ns.client().request_text(request).await.unwrap()).unwrap();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        ["Name", "Image", "Replicas", "Ready", "Age", "Port"]
    );
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[0], "shop");
    assert_eq!(cells[1], "registry.example.com/shop:1.4");
    assert_eq!(cells[2], 3);
    assert_eq!(cells[5], 8080);
    assert_eq!(table["columnDefinitions"][5]["priority"], 1);
}

#[tokio::test]
async fn scale_subresource_should_read_and_write_replicas() {
    let (_ns, api) = webapp_namespace().await;
    api.create(&PostParams::default(), &WebApp::new("shop", webapp_spec(2)))
        .await
        .unwrap();
    let status = WebAppStatus {
        replicas: 2,
        selector: Some("app=shop".into()),
        ..WebAppStatus::default()
    };
    api.patch_status(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap();
    let scale = api.get_scale("shop").await.unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(2));
    let scale_status = scale.status.unwrap();
    assert_eq!(
        (scale_status.replicas, scale_status.selector.as_deref()),
        (2, Some("app=shop"))
    );

    api.patch_scale(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    assert_eq!(api.get("shop").await.unwrap().spec.replicas, 5);
    // The schema still applies through /scale.
    match api
        .patch_scale(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 500}})),
        )
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 422, "{}", s.message),
        other => panic!("expected 422, got {other:?}"),
    }
}

#[tokio::test]
async fn status_subresource_should_ignore_status_in_main_resource_updates() {
    let (_ns, api) = webapp_namespace().await;
    let mut app = WebApp::new("shop", webapp_spec(1));
    app.status = Some(WebAppStatus {
        replicas: 9,
        ..WebAppStatus::default()
    });
    let created = api.create(&PostParams::default(), &app).await.unwrap();
    assert_eq!(created.status, None, "status is dropped on create");

    let mut updated = created.clone();
    updated.spec.replicas = 4;
    updated.status = Some(WebAppStatus {
        replicas: 9,
        ..WebAppStatus::default()
    });
    let replaced = api
        .replace("shop", &PostParams::default(), &updated)
        .await
        .unwrap();
    assert_eq!(replaced.spec.replicas, 4);
    assert_eq!(
        replaced.status, None,
        "status is ignored by the main resource"
    );

    let mut with_status = replaced.clone();
    with_status.status = Some(WebAppStatus {
        replicas: 4,
        ready_replicas: 4,
        ..WebAppStatus::default()
    });
    let after = api
        .replace_status("shop", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(after.status.map(|s| s.ready_replicas), Some(4));
    assert_eq!(
        api.get("shop").await.unwrap().spec.replicas,
        4,
        "the status endpoint ignores spec"
    );
}

#[tokio::test]
async fn merged_versions_should_serve_both_versions() {
    let ns = TestNamespace::new().await.unwrap();
    let merged = merge_crds([gadget_v1::Gadget::crd(), gadget_v2::Gadget::crd()]).unwrap();
    assert_eq!(merged.len(), 1);
    let versions: Vec<(&str, bool, bool)> = merged[0]
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.storage, v.deprecated == Some(true)))
        .collect();
    assert_eq!(versions, [("v2", true, false), ("v1", false, true)]);
    apply_crds(&ns.client(), merged, Duration::from_secs(30))
        .await
        .unwrap();

    let old: Api<gadget_v1::Gadget> = ns.api();
    let spec = gadget_v1::GadgetSpec { size: 3 };
    old.create(&PostParams::default(), &gadget_v1::Gadget::new("g", spec))
        .await
        .unwrap();
    let new: Api<gadget_v2::Gadget> = ns.api();
    let read = new.get("g").await.unwrap();
    assert_eq!(read.spec.size, 3);
    assert_eq!(<gadget_v2::Gadget as Resource>::version(&()), "v2");
    assert_eq!(read.metadata.name.as_deref(), Some("g"));

    // The deprecated version answers with the configured warning.
    let url = gadget_v1::Gadget::url_path(&(), Some(ns.name()));
    let request = http::Request::get(url)
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let response = ns.client().send(request).await.unwrap();
    let warnings: Vec<_> = response
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("use crd-test.kubeforge.dev/v2 Gadget")),
        "{warnings:?}"
    );
}

/// Rust shapes that need the structural pass: enums with data, untagged and internally tagged
/// enums, flatten, skip, nested options of lists of maps, k8s-openapi types.
#[kubeforge::custom_resource(
    group = "crd-test.kubeforge.dev",
    version = "v1",
    kind = "Shapes",
    cluster
)]
#[derive(Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ShapesSpec {
    pub mode: Mode,
    pub source: Source,
    pub step: Step,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<Vec<BTreeMap<String, Vec<i64>>>>,
    #[serde(flatten)]
    pub extra: Extra,
    #[serde(skip)]
    pub local_only: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_meta: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boxed: Option<Box<Extra>>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub flags: std::collections::BTreeSet<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_mode: BTreeMap<String, Mode>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keyed_by_mode: BTreeMap<Mode, i32>,
    #[serde(default)]
    pub small: u8,
    #[serde(default)]
    pub big: u64,
    #[serde(default)]
    pub ratio: f32,
    #[serde(default = "letter")]
    pub letter: char,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<(i32, String)>,
    #[serde(default)]
    pub fixed: [u8; 2],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twice: Option<Option<String>>,
}

fn letter() -> char {
    'k'
}

/// A unit enum with a renamed variant.
#[kubeforge::schema]
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Fast,
    /// Careful mode.
    Safe,
}

/// An externally tagged enum with data.
#[kubeforge::schema]
#[derive(Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    Git {
        #[validate(pattern = "^https://")]
        url: String,
        revision: Option<String>,
    },
    Image(String),
}

/// An internally tagged enum.
#[kubeforge::schema]
#[derive(Clone, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "PascalCase")]
pub enum Step {
    Sleep { seconds: i32 },
    Print { text: String },
}

/// An untagged number-or-string.
#[kubeforge::schema]
#[derive(Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum Amount {
    Count(i64),
    Text(String),
}

/// Flattened into the spec.
#[kubeforge::schema]
#[derive(Clone, Debug, PartialEq)]
pub struct Extra {
    #[validate(max_length = 5)]
    pub note: String,
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: apply every structural shape and round-trip each through the apiserver"
)]
async fn structural_shapes_should_be_accepted_and_round_trip() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [Shapes::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let api: Api<Shapes> = Api::all(ns.client());
    let name = format!("shapes-{}", ns.name());
    let spec: ShapesSpec = serde_json::from_value(json!({
        "mode": "safe",
        "source": {"git": {"url": "https://example.com/x.git"}},
        "step": {"type": "Sleep", "seconds": 3},
        "amount": "lots",
        "matrix": [{"a": [1, 2]}, {}],
        "note": "hi",
        "memory": "512Mi",
        "since": "2024-01-02T03:04:05Z",
        "selector": {"matchLabels": {"app": "x"}},
        "templateMeta": {"labels": {"a": "b"}},
        "boxed": {"note": "box"},
        "flags": ["a", "b"],
        "byMode": {"x": "fast"},
        "keyedByMode": {"safe": 1},
        "small": 255,
        "big": 18_000_000_000u64,
        "ratio": 0.5,
        "letter": "z",
        "pair": [1, "one"],
        "fixed": [1, 2],
    }))
    .unwrap();
    let created = api
        .create(&PostParams::default(), &Shapes::new(&name, spec.clone()))
        .await;
    let created = created.unwrap();
    api.delete(&name, &Default::default()).await.unwrap();
    assert_eq!(created.spec, spec);

    let mut other = spec.clone();
    other.source = Source::Image("nginx".into());
    other.step = Step::Print { text: "x".into() };
    other.amount = Some(Amount::Count(3));
    other.mode = Mode::Fast;
    let name2 = format!("{name}-2");
    let created = api
        .create(&PostParams::default(), &Shapes::new(&name2, other.clone()))
        .await
        .unwrap();
    api.delete(&name2, &Default::default()).await.unwrap();
    assert_eq!(created.spec, other);

    // The enums are enforced by the schema.
    let mut bad = serde_json::to_value(Shapes::new(&format!("{name}-bad"), spec.clone())).unwrap();
    bad["spec"]["mode"] = json!("reckless");
    let bad: DynamicObject = serde_json::from_value(bad).unwrap();
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Shapes");
    let dynamic: Api<DynamicObject> = Api::all_with(ns.client(), &ApiResource::from_gvk(&gvk));
    match dynamic.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(s)) => assert!(
            s.message
                .contains("spec.mode: Unsupported value: \"reckless\""),
            "{}",
            s.message
        ),
        other => panic!("expected 422, got {other:?}"),
    }
    // Markers on enum variant fields: the same verdict from the apiserver and validate().
    let mut insecure = spec.clone();
    insecure.source = Source::Git {
        url: "ftp://example.com/x.git".into(),
        revision: None,
    };
    let report = Shapes::new("x", insecure.clone())
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        report.contains("spec.source.git.url: should match '^https://'"),
        "{report}"
    );
    match api
        .create(
            &PostParams::default(),
            &Shapes::new(&format!("{name}-ftp"), insecure),
        )
        .await
    {
        Err(kube::Error::Api(s)) => assert!(
            s.message
                .contains("spec.source.git.url in body should match '^https://'"),
            "{}",
            s.message
        ),
        other => panic!("expected 422, got {other:?}"),
    }

    // An internally tagged variant keeps its required fields (a generated CEL rule).
    let mut untagged_fields =
        serde_json::to_value(Shapes::new(&format!("{name}-step"), spec.clone())).unwrap();
    untagged_fields["spec"]["step"] = json!({"type": "Sleep", "text": "wrong variant's field"});
    let untagged_fields: DynamicObject = serde_json::from_value(untagged_fields).unwrap();
    match dynamic
        .create(&PostParams::default(), &untagged_fields)
        .await
    {
        Err(kube::Error::Api(s)) => assert!(
            s.message.contains("seconds is required when type is Sleep"),
            "{}",
            s.message
        ),
        other => panic!("expected 422, got {other:?}"),
    }
    let mut long = spec;
    long.extra.note = "too long".into();
    let report = Shapes::new("x", long).validate().unwrap_err().to_string();
    assert!(
        report.contains("spec.note: may not be more than 5 bytes"),
        "{report}"
    );
}

#[tokio::test]
async fn required_fields_and_conditions_should_be_enforced() {
    use kubeforge::crd::{Condition, ConditionStatus};

    let (ns, api) = webapp_namespace().await;
    let gvk = GroupVersionKind::gvk("apps.kubeforge.dev", "v1", "WebApp");
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &ApiResource::from_gvk(&gvk));
    let no_image: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kubeforge.dev/v1", "kind": "WebApp",
        "metadata": {"name": "no-image"}, "spec": {"replicas": 1},
    }))
    .unwrap();
    match dynamic.create(&PostParams::default(), &no_image).await {
        Err(kube::Error::Api(s)) => {
            assert!(
                s.message.contains("spec.image: Required value"),
                "{}",
                s.message
            );
        }
        other => panic!("expected 422, got {other:?}"),
    }

    api.create(&PostParams::default(), &WebApp::new("shop", webapp_spec(1)))
        .await
        .unwrap();
    let mut status = WebAppStatus::default();
    status.conditions.set(Condition::new(
        "Ready",
        ConditionStatus::True,
        "Up",
        "all pods ready",
    ));
    status.conditions.set(Condition::new(
        "Progressing",
        ConditionStatus::False,
        "Done",
        "",
    ));
    let patched = api
        .patch_status(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap();
    let conditions = patched.status.unwrap().conditions;
    assert!(conditions.is_true("Ready"));
    assert_eq!(conditions.items.len(), 2);

    // `listType: map` keyed by `type`: two conditions of one type are rejected.
    let mut duplicate = serde_json::to_value(&status).unwrap();
    let first = duplicate["conditions"][0].clone();
    duplicate["conditions"].as_array_mut().unwrap().push(first);
    match api
        .patch_status(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": duplicate })),
        )
        .await
    {
        Err(kube::Error::Api(s)) => assert!(s.message.contains("Duplicate value"), "{}", s.message),
        other => panic!("expected 422, got {other:?}"),
    }
    // A reason that does not match metav1.Condition's pattern is rejected too, by both sides.
    let mut bad = WebAppStatus::default();
    bad.conditions.set(Condition::new(
        "Ready",
        ConditionStatus::True,
        "not a reason!",
        "",
    ));
    let report = WebApp {
        status: Some(bad.clone()),
        ..WebApp::new("x", webapp_spec(1))
    }
    .validate()
    .unwrap_err()
    .to_string();
    assert!(
        report.contains("status.conditions[0].reason: should match"),
        "{report}"
    );
    match api
        .patch_status(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": bad })),
        )
        .await
    {
        Err(kube::Error::Api(s)) => assert!(s.message.contains("should match"), "{}", s.message),
        other => panic!("expected 422, got {other:?}"),
    }
}

#[tokio::test]
async fn discovery_should_list_short_names_categories_and_subresources() {
    let (ns, _api) = webapp_namespace().await;
    let client = ns.client();
    let resources = crate::support::eventually(
        "discovery to list webapps",
        Duration::from_secs(30),
        async || {
            let request = http::Request::get("/apis/apps.kubeforge.dev/v1")
                .body(Vec::new())
                .unwrap();
            let list: Value =
                serde_json::from_str(&client.request_text(request).await.ok()?).ok()?;
            let resources = list["resources"].as_array()?.clone();
            resources
                .iter()
                .any(|r| r["name"] == "webapps/scale")
                .then_some(resources)
        },
    )
    .await;
    let main = resources.iter().find(|r| r["name"] == "webapps").unwrap();
    assert_eq!(main["kind"], "WebApp");
    assert_eq!(main["namespaced"], true);
    assert_eq!(main["singularName"], "webapp");
    assert_eq!(main["shortNames"], json!(["wa"]));
    assert_eq!(main["categories"], json!(["all"]));
    assert!(resources.iter().any(|r| r["name"] == "webapps/status"));
}
