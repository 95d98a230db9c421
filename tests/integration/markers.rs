//! The kubebuilder markers added for issue #15 against the real apiserver: groups of sibling
//! fields (`exactly_one_of`, `at_most_one_of`, `at_least_one_of`), `immutable`, type overrides,
//! `items(..)` / `values(..)` with `format = "byte"`, `int_or_string` and `map_type`, titles,
//! examples and external docs, `required` / `optional`, `optional_spec`, markers on types
//! (narrowed by a field's own). Each case applies the CRD
//! and compares the apiserver's verdict with `validate()`'s where `validate()` covers the marker.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kubeforge::crd::Validate;
use kubeforge::testing::{TestNamespace, apply_crds};
use serde_json::{Value, json};

const GROUP: &str = "markers-test.kubeforge.dev";

/// Exactly one source, the other markers on optional fields (each case sets a source and one
/// field).
#[kubeforge::custom_resource(
    group = "markers-test.kubeforge.dev",
    version = "v1",
    kind = "Choice",
    namespaced,
    exactly_one_of = ["git", "image"]
)]
#[derive(Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct ChoiceSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(map_type = "atomic")]
    pub limits: Option<Limits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(immutable, title = "Region", example = "eu-west-1")]
    #[validate(external_docs(url = "https://example.com/regions", description = "Regions"))]
    pub region: Option<String>,
    /// A flag sent as `"true"` / `"false"` (`serialize_with` / `deserialize_with`: schemars
    /// would read `with = ".."` as the type of the schema).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "bool_text::serialize",
        deserialize_with = "bool_text::deserialize"
    )]
    #[validate(type = "string")]
    pub enabled: Option<bool>,
    /// Any JSON object (a `Value` typed `object`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(type = "object")]
    pub settings: Option<Value>,
    /// Any JSON kept as a string (a `Value` typed `string`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(schemaless, type = "string")]
    pub note: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(items(int_or_string))]
    pub ports: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(items(format = "byte"))]
    pub chunks: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(values(format = "byte"), example_json = r#"{"key": "aGVsbG8="}"#)]
    pub blobs: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(values(max_length = 3))]
    pub codes: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(items(map_type = "atomic"))]
    pub selectors: Option<Vec<BTreeMap<String, String>>>,
    // Numbers without the `format` their type implies (`no_format`), and one with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(no_format, minimum = 0)]
    pub plain_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(items(no_format))]
    pub samples: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// Counts, rules and flags of each element or value (`items(..)` / `values(..)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(items(min_items = 1, max_items = 2))]
    pub groups: Option<Vec<Vec<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(items(rule(cel = "self.size() <= 2", message = "at most two keys")))]
    pub rows: Option<Vec<BTreeMap<String, String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(values(nullable))]
    pub tags: Option<BTreeMap<String, Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact: Option<Contact>,
    /// Markers on types: the type's alone, narrowed by the field's, and a looser field bound
    /// with a second pattern (the type's bound and both patterns hold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<Label>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_length = 4)]
    pub short_label: Option<Label>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_length = 50, pattern = "^[a-c]+$")]
    pub loose_label: Option<Label>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(minimum = 1000)]
    pub port: Option<Port>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<Pair>,
    /// Quantities get the pattern upstream types carry, also in lists, maps and k8s-openapi
    /// types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotas: Option<BTreeMap<String, Quantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Sparse fields (issue #31): serde leaves them out when empty, so the apiserver never sees
    /// the empty value, and their markers do not apply to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[validate(min_items = 1, items(min_length = 1))]
    pub hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[validate(min_properties = 1)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[validate(min_length = 2, pattern = "^[a-z]+$")]
    pub team: String,
    #[serde(default, skip_serializing_if = "Owner::is_unset")]
    pub owner: Owner,
}

/// A struct with a required field that is left out whole when unset.
#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Owner {
    #[serde(default)]
    #[validate(required, min_length = 1)]
    pub name: String,
}

impl Owner {
    fn is_unset(&self) -> bool {
        *self == Self::default()
    }
}

