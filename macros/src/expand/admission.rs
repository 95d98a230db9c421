//! A kind's `admission_rule(..)`s: `impl crd::AdmissionRules` (the rules and the policy's
//! settings, for `crd::admission_policy` and client-side evaluation) and its registration for
//! `crdgen`. Nothing is generated for a kind without admission rules.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Ident, LitStr};

use super::opt_str;
use crate::model::Kind;

/// The impl and the registration; empty without `admission_rule(..)`.
pub fn admission(kind: &Kind, root: &Ident) -> TokenStream {
    if kind.admission_rules.is_empty() {
        return TokenStream::new();
    }
    let krate = &kind.crate_path;
    let private = quote!(#krate::__private);
    let rules = kind.admission_rules.iter().map(|rule| {
        let cel = rule.cel.value();
        let reads = crate::model::reads::reads(&cel).unwrap_or_default();
        let reads_from = |prefix: &str| {
            reads
                .iter()
                .any(|r| r == prefix || r.starts_with(&format!("{prefix}.")))
        };
        // `request` as a whole may hold the user.
        let reads_user = reads_from("request.userInfo") || reads.iter().any(|r| r == "request");
        let reads_namespace = reads_from("namespaceObject");
        let message = opt_str(rule.message.as_ref().map(LitStr::value));
        let message_expression = opt_str(rule.message_expression.as_ref().map(LitStr::value));
        let (reason, operations) = (&rule.reason, &rule.operations);
        quote! {
            #krate::crd::AdmissionRuleInfo {
                cel: #cel,
                message: #message,
                message_expression: #message_expression,
                reason: #reason,
                operations: &[#(#operations),*],
                reads_user: #reads_user,
                reads_namespace: #reads_namespace,
            }
        }
    });
    let policy = &kind.admission_policy;
    let failure_policy = &policy.failure_policy;
    let actions = &policy.validation_actions;
    let selector = opt_str(policy.namespace_selector.as_ref().map(|(_, s)| {
        let labels: serde_json::Map<String, serde_json::Value> = s
            .match_labels
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        let expressions: Vec<serde_json::Value> = s
            .match_expressions
            .iter()
            .map(|(key, operator, values)| {
                let mut e = serde_json::json!({ "key": key, "operator": operator });
                if !values.is_empty() {
                    e["values"] = serde_json::json!(values);
                }
                e
            })
            .collect();
        let mut selector = serde_json::Map::new();
        if !labels.is_empty() {
            selector.insert("matchLabels".to_owned(), labels.into());
        }
        if !expressions.is_empty() {
            selector.insert("matchExpressions".to_owned(), expressions.into());
        }
        serde_json::Value::Object(selector).to_string()
    }));
    quote! {
        #[automatically_derived]
        impl #krate::crd::AdmissionRules for #root {
            const POLICY: #krate::crd::AdmissionPolicyInfo = #krate::crd::AdmissionPolicyInfo {
                rules: &[#(#rules),*],
                failure_policy: #failure_policy,
                validation_actions: &[#(#actions),*],
                namespace_selector: #selector,
            };
        }
        #private::inventory::submit! {
            #krate::crd::PolicyRegistration {
                policy: #krate::crd::admission_policy::<#root>,
            }
        }
    }
}
