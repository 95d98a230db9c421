//! Compatibility between two releases of CRDs: what changed from the CRDs of the last release to
//! the ones the code generates now, per CRD and per version, each change judged by a rule.
//!
//! [`compare`] is pure: it takes the two sets of [`CustomResourceDefinition`]s and returns
//! [`Finding`]s, each with a [`Class`] (`breaking`, `needs-review`, `needs-migration`, `safe`),
//! the CRD, the version, a readable path (`spec.env[*].name`; `[*]` is a list's items, `.*` a
//! map's values), the rule's id and a message naming both. [`judge`] applies the operator's accept list
//! ([`Acceptance`]: deliberate breaks, each with its reason) and reports the entries that match
//! nothing. `crdgen --compat PREVIOUS` is the command line around them.
//!
//! The rules (the book's reference `compat-oracle.md` shows each against what the apiserver
//! does):
//!
//! | rule | class |
//! |---|---|
//! | `crd-removed`, `group-changed`, `kind-changed`, `plural-changed`, `list-kind-changed` | breaking |
//! | `scope-changed` | breaking: the apiserver refuses the update (the scope is immutable) |
//! | `crd-added`, `singular-changed`, `short-names-changed`, `categories-changed`, `printer-columns-changed`, `version-added`, `version-served` | safe (kubectl only, or nothing existing changes) |
//! | `version-removed`, `version-unserved` | breaking when it was served (clients using it fail) |
//! | `stored-version-removed` | needs-migration: objects may still be stored in it |
//! | `storage-version-changed` | needs-migration with a conversion webhook (or identical schemas), else breaking |
//! | `served-version-lacks-field`, `served-version-type-differs`, `served-version-field-dropped` | breaking: without a conversion webhook, a served version that lacks a field of the storage version (a read and write-back through it deletes the field), declares another type, or has a field the storage version lacks (dropped on every write) |
//! | `subresource-removed`, `subresource-changed` | breaking |
//! | `subresource-added` | breaking for `status` (writes of the object itself then ignore its status), safe for `scale` |
//! | `field-removed` | breaking; needs-migration in a version that is not the storage version of a CRD converted by a webhook (the conversion must carry it); safe where unknown fields are preserved |
//! | `field-added` | safe (a new required field is `required-added`) |
//! | `type-changed` | breaking; safe when widened (integer or string to int-or-string, in either form, anything to untyped) |
//! | `required-added` / `required-removed` | breaking (safe when the field has a default) / safe |
//! | `enum-added`, `enum-value-removed` / `enum-value-added`, `enum-removed` | breaking / safe |
//! | `minimum-…`, `maximum-…`, `min-length-…`, `max-length-…`, `min-items-…`, `max-items-…`, `min-properties-…`, `max-properties-…` `tightened` / `loosened` | breaking / safe |
//! | `pattern-added`, `format-changed`, `multiple-of-changed` / `pattern-loosened` (anchors removed, an alternative added), `pattern-removed`, `format-removed`, `multiple-of-loosened` (an integer that divides the old one), `multiple-of-removed` | breaking / safe |
//! | `pattern-changed` | needs-review: two regular expressions, which kubeforge cannot compare |
//! | `list-type-changed`, `list-map-keys-changed`, `map-type-changed` | breaking |
//! | `default-changed`, `default-removed` / `default-added` | breaking / safe |
//! | `nullable-removed` | safe on an optional field without a default (the apiserver drops a null), else breaking |
//! | `preserve-unknown-fields-removed`, `embedded-resource-changed` | breaking |
//! | `nullable-added`, `preserve-unknown-fields-added` | safe |
//! | `validation-added` (a CEL rule), `validation-added-transition` (one reading `oldSelf`: judges updates), `validation-added-ratcheting` (with `optionalOldSelf`: judges creates too) / `validation-removed` | breaking (a rule is judged by what it refuses) / safe |
//! | `composition-changed` / `composition-loosened` (`anyOf` branches added, `allOf` ones removed), `composition-removed` | breaking / safe; branches compare as a set, and controller-gen's `anyOf` of an int-or-string is part of its type |
//!
//! # Examples
//!
//! ```
//! use kubeforge::crd::compat::{Class, compare};
//! use kubeforge::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
//!
//! let crd = |replicas: &str| -> CustomResourceDefinition {
//!     serde_json::from_value(serde_json::json!({
//!         "metadata": {"name": "webapps.apps.example.dev"},
//!         "spec": {
//!             "group": "apps.example.dev", "scope": "Namespaced",
//!             "names": {"kind": "WebApp", "plural": "webapps"},
//!             "versions": [{"name": "v1", "served": true, "storage": true, "schema": {
//!                 "openAPIV3Schema": {"type": "object", "properties": {"spec": {
//!                     "type": "object", "properties": {replicas: {"type": "integer"}}}}}}}]
//!         }
//!     }))
//!     .unwrap()
//! };
//! let findings = compare(&[crd("replicas")], &[crd("instances")]);
//! let removed = &findings[0];
//! assert_eq!((removed.class, removed.rule), (Class::Breaking, "field-removed"));
//! assert_eq!(removed.path, "spec.replicas");
//! assert!(removed.message.contains("renamed to `instances`"), "{}", removed.message);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// How much a change matters to the users of a CRD.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Objects, clients or stored data that worked with the previous release fail or lose data.
    Breaking,
    /// kubeforge cannot decide whether what worked still works (two regular expressions): a
    /// person must look. Fails the gate like a breaking change until an entry of the accept list
    /// records the review, with its reason.
    NeedsReview,
    /// Works if the operator runs a storage migration (or its conversion carries the data)
    /// before the previous version goes away.
    NeedsMigration,
    /// Nothing that worked stops working; reported so that a reviewer sees it.
    Safe,
}

impl Class {
    /// `breaking`, `needs-review`, `needs-migration` or `safe`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Breaking => "breaking",
            Class::NeedsReview => "needs-review",
            Class::NeedsMigration => "needs-migration",
            Class::Safe => "safe",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every rule [`compare`] applies, with the classes its findings can have (the compat oracle,
/// `tests/integration/compat_oracle/`, has a case for each on the real apiserver).
pub const RULES: &[(&str, &[Class])] = {
    use Class::{Breaking as B, NeedsMigration as M, NeedsReview as R, Safe as S};
    &[
        ("crd-removed", &[B]),
        ("crd-added", &[S]),
        ("group-changed", &[B]),
        ("kind-changed", &[B]),
        ("plural-changed", &[B]),
        ("list-kind-changed", &[B]),
        ("scope-changed", &[B]),
        ("singular-changed", &[S]),
        ("short-names-changed", &[S]),
        ("categories-changed", &[S]),
        ("printer-columns-changed", &[S]),
        ("version-added", &[S]),
        ("version-served", &[S]),
        ("version-removed", &[B, S]),
        ("version-unserved", &[B]),
        ("stored-version-removed", &[M]),
        ("storage-version-changed", &[B, M]),
        ("served-version-lacks-field", &[B]),
        ("served-version-type-differs", &[B]),
        ("served-version-field-dropped", &[B]),
        ("subresource-added", &[B, S]),
        ("subresource-removed", &[B]),
        ("subresource-changed", &[B]),
        ("field-removed", &[B, M, S]),
        ("field-added", &[S]),
        ("type-changed", &[B, S]),
        ("required-added", &[B, S]),
        ("required-removed", &[S]),
        ("enum-added", &[B]),
        ("enum-value-removed", &[B]),
        ("enum-value-added", &[S]),
        ("enum-removed", &[S]),
        ("minimum-tightened", &[B]),
        ("minimum-loosened", &[S]),
        ("maximum-tightened", &[B]),
        ("maximum-loosened", &[S]),
        ("min-length-tightened", &[B]),
        ("min-length-loosened", &[S]),
        ("max-length-tightened", &[B]),
        ("max-length-loosened", &[S]),
        ("min-items-tightened", &[B]),
        ("min-items-loosened", &[S]),
        ("max-items-tightened", &[B]),
        ("max-items-loosened", &[S]),
        ("min-properties-tightened", &[B]),
        ("min-properties-loosened", &[S]),
        ("max-properties-tightened", &[B]),
        ("max-properties-loosened", &[S]),
        ("pattern-added", &[B]),
        ("pattern-changed", &[R]),
        ("pattern-loosened", &[S]),
        ("pattern-removed", &[S]),
        ("format-changed", &[B]),
        ("format-removed", &[S]),
        ("multiple-of-changed", &[B]),
        ("multiple-of-loosened", &[S]),
        ("multiple-of-removed", &[S]),
        ("list-type-changed", &[B]),
        ("list-map-keys-changed", &[B]),
        ("map-type-changed", &[B]),
        ("default-changed", &[B]),
        ("default-removed", &[B]),
        ("default-added", &[S]),
        ("nullable-removed", &[B, S]),
        ("nullable-added", &[S]),
        ("preserve-unknown-fields-removed", &[B]),
        ("preserve-unknown-fields-added", &[S]),
        ("embedded-resource-changed", &[B]),
        ("validation-added", &[B]),
        ("validation-added-transition", &[B]),
        ("validation-added-ratcheting", &[B]),
        ("validation-removed", &[S]),
        ("composition-changed", &[B]),
        ("composition-loosened", &[S]),
        ("composition-removed", &[S]),
    ]
};

/// One change between the previous and the current CRDs, judged by one rule.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// How much it matters.
    pub class: Class,
    /// The CRD's name (the previous one's, when its name changed).
    pub crd: String,
    /// The version the change is in; `None` for a change of the whole CRD.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where: a field of the version's schema (`spec.env[*].name`; `[*]` is a list's items, `.*`
    /// a map's values, `<root>` the schema's root) or of the CRD (`spec.scope`,
    /// `spec.versions[v1].served`).
    pub path: String,
    /// The rule's id, such as `field-removed`.
    pub rule: &'static str,
    /// What changed and what it does to users, naming the field and the rule.
    pub message: String,
}

impl fmt::Display for Finding {
    /// `breaking: webapps.apps.kubeforge.dev v1 spec.replicas: field-removed: …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.class, self.crd)?;
        if let Some(version) = &self.version {
            write!(f, " {version}")?;
        }
        write!(f, " {}: {}: {}", self.path, self.rule, self.message)
    }
}

/// Compares the CRDs of the previous release with the current ones, CRD by CRD (matched by name,
/// else by kind) and version by version; the findings come in the order of the previous CRDs'
/// names, then of their versions and fields.
#[must_use]
pub fn compare(
    previous: &[CustomResourceDefinition],
    current: &[CustomResourceDefinition],
) -> Vec<Finding> {
    let mut out = Vec::new();
    let name = |crd: &CustomResourceDefinition| crd.metadata.name.clone().unwrap_or_default();
    let mut previous: Vec<_> = previous.iter().collect();
    previous.sort_by_key(|crd| name(crd));
    let mut unmatched: Vec<_> = current.iter().collect();
    unmatched.sort_by_key(|crd| name(crd));
    let mut pairs = Vec::new();
    let mut removed = Vec::new();
    for prev in previous {
        let same_name = unmatched.iter().position(|cur| name(cur) == name(prev));
        match same_name.or_else(|| {
            (unmatched.iter()).position(|cur| cur.spec.names.kind == prev.spec.names.kind)
        }) {
            Some(i) => pairs.push((prev, unmatched.remove(i))),
            None => removed.push(prev),
        }
    }
    for (prev, cur) in pairs {
        crd(&mut out, &name(prev), prev, cur);
    }
    for prev in removed {
        let served = prev.spec.versions.iter().filter(|v| v.served).count();
        out.push(Finding {
            class: Class::Breaking,
            crd: name(prev),
            version: None,
            path: "<crd>".to_owned(),
            rule: "crd-removed",
            message: format!(
                "the CRD is no longer generated: clients of its {served} served version(s) fail, \
                 and deleting it deletes every object of the kind"
            ),
        });
    }
    for cur in unmatched {
        out.push(Finding {
            class: Class::Safe,
            crd: name(cur),
            version: None,
            path: "<crd>".to_owned(),
            rule: "crd-added",
            message: "a new CRD".to_owned(),
        });
    }
    out
}

