//! [`Namespaces`]: which namespaces a manager's controllers watch — all, one, or a set
//! (controller-runtime's `DefaultNamespaces`) — and [`Apis`], the one [`Api`] per namespace a
//! source of a controller watches.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::{Api, Client};

use crate::scope::{Kind, Scoped};

/// The namespaces a manager's controllers watch: every namespace, or a set of them.
///
/// A set is watched with one informer per namespace, so the manager needs permission in those
/// namespaces only (a Role in each, instead of a ClusterRole); the cache reads each object from
/// the informer of its namespace. Cluster-scoped kinds are watched once, whatever the set.
///
/// ```
/// use kubeforge::Namespaces;
/// let set = Namespaces::set(["shop", "billing", "shop"]);
/// assert_eq!(set.iter().collect::<Vec<_>>(), ["shop", "billing"]);
/// assert!(set.contains("billing") && !set.contains("default"));
/// assert!(Namespaces::all().contains("default"));
/// assert_eq!(Namespaces::from(Some("shop".to_owned())), Namespaces::one("shop"));
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Namespaces {
    /// `None`: all namespaces; otherwise the set, in the order given, without duplicates.
    set: Option<Arc<[String]>>,
}

impl Namespaces {
    /// Every namespace (one informer per kind, over the whole cluster).
    pub fn all() -> Self {
        Self::default()
    }

    /// One namespace.
    pub fn one(namespace: impl Into<String>) -> Self {
        Self {
            set: Some(Arc::from([namespace.into()])),
        }
    }

    /// A set of namespaces (duplicates dropped, the first occurrence's order kept). An empty set
    /// watches nothing.
    pub fn set<S: Into<String>>(namespaces: impl IntoIterator<Item = S>) -> Self {
        let mut set: Vec<String> = Vec::new();
        for ns in namespaces {
            let ns = ns.into();
            if !set.contains(&ns) {
                set.push(ns);
            }
        }
        Self {
            set: Some(set.into()),
        }
    }

    /// Whether every namespace is watched.
    pub fn is_all(&self) -> bool {
        self.set.is_none()
    }

    /// The namespaces of the set (nothing for [`Namespaces::all`]).
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.set
            .iter()
            .flat_map(|set| set.iter().map(String::as_str))
    }

    /// The namespace, when exactly one is watched.
    pub fn single(&self) -> Option<&str> {
        match self.set.as_deref() {
            Some([one]) => Some(one),
            _ => None,
        }
    }

    /// Whether objects of `namespace` are watched.
    pub fn contains(&self, namespace: &str) -> bool {
        self.set
            .as_deref()
            .is_none_or(|set| set.iter().any(|ns| ns == namespace))
    }

    /// The selector of the namespaces watched (`None`: all namespaces): what a webhook
    /// configuration's `namespaceSelector` says, over the `kubernetes.io/metadata.name` label
    /// every namespace carries.
    pub fn selector(&self) -> Option<LabelSelector> {
        const NAME: &str = "kubernetes.io/metadata.name";
        let set = self.set.as_deref()?;
        Some(match set {
            [one] => LabelSelector {
                match_labels: Some([(NAME.to_owned(), one.clone())].into()),
                ..LabelSelector::default()
            },
            set => LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: NAME.to_owned(),
                    operator: "In".to_owned(),
                    values: Some(set.to_vec()),
                }]),
                ..LabelSelector::default()
            },
        })
    }

    /// One [`Api`] of `K` per namespace watched (one over all namespaces for [`Namespaces::all`]
    /// and for cluster-scoped kinds).
    pub fn apis<K: Kind>(&self, client: &Client) -> Apis<K> {
        if !<K::Scope as Scoped>::NAMESPACED {
            return Apis::from(<K::Scope as Scoped>::api::<K>(client.clone(), None));
        }
        match &self.set {
            None => Apis::from(Api::<K>::all(client.clone())),
            Some(set) => Apis(
                set.iter()
                    .map(|ns| <K::Scope as Scoped>::api::<K>(client.clone(), Some(ns)))
                    .collect(),
            ),
        }
    }
}

impl fmt::Debug for Namespaces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.set {
            None => f.write_str("all namespaces"),
            Some(set) => f.debug_set().entries(set.iter()).finish(),
        }
    }
}

impl fmt::Display for Namespaces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.set {
            None => f.write_str("all namespaces"),
            Some(set) => f.write_str(&set.join(",")),
        }
    }
}

