//! A manager watching a set of namespaces (`Manager::namespaces`, controller-runtime's
//! `DefaultNamespaces`) on the real apiserver: its ServiceAccount may act in those namespaces
//! only (a RoleBinding in each, nothing cluster-wide), so an informer over all namespaces could
//! never sync; `#[controller]` then watches each namespace of the set with an informer of its
//! own, reconciles objects there and nowhere else, owns children there, and reads the cache of
//! the whole set as one store.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{ListParams, PostParams};
use kubeforge::Namespaces;
use kubeforge::cache::Lookup;
use kubeforge::controller::{Action, Context};
use kubeforge::manager::Manager;
use kubeforge::testing::TestNamespace;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually};

/// What the controller saw: each reconciled key, and the ConfigMaps its cache read of the
/// whole set held at each reconcile.
#[derive(Clone, Default)]
struct Seen {
    keys: Arc<Mutex<BTreeSet<(String, String)>>>,
    cached: Arc<Mutex<Vec<usize>>>,
}

#[derive(Clone, Default)]
struct Mirror(Seen);

#[kubeforge::controller(for = ConfigMap, name = "ns-set-mirror", owns(Secret))]
impl Mirror {
    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, kubeforge::BoxError> {
        let ns = cm.metadata.namespace.clone().unwrap_or_default();
        let name = cm.metadata.name.clone().unwrap_or_default();
        self.0.keys.lock().unwrap().insert((ns, name.clone()));
        let all = ctx
            .cache()
            .store::<ConfigMap>(&Lookup::namespaces(ctx.wiring().namespaces.clone()))?
            .list()
            .await?;
        self.0.cached.lock().unwrap().push(all.len());
        let child = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("{name}-mirror")),
                ..Default::default()
            },
            string_data: Some([("from".to_owned(), name)].into()),
            ..Default::default()
        };
        ctx.apply_owned(&cm, "ns-set-mirror", child).await?;
        Ok(Action::Done)
    }
}

/// A ClusterRole over ConfigMaps, Secrets and Events, bound by a RoleBinding in each of
/// `granted` to ServiceAccount `account` of `home`: it may act there and nowhere else.
async fn grant(home: &TestNamespace, account: &str, granted: &[&TestNamespace]) {
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": format!("{account}-{}", home.name()),
            "labels": { "kubeforge.dev/test-namespace": home.name() },
        },
        "rules": [
            { "apiGroups": [""], "resources": ["configmaps", "secrets"],
              "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"] },
            { "apiGroups": ["", "events.k8s.io"], "resources": ["events"],
              "verbs": ["create", "patch", "update"] },
        ],
    }))
    .unwrap();
    kube::Api::<ClusterRole>::all(home.client())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    for ns in granted {
        let binding: RoleBinding = serde_json::from_value(serde_json::json!({
            "metadata": { "name": account },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": format!("{account}-{}", home.name()) },
            "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": home.name() }],
        }))
        .unwrap();
        ns.api::<RoleBinding>()
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
    }
}

/// A client of a ServiceAccount that may act in `a` and `b` and nowhere else (checked).
async fn client_in(a: &TestNamespace, b: &TestNamespace) -> kube::Client {
    grant(a, "ns-set", &[a, b]).await;
    let plane = kubeforge::testing::ControlPlane::shared().unwrap();
    let client = plane
        .service_account_client(a.name(), "ns-set")
        .await
        .unwrap();
    for ns in [a, b] {
        let api = kube::Api::<ConfigMap>::namespaced(client.clone(), ns.name());
        eventually(
            "the bindings to take effect",
            Duration::from_secs(30),
            async || api.list(&ListParams::default()).await.ok(),
        )
        .await;
    }
    // Nothing cluster-wide: an informer over all namespaces could not list.
    let everywhere = kube::Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default())
        .await;
    assert!(
        matches!(&everywhere, Err(kube::Error::Api(s)) if s.code == 403),
        "{everywhere:?}"
    );

    client
}

