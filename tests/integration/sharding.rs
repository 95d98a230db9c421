//! Active-active sharding with several `shard-operator` processes (one shard group) against the
//! real apiserver: the work split between them, each caching only its share, handoffs when a
//! replica dies or joins, and never two replicas reconciling one object at once (an audit of
//! every reconcile's start and end in the replicas' logs).

use std::collections::HashMap;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kubeforge::testing::{ControlPlane, TestNamespace};

use crate::support::load::{Delays, progressing};
use crate::support::{configmap, process};

pub(crate) const GROUP: &str = "shard-test";
pub(crate) const OWNER_LABEL: &str = "shard.kubeforge.dev/shard-test";
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

/// The lease duration of the test replicas (`FAST`).
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
    /// Whether it was told to stop (it exits by itself then).
    stopping: AtomicBool,
    /// How far its log was read for its lateness, and the worst lateness read.
    late: Mutex<(u64, Duration)>,
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
                "info,kubeforge::leader=debug,kubeforge::shard=debug",
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
            stopping: AtomicBool::new(false),
            late: Mutex::default(),
        }
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.killed_us = Some(now_us());
    }

    pub(crate) fn signal(&self, signal: &str) {
        if matches!(signal, "-TERM" | "-INT") {
            self.stopping.store(true, Ordering::SeqCst);
        }
        process::signal(&self.child, signal);
    }

    /// The worst lateness of its runtime so far: how much later than asked a 500 ms sleep woke
    /// (its `late <µs>` lines; the log is read on from where the last call stopped).
    pub(crate) fn lateness(&self) -> Duration {
        let mut late = self.late.lock().unwrap();
        let Ok(mut file) = std::fs::File::open(&self.log) else {
            return late.1;
        };
        let mut text = String::new();
        if file.seek(std::io::SeekFrom::Start(late.0)).is_err()
            || file.read_to_string(&mut text).is_err()
        {
            return late.1;
        }
        // Up to the last complete line.
        let complete = text.rfind('\n').map_or(0, |at| at + 1);
        for line in text[..complete].lines() {
            if let Some(us) = line
                .strip_prefix("late ")
                .and_then(|us| us.trim().parse().ok())
            {
                late.1 = late.1.max(Duration::from_micros(us));
            }
        }
        late.0 += complete as u64;
        late.1
    }

    /// Panics, with the end of its log, if it exited without being killed or told to stop: a
    /// member that lost its membership Lease (its renewals came too late) exits.
    pub(crate) fn assert_running(&self) {
        if self.killed_us.is_some()
            || self.stopping.load(Ordering::SeqCst)
            || !process::exited(&self.child)
        {
            return;
        }
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text
            .lines()
            .filter(|l| {
                let audit = ["start ", "end ", "owned ", "late "];
                !audit.iter().any(|a| l.starts_with(a)) && !l.contains("fence")
            })
            .collect();
        let tail = tail[tail.len().saturating_sub(15)..].join("\n");
        panic!(
            "{} exited ({}):\n{tail}",
            self.name,
            renewals(&text, &format!("{GROUP}-member-{}", self.name))
        );
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

/// What a replica's log (with `kubeforge::leader=debug`) says of the renewals of `lease`: how
/// many succeeded, the longest time between two successful ones and the slowest attempt.
pub(crate) fn renewals(log: &str, lease: &str) -> String {
    let at = |line: &str| -> Option<i64> {
        let stamp: k8s_openapi::jiff::Timestamp = line.split_whitespace().next()?.parse().ok()?;
        Some(stamp.as_microsecond())
    };
    let took = |line: &str| -> Option<Duration> {
        let text = line.split("took=").nth(1)?.split_whitespace().next()?;
        let (number, unit) =
            text.split_at(text.find(|c: char| c.is_ascii_alphabetic() || c == 'µ')?);
        let number: f64 = number.parse().ok()?;
        let seconds = match unit {
            "s" => number,
            "ms" => number / 1e3,
            "µs" => number / 1e6,
            "ns" => number / 1e9,
            _ => return None,
        };
        Some(Duration::from_secs_f64(seconds))
    };
    let needle = format!("lease renewal attempted lease={lease} ");
    let (mut count, mut last, mut gap, mut slowest) = (0, None, 0, Duration::ZERO);
    for line in log.lines().filter(|l| l.contains(&needle)) {
        slowest = slowest.max(took(line).unwrap_or_default());
        if !line.ends_with("held=true") {
            continue;
        }
        let Some(now) = at(line) else { continue };
        count += 1;
        if let Some(before) = last {
            gap = gap.max(now - before);
        }
        last = Some(now);
    }
    format!(
        "{count} renewals of {lease}, at most {:?} apart, the slowest attempt {slowest:?}",
        Duration::from_micros(u64::try_from(gap).unwrap_or(0))
    )
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

/// The objects done (`<name>=<owner>`: carrying `value`, stamped by their owner, which is one
/// of `members`), and once every one of the `count` objects is, the number of objects per owner.
pub(crate) async fn converged(
    ns: &TestNamespace,
    count: usize,
    value: &str,
    members: &[&str],
) -> (Vec<String>, Option<HashMap<String, usize>>) {
    converged_in(&objects(ns).await, count, value, members)
}

/// [`converged`] of `objects`, as listed.
pub(crate) fn converged_in(
    objects: &[ConfigMap],
    count: usize,
    value: &str,
    members: &[&str],
) -> (Vec<String>, Option<HashMap<String, usize>>) {
    let mut done = Vec::new();
    let mut per_owner: HashMap<String, usize> = HashMap::new();
    for cm in objects {
        let Some(owner) = owner(cm) else { continue };
        if members.contains(&owner)
            && annotation(cm, "shard/by") == Some(owner)
            && annotation(cm, "shard/value") == Some(value)
        {
            done.push(format!(
                "{}={owner}",
                cm.metadata.name.as_deref().unwrap_or("")
            ));
            *per_owner.entry(owner.to_owned()).or_default() += 1;
        }
    }
    let all = objects.len() == count && done.len() == count;
    (done, all.then_some(per_owner))
}

/// Waits until `names` hold their membership Leases, failing when no new one appeared for
/// `stall()`.
pub(crate) async fn members_up(
    leases: &Api<Lease>,
    names: &[&str],
    stall: impl FnMut() -> Duration,
) {
    progressing("the members' leases", stall, async || {
        let list = leases
            .list(&ListParams::default().labels(&format!("shard.kubeforge.dev/member-of={GROUP}")))
            .await;
        let holders: Vec<String> = list
            .map(|list| list.items)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|l| l.spec?.holder_identity)
            .filter(|h| names.contains(&h.as_str()))
            .collect();
        let all = names.iter().all(|n| holders.iter().any(|h| h == n));
        (holders, all.then_some(()))
    })
    .await;
}

/// The replica holding the group's sharder Lease (in `leases`' namespace), once there is one
/// (within `stall()`).
pub(crate) async fn sharder(leases: &Api<Lease>, stall: impl FnMut() -> Duration) -> String {
    progressing("a sharder", stall, async || {
        let holder = leases
            .get_opt(&format!("{GROUP}-sharder"))
            .await
            .ok()
            .flatten()
            .and_then(|lease| lease.spec?.holder_identity)
            .filter(|h| !h.is_empty());
        (None, holder)
    })
    .await
}

/// When the holder of `lease` last renewed it (its `renewTime`, on its own clock: this
/// machine's), in µs since the epoch.
pub(crate) async fn renewed_us(leases: &Api<Lease>, lease: &str) -> u128 {
    let lease = leases.get(lease).await.unwrap();
    let at = lease.spec.and_then(|s| s.renew_time).unwrap().0;
    u128::try_from(at.as_microsecond()).unwrap()
}

/// How many steps of the group's work may each be late by the measured delay within the longest
/// pause the work may make ([`Pace::stall`]): after a member's last renewal, the sharder's
/// listing that first shows it and the one a lease duration later that shows it gone (each a
/// timer that may fire late and a request that may be answered late), the pass and its patch,
/// the new owner's informer and queue, the reconcile's writes, and the test's own read.
const STEPS: u32 = 10;

/// Bounds for a shard group's test, derived from the members' configured timings and the delays
/// measured while the test runs — this process's runtime and reads of the apiserver
/// ([`Delays`]), and the replicas' own runtimes (their `late` lines). A bound never guesses how
/// fast the machine is: it says which steps the work takes, and lets each be late by what was
/// measured.
pub(crate) struct Pace {
    pub(crate) delays: Delays,
    lease: Duration,
    retry: Duration,
    reconcile: Duration,
}

impl Pace {
    /// For members with lease duration `lease` and retry period `retry` whose reconciles take
    /// `reconcile`; the apiserver's reads are measured through `client`, reading `namespace`.
    pub(crate) fn new(
        client: kube::Client,
        namespace: &str,
        [lease, retry]: [Duration; 2],
        reconcile: Duration,
    ) -> Pace {
        Pace {
            delays: Delays::start(client, namespace),
            lease,
            retry,
            reconcile,
        }
    }

    /// How late one step may be: the worst delay measured so far, the `replicas`' lateness
    /// included. Fails the test if one of them exited by itself (see
    /// [`Replica::assert_running`]).
    pub(crate) fn delay(&self, replicas: &[&Replica]) -> Duration {
        for replica in replicas {
            replica.assert_running();
            self.delays.note(replica.lateness());
        }
        self.delays.worst()
    }

    /// The longest the group's work may pause while it advances: a member gone is declared
    /// gone a lease duration after its last renewal was first seen, the sharder lists the
    /// Leases a retry period apart and lets a burst of events settle for up to another, then
    /// one reconcile runs; and [`STEPS`] steps each late by the measured delay. A handoff that
    /// does not happen, or stops, fails a wait bounded by it.
    pub(crate) fn stall(&self, replicas: &[&Replica]) -> Duration {
        self.lease + self.retry * 2 + self.reconcile + self.delay(replicas) * STEPS
    }

    /// The latest a member's objects may start moving after its last renewal (`kill -9`): the
    /// listing a lease duration after that renewal was first seen (first seen at most a retry
    /// period after it), the pass's first patch and the test's read (a poll of 250 ms), each
    /// step late by the measured delay.
    pub(crate) fn first_move(&self, replicas: &[&Replica]) -> Duration {
        self.lease + self.retry + Duration::from_millis(250) + self.delay(replicas) * 5
    }

    /// The longest the moves of a handoff may pause between two objects: a pass that left moves
    /// is followed by the next at once, one that failed some by one within a retry period; and
    /// [`STEPS`] steps late by the measured delay (the moves in flight when a pass ends, each a
    /// patch refused for a conflict, a read and a patch again; the next listing and patch).
    pub(crate) fn next_move(&self, replicas: &[&Replica]) -> Duration {
        self.retry + self.delay(replicas) * STEPS
    }

    pub(crate) fn lease(&self) -> Duration {
        self.lease
    }
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
    let refs: Vec<&Replica> = replicas.iter().collect();
    let s = Duration::from_secs;
    let pace = Pace::new(ns.client(), ns.name(), [s(15), s(2)], RECONCILE);
    let stall = || pace.stall(&refs);
    members_up(&ns.api(), &names, stall).await;

    let started = Instant::now();
    create_objects(&ns.api(), COUNT, "v1").await;
    let per_owner = progressing("3000 objects converged", stall, async || {
        tokio::time::sleep(Duration::from_millis(500)).await;
        converged(&ns, COUNT, "v1", &names).await
    })
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
    let cached = progressing("the caches to hold the shares", stall, async || {
        tokio::time::sleep(Duration::from_millis(600)).await;
        let cached: Vec<usize> = refs.iter().map(|r| r.owned().unwrap_or(0)).collect();
        let holding: Vec<String> = cached
            .iter()
            .zip(names)
            .filter(|(c, n)| **c == per_owner.get(*n).copied().unwrap_or(0))
            .map(|(_, n)| n.to_owned())
            .collect();
        let all = holding.len() == names.len();
        (holding, all.then_some(cached))
    })
    .await;
    let (audited, handed) = assert_no_overlap(&refs);
    println!(
        "sharding: {COUNT} objects converged in {took:?}; owners {per_owner:?}; cached {cached:?}; {audited} reconciles audited, {handed} objects handed over; {}",
        pace.delays.describe()
    );
    assert!(audited >= COUNT, "every object was reconciled: {audited}");
}

/// How long the shard operator's reconciles take by default (`SHARD_RECONCILE_MS`).
const RECONCILE: Duration = Duration::from_millis(5);

/// The renewals of each replica's membership Lease, from its log.
pub(crate) fn renewals_of(replicas: &[&Replica]) -> String {
    replicas
        .iter()
        .map(|r| {
            let log = std::fs::read_to_string(&r.log).unwrap_or_default();
            format!(
                "{}: {}",
                r.name,
                renewals(&log, &format!("{GROUP}-member-{}", r.name))
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
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
    let pace = Pace::new(
        ns.client(),
        ns.name(),
        [LEASE, RETRY],
        Duration::from_millis(600),
    );
    let start = |name: &str| Replica::start(plane.kubeconfig_path(), ns.name(), name, &logs, &env);
    let mut replicas = vec![start("r0"), start("r1"), start("r2")];
    {
        let refs: Vec<&Replica> = replicas.iter().collect();
        members_up(&ns.api(), &["r0", "r1", "r2"], || pace.stall(&refs)).await;
    }
    create_objects(&ns.api(), COUNT, "v1").await;
    let refs: Vec<&Replica> = replicas.iter().collect();
    let before = progressing(
        "converged on 3",
        || pace.stall(&refs),
        async || {
            tokio::time::sleep(Duration::from_millis(300)).await;
            converged(&ns, COUNT, "v1", &["r0", "r1", "r2"]).await
        },
    )
    .await;
    // The children (applied ones, `-child`, and created-once ones, `-once`) carry the label of
    // their owner's shard: those that do, by name and shard.
    let children_follow = async |members: &[&str]| {
        let children = ns
            .api::<ConfigMap>()
            .list(&ListParams::default().labels(OWNER_LABEL))
            .await
            .map(|list| list.items)
            .unwrap_or_default();
        let owners: HashMap<String, String> = objects(&ns)
            .await
            .iter()
            .filter_map(|cm| Some((cm.metadata.name.clone()?, owner(cm)?.to_owned())))
            .collect();
        let following: Vec<String> = children
            .iter()
            .filter_map(|c| {
                let name = c.metadata.name.as_deref()?;
                let parent = name
                    .strip_suffix("-child")
                    .or_else(|| name.strip_suffix("-once"))?;
                let o = owner(c)?;
                (members.contains(&o) && owners.get(parent).map(String::as_str) == Some(o))
                    .then(|| format!("{name}={o}"))
            })
            .collect();
        let all = following.len() == 2 * COUNT;
        (following, all.then_some(()))
    };
    progressing(
        "children labelled with their owner's shard",
        || pace.stall(&refs),
        async || children_follow(&["r0", "r1", "r2"]).await,
    )
    .await;

    // kill -9 a replica that is not the sharder (a dead sharder costs another lease duration:
    // its successor waits that long before declaring anyone gone), and change every object at
    // once: its share must move and converge.
    let sharder = sharder(&ns.api(), || pace.stall(&refs)).await;
    let victim = ["r1", "r2"].into_iter().find(|n| *n != sharder).unwrap();
    let rest: Vec<&str> = ["r0", "r1", "r2"]
        .into_iter()
        .filter(|n| *n != victim)
        .collect();
    drop(refs);
    let killed = Instant::now();
    replicas
        .iter_mut()
        .find(|r| r.name == victim)
        .unwrap()
        .kill();
    let renewed = renewed_us(&ns.api(), &format!("{GROUP}-member-{victim}")).await;
    let lost: Vec<String> = objects(&ns)
        .await
        .iter()
        .filter(|cm| owner(cm) == Some(victim))
        .filter_map(|cm| cm.metadata.name.clone())
        .collect();
    update_objects(&ns.api(), COUNT, "v2").await;
    let refs: Vec<&Replica> = replicas.iter().collect();
    let mut first_move = None;
    let after = progressing(
        "converged without the killed one",
        || pace.stall(&refs),
        async || {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let all = objects(&ns).await;
            let moved = all.iter().any(|cm| {
                cm.metadata.name.as_ref().is_some_and(|n| lost.contains(n))
                    && owner(cm).is_some_and(|o| o != victim)
            });
            if moved && first_move.is_none() {
                first_move = Some(now_us());
            }
            converged_in(&all, COUNT, "v2", &rest)
        },
    )
    .await;
    let moved_in = killed.elapsed();
    // Its objects move a lease duration after its last renewal was first seen — never before
    // (the sharder counts it live that long: a move sooner would let two replicas write) —
    // and start moving within a retry period of that, plus the steps between.
    let first_move =
        Duration::from_micros(u64::try_from(first_move.unwrap().saturating_sub(renewed)).unwrap());
    let latest = pace.first_move(&refs);
    assert!(
        first_move >= LEASE,
        "{victim}'s objects moved {first_move:?} after its last renewal, before its Lease (lease {LEASE:?}) expired"
    );
    assert!(
        first_move <= latest,
        "{victim}'s objects started moving {first_move:?} after its last renewal, later than {latest:?} (lease {LEASE:?}, retry {RETRY:?}; {})",
        pace.delays.describe()
    );
    let mut members = rest.clone();
    members.push("r3");

    // A replica added later takes a share — while every object keeps changing, so that
    // reconciles are running when objects move (where two writers would show in the audit).
    // Not flat out: a churn that saturates the apiserver (16 patches at a time, no pause)
    // stalled it for seconds beside two busy loops, and every member lost its Lease.
    drop(refs);
    let churn = Churn::start(&ns, COUNT, 8, Duration::from_millis(100));
    let joined = Instant::now();
    replicas.push(start("r3"));
    let refs: Vec<&Replica> = replicas.iter().collect();
    progressing(
        "r3 to be assigned a share",
        || pace.stall(&refs),
        async || {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let r3: Vec<String> = objects(&ns)
                .await
                .iter()
                .filter(|cm| owner(cm) == Some("r3"))
                .filter_map(|cm| cm.metadata.name.clone())
                .collect();
            let enough = r3.len() >= COUNT / 6;
            (r3, enough.then_some(()))
        },
    )
    .await;
    let share_in = joined.elapsed();
    // Let the churn run on across the handoff for a moment, then settle on one value.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rounds = churn.stop().await;
    update_objects(&ns.api(), COUNT, "v3").await;
    let with_r3 = progressing(
        "converged with r3",
        || pace.stall(&refs),
        async || {
            tokio::time::sleep(Duration::from_millis(300)).await;
            converged(&ns, COUNT, "v3", &members).await
        },
    )
    .await;
    let join_took = joined.elapsed();
    progressing(
        "children follow the moves",
        || pace.stall(&refs),
        async || children_follow(&members).await,
    )
    .await;
    let (audited, handed) = assert_no_overlap(&refs);
    println!(
        "sharding handoff: before {before:?}; {victim} killed, its objects started moving {first_move:?} after its last renewal (at most {latest:?}), moved and converged {moved_in:?} after the kill: {after:?}; r3 joined, was assigned a sixth in {share_in:?} and took its share in {join_took:?} ({rounds} rounds of changes meanwhile): {with_r3:?}; {audited} reconciles audited, {handed} objects handed over; {}; {}",
        pace.delays.describe(),
        renewals_of(&refs)
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
    let pace = Pace::new(ns.client(), ns.name(), [s(15), s(2)], RECONCILE);
    let stall = || pace.stall(&[]);
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

    let text = progressing("the member's share in its metrics", stall, async || {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (_, text) = http_get(metrics, "/metrics").await;
        let owned = format!(
            "kubeforge_shard_owned_objects{{group=\"{GROUP}\",kind=\"configmaps\",member=\"solo\"}} {COUNT}"
        );
        (None, text.contains(&owned).then_some(text))
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
    progressing("the next member to own every object", stall, async || {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let all = objects(&ns).await;
        let next: Vec<String> = all
            .iter()
            .filter(|cm| owner(cm) == Some("next"))
            .filter_map(|cm| cm.metadata.name.clone())
            .collect();
        let every = next.len() == all.len();
        (next, every.then_some(()))
    })
    .await;
    let moved = started.elapsed();
    // Its sharder's first pass waits one retry period (2 s); had the Lease not been released,
    // the new sharder would count it as fresh for a lease duration (15 s) first: the objects
    // move before that lease duration has passed.
    assert!(
        moved < pace.lease(),
        "the released member's objects moved in {moved:?}, not before its Lease would have expired ({:?}); {}",
        pace.lease(),
        pace.delays.describe()
    );
    // The released Lease says it lasts 1 s: deleted once a listing shows it unchanged ten of
    // those after the sharder first saw it (its listings a retry period apart).
    let released = Instant::now();
    progressing(
        "the departed member's Lease deleted",
        || s(10) + stall(),
        async || {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let gone = leases.get_opt(&solo_lease).await.unwrap().is_none();
            (None, gone.then_some(()))
        },
    )
    .await;
    let deleted_in = released.elapsed();
    println!(
        "shard member: objects of a released member moved in {moved:?}; its Lease deleted {deleted_in:?} later; {}",
        pace.delays.describe()
    );
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