/// `None` is all namespaces, `Some(ns)` one.
impl From<Option<String>> for Namespaces {
    fn from(namespace: Option<String>) -> Self {
        namespace.map_or_else(Self::all, Self::one)
    }
}

impl From<&str> for Namespaces {
    fn from(namespace: &str) -> Self {
        Self::one(namespace)
    }
}

impl From<String> for Namespaces {
    fn from(namespace: String) -> Self {
        Self::one(namespace)
    }
}

/// What a source of a controller watches: one [`Api`], or one per namespace of a set. The
/// builder's sources take anything that converts into it (an `Api<K>`, a `Vec<Api<K>>`, or
/// [`Namespaces::apis`]).
pub struct Apis<K>(Vec<Api<K>>);

impl<K> Apis<K> {
    /// The [`Api`]s, one per namespace watched.
    pub fn into_vec(self) -> Vec<Api<K>> {
        self.0
    }
}

impl<K: kube::Resource> fmt::Debug for Apis<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(Api::resource_url))
            .finish()
    }
}

/// Converts into the [`Apis`] a controller source watches; implemented for `Api<K>`,
/// `Vec<Api<K>>` and `Apis<K>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say which objects of `{K}` to watch",
    label = "expected an `Api<{K}>`, a `Vec<Api<{K}>>` or `Namespaces::apis::<{K}>`"
)]
pub trait IntoApis<K> {
    /// The [`Apis`].
    fn into_apis(self) -> Apis<K>;
}

impl<K> IntoApis<K> for Api<K> {
    fn into_apis(self) -> Apis<K> {
        Apis(vec![self])
    }
}

impl<K> IntoApis<K> for Vec<Api<K>> {
    fn into_apis(self) -> Apis<K> {
        Apis(self)
    }
}

impl<K> IntoApis<K> for Apis<K> {
    fn into_apis(self) -> Apis<K> {
        self
    }
}

impl<K> From<Api<K>> for Apis<K> {
    fn from(api: Api<K>) -> Self {
        Apis(vec![api])
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    use super::*;

    fn offline_client() -> Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("static url"));
        Client::try_from(config).expect("offline client")
    }

    fn urls<K: kube::Resource>(apis: Apis<K>) -> Vec<String> {
        apis.into_vec()
            .iter()
            .map(|api| api.resource_url().to_owned())
            .collect()
    }

    #[tokio::test]
    async fn apis_should_watch_each_namespace_of_a_set_and_cluster_kinds_once() {
        let client = offline_client();
        let set = Namespaces::set(["a", "b"]);
        assert_eq!(
            urls(set.apis::<ConfigMap>(&client)),
            [
                "/api/v1/namespaces/a/configmaps",
                "/api/v1/namespaces/b/configmaps"
            ]
        );
        assert_eq!(urls(set.apis::<Namespace>(&client)), ["/api/v1/namespaces"]);
        assert_eq!(
            urls(Namespaces::all().apis::<ConfigMap>(&client)),
            ["/api/v1/configmaps"]
        );
        assert!(urls(Namespaces::set(Vec::<String>::new()).apis::<ConfigMap>(&client)).is_empty());
    }

    #[test]
    fn a_set_should_drop_duplicates_and_say_what_it_holds() {
        let set = Namespaces::set(["b", "a", "b"]);
        assert_eq!(set.to_string(), "b,a");
        assert_eq!(format!("{set:?}"), r#"{"b", "a"}"#);
        assert_eq!(set.single(), None);
        assert_eq!(Namespaces::one("x").single(), Some("x"));
        assert_eq!(Namespaces::all().to_string(), "all namespaces");
        assert!(Namespaces::all().is_all() && !set.is_all());
    }

    #[test]
    fn the_namespace_selector_should_cover_the_namespaces_watched() {
        assert_eq!(Namespaces::all().selector(), None);
        let one = Namespaces::one("shop").selector().unwrap();
        assert_eq!(
            serde_json::to_value(&one).unwrap(),
            serde_json::json!({ "matchLabels": { "kubernetes.io/metadata.name": "shop" } })
        );
        let set = Namespaces::set(["shop", "billing"]).selector().unwrap();
        assert_eq!(
            serde_json::to_value(&set).unwrap(),
            serde_json::json!({ "matchExpressions": [{
                "key": "kubernetes.io/metadata.name",
                "operator": "In",
                "values": ["shop", "billing"],
            }] })
        );
    }
}
