//! Every `#[custom_resource]` registers its CRD here (through `inventory`), so `crdgen` finds all
//! kinds of the binary without a hand-written list; versions of one kind are merged into one CRD.

use std::collections::BTreeMap;

use serde_json::Value;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// One registered kind version; submitted by the code `#[custom_resource]` generates.
#[derive(Debug)]
pub struct Registration {
    /// Builds the single-version CRD of the kind version.
    pub crd: fn() -> CustomResourceDefinition,
    /// Builds the version's structural schema with the macros' cost estimates (see
    /// [`cost`](super::cost)).
    pub schema: fn() -> Value,
}

inventory::collect!(Registration);

/// Why the registered versions of a kind cannot be merged into one CRD.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MergeError {
    /// Two versions of one CRD disagree on a field that must be the same for all versions.
    #[error(
        "CRD {crd}: versions {version} and {other} have different {what}: {difference}; \
         give every `#[custom_resource]` version of the kind the same"
    )]
    Mismatch {
        /// The CRD's name.
        crd: String,
        /// The version that disagrees.
        version: String,
        /// The version it was compared with (the first one merged).
        other: String,
        /// What differs (`scope`, `names`, `labels`, ...).
        what: &'static str,
        /// The values that differ, in both versions (`shortNames: ["wa"] in v1, none in
        /// v1alpha1`).
        difference: String,
    },
    /// The same version is defined twice.
    #[error("CRD {crd}: version {version} is defined twice")]
    DuplicateVersion {
        /// The CRD's name.
        crd: String,
        /// The version defined twice.
        version: String,
    },
    /// The version's CEL rules are too expensive for the apiserver (see [`cost`](super::cost)):
    /// the apiserver would refuse the CRD.
    #[error("CRD {crd}, version {version}: {report}")]
    CelCost {
        /// The CRD's name.
        crd: String,
        /// The version whose rules are too expensive.
        version: String,
        /// What exceeds which limit, by what factor, and what to do.
        report: String,
    },
    /// Not exactly one version is marked as storage version.
    #[error(
        "CRD {crd}: exactly one version must be the storage version, found {found:?}; \
         set `storage = false` on the others"
    )]
    StorageVersion {
        /// The CRD's name.
        crd: String,
        /// The versions marked `storage`.
        found: Vec<String>,
    },
}

/// The single-version CRDs of every `#[custom_resource]` linked into this binary, in no order.
#[must_use]
pub fn registered() -> Vec<CustomResourceDefinition> {
    inventory::iter::<Registration>
        .into_iter()
        .map(|r| (r.crd)())
        .collect()
}

/// Every CRD linked into this binary, versions of one kind merged, sorted by name: what an
/// operator installs at startup and what `crdgen` prints.
///
/// # Errors
///
/// [`MergeError`] when the versions of a kind cannot be merged (see [`merge_crds`]), or
/// [`MergeError::CelCost`] when a version's CEL rules exceed the apiserver's cost limits, with
/// every rule multiplied by how often its node can occur (see [`cost`](super::cost)).
pub fn crds() -> Result<Vec<CustomResourceDefinition>, MergeError> {
    for r in inventory::iter::<Registration> {
        let report = super::cost::check(&(r.schema)());
        if !report.is_ok() {
            let crd = (r.crd)();
            return Err(MergeError::CelCost {
                crd: crd.metadata.name.unwrap_or_default(),
                version: crd
                    .spec
                    .versions
                    .first()
                    .map(|v| v.name.clone())
                    .unwrap_or_default(),
                report: report.to_string(),
            });
        }
    }
    merge_crds(registered())
}