/// Adds `finding` built from its parts.
fn push(
    out: &mut Vec<Finding>,
    class: Class,
    (crd, version): (&str, Option<&str>),
    path: &str,
    rule: &'static str,
    message: String,
) {
    out.push(Finding {
        class,
        crd: crd.to_owned(),
        version: version.map(str::to_owned),
        path: if path.is_empty() { "<root>" } else { path }.to_owned(),
        rule,
        message,
    });
}

/// The names and scope of one CRD, then its versions.
fn crd(
    out: &mut Vec<Finding>,
    name: &str,
    prev: &CustomResourceDefinition,
    cur: &CustomResourceDefinition,
) {
    let (p, c) = (&prev.spec, &cur.spec);
    if p.scope != c.scope {
        let message = format!(
            "spec.scope changed from {} to {}: the apiserver refuses this update of the CRD (the \
             scope is immutable); a kind of another scope needs a new CRD (another group, or \
             another plural and kind), and the objects must be copied to it",
            p.scope, c.scope
        );
        push(
            out,
            Class::Breaking,
            (name, None),
            "spec.scope",
            "scope-changed",
            message,
        );
    }
    names(out, name, p, c);
    versions(out, name, prev, cur);
}

/// The names of one CRD: those in its API breaking, kubectl's safe.
fn names(
    out: &mut Vec<Finding>,
    name: &str,
    p: &CustomResourceDefinitionSpec,
    c: &CustomResourceDefinitionSpec,
) {
    let singular = |spec: &CustomResourceDefinitionSpec| {
        (spec.names.singular.clone()).unwrap_or_else(|| spec.names.kind.to_lowercase())
    };
    let list_kind = |spec: &CustomResourceDefinitionSpec| {
        (spec.names.list_kind.clone()).unwrap_or_else(|| format!("{}List", spec.names.kind))
    };
    let names = [
        (
            "spec.group",
            "group-changed",
            p.group.clone(),
            c.group.clone(),
        ),
        (
            "spec.names.kind",
            "kind-changed",
            p.names.kind.clone(),
            c.names.kind.clone(),
        ),
        (
            "spec.names.plural",
            "plural-changed",
            p.names.plural.clone(),
            c.names.plural.clone(),
        ),
        (
            "spec.names.listKind",
            "list-kind-changed",
            list_kind(p),
            list_kind(c),
        ),
    ];
    for (path, rule, was, is) in names {
        if was != is {
            let what = match rule {
                "group-changed" => {
                    "the group is part of the CRD's name, so this is a new CRD: the objects stored \
                     under the old one are not moved to it"
                }
                "plural-changed" => {
                    "the plural is part of the CRD's name, so this is a new CRD: the apiserver \
                     does not serve it while the old one holds the same kind in the group \
                     (NamesAccepted False), and the objects stored under the old one are not \
                     moved to it"
                }
                "kind-changed" => {
                    "the apiserver refuses this update of an established CRD (spec.names.kind is \
                     immutable): a new kind needs a new CRD, and the objects must be copied to it"
                }
                _ => {
                    "clients that decode lists by their kind fail (the list responses of every \
                     version carry the new one)"
                }
            };
            let message = format!("{path} changed from `{was}` to `{is}`: {what}");
            push(out, Class::Breaking, (name, None), path, rule, message);
        }
    }
    let (was, is) = (singular(p), singular(c));
    if was != is {
        let message = format!(
            "spec.names.singular changed from `{was}` to `{is}` (kubectl only: `kubectl get \
             {was}` stops working; the API, RBAC rules and manifests name the plural)"
        );
        push(
            out,
            Class::Safe,
            (name, None),
            "spec.names.singular",
            "singular-changed",
            message,
        );
    }
    let lists = [
        (
            "spec.names.shortNames",
            "short-names-changed",
            &p.names.short_names,
            &c.names.short_names,
        ),
        (
            "spec.names.categories",
            "categories-changed",
            &p.names.categories,
            &c.names.categories,
        ),
    ];
    for (path, rule, was, is) in lists {
        let (was, is) = (set(was.as_deref()), set(is.as_deref()));
        if was != is {
            let message = format!(
                "{path} changed from {was:?} to {is:?} (kubectl only; reported for the release notes)"
            );
            push(out, Class::Safe, (name, None), path, rule, message);
        }
    }
}

/// `list` as a set.
/// Whether `divisor` divides `value`, both positive integers (whole numbers exactly
/// representable): then every multiple of `value` is one of `divisor`.
fn divides(divisor: f64, value: f64) -> bool {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    let whole = |v: f64| v.fract() == 0.0 && v > 0.0 && v <= EXACT;
    whole(divisor) && whole(value) && value % divisor == 0.0
}

fn set(list: Option<&[String]>) -> BTreeSet<&str> {
    list.unwrap_or_default()
        .iter()
        .map(String::as_str)
        .collect()
}

/// Whether `crd` converts between its versions through a webhook.
fn webhook_converts(crd: &CustomResourceDefinition) -> bool {
    (crd.spec.conversion.as_ref()).is_some_and(|c| c.strategy == "Webhook")
}

/// The storage version of `crd`.
fn storage(crd: &CustomResourceDefinition) -> Option<&CustomResourceDefinitionVersion> {
    crd.spec.versions.iter().find(|v| v.storage)
}

/// The schema of `version`, if it has one.
fn schema(version: &CustomResourceDefinitionVersion) -> Option<&JSONSchemaProps> {
    (version.schema.as_ref()).and_then(|s| s.open_api_v3_schema.as_ref())
}

/// The versions of one CRD: removed, no longer served, added, the storage version, and the
/// schema, printer columns and subresources of every version in both.
fn versions(
    out: &mut Vec<Finding>,
    name: &str,
    prev: &CustomResourceDefinition,
    cur: &CustomResourceDefinition,
) {
    let webhook = webhook_converts(cur);
    let stored = |v: &str| {
        storage(prev).is_some_and(|s| s.name == v)
            || (prev
                .status
                .as_ref()
                .and_then(|s| s.stored_versions.as_ref()))
            .is_some_and(|stored| stored.iter().any(|s| s == v))
    };
    for pv in &prev.spec.versions {
        let Some(cv) = cur.spec.versions.iter().find(|v| v.name == pv.name) else {
            version_removed(out, name, pv, stored(&pv.name));
            continue;
        };
        let at = (name, Some(pv.name.as_str()));
        let path = format!("spec.versions[{}].served", pv.name);
        match (pv.served, cv.served) {
            (true, false) => {
                let message = format!(
                    "{} is no longer served: clients using it fail (404), although the version \
                     is still in the CRD",
                    pv.name
                );
                push(out, Class::Breaking, at, &path, "version-unserved", message);
            }
            (false, true) => {
                let message = format!("{} is served again", pv.name);
                push(out, Class::Safe, at, &path, "version-served", message);
            }
            _ => {}
        }
        version_extras(out, at, pv, cv);
        if let (Some(p), Some(c)) = (schema(pv), schema(cv)) {
            let removal = if webhook && !cv.storage {
                Class::NeedsMigration
            } else {
                Class::Breaking
            };
            let mut walk = Walk { at, removal, out };
            walk.node("", p, c, false);
        }
    }
    for cv in &cur.spec.versions {
        if !prev.spec.versions.iter().any(|v| v.name == cv.name) {
            let at = (name, Some(cv.name.as_str()));
            let path = format!("spec.versions[{}]", cv.name);
            let message = format!("a new version {}", cv.name);
            push(out, Class::Safe, at, &path, "version-added", message);
        }
    }
    storage_version(out, name, prev, cur);
    let before = served_versions(name, prev);
    let key = |f: &Finding| (f.rule, f.version.clone(), f.path.clone());
    let known: BTreeSet<_> = before.iter().map(key).collect();
    out.extend(
        served_versions(name, cur)
            .into_iter()
            .filter(|f| !known.contains(&key(f))),
    );
}

