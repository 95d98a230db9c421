//! Conversion between the versions of a kind, served as the CRD's conversion webhook: hub and
//! spoke through the storage version. A version that is not the storage version names it with
//! `#[custom_resource(.., conversion(hub = path::to::StorageVersion))]` and converts to and from it
//! with plain Rust (`From`/`TryFrom` both ways); the framework keeps `metadata` as received and sets
//! `apiVersion`.

use std::collections::BTreeMap;
use std::fmt::Display;

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use k8s_openapi::api::core::v1::ObjectReference;

use super::generated::Dropped;
use crate::crd::KindInfo;
use crate::crd::const_str_eq as same;

/// Converts one object (a whole object, as JSON) between a version and its hub.
pub type Convert = fn(Value) -> Result<Value, String>;

/// One version's conversion to and from the hub (the storage version) of its kind.
#[derive(Clone, Copy, Debug)]
pub struct VersionConversion {
    /// The version's kind options (group, kind, plural, version).
    pub spoke: &'static KindInfo,
    /// The hub's.
    pub hub: &'static KindInfo,
    /// Version → hub.
    pub to_hub: Convert,
    /// Hub → version.
    pub from_hub: Convert,
}

/// One version's conversion; submitted by the code `#[custom_resource(.., conversion(hub = ..))]`
/// generates.
#[derive(Debug)]
pub struct ConversionRegistration {
    /// The conversion.
    pub conversion: fn() -> VersionConversion,
}

inventory::collect!(ConversionRegistration);

/// The conversions of one kind: its hub and every spoke.
#[derive(Clone, Debug)]
pub struct KindConversions {
    /// The hub (storage version)'s kind options.
    pub hub: &'static KindInfo,
    /// Spoke version → its conversion.
    pub spokes: BTreeMap<&'static str, VersionConversion>,
}

impl KindConversions {
    /// `/convert/<group>/<plural>`.
    #[must_use]
    pub fn path(&self) -> String {
        format!("/convert/{}/{}", self.hub.group, self.hub.plural)
    }

    /// `/validate-kept/<group>/<plural>`: the check of the annotations its conversions keep
    /// fields in.
    #[must_use]
    pub fn kept_path(&self) -> String {
        format!("/validate-kept/{}/{}", self.hub.group, self.hub.plural)
    }

