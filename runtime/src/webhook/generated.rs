//! Conversions `#[custom_resource(.., conversion(hub = .., generate))]` writes for versions that
//! differ only by fields added (with a default), removed, or renamed (`#[convert(from = "..")]` on
//! a field of the version names the hub's field). They work on the JSON of the object: the
//! renames are applied to `spec`, the result is read as the target version (fields it does not
//! know are dropped by serde, fields it adds take their defaults) and written again; whatever of
//! `spec` and `status` the target could not hold is kept in the annotation
//! `conversion.kubeforge.dev/<source version>` (JSON: pointer → value) and put back when the object
//! is converted to that version again, so a round trip loses nothing.
//!
//! The annotation is part of the object, so anyone may write it. One that does not hold what
//! the version can read (a value of the wrong type, say) is dropped with a warning, and the
//! object converted without it: a bad annotation never fails a read, which would fail every
//! list of the kind through that version in the namespace.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The annotation prefix of fields kept for another version.
pub const KEPT: &str = "conversion.kubeforge.dev/";

/// Converts `object` (of version `from`) to type `T` (version `to`), renaming spec fields by
/// `renames` (`(name here, name there)` pairs, applied from left to right).
///
/// # Errors
///
/// The object cannot be read as `T` (a field changed type, say: such versions need hand-written
/// conversions).
pub fn convert_json<T: Serialize + DeserializeOwned>(
    mut object: Value,
    from: &str,
    to: &str,
    renames: &[(&str, &str)],
) -> Result<Value, String> {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        for (here, there) in renames {
            if let Some(value) = spec.remove(*here) {
                spec.insert((*there).to_owned(), value);
            }
        }
    }
    let api_version = object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map(|(group, _)| format!("{group}/{to}"));
    if let (Some(api_version), Some(map)) = (api_version, object.as_object_mut()) {
        map.insert("apiVersion".to_owned(), Value::String(api_version));
    }
    // The object before the annotation is applied, kept only when there is one (a conversion
    // without it copies nothing more): the fallback when what it holds does not fit.
    let key = format!("{KEPT}{to}");
    let before = object["metadata"]["annotations"]
        .get(&key)
        .is_some()
        .then(|| object.clone());
    restore(&mut object, to)?;
    let (object, typed): (Value, T) = match (serde_json::from_value(object.clone()), before) {
        (Ok(typed), _) => (object, typed),
        (Err(error), Some(_)) if strict() => {
            return Err(format!(
                "the annotation {key} does not fit version {to}: {error}"
            ));
        }
        (Err(error), Some(mut plain)) => {
            // What the annotation holds does not fit the version: drop it, keep the object.
            let value = remove_annotation(&mut plain, to).map(|(_, v)| v);
            dropped(
                &key,
                value,
                format!("it does not fit version {to}: {error}"),
            );
            let typed = serde_json::from_value(plain.clone())
                .map_err(|e| format!("cannot read the object as version {to}: {e}"))?;
            (plain, typed)
        }
        (Err(error), None) => {
            return Err(format!("cannot read the object as version {to}: {error}"));
        }
    };
    let mut out = serde_json::to_value(typed).map_err(|e| e.to_string())?;
    let mut kept = Map::new();
    for part in ["spec", "status"] {
        if let Some(source) = object.get(part) {
            lost(source, out.get(part), &format!("/{part}"), &mut kept);
        }
    }
    if !kept.is_empty() {
        let annotations = &mut out["metadata"]["annotations"];
        if !annotations.is_object() {
            *annotations = Value::Object(Map::new());
        }
        annotations[format!("{KEPT}{from}")] = Value::String(Value::Object(kept).to_string());
    }
    Ok(out)
}

/// Puts back what `version` could not hold when the object left it, and removes the annotation.
/// One that is not a JSON object of pointers is dropped, or, [`strictly`], an error.
fn restore(object: &mut Value, version: &str) -> Result<(), String> {
    let Some((key, saved)) = remove_annotation(object, version) else {
        return Ok(());
    };
    let saved_text = saved.clone();
    let saved = saved
        .as_str()
        .ok_or_else(|| "not a string".to_owned())
        .and_then(|s| serde_json::from_str::<Map<String, Value>>(s).map_err(|e| e.to_string()))
        .and_then(|saved| match saved.keys().find(|p| !kept_pointer(p)) {
            Some(pointer) => Err(format!(
                "{pointer:?} is not a JSON pointer into spec or status"
            )),
            None => Ok(saved),
        });
    let saved = match saved {
        Ok(saved) => saved,
        Err(error) if strict() => {
            return Err(format!(
                "the annotation {key} is not a JSON object of pointers into spec or status: {error}"
            ));
        }
        Err(error) => {
            dropped(
                &key,
                Some(saved_text),
                format!("it is not a JSON object of pointers into spec or status: {error}"),
            );
            return Ok(());
        }
    };
    for (pointer, value) in saved {
        insert_absent(object, &pointer, value);
    }
    Ok(())
}

