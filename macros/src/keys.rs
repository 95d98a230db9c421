//! The one parser of `key = value` lists. Every attribute and sub-attribute of the macros
//! (`#[custom_resource(..)]`, `printcolumn(..)`, `scale(..)`, `rule(..)`, `#[validate(..)]`, ...)
//! declares its keys in a [`Table`]: each [`Key`] has a name, the kind of its value with the
//! setter that stores it (a [`Value`] variant), and whether it is required or repeatable. The
//! shared code reports, collecting every error with its span:
//!
//! - an unknown key, at the key, with "did you mean" or the list of known keys;
//! - a duplicate key, at its second occurrence (the first value is kept; the second is still
//!   read, so that its own errors are reported);
//! - a value of the wrong kind, at the value (then it skips to the next `,` and goes on);
//! - a missing required key, at the name of the sub-attribute (not when an unknown key was
//!   reported in the same list: that is most likely the missing key misspelled).
//!
//! Each key and table also carries its description: the references in `docs/src/reference/`
//! are rendered from the tables (`reference.rs`), so the documentation and the parser agree.
//!
//! ```text
//! const SCALE: Table<ScaleAttrs> = Table {
//!     what: "scale",
//!     doc: "The scale subresource.",
//!     keys: &[
//!         Key::required("spec", Value::Str(|s, v| s.spec = Some(v)), "`scale` needs `spec = ..`")
//!             .doc("JSONPath of the desired replicas"),
//!         Key::new("unchecked", Value::Flag(|s, v| s.unchecked = v.value))
//!             .doc("do not resolve the JSONPaths at compile time"),
//!     ],
//! };
//! let scale: Keyed<ScaleAttrs> = keys::nested(meta, &SCALE, errors)?;
//! ```

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Expr, ExprLit, ExprUnary, Lit, LitBool, LitStr, Type, UnOp};

use crate::errors::{Errors, did_you_mean};

/// A value with the span of the key that set it (or of the literal, where the key says so).
#[derive(Clone)]
pub struct Keyed<T> {
    pub value: T,
    pub key: Span,
}

/// A JSON number literal (optionally negative), kept with its span.
#[derive(Clone)]
pub struct Number {
    pub value: serde_json::Number,
    pub is_integer: bool,
    pub span: Span,
}

/// The kind of a key's value, with the setter that stores it into the attribute struct `T`.
pub enum Value<T> {
    /// `key = "text"`.
    Str(fn(&mut T, LitStr)),
    /// `key` or `key = true|false`; spanned at the key.
    Flag(fn(&mut T, Keyed<bool>)),
    /// `key = 3`, a non-negative integer; spanned at the literal.
    Unsigned(fn(&mut T, Keyed<u64>)),
    /// `key = -1.5`, a number literal.
    Number(fn(&mut T, Number)),
    /// `key = <literal or array of literals>`, as JSON; spanned at the key.
    Json(fn(&mut T, Keyed<serde_json::Value>)),
    /// `key = [..]`, a non-empty array of literals, as JSON; spanned at the key.
    JsonArray(fn(&mut T, Keyed<Vec<serde_json::Value>>)),
    /// `key = ["a", "b"]`, string literals.
    StrList(fn(&mut T, Vec<LitStr>)),
    /// `key = SomeType`.
    Type(fn(&mut T, Type)),
    /// `crate = "::path"`: see [`crate_path`].
    CratePath(fn(&mut T, syn::Path)),
    /// Read by the function itself: a nested list (see [`nested`]) or a value with rules of its
    /// own. An `Err` is reported and the parser skips to the next key.
    Custom(fn(&mut T, &ParseNestedMeta<'_>, &mut Errors) -> syn::Result<()>),
}

/// One key of a [`Table`].
pub struct Key<T: 'static> {
    pub name: &'static str,
    pub value: Value<T>,
    /// The error reported when the key is missing; `None` for an optional key.
    pub required: Option<&'static str>,
    /// Whether the key may appear several times (every occurrence goes to the setter).
    pub repeatable: bool,
    /// What the key does, for the reference (`docs/src/reference/`, rendered from the tables by
    /// `reference.rs`, and included in the macros' rustdoc).
    #[cfg_attr(not(test), allow(dead_code, reason = "read by the reference's tests"))]
    pub doc: &'static str,
    /// How the reference writes the value when its [`Value`] does not say (a `Custom` one).
    #[cfg_attr(not(test), allow(dead_code, reason = "read by the reference's tests"))]
    pub syntax: Option<&'static str>,
    /// Required, but reported missing after parsing (so that a placeholder keeps the item
    /// compiling), not by the table: only the reference reads it.
    #[cfg_attr(not(test), allow(dead_code, reason = "read by the reference's tests"))]
    pub required_later: bool,
    /// Field markers: what `validate()` checks of the marker client-side (the reference's last
    /// column); `None` for nothing.
    #[cfg_attr(not(test), allow(dead_code, reason = "read by the reference's tests"))]
    pub client: Option<&'static str>,
}

impl<T> Key<T> {
    /// An optional key that may appear once.
    pub const fn new(name: &'static str, value: Value<T>) -> Self {
        Key {
            name,
            value,
            required: None,
            repeatable: false,
            doc: "",
            syntax: None,
            required_later: false,
            client: None,
        }
    }