/// `value` as JSON, to show it in a [`MergeError::Mismatch`].
fn json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// What differs between `ours` (of `version`) and `theirs` (of `other`): each differing key of
/// two objects with both values (`shortNames: ["wa"] in v1, none in v1alpha1`), or both values.
fn difference(version: &str, ours: &Value, other: &str, theirs: &Value) -> String {
    let show = |v: Option<&Value>| match v {
        None | Some(Value::Null) => "none".to_owned(),
        Some(v) => v.to_string(),
    };
    let (Value::Object(a), Value::Object(b)) = (ours, theirs) else {
        return format!(
            "{} in {version}, {} in {other}",
            show(Some(ours)),
            show(Some(theirs))
        );
    };
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let parts: Vec<String> = keys
        .into_iter()
        .filter(|k| a.get(*k).filter(|v| !v.is_null()) != b.get(*k).filter(|v| !v.is_null()))
        .map(|k| {
            format!(
                "{k}: {} in {version}, {} in {other}",
                show(a.get(k)),
                show(b.get(k))
            )
        })
        .collect();
    parts.join("; ")
}

/// Orders Kubernetes version names by priority: GA before beta before alpha, higher first
/// (`v2`, `v1`, `v1beta2`, `v1beta1`, `v1alpha1`), then anything else alphabetically.
fn version_priority(name: &str) -> (u8, i64, i64, String) {
    let parse = |s: &str| -> Option<(u8, i64, i64)> {
        let rest = s.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: i64 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((0, -major, 0));
        }
        for (rank, stage) in [(1, "beta"), (2, "alpha")] {
            if let Some(minor) = tail.strip_prefix(stage) {
                return Some((rank, -major, -minor.parse::<i64>().ok()?));
            }
        }
        None
    };
    match parse(name) {
        Some((rank, major, minor)) => (rank, major, minor, String::new()),
        None => (3, 0, 0, name.to_owned()),
    }
}

/// Merges single-version CRDs into one CRD per name, versions ordered by priority, and the CRDs
/// sorted by name. A CRD whose versions differ in shape gets a webhook conversion that fails
/// until an operator configures it (see [`conversion`](super::conversion)), never none.
///
/// # Errors
///
/// [`MergeError`] when versions of one CRD disagree on group, names, scope, labels or annotations,
/// when a version is defined twice, or when not exactly one version is the storage version.
pub fn merge_crds(
    crds: impl IntoIterator<Item = CustomResourceDefinition>,
) -> Result<Vec<CustomResourceDefinition>, MergeError> {
    let mut by_name: BTreeMap<String, CustomResourceDefinition> = BTreeMap::new();
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let Some(merged) = by_name.get_mut(&name) else {
            by_name.insert(name, crd);
            continue;
        };
        for version in crd.spec.versions {
            let other = merged
                .spec
                .versions
                .first()
                .map(|v| v.name.clone())
                .unwrap_or_default();
            let mismatch = |what, ours: Value, theirs: Value| MergeError::Mismatch {
                crd: name.clone(),
                difference: difference(&version.name, &ours, &other, &theirs),
                version: version.name.clone(),
                other: other.clone(),
                what,
            };
            if crd.spec.group != merged.spec.group {
                return Err(mismatch(
                    "groups",
                    json(&crd.spec.group),
                    json(&merged.spec.group),
                ));
            }
            if crd.spec.scope != merged.spec.scope {
                return Err(mismatch(
                    "scopes",
                    json(&crd.spec.scope),
                    json(&merged.spec.scope),
                ));
            }
            if crd.spec.names != merged.spec.names {
                return Err(mismatch(
                    "names",
                    json(&crd.spec.names),
                    json(&merged.spec.names),
                ));
            }
            if crd.metadata.labels != merged.metadata.labels {
                return Err(mismatch(
                    "labels",
                    json(&crd.metadata.labels),
                    json(&merged.metadata.labels),
                ));
            }
            if crd.metadata.annotations != merged.metadata.annotations {
                return Err(mismatch(
                    "annotations",
                    json(&crd.metadata.annotations),
                    json(&merged.metadata.annotations),
                ));
            }
            if merged.spec.versions.iter().any(|v| v.name == version.name) {
                return Err(MergeError::DuplicateVersion {
                    crd: name.clone(),
                    version: version.name,
                });
            }
            merged.spec.versions.push(version);
        }
    }
    let mut out = Vec::with_capacity(by_name.len());
    for (name, mut crd) in by_name {
        crd.spec.versions.sort_by_key(|v| version_priority(&v.name));
        let storage: Vec<String> = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.storage)
            .map(|v| v.name.clone())
            .collect();
        if storage.len() != 1 {
            return Err(MergeError::StorageVersion {
                crd: name,
                found: storage,
            });
        }
        super::conversion::require_conversion(&mut crd);
        out.push(crd);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_priority_should_order_like_kubernetes() {
        let mut names = vec![
            "v1alpha1", "v1", "foo", "v2beta1", "v2", "v1beta2", "v1beta1",
        ];
        names.sort_by_key(|n| version_priority(n));
        assert_eq!(
            names,
            [
                "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"
            ]
        );
    }
}

