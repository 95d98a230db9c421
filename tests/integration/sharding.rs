//! Active-active sharding with several `shard-operator` processes (one shard group) against the
//! real apiserver: the work split between them, each caching only its share, handoffs when a
//! replica dies or joins, and never two replicas reconciling one object at once (an audit of
//! every reconcile's start and end in the replicas' logs).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kubeforge::testing::{ControlPlane, TestNamespace};

use crate::support::{configmap, eventually, process};

pub(crate) const GROUP: &str = "shard-test";
pub(crate) const OWNER_LABEL: &str = "shard.kubeforge.dev/shard-test";
/// The Leases' timings of the test replicas.
/// The rules the shard operator's wiring gets from kubeforge, as `crdgen` derives them for
/// `#[controller(for = ConfigMap)]` (its kind, events, the Leases of leader election and shard
/// membership) — what an operator deployed from `crdgen --deploy` runs with, not a Role written
/// for the test.
pub(crate) fn operator_rules() -> serde_json::Value {
    let rules = kubeforge::rbac::Rules::new()
        .primary::<ConfigMap>(false)
        .events()
        .leases();
    serde_json::to_value(rules.policy_rules()).unwrap()
}

pub(crate) const LEASE: Duration = Duration::from_secs(6);
/// Their retry period (the members renew, and the sharder lists the Leases, that often).
pub(crate) const RETRY: Duration = Duration::from_secs(1);

/// A `shard-operator` process, killed when dropped.
pub(crate) struct Replica {
    pub(crate) name: String,
    pub(crate) log: PathBuf,
    pub(crate) child: Child,
    /// When it was killed (its unfinished reconciles end there).
    pub(crate) killed_us: Option<u128>,
}

impl Replica {
    /// Starts replica `name` with `kubeconfig`, its output in `<logs>/<name>.log`.
    pub(crate) fn start(
        kubeconfig: &Path,
        ns: &str,
        name: &str,
        logs: &Path,
        env: &[(&str, &str)],
    ) -> Replica {
        Self::start_timed(kubeconfig, ns, name, logs, env, FAST)
    }

    /// As [`start`](Self::start), with the leader-election timings `[lease duration, renew
    /// deadline, retry period]`.
    pub(crate) fn start_timed(
        kubeconfig: &Path,
        ns: &str,
        name: &str,
        logs: &Path,
        env: &[(&str, &str)],
        [lease, renew, retry]: [&str; 3],
    ) -> Replica {
        let log = logs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        // A copy of the binary may be named (a shared target directory is rebuilt by others).
        let binary = std::env::var_os("KUBEFORGE_SHARD_OPERATOR")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_shard-operator").into());
        let child = Command::new(binary)
            .args(["--kubeconfig".as_ref(), kubeconfig.as_os_str()])
            .args(["--namespace", ns, "--shards", GROUP])
            .args(["--leader-election-namespace", ns])
            .args(["--leader-election-lease-duration", lease])
            .args(["--leader-election-renew-deadline", renew])
            .args(["--leader-election-retry-period", retry])
            .args(["--health-probe-bind-address", "0"])
            .env("POD_NAME", name)
            .env(
                "RUST_LOG",
                "info,kubeforge::leader::fence=debug,kubeforge::shard=debug",
            )
            .envs(env.iter().copied())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Replica {
            name: name.to_owned(),
            log,
            child,
            killed_us: None,
        }
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.killed_us = Some(now_us());
    }

    pub(crate) fn signal(&self, signal: &str) {
        process::signal(&self.child, signal);
    }

    pub(crate) fn stopped(&self) -> bool {
        process::stopped(&self.child)
    }

    /// The last `owned <n>` it printed.
    pub(crate) fn owned(&self) -> Option<usize> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .rev()
            .find_map(|l| l.strip_prefix("owned ")?.trim().parse().ok())
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        process::kill(&mut self.child);
    }
}

/// A task setting every object's value again and again (`c1`, `c2`, ...), `concurrency` patches
/// at a time, pausing `pause` between rounds, until stopped.
pub(crate) struct Churn {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<usize>,
}

