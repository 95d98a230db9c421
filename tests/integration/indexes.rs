//! Custom indexes and transforms from `#[controller]` on the real apiserver: `indexes(..)` and
//! `transform = ..` on the primary kind and on a watched kind, queried from the reconcile with
//! `Context::indexed`; and a mistake — options of one kind given to an informer of another —
//! stops the controller at start-up instead of being ignored.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kubeforge::ObjectKey;
use kubeforge::cache::Cache;
use kubeforge::controller::{Action, Context, Controller, Wiring};
use kubeforge::informer::InformerConfig;
use kubeforge::manager::Manager;
use kubeforge::testing::TestNamespace;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually};

/// Per reconciled ConfigMap: the names of the ConfigMaps sharing its `app` label (from the
/// index), the Secrets of type `kubeforge.dev/token` (from the watched kind's index), and the
/// data keys its cached copy holds.
type Report = BTreeMap<String, (Vec<String>, Vec<String>, Vec<String>)>;

#[derive(Clone, Default)]
struct Apps(Arc<Mutex<Report>>);

#[kubeforge::controller(for = ConfigMap, name = "indexed", concurrency = 1,
    labels = "indexed=yes", indexes(Self::by_app), transform = Self::slim,
    watches(Secret, map = Self::none, labels = "indexed=yes", indexes(Self::by_type)))]
impl Apps {
    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, kubeforge::BoxError> {
        let app = cm.labels().get("app").cloned().unwrap_or_default();
        let same_app = ctx.indexed::<ConfigMap>("by_app", &app).await?;
        let tokens = ctx
            .indexed::<Secret>("by_type", "kubeforge.dev/token")
            .await?;
        let keys = cm
            .data
            .as_ref()
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default();
        let report = (names(&same_app), names(&tokens), keys);
        self.0.lock().unwrap().insert(cm.name_any(), report);
        Ok(Action::Done)
    }

    fn by_app(cm: &ConfigMap) -> Vec<String> {
        cm.labels().get("app").cloned().into_iter().collect()
    }

    fn by_type(secret: &Secret) -> Vec<String> {
        secret.type_.clone().into_iter().collect()
    }

    /// Keeps only the `keep` key of the data: what the operator reads.
    fn slim(cm: &mut ConfigMap) {
        if let Some(data) = &mut cm.data {
            data.retain(|key, _| key == "keep");
        }
    }

    fn none(_: &Secret, _: &Cache) -> Vec<ObjectKey> {
        Vec::new()
    }
}

use kube::ResourceExt;

/// The sorted names of `objects`.
fn names<K: ResourceExt>(objects: &[Arc<K>]) -> Vec<String> {
    let mut names: Vec<String> = objects.iter().map(|o| o.name_any()).collect();
    names.sort();
    names
}

/// Reconciles nothing.
struct Nothing;

impl kubeforge::controller::Reconciler<ConfigMap> for Nothing {
    type Error = std::convert::Infallible;
    async fn reconcile(
        &self,
        _: Arc<ConfigMap>,
        _: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::Done)
    }
}

fn labelled(name: &str, app: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut cm = configmap(name, data);
    cm.metadata.labels = Some(
        [("indexed", "yes"), ("app", app)]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into(),
    );
    cm
}

fn token(name: &str, type_: &str) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([("indexed".to_owned(), "yes".to_owned())].into()),
            ..Default::default()
        },
        type_: Some(type_.to_owned()),
        ..Default::default()
    }
}

