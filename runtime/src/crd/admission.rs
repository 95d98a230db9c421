//! Admission policies generated from a kind: the `admission_rule(..)`s of `#[custom_resource]`
//! become a `ValidatingAdmissionPolicy` (`admissionregistration.k8s.io/v1`, GA since
//! Kubernetes 1.30) and its `ValidatingAdmissionPolicyBinding`, both named `<plural>.<group>`,
//! which the apiserver evaluates itself: no webhook to run, nothing to be down. Their rules may
//! read what a CRD's `x-kubernetes-validations` cannot: the object's `metadata`, the request
//! (`request.userInfo`, `request.operation`), the old object on an update and the namespace.
//!
//! Every kind with admission rules registers its policy (through `inventory`);
//! [`admission_policies`] lists them (what `crdgen` prints next to the CRDs), and
//! [`ValidateAdmission::validate_admission`] evaluates the rules client-side.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use super::CustomResource;

/// The operations, in the order the policy lists them.
const OPERATIONS: [&str; 3] = ["CREATE", "UPDATE", "DELETE"];

/// One `admission_rule(..)`, as the macro checked it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionRuleInfo {
    /// The CEL expression (a bool).
    pub cel: &'static str,
    /// The message when it fails.
    pub message: Option<&'static str>,
    /// A CEL expression giving the message.
    pub message_expression: Option<&'static str>,
    /// `Invalid`, `Forbidden`, `Unauthorized` or `RequestEntityTooLarge`.
    pub reason: &'static str,
    /// The operations it checks (`CREATE`, `UPDATE`, `DELETE`).
    pub operations: &'static [&'static str],
    /// It reads `request.userInfo`: client-side, only with a user.
    pub reads_user: bool,
    /// It reads `namespaceObject`: left to the apiserver.
    pub reads_namespace: bool,
}

impl AdmissionRuleInfo {
    /// The message of a failure: `message`, else the apiserver's default.
    #[must_use]
    pub fn default_message(&self) -> String {
        match self.message {
            Some(message) if !message.is_empty() => message.to_owned(),
            _ => format!("failed expression: {}", self.cel.trim()),
        }
    }
}

/// The admission rules of a kind and the settings of their policy and binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionPolicyInfo {
    /// The rules, in order.
    pub rules: &'static [AdmissionRuleInfo],
    /// `Fail` or `Ignore`.
    pub failure_policy: &'static str,
    /// `Deny`, `Warn`, `Audit`.
    pub validation_actions: &'static [&'static str],
    /// The binding's `namespaceSelector`, as JSON.
    pub namespace_selector: Option<&'static str>,
}

/// A kind with `admission_rule(..)`s; implemented by `#[custom_resource]`.
pub trait AdmissionRules: CustomResource {
    /// The rules and the policy's settings.
    const POLICY: AdmissionPolicyInfo;
}

/// A kind's policy and its binding, both named `<plural>.<group>`.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmissionPolicy {
    /// The policy: the kind's version, its rules.
    pub policy: ValidatingAdmissionPolicy,
    /// The binding: the validation actions and the namespace selector.
    pub binding: ValidatingAdmissionPolicyBinding,
}

impl AdmissionPolicy {
    /// The name of both objects.
    #[must_use]
    pub fn name(&self) -> &str {
        self.policy.metadata.name.as_deref().unwrap_or_default()
    }
}

/// One registered kind version with admission rules; submitted by the code `#[custom_resource]`
/// generates.
#[derive(Debug)]
pub struct PolicyRegistration {
    /// Builds the policy of the kind version.
    pub policy: fn() -> AdmissionPolicy,
}

inventory::collect!(PolicyRegistration);

/// Why the registered policies cannot be listed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// Two versions of one kind declare admission rules.
    #[error(
        "admission policy {name}: versions {version} and {other} both declare `admission_rule(..)`; \
         declare them on one version: the apiserver checks objects of every version against it, \
         converted to it (matchPolicy: Equivalent)"
    )]
    TwoVersions {
        /// The policy's name.
        name: String,
        /// One version.
        version: String,
        /// The other.
        other: String,
    },
}

/// The version a policy checks (its only resource rule's).
fn version_of(policy: &AdmissionPolicy) -> String {
    policy
        .policy
        .spec
        .as_ref()
        .and_then(|s| s.match_constraints.as_ref())
        .and_then(|m| m.resource_rules.as_ref())
        .and_then(|r| r.first())
        .and_then(|r| r.api_versions.as_ref())
        .and_then(|v| v.first())
        .cloned()
        .unwrap_or_default()
}

