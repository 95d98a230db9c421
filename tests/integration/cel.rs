//! CEL rules (`x-kubernetes-validations`) evaluated client-side by `validate()` and
//! `validate_update()`, against the real apiserver: a corpus of kind-level and field-level rules
//! (quantities, lists, sets, regexes, URLs, IPs, semver, named formats, string formatting,
//! `has()`, optional fields, `messageExpression`, `reason`/`fieldPath`, transition rules with
//! `oldSelf` and `optionalOldSelf`), and for each case the apiserver's verdict on creating (or
//! updating) the object next to the client's.
//!
//! How verdicts are compared: the apiserver's 422 carries one cause per error, with the field
//! (`spec.maxSurge`) and the message body (`Forbidden: maxSurge 11 exceeds 10`, `Invalid value:
//! "object": <rule message>`); `validate()`'s report has one `path: message` entry per error in
//! the same words. Both sides become sorted lists of `field: message` and must be equal — so the
//! verdict, the rule's message (or the evaluated `messageExpression`), the reason and the field
//! path are all compared, not just "valid or not".

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{PostParams, Resource};
use kube::core::Status;
use kube::{Api, ResourceExt};
use kubeforge::crd::Validate;
use kubeforge::testing::{TestNamespace, apply_crds};
use serde_json::{Value, json};