    /// A required key; `message` is the error when it is missing (reported once per list even
    /// when several keys share it).
    pub const fn required(name: &'static str, value: Value<T>, message: &'static str) -> Self {
        Key {
            required: Some(message),
            ..Key::new(name, value)
        }
    }

    /// An optional key that may appear several times.
    pub const fn repeatable(name: &'static str, value: Value<T>) -> Self {
        Key {
            repeatable: true,
            ..Key::new(name, value)
        }
    }

    /// The key with its description for the reference (Markdown, one line, no intra-doc links:
    /// the book renders it too).
    pub const fn doc(self, doc: &'static str) -> Self {
        Key { doc, ..self }
    }

    /// The key with the value syntax the reference shows (required for [`Value::Custom`]).
    pub const fn syntax(self, syntax: &'static str) -> Self {
        Key {
            syntax: Some(syntax),
            ..self
        }
    }

    /// The key documented as required, its absence being reported after parsing.
    pub const fn required_later(self) -> Self {
        Key {
            required_later: true,
            ..self
        }
    }

    /// A field marker with what `validate()` checks of it client-side.
    pub const fn client(self, client: &'static str) -> Self {
        Key {
            client: Some(client),
            ..self
        }
    }
}

/// The keys of one attribute or sub-attribute. `what` names it in "unknown `what` key" errors.
pub struct Table<T: 'static> {
    pub what: &'static str,
    /// What the attribute is, for the reference (Markdown, no intra-doc links).
    #[cfg_attr(not(test), allow(dead_code, reason = "read by the reference's tests"))]
    pub doc: &'static str,
    pub keys: &'static [Key<T>],
}

impl<T> Table<T> {
    fn names(&self) -> Vec<&'static str> {
        self.keys.iter().map(|k| k.name).collect()
    }
}

/// A key of a list read by hand rather than by a [`Table`] (the options of `owns(Kind(..))`, of
/// a dependent, ...): the hand parser takes its known names from these, and the reference its
/// rows, so that they cannot disagree.
pub struct HandKey {
    pub name: &'static str,
    /// The value as the reference writes it (`""` for a bare word).
    #[cfg_attr(not(test), allow(dead_code, reason = "read by the reference's tests"))]
    pub syntax: &'static str,
    /// What it does, for the reference.
    #[cfg_attr(not(test), allow(dead_code, reason = "read by the reference's tests"))]
    pub doc: &'static str,
}

/// The names of `keys`, in their order (for "unknown key" checks and their "expected one of").
pub fn hand_names(keys: &[HandKey]) -> Vec<&'static str> {
    keys.iter().map(|k| k.name).collect()
}

/// Parses an attribute macro's arguments (`args` of `#[custom_resource(...)]`) by `table`.
pub fn parse_args<T: Default>(args: TokenStream, table: &Table<T>, errors: &mut Errors) -> T {
    let mut out = T::default();
    let mut list = List::new(table);
    let result = syn::meta::parser(|meta| list.entry(&meta, &mut out, errors)).parse2(args);
    if let Err(e) = result {
        errors.push(e);
    }
    list.finish(Span::call_site(), errors);
    out
}