/// The admission policies of every kind linked into this binary with `admission_rule(..)`s,
/// sorted by name: what `crdgen` prints after the CRDs.
///
/// # Errors
///
/// [`PolicyError::TwoVersions`] when two versions of one kind declare admission rules.
pub fn admission_policies() -> Result<Vec<AdmissionPolicy>, PolicyError> {
    let mut by_name: BTreeMap<String, AdmissionPolicy> = BTreeMap::new();
    for registration in inventory::iter::<PolicyRegistration> {
        let policy = (registration.policy)();
        let name = policy.name().to_owned();
        if let Some(other) = by_name.get(&name) {
            let (mut a, mut b) = (version_of(&policy), version_of(other));
            if a > b {
                std::mem::swap(&mut a, &mut b);
            }
            return Err(PolicyError::TwoVersions {
                name,
                version: a,
                other: b,
            });
        }
        by_name.insert(name, policy);
    }
    Ok(by_name.into_values().collect())
}

/// The CEL expression the policy carries for `rule`: the rule, checked only on its operations
/// when they are fewer than the policy's.
fn expression(rule: &AdmissionRuleInfo, all: &[&str]) -> String {
    if all.iter().all(|op| rule.operations.contains(op)) {
        return rule.cel.to_owned();
    }
    let ops: Vec<String> = rule.operations.iter().map(|op| format!("'{op}'")).collect();
    format!(
        "!(request.operation in [{}]) || ({})",
        ops.join(", "),
        rule.cel.trim()
    )
}

/// The policy and binding of the kind `K`.
#[must_use]
pub fn admission_policy<K: AdmissionRules>() -> AdmissionPolicy {
    let info = &K::INFO;
    let policy = &K::POLICY;
    let name = format!("{}.{}", info.plural, info.group);
    let operations: Vec<&str> = OPERATIONS
        .into_iter()
        .filter(|op| policy.rules.iter().any(|r| r.operations.contains(op)))
        .collect();
    let validations = policy
        .rules
        .iter()
        .map(|rule| Validation {
            expression: expression(rule, &operations),
            message: Some(rule.default_message()),
            message_expression: rule.message_expression.map(str::to_owned),
            reason: Some(rule.reason.to_owned()),
        })
        .collect();
    let meta = ObjectMeta {
        name: Some(name.clone()),
        ..ObjectMeta::default()
    };
    let rule = NamedRuleWithOperations {
        api_groups: Some(vec![info.group.to_owned()]),
        api_versions: Some(vec![info.version.to_owned()]),
        operations: Some(operations.iter().map(|op| (*op).to_owned()).collect()),
        resources: Some(vec![info.plural.to_owned()]),
        scope: Some(
            if info.namespaced {
                "Namespaced"
            } else {
                "Cluster"
            }
            .to_owned(),
        ),
        resource_names: None,
    };
    let namespace_selector = policy
        .namespace_selector
        .and_then(|json| serde_json::from_str(json).ok());
    AdmissionPolicy {
        policy: ValidatingAdmissionPolicy {
            metadata: meta.clone(),
            spec: Some(ValidatingAdmissionPolicySpec {
                failure_policy: Some(policy.failure_policy.to_owned()),
                match_constraints: Some(MatchResources {
                    match_policy: Some("Equivalent".to_owned()),
                    resource_rules: Some(vec![rule]),
                    ..MatchResources::default()
                }),
                validations: Some(validations),
                ..ValidatingAdmissionPolicySpec::default()
            }),
            status: None,
        },
        binding: ValidatingAdmissionPolicyBinding {
            metadata: meta,
            spec: ValidatingAdmissionPolicyBindingSpec {
                policy_name: name,
                validation_actions: policy
                    .validation_actions
                    .iter()
                    .map(|a| (*a).to_owned())
                    .collect(),
                match_resources: namespace_selector.map(|selector| MatchResources {
                    namespace_selector: Some(selector),
                    ..MatchResources::default()
                }),
                param_ref: None,
            },
        },
    }
}

/// The operation of an admission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A create: `object` is the new object, `oldObject` is `null`.
    Create,
    /// An update: `object` is the new object, `oldObject` the stored one.
    Update,
    /// A delete: `object` is `null`, `oldObject` the stored object.
    Delete,
}

impl Operation {
    /// `CREATE`, `UPDATE` or `DELETE`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// What an admission request says besides the object, for
/// [`ValidateAdmission::validate_admission`].
#[derive(Debug, Clone)]
pub struct AdmissionAttributes<'a, K> {
    pub(crate) operation: Operation,
    pub(crate) old: Option<&'a K>,
    pub(crate) user: Option<(String, Vec<String>)>,
    pub(crate) dry_run: bool,
}

impl<'a, K> AdmissionAttributes<'a, K> {
    /// A create of the object.
    #[must_use]
    pub fn create() -> Self {
        Self {
            operation: Operation::Create,
            old: None,
            user: None,
            dry_run: false,
        }
    }