/// A lowercase label of 2 to 10 letters, wherever it is used.
#[kubeforge::schema]
#[validate(min_length = 2, max_length = 10, pattern = "^[a-z]+$")]
#[derive(Clone, Debug, Default)]
pub struct Label(pub String);

/// A port number.
#[kubeforge::schema]
#[validate(minimum = 1, maximum = 65535)]
#[derive(Clone, Debug, Default)]
pub struct Port(pub i32);

/// A struct with markers of its own: at least one property, `b` only with `a`.
#[kubeforge::schema]
#[validate(
    min_properties = 1,
    rule(cel = "!has(self.b) || has(self.a)", message = "b needs a")
)]
#[derive(Clone, Debug, Default)]
pub struct Pair {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<String>,
}

/// At most one accelerator, at least one resource.
#[kubeforge::schema(at_most_one_of = ["cpu", "gpu"], at_least_one_of = ["cpu", "gpu", "memory"])]
#[derive(Clone, Debug, Default)]
pub struct Limits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

/// `required` on an `Option`, `optional` on a defaulted field.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct Contact {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(required)]
    pub email: Option<String>,
    #[serde(default)]
    #[validate(optional)]
    pub phone: String,
}

/// A kind whose objects may leave out `spec`.
#[kubeforge::custom_resource(
    group = "markers-test.kubeforge.dev",
    version = "v1",
    kind = "Bare",
    namespaced,
    optional_spec
)]
#[derive(Clone, Debug, Default)]
pub struct BareSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
}

/// `Option<bool>` as the strings `"true"` / `"false"`.
mod bool_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<bool>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(b) => s.serialize_str(if *b { "true" } else { "false" }),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

fn api(ns: &TestNamespace, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, "v1", kind);
    Api::namespaced_with(ns.client(), ns.name(), &ApiResource::from_gvk(&gvk))
}

async fn choice_namespace() -> (TestNamespace, Api<DynamicObject>) {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(
        &ns.client(),
        [Choice::crd(), Bare::crd()],
        Duration::from_secs(30),
    )
    .await
    .expect("the apiserver accepts the CRDs");
    let api = api(&ns, "Choice");
    (ns, api)
}

fn object(kind: &str, name: &str, spec: Option<Value>) -> DynamicObject {
    let mut object = json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": kind, "metadata": {"name": name},
    });
    if let Some(spec) = spec {
        object["spec"] = spec;
    }
    serde_json::from_value(object).unwrap()
}

/// The server's verdict on creating a `Choice` with `spec`: `Ok` or the 422 message.
async fn server_verdict(api: &Api<DynamicObject>, name: &str, spec: &Value) -> Result<(), String> {
    match api
        .create(
            &PostParams::default(),
            &object("Choice", name, Some(spec.clone())),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 422 => Err(status.message),
        Err(e) => panic!("{name}: unexpected error {e}"),
    }
}

/// `validate()`'s verdict on `spec`.
fn client_verdict(spec: &Value) -> Result<(), String> {
    let obj: Choice =
        serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": spec})).unwrap();
    obj.validate().map_err(|report| report.to_string())
}

/// What `validate()` says about a case.
#[derive(Clone, Copy)]
enum Client {
    /// The same error as the apiserver.
    Same,
    /// Nothing: the JSON cannot be read into the Rust type, or `validate()` does not check it.
    ServerOnly,
}

struct Case {
    spec: Value,
    /// `None`: accepted; `Some(message)`: rejected with it.
    error: Option<&'static str>,
    client: Client,
}

fn ok(spec: Value) -> Case {
    Case {
        spec,
        error: None,
        client: Client::Same,
    }
}

