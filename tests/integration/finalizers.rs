//! The finalizer's removal when the object's finalizer list changed under it: another writer
//! removes its own finalizer while our cleanup runs, so our removal patch (guarded by a test of
//! the list it read) is refused. The controller must read the object again and remove ours, not
//! conclude that the object is no longer its own and leave the deletion stuck on its finalizer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kubeforge::controller::{Action, Context};
use kubeforge::manager::Manager;
use kubeforge::testing::TestNamespace;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually};

const OURS: &str = "race.kubeforge.dev/cleanup";
const THEIRS: &str = "other.example.com/hold";

#[derive(Clone, Default)]
struct Racing(Arc<AtomicUsize>);

#[kubeforge::controller(for = ConfigMap, name = "finalizer-race", labels = "race=yes",
    finalizer = "race.kubeforge.dev/cleanup")]
impl Racing {
    async fn reconcile(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, kube::Error> {
        Ok(Action::Done)
    }

    /// Another writer releases its finalizer while the cleanup runs (the first time only).
    async fn cleanup(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, kube::Error> {
        if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            let mut finalizers = cm.metadata.finalizers.clone().unwrap_or_default();
            finalizers.retain(|f| f != THEIRS);
            let patch = serde_json::json!({ "metadata": { "finalizers": finalizers } });
            ctx.api::<ConfigMap>()
                .patch(
                    cm.metadata.name.as_deref().unwrap_or_default(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
        }
        Ok(Action::Done)
    }
}

#[tokio::test]
async fn a_finalizer_whose_list_changed_during_cleanup_should_still_come_off() {
    let ns = TestNamespace::new().await.unwrap();
    let racing = Racing::default();
    let manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .controller(racing.clone());
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    let api = ns.api::<ConfigMap>();
    let mut cm = configmap("raced", &[]);
    cm.metadata.labels = Some([("race".to_owned(), "yes".to_owned())].into());
    cm.metadata.finalizers = Some(vec![THEIRS.to_owned()]);
    api.create(&PostParams::default(), &cm).await.unwrap();
    let finalizers = async || {
        api.get_opt("raced")
            .await
            .unwrap()
            .map(|cm| cm.metadata.finalizers.unwrap_or_default())
    };
    eventually("our finalizer added", Duration::from_secs(60), async || {
        finalizers()
            .await
            .filter(|f| f.iter().any(|f| f == OURS))
            .map(|_| ())
    })
    .await;
    api.delete("raced", &DeleteParams::default()).await.unwrap();
    // The other writer's finalizer goes during our cleanup; ours comes off although the list
    // changed under the first removal, and the object goes.
    eventually("the object gone", Duration::from_secs(60), async || {
        finalizers().await.is_none().then_some(())
    })
    .await;
    assert!(racing.0.load(Ordering::SeqCst) >= 1);
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