/// Every field optional, so that a case sets only what its rule reads. Kind-level rules guard
/// their fields with `has()`.
#[kubeforge::custom_resource(
    group = "cel-test.kubeforge.dev",
    version = "v1",
    kind = "Ruled",
    namespaced,
    rule(
        cel = "!has(self.minReplicas) || !has(self.replicas) || self.minReplicas <= self.replicas",
        message = "minReplicas must not exceed replicas"
    ),
    rule(
        cel = "!has(self.maxSurge) || self.maxSurge <= 10",
        message_expression = "'maxSurge %d exceeds 10'.format([self.maxSurge])",
        reason = "FieldValueForbidden",
        field_path = ".maxSurge"
    ),
    rule(
        cel = "!has(self.tls) || !self.tls || has(self.certSecret)",
        message = "certSecret is required with tls",
        reason = "FieldValueRequired",
        field_path = ".certSecret"
    ),
    rule(
        cel = "!has(self.primary) || !has(self.secondary) || self.primary != self.secondary",
        message = "primary and secondary must differ",
        reason = "FieldValueDuplicate",
        field_path = ".secondary"
    ),
    rule(
        cel = "!has(self.zones) || !has(self.excludedZones) || !sets.intersects(self.zones, self.excludedZones)",
        message = "zones and excludedZones overlap"
    ),
    rule(
        cel = "!has(self.memory) || !has(self.memoryLimit) || quantity(self.memory).compareTo(quantity(self.memoryLimit)) <= 0",
        message = "memory must not exceed memoryLimit"
    ),
    rule(
        cel = "!has(self.__namespace__) || self.__namespace__ != 'default'",
        message = "namespace must not be default"
    ),
    rule(
        cel = "!has(self.divisor) || 100 / self.divisor > 1",
        message = "divisor too large"
    ),
    rule(
        cel = "!has(oldSelf.region) || (has(self.region) && self.region == oldSelf.region)",
        message = "region cannot be changed or removed once set"
    )
)]
#[derive(Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct RuledSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(rule(cel = "self >= 0", message = "replicas must not be negative"))]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_length = 64)]
    pub cert_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_length = 64)]
    pub primary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_length = 64)]
    pub secondary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "isQuantity(self) && quantity(self).isLessThan(quantity('4Gi'))",
            message = "memory must be a quantity below 4Gi"
        )
    )]
    pub memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(cel = "isQuantity(self)", message = "memoryLimit must be a quantity")
    )]
    pub memory_limit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "isQuantity(self) && quantity(self).isGreaterThan(quantity('100m'))",
            message = "cpu must exceed 100m"
        )
    )]
    pub cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_items = 10,
        rule(
            cel = "self.all(p, p > 0 && p < 65536)",
            message = "ports must be 1-65535"
        )
    )]
    pub ports: Option<Vec<i32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_items = 10,
        rule(
            cel = "self.exists(t, t == 'owner')",
            message = "tags must include owner"
        ),
        rule(
            cel = "self.exists_one(t, t.startsWith('env-'))",
            message = "tags need exactly one env- tag"
        )
    )]
    pub tags: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_items = 10,
        rule(cel = "self.isSorted()", message = "versions must be sorted")
    )]
    pub versions: Option<Vec<i32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_items = 10,
        rule(
            cel = "self.sum() == 100",
            message_expression = "'weights sum to %d, not 100'.format([self.sum()])"
        )
    )]
    pub weights: Option<Vec<i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_items = 10,
        rule(
            cel = "sets.contains(['a', 'b', 'c'], self)",
            message = "zones must be among a, b, c"
        )
    )]
    pub zones: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_items = 10)]
    pub excluded_zones: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "self.matches('^[a-z][a-z0-9-]*$')",
            message = "namePrefix must be a DNS label prefix"
        )
    )]
    pub name_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "self.find('[0-9]+[.][0-9]+') != ''",
            message = "image needs a version"
        )
    )]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "isURL(self) && url(self).getScheme() == 'https'",
            message = "endpoint must be an https URL"
        )
    )]
    pub endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "isIP(self) && ip(self).family() == 4",
            message = "address must be IPv4"
        )
    )]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "isCIDR(self) && cidr('10.0.0.0/8').containsCIDR(self)",
            message = "subnet must be inside 10.0.0.0/8"
        )
    )]
    pub subnet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "isSemver(self) && semver(self).isGreaterThan(semver('1.0.0'))",
            message = "version must be a semver above 1.0.0"
        )
    )]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "!format.dns1123Label().validate(self).hasValue()",
            message = "label must be a DNS-1123 label"
        )
    )]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(rule(
        cel = "self <= 1000",
        message_expression = "'%d is above the limit of %d'.format([self, 1000])"
    ))]
    pub limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "self.lowerAscii() == self && self.trim() == self",
            message = "title must be lower-case and trimmed"
        )
    )]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "self.size() <= 5",
            message = "nickname must be at most 5 characters"
        )
    )]
    pub nickname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(rule(
        cel = "self == 1.0 || self < 0.5",
        message = "ratio must be 1.0 or below 0.5"
    ))]
    pub ratio: Option<f64>,
    /// Defaulted to the integer `1` by the schema: a double for CEL all the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        default = 1,
        rule(
            cel = "self == 1.0 || self >= 2.0",
            message = "scale must be 1.0 or at least 2.0"
        )
    )]
    pub scale: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        format = "duration",
        rule(cel = "self <= duration('1h')", message = "timeout must be at most 1h")
    )]
    pub timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        format = "date-time",
        rule(
            cel = "self > timestamp('2020-01-01T00:00:00Z')",
            message = "deadline must be after 2020"
        )
    )]
    pub deadline: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_properties = 10,
        rule(
            cel = "self.all(k, k.size() <= 10)",
            message = "label keys must be at most 10 characters"
        ),
        rule(cel = "'owner' in self", message = "labels must have an owner")
    )]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(rule(
        cel = "type(self) == int ? self > 1024 : self.startsWith('http')",
        message = "port must be above 1024 or a named http port"
    ))]
    pub port: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(rule(
        cel = "self < 10",
        message = "level is too high",
        message_expression = "self > 100 ? '' : '  level %d is too high  '.format([self])"
    ))]
    pub level: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "namespace")]
    #[validate(max_length = 64)]
    pub target_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divisor: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_length = 64)]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(cel = "self == oldSelf", message = "immutableName is immutable")
    )]
    pub immutable_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(rule(
        cel = "self >= oldSelf",
        message_expression = "'generation may not go from %d to %d'.format([oldSelf, self])"
    ))]
    pub generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(rule(
        cel = "!oldSelf.hasValue() || self >= oldSelf.value()",
        message = "counter may not decrease",
        optional_old_self
    ))]
    pub counter: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "oldSelf.hasValue() || self.startsWith('init-')",
            message = "firstSet must start with init- when first set",
            optional_old_self
        )
    )]
    pub first_set: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(
            cel = "oldSelf.orValue('') != 'locked' || self == 'locked'",
            message = "a locked mode stays locked",
            optional_old_self
        )
    )]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_items = 10, list_type = "map", list_map_keys = ["name"])]
    pub backends: Option<Vec<Backend>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_length = 64, enum = ["red", "green"])]
    pub color: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(maximum = 100)]
    pub small: Option<i32>,
}