#[tokio::test]
async fn a_manager_over_a_set_of_namespaces_should_reconcile_there_only_with_roles_there_only() {
    let (a, b, c) = (
        TestNamespace::new().await.unwrap(),
        TestNamespace::new().await.unwrap(),
        TestNamespace::new().await.unwrap(),
    );
    let client = client_in(&a, &b).await;

    // Objects in all three namespaces, before and after the manager starts.
    for ns in [&a, &b, &c] {
        ns.api::<ConfigMap>()
            .create(&PostParams::default(), &configmap("before", &[]))
            .await
            .unwrap();
    }
    let seen = Seen::default();
    let manager = Manager::new(client)
        .namespaces(Namespaces::set([a.name(), b.name()]))
        .controller(Mirror(seen.clone()));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    for ns in [&a, &b, &c] {
        ns.api::<ConfigMap>()
            .create(&PostParams::default(), &configmap("after", &[]))
            .await
            .unwrap();
    }

    // Each ConfigMap of the set gets its owned mirror, in its own namespace.
    for ns in [&a, &b] {
        for name in ["before", "after"] {
            let secrets = ns.api::<Secret>();
            let mirror = eventually(
                &format!("{}/{name}-mirror", ns.name()),
                Duration::from_secs(60),
                async || {
                    secrets
                        .get_opt(&format!("{name}-mirror"))
                        .await
                        .ok()
                        .flatten()
                },
            )
            .await;
            let owner = &mirror.metadata.owner_references.unwrap()[0];
            assert_eq!(
                (owner.kind.as_str(), owner.name.as_str()),
                ("ConfigMap", name)
            );
        }
    }
    // A change in the set is seen by the informer of its namespace: b's objects reconcile
    // again through b's informer (the owned Secret of a new object appears).
    b.api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("later", &[]))
        .await
        .unwrap();
    let secrets = b.api::<Secret>();
    eventually("b/later-mirror", Duration::from_secs(60), async || {
        secrets.get_opt("later-mirror").await.ok().flatten()
    })
    .await;

    // Never c's: no informer watches it, and the manager could not have read it anyway.
    let keys = seen.keys.lock().unwrap().clone();
    assert!(
        keys.iter().all(|(ns, _)| ns == a.name() || ns == b.name()),
        "{keys:?}"
    );
    for ns in [&a, &b] {
        for name in ["before", "after"] {
            assert!(
                keys.contains(&(ns.name().to_owned(), name.to_owned())),
                "{keys:?}"
            );
        }
    }
    assert!(
        c.api::<Secret>()
            .get_opt("before-mirror")
            .await
            .unwrap()
            .is_none(),
        "c's object got a mirror"
    );
    cache_of_the_set_should_hold_both_namespaces(&seen, &a, &b).await;

    shutdown.cancel();
    running.await.unwrap().unwrap();
}

/// The cache of the set, read as one store, held the objects of both namespaces.
async fn cache_of_the_set_should_hold_both_namespaces(
    seen: &Seen,
    a: &TestNamespace,
    b: &TestNamespace,
) {
    // The cache of the set, read as one store, held the objects of both namespaces (the
    // namespaces' own ConfigMaps, such as kube-root-ca.crt, are there too): the last
    // reconcile saw at least the 5 objects made in a and b.
    let last = *seen.cached.lock().unwrap().last().unwrap();
    assert!(last >= 5, "the set's cache held {last} ConfigMaps");
    let listed: usize = {
        let mut n = 0;
        for ns in [a, b] {
            n += ns
                .api::<ConfigMap>()
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len();
        }
        n
    };
    assert!(
        last <= listed,
        "the set's cache held {last} > {listed} ConfigMaps"
    );
}

/// Records the ConfigMaps a watcher was told of, by namespace and name.
struct Told(Arc<Mutex<BTreeSet<(String, String)>>>);

impl kubeforge::watcher::Watcher<ConfigMap> for Told {
    type Error = kube::Error;

    async fn add(
        &self,
        cm: Arc<ConfigMap>,
        _: &kubeforge::watcher::WatchContext,
    ) -> Result<(), kube::Error> {
        let key = (
            cm.metadata.namespace.clone().unwrap_or_default(),
            cm.metadata.name.clone().unwrap_or_default(),
        );
        self.0.lock().unwrap().insert(key);
        Ok(())
    }
}

/// A watcher over a set gets the events of each namespace's informer through one dispatcher,
/// and none of the namespaces outside the set.
#[tokio::test]
async fn a_watcher_over_a_set_of_namespaces_should_be_told_of_each_and_only_of_those() {
    let (a, b, c) = (
        TestNamespace::new().await.unwrap(),
        TestNamespace::new().await.unwrap(),
        TestNamespace::new().await.unwrap(),
    );
    let client = a.client();
    let wiring = kubeforge::controller::Wiring::new(client.clone());
    let set = Namespaces::set([a.name(), b.name()]);
    let config = kubeforge::informer::InformerConfig::default().labels("told=yes");
    let watcher = kubeforge::watcher::WatcherController::with_informer(
        "ns-set-watcher",
        &wiring,
        set.apis::<ConfigMap>(&client),
        config,
    );
    let told = Arc::new(Mutex::new(BTreeSet::new()));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(watcher.run(Told(Arc::clone(&told)), shutdown.clone()));
    for ns in [&c, &a, &b] {
        for name in ["one", "two"] {
            let mut cm = configmap(name, &[]);
            cm.metadata.labels = Some([("told".to_owned(), "yes".to_owned())].into());
            ns.api::<ConfigMap>()
                .create(&PostParams::default(), &cm)
                .await
                .unwrap();
        }
    }
    let expected: BTreeSet<(String, String)> = [&a, &b]
        .iter()
        .flat_map(|ns| ["one", "two"].map(|name| (ns.name().to_owned(), name.to_owned())))
        .collect();
    eventually(
        "the watcher told of a's and b's ConfigMaps",
        Duration::from_secs(60),
        async || (*told.lock().unwrap() == expected).then_some(()),
    )
    .await;
    // c's were created first: had an informer watched c, its adds would most likely be in, and
    // told would never have equalled the expected set.
    let told = told.lock().unwrap().clone();
    assert!(told.iter().all(|(ns, _)| ns != c.name()), "{told:?}");
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
