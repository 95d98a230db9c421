//! Arbitrary values of a structural schema, for the generated round-trip tests: every value is
//! constructed to hold what the schema says (bounds, `multipleOf`, lengths, patterns, formats,
//! enums, item and property counts, `set` lists without duplicates, `map` lists with distinct
//! keys, int-or-string patterns such as a Quantity's) and, where a node has CEL rules
//! (`x-kubernetes-validations`), drawn again until they hold (evaluated client-side, as
//! `Validate` does; without the `cel` feature they are not evaluated). What cannot be drawn in
//! [`ATTEMPTS`] tries is an error naming the field.

use std::collections::HashMap;
use std::rc::Rc;

use regex::Regex;
use regex_syntax::hir::{Class, Hir, HirKind};
use serde_json::{Map, Value, json};

use crate::crd::__checks::KindRules;
use crate::crd::ValidationContext;

/// How often a value is drawn again before giving up.
pub(super) const ATTEMPTS: u32 = 64;

/// The generator: seeded with a constant, the same cases on every run, so a failure is
/// reproducible.
pub(super) use kubeforge_shared::random::Rng;

/// Draws values of one schema; keeps the compiled CEL rules and patterns of its nodes.
pub(super) struct Generator {
    rng: Rng,
    /// Compiled rules by the address of their node (the schema outlives the generator's use).
    rules: HashMap<usize, Rc<KindRules>>,
    patterns: HashMap<String, Option<(Hir, Regex)>>,
}

/// `path.name`, or `name` at the root.
fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn count(schema: &Value, key: &str) -> Option<u64> {
    schema[key].as_u64()
}

impl Generator {
    pub(super) fn new(seed: u64) -> Self {
        Self {
            rng: Rng::seeded(seed),
            rules: HashMap::new(),
            patterns: HashMap::new(),
        }
    }

