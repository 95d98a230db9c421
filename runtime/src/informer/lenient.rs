//! Lenient decoding: the stream an informer switches to once an object of its kind does not
//! decode (see [`Informer::run`](super::Informer::run)). A bad object becomes an
//! [`InvalidObject`] carrying its metadata and the error, and the list or watch goes on.
//!
//! The object is buffered as a [`serde_json::Value`] (the same code for every kind), written back
//! to bytes and decoded as `K` from those bytes with the very `serde_json` instantiation the
//! strict stream already uses. So leniency costs a kind no decoder of its own at build time:
//! kube's `DeserializeGuard` decodes `K` from a `serde_value::Value`, a second, differently typed
//! copy of every field's deserializer in each user crate, per kind — 8 % of the LLVM IR of the
//! WebApp operator of `bench/build`. At run time the lenient stream decodes each object about
//! twice; it only runs after a bad object was seen.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::error_boundary::InvalidObject;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// `K`, or what is known of an object that does not decode as `K`.
#[derive(Debug, Clone)]
pub(super) struct Lenient<K>(pub(super) Result<K, InvalidObject>);

impl<'de, K: DeserializeOwned> Deserialize<'de> for Lenient<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let bytes = serde_json::to_vec(&value).map_err(D::Error::custom)?;
        match serde_json::from_slice::<K>(&bytes) {
            Ok(obj) => Ok(Lenient(Ok(obj))),
            Err(error) => invalid(value, &error)
                .map(|invalid| Lenient(Err(invalid)))
                .map_err(D::Error::custom),
        }
    }
}

/// The [`InvalidObject`] of `value`, which did not decode because of `error`; an error if even
/// its metadata does not decode (then nothing can name the object: the list or watch fails, as
/// the strict one would).
fn invalid(
    mut value: Value,
    error: &serde_json::Error,
) -> Result<InvalidObject, serde_json::Error> {
    let metadata = match value.get_mut("metadata") {
        Some(metadata) => serde_json::from_value::<ObjectMeta>(metadata.take())?,
        None => ObjectMeta::default(),
    };
    Ok(InvalidObject {
        error: error.to_string(),
        metadata,
    })
}

impl<K: Resource> Resource for Lenient<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        self.0.as_ref().map_or_else(|bad| &bad.metadata, K::meta)
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0
            .as_mut()
            .map_or_else(|bad| &mut bad.metadata, K::meta_mut)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::api::{ObjectList, WatchEvent};
    use serde_json::json;

    use super::*;

    #[test]
    fn good_objects_should_decode_and_bad_ones_keep_their_metadata() {
        let good: Lenient<ConfigMap> = serde_json::from_value(json!({
            "metadata": { "name": "cm", "namespace": "a" }, "data": { "k": "v" }
        }))
        .unwrap();
        let good = good.0.expect("decodes");
        assert_eq!(good.data.unwrap()["k"], "v");

        let bad: Lenient<Pod> = serde_json::from_value(json!({
            "metadata": { "name": "p", "namespace": "a", "resourceVersion": "7" },
            "spec": { "containers": "not-a-list" }
        }))
        .unwrap();
        assert_eq!(bad.meta().name.as_deref(), Some("p"));
        let bad = bad.0.expect_err("does not decode");
        assert_eq!(bad.metadata.resource_version.as_deref(), Some("7"));
        assert!(bad.error.contains("invalid type"), "{}", bad.error);
    }

    #[test]
    fn a_bad_object_should_not_fail_its_list_or_watch_event_unless_its_metadata_is_bad() {
        let list =
            br#"{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"9"},"items":[
            {"metadata":{"name":"bad"},"spec":{"containers":7}},
            {"metadata":{"name":"good"},"spec":{"containers":[]}}]}"#;
        let list: ObjectList<Lenient<Pod>> = serde_json::from_slice(list).unwrap();
        let names: Vec<_> = list
            .items
            .iter()
            .map(|p| (p.meta().name.clone().unwrap(), p.0.is_ok()))
            .collect();
        assert_eq!(names, [("bad".into(), false), ("good".into(), true)]);

        let event =
            br#"{"type":"MODIFIED","object":{"metadata":{"name":"bad"},"spec":{"containers":{}}}}"#;
        let event: WatchEvent<Lenient<Pod>> = serde_json::from_slice(event).unwrap();
        let WatchEvent::Modified(pod) = event else {
            panic!("a MODIFIED event")
        };
        assert!(pod.0.is_err());

        let nameless = br#"{"metadata":{"name":3},"spec":{}}"#;
        assert!(serde_json::from_slice::<Lenient<Pod>>(nameless).is_err());
    }
}
