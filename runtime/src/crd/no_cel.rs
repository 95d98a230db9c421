//! Without the `cel` feature, the CEL rules of a kind are not evaluated client-side: they stay in
//! the CRD (`x-kubernetes-validations`) and the apiserver enforces them on every write, but
//! [`Validate`](super::Validate) reports the field markers only. Leaving the feature out saves an
//! operator the CEL interpreter (`kube-cel` and its parser) in its build and its binary.

use garde::{Path, Report};
use serde::Serialize;
use serde_json::Value;

use super::validate::ValidationContext;

/// The CEL rules of one kind; without the `cel` feature they are not evaluated client-side.
///
/// Generated code keeps one per kind in a `static` and calls [`KindRules::check`] from the root
/// type's `validate_into`.
#[derive(Debug)]
pub struct KindRules(());

impl KindRules {
    /// Nothing is compiled without the `cel` feature.
    #[must_use]
    pub fn new(_schema: &Value) -> Self {
        Self(())
    }

    /// Always `true`: no rule is evaluated without the `cel` feature.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        true
    }

    /// Leaves `report` as it is: the rules are the apiserver's to evaluate.
    #[inline]
    pub fn check<K: Serialize + ?Sized>(
        &self,
        _obj: &K,
        _ctx: &ValidationContext,
        _parent: &mut dyn FnMut() -> Path,
        _report: &mut Report,
        _markers_from: usize,
    ) {
    }
}

/// Admission rules are not evaluated client-side without the `cel` feature: always `None`.
#[inline]
pub(crate) fn admission_rule(
    _rule: &super::admission::AdmissionRuleInfo,
    _object: &Value,
    _old: Option<&Value>,
    _input: &super::admission::AdmissionInput,
) -> Option<Result<(), String>> {
    None
}

#[cfg(test)]
mod tests {
    use garde::{Path, Report};
    use serde_json::json;

    use super::KindRules;
    use crate::crd::ValidationContext;

    #[test]
    fn rules_should_be_left_to_the_apiserver() {
        let schema = json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "min > max"}],
            }},
        });
        let rules = KindRules::new(&schema);
        assert!(rules.is_empty());
        let mut report = Report::new();
        let old = json!({"spec": {"min": 0, "max": 1}});
        for ctx in [ValidationContext::create(), ValidationContext::update(&old)] {
            let new = json!({"spec": {"min": 5, "max": 1}});
            rules.check(&new, &ctx, &mut Path::empty, &mut report, 0);
        }
        assert!(report.is_empty(), "{report}");
    }
}
