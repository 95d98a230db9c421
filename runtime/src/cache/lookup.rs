//! What a read from the cache asks for: a namespace and selectors, named explicitly.

use std::fmt;

/// Which cached objects [`Cache::store`](super::Cache::store) should read: all namespaces, one,
/// or a set, and the exact label and field selectors of the informers that cache them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lookup {
    pub(super) namespaces: crate::Namespaces,
    pub(super) labels: Option<String>,
    pub(super) fields: Option<String>,
}

impl Lookup {
    /// Objects of every namespace (or cluster-scoped ones), cached without selectors.
    pub fn all() -> Self {
        Self::default()
    }

    /// Objects of `namespace`, served by an informer of that namespace or of all namespaces.
    pub fn namespace(namespace: impl Into<String>) -> Self {
        Self::namespaces(crate::Namespaces::one(namespace))
    }

    /// Objects of `namespace`, or of all namespaces for `None`.
    pub fn scope(namespace: Option<&str>) -> Self {
        Self::namespaces(namespace.map(str::to_owned).into())
    }

    /// Objects of these namespaces (a controller's [`Wiring::namespaces`]), each served by an
    /// informer of its namespace or of all namespaces, read as one store.
    ///
    /// [`Wiring::namespaces`]: crate::controller::Wiring::namespaces
    pub fn namespaces(namespaces: crate::Namespaces) -> Self {
        Self {
            namespaces,
            ..Self::default()
        }
    }

    /// Only from an informer with exactly this label selector (as given to
    /// [`InformerConfig::labels`](crate::informer::InformerConfig::labels)).
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.labels = Some(selector.into());
        self
    }

    /// Only from an informer with exactly this field selector.
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.fields = Some(selector.into());
        self
    }
}

impl fmt::Display for Lookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespaces.is_all() {
            f.write_str("all namespaces")?;
        } else if let Some(ns) = self.namespaces.single() {
            write!(f, "namespace {ns}")?;
        } else {
            write!(f, "namespaces {}", self.namespaces)?;
        }
        match (&self.labels, &self.fields) {
            (None, None) => f.write_str(" without selectors"),
            (labels, fields) => {
                for (what, selector) in [("labels", labels), ("fields", fields)] {
                    if let Some(selector) = selector {
                        write!(f, ", {what} {selector}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// No informer of the cache serves a [`Lookup`].
#[derive(Clone, Debug, thiserror::Error)]
#[error(
    "nothing caches {kind} for {lookup}; cached of this kind: {}",
    if cached.is_empty() { "nothing".to_owned() } else { cached.join(", ") }
)]
pub struct NotCached {
    /// The kind asked for (`apiVersion kind`, for example `v1 ConfigMap`).
    pub kind: String,
    /// What was asked.
    pub lookup: Lookup,
    /// The informers of this kind the cache has (resource URL with selectors).
    pub cached: Vec<String>,
}

impl NotCached {
    pub(super) fn new<K: kube::Resource<DynamicType = ()>>(
        lookup: &Lookup,
        cached: Vec<String>,
    ) -> Self {
        Self {
            kind: format!("{} {}", K::api_version(&()), K::kind(&())),
            lookup: lookup.clone(),
            cached,
        }
    }
}