fn err(spec: Value, error: &'static str, client: Client) -> Case {
    Case {
        spec,
        error: Some(error),
        client,
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "a table of cases, one entry per marker: splitting it would only scatter the table"
)]
fn cases() -> Vec<Case> {
    use Client::{Same, ServerOnly};
    vec![
        ok(json!({"git": "g"})),
        ok(json!({"image": "i"})),
        err(json!({}), "exactly one of git, image must be set", Same),
        err(
            json!({"git": "g", "image": "i"}),
            "exactly one of git, image must be set",
            Same,
        ),
        ok(json!({"git": "g", "limits": {"cpu": "1", "memory": "1Gi"}})),
        err(
            json!({"git": "g", "limits": {"cpu": "1", "gpu": "1"}}),
            "at most one of cpu, gpu may be set",
            Same,
        ),
        err(
            json!({"git": "g", "limits": {}}),
            "at least one of cpu, gpu, memory must be set",
            Same,
        ),
        ok(json!({"git": "g", "enabled": "true"})),
        // Not readable into `Option<bool>` through `bool_text`: server only.
        err(
            json!({"git": "g", "enabled": true}),
            "must be of type string",
            ServerOnly,
        ),
        ok(json!({"git": "g", "settings": {"any": {"thing": [1]}}})),
        err(
            json!({"git": "g", "settings": 3}),
            "must be of type object",
            Same,
        ),
        ok(json!({"git": "g", "note": "text"})),
        err(
            json!({"git": "g", "note": {"a": 1}}),
            "must be of type string",
            Same,
        ),
        ok(json!({"git": "g", "ports": [80, "http"]})),
        err(
            json!({"git": "g", "ports": [true]}),
            "spec.ports[0]",
            ServerOnly,
        ),
        ok(json!({"git": "g", "chunks": ["aGVsbG8=", "AAEC"]})),
        err(
            json!({"git": "g", "chunks": ["aGVsbG8=", "not base64!"]}),
            "must be of type byte",
            Same,
        ),
        ok(json!({"git": "g", "blobs": {"a": "aGVsbG8="}})),
        err(
            json!({"git": "g", "blobs": {"a": "%%%"}}),
            "must be of type byte",
            Same,
        ),
        ok(json!({"git": "g", "codes": {"a": "abc"}})),
        err(
            json!({"git": "g", "codes": {"a": "abcd"}}),
            "may not be more than 3 bytes",
            Same,
        ),
        ok(json!({"git": "g", "selectors": [{"a": "b"}]})),
        ok(json!({"git": "g", "label": "abc", "shortLabel": "ab", "looseLabel": "abc"})),
        err(
            json!({"git": "g", "label": "a"}),
            "should be at least 2 chars long",
            Same,
        ),
        err(
            json!({"git": "g", "label": "ABC"}),
            "should match '^[a-z]+$'",
            Same,
        ),
        err(
            json!({"git": "g", "shortLabel": "abcde"}),
            "may not be more than 4 bytes",
            Same,
        ),
        err(
            json!({"git": "g", "looseLabel": "abcabcabcab"}),
            "may not be more than 10 bytes",
            Same,
        ),
        err(
            json!({"git": "g", "looseLabel": "abd"}),
            "should match '^[a-c]+$'",
            Same,
        ),
        ok(json!({"git": "g", "port": 8080})),
        err(
            json!({"git": "g", "port": 80}),
            "should be greater than or equal to 1000",
            Same,
        ),
        err(
            json!({"git": "g", "port": 70000}),
            "should be less than or equal to 65535",
            Same,
        ),
        ok(json!({"git": "g", "pair": {"a": "x", "b": "y"}})),
        err(
            json!({"git": "g", "pair": {}}),
            "should have at least 1 properties",
            Same,
        ),
        err(json!({"git": "g", "pair": {"b": "y"}}), "b needs a", Same),
        ok(json!({"git": "g", "storage": "10Gi", "quotas": {"cpu": "500m", "n": "3"}})),
        ok(json!({"git": "g", "resources": {"limits": {"memory": "1.5Gi"}}})),
        err(
            json!({"git": "g", "storage": "lots"}),
            r"should match '^(\+|-)?(([0-9]+",
            Same,
        ),
        err(
            json!({"git": "g", "quotas": {"cpu": "2 cores"}}),
            r"should match '^(\+|-)?(([0-9]+",
            Same,
        ),
        // k8s-openapi types are not checked by validate(): the apiserver only.
        err(
            json!({"git": "g", "resources": {"limits": {"memory": "much"}}}),
            "spec.resources.limits.memory in body should match",
            ServerOnly,
        ),
        // Sparse objects (issue #31): the empty fields are not sent; `validate()` said
        // "spec.hosts: should have at least 1 items" (and so on) for fields the apiserver never
        // sees.
        ok(json!({"git": "g"})),
        ok(json!({"git": "g", "hosts": ["a"], "annotations": {"a": "b"}, "team": "ops"})),
        ok(json!({"git": "g", "owner": {"name": "o"}})),
        err(
            json!({"git": "g", "hosts": [""]}),
            "should be at least 1 chars long",
            Same,
        ),
        err(
            json!({"git": "g", "team": "a"}),
            "should be at least 2 chars long",
            Same,
        ),
        err(
            json!({"git": "g", "team": "A1"}),
            "should match '^[a-z]+$'",
            Same,
        ),
        // Sent as JSON, but the Rust type never sends an empty list, map or owner: the
        // apiserver alone rejects them.
        err(
            json!({"git": "g", "hosts": []}),
            "should have at least 1 items",
            ServerOnly,
        ),
        err(
            json!({"git": "g", "annotations": {}}),
            "should have at least 1 properties",
            ServerOnly,
        ),
        err(
            json!({"git": "g", "owner": {"name": ""}}),
            "should be at least 1 chars long",
            ServerOnly,
        ),
        ok(json!({"git": "g", "groups": [["a"], ["b", "c"]]})),
        err(
            json!({"git": "g", "groups": [["a"], []]}),
            "should have at least 1 items",
            Same,
        ),
        err(
            json!({"git": "g", "groups": [["a", "b", "c"]]}),
            "must have at most 2 items",
            Same,
        ),
        ok(json!({"git": "g", "rows": [{"a": "1", "b": "2"}]})),
        err(
            json!({"git": "g", "rows": [{"a": "1"}, {"a": "1", "b": "2", "c": "3"}]}),
            "at most two keys",
            Same,
        ),
        ok(json!({"git": "g", "tags": {"a": "x", "b": null}})),
        ok(json!({"git": "g", "plainCount": 3, "samples": [1.5, 2.0], "count": 4})),
        err(
            json!({"git": "g", "plainCount": -1}),
            "should be greater than or equal to 0",
            Same,
        ),
        ok(json!({"git": "g", "contact": {"email": "a@b"}})),
        err(
            json!({"git": "g", "contact": {"phone": "1"}}),
            "Required value",
            Same,
        ),
    ]
}

