//! RBAC rules derived from controller wiring, and the ClusterRole `crdgen --rbac` prints.
//!
//! `#[controller]` registers, for each controller, the rules its wiring needs:
//!
//! | wiring | rules |
//! |---|---|
//! | `for = K` | `get list watch update patch` on K; `get update patch` on `K/status`; `update` on `K/finalizers` with a finalizer or owned kinds (children get `blockOwnerDeletion`) |
//! | `owns(C)` | `get list watch create update patch delete` on C |
//! | `watches(W, ..)` | `get list watch` on W |
//! | always | `create patch` on `events.k8s.io` events; `get list watch create update delete` on `coordination.k8s.io` leases (leader election; `list`, `delete`: the sharder finds the shard members' Leases and deletes those of departed members; `watch`: members follow the assignment of hash ranges) |
//! | `rbac(group = .., resources = [..], verbs = [..], resource_names = [..])` | those verbs on those resources (only on the named objects with `resource_names`) |
//! | `rbac(non_resource_urls = [..], verbs = [..])` | those verbs on those paths (`nonResourceURLs`; always in the ClusterRole: a Role cannot grant them) |
//!
//! [`cluster_role`] merges the rules of every registered controller and of the webhook server
//! ([`webhook_rules`]: its managed configurations, the conversion of the CRDs whose versions
//! convert, its certificate's Secret) into one ClusterRole, except the Leases, which [`leader_election_role`] grants in the operator's namespace only; `crdgen
//! --deploy` prints them with their bindings, as namespaced Roles when the operator watches one
//! namespace.
//!
//! # Examples
//!
//! ```
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use kubeforge::rbac::Rules;
//!
//! let rules = Rules::new().primary::<ConfigMap>(false).owned::<Secret>().policy_rules();
//! assert_eq!(rules.len(), 3); // configmaps, configmaps/status, secrets
//! ```

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::Resource;
use kube::api::ObjectMeta;

/// A set of (API group, resource) → verbs, merged as rules are added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    rules: BTreeMap<(String, String), BTreeSet<&'static str>>,
    /// Rules limited to some objects by name: (group, resource, names) → verbs.
    named: BTreeMap<(String, String, Vec<String>), BTreeSet<&'static str>>,
    /// The cluster-scoped resources among them (their subresources follow them).
    cluster_scoped: BTreeSet<(String, String)>,
    /// Paths that are not resources (`/metrics`): path → verbs (HTTP methods).
    non_resource: BTreeMap<String, BTreeSet<&'static str>>,
}

/// A controller's RBAC registration, collected by `crdgen --rbac` (emitted by `#[controller]`).
#[derive(Debug)]
pub struct ControllerRegistration {
    /// The controller's name.
    pub name: &'static str,
    /// Its rules.
    pub rules: fn() -> Rules,
}

inventory::collect!(ControllerRegistration);

fn resource_of<K: Resource<DynamicType = ()>>() -> (String, String) {
    (K::group(&()).into_owned(), K::plural(&()).into_owned())
}

/// Whether `K` is cluster-scoped (k8s-openapi's `ClusterResourceScope`; kube's dynamic types
/// and namespaced kinds are not).
fn cluster_scoped<K: Resource>() -> bool {
    std::any::type_name::<K::Scope>().ends_with("::ClusterResourceScope")
}