/// Parses one attribute on an item or field (`#[validate(...)]`) by `table` into `out`; several
/// attributes accumulate into one value (duplicates are checked within each attribute).
pub fn parse_attr<T: Default>(
    attr: &syn::Attribute,
    table: &Table<T>,
    out: &mut T,
    errors: &mut Errors,
) {
    let mut list = List::new(table);
    if let Err(e) = attr.parse_nested_meta(|meta| list.entry(&meta, out, errors)) {
        errors.push(e);
    }
    list.finish(attr_span(attr), errors);
}

/// Parses the nested list of `meta` (`printcolumn(...)`) by `table`; the result is spanned at the
/// sub-attribute's name, where missing required keys are reported.
pub fn nested<T: Default>(
    meta: &ParseNestedMeta<'_>,
    table: &Table<T>,
    errors: &mut Errors,
) -> syn::Result<Keyed<T>> {
    let key = key_span(meta);
    let mut out = T::default();
    let mut list = List::new(table);
    meta.parse_nested_meta(|inner| list.entry(&inner, &mut out, errors))?;
    list.finish(key, errors);
    Ok(Keyed { value: out, key })
}

/// Parses the nested list of `meta` by `table` and appends it to `list` (a repeatable
/// sub-attribute such as `printcolumn(...)`).
pub fn push_nested<T: Default>(
    list: &mut Vec<T>,
    meta: &ParseNestedMeta<'_>,
    table: &Table<T>,
    errors: &mut Errors,
) -> syn::Result<()> {
    list.push(nested(meta, table, errors)?.value);
    Ok(())
}

/// The state of one list being parsed: the keys seen so far, and whether one was unknown.
struct List<'t, T: 'static> {
    table: &'t Table<T>,
    seen: Vec<&'static str>,
    had_unknown: bool,
}

impl<'t, T: Default> List<'t, T> {
    fn new(table: &'t Table<T>) -> Self {
        List {
            table,
            seen: Vec::new(),
            had_unknown: false,
        }
    }

    /// One `key`, `key = value` or `key(...)`. Only structural errors of the list itself
    /// (a missing `,`) end the parse; everything else is reported and skipped.
    fn entry(
        &mut self,
        meta: &ParseNestedMeta<'_>,
        out: &mut T,
        errors: &mut Errors,
    ) -> syn::Result<()> {
        let name = key_name(meta);
        let Some(key) = self.table.keys.iter().find(|k| k.name == name) else {
            self.had_unknown = true;
            errors.push(self.unknown(meta, &name));
            return skip_value(meta);
        };
        let duplicate = self.seen.contains(&key.name);
        self.seen.push(key.name);
        let mut scratch;
        let target = if duplicate && !key.repeatable {
            errors.spanned(
                &meta.path,
                format!("duplicate key `{name}`; it is already set above"),
            );
            scratch = T::default();
            &mut scratch
        } else {
            out
        };
        if let Err(error) = read(&key.value, meta, target, errors) {
            errors.push(error);
            skip_value(meta)?;
        }
        Ok(())
    }

    fn unknown(&self, meta: &ParseNestedMeta<'_>, name: &str) -> syn::Error {
        let known = self.table.names();
        let hint = did_you_mean(name, &known);
        let hint = if hint.is_empty() {
            format!("; expected one of: {}", known.join(", "))
        } else {
            hint
        };
        let what = self.table.what;
        syn::Error::new_spanned(&meta.path, format!("unknown {what} key `{name}`{hint}"))
    }

    /// Reports the required keys that did not appear, at `at`.
    fn finish(self, at: Span, errors: &mut Errors) {
        if self.had_unknown {
            return;
        }
        let mut reported: Vec<&str> = Vec::new();
        for key in self.table.keys {
            if let Some(message) = key.required
                && !self.seen.contains(&key.name)
                && !reported.contains(&message)
            {
                errors.at(at, message);
                reported.push(message);
            }
        }
    }
}

