//! Type checking and cost estimation of one parsed CEL expression, against the type of `self`.
//!
//! The checker reports only what the apiserver certainly refuses: an unknown function or
//! identifier, an operator or function applied to a value of the wrong kind (`self.name == 1`,
//! `self.replicas.startsWith('a')`, `size(self.replicas)`), a field read from a scalar or a list,
//! a rule that is not a bool. Whatever involves a value of unknown type (`dyn`: user types,
//! int-or-string, values the macro cannot see) type-checks, and numbers of different kinds may be
//! compared (Kubernetes enables cross-type numeric comparisons).
//!
//! The cost is estimated like cel-go's `checker/cost.go` with the apiserver's estimator
//! (k8s.io/apiserver/pkg/cel/library/cost.go, sizes from the schema as in
//! k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/compilation.go), as a lower bound of
//! the apiserver's estimate: what this macro cannot size counts as 0, so a rule is refused only
//! when the apiserver certainly refuses it.

use std::rc::Rc;

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, SelectExpr,
};

use super::functions::{self, FUNCTIONS, NAMESPACES, TYPE_NAMES, TYPE_ROOTS};
use super::show::{described, show};
use super::types::{Fix, Hint, Kind, Object, Size, Ty};
use super::unescape;

/// The largest estimated cost of one expression (`StaticEstimatedCostLimit`,
/// k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go).
pub const COST_LIMIT: u64 = 10_000_000;
/// cel-go `common/cost.go`: the cost of traversing one character of a string.
const STRING_TRAVERSAL_COST_FACTOR: f64 = 0.1;
/// cel-go `common/cost.go`: the cost of a regex per character of its pattern.
const REGEX_STRING_LENGTH_COST_FACTOR: f64 = 0.25;
/// cel-go `common/cost.go`: creating a list, a map, a message.
const LIST_CREATE_BASE_COST: u64 = 10;
const MAP_CREATE_BASE_COST: u64 = 30;
const STRUCT_CREATE_BASE_COST: u64 = 40;
/// k8s.io/apiserver/pkg/cel/limits.go: the regex size of a named format (`validate`).
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;

/// The variables of an expression, and how strictly fields of known structs are read.
pub struct Env {
    /// `(name, type, path)`: `path` when the value is read from the object (the schema bounds
    /// its size).
    vars: Vec<(String, Ty, bool)>,
    /// Reading a field a closed struct does not have is an error (admission rules; the
    /// fields of `self` in a CRD rule are reported by `validate::rule_fields`).
    pub strict_fields: bool,
}

impl Env {
    /// A CRD rule: `self` of type `self_ty`, `oldSelf` (an optional with `optional_old_self`).
    pub fn new(self_ty: Ty, optional_old_self: bool) -> Self {
        let old_self = if optional_old_self {
            Ty {
                kind: Kind::Optional(Box::new(self_ty.strip())),
                size: Size::default(),
            }
        } else {
            self_ty.clone()
        };
        Env {
            vars: vec![
                ("self".to_owned(), self_ty, true),
                ("oldSelf".to_owned(), old_self, !optional_old_self),
            ],
            strict_fields: false,
        }
    }

    /// An expression with these variables, reading fields strictly.
    pub fn with_vars(vars: Vec<(String, Ty)>) -> Self {
        Env {
            vars: vars.into_iter().map(|(n, t)| (n, t, true)).collect(),
            strict_fields: true,
        }
    }
}

/// What is checked: a rule (a bool) or a message expression (a string).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum What {
    Rule,
    MessageExpression,
}

/// The problems found, in order, and the estimated cost.
pub struct Report {
    pub errors: Vec<String>,
    pub cost: u64,
}

/// Type-checks `expr` and estimates its cost; a cost above [`COST_LIMIT`] is an error.
pub fn check(expr: &IdedExpr, env: &Env, what: What) -> Report {
    let mut checker = Checker {
        what,
        scopes: env
            .vars
            .iter()
            .map(|(name, ty, path)| Var {
                name: name.clone(),
                ty: ty.clone(),
                path: *path,
            })
            .collect(),
        strict_fields: env.strict_fields,
        errors: Vec::new(),
        hints: Vec::new(),
        accumulators: Vec::new(),
        mixed_list: false,
    };
    let out = checker.visit(expr);
    let (expected, name) = match what {
        What::Rule => (Cat::Bool, "bool"),
        What::MessageExpression => (Cat::Str, "string"),
    };
    if let Some(cat) = cat(&out.ty)
        && cat != expected
    {
        let subject = checker.subject();
        checker.error(format!(
            "{subject} evaluates to {}, but it must evaluate to a {name}",
            out.ty
        ));
    }
    if out.cost > COST_LIMIT {
        let mut hints: Vec<Rc<Hint>> = Vec::new();
        for h in &checker.hints {
            if !hints.contains(h) {
                hints.push(h.clone());
            }
        }
        let why = if hints.is_empty() {
            "; simplify it".to_owned()
        } else {
            let what: Vec<&str> = hints.iter().map(|h| h.what.as_str()).collect();
            format!(" ({}); {}", what.join(", "), fixes(&hints))
        };
        let subject = checker.subject();
        checker.error(format!(
            "{subject} is too expensive for the apiserver: estimated cost {} exceeds the limit {COST_LIMIT}{why}",
            out.cost
        ));
    }
    Report {
        errors: checker.errors,
        cost: out.cost,
    }
}

/// The size of `string(<int, double, bool, ...>)`: cel-go knows none and assumes the largest
/// (`math.MaxUint64`), so concatenating it is over any budget.
fn unsized_string() -> Size {
    Size {
        max: Some(u64::MAX),
        hint: Some(Rc::new(Hint {
            what: "the apiserver assumes `string(..)` of a number can be of any length".to_owned(),
            fix: Fix::Newtype("`'%d'.format([x])` instead of `string(x)`".to_owned()),
        })),
    }
}

/// "add `max_items = …` and `items(max_length = …)` to `items`; use a newtype ...".
fn fixes(hints: &[Rc<Hint>]) -> String {
    let mut fields: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut newtypes: Vec<&str> = Vec::new();
    for h in hints {
        match &h.fix {
            Fix::Marker { marker, field } => match fields.iter_mut().find(|(f, _)| f == field) {
                Some((_, markers)) => markers.push(marker),
                None => fields.push((field, vec![marker])),
            },
            Fix::Newtype(text) => newtypes.push(text),
        }
    }
    let mut parts: Vec<String> = fields
        .iter()
        .map(|(field, markers)| format!("add {} to `{field}`", markers.join(" and ")))
        .collect();
    parts.extend(newtypes.iter().map(|n| format!("use {n}")));
    parts.join("; ")
}

struct Var {
    name: String,
    ty: Ty,
    /// The value is read from the object (the schema bounds its size).
    path: bool,
}

struct Checker {
    what: What,
    scopes: Vec<Var>,
    /// See [`Env::strict_fields`].
    strict_fields: bool,
    errors: Vec<String>,
    /// The missing bounds the estimate used.
    hints: Vec<Rc<Hint>>,
    /// The accumulators of the enclosing comprehensions, with their macro's name.
    accumulators: Vec<(String, &'static str)>,
    /// Visiting the arguments of `format`, whose list may mix types.
    mixed_list: bool,
}

/// A checked expression: its type (without sizes unless `path`), the estimated cost of
/// evaluating it and its estimated size.
struct Out {
    ty: Ty,
    cost: u64,
    size: Size,
    path: bool,
}

impl Out {
    /// A value computed by the rule: cel-go sizes a number, bool, timestamp or duration 1.
    fn value(kind: Kind, cost: u64) -> Self {
        let size = if scalar(&kind) {
            Size::exact(1)
        } else {
            Size::default()
        };
        Out {
            ty: Ty::new(kind),
            cost,
            size,
            path: false,
        }
    }