/// The schema's fields, flattened: path → (type, whether it preserves unknown fields).
fn flatten(schema: &JSONSchemaProps, path: &str, out: &mut BTreeMap<String, (String, bool)>) {
    let preserves = schema.x_kubernetes_preserve_unknown_fields == Some(true);
    out.insert(path.to_owned(), (type_of(schema).to_owned(), preserves));
    for (name, field) in schema.properties.iter().flatten() {
        if path.is_empty() && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        flatten(field, &child(path, name), out);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &schema.items {
        flatten(items, &format!("{path}[*]"), out);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &schema.additional_properties {
        flatten(values, &format!("{path}.*"), out);
    }
}

/// The paths of `fields` that hold `path`: its ancestors (the root `""` first) and itself.
fn holders<'a>(
    fields: &'a BTreeMap<String, (String, bool)>,
    path: &'a str,
) -> impl Iterator<Item = (&'a String, &'a (String, bool))> {
    fields.iter().filter(move |(p, _)| {
        p.is_empty()
            || path == p.as_str()
            || (path.starts_with(p.as_str())
                && matches!(path.as_bytes().get(p.len()), Some(b'.' | b'[')))
    })
}

/// Whether a value at `path` survives a write through a schema with `fields`: the schema names
/// it, or an ancestor keeps unknown fields.
fn kept(fields: &BTreeMap<String, (String, bool)>, path: &str) -> bool {
    fields.contains_key(path)
        || holders(fields, path).any(|(_, (ty, preserves))| *preserves || ty == "any")
}

/// What the served versions of `crd` do to the data of its storage version, when no conversion
/// webhook converts between them (the apiserver's None conversion only changes `apiVersion`):
/// a field the storage version holds that a served version lacks is deleted by a client that
/// reads and writes back through it; a field declared with another type; a field only a served
/// version has, dropped on every write through it.
fn served_versions(name: &str, crd: &CustomResourceDefinition) -> Vec<Finding> {
    let mut out = Vec::new();
    if webhook_converts(crd) {
        return out;
    }
    let Some((storage, Some(stored_schema))) = storage(crd).map(|s| (s, schema(s))) else {
        return out;
    };
    let mut stored = BTreeMap::new();
    flatten(stored_schema, "", &mut stored);
    for version in crd.spec.versions.iter().filter(|v| v.served && !v.storage) {
        let Some(served_schema) = schema(version) else {
            continue;
        };
        let mut served = BTreeMap::new();
        flatten(served_schema, "", &mut served);
        let at = (name, Some(version.name.as_str()));
        let (v, s) = (&version.name, &storage.name);
        // Only the topmost path of a difference: what is below it follows.
        let mut reported: Vec<String> = Vec::new();
        let below = |reported: &[String], path: &str| {
            reported.iter().any(|r| {
                path.starts_with(r.as_str())
                    && matches!(path.as_bytes().get(r.len()), Some(b'.' | b'['))
            })
        };
        for (path, (ty, _)) in &stored {
            if path.is_empty() || below(&reported, path) {
                continue;
            }
            match served.get(path) {
                Some((served_ty, _)) if served_ty != ty && served_ty != "any" && ty != "any" => {
                    let message = format!(
                        "{v} declares the field as {served_ty}, the storage version {s} as {ty}, \
                         and no conversion webhook converts between them: values stored as {ty} \
                         are served unchanged through {v}, so writing them back through {v} \
                         fails validation, and what {v} accepts is stored as {served_ty}"
                    );
                    push(
                        &mut out,
                        Class::Breaking,
                        at,
                        path,
                        "served-version-type-differs",
                        message,
                    );
                    reported.push(path.clone());
                }
                Some(_) => {}
                None if !kept(&served, path) => {
                    let message = format!(
                        "{v} is served but lacks the field, which the storage version {s} holds, \
                         and no conversion webhook carries it: a client that reads an object \
                         through {v} and writes it back (an update, kubectl edit or apply) \
                         deletes the field from storage; declare it in {v} too, or convert \
                         through a webhook"
                    );
                    push(
                        &mut out,
                        Class::Breaking,
                        at,
                        path,
                        "served-version-lacks-field",
                        message,
                    );
                    reported.push(path.clone());
                }
                None => {}
            }
        }
        for path in served.keys() {
            if path.is_empty() || stored.contains_key(path) || below(&reported, path) {
                continue;
            }
            if !kept(&stored, path) {
                let message = format!(
                    "the field is only in {v}, which is served but not the storage version \
                     ({s}), and no conversion webhook carries it: the apiserver drops it from \
                     every write through {v} (reads through the storage version's schema prune \
                     it); declare it in {s} too, or convert through a webhook"
                );
                push(
                    &mut out,
                    Class::Breaking,
                    at,
                    path,
                    "served-version-field-dropped",
                    message,
                );
                reported.push(path.clone());
            }
        }
    }
    out
}

/// A version of the previous CRD that the current one lacks.
fn version_removed(
    out: &mut Vec<Finding>,
    name: &str,
    pv: &CustomResourceDefinitionVersion,
    stored: bool,
) {
    let at = (name, Some(pv.name.as_str()));
    let path = format!("spec.versions[{}]", pv.name);
    let (class, message) = if pv.served {
        (
            Class::Breaking,
            format!(
                "{} was removed: clients using it fail (404), and server-side apply of objects \
                 whose managed fields were written through it fails (500) until those entries \
                 are removed",
                pv.name
            ),
        )
    } else {
        (
            Class::Safe,
            format!("{} was removed; it was not served", pv.name),
        )
    };
    push(out, class, at, &path, "version-removed", message);
    if stored {
        let message = format!(
            "{v} was removed while objects may still be stored as {v} (it was the storage \
             version or is in status.storedVersions): the apiserver refuses the CRD until {v} \
             is gone from status.storedVersions; run a storage migration \
             (kubeforge::crd::migrate_storage) with the previous release, then drop it",
            v = pv.name
        );
        push(
            out,
            Class::NeedsMigration,
            at,
            &path,
            "stored-version-removed",
            message,
        );
    }
}

/// Printer columns and subresources of a version in both CRDs.
fn version_extras(
    out: &mut Vec<Finding>,
    at: (&str, Option<&str>),
    pv: &CustomResourceDefinitionVersion,
    cv: &CustomResourceDefinitionVersion,
) {
    let version = &pv.name;
    if pv.additional_printer_columns != cv.additional_printer_columns {
        let columns = |v: &CustomResourceDefinitionVersion| -> Vec<String> {
            (v.additional_printer_columns.iter().flatten())
                .map(|c| c.name.clone())
                .collect()
        };
        let message = format!(
            "the printer columns changed from {:?} to {:?} (kubectl get only)",
            columns(pv),
            columns(cv)
        );
        let path = format!("spec.versions[{version}].additionalPrinterColumns");
        push(
            out,
            Class::Safe,
            at,
            &path,
            "printer-columns-changed",
            message,
        );
    }
    let (p, c) = (pv.subresources.as_ref(), cv.subresources.as_ref());
    let status = (
        "status",
        p.and_then(|s| s.status.as_ref()).is_some(),
        c.and_then(|s| s.status.as_ref()).is_some(),
    );
    let (p_scale, c_scale) = (
        p.and_then(|s| s.scale.as_ref()),
        c.and_then(|s| s.scale.as_ref()),
    );
    let scale = ("scale", p_scale.is_some(), c_scale.is_some());
    for (subresource, was, is) in [status, scale] {
        let path = format!("spec.versions[{version}].subresources.{subresource}");
        if was && !is {
            let message = format!(
                "the {subresource} subresource was removed: clients writing \
                 .../{subresource} fail"
            );
            push(
                out,
                Class::Breaking,
                at,
                &path,
                "subresource-removed",
                message,
            );
        } else if !was && is && subresource == "status" {
            let message = "a status subresource was added: writes of the object itself now \
                           ignore `status`, so clients and controllers that set the status with \
                           an update or patch of the object lose it silently; they must write \
                           .../status"
                .to_owned();
            push(
                out,
                Class::Breaking,
                at,
                &path,
                "subresource-added",
                message,
            );
        } else if !was && is {
            let message = format!("a {subresource} subresource was added");
            push(out, Class::Safe, at, &path, "subresource-added", message);
        }
    }
    if let (Some(p), Some(c)) = (p_scale, c_scale)
        && p != c
    {
        let message = "the scale subresource's paths changed: autoscalers and kubectl scale \
                       read and write other fields"
            .to_owned();
        let path = format!("spec.versions[{version}].subresources.scale");
        push(
            out,
            Class::Breaking,
            at,
            &path,
            "subresource-changed",
            message,
        );
    }
}

/// A change of the storage version.
fn storage_version(
    out: &mut Vec<Finding>,
    name: &str,
    prev: &CustomResourceDefinition,
    cur: &CustomResourceDefinition,
) {
    let (Some(p), Some(c)) = (storage(prev), storage(cur)) else {
        return;
    };
    if p.name == c.name {
        return;
    }
    let at = (name, Some(c.name.as_str()));
    let path = format!("spec.versions[{}].storage", c.name);
    let (class, how) = if webhook_converts(cur) {
        (
            Class::NeedsMigration,
            "the conversion webhook converts the objects stored as the old version when they are \
             read",
        )
    } else if schema(p) == schema(c) {
        (
            Class::NeedsMigration,
            "the two versions have the same schema, so the apiserver's None conversion loses \
             nothing",
        )
    } else {
        (
            Class::Breaking,
            "the versions differ in shape and no conversion webhook converts the objects stored \
             as the old version: reading them through the new one loses the fields it lacks",
        )
    };
    let message = format!(
        "the storage version changed from {} to {}: {how}; run a storage migration \
         (kubeforge::crd::migrate_storage) before {} can be removed",
        p.name, c.name, p.name
    );
    push(out, class, at, &path, "storage-version-changed", message);
}

/// The walk over one version's schema, in both CRDs at once.
struct Walk<'a> {
    /// The CRD's name and the version.
    at: (&'a str, Option<&'a str>),
    /// The class of a removed field in this version.
    removal: Class,
    out: &'a mut Vec<Finding>,
}

/// A field's path below `parent`.
fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}.{name}")
    }
}

/// The schema's type for comparing: `int-or-string`, the `type`, or `any` without one.
fn type_of(schema: &JSONSchemaProps) -> &str {
    if schema.x_kubernetes_int_or_string == Some(true) {
        "int-or-string"
    } else {
        schema.type_.as_deref().unwrap_or("any")
    }
}

