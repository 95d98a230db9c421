//! Selectors and per-kind predicates of watched kinds in `#[controller]`: only labelled
//! ConfigMaps are watched (and cached), and of those only label changes count. And the primary
//! kind's selector and the reconcile timeout (`labels = ..`, `reconcile_timeout = ..`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kubeforge::ObjectKey;
use kubeforge::cache::Cache;
use kubeforge::controller::{Action, Context};
use kubeforge::manager::Manager;
use kubeforge::testing::TestNamespace;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually};

/// Counts the reconciles of each Secret; ConfigMaps map to the Secret of the same name.
#[derive(Clone, Default)]
struct Counter(Arc<Mutex<HashMap<String, usize>>>);

impl Counter {
    fn get(&self, name: &str) -> usize {
        self.0.lock().unwrap().get(name).copied().unwrap_or(0)
    }
}

#[kubeforge::controller(for = Secret, name = "selected", concurrency = 1,
    watches(ConfigMap, map = Self::same_name, labels = "selected=true", predicates(labels_changed)))]
impl Counter {
    async fn reconcile(
        &self,
        secret: Arc<Secret>,
        _ctx: &Context<Secret>,
    ) -> Result<Action, kube::Error> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        *self.0.lock().unwrap().entry(name).or_default() += 1;
        Ok(Action::Done)
    }

    fn same_name(cm: &ConfigMap, _cache: &Cache) -> Vec<ObjectKey> {
        vec![ObjectKey::of(cm)]
    }
}

fn secret(name: &str) -> Secret {
    serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap()
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = configmap(name, &[("v", "1")]);
    cm.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    cm
}

#[tokio::test]
async fn watches_should_follow_only_selected_objects_and_their_predicates() {
    let ns = TestNamespace::new().await.unwrap();
    let counter = Counter::default();
    let manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .controller(counter.clone());
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));

    let secrets = ns.api::<Secret>();
    let cms = ns.api::<ConfigMap>();
    for name in ["a", "b", "barrier"] {
        secrets
            .create(&PostParams::default(), &secret(name))
            .await
            .unwrap();
    }
    cms.create(
        &PostParams::default(),
        &labelled("a", &[("selected", "true")]),
    )
    .await
    .unwrap();
    cms.create(&PostParams::default(), &labelled("b", &[]))
        .await
        .unwrap();
    cms.create(
        &PostParams::default(),
        &labelled("barrier", &[("selected", "true")]),
    )
    .await
    .unwrap();
    eventually(
        "the first reconciles",
        Duration::from_secs(60),
        async || {
            (counter.get("a") >= 1 && counter.get("b") >= 1 && counter.get("barrier") >= 1)
                .then_some(())
        },
    )
    .await;
    // Let the creations' reconciles settle: a label change of the barrier, reconciled after
    // everything queued before it (one worker, in order).
    let barrier = async |round: &str| {
        let before = counter.get("barrier");
        let patch = json!({ "metadata": { "labels": { "round": round } } });
        cms.patch("barrier", &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
        eventually(
            "the barrier's reconcile",
            Duration::from_secs(60),
            async || (counter.get("barrier") > before).then_some(()),
        )
        .await;
    };
    barrier("0").await;
    let (a, b) = (counter.get("a"), counter.get("b"));

    // Not selected: a change of b is not seen at all.
    let relabel = |labels: serde_json::Value| json!({ "metadata": { "labels": labels } });
    cms.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(relabel(json!({ "x": "1" }))),
    )
    .await
    .unwrap();
    // Selected, but only its data changes: `labels_changed` filters it out.
    let data = json!({ "data": { "v": "2" } });
    cms.patch("a", &PatchParams::default(), &Patch::Merge(data))
        .await
        .unwrap();
    barrier("1").await;
    assert_eq!(
        counter.get("b"),
        b,
        "an unselected ConfigMap reconciled its Secret"
    );
    assert_eq!(
        counter.get("a"),
        a,
        "a data-only change passed `labels_changed`"
    );

    // Selected and relabelled: reconciled.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(relabel(json!({ "x": "1" }))),
    )
    .await
    .unwrap();
    eventually(
        "a's reconcile after its labels changed",
        Duration::from_secs(60),
        async || (counter.get("a") > a).then_some(()),
    )
    .await;

    shutdown.cancel();
    running.await.unwrap().unwrap();
}

/// Counts the reconciles of each ConfigMap labelled `tier=web`; the one named `slow` takes 30 s,
/// far past its 300 ms reconcile timeout.
#[derive(Clone, Default)]
struct WebTier(Counter);

#[kubeforge::controller(for = ConfigMap, name = "web-tier", concurrency = 1,
    labels = "tier=web", reconcile_timeout = "300ms")]
