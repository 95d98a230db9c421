//! What an `admission_rule(..)` reads: the variables with the fields selected from them, for
//! the defaults of `model.rs` (a rule reading `oldObject` checks updates only) and what the
//! runtime can evaluate client-side (`request.userInfo` needs the user).

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

/// The variables an expression reads, each with the fields selected from it as far as they go
/// (`request.userInfo.username`, `oldObject`); `None` if it does not parse.
pub fn reads(source: &str) -> Option<Vec<String>> {
    let expr = cel::parser::Parser::new().parse(source).ok()?;
    let mut out = Vec::new();
    chains(&expr, &mut out);
    out.retain(|c| {
        let root = c.split('.').next().unwrap_or_default();
        ["object", "oldObject", "request", "namespaceObject"].contains(&root)
    });
    out.sort();
    out.dedup();
    Some(out)
}

/// `a.b.c` for a selection chain rooted at an identifier.
fn chain(expr: &IdedExpr) -> Option<String> {
    match &expr.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(s) if !s.test => Some(format!("{}.{}", chain(&s.operand)?, s.field)),
        _ => None,
    }
}

fn chains(expr: &IdedExpr, out: &mut Vec<String>) {
    if let Some(c) = chain(expr) {
        out.push(c);
        return;
    }
    let mut each = |e: &IdedExpr| chains(e, out);
    match &expr.expr {
        Expr::Select(s) => each(&s.operand),
        Expr::Call(call) => {
            call.target.iter().for_each(|t| each(t));
            call.args.iter().for_each(&mut each);
        }
        Expr::Comprehension(c) => {
            for e in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                each(e);
            }
        }
        Expr::List(list) => list.elements.iter().for_each(&mut each),
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(m) = &entry.expr {
                    each(&m.key);
                    each(&m.value);
                }
            }
        }
        Expr::Struct(st) => {
            for entry in &st.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    each(&f.value);
                }
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

#[cfg(test)]
mod tests {
    use super::reads;

    #[test]
    fn reads_should_list_the_variables_with_their_fields() {
        assert_eq!(
            reads(
                "object.spec.a == oldObject.spec.a && request.userInfo.groups.exists(g, g == 'x') && has(object.metadata.labels)"
            ),
            Some(vec![
                "object.metadata".to_owned(),
                "object.spec.a".to_owned(),
                "oldObject.spec.a".to_owned(),
                "request.userInfo.groups".to_owned(),
            ])
        );
        assert_eq!(
            reads("object.metadata.labels['a'] == request.name"),
            Some(vec![
                "object.metadata.labels".to_owned(),
                "request.name".to_owned(),
            ])
        );
        assert_eq!(reads("object.("), None);
    }
}
