//! CEL expressions written back as source, for error messages (`self.name`, `x + 1`).

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};

use super::types::Ty;

/// The longest rendering before it is cut with `…`.
const MAX_LEN: usize = 60;

/// `e` as source, cut after [`MAX_LEN`] characters.
pub fn show(e: &IdedExpr) -> String {
    let mut s = String::new();
    write(e, &mut s);
    if s.chars().count() > MAX_LEN {
        let cut: String = s.chars().take(MAX_LEN - 1).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// `e` with its type, as messages name an operand: "`self.name` (string)", "1 (int)".
pub fn described(e: &IdedExpr, ty: &Ty) -> String {
    match e.expr {
        Expr::Literal(_) => format!("{} ({ty})", show(e)),
        _ => format!("`{}` ({ty})", show(e)),
    }
}

fn binary(op: &str) -> Option<&'static str> {
    Some(match op {
        "_&&_" => "&&",
        "_||_" => "||",
        "_==_" => "==",
        "_!=_" => "!=",
        "_<_" => "<",
        "_<=_" => "<=",
        "_>_" => ">",
        "_>=_" => ">=",
        "_+_" => "+",
        "_-_" => "-",
        "_*_" => "*",
        "_/_" => "/",
        "_%_" => "%",
        "@in" => "in",
        _ => return None,
    })
}

/// Writes an operand of an operator, in parentheses when it is itself an operation.
fn operand(e: &IdedExpr, out: &mut String) {
    let compound = match &e.expr {
        Expr::Call(c) => binary(&c.func_name).is_some() || c.func_name == "_?_:_",
        _ => false,
    };
    if compound {
        out.push('(');
        write(e, out);
        out.push(')');
    } else {
        write(e, out);
    }
}

fn list(items: &[IdedExpr], out: &mut String) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write(item, out);
    }
}

fn write(e: &IdedExpr, out: &mut String) {
    match &e.expr {
        Expr::Literal(lit) => literal(lit, out),
        Expr::Ident(name) => out.push_str(name),
        Expr::Select(s) => {
            if s.test {
                out.push_str("has(");
            }
            operand(&s.operand, out);
            out.push('.');
            out.push_str(&s.field);
            if s.test {
                out.push(')');
            }
        }
        Expr::Call(c) => call(c, out),
        Expr::List(l) => {
            out.push('[');
            list(&l.elements, out);
            out.push(']');
        }
        Expr::Map(m) => {
            out.push('{');
            for (i, entry) in m.entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    write(&entry.key, out);
                    out.push_str(": ");
                    write(&entry.value, out);
                }
            }
            out.push('}');
        }
        Expr::Struct(s) => {
            out.push_str(&s.type_name);
            out.push_str("{…}");
        }
        Expr::Comprehension(c) => {
            operand(&c.iter_range, out);
            out.push_str(&format!(
                ".{}({}, …)",
                super::check::macro_name(c),
                c.iter_var
            ));
        }
        Expr::Unspecified => out.push('…'),
    }
}

fn literal(lit: &LiteralValue, out: &mut String) {
    match lit {
        LiteralValue::Boolean(b) => out.push_str(&b.inner().to_string()),
        LiteralValue::Int(i) => out.push_str(&i.inner().to_string()),
        LiteralValue::UInt(u) => out.push_str(&format!("{}u", u.inner())),
        LiteralValue::Double(d) => out.push_str(&format!("{:?}", d.inner())),
        LiteralValue::Null => out.push_str("null"),
        LiteralValue::String(s) => {
            out.push('\'');
            out.push_str(&s.inner().replace('\'', "\\'"));
            out.push('\'');
        }
        LiteralValue::Bytes(b) => {
            out.push_str("b'");
            out.push_str(&String::from_utf8_lossy(b.inner()));
            out.push('\'');
        }
    }
}

fn call(c: &CallExpr, out: &mut String) {
    if let (Some(op), [l, r]) = (binary(&c.func_name), c.args.as_slice()) {
        operand(l, out);
        out.push_str(&format!(" {op} "));
        operand(r, out);
        return;
    }
    match (c.func_name.as_str(), c.args.as_slice()) {
        ("!_", [x]) => {
            out.push('!');
            operand(x, out);
        }
        ("-_", [x]) => {
            out.push('-');
            operand(x, out);
        }
        ("_?_:_", [cond, a, b]) => {
            operand(cond, out);
            out.push_str(" ? ");
            operand(a, out);
            out.push_str(" : ");
            operand(b, out);
        }
        ("_[_]" | "_[?_]", [x, i]) => {
            operand(x, out);
            out.push_str(if c.func_name == "_[_]" { "[" } else { "[?" });
            write(i, out);
            out.push(']');
        }
        ("_?._", [x, field]) => {
            operand(x, out);
            out.push_str(".?");
            match &field.expr {
                Expr::Literal(LiteralValue::String(f)) => out.push_str(f.inner()),
                _ => write(field, out),
            }
        }
        (name, args) => {
            if let Some(t) = &c.target {
                operand(t, out);
                out.push('.');
            }
            out.push_str(name);
            out.push('(');
            list(args, out);
            out.push(')');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(source: &str) -> String {
        show(&cel::parser::Parser::new().parse(source).expect("parses"))
    }

    #[test]
    fn show_should_write_expressions_back_as_source() {
        assert_eq!(shown("self.a.b"), "self.a.b");
        assert_eq!(shown("a + b * 2"), "a + (b * 2)");
        assert_eq!(
            shown("!has(self.x) || self.y['k'] == 1u"),
            "!has(self.x) || (self.y['k'] == 1u)"
        );
        assert_eq!(
            shown("self.name.startsWith('a')"),
            "self.name.startsWith('a')"
        );
        assert_eq!(shown("self.items.all(x, x > 0)"), "self.items.all(x, …)");
        assert_eq!(shown("[1, 2.5, null, b'x']"), "[1, 2.5, null, b'x']");
        assert_eq!(shown("c ? {'a': 1} : {}"), "c ? {'a': 1} : {}");
        assert!(shown(&format!("'{}'", "x".repeat(100))).ends_with('…'));
    }
}
