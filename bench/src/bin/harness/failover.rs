//! The failover scenario (issue 35): two replicas of the kubeforge driver under leader election
//! on N objects, the leader SIGKILLed (its Lease not released) and objects changed right after;
//! measured from the kill: when the standby won the Lease, when its cache was synced, and when
//! its first reconcile of each changed object showed in the status. Once with a warm standby
//! (its caches filled before it leads, the default) and once with a cold one
//! (`--warm-standby=false`: it lists only after winning the Lease), `--failover-repeats` times
//! each on the same objects; p50 and max over the repeats.
//!
//! [`CHANGED`] objects, spread over the names, change right after the kill, and their times are
//! pooled. On takeover the new leader's controller gets its cache's state as its start-up state,
//! at low priority; a warm standby's informer has watched those changes happen, so they come
//! last in its replay and go to the queue at high priority (`Trigger::ChangedBeforeStart`),
//! ahead of the start-up wave of N reconciles; a cold standby cannot tell them from the rest,
//! and each waits for its place in that wave (one object would be one draw of that place). One
//! more object is changed once the new leader leads and its cache is synced: a change during its
//! start-up wave, which goes ahead of that wave, warm or cold.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{Patch, PatchParams};
use kubeforge::ObjectKey;
use kubeforge::store::Reader;
use kubeforge_bench::Bench;
use serde_json::json;

use super::{Driver, Elected, Harness, Results, Start, percentile, record, wait_idle};

/// Lease duration, renew deadline and retry period (seconds): short, so a failover takes
/// seconds, not the 15 s of controller-runtime's default lease.
const TIMINGS: [f64; 3] = [4.0, 2.5, 1.0];
/// How long the standby runs before the kill once it is ready (warm: its cache synced), so it
/// has watched the leader renew the Lease (two retry periods and more).
const SETTLE: Duration = Duration::from_secs(3);
/// Objects changed right after the kill.
const CHANGED: usize = 5;
/// How long after the new leader is leading and synced one more object is changed.
const AFTER_TAKEOVER: Duration = Duration::from_millis(200);
/// The longest a standby may take to reconcile the changed objects after the kill (its start-up
/// wave of 50,000 objects included).
const RECONCILED_WITHIN: Duration = Duration::from_secs(1200);

/// What one failover measured, from the SIGKILL of the leader.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// The standby printed `leading`.
    lease: f64,
    /// The standby's cache synced (0 for a warm standby: synced before the kill).
    synced: f64,
    /// The statuses showed the changes, one per changed object.
    changes: [f64; CHANGED],
    /// The change made after the takeover: its patch until its status (milliseconds).
    after_takeover_ms: f64,
}

/// A metric of the table: name, unit, its values in a sample. "kill to change reconciled": from
/// the kill until the status showed the reconcile of a change made right after it (pooled over
/// the changed objects); "kill to 1st change reconciled": the first of them in each failover;
/// "change after takeover": from that change's patch until its status.
type Metric = (&'static str, &'static str, fn(&Sample) -> Vec<f64>);

/// Every `--failover-sizes` size: a namespace of N objects and a chain of 2 × `--failover-repeats`
/// failovers, standbys warm and cold in turn (warm, cold, cold, warm, …): each new leader, once
/// its start-up wave is done, is the next one killed, so a failover costs one start-up wave.
pub(super) async fn failovers(h: &mut Harness, results: &mut Results) {
    let Some((_, path)) = h
        .args
        .drivers
        .iter()
        .find(|(d, _)| d == "kubeforge")
        .cloned()
    else {
        eprintln!("failover: no `kubeforge` driver; skipped");
        return;
    };
    let [lease, renew, retry] = TIMINGS;
    for &n in &h.args.failover_sizes.clone() {
        assert!(
            n >= 2 * CHANGED,
            "--failover-sizes: {n} is fewer than {} objects",
            2 * CHANGED
        );
        let scenario = format!("failover (c=4, N={n}, lease {lease}/{renew}/{retry} s)");
        let ns = h.namespace("failover").await;
        let created = Instant::now();
        h.create(&ns, 0..n, 1).await;
        eprintln!(
            "failover: {n} objects created in {:.0} s",
            created.elapsed().as_secs_f64()
        );
        let (store, stop) = h.watch_benches(&ns).await;
        // The first leader: alone, it wins the Lease at once and reconciles the N objects.
        let mut leader = h
            .start("kubeforge-failover", &path, &ns, replica(0, true))
            .await;
        leader
            .line("leading", Duration::from_secs(60))
            .await
            .expect("the first replica leads within 60 s");
        let mut samples: BTreeMap<bool, Vec<Sample>> = BTreeMap::new();
        for k in 0..2 * h.args.failover_repeats {
            let warm = matches!(k % 4, 0 | 3);
            let (sample, standby) =
                failover(h, &path, &ns, &store, n, leader, replica(k + 1, warm)).await;
            leader = standby;
            eprintln!("failover N={n} {}: {sample:?}", mode(warm));
            samples.entry(warm).or_default().push(sample);
        }
        drop(leader);
        stop.cancel();
        h.drop_namespace(&ns).await;
        eprintln!(
            "failover: N={n} done in {:.0} s",
            created.elapsed().as_secs_f64()
        );
        for (warm, samples) in samples {
            let column = format!("kubeforge {}", mode(warm));
            let metrics: [Metric; 5] = [
                ("kill to lease acquired", "s", |s| vec![s.lease]),
                ("kill to cache synced", "s", |s| vec![s.synced]),
                ("kill to 1st change reconciled", "s", |s| {
                    vec![s.changes.iter().copied().fold(f64::INFINITY, f64::min)]
                }),
                ("kill to change reconciled", "s", |s| s.changes.to_vec()),
                ("change after takeover", "ms", |s| vec![s.after_takeover_ms]),
            ];
            for (metric, unit, values) in metrics {
                let mut values: Vec<f64> = samples.iter().flat_map(values).collect();
                for (p, q) in [("p50", 0.5), ("max", 1.0)] {
                    let name = format!("{metric} {p}");
                    record(
                        results,
                        &scenario,
                        &name,
                        unit,
                        &column,
                        percentile(&mut values, q),
                    );
                }
            }
        }
    }
}