    /// The kind's versions: the hub's and every spoke's.
    #[must_use]
    pub fn versions(&self) -> Vec<&'static str> {
        let mut versions = vec![self.hub.version];
        versions.extend(self.spokes.keys().filter(|v| **v != self.hub.version));
        versions
    }

    /// The name of the kind's CRD: `<plural>.<group>`.
    #[must_use]
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.hub.plural, self.hub.group)
    }

    /// Converts `object` to `desired` (`group/version`): through the hub unless it is one of
    /// them; `metadata` as received (the apiserver refuses other changes than labels and
    /// annotations), annotations and labels as the conversion left them.
    ///
    /// # Errors
    ///
    /// A version this kind does not have, or the user's conversion failed (its message).
    pub fn convert(&self, object: Value, desired: &str) -> Result<Value, String> {
        let group = self.hub.group;
        let version_of = |api_version: &str| -> Result<String, String> {
            match api_version.split_once('/') {
                Some((g, v)) if g == group => Ok(v.to_owned()),
                _ => Err(format!("{api_version} is not a version of {group}")),
            }
        };
        let from = version_of(object["apiVersion"].as_str().unwrap_or_default())?;
        let to = version_of(desired)?;
        if from == to {
            return Ok(object);
        }
        let metadata = object.get("metadata").cloned();
        let spoke = |version: &str| {
            self.spokes.get(version).ok_or_else(|| {
                format!(
                    "{}.{group} has no conversion for version {version}",
                    self.hub.kind
                )
            })
        };
        let hub = if from == self.hub.version {
            object
        } else {
            (spoke(&from)?.to_hub)(object)?
        };
        let mut converted = if to == self.hub.version {
            hub
        } else {
            (spoke(&to)?.from_hub)(hub)?
        };
        if let (Some(map), Some(mut metadata)) = (converted.as_object_mut(), metadata) {
            for key in ["annotations", "labels"] {
                match map.get("metadata").and_then(|m| m.get(key)) {
                    Some(value) => metadata[key] = value.clone(),
                    None => {
                        if let Some(m) = metadata.as_object_mut() {
                            m.remove(key);
                        }
                    }
                }
            }
            map.insert("metadata".to_owned(), metadata);
            map.insert("apiVersion".to_owned(), Value::String(desired.to_owned()));
        }
        Ok(converted)
    }

    /// Checks the annotations generated conversions keep another version's fields in
    /// (`conversion.kubeforge.dev/<version>`) on `object`: each must name another version of
    /// the kind and hold what that version can read, so converting the object there uses it
    /// (rather than dropping it, as a conversion does with one that does not fit).
    ///
    /// # Errors
    ///
    /// The first annotation that does not, and why.
    pub fn check_kept(&self, object: &Value) -> Result<(), String> {
        let Some(annotations) = object["metadata"]["annotations"].as_object() else {
            return Ok(());
        };
        let sent = object["apiVersion"].as_str().unwrap_or_default();
        let versions = self.versions();
        for key in annotations.keys() {
            let Some(version) = key.strip_prefix(super::generated::KEPT) else {
                continue;
            };
            if !versions.contains(&version) {
                return Err(format!(
                    "the annotation {key} names no version of {}.{} (its versions: {})",
                    self.hub.plural,
                    self.hub.group,
                    versions.join(", ")
                ));
            }
            let target = format!("{}/{version}", self.hub.group);
            if target != sent {
                super::generated::strictly(|| self.convert(object.clone(), &target))?;
            }
        }
        Ok(())
    }

    /// Answers a `ConversionReview` (every object, or a failure naming the first that failed),
    /// with the annotations the conversions dropped, by object (for events).
    #[cfg_attr(not(feature = "webhooks"), allow(dead_code))]
    pub(crate) fn review(
        &self,
        body: &[u8],
    ) -> (ConversionReview, Vec<(ObjectReference, Dropped)>) {
        let request = match serde_json::from_slice::<ConversionReview>(body)
            .map_err(|e| e.to_string())
            .and_then(|r| ConversionRequest::try_from(r).map_err(|e| e.to_string()))
        {
            Ok(request) => request,
            Err(e) => {
                let review = ConversionResponse::invalid(Status::failure(
                    &format!("kubeforge: cannot read the ConversionReview: {e}"),
                    "InvalidRequest",
                ))
                .into_review();
                return (review, Vec::new());
            }
        };
        let mut request = request;
        let desired = request.desired_api_version.clone();
        let objects = std::mem::take(&mut request.objects);
        let response = ConversionResponse::for_request(request);
        let mut converted = Vec::with_capacity(objects.len());
        let mut dropped = Vec::new();
        for object in objects {
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or("?")
                .to_owned();
            let reference = reference(&object);
            let (result, drops) =
                super::generated::collecting_drops(|| self.convert(object, &desired));
            dropped.extend(drops.into_iter().map(|d| (reference.clone(), d)));
            match result {
                Ok(object) => converted.push(object),
                Err(e) => {
                    tracing::warn!(object = %name, %desired, error = %e, "conversion failed");
                    let message = format!("converting {name} to {desired}: {e}");
                    let review = response
                        .failure(Status::failure(&message, "Conversion"))
                        .into_review();
                    return (review, dropped);
                }
            }
        }
        (response.success(converted).into_review(), dropped)
    }
}

/// The reference of `object` (as JSON) for an event about it.
fn reference(object: &Value) -> ObjectReference {
    let text = |key: &str, v: &Value| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let metadata = &object["metadata"];
    ObjectReference {
        api_version: text("apiVersion", object),
        kind: text("kind", object),
        name: text("name", metadata),
        namespace: text("namespace", metadata),
        uid: text("uid", metadata),
        resource_version: text("resourceVersion", metadata),
        ..ObjectReference::default()
    }
}

/// The conversions of every kind linked into this binary, by `(group, kind)`.
#[must_use]
pub fn registered_conversions() -> Vec<KindConversions> {
    let mut kinds: BTreeMap<(&str, &str), KindConversions> = BTreeMap::new();
    for registration in inventory::iter::<ConversionRegistration> {
        let conversion = (registration.conversion)();
        kinds
            .entry((conversion.hub.group, conversion.hub.kind))
            .or_insert_with(|| KindConversions {
                hub: conversion.hub,
                spokes: BTreeMap::new(),
            })
            .spokes
            .insert(conversion.spoke.version, conversion);
    }
    kinds.into_values().collect()
}

/// Spoke `S` → hub `H` through `H: TryFrom<S>` (`From` gives it).
///
/// # Errors
///
/// The object is not an `S`, or the conversion failed.
pub fn to_hub<S, H>(object: Value) -> Result<Value, String>
where
    S: DeserializeOwned,
    H: Serialize + TryFrom<S>,
    <H as TryFrom<S>>::Error: Display,
{
    let spoke: S = serde_json::from_value(object).map_err(|e| format!("not readable: {e}"))?;
    let hub = H::try_from(spoke).map_err(|e| e.to_string())?;
    serde_json::to_value(hub).map_err(|e| e.to_string())
}

