//! Compile-time resolution of JSONPaths (printer columns, selectable fields, the scale
//! subresource). `#[custom_resource]` and `#[kubeforge::schema]` implement [`JsonField`] for every
//! field of the structs they annotate, keyed by a hash of the field's JSON name; a path is
//! resolved by chaining these impls, so a typo fails to compile at the path literal, and the
//! leaf's [`JsonShape`] is checked against what the path's user needs in a `const` block.
//!
//! A printer column's filter (`.status.conditions[?(@.type=="Ready")].status`) names fields of the
//! list's element type: they are looked up in its [`JsonFields`] table in a `const` block, whose
//! panic message lists the JSON fields the type has.

/// The JSON shape of a field, as the macros see it from the field's Rust type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonShape {
    /// Rust integers.
    Integer,
    /// `f32`, `f64`.
    Number,
    /// `String`, `Time`.
    String,
    /// `bool`.
    Bool,
    /// `Vec`, sets.
    Array,
    /// Maps.
    Map,
    /// `IntOrString`, `Quantity`.
    IntOrString,
    /// Any other type: a struct, an enum, a foreign type.
    Other,
}

impl JsonShape {
    /// Whether `self` is one of `allowed` (or [`JsonShape::Other`], which cannot be judged).
    #[must_use]
    pub const fn is_one_of(self, allowed: &[JsonShape]) -> bool {
        if matches!(self, JsonShape::Other) {
            return true;
        }
        let mut i = 0;
        while i < allowed.len() {
            if allowed[i] as u8 == self as u8 {
                return true;
            }
            i += 1;
        }
        false
    }

    /// The shape in a message: "an integer", "a string", ...
    #[must_use]
    pub const fn describe(self) -> &'static str {
        match self {
            JsonShape::Integer => "an integer",
            JsonShape::Number => "a floating-point number",
            JsonShape::String => "a string",
            JsonShape::Bool => "a bool",
            JsonShape::Array => "a list",
            JsonShape::Map => "a map",
            JsonShape::IntOrString => "an int-or-string",
            JsonShape::Other => "another type",
        }
    }
}

/// The field whose JSON name hashes to `NAME` (FNV-1a, computed by the macros).
#[diagnostic::on_unimplemented(
    message = "JSONPath does not resolve: `{Self}` has no field with this JSON name",
    label = "no such field in `{Self}`",
    note = "kubeforge checks JSONPaths at compile time against structs annotated with \
            #[custom_resource] or #[kubeforge::schema]; mind serde renames (JSON names are used); \
            for a path into another type add `unchecked` to the printcolumn, selectable_field or scale"
)]
pub trait JsonField<const NAME: u64> {
    /// The field's type without `Option`/`Box`.
    type Ty: ?Sized;
    /// The field's shape.
    const SHAPE: JsonShape;
}

/// What an index `[n]` in a JSONPath selects.
#[diagnostic::on_unimplemented(
    message = "JSONPath does not resolve: `{Self}` is not a list, it cannot be indexed",
    label = "indexed here"
)]
pub trait JsonElement {
    /// The element type.
    type Elem: ?Sized;
}

impl<T> JsonElement for Vec<T> {
    type Elem = T;
}

/// The JSON fields of a struct, for the fields a printer column's filter compares
/// (`[?(@.type == "Ready")]` reads `type` of the list's elements).
#[diagnostic::on_unimplemented(
    message = "JSONPath does not resolve: a filter reads fields of `{Self}`, whose JSON fields kubeforge does not know",
    label = "filtered here",
    note = "kubeforge checks JSONPaths at compile time against structs annotated with \
            #[custom_resource] or #[kubeforge::schema]; for a path into another type add \
            `unchecked` to the printcolumn"
)]
pub trait JsonFields {
    /// The Rust type's name, for messages.
    const TYPE: &'static str;
    /// The JSON name and shape of each field.
    const FIELDS: &'static [(&'static str, JsonShape)];
    /// The JSON names, comma-separated, for messages.
    const NAMES: &'static str;
    /// Whether other names may be fields too (`#[serde(flatten)]`).
    const OPEN: bool;
}

/// The shape of the field `name` of a [`JsonFields`] table; `None` when there is no such field
/// (an open table has every name, of an unknown shape).
#[must_use]
pub const fn field_shape(
    fields: &[(&str, JsonShape)],
    open: bool,
    name: &str,
) -> Option<JsonShape> {
    let mut i = 0;
    while i < fields.len() {
        if eq(fields[i].0, name) {
            return Some(fields[i].1);
        }
        i += 1;
    }
    if open { Some(JsonShape::Other) } else { None }
}