/// The bounds compared by [`Walk::bounds`]: keyword, rule ids (tightened, loosened), whether a
/// larger value is tighter, and the value in a schema.
type Bound = (
    &'static str,
    [&'static str; 2],
    bool,
    fn(&JSONSchemaProps) -> Option<i64>,
);

const COUNTS: [Bound; 6] = [
    (
        "minLength",
        ["min-length-tightened", "min-length-loosened"],
        true,
        |s| s.min_length,
    ),
    (
        "maxLength",
        ["max-length-tightened", "max-length-loosened"],
        false,
        |s| s.max_length,
    ),
    (
        "minItems",
        ["min-items-tightened", "min-items-loosened"],
        true,
        |s| s.min_items,
    ),
    (
        "maxItems",
        ["max-items-tightened", "max-items-loosened"],
        false,
        |s| s.max_items,
    ),
    (
        "minProperties",
        ["min-properties-tightened", "min-properties-loosened"],
        true,
        |s| s.min_properties,
    ),
    (
        "maxProperties",
        ["max-properties-tightened", "max-properties-loosened"],
        false,
        |s| s.max_properties,
    ),
];

/// A numeric bound, as written.
fn said(value: Option<(f64, bool)>, exclusive: &str) -> String {
    match value {
        None => "none".to_owned(),
        Some((v, true)) => format!("{v} ({exclusive})"),
        Some((v, false)) => v.to_string(),
    }
}

impl Walk<'_> {
    fn push(&mut self, class: Class, path: &str, rule: &'static str, message: String) {
        push(self.out, class, self.at, path, rule, message);
    }

    /// Compares one node of the schema, then its children.
    /// `optional`: the field is a property its object does not require.
    fn node(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps, optional: bool) {
        if !self.types(path, prev, cur) {
            return;
        }
        self.enums(path, prev, cur);
        self.numbers(path, prev, cur);
        self.bounds(path, prev, cur);
        self.strings(path, prev, cur);
        self.collections(path, prev, cur);
        self.default(path, prev, cur);
        self.flags(path, prev, cur, optional);
        self.rules(path, prev, cur);
        self.composition(path, prev, cur);
        self.required(path, prev, cur);
        self.properties(path, prev, cur);
        self.items(path, prev, cur);
    }

    /// The type; whether to look further (not after an incompatible change).
    fn types(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) -> bool {
        let (was, is) = (type_of(prev), type_of(cur));
        if was == is {
            return true;
        }
        let widened = is == "any" || (is == "int-or-string" && matches!(was, "integer" | "string"));
        if widened {
            let message = format!(
                "the type was widened from {was} to {is}: every stored value is still valid \
                 (typed clients may now read values they cannot decode)"
            );
            self.push(Class::Safe, path, "type-changed", message);
            return true;
        }
        let message = format!(
            "the type changed from {was} to {is}: objects with a {was} can no longer be created, \
             server-side apply of the stored ones fails (their value does not fit the new type), \
             and clients decoding {was} fail"
        );
        self.push(Class::Breaking, path, "type-changed", message);
        false
    }

    fn enums(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) {
        let values = |s: &JSONSchemaProps| -> Option<Vec<String>> {
            (s.enum_.as_ref()).map(|e| e.iter().map(|v| v.0.to_string()).collect())
        };
        match (values(prev), values(cur)) {
            (Some(_), None) => {
                let message = "the enum was removed: the field takes any value".to_owned();
                self.push(Class::Safe, path, "enum-removed", message);
            }
            (None, Some(is)) => {
                let message = format!(
                    "an enum now limits the field, which took any value, to [{}]: objects with \
                     another value can no longer be created, nor have the field changed to one",
                    is.join(", ")
                );
                self.push(Class::Breaking, path, "enum-added", message);
            }
            (Some(was), Some(is)) => {
                let removed: Vec<_> = was.iter().filter(|v| !is.contains(v)).cloned().collect();
                let added: Vec<_> = is.iter().filter(|v| !was.contains(v)).cloned().collect();
                if !removed.is_empty() {
                    let message = format!(
                        "enum value(s) {} were removed: objects that hold them can no longer be \
                         created, nor have the field set to one (stored objects keep theirs: the \
                         apiserver ratchets unchanged values)",
                        removed.join(", ")
                    );
                    self.push(Class::Breaking, path, "enum-value-removed", message);
                }
                if !added.is_empty() {
                    let message = format!(
                        "enum value(s) {} were added (clients that switch over the values may \
                         meet new ones)",
                        added.join(", ")
                    );
                    self.push(Class::Safe, path, "enum-value-added", message);
                }
            }
            (None, None) => {}
        }
    }

    /// `minimum` and `maximum` with their exclusive flags.
    fn numbers(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) {
        let lower = |s: &JSONSchemaProps| s.minimum.map(|v| (v, s.exclusive_minimum == Some(true)));
        let upper = |s: &JSONSchemaProps| s.maximum.map(|v| (v, s.exclusive_maximum == Some(true)));
        let sides = [
            ("minimum", "exclusiveMinimum", true, lower(prev), lower(cur)),
            (
                "maximum",
                "exclusiveMaximum",
                false,
                upper(prev),
                upper(cur),
            ),
        ];
        for (keyword, exclusive, larger_is_tighter, was, is) in sides {
            if was == is {
                continue;
            }
            // Compared as (value, exclusiveness): a larger minimum, or the same one made
            // exclusive, is tighter; a maximum the other way round.
            let tighter = match (was, is) {
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some((a, ax)), Some((b, bx))) => {
                    if larger_is_tighter {
                        (b, bx) > (a, ax)
                    } else {
                        (b, !bx) < (a, !ax)
                    }
                }
                (None, None) => continue,
            };
            let rules = if larger_is_tighter {
                ["minimum-tightened", "minimum-loosened"]
            } else {
                ["maximum-tightened", "maximum-loosened"]
            };
            let (was, is) = (said(was, exclusive), said(is, exclusive));
            self.bound(path, keyword, rules, tighter, &was, &is);
        }
    }

    /// The counts: lengths, items, properties.
    fn bounds(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) {
        for (keyword, rules, larger_is_tighter, value) in COUNTS {
            let (was, is) = (value(prev), value(cur));
            let tighter = match (was, is) {
                (None, Some(_)) => true,
                (Some(a), Some(b)) if a != b => (b > a) == larger_is_tighter,
                (Some(_), None) => false,
                _ => continue,
            };
            let text = |v: Option<i64>| v.map_or_else(|| "none".to_owned(), |v| v.to_string());
            self.bound(path, keyword, rules, tighter, &text(was), &text(is));
        }
    }

    /// A bound that changed.
    fn bound(
        &mut self,
        path: &str,
        keyword: &str,
        [tightened, loosened]: [&'static str; 2],
        tighter: bool,
        was: &str,
        is: &str,
    ) {
        if tighter {
            let message = format!(
                "{keyword} tightened from {was} to {is}: objects whose value does not meet it \
                 can no longer be created, nor have the field set to such a value (stored \
                 objects keep theirs: the apiserver ratchets unchanged values)"
            );
            self.push(Class::Breaking, path, tightened, message);
        } else {
            let message = format!("{keyword} loosened from {was} to {is}");
            self.push(Class::Safe, path, loosened, message);
        }
    }

    /// `pattern`, `format`, `multipleOf`: any change tightens, a removal loosens; so does a
    /// `multipleOf` that divides the old one (integers only: the apiserver checks a fraction
    /// through a floating-point division, so for fractions what divides is not decided here).
    fn strings(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) {
        let number = |v: Option<f64>| v.map(|v| v.to_string());
        self.pattern(path, prev.pattern.as_deref(), cur.pattern.as_deref());
        let keywords = [
            (
                "format",
                "format-changed",
                "format-removed",
                prev.format.clone(),
                cur.format.clone(),
            ),
            (
                "multipleOf",
                "multiple-of-changed",
                "multiple-of-removed",
                number(prev.multiple_of),
                number(cur.multiple_of),
            ),
        ];
        if let (Some(was), Some(is)) = (prev.multiple_of, cur.multiple_of)
            && divides(is, was)
        {
            let message = format!(
                "multipleOf changed from `{was}` to `{is}`, which divides it: every value that \
                 was a multiple of `{was}` still is one of `{is}`"
            );
            self.push(Class::Safe, path, "multiple-of-loosened", message);
            return;
        }
        for (keyword, changed, removed, was, is) in keywords {
            match (was, is) {
                (Some(was), None) => {
                    let message = format!("{keyword} `{was}` was removed");
                    self.push(Class::Safe, path, removed, message);
                }
                (was, Some(is)) if was.as_ref() != Some(&is) => {
                    let was = was.map_or_else(|| "none".to_owned(), |w| format!("`{w}`"));
                    let message = format!(
                        "{keyword} changed from {was} to `{is}` (any change counts as a \
                         tightening): objects whose value does not match can no longer be \
                         created, nor have the field set to such a value (stored objects keep \
                         theirs: the apiserver ratchets unchanged values)"
                    );
                    self.push(Class::Breaking, path, changed, message);
                }
                _ => {}
            }
        }
    }

    /// `pattern`: removed, added, loosened (anchors removed, an alternative added), or changed
    /// (two regular expressions kubeforge cannot compare: needs review).
    fn pattern(&mut self, path: &str, was: Option<&str>, is: Option<&str>) {
        match (was, is) {
            (Some(was), None) => {
                let message = format!("pattern `{was}` was removed");
                self.push(Class::Safe, path, "pattern-removed", message);
            }
            (None, Some(is)) => {
                let message = format!(
                    "a pattern `{is}` now limits the field: values that do not match it can no \
                     longer be created, nor the field changed to one"
                );
                self.push(Class::Breaking, path, "pattern-added", message);
            }
            (Some(was), Some(is)) if was != is => {
                if loosens(was, is) {
                    let message = format!(
                        "pattern `{was}` changed to `{is}`, which matches every value `{was}` \
                         matched (anchors removed or an alternative added)"
                    );
                    self.push(Class::Safe, path, "pattern-loosened", message);
                } else {
                    let message = format!(
                        "pattern `{was}` changed to `{is}`: kubeforge cannot decide whether every \
                         value `{was}` matched still matches (two regular expressions); check \
                         the values in use, then record the review with its reason in the \
                         accept list"
                    );
                    self.push(Class::NeedsReview, path, "pattern-changed", message);
                }
            }
            _ => {}
        }
    }

    /// `x-kubernetes-list-type`, `-list-map-keys`, `-map-type`: how server-side apply merges.
    fn collections(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) {
        let list = |s: &JSONSchemaProps| {
            let default = if s.type_.as_deref() == Some("array") {
                "atomic"
            } else {
                "none"
            };
            s.x_kubernetes_list_type
                .clone()
                .unwrap_or_else(|| default.to_owned())
        };
        let keys = |s: &JSONSchemaProps| s.x_kubernetes_list_map_keys.clone().unwrap_or_default();
        let map = |s: &JSONSchemaProps| {
            let default = if s.type_.as_deref() == Some("object") {
                "granular"
            } else {
                "none"
            };
            s.x_kubernetes_map_type
                .clone()
                .unwrap_or_else(|| default.to_owned())
        };
        let changes = [
            (
                "x-kubernetes-list-type",
                "list-type-changed",
                list(prev),
                list(cur),
            ),
            (
                "x-kubernetes-list-map-keys",
                "list-map-keys-changed",
                keys(prev).join(","),
                keys(cur).join(","),
            ),
            (
                "x-kubernetes-map-type",
                "map-type-changed",
                map(prev),
                map(cur),
            ),
        ];
        for (keyword, rule, was, is) in changes {
            if was == is {
                continue;
            }
            let change = match (was.is_empty(), is.is_empty()) {
                (true, _) => format!("{keyword} `{is}` was set (there were none)"),
                (_, true) => format!("{keyword} `{was}` was removed"),
                _ => format!("{keyword} changed from `{was}` to `{is}`"),
            };
            let consequence = if rule == "map-type-changed" {
                "server-side apply merges the map differently: under `atomic` an applier's \
                 keys replace every other manager's"
            } else {
                "objects whose list holds duplicates under the new keys or values can no longer \
                 be created or have the list written, and server-side apply merges it \
                 differently"
            };
            let message = format!("{change}: {consequence}");
            self.push(Class::Breaking, path, rule, message);
        }
    }

    fn default(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) {
        let (was, is) = (
            prev.default.as_ref().map(|d| d.0.to_string()),
            cur.default.as_ref().map(|d| d.0.to_string()),
        );
        let (class, rule, message) = match (was, is) {
            (None, Some(is)) => (
                Class::Safe,
                "default-added",
                format!("a default {is} was added: objects without the field read it as {is}"),
            ),
            (Some(was), None) => (
                Class::Breaking,
                "default-removed",
                format!(
                    "the default {was} was removed: objects created without the field no longer \
                     get {was}, and stored ones that relied on it read without it"
                ),
            ),
            (Some(was), Some(is)) if was != is => (
                Class::Breaking,
                "default-changed",
                format!(
                    "the default changed from {was} to {is}: objects stored without the field \
                     read {is} instead of {was}"
                ),
            ),
            _ => return,
        };
        self.push(class, path, rule, message);
    }

    /// `nullable`, `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-embedded-resource`.
    fn flags(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps, optional: bool) {
        let on = |v: Option<bool>| v == Some(true);
        let flags = [
            ("nullable", "nullable", on(prev.nullable), on(cur.nullable)),
            (
                "x-kubernetes-preserve-unknown-fields",
                "preserve-unknown-fields",
                on(prev.x_kubernetes_preserve_unknown_fields),
                on(cur.x_kubernetes_preserve_unknown_fields),
            ),
        ];
        for (keyword, id, was, is) in flags {
            if was && !is && id == "nullable" {
                self.nullable_removed(path, cur, optional);
            } else if was && !is {
                let (rule, consequence) = {
                    (
                        "preserve-unknown-fields-removed",
                        "the apiserver prunes the fields the schema does not name, so stored \
                         objects lose them on their next write",
                    )
                };
                let message = format!("{keyword} was removed: {consequence}");
                self.push(Class::Breaking, path, rule, message);
            } else if !was && is {
                let rule = if id == "nullable" {
                    "nullable-added"
                } else {
                    "preserve-unknown-fields-added"
                };
                let message = format!("{keyword} was added");
                self.push(Class::Safe, path, rule, message);
            }
        }
        let embedded = |s: &JSONSchemaProps| on(s.x_kubernetes_embedded_resource);
        if embedded(prev) != embedded(cur) {
            let message = format!(
                "x-kubernetes-embedded-resource changed from {} to {}: the apiserver validates \
                 and prunes the field's apiVersion, kind and metadata differently",
                embedded(prev),
                embedded(cur)
            );
            self.push(Class::Breaking, path, "embedded-resource-changed", message);
        }
    }

    /// `nullable` removed: the apiserver prunes a null, sent or stored, before defaulting; what
    /// that costs depends on whether the field is required or has a default.
    fn nullable_removed(&mut self, path: &str, cur: &JSONSchemaProps, optional: bool) {
        let (class, consequence) = match (&cur.default, optional) {
            (Some(default), _) => (
                Class::Breaking,
                format!(
                    "the apiserver now drops a null, sent or stored, and the default {} takes \
                     its place: objects that held null read {} instead",
                    default.0, default.0
                ),
            ),
            (None, true) => (
                Class::Safe,
                "the apiserver now drops a null, sent or stored: the optional field reads as \
                 absent, and creates that send null still succeed"
                    .to_owned(),
            ),
            (None, false) => (
                Class::Breaking,
                "the apiserver now drops a null, sent or stored, so objects that hold or send \
                 null miss a required value: they can no longer be created or written"
                    .to_owned(),
            ),
        };
        let message = format!("nullable was removed: {consequence}");
        self.push(class, path, "nullable-removed", message);
    }

    /// The CEL rules (`x-kubernetes-validations`), by their text.
    fn rules(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) {
        let rules = |s: &JSONSchemaProps| s.x_kubernetes_validations.clone().unwrap_or_default();
        let (was, is) = (rules(prev), rules(cur));
        // Every rule refuses something (else it would not be written): what it refuses worked
        // before. Which operations it judges depends on whether it reads oldSelf.
        for rule in is.iter().filter(|r| !was.iter().any(|w| w.rule == r.rule)) {
            let transition = mentions_old_self(&rule.rule);
            let optional = rule.optional_old_self == Some(true);
            let text = &rule.rule;
            let (id, message) = match (transition, optional) {
                (false, _) => (
                    "validation-added",
                    format!(
                        "the CEL rule `{text}` was added: objects whose values it refuses can no \
                         longer be created, nor have the field changed to such a value (stored \
                         objects keep their unchanged values: the apiserver ratchets them)"
                    ),
                ),
                (true, false) => (
                    "validation-added-transition",
                    format!(
                        "the transition rule `{text}` was added: the apiserver judges every \
                         update of the field against its previous value, so updates that worked \
                         are refused (`self == oldSelf` makes the field immutable)"
                    ),
                ),
                (true, true) => (
                    "validation-added-ratcheting",
                    format!(
                        "the CEL rule `{text}` was added with optionalOldSelf: it also runs where \
                         there is no previous value (creates), so new objects whose values it \
                         refuses fail although they were valid, and so do the updates it refuses"
                    ),
                ),
            };
            self.push(Class::Breaking, path, id, message);
        }
        for rule in was.iter().filter(|w| !is.iter().any(|r| r.rule == w.rule)) {
            let message = format!("the CEL rule `{}` was removed", rule.rule);
            self.push(Class::Safe, path, "validation-removed", message);
        }
    }

    /// `allOf`, `anyOf`, `oneOf` (as sets of branches: their order does not matter), `not`
    /// (compared whole). The `anyOf` of integer and string that controller-gen writes for an
    /// int-or-string is part of the type, not a constraint.
    fn composition(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) {
        let parts = [
            (
                "allOf",
                branches(prev, |s| &s.all_of),
                branches(cur, |s| &s.all_of),
            ),
            (
                "anyOf",
                branches(prev, |s| &s.any_of),
                branches(cur, |s| &s.any_of),
            ),
            (
                "oneOf",
                branches(prev, |s| &s.one_of),
                branches(cur, |s| &s.one_of),
            ),
            ("not", not(prev), not(cur)),
        ];
        for (keyword, was, is) in parts {
            match (was, is) {
                (Some(_), None) => {
                    let message = format!("the {keyword} constraint was removed");
                    self.push(Class::Safe, path, "composition-removed", message);
                }
                (Some(was), Some(is))
                    if was != is
                        && ((keyword == "anyOf" && is.is_superset(&was))
                            || (keyword == "allOf" && is.is_subset(&was))) =>
                {
                    let what = if keyword == "anyOf" {
                        "branches were added to the anyOf: it accepts more"
                    } else {
                        "branches were removed from the allOf: it demands less"
                    };
                    self.push(Class::Safe, path, "composition-loosened", what.to_owned());
                }
                (was, Some(is)) if was.as_ref() != Some(&is) => {
                    let message = format!(
                        "the {keyword} constraint changed: objects valid before may no longer \
                         be created or written"
                    );
                    self.push(Class::Breaking, path, "composition-changed", message);
                }
                _ => {}
            }
        }
    }

    /// Fields newly required (existing or new) and no longer required.
    fn required(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) {
        let (was, is) = (set(prev.required.as_deref()), set(cur.required.as_deref()));
        let existed = |name: &str| {
            prev.properties
                .as_ref()
                .is_some_and(|p| p.contains_key(name))
        };
        for name in is.difference(&was) {
            let field = child(path, name);
            let defaulted = (cur.properties.as_ref())
                .and_then(|p| p.get(*name))
                .is_some_and(|s| s.default.is_some());
            let what = if existed(name) {
                "the field is now required"
            } else {
                "a new required field"
            };
            if defaulted {
                let message =
                    format!("{what}, with a default: objects without it are given the default");
                self.push(Class::Safe, &field, "required-added", message);
            } else {
                let message = format!(
                    "{what}: objects without it can no longer be created, and every update of a \
                     stored one without it is refused (only an unchanged write passes)"
                );
                self.push(Class::Breaking, &field, "required-added", message);
            }
        }
        for name in was.difference(&is) {
            let message = "the field is no longer required".to_owned();
            self.push(Class::Safe, &child(path, name), "required-removed", message);
        }
    }

    /// The properties: removed (with a rename guessed from an added one of the same schema),
    /// added, and compared.
    fn properties(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) {
        let empty = BTreeMap::new();
        let was = prev.properties.as_ref().unwrap_or(&empty);
        let is = cur.properties.as_ref().unwrap_or(&empty);
        let added: Vec<_> = is.iter().filter(|(n, _)| !was.contains_key(*n)).collect();
        let required = set(cur.required.as_deref());
        for (name, schema) in was {
            let field = child(path, name);
            match is.get(name) {
                Some(now) => self.node(&field, schema, now, !required.contains(name.as_str())),
                None => {
                    let renamed = added.iter().find(|(_, s)| same_shape(schema, s));
                    let message = self.removed_message(cur, renamed.map(|(n, _)| n.as_str()));
                    let class = if cur.x_kubernetes_preserve_unknown_fields == Some(true) {
                        Class::Safe
                    } else {
                        self.removal
                    };
                    self.push(class, &field, "field-removed", message);
                }
            }
        }
        for (name, _) in added {
            if !required.contains(name.as_str()) {
                let message = "a new optional field".to_owned();
                self.push(Class::Safe, &child(path, name), "field-added", message);
            }
        }
    }

    /// What a removed field costs, in this version.
    fn removed_message(&self, cur: &JSONSchemaProps, renamed: Option<&str>) -> String {
        let mut message = if cur.x_kubernetes_preserve_unknown_fields == Some(true) {
            "the field was removed from the schema, but its object preserves unknown fields: \
             values are kept, no longer validated"
                .to_owned()
        } else {
            "the field was removed: the apiserver prunes it, so objects that set it lose it on \
             their next write and clients that send it have it dropped"
                .to_owned()
        };
        if let Some(new) = renamed {
            message.push_str(&format!(
                "; renamed to `{new}` (same schema)? A rename within a version is a removal: \
                 keep the old name or add a version and convert"
            ));
        }
        if self.removal == Class::NeedsMigration {
            message.push_str(
                "; this version is not the storage version and the CRD converts through a \
                 webhook, so the data is kept only if the conversion carries the field to the \
                 storage version",
            );
        }
        message
    }

    /// A list's items and a map's values.
    fn items(&mut self, path: &str, prev: &JSONSchemaProps, cur: &JSONSchemaProps) {
        if let (
            Some(JSONSchemaPropsOrArray::Schema(was)),
            Some(JSONSchemaPropsOrArray::Schema(is)),
        ) = (&prev.items, &cur.items)
        {
            self.node(&format!("{path}[*]"), was, is, false);
        }
        let values = format!("{path}.*");
        match (&prev.additional_properties, &cur.additional_properties) {
            (Some(JSONSchemaPropsOrBool::Schema(was)), Some(JSONSchemaPropsOrBool::Schema(is))) => {
                self.node(&values, was, is, false);
            }
            (Some(JSONSchemaPropsOrBool::Schema(_) | JSONSchemaPropsOrBool::Bool(true)), None)
            | (
                Some(JSONSchemaPropsOrBool::Schema(_) | JSONSchemaPropsOrBool::Bool(true)),
                Some(JSONSchemaPropsOrBool::Bool(false)),
            ) => {
                let message = self.removed_message(cur, None);
                let class = if cur.x_kubernetes_preserve_unknown_fields == Some(true) {
                    Class::Safe
                } else {
                    self.removal
                };
                self.push(class, &values, "field-removed", message);
            }
            (None | Some(JSONSchemaPropsOrBool::Bool(false)), Some(_)) => {
                let message = "the object now takes any keys (additionalProperties)".to_owned();
                self.push(Class::Safe, &values, "field-added", message);
            }
            _ => {}
        }
    }
}

