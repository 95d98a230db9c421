//! Round-trip checks of conversions, which `conversion(hub = ..)` generates as a `#[test]` of the
//! user's crate: arbitrary objects of each version, drawn from the version's own structural
//! schema (required and random optional fields, enums, bounds, lists and maps of a few items),
//! converted to the other version and back must come back equal — `metadata.annotations` of
//! `conversion.kubeforge.dev/` aside, where generated conversions keep what the other version
//! cannot hold. A conversion that drops a field fails `cargo test`, with the object that shows it.

use serde_json::{Map, Value, json};

use super::conversion::VersionConversion;
use super::generated::KEPT;

/// A small deterministic generator (xorshift64*): the same cases on every run, so a failure is
/// reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    fn chance(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// An arbitrary value of the structural schema `schema`, `depth` levels deep at most.
fn arbitrary(schema: &Value, rng: &mut Rng, depth: u32) -> Value {
    if let Some(choices) = schema["enum"].as_array().filter(|c| !c.is_empty()) {
        let index = usize::try_from(rng.below(choices.len() as u64)).unwrap_or(0);
        return choices[index].clone();
    }
    if schema["x-kubernetes-int-or-string"] == json!(true) {
        return if rng.chance() {
            json!(rng.below(100))
        } else {
            json!(format!("{}%", rng.below(100)))
        };
    }
    match schema["type"].as_str() {
        Some("object") => object(schema, rng, depth),
        Some("array") => {
            let n = if depth == 0 { 0 } else { rng.below(3) };
            let items = &schema["items"];
            let mut list: Vec<Value> = (0..n).map(|_| arbitrary(items, rng, depth - 1)).collect();
            if schema["x-kubernetes-list-type"] == "set" {
                list.dedup();
            }
            Value::Array(list)
        }
        Some("integer") => {
            let min = schema["minimum"].as_i64().unwrap_or(0);
            let max = schema["maximum"].as_i64().unwrap_or(min + 1000).max(min);
            let span = u64::try_from(max - min).unwrap_or(0);
            json!(min + i64::try_from(rng.below(span + 1)).unwrap_or(0))
        }
        Some("number") => json!(rng.below(10_000) as f64 / 100.0),
        Some("boolean") => json!(rng.chance()),
        Some("string") => json!(string(schema, rng)),
        // Free-form: a small object.
        _ => json!({ "k": rng.below(10) }),
    }
}

fn object(schema: &Value, rng: &mut Rng, depth: u32) -> Value {
    let mut out = Map::new();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            if (required.contains(&name.as_str()) || rng.chance()) && depth > 0 {
                out.insert(name.clone(), arbitrary(property, rng, depth - 1));
            }
        }
    } else if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        for i in 0..rng.below(3) {
            if depth > 0 {
                out.insert(format!("key{i}"), arbitrary(values, rng, depth - 1));
            }
        }
    }
    Value::Object(out)
}

fn string(schema: &Value, rng: &mut Rng) -> String {
    match schema["format"].as_str() {
        Some("date-time") => return "2026-01-02T03:04:05Z".to_owned(),
        Some("byte") => return "aGVsbG8=".to_owned(),
        _ => {}
    }
    let min = schema["minLength"].as_u64().unwrap_or(1).max(1);
    let max = schema["maxLength"].as_u64().unwrap_or(12).max(min);
    let len = min + rng.below(max - min + 1);
    (0..len)
        .map(|_| char::from(b'a' + u8::try_from(rng.below(26)).unwrap_or(0)))
        .collect()
}

/// `object` without the annotations generated conversions keep (and without an empty
/// `annotations` left by removing them).
fn comparable(mut object: Value) -> Value {
    let annotations = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut);
    if let Some(annotations) = annotations {
        annotations.retain(|k, _| !k.starts_with(KEPT));
        if annotations.is_empty()
            && let Some(metadata) = object["metadata"].as_object_mut()
        {
            metadata.remove("annotations");
        }
    }
    object
}

/// A version's schema and how its type reads and writes an object (defaults filled in, as a
/// client of that version sees it).
#[derive(Clone, Copy)]
pub struct Side<'a> {
    /// The version's structural schema.
    pub schema: &'a Value,
    /// Read and written again as the version's type.
    pub normalize: fn(Value) -> Result<Value, String>,
}

/// `object` read as `T` and written again.
///
/// # Errors
///
/// It is not a `T`.
pub fn normalize<T: serde::Serialize + serde::de::DeserializeOwned>(
    object: Value,
) -> Result<Value, String> {
    let typed: T = serde_json::from_value(object).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

/// Checks `cases` arbitrary objects of `conversion`'s version and as many of its hub: each must
/// come back equal (as its type reads it) from a round trip through the other.
///
/// # Panics
///
/// On the first object that does not come back equal, or whose conversion fails, with both
/// versions of it: this is a test.
pub fn check_round_trips(
    conversion: &VersionConversion,
    spoke_side: Side<'_>,
    hub_side: Side<'_>,
    cases: u32,
) {
    let (spoke, hub) = (conversion.spoke, conversion.hub);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(cases));
    for case in 0..cases {
        for (side, info, there, back) in [
            (spoke_side, spoke, conversion.to_hub, conversion.from_hub),
            (hub_side, hub, conversion.from_hub, conversion.to_hub),
        ] {
            let schema = side.schema;
            let mut object = arbitrary(schema, &mut rng, 6);
            object["apiVersion"] = json!(format!("{}/{}", info.group, info.version));
            object["kind"] = json!(info.kind);
            object["metadata"] = json!({ "name": format!("case-{case}") });
            // As a client of this version sees it; a value the type does not read is skipped.
            let Ok(object) = (side.normalize)(object) else {
                continue;
            };
            let (Ok(converted), original) = (there(object.clone()), &object) else {
                continue;
            };
            let returned = back(converted.clone()).unwrap_or_else(|e| {
                panic!("{} {}: the way back failed: {e}\n  original: {original}\n  converted: {converted}", info.kind, info.version)
            });
            let returned = (side.normalize)(returned).unwrap_or_else(|e| {
                panic!(
                    "{} {}: the round trip gives an object it cannot read: {e}",
                    info.kind, info.version
                )
            });
            let (expected, got) = (comparable(original.clone()), comparable(returned));
            assert!(
                expected["spec"] == got["spec"] && expected["status"] == got["status"],
                "{} {} → {} → {} loses data\n  original: {expected}\n  converted: {converted}\n  back: {got}",
                info.kind,
                info.version,
                if info.version == hub.version {
                    spoke.version
                } else {
                    hub.version
                },
                info.version,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arbitrary_values_should_follow_the_schema() {
        let schema = json!({
            "type": "object", "required": ["name", "size"],
            "properties": {
                "name": { "type": "string", "minLength": 3, "maxLength": 5 },
                "size": { "type": "integer", "minimum": 2, "maximum": 4 },
                "mode": { "type": "string", "enum": ["a", "b"] },
                "tags": { "type": "array", "items": { "type": "string" } },
            },
        });
        let mut rng = Rng(7);
        for _ in 0..50 {
            let value = arbitrary(&schema, &mut rng, 4);
            let name = value["name"].as_str().unwrap();
            assert!((3..=5).contains(&name.len()), "{value}");
            assert!(
                (2..=4).contains(&value["size"].as_i64().unwrap()),
                "{value}"
            );
            if let Some(mode) = value.get("mode") {
                assert!(mode == "a" || mode == "b", "{value}");
            }
        }
    }
}
