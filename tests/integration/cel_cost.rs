//! The CRD-wide CEL cost check (`kubeforge::crd::cost`) against the apiserver's: for schemas on
//! both sides of each limit — a rule's cost times the cardinality of its node against the
//! per-expression limit, the sum over the version against the per-CRD limit, message
//! expressions — our verdict and the apiserver's must agree (a dry-run create of the CRD).
//!
//! The types are `#[kubeforge::schema]` structs composed by hand into CRDs, not kinds: a
//! `#[custom_resource]` registers itself, and `crd::crds()` — which the other tests of this
//! binary call — refuses every CRD while one registered version is over budget.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use kubeforge::crd::cost;
use kubeforge::testing::TestNamespace;
use serde_json::{Value, json};

/// A leaf whose rule loops over up to 16 short tags.
#[kubeforge::schema(rule(cel = "self.tags.all(t, t.size() < 10)", message = "short tags"))]
#[derive(Clone, Debug, Default)]
pub struct Leaf {
    #[validate(max_items = 16, items(max_length = 32))]
    pub tags: Vec<String>,
}

/// 100 leaves.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct Inner {
    #[validate(max_items = 100)]
    pub leaves: Vec<Leaf>,
}

/// 10 × 100 leaves: cardinality 1,000.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct Bounded {
    #[validate(max_items = 10)]
    pub outer: Vec<Inner>,
}

/// 1,000 × 1,000 leaves: cardinality 1,000,000.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct Wide {
    #[validate(max_items = 1000)]
    pub outer: Vec<WideInner>,
}

/// 1,000 leaves.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct WideInner {
    #[validate(max_items = 1000)]
    pub leaves: Vec<Leaf>,
}

/// Leaves in an unbounded list: as many as fit in a request (3 MiB / 3 = 1,048,576).
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct Unbounded {
    pub leaves: Vec<Leaf>,
}

/// A message expression is not multiplied: under an unbounded list it costs what it costs.
#[kubeforge::schema(rule(
    cel = "self.count >= 0",
    message_expression = "'count %d is negative'.format([self.count])"
))]
#[derive(Clone, Debug, Default)]
pub struct Counted {
    pub count: i64,
}

/// Counted items, unbounded.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct ManyCounted {
    pub items: Vec<Counted>,
}

/// A leaf whose rule costs about 8,000,000 per occurrence: a regex over 100 tags of up to
/// 200,000 code points (800,000 bytes, a tenth of that per item).
#[kubeforge::schema(rule(cel = "self.tags.all(t, t.matches('^a+$'))", message = "a"))]
#[derive(Clone, Debug, Default)]
pub struct Heavy {
    #[validate(max_items = 100, items(max_length = 200000))]
    pub tags: Vec<String>,
}

/// Ten heavy leaves: each under the per-rule limit, together under the per-CRD one.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct TenHeavy {
    pub a: Heavy,
    pub b: Heavy,
    pub c: Heavy,
    pub d: Heavy,
    pub e: Heavy,
    pub f: Heavy,
    pub g: Heavy,
    pub h: Heavy,
    pub i: Heavy,
    pub j: Heavy,
}

/// Thirteen heavy leaves: each under the per-rule limit, together over the per-CRD one.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct MoreHeavy {
    pub ten: TenHeavy,
    pub k: Heavy,
    pub l: Heavy,
    pub m: Heavy,
}

/// The version schema of a CRD whose spec is `T`, with the macros' estimates.
fn schema<T: kubeforge::schemars::JsonSchema>() -> Value {
    kubeforge::crd::kind_schema(kubeforge::crd::raw_schema::<T>(), None, vec![])
}

fn crd(name: &str, schema: &Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{name}s.cel-cost.kubeforge.dev") },
        "spec": {
            "group": "cel-cost.kubeforge.dev",
            "scope": "Namespaced",
            "names": { "plural": format!("{name}s"), "singular": name, "kind": format!("K{name}") },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": schema },
            }],
        },
    }))
    .unwrap()
}