    /// An update from `old` to the object.
    #[must_use]
    pub fn update(old: &'a K) -> Self {
        Self {
            operation: Operation::Update,
            old: Some(old),
            ..Self::create()
        }
    }

    /// A delete of the object.
    #[must_use]
    pub fn delete() -> Self {
        Self {
            operation: Operation::Delete,
            ..Self::create()
        }
    }

    /// Made by `username`, a member of `groups` (`request.userInfo`); without it, rules that
    /// read the user are not evaluated.
    #[must_use]
    pub fn user(mut self, username: &str, groups: &[&str]) -> Self {
        self.user = Some((
            username.to_owned(),
            groups.iter().map(|g| (*g).to_owned()).collect(),
        ));
        self
    }

    /// A dry run (`request.dryRun`).
    #[must_use]
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    /// The operation.
    #[must_use]
    pub fn operation(&self) -> Operation {
        self.operation
    }
}

/// One failed rule, in the apiserver's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `<plural>.<group> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with
    /// binding '<binding>' denied request: <message>`, as the apiserver words it.
    pub message: String,
    /// The rule's reason (`Invalid`, `Forbidden`, ...).
    pub reason: &'static str,
}

/// The verdict of a kind's admission rules on one request, evaluated client-side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdmissionVerdict {
    /// The rules that refuse the request (with the `Deny` action).
    pub denied: Vec<Refusal>,
    /// The rules that fail without refusing it (the `Warn` or `Audit` actions only).
    pub warned: Vec<Refusal>,
    /// The rules not evaluated here: they read the user and none was given, or the namespace,
    /// or the crate was built without the `cel` feature.
    pub unchecked: Vec<&'static str>,
}

impl AdmissionVerdict {
    /// No rule refuses the request (unchecked rules aside).
    #[must_use]
    pub fn allowed(&self) -> bool {
        self.denied.is_empty()
    }
}

/// Client-side evaluation of a kind's `admission_rule(..)`s.
pub trait ValidateAdmission: Sized {
    /// The verdict of the kind's admission rules on `attributes` with this object: on a create
    /// or update the new object, on a delete the object deleted. The binding's namespace
    /// selector is not applied (the rules are evaluated as if the namespace were selected).
    fn validate_admission(&self, attributes: &AdmissionAttributes<'_, Self>) -> AdmissionVerdict;
}

impl<K: AdmissionRules + Serialize> ValidateAdmission for K {
    fn validate_admission(&self, attributes: &AdmissionAttributes<'_, Self>) -> AdmissionVerdict {
        evaluate::<K>(self, attributes)
    }
}

/// What the `request` of a client-side evaluation holds.
#[derive(Debug)]
#[cfg_attr(
    not(feature = "cel"),
    allow(dead_code, reason = "read by `cel.rs` only")
)]
pub(crate) struct AdmissionInput {
    pub(crate) operation: &'static str,
    pub(crate) name: String,
    pub(crate) namespace: String,
    /// Username and groups.
    pub(crate) user: Option<(String, Vec<String>)>,
    pub(crate) dry_run: bool,
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) plural: &'static str,
}

