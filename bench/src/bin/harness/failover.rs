//! The failover scenario (issue 35): two replicas of the kubeforge driver under leader election
//! on N objects, the leader SIGKILLed (its Lease not released) and an object changed right
//! after; measured from the kill: when the standby won the Lease, when its cache was synced, and
//! when its first reconcile of the changed object showed in the status. Once with a warm standby
//! (its caches filled before it leads, the default) and once with a cold one
//! (`--warm-standby=false`: it lists only after winning the Lease), `--failover-repeats` times
//! each on the same objects; p50 and max over the repeats.
//!
//! Two objects are changed right after the kill: the one the standby's list holds first and the
//! one it holds last (names sort as strings: `b9999` is the last of 50,000), because on
//! takeover the new leader's controller gets its cache's state (changes made before it led
//! included) as its start-up state, in list order, at low priority. A third object is changed
//! once the new leader leads and its cache is synced: a change during its start-up wave, which
//! goes ahead of that wave.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{Patch, PatchParams};
use kubeforge::ObjectKey;
use kubeforge::store::Reader;
use kubeforge_bench::Bench;
use serde_json::json;

use super::{Elected, Harness, Results, Start, percentile, record, wait_idle};

/// Lease duration, renew deadline and retry period (seconds): short, so a failover takes
/// seconds, not the 15 s of controller-runtime's default lease.
const TIMINGS: [f64; 3] = [4.0, 2.5, 1.0];
/// How long the standby runs before the kill once it is ready (warm: its cache synced), so it
/// has watched the leader renew the Lease (two retry periods and more).
const SETTLE: Duration = Duration::from_secs(3);
/// How long after the new leader is leading and synced the third object is changed.
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
    /// The status showed the change of the object listed first.
    first: f64,
    /// The status showed the change of the object listed last.
    last: f64,
    /// The change made after the takeover: its patch until its status (milliseconds).
    after_takeover_ms: f64,
}

/// A metric of the table: name, unit, its value in a sample. "kill to first-listed change":
/// from the kill until the status showed the reconcile of the change to the object listed
/// first; "change after takeover": from that change's patch until its status.
type Metric = (&'static str, &'static str, fn(&Sample) -> f64);