/// The apiserver's verdict on creating the CRD (dry run): `Ok`, or the refusal's message when
/// it is about cost; anything else fails the test.
async fn apiserver(ns: &TestNamespace, crd: &CustomResourceDefinition) -> Result<(), String> {
    let api: Api<CustomResourceDefinition> = Api::all(ns.client());
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match api.create(&params, crd).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.message.contains("exceeds budget") => Err(e.message),
        Err(e) => panic!("unexpected refusal: {e}"),
    }
}

/// Our verdict and the apiserver's on `T` as spec; both must be `accepted`.
async fn agree<T: kubeforge::schemars::JsonSchema>(
    ns: &TestNamespace,
    name: &str,
    accepted: bool,
) -> cost::CostReport {
    let schema = schema::<T>();
    let ours = cost::check(&schema);
    let crd = crd(name, &schema);
    assert!(
        !serde_json::to_string(&crd).unwrap().contains("x-kubeforge"),
        "the estimates do not reach the CRD"
    );
    let theirs = apiserver(ns, &crd).await;
    assert_eq!(
        (ours.is_ok(), theirs.is_ok()),
        (accepted, accepted),
        "{name}: ours (total {}): {ours}; the apiserver: {theirs:?}",
        ours.total
    );
    ours
}

#[tokio::test]
async fn cost_check_should_agree_with_the_apiserver_on_rules_times_cardinality() {
    let ns = TestNamespace::new().await.unwrap();
    // 1,000 leaves: accepted.
    let bounded = agree::<Bounded>(&ns, "bounded", true).await;
    // 1,000,000 leaves: the same rule, over the limit.
    let wide = agree::<Wide>(&ns, "wide", false).await;
    assert_eq!(wide.problems.len(), 1, "{wide}");
    let p = &wide.problems[0];
    assert_eq!(p.cardinality, 1_000_000);
    assert_eq!(p.path, ".spec.outer[*].leaves[*]");
    assert_eq!(bounded.total, p.cost * 1_000);
    // Unbounded: as many leaves as fit in a request.
    let unbounded = agree::<Unbounded>(&ns, "unbounded", false).await;
    assert_eq!(unbounded.problems[0].cardinality, 1_048_576, "{unbounded}");
    let message = unbounded.to_string();
    assert!(
        message.contains("CEL rule `self.tags.all(t, t.size() < 10)` at .spec.leaves[*]")
            && message.contains("times cardinality 1048576")
            && message.contains("max_items"),
        "{message}"
    );
}

#[tokio::test]
async fn cost_check_should_agree_with_the_apiserver_on_the_crd_total() {
    let ns = TestNamespace::new().await.unwrap();
    let ten = agree::<TenHeavy>(&ns, "tenheavy", true).await;
    assert!(ten.problems.is_empty());
    // 100 × (2 + 1 + 1 + (800,000 + 1) × 0.1 × 1) + 3 per rule, ten rules.
    assert_eq!(ten.total, 10 * (100 * (2 + 1 + 1 + 80_001) + 3));
    let more = agree::<MoreHeavy>(&ns, "moreheavy", false).await;
    assert!(
        more.problems.is_empty(),
        "each rule is within its own limit"
    );
    assert!(more.total > cost::STATIC_ESTIMATED_CRD_COST_LIMIT);
    assert!(more.to_string().contains("per-CRD limit"), "{more}");
}

#[tokio::test]
async fn cost_check_should_agree_with_the_apiserver_on_message_expressions() {
    let ns = TestNamespace::new().await.unwrap();
    // Not multiplied by the 1,048,576 items the rule is.
    agree::<ManyCounted>(&ns, "manycounted", true).await;
    // `'…' + string(<int>)`: the apiserver refuses it as more than 100x over budget; the macro
    // refuses it at compile time (macros' cel::check_tests), so it is written by hand here.
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {"count": {"type": "integer", "format": "int64"}},
        "x-kubernetes-validations": [{
            "rule": "self.count >= 0",
            "messageExpression": "'count is ' + string(self.count)",
        }],
    }}});
    let refused = apiserver(&ns, &crd("concatenated", &schema))
        .await
        .unwrap_err();
    assert!(
        refused.contains("messageExpression cost exceeds budget by factor of more than 100x"),
        "{refused}"
    );
}