/// The branches of a composition keyword of `schema` as a set (their JSON text); `None` when
/// absent, and for the `anyOf` of integer and string of an int-or-string (controller-gen's form).
fn branches(
    schema: &JSONSchemaProps,
    keyword: fn(&JSONSchemaProps) -> &Option<Vec<JSONSchemaProps>>,
) -> Option<BTreeSet<String>> {
    let set: BTreeSet<String> = keyword(schema)
        .as_ref()?
        .iter()
        .filter_map(|b| serde_json::to_string(b).ok())
        .collect();
    let int_or_string: BTreeSet<String> = [r#"{"type":"integer"}"#, r#"{"type":"string"}"#]
        .into_iter()
        .map(str::to_owned)
        .collect();
    if schema.x_kubernetes_int_or_string == Some(true) && set == int_or_string {
        return None;
    }
    Some(set)
}

/// `not` of `schema`, as JSON text.
fn not(schema: &JSONSchemaProps) -> Option<BTreeSet<String>> {
    let not = schema.not.as_ref()?;
    Some(serde_json::to_string(not).ok().into_iter().collect())
}

/// Whether the CEL expression reads `oldSelf` (as a name, not inside another identifier).
fn mentions_old_self(rule: &str) -> bool {
    rule.match_indices("oldSelf").any(|(i, _)| {
        let before = rule[..i].chars().next_back();
        let after = rule[i + "oldSelf".len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after)
    })
}

/// Whether the regular expression `is` matches every string `was` matches, as far as the text
/// shows: `was` without its anchors (`^`, `$`), or `was` with an alternative added at the top
/// level (`was|…`, `…|was`). OpenAPI patterns search (they are not anchored), so both only widen.
fn loosens(was: &str, is: &str) -> bool {
    let start = was.strip_prefix('^');
    let end = was.strip_suffix('$').filter(|rest| {
        let escapes = rest.chars().rev().take_while(|c| *c == '\\').count();
        escapes % 2 == 0
    });
    let both = start.and_then(|s| end.map(|_| &s[..s.len() - 1]));
    if [start, end, both].into_iter().flatten().any(|w| w == is) {
        return true;
    }
    let after = is
        .strip_prefix(was)
        .is_some_and(|rest| rest.starts_with('|'));
    let before = is.strip_suffix(was).is_some_and(|rest| {
        rest.strip_suffix('|').is_some_and(|alternative| {
            let escapes = alternative.chars().rev().take_while(|c| *c == '\\').count();
            escapes % 2 == 0
        })
    });
    after || before
}

/// Whether two schemas are the same but for their descriptions (a renamed field?).
fn same_shape(a: &JSONSchemaProps, b: &JSONSchemaProps) -> bool {
    let bare = |s: &JSONSchemaProps| JSONSchemaProps {
        description: None,
        ..s.clone()
    };
    bare(a) == bare(b)
}

/// A deliberate break in the operator's accept list: findings of `rule` in `crd` (and `version`
/// and `path`, when given) are accepted for `reason` and do not fail the gate.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Acceptance {
    /// The CRD's name, such as `webapps.apps.kubeforge.dev`.
    pub crd: String,
    /// The version; any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The path as findings print it (`spec.replicas`); any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The rule's id, such as `field-removed`.
    pub rule: String,
    /// Why the break is deliberate (required: `crdgen` refuses an entry without one).
    pub reason: String,
}

impl Acceptance {
    /// Whether this entry accepts `finding`.
    #[must_use]
    pub fn matches(&self, finding: &Finding) -> bool {
        self.crd == finding.crd
            && self.rule == finding.rule
            && (self.version.is_none() || self.version == finding.version)
            && self.path.as_ref().is_none_or(|p| *p == finding.path)
    }
}

/// A finding and, when an entry of the accept list matches it, that entry's reason.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Judged {
    /// The finding.
    #[serde(flatten)]
    pub finding: Finding,
    /// The reason of the first accept-list entry that matches it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted: Option<String>,
}

/// The findings with the accept list applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every finding, breaking first, then needs-review, needs-migration, safe (in [`compare`]'s order
    /// within a class).
    pub findings: Vec<Judged>,
    /// The entries of the accept list that match no finding.
    pub stale: Vec<Acceptance>,
}

impl Report {
    /// The findings of `class` not accepted.
    pub fn open(&self, class: Class) -> impl Iterator<Item = &Finding> {
        (self.findings.iter())
            .filter(move |j| j.accepted.is_none() && j.finding.class == class)
            .map(|j| &j.finding)
    }

    /// Whether the gate passes: no breaking or needs-review finding that is not accepted.
    #[must_use]
    pub fn passes(&self) -> bool {
        self.open(Class::Breaking).next().is_none()
            && self.open(Class::NeedsReview).next().is_none()
    }
}

