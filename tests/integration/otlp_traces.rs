//! Spans exported with OTLP (`--otlp-traces`) into a real Jaeger: one Rollout edit is one trace
//! from the spec change to `Ready` (the reconcile of the spec change, then those of the
//! Deployment's status updates until every pod exists), with the reconciles' triggers and writes
//! on it; and the spans of the last reconciles reach Jaeger when the operator stops (the manager
//! flushes the exporter; the batch delay here is a minute, so nothing else would send them).

use std::process::Command;
use std::time::Duration;

use crate::rollout::{Rollout, RolloutSpec};
use kube::api::{Patch, PatchParams, PostParams};
use kubeforge::crd::READY;
use kubeforge::testing::{ControlPlane, TestNamespace, apply_crds};
use serde_json::{Value, json};

use crate::support::eventually;
use crate::support::jaeger::Jaeger;
use crate::support::process::Spawned;

/// A span's tag `key`, as Jaeger's API returns it.
fn tag<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["tags"]
        .as_array()?
        .iter()
        .find(|t| t["key"] == key)
        .map(|t| &t["value"])
}

/// The span this one is a child of (`CHILD_OF`), if any.
fn parent(span: &Value) -> Option<&str> {
    span["references"]
        .as_array()?
        .iter()
        .find(|r| r["refType"] == "CHILD_OF")
        .and_then(|r| r["spanID"].as_str())
}

/// The reconcile spans of site `name` at `generation` across `traces`.
fn reconciles<'a>(traces: &'a [Value], name: &str, generation: i64) -> Vec<&'a Value> {
    traces
        .iter()
        .flat_map(|t| t["spans"].as_array().into_iter().flatten())
        .filter(|s| {
            s["operationName"] == "reconcile"
                && tag(s, "name") == Some(&json!(name))
                && tag(s, "generation") == Some(&json!(generation))
        })
        .collect()
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario: two generations, a stop, then the trace read back step by step"
)]
async fn an_edit_should_be_one_trace_in_jaeger_from_the_spec_change_to_ready() {
    let jaeger = Jaeger::start().await;
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    apply_crds(&ns.client(), [Rollout::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let service = format!("traced-{}", ns.name());
    let mut command = Command::new(env!("CARGO_BIN_EXE_traced-operator"));
    command
        .args(["--kubeconfig".as_ref(), plane.kubeconfig_path().as_os_str()])
        .args(["--namespace", ns.name(), "--health-probe-bind-address", "0"])
        .arg("--otlp-traces")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", jaeger.otlp_endpoint())
        .env("OTEL_SERVICE_NAME", &service)
        .env("OTEL_BSP_SCHEDULE_DELAY", "60000")
        .env("RUST_LOG", "info");
    let operator = Spawned::start(command);

    let rollouts = ns.api::<Rollout>();
    let rollout = Rollout::new(
        "shop",
        RolloutSpec {
            image: "registry.example.com/shop:1".to_owned(),
            replicas: 1,
        },
    );
    rollouts
        .create(&PostParams::default(), &rollout)
        .await
        .unwrap();
    let ready = async |generation: i64| {
        let rollout = rollouts.get("shop").await.ok()?;
        let status = rollout.status?;
        (status.observed_generation == Some(generation) && status.conditions.is_true(READY))
            .then_some(())
    };
    eventually("generation 1 Ready", Duration::from_secs(90), async || {
        ready(1).await
    })
    .await;
    // A scale (an image change would roll out: no kubelet here makes a pod ready, so that stalls).
    let edit = json!({ "spec": { "replicas": 3 } });
    rollouts
        .patch("shop", &PatchParams::default(), &Patch::Merge(edit))
        .await
        .unwrap();
    eventually("generation 2 Ready", Duration::from_secs(90), async || {
        ready(2).await
    })
    .await;

    let status = operator.stop().await;
    assert!(status.success(), "the operator exited with {status}");

    let traces = eventually(
        "generation 2's trace in Jaeger",
        Duration::from_secs(30),
        async || {
            let traces = jaeger.traces(&service).await;
            let spans = reconciles(&traces, "shop", 2);
            spans
                .iter()
                .any(|s| tag(s, "outcome").is_some())
                .then_some(())?;
            (spans.len() >= 2).then_some(traces)
        },
    )
    .await;

    // One trace for generation 2: the first reconcile (the spec change) is its root, the others
    // (the Deployment's status updates) its children.
    let second = reconciles(&traces, "shop", 2);
    let trace_id = second[0]["traceID"].as_str().unwrap();
    assert!(
        second.iter().all(|s| s["traceID"] == trace_id),
        "generation 2's reconciles in several traces: {second:#?}"
    );
    let roots: Vec<_> = second.iter().filter(|s| parent(s).is_none()).collect();
    assert_eq!(roots.len(), 1, "one first reconcile: {second:#?}");
    let first = roots[0];
    let first_id = first["spanID"].as_str().unwrap();
    assert!(
        tag(first, "trigger")
            .and_then(Value::as_str)
            .is_some_and(|t| t.contains("spec changed")),
        "the first reconcile's trigger: {first:#?}"
    );
    assert_eq!(tag(first, "outcome"), Some(&json!("success")));
    for later in second.iter().filter(|s| parent(s).is_some()) {
        assert_eq!(parent(later), Some(first_id), "{later:#?}");
        assert!(
            tag(later, "trigger")
                .and_then(Value::as_str)
                .is_some_and(|t| t.contains("owned Deployment shop")),
            "{later:#?}"
        );
    }
    // The writes: the first reconcile applied the Deployment and reported `RollingOut`; a later
    // one reported `Ready`.
    let spans: Vec<&Value> = traces
        .iter()
        .filter(|t| t["traceID"] == trace_id)
        .flat_map(|t| t["spans"].as_array().into_iter().flatten())
        .collect();
    let writes = |operation: &str, parent_id: &str| -> Vec<&Value> {
        spans
            .iter()
            .copied()
            .filter(|s| {
                s["operationName"] == operation
                    && tag(s, "name") == Some(&json!("shop"))
                    && parent(s) == Some(parent_id)
            })
            .collect()
    };
    let applied = writes("patch deployments", first_id);
    assert_eq!(applied.len(), 1, "the Deployment's apply: {spans:#?}");
    assert_eq!(tag(applied[0], "code"), Some(&json!(200)));
    let status_writes: Vec<&Value> = second
        .iter()
        .flat_map(|r| writes("patch rollouts", r["spanID"].as_str().unwrap()))
        .collect();
    assert!(
        status_writes.len() >= 2,
        "RollingOut, then Ready: {status_writes:#?}"
    );
    for write in &status_writes {
        assert_eq!(tag(write, "subresource"), Some(&json!("status")));
        assert_eq!(tag(write, "code"), Some(&json!(200)), "{write:#?}");
    }

    // Generation 1 is another trace.
    let first_generation = reconciles(&traces, "shop", 1);
    assert!(!first_generation.is_empty(), "generation 1's reconciles");
    assert!(
        first_generation.iter().all(|s| s["traceID"] != trace_id),
        "generation 1 in generation 2's trace: {first_generation:#?}\n{second:#?}"
    );
}