fn mode(warm: bool) -> &'static str {
    if warm { "warm" } else { "cold" }
}

/// Replica `k` of the chain (identity `failover-<k>`), a warm or cold standby.
fn replica(k: usize, warm: bool) -> Start {
    Start {
        leader: Some(Elected {
            lease: "bench-failover".to_owned(),
            identity: format!("failover-{k}"),
            timings: TIMINGS,
            warm,
        }),
        ..Start::reconciling(4)
    }
}

/// One failover in `ns`: once `leader` has reconciled the N objects (every status current, the
/// leader idle: its start-up wave done), the standby `how` starts and gets ready (warm: its
/// cache synced); the leader is SIGKILLed, objects change, and the standby's takeover is
/// timed. Returns the standby, now the leader.
async fn failover(
    h: &mut Harness,
    path: &PathBuf,
    ns: &str,
    store: &Reader<Bench>,
    n: usize,
    mut leader: Driver,
    how: Start,
) -> (Sample, Driver) {
    let warm = how.leader.as_ref().is_some_and(|e| e.warm);
    h.run += 1;
    let run = h.run;
    leader
        .line("synced", Duration::from_secs(300))
        .await
        .expect("the leader's cache syncs within 5 minutes");
    all_current(store, n).await;
    wait_idle(leader.child.id()).await;
    let label = format!("kubeforge-failover-{}", mode(warm));
    let mut standby = h.start(&label, path, ns, how).await;
    if warm {
        standby
            .line("synced", Duration::from_secs(300))
            .await
            .expect("the warm standby's cache syncs within 5 minutes");
    }
    tokio::time::sleep(SETTLE).await;
    assert!(
        !standby.printed("leading"),
        "the standby led before the kill"
    );
    assert!(
        warm || !standby.printed("synced"),
        "the cold standby synced before it led"
    );

    let api: Api<Bench> = Api::namespaced(h.admin.clone(), ns);
    // `b0`, `b<n/5>`, …: changed right after the kill; `b<n/10>`: after the takeover.
    let changed: Vec<String> = (0..CHANGED)
        .map(|i| format!("b{}", i * n / CHANGED))
        .collect();
    let later = format!("b{}", n / (2 * CHANGED));
    let value = 1_000 + run as i64;
    let key = |name: &str| ObjectKey::namespaced(ns, name);

    let killed = leader.kill();
    futures::future::join_all(changed.iter().map(|name| patch(&api, name, value))).await;
    let waiters: Vec<_> = changed
        .iter()
        .map(|name| tokio::spawn(seen(store.clone(), key(name), value)))
        .collect();
    let leading = standby
        .line("leading", Duration::from_secs(120))
        .await
        .expect("the standby leads within 2 minutes of the kill");
    let synced = standby
        .line("synced", Duration::from_secs(600))
        .await
        .expect("the new leader's cache syncs within 10 minutes");
    tokio::time::sleep(AFTER_TAKEOVER).await;
    let edited = Instant::now();
    patch(&api, &later, value).await;
    let after_takeover = seen(store.clone(), key(&later), value).await;
    let since = |at: Instant| at.saturating_duration_since(killed).as_secs_f64();
    let mut changes = [0.0; CHANGED];
    for (change, waiter) in changes.iter_mut().zip(waiters) {
        *change = since(waiter.await.expect("a changed object's waiter"));
    }
    drop(leader);
    let sample = Sample {
        lease: since(leading),
        synced: since(synced),
        changes,
        after_takeover_ms: after_takeover
            .saturating_duration_since(edited)
            .as_secs_f64()
            * 1000.0,
    };
    (sample, standby)
}

async fn patch(api: &Api<Bench>, name: &str, value: i64) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "value": value } })),
    )
    .await
    .expect("patch");
}

/// When the harness's cache first showed `key`'s status at `value` (polled every millisecond).
async fn seen(store: Reader<Bench>, key: ObjectKey, value: i64) -> Instant {
    let deadline = Instant::now() + RECONCILED_WITHIN;
    loop {
        let observed = store
            .get(&key)
            .await
            .expect("the in-memory store")
            .and_then(|b| b.status.as_ref().and_then(|s| s.observed_value));
        if observed == Some(value) {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "{}'s change not reconciled within {} s",
            key.name,
            RECONCILED_WITHIN.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until the N objects' statuses all mirror their specs (at most 20 minutes).
async fn all_current(store: &Reader<Bench>, n: usize) {
    let deadline = Instant::now() + RECONCILED_WITHIN;
    loop {
        let objects = store.list().await.expect("the in-memory store");
        let current = objects
            .iter()
            .filter(|b| b.status.as_ref().and_then(|s| s.observed_value) == Some(b.spec.value))
            .count();
        if current >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the leader reconciled {current} of {n} objects in 20 minutes"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