impl Churn {
    pub(crate) fn start(
        ns: &TestNamespace,
        count: usize,
        concurrency: usize,
        pause: Duration,
    ) -> Churn {
        let api = ns.api::<ConfigMap>();
        let stop = tokio_util::sync::CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let mut round = 0;
            while !token.is_cancelled() {
                round += 1;
                let value = format!("c{round}");
                futures::stream::iter(0..count)
                    .map(|i| {
                        let api = api.clone();
                        let patch = serde_json::json!({ "data": { "value": value } });
                        async move {
                            let name = format!("obj-{i}");
                            let _ = api
                                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                                .await;
                        }
                    })
                    .buffer_unordered(concurrency)
                    .collect::<Vec<()>>()
                    .await;
                tokio::time::sleep(pause).await;
            }
            round
        });
        Churn { stop, task }
    }

    /// Stops it; the rounds it made.
    pub(crate) async fn stop(self) -> usize {
        self.stop.cancel();
        self.task.await.unwrap()
    }
}

pub(crate) fn now_us() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

/// One reconcile: by whom, from, to (µs).
#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub(crate) by: String,
    pub(crate) start: u128,
    pub(crate) end: u128,
}

/// When a replica that was not killed exited by itself (a member that lost its Lease exits),
/// as the last write to its log (its last line says why it exits): `None` while it runs.
fn exited_us(replica: &Replica) -> Option<u128> {
    if !process::exited(&replica.child) {
        return None;
    }
    let modified = std::fs::metadata(&replica.log).ok()?.modified().ok()?;
    Some(
        modified
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_micros(),
    )
}

/// Every reconcile in the replicas' logs, by object. A reconcile a replica did not finish
/// lasts until it was killed or exited, or forever.
pub(crate) fn reconciles(replicas: &[&Replica]) -> HashMap<String, Vec<Run>> {
    let mut runs: HashMap<String, Vec<Run>> = HashMap::new();
    for replica in replicas {
        let text = std::fs::read_to_string(&replica.log).unwrap_or_default();
        let mut open: HashMap<String, u128> = HashMap::new();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(what), Some(key), Some(at)) = (words.next(), words.next(), words.next())
            else {
                continue;
            };
            let Ok(at) = at.parse::<u128>() else {
                continue;
            };
            match what {
                "start" => {
                    open.insert(key.to_owned(), at);
                }
                "end" => {
                    if let Some(start) = open.remove(key) {
                        runs.entry(key.to_owned()).or_default().push(Run {
                            by: replica.name.clone(),
                            start,
                            end: at,
                        });
                    }
                }
                _ => {}
            }
        }
        for (key, start) in open {
            runs.entry(key).or_default().push(Run {
                by: replica.name.clone(),
                start,
                end: replica
                    .killed_us
                    .or_else(|| exited_us(replica))
                    .unwrap_or(u128::MAX),
            });
        }
    }
    runs
}

/// Asserts that no object was reconciled by two replicas at once; returns how many reconciles
/// the audit covered and how many objects were reconciled by more than one replica in turn.
pub(crate) fn assert_no_overlap(replicas: &[&Replica]) -> (usize, usize) {
    let runs = reconciles(replicas);
    let mut total = 0;
    let mut handed = 0;
    for (key, mut list) in runs {
        total += list.len();
        list.sort_by_key(|r| r.start);
        for pair in list.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(
                a.by == b.by || a.end <= b.start,
                "{key} reconciled by {} ({}..{}) and {} ({}..{}) at once",
                a.by,
                a.start,
                a.end,
                b.by,
                b.start,
                b.end
            );
        }
        if list.iter().any(|r| r.by != list[0].by) {
            handed += 1;
        }
    }
    (total, handed)
}