/// Whether `pointer` is one the conversions keep: into `spec` or `status`.
fn kept_pointer(pointer: &str) -> bool {
    ["/spec", "/status"].iter().any(|root| {
        pointer
            .strip_prefix(root)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

thread_local! {
    static STRICT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static DROPS: std::cell::RefCell<Option<Vec<Dropped>>> = const { std::cell::RefCell::new(None) };
}

/// An annotation a conversion dropped, and why: what the event about the object says.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Dropped {
    /// `conversion.kubeforge.dev/<version>`.
    pub(crate) annotation: String,
    /// Its value (as JSON).
    pub(crate) value: String,
    /// Why it was dropped.
    pub(crate) why: String,
}

/// Logs that `annotation` (holding `value`) was dropped because of `why`, and keeps it for
/// [`collecting_drops`].
fn dropped(annotation: &str, value: Option<Value>, why: String) {
    tracing::warn!(%annotation, %why, "dropping a conversion annotation");
    DROPS.with(|drops| {
        if let Some(drops) = drops.borrow_mut().as_mut() {
            drops.push(Dropped {
                annotation: annotation.to_owned(),
                value: value.map(|v| v.to_string()).unwrap_or_default(),
                why,
            });
        }
    });
}

/// Runs `f` (conversions, which are synchronous) and returns what it returned with the
/// annotations it dropped.
pub(crate) fn collecting_drops<T>(f: impl FnOnce() -> T) -> (T, Vec<Dropped>) {
    let outer = DROPS.with(|d| d.replace(Some(Vec::new())));
    let out = f();
    let drops = DROPS.with(|d| d.replace(outer)).unwrap_or_default();
    (out, drops)
}

fn strict() -> bool {
    STRICT.with(std::cell::Cell::get)
}

/// Runs `f` (conversions, which are synchronous) with an annotation that does not fit its
/// version an error instead of dropped: what admission asks when the annotation is written.
pub(crate) fn strictly<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            STRICT.with(|s| s.set(self.0));
        }
    }
    let _reset = Reset(STRICT.with(|s| s.replace(true)));
    f()
}

/// Removes the annotation that keeps `version`'s fields (and `annotations` when it was the only
/// one); returns its name and value.
fn remove_annotation(object: &mut Value, version: &str) -> Option<(String, Value)> {
    let key = format!("{KEPT}{version}");
    let saved = object["metadata"]["annotations"]
        .as_object_mut()
        .and_then(|a| a.remove(&key))?;
    if object["metadata"]["annotations"]
        .as_object()
        .is_some_and(Map::is_empty)
        && let Some(metadata) = object["metadata"].as_object_mut()
    {
        metadata.remove("annotations");
    }
    Some((key, saved))
}

/// Sets `value` at `pointer` (`/spec/a/b`) unless something is there already, creating the
/// objects on the way.
fn insert_absent(root: &mut Value, pointer: &str, value: Value) {
    let mut node = root;
    let mut parts = pointer.trim_start_matches('/').split('/').peekable();
    while let Some(part) = parts.next() {
        let part = part.replace("~1", "/").replace("~0", "~");
        if !node.is_object() {
            if !node.is_null() {
                return;
            }
            *node = Value::Object(Map::new());
        }
        let Some(map) = node.as_object_mut() else {
            return;
        };
        if parts.peek().is_none() {
            map.entry(part).or_insert(value);
            return;
        }
        node = map.entry(part).or_insert(Value::Null);
    }
}