#[tokio::test]
async fn markers_should_get_the_apiservers_verdict_and_the_same_from_validate() {
    let (_ns, api) = choice_namespace().await;
    let mut failures = Vec::new();
    for (i, case) in cases().into_iter().enumerate() {
        let spec = &case.spec;
        let server = server_verdict(&api, &format!("case-{i}"), spec).await;
        let server_as_expected = match case.error {
            None => server.is_ok(),
            Some(message) => server.as_ref().is_err_and(|m| m.contains(message)),
        };
        if !server_as_expected {
            failures.push(format!(
                "{spec}: server {server:?}, expected {:?}",
                case.error
            ));
        }
        let readable = serde_json::from_value::<ChoiceSpec>(spec.clone()).is_ok();
        if !readable {
            continue;
        }
        let client = client_verdict(spec);
        let client_as_expected = match (case.error, case.client) {
            (Some(message), Client::Same) => client.as_ref().is_err_and(|m| m.contains(message)),
            _ => client.is_ok(),
        };
        if !client_as_expected {
            failures.push(format!(
                "{spec}: validate() {client:?}, expected {:?}",
                case.error
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Both sides name the map value and the list element.
#[tokio::test]
async fn values_and_items_errors_should_name_the_element() {
    let (_ns, api) = choice_namespace().await;
    for (spec, path) in [
        (json!({"git": "g", "codes": {"k": "abcd"}}), "spec.codes.k"),
        (
            json!({"git": "g", "chunks": ["AAEC", "!"]}),
            "spec.chunks[1]",
        ),
    ] {
        let server = server_verdict(&api, "located", &spec).await.unwrap_err();
        let client = client_verdict(&spec).unwrap_err();
        assert!(server.contains(path), "{server}");
        assert!(client.contains(path), "{client}");
    }
}

/// `values(nullable)` keeps a map value's `null` (without it the apiserver prunes it), and the
/// element markers land on the element's schema.
#[tokio::test]
async fn nullable_values_should_keep_null() {
    let (_ns, api) = choice_namespace().await;
    let spec = json!({"git": "g", "tags": {"a": "x", "b": null}});
    let created = api
        .create(
            &PostParams::default(),
            &object("Choice", "nullable", Some(spec)),
        )
        .await
        .expect("accepted");
    assert_eq!(
        created.data["spec"]["tags"],
        json!({"a": "x", "b": null}),
        "the stored object"
    );
    let read: Choice = serde_json::from_value(serde_json::to_value(&created).unwrap()).unwrap();
    assert_eq!(
        read.spec.tags,
        Some(BTreeMap::from([
            ("a".to_owned(), Some("x".to_owned())),
            ("b".to_owned(), None)
        ]))
    );
}

#[tokio::test]
async fn immutable_should_reject_changes_but_not_other_updates() {
    let (_ns, api) = choice_namespace().await;
    let created = api
        .create(
            &PostParams::default(),
            &object(
                "Choice",
                "frozen",
                Some(json!({"git": "g", "region": "eu"})),
            ),
        )
        .await
        .unwrap();
    let mut changed = created.clone();
    changed.data["spec"]["region"] = json!("us");
    match api
        .replace("frozen", &PostParams::default(), &changed)
        .await
    {
        Err(kube::Error::Api(s)) => assert!(
            s.message.contains("spec.region") && s.message.contains("is immutable"),
            "{}",
            s.message
        ),
        other => panic!("expected the transition rule to reject the update, got {other:?}"),
    }
    let mut other = created;
    other.data["spec"]["git"] = json!("h");
    api.replace("frozen", &PostParams::default(), &other)
        .await
        .unwrap();
}

/// Title, example, external docs and the type-level keys are stored in the CRD as written.
#[tokio::test]
async fn documentation_markers_should_be_kept_in_the_stored_crd() {
    let (ns, _api) = choice_namespace().await;
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(ns.client());
    let stored = crds.get(&format!("choices.{GROUP}")).await.unwrap();
    let schema = serde_json::to_value(&stored.spec.versions[0].schema).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    let region = &spec["properties"]["region"];
    assert_eq!(region["title"], "Region", "{region}");
    assert_eq!(region["example"], "eu-west-1", "{region}");
    assert_eq!(
        region["externalDocs"],
        json!({"url": "https://example.com/regions", "description": "Regions"})
    );
    assert_eq!(
        spec["properties"]["blobs"]["example"],
        json!({"key": "aGVsbG8="})
    );
    assert_eq!(
        spec["properties"]["blobs"]["additionalProperties"],
        json!({"type": "string", "format": "byte"})
    );
    assert_eq!(
        spec["properties"]["limits"]["x-kubernetes-map-type"],
        "atomic"
    );
    assert_eq!(
        spec["properties"]["selectors"]["items"]["x-kubernetes-map-type"],
        "atomic"
    );
    assert_eq!(spec["properties"]["contact"]["required"], json!(["email"]));
    let plain = &spec["properties"]["plainCount"];
    assert!(
        plain.get("format").is_none() && plain["minimum"] == 0.0,
        "{plain}"
    );
    let samples = &spec["properties"]["samples"]["items"];
    assert_eq!(samples, &json!({"type": "number"}));
    assert_eq!(spec["properties"]["count"]["format"], "int64");
    assert!(
        spec.get("title").is_none(),
        "no title from schemars: {spec}"
    );
}

/// `optional_spec`: an object without `spec` is accepted and reads as the default spec.
#[tokio::test]
async fn optional_spec_should_accept_objects_without_spec() {
    let (ns, _api) = choice_namespace().await;
    let created = api(&ns, "Bare")
        .create(&PostParams::default(), &object("Bare", "bare", None))
        .await
        .unwrap();
    assert!(created.data.get("spec").is_none(), "{:?}", created.data);
    let typed: Bare = ns.api::<Bare>().get("bare").await.unwrap();
    assert_eq!(typed.spec.size, None);
    let required = Bare::crd().spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.required.clone());
    assert_eq!(required, None);
}
