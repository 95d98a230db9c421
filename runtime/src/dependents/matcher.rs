//! Whether a stored child already holds what the desired one says: every field the desired
//! object sets has the same value in the stored one. Fields the apiserver or other controllers
//! add (defaults, status, annotations of others) do not count as a difference; a list must have
//! the same length and each element must hold its desired counterpart, in order.
//!
//! A value the apiserver normalizes (a quantity written `1000m` stored as `1`) reads as changed
//! and costs one apply that changes nothing; it never hides a real change. A Secret's
//! `stringData`, which the apiserver stores in `data`, is compared as stored (see
//! `child::unchanged`).

use serde_json::Value;

/// Whether `stored` holds every field of `desired` with the same value.
pub fn holds(desired: &Value, stored: &Value) -> bool {
    match (desired, stored) {
        (Value::Object(want), Value::Object(have)) => want.iter().all(|(key, value)| {
            match have.get(key) {
                Some(found) => holds(value, found),
                // An unset field reads as absent once stored (`null`, an empty map or list).
                None => is_empty(value),
            }
        }),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| holds(w, h))
        }
        (Value::Number(want), Value::Number(have)) => want.as_f64() == have.as_f64(),
        (want, have) => want == have,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.values().all(is_empty),
        Value::Array(list) => list.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::holds;

    #[test]
    fn holds_should_ignore_what_the_server_added() {
        let desired = json!({ "spec": { "replicas": 2, "ports": [{ "port": 80 }] } });
        let stored = json!({
            "metadata": { "uid": "u", "resourceVersion": "7" },
            "spec": { "replicas": 2, "ports": [{ "port": 80, "protocol": "TCP" }] },
            "status": { "readyReplicas": 0 },
        });
        assert!(holds(&desired, &stored));
    }

    #[test]
    fn holds_should_see_changed_missing_and_reordered_values() {
        let stored = json!({ "spec": { "replicas": 2, "args": ["a", "b"] } });
        assert!(!holds(&json!({ "spec": { "replicas": 3 } }), &stored));
        assert!(!holds(&json!({ "spec": { "image": "x" } }), &stored));
        assert!(!holds(&json!({ "spec": { "args": ["b", "a"] } }), &stored));
        assert!(!holds(&json!({ "spec": { "args": ["a"] } }), &stored));
        assert!(holds(&json!({ "spec": { "args": ["a", "b"] } }), &stored));
    }

    #[test]
    fn holds_should_read_unset_fields_as_absent() {
        let stored = json!({ "metadata": { "name": "a" } });
        let desired =
            json!({ "metadata": { "name": "a", "labels": {}, "finalizers": [], "x": null } });
        assert!(holds(&desired, &stored));
        assert!(holds(&json!({ "n": 1.0 }), &json!({ "n": 1 })));
    }
}
