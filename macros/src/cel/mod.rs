//! Compile-time checks of CEL rules (`x-kubernetes-validations`): parsing with the `cel` crate's
//! parser, so a rule with a syntax error is a compile error instead of a CRD the apiserver
//! rejects; type checking against the schema of `self` (`check.rs`, types in `types.rs`); and
//! the apiserver's cost estimate, so a rule it would refuse as too expensive fails at compile
//! time rather than when the CRD is applied.
//!
//! Rules are checked twice: with `self` of unknown type where [`check_untyped`] is called
//! (every rule, in `validate::rules`), and with the type of the struct or field they are on
//! ([`check_struct`], [`check_field`]), which reports only what the first pass did not.

mod admission;
mod check;
#[cfg(test)]
mod check_tests;
mod functions;
mod root;
mod show;
mod types;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use syn::LitStr;

use check::{Env, What};
use types::Ty;

use crate::errors::Errors;
use crate::fields::Field;
use crate::model::{AdmissionRule, Rule, RuleCosts};

/// Parses `source` as a CEL expression; the error names line, column and problem.
pub fn check(source: &str) -> Result<(), String> {
    parse(source).map(|_| ())
}

fn parse(source: &str) -> Result<IdedExpr, String> {
    cel::parser::Parser::new().parse(source).map_err(|errors| {
        errors
            .errors
            .first()
            .map(|e| format!("{}:{}: {}", e.pos.0, e.pos.1, e.msg))
            .unwrap_or_else(|| errors.to_string())
    })
}

/// The fields a rule reads directly from `self` or `oldSelf` (`self.replicas`,
/// `has(self.image)`), unescaped from Kubernetes CEL's `__name__` spelling. `None` if the rule
/// does not parse.
pub fn self_fields(source: &str) -> Option<Vec<String>> {
    let expr = parse(source).ok()?;
    let mut out = Vec::new();
    visit(&expr, &mut out);
    out.sort();
    out.dedup();
    Some(out)
}

fn unescape(name: &str) -> String {
    let escaped = name
        .strip_prefix("__")
        .and_then(|n| n.strip_suffix("__"))
        .filter(|n| !n.contains("__"));
    match escaped {
        Some(keyword) => keyword.to_owned(),
        None => name
            .replace("__underscores__", "__")
            .replace("__dot__", ".")
            .replace("__dash__", "-")
            .replace("__slash__", "/"),
    }
}