impl Rules {
    /// No rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `verbs` on `resource` of `group` (`""` is the core group).
    #[must_use]
    pub fn allow(mut self, group: &str, resource: &str, verbs: &[&'static str]) -> Self {
        self.rules
            .entry((group.to_owned(), resource.to_owned()))
            .or_default()
            .extend(verbs);
        self
    }

    /// Adds `verbs` on the objects named `names` of `resource` in `group` only (a rule with
    /// `resourceNames`; `create` cannot be limited by name, as the apiserver knows no name then).
    #[must_use]
    pub fn allow_named(
        mut self,
        group: &str,
        resource: &str,
        verbs: &[&'static str],
        names: &[&str],
    ) -> Self {
        let mut names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        names.sort();
        names.dedup();
        self.named
            .entry((group.to_owned(), resource.to_owned(), names))
            .or_default()
            .extend(verbs);
        self
    }

    /// Adds `verbs` (HTTP methods in lower case: `get`, `post`, ...) on `url`, a path of the
    /// apiserver that is not a resource (`/metrics`, `/healthz/*`): a `nonResourceURLs` rule,
    /// which only a ClusterRole grants.
    #[must_use]
    pub fn allow_non_resource(mut self, url: &str, verbs: &[&'static str]) -> Self {
        self.non_resource
            .entry(url.to_owned())
            .or_default()
            .extend(verbs);
        self
    }

    /// The primary kind of a controller; `finalizers`: it also updates `K/finalizers`, which
    /// holding a finalizer needs, and so does owning children: they get `blockOwnerDeletion:
    /// true`, which the OwnerReferencesPermissionEnforcement admission plugin allows only to
    /// whoever may update the owner's finalizers.
    #[must_use]
    pub fn primary<K: Resource<DynamicType = ()>>(self, finalizers: bool) -> Self {
        let (group, plural) = resource_of::<K>();
        let this = self
            .scope::<K>()
            .allow(
                &group,
                &plural,
                &["get", "list", "watch", "update", "patch"],
            )
            .allow(
                &group,
                &format!("{plural}/status"),
                &["get", "update", "patch"],
            );
        if finalizers {
            this.allow(&group, &format!("{plural}/finalizers"), &["update"])
        } else {
            this
        }
    }

    /// A kind the controller creates and owns.
    #[must_use]
    pub fn owned<K: Resource<DynamicType = ()>>(self) -> Self {
        let (group, plural) = resource_of::<K>();
        self.scope::<K>().allow(
            &group,
            &plural,
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        )
    }

    /// A kind the controller only watches.
    #[must_use]
    pub fn watched<K: Resource<DynamicType = ()>>(self) -> Self {
        let (group, plural) = resource_of::<K>();
        self.scope::<K>()
            .allow(&group, &plural, &["get", "list", "watch"])
    }

    /// Records whether `K` is cluster-scoped (what a namespaced Role cannot grant).
    #[must_use]
    pub fn scope<K: Resource<DynamicType = ()>>(mut self) -> Self {
        if cluster_scoped::<K>() {
            self.cluster_scoped.insert(resource_of::<K>());
        }
        self
    }

    /// The rules on cluster-scoped resources (and their subresources), and the others: what a
    /// namespaced Role can grant and what needs a ClusterRole whatever the namespaces.
    pub fn split_by_scope(&self) -> (Rules, Rules) {
        let mut cluster = Rules::new();
        let mut namespaced = Rules::new();
        for ((group, resource), verbs) in &self.rules {
            let base = resource.split('/').next().unwrap_or(resource);
            let key = (group.clone(), resource.clone());
            if self
                .cluster_scoped
                .contains(&(group.clone(), base.to_owned()))
            {
                cluster.rules.insert(key, verbs.clone());
                cluster
                    .cluster_scoped
                    .insert((group.clone(), base.to_owned()));
            } else {
                namespaced.rules.insert(key, verbs.clone());
            }
        }
        for ((group, resource, names), verbs) in &self.named {
            let base = resource.split('/').next().unwrap_or(resource);
            let key = (group.clone(), resource.clone(), names.clone());
            if self
                .cluster_scoped
                .contains(&(group.clone(), base.to_owned()))
            {
                cluster.named.insert(key, verbs.clone());
                cluster
                    .cluster_scoped
                    .insert((group.clone(), base.to_owned()));
            } else {
                namespaced.named.insert(key, verbs.clone());
            }
        }
        // Only a ClusterRole grants non-resource URLs.
        cluster.non_resource.clone_from(&self.non_resource);
        (cluster, namespaced)
    }

    /// These rules without those on `resource` of `group`.
    #[must_use]
    pub fn without(mut self, group: &str, resource: &str) -> Self {
        self.rules.remove(&(group.to_owned(), resource.to_owned()));
        self
    }

    /// Whether there are no rules, neither for every object of a resource nor for named ones.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.named.is_empty() && self.non_resource.is_empty()
    }

    /// Publishing events (the [`Recorder`](crate::events::Recorder)).
    #[must_use]
    pub fn events(self) -> Self {
        self.allow("events.k8s.io", "events", &["create", "patch"])
    }

    /// Leader election and shard membership on Leases (`list`, `delete`: the sharder lists the
    /// members' Leases and deletes those of departed members; `watch`: members follow the
    /// group's assignment of hash ranges).
    #[must_use]
    pub fn leases(self) -> Self {
        self.allow(
            "coordination.k8s.io",
            "leases",
            &["get", "list", "watch", "create", "update", "delete"],
        )
    }

    /// Adds every rule of `other`.
    #[must_use]
    pub fn merge(mut self, other: Rules) -> Self {
        for (key, verbs) in other.rules {
            self.rules.entry(key).or_default().extend(verbs);
        }
        for (key, verbs) in other.named {
            self.named.entry(key).or_default().extend(verbs);
        }
        self.cluster_scoped.extend(other.cluster_scoped);
        for (url, verbs) in other.non_resource {
            self.non_resource.entry(url).or_default().extend(verbs);
        }
        self
    }

    /// The rules as PolicyRules, one per group with the same verbs, sorted (byte-stable output).
    pub fn policy_rules(&self) -> Vec<PolicyRule> {
        let mut grouped: BTreeMap<(String, Vec<&str>), Vec<String>> = BTreeMap::new();
        for ((group, resource), verbs) in &self.rules {
            grouped
                .entry((group.clone(), verbs.iter().copied().collect()))
                .or_default()
                .push(resource.clone());
        }
        let named = self
            .named
            .iter()
            .map(|((group, resource, names), verbs)| PolicyRule {
                api_groups: Some(vec![group.clone()]),
                resources: Some(vec![resource.clone()]),
                resource_names: Some(names.clone()),
                verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
                ..PolicyRule::default()
            });
        let mut urls: BTreeMap<Vec<&str>, Vec<String>> = BTreeMap::new();
        for (url, verbs) in &self.non_resource {
            urls.entry(verbs.iter().copied().collect())
                .or_default()
                .push(url.clone());
        }
        let non_resource = urls.into_iter().map(|(verbs, urls)| PolicyRule {
            non_resource_urls: Some(urls),
            verbs: verbs.into_iter().map(str::to_owned).collect(),
            ..PolicyRule::default()
        });
        grouped
            .into_iter()
            .map(|((group, verbs), resources)| PolicyRule {
                api_groups: Some(vec![group]),
                resources: Some(resources),
                verbs: verbs.into_iter().map(str::to_owned).collect(),
                ..PolicyRule::default()
            })
            .chain(named)
            .chain(non_resource)
            .collect()
    }
}

/// The registered controllers, sorted by name.
pub fn registered() -> Vec<&'static ControllerRegistration> {
    let mut all: Vec<_> = inventory::iter::<ControllerRegistration>
        .into_iter()
        .collect();
    all.sort_by_key(|r| r.name);
    all
}

/// The rules of every registered controller, merged.
pub fn registered_rules() -> Rules {
    registered()
        .into_iter()
        .fold(Rules::new(), |acc, r| acc.merge((r.rules)()))
}

/// What the manager's webhook server does besides serving, for the kinds with admission
/// webhooks `webhooks` and those whose versions convert `conversions`: cluster-wide, apply the
/// managed webhook configurations and point the converting CRDs (by name) at the conversion
/// webhook; in the namespace of its self-signed certificate's Secret, keep that Secret. Both
/// empty when nothing is served.
///
/// The one source of these rules: `crdgen --rbac` / `--all` put both in the ClusterRole, `crdgen
/// --deploy` the first in a ClusterRole and the second in a Role in the operator's namespace.
/// Nothing is deleted (the configurations and conversions stay when the operator stops).
pub fn webhook_rules(
    webhooks: &[crate::webhook::KindWebhooks],
    conversions: &[crate::webhook::KindConversions],
) -> (Rules, Rules) {
    let mut cluster = Rules::new();
    let mut certificate = Rules::new();
    let validates = |k: &crate::webhook::KindWebhooks| {
        k.hooks.validate.is_some() || k.hooks.validate_delete.is_some()
    };
    let mut configurations = Vec::new();
    // A converting kind's check of the annotations its conversions keep fields in is a
    // validating webhook.
    if webhooks.iter().any(validates) || !conversions.is_empty() {
        configurations.push("validatingwebhookconfigurations");
    }
    if webhooks.iter().any(|k| k.hooks.default.is_some()) {
        configurations.push("mutatingwebhookconfigurations");
    }
    for resource in configurations {
        cluster = cluster.allow(
            "admissionregistration.k8s.io",
            resource,
            &["get", "create", "patch"],
        );
        cluster.cluster_scoped.insert((
            "admissionregistration.k8s.io".to_owned(),
            resource.to_owned(),
        ));
    }
    if !conversions.is_empty() {
        let names: Vec<String> = conversions
            .iter()
            .map(super::webhook::KindConversions::crd_name)
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        cluster = cluster
            .allow_named(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                &["get", "list", "watch", "patch"],
                &names,
            )
            // The Warning events about conversion annotations dropped, on any object of the
            // kinds.
            .events();
    }
    if !webhooks.is_empty() || !conversions.is_empty() {
        certificate = certificate.allow("", "secrets", &["get", "create", "update"]);
    }
    (cluster, certificate)
}

/// What the manager's storage migration (`Manager::storage_migration`) does for the CRDs
/// `crds` of the kinds it reconciles that have several versions: read and annotate the CRD (its
/// progress), prune its `status.storedVersions`, and write the kind's objects back (`update`).
/// Cluster-scoped but the kind's own rule, which follows the kind's scope. Empty when no CRD has
/// several versions.
pub fn migration_rules(crds: &[CustomResourceDefinition]) -> Rules {
    let mut rules = Rules::new();
    for crd in crds.iter().filter(|c| c.spec.versions.len() > 1) {
        let Some(name) = crd.metadata.name.as_deref() else {
            continue;
        };
        for resource in [
            "customresourcedefinitions",
            "customresourcedefinitions/status",
        ] {
            rules = rules.allow_named("apiextensions.k8s.io", resource, &["get", "patch"], &[name]);
            rules
                .cluster_scoped
                .insert(("apiextensions.k8s.io".to_owned(), resource.to_owned()));
        }
        let kind = (crd.spec.group.clone(), crd.spec.names.plural.clone());
        rules = rules.allow(&kind.0, &kind.1, &["list", "update"]);
        if crd.spec.scope == "Cluster" {
            rules.cluster_scoped.insert(kind);
        }
    }
    rules
}

/// [`migration_rules`] of the registered CRDs that registered controllers reconcile or watch
/// (their rules name the kind).
pub fn registered_migration_rules() -> Rules {
    let controllers = registered_rules();
    let Ok(crds) = crate::crd::crds() else {
        return Rules::new();
    };
    let reconciled: Vec<CustomResourceDefinition> = crds
        .into_iter()
        .filter(|c| {
            controllers
                .rules
                .contains_key(&(c.spec.group.clone(), c.spec.names.plural.clone()))
        })
        .collect();
    migration_rules(&reconciled)
}

/// [`webhook_rules`] of the kinds linked into this binary, merged.
pub fn registered_webhook_rules() -> Rules {
    let (cluster, certificate) = webhook_rules(
        &crate::webhook::registered(),
        &crate::webhook::registered_conversions(),
    );
    cluster.merge(certificate)
}

/// A ClusterRole named `name` with everything the operator does in any mode of its binary: the
/// rules of every registered controller, of its webhook server ([`webhook_rules`]) and the
/// Leases of leader election and shard membership ([`Rules::leases`]) — wherever it is bound,
/// so that one binding of it runs the operator. `crdgen --deploy` narrows the Leases to the
/// operator's namespace instead ([`leader_election_role`]).
pub fn cluster_role(name: &str) -> ClusterRole {
    let rules = registered_rules()
        .leases()
        .merge(registered_webhook_rules())
        .merge(registered_migration_rules());
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        rules: Some(rules.policy_rules()),
        ..ClusterRole::default()
    }
}

