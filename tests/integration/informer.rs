//! Informers and the shared cache against the real apiserver.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kubeforge::ObjectKey;
use kubeforge::informer::{Event, Informer, InformerConfig};
use kubeforge::testing::TestNamespace;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::configmap;

async fn next_event(
    events: &mut tokio::sync::mpsc::Receiver<Event<ConfigMap>>,
) -> Event<ConfigMap> {
    tokio::time::timeout(Duration::from_secs(30), events.recv())
        .await
        .expect("an event within 30 s")
        .expect("the informer is running")
}

#[tokio::test]
async fn streaming_list_informer_should_sync_strip_managed_fields_and_follow_changes() {
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<ConfigMap>();
    // Created with server-side apply, so the server records managedFields.
    api.patch(
        "before",
        &PatchParams::apply("informer-test"),
        &Patch::Apply(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "before" }, "data": { "a": "1" } })),
    )
    .await
    .unwrap();
    assert!(
        api.get("before")
            .await
            .unwrap()
            .metadata
            .managed_fields
            .is_some()
    );

    let informer = Arc::new(Informer::new(
        api.clone(),
        InformerConfig::default()
            .streaming_list(true)
            .labels("!kubernetes.io/ignored"),
    ));
    let mut events = informer.subscribe();
    let shutdown = CancellationToken::new();
    tokio::spawn(informer.clone().run(shutdown.clone()));
    tokio::time::timeout(Duration::from_secs(30), informer.wait_for_sync())
        .await
        .expect("synced through a streaming list");

    let key = ObjectKey::namespaced(ns.name(), "before");
    let cached = informer.store().get(&key).await.unwrap().expect("listed");
    assert!(
        cached.metadata.managed_fields.is_none(),
        "stripped before caching"
    );
    assert_eq!(cached.data.as_ref().unwrap()["a"], "1");

    api.create(&PostParams::default(), &configmap("after", &[("b", "2")]))
        .await
        .unwrap();
    loop {
        if let Event::Applied { old: None, new } = next_event(&mut events).await
            && new.metadata.name.as_deref() == Some("after")
        {
            break;
        }
    }
    assert!(
        informer
            .store()
            .get(&ObjectKey::namespaced(ns.name(), "after"))
            .await
            .unwrap()
            .is_some()
    );
    shutdown.cancel();
}

#[tokio::test]
async fn informer_should_resync_and_replay_for_late_subscribers() {
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<ConfigMap>();
    api.create(&PostParams::default(), &configmap("steady", &[]))
        .await
        .unwrap();
    let informer = Arc::new(Informer::new(
        api,
        InformerConfig::default()
            .fields("metadata.name=steady")
            .resync(Duration::from_millis(500)),
    ));
    let shutdown = CancellationToken::new();
    tokio::spawn(informer.clone().run(shutdown.clone()));
    informer.wait_for_sync().await;

    // Subscribed after the sync: first the cached objects are replayed, then resyncs follow.
    let mut events = informer.subscribe();
    match next_event(&mut events).await {
        Event::Applied { old: None, new } => {
            assert_eq!(new.metadata.name.as_deref(), Some("steady"))
        }
        other => panic!("expected a replayed object, got {other:?}"),
    }
    match next_event(&mut events).await {
        Event::Resync(obj) => assert_eq!(obj.metadata.name.as_deref(), Some("steady")),
        other => panic!("expected a resync, got {other:?}"),
    }
    assert_eq!(
        informer.store().len().await.unwrap(),
        1,
        "the field selector kept the root CA ConfigMap out"
    );
    shutdown.cancel();
}