#[cfg(test)]
mod merge_tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion;

    use super::*;

    fn crd(version: &str, storage: bool, scope: &str) -> CustomResourceDefinition {
        let mut crd = CustomResourceDefinition::default();
        crd.metadata.name = Some("things.t.kubeforge.dev".into());
        crd.spec.group = "t.kubeforge.dev".into();
        crd.spec.scope = scope.into();
        crd.spec.versions = vec![CustomResourceDefinitionVersion {
            name: version.into(),
            served: true,
            storage,
            ..CustomResourceDefinitionVersion::default()
        }];
        crd
    }

    #[test]
    fn merge_crds_should_combine_versions_in_priority_order() {
        let merged = merge_crds([
            crd("v1alpha1", false, "Namespaced"),
            crd("v1", true, "Namespaced"),
        ])
        .unwrap();
        let names: Vec<_> = merged[0]
            .spec
            .versions
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(names, ["v1", "v1alpha1"]);
    }

    #[test]
    fn merge_crds_should_require_exactly_one_storage_version() {
        let err =
            merge_crds([crd("v1", true, "Namespaced"), crd("v2", true, "Namespaced")]).unwrap_err();
        assert_eq!(
            err,
            MergeError::StorageVersion {
                crd: "things.t.kubeforge.dev".into(),
                found: vec!["v2".into(), "v1".into()],
            }
        );
        assert!(matches!(
            merge_crds([crd("v1", false, "Namespaced")]),
            Err(MergeError::StorageVersion { .. })
        ));
    }

    #[test]
    fn merge_crds_should_reject_disagreeing_or_duplicate_versions() {
        assert!(matches!(
            merge_crds([crd("v1", true, "Namespaced"), crd("v2", false, "Cluster")]),
            Err(MergeError::Mismatch { what: "scopes", .. })
        ));
        assert!(matches!(
            merge_crds([
                crd("v1", true, "Namespaced"),
                crd("v1", false, "Namespaced")
            ]),
            Err(MergeError::DuplicateVersion { .. })
        ));
    }

    /// Issue #31: the error said `version v1alpha1 has names different from the other
    /// versions` and not which name.
    #[test]
    fn merge_crds_should_say_which_names_differ_with_both_values() {
        let mut alpha = crd("v1alpha1", false, "Namespaced");
        alpha.spec.names.plural = "things".into();
        let mut v1 = crd("v1", true, "Namespaced");
        v1.spec.names.plural = "things".into();
        v1.spec.names.short_names = Some(vec!["th".into()]);
        let err = merge_crds([v1, alpha]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "CRD things.t.kubeforge.dev: versions v1alpha1 and v1 have different names: \
             shortNames: none in v1alpha1, [\"th\"] in v1; give every `#[custom_resource]` \
             version of the kind the same"
        );
        let err =
            merge_crds([crd("v1", true, "Namespaced"), crd("v2", false, "Cluster")]).unwrap_err();
        assert!(
            err.to_string()
                .contains(r#"different scopes: "Cluster" in v2, "Namespaced" in v1"#),
            "{err}"
        );
    }
}