/// The namespaced Role named `name` in `namespace` that leader election needs: the Leases there.
pub fn leader_election_role(name: &str, namespace: &str) -> Role {
    Role {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        rules: Some(Rules::new().leases().policy_rules()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};

    use super::*;

    #[test]
    fn rules_for_named_objects_only_should_not_be_empty() {
        let named = Rules::new().allow_named("", "configmaps", &["get"], &["lock"]);
        assert!(!named.is_empty());
        assert_eq!(named.policy_rules().len(), 1);
        assert!(Rules::new().is_empty());
    }

    #[test]
    fn non_resource_urls_should_be_one_rule_per_verb_set_and_go_to_the_cluster_role() {
        let rules = Rules::new()
            .allow_non_resource("/metrics", &["get"])
            .allow_non_resource("/healthz/*", &["get"])
            .allow_non_resource("/debug", &["get", "post"])
            .owned::<ConfigMap>();
        let policy = rules.policy_rules();
        let urls: Vec<(Vec<String>, Vec<String>)> = policy
            .iter()
            .filter_map(|r| Some((r.non_resource_urls.clone()?, r.verbs.clone())))
            .collect();
        assert_eq!(
            urls,
            [
                (
                    vec!["/healthz/*".into(), "/metrics".into()],
                    vec!["get".into()]
                ),
                (vec!["/debug".into()], vec!["get".into(), "post".into()]),
            ]
        );
        assert!(
            policy
                .iter()
                .all(|r| r.non_resource_urls.is_none() || r.api_groups.is_none())
        );
        let (cluster, namespaced) = rules.split_by_scope();
        assert_eq!(cluster.non_resource, rules.non_resource);
        assert!(namespaced.non_resource.is_empty());
        assert!(
            !Rules::new()
                .allow_non_resource("/metrics", &["get"])
                .is_empty()
        );
        let merged = Rules::new()
            .allow_non_resource("/metrics", &["get"])
            .merge(Rules::new().allow_non_resource("/metrics", &["head"]));
        assert_eq!(
            merged.non_resource["/metrics"],
            BTreeSet::from(["get", "head"])
        );
    }

    /// `rbac(.., resource_names = [..])` with one watched namespace: the Role keeps the rule
    /// (it was dropped by the split of `crdgen --deploy --watch-namespace`).
    #[test]
    fn split_by_scope_should_keep_rules_on_named_objects() {
        use k8s_openapi::api::core::v1::Namespace;
        let rules = Rules::new()
            .allow_named("", "configmaps", &["get"], &["lock"])
            .watched::<Namespace>()
            .allow_named("", "namespaces", &["update"], &["prod"]);
        let (cluster, namespaced) = rules.split_by_scope();
        assert_eq!(
            namespaced.named.keys().collect::<Vec<_>>(),
            [&(
                String::new(),
                "configmaps".to_owned(),
                vec!["lock".to_owned()]
            )]
        );
        assert_eq!(
            cluster.named.keys().collect::<Vec<_>>(),
            [&(
                String::new(),
                "namespaces".to_owned(),
                vec!["prod".to_owned()]
            )]
        );
    }

    #[test]
    fn rules_should_follow_the_wiring_and_merge_verbs() {
        let rules = Rules::new()
            .primary::<Deployment>(true)
            .owned::<ConfigMap>()
            .watched::<Secret>()
            .watched::<ConfigMap>()
            .events()
            .policy_rules();
        let find = |group: &str, resource: &str| {
            rules
                .iter()
                .find(|r| {
                    r.api_groups.as_deref() == Some(&[group.to_owned()])
                        && r.resources
                            .as_ref()
                            .is_some_and(|rs| rs.iter().any(|x| x == resource))
                })
                .map(|r| r.verbs.join(" "))
        };
        assert_eq!(
            find("apps", "deployments").as_deref(),
            Some("get list patch update watch")
        );
        assert_eq!(
            find("apps", "deployments/status").as_deref(),
            Some("get patch update")
        );
        assert_eq!(
            find("apps", "deployments/finalizers").as_deref(),
            Some("update")
        );
        assert_eq!(
            find("", "configmaps").as_deref(),
            Some("create delete get list patch update watch"),
            "owned and watched: the union"
        );
        assert_eq!(find("", "secrets").as_deref(), Some("get list watch"));
        assert_eq!(
            find("events.k8s.io", "events").as_deref(),
            Some("create patch")
        );
    }
}