/// A struct-level rule reading optional fields with `has()`.
#[kubeforge::schema(rule(
    cel = "has(self.cpu) || has(self.memory)",
    message = "limits need cpu or memory"
))]
#[derive(Clone, Debug)]
pub struct Limits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_length = 64)]
    pub cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_length = 64)]
    pub memory: Option<String>,
}

/// A struct-level rule reading an optional field without `has()`: a runtime error when absent.
#[kubeforge::schema(rule(cel = "self.port > 0", message = "probe port must be positive"))]
#[derive(Clone, Debug)]
pub struct Probe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// A list-map entry with a transition rule: the old entry is the one with the same name.
#[kubeforge::schema(rule(
    cel = "self.weight >= oldSelf.weight",
    message = "backend weight may not decrease"
))]
#[derive(Clone, Debug)]
pub struct Backend {
    pub name: String,
    pub weight: i32,
}

/// One object of the corpus: created with `spec` (after `old`, when set: then updated to `spec`).
struct Case {
    old: Option<Value>,
    spec: Value,
    /// `None`: valid; `Some(text)`: rejected with `text` in one of the messages.
    rejected: Option<&'static str>,
    /// A known divergence between the apiserver and `kube-cel`, and why: the apiserver's verdict
    /// is still checked, and the client's must still differ (so that a fix shows).
    divergence: Option<&'static str>,
}

impl Case {
    fn diverges(self, why: &'static str) -> Case {
        Case {
            divergence: Some(why),
            ..self
        }
    }
}

fn valid(spec: Value) -> Case {
    Case {
        old: None,
        spec,
        rejected: None,
        divergence: None,
    }
}

fn invalid(spec: Value, message: &'static str) -> Case {
    Case {
        old: None,
        spec,
        rejected: Some(message),
        divergence: None,
    }
}

/// An update from `old` to `spec`.
fn update(old: Value, spec: Value, rejected: Option<&'static str>) -> Case {
    Case {
        old: Some(old),
        spec,
        rejected,
        divergence: None,
    }
}

/// Kind-level rules: `has()` guards, `reason` and `fieldPath`, `messageExpression`, sets,
/// quantities, escaped field names, runtime errors.
fn kind_level_cases() -> Vec<Case> {
    vec![
        valid(json!({"minReplicas": 2, "replicas": 3})),
        invalid(
            json!({"minReplicas": 5, "replicas": 3}),
            "minReplicas must not exceed replicas",
        ),
        valid(json!({"maxSurge": 5})),
        invalid(
            json!({"maxSurge": 11}),
            "spec.maxSurge: Forbidden: maxSurge 11 exceeds 10",
        ),
        valid(json!({"tls": true, "certSecret": "tls"})),
        valid(json!({"tls": false})),
        invalid(
            json!({"tls": true}),
            "spec.certSecret: Required value: certSecret is required",
        ),
        valid(json!({"primary": "a", "secondary": "b"})),
        // FieldValueDuplicate: the apiserver reports the node's type, not the message.
        invalid(
            json!({"primary": "a", "secondary": "a"}),
            "spec.secondary: Duplicate value",
        ),
        valid(json!({"zones": ["a"], "excludedZones": ["b"]})),
        invalid(
            json!({"zones": ["a", "b"], "excludedZones": ["b"]}),
            "zones and excludedZones overlap",
        ),
        valid(json!({"memory": "512Mi", "memoryLimit": "1Gi"})),
        invalid(
            json!({"memory": "1Gi", "memoryLimit": "512Mi"}),
            "memory must not exceed memoryLimit",
        ),
        valid(json!({"namespace": "prod"})),
        invalid(
            json!({"namespace": "default"}),
            "namespace must not be default",
        ),
        valid(json!({"divisor": 10})),
        invalid(json!({"divisor": 200}), "divisor too large"),
        invalid(
            json!({"divisor": 0}),
            "division by zero evaluating rule: divisor too large",
        ),
        // Marker errors the apiserver deems blocking (enum, max length, max items) keep it from
        // evaluating CEL rules; others (maximum) do not.
        invalid(
            json!({"color": "blue", "replicas": -1}),
            "some validation rules were not checked",
        ),
        invalid(
            json!({"title": "x".repeat(65), "replicas": -1}),
            "some validation rules were not checked",
        ),
        invalid(
            json!({"ports": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], "replicas": -1}),
            "some validation rules were not checked",
        ),
        invalid(
            json!({"small": 101, "replicas": -1}),
            "replicas must not be negative",
        ),
    ]
}