    /// A value of `schema` at `path`; optional fields and extra items only `depth` levels deep.
    ///
    /// # Errors
    ///
    /// No value satisfying the schema was found, with the path of the field.
    pub(super) fn value(
        &mut self,
        schema: &Value,
        path: &str,
        depth: u32,
    ) -> Result<Value, String> {
        let has_rules = schema["x-kubernetes-validations"]
            .as_array()
            .is_some_and(|r| !r.is_empty());
        if !has_rules {
            return self.unchecked(schema, path, depth);
        }
        let rules = self.rules_of(schema);
        if rules.is_empty() {
            return self.unchecked(schema, path, depth);
        }
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            let value = self.unchecked(schema, path, depth)?;
            let mut report = garde::Report::new();
            rules.check(
                &value,
                &ValidationContext::create(),
                &mut garde::Path::empty,
                &mut report,
                0,
            );
            if report.is_empty() {
                return Ok(value);
            }
            last = report.to_string();
        }
        Err(format!(
            "{path}: no value satisfying its CEL rules in {ATTEMPTS} attempts (last: {})",
            last.trim()
        ))
    }

    fn rules_of(&mut self, schema: &Value) -> Rc<KindRules> {
        let key = std::ptr::from_ref(schema) as usize;
        Rc::clone(
            self.rules
                .entry(key)
                .or_insert_with(|| Rc::new(KindRules::new(schema))),
        )
    }

    fn unchecked(&mut self, schema: &Value, path: &str, depth: u32) -> Result<Value, String> {
        if let Some(choices) = schema["enum"].as_array().filter(|c| !c.is_empty()) {
            return Ok(self.rng.pick(choices).cloned().unwrap_or(Value::Null));
        }
        if schema["x-kubernetes-embedded-resource"] == json!(true) {
            return Ok(json!({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "embedded" },
            }));
        }
        if schema["x-kubernetes-int-or-string"] == json!(true) {
            // A pattern (a Quantity's) or a length constrains the string form: draw that one.
            let constrained = ["pattern", "minLength", "maxLength", "format", "allOf"]
                .iter()
                .any(|k| schema.get(*k).is_some());
            return if constrained {
                self.string(schema, path).map(Value::String)
            } else if self.rng.chance() {
                Ok(json!(self.rng.below(100)))
            } else {
                Ok(json!(format!("{}%", self.rng.below(100))))
            };
        }
        match schema["type"].as_str() {
            Some("object") => self.object(schema, path, depth),
            Some("array") => self.array(schema, path, depth),
            Some("integer") => self.integer(schema, path),
            Some("number") => self.number(schema, path),
            Some("boolean") => Ok(json!(self.rng.chance())),
            Some("string") => self.string(schema, path).map(Value::String),
            // Free-form: a small object.
            _ => Ok(json!({ "k": self.rng.below(10) })),
        }
    }

    fn object(&mut self, schema: &Value, path: &str, depth: u32) -> Result<Value, String> {
        let mut out = Map::new();
        let min = count(schema, "minProperties").unwrap_or(0);
        let max = count(schema, "maxProperties").unwrap_or(u64::MAX).max(min);
        if let Some(properties) = schema["properties"].as_object() {
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut chosen: Vec<&String> = properties
                .keys()
                .filter(|name| required.contains(&name.as_str()))
                .collect();
            let mut optional: Vec<&String> = properties
                .keys()
                .filter(|name| !required.contains(&name.as_str()))
                .collect();
            // Optional fields by chance (when not too deep), then as many as `minProperties`
            // asks for, and no more than `maxProperties` allows.
            optional.retain(|name| {
                let take = depth > 0 && self.rng.chance();
                if take {
                    chosen.push(name);
                }
                !take
            });
            while (chosen.len() as u64) < min && !optional.is_empty() {
                chosen.push(optional.remove(0));
            }
            while chosen.len() as u64 > max && chosen.len() > required.len() {
                chosen.pop();
            }
            for name in chosen {
                let value = self.value(
                    &properties[name],
                    &join(path, name),
                    depth.saturating_sub(1),
                )?;
                out.insert(name.clone(), value);
            }
        } else if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
            let hi = if depth == 0 { min } else { max.min(min + 2) };
            for i in 0..self.rng.between(min, hi) {
                let key = format!("key{i}");
                let value = self.value(values, &join(path, &key), depth.saturating_sub(1))?;
                out.insert(key, value);
            }
        }
        if (out.len() as u64) < min {
            return Err(format!(
                "{path}: cannot have the {min} properties minProperties asks for"
            ));
        }
        Ok(Value::Object(out))
    }

    fn array(&mut self, schema: &Value, path: &str, depth: u32) -> Result<Value, String> {
        let min = count(schema, "minItems").unwrap_or(0);
        let max = count(schema, "maxItems").unwrap_or(u64::MAX).max(min);
        let hi = if depth == 0 { min } else { max.min(min + 2) };
        let n = self.rng.between(min, hi);
        let list_type = schema["x-kubernetes-list-type"].as_str();
        let set = list_type == Some("set") || schema["uniqueItems"] == json!(true);
        let keys: Vec<&str> = match list_type {
            Some("map") => schema["x-kubernetes-list-map-keys"]
                .as_array()
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let mut list: Vec<Value> = Vec::new();
        let mut misses = 0;
        while (list.len() as u64) < n {
            let item_path = format!("{path}[{}]", list.len());
            let item = self.value(&schema["items"], &item_path, depth.saturating_sub(1))?;
            let duplicate = (set && list.contains(&item))
                || (!keys.is_empty()
                    && list
                        .iter()
                        .any(|other| keys.iter().all(|k| other.get(*k) == item.get(*k))));
            if !duplicate {
                list.push(item);
                continue;
            }
            misses += 1;
            if misses >= ATTEMPTS {
                if list.len() as u64 >= min {
                    break;
                }
                return Err(format!(
                    "{path}: only {} distinct items of the {min} minItems asks for in {ATTEMPTS} attempts",
                    list.len()
                ));
            }
        }
        Ok(Value::Array(list))
    }

    fn integer(&mut self, schema: &Value, path: &str) -> Result<Value, String> {
        let bound = |key: &str, exclusive: &str, step: f64| {
            schema[key].as_f64().map(|b| {
                if schema[exclusive] == json!(true) {
                    if step > 0.0 {
                        b.floor() + 1.0
                    } else {
                        b.ceil() - 1.0
                    }
                } else if step > 0.0 {
                    b.ceil()
                } else {
                    b.floor()
                }
            })
        };
        let lo = bound("minimum", "exclusiveMinimum", 1.0);
        let hi = bound("maximum", "exclusiveMaximum", -1.0);
        let (lo, hi) = match (lo, hi) {
            (Some(lo), Some(hi)) => (lo, hi),
            (Some(lo), None) => (lo, lo + 1000.0),
            (None, Some(hi)) => (hi - 1000.0, hi),
            (None, None) => (0.0, 1000.0),
        };
        let m = schema["multipleOf"]
            .as_f64()
            .filter(|m| *m >= 1.0)
            .map_or(1.0, f64::floor);
        let (k_lo, k_hi) = ((lo / m).ceil(), (hi / m).floor());
        if k_lo > k_hi {
            return Err(format!(
                "{path}: no integer between {lo} and {hi} that is a multiple of {m}"
            ));
        }
        // Within i64 (the bounds of an `i64` field's schema are none at all).
        let span = ((k_hi - k_lo).min(1e15)) as u64;
        let k = k_lo + self.rng.below(span + 1) as f64;
        Ok(json!((k * m) as i64))
    }

    fn number(&mut self, schema: &Value, path: &str) -> Result<Value, String> {
        let lo = schema["minimum"].as_f64();
        let hi = schema["maximum"].as_f64();
        let (lo, hi) = match (lo, hi) {
            (Some(lo), Some(hi)) => (lo, hi),
            (Some(lo), None) => (lo, lo + 100.0),
            (None, Some(hi)) => (hi - 100.0, hi),
            (None, None) => (0.0, 100.0),
        };
        let fits = |n: f64| {
            let above = if schema["exclusiveMinimum"] == json!(true) {
                n > lo
            } else {
                n >= lo
            };
            let below = if schema["exclusiveMaximum"] == json!(true) {
                n < hi
            } else {
                n <= hi
            };
            let multiple = schema["multipleOf"]
                .as_f64()
                .is_none_or(|m| m == 0.0 || (n / m).fract() == 0.0);
            above && below && multiple
        };
        for _ in 0..ATTEMPTS {
            let n = match schema["multipleOf"].as_f64().filter(|m| *m > 0.0) {
                Some(m) => {
                    let (k_lo, k_hi) = ((lo / m).ceil(), (hi / m).floor());
                    let span = ((k_hi - k_lo).clamp(0.0, 1e9)) as u64;
                    (k_lo + self.rng.below(span + 1) as f64) * m
                }
                None => {
                    // Two decimals, as people write them (and as a JSON text reads back).
                    let hundredths = ((hi - lo) * 100.0).clamp(0.0, 1e12) as u64;
                    ((lo * 100.0).round() + self.rng.below(hundredths + 1) as f64) / 100.0
                }
            };
            if fits(n) {
                return Ok(json!(n));
            }
        }
        Err(format!(
            "{path}: no number between {lo} and {hi} found in {ATTEMPTS} attempts"
        ))
    }

    /// A string of the node (or the string form of an int-or-string).
    fn string(&mut self, schema: &Value, path: &str) -> Result<String, String> {
        let min = count(schema, "minLength").unwrap_or(0);
        let max = count(schema, "maxLength").unwrap_or(u64::MAX).max(min);
        // The node's own constraints and the ones kept as an `allOf` (a type's and a field's).
        let nodes = std::iter::once(schema).chain(schema["allOf"].as_array().into_iter().flatten());
        let patterns: Vec<&str> = nodes
            .clone()
            .filter_map(|n| n["pattern"].as_str())
            .collect();
        let format = nodes.filter_map(|n| n["format"].as_str()).next();
        for attempt in 0..ATTEMPTS {
            let formatted = format.and_then(|f| format_value(f, &mut self.rng));
            // Drawn from each pattern in turn, kept when the others match too.
            let pattern = patterns.get(attempt as usize % patterns.len().max(1));
            let candidate = match (formatted, pattern) {
                (Some(formatted), _) => formatted,
                (None, Some(pattern)) => self.matching(pattern, min, max)?,
                _ => {
                    let len = self
                        .rng
                        .between(min.max(1).min(max), max.min(min.max(1) + 11));
                    (0..len)
                        .map(|_| char::from(b'a' + u8::try_from(self.rng.below(26)).unwrap_or(0)))
                        .collect()
                }
            };
            let len = candidate.chars().count() as u64;
            if (min..=max).contains(&len) && patterns.iter().all(|p| self.matches(p, &candidate)) {
                return Ok(candidate);
            }
        }
        Err(format!(
            "{path}: no string of {min} to {max} chars{}{} found in {ATTEMPTS} attempts",
            if patterns.is_empty() {
                String::new()
            } else {
                format!(" matching {patterns:?}")
            },
            format
                .map(|f| format!(" of format {f}"))
                .unwrap_or_default(),
        ))
    }

    fn compiled(&mut self, pattern: &str) -> Option<&(Hir, Regex)> {
        self.patterns
            .entry(pattern.to_owned())
            .or_insert_with(|| {
                let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
                Some((hir, Regex::new(pattern).ok()?))
            })
            .as_ref()
    }

    fn matches(&mut self, pattern: &str, s: &str) -> bool {
        self.compiled(pattern).is_some_and(|(_, re)| re.is_match(s))
    }

    /// A string the (unanchored) `pattern` matches, aiming at `min..=max` chars.
    fn matching(&mut self, pattern: &str, min: u64, max: u64) -> Result<String, String> {
        let Some((hir, _)) = self.compiled(pattern).cloned() else {
            return Err(format!("the pattern {pattern:?} does not compile"));
        };
        // How far past its minimum an unbounded repetition may go.
        let spread = u32::try_from((min * 2).clamp(4, 64).min(max.max(1))).unwrap_or(4);
        let mut out = String::new();
        draw(&hir, &mut self.rng, spread, &mut out);
        Ok(out)
    }
}