/// Serializes the objects, then evaluates the rules that apply (see
/// [`ValidateAdmission::validate_admission`]).
fn evaluate<K: AdmissionRules + Serialize>(
    obj: &K,
    attributes: &AdmissionAttributes<'_, K>,
) -> AdmissionVerdict {
    let json = |k: &K| serde_json::to_value(k).unwrap_or(serde_json::Value::Null);
    let (object, old) = match attributes.operation {
        Operation::Create => (json(obj), None),
        Operation::Update => (json(obj), attributes.old.map(json)),
        Operation::Delete => (serde_json::Value::Null, Some(json(obj))),
    };
    let meta = obj.meta();
    let request = AdmissionInput {
        operation: attributes.operation.as_str(),
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        user: attributes.user.clone(),
        dry_run: attributes.dry_run,
        group: K::INFO.group,
        version: K::INFO.version,
        kind: K::INFO.kind,
        plural: K::INFO.plural,
    };
    let name = format!("{}.{}", K::INFO.plural, K::INFO.group);
    // As the apiserver's `admission.NewForbidden` words it.
    let forbidden = if request.name.is_empty() {
        format!("{name} is forbidden")
    } else {
        format!("{name} {:?} is forbidden", request.name)
    };
    let deny = K::POLICY.validation_actions.contains(&"Deny");
    let mut verdict = AdmissionVerdict::default();
    for rule in K::POLICY.rules {
        if !rule.operations.contains(&request.operation) {
            continue;
        }
        if rule.reads_namespace || (rule.reads_user && request.user.is_none()) {
            verdict.unchecked.push(rule.cel);
            continue;
        }
        match super::cel::admission_rule(rule, &object, old.as_ref(), &request) {
            None => verdict.unchecked.push(rule.cel),
            Some(Ok(())) => {}
            Some(Err(message)) => {
                let refusal = Refusal {
                    message: format!(
                        "{forbidden}: ValidatingAdmissionPolicy '{name}' with binding '{name}' denied request: {message}"
                    ),
                    reason: rule.reason,
                };
                if deny {
                    verdict.denied.push(refusal);
                } else {
                    verdict.warned.push(refusal);
                }
            }
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kind with a rule per operation set.
    #[crate::custom_resource(
        group = "admission.kubeforge.dev",
        version = "v1",
        kind = "Gadget",
        namespaced,
        admission_rule(cel = "object.metadata.name.startsWith('g-')", message = "g- names only"),
        admission_rule(cel = "object.spec.size == oldObject.spec.size", reason = "Forbidden"),
        admission_rule(
            cel = "'admins' in request.userInfo.groups",
            message_expression = "request.userInfo.username + ' is no admin'",
            operations = ["DELETE"]
        ),
        admission_policy(validation_actions = ["Warn", "Audit"], namespace_selector = "team=a")
    )]
    #[derive(Clone, Debug)]
    struct GadgetSpec {
        size: i32,
    }

    #[test]
    fn admission_policy_should_match_the_kind_and_guard_rules_by_operation() {
        let p = admission_policy::<Gadget>();
        assert_eq!(p.name(), "gadgets.admission.kubeforge.dev");
        let spec = p.policy.spec.clone().unwrap();
        let rule = &spec.match_constraints.unwrap().resource_rules.unwrap()[0];
        assert_eq!(
            rule.operations.as_deref().unwrap(),
            ["CREATE", "UPDATE", "DELETE"]
        );
        assert_eq!(rule.api_versions.as_deref().unwrap(), ["v1"]);
        let validations = spec.validations.unwrap();
        let expressions: Vec<&str> = validations.iter().map(|v| v.expression.as_str()).collect();
        assert_eq!(
            expressions,
            [
                "!(request.operation in ['CREATE', 'UPDATE']) || (object.metadata.name.startsWith('g-'))",
                "!(request.operation in ['UPDATE']) || (object.spec.size == oldObject.spec.size)",
                "!(request.operation in ['DELETE']) || ('admins' in request.userInfo.groups)",
            ]
        );
        assert_eq!(
            validations[1].message.as_deref(),
            Some("failed expression: object.spec.size == oldObject.spec.size")
        );
        assert_eq!(p.binding.spec.validation_actions, ["Warn", "Audit"]);
        let selector = p.binding.spec.match_resources.unwrap().namespace_selector;
        assert_eq!(
            selector.unwrap().match_labels.unwrap(),
            [("team".to_owned(), "a".to_owned())].into()
        );
    }

    #[cfg(feature = "cel")]
    #[test]
    fn validate_admission_should_evaluate_the_rules_of_the_operation() {
        let old = Gadget::new("g-1", GadgetSpec { size: 1 });
        let new = Gadget::new("g-1", GadgetSpec { size: 2 });
        assert!(
            new.validate_admission(&AdmissionAttributes::create())
                .warned
                .is_empty()
        );
        let verdict = new.validate_admission(&AdmissionAttributes::update(&old));
        // Warn and Audit: a failure warns, it does not deny.
        assert!(verdict.allowed());
        assert_eq!(
            verdict.warned,
            [Refusal {
                message: "gadgets.admission.kubeforge.dev \"g-1\" is forbidden: ValidatingAdmissionPolicy \
                          'gadgets.admission.kubeforge.dev' with binding 'gadgets.admission.kubeforge.dev' \
                          denied request: failed expression: object.spec.size == oldObject.spec.size"
                    .to_owned(),
                reason: "Forbidden",
            }]
        );
        let bad_name = Gadget::new("x", GadgetSpec { size: 1 });
        assert_eq!(
            bad_name
                .validate_admission(&AdmissionAttributes::create())
                .warned
                .len(),
            1
        );
        let delete = AdmissionAttributes::delete();
        assert_eq!(
            old.validate_admission(&delete).unchecked,
            ["'admins' in request.userInfo.groups"]
        );
        let verdict = old.validate_admission(&delete.clone().user("bob", &["devs"]));
        assert!(
            verdict.warned[0].message.ends_with("bob is no admin"),
            "{verdict:?}"
        );
        assert!(
            old.validate_admission(&delete.user("ann", &["admins"]))
                .warned
                .is_empty()
        );
    }
}