/// Field-level rules with the Kubernetes CEL libraries.
fn field_level_cases() -> Vec<Case> {
    vec![
        valid(json!({"replicas": 3})),
        invalid(json!({"replicas": -1}), "replicas must not be negative"),
        valid(json!({"memory": "1Gi"})),
        invalid(
            json!({"memory": "8Gi"}),
            "memory must be a quantity below 4Gi",
        ),
        invalid(
            json!({"memory": "lots"}),
            "memory must be a quantity below 4Gi",
        ),
        valid(json!({"cpu": "500m"})),
        valid(json!({"cpu": "2"})),
        invalid(json!({"cpu": "50m"}), "cpu must exceed 100m"),
        valid(json!({"ports": [80, 443]})),
        invalid(json!({"ports": [80, 70000]}), "ports must be 1-65535"),
        valid(json!({"tags": ["owner", "env-a"]})),
        invalid(json!({"tags": ["x", "env-a"]}), "tags must include owner"),
        invalid(json!({"tags": ["owner"]}), "tags need exactly one env- tag"),
        invalid(
            json!({"tags": ["owner", "env-a", "env-b"]}),
            "tags need exactly one env- tag",
        ),
        valid(json!({"versions": [1, 2, 2, 3]})),
        invalid(json!({"versions": [2, 1]}), "versions must be sorted"),
        valid(json!({"weights": [50, 50]})),
        invalid(json!({"weights": [50, 40]}), "weights sum to 90, not 100"),
        valid(json!({"zones": ["a", "c"]})),
        invalid(json!({"zones": ["a", "d"]}), "zones must be among a, b, c"),
        valid(json!({"namePrefix": "web-"})),
        invalid(
            json!({"namePrefix": "Web"}),
            "namePrefix must be a DNS label prefix",
        ),
        valid(json!({"image": "nginx:1.25"})),
        invalid(json!({"image": "nginx:latest"}), "image needs a version"),
        valid(json!({"endpoint": "https://example.com/api"})),
        invalid(
            json!({"endpoint": "http://example.com"}),
            "endpoint must be an https URL",
        ),
        invalid(
            json!({"endpoint": "not a url"}),
            "endpoint must be an https URL",
        ),
        valid(json!({"address": "10.0.0.1"})),
        invalid(json!({"address": "::1"}), "address must be IPv4"),
        invalid(
            json!({"address": "::ffff:10.0.0.1"}),
            "address must be IPv4",
        ),
        invalid(json!({"address": "300.1.1.1"}), "address must be IPv4"),
        valid(json!({"subnet": "10.1.0.0/16"})),
        invalid(
            json!({"subnet": "192.168.0.0/16"}),
            "subnet must be inside 10.0.0.0/8",
        ),
        valid(json!({"version": "1.2.3"})),
        invalid(
            json!({"version": "0.9.0"}),
            "version must be a semver above 1.0.0",
        ),
        invalid(
            json!({"version": "v1.2"}),
            "version must be a semver above 1.0.0",
        ),
        valid(json!({"label": "my-app"})),
        invalid(json!({"label": "My_App"}), "label must be a DNS-1123 label"),
        valid(json!({"limit": 10})),
        invalid(json!({"limit": 2000}), "2000 is above the limit of 1000"),
        valid(json!({"title": "hello"})),
        invalid(
            json!({"title": "Hello"}),
            "title must be lower-case and trimmed",
        ),
        valid(json!({"nickname": "héllo"})).diverges(
            "cel 0.13 counts a string's size() in bytes, CEL in code points: fail-closed",
        ),
        invalid(
            json!({"nickname": "héllo!"}),
            "nickname must be at most 5 characters",
        ),
    ]
}