impl WebTier {
    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, kube::Error> {
        let name = cm.metadata.name.clone().unwrap_or_default();
        *self.0.0.lock().unwrap().entry(name.clone()).or_default() += 1;
        if name == "slow" {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        Ok(Action::Done)
    }
}

#[tokio::test]
async fn the_primary_selector_and_the_reconcile_timeout_should_hold() {
    let ns = TestNamespace::new().await.unwrap();
    let web = WebTier::default();
    let manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .controller(web.clone());
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    let cms = ns.api::<ConfigMap>();
    for cm in [
        labelled("other", &[("tier", "db")]),
        labelled("slow", &[("tier", "web")]),
        labelled("web", &[("tier", "web")]),
    ] {
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    // The slow reconcile is cancelled at 300 ms and retried (with the default 5 min timeout it
    // would still be running), and the one worker gets to `web` in between.
    eventually(
        "slow's reconcile cancelled and retried, and web's reconcile",
        Duration::from_secs(60),
        async || (web.0.get("slow") >= 3 && web.0.get("web") >= 1).then_some(()),
    )
    .await;
    // Changed after the others: an unselected ConfigMap is neither cached nor reconciled.
    cms.patch(
        "other",
        &PatchParams::default(),
        &Patch::Merge(json!({ "data": { "v": "2" } })),
    )
    .await
    .unwrap();
    cms.create(
        &PostParams::default(),
        &labelled("web2", &[("tier", "web")]),
    )
    .await
    .unwrap();
    eventually("web2's reconcile", Duration::from_secs(60), async || {
        (web.0.get("web2") >= 1).then_some(())
    })
    .await;
    assert_eq!(
        web.0.get("other"),
        0,
        "a ConfigMap without tier=web was reconciled"
    );
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

/// Counts the reconciles of each Secret; a ConfigMap of the same name counts only when its
/// `rev` annotation changed (a custom predicate on a watched kind).
#[derive(Clone, Default)]
struct Revisions(Counter);

#[kubeforge::controller(for = Secret, name = "revisions", concurrency = 1,
    watches(ConfigMap, map = Self::same_name, predicates(Self::rev_changed)))]
impl Revisions {
    async fn reconcile(
        &self,
        secret: Arc<Secret>,
        _ctx: &Context<Secret>,
    ) -> Result<Action, kube::Error> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        *self.0.0.lock().unwrap().entry(name).or_default() += 1;
        Ok(Action::Done)
    }

    fn same_name(cm: &ConfigMap, _cache: &Cache) -> Vec<ObjectKey> {
        vec![ObjectKey::of(cm)]
    }

    fn rev_changed(old: &kube::api::ObjectMeta, new: &kube::api::ObjectMeta) -> bool {
        let rev = |m: &kube::api::ObjectMeta| m.annotations.as_ref()?.get("rev").cloned();
        rev(old) != rev(new)
    }
}

#[tokio::test]
async fn a_custom_predicate_should_filter_a_watched_kind() {
    let ns = TestNamespace::new().await.unwrap();
    let revisions = Revisions::default();
    let manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .controller(revisions.clone());
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    let (secrets, cms) = (ns.api::<Secret>(), ns.api::<ConfigMap>());
    for name in ["s", "barrier"] {
        secrets
            .create(&PostParams::default(), &secret(name))
            .await
            .unwrap();
        cms.create(&PostParams::default(), &configmap(name, &[("v", "1")]))
            .await
            .unwrap();
    }
    let count = |name: &str| revisions.0.get(name);
    eventually(
        "the first reconciles",
        Duration::from_secs(60),
        async || (count("s") >= 1 && count("barrier") >= 1).then_some(()),
    )
    .await;
    let annotate = async |name: &str, rev: &str| {
        let patch = json!({ "metadata": { "annotations": { "rev": rev } } });
        cms.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    };
    // The barrier's reconcile follows everything its watch delivered before.
    let barrier = async |rev: &str| {
        let before = count("barrier");
        annotate("barrier", rev).await;
        eventually(
            "the barrier's reconcile",
            Duration::from_secs(60),
            async || (count("barrier") > before).then_some(()),
        )
        .await;
    };
    barrier("0").await;
    let s = count("s");
    let data = json!({ "data": { "v": "2" } });
    cms.patch("s", &PatchParams::default(), &Patch::Merge(data))
        .await
        .unwrap();
    barrier("1").await;
    assert_eq!(count("s"), s, "a data-only change passed `rev_changed`");
    annotate("s", "1").await;
    eventually(
        "s's reconcile after its rev changed",
        Duration::from_secs(60),
        async || (count("s") > s).then_some(()),
    )
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
