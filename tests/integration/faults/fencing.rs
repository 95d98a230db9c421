//! Every write of a leader-elected operator process is fenced: two `fencing-operator` replicas,
//! each under its own ServiceAccount, the leader frozen (SIGSTOP) while its reconciles wait to
//! publish an Event and stamp ConfigMaps, thawed after the successor took over. The apiserver's
//! audit log, which names each request's identity in the order received, must show no write of
//! any kind (Event, patch, Lease) by the old leader after its successor's first write, except
//! writes that had passed the fence before the freeze (in flight: no client can call those
//! back; the fenced client logs each write it lets through, and the test reads the old leader's
//! log up to the moment it was frozen).
//!
//! The exception was learnt from a CI run: two stamps that passed the fence just before the
//! freeze reached the apiserver after the successor's first write (the test then demanded no
//! write at all and failed).
//!
//! Regression test: the event recorder was built from the plain client in the operator's `main`,
//! so a thawed leader's reconciles published their Events (3 of 5 fault runs, 2–4 Events each)
//! although their patches were refused.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use kubeforge::testing::{ControlPlane, TestNamespace};
use serde_json::json;

use crate::support::{configmap, eventually, process, rbac};

pub(super) const WRITES: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// A replica under its own ServiceAccount, killed when dropped.
struct Replica {
    name: String,
    user: String,
    child: Child,
}

