//! Shutdown on signals, with the `signal-operator` binary (tests/bin/signal_operator.rs) as a
//! separate process: the first SIGTERM lets in-flight reconciles finish and releases the Lease,
//! a second one exits at once, and a renewal stuck on a dead connection holds up neither.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};
use kubeforge::testing::{ControlPlane, FaultProxy, TestNamespace};

use crate::support::process::Spawned;
use crate::support::{configmap, eventually};

/// The operator's leader-election identity (`POD_NAME`).
const IDENTITY: &str = "signal-operator";
/// What the manager logs when the first signal starts the shutdown.
const FIRST_SIGNAL: &str = "shutdown signal received; stopping";
/// What the manager logs when a second signal ends the process.
const SECOND_SIGNAL: &str = "second shutdown signal; exiting immediately";

/// Starts `signal-operator` (its manager logs go to stdout, in order with the operator's
/// `begin`/`end` lines).
fn start_operator(namespace: &str, kubeconfig: &Path, extra_args: &[&str]) -> Spawned {
    let mut command = Command::new(env!("CARGO_BIN_EXE_signal-operator"));
    command
        .args(["--kubeconfig".as_ref(), kubeconfig.as_os_str()])
        .args(["--namespace", namespace, "--health-probe-bind-address", "0"])
        .args(extra_args)
        .env("POD_NAME", IDENTITY)
        .env("RUST_LOG", "info")
        .env("LOG_FORMAT", "text");
    Spawned::start(command)
}

/// A ConfigMap the operator reconciles, each reconcile sleeping `sleep_ms`.
fn slow_configmap(name: &str, sleep_ms: &str) -> ConfigMap {
    let mut cm = configmap(name, &[("sleep_ms", sleep_ms)]);
    cm.metadata.labels = Some([("signal".to_owned(), "true".to_owned())].into());
    cm
}

/// The names after `begin ` and `end ` in `lines`.
fn begun_and_ended(lines: &[String]) -> (Vec<&str>, Vec<&str>) {
    let names = |prefix: &str| {
        lines
            .iter()
            .filter_map(|line| line.strip_prefix(prefix))
            .collect::<Vec<&str>>()
    };
    (names("begin "), names("end "))
}

#[tokio::test]
async fn sigterm_during_a_burst_should_finish_in_flight_reconciles_release_the_lease_and_exit() {
    const CONFIGMAPS: usize = 50;
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    let mut operator = start_operator(
        ns.name(),
        plane.kubeconfig_path(),
        &[
            "--leader-elect",
            "--leader-election-id",
            "signal",
            "--leader-election-namespace",
            ns.name(),
        ],
    );
    let leases: Api<Lease> = ns.api();
    let holder = async || -> Option<String> {
        leases
            .get_opt("signal")
            .await
            .unwrap()?
            .spec?
            .holder_identity
            .filter(|h| !h.is_empty())
    };
    eventually(
        "the operator to lead",
        Duration::from_secs(60),
        async || holder().await.filter(|h| h == IDENTITY),
    )
    .await;

    // A burst: with 4 workers and 500 ms per reconcile it lasts over 6 s.
    let cms = ns.api::<ConfigMap>();
    for i in 0..CONFIGMAPS {
        cms.create(
            &PostParams::default(),
            &slow_configmap(&format!("burst-{i}"), "500"),
        )
        .await
        .unwrap();
    }
    eventually(
        "reconciles in flight",
        Duration::from_secs(60),
        async || {
            let lines = operator.lines();
            let (begun, ended) = begun_and_ended(&lines);
            (begun.len() > ended.len()).then_some(())
        },
    )
    .await;

    operator.signal("-TERM");
    let (status, took) = operator.exit_within(Duration::from_secs(60)).await;
    eprintln!("exit {took:?} after SIGTERM, {status}");
    let lines = operator.lines();
    assert!(status.success(), "{status}:\n{}", operator.tail());
    assert!(took < Duration::from_secs(10), "took {took:?}");

    // Every reconcile that began also finished, and its write landed.
    let signal_at = lines
        .iter()
        .position(|line| line.contains(FIRST_SIGNAL))
        .unwrap_or_else(|| panic!("no {FIRST_SIGNAL:?} line:\n{}", operator.tail()));
    let (begun, ended) = begun_and_ended(&lines);
    let unfinished: Vec<&&str> = begun.iter().filter(|n| !ended.contains(n)).collect();
    assert!(
        unfinished.is_empty(),
        "reconciles cut off: {unfinished:?}\n{}",
        operator.tail()
    );
    let (begun_before, ended_before) = begun_and_ended(&lines[..signal_at]);
    let in_flight = begun_before.len() - ended_before.len();
    assert!(in_flight > 0, "the signal came between reconciles");
    let annotated: Vec<String> = cms
        .list(&ListParams::default().labels("signal=true"))
        .await
        .unwrap()
        .into_iter()
        .filter(|cm| {
            cm.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("signal/done"))
        })
        .filter_map(|cm| cm.metadata.name)
        .collect();
    let mut done = ended.clone();
    done.sort_unstable();
    let mut annotated_sorted: Vec<&str> = annotated.iter().map(String::as_str).collect();
    annotated_sorted.sort_unstable();
    assert_eq!(annotated_sorted, done, "annotated = reconciles that ended");
    eprintln!(
        "{} of {CONFIGMAPS} reconciled, {in_flight} in flight at the signal",
        ended.len()
    );

    assert_eq!(holder().await, None, "the Lease is released");
}