/// Applies the accept list to `findings`.
#[must_use]
pub fn judge(findings: Vec<Finding>, accepted: &[Acceptance]) -> Report {
    let mut used = vec![false; accepted.len()];
    let mut findings: Vec<Judged> = findings
        .into_iter()
        .map(|finding| {
            let entry = accepted.iter().position(|a| a.matches(&finding));
            if let Some(i) = entry {
                used[i] = true;
            }
            Judged {
                accepted: entry.map(|i| accepted[i].reason.clone()),
                finding,
            }
        })
        .collect();
    // Also mark entries shadowed by an earlier one that matches the same finding as used.
    for (i, entry) in accepted.iter().enumerate() {
        if !used[i] && findings.iter().any(|j| entry.matches(&j.finding)) {
            used[i] = true;
        }
    }
    findings.sort_by_key(|j| j.finding.class);
    let stale = (accepted.iter().zip(used))
        .filter(|(_, used)| !used)
        .map(|(a, _)| a.clone())
        .collect();
    Report { findings, stale }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use Class::{Breaking, NeedsMigration, NeedsReview, Safe};

    fn parse(crd: Value) -> CustomResourceDefinition {
        serde_json::from_value(crd).unwrap()
    }

    /// A CRD `webapps.apps.example.dev` with `versions`.
    fn crd_of(versions: Value) -> Value {
        json!({
            "metadata": {"name": "webapps.apps.example.dev"},
            "spec": {
                "group": "apps.example.dev",
                "scope": "Namespaced",
                "names": {"kind": "WebApp", "plural": "webapps"},
                "versions": versions,
            }
        })
    }

    /// A served version whose `spec` has the schema `spec`.
    fn version(name: &str, storage: bool, spec: Value) -> Value {
        json!({
            "name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}},
        })
    }

    fn object(properties: Value) -> Value {
        json!({"type": "object", "properties": properties})
    }

    /// One storage version v1 whose spec is `spec`.
    fn one(spec: Value) -> Value {
        crd_of(json!([version("v1", true, spec)]))
    }

    /// The findings as (class, rule, path).
    fn brief(findings: &[Finding]) -> Vec<(Class, &'static str, String)> {
        findings
            .iter()
            .map(|f| (f.class, f.rule, f.path.clone()))
            .collect()
    }

    fn diff(prev: Value, cur: Value) -> Vec<Finding> {
        compare(&[parse(prev)], &[parse(cur)])
    }

    /// The findings of a change of the field `spec.f` from `prev` to `cur`.
    fn field(prev: Value, cur: Value) -> Vec<(Class, &'static str, String)> {
        let findings = diff(
            one(object(json!({"f": prev}))),
            one(object(json!({"f": cur}))),
        );
        brief(&findings)
    }

    fn at(class: Class, rule: &'static str, path: &str) -> (Class, &'static str, String) {
        (class, rule, path.to_owned())
    }

    fn f(class: Class, rule: &'static str) -> Vec<(Class, &'static str, String)> {
        vec![at(class, rule, "spec.f")]
    }

    #[test]
    fn rules_should_list_every_rule_id_of_this_module() {
        let source = include_str!("compat.rs");
        let code = &source[..source.find("#[cfg(test)]").unwrap()];
        let listed: BTreeSet<&str> = RULES.iter().map(|(rule, _)| *rule).collect();
        // The ids as they appear in the code: `"some-rule"` literals next to a push, or in
        // the tables of bounds and keywords.
        let ids = code.split('"').skip(1).step_by(2).filter(|s| {
            s.len() > 3
                && s.contains('-')
                && s.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                && !s.starts_with("x-kubernetes")
                && !s.starts_with('-')
        });
        let missing: BTreeSet<&str> = ids
            .filter(|id| !listed.contains(id))
            .filter(|id| {
                ![
                    "needs-migration",
                    "needs-review",
                    "int-or-string",
                    "kebab-case",
                    "preserve-unknown-fields",
                ]
                .contains(id)
            })
            .collect();
        assert!(
            missing.is_empty(),
            "rule ids missing from RULES: {missing:?}"
        );
    }

    #[test]
    fn a_multiple_of_that_divides_the_old_one_should_loosen_and_any_other_tighten() {
        let int = |m: f64| json!({"type": "integer", "multipleOf": m});
        let rules = |prev, cur| {
            field(prev, cur)
                .into_iter()
                .map(|(class, rule, _)| (class, rule))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            rules(int(6.0), int(3.0)),
            [(Class::Safe, "multiple-of-loosened")]
        );
        assert_eq!(
            rules(int(6.0), int(4.0)),
            [(Class::Breaking, "multiple-of-changed")]
        );
        assert_eq!(
            rules(int(3.0), int(6.0)),
            [(Class::Breaking, "multiple-of-changed")]
        );
        // Fractions: a floating-point division decides, not kubeforge.
        assert_eq!(
            rules(int(0.5), int(0.25)),
            [(Class::Breaking, "multiple-of-changed")]
        );
    }

    #[test]
    fn compare_should_find_nothing_between_equal_crds() {
        let crd = one(object(json!({"f": {"type": "string", "minLength": 1}})));
        assert_eq!(diff(crd.clone(), crd), []);
    }

    #[test]
    fn removing_a_field_from_the_storage_version_should_be_breaking() {
        let findings = diff(
            one(object(json!({"replicas": {"type": "integer"}}))),
            one(object(json!({}))),
        );
        assert_eq!(
            brief(&findings),
            [at(Breaking, "field-removed", "spec.replicas")]
        );
        let line = findings[0].to_string();
        assert!(
            line.starts_with(
                "breaking: webapps.apps.example.dev v1 spec.replicas: field-removed: the field was removed"
            ),
            "{line}"
        );
    }

    #[test]
    fn a_rename_should_be_a_removal_naming_the_new_field() {
        let findings = diff(
            one(object(
                json!({"replicas": {"type": "integer", "description": "old"}}),
            )),
            one(object(
                json!({"instances": {"type": "integer", "description": "new"}}),
            )),
        );
        assert_eq!(
            brief(&findings),
            [
                at(Breaking, "field-removed", "spec.replicas"),
                at(Safe, "field-added", "spec.instances"),
            ]
        );
        assert!(
            findings[0].message.contains("renamed to `instances`"),
            "{}",
            findings[0].message
        );
    }

    #[test]
    fn removing_a_field_from_a_converted_version_that_is_not_stored_should_need_migration() {
        let webhook =
            json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}});
        let with = |v1: Value| {
            let mut crd = crd_of(json!([
                version("v1", false, v1),
                version("v2", true, object(json!({})))
            ]));
            crd["spec"]["conversion"] = webhook.clone();
            crd
        };
        let findings = diff(
            with(object(json!({"replicas": {"type": "integer"}}))),
            with(object(json!({}))),
        );
        assert_eq!(
            brief(&findings),
            [at(NeedsMigration, "field-removed", "spec.replicas")]
        );
        assert!(findings[0].message.contains("conversion carries the field"));
        // Without the webhook the same removal loses data.
        let plain = |v1: Value| {
            crd_of(json!([
                version("v1", false, v1),
                version("v2", true, object(json!({})))
            ]))
        };
        let findings = diff(
            plain(object(json!({"replicas": {"type": "integer"}}))),
            plain(object(json!({}))),
        );
        assert_eq!(
            brief(&findings),
            [at(Breaking, "field-removed", "spec.replicas")]
        );
    }

    #[test]
    fn removing_a_field_where_unknown_fields_are_preserved_should_be_safe() {
        let prev = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                          "properties": {"a": {"type": "string"}}});
        let cur = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        assert_eq!(field(prev, cur), [at(Safe, "field-removed", "spec.f.a")]);
    }

    #[test]
    fn a_new_optional_field_should_be_safe() {
        let findings = diff(
            one(object(json!({}))),
            one(object(json!({"x": {"type": "string"}}))),
        );
        assert_eq!(brief(&findings), [at(Safe, "field-added", "spec.x")]);
    }

    #[test]
    fn a_new_required_field_should_be_breaking_unless_it_has_a_default() {
        let with =
            |x: Value| one(json!({"type": "object", "required": ["x"], "properties": {"x": x}}));
        let findings = diff(one(object(json!({}))), with(json!({"type": "string"})));
        assert_eq!(brief(&findings), [at(Breaking, "required-added", "spec.x")]);
        assert!(findings[0].message.starts_with("a new required field"));
        let findings = diff(
            one(object(json!({}))),
            with(json!({"type": "string", "default": "a"})),
        );
        assert_eq!(brief(&findings), [at(Safe, "required-added", "spec.x")]);
    }

    #[test]
    fn a_field_newly_required_should_be_breaking_and_one_no_longer_required_safe() {
        let optional = one(object(json!({"x": {"type": "string"}})));
        let required = one(
            json!({"type": "object", "required": ["x"], "properties": {"x": {"type": "string"}}}),
        );
        let findings = diff(optional.clone(), required.clone());
        assert_eq!(brief(&findings), [at(Breaking, "required-added", "spec.x")]);
        assert!(findings[0].message.starts_with("the field is now required"));
        assert_eq!(
            brief(&diff(required, optional)),
            [at(Safe, "required-removed", "spec.x")]
        );
    }

    #[test]
    fn a_type_change_should_be_breaking_and_hide_the_changes_below_it() {
        let prev = object(json!({"a": {"type": "string"}}));
        assert_eq!(
            field(prev, json!({"type": "string"})),
            f(Breaking, "type-changed")
        );
        assert_eq!(
            field(json!({"type": "integer"}), json!({"type": "string"})),
            f(Breaking, "type-changed")
        );
    }

    #[test]
    fn widening_to_int_or_string_should_be_safe_and_narrowing_breaking() {
        let int_or_string = json!({"x-kubernetes-int-or-string": true});
        assert_eq!(
            field(json!({"type": "integer"}), int_or_string.clone()),
            f(Safe, "type-changed")
        );
        assert_eq!(
            field(int_or_string, json!({"type": "integer"})),
            f(Breaking, "type-changed")
        );
    }

    #[test]
    fn removing_an_enum_value_should_be_breaking_and_adding_one_safe() {
        let e = |values: Value| json!({"type": "string", "enum": values});
        assert_eq!(
            field(e(json!(["a", "b"])), e(json!(["a"]))),
            f(Breaking, "enum-value-removed")
        );
        assert_eq!(
            field(e(json!(["a"])), e(json!(["a", "b"]))),
            f(Safe, "enum-value-added")
        );
        assert_eq!(
            field(e(json!(["a", "b"])), e(json!(["a", "c"]))),
            [
                at(Breaking, "enum-value-removed", "spec.f"),
                at(Safe, "enum-value-added", "spec.f")
            ]
        );
        // An enum where there was none narrows (issue #48: it was reported as a removed value);
        // dropping it widens.
        let findings = diff(
            one(object(json!({"f": {"type": "string"}}))),
            one(object(json!({"f": e(json!(["a"]))}))),
        );
        assert_eq!(brief(&findings), f(Breaking, "enum-added"));
        assert!(
            findings[0]
                .message
                .contains("which took any value, to [\"a\"]"),
            "{}",
            findings[0].message
        );
        assert_eq!(
            field(e(json!(["a"])), json!({"type": "string"})),
            f(Safe, "enum-removed")
        );
    }

    #[test]
    fn a_minimum_raised_or_made_exclusive_should_be_breaking_and_lowered_safe() {
        let n = |extra: Value| {
            let mut s = json!({"type": "integer"});
            s.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            s
        };
        assert_eq!(
            field(n(json!({"minimum": 1})), n(json!({"minimum": 2}))),
            f(Breaking, "minimum-tightened")
        );
        assert_eq!(
            field(n(json!({})), n(json!({"minimum": 0}))),
            f(Breaking, "minimum-tightened")
        );
        assert_eq!(
            field(
                n(json!({"minimum": 1})),
                n(json!({"minimum": 1, "exclusiveMinimum": true}))
            ),
            f(Breaking, "minimum-tightened")
        );
        assert_eq!(
            field(n(json!({"minimum": 2})), n(json!({"minimum": 1}))),
            f(Safe, "minimum-loosened")
        );
        assert_eq!(
            field(n(json!({"minimum": 2})), n(json!({}))),
            f(Safe, "minimum-loosened")
        );
        assert_eq!(
            field(
                n(json!({"minimum": 1, "exclusiveMinimum": true})),
                n(json!({"minimum": 1}))
            ),
            f(Safe, "minimum-loosened")
        );
    }

    #[test]
    fn a_maximum_lowered_or_made_exclusive_should_be_breaking_and_raised_safe() {
        let n = |max: Value| json!({"type": "number", "maximum": max});
        assert_eq!(
            field(n(json!(10)), n(json!(5.5))),
            f(Breaking, "maximum-tightened")
        );
        assert_eq!(
            field(n(json!(5)), n(json!(10))),
            f(Safe, "maximum-loosened")
        );
        assert_eq!(
            field(
                n(json!(5)),
                json!({"type": "number", "maximum": 5, "exclusiveMaximum": true})
            ),
            f(Breaking, "maximum-tightened")
        );
        assert_eq!(
            field(n(json!(5)), json!({"type": "number"})),
            f(Safe, "maximum-loosened")
        );
    }

    #[test]
    fn counts_should_be_tightened_one_way_and_loosened_the_other() {
        let cases = [
            ("string", "minLength", 1, 2, "min-length"),
            ("string", "maxLength", 9, 8, "max-length"),
            ("array", "minItems", 0, 1, "min-items"),
            ("array", "maxItems", 64, 32, "max-items"),
            ("object", "minProperties", 1, 3, "min-properties"),
            ("object", "maxProperties", 8, 4, "max-properties"),
        ];
        for (ty, keyword, loose, tight, id) in cases {
            let s = |v: i64| {
                let mut s = json!({"type": ty});
                s[keyword] = json!(v);
                if ty == "array" {
                    s["items"] = json!({"type": "string"});
                }
                s
            };
            let tightened: &'static str = format!("{id}-tightened").leak();
            let loosened: &'static str = format!("{id}-loosened").leak();
            assert_eq!(
                field(s(loose), s(tight)),
                f(Breaking, tightened),
                "{keyword}"
            );
            assert_eq!(field(s(tight), s(loose)), f(Safe, loosened), "{keyword}");
            let mut none = s(loose);
            none.as_object_mut().unwrap().remove(keyword);
            assert_eq!(
                field(none.clone(), s(loose)),
                f(Breaking, tightened),
                "{keyword} added"
            );
            assert_eq!(
                field(s(loose), none),
                f(Safe, loosened),
                "{keyword} removed"
            );
        }
    }

    #[test]
    fn a_pattern_added_should_break_loosened_be_safe_and_changed_need_review() {
        let p = |pattern: &str| json!({"type": "string", "pattern": pattern});
        // Two regular expressions: undecidable from the text (issue #48: was breaking).
        assert_eq!(
            field(p("^[a-z]+$"), p("^[a-z0-9]+$")),
            f(NeedsReview, "pattern-changed"),
        );
        assert_eq!(field(p("^[a-z]+$"), p("^[a-z]+$")), []);
        assert_eq!(
            field(json!({"type": "string"}), p("^a")),
            f(Breaking, "pattern-added")
        );
        // Anchors removed, an alternative added: only wider.
        for (was, is) in [
            ("^[a-z]+$", "[a-z]+"),
            ("^[a-z]+$", "^[a-z]+"),
            ("^[a-z]+$", "[a-z]+$"),
            ("^a$", "^a$|^b$"),
            ("^a$", "^b$|^a$"),
        ] {
            assert_eq!(
                field(p(was), p(is)),
                f(Safe, "pattern-loosened"),
                "{was} to {is}"
            );
        }
        // Not a loosening: an escaped dollar is no anchor; an anchor added narrows.
        for (was, is) in [(r"a\$", r"a\"), ("[a-z]+", "^[a-z]+$"), ("^a$", "^a$b")] {
            assert_eq!(
                field(p(was), p(is)),
                f(NeedsReview, "pattern-changed"),
                "{was} to {is}"
            );
        }
        assert_eq!(
            field(p("^a"), json!({"type": "string"})),
            f(Safe, "pattern-removed")
        );
    }

    #[test]
    fn a_format_added_or_changed_should_be_breaking_and_removed_safe() {
        let s = |format: &str| json!({"type": "string", "format": format});
        assert_eq!(
            field(json!({"type": "string"}), s("uuid")),
            f(Breaking, "format-changed")
        );
        assert_eq!(field(s("ipv4"), s("ipv6")), f(Breaking, "format-changed"));
        assert_eq!(
            field(s("uuid"), json!({"type": "string"})),
            f(Safe, "format-removed")
        );
    }

    #[test]
    fn list_and_map_types_changed_should_be_breaking_but_explicit_defaults_nothing() {
        let list = |extra: Value| {
            let mut s = json!({"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}});
            s.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            s
        };
        assert_eq!(
            field(
                list(json!({})),
                list(json!({"x-kubernetes-list-type": "atomic"}))
            ),
            []
        );
        assert_eq!(
            field(
                list(json!({})),
                list(json!({"x-kubernetes-list-type": "set"}))
            ),
            f(Breaking, "list-type-changed")
        );
        let map = |keys: Value| {
            list(json!({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": keys}))
        };
        assert_eq!(
            field(map(json!(["name"])), map(json!(["name", "port"]))),
            f(Breaking, "list-map-keys-changed")
        );
        // Keys where there were none (issue #48: "from `` to `name`").
        let findings = diff(
            one(object(json!({"f": list(json!({}))}))),
            one(object(json!({"f": map(json!(["name"]))}))),
        );
        let keys = findings
            .iter()
            .find(|f| f.rule == "list-map-keys-changed")
            .unwrap();
        assert!(
            keys.message
                .starts_with("x-kubernetes-list-map-keys `name` was set (there were none)"),
            "{}",
            keys.message
        );
        let obj = |t: Option<&str>| {
            let mut s = object(json!({"a": {"type": "string"}}));
            if let Some(t) = t {
                s["x-kubernetes-map-type"] = json!(t);
            }
            s
        };
        assert_eq!(field(obj(None), obj(Some("granular"))), []);
        assert_eq!(
            field(obj(None), obj(Some("atomic"))),
            f(Breaking, "map-type-changed")
        );
    }

    #[test]
    fn a_default_changed_or_removed_should_be_breaking_and_added_safe() {
        let d = |v: Value| json!({"type": "integer", "default": v});
        assert_eq!(
            field(d(json!(1)), d(json!(2))),
            f(Breaking, "default-changed")
        );
        assert_eq!(
            field(d(json!(1)), json!({"type": "integer"})),
            f(Breaking, "default-removed")
        );
        assert_eq!(
            field(json!({"type": "integer"}), d(json!(1))),
            f(Safe, "default-added")
        );
        assert_eq!(field(d(json!(1)), d(json!(1))), []);
    }

    #[test]
    fn nullable_removed_should_be_safe_when_optional_and_breaking_with_a_default_or_required() {
        let n = json!({"type": "string", "nullable": true});
        // The apiserver prunes a null (issue #48: the message said objects fail validation).
        let findings = diff(
            one(object(json!({"f": n.clone()}))),
            one(object(json!({"f": {"type": "string"}}))),
        );
        assert_eq!(brief(&findings), f(Safe, "nullable-removed"));
        assert!(
            findings[0]
                .message
                .contains("creates that send null still succeed")
        );
        assert_eq!(
            field(
                json!({"type": "string", "nullable": true, "default": "d"}),
                json!({"type": "string", "default": "d"})
            ),
            f(Breaking, "nullable-removed")
        );
        let required =
            |f: Value| one(json!({"type": "object", "required": ["f"], "properties": {"f": f}}));
        assert_eq!(
            brief(&diff(
                required(n.clone()),
                required(json!({"type": "string"}))
            )),
            f(Breaking, "nullable-removed")
        );
        assert_eq!(
            field(json!({"type": "string"}), n),
            f(Safe, "nullable-added")
        );
    }

    #[test]
    fn preserve_unknown_fields_removed_should_be_breaking_and_added_safe() {
        let p = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        assert_eq!(
            field(p.clone(), json!({"type": "object"})),
            f(Breaking, "preserve-unknown-fields-removed")
        );
        assert_eq!(
            field(json!({"type": "object"}), p),
            f(Safe, "preserve-unknown-fields-added")
        );
    }

    #[test]
    fn a_cel_rule_added_should_be_breaking_by_what_it_refuses() {
        let r = |rules: Value| json!({"type": "integer", "x-kubernetes-validations": rules});
        let added = |rules: Value| {
            diff(
                one(object(json!({"f": {"type": "integer"}}))),
                one(object(json!({"f": r(rules)}))),
            )
        };
        let findings = added(json!([{"rule": "self > 0"}]));
        assert_eq!(brief(&findings), f(Breaking, "validation-added"));
        assert!(
            findings[0].message.contains("created"),
            "{}",
            findings[0].message
        );
        // A transition rule refuses updates that worked (issue #48: was safe).
        let findings = added(json!([{"rule": "self == oldSelf"}]));
        assert_eq!(brief(&findings), f(Breaking, "validation-added-transition"));
        assert!(
            findings[0].message.contains("immutable"),
            "{}",
            findings[0].message
        );
        // optionalOldSelf runs on creates too (issue #48: was safe).
        let findings = added(json!([
            {"rule": "oldSelf.hasValue() || self > 0", "optionalOldSelf": true}
        ]));
        assert_eq!(brief(&findings), f(Breaking, "validation-added-ratcheting"));
        assert!(
            findings[0].message.contains("creates"),
            "{}",
            findings[0].message
        );
        // `oldSelfish` is another name.
        assert_eq!(
            brief(&added(json!([{"rule": "self.oldSelfish > 0"}]))),
            f(Breaking, "validation-added")
        );
        assert_eq!(
            field(r(json!([{"rule": "self > 0"}])), json!({"type": "integer"})),
            f(Safe, "validation-removed")
        );
        // Only the message changed: the same rule.
        assert_eq!(
            field(
                r(json!([{"rule": "self > 0"}])),
                r(json!([{"rule": "self > 0", "message": "positive"}]))
            ),
            []
        );
    }

    #[test]
    fn branches_reordered_or_int_or_string_should_be_no_change_and_an_any_of_widened_safe() {
        let any_of = |branches: Value| {
            json!({"type": "object", "anyOf": branches,
                   "properties": {"a": {"type": "string"}, "b": {"type": "string"}}})
        };
        let (a, b) = (json!({"required": ["a"]}), json!({"required": ["b"]}));
        // Issue #48: a reordering was breaking.
        assert_eq!(field(any_of(json!([a, b])), any_of(json!([b, a]))), []);
        assert_eq!(
            field(any_of(json!([a])), any_of(json!([a, b]))),
            f(Safe, "composition-loosened")
        );
        assert_eq!(
            field(any_of(json!([a, b])), any_of(json!([a]))),
            f(Breaking, "composition-changed")
        );
        // controller-gen's int-or-string (issue #48: was breaking).
        let controller_gen = json!({"anyOf": [{"type": "integer"}, {"type": "string"}],
                                    "x-kubernetes-int-or-string": true});
        assert_eq!(
            field(json!({"type": "integer"}), controller_gen),
            f(Safe, "type-changed")
        );
    }

    #[test]
    fn served_versions_should_be_compared_with_the_storage_version() {
        let s = json!({"type": "string"});
        let v = |name: &str, storage: bool, properties: Value| {
            version(name, storage, object(properties))
        };
        // Issue #48: a new served version without a stored field was only `version-added`.
        let prev = one(object(json!({"a": s})));
        let lacks = crd_of(json!([
            v("v1", true, json!({"a": s})),
            v("v2", false, json!({}))
        ]));
        assert_eq!(
            brief(&diff(prev.clone(), lacks.clone())),
            [
                at(Safe, "version-added", "spec.versions[v2]"),
                at(Breaking, "served-version-lacks-field", "spec.a"),
            ]
        );
        let differs = crd_of(json!([
            v("v1", true, json!({"a": s})),
            v("v2", false, json!({"a": {"type": "integer"}}))
        ]));
        assert_eq!(
            brief(&diff(prev.clone(), differs))[1],
            at(Breaking, "served-version-type-differs", "spec.a")
        );
        // A field only in a served version that is not stored.
        let both = crd_of(json!([
            v("v1", true, json!({"a": s})),
            v("v2", false, json!({"a": s}))
        ]));
        let dropped = crd_of(json!([
            v("v1", true, json!({"a": s})),
            v("v2", false, json!({"a": s, "b": s}))
        ]));
        assert_eq!(
            brief(&diff(both.clone(), dropped)),
            [
                at(Safe, "field-added", "spec.b"),
                at(Breaking, "served-version-field-dropped", "spec.b"),
            ]
        );
        // Reported once: what the previous release already had is no change.
        assert_eq!(diff(lacks.clone(), lacks.clone()), []);
        // With a conversion webhook the conversion carries the fields.
        let mut converted = lacks;
        converted["spec"]["conversion"] = json!({"strategy": "Webhook"});
        assert_eq!(
            brief(&diff(prev, converted)),
            [at(Safe, "version-added", "spec.versions[v2]")]
        );
        // Unknown fields preserved in the served version keep everything.
        let preserved = crd_of(json!([
            v("v1", true, json!({"a": s})),
            version(
                "v2",
                false,
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
            )
        ]));
        assert_eq!(
            brief(&diff(both, preserved)),
            [
                at(Safe, "preserve-unknown-fields-added", "spec"),
                at(Safe, "field-removed", "spec.a")
            ]
        );
    }

    #[test]
    fn a_composition_changed_should_be_breaking_and_removed_safe() {
        let one_of = json!({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                            "properties": {"a": {"type": "string"}, "b": {"type": "string"}}});
        let mut none = one_of.clone();
        none.as_object_mut().unwrap().remove("oneOf");
        assert_eq!(
            field(none.clone(), one_of.clone()),
            f(Breaking, "composition-changed")
        );
        assert_eq!(field(one_of, none), f(Safe, "composition-removed"));
    }

    #[test]
    fn paths_should_name_list_items_and_map_values() {
        let list = |name: Value| json!({"type": "array", "items": object(json!({"name": name}))});
        assert_eq!(
            field(
                list(json!({"type": "string"})),
                list(json!({"type": "string", "minLength": 1}))
            ),
            [at(Breaking, "min-length-tightened", "spec.f[*].name")]
        );
        let map = |values: Value| json!({"type": "object", "additionalProperties": values});
        assert_eq!(
            field(
                map(json!({"type": "string"})),
                map(json!({"type": "string", "maxLength": 3}))
            ),
            [at(Breaking, "max-length-tightened", "spec.f.*")]
        );
        assert_eq!(
            field(map(json!({"type": "string"})), json!({"type": "object"})),
            [at(Breaking, "field-removed", "spec.f.*")]
        );
    }

    #[test]
    fn removing_a_served_version_should_be_breaking_and_a_stored_one_need_migration() {
        let both = crd_of(json!([
            version("v1", false, object(json!({}))),
            version("v2", true, object(json!({})))
        ]));
        let v2 = crd_of(json!([version("v2", true, object(json!({})))]));
        assert_eq!(
            brief(&diff(both.clone(), v2.clone())),
            [at(Breaking, "version-removed", "spec.versions[v1]")]
        );
        // Still listed in status.storedVersions: objects may be stored as v1.
        let mut stored = both.clone();
        stored["status"] = json!({"storedVersions": ["v1", "v2"]});
        assert_eq!(
            brief(&diff(stored, v2.clone())),
            [
                at(Breaking, "version-removed", "spec.versions[v1]"),
                at(
                    NeedsMigration,
                    "stored-version-removed",
                    "spec.versions[v1]"
                ),
            ]
        );
        // A version neither served nor stored goes quietly.
        let mut unserved = both;
        unserved["spec"]["versions"][0]["served"] = json!(false);
        assert_eq!(
            brief(&diff(unserved, v2)),
            [at(Safe, "version-removed", "spec.versions[v1]")]
        );
    }

    #[test]
    fn a_version_no_longer_served_should_be_breaking_and_a_new_one_safe() {
        let v1 = one(object(json!({})));
        let mut unserved = crd_of(json!([
            version("v1", true, object(json!({}))),
            version("v2", false, object(json!({})))
        ]));
        unserved["spec"]["versions"][0]["served"] = json!(false);
        assert_eq!(
            brief(&diff(v1, unserved)),
            [
                at(Breaking, "version-unserved", "spec.versions[v1].served"),
                at(Safe, "version-added", "spec.versions[v2]"),
            ]
        );
    }

    #[test]
    fn a_storage_version_change_should_need_migration_with_a_webhook_and_break_without() {
        let prev = crd_of(json!([
            version("v1", true, object(json!({"a": {"type": "string"}}))),
            version("v2", false, object(json!({"b": {"type": "string"}})))
        ]));
        let mut cur = crd_of(json!([
            version("v1", false, object(json!({"a": {"type": "string"}}))),
            version("v2", true, object(json!({"b": {"type": "string"}})))
        ]));
        // v1, now served but not stored, lacks `b` and has `a`, which v2 does not.
        assert_eq!(
            brief(&diff(prev.clone(), cur.clone())),
            [
                at(
                    Breaking,
                    "storage-version-changed",
                    "spec.versions[v2].storage"
                ),
                at(Breaking, "served-version-lacks-field", "spec.b"),
                at(Breaking, "served-version-field-dropped", "spec.a"),
            ]
        );
        cur["spec"]["conversion"] = json!({"strategy": "Webhook"});
        let findings = diff(prev, cur);
        assert_eq!(
            brief(&findings),
            [at(
                NeedsMigration,
                "storage-version-changed",
                "spec.versions[v2].storage"
            )]
        );
        assert!(findings[0].message.contains("migrate_storage"));
        // Same schema: the None conversion loses nothing, only the migration is left.
        let same = |storage_v1: bool| {
            crd_of(json!([
                version("v1", storage_v1, object(json!({}))),
                version("v2", !storage_v1, object(json!({})))
            ]))
        };
        assert_eq!(
            brief(&diff(same(true), same(false))),
            [at(
                NeedsMigration,
                "storage-version-changed",
                "spec.versions[v2].storage"
            )]
        );
    }

    #[test]
    fn names_and_scope_changed_should_be_breaking_and_kubectl_names_safe() {
        let prev = one(object(json!({})));
        let mut cur = prev.clone();
        cur["spec"]["scope"] = json!("Cluster");
        cur["spec"]["names"]["singular"] = json!("app");
        cur["spec"]["names"]["shortNames"] = json!(["wa"]);
        cur["spec"]["names"]["categories"] = json!(["all"]);
        let findings = diff(prev.clone(), cur);
        assert_eq!(
            brief(&findings),
            [
                at(Breaking, "scope-changed", "spec.scope"),
                at(Safe, "singular-changed", "spec.names.singular"),
                at(Safe, "short-names-changed", "spec.names.shortNames"),
                at(Safe, "categories-changed", "spec.names.categories"),
            ]
        );
        // The apiserver refuses it (issue #48: the message read like a rename).
        assert!(
            findings[0]
                .message
                .contains("refuses this update of the CRD (the scope is immutable)"),
            "{}",
            findings[0].message
        );
        // The singular and list kind written out as their defaults are no change.
        let mut explicit = prev.clone();
        explicit["spec"]["names"]["singular"] = json!("webapp");
        explicit["spec"]["names"]["listKind"] = json!("WebAppList");
        assert_eq!(diff(prev, explicit), []);
    }

    #[test]
    fn a_group_or_plural_change_should_be_matched_by_kind_and_be_breaking() {
        let prev = one(object(json!({})));
        let mut cur = prev.clone();
        cur["metadata"]["name"] = json!("apps.web.example.dev");
        cur["spec"]["group"] = json!("web.example.dev");
        cur["spec"]["names"]["plural"] = json!("apps");
        let findings = diff(prev, cur);
        assert_eq!(
            brief(&findings),
            [
                at(Breaking, "group-changed", "spec.group"),
                at(Breaking, "plural-changed", "spec.names.plural"),
            ]
        );
        assert_eq!(
            findings[0].crd, "webapps.apps.example.dev",
            "named as released"
        );
    }

    #[test]
    fn a_kind_change_should_be_breaking() {
        let prev = one(object(json!({})));
        let mut cur = prev.clone();
        cur["spec"]["names"]["kind"] = json!("WebApplication");
        let findings = diff(prev, cur);
        // The apiserver refuses it (the compat oracle's `kind-changed` case).
        assert!(
            findings[0].message.contains("spec.names.kind is immutable"),
            "{}",
            findings[0].message
        );
        assert_eq!(
            brief(&findings),
            [
                at(Breaking, "kind-changed", "spec.names.kind"),
                at(Breaking, "list-kind-changed", "spec.names.listKind"),
                at(Safe, "singular-changed", "spec.names.singular"),
            ]
        );
    }

    #[test]
    fn a_crd_removed_should_be_breaking_and_one_added_safe() {
        let mut other = one(object(json!({})));
        other["metadata"]["name"] = json!("databases.apps.example.dev");
        other["spec"]["names"] = json!({"kind": "Database", "plural": "databases"});
        let findings = compare(&[parse(one(object(json!({}))))], &[parse(other)]);
        assert_eq!(
            brief(&findings),
            [
                at(Breaking, "crd-removed", "<crd>"),
                at(Safe, "crd-added", "<crd>")
            ]
        );
        assert_eq!(findings[1].crd, "databases.apps.example.dev");
    }

    #[test]
    fn printer_columns_should_be_safe_and_subresources_removed_breaking() {
        let prev = one(object(json!({})));
        let mut cur = prev.clone();
        cur["spec"]["versions"][0]["additionalPrinterColumns"] =
            json!([{"name": "Image", "type": "string", "jsonPath": ".spec.image"}]);
        cur["spec"]["versions"][0]["subresources"] = json!({"status": {}});
        assert_eq!(
            brief(&diff(prev.clone(), cur.clone())),
            [
                at(
                    Safe,
                    "printer-columns-changed",
                    "spec.versions[v1].additionalPrinterColumns"
                ),
                at(
                    Breaking,
                    "subresource-added",
                    "spec.versions[v1].subresources.status"
                ),
            ]
        );
        let mut prev_with = prev;
        prev_with["spec"]["versions"][0]["subresources"] = json!({"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}});
        assert_eq!(
            brief(&diff(prev_with, cur))[1..],
            [at(
                Breaking,
                "subresource-removed",
                "spec.versions[v1].subresources.scale"
            )]
        );
    }

    #[test]
    fn judge_should_accept_with_the_reason_order_by_class_and_report_stale_entries() {
        let findings = diff(
            one(object(
                json!({"a": {"type": "string"}, "b": {"type": "string"}}),
            )),
            one(object(json!({"c": {"type": "string"}}))),
        );
        assert_eq!(findings.len(), 3);
        let entry = |path: Option<&str>, rule: &str| Acceptance {
            crd: "webapps.apps.example.dev".into(),
            version: Some("v1".into()),
            path: path.map(str::to_owned),
            rule: rule.into(),
            reason: format!("because {rule}"),
        };
        let accept = [
            entry(Some("spec.a"), "field-removed"),
            entry(Some("spec.zzz"), "field-removed"),
            entry(None, "type-changed"),
        ];
        let report = judge(findings.clone(), &accept);
        assert!(!report.passes(), "spec.b is still removed");
        assert_eq!(
            report.findings[0].accepted.as_deref(),
            Some("because field-removed")
        );
        assert_eq!(report.findings[1].finding.path, "spec.b");
        assert_eq!(report.findings[2].finding.class, Safe);
        assert_eq!(report.stale, [accept[1].clone(), accept[2].clone()]);
        let report = judge(findings, &[entry(None, "field-removed")]);
        assert!(report.passes());
        assert!(report.stale.is_empty());
        assert_eq!(report.open(Breaking).count(), 0);
    }

    #[test]
    fn judged_findings_should_serialize_as_flat_objects() {
        let findings = diff(
            one(object(json!({"a": {"type": "string"}}))),
            one(object(json!({}))),
        );
        let report = judge(findings, &[]);
        let value = serde_json::to_value(&report.findings).unwrap();
        assert_eq!(value[0]["class"], "breaking");
        assert_eq!(value[0]["rule"], "field-removed");
        assert_eq!(value[0]["version"], "v1");
        assert_eq!(value[0]["path"], "spec.a");
        assert!(value[0].get("accepted").is_none());
    }
}