impl Replica {
    async fn start(
        plane: &ControlPlane,
        ns: &str,
        name: &str,
        logs: &Path,
        send_delay: Option<Duration>,
    ) -> Replica {
        let kubeconfig = plane.service_account_kubeconfig(ns, name).await.unwrap();
        let log = std::fs::File::create(logs.join(format!("{name}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_fencing-operator"))
            .args(["--kubeconfig".as_ref(), kubeconfig.as_os_str()])
            .args(["--namespace", ns, "--leader-elect"])
            .args(["--leader-election-id", "fenced-events"])
            .args(["--leader-election-namespace", ns])
            .args(["--leader-election-lease-duration", "6s"])
            .args(["--leader-election-renew-deadline", "4s"])
            .args(["--leader-election-retry-period", "1s"])
            .args(["--health-probe-bind-address", "0"])
            .env("POD_NAME", name)
            .env("FENCING_EVENT_DELAY_MS", "1000")
            .env(
                "FENCING_SEND_DELAY_MS",
                send_delay.map_or(0, |d| d.as_millis()).to_string(),
            )
            .env("RUST_LOG", "info,kubeforge::leader::fence=debug")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Replica {
            name: name.to_owned(),
            user: format!("system:serviceaccount:{ns}:{name}"),
            child,
        }
    }

    fn signal(&self, signal: &str) {
        process::signal(&self.child, signal);
    }

    fn stopped(&self) -> bool {
        process::stopped(&self.child)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        process::kill(&mut self.child);
    }
}

/// One request in the audit log.
#[derive(Debug)]
pub(super) struct Request {
    pub(super) user: String,
    pub(super) method: String,
    pub(super) uri: String,
}

impl Request {
    pub(super) fn is_write(&self) -> bool {
        WRITES.contains(&self.method.as_str())
    }
}

/// `key="value"` from a legacy-format audit line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {key}=\""))? + key.len() + 3;
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// The requests of `users` in the audit log after byte `mark`, in the order received.
pub(super) fn requests_since(audit: &Path, mark: u64, users: &[&str]) -> Vec<Request> {
    let text = std::fs::read(audit).unwrap();
    let text = String::from_utf8_lossy(&text[usize::try_from(mark).unwrap()..]).into_owned();
    text.lines()
        .filter_map(|line| {
            let user = field(line, "user")?;
            users.contains(&user).then(|| Request {
                user: user.to_owned(),
                method: field(line, "method").unwrap_or_default().to_owned(),
                uri: field(line, "uri").unwrap_or_default().to_owned(),
            })
        })
        .collect()
}

/// The path of a request URI, without its query.
pub(super) fn path(uri: &str) -> &str {
    uri.split('?').next().unwrap_or(uri)
}

/// The writes the fenced client logged as let through (`write passed the fence`), by path, in
/// the complete lines of `log` (a line cut by a freeze is not counted).
pub(super) fn passed_the_fence(log: &[u8]) -> HashMap<String, usize> {
    let complete = log
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(&[][..], |end| &log[..=end]);
    let mut passed = HashMap::new();
    for line in String::from_utf8_lossy(complete).lines() {
        if !line.contains("write passed the fence") {
            continue;
        }
        let Some(uri) = line.split(" uri=").nth(1) else {
            continue;
        };
        let uri = uri.split_whitespace().next().unwrap_or_default();
        *passed.entry(path(uri).to_owned()).or_default() += 1;
    }
    passed
}

/// A Role with what the fencing operator needs, bound to `names` in the namespace.
async fn grant(ns: &TestNamespace, names: &[&str]) {
    let rules = json!([
        { "apiGroups": [""], "resources": ["configmaps"],
          "verbs": ["get", "list", "watch", "patch", "update"] },
        { "apiGroups": ["events.k8s.io"], "resources": ["events"],
          "verbs": ["create", "patch"] },
        { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
          "verbs": ["get", "create", "update"] },
    ]);
    rbac::grant(ns, "fencing-operator", rules, names).await;
}

#[tokio::test]
async fn a_thawed_leader_should_make_no_write_after_its_successors_first() {
    let in_flight = freeze_the_leader_and_audit(None).await;
    eprintln!("{in_flight} writes in flight at the freeze arrived late");
}

/// The CI failure, made certain: each write waits 300 ms between the fence and the wire, so the
/// freeze catches several on their way; they arrive after the successor's first write, and the
/// audit must tell them from writes started after the thaw.
#[tokio::test]
async fn writes_in_flight_at_the_freeze_should_be_the_only_late_ones() {
    // Each round checks every late write; a round whose freeze caught no write in flight (on a
    // loaded machine the leader may be between writes: a CI run saw 3 writes while it led)
    // proves nothing about them, so it is run again, up to three rounds.
    let mut in_flight = 0;
    for round in 1..=3 {
        in_flight = freeze_the_leader_and_audit(Some(Duration::from_millis(300))).await;
        if in_flight > 0 {
            break;
        }
        eprintln!("round {round}: no write was in flight at the freeze; again");
    }
    assert!(
        in_flight > 0,
        "no write was in flight at the freeze: the test reproduced nothing"
    );
}

/// Two replicas, the leader frozen mid-work and thawed after its successor wrote; asserts that
/// every write of the old leader after its successor's first had passed the fence before the
/// freeze, and returns how many such writes arrived late.
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: two replicas, freeze, take-over, thaw, then the audit of the late writes"
)]
async fn freeze_the_leader_and_audit(send_delay: Option<Duration>) -> usize {
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    let Some(audit) = plane.audit_log() else {
        panic!("this test reads the audit log of the local control plane");
    };
    grant(&ns, &["replica-a", "replica-b"]).await;
    for i in 0..3 {
        let mut cm = configmap(&format!("fenced-{i}"), &[]);
        cm.metadata.labels = Some([("fencing".to_owned(), "true".to_owned())].into());
        ns.api::<ConfigMap>()
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let logs = std::env::temp_dir().join(format!("kubeforge-fencing-{}", ns.name()));
    std::fs::create_dir_all(&logs).unwrap();
    let mark = std::fs::metadata(&audit).map_or(0, |m| m.len());

    // A leads first; B waits.
    let mut a = Replica::start(plane, ns.name(), "replica-a", &logs, send_delay).await;
    let leases: Api<Lease> = ns.api();
    let holder = async || -> Option<String> {
        leases
            .get_opt("fenced-events")
            .await
            .ok()??
            .spec?
            .holder_identity
            .filter(|h| !h.is_empty())
    };
    eventually("A to lead", Duration::from_secs(60), async || {
        holder().await.filter(|h| *h == a.name)
    })
    .await;
    let mut b = Replica::start(plane, ns.name(), "replica-b", &logs, send_delay).await;
    let (a_user, b_user) = (a.user.clone(), b.user.clone());
    let users = [a_user.as_str(), b_user.as_str()];
    let events_by = |user: &str| {
        requests_since(&audit, mark, &users)
            .iter()
            .filter(|r| r.user == user && r.is_write() && r.uri.contains("/events"))
            .count()
    };
    eventually(
        "A to publish Events and B to campaign",
        Duration::from_secs(60),
        async || {
            let b_asked = requests_since(&audit, mark, &users)
                .iter()
                .any(|r| r.user == b_user && r.uri.contains("/leases/"));
            (events_by(&a_user) >= 3 && b_asked).then_some(())
        },
    )
    .await;

    // Freeze A mid-work; B takes over and writes; thaw A.
    a.signal("-STOP");
    eventually("A to stop", Duration::from_secs(10), async || {
        a.stopped().then_some(())
    })
    .await;
    // What A logged before the freeze (it writes nothing while stopped).
    let a_log_at_freeze = std::fs::read(logs.join("replica-a.log")).unwrap();
    eventually(
        "B to take over and write",
        Duration::from_secs(60),
        async || {
            let requests = requests_since(&audit, mark, &users);
            let b_writes = requests
                .iter()
                .filter(|r| r.user == b_user && r.is_write())
                .count();
            (holder().await.as_deref() == Some(b.name.as_str()) && b_writes >= 4).then_some(())
        },
    )
    .await;
    a.signal("-CONT");
    let status = eventually(
        "the thawed ex-leader to exit",
        Duration::from_secs(30),
        async || a.child.try_wait().unwrap(),
    )
    .await;
    assert!(!status.success(), "losing leadership is an error exit");
    // Anything A still sent has arrived; B keeps working meanwhile.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = b.child.try_wait();

    let requests = requests_since(&audit, mark, &users);
    let successor_first = requests
        .iter()
        .position(|r| r.user == b_user && r.is_write())
        .expect("B wrote");
    // A write of A's may arrive late only if it passed the fence before the freeze and had not
    // arrived before: per path, the late writes are at most the passes logged before the
    // freeze less A's writes received before B's first.
    let mut in_flight = passed_the_fence(&a_log_at_freeze);
    for r in requests[..successor_first]
        .iter()
        .filter(|r| r.user == a_user && r.is_write())
    {
        if let Some(n) = in_flight.get_mut(path(&r.uri)) {
            *n = n.saturating_sub(1);
        }
    }
    let mut late: Vec<&Request> = Vec::new();
    let mut arrived_in_flight = 0;
    for r in requests[successor_first..]
        .iter()
        .filter(|r| r.user == a_user && r.is_write())
    {
        match in_flight.get_mut(path(&r.uri)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                arrived_in_flight += 1;
            }
            _ => late.push(r),
        }
    }
    let a_events = events_by(&a_user);
    let a_reads_after = requests[successor_first..]
        .iter()
        .filter(|r| r.user == a_user && !r.is_write())
        .count();
    eprintln!(
        "A: {a_events} Event writes while leading, {a_reads_after} reads and \
         {arrived_in_flight} writes in flight at the freeze after B's first write ({}: {}); \
         B: {} writes",
        requests[successor_first].method,
        requests[successor_first].uri,
        requests[successor_first..]
            .iter()
            .filter(|r| r.user == b_user && r.is_write())
            .count()
    );
    assert!(
        late.is_empty(),
        "the old leader wrote after its successor's first write ({} {}), writes that had not \
         passed the fence before the freeze: {late:#?}\nlogs in {}",
        requests[successor_first].method,
        requests[successor_first].uri,
        logs.display()
    );
    // Not vacuous: the thawed leader did try to publish, and the fence refused it.
    let a_log = std::fs::read_to_string(logs.join("replica-a.log")).unwrap();
    let refused = a_log
        .lines()
        .filter(|l| l.contains("event not published") && l.contains("write refused"))
        .count();
    assert!(
        refused > 0,
        "the thawed leader tried no write; the test froze nothing that woke up:\n{a_log}"
    );
    eprintln!("A: {refused} Events refused by the fence after the thaw");
    let _ = std::fs::remove_dir_all(&logs);
    arrived_in_flight
}
