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

/// The skeleton store streams lists (each object cut to its bones as it arrives, never a whole
/// list of full objects at once). A key it holds that the list no longer has (an object deleted
/// while nobody watched) must still be removed and announced at the end of the list, and the
/// listed objects announced as they arrive.
#[tokio::test]
async fn a_skeleton_informer_should_stream_its_list_and_announce_what_the_list_lacks() {
    use kube::core::PartialObjectMeta;
    use kubeforge::store::{LocalStore, SkeletonStore, Store};
    const ROOT_CA: &str = "kube-root-ca.crt";

    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<ConfigMap>();
    for name in ["kept-1", "kept-2"] {
        api.create(&PostParams::default(), &configmap(name, &[("a", "1")]))
            .await
            .unwrap();
    }
    let store = SkeletonStore::<ConfigMap>::new();
    assert!(LocalStore::streams_lists(&store));
    // What the store remembers of an object that was deleted while it was not watching.
    LocalStore::apply(
        &store,
        Arc::new(PartialObjectMeta {
            metadata: kube::api::ObjectMeta {
                name: Some("gone".into()),
                namespace: Some(ns.name().to_owned()),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            ..Default::default()
        }),
    );
    let store: Arc<dyn Store<PartialObjectMeta<ConfigMap>>> = Arc::new(store);
    let informer = Arc::new(Informer::with_store(
        ns.api::<PartialObjectMeta<ConfigMap>>(),
        InformerConfig::default(),
        store,
    ));
    let mut events = informer.subscribe();
    let shutdown = CancellationToken::new();
    tokio::spawn(informer.clone().run(shutdown.clone()));
    tokio::time::timeout(Duration::from_secs(30), informer.wait_for_sync())
        .await
        .expect("synced");

    let (mut applied, mut deleted) = (Vec::new(), Vec::new());
    while applied.len() < 2 || deleted.is_empty() {
        let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("an event within 30 s")
            .expect("the informer is running");
        match event {
            // Every namespace has its `kube-root-ca.crt`.
            Event::Applied { new, .. } if new.metadata.name.as_deref() != Some(ROOT_CA) => {
                applied.push(new.metadata.name.clone().unwrap());
            }
            Event::Applied { .. } => {}
            Event::Deleted(gone) => deleted.push(gone.metadata.name.clone().unwrap()),
            Event::Resync(_) => {}
        }
    }
    applied.sort();
    assert_eq!(applied, ["kept-1", "kept-2"]);
    assert_eq!(deleted, ["gone"]);
    let mut keys: Vec<_> = informer
        .store()
        .list()
        .await
        .unwrap()
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .filter(|name| name != ROOT_CA)
        .collect();
    keys.sort();
    assert_eq!(keys, ["kept-1", "kept-2"]);
    shutdown.cancel();
}
