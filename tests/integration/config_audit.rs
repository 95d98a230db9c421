//! The ConfigAudit example watcher against the real apiserver: every data change of a labelled
//! ConfigMap becomes an Event naming the keys.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kubeforge::events::Recorder;
use kubeforge::manager::Manager;
use kubeforge::testing::TestNamespace;
use kubeforge_examples::config_audit::{ConfigAudit, LABEL};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually};

async fn notes(ns: &TestNamespace, name: &str, reason: &str) -> Vec<String> {
    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap();
    events
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.note)
        .collect()
}

#[tokio::test]
async fn config_audit_should_record_each_data_change_of_labelled_configmaps() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let recorder = Arc::new(Recorder::new(client.clone(), "config-audit"));
    let manager = Manager::new(client)
        .namespace(Some(ns.name().to_owned()))
        .watcher(ConfigAudit { recorder });
    let shutdown = CancellationToken::new();
    tokio::spawn(manager.run_until(shutdown.clone()));

    let api = ns.api::<ConfigMap>();
    let mut audited = configmap("audited", &[("a", "1"), ("b", "2")]);
    audited.metadata.labels = Some([(LABEL.to_owned(), "true".to_owned())].into());
    api.create(&PostParams::default(), &audited).await.unwrap();
    api.create(&PostParams::default(), &configmap("ignored", &[("a", "1")]))
        .await
        .unwrap();
    eventually("the Audited event", Duration::from_secs(30), async || {
        (notes(&ns, "audited", "Audited").await == ["auditing 2 keys"]).then_some(())
    })
    .await;
    for name in ["audited", "ignored"] {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "b": "20", "c": "3" } })),
        )
        .await
        .unwrap();
    }
    eventually(
        "the DataChanged event",
        Duration::from_secs(30),
        async || {
            let notes = notes(&ns, "audited", "DataChanged").await;
            (notes == ["added: c; changed: b"]).then_some(())
        },
    )
    .await;
    assert!(notes(&ns, "ignored", "DataChanged").await.is_empty());
    assert!(notes(&ns, "ignored", "Audited").await.is_empty());
    shutdown.cancel();
}