fn visit(expr: &IdedExpr, out: &mut Vec<String>) {
    match &expr.expr {
        Expr::Select(select) => {
            if let Expr::Ident(root) = &select.operand.expr
                && (root == "self" || root == "oldSelf")
            {
                out.push(unescape(&select.field));
            }
            visit(&select.operand, out);
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                visit(target, out);
            }
            for arg in &call.args {
                visit(arg, out);
            }
        }
        Expr::Comprehension(c) => {
            for e in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                visit(e, out);
            }
        }
        Expr::List(list) => {
            for e in &list.elements {
                visit(e, out);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                visit_entry(&entry.expr, out);
            }
        }
        Expr::Struct(st) => {
            for entry in &st.entries {
                visit_entry(&entry.expr, out);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn visit_entry(entry: &EntryExpr, out: &mut Vec<String>) {
    match entry {
        EntryExpr::StructField(f) => visit(&f.value, out),
        EntryExpr::MapEntry(m) => {
            visit(&m.key, out);
            visit(&m.value, out);
        }
    }
}

/// The type errors of `source` (a rule or a message expression) in `env`, and a cost above the
/// apiserver's limit; nothing when it does not parse (reported elsewhere).
pub fn diagnose(source: &str, env: &Env, what: What) -> Vec<String> {
    diagnose_with_cost(source, env, what).0
}

/// [`diagnose`] and the estimated cost (`None` when it does not parse).
fn diagnose_with_cost(source: &str, env: &Env, what: What) -> (Vec<String>, Option<u64>) {
    match parse(source) {
        Ok(expr) => {
            let report = check::check(&expr, env, what);
            (report.errors, Some(report.cost))
        }
        Err(_) => (Vec::new(), None),
    }
}

/// The rule and its message expression, each with what it must evaluate to.
fn expressions(rule: &Rule) -> impl Iterator<Item = (&LitStr, What)> {
    std::iter::once((&rule.cel, What::Rule)).chain(
        rule.message_expression
            .iter()
            .map(|m| (m, What::MessageExpression)),
    )
}

fn untyped_env(rule: &Rule) -> Env {
    Env::new(Ty::dynamic(), rule.optional_old_self == Some(true))
}

/// Checks rules whose `self` is not known here (`dyn`): unknown functions and identifiers,
/// and operations that fail whatever `self` is.
pub fn check_untyped(rules: &[Rule], errors: &mut Errors) {
    for rule in rules {
        for (lit, what) in expressions(rule) {
            for message in diagnose(&lit.value(), &untyped_env(rule), what) {
                errors.spanned(lit, message);
            }
        }
    }
}

/// Checks rules with `self` of type `self_ty`, reporting what [`check_untyped`] did not;
/// `strict`: a field read from a known struct must exist (see [`Env::strict_fields`]).
fn check_typed(rules: &[Rule], self_ty: &Ty, strict: bool, errors: &mut Errors) {
    for rule in rules {
        let mut env = Env::new(self_ty.clone(), rule.optional_old_self == Some(true));
        env.strict_fields = strict;
        let mut costs = RuleCosts {
            rule: 0,
            message_expression: None,
        };
        for (lit, what) in expressions(rule) {
            let source = lit.value();
            let untyped = diagnose(&source, &untyped_env(rule), what);
            let (messages, cost) = diagnose_with_cost(&source, &env, what);
            for message in messages {
                if !untyped.contains(&message) {
                    errors.spanned(lit, message);
                }
            }
            match what {
                What::Rule => costs.rule = cost.unwrap_or(0),
                What::MessageExpression => costs.message_expression = cost,
            }
        }
        rule.costs.set(Some(costs));
    }
}

/// Checks the rules of a struct (`self` is the struct with these fields; the kind's rules are on
/// its spec struct).
pub fn check_struct(rules: &[Rule], fields: &[Field], type_name: &syn::Ident, errors: &mut Errors) {
    if rules.is_empty() {
        return;
    }
    check_typed(
        rules,
        &types::of_struct(&type_name.to_string(), fields),
        false,
        errors,
    );
}

/// Checks the `root_rule(..)`s of the kind `kind` (`self` is the whole object: see
/// [`root::self_type`]) whose spec struct `spec` has `fields` and whose status type is `status`:
/// types and cost as for other rules, and every field read from `self`, `self.metadata` and
/// `self.spec` must exist.
pub fn check_root(
    rules: &[Rule],
    kind: &str,
    (spec, fields): (&syn::Ident, &[Field]),
    status: Option<&syn::Type>,
    errors: &mut Errors,
) {
    if rules.is_empty() {
        return;
    }
    let self_ty = root::self_type(
        kind,
        types::of_struct(&spec.to_string(), fields),
        status.map(types::of_type),
    );
    check_typed(rules, &self_ty, true, errors);
}

/// Checks the rules of a field (`self` is the field's value: the list for a list field).
pub fn check_field(field: &Field, errors: &mut Errors) {
    if field.markers.rules.is_empty() {
        return;
    }
    check_typed(&field.markers.rules, &types::of_field(field), false, errors);
}

/// Checks the `admission_rule(..)`s of the kind `kind` whose spec struct has `fields`: every
/// variable and every field read from a known struct must exist (`object.spec.x` against the
/// spec, `object.metadata.x` against `ObjectMeta`, `request.x`), types and cost as for CRD
/// rules. Rules that do not parse are reported elsewhere.
pub fn check_admission(
    rules: &[AdmissionRule],
    kind: &str,
    fields: &[Field],
    spec: &syn::Ident,
    errors: &mut Errors,
) {
    if rules.is_empty() {
        return;
    }
    let spec_ty = types::of_struct(&spec.to_string(), fields);
    let env = Env::with_vars(admission::vars(kind, spec_ty));
    for rule in rules {
        let expressions = std::iter::once((&rule.cel, What::Rule)).chain(
            rule.message_expression
                .iter()
                .map(|m| (m, What::MessageExpression)),
        );
        for (lit, what) in expressions {
            for message in diagnose(&lit.value(), &env, what) {
                errors.spanned(lit, message);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_should_accept_kubernetes_rules() {
        for rule in [
            "self.minReplicas <= self.replicas",
            "self.all(x, x.name != '')",
            "has(self.image) && self.image.startsWith('registry.example.com/')",
            "self.size() <= 3",
            "!has(oldSelf.name) || self.name == oldSelf.name",
            "self.matches('^[a-z]+$')",
            "quantity(self.memory).compareTo(quantity('1Gi')) < 0",
        ] {
            assert_eq!(check(rule), Ok(()), "{rule}");
        }
    }

    #[test]
    fn self_fields_should_list_fields_read_from_self_and_old_self() {
        assert_eq!(
            self_fields(
                "!has(self.minReplicas) || self.minReplicas <= self.replicas && oldSelf.__namespace__ == 'x'"
            ),
            Some(vec![
                "minReplicas".to_owned(),
                "namespace".to_owned(),
                "replicas".to_owned()
            ])
        );
        assert_eq!(
            self_fields("self.items.all(i, i.name != '') && size(self.x__dash__y) > 0"),
            Some(vec!["items".to_owned(), "x-y".to_owned()])
        );
        assert_eq!(self_fields("self > 0"), Some(vec![]));
        assert_eq!(self_fields("self.("), None);
    }

    #[test]
    fn check_should_reject_syntax_errors() {
        assert!(check("self.replicas <=").is_err());
        assert!(check("self.a && (self.b").is_err());
        assert!(check("self..a").is_err());
    }
}