fn read<T>(
    value: &Value<T>,
    meta: &ParseNestedMeta<'_>,
    out: &mut T,
    errors: &mut Errors,
) -> syn::Result<()> {
    let key = key_span(meta);
    match value {
        Value::Str(set) => set(out, meta.value()?.parse()?),
        Value::Flag(set) => set(
            out,
            Keyed {
                value: flag(meta)?,
                key,
            },
        ),
        Value::Unsigned(set) => set(out, unsigned(meta)?),
        Value::Number(set) => set(out, expr_number(&meta.value()?.parse()?)?),
        Value::Json(set) => set(
            out,
            Keyed {
                value: expr_json(&meta.value()?.parse()?)?,
                key,
            },
        ),
        Value::JsonArray(set) => set(
            out,
            Keyed {
                value: json_array(meta)?,
                key,
            },
        ),
        Value::StrList(set) => set(out, str_list(meta, errors)?),
        Value::Type(set) => set(out, meta.value()?.parse()?),
        Value::CratePath(set) => {
            if let Some(path) = crate_path(&meta.value()?.parse()?, errors) {
                set(out, path);
            }
        }
        Value::Custom(read) => read(out, meta, errors)?,
    }
    Ok(())
}

/// The name of a key as written (`a::b` for a path, which is never a known key).
pub fn key_name(meta: &ParseNestedMeta<'_>) -> String {
    meta.path
        .get_ident()
        .map(ToString::to_string)
        .unwrap_or_else(|| quote::ToTokens::to_token_stream(&meta.path).to_string())
}

/// The span of a key's (first) identifier.
pub fn key_span(meta: &ParseNestedMeta<'_>) -> Span {
    meta.path
        .segments
        .first()
        .map_or_else(Span::call_site, |s| s.ident.span())
}

fn attr_span(attr: &syn::Attribute) -> Span {
    attr.path()
        .segments
        .first()
        .map_or_else(Span::call_site, |s| s.ident.span())
}

/// Skips what is left of a key's value, up to the next `,` of the list, so that parsing goes
/// on with the next key.
pub fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    meta.input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tree, next)) = rest.token_tree() {
            if matches!(&tree, TokenTree::Punct(p) if p.as_char() == ',') {
                break;
            }
            rest = next;
        }
        Ok(((), rest))
    })
}

/// The value of `crate = "path"` (every macro accepts it): the path generated code names kubeforge
/// by instead of `::kubeforge`, for crates that re-export or rename it. `None` (and an error at
/// the literal) when it is not a path.
pub fn crate_path(lit: &LitStr, errors: &mut Errors) -> Option<syn::Path> {
    match lit.parse::<syn::Path>() {
        Ok(path) => Some(path),
        Err(_) => {
            errors.spanned(
                lit,
                format!(
                    "`crate` must be the path of the kubeforge crate, such as \"::kubeforge\" or \"kf\"; `{}` is not a path",
                    lit.value()
                ),
            );
            None
        }
    }
}

/// `flag` or `flag = true|false`.
fn flag(meta: &ParseNestedMeta<'_>) -> syn::Result<bool> {
    if meta.input.peek(syn::Token![=]) {
        let b: LitBool = meta.value()?.parse()?;
        Ok(b.value)
    } else {
        Ok(true)
    }
}

fn expr_number(expr: &Expr) -> syn::Result<Number> {
    let err = || syn::Error::new_spanned(expr, "expected a number literal");
    let (negative, lit) = match expr {
        Expr::Lit(ExprLit { lit, .. }) => (false, lit),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match &**expr {
            Expr::Lit(ExprLit { lit, .. }) => (true, lit),
            _ => return Err(err()),
        },
        _ => return Err(err()),
    };
    let sign = if negative { "-" } else { "" };
    let (text, is_integer) = match lit {
        Lit::Int(i) => (format!("{sign}{}", i.base10_digits()), true),
        Lit::Float(f) => (format!("{sign}{}", f.base10_digits()), false),
        _ => return Err(err()),
    };
    let value: serde_json::Number = serde_json::from_str(&text).map_err(|_| err())?;
    Ok(Number {
        value,
        is_integer,
        span: syn::spanned::Spanned::span(expr),
    })
}

/// `key = 3`, a non-negative integer, spanned at the literal (what [`Value::Unsigned`] reads).
pub fn unsigned(meta: &ParseNestedMeta<'_>) -> syn::Result<Keyed<u64>> {
    let n = expr_number(&meta.value()?.parse()?)?;
    match n.value.as_u64() {
        Some(v) if n.is_integer => Ok(Keyed {
            value: v,
            key: n.span,
        }),
        _ => Err(syn::Error::new(n.span, "expected a non-negative integer")),
    }
}