#[tokio::test]
async fn second_sigterm_should_exit_at_once_with_a_failure_status() {
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    let mut operator = start_operator(ns.name(), plane.kubeconfig_path(), &[]);
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &slow_configmap("stalled", "600000"))
        .await
        .unwrap();
    eventually(
        "the stalled reconcile to begin",
        Duration::from_secs(60),
        async || operator.has_line("begin stalled").then_some(()),
    )
    .await;

    // The first signal: the manager waits for the stalled reconcile (the grace period is 30 s).
    operator.signal("-TERM");
    eventually(
        "the first signal to be handled",
        Duration::from_secs(20),
        async || operator.has_line(FIRST_SIGNAL).then_some(()),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        operator.running(),
        "exited before the grace period:\n{}",
        operator.tail()
    );

    operator.signal("-TERM");
    let (status, took) = operator.exit_within(Duration::from_secs(60)).await;
    eprintln!("exit {took:?} after the second SIGTERM, {status}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(status.code(), Some(1), "{status}:\n{}", operator.tail());
    assert!(operator.has_line(SECOND_SIGNAL), "{}", operator.tail());
}

/// A kubeconfig like the shared plane's admin one, with its server pointed at `proxy`.
fn kubeconfig_through(plane: &ControlPlane, proxy: &FaultProxy, dir: &str) -> std::path::PathBuf {
    let mut kubeconfig = kube::config::Kubeconfig::read_from(plane.kubeconfig_path()).unwrap();
    for cluster in &mut kubeconfig.clusters {
        if let Some(cluster) = &mut cluster.cluster {
            cluster.server = Some(format!("https://{}", proxy.local_addr()));
        }
    }
    let path = std::env::temp_dir().join(format!("kubeforge-{dir}.kubeconfig"));
    // JSON is YAML: the kubeconfig reader takes it.
    std::fs::write(&path, serde_json::to_vec(&kubeconfig).unwrap()).unwrap();
    path
}

#[tokio::test]
async fn sigterm_during_a_hung_lease_renewal_should_release_the_lease_and_exit_cleanly() {
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    let proxy = FaultProxy::start(plane.config().await.unwrap())
        .await
        .unwrap();
    let kubeconfig = kubeconfig_through(plane, &proxy, ns.name());
    let mut operator = start_operator(
        ns.name(),
        &kubeconfig,
        &[
            "--leader-elect",
            "--leader-election-id",
            "hung",
            "--leader-election-namespace",
            ns.name(),
        ],
    );
    let leases: Api<Lease> = ns.api();
    let holder = async || -> Option<String> {
        leases
            .get_opt("hung")
            .await
            .unwrap()?
            .spec?
            .holder_identity
            .filter(|h| !h.is_empty())
    };
    eventually(
        "the operator to lead",
        Duration::from_secs(60),
        async || holder().await.filter(|h| h == IDENTITY),
    )
    .await;
    // A reconcile in flight, so the shutdown has something to drain.
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &slow_configmap("draining", "8000"))
        .await
        .unwrap();
    eventually(
        "the reconcile to begin",
        Duration::from_secs(60),
        async || operator.has_line("begin draining").then_some(()),
    )
    .await;

    // Every connection the operator has goes silent (new ones work): the next renewal (every
    // 2 s) hangs on it. The signal comes while it does.
    proxy.blackhole_existing();
    tokio::time::sleep(Duration::from_secs(3)).await;
    operator.signal("-TERM");
    let (status, took) = operator.exit_within(Duration::from_secs(60)).await;
    eprintln!("exit {took:?} after SIGTERM, {status}");
    assert!(status.success(), "{status}:\n{}", operator.tail());
    assert!(
        operator.has_line("released leadership"),
        "{}",
        operator.tail()
    );
    assert_eq!(holder().await, None, "the Lease is released");
    let _ = std::fs::remove_file(kubeconfig);
}

#[tokio::test]
async fn a_black_holed_connection_should_not_cost_the_leadership() {
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    let proxy = FaultProxy::start(plane.config().await.unwrap())
        .await
        .unwrap();
    let kubeconfig = kubeconfig_through(plane, &proxy, ns.name());
    let mut operator = start_operator(
        ns.name(),
        &kubeconfig,
        &[
            "--leader-elect",
            "--leader-election-id",
            "kept",
            "--leader-election-namespace",
            ns.name(),
        ],
    );
    let leases: Api<Lease> = ns.api();
    let lease = async || -> Option<(String, i32)> {
        let spec = leases.get_opt("kept").await.unwrap()?.spec?;
        Some((spec.holder_identity?, spec.lease_transitions.unwrap_or(0)))
    };
    let (_, term) = eventually(
        "the operator to lead",
        Duration::from_secs(60),
        async || lease().await.filter(|(h, _)| h == IDENTITY),
    )
    .await;

    // Every connection goes silent: the elector's renewal times out within half the renew
    // deadline and the next one goes over a fresh connection, before the deadline (10 s).
    proxy.blackhole_existing();
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(
        operator.running(),
        "the operator exited:\n{}",
        operator.tail()
    );
    assert!(!operator.has_line("leadership lost"), "{}", operator.tail());
    assert_eq!(
        lease().await,
        Some((IDENTITY.to_owned(), term)),
        "same holder, same term"
    );
    operator.signal("-TERM");
    let (status, _) = operator.exit_within(Duration::from_secs(60)).await;
    assert!(status.success(), "{status}:\n{}", operator.tail());
    let _ = std::fs::remove_file(kubeconfig);
}
