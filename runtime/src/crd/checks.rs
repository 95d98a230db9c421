//! Client-side evaluation of field markers: the same constraints the apiserver enforces from the
//! OpenAPI schema, evaluated on the field's JSON form (so numbers, lengths and enums compare the
//! way the apiserver compares them), reported as `garde` errors.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use garde::{Error, Path, Report};
use regex::Regex;
use serde_json::Value;

/// The constraints of one field, as `#[validate(...)]` markers set them.
///
/// Generated code builds a `const` of this type per field with markers; `None`/`false` means
/// "not constrained".
#[derive(Debug, Clone, Copy)]
pub struct Checks {
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusive_minimum`: the minimum itself is not allowed.
    pub exclusive_minimum: bool,
    /// `exclusive_maximum`: the maximum itself is not allowed.
    pub exclusive_maximum: bool,
    /// `multiple_of`.
    pub multiple_of: Option<f64>,
    /// `min_length` (in Unicode code points, as the apiserver counts).
    pub min_length: Option<u64>,
    /// `max_length` (in Unicode code points).
    pub max_length: Option<u64>,
    /// `pattern`: an (unanchored) regular expression the string must match.
    pub pattern: Option<&'static str>,
    /// `enum`: the allowed values, as JSON text of an array.
    pub enum_values: Option<&'static str>,
    /// `format` (`date-time`, `date`, `uuid`, `ipv4`, `ipv6`, `cidr`, `byte`; others server-only).
    pub format: Option<&'static str>,
    /// `min_items`.
    pub min_items: Option<u64>,
    /// `max_items`.
    pub max_items: Option<u64>,
    /// `unique_items` (also implied by `list_type = "set"`).
    pub unique_items: bool,
    /// `min_properties`.
    pub min_properties: Option<u64>,
    /// `max_properties`.
    pub max_properties: Option<u64>,
    /// `items(...)`: the constraints of every element of a list.
    pub items: Option<&'static Checks>,
    /// `values(...)`: the constraints of every value of a map.
    pub values: Option<&'static Checks>,
    /// `type = ".."`: the JSON type the value must have (`string`, `integer`, `number`,
    /// `boolean`, `object`, `array`).
    pub type_: Option<&'static str>,
    /// `required`: the value may not be absent (`null`, a `None` that is not sent).
    pub required: bool,
}

impl Checks {
    /// No constraint at all; generated code writes `Checks { minimum: .., ..Checks::NONE }`.
    pub const NONE: Checks = Checks {
        minimum: None,
        maximum: None,
        exclusive_minimum: false,
        exclusive_maximum: false,
        multiple_of: None,
        min_length: None,
        max_length: None,
        pattern: None,
        enum_values: None,
        format: None,
        min_items: None,
        max_items: None,
        unique_items: false,
        min_properties: None,
        max_properties: None,
        items: None,
        values: None,
        type_: None,
        required: false,
    };
}

fn regex(pattern: &'static str) -> Option<Regex> {
    static CACHE: Mutex<Option<HashMap<&'static str, Regex>>> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(re) = cache.get(pattern) {
        return Some(re.clone());
    }
    // The macro checked the pattern at compile time; an error here cannot happen for patterns
    // that came through `#[validate(pattern = ...)]`.
    let re = Regex::new(pattern).ok()?;
    cache.insert(pattern, re.clone());
    Some(re)
}

fn fmt_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// Evaluates `checks` on `value` (the field serialized to JSON) and appends one error per failed
/// constraint to `report` at `path`. `null` (an absent `Option`) satisfies every constraint.
pub fn check(value: &Value, checks: &Checks, path: &mut dyn FnMut() -> Path, report: &mut Report) {
    if let (Some(items), Value::Array(elements)) = (checks.items, value) {
        for (i, element) in elements.iter().enumerate() {
            check(element, items, &mut || path().join(i), report);
        }
    }
    if let (Some(values), Value::Object(map)) = (checks.values, value) {
        for (key, v) in map {
            check(v, values, &mut || path().join(key.as_str()), report);
        }
    }
    let mut fail = |message: String| report.append(path(), Error::new(message));
    if value.is_null() {
        if checks.required {
            fail("Required value".to_owned());
        }
        return;
    }
    if let Some(t) = checks.type_
        && !super::structural::json_type_fits(t, value)
    {
        fail(format!("must be of type {t}"));
        return;
    }
    match value {
        Value::Null | Value::Bool(_) => {}
        Value::Number(n) => {
            if let Some(n) = n.as_f64() {
                check_number(n, checks, &mut fail);
            }
        }
        Value::String(s) => check_string(s, checks, &mut fail),
        Value::Array(items) => check_array(items, checks, &mut fail),
        Value::Object(map) => check_object(map, checks, &mut fail),
    }
    if let Some(allowed) = checks.enum_values
        && !value.is_null()
        && let Ok(Value::Array(allowed)) = serde_json::from_str::<Value>(allowed)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        fail(format!(
            "Unsupported value: {value}: supported values: {}",
            list.join(", ")
        ));
    }
}

