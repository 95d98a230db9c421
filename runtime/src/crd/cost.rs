//! The CRD-wide CEL cost check, the apiserver's (k8s.io/apiextensions-apiserver
//! `validation.go`: `CELSchemaContext`, `getExpressionCost`, `TotalCost`) on the complete schema.
//!
//! The macros estimate each rule's cost on its own (and refuse a rule over the per-expression
//! limit at compile time), but a struct's macro cannot see where the struct is nested. The
//! apiserver multiplies each rule's cost by the *cardinality* of the node it sits on — how often
//! that node can occur in one object: the product of `maxItems` / `maxProperties` of the
//! enclosing lists and maps up to the root; under an unbounded list or map, as many of the node's
//! smallest serialized values as fit in a request — and checks that product against
//! [`STATIC_ESTIMATED_COST_LIMIT`]. Message expressions are checked as they are, not multiplied.
//! The sum of all of them over the version's schema must stay within
//! [`STATIC_ESTIMATED_CRD_COST_LIMIT`].
//!
//! The macros put each rule's estimate next to the rule (`x-kubeforge-cost`,
//! `x-kubeforge-message-expression-cost`), so there is one estimator; [`build_crd`] drops those
//! keys with everything else JSONSchemaProps does not model. Rules without an estimate (those
//! kubeforge generates: `immutable`, `exactly_one_of`, enum variants) count as free.
//!
//! [`build_crd`]: super::build_crd

use std::fmt;

use serde_json::{Map, Value};

/// The largest estimated cost of one expression (`StaticEstimatedCostLimit`).
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// The largest total estimated cost of a CRD version's rules (`StaticEstimatedCRDCostLimit`).
pub const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;
/// The largest request the apiserver accepts (`MaxRequestSizeBytes`, 3 MiB).
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// The key of a rule's estimated cost, emitted by the macros.
pub(crate) const RULE_COST: &str = "x-kubeforge-cost";
/// The key of a rule's message expression's estimated cost, emitted by the macros.
pub(crate) const MESSAGE_EXPRESSION_COST: &str = "x-kubeforge-message-expression-cost";

const VALIDATIONS: &str = "x-kubernetes-validations";

/// `baseCost * cardinality`, `u64::MAX` on overflow (`multiplyWithOverflowGuard`).
#[must_use]
pub fn multiply(cost: u64, cardinality: u64) -> u64 {
    cost.saturating_mul(cardinality)
}

/// How many values of `min_size` serialized bytes fit in a request, one comma each
/// (`maxCardinality` of the apiserver's compilation): the cardinality of a node under an
/// unbounded list or map.
#[must_use]
pub fn unbounded_cardinality(min_size: u64) -> u64 {
    MAX_REQUEST_SIZE_BYTES / (min_size + 1)
}

/// The factor by which a node multiplies the cardinality of its children
/// (`extractMaxElements`): `maxItems` of a list, `maxProperties` of a map, 1 for an object with
/// properties or a scalar; `None` for an unbounded list or map.
#[must_use]
pub fn max_elements(node: &Map<String, Value>) -> Option<u64> {
    let bound = |key: &str| {
        node.get(key)
            .and_then(Value::as_i64)
            .map(|n| n.max(0) as u64)
    };
    match node.get("type").and_then(Value::as_str) {
        Some("object") if node.contains_key("additionalProperties") => bound("maxProperties"),
        Some("array") => bound("maxItems"),
        _ => Some(1),
    }
}

/// The smallest serialized size of a value of `node` (the `MinSerializedSize` of its CEL type).
#[must_use]
pub fn min_serialized_size(node: &Map<String, Value>) -> u64 {
    if node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        return 1;
    }
    match node.get("type").and_then(Value::as_str) {
        Some("object" | "array") => 2,
        Some("string") => match node.get("format").and_then(Value::as_str) {
            Some("date") => 12,
            Some("date-time") => 21,
            Some("duration") => 3,
            _ => 2,
        },
        Some("boolean") => 4,
        _ => 1,
    }
}