/// Appends to `out` a string `hir` matches (assertions such as `^`, `$`, `\b` add nothing).
fn draw(hir: &Hir, rng: &mut Rng, spread: u32, out: &mut String) {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(literal) => out.push_str(&String::from_utf8_lossy(&literal.0)),
        HirKind::Class(Class::Unicode(class)) => {
            let ranges: Vec<(u32, u32)> = class
                .ranges()
                .iter()
                .map(|r| (u32::from(r.start()), u32::from(r.end())))
                .collect();
            out.push(pick_char(&ranges, rng));
        }
        HirKind::Class(Class::Bytes(class)) => {
            let ranges: Vec<(u32, u32)> = class
                .ranges()
                .iter()
                .map(|r| (u32::from(r.start()), u32::from(r.end().min(0x7f))))
                .filter(|(s, e)| s <= e)
                .collect();
            out.push(pick_char(&ranges, rng));
        }
        HirKind::Repetition(repetition) => {
            let min = repetition.min;
            let max = repetition.max.unwrap_or(min.saturating_add(spread));
            for _ in 0..rng.between(u64::from(min), u64::from(max)) {
                draw(&repetition.sub, rng, spread, out);
            }
        }
        HirKind::Capture(capture) => draw(&capture.sub, rng, spread, out),
        HirKind::Concat(parts) => {
            for part in parts {
                draw(part, rng, spread, out);
            }
        }
        HirKind::Alternation(branches) => {
            if let Some(branch) = rng.pick(branches) {
                draw(branch, rng, spread, out);
            }
        }
    }
}