fn check_number(n: f64, checks: &Checks, fail: &mut dyn FnMut(String)) {
    if let Some(min) = checks.minimum {
        if checks.exclusive_minimum && n <= min {
            fail(format!("should be greater than {}", fmt_number(min)));
        } else if n < min {
            fail(format!(
                "should be greater than or equal to {}",
                fmt_number(min)
            ));
        }
    }
    if let Some(max) = checks.maximum {
        if checks.exclusive_maximum && n >= max {
            fail(format!("should be less than {}", fmt_number(max)));
        } else if n > max {
            fail(format!(
                "should be less than or equal to {}",
                fmt_number(max)
            ));
        }
    }
    if let Some(m) = checks.multiple_of
        && m != 0.0
        && (n / m).fract() != 0.0
    {
        fail(format!("should be a multiple of {}", fmt_number(m)));
    }
}

fn check_string(s: &str, checks: &Checks, fail: &mut dyn FnMut(String)) {
    let len = s.chars().count() as u64;
    if let Some(min) = checks.min_length
        && len < min
    {
        fail(format!("should be at least {min} chars long"));
    }
    if let Some(max) = checks.max_length
        && len > max
    {
        fail(format!("may not be more than {max} bytes"));
    }
    if let Some(pattern) = checks.pattern
        && regex(pattern).is_some_and(|re| !re.is_match(s))
    {
        fail(format!("should match '{pattern}'"));
    }
    if let Some(format) = checks.format
        && !format_ok(format, s)
    {
        fail(format!("must be of type {format}"));
    }
}

fn check_array(items: &[Value], checks: &Checks, fail: &mut dyn FnMut(String)) {
    let len = items.len() as u64;
    if let Some(min) = checks.min_items
        && len < min
    {
        fail(format!("should have at least {min} items"));
    }
    if let Some(max) = checks.max_items
        && len > max
    {
        fail(format!("must have at most {max} {}", items_word(max)));
    }
    if checks.unique_items
        && let Some(dup) = items
            .iter()
            .enumerate()
            .find_map(|(i, v)| items[..i].contains(v).then_some(v))
    {
        fail(format!("Duplicate value: {dup}"));
    }
}

fn check_object(
    map: &serde_json::Map<String, Value>,
    checks: &Checks,
    fail: &mut dyn FnMut(String),
) {
    let len = map.len() as u64;
    if let Some(min) = checks.min_properties
        && len < min
    {
        fail(format!("should have at least {min} properties"));
    }
    if let Some(max) = checks.max_properties
        && len > max
    {
        // The apiserver reports too many properties like too many items.
        fail(format!("must have at most {max} {}", items_word(max)));
    }
}

fn items_word(n: u64) -> &'static str {
    if n == 1 { "item" } else { "items" }
}

fn format_ok(format: &str, s: &str) -> bool {
    match format {
        "date-time" => s.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
        "date" => s.parse::<k8s_openapi::jiff::civil::Date>().is_ok() && s.len() == 10,
        "uuid" => regex(
            "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$",
        )
        .is_some_and(|re| re.is_match(s)),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            let max = if ip.parse::<std::net::Ipv4Addr>().is_ok() {
                32
            } else if ip.parse::<std::net::Ipv6Addr>().is_ok() {
                128
            } else {
                return false;
            };
            bits.parse::<u8>().is_ok_and(|b| b <= max)
        }),
        "byte" => is_base64(s),
        // Other formats (hostname, uri, email, ...) are checked by the apiserver only.
        _ => true,
    }
}

/// Standard base64 with padding, as Go's `base64.StdEncoding` decodes it (line breaks ignored):
/// the apiserver's check of `format: byte`.
fn is_base64(s: &str) -> bool {
    let text: Vec<u8> = s.bytes().filter(|b| !matches!(b, b'\r' | b'\n')).collect();
    if !text.len().is_multiple_of(4) {
        return false;
    }
    let padding = text.iter().rev().take_while(|b| **b == b'=').count();
    padding <= 2
        && text[..text.len() - padding]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
}

/// Wraps a field for [`DiveValidate`] / [`DiveNone`] method resolution ("autoref specialization"):
/// generated code calls `(&Dive(&field)).dive(..)`, which validates the field when its type
/// implements `garde::Validate<Context = ()>` and does nothing otherwise.
#[derive(Debug)]
pub struct Dive<'a, T: ?Sized>(pub &'a T);

/// Chosen for fields whose type implements `garde::Validate` (structs with `#[kubeforge::schema]`,
/// and `Option`, `Vec`, maps of them).
pub trait DiveValidate {
    /// Validates the wrapped field into `report` under `path`.
    fn dive(&self, path: &mut dyn FnMut() -> Path, report: &mut Report);
}