/// Creates `count` ConfigMaps `obj-<i>` labelled for the shard operator with value `value`.
pub(crate) async fn create_objects(api: &Api<ConfigMap>, count: usize, value: &str) {
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move {
                let mut cm = configmap(&format!("obj-{i}"), &[("value", value)]);
                cm.metadata.labels = Some([("shard-test".to_owned(), "true".to_owned())].into());
                api.create(&PostParams::default(), &cm).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
}

/// Sets every object's value to `value`.
pub(crate) async fn update_objects(api: &Api<ConfigMap>, count: usize, value: &str) {
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            let patch = serde_json::json!({ "data": { "value": value } });
            async move {
                api.patch(
                    &format!("obj-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
                .unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
}

/// The objects (not their children), by name.
pub(crate) async fn objects(ns: &TestNamespace) -> Vec<ConfigMap> {
    ns.api::<ConfigMap>()
        .list(&ListParams::default().labels("shard-test=true"))
        .await
        .unwrap()
        .items
}

fn annotation<'a>(cm: &'a ConfigMap, key: &str) -> Option<&'a str> {
    cm.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

pub(crate) fn owner(cm: &ConfigMap) -> Option<&str> {
    cm.metadata
        .labels
        .as_ref()?
        .get(OWNER_LABEL)
        .map(String::as_str)
}

/// `None` until every object carries `value`, stamped by its owner, which is one of `members`;
/// then the number of objects per owner.
pub(crate) async fn converged(
    ns: &TestNamespace,
    count: usize,
    value: &str,
    members: &[&str],
) -> Option<HashMap<String, usize>> {
    let objects = objects(ns).await;
    if objects.len() != count {
        return None;
    }
    let mut per_owner: HashMap<String, usize> = HashMap::new();
    for cm in &objects {
        let owner = owner(cm)?;
        let done = members.contains(&owner)
            && annotation(cm, "shard/by") == Some(owner)
            && annotation(cm, "shard/value") == Some(value);
        if !done {
            return None;
        }
        *per_owner.entry(owner.to_owned()).or_default() += 1;
    }
    Some(per_owner)
}

/// Waits until `names` hold their membership Leases.
pub(crate) async fn members_up(leases: &Api<Lease>, names: &[&str]) {
    eventually("the members' leases", Duration::from_secs(60), async || {
        let list = leases
            .list(&ListParams::default().labels(&format!("shard.kubeforge.dev/member-of={GROUP}")))
            .await
            .ok()?;
        let holders: Vec<String> = list
            .items
            .into_iter()
            .filter_map(|l| l.spec?.holder_identity)
            .collect();
        names
            .iter()
            .all(|n| holders.iter().any(|h| h == n))
            .then_some(())
    })
    .await;
}

/// The replica holding the sharder Lease.
pub(crate) async fn sharder(ns: &TestNamespace) -> String {
    let leases: Api<Lease> = ns.api();
    eventually("a sharder", Duration::from_secs(30), async || {
        leases
            .get_opt(&format!("{GROUP}-sharder"))
            .await
            .ok()??
            .spec?
            .holder_identity
            .filter(|h| !h.is_empty())
    })
    .await
}

pub(crate) fn logs_dir(ns: &TestNamespace) -> PathBuf {
    let logs = std::env::temp_dir().join(format!("kubeforge-sharding-{}", ns.name()));
    std::fs::create_dir_all(&logs).unwrap();
    logs
}

/// Leader-election timings for tests that measure how fast work moves: a member gone is seen
/// within seconds.
const FAST: [&str; 3] = ["6s", "4s", "1s"];
/// controller-runtime's defaults, for tests where every replica stays: a member whose renewals
/// the loaded apiserver answers late keeps its Lease (with `FAST`, a CI run under load lost one
/// of three members to 2 s request timeouts, and the split was uneven).
const DEFAULTS: [&str; 3] = ["15s", "10s", "2s"];

/// Within ±15 % of an even split.
fn even(count: usize, of: usize, members: usize) -> bool {
    let fair = of as f64 / members as f64;
    (count as f64 - fair).abs() <= 0.15 * fair
}

#[tokio::test]
async fn three_replicas_should_split_three_thousand_objects_and_never_share_one() {
    const COUNT: usize = 3000;
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    let logs = logs_dir(&ns);
    let names = ["r0", "r1", "r2"];
    let replicas: Vec<Replica> = names
        .iter()
        .map(|n| Replica::start_timed(plane.kubeconfig_path(), ns.name(), n, &logs, &[], DEFAULTS))
        .collect();
    members_up(&ns.api(), &names).await;

    let started = Instant::now();
    create_objects(&ns.api(), COUNT, "v1").await;
    let per_owner = eventually(
        "3000 objects converged",
        Duration::from_secs(240),
        async || {
            tokio::time::sleep(Duration::from_millis(500)).await;
            converged(&ns, COUNT, "v1", &names).await
        },
    )
    .await;
    let took = started.elapsed();
    for name in names {
        let count = per_owner.get(name).copied().unwrap_or(0);
        assert!(
            even(count, COUNT, 3),
            "{name} owns {count} of {COUNT}: {per_owner:?}"
        );
    }
    // Each replica's cache holds its share, not everything.
    let refs: Vec<&Replica> = replicas.iter().collect();
    let cached = eventually(
        "the caches to hold the shares",
        Duration::from_secs(30),
        async || {
            tokio::time::sleep(Duration::from_millis(600)).await;
            let cached: Vec<usize> = refs.iter().map(|r| r.owned().unwrap_or(0)).collect();
            cached
                .iter()
                .zip(names)
                .all(|(c, n)| *c == per_owner.get(n).copied().unwrap_or(0))
                .then_some(cached)
        },
    )
    .await;
    let (audited, handed) = assert_no_overlap(&refs);
    println!(
        "sharding: {COUNT} objects converged in {took:?}; owners {per_owner:?}; cached {cached:?}; {audited} reconciles audited, {handed} objects handed over"
    );
    assert!(audited >= COUNT, "every object was reconciled: {audited}");
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: kill a replica, watch its objects move, add one and watch it take a share"
)]
async fn a_killed_replicas_objects_should_move_and_a_new_one_should_take_a_share() {
    const COUNT: usize = 300;
    let ns = TestNamespace::new().await.unwrap();
    let plane = ControlPlane::shared().unwrap();
    let logs = logs_dir(&ns);
    // Long reconciles on many workers: objects often move while one of theirs runs.
    let env = [
        ("SHARD_CHILDREN", "1"),
        ("SHARD_RECONCILE_MS", "600"),
        ("SHARD_WORKERS", "64"),
    ];
    let start = |name: &str| Replica::start(plane.kubeconfig_path(), ns.name(), name, &logs, &env);
    let mut replicas = vec![start("r0"), start("r1"), start("r2")];
    members_up(&ns.api(), &["r0", "r1", "r2"]).await;
    create_objects(&ns.api(), COUNT, "v1").await;
    let before = eventually("converged on 3", Duration::from_secs(120), async || {
        tokio::time::sleep(Duration::from_millis(300)).await;
        converged(&ns, COUNT, "v1", &["r0", "r1", "r2"]).await
    })
    .await;
    let children_follow = async |members: &[&str]| {
        let children = ns
            .api::<ConfigMap>()
            .list(&ListParams::default().labels(OWNER_LABEL))
            .await
            .ok()?
            .items;
        let owners: HashMap<String, String> = objects(&ns)
            .await
            .iter()
            .filter_map(|cm| Some((cm.metadata.name.clone()?, owner(cm)?.to_owned())))
            .collect();
        // Applied children (`-child`) and created-once ones (`-once`) alike.
        let follow = |suffix: &str| {
            let mine: Vec<_> = children
                .iter()
                .filter(|c| {
                    c.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.ends_with(suffix))
                })
                .collect();
            mine.len() == COUNT
                && mine.iter().all(|c| {
                    let name = c.metadata.name.as_deref().unwrap_or_default();
                    let parent = name.trim_end_matches(suffix);
                    owner(c).is_some_and(|o| {
                        members.contains(&o) && owners.get(parent).map(String::as_str) == Some(o)
                    })
                })
        };
        (follow("-child") && follow("-once")).then_some(())
    };
    eventually(
        "children labelled with their owner's shard",
        Duration::from_secs(60),
        async || children_follow(&["r0", "r1", "r2"]).await,
    )
    .await;

    // kill -9 a replica that is not the sharder (a dead sharder costs another lease duration:
    // its successor waits that long before declaring anyone gone), and change every object at
    // once: its share must move and converge.
    let sharder = sharder(&ns).await;
    let victim = ["r1", "r2"].into_iter().find(|n| *n != sharder).unwrap();
    let rest: Vec<&str> = ["r0", "r1", "r2"]
        .into_iter()
        .filter(|n| *n != victim)
        .collect();
    let killed = Instant::now();
    replicas
        .iter_mut()
        .find(|r| r.name == victim)
        .unwrap()
        .kill();
    update_objects(&ns.api(), COUNT, "v2").await;
    let after = eventually(
        "converged without the killed one",
        LEASE + Duration::from_secs(30),
        async || {
            tokio::time::sleep(Duration::from_millis(250)).await;
            converged(&ns, COUNT, "v2", &rest).await
        },
    )
    .await;
    let moved_in = killed.elapsed();
    // A lease duration and a retry period before the moves, then 300 reconciles of 3 writes
    // each (the stamp and two children) on the two replicas left: 900 writes, at the 50–100 a
    // second a loaded 2-core machine's apiserver takes, 9–18 s. (The moves alone are bounded
    // in `faults::sharding`.)
    assert!(
        moved_in <= LEASE + Duration::from_secs(20),
        "{victim}'s objects took {moved_in:?} to move and converge (lease {LEASE:?})"
    );
    let mut members = rest.clone();
    members.push("r3");

    // A replica added later takes a share — while every object keeps changing, so that
    // reconciles are running when objects move (where two writers would show in the audit).
    // Not flat out: a churn that saturates the apiserver (16 patches at a time, no pause)
    // stalled it for seconds beside two busy loops, and every member lost its Lease.
    let churn = Churn::start(&ns, COUNT, 8, Duration::from_millis(100));
    let joined = Instant::now();
    replicas.push(start("r3"));
    eventually(
        "r3 to be assigned a share",
        Duration::from_secs(60),
        async || {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let r3 = objects(&ns)
                .await
                .iter()
                .filter(|cm| owner(cm) == Some("r3"))
                .count();
            (r3 >= COUNT / 6).then_some(())
        },
    )
    .await;
    let share_in = joined.elapsed();
    // Let the churn run on across the handoff for a moment, then settle on one value.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rounds = churn.stop().await;
    update_objects(&ns.api(), COUNT, "v3").await;
    let with_r3 = eventually("converged with r3", Duration::from_secs(60), async || {
        tokio::time::sleep(Duration::from_millis(300)).await;
        converged(&ns, COUNT, "v3", &members).await
    })
    .await;
    let join_took = joined.elapsed();
    eventually(
        "children follow the moves",
        Duration::from_secs(60),
        async || children_follow(&members).await,
    )
    .await;
    let refs: Vec<&Replica> = replicas.iter().collect();
    let (audited, handed) = assert_no_overlap(&refs);
    println!(
        "sharding handoff: before {before:?}; {victim} killed, moved and converged in {moved_in:?}: {after:?}; r3 joined, was assigned a sixth in {share_in:?} and took its share in {join_took:?} ({rounds} rounds of changes meanwhile): {with_r3:?}; {audited} reconciles audited, {handed} objects handed over"
    );
    assert!(
        handed >= COUNT / 6,
        "objects moved between replicas: {handed}"
    );
}

/// A no-op reconciler for the in-process manager.
struct Noop;

impl kubeforge::controller::Reconciler<ConfigMap> for Noop {
    type Error = kube::Error;

    async fn reconcile(
        &self,
        _: std::sync::Arc<ConfigMap>,
        _: &kubeforge::controller::Context<ConfigMap>,
    ) -> Result<kubeforge::controller::Action, kube::Error> {
        Ok(kubeforge::controller::Action::Done)
    }
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: a member's share, membership and Lease from start to shutdown"
)]
async fn a_shard_member_should_report_its_share_and_membership_and_release_its_lease_on_shutdown() {
    use kubeforge::controller::Controller;
    use kubeforge::informer::InformerConfig;
    use kubeforge::manager::Manager;
    use kubeforge::shard::ShardConfig;

    use crate::manager::http_get;

    const COUNT: usize = 20;
    let ns = TestNamespace::new().await.unwrap();
    create_objects(&ns.api(), COUNT, "v").await;
    // One object the operator does not select: the sharder must leave it alone.
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("bystander", &[]))
        .await
        .unwrap();
    let s = Duration::from_secs;
    // A released Lease says it lasts 1 s: it is deleted after ten of those.
    let member = |identity: &str| {
        let config = ShardConfig::new(GROUP, ns.name())
            .identity(identity)
            // controller-runtime's timings: under load a member whose renewals come late keeps
            // its Lease (with 6 s / 4 s, a loaded run lost it: the manager stopped, and its
            // servers with it).
            .timings(s(15), s(10), s(2));
        let local = "127.0.0.1:0".parse().unwrap();
        let manager = Manager::new(ns.client())
            .shards(config)
            .metrics_bind_address(local)
            .health_probe_bind_address(local);
        let controller = Controller::new(
            "shard-test",
            manager.wiring(),
            ns.api::<ConfigMap>(),
            InformerConfig::default().labels("shard-test=true"),
        );
        manager.add_controller(controller, Noop)
    };
    let mut manager = member("solo");
    let mut listening = manager.on_listening();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    let mut addrs = HashMap::new();
    for _ in 0..2 {
        let (what, addr) = listening.recv().await.unwrap();
        addrs.insert(what, addr);
    }
    let (metrics, health) = (addrs["metrics"], addrs["health probes"]);

    let text = eventually("the member's share in its metrics", s(30), async || {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (_, text) = http_get(metrics, "/metrics").await;
        let owned = format!(
            "kubeforge_shard_owned_objects{{group=\"{GROUP}\",kind=\"configmaps\",member=\"solo\"}} {COUNT}"
        );
        text.contains(&owned).then_some(text)
    })
    .await;
    for line in [
        format!("kubeforge_shard_moves_total{{group=\"{GROUP}\",move=\"assign\"}} {COUNT}"),
        format!("kubeforge_shard_live_members{{group=\"{GROUP}\"}} 1"),
        format!("kubeforge_shard_released_total{{group=\"{GROUP}\",member=\"solo\"}} 0"),
    ] {
        assert!(text.contains(&line), "{line} in\n{text}");
    }
    let (status, body) = http_get(health, "/readyz?verbose").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("shard-member"), "{body}");
    let bystander = ns.api::<ConfigMap>().get("bystander").await.unwrap();
    assert_eq!(
        owner(&bystander),
        None,
        "an object no controller selects stays unlabelled"
    );

    // A clean shutdown releases the membership Lease: the next member takes its objects at
    // once (no lease duration to wait), and deletes the Lease after ten lease durations.
    shutdown.cancel();
    running.await.unwrap().unwrap();
    let leases = ns.api::<Lease>();
    let solo_lease = format!("{GROUP}-member-solo");
    let lease = leases.get(&solo_lease).await.unwrap();
    assert_eq!(
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty()),
        None,
        "released"
    );
    let shutdown = tokio_util::sync::CancellationToken::new();
    let started = Instant::now();
    let running = tokio::spawn(member("next").run_until(shutdown.clone()));
    eventually("the next member to own every object", s(20), async || {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let all = objects(&ns).await;
        all.iter().all(|cm| owner(cm) == Some("next")).then_some(())
    })
    .await;
    let moved = started.elapsed();
    // Its sharder's first pass waits one retry period (2 s); had the Lease not been released,
    // the new sharder would count it as fresh for a lease duration (15 s) first.
    assert!(
        moved < s(10),
        "the released member's objects moved in {moved:?}"
    );
    eventually("the departed member's Lease deleted", s(40), async || {
        tokio::time::sleep(Duration::from_millis(500)).await;
        leases
            .get_opt(&solo_lease)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    println!(
        "shard member: objects of a released member moved in {moved:?}; its Lease deleted after {:?}",
        started.elapsed()
    );
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
