//! The event recorder against the real apiserver (events.k8s.io/v1 validation included).

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kubeforge::events::{EventType, Recorder};
use kubeforge::testing::TestNamespace;

use crate::support::configmap;

#[tokio::test]
async fn recorder_should_aggregate_repeats_into_a_series() {
    let ns = TestNamespace::new().await.unwrap();
    let cm = ns
        .api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("watched", &[]))
        .await
        .unwrap();
    let recorder = Recorder::new(ns.client(), "events-test");
    for _ in 0..3 {
        recorder
            .publish(
                &cm,
                EventType::Warning,
                "Unreachable",
                "Probe",
                Some("backend down".into()),
            )
            .await
            .unwrap();
    }
    recorder
        .publish(&cm, EventType::Normal, "Recovered", "Probe", None)
        .await
        .unwrap();

    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(
        events.len(),
        2,
        "three repeats aggregated into one event: {events:#?}"
    );
    let warning = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("Unreachable"))
        .unwrap();
    assert_eq!(warning.series.as_ref().map(|s| s.count), Some(3));
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert_eq!(warning.note.as_deref(), Some("backend down"));
    assert_eq!(warning.reporting_controller.as_deref(), Some("events-test"));
    let regarding = warning.regarding.as_ref().unwrap();
    assert_eq!(
        (
            regarding.kind.as_deref(),
            regarding.name.as_deref(),
            regarding.uid.as_deref()
        ),
        (
            Some("ConfigMap"),
            Some("watched"),
            cm.metadata.uid.as_deref()
        )
    );
    let recovered = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("Recovered"))
        .unwrap();
    assert!(
        recovered.series.is_none(),
        "a first occurrence has no series"
    );
}