/// Every `--failover-sizes` size: a namespace of N objects, `--failover-repeats` failovers with
/// a warm and a cold standby each (alternating which goes first).
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
        let scenario = format!("failover (c=4, N={n}, lease {lease}/{renew}/{retry} s)");
        let ns = h.namespace("failover").await;
        let created = Instant::now();
        h.create(&ns, 0..n, 1).await;
        eprintln!(
            "failover: {n} objects created in {:.0} s",
            created.elapsed().as_secs_f64()
        );
        let (store, stop) = h.watch_benches(&ns).await;
        let mut samples: BTreeMap<bool, Vec<Sample>> = BTreeMap::new();
        for repeat in 0..h.args.failover_repeats {
            let order = if repeat % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for warm in order {
                let sample = failover(h, &path, &ns, &store, n, warm).await;
                eprintln!("failover N={n} {}: {sample:?}", mode(warm));
                samples.entry(warm).or_default().push(sample);
            }
        }
        stop.cancel();
        h.drop_namespace(&ns).await;
        eprintln!(
            "failover: N={n} done in {:.0} s",
            created.elapsed().as_secs_f64()
        );
        for (warm, samples) in samples {
            let column = format!("kubeforge {}", mode(warm));
            let metrics: [Metric; 5] = [
                ("kill to lease acquired", "s", |s| s.lease),
                ("kill to cache synced", "s", |s| s.synced),
                ("kill to first-listed change", "s", |s| s.first),
                ("kill to last-listed change", "s", |s| s.last),
                ("change after takeover", "ms", |s| s.after_takeover_ms),
            ];
            for (metric, unit, value) in metrics {
                let mut values: Vec<f64> = samples.iter().map(value).collect();
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

/// One failover in `ns` (its N objects current): replica A leads and has reconciled them,
/// replica B stands by (warm: synced); A is SIGKILLed, two objects change, and B's takeover is
/// timed. B is stopped afterwards (SIGTERM: it releases the Lease).
async fn failover(
    h: &mut Harness,
    path: &PathBuf,
    ns: &str,
    store: &Reader<Bench>,
    n: usize,
    warm: bool,
) -> Sample {
    h.run += 1;
    let run = h.run;
    let replica = |name: &str| Start {
        leader: Some(Elected {
            lease: "bench-failover".to_owned(),
            identity: format!("failover-{run}-{name}"),
            timings: TIMINGS,
            warm,
        }),
        ..Start::reconciling(4)
    };
    let (label_a, label_b) = (
        format!("kubeforge-failover-{}-a", mode(warm)),
        format!("kubeforge-failover-{}-b", mode(warm)),
    );
    let mut a = h.start(&label_a, path, ns, replica("a")).await;
    // A lease left by the last run's standby (released on its SIGTERM) or one of its own.
    a.line("leading", Duration::from_secs(60))
        .await
        .expect("replica A leads within 60 s");
    a.line("synced", Duration::from_secs(300))
        .await
        .expect("replica A's cache syncs within 5 minutes");
    // Every status current: A reconciled the N objects (the first run) or found them so, and
    // A idle: its start-up wave is done.
    all_current(store, n).await;
    wait_idle(a.child.id()).await;
    let mut b = h.start(&label_b, path, ns, replica("b")).await;
    if warm {
        b.line("synced", Duration::from_secs(300))
            .await
            .expect("the warm standby's cache syncs within 5 minutes");
    }
    tokio::time::sleep(SETTLE).await;
    assert!(!b.printed("leading"), "replica B led before the kill");
    assert!(
        warm || !b.printed("synced"),
        "the cold standby synced before it led"
    );

    let api: Api<Bench> = Api::namespaced(h.admin.clone(), ns);
    let names = listed(n);
    let (first, last, middle) = (
        names.first().cloned().unwrap_or_default(),
        names.last().cloned().unwrap_or_default(),
        names.get(n / 2).cloned().unwrap_or_default(),
    );
    let value = 1_000 + run as i64;
    let key = |name: &str| ObjectKey::namespaced(ns, name);

    let killed = a.kill();
    patch(&api, &first, value).await;
    patch(&api, &last, value).await;
    let first_seen = tokio::spawn(seen(store.clone(), key(&first), value));
    let last_seen = tokio::spawn(seen(store.clone(), key(&last), value));
    let leading = b
        .line("leading", Duration::from_secs(120))
        .await
        .expect("the standby leads within 2 minutes of the kill");
    let synced = b
        .line("synced", Duration::from_secs(600))
        .await
        .expect("the new leader's cache syncs within 10 minutes");
    tokio::time::sleep(AFTER_TAKEOVER).await;
    let edited = Instant::now();
    patch(&api, &middle, value).await;
    let after_takeover = seen(store.clone(), key(&middle), value).await;
    let first_seen = first_seen.await.expect("the first object's waiter");
    let last_seen = last_seen.await.expect("the last object's waiter");
    drop(b);
    drop(a);

    let since = |at: Instant| at.saturating_duration_since(killed).as_secs_f64();
    Sample {
        lease: since(leading),
        synced: since(synced),
        first: since(first_seen),
        last: since(last_seen),
        after_takeover_ms: after_takeover
            .saturating_duration_since(edited)
            .as_secs_f64()
            * 1000.0,
    }
}

/// The names of the objects `b0`..`b{n-1}` in the order a list returns them (by name, as
/// strings).
fn listed(n: usize) -> Vec<String> {
    let mut names: Vec<String> = (0..n).map(|i| format!("b{i}")).collect();
    names.sort();
    names
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