/// `a == b` in a `const` context (also the compile-time checks of `conversion(hub = ..)`).
pub(crate) const fn eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The literal a filter compares a field with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterLiteral {
    /// `"Ready"`, `'Ready'`.
    String,
    /// `3`, `-1`.
    Integer,
    /// `0.5`.
    Number,
    /// `true`, `false`.
    Bool,
}

/// Whether the apiserver's JSONPath compares a field of `shape` with a `literal` (values of other
/// types make the comparison an error: the column stays empty). Unknown shapes pass.
#[must_use]
pub const fn compares(shape: JsonShape, literal: FilterLiteral) -> bool {
    let allowed: &[JsonShape] = match literal {
        FilterLiteral::String => &[JsonShape::String, JsonShape::IntOrString],
        FilterLiteral::Integer => &[
            JsonShape::Integer,
            JsonShape::Number,
            JsonShape::IntOrString,
        ],
        FilterLiteral::Number => &[JsonShape::Number],
        FilterLiteral::Bool => &[JsonShape::Bool],
    };
    shape.is_one_of(allowed)
}

/// The length of the message [`message`] joins from `parts`.
#[must_use]
pub const fn message_len(parts: &[&str]) -> usize {
    let mut len = 0;
    let mut i = 0;
    while i < parts.len() {
        len += parts[i].len();
        i += 1;
    }
    len
}

/// `parts` joined, in a `const` (for a `panic!` message naming a type's fields);
/// `N` is [`message_len`].
#[must_use]
pub const fn message<const N: usize>(parts: &[&str]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut at = 0;
    let mut i = 0;
    while i < parts.len() {
        let bytes = parts[i].as_bytes();
        let mut j = 0;
        while j < bytes.len() {
            out[at] = bytes[j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    out
}

/// The text of a [`message`].
#[must_use]
pub const fn message_str(bytes: &[u8]) -> &str {
    match core::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(_) => "invalid JSONPath",
    }
}

/// Map keys are data: any name resolves to the value type (its shape is not known here).
impl<const NAME: u64, V> JsonField<NAME> for std::collections::BTreeMap<String, V> {
    type Ty = V;
    const SHAPE: JsonShape = JsonShape::Other;
}

/// Map keys are data: any name resolves to the value type (its shape is not known here).
impl<const NAME: u64, V, S> JsonField<NAME> for std::collections::HashMap<String, V, S> {
    type Ty = V;
    const SHAPE: JsonShape = JsonShape::Other;
}

/// FNV-1a of a JSON name (the same function the macros use).
#[must_use]
pub const fn name_hash(name: &str) -> u64 {
    kubeforge_shared::hash::fnv1a(name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The macros' `name_hash` test asserts the same value: both sides must agree.
    #[test]
    fn name_hash_should_be_fnv1a() {
        assert_eq!(name_hash("replicas"), 13652072405990351292);
    }

    #[test]
    fn is_one_of_should_accept_listed_and_unknown_shapes() {
        assert!(JsonShape::Integer.is_one_of(&[JsonShape::Number, JsonShape::Integer]));
        assert!(!JsonShape::String.is_one_of(&[JsonShape::Integer]));
        assert!(JsonShape::Other.is_one_of(&[JsonShape::Integer]));
    }

    #[test]
    fn field_shape_should_find_fields_by_json_name() {
        let fields = [("type", JsonShape::String), ("count", JsonShape::Integer)];
        assert_eq!(
            field_shape(&fields, false, "count"),
            Some(JsonShape::Integer)
        );
        assert_eq!(field_shape(&fields, false, "typ"), None);
        assert_eq!(field_shape(&fields, true, "typ"), Some(JsonShape::Other));
    }

    #[test]
    fn compares_should_follow_the_apiservers_comparisons() {
        assert!(compares(JsonShape::String, FilterLiteral::String));
        assert!(compares(JsonShape::Number, FilterLiteral::Integer));
        assert!(!compares(JsonShape::Integer, FilterLiteral::String));
        assert!(!compares(JsonShape::Integer, FilterLiteral::Number));
        assert!(!compares(JsonShape::String, FilterLiteral::Bool));
        assert!(compares(JsonShape::Other, FilterLiteral::Bool));
    }

    #[test]
    fn message_should_join_its_parts() {
        const PARTS: &[&str] = &["`", "Condition", "` has: ", "type, status"];
        const BYTES: [u8; message_len(PARTS)] = message(PARTS);
        assert_eq!(message_str(&BYTES), "`Condition` has: type, status");
    }
}