    /// A value derived from another: read from the object when `path` (sizes kept).
    fn derived(ty: Ty, cost: u64, path: bool) -> Self {
        if path {
            Out {
                size: ty.size.clone(),
                ty,
                cost,
                path,
            }
        } else {
            Out {
                ty: ty.strip(),
                cost,
                size: Size::default(),
                path,
            }
        }
    }

    fn sized(mut self, size: Size) -> Self {
        self.size = size;
        self
    }
}

/// The kinds of values operators and functions tell apart (`None`: unknown, or a type the
/// checker does not judge).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cat {
    Num,
    Str,
    Bytes,
    Bool,
    Null,
    Timestamp,
    Duration,
    List,
    Map,
}

fn cat(ty: &Ty) -> Option<Cat> {
    Some(match ty.kind {
        Kind::Int | Kind::Uint | Kind::Double => Cat::Num,
        Kind::String => Cat::Str,
        Kind::Bytes => Cat::Bytes,
        Kind::Bool => Cat::Bool,
        Kind::Null => Cat::Null,
        Kind::Timestamp => Cat::Timestamp,
        Kind::Duration => Cat::Duration,
        Kind::List(_) => Cat::List,
        Kind::Map(..) => Cat::Map,
        _ => return None,
    })
}

/// A type of fixed size (cel-go's `isScalar`).
fn scalar(kind: &Kind) -> bool {
    matches!(
        kind,
        Kind::Int | Kind::Uint | Kind::Double | Kind::Bool | Kind::Timestamp | Kind::Duration
    )
}

fn same_number(a: &Ty, b: &Ty) -> bool {
    matches!(
        (&a.kind, &b.kind),
        (Kind::Int, Kind::Int) | (Kind::Uint, Kind::Uint) | (Kind::Double, Kind::Double)
    )
}

/// `ceil(x * factor)`, as cel-go's `multiplyByCostFactor`.
fn factor(x: u64, factor: f64) -> u64 {
    let product = (x as f64 * factor).ceil();
    if product >= u64::MAX as f64 {
        u64::MAX
    } else {
        product as u64
    }
}

/// The identifiers of a select chain `a.b.c`, root first.
fn qualified_name(expr: &IdedExpr) -> Option<String> {
    match &expr.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(s) if !s.test => Some(format!("{}.{}", qualified_name(&s.operand)?, s.field)),
        _ => None,
    }
}

fn root(qualified: &str) -> &str {
    qualified.split('.').next().unwrap_or(qualified)
}

/// The number of variables an unexpanded macro binds (two-variable comprehensions, `sortBy`,
/// `optMap`, `cel.bind`).
fn binders(name: &str, args: usize) -> usize {
    match name {
        "all" | "exists" | "existsOne" | "exists_one" if args == 3 => 2,
        "all" | "exists" | "existsOne" | "exists_one" if args == 2 => 1,
        "transformList" | "transformMap" | "transformMapEntry" if args >= 3 => 2,
        "sortBy" | "optMap" | "optFlatMap" if args == 2 => 1,
        "cel.bind" if args == 3 => 1,
        _ => 0,
    }
}

/// The macro a comprehension expands, from the shape the parser gives it.
pub(super) fn macro_name(c: &ComprehensionExpr) -> &'static str {
    match &c.accu_init.expr {
        Expr::Literal(LiteralValue::Boolean(b)) if *b.inner() => "all",
        Expr::Literal(LiteralValue::Boolean(_)) => "exists",
        Expr::Literal(LiteralValue::Int(_)) => "exists_one",
        Expr::List(_) => match &c.loop_step.expr {
            Expr::Call(step)
                if step.func_name == "_?_:_"
                    && matches!(&step.args.get(1).map(|a| &a.expr),
                        Some(Expr::Call(add)) if matches!(&add.args.get(1).map(|l| &l.expr),
                            Some(Expr::List(l)) if matches!(l.elements.first().map(|x| &x.expr),
                                Some(Expr::Ident(v)) if *v == c.iter_var))) =>
            {
                "filter"
            }
            _ => "map",
        },
        _ => "a comprehension",
    }
}

/// The receivers or arguments a string function takes.
const STRING: (&[Cat], &str) = (&[Cat::Str], "a string");
/// The receivers or arguments a list function takes.
const LIST: (&[Cat], &str) = (&[Cat::List], "a list");

/// The receiver a method of a library type (quantities, URLs, IPs...) takes: no plain value
/// is one.
fn library(name: &str) -> (&'static [Cat], &'static str) {
    (
        &[],
        match name {
            "isGreaterThan" | "isLessThan" | "compareTo" => "a quantity or a semver",
            "sign" | "asInteger" | "isInteger" | "asApproximateFloat" | "add" | "sub" => {
                "a quantity"
            }
            "major" | "minor" | "patch" => "a semver",
            "family"
            | "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast" => "an IP",
            "containsIP" | "containsCIDR" | "prefixLength" | "masked" | "ip" => "a CIDR",
            "validate" => "a format (`format.dns1123Label()`, `format.named(..)`, ...)",
            "hasValue" | "value" | "orValue" | "or" => "an optional",
            _ => "a URL",
        },
    )
}

/// A function call whose semantics are looked up: the function, its receiver and arguments.
#[derive(Clone, Copy)]
struct Call<'a> {
    name: &'a str,
    t: Option<(&'a IdedExpr, &'a Out)>,
    args: &'a [(&'a IdedExpr, Out)],
}

impl<'a> Call<'a> {
    fn arg(&self, i: usize) -> Option<(&'a IdedExpr, &'a Out)> {
        self.args.get(i).map(|(e, o)| (*e, o))
    }
}

/// The operator a call of `name` applies (`None`: a function).
fn operator(name: &str) -> Option<&'static str> {
    Some(match name {
        "_&&_" => "&&",
        "_||_" => "||",
        "!_" => "!",
        "_?_:_" => "?:",
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
        "-_" => "-x",
        "_[_]" => "[]",
        "@in" => "in",
        "@not_strictly_false" => "@not_strictly_false",
        "_[?_]" | "_?._" => "optional",
        _ => return None,
    })
}