/// Records in `kept` (by JSON pointer) the parts of `source` that `out` does not have.
fn lost(source: &Value, out: Option<&Value>, path: &str, kept: &mut Map<String, Value>) {
    match (source, out) {
        (Value::Object(source), Some(Value::Object(out))) => {
            for (key, value) in source {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                lost(value, out.get(key), &format!("{path}/{escaped}"), kept);
            }
        }
        (Value::Null, _) => {}
        (_, None) => {
            kept.insert(path.to_owned(), source.clone());
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Serialize, Deserialize)]
    struct Old {
        #[serde(rename = "apiVersion")]
        api_version: String,
        metadata: Value,
        spec: OldSpec,
    }
    #[derive(Serialize, Deserialize)]
    struct OldSpec {
        image: String,
        replicas: i32,
        legacy: Option<String>,
    }
    #[derive(Serialize, Deserialize)]
    struct New {
        #[serde(rename = "apiVersion")]
        api_version: String,
        metadata: Value,
        spec: NewSpec,
    }
    #[derive(Serialize, Deserialize)]
    struct NewSpec {
        image: String,
        instances: i32,
        #[serde(default = "standard")]
        tier: String,
    }
    fn standard() -> String {
        "standard".into()
    }

    #[test]
    fn renamed_added_and_removed_fields_should_survive_a_round_trip() {
        let old = json!({
            "apiVersion": "g/v1", "metadata": { "name": "a" },
            "spec": { "image": "i", "replicas": 2, "legacy": "x" },
        });
        // v1 → v2: `replicas` is `instances` there; `legacy` kept; `tier` defaulted.
        let new =
            convert_json::<New>(old.clone(), "v1", "v2", &[("replicas", "instances")]).unwrap();
        assert_eq!(new["apiVersion"], "g/v2");
        assert_eq!(
            new["spec"],
            json!({ "image": "i", "instances": 2, "tier": "standard" })
        );
        let kept = new["metadata"]["annotations"]["conversion.kubeforge.dev/v1"]
            .as_str()
            .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(kept).unwrap(),
            json!({ "/spec/legacy": "x" })
        );
        // A client sets v2's tier; back to v1 and to v2 again: nothing lost either way.
        let mut edited = new.clone();
        edited["spec"]["tier"] = json!("gold");
        let back = convert_json::<Old>(edited, "v2", "v1", &[("instances", "replicas")]).unwrap();
        assert_eq!(back["spec"], old["spec"]);
        let again = convert_json::<New>(back, "v1", "v2", &[("replicas", "instances")]).unwrap();
        assert_eq!(again["spec"]["tier"], "gold");
        assert_eq!(again["spec"]["instances"], 2);
        assert_eq!(
            again["metadata"]["annotations"]["conversion.kubeforge.dev/v1"],
            new["metadata"]["annotations"]["conversion.kubeforge.dev/v1"]
        );
        assert!(
            again["metadata"]["annotations"]
                .get("conversion.kubeforge.dev/v2")
                .is_none()
        );
    }

    #[test]
    fn an_annotation_that_does_not_fit_its_version_should_be_dropped_not_fail_the_read() {
        let new = json!({
            "apiVersion": "g/v2", "metadata": { "name": "a", "annotations": {
                "conversion.kubeforge.dev/v1": "{\"/spec/legacy\": 7}",
                "keep": "me",
            } },
            "spec": { "image": "i", "instances": 2, "tier": "gold" },
        });
        let old = convert_json::<Old>(new, "v2", "v1", &[("instances", "replicas")]).unwrap();
        assert_eq!(
            old["spec"]["legacy"],
            Value::Null,
            "the wrong-typed value is dropped"
        );
        assert_eq!(old["spec"]["replicas"], 2);
        let annotations = &old["metadata"]["annotations"];
        assert_eq!(annotations["keep"], "me");
        assert!(annotations.get("conversion.kubeforge.dev/v1").is_none());
        // Not JSON at all: dropped too.
        let garbled = json!({
            "apiVersion": "g/v2",
            "metadata": { "name": "a", "annotations": { "conversion.kubeforge.dev/v1": "{" } },
            "spec": { "image": "i", "instances": 2, "tier": "gold" },
        });
        let old = convert_json::<Old>(garbled, "v2", "v1", &[("instances", "replicas")]).unwrap();
        assert_eq!(old["spec"]["replicas"], 2);
    }

    #[test]
    fn strictly_an_annotation_that_does_not_fit_should_be_an_error_saying_why() {
        let with = |text: &str| {
            json!({
                "apiVersion": "g/v2",
                "metadata": { "name": "a", "annotations": { "conversion.kubeforge.dev/v1": text } },
                "spec": { "image": "i", "instances": 2, "tier": "gold" },
            })
        };
        let convert = |object| {
            strictly(|| convert_json::<Old>(object, "v2", "v1", &[("instances", "replicas")]))
        };
        let error = convert(with("{\"/spec/legacy\": 7}")).unwrap_err();
        assert!(
            error.starts_with(
                "the annotation conversion.kubeforge.dev/v1 does not fit version v1: invalid type: integer `7`"
            ),
            "{error}"
        );
        for (text, why) in [
            (
                "{",
                "is not a JSON object of pointers into spec or status: EOF",
            ),
            (
                "[1]",
                "is not a JSON object of pointers into spec or status: invalid type",
            ),
            (
                "{\"/metadata/name\": \"b\"}",
                "\"/metadata/name\" is not a JSON pointer into spec or status",
            ),
        ] {
            let error = convert(with(text)).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
        }
        // One that fits converts, strictly or not; and strictness ends with the call.
        let fits = convert(with("{\"/spec/legacy\": \"x\"}")).unwrap();
        assert_eq!(fits["spec"]["legacy"], "x");
        assert!(!strict());
        assert!(convert_json::<Old>(with("{"), "v2", "v1", &[("instances", "replicas")]).is_ok());
    }
}