#[tokio::test]
async fn indexes_and_transforms_of_the_controller_attribute_should_answer_from_the_cache() {
    let ns = TestNamespace::new().await.unwrap();
    let secrets = ns.api::<Secret>();
    for (name, type_) in [
        ("t1", "kubeforge.dev/token"),
        ("t2", "kubeforge.dev/token"),
        ("o", "Opaque"),
    ] {
        secrets
            .create(&PostParams::default(), &token(name, type_))
            .await
            .unwrap();
    }
    let cms = ns.api::<ConfigMap>();
    for (name, app) in [("web-1", "web"), ("web-2", "web"), ("db-1", "db")] {
        let cm = labelled(name, app, &[("keep", "1"), ("drop", "a large value")]);
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let apps = Apps::default();
    let manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .controller(apps.clone());
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));

    let seen = |name: &str| apps.0.lock().unwrap().get(name).cloned();
    let web = eventually("web-1 reconciled", Duration::from_secs(60), async || {
        seen("web-1")
    })
    .await;
    assert_eq!(web.0, ["web-1", "web-2"], "the primary's index");
    assert_eq!(web.1, ["t1", "t2"], "the watched kind's index");
    assert_eq!(web.2, ["keep"], "the transform dropped the other keys");
    let db = eventually("db-1 reconciled", Duration::from_secs(60), async || {
        seen("db-1")
    })
    .await;
    assert_eq!(db.0, ["db-1"]);

    // An object moving to another app moves in the index (it is re-indexed on update).
    let moved = serde_json::json!({ "metadata": { "labels": { "app": "db" } } });
    cms.patch("web-2", &PatchParams::default(), &Patch::Merge(&moved))
        .await
        .unwrap();
    eventually(
        "db's index to hold web-2",
        Duration::from_secs(60),
        async || {
            let report = seen("web-2")?;
            (report.0 == ["db-1", "web-2"]).then_some(())
        },
    )
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

/// Options given for one kind to an informer of another are reported and stop the controller
/// at start-up, naming both kinds.
#[tokio::test]
async fn informer_options_of_another_kind_should_stop_the_controller_saying_so() {
    let ns = TestNamespace::new().await.unwrap();
    let wiring = Wiring::new(ns.client());
    let wrong = InformerConfig::default().index("by-type", |s: &Secret| {
        s.type_.clone().into_iter().collect()
    });
    let controller = Controller::new("mismatched", &wiring, ns.api::<ConfigMap>(), wrong);
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        controller.run(Nothing, CancellationToken::new()),
    )
    .await
    .expect("the controller stops at once");
    let error = result.expect_err("misconfigured").to_string();
    assert!(
        error.contains("Secret") && error.contains("ConfigMap"),
        "{error}"
    );
}

/// What the watcher saw: per added ConfigMap, the names sharing its app (from the index) and
/// its cached data keys.
#[derive(Clone, Default)]
struct Told(Arc<Mutex<BTreeMap<String, Names>>>);

/// The names sharing an app, and the data keys.
type Names = (Vec<String>, Vec<String>);

#[kubeforge::controller(for = ConfigMap, watcher, name = "indexed-watcher",
    indexes(Self::by_app), transform = Self::slim)]
impl Told {
    async fn add(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &kubeforge::watcher::WatchContext,
    ) -> Result<(), kubeforge::BoxError> {
        let Some(app) = cm.labels().get("app").cloned() else {
            return Ok(());
        };
        let ns = cm.namespace().unwrap_or_default();
        let same_app = ctx
            .cache()
            .store::<ConfigMap>(&kubeforge::cache::Lookup::namespace(ns))?
            .by_index("by_app", &app)
            .await?;
        let keys = cm
            .data
            .as_ref()
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default();
        self.0
            .lock()
            .unwrap()
            .insert(cm.name_any(), (names(&same_app), keys));
        Ok(())
    }

    fn by_app(cm: &ConfigMap) -> Vec<String> {
        Apps::by_app(cm)
    }

    fn slim(cm: &mut ConfigMap) {
        Apps::slim(cm);
    }
}

#[tokio::test]
async fn a_watcher_should_get_its_indexes_and_transform_from_the_controller_attribute() {
    let ns = TestNamespace::new().await.unwrap();
    let cms = ns.api::<ConfigMap>();
    for (name, app) in [("a-1", "a"), ("a-2", "a")] {
        let cm = labelled(name, app, &[("keep", "1"), ("drop", "x")]);
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let told = Told::default();
    let manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .watcher(told.clone());
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    let seen = eventually("a-1 told", Duration::from_secs(60), async || {
        told.0.lock().unwrap().get("a-1").cloned()
    })
    .await;
    assert_eq!(seen.0, ["a-1", "a-2"], "the index");
    assert_eq!(seen.1, ["keep"], "the transform");
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