const TYPE_UNSUPPORTED: &str =
    "type() is undeclared in cel 0.13: kube-cel cannot evaluate the rule";

/// Field-level rules on numbers, formats, maps, int-or-string, nested structs and optional
/// fields, and `messageExpression` results the apiserver trims or replaces.
fn typed_field_cases() -> Vec<Case> {
    vec![
        valid(json!({"ratio": 1.0})),
        valid(json!({"ratio": 0.25})),
        invalid(json!({"ratio": 0.75}), "ratio must be 1.0 or below 0.5"),
        valid(json!({})),
        invalid(json!({"scale": 1.5}), "scale must be 1.0 or at least 2.0"),
        valid(json!({"timeout": "30m"})),
        invalid(json!({"timeout": "2h"}), "timeout must be at most 1h"),
        valid(json!({"deadline": "2024-05-01T00:00:00Z"})),
        invalid(
            json!({"deadline": "2019-01-01T00:00:00Z"}),
            "deadline must be after 2020",
        ),
        valid(json!({"labels": {"owner": "me"}})),
        invalid(
            json!({"labels": {"owner": "me", "averyverylongkey": "x"}}),
            "label keys must be at most 10",
        ),
        invalid(
            json!({"labels": {"team": "x"}}),
            "labels must have an owner",
        ),
        // `type()` is not a function of cel 0.13: kube-cel rejects every value, fail-closed.
        valid(json!({"port": 8080})).diverges(TYPE_UNSUPPORTED),
        valid(json!({"port": "http-alt"})).diverges(TYPE_UNSUPPORTED),
        invalid(json!({"port": 80}), "port must be above 1024").diverges(TYPE_UNSUPPORTED),
        invalid(json!({"port": "grpc"}), "port must be above 1024").diverges(TYPE_UNSUPPORTED),
        valid(json!({"level": 5})),
        invalid(json!({"level": 50}), ": level 50 is too high"),
        invalid(json!({"level": 200}), ": level is too high"),
        valid(json!({"limits": {"cpu": "1"}})),
        invalid(json!({"limits": {}}), "limits need cpu or memory"),
        valid(json!({"probe": {"port": 8080}})),
        invalid(json!({"probe": {"port": 0}}), "probe port must be positive"),
        invalid(
            json!({"probe": {"path": "/"}}),
            "no such key: port evaluating rule: probe port",
        ),
    ]
}