/// Which expression of a rule a [`CostProblem`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expression {
    /// The rule itself (its cost times the node's cardinality).
    Rule,
    /// Its `messageExpression` (not multiplied).
    MessageExpression,
}

/// One expression over [`STATIC_ESTIMATED_COST_LIMIT`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostProblem {
    /// The node's JSON path (`.spec.items[*].name`; `.` is the root).
    pub path: String,
    /// The rule's CEL source.
    pub rule: String,
    /// The rule or its message expression.
    pub expression: Expression,
    /// The expression's own estimated cost.
    pub cost: u64,
    /// How often the node can occur in one object (1 for a message expression).
    pub cardinality: u64,
    /// `cost * cardinality`, what is checked.
    pub total: u64,
}

/// The verdict of [`check`]: the expressions over the per-expression limit, the total and the
/// most expensive contributions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CostReport {
    /// Expressions over [`STATIC_ESTIMATED_COST_LIMIT`].
    pub problems: Vec<CostProblem>,
    /// The sum of every expression's checked cost.
    pub total: u64,
    /// Every contribution, as (path, rule, checked cost), most expensive first.
    pub contributions: Vec<(String, String, u64)>,
}

impl CostReport {
    /// `true` when the apiserver accepts the costs.
    #[must_use]
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty() && self.total <= STATIC_ESTIMATED_CRD_COST_LIMIT
    }
}

/// "more than 100x", "1.500000x" or "2.5x", as the apiserver words it (`getCostErrorMessage`).
#[must_use]
pub fn exceed_factor(cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    if factor > 100.0 {
        "more than 100x".to_owned()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    }
}

const FIX: &str = "add `max_items` / `max_properties` to the enclosing lists and maps and \
                   `max_length` to the strings the rule reads, or simplify the rule";

impl fmt::Display for CostReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut lines = Vec::new();
        for p in &self.problems {
            let line = match p.expression {
                Expression::Rule => format!(
                    "CEL rule `{}` at {}: estimated cost {} times cardinality {} = {} exceeds the \
                     apiserver's per-rule limit {STATIC_ESTIMATED_COST_LIMIT} by a factor of {}; {FIX}",
                    p.rule,
                    p.path,
                    p.cost,
                    p.cardinality,
                    p.total,
                    exceed_factor(p.total, STATIC_ESTIMATED_COST_LIMIT)
                ),
                Expression::MessageExpression => format!(
                    "the message expression of CEL rule `{}` at {}: estimated cost {} exceeds the \
                     apiserver's per-expression limit {STATIC_ESTIMATED_COST_LIMIT} by a factor of {}; {FIX}",
                    p.rule,
                    p.path,
                    p.cost,
                    exceed_factor(p.cost, STATIC_ESTIMATED_COST_LIMIT)
                ),
            };
            lines.push(line);
        }
        if self.total > STATIC_ESTIMATED_CRD_COST_LIMIT {
            let top: Vec<String> = self
                .contributions
                .iter()
                .take(4)
                .map(|(path, rule, cost)| format!("`{rule}` at {path}: {cost}"))
                .collect();
            lines.push(format!(
                "the CEL rules' total estimated cost {} exceeds the apiserver's per-CRD limit \
                 {STATIC_ESTIMATED_CRD_COST_LIMIT} by a factor of {} (most expensive: {}); {FIX}",
                self.total,
                exceed_factor(self.total, STATIC_ESTIMATED_CRD_COST_LIMIT),
                top.join(", ")
            ));
        }
        f.write_str(&lines.join("\n"))
    }
}

/// Checks the CEL costs of a version's structural `openAPIV3Schema` (with the macros' estimates)
/// as the apiserver does when the CRD is applied.
#[must_use]
pub fn check(schema: &Value) -> CostReport {
    let mut report = CostReport::default();
    walk(schema, ".", Some(1), &mut report);
    report.contributions.sort_by_key(|c| std::cmp::Reverse(c.2));
    report
}