/// A char of `ranges`, printable ASCII when the class has some.
fn pick_char(ranges: &[(u32, u32)], rng: &mut Rng) -> char {
    let ascii: Vec<(u32, u32)> = ranges
        .iter()
        .map(|&(s, e)| (s.max(0x21), e.min(0x7e)))
        .filter(|(s, e)| s <= e)
        .collect();
    let ranges = if ascii.is_empty() {
        ranges.to_vec()
    } else {
        ascii
    };
    let Some(&(start, end)) = rng.pick(&ranges) else {
        return 'a';
    };
    let code = start + u32::try_from(rng.below(u64::from(end - start) + 1)).unwrap_or(0);
    char::from_u32(code).unwrap_or('a')
}

/// A value of `format`, for the formats the apiserver (or `Validate`) checks; `None` for others.
fn format_value(format: &str, rng: &mut Rng) -> Option<String> {
    let n = rng.below(250) + 1;
    Some(match format {
        "date-time" => format!("2026-01-{:02}T03:04:05Z", n % 28 + 1),
        "date" => format!("2026-02-{:02}", n % 28 + 1),
        "uuid" => format!("123e4567-e89b-12d3-a456-{:012x}", n),
        "ipv4" => format!("10.0.0.{n}"),
        "ipv6" => format!("fd00::{n:x}"),
        "cidr" => format!("10.{n}.0.0/16"),
        "byte" => {
            ["aGVsbG8=", "AAEC", "a3ViZWZvcmdl"][usize::try_from(n % 3).unwrap_or(0)].to_owned()
        }
        "hostname" => format!("host-{n}.example.com"),
        "email" => format!("user{n}@example.com"),
        "uri" => format!("https://example.com/{n}"),
        "duration" => format!("{n}s"),
        "mac" => format!("02:00:00:00:00:{:02x}", n % 256),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_should_follow_bounds_lengths_and_enums() {
        let schema = json!({
            "type": "object", "required": ["name", "size"],
            "properties": {
                "name": { "type": "string", "minLength": 3, "maxLength": 5 },
                "size": { "type": "integer", "minimum": 2, "maximum": 12, "multipleOf": 3 },
                "mode": { "type": "string", "enum": ["a", "b"] },
                "tags": { "type": "array", "items": { "type": "string" } },
            },
        });
        let mut generator = Generator::new(7);
        for _ in 0..50 {
            let value = generator.value(&schema, "", 4).unwrap();
            let name = value["name"].as_str().unwrap();
            assert!((3..=5).contains(&name.len()), "{value}");
            let size = value["size"].as_i64().unwrap();
            assert!([3, 6, 9, 12].contains(&size), "{value}");
            if let Some(mode) = value.get("mode") {
                assert!(mode == "a" || mode == "b", "{value}");
            }
        }
    }

    #[test]
    fn strings_should_match_their_patterns_and_lengths() {
        let quantity = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
        let schema = json!({
            "type": "object", "required": ["id", "size", "label"],
            "properties": {
                "id": { "type": "string", "pattern": "^[a-z]([-a-z0-9]*[a-z0-9])?$", "minLength": 10, "maxLength": 20 },
                "size": { "x-kubernetes-int-or-string": true, "pattern": quantity },
                "label": { "type": "string", "pattern": "^[a-z]+$", "allOf": [{ "pattern": "^[a-c]+$" }] },
            },
        });
        let (id, size) = (
            Regex::new("^[a-z]([-a-z0-9]*[a-z0-9])?$").unwrap(),
            Regex::new(quantity).unwrap(),
        );
        let mut generator = Generator::new(11);
        for _ in 0..100 {
            let value = generator.value(&schema, "spec", 3).unwrap();
            let v = value["id"].as_str().unwrap();
            assert!(id.is_match(v) && (10..=20).contains(&v.len()), "{value}");
            assert!(size.is_match(value["size"].as_str().unwrap()), "{value}");
            assert!(
                value["label"]
                    .as_str()
                    .unwrap()
                    .chars()
                    .all(|c| ('a'..='c').contains(&c)),
                "{value}"
            );
        }
    }

    #[test]
    fn lists_should_have_their_counts_and_distinct_items_or_keys() {
        let schema = json!({
            "type": "object", "required": ["set", "ports"],
            "properties": {
                "set": { "type": "array", "minItems": 3, "maxItems": 4, "x-kubernetes-list-type": "set",
                         "items": { "type": "integer", "minimum": 0, "maximum": 5 } },
                "ports": { "type": "array", "minItems": 2, "x-kubernetes-list-type": "map",
                           "x-kubernetes-list-map-keys": ["port"],
                           "items": { "type": "object", "required": ["port"], "properties": {
                               "port": { "type": "integer", "minimum": 1, "maximum": 3 },
                               "name": { "type": "string" } } } },
            },
        });
        let mut generator = Generator::new(3);
        for _ in 0..100 {
            let value = generator.value(&schema, "spec", 0).unwrap();
            let set = value["set"].as_array().unwrap();
            assert!((3..=4).contains(&set.len()), "{value}");
            assert!(
                set.iter().enumerate().all(|(i, v)| !set[..i].contains(v)),
                "{value}"
            );
            let ports: Vec<&Value> = value["ports"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| &p["port"])
                .collect();
            assert!(ports.len() >= 2, "{value}");
            assert!(
                ports
                    .iter()
                    .enumerate()
                    .all(|(i, v)| !ports[..i].contains(v)),
                "{value}"
            );
        }
    }

    #[test]
    fn an_impossible_field_should_be_named_in_the_error() {
        let schema = json!({
            "type": "object", "required": ["codes"],
            "properties": { "codes": { "type": "array", "minItems": 3, "x-kubernetes-list-type": "set",
                                       "items": { "type": "string", "enum": ["a", "b"] } } },
        });
        let err = Generator::new(1).value(&schema, "spec", 3).unwrap_err();
        assert!(
            err.starts_with("spec.codes: only 2 distinct items"),
            "{err}"
        );
    }

    #[cfg(feature = "cel")]
    #[test]
    fn cel_rules_should_hold_on_every_value() {
        let schema = json!({
            "type": "object", "required": ["low", "high"],
            "x-kubernetes-validations": [{ "rule": "self.low <= self.high" }],
            "properties": {
                "low": { "type": "integer", "minimum": 0, "maximum": 100 },
                "high": { "type": "integer", "minimum": 0, "maximum": 100 },
            },
        });
        let mut generator = Generator::new(5);
        for _ in 0..50 {
            let value = generator.value(&schema, "spec", 2).unwrap();
            assert!(value["low"].as_i64() <= value["high"].as_i64(), "{value}");
        }
    }
}
