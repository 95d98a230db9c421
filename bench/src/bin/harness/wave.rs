//! The restart scenario (issue 35): a driver starts on N objects that changed while it was
//! down, so its start-up wave has N reconciles that write; while the wave runs, one object is
//! edited every 100 ms. Recorded per driver: the wave's time (start to every status current),
//! the edit-to-reconcile latency during the wave and, with the same edits, at idle afterwards.

use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{Patch, PatchParams};
use kubeforge::store::Reader;
use kubeforge_bench::Bench;
use serde_json::json;

use super::{Harness, Results, Start, percentile, record};

/// Edits during the wave and at idle: one every this long.
const EDIT_EVERY: Duration = Duration::from_millis(100);
/// Edits measured at idle, after the wave.
const IDLE_EDITS: usize = 50;
/// The longest a wave may take before its driver's row records that it did not finish.
const WAVE_BOUND: Duration = Duration::from_secs(1200);

/// Every driver on every `--wave-sizes` size, in a rotating order.
pub(super) async fn restart_waves(h: &mut Harness, results: &mut Results) {
    let drivers = h.args.drivers.clone();
    for &n in &h.args.wave_sizes.clone() {
        for repeat in 0..h.args.wave_repeats {
            let mut order = drivers.clone();
            order.rotate_left(repeat % drivers.len().max(1));
            for (driver, path) in &order {
                restart_wave(h, results, driver, path, n).await;
            }
        }
    }
}

async fn restart_wave(
    h: &mut Harness,
    results: &mut Results,
    driver: &str,
    path: &std::path::PathBuf,
    n: usize,
) {
    let scenario = format!("restart wave (c=4, N={n})");
    let ns = h.namespace("wave").await;
    // As the operator left them, then changed while it was down.
    h.create_converged(&ns, 0..n, 1).await;
    h.set_all(&ns, n, 2).await;
    let (store, stop) = h.watch_benches(&ns).await;
    let api: Api<Bench> = Api::namespaced(h.admin.clone(), &ns);

    let started = Instant::now();
    let process = h.start(driver, path, &ns, Start::reconciling(4)).await;
    // Edits go to the objects listed last (names sort as strings: `b9999` before `b999`…
    // whatever the order, a FIFO queue has the whole wave ahead of most of them).
    let mut during = Vec::new();
    let mut edits: Vec<tokio::task::JoinHandle<f64>> = Vec::new();
    let wave_done = loop {
        if let Some(done) = current(&store, n).await {
            break done.max(started).duration_since(started);
        }
        if started.elapsed() >= WAVE_BOUND {
            // Recorded, not a panic: a panic here lost every other driver's rows of the run
            // (one 50,000-object kube-runtime wave on a loaded machine took longer).
            eprintln!(
                "{driver}: the wave of {n} did not finish in {} s; its row says so",
                WAVE_BOUND.as_secs()
            );
            for edit in edits {
                edit.abort();
            }
            stop.cancel();
            drop(process);
            h.drop_namespace(&ns).await;
            record(
                results,
                &scenario,
                "wave time (did not finish: the bound)",
                "s",
                driver,
                WAVE_BOUND.as_secs_f64(),
            );
            return;
        }
        let k = edits.len();
        edits.push(edit(
            &ns,
            &api,
            &store,
            &format!("b{}", n - 1 - k % n),
            1000 + k as i64,
        ));
        tokio::time::sleep(EDIT_EVERY).await;
    };
    for edit in edits {
        during.push(edit.await.expect("an edit's waiter"));
    }
    let mut idle = Vec::new();
    for k in 0..IDLE_EDITS {
        let value = 100_000 + k as i64;
        idle.push(
            edit(&ns, &api, &store, &format!("b{}", k % n), value)
                .await
                .expect("an edit's waiter"),
        );
        tokio::time::sleep(EDIT_EVERY).await;
    }
    stop.cancel();
    drop(process);
    h.drop_namespace(&ns).await;

    record(
        results,
        &scenario,
        "wave time",
        "s",
        driver,
        wave_done.as_secs_f64(),
    );
    record(
        results,
        &scenario,
        "edits during the wave",
        "edits",
        driver,
        during.len() as f64,
    );
    for (name, samples) in [("during the wave", &mut during), ("idle", &mut idle)] {
        for (p, q) in [("p50", 0.5), ("p99", 0.99)] {
            let metric = format!("edit latency {name} {p}");
            record(
                results,
                &scenario,
                &metric,
                "ms",
                driver,
                percentile(samples, q),
            );
        }
    }
}

/// When every object's status was current, if it is now (the time is when that was first
/// seen, within the polling interval).
async fn current(store: &Reader<Bench>, n: usize) -> Option<Instant> {
    let objects = store.list().await.expect("the in-memory store");
    let done = objects
        .iter()
        .filter(|b| b.status.as_ref().and_then(|s| s.observed_value) == Some(b.spec.value))
        .count();
    (objects.len() >= n && done >= n).then(Instant::now)
}

/// Sets `name`'s value; the task returns the milliseconds until its status shows it.
fn edit(
    ns: &str,
    api: &Api<Bench>,
    store: &Reader<Bench>,
    name: &str,
    value: i64,
) -> tokio::task::JoinHandle<f64> {
    let (api, store, name) = (api.clone(), store.clone(), name.to_owned());
    let key = kubeforge::ObjectKey::namespaced(ns, &name);
    tokio::spawn(async move {
        let start = Instant::now();
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "value": value } })),
        )
        .await
        .expect("patch");
        loop {
            let observed = store
                .get(&key)
                .await
                .expect("the in-memory store")
                .and_then(|b| b.status.as_ref().and_then(|s| s.observed_value));
            if observed == Some(value) {
                return start.elapsed().as_secs_f64() * 1000.0;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
}