fn walk(node: &Value, path: &str, cardinality: Option<u64>, report: &mut CostReport) {
    let Value::Object(map) = node else { return };
    if let Some(Value::Array(rules)) = map.get(VALIDATIONS) {
        for rule in rules {
            observe(map, rule, path, cardinality, report);
        }
    }
    let child = |_: ()| cardinality.and_then(|c| max_elements(map).map(|m| multiply(c, m)));
    let join = |suffix: &str| {
        if path == "." {
            format!(".{}", suffix.trim_start_matches('.'))
        } else {
            format!("{path}{suffix}")
        }
    };
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, prop) in props {
            walk(prop, &join(&format!(".{name}")), child(()), report);
        }
    }
    if let Some(items) = map.get("items") {
        walk(items, &join("[*]"), child(()), report);
    }
    if let Some(values) = map.get("additionalProperties") {
        walk(values, &join("[*]"), child(()), report);
    }
}

fn observe(
    node: &Map<String, Value>,
    rule: &Value,
    path: &str,
    cardinality: Option<u64>,
    report: &mut CostReport,
) {
    let source = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
    let mut add = |cost: u64| {
        report.total = report.total.saturating_add(cost);
        report
            .contributions
            .push((path.to_owned(), source.to_owned(), cost));
    };
    if let Some(cost) = rule.get(RULE_COST).and_then(Value::as_u64) {
        let cardinality =
            cardinality.unwrap_or_else(|| unbounded_cardinality(min_serialized_size(node)));
        let total = multiply(cost, cardinality);
        add(total);
        if total > STATIC_ESTIMATED_COST_LIMIT {
            report.problems.push(CostProblem {
                path: path.to_owned(),
                rule: source.to_owned(),
                expression: Expression::Rule,
                cost,
                cardinality,
                total,
            });
        }
    }
    if let Some(cost) = rule.get(MESSAGE_EXPRESSION_COST).and_then(Value::as_u64) {
        add(cost);
        if cost > STATIC_ESTIMATED_COST_LIMIT {
            report.problems.push(CostProblem {
                path: path.to_owned(),
                rule: source.to_owned(),
                expression: Expression::MessageExpression,
                cost,
                cardinality: 1,
                total: cost,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn unbounded_cardinality_should_match_the_apiservers_max_cardinality() {
        // 3 MiB / (min size + 1): objects and strings ("{}", "\"\"") 2, integers 1, bools 4.
        assert_eq!(unbounded_cardinality(2), 1_048_576);
        assert_eq!(unbounded_cardinality(1), 1_572_864);
        assert_eq!(unbounded_cardinality(4), 629_145);
        assert_eq!(unbounded_cardinality(21), 142_987);
    }

    #[test]
    fn multiply_should_saturate_like_the_overflow_guard() {
        assert_eq!(multiply(0, u64::MAX), 0);
        assert_eq!(multiply(3, 4), 12);
        assert_eq!(multiply(u64::MAX / 2, 3), u64::MAX);
    }

    #[test]
    fn max_elements_should_follow_extract_max_elements() {
        assert_eq!(
            max_elements(&obj(json!({"type": "array", "maxItems": 7}))),
            Some(7)
        );
        assert_eq!(max_elements(&obj(json!({"type": "array"}))), None);
        assert_eq!(
            max_elements(&obj(
                json!({"type": "object", "additionalProperties": {}, "maxProperties": 3})
            )),
            Some(3)
        );
        assert_eq!(
            max_elements(&obj(json!({"type": "object", "additionalProperties": {}}))),
            None
        );
        assert_eq!(
            max_elements(&obj(json!({"type": "object", "properties": {}}))),
            Some(1)
        );
        assert_eq!(max_elements(&obj(json!({"type": "string"}))), Some(1));
    }

    #[test]
    fn exceed_factor_should_word_it_as_the_apiserver() {
        assert_eq!(exceed_factor(12_000_000, 10_000_000), "1.200000x");
        assert_eq!(exceed_factor(25_000_000, 10_000_000), "2.5x");
        assert_eq!(exceed_factor(1_000_000_001, 10_000_000), "more than 100x");
    }

    fn rule(cost: u64) -> Value {
        json!({"rule": "r", RULE_COST: cost})
    }

    #[test]
    fn check_should_multiply_rules_by_the_product_of_enclosing_bounds() {
        // spec.outer (maxItems 10) of objects with inner (maxItems 100) of objects with a rule
        // of cost 5,000: cardinality 1,000, checked cost 5,000,000 (under 10M).
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "outer": {"type": "array", "maxItems": 10, "items": {"type": "object", "properties": {
                "inner": {"type": "array", "maxItems": 100, "items": {
                    "type": "object", "x-kubernetes-validations": [rule(5_000)]}}}}}}}}});
        let report = check(&schema);
        assert!(report.is_ok(), "{report}");
        assert_eq!(report.total, 5_000_000);
        // Cost 10,001: 10,001,000, over the limit by 1.000100x.
        let schema = serde_json::to_string(&schema)
            .unwrap_or_default()
            .replace("5000", "10001");
        let report = check(&serde_json::from_str(&schema).unwrap_or_default());
        assert_eq!(report.problems.len(), 1);
        assert_eq!(report.problems[0].cardinality, 1_000);
        assert_eq!(report.problems[0].total, 10_001_000);
        assert_eq!(report.problems[0].path, ".spec.outer[*].inner[*]");
        assert!(
            report.to_string().contains("by a factor of 1.000100x"),
            "{report}"
        );
    }

    #[test]
    fn check_should_estimate_unbounded_cardinality_from_the_nodes_min_size() {
        // A rule of cost 10 on the integer items of an unbounded list: 10 * 1,572,864.
        let schema = json!({"type": "object", "properties": {"xs": {"type": "array", "items": {
            "type": "integer", "x-kubernetes-validations": [rule(10)]}}}});
        let report = check(&schema);
        assert_eq!(report.total, 15_728_640);
        assert_eq!(report.problems[0].cardinality, 1_572_864);
        // Cost 6: 9,437,184, accepted.
        let schema = json!({"type": "object", "properties": {"xs": {"type": "array", "items": {
            "type": "integer", "x-kubernetes-validations": [rule(6)]}}}});
        assert!(check(&schema).is_ok());
    }

    #[test]
    fn check_should_not_multiply_message_expressions_but_count_them() {
        let schema = json!({"type": "object", "properties": {"xs": {"type": "array", "maxItems": 100, "items": {
            "type": "object", "x-kubernetes-validations": [
                {"rule": "r", RULE_COST: 2, MESSAGE_EXPRESSION_COST: 10_000_001u64}]}}}});
        let report = check(&schema);
        assert_eq!(report.total, 200 + 10_000_001);
        assert_eq!(report.problems.len(), 1);
        assert_eq!(report.problems[0].expression, Expression::MessageExpression);
    }

    #[test]
    fn check_should_sum_the_crd_total() {
        // Eleven rules of 9,500,000 at the root: each under 10M, together 104,500,000 > 100M.
        let rules: Vec<Value> = (0..11).map(|_| rule(9_500_000)).collect();
        let report = check(&json!({"type": "object", VALIDATIONS: rules}));
        assert!(report.problems.is_empty());
        assert_eq!(report.total, 104_500_000);
        assert!(!report.is_ok());
        assert!(
            report
                .to_string()
                .contains("per-CRD limit 100000000 by a factor of 1.045000x")
        );
        let rules: Vec<Value> = (0..10).map(|_| rule(9_500_000)).collect();
        assert!(check(&json!({"type": "object", VALIDATIONS: rules})).is_ok());
    }
}
