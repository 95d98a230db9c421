//! Round-trip checks of conversions, which `conversion(hub = ..)` generates as a `#[test]` of the
//! user's crate: arbitrary objects of each version, drawn from the version's own structural
//! schema (see [`super::arbitrary`]: required and random optional fields, and every marker and
//! CEL rule holding), each valid for the version's own `validate()`, converted to the other
//! version and back must come back equal — `metadata.annotations` of `conversion.kubeforge.dev/`
//! aside, where generated conversions keep what the other version cannot hold. A conversion that
//! drops a field fails `cargo test`, with the object that shows it; a schema no valid object can
//! be drawn from fails it too, naming the field.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::arbitrary::{ATTEMPTS, Generator};
use super::conversion::VersionConversion;
use super::generated::KEPT;
use crate::crd::{CustomResource, KindInfo, Validate};

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
    /// The version's `validate()` on an object ([`validate`]).
    pub validate: fn(&Value) -> Result<(), String>,
}

/// `object` read as `T` and validated as on a create: `T`'s `validate()`.
///
/// # Errors
///
/// It is not a `T`, or not valid (the report).
pub fn validate<T: DeserializeOwned + Validate>(object: &Value) -> Result<(), String> {
    let typed: T = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
    typed
        .validate()
        .map_err(|report| report.to_string().trim().to_owned())
}

/// One object of `info`'s version drawn from `side`'s schema, as its type reads it, and valid.
///
/// # Errors
///
/// What kept the object from being drawn, from being read, or from being valid.
fn attempt(
    generator: &mut Generator,
    side: Side<'_>,
    info: &KindInfo,
    name: &str,
) -> Result<Value, String> {
    let mut object = generator.value(side.schema, "", 6)?;
    object["apiVersion"] = json!(format!("{}/{}", info.group, info.version));
    object["kind"] = json!(info.kind);
    object["metadata"] = json!({ "name": name });
    let object = (side.normalize)(object.clone())
        .map_err(|e| format!("the version's type does not read {object}: {e}"))?;
    (side.validate)(&object).map_err(|e| format!("{object} is not valid: {e}"))?;
    Ok(object)
}

/// A valid object of `info`'s version, drawn from `side`'s schema.
///
/// # Panics
///
/// No valid object was drawn in [`ATTEMPTS`] attempts: this is a test.
fn valid_object(generator: &mut Generator, side: Side<'_>, info: &KindInfo, name: &str) -> Value {
    let mut last = String::new();
    for _ in 0..ATTEMPTS {
        match attempt(generator, side, info, name) {
            Ok(object) => return object,
            Err(e) => last = e,
        }
    }
    panic!(
        "{} {}: no valid object drawn from its schema in {ATTEMPTS} attempts; the last: {last}",
        info.kind, info.version
    )
}

/// `count` objects of the version `K` drawn from its schema, read as `K`, with no attempt
/// repeated: the generator's own test (each must be valid), and a way to see what the
/// round-trip tests send.
///
/// # Errors
///
/// A value could not be drawn (naming the field) or read as `K`.
pub fn arbitrary_objects<K>(count: u32) -> Result<Vec<K>, String>
where
    K: CustomResource + Serialize + DeserializeOwned,
{
    let schema = K::schema();
    let mut generator = Generator::new(0x5eed ^ u64::from(count));
    (0..count)
        .map(|case| {
            let mut object = generator.value(&schema, "", 6)?;
            object["apiVersion"] = json!(format!("{}/{}", K::INFO.group, K::INFO.version));
            object["kind"] = json!(K::INFO.kind);
            object["metadata"] = json!({ "name": format!("case-{case}") });
            serde_json::from_value(object.clone()).map_err(|e| format!("{object}: {e}"))
        })
        .collect()
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

/// Checks `cases` arbitrary valid objects of `conversion`'s version and as many of its hub: each
/// must come back equal (as its type reads it) from a round trip through the other.
///
/// # Panics
///
/// On the first object that does not come back equal, or whose conversion fails, with both
/// versions of it, or when no valid object can be drawn from a schema: this is a test.
pub fn check_round_trips(
    conversion: &VersionConversion,
    spoke_side: Side<'_>,
    hub_side: Side<'_>,
    cases: u32,
) {
    let (spoke, hub) = (conversion.spoke, conversion.hub);
    let mut generator = Generator::new(0x9e37_79b9_7f4a_7c15 ^ u64::from(cases));
    for case in 0..cases {
        for (side, info, there, back) in [
            (spoke_side, spoke, conversion.to_hub, conversion.from_hub),
            (hub_side, hub, conversion.from_hub, conversion.to_hub),
        ] {
            let object = valid_object(&mut generator, side, info, &format!("case-{case}"));
            // A conversion may refuse an object (a `TryFrom` error): not a loss.
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