/// Transition rules: `oldSelf` on updates, skipped on creates; `optionalOldSelf` on both; list-map
/// entries compared by key.
fn transition_cases() -> Vec<Case> {
    let none = None;
    vec![
        update(
            json!({"immutableName": "a"}),
            json!({"immutableName": "a", "replicas": 1}),
            none,
        ),
        update(
            json!({"immutableName": "a"}),
            json!({"immutableName": "b"}),
            Some("immutableName is immutable"),
        ),
        update(json!({}), json!({"immutableName": "b"}), none),
        update(json!({"generation": 2}), json!({"generation": 3}), none),
        update(
            json!({"generation": 3}),
            json!({"generation": 2}),
            Some("generation may not go from 3 to 2"),
        ),
        valid(json!({"counter": 1})),
        update(json!({"counter": 5}), json!({"counter": 6}), none),
        update(
            json!({"counter": 5}),
            json!({"counter": 4}),
            Some("counter may not decrease"),
        ),
        valid(json!({"firstSet": "init-a"})),
        invalid(json!({"firstSet": "x"}), "firstSet must start with init-"),
        update(
            json!({}),
            json!({"firstSet": "x"}),
            Some("firstSet must start with init-"),
        ),
        update(
            json!({"firstSet": "init-a"}),
            json!({"firstSet": "x"}),
            none,
        ),
        valid(json!({"mode": "locked"})),
        update(json!({"mode": "open"}), json!({"mode": "locked"}), none),
        update(
            json!({"mode": "locked"}),
            json!({"mode": "open"}),
            Some("a locked mode stays locked"),
        ),
        update(json!({}), json!({"region": "us"}), none),
        update(
            json!({"region": "eu"}),
            json!({"region": "us"}),
            Some("region cannot be changed"),
        ),
        update(
            json!({"region": "eu"}),
            json!({}),
            Some("region cannot be changed"),
        ),
        update(
            json!({"backends": [{"name": "a", "weight": 5}]}),
            json!({"backends": [{"name": "c", "weight": 1}, {"name": "a", "weight": 5}]}),
            none,
        ),
        update(
            json!({"backends": [{"name": "a", "weight": 5}, {"name": "b", "weight": 3}]}),
            json!({"backends": [{"name": "b", "weight": 3}, {"name": "a", "weight": 4}]}),
            Some("spec.backends[1]: Invalid value: backend weight may not decrease"),
        ),
    ]
}

fn ruled(name: &str, spec: &Value) -> Ruled {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))
        .unwrap_or_else(|e| panic!("{name}: {spec} is not a RuledSpec: {e}"))
}

/// A verdict: `Ok`, or the errors as `(field, message)`, sorted (the field is empty at the root).
type Verdict = Result<(), Vec<(String, String)>>;

/// The same verdict: both valid, or the same errors. A CEL error must be worded the same on both
/// sides; a marker error (worded by garde, as `crd.rs` compares them) matches the apiserver's
/// message it ends (`Invalid value: 101: spec.small in body should be less than or equal to 100`
/// and `should be less than or equal to 100`).
fn same(server: &Verdict, client: &Verdict) -> bool {
    const CEL_FORMS: [&str; 4] = [
        "Invalid value",
        "Forbidden:",
        "Required value",
        "Duplicate value",
    ];
    match (server, client) {
        (Ok(()), Ok(())) => true,
        (Err(server), Err(client)) => {
            server.len() == client.len()
                && server.iter().zip(client).all(|((sf, sm), (cf, cm))| {
                    sf == cf
                        && (sm == cm
                            || (!CEL_FORMS.iter().any(|form| cm.starts_with(form))
                                && sm.ends_with(cm.as_str())))
                })
        }
        _ => false,
    }
}

/// The apiserver's verdict from its answer: `Ok`, or the causes of its 422.
fn server_verdict<T>(name: &str, result: Result<T, kube::Error>) -> Verdict {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 422 => Err(causes(&status)),
        Err(e) => panic!("{name}: unexpected error {e}"),
    }
}

fn causes(status: &Status) -> Vec<(String, String)> {
    let mut causes: Vec<(String, String)> = status
        .details
        .iter()
        .flat_map(|details| &details.causes)
        // The apiserver names the root `<nil>` (a nil field path); the report leaves it empty.
        .map(|cause| (cause.field.replace("<nil>", ""), cause.message.clone()))
        .collect();
    if causes.is_empty() {
        causes.push((String::new(), status.message.clone()));
    }
    causes.sort();
    causes
}

fn client_verdict(result: Result<(), kubeforge::crd::ValidationReport>) -> Verdict {
    result.map_err(|report| {
        let mut lines: Vec<(String, String)> = report
            .iter()
            .map(|(path, error)| (path.to_string(), error.message().to_owned()))
            .collect();
        lines.sort();
        lines
    })
}