impl<T: garde::Validate<Context = ()> + ?Sized> DiveValidate for Dive<'_, T> {
    fn dive(&self, path: &mut dyn FnMut() -> Path, report: &mut Report) {
        self.0.validate_into(&(), path, report);
    }
}

/// Chosen for every other field: nothing to validate.
pub trait DiveNone {
    /// Does nothing.
    fn dive(&self, path: &mut dyn FnMut() -> Path, report: &mut Report);
}

impl<T: ?Sized> DiveNone for &Dive<'_, T> {
    fn dive(&self, _path: &mut dyn FnMut() -> Path, _report: &mut Report) {}
}

/// The JSON [`check`] sees for a field serde leaves out (`skip_serializing_if`): absent, as a
/// `null` (only `required` fails on it).
pub const ABSENT: Value = Value::Null;

/// Serializes `value` for [`check`]; a value that does not serialize is reported at `path`.
pub fn to_json<T: serde::Serialize + ?Sized>(
    value: &T,
    path: &mut dyn FnMut() -> Path,
    report: &mut Report,
) -> Value {
    match serde_json::to_value(value) {
        Ok(v) => v,
        Err(e) => {
            report.append(path(), Error::new(format!("cannot serialize: {e}")));
            Value::Null
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(value: Value, checks: &Checks) -> Vec<String> {
        let mut report = Report::new();
        check(&value, checks, &mut || Path::new("f"), &mut report);
        report
            .into_inner()
            .into_iter()
            .map(|(_, e)| e.message().to_owned())
            .collect()
    }

    #[test]
    fn check_should_enforce_numeric_bounds() {
        let c = Checks {
            minimum: Some(1.0),
            maximum: Some(10.0),
            exclusive_maximum: true,
            multiple_of: Some(2.0),
            ..Checks::NONE
        };
        assert!(run(json!(4), &c).is_empty());
        assert_eq!(run(json!(0), &c), ["should be greater than or equal to 1"]);
        assert_eq!(run(json!(10), &c), ["should be less than 10"]);
        assert_eq!(run(json!(3), &c), ["should be a multiple of 2"]);
        assert!(run(json!(null), &c).is_empty());
    }

    #[test]
    fn check_should_count_chars_not_bytes() {
        let c = Checks {
            max_length: Some(2),
            ..Checks::NONE
        };
        assert!(run(json!("äö"), &c).is_empty());
        assert_eq!(run(json!("abc"), &c).len(), 1);
    }

    #[test]
    fn check_should_match_pattern_unanchored() {
        let c = Checks {
            pattern: Some("[0-9]+"),
            ..Checks::NONE
        };
        assert!(run(json!("ab12"), &c).is_empty());
        assert_eq!(run(json!("ab"), &c), ["should match '[0-9]+'"]);
    }

    #[test]
    fn check_should_enforce_items_enum_and_properties() {
        let c = Checks {
            max_items: Some(2),
            unique_items: true,
            ..Checks::NONE
        };
        assert_eq!(run(json!([1, 1]), &c), ["Duplicate value: 1"]);
        assert_eq!(run(json!([1, 2, 3]), &c), ["must have at most 2 items"]);
        let e = Checks {
            enum_values: Some(r#"["a","b"]"#),
            ..Checks::NONE
        };
        assert!(run(json!("a"), &e).is_empty());
        assert_eq!(
            run(json!("c"), &e),
            [r#"Unsupported value: "c": supported values: "a", "b""#]
        );
        let p = Checks {
            min_properties: Some(1),
            ..Checks::NONE
        };
        assert_eq!(run(json!({}), &p), ["should have at least 1 properties"]);
    }

    #[test]
    fn check_should_apply_item_constraints_to_each_element() {
        const ITEMS: Checks = Checks {
            pattern: Some("^[a-z]+$"),
            ..Checks::NONE
        };
        let c = Checks {
            items: Some(&ITEMS),
            ..Checks::NONE
        };
        let mut report = Report::new();
        check(
            &json!(["ok", "NO"]),
            &c,
            &mut || Path::new("f"),
            &mut report,
        );
        let errors: Vec<String> = report
            .iter()
            .map(|(p, e)| format!("{p}: {}", e.message()))
            .collect();
        assert_eq!(errors, ["f[1]: should match '^[a-z]+$'"]);
    }

    #[test]
    fn check_should_validate_known_formats() {
        let c = |f| Checks {
            format: Some(f),
            ..Checks::NONE
        };
        assert!(run(json!("2024-01-02T03:04:05Z"), &c("date-time")).is_empty());
        assert_eq!(run(json!("yesterday"), &c("date-time")).len(), 1);
        assert!(run(json!("10.0.0.0/8"), &c("cidr")).is_empty());
        assert_eq!(run(json!("10.0.0.0/33"), &c("cidr")).len(), 1);
        assert!(run(json!("::1"), &c("ipv6")).is_empty());
    }
}