/// Converts a Rust literal expression (`3`, `-1.5`, `"x"`, `true`, `[..]`) to JSON.
fn expr_json(expr: &Expr) -> syn::Result<serde_json::Value> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(serde_json::Value::String(s.value())),
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Ok(serde_json::Value::Bool(b.value)),
        Expr::Array(array) => array
            .elems
            .iter()
            .map(expr_json)
            .collect::<syn::Result<Vec<_>>>()
            .map(serde_json::Value::Array),
        Expr::Path(p) if p.path.is_ident("null") => Ok(serde_json::Value::Null),
        Expr::Lit(_) | Expr::Unary(_) => {
            expr_number(expr).map(|n| serde_json::Value::Number(n.value))
        }
        _ => Err(syn::Error::new_spanned(
            expr,
            "expected a literal (number, string, bool, `null`) or an array of literals; \
             use `default_json = \"...\"` for objects",
        )),
    }
}

fn json_array(meta: &ParseNestedMeta<'_>) -> syn::Result<Vec<serde_json::Value>> {
    let name = key_name(meta);
    let expr: Expr = meta.value()?.parse()?;
    match expr_json(&expr)? {
        serde_json::Value::Array(values) if !values.is_empty() => Ok(values),
        _ => Err(syn::Error::new_spanned(
            &expr,
            format!("expected a non-empty array, e.g. `{name} = [\"a\", \"b\"]`"),
        )),
    }
}

/// An array of string literals; an element that is not one is reported and left out.
fn str_list(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Vec<LitStr>> {
    let name = key_name(meta);
    let expr: Expr = meta.value()?.parse()?;
    let Expr::Array(array) = &expr else {
        return Err(syn::Error::new_spanned(
            &expr,
            format!("expected an array of strings, e.g. `{name} = [\"name\"]`"),
        ));
    };
    let mut out = Vec::new();
    for elem in &array.elems {
        match elem {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => out.push(s.clone()),
            other => errors.spanned(other, "expected a string literal"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    #[derive(Default)]
    struct Sample {
        name: Option<LitStr>,
        count: Option<u64>,
        on: bool,
        tags: Vec<LitStr>,
    }

    const SAMPLE: Table<Sample> = Table {
        what: "sample",
        doc: "",
        keys: &[
            Key::required("name", Value::Str(|s, v| s.name = Some(v)), "needs a name"),
            Key::new("count", Value::Unsigned(|s, v| s.count = Some(v.value))),
            Key::new("on", Value::Flag(|s, v| s.on = v.value)),
            Key::repeatable("tag", Value::Str(|s, v| s.tags.push(v))),
        ],
    };

    fn parse(args: TokenStream) -> (Sample, Vec<String>) {
        let mut errors = Errors::default();
        let sample = parse_args(args, &SAMPLE, &mut errors);
        (sample, errors.messages())
    }

    #[test]
    fn parse_args_should_read_every_kind_of_value() {
        let (s, messages) = parse(quote!(name = "n", count = 3, on, tag = "a", tag = "b"));
        assert!(messages.is_empty(), "{messages:?}");
        assert_eq!(s.name.map(|n| n.value()).as_deref(), Some("n"));
        assert_eq!(s.count, Some(3));
        assert!(s.on);
        assert_eq!(s.tags.len(), 2);
    }

    #[test]
    fn parse_args_should_report_every_error_and_keep_the_first_value() {
        let (s, messages) = parse(quote!(
            nmae = "x",
            count = "3",
            on = 1,
            count = 2,
            tag = "t"
        ));
        assert_eq!(
            messages,
            [
                "unknown sample key `nmae`; did you mean `name`?",
                "expected a number literal",
                "expected boolean literal",
                "duplicate key `count`; it is already set above",
            ]
        );
        assert_eq!(s.count, None, "the duplicate is read, not kept");
        assert_eq!(s.tags.len(), 1, "parsing goes on after a bad value");
        assert_eq!(
            parse(quote!(name = "n", count = 1, count = 2)).0.count,
            Some(1)
        );
    }

    #[test]
    fn parse_args_should_report_missing_required_keys_once() {
        assert_eq!(parse(quote!(count = 1)).1, ["needs a name"]);
        assert_eq!(
            parse(quote!(zzz = 1)).1,
            ["unknown sample key `zzz`; expected one of: name, count, on, tag"],
            "an unknown key is probably the missing one: not reported twice"
        );
    }
}