impl Checker {
    fn subject(&self) -> &'static str {
        match self.what {
            What::Rule => "CEL rule",
            What::MessageExpression => "CEL message expression",
        }
    }

    fn error(&mut self, message: String) {
        if !self.errors.contains(&message) {
            self.errors.push(message);
        }
    }

    fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes.iter().rev().find(|v| v.name == name)
    }

    fn declared(&self, name: &str) -> bool {
        self.lookup(name).is_some()
    }

    fn push(&mut self, name: &str, ty: Ty, path: bool) {
        self.scopes.push(Var {
            name: name.to_owned(),
            ty,
            path,
        });
    }

    fn pop(&mut self) {
        self.scopes.pop();
    }

    /// The size bound of `out` (0 when unknown), remembering why it is large.
    fn size(&mut self, out: &Out) -> u64 {
        self.size_of(&out.size)
    }

    fn size_of(&mut self, size: &Size) -> u64 {
        if let Some(h) = &size.hint {
            self.hints.push(h.clone());
        }
        size.max.unwrap_or(0)
    }

    fn visit(&mut self, e: &IdedExpr) -> Out {
        match &e.expr {
            Expr::Literal(lit) => literal(lit),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(s) if s.test => self.presence_test(e, s),
            Expr::Select(s) => {
                if let Some(q) = qualified_name(&s.operand)
                    && !self.declared(root(&q))
                    && TYPE_ROOTS.contains(&root(&q))
                {
                    return Out::value(Kind::Type, 1);
                }
                let op = self.visit(&s.operand);
                let mut cost = op.cost;
                if matches!(op.ty.kind, Kind::Map(..) | Kind::Object(_)) {
                    cost = cost.saturating_add(1);
                }
                match &op.ty.kind {
                    // The estimator has no size for a map's entry read as a field.
                    Kind::Map(_, v) => Out::value(v.strip().kind, cost),
                    Kind::Object(o) => match o.fields.get(&unescape(&s.field)) {
                        Some(t) => Out::derived(t.clone(), cost, op.path),
                        // Unknown fields of `self` are reported with the struct's JSON fields.
                        None => {
                            self.unknown_field(e, o, &s.field);
                            Out::value(Kind::Dyn, cost)
                        }
                    },
                    _ if self.has_fields(&op.ty) => Out::value(Kind::Dyn, cost),
                    _ => {
                        let subject = self.subject();
                        self.error(format!(
                            "{subject} reads `.{}` of {}, which has no fields",
                            s.field,
                            described(&s.operand, &op.ty)
                        ));
                        Out::value(Kind::Dyn, cost)
                    }
                }
            }
            Expr::Call(call) => self.call(call),
            Expr::List(list) => {
                let mixed = std::mem::take(&mut self.mixed_list);
                let elements: Vec<Out> = list.elements.iter().map(|x| self.visit(x)).collect();
                let cost = elements
                    .iter()
                    .fold(LIST_CREATE_BASE_COST, |c, x| c.saturating_add(x.cost));
                let exprs: Vec<&IdedExpr> = list.elements.iter().collect();
                let elem = if mixed {
                    Ty::dynamic()
                } else {
                    self.homogeneous(&exprs, &elements, "list")
                };
                Out::value(Kind::List(Box::new(elem)), cost)
                    .sized(Size::exact(list.elements.len() as u64))
            }
            Expr::Map(map) => {
                let mut cost = MAP_CREATE_BASE_COST;
                let (mut key_exprs, mut keys, mut value_exprs, mut values) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        let k = self.visit(&m.key);
                        let v = self.visit(&m.value);
                        cost = cost.saturating_add(k.cost).saturating_add(v.cost);
                        key_exprs.push(&m.key);
                        keys.push(k);
                        value_exprs.push(&m.value);
                        values.push(v);
                    }
                }
                let key = self.homogeneous(&key_exprs, &keys, "map's keys");
                let value = self.homogeneous(&value_exprs, &values, "map's values");
                Out::value(Kind::Map(Box::new(key), Box::new(value)), cost)
                    .sized(Size::exact(map.entries.len() as u64))
            }
            Expr::Struct(st) => {
                let mut cost = STRUCT_CREATE_BASE_COST;
                for entry in &st.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        cost = cost.saturating_add(self.visit(&f.value).cost);
                    }
                }
                Out::value(Kind::Dyn, cost)
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Unspecified => Out::value(Kind::Dyn, 0),
        }
    }

    /// `has(x.f)`: a bool; `x` must have fields (and, with strict fields, `f`).
    fn presence_test(&mut self, e: &IdedExpr, s: &SelectExpr) -> Out {
        let op = self.visit(&s.operand);
        if let Kind::Object(o) = &op.ty.kind
            && !o.fields.contains_key(&unescape(&s.field))
        {
            self.unknown_field(e, o, &s.field);
        }
        if !self.has_fields(&op.ty) {
            let subject = self.subject();
            self.error(format!(
                "{subject} tests `{}`, but {} has no fields",
                show(e),
                described(&s.operand, &op.ty)
            ));
        }
        // Kubernetes does not charge presence tests (`PresenceTestHasCost(false)`).
        Out::value(Kind::Bool, op.cost)
    }

    /// With [`Env::strict_fields`], reading `field` of the closed struct `o` is an error that
    /// lists its fields (or names the one it misspells).
    fn unknown_field(&mut self, e: &IdedExpr, o: &Object, field: &str) {
        if !self.strict_fields || o.open {
            return;
        }
        let field = unescape(field);
        let names: Vec<&str> = o.fields.keys().map(String::as_str).collect();
        let hint = crate::errors::did_you_mean(&field, &names);
        let why = |name: &str| {
            o.absent
                .iter()
                .find(|(absent, _)| absent == name)
                .map(|(_, why)| why.clone())
        };
        let subject = self.subject();
        let shown = show(e);
        // Why the field is missing, unless it is a near miss of one that is there: said once
        // for `x.f` and `has(x.f)`.
        if let Some(why) = why(&field).or_else(|| why("*").filter(|_| hint.is_empty())) {
            let read = match &e.expr {
                Expr::Select(s) => format!("{}.{}", show(&s.operand), s.field),
                _ => shown,
            };
            self.error(format!("{subject} reads `{read}`, but {why}"));
            return;
        }
        let hint = if hint.is_empty() {
            format!(" (its fields: {})", names.join(", "))
        } else {
            hint
        };
        self.error(format!(
            "{subject} reads `{shown}`, but `{}` has no field `{field}`{hint}",
            o.name
        ));
    }

    /// Whether selecting a field of a value of type `ty` may type-check.
    fn has_fields(&self, ty: &Ty) -> bool {
        matches!(
            ty.kind,
            Kind::Dyn | Kind::Map(..) | Kind::Object(_) | Kind::Opaque(_) | Kind::Optional(_)
        )
    }

    fn ident(&mut self, name: &str) -> Out {
        if let Some(var) = self.lookup(name) {
            let (ty, path) = (var.ty.clone(), var.path);
            return Out::derived(ty, 1, path);
        }
        if TYPE_NAMES.contains(&name) {
            return Out::value(Kind::Type, 1);
        }
        let names: Vec<&str> = self
            .scopes
            .iter()
            .map(|v| v.name.as_str())
            .filter(|n| !n.starts_with('@'))
            .collect();
        let hint = crate::errors::did_you_mean(name, &names);
        let hint = if hint.is_empty() {
            format!(" (the variables are {})", {
                let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                quoted.join(", ")
            })
        } else {
            hint
        };
        let subject = self.subject();
        self.error(format!("{subject} reads undeclared `{name}`{hint}"));
        Out::value(Kind::Dyn, 1)
    }

    /// The element type of a list or map literal; mixing kinds (a string and a number) is an
    /// error (the apiserver requires homogeneous literals).
    fn homogeneous(&mut self, exprs: &[&IdedExpr], outs: &[Out], what: &str) -> Ty {
        let mut first: Option<usize> = None;
        for (i, out) in outs.iter().enumerate() {
            let Some(c) = cat(&out.ty) else { continue };
            match first {
                None => first = Some(i),
                Some(f) if cat(&outs[f].ty) != Some(c) => {
                    let subject = self.subject();
                    self.error(format!(
                        "{subject} mixes {} and {} in a {what} literal: its elements must have one type",
                        described(exprs[f], &outs[f].ty),
                        described(exprs[i], &out.ty)
                    ));
                    return Ty::dynamic();
                }
                Some(_) => {}
            }
        }
        match (outs.first(), outs.iter().all(|o| !o.ty.is_dyn())) {
            (Some(o), true) if outs.iter().all(|x| x.ty.to_string() == o.ty.to_string()) => {
                o.ty.strip()
            }
            _ => Ty::dynamic(),
        }
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Out {
        let name = macro_name(c);
        let range = self.visit(&c.iter_range);
        let (var, var2) = match &range.ty.kind {
            Kind::List(elem) => (
                Out::derived((**elem).clone(), 0, range.path).ty,
                Ty::dynamic(),
            ),
            Kind::Map(k, v) => (
                Out::derived((**k).clone(), 0, range.path).ty,
                Out::derived((**v).clone(), 0, range.path).ty,
            ),
            Kind::Dyn | Kind::Object(_) | Kind::Opaque(_) | Kind::Optional(_) | Kind::Type => {
                (Ty::dynamic(), Ty::dynamic())
            }
            _ => {
                let subject = self.subject();
                self.error(format!(
                    "{subject} applies `{name}` to {}: it iterates a list or a map",
                    described(&c.iter_range, &range.ty)
                ));
                (Ty::dynamic(), Ty::dynamic())
            }
        };
        // The iteration count, first: the bounds it lacks are named first.
        let count = self.size(&range);
        let init = self.visit(&c.accu_init);
        let accu = match name {
            "map" | "filter" => Ty::list(Ty::dynamic()),
            _ => init.ty.clone(),
        };
        self.push(&c.accu_var, accu, false);
        self.accumulators.push((c.accu_var.clone(), name));
        // An iteration variable over a value read from the object has the size of its items.
        self.push(&c.iter_var, var.clone(), range.path);
        if let Some(v2) = &c.iter_var2 {
            self.push(v2, var2, range.path);
        }
        let cond = self.visit(&c.loop_cond);
        let step = self.visit(&c.loop_step);
        if c.iter_var2.is_some() {
            self.pop();
        }
        self.pop();
        let result = self.visit(&c.result);
        self.accumulators.pop();
        self.pop();
        let loop_cost = count.saturating_mul(cond.cost.saturating_add(step.cost));
        let cost = range
            .cost
            .saturating_add(init.cost)
            .saturating_add(result.cost)
            .saturating_add(loop_cost);
        match name {
            "map" => Out::value(Kind::List(Box::new(Ty::dynamic())), cost).sized(range.size),
            "filter" => Out::value(Kind::List(Box::new(var.strip())), cost).sized(range.size),
            "all" | "exists" | "exists_one" => Out::value(Kind::Bool, cost).sized(Size::exact(1)),
            _ => Out::value(Kind::Dyn, cost),
        }
    }

    /// The macro whose accumulator `e` is (`@result`).
    fn accumulator_macro(&self, e: &IdedExpr) -> Option<&'static str> {
        match &e.expr {
            Expr::Ident(name) => self
                .accumulators
                .iter()
                .rev()
                .find(|(a, _)| a == name)
                .map(|(_, m)| *m),
            _ => None,
        }
    }

    /// `e` must be a bool: the operand of `op`, or the condition of a macro.
    fn expect_bool(&mut self, op: &str, e: &IdedExpr, out: &Out, macro_name: Option<&str>) {
        if let Some(c) = cat(&out.ty)
            && c != Cat::Bool
        {
            let subject = self.subject();
            let message = match macro_name {
                Some(m) => format!(
                    "{subject}: the condition of `{m}` is {}, not a bool",
                    described(e, &out.ty)
                ),
                None => format!(
                    "{subject} applies `{op}` to {}: no such overload; `{op}` takes bools",
                    described(e, &out.ty)
                ),
            };
            self.error(message);
        }
    }

    fn call(&mut self, c: &CallExpr) -> Out {
        let Some(op) = operator(c.func_name.as_str()) else {
            return self.function(c);
        };
        let args: Vec<Out> = c.args.iter().map(|a| self.visit(a)).collect();
        let arg_cost = args.iter().fold(0u64, |s, a| s.saturating_add(a.cost));
        if args.is_empty() {
            return Out::value(Kind::Dyn, arg_cost);
        }
        match op {
            "&&" | "||" => {
                let accumulator = c.args.iter().find_map(|a| self.accumulator_macro(a));
                for (a, out) in c.args.iter().zip(&args) {
                    if self.accumulator_macro(a).is_none() {
                        self.expect_bool(op, a, out, accumulator);
                    }
                }
                // cel-go: the operands' costs, nothing for the operator.
                Out::value(Kind::Bool, arg_cost)
            }
            "!" => {
                self.expect_bool(op, &c.args[0], &args[0], None);
                Out::value(Kind::Bool, arg_cost.saturating_add(1))
            }
            "@not_strictly_false" => Out::value(Kind::Bool, arg_cost.saturating_add(1)),
            "?:" if args.len() == 3 => self.conditional(c, &args),
            "==" | "!=" if args.len() == 2 => {
                let (l, r) = (&args[0], &args[1]);
                if let (Some(a), Some(b)) = (cat(&l.ty), cat(&r.ty))
                    && a != b
                    && a != Cat::Null
                    && b != Cat::Null
                {
                    self.mismatch("compares", &c.args[0], &l.ty, &c.args[1], &r.ty, "");
                }
                Out::value(Kind::Bool, self.compare_cost(l, r).saturating_add(arg_cost))
            }
            "<" | "<=" | ">" | ">=" if args.len() == 2 => {
                self.ordering(op, c, &args[0], &args[1], arg_cost)
            }
            "+" | "-" | "*" | "/" | "%" if args.len() == 2 => {
                self.arithmetic(op, c, &args[0], &args[1], arg_cost)
            }
            "-x" => self.negation(c, &args[0], arg_cost),
            "[]" if args.len() == 2 => self.index(c, &args[0], &args[1], arg_cost),
            "in" if args.len() == 2 => self.membership(c, &args[1], arg_cost),
            _ => Out::value(Kind::Dyn, arg_cost.saturating_add(1)),
        }
    }

    /// `cond ? a : b`: the condition is a bool; the type of the branches if they agree.
    fn conditional(&mut self, c: &CallExpr, args: &[Out]) -> Out {
        let accumulator = self.accumulator_macro(&c.args[2]);
        self.expect_bool("?:", &c.args[0], &args[0], accumulator);
        let cost = args[0].cost.saturating_add(args[1].cost.max(args[2].cost));
        let ty = if args[1].ty.to_string() == args[2].ty.to_string() {
            args[1].ty.strip()
        } else {
            Ty::dynamic()
        };
        let size = Size {
            max: match (args[1].size.max, args[2].size.max) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
            hint: args[1].size.hint.clone().or(args[2].size.hint.clone()),
        };
        Out {
            ty,
            cost,
            size,
            path: false,
        }
    }

    /// `<`, `<=`, `>`, `>=`: operands of one ordered kind.
    fn ordering(&mut self, op: &str, c: &CallExpr, l: &Out, r: &Out, arg_cost: u64) -> Out {
        let ordered = |c: Cat| !matches!(c, Cat::List | Cat::Map | Cat::Null);
        match (cat(&l.ty), cat(&r.ty)) {
            (Some(a), Some(b)) if a != b || !ordered(a) => {
                self.mismatch("compares", &c.args[0], &l.ty, &c.args[1], &r.ty, "");
            }
            (Some(a), None) | (None, Some(a)) if !ordered(a) => {
                let (x, t) = if cat(&l.ty).is_some() {
                    (&c.args[0], &l.ty)
                } else {
                    (&c.args[1], &r.ty)
                };
                let subject = self.subject();
                self.error(format!(
                    "{subject} orders {} with `{op}`: no such overload",
                    described(x, t)
                ));
            }
            _ => {}
        }
        let strings = [l, r]
            .iter()
            .any(|o| matches!(o.ty.kind, Kind::String | Kind::Bytes));
        let cost = if strings { self.compare_cost(l, r) } else { 1 };
        Out::value(Kind::Bool, cost.saturating_add(arg_cost))
    }

    /// `-x`: a number or a duration.
    fn negation(&mut self, c: &CallExpr, x: &Out, arg_cost: u64) -> Out {
        if let Some(k) = cat(&x.ty)
            && k != Cat::Num
            && k != Cat::Duration
        {
            let subject = self.subject();
            self.error(format!(
                "{subject} negates {}: no such overload",
                described(&c.args[0], &x.ty)
            ));
        }
        Out::value(x.ty.strip().kind, arg_cost.saturating_add(1))
    }

    /// `x in container`: a list or a map.
    fn membership(&mut self, c: &CallExpr, container: &Out, arg_cost: u64) -> Out {
        let cost = match (&container.ty.kind, cat(&container.ty)) {
            (Kind::List(_), _) => self.size(container),
            (_, Some(Cat::Map)) | (Kind::Dyn | Kind::Object(_), _) => 1,
            (_, Some(_)) => {
                let hint = if matches!(container.ty.kind, Kind::String) {
                    "; for a substring use `.contains(..)`"
                } else {
                    ""
                };
                let subject = self.subject();
                self.error(format!(
                    "{subject} tests `{} in {}`, but {} is neither a list nor a map{hint}",
                    show(&c.args[0]),
                    show(&c.args[1]),
                    described(&c.args[1], &container.ty)
                ));
                1
            }
            _ => 1,
        };
        Out::value(Kind::Bool, cost.saturating_add(arg_cost))
    }

    /// The cost of `==`, `!=` and of ordering strings or bytes: a traversal of the shorter.
    fn compare_cost(&mut self, l: &Out, r: &Out) -> u64 {
        let (lm, rm) = (l.size.max.unwrap_or(0), r.size.max.unwrap_or(0));
        let smaller = if lm <= rm { l } else { r };
        let n = self.size(smaller);
        factor(n, STRING_TRAVERSAL_COST_FACTOR)
    }

    fn mismatch(&mut self, verb: &str, a: &IdedExpr, at: &Ty, b: &IdedExpr, bt: &Ty, hint: &str) {
        let subject = self.subject();
        let with = if verb == "compares" { "with" } else { "and" };
        self.error(format!(
            "{subject} {verb} {} {with} {}: no such overload{hint}",
            described(a, at),
            described(b, bt)
        ));
    }

    fn arithmetic(&mut self, op: &str, c: &CallExpr, l: &Out, r: &Out, arg_cost: u64) -> Out {
        use Cat::{Bytes, Duration, List, Num, Str, Timestamp};
        let domain: &[Cat] = match op {
            "+" => &[Num, Str, Bytes, List, Timestamp, Duration],
            "-" => &[Num, Timestamp, Duration],
            _ => &[Num],
        };
        let subject = self.subject();
        for (e, out) in c.args.iter().zip([l, r]) {
            if let Some(k) = cat(&out.ty)
                && (!domain.contains(&k) || (op == "%" && matches!(out.ty.kind, Kind::Double)))
            {
                self.error(format!(
                    "{subject} applies `{op}` to {}: no such overload",
                    described(e, &out.ty)
                ));
                return Out::value(Kind::Dyn, arg_cost.saturating_add(1));
            }
        }
        let result = match (cat(&l.ty), cat(&r.ty)) {
            (Some(Num), Some(Num)) if !same_number(&l.ty, &r.ty) => {
                self.mismatch(
                    &format!("applies `{op}` to"),
                    &c.args[0],
                    &l.ty,
                    &c.args[1],
                    &r.ty,
                    " (CEL does not convert numbers: use `int(..)`, `uint(..)` or `double(..)`)",
                );
                Kind::Dyn
            }
            (Some(Num), Some(Num)) => l.ty.kind.clone(),
            (Some(Str), Some(Str)) if op == "+" => Kind::String,
            (Some(Bytes), Some(Bytes)) if op == "+" => Kind::Bytes,
            (Some(List), Some(List)) if op == "+" => match &l.ty.kind {
                Kind::List(e) if e.is_dyn() => r.ty.strip().kind,
                _ => l.ty.strip().kind,
            },
            (Some(Timestamp), Some(Duration)) if op == "+" || op == "-" => Kind::Timestamp,
            (Some(Duration), Some(Timestamp)) if op == "+" => Kind::Timestamp,
            (Some(Duration), Some(Duration)) => Kind::Duration,
            (Some(Timestamp), Some(Timestamp)) if op == "-" => Kind::Duration,
            (Some(_), Some(_)) => {
                self.mismatch(
                    &format!("applies `{op}` to"),
                    &c.args[0],
                    &l.ty,
                    &c.args[1],
                    &r.ty,
                    "",
                );
                Kind::Dyn
            }
            _ => Kind::Dyn,
        };
        let (lk, rk) = (cat(&l.ty), cat(&r.ty));
        let is = |k: Cat| lk == Some(k) || rk == Some(k);
        if op == "+" && (is(Str) || is(Bytes) || is(List)) {
            // Concatenation: the result is as long as both.
            let size = Size {
                max: Some(self.size(l).saturating_add(self.size(r))),
                hint: l.size.hint.clone().or(r.size.hint.clone()),
            };
            let cost = if is(List) {
                1
            } else {
                factor(size.max.unwrap_or(0), STRING_TRAVERSAL_COST_FACTOR)
            };
            return Out::value(result, cost.saturating_add(arg_cost)).sized(size);
        }
        Out::value(result, arg_cost.saturating_add(1))
    }

    fn index(&mut self, c: &CallExpr, operand: &Out, key: &Out, arg_cost: u64) -> Out {
        let cost = arg_cost.saturating_add(1);
        match &operand.ty.kind {
            Kind::List(elem) => {
                if let Some(k) = cat(&key.ty)
                    && k != Cat::Num
                {
                    let subject = self.subject();
                    self.error(format!(
                        "{subject} indexes {} with {}: a list takes an int index",
                        described(&c.args[0], &operand.ty),
                        described(&c.args[1], &key.ty)
                    ));
                }
                Out::derived((**elem).clone(), cost, operand.path)
            }
            Kind::Map(_, value) => Out::derived((**value).clone(), cost, operand.path),
            _ if cat(&operand.ty).is_some() => {
                let subject = self.subject();
                self.error(format!(
                    "{subject} indexes {}: only lists and maps can be indexed",
                    described(&c.args[0], &operand.ty)
                ));
                Out::value(Kind::Dyn, cost)
            }
            _ => Out::value(Kind::Dyn, cost),
        }
    }

    /// A call of a named function (`f(..)`, `x.f(..)`, `ns.f(..)`).
    fn function(&mut self, c: &CallExpr) -> Out {
        // `sets.contains(a, b)` parses as `contains` called on an identifier `sets`.
        let qualified = c
            .target
            .as_deref()
            .and_then(qualified_name)
            .filter(|q| !self.declared(root(q)) && NAMESPACES.contains(&root(q)));
        let (name, target) = match qualified {
            Some(q) => (format!("{q}.{}", c.func_name), None),
            None => (c.func_name.clone(), c.target.as_deref()),
        };
        if !functions::exists(&name) {
            let mut cost = 0u64;
            if let Some(t) = target {
                cost = cost.saturating_add(self.visit(t).cost);
            }
            for a in &c.args {
                cost = cost.saturating_add(self.visit(a).cost);
            }
            let hint = crate::errors::did_you_mean(&name, FUNCTIONS);
            let subject = self.subject();
            self.error(format!("{subject} calls unknown function `{name}`{hint}"));
            return Out::value(Kind::Dyn, cost);
        }
        let bound = binders(&name, c.args.len());
        if bound > 0
            && c.args[..bound]
                .iter()
                .all(|a| matches!(a.expr, Expr::Ident(_)))
        {
            return self.binding_macro(&name, target, c, bound);
        }
        if name == "dyn" && target.is_none() && c.args.len() == 1 {
            let arg = self.visit(&c.args[0]);
            return Out::value(Kind::Dyn, arg.cost.saturating_add(1)).sized(arg.size);
        }
        let target = target.map(|t| (t, self.visit(t)));
        let args: Vec<(&IdedExpr, Out)> = c
            .args
            .iter()
            .map(|a| {
                // `'%s: %d'.format([name, count])`: cel-go exempts its list from homogeneity.
                self.mixed_list = name == "format" && matches!(a.expr, Expr::List(_));
                (a, self.visit(a))
            })
            .collect();
        let mut cost = target.as_ref().map_or(0, |(_, t)| t.cost);
        for (_, a) in &args {
            cost = cost.saturating_add(a.cost);
        }
        let (kind, fn_cost, size) = self.semantics(&name, target.as_ref(), &args);
        let out = Out::value(kind, cost.saturating_add(fn_cost));
        if size.max.is_some() {
            out.sized(size)
        } else {
            out
        }
    }

    /// A macro the parser leaves as a call: `x.all(k, v, p)`, `transformList`, `sortBy`,
    /// `optMap`, `cel.bind(v, init, e)`. Its variables are bound (as `dyn` where unknown); its
    /// loop is not estimated.
    fn binding_macro(
        &mut self,
        name: &str,
        target: Option<&IdedExpr>,
        c: &CallExpr,
        bound: usize,
    ) -> Out {
        let names: Vec<&str> = c.args[..bound]
            .iter()
            .filter_map(|a| match &a.expr {
                Expr::Ident(n) => Some(n.as_str()),
                _ => None,
            })
            .collect();
        let mut cost = 0u64;
        let mut types = vec![Ty::dynamic(); bound];
        if let Some(t) = target {
            let range = self.visit(t);
            cost = cost.saturating_add(range.cost);
            let iterates = matches!(
                name,
                "all"
                    | "exists"
                    | "existsOne"
                    | "exists_one"
                    | "transformList"
                    | "transformMap"
                    | "transformMapEntry"
                    | "sortBy"
            );
            match (&range.ty.kind, bound) {
                (Kind::List(e), 1) if iterates => types[0] = e.strip(),
                (Kind::List(e), 2) => {
                    types[0] = Ty::new(Kind::Int);
                    types[1] = e.strip();
                }
                (Kind::Map(k, _), 1) if iterates => types[0] = k.strip(),
                (Kind::Map(k, v), 2) => {
                    types[0] = k.strip();
                    types[1] = v.strip();
                }
                (Kind::Optional(t), 1) if !iterates => types[0] = t.strip(),
                _ if iterates && cat(&range.ty).is_some() => {
                    let subject = self.subject();
                    self.error(format!(
                        "{subject} applies `{name}` to {}: it iterates a list or a map",
                        described(t, &range.ty)
                    ));
                }
                _ => {}
            }
        }
        let mut rest = &c.args[bound..];
        if name == "cel.bind"
            && let Some((init, body)) = rest.split_first()
        {
            let init = self.visit(init);
            cost = cost.saturating_add(init.cost);
            types[0] = init.ty.strip();
            rest = body;
        }
        for (n, t) in names.iter().zip(types) {
            self.push(n, t, false);
        }
        let mut last = Out::value(Kind::Dyn, 0);
        for a in rest {
            last = self.visit(a);
            if name == "cel.bind" {
                cost = cost.saturating_add(last.cost);
            }
        }
        for _ in &names {
            self.pop();
        }
        let kind = match name {
            "all" | "exists" | "existsOne" | "exists_one" => Kind::Bool,
            "cel.bind" => last.ty.strip().kind,
            _ => Kind::Dyn,
        };
        Out::value(kind, cost)
    }

    /// Checks a receiver or argument of `func` against the kinds it `accepts` (`takes` says them
    /// in words). Values of unknown or library types pass.
    fn expect(
        &mut self,
        func: &str,
        receiver: bool,
        (e, out): (&IdedExpr, &Out),
        accepts: &[Cat],
        takes: &str,
    ) {
        let Some(k) = cat(&out.ty) else { return };
        if accepts.contains(&k) {
            return;
        }
        let subject = self.subject();
        let message = if receiver {
            format!(
                "{subject} calls `{func}` on {}: no such overload; `{func}` applies to {takes}",
                described(e, &out.ty)
            )
        } else {
            format!(
                "{subject} passes {} to `{func}`: no such overload; it takes {takes}",
                described(e, &out.ty)
            )
        };
        self.error(message);
    }

    /// A string literal that must be a regular expression (RE2).
    fn regex(&mut self, func: &str, e: &IdedExpr) {
        let Expr::Literal(LiteralValue::String(s)) = &e.expr else {
            return;
        };
        let pattern = s.inner();
        // RE2 syntax that `regex-syntax` does not read.
        if pattern.contains("\\Q") || pattern.contains("\\C") {
            return;
        }
        if let Err(err) = regex_syntax::Parser::new().parse(pattern) {
            let detail = err.to_string();
            let last = detail.lines().last().unwrap_or_default().trim();
            let last = last.trim_start_matches("error: ").to_owned();
            let subject = self.subject();
            self.error(format!(
                "{subject} passes an invalid regular expression to `{func}`: {last}"
            ));
        }
    }

    /// The result type, the cost of the call itself (cel-go's and the Kubernetes estimator's
    /// per overload) and the size of the result, after checking the receiver and arguments.
    fn semantics(
        &mut self,
        name: &str,
        target: Option<&(&IdedExpr, Out)>,
        args: &[(&IdedExpr, Out)],
    ) -> (Kind, u64, Size) {
        let c = Call {
            name,
            t: target.map(|(e, o)| (*e, o)),
            args,
        };
        let (kind, (cost, size)) = self
            .basic_semantics(c)
            .or_else(|| self.string_semantics(c))
            .or_else(|| self.list_semantics(c))
            .or_else(|| self.parser_semantics(c))
            .or_else(|| self.library_semantics(c))
            // Known, not modelled: unknown result, no cost of its own (a lower bound).
            .unwrap_or((Kind::Dyn, (0, Size::default())));
        (kind, cost, size)
    }

    /// `size`, `contains`/`startsWith`/`endsWith`, `matches`, the conversions and `type`.
    fn basic_semantics(&mut self, c: Call) -> Option<(Kind, (u64, Size))> {
        use Cat::{Bytes, Duration, List, Map, Num, Str, Timestamp};
        let Call { name, t, args } = c;
        let one = (1u64, Size::default());
        Some(match name {
            "size" => {
                let x = t.or(c.arg(0));
                if let Some(x) = x {
                    self.expect(
                        name,
                        t.is_some(),
                        x,
                        &[Str, Bytes, List, Map],
                        "a string, bytes, a list or a map",
                    );
                }
                (Kind::Int, one)
            }
            "contains" | "startsWith" | "endsWith" => {
                self.recv(c, STRING);
                self.argument(c, 0, STRING);
                let cost = match (t, name) {
                    (Some(_), "contains") => {
                        let (ts, a) = (self.target_size(c), self.arg_size(c, 0));
                        factor(ts, STRING_TRAVERSAL_COST_FACTOR)
                            .saturating_mul(factor(a, STRING_TRAVERSAL_COST_FACTOR))
                    }
                    (Some(_), _) => factor(self.arg_size(c, 0), STRING_TRAVERSAL_COST_FACTOR),
                    _ => 1,
                };
                (Kind::Bool, (cost, Size::default()))
            }
            "matches" => {
                self.recv(c, STRING);
                self.argument(c, 0, STRING);
                self.argument(c, 1, STRING);
                if let Some((re, _)) = args.last() {
                    self.regex(name, re);
                }
                let cost = if t.is_some() && args.len() == 1 {
                    let s = factor(
                        self.target_size(c).saturating_add(1),
                        STRING_TRAVERSAL_COST_FACTOR,
                    );
                    s.saturating_mul(factor(self.arg_size(c, 0), REGEX_STRING_LENGTH_COST_FACTOR))
                } else {
                    1
                };
                (Kind::Bool, (cost, Size::default()))
            }
            "int" | "uint" | "double" | "string" | "bytes" | "bool" | "duration" | "timestamp" => {
                let x = c.arg(0).or(t);
                if let Some(x) = x
                    && t.is_none()
                {
                    self.expect(
                        name,
                        false,
                        x,
                        &[Num, Str, Bytes, Cat::Bool, Timestamp, Duration],
                        "a scalar",
                    );
                }
                let kind = match name {
                    "int" => Kind::Int,
                    "uint" => Kind::Uint,
                    "double" => Kind::Double,
                    "string" => Kind::String,
                    "bytes" => Kind::Bytes,
                    "bool" => Kind::Bool,
                    "duration" => Kind::Duration,
                    _ => Kind::Timestamp,
                };
                let from = x.map(|(_, o)| o.ty.kind.clone());
                let cost = match (name, from) {
                    ("string", Some(Kind::Bytes)) | ("bytes", Some(Kind::String)) => {
                        let n = x.map_or(0, |(_, o)| self.size(o));
                        let size = if name == "bytes" {
                            n.saturating_mul(4)
                        } else {
                            n
                        };
                        (factor(n, STRING_TRAVERSAL_COST_FACTOR), Size::exact(size))
                    }
                    ("string", Some(k)) if !matches!(k, Kind::String | Kind::Dyn) => {
                        (1, unsized_string())
                    }
                    _ => one,
                };
                (kind, cost)
            }
            "type" => (Kind::Type, one),
            _ => return None,
        })
    }

    /// The getters of timestamps and durations and the string functions (`charAt` to `strings.quote`).
    fn string_semantics(&mut self, c: Call) -> Option<(Kind, (u64, Size))> {
        use Cat::{Duration, List, Str, Timestamp};
        let Call { name, t, args } = c;
        let one = (1u64, Size::default());
        Some(match name {
            n if n.starts_with("get")
                && !matches!(
                    n,
                    "getScheme"
                        | "getHost"
                        | "getHostname"
                        | "getPort"
                        | "getEscapedPath"
                        | "getQuery"
                ) =>
            {
                self.recv(c, (&[Timestamp, Duration], "a timestamp or a duration"));
                (Kind::Int, one)
            }
            "charAt" => {
                self.recv(c, STRING);
                (Kind::String, one)
            }
            "indexOf" | "lastIndexOf" => {
                self.recv(c, (&[Str, List], "a string or a list"));
                let cost = self.list_traversal(t, STRING_TRAVERSAL_COST_FACTOR);
                (Kind::Int, (cost, Size::default()))
            }
            "lowerAscii" | "upperAscii" | "trim" | "substring" => {
                self.recv(c, STRING);
                let size = t.map(|(_, o)| o.size.clone()).unwrap_or_default();
                let cost = factor(self.target_size(c), STRING_TRAVERSAL_COST_FACTOR);
                (Kind::String, (cost, size))
            }
            "replace" => {
                self.recv(c, STRING);
                let n = self.target_size(c);
                let size = self.replaced_size(t, args);
                (
                    Kind::String,
                    (factor(n, 2.0 * STRING_TRAVERSAL_COST_FACTOR), size),
                )
            }
            "split" => {
                self.recv(c, STRING);
                let n = self.target_size(c);
                let limit = match c.arg(1).map(|(e, _)| &e.expr) {
                    Some(Expr::Literal(LiteralValue::Int(i))) => u64::try_from(*i.inner()).ok(),
                    _ => None,
                };
                let size = Size {
                    max: Some(limit.unwrap_or(n)),
                    hint: t.and_then(|(_, o)| o.size.hint.clone()),
                };
                (
                    Kind::List(Box::new(Ty::new(Kind::String))),
                    (factor(n, 2.0 * STRING_TRAVERSAL_COST_FACTOR), size),
                )
            }
            "join" => {
                self.recv(c, LIST);
                let mut n = 0u64;
                if let Some((_, list)) = t
                    && let Kind::List(elem) = &list.ty.kind
                    && list.path
                {
                    let items = self.size(list);
                    let each = self.size_of(&elem.size);
                    n = items.saturating_mul(each);
                    if let Some((_, sep)) = c.arg(0) {
                        let sep = self.size(sep);
                        n = n.saturating_add(sep.saturating_mul(items.saturating_sub(1)));
                    }
                }
                (
                    Kind::String,
                    (factor(n, STRING_TRAVERSAL_COST_FACTOR), Size::exact(n)),
                )
            }
            "format" => {
                self.recv(c, STRING);
                self.argument(c, 0, LIST);
                let cost = factor(self.target_size(c), STRING_TRAVERSAL_COST_FACTOR);
                (Kind::String, (cost, Size::default()))
            }
            "strings.quote" => {
                self.argument(c, 0, STRING);
                let n = self.arg_size(c, 0);
                (
                    Kind::String,
                    (
                        factor(n, STRING_TRAVERSAL_COST_FACTOR),
                        Size::exact(n.saturating_mul(2).saturating_add(2)),
                    ),
                )
            }
            _ => return None,
        })
    }

    /// The list and set functions (`reverse` to `sets.intersects`).
    fn list_semantics(&mut self, c: Call) -> Option<(Kind, (u64, Size))> {
        use Cat::{List, Str};
        let Call { name, t, args } = c;
        Some(match name {
            "reverse" => {
                self.recv(c, (&[Str, List], "a string or a list"));
                (
                    t.map_or(Kind::Dyn, |(_, o)| o.ty.strip().kind),
                    (0, Size::default()),
                )
            }
            "isSorted" | "sum" | "min" | "max" | "includes" if t.is_some() => {
                // `includes` is declared on `dyn`.
                if name != "includes" {
                    self.recv(c, LIST);
                }
                let cost = self.list_traversal(t, STRING_TRAVERSAL_COST_FACTOR);
                let kind = match (name, t.map(|(_, o)| &o.ty.kind)) {
                    ("isSorted" | "includes", _) => Kind::Bool,
                    (_, Some(Kind::List(e))) => e.strip().kind,
                    _ => Kind::Dyn,
                };
                (kind, (cost, Size::default()))
            }
            "slice" | "distinct" | "sort" => {
                self.recv(c, LIST);
                (
                    t.map_or(Kind::Dyn, |(_, o)| o.ty.strip().kind),
                    (0, Size::default()),
                )
            }
            "flatten" => {
                self.recv(c, LIST);
                (Kind::List(Box::new(Ty::dynamic())), (0, Size::default()))
            }
            "first" | "last" => {
                self.recv(c, LIST);
                let elem = match t.map(|(_, o)| &o.ty.kind) {
                    Some(Kind::List(e)) => e.strip(),
                    _ => Ty::dynamic(),
                };
                (Kind::Optional(Box::new(elem)), (0, Size::default()))
            }
            "lists.range" => (
                Kind::List(Box::new(Ty::new(Kind::Int))),
                (0, Size::default()),
            ),
            "sets.contains" | "sets.equivalent" | "sets.intersects" => {
                self.argument(c, 0, LIST);
                self.argument(c, 1, LIST);
                let cost = if args.len() == 2 {
                    let product = self.arg_size(c, 0).saturating_mul(self.arg_size(c, 1));
                    let f = if name == "sets.equivalent" { 2.0 } else { 1.0 };
                    factor(product, f).saturating_add(1)
                } else {
                    1
                };
                (Kind::Bool, (cost, Size::default()))
            }
            _ => return None,
        })
    }

    /// `find`/`findAll`, the parsers and tests of the Kubernetes libraries (`url`, `quantity`, `ip`, ...) and `containsIP`/`containsCIDR`.
    fn parser_semantics(&mut self, c: Call) -> Option<(Kind, (u64, Size))> {
        let Call { name, t, args } = c;
        let one = (1u64, Size::default());
        Some(match name {
            "find" | "findAll" => {
                self.recv(c, STRING);
                self.argument(c, 0, STRING);
                if let Some((re, _)) = args.first() {
                    self.regex(name, re);
                }
                let n = self.target_size(c);
                let cost = factor(n.saturating_add(1), STRING_TRAVERSAL_COST_FACTOR)
                    .saturating_mul(factor(self.arg_size(c, 0), REGEX_STRING_LENGTH_COST_FACTOR));
                let kind = if name == "find" {
                    Kind::String
                } else {
                    Kind::List(Box::new(Ty::new(Kind::String)))
                };
                (kind, (cost, Size::exact(n)))
            }
            "url" | "quantity" | "semver" | "cidr" | "isQuantity" | "isSemver" | "isIP"
            | "isCIDR" | "isURL" | "ip.isCanonical" | "format.named" => {
                self.argument(c, 0, STRING);
                let n = self.arg_size(c, 0);
                let traversal = factor(n, STRING_TRAVERSAL_COST_FACTOR);
                match name {
                    "url" => (Kind::Opaque("URL"), (traversal, Size::exact(n))),
                    "quantity" => (Kind::Opaque("Quantity"), (traversal, Size::default())),
                    "semver" => (Kind::Opaque("Semver"), (traversal, Size::default())),
                    "cidr" => (Kind::Opaque("CIDR"), (traversal, Size::default())),
                    "isURL" => (Kind::Bool, one),
                    "ip.isCanonical" => (
                        Kind::Bool,
                        (
                            factor(n, 2.0 * STRING_TRAVERSAL_COST_FACTOR),
                            Size::default(),
                        ),
                    ),
                    "format.named" => (
                        Kind::Optional(Box::new(Ty::new(Kind::Opaque("Format")))),
                        one,
                    ),
                    _ => (Kind::Bool, (traversal, Size::default())),
                }
            }
            "ip" => {
                if t.is_some() {
                    // The IP of a CIDR: a field access.
                    self.recv(c, library(name));
                    (Kind::Opaque("IP"), one)
                } else {
                    self.argument(c, 0, STRING);
                    let cost = factor(self.arg_size(c, 0), STRING_TRAVERSAL_COST_FACTOR);
                    (Kind::Opaque("IP"), (cost, Size::default()))
                }
            }
            "isIPv4" | "isIPv6" | "isCIDRv4" | "isCIDRv6" => {
                self.argument(c, 0, STRING);
                (Kind::Bool, (0, Size::default()))
            }
            "containsIP" | "containsCIDR" => {
                self.recv(c, library(name));
                // Two IPs of 4 to 16 bytes compared; a string argument is parsed first.
                let mut cost = factor(32, STRING_TRAVERSAL_COST_FACTOR);
                if name == "containsCIDR" {
                    cost += factor(16, STRING_TRAVERSAL_COST_FACTOR) + 1;
                }
                if let Some((_, a)) = c.arg(0)
                    && matches!(a.ty.kind, Kind::String)
                {
                    let n = self.size(a);
                    cost = cost.saturating_add(factor(n, STRING_TRAVERSAL_COST_FACTOR));
                }
                (Kind::Bool, (cost, Size::default()))
            }
            _ => return None,
        })
    }

    /// The methods of the library types (quantities, semvers, IPs, CIDRs, URLs, formats, optionals) and the remaining namespaced functions.
    fn library_semantics(&mut self, c: Call) -> Option<(Kind, (u64, Size))> {
        let Call { name, t, .. } = c;
        let one = (1u64, Size::default());
        Some(match name {
            "family" | "prefixLength" | "sign" | "asInteger" | "compareTo" | "major" | "minor"
            | "patch" => {
                self.recv(c, library(name));
                (Kind::Int, one)
            }
            "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast"
            | "isInteger"
            | "isGreaterThan"
            | "isLessThan" => {
                self.recv(c, library(name));
                (Kind::Bool, one)
            }
            "masked" => {
                self.recv(c, library(name));
                (Kind::Opaque("CIDR"), one)
            }
            "asApproximateFloat" => {
                self.recv(c, library(name));
                (Kind::Double, one)
            }
            "add" | "sub" => {
                self.recv(c, library(name));
                (t.map_or(Kind::Dyn, |(_, o)| o.ty.strip().kind), one)
            }
            "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" => {
                self.recv(c, library(name));
                (Kind::String, one)
            }
            "getQuery" => {
                self.recv(c, library(name));
                let values = Ty::list(Ty::new(Kind::String));
                (
                    Kind::Map(Box::new(Ty::new(Kind::String)), Box::new(values)),
                    one,
                )
            }
            n if n.starts_with("format.") => (Kind::Opaque("Format"), one),
            "validate" => {
                self.recv(c, library(name));
                self.argument(c, 0, STRING);
                let parse = factor(self.arg_size(c, 0), STRING_TRAVERSAL_COST_FACTOR);
                let cost = factor(
                    parse,
                    MAX_NAME_FORMAT_REGEX_SIZE * REGEX_STRING_LENGTH_COST_FACTOR,
                );
                let errors = Ty::list(Ty::new(Kind::String));
                (Kind::Optional(Box::new(errors)), (cost, Size::default()))
            }
            "optional.of" | "optional.ofNonZeroValue" => {
                let inner = c.arg(0).map_or_else(Ty::dynamic, |(_, o)| o.ty.strip());
                (Kind::Optional(Box::new(inner)), one)
            }
            "optional.none" => (Kind::Optional(Box::new(Ty::dynamic())), one),
            "hasValue" => {
                self.recv(c, library(name));
                (Kind::Bool, one)
            }
            "value" | "orValue" => {
                self.recv(c, library(name));
                let kind = match t.map(|(_, o)| &o.ty.kind) {
                    Some(Kind::Optional(inner)) => inner.strip().kind,
                    _ => Kind::Dyn,
                };
                (kind, one)
            }
            "or" => {
                self.recv(c, library(name));
                (t.map_or(Kind::Dyn, |(_, o)| o.ty.strip().kind), one)
            }
            "base64.encode" => (Kind::String, (0, Size::default())),
            "base64.decode" => (Kind::Bytes, (0, Size::default())),
            "jsonpatch.escapeKey" => {
                self.argument(c, 0, STRING);
                let n = self.arg_size(c, 0);
                (
                    Kind::String,
                    (factor(n, STRING_TRAVERSAL_COST_FACTOR), Size::default()),
                )
            }
            _ => return None,
        })
    }

    /// Checks the receiver of the call, if any, against what the function accepts.
    fn recv(&mut self, c: Call, (accepts, takes): (&[Cat], &str)) {
        if let Some(t) = c.t {
            self.expect(c.name, true, t, accepts, takes);
        }
    }

    /// Checks the argument `i` of the call, if any, against what the function accepts.
    fn argument(&mut self, c: Call, i: usize, (accepts, takes): (&[Cat], &str)) {
        if let Some(a) = c.arg(i) {
            self.expect(c.name, false, a, accepts, takes);
        }
    }

    /// The size of the receiver (0 without one).
    fn target_size(&mut self, c: Call) -> u64 {
        c.t.map_or(0, |(_, o)| self.size(o))
    }

    /// The size of the argument `i` (0 without one).
    fn arg_size(&mut self, c: Call, i: usize) -> u64 {
        c.arg(i).map_or(0, |(_, o)| self.size(o))
    }

    /// The cost of the Kubernetes list functions (`isSorted`, `sum`, `min`, `max`, `indexOf`,
    /// `lastIndexOf`, `includes`): one comparison per item, plus a traversal of each string
    /// item; on a string (`indexOf`), a traversal.
    fn list_traversal(&mut self, target: Option<(&IdedExpr, &Out)>, per_char: f64) -> u64 {
        let Some((_, t)) = target else { return 1 };
        match &t.ty.kind {
            Kind::List(elem) => {
                let items = self.size(t);
                let mut each = 1u64;
                if matches!(elem.kind, Kind::String | Kind::Bytes) && t.path {
                    let n = self.size_of(&elem.size);
                    each = each.saturating_add(factor(n, per_char));
                }
                items.saturating_mul(each)
            }
            Kind::String => {
                let n = self.size(t);
                factor(n, per_char)
            }
            _ => 0,
        }
    }

    /// The size of `s.replace(old, new)` (the Kubernetes estimator): at most every character
    /// surrounded by `new` when `old` may be empty (its smallest size is 0 unless a literal).
    fn replaced_size(
        &mut self,
        target: Option<(&IdedExpr, &Out)>,
        args: &[(&IdedExpr, Out)],
    ) -> Size {
        let (Some((_, t)), Some((old, _)), Some((_, new))) = (target, args.first(), args.get(1))
        else {
            return Size::default();
        };
        let old = match &old.expr {
            Expr::Literal(LiteralValue::String(old)) => old.inner().chars().count() as u64,
            _ => 0,
        };
        let n = t.size.max.unwrap_or(0);
        let with = new.size.max.unwrap_or(0);
        let max = if old == 0 {
            n.saturating_add(1).saturating_mul(with).saturating_add(n)
        } else if with <= old {
            n
        } else {
            n.div_ceil(old).saturating_mul(with)
        };
        Size {
            max: Some(max),
            hint: t.size.hint.clone(),
        }
    }
}

fn literal(lit: &LiteralValue) -> Out {
    let (kind, size) = match lit {
        LiteralValue::Boolean(_) => (Kind::Bool, 1),
        LiteralValue::Int(_) => (Kind::Int, 1),
        LiteralValue::UInt(_) => (Kind::Uint, 1),
        LiteralValue::Double(_) => (Kind::Double, 1),
        LiteralValue::Null => (Kind::Null, 1),
        LiteralValue::String(s) => (Kind::String, s.inner().chars().count() as u64),
        LiteralValue::Bytes(b) => (Kind::Bytes, b.inner().len() as u64),
    };
    Out::value(kind, 0).sized(Size::exact(size))
}
