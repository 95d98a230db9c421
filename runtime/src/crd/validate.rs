//! [`Validate`]: the apiserver's verdict on an object, computed client-side — on a create
//! ([`Validate::validate`]) or on an update from an old object ([`Validate::validate_update`]).

use garde::Report;
use serde::Serialize;
#[cfg(feature = "cel")]
use serde_json::Value;

/// Client-side validation of the types `#[custom_resource]` and `#[kubeforge::schema]` generate.
///
/// Implemented for every `garde::Validate` type whose context is `()` (the types
/// `#[kubeforge::schema]` generates, and the std types garde knows) or [`ValidationContext`]
/// (the root types of kinds).
///
/// On a kind, [`validate`](Validate::validate) evaluates the field markers and the kind's CEL
/// rules (`rule(...)` on the kind and on fields, as in the CRD's `x-kubernetes-validations`) the
/// way the apiserver does when the object is created: transition rules (`oldSelf`) are skipped,
/// rules with `optional_old_self` see no old object. [`validate_update`](Validate::validate_update)
/// is the verdict on replacing `old` by `self`: transition rules compare with the old value at
/// the same place (list-map entries by key), and a CEL rule that does not use `oldSelf` and fails
/// on a value the update left unchanged is not reported ("ratcheting"). Field markers are not
/// ratcheted: an update that keeps a value a marker now rejects is rejected here, where the
/// apiserver accepts it.
///
/// Verdicts follow what is sent: a field serde leaves out (`skip_serializing_if`) is checked as
/// absent, the way the apiserver sees it (only `required` fails on it), and nothing inside it is
/// checked.
///
/// The errors are `garde` entries (`spec.replicas: Invalid value: -1: replicas must not be
/// negative`) in the apiserver's words for CEL rules; see the `crd` module docs for the markers.
///
/// On other types both methods evaluate the markers alone; `old` is not used.
pub trait Validate {
    /// The verdict on creating `self`: `Err` with every failing marker and rule.
    ///
    /// # Errors
    ///
    /// A [`Report`] of `path: message` entries in the apiserver's words.
    fn validate(&self) -> Result<(), Report>;

    /// The verdict on updating `old` to `self`.
    ///
    /// # Errors
    ///
    /// A [`Report`] of `path: message` entries in the apiserver's words.
    fn validate_update(&self, old: &Self) -> Result<(), Report>;
}

impl<T> Validate for T
where
    T: garde::Validate + ?Sized,
    T::Context: UpdateContext<T>,
{
    fn validate(&self) -> Result<(), Report> {
        garde::Validate::validate_with(self, &T::Context::default())
    }

    fn validate_update(&self, old: &Self) -> Result<(), Report> {
        garde::Validate::validate_with(self, &T::Context::update(old))
    }
}

/// A `garde` validation context that [`Validate::validate_update`] can build from the old object.
///
/// `()` (nothing to compare with) and [`ValidationContext`] (the root types of kinds).
pub trait UpdateContext<T: ?Sized>: Default {
    /// The context of an update from `old`.
    fn update(old: &T) -> Self;
}

impl<T: ?Sized> UpdateContext<T> for () {
    fn update(_old: &T) -> Self {}
}

impl<T: Serialize + ?Sized> UpdateContext<T> for ValidationContext {
    fn update(old: &T) -> Self {
        ValidationContext::update(old)
    }
}

/// What a kind's root type is validated against (its `garde::Validate::Context`): a create
/// ([`Default`]) or an update from an old object.
#[derive(Debug, Clone, Default)]
pub struct ValidationContext {
    /// Only CEL transition rules read the old object (feature `cel`).
    #[cfg(feature = "cel")]
    old: Option<Result<Value, String>>,
}

impl ValidationContext {
    /// The context of a create: no old object.
    #[must_use]
    pub fn create() -> Self {
        Self::default()
    }

    /// The context of an update from `old` (kept as JSON, the form CEL rules see).
    #[must_use]
    pub fn update<T: Serialize + ?Sized>(old: &T) -> Self {
        #[cfg(not(feature = "cel"))]
        let _ = old;
        Self {
            #[cfg(feature = "cel")]
            old: Some(serde_json::to_value(old).map_err(|e| e.to_string())),
        }
    }

    /// The old object's JSON: `None` on a create, `Some(Err(..))` if it could not be serialized.
    #[cfg(feature = "cel")]
    pub(crate) fn old(&self) -> Option<Result<&Value, &str>> {
        self.old
            .as_ref()
            .map(|old| old.as_ref().map_err(String::as_str))
    }
}
