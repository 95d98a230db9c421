//! Leader election with three operator processes against the real apiserver.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use kubeforge::testing::{ControlPlane, TestNamespace};

use crate::support::{configmap, eventually};

const LEASE: Duration = Duration::from_secs(6);
const RETRY: Duration = Duration::from_secs(1);

fn spawn_replica(
    ns: &str,
    kubeconfig: &std::path::Path,
    name: &str,
    logs: &std::path::Path,
) -> Child {
    let log = std::fs::File::create(logs.join(format!("{name}.log"))).unwrap();
    Command::new(env!("CARGO_BIN_EXE_fencing-operator"))
        .args(["--kubeconfig".as_ref(), kubeconfig.as_os_str()])
        .args([
            "--namespace",
            ns,
            "--leader-elect",
            "--leader-election-id",
            "fencing",
        ])
        .args(["--leader-election-namespace", ns])
        .args([
            "--leader-election-lease-duration",
            "6s",
            "--leader-election-renew-deadline",
            "4s",
        ])
        .args([
            "--leader-election-retry-period",
            "1s",
            "--health-probe-bind-address",
            "0",
        ])
        .env("POD_NAME", name)
        .env("RUST_LOG", "info,kubeforge=debug")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

/// One stamp write, as the watch saw it.
#[derive(Clone, Debug)]
struct Stamp {
    holder: String,
    term: i32,
    /// When the writer's reconcile started, µs since the epoch by the (shared) wall clock.
    started_us: u128,
}
/// Every stamp write, in watch order.
type Stamps = Arc<Mutex<Vec<Stamp>>>;

fn now_us() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros()
}
/// (when, holder, term) of every Lease change.
type Terms = Arc<Mutex<Vec<(Instant, Option<String>, i32)>>>;

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: elect, kill the leader, fail over and check the terms never overlap"
)]
async fn leader_election_should_fail_over_without_two_replicas_reconciling() {
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    for i in 0..3 {
        let mut cm = configmap(&format!("fenced-{i}"), &[]);
        cm.metadata.labels = Some([("fencing".to_owned(), "true".to_owned())].into());
        ns.api::<ConfigMap>()
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }

    // Record every stamp and every Lease change, in the apiserver's order.
    let stamps: Stamps = Arc::default();
    let terms: Terms = Arc::default();
    let cms = ns.api::<ConfigMap>();
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut cm_events = cms
        .watch(
            &WatchParams::default().labels("fencing=true").timeout(290),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let recorder = stamps.clone();
    tokio::spawn(async move {
        while let Ok(Some(event)) = cm_events.try_next().await {
            if let WatchEvent::Modified(cm) = event {
                let a = cm.metadata.annotations.unwrap_or_default();
                if let (Some(h), Some(t), Some(at)) = (
                    a.get("fencing/holder"),
                    a.get("fencing/term"),
                    a.get("fencing/at"),
                ) {
                    recorder.lock().unwrap().push(Stamp {
                        holder: h.clone(),
                        term: t.parse().unwrap(),
                        started_us: at.parse().unwrap(),
                    });
                }
            }
        }
    });
    let leases: Api<Lease> = ns.api();
    let mut lease_events = leases
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .unwrap()
        .boxed();
    let lease_recorder = terms.clone();
    tokio::spawn(async move {
        while let Ok(Some(event)) = lease_events.try_next().await {
            if let WatchEvent::Added(l) | WatchEvent::Modified(l) = event {
                let spec = l.spec.unwrap_or_default();
                lease_recorder.lock().unwrap().push((
                    Instant::now(),
                    spec.holder_identity,
                    spec.lease_transitions.unwrap_or(0),
                ));
            }
        }
    });

    let logs = std::env::temp_dir().join(format!("kubeforge-leader-{}", ns.name()));
    std::fs::create_dir_all(&logs).unwrap();
    let mut replicas: HashMap<String, Child> = (0..4)
        .map(|i| {
            let name = format!("replica-{i}");
            let child = spawn_replica(ns.name(), plane.kubeconfig_path(), &name, &logs);
            (name, child)
        })
        .collect();
    let signal = |name: &str, replicas: &HashMap<String, Child>, sig: &str| {
        let pid = replicas[name].id().to_string();
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
    };

    let holder =
        async || -> Option<String> { leases.get("fencing").await.ok()?.spec?.holder_identity };
    let first = eventually(
        "a first leader to stamp",
        Duration::from_secs(60),
        async || {
            let s = stamps.lock().unwrap();
            s.last().map(|s| s.holder.clone())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(holder().await.as_deref(), Some(first.as_str()));

    // Freeze the leader (a paused VM, a long stop-the-world): it cannot renew, another replica
    // takes over; when it thaws it must not act on its stale leadership, and it exits.
    signal(&first, &replicas, "-STOP");
    let frozen_us = now_us();
    let second = eventually(
        "a new leader while the first is frozen",
        Duration::from_secs(30),
        async || holder().await.filter(|h| *h != first),
    )
    .await;
    eventually(
        "the second leader to stamp",
        Duration::from_secs(30),
        async || {
            stamps
                .lock()
                .unwrap()
                .iter()
                .any(|s| s.holder == second)
                .then_some(())
        },
    )
    .await;
    signal(&first, &replicas, "-CONT");
    let thawed = replicas.get_mut(&first).unwrap();
    let status = eventually(
        "the thawed ex-leader to exit",
        Duration::from_secs(20),
        async || thawed.try_wait().unwrap(),
    )
    .await;
    assert!(!status.success(), "losing leadership is an error exit");

    // kill -9 the leader: another replica takes over within lease duration + retry period.
    replicas.get_mut(&second).unwrap().kill().unwrap();
    let killed_at = Instant::now();
    let third = eventually(
        "a new leader after kill -9",
        Duration::from_secs(30),
        async || holder().await.filter(|h| *h != first && *h != second),
    )
    .await;
    let takeover = terms
        .lock()
        .unwrap()
        .iter()
        .find(|(at, h, _)| *at > killed_at && h.as_deref() == Some(&third))
        .map(|(at, _, _)| *at - killed_at)
        .unwrap();
    eprintln!("takeover after kill -9: {takeover:?}");
    assert!(
        takeover <= LEASE + RETRY.mul_f64(1.2) + Duration::from_millis(500),
        "took {takeover:?}"
    );
    eventually(
        "the third leader to stamp",
        Duration::from_secs(30),
        async || {
            stamps
                .lock()
                .unwrap()
                .iter()
                .any(|s| s.holder == third)
                .then_some(())
        },
    )
    .await;

    // A clean stop releases the Lease: the last replica takes over within a few seconds.
    signal(&third, &replicas, "-TERM");
    let stopped_at = Instant::now();
    let fourth = eventually(
        "a new leader after a clean stop",
        Duration::from_secs(30),
        async || {
            holder()
                .await
                .filter(|h| ![&first, &second, &third].contains(&h))
        },
    )
    .await;
    let handover = stopped_at.elapsed();
    eprintln!("handover after SIGTERM: {handover:?}");
    assert!(handover < Duration::from_secs(4), "took {handover:?}");
    assert!(
        replicas.get_mut(&third).unwrap().wait().unwrap().success(),
        "clean exit"
    );
    eventually(
        "the fourth leader to stamp",
        Duration::from_secs(30),
        async || {
            stamps
                .lock()
                .unwrap()
                .iter()
                .any(|s| s.holder == fourth)
                .then_some(())
        },
    )
    .await;
    for child in replicas.values_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Fencing: every write carries the term its writer was elected in; the Lease says who held
    // each term. A write by a replica that no longer led would show an older term after a newer
    // one, or a holder that does not match the Lease's holder for that term. The one exception
    // no client can rule out: a write the frozen leader had already started (and checked its
    // lease for) when it was frozen, which reaches the apiserver when it thaws. Any write it
    // *started* after thawing is a fencing failure.
    let stamps = stamps.lock().unwrap().clone();
    let mut lease_holders: HashMap<i32, String> = HashMap::new();
    for (_, h, t) in terms.lock().unwrap().iter() {
        if let Some(h) = h {
            let previous = lease_holders.insert(*t, h.clone());
            assert!(
                previous.is_none_or(|p| p == *h),
                "term {t} held by two replicas"
            );
        }
    }
    let mut newest = i32::MIN;
    let mut in_flight = 0;
    for Stamp {
        holder: h,
        term: t,
        started_us,
    } in &stamps
    {
        if *t < newest {
            assert!(
                *h == first && *started_us < frozen_us,
                "a write of term {t} by {h} after term {newest}, started {} ms after the first \
                 leader was frozen: two leaders",
                (*started_us as i128 - frozen_us as i128) / 1000
            );
            in_flight += 1;
        }
        newest = newest.max(*t);
        assert_eq!(
            lease_holders.get(t),
            Some(h),
            "{h} wrote in term {t} without holding it"
        );
    }
    assert!(
        in_flight <= 3,
        "at most one in-flight write per ConfigMap: {in_flight}"
    );
    let writers: std::collections::BTreeSet<_> = stamps.iter().map(|s| s.holder.clone()).collect();
    assert_eq!(
        writers.len(),
        4,
        "four successive leaders wrote: {writers:?}"
    );
    eprintln!(
        "{} stamps ({in_flight} in flight at the freeze), terms {:?}",
        stamps.len(),
        lease_holders
    );
    let _ = std::fs::remove_dir_all(&logs);
}

#[test]
fn operator_binary_should_fail_with_one_clear_line_on_bad_flags_or_unreachable_apiserver() {
    let bin = env!("CARGO_BIN_EXE_fencing-operator");
    let bad_flag = Command::new(bin)
        .args(["--metrics-bind-address", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(bad_flag.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad_flag.stderr);
    assert!(
        stderr.starts_with("error: invalid value 'nowhere' for '--metrics-bind-address"),
        "{stderr}"
    );

    let dir = std::env::temp_dir().join(format!("kubeforge-unreachable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n\
         users:\n- name: u\n  user:\n    token: x\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n",
    )
    .unwrap();
    let unreachable = Command::new(bin)
        .args(["--kubeconfig".as_ref(), kubeconfig.as_os_str()])
        .args(["--health-probe-bind-address", "0"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(unreachable.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&unreachable.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: cannot reach the Kubernetes API server at https://127.0.0.1:1/"),
        "{stderr}"
    );
}

#[tokio::test]
async fn operator_binary_should_log_json_lines_when_asked() {
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_fencing-operator"))
        .args(["--kubeconfig".as_ref(), plane.kubeconfig_path().as_os_str()])
        .args([
            "--namespace",
            ns.name(),
            "--log-format",
            "json",
            "--health-probe-bind-address",
            "0",
        ])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "clean exit on SIGTERM");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["message"] == "caches synced; starting workers"
                && l["controller"] == "fencing"),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l["level"].is_string() && l["timestamp"].is_string())
    );
}

#[tokio::test]
async fn operator_binary_should_not_colour_logs_written_to_a_pipe() {
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_fencing-operator"))
        .args(["--kubeconfig".as_ref(), plane.kubeconfig_path().as_os_str()])
        .args(["--namespace", ns.name(), "--health-probe-bind-address", "0"])
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("caches synced; starting workers"),
        "{stdout}"
    );
    assert!(
        !stdout.contains('\u{1b}'),
        "no ANSI escape codes in logs that go to a pipe or a file:\n{stdout}"
    );
}