/// Both verdicts on one case: a create, or (with `old`) a create of `old` then an update.
async fn verdicts(api: &Api<Ruled>, name: &str, case: &Case) -> (Verdict, Verdict) {
    let new = ruled(name, &case.spec);
    let Some(old) = &case.old else {
        let server = server_verdict(name, api.create(&PostParams::default(), &new).await);
        return (server, client_verdict(new.validate()));
    };
    let created = api
        .create(&PostParams::default(), &ruled(name, old))
        .await
        .unwrap_or_else(|e| panic!("{name}: creating the old object {old}: {e}"));
    let mut new = new;
    new.meta_mut().resource_version = created.resource_version();
    let server = server_verdict(name, api.replace(name, &PostParams::default(), &new).await);
    (server, client_verdict(new.validate_update(&created)))
}

/// Runs `cases` against the apiserver and `validate()`/`validate_update()`: the same verdict and
/// the same messages, and the apiserver's verdict the one the case expects.
async fn same_verdicts(prefix: &str, cases: Vec<Case>) {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [Ruled::crd()], Duration::from_secs(30))
        .await
        .expect("the apiserver accepts the CRD");
    let api: Api<Ruled> = ns.api();
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let name = format!("{prefix}-{i}");
        let (server, client) = verdicts(&api, &name, case).await;
        let what = match &case.old {
            Some(old) => format!("{name}: update {old} -> {}", case.spec),
            None => format!("{name}: create {}", case.spec),
        };
        let as_expected = match (&server, case.rejected) {
            (Ok(()), None) => true,
            (Err(lines), Some(expected)) => lines
                .iter()
                .any(|(field, message)| format!("{field}: {message}").contains(expected)),
            _ => false,
        };
        if !as_expected {
            failures.push(format!(
                "{what}: apiserver {server:?}, expected {:?}",
                case.rejected
            ));
        }
        match (case.divergence, same(&server, &client)) {
            (None, true) => {}
            (None, false) => failures.push(format!(
                "{what}:\n  apiserver {server:?}\n  client    {client:?}"
            )),
            (Some(why), false) => {
                eprintln!(
                    "known divergence, {what} ({why}):\n  apiserver {server:?}\n  client    {client:?}"
                );
            }
            (Some(why), true) => failures.push(format!(
                "{what}: the known divergence ({why}) is gone: remove the mark"
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn kind_level_rules_should_get_the_same_verdict_from_apiserver_and_validate() {
    same_verdicts("kind", kind_level_cases()).await;
}

#[tokio::test]
async fn field_level_rules_should_get_the_same_verdict_from_apiserver_and_validate() {
    same_verdicts("field", field_level_cases()).await;
}

#[tokio::test]
async fn typed_field_rules_should_get_the_same_verdict_from_apiserver_and_validate() {
    same_verdicts("typed", typed_field_cases()).await;
}

#[tokio::test]
async fn transition_rules_should_get_the_same_verdict_from_apiserver_and_validate_update() {
    same_verdicts("transition", transition_cases()).await;
}

/// A kind whose rule is added after an object that breaks it was stored (validation ratcheting).
#[kubeforge::custom_resource(
    group = "cel-test.kubeforge.dev",
    version = "v1",
    kind = "Ratcheted",
    namespaced
)]
#[derive(Clone, Debug, Default)]
pub struct RatchetedSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(
        max_length = 64,
        rule(cel = "self.size() <= 3", message = "code is too long")
    )]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(max_length = 64)]
    pub note: Option<String>,
}

fn ratcheted(name: &str, code: &str, note: &str) -> Ratcheted {
    Ratcheted::new(
        name,
        RatchetedSpec {
            code: Some(code.to_owned()),
            note: Some(note.to_owned()),
        },
    )
}

