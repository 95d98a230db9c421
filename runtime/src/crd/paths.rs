//! Compile-time resolution of JSONPaths (printer columns, selectable fields, the scale
//! subresource). `#[custom_resource]` and `#[kubeforge::schema]` implement [`JsonField`] for every
//! field of the structs they annotate, keyed by a hash of the field's JSON name; a path is
//! resolved by chaining these impls, so a typo fails to compile at the path literal, and the
//! leaf's [`JsonShape`] is checked against what the path's user needs in a `const` block.

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
    let bytes = name.as_bytes();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
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
}