/// Hub `H` → spoke `S` through `S: TryFrom<H>`.
///
/// # Errors
///
/// The object is not an `H`, or the conversion failed.
pub fn from_hub<S, H>(object: Value) -> Result<Value, String>
where
    H: DeserializeOwned,
    S: Serialize + TryFrom<H>,
    <S as TryFrom<H>>::Error: Display,
{
    let hub: H = serde_json::from_value(object).map_err(|e| format!("not readable: {e}"))?;
    let spoke = S::try_from(hub).map_err(|e| e.to_string())?;
    serde_json::to_value(spoke).map_err(|e| e.to_string())
}

/// A condition on the kinds of `conversion(hub = ..)`, evaluated at compile time: the checks
/// below are implemented for `Holds<true>` only, so a failed one is a type error carrying its
/// message (no constant-evaluation panic, whose report depends on the toolchain's sources).
pub struct Holds<const OK: bool>;

/// Implemented when the spoke and the hub are versions of one kind.
#[diagnostic::on_unimplemented(
    message = "`conversion(hub = ..)` must name another version of the same kind (same group and kind)",
    label = "not a version of this kind"
)]
pub trait HubOfTheSameKind {}
impl HubOfTheSameKind for Holds<true> {}

/// Implemented when the hub is another version than the spoke.
#[diagnostic::on_unimplemented(
    message = "`conversion(hub = ..)` names this very version",
    label = "this kind's own version"
)]
pub trait HubOfAnotherVersion {}
impl HubOfAnotherVersion for Holds<true> {}

/// Implemented when the hub is the kind's storage version.
#[diagnostic::on_unimplemented(
    message = "the hub of `conversion(hub = ..)` must be the storage version (`storage = false` on the others)",
    label = "not the storage version"
)]
pub trait HubStored {}
impl HubStored for Holds<true> {}

/// Implemented when the spoke has the hub's names and scope (the CRD of the kind has one set).
#[diagnostic::on_unimplemented(
    message = "the versions of one kind must have the same names and scope: `plural`, `singular`, `shortname`s, `category`s or `namespaced` differ from the hub's",
    label = "the hub's names or scope differ from this version's"
)]
pub trait HubWithTheSameNames {}
impl HubWithTheSameNames for Holds<true> {}

/// Compiles only if `spoke` and `hub` (`Holds<same_kind(..)>`) are versions of one kind.
pub const fn assert_hub_of_the_same_kind<T: HubOfTheSameKind>() {}
/// Compiles only if the hub is another version (`Holds<another_version(..)>`).
pub const fn assert_hub_of_another_version<T: HubOfAnotherVersion>() {}
/// Compiles only if the spoke has the hub's names (`Holds<same_names(..)>`).
pub const fn assert_hub_with_the_same_names<T: HubWithTheSameNames>() {}
/// Compiles only if the hub is the storage version (`Holds<stored(..)>`).
pub const fn assert_hub_stored<T: HubStored>() {}

/// Implemented when the spoke has the hub's subresources.
#[diagnostic::on_unimplemented(
    message = "the versions of a kind must have the same subresources: this version and the hub of `conversion(hub = ..)` differ in `status` or `scale` (a client writing through one version, like `kubectl scale` through the version kubectl prefers, would get a 404)",
    label = "its `status` / `scale` differ from this version's"
)]
pub trait SameSubresources {}
impl SameSubresources for Holds<true> {}

/// Compiles only if the spoke has the hub's subresources (`Holds<same_subresources(..)>`).
pub const fn assert_same_subresources<T: SameSubresources>() {}

/// Whether `spoke` and `hub` both have, or both lack, the status and the scale subresource.
pub const fn same_subresources(spoke: &KindInfo, hub: &KindInfo) -> bool {
    spoke.status_subresource == hub.status_subresource
        && spoke.scale.is_some() == hub.scale.is_some()
}

/// Whether `spoke` and `hub` are versions of one kind (same group and kind).
pub const fn same_kind(spoke: &KindInfo, hub: &KindInfo) -> bool {
    same(spoke.group, hub.group) && same(spoke.kind, hub.kind)
}

/// Whether `spoke` and `hub` have the same names and scope, as merging their CRDs requires
/// (`true` for versions of different kinds: [`same_kind`] reports those).
pub const fn same_names(spoke: &KindInfo, hub: &KindInfo) -> bool {
    !same_kind(spoke, hub)
        || (same(spoke.plural, hub.plural)
            && same(spoke.singular, hub.singular)
            && same_list(spoke.short_names, hub.short_names)
            && same_list(spoke.categories, hub.categories)
            && spoke.namespaced == hub.namespaced)
}

const fn same_list(a: &[&str], b: &[&str]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if !same(a[i], b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `hub` is another version than `spoke`.
pub const fn another_version(spoke: &KindInfo, hub: &KindInfo) -> bool {
    !same(spoke.version, hub.version)
}