/// The apiserver ratchets CEL rules on updates: a value stored before its rule existed may stay
/// as it is; `validate_update()` agrees, `validate()` (a create) does not.
#[tokio::test]
async fn unchanged_values_should_be_ratcheted_by_apiserver_and_validate_update() {
    let ns = TestNamespace::new().await.unwrap();
    let with_rule = Ratcheted::crd();
    let mut without_rule = serde_json::to_value(&with_rule).unwrap();
    without_rule["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"]["code"]
        .as_object_mut()
        .unwrap()
        .remove("x-kubernetes-validations")
        .expect("the rule is in the CRD");
    let without_rule = serde_json::from_value(without_rule).unwrap();
    apply_crds(&ns.client(), [without_rule], Duration::from_secs(30))
        .await
        .unwrap();
    let api: Api<Ratcheted> = ns.api();
    let stored = api
        .create(&PostParams::default(), &ratcheted("old", "toolong", "a"))
        .await
        .unwrap();

    apply_crds(&ns.client(), [with_rule], Duration::from_secs(30))
        .await
        .unwrap();
    // The apiserver picks up the new schema asynchronously: wait until it enforces the rule.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut enforced = false;
    for _ in 0..100 {
        if api
            .create(&dry_run, &ratcheted("probe", "toolong", "a"))
            .await
            .is_err()
        {
            enforced = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(enforced, "the rule is never enforced");

    let mut keep = ratcheted("old", "toolong", "b");
    keep.metadata.resource_version = stored.resource_version();
    let server = server_verdict(
        "keep",
        api.replace("old", &PostParams::default(), &keep).await,
    );
    let client = client_verdict(keep.validate_update(&stored));
    assert_eq!(
        (&server, &client),
        (&Ok(()), &Ok(())),
        "an unchanged value is ratcheted"
    );
    assert!(keep.validate().is_err(), "a create is not ratcheted");

    let current = api.get("old").await.unwrap();
    let mut change = ratcheted("old", "toolonger", "b");
    change.metadata.resource_version = current.resource_version();
    let server = server_verdict(
        "change",
        api.replace("old", &PostParams::default(), &change).await,
    );
    let client = client_verdict(change.validate_update(&current));
    let expected = Err(vec![(
        "spec.code".to_owned(),
        "Invalid value: \"toolonger\": code is too long".to_owned(),
    )]);
    assert_eq!(
        (&server, &client),
        (&expected, &expected),
        "a changed value is not"
    );
}

/// A CRD whose spec has a list of strings with `rule` on it, with or without bounds.
fn costed_crd(
    name: &str,
    bounded: bool,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    let mut items = json!({ "type": "array", "items": { "type": "string" } });
    if bounded {
        items["maxItems"] = json!(100);
        items["items"]["maxLength"] = json!(64);
    }
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{name}s.cost-test.kubeforge.dev") },
        "spec": {
            "group": "cost-test.kubeforge.dev",
            "scope": "Namespaced",
            "names": { "plural": format!("{name}s"), "singular": name, "kind": name.to_uppercase() },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": {
                        "type": "object",
                        "properties": { "items": items },
                        "x-kubernetes-validations": [
                            { "rule": "self.items.all(x, x.matches('^[a-z]+$'))" },
                        ],
                    }},
                }},
            }],
        },
    }))
    .unwrap()
}

/// The canonical case of the compile-time cost check (ui-tests/ui/fail/cel_too_expensive.rs and
/// the macros' cost tests): the apiserver refuses the unbounded rule and accepts the bounded one,
/// as the macro does.
#[tokio::test]
async fn the_apiserver_should_refuse_the_rule_the_macro_finds_too_expensive() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let ns = TestNamespace::new().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client());
    let refused = crds
        .create(&PostParams::default(), &costed_crd("unbounded", false))
        .await
        .expect_err("too expensive");
    assert!(
        refused
            .to_string()
            .contains("estimated rule cost exceeds budget"),
        "{refused}"
    );
    let accepted = costed_crd("bounded", true);
    let name = accepted.name_any();
    crds.create(&PostParams::default(), &accepted)
        .await
        .expect("bounded: within the budget");
    let _ = crds.delete(&name, &Default::default()).await;
}
