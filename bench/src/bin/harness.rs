//! The benchmark harness: runs the kubeforge, kube-runtime and controller-runtime drivers on the
//! same workload against the same apiserver, one after the other, repeats each measurement and
//! reports medians as a table and as JSON. `bench/run` builds everything and calls it.
//!
//! A driver whose name ends in `-watcher` gets `--watcher`; one whose name ends in `-memcached`
//! gets `--memcached-servers` with a memcached the harness runs (one server, restarted empty
//! before each start of such a driver), and its scenarios record memcached's own RSS and item
//! count next to the driver's. One whose name ends in `-traced` exports its spans with OTLP to
//! a Jaeger the harness runs (the cost of tracing on, next to the plain driver's).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "harness/failover.rs"]
mod failover;
#[path = "harness/jaeger.rs"]
mod jaeger;
#[path = "harness/pods.rs"]
mod pods;
#[path = "harness/wave.rs"]
mod wave;

use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubeforge::informer::{Informer, InformerConfig};
use kubeforge::store::Reader;
use kubeforge::testing::MemcachedServer;
use kubeforge_bench::{Bench, BenchSpec, MANAGER, configmap};
use serde_json::json;

#[derive(Debug, Parser)]
struct Args {
    /// Admin kubeconfig (creates namespaces and objects, reads apiserver metrics).
    #[arg(long)]
    admin_kubeconfig: PathBuf,
    /// Kubeconfig of the non-admin identity the drivers run as.
    #[arg(long)]
    driver_kubeconfig: PathBuf,
    /// `name=path` of each driver binary (kubeforge, kube-runtime, controller-runtime).
    #[arg(long = "driver", value_parser = parse_driver)]
    drivers: Vec<(String, PathBuf)>,
    /// Objects per run for converge and update storm (each size is a run of its own).
    #[arg(long, value_delimiter = ',', default_value = "1000,5000")]
    n: Vec<usize>,
    /// Latency samples per run.
    #[arg(long, default_value_t = 200)]
    latency_samples: usize,
    /// Concurrent reconciles to test (each driver gets the same).
    #[arg(long, value_delimiter = ',', default_value = "4,16")]
    concurrency: Vec<usize>,
    /// Objects in the restart-wave scenario (each size a run of its own; empty: skipped).
    #[arg(long, value_delimiter = ',', default_value = "10000,50000")]
    wave_sizes: Vec<usize>,
    /// Repeats of the restart-wave scenario (each builds its objects anew: slow at 50,000).
    #[arg(long, default_value_t = 1)]
    wave_repeats: usize,
    /// Objects in the failover scenario (each size a namespace of its own; empty: skipped).
    #[arg(long, value_delimiter = ',', default_value = "1000,50000")]
    failover_sizes: Vec<usize>,
    /// Failovers per size and standby mode (warm, cold), on the same objects.
    #[arg(long, default_value_t = 3)]
    failover_repeats: usize,
    /// Cache sizes for the memory and sync scenario.
    #[arg(long, value_delimiter = ',', default_value = "10000")]
    sync_sizes: Vec<usize>,
    /// The memory and sync scenario's variants: `plain` (managedFields stripped, each
    /// framework's default here) and `managed-fields` (kept).
    #[arg(long, value_delimiter = ',', default_value = "plain,managed-fields")]
    sync_variants: Vec<String>,
    /// `false`: the memory and sync scenario records the sync time and the RSS after sync only,
    /// and stops each driver then, without waiting for its start-up reconciles to end (at 50,000
    /// objects they take minutes per sample).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    sync_idle: bool,
    /// Repeats of each measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// The apiserver's audit log (`controlplane/run` writes one): the drivers' requests are
    /// counted there, by user.
    #[arg(long)]
    audit_log: PathBuf,
    /// The drivers' user name, as the audit log records it.
    #[arg(long, default_value = "system:serviceaccount:bench:bench-driver")]
    driver_user: String,
    /// Drivers watch the owned ConfigMaps as metadata only (each framework's idiom for owned
    /// objects the reconciler never reads); scenario names get a ` [owned: metadata]` suffix.
    #[arg(long)]
    owned_metadata_only: bool,
    /// Also run the pods-cached scenario (`pods`, not among the default `--scenarios`): each
    /// driver caching `--pod-sizes` realistic Pods in full and as a view of a few fields.
    #[arg(long)]
    pod_views: bool,
    /// Pods in the pods-cached scenario (each size a namespace of its own).
    #[arg(long, value_delimiter = ',', default_value = "10000,50000")]
    pod_sizes: Vec<usize>,
    /// Replica counts for the sharded scenario (the `kubeforge` driver with `--shards`, N the
    /// largest of `--n`, the first `--concurrency`); empty: skipped.
    #[arg(long, value_delimiter = ',')]
    shard_replicas: Vec<usize>,
    /// The shard modes of the sharded scenario (`labels`; `ranges`: the apiserver's hash ranges,
    /// skipped with a note when the plane's apiserver lacks the `ShardedListAndWatch` gate).
    #[arg(long, value_delimiter = ',', default_value = "labels,ranges")]
    shard_modes: Vec<String>,
    /// The scenarios to run (`reconcile`: converge, update storm, cost, latency and memory;
    /// `sharded`; `wave`: restart waves; `sync`: memory and sync; `failover`: a leader's SIGKILL
    /// with a warm and a cold standby; `pods`: Pods cached in full and as a view, opt-in, also
    /// added by `--pod-views`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "reconcile,sharded,wave,sync,failover"
    )]
    scenarios: Vec<String>,
    /// Write the results as JSON here too.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn parse_driver(s: &str) -> Result<(String, PathBuf), String> {
    s.split_once('=')
        .map(|(n, p)| (n.to_owned(), PathBuf::from(p)))
        .ok_or_else(|| format!("expected name=path, got {s}"))
}

async fn client(path: &PathBuf) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(path).expect("readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("usable kubeconfig");
    Client::try_from(config).expect("client")
}

/// (scenario, metric, unit) → driver → samples.
type Results = BTreeMap<(String, String, String), BTreeMap<String, Vec<f64>>>;

fn record(
    results: &mut Results,
    scenario: &str,
    metric: &str,
    unit: &str,
    driver: &str,
    value: f64,
) {
    results
        .entry((scenario.to_owned(), metric.to_owned(), unit.to_owned()))
        .or_default()
        .entry(driver.to_owned())
        .or_default()
        .push(value);
}

/// Records the time `n` objects took to converge, and the rate.
fn record_converge(results: &mut Results, scenario: &str, driver: &str, n: usize, took: f64) {
    record(results, scenario, "time", "s", driver, took);
    record(
        results,
        scenario,
        "throughput",
        "reconciles/s",
        driver,
        n as f64 / took,
    );
}

struct Harness {
    admin: Client,
    args: Args,
    payload: String,
    run: usize,
    /// The memcached of the `-memcached` drivers (started when there is one).
    memcached: Option<MemcachedServer>,
    /// The Jaeger of the `-traced` drivers (started when there is one).
    jaeger: Option<jaeger::Jaeger>,
}

/// Memory for memcached's items: 200,000 Bench objects of ~3 KiB of JSON (the cost curves'
/// largest size) fit with room to spare (memcached takes its memory as it stores items, so the
/// limit costs nothing unused).
const MEMCACHED_MB: u32 = 2048;

/// Whether the driver `name` keeps its cache in the harness's memcached.
fn uses_memcached(name: &str) -> bool {
    name.ends_with("-memcached")
}

/// How a driver is started.
#[derive(Clone, Debug)]
struct Start {
    concurrency: usize,
    keep_managed_fields: bool,
    /// Print `heap <bytes>` every second (`BENCH_REPORT_HEAP`).
    report_heap: bool,
    /// Replica `i` of shard group `bench`, and its shard mode (`--shard-mode`).
    shard: Option<(usize, String)>,
    /// A replica under leader election (the kubeforge driver): [`Harness::start`] does not wait
    /// for `synced` (a cold standby syncs only once it leads).
    leader: Option<Elected>,
    /// `--pods full|view`: the pods-cached scenario instead of the Bench workload.
    pods: Option<&'static str>,
}

impl Start {
    fn reconciling(concurrency: usize) -> Self {
        Self {
            concurrency,
            keep_managed_fields: false,
            report_heap: false,
            shard: None,
            leader: None,
            pods: None,
        }
    }
}

/// A replica under leader election: `--leader-elect <lease>` with these timings, identity
/// `$POD_NAME`, a warm or cold standby.
#[derive(Clone, Debug)]
struct Elected {
    lease: String,
    identity: String,
    /// Lease duration, renew deadline, retry period (seconds).
    timings: [f64; 3],
    warm: bool,
}

/// A running driver process.
struct Driver {
    child: Child,
    sync_seconds: f64,
    /// The last `heap <bytes>` line the driver printed (with `BENCH_REPORT_HEAP`).
    heap: Arc<std::sync::Mutex<Option<u64>>>,
    /// The driver's stdout lines, each with when the harness read it.
    lines: tokio::sync::mpsc::UnboundedReceiver<(Instant, String)>,
    /// The lines read from `lines` so far.
    seen: Vec<(Instant, String)>,
}

impl Driver {
    /// When the driver printed its first line starting with `prefix` (as the harness read it),
    /// waiting up to `timeout` for it; `None` if it did not print one by then.
    async fn line(&mut self, prefix: &str, timeout: Duration) -> Option<Instant> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some((at, _)) = self.seen.iter().find(|(_, l)| l.starts_with(prefix)) {
                return Some(*at);
            }
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) => self.seen.push(line),
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// The lines read so far that start with `prefix`, without waiting.
    fn printed(&mut self, prefix: &str) -> bool {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        self.seen.iter().any(|(_, l)| l.starts_with(prefix))
    }

    /// SIGKILLs the driver (no shutdown, its Lease not released); returns when the signal was
    /// sent.
    fn kill(&mut self) -> Instant {
        let at = Instant::now();
        self.child.kill().expect("SIGKILL the driver");
        let _ = self.child.wait();
        at
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // A driver killed already is not signalled again (its pid may be another process's).
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
        }
        let _ = self.child.wait();
    }
}

/// Where a driver's stderr goes: `target/bench-logs/<driver>-<namespace>.log` (by the driver's
/// name, not its binary's: several drivers share a binary). The memory and sync scenario starts
/// every driver several times in one namespace: the runs append to one file.
fn log_file(driver: &str, ns: &str) -> Stdio {
    let dir = PathBuf::from("target/bench-logs");
    std::fs::create_dir_all(&dir)
        .and_then(|()| {
            std::fs::File::options()
                .create(true)
                .append(true)
                .open(dir.join(format!("{driver}-{ns}.log")))
        })
        .map_or_else(|_| Stdio::null(), Stdio::from)
}

/// memcached's `stats` (name → value), or nothing if it does not answer within five seconds.
async fn memcached_stats(addr: &str) -> BTreeMap<String, String> {
    let ask = async {
        // A DSN with `tcp://` takes an IP literal as the host.
        let mut client = async_memcached::Client::new(format!("tcp://{addr}")).await?;
        client.stats().await
    };
    match tokio::time::timeout(Duration::from_secs(5), ask).await {
        Ok(Ok(stats)) => stats.into_iter().collect(),
        _ => BTreeMap::new(),
    }
}

fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = fields
        .get(11)
        .and_then(|u| u.parse::<f64>().ok())
        .unwrap_or(0.0)
        + fields
            .get(12)
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0);
    ticks / 100.0 // USER_HZ
}

fn rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmRSS:")
}

/// Anonymous memory (heap, stacks) of the process, without the mapped binary.
fn anon_rss_mib(pid: u32) -> f64 {
    status_mib(pid, "RssAnon:")
}

fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

impl Harness {
    async fn namespace(&mut self, tag: &str) -> String {
        self.run += 1;
        let name = format!("bench-{tag}-{}-{}", std::process::id(), self.run);
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(self.admin.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
        name
    }

    /// Deletes a namespace and waits (up to five minutes) until it is gone, so that the
    /// namespace controller's cleanup does not load the apiserver during the next measurement.
    async fn drop_namespace(&self, ns: &str) {
        let api = Api::<Namespace>::all(self.admin.clone());
        let _ = api.delete(ns, &DeleteParams::background()).await;
        let deadline = Instant::now() + Duration::from_secs(300);
        while Instant::now() < deadline {
            match api.get_opt(ns).await {
                Ok(None) => return,
                _ => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
        eprintln!("namespace {ns} still terminating after 5 minutes; going on");
    }

    fn bench(&self, name: String, value: i64) -> Bench {
        Bench::new(
            &name,
            BenchSpec {
                value,
                payload: self.payload.clone(),
            },
        )
    }

    /// The harness's own synced cache of the Benches in `ns` (stopped with the token).
    async fn watch_benches(
        &self,
        ns: &str,
    ) -> (Reader<Bench>, tokio_util::sync::CancellationToken) {
        let informer = Arc::new(Informer::new(
            Api::<Bench>::namespaced(self.admin.clone(), ns),
            InformerConfig::default(),
        ));
        let stop = tokio_util::sync::CancellationToken::new();
        tokio::spawn(informer.clone().run(stop.clone()));
        informer.wait_for_sync().await;
        (informer.store(), stop)
    }

    async fn create(&self, ns: &str, range: std::ops::Range<usize>, value: i64) {
        let api: Api<Bench> = Api::namespaced(self.admin.clone(), ns);
        futures::stream::iter(range)
            .for_each_concurrent(16, |i| {
                let api = api.clone();
                let obj = self.bench(format!("b{i}"), value);
                async move {
                    api.create(&PostParams::default(), &obj)
                        .await
                        .expect("create");
                }
            })
            .await;
    }

    /// Creates objects already reconciled: each with its owned ConfigMap and its status, as an
    /// operator finds them when it restarts.
    async fn create_converged(&self, ns: &str, range: std::ops::Range<usize>, value: i64) {
        let api: Api<Bench> = Api::namespaced(self.admin.clone(), ns);
        let cms: Api<ConfigMap> = Api::namespaced(self.admin.clone(), ns);
        futures::stream::iter(range)
            .for_each_concurrent(16, |i| {
                let (api, cms) = (api.clone(), cms.clone());
                let obj = self.bench(format!("b{i}"), value);
                async move {
                    let bench = api
                        .create(&PostParams::default(), &obj)
                        .await
                        .expect("create");
                    reconcile_by_hand(&api, &cms, &bench).await;
                }
            })
            .await;
    }

    async fn set_all(&self, ns: &str, n: usize, value: i64) {
        let api: Api<Bench> = Api::namespaced(self.admin.clone(), ns);
        futures::stream::iter(0..n)
            .for_each_concurrent(16, |i| {
                let api = api.clone();
                async move {
                    api.patch(
                        &format!("b{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(json!({ "spec": { "value": value } })),
                    )
                    .await
                    .expect("patch");
                }
            })
            .await;
    }

    /// What the driver variants add: `-memcached`, a memcached restarted empty; `-traced`, the
    /// span exporter on.
    async fn configure_variant(&mut self, driver: &str, command: &mut Command) {
        // `kubeforge-memcached`: the kubeforge driver with the Bench cache in memcached, which
        // starts empty (a restart: it also gives memcached's memory back, `flush_all` does not).
        if uses_memcached(driver) {
            let server = self
                .memcached
                .as_mut()
                .expect("the harness runs memcached when a driver uses it");
            server.restart().await.expect("memcached restarts");
            command.arg("--memcached-servers").arg(server.addr());
        }
        // `kubeforge-traced`: the exporter on, to the harness's Jaeger.
        if jaeger::traced(driver) {
            self.jaeger
                .as_ref()
                .expect("the harness runs Jaeger when a driver is traced")
                .configure(command);
        }
    }

    async fn start(&mut self, driver: &str, path: &PathBuf, ns: &str, how: Start) -> Driver {
        let Start {
            concurrency,
            keep_managed_fields,
            report_heap,
            shard,
            leader,
            pods,
        } = how;
        let mut command = Command::new(path);
        command
            .arg("--kubeconfig")
            .arg(&self.args.driver_kubeconfig)
            .args(["--namespace", ns, "--concurrency", &concurrency.to_string()])
            .stdout(Stdio::piped())
            .stderr(log_file(driver, ns))
            .env(
                "RUST_LOG",
                std::env::var("BENCH_DRIVER_LOG").unwrap_or_else(|_| "warn".into()),
            );
        if self.args.owned_metadata_only {
            command.arg("--owned-metadata-only");
        }
        // `kubeforge-watcher`: the kubeforge driver in watcher mode.
        if driver.ends_with("-watcher") {
            command.arg("--watcher");
        }
        // `kubeforge-view`: the Benches cached as a view without the payload.
        if driver.ends_with("-view") && pods.is_none() {
            command.arg("--bench-view");
        }
        if keep_managed_fields {
            command.arg("--keep-managed-fields");
        }
        if let Some(mode) = pods {
            command.args(["--pods", mode]);
        }
        // Replica `i` of shard group `bench` (its Leases in the run's namespace).
        if let Some((i, mode)) = shard {
            command
                .args(["--shards", "bench", "--shard-mode", &mode])
                .env("POD_NAME", format!("bench-r{i}"));
        }
        // A replica under leader election, the Lease in the run's namespace.
        if let Some(elected) = &leader {
            let [lease, renew, retry] = elected.timings;
            command
                .args(["--leader-elect", &elected.lease])
                .arg(format!("--leader-election-timings={lease},{renew},{retry}"))
                .arg(format!("--warm-standby={}", elected.warm))
                .env("POD_NAME", &elected.identity);
        }
        self.configure_variant(driver, &mut command).await;
        if report_heap {
            command.env("BENCH_REPORT_HEAP", "1");
        }
        let mut child = command.spawn().expect("driver starts");
        let stdout = child.stdout.take().expect("piped stdout");
        // The driver prints `synced <seconds>` once its cache is synced (give it two minutes),
        // then, with BENCH_REPORT_HEAP, `heap <bytes>` every second; under leader election,
        // `leading` once it leads. Each line is stamped when it is read.
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        let heap = Arc::new(std::sync::Mutex::new(None));
        let last_heap = Arc::clone(&heap);
        std::thread::spawn(move || {
            let reader = std::io::BufReader::new(stdout);
            for line in std::io::BufRead::lines(reader).map_while(Result::ok) {
                let at = Instant::now();
                if let Some(bytes) = line
                    .strip_prefix("heap ")
                    .and_then(|b| b.trim().parse().ok())
                {
                    *last_heap.lock().unwrap_or_else(|e| e.into_inner()) = Some(bytes);
                } else {
                    let _ = tx.send((at, line));
                }
            }
        });
        let mut driver = Driver {
            child,
            sync_seconds: f64::NAN,
            heap,
            lines,
            seen: Vec::new(),
        };
        if leader.is_some() {
            return driver;
        }
        let synced = driver.line("", Duration::from_secs(120)).await;
        let line = synced
            .and_then(|_| driver.seen.first())
            .map(|(_, l)| l.clone())
            .unwrap_or_default();
        assert!(
            line.starts_with("synced "),
            "{} did not report `synced` within 2 minutes (it printed {line:?})",
            path.display()
        );
        driver.sync_seconds = line
            .trim()
            .strip_prefix("synced ")
            .and_then(|s| s.parse().ok())
            .unwrap_or(f64::NAN);
        driver
    }

    /// The process id of the memcached `driver` uses, if it uses one.
    fn memcached_pid(&self, driver: &str) -> Option<u32> {
        self.memcached
            .as_ref()
            .filter(|_| uses_memcached(driver))
            .and_then(MemcachedServer::pid)
    }

    /// Records memcached's RSS and item count under `scenario` for `driver`, if it uses it (the
    /// item count includes the store's key list entry: N objects show as N + 1).
    async fn record_memcached(&self, results: &mut Results, scenario: &str, driver: &str) {
        let Some(server) = self.memcached.as_ref().filter(|_| uses_memcached(driver)) else {
            return;
        };
        let rss = server
            .rss_bytes()
            .map_or(f64::NAN, |b| b as f64 / (1024.0 * 1024.0));
        record(results, scenario, "memcached rss", "MiB", driver, rss);
        let items = memcached_stats(&server.addr())
            .await
            .get("curr_items")
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN);
        record(
            results,
            scenario,
            "memcached items",
            "objects",
            driver,
            items,
        );
    }

    /// The audit log's length now: [`Harness::requests_since`] counts from there.
    fn requests_mark(&self) -> u64 {
        std::fs::metadata(&self.args.audit_log).map_or(0, |m| m.len())
    }

    /// Requests the drivers' user made since `mark` (lines of the audit log after that offset).
    fn requests_since(&self, mark: u64) -> f64 {
        let needle = format!("user=\"{}\"", self.args.driver_user);
        let mut text = String::new();
        let read = std::fs::File::open(&self.args.audit_log).and_then(|mut file| {
            std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(mark))?;
            std::io::Read::read_to_string(&mut file, &mut text)
        });
        match read {
            Ok(_) => text.lines().filter(|l| l.contains(&needle)).count() as f64,
            Err(_) => f64::NAN,
        }
    }
}

/// The workload's reconcile without a controller: apply the owned ConfigMap holding
/// `spec.value`, then write it to `status.observedValue`.
async fn reconcile_by_hand(api: &Api<Bench>, cms: &Api<ConfigMap>, bench: &Bench) {
    let name = kube::ResourceExt::name_any(bench);
    let mut cm = configmap(bench);
    cm.metadata.owner_references =
        kube::Resource::controller_owner_ref(bench, &()).map(|r| vec![r]);
    cms.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&cm),
    )
    .await
    .expect("apply");
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": { "observedValue": bench.spec.value } })),
    )
    .await
    .expect("status");
}

/// Waits until every object's status mirrors `value`; returns how long that took from `since`.
async fn converged(store: &Reader<Bench>, n: usize, value: i64, since: Instant) -> Duration {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let done = store
            .list()
            .await
            .expect("the in-memory store")
            .iter()
            .filter(|b| b.status.as_ref().and_then(|s| s.observed_value) == Some(value))
            .count();
        if done >= n {
            return since.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "not converged after 10 minutes ({done}/{n})"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until the process used less than 1 % of a core over half a second (at most a minute).
async fn wait_idle(pid: u32) {
    // Long enough for the start-up reconciles of 50,000 objects (about two minutes here).
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut last = cpu_seconds(pid);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = cpu_seconds(pid);
        if now - last < 0.005 {
            return;
        }
        last = now;
    }
}

/// The sharded scenario: 1, 2, 3... replicas of the kubeforge driver in one shard group
/// converge N Benches, in each shard mode; throughput, the RSS of each replica afterwards (its
/// cache holds its share) and the drivers' API requests per object (the label mode's sharder
/// writes a label on each object). Columns `kubeforge ×<replicas>` (labels) and
/// `kubeforge ×<replicas> ranges`.
async fn sharded(h: &mut Harness, results: &mut Results) {
    let Some((_, path)) = h
        .args
        .drivers
        .iter()
        .find(|(d, _)| d == "kubeforge")
        .cloned()
    else {
        return;
    };
    let (Some(&n), Some(&concurrency)) = (h.args.n.iter().max(), h.args.concurrency.first()) else {
        return;
    };
    let scenario = format!("sharded converge (c={concurrency}, N={n})");
    for mode in h.args.shard_modes.clone() {
        if mode == "ranges" {
            let probe = h.namespace("shard-probe").await;
            let serves = kubeforge::shard::serves_shard_selectors(&h.admin, &probe).await;
            h.drop_namespace(&probe).await;
            if !matches!(serves, Ok(true)) {
                eprintln!(
                    "== sharded: the apiserver does not serve shardSelector (gate ShardedListAndWatch off): mode ranges skipped"
                );
                continue;
            }
        }
        for replicas in h.args.shard_replicas.clone() {
            let column = match mode.as_str() {
                "labels" => format!("kubeforge ×{replicas}"),
                other => format!("kubeforge ×{replicas} {other}"),
            };
            for _ in 0..h.args.repeats {
                sharded_run(h, results, (&scenario, &column), &path, (replicas, &mode)).await;
            }
        }
    }
}

/// One run of the sharded scenario: `replicas` replicas in `mode`.
async fn sharded_run(
    h: &mut Harness,
    results: &mut Results,
    (scenario, column): (&str, &str),
    path: &PathBuf,
    (replicas, mode): (usize, &str),
) {
    let (Some(&n), Some(&concurrency)) = (h.args.n.iter().max(), h.args.concurrency.first()) else {
        return;
    };
    let ns = h.namespace("shard").await;
    let mut processes = Vec::new();
    for i in 0..replicas {
        let driver = format!("kubeforge-shard-{i}");
        processes.push(
            h.start(
                &driver,
                path,
                &ns,
                Start {
                    shard: Some((i, mode.to_owned())),
                    ..Start::reconciling(concurrency)
                },
            )
            .await,
        );
    }
    // Every member's Lease up, and the sharder's first pass done.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (store, stop) = h.watch_benches(&ns).await;
    let mark = h.requests_mark();
    let start = Instant::now();
    h.create(&ns, 0..n, 1).await;
    let took = converged(&store, n, 1, start).await.as_secs_f64();
    record_converge(results, scenario, column, n, took);
    for process in &processes {
        wait_idle(process.child.id()).await;
    }
    let requests = h.requests_since(mark);
    record(
        results,
        scenario,
        "api requests per object",
        "requests",
        column,
        requests / n as f64,
    );
    let rss: Vec<f64> = processes.iter().map(|p| rss_mib(p.child.id())).collect();
    let mean = rss.iter().sum::<f64>() / rss.len().max(1) as f64;
    record(
        results,
        scenario,
        "rss per replica (mean)",
        "MiB",
        column,
        mean,
    );
    let max = rss.iter().copied().fold(0.0, f64::max);
    record(
        results,
        scenario,
        "rss per replica (max)",
        "MiB",
        column,
        max,
    );
    stop.cancel();
    drop(processes);
    h.drop_namespace(&ns).await;
}

fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// One run's latency samples (ms), whole and by stage.
struct Latency {
    /// The harness's patch until its informer sees the status.
    total: Vec<f64>,
    /// The harness's patch request, until its answer.
    patch: Vec<f64>,
    /// From the patch's answer until the harness sees the driver's write of the owned ConfigMap:
    /// the watch event to the driver, the driver's queue and dispatch, the apply's round trip and
    /// the watch event back to the harness.
    child: Vec<f64>,
    /// From the ConfigMap seen until the status is seen: the status patch's round trip, what the
    /// driver does between its two writes, and the watch event back.
    status: Vec<f64>,
}

impl Latency {
    /// The three slowest samples (index, ms).
    fn slowest(&self) -> Vec<(usize, f64)> {
        let mut slowest: Vec<(usize, f64)> = self.total.iter().copied().enumerate().collect();
        slowest.sort_by(|a, b| b.1.total_cmp(&a.1));
        slowest.truncate(3);
        slowest
    }

    /// The metrics' names (the whole sample unnamed) and their samples.
    fn stages(&mut self) -> [(&'static str, &mut Vec<f64>); 4] {
        [
            ("", &mut self.total),
            ("stage patch", &mut self.patch),
            ("stage to child write seen", &mut self.child),
            ("stage to status seen", &mut self.status),
        ]
    }
}

/// Patches one object at a time, 20 ms apart, and times each until its status records the new
/// value, noting when the patch was answered and when the owned ConfigMap showed the value (the
/// harness watches the ConfigMaps during this scenario only).
async fn measure_latency(h: &Harness, ns: &str, n: usize, store: &Reader<Bench>) -> Latency {
    let api: Api<Bench> = Api::namespaced(h.admin.clone(), ns);
    let children = Arc::new(Informer::new(
        Api::<ConfigMap>::namespaced(h.admin.clone(), ns),
        InformerConfig::default(),
    ));
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(children.clone().run(stop.clone()));
    children.wait_for_sync().await;
    let child_store = children.store();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut latency = Latency {
        total: Vec::new(),
        patch: Vec::new(),
        child: Vec::new(),
        status: Vec::new(),
    };
    for i in 0..h.args.latency_samples {
        tokio::time::sleep(Duration::from_millis(20)).await; // idle
        let value = 100 + i as i64;
        let name = format!("b{}", i % n);
        let key = kubeforge::ObjectKey::namespaced(ns, &name);
        let start = Instant::now();
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "value": value } })),
        )
        .await
        .expect("patch");
        let answered = start.elapsed();
        let mut child_seen = None;
        let done = loop {
            if child_seen.is_none()
                && child_store
                    .get(&key)
                    .await
                    .expect("the in-memory store")
                    .and_then(|cm| cm.data.as_ref().and_then(|d| d.get("value").cloned()))
                    == Some(value.to_string())
            {
                child_seen = Some(start.elapsed());
            }
            if store
                .get(&key)
                .await
                .expect("the in-memory store")
                .and_then(|b| b.status.as_ref().and_then(|s| s.observed_value))
                == Some(value)
            {
                break start.elapsed();
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        };
        // The status can be seen before the ConfigMap's event arrives: then the stage is 0.
        let child_seen = child_seen.unwrap_or(done).max(answered);
        latency.total.push(ms(done));
        latency.patch.push(ms(answered));
        latency.child.push(ms(child_seen - answered));
        latency.status.push(ms(done - child_seen));
    }
    stop.cancel();
    latency
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let index = ((values.len() as f64 - 1.0) * p).round() as usize;
    values.get(index).copied().unwrap_or(f64::NAN)
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let admin = client(&args.admin_kubeconfig).await;
    let memcached = if args.drivers.iter().any(|(name, _)| uses_memcached(name)) {
        Some(
            MemcachedServer::start(MEMCACHED_MB)
                .await
                .expect("memcached starts"),
        )
    } else {
        None
    };
    let jaeger = args
        .drivers
        .iter()
        .any(|(name, _)| jaeger::traced(name))
        .then(jaeger::Jaeger::start);
    let mut h = Harness {
        admin,
        payload: "x".repeat(2048),
        args,
        run: 0,
        memcached,
        jaeger,
    };
    let mut results = Results::new();
    kubeforge::testing::apply_crds(&h.admin, [Bench::crd()], Duration::from_secs(60))
        .await
        .expect("the Bench CRD installs");
    warm_up(&mut h).await;
    let runs = |name: &str| h.args.scenarios.iter().any(|s| s == name);
    let (reconcile, sharding, waves, sync, failovers) = (
        runs("reconcile"),
        runs("sharded"),
        runs("wave"),
        runs("sync"),
        runs("failover"),
    );
    let pod_views = h.args.pod_views || runs("pods");
    if reconcile {
        reconcile_scenarios(&mut h, &mut results).await;
        checkpoint(&results, h.args.out.as_ref(), "reconcile");
    }
    if sharding {
        sharded(&mut h, &mut results).await;
        checkpoint(&results, h.args.out.as_ref(), "sharded");
    }
    if waves {
        wave::restart_waves(&mut h, &mut results).await;
        checkpoint(&results, h.args.out.as_ref(), "wave");
    }
    if sync {
        sync_scenarios(&mut h, &mut results).await;
        checkpoint(&results, h.args.out.as_ref(), "sync");
    }
    if failovers {
        failover::failovers(&mut h, &mut results).await;
        checkpoint(&results, h.args.out.as_ref(), "failover");
    }
    if pod_views {
        pods::pods_cached(&mut h, &mut results).await;
        checkpoint(&results, h.args.out.as_ref(), "pods");
    }

    if sync {
        cost_curves(&mut results, &h.args.sync_sizes);
    }
    if h.args.owned_metadata_only {
        results = results
            .into_iter()
            .map(|((scenario, metric, unit), v)| {
                ((format!("{scenario} [owned: metadata]"), metric, unit), v)
            })
            .collect();
    }
    report(&results, h.args.out.as_ref());
}

/// Warms the apiserver up (the first requests for a new CRD are slow), so that the first
/// driver measured does not pay for it.
async fn warm_up(h: &mut Harness) {
    let ns = h.namespace("warmup").await;
    h.create(&ns, 0..50, 1).await;
    h.set_all(&ns, 50, 2).await;
    h.drop_namespace(&ns).await;
}

/// One concurrency and size of the reconcile scenarios.
#[derive(Clone, Copy, Debug)]
struct Run {
    concurrency: usize,
    n: usize,
}

impl Run {
    fn scenario(self, name: &str) -> String {
        format!("{name} (c={}, N={})", self.concurrency, self.n)
    }
}

/// The reconcile scenarios of every driver and the raw ceiling, for each concurrency and size,
/// `repeats` times in a rotating driver order.
async fn reconcile_scenarios(h: &mut Harness, results: &mut Results) {
    let drivers = h.args.drivers.clone();
    let repeats = h.args.repeats;
    let runs: Vec<Run> = h
        .args
        .concurrency
        .iter()
        .flat_map(|&concurrency| h.args.n.iter().map(move |&n| Run { concurrency, n }))
        .collect();
    for run in runs {
        for repeat in 0..repeats {
            // Rotate the order, so no driver always runs first or last.
            let mut order = drivers.clone();
            order.rotate_left(repeat % drivers.len().max(1));
            for (driver, path) in &order {
                reconcile_run(h, results, driver, path, run).await;
            }
            raw_ceiling(h, results, run).await;
        }
    }
}

/// One driver through converge, update storm, cost, latency and memory, in a fresh namespace.
async fn reconcile_run(
    h: &mut Harness,
    results: &mut Results,
    driver: &str,
    path: &PathBuf,
    run: Run,
) {
    let Run { concurrency, n } = run;
    let scenario = |name: &str| run.scenario(name);
    let ns = h.namespace("run").await;
    let process = h
        .start(driver, path, &ns, Start::reconciling(concurrency))
        .await;
    let pid = process.child.id();
    let (store, stop) = h.watch_benches(&ns).await;

    let (cpu0, req0) = (cpu_seconds(pid), h.requests_mark());
    let memcached_cpu0 = h.memcached_pid(driver).map(cpu_seconds);
    let start = Instant::now();
    h.create(&ns, 0..n, 1).await;
    let took = converged(&store, n, 1, start).await.as_secs_f64();
    record_converge(results, &scenario("converge"), driver, n, took);

    let start = Instant::now();
    h.set_all(&ns, n, 2).await;
    let took = converged(&store, n, 2, start).await.as_secs_f64();
    record(
        results,
        &scenario("update storm"),
        "time",
        "s",
        driver,
        took,
    );
    // Let the follow-up reconciles finish, so every driver's cost covers all its work.
    wait_idle(pid).await;
    let (cpu1, requests) = (cpu_seconds(pid), h.requests_since(req0));
    // Each object needed two reconciles (create, update).
    let reconciles = 2.0 * n as f64;
    record(
        results,
        &scenario("cost"),
        "cpu per 1000 reconciles",
        "cpu-s",
        driver,
        (cpu1 - cpu0) / reconciles * 1000.0,
    );
    // The memcached of a `-memcached` driver works for it: its CPU is a row of its own.
    if let (Some(before), Some(now)) = (memcached_cpu0, h.memcached_pid(driver).map(cpu_seconds)) {
        record(
            results,
            &scenario("cost"),
            "memcached cpu per 1000 reconciles",
            "cpu-s",
            driver,
            (now - before) / reconciles * 1000.0,
        );
    }
    record(
        results,
        &scenario("cost"),
        "api requests per reconcile",
        "requests",
        driver,
        requests / reconciles,
    );
    after_reconciles(h, results, driver, run, &ns, &store, pid).await;
    stop.cancel();
    drop(process);
    h.drop_namespace(&ns).await;
}

/// The latency (at idle: the storm's follow-up reconciles are done) and memory of a driver
/// after its reconcile scenarios.
async fn after_reconciles(
    h: &Harness,
    results: &mut Results,
    driver: &str,
    run: Run,
    ns: &str,
    store: &Reader<Bench>,
    pid: u32,
) {
    let n = run.n;
    let scenario = |name: &str| run.scenario(name);
    // Latency is measured at idle (the storm's follow-up reconciles are done).
    let mut latency = measure_latency(h, ns, n, store).await;
    eprintln!(
        "{driver} {ns}: slowest latency samples (index, ms): {:.1?}",
        latency.slowest()
    );
    for (metric, samples) in latency.stages() {
        for (name, p) in [("p50", 0.5), ("p99", 0.99)] {
            let metric = if metric.is_empty() {
                name.to_owned()
            } else {
                format!("{metric} {name}")
            };
            let value = percentile(samples, p);
            record(results, &scenario("latency"), &metric, "ms", driver, value);
        }
    }
    record(
        results,
        &scenario("after the runs"),
        "rss",
        "MiB",
        driver,
        rss_mib(pid),
    );
    record(
        results,
        &scenario("after the runs"),
        "anonymous rss (heap)",
        "MiB",
        driver,
        anon_rss_mib(pid),
    );
    h.record_memcached(results, &scenario("after the runs"), driver)
        .await;
}

/// Raw ceiling: the same writes from a plain loop with the same concurrency, as the drivers'
/// identity (admin requests would skip API Priority and Fairness).
async fn raw_ceiling(h: &mut Harness, results: &mut Results, run: Run) {
    let Run { concurrency, n } = run;
    let scenario = |name: &str| run.scenario(name);
    let ns = h.namespace("raw").await;
    h.create(&ns, 0..n, 1).await;
    let as_driver = client(&h.args.driver_kubeconfig).await;
    let api: Api<Bench> = Api::namespaced(as_driver.clone(), &ns);
    let cms: Api<ConfigMap> = Api::namespaced(as_driver, &ns);
    let start = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(concurrency, |i| {
            let (api, cms) = (api.clone(), cms.clone());
            async move {
                let bench = api.get(&format!("b{i}")).await.expect("get");
                reconcile_by_hand(&api, &cms, &bench).await;
            }
        })
        .await;
    let took = start.elapsed().as_secs_f64();
    record_converge(results, &scenario("converge"), "raw", n, took);
    h.drop_namespace(&ns).await;
}

/// The memory-and-sync scenarios: each driver started on each size of converged objects,
/// with managedFields dropped and kept.
async fn sync_scenarios(h: &mut Harness, results: &mut Results) {
    let drivers = h.args.drivers.clone();
    let repeats = h.args.repeats;
    for &size in &h.args.sync_sizes.clone() {
        let ns = h.namespace("sync").await;
        let start = Instant::now();
        h.create_converged(&ns, 0..size, 1).await;
        eprintln!(
            "memory and sync: {size} converged objects created in {:.0} s",
            start.elapsed().as_secs_f64()
        );
        for repeat in 0..repeats {
            let mut order = drivers.clone();
            order.rotate_left(repeat % drivers.len().max(1));
            // A watcher handles every object again at start-up (an apply per object): its
            // memory and sync are the reconciler's; it is measured on the reconcile scenarios.
            // A memcached driver runs both variants too: a start costs a sync (seconds at
            // 50,000 objects) against the minutes the objects take to create, and with
            // managedFields kept the difference lands in memcached, not in the driver.
            for (driver, path) in order.iter().filter(|(d, _)| !d.ends_with("-watcher")) {
                for (variant, keep) in [("plain", false), ("managed-fields", true)] {
                    if h.args.sync_variants.iter().any(|v| v == variant) {
                        sync_run(h, results, driver, path, &ns, size, keep).await;
                    }
                }
            }
        }
        // BENCH_KEEP_SYNC_NAMESPACE=1 leaves the converged objects in place (for profiling a
        // driver's sync by hand; delete the namespace afterwards).
        if std::env::var_os("BENCH_KEEP_SYNC_NAMESPACE").is_some() {
            eprintln!("memory and sync: namespace {ns} kept ({size} converged objects)");
        } else {
            h.drop_namespace(&ns).await;
        }
    }
}

/// One driver started on `size` converged objects in `ns`: sync time and memory.
async fn sync_run(
    h: &mut Harness,
    results: &mut Results,
    driver: &str,
    path: &PathBuf,
    ns: &str,
    size: usize,
    keep: bool,
) {
    let process = h
        .start(
            driver,
            path,
            ns,
            Start {
                keep_managed_fields: keep,
                report_heap: true,
                ..Start::reconciling(4)
            },
        )
        .await;
    let label = if keep {
        "memory and sync, managedFields kept"
    } else {
        "memory and sync"
    };
    let scenario = format!("{label} ({size} objects)");
    record_cache(h, results, &scenario, driver, &process).await;
    drop(process);
}

/// A driver's cache just synced: its sync time, its RSS 2 s later, and once it is idle its RSS
/// and live heap (and its memcached's, if it uses one).
async fn record_cache(
    h: &Harness,
    results: &mut Results,
    scenario: &str,
    driver: &str,
    process: &Driver,
) {
    record(
        results,
        scenario,
        "sync time",
        "s",
        driver,
        process.sync_seconds,
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Resident memory, not live heap: the initial list holds every object at
    // once whatever the store, and the allocator keeps most of what it frees, so
    // a memcached store's smaller live heap barely shows here.
    let rss = rss_mib(process.child.id());
    record(results, scenario, "rss after sync", "MiB", driver, rss);
    // The live heap then (the Rust drivers print it every second): what the resident memory
    // holds besides is what the allocator keeps.
    let heap = *process.heap.lock().unwrap_or_else(|e| e.into_inner());
    let heap = heap.map_or(f64::NAN, |b| b as f64 / 1024.0 / 1024.0);
    record(
        results,
        scenario,
        "live heap after sync",
        "MiB",
        driver,
        heap,
    );
    // Each sample, in the order taken (the table shows medians).
    eprintln!(
        "sample: {scenario}: {driver}: sync {:.3} s, rss after sync {rss:.1} MiB (anonymous {:.1}, live heap {heap:.1})",
        process.sync_seconds,
        anon_rss_mib(process.child.id()),
    );
    record(
        results,
        scenario,
        "anonymous rss (heap)",
        "MiB",
        driver,
        anon_rss_mib(process.child.id()),
    );
    if !h.args.sync_idle {
        h.record_memcached(results, scenario, driver).await;
        return;
    }
    // The live heap once the start-up reconciles are done (the driver idle):
    // what the process holds, without what the allocator keeps.
    wait_idle(process.child.id()).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Resident memory once idle: the steady state of an operator that synced.
    record(
        results,
        scenario,
        "rss when idle",
        "MiB",
        driver,
        rss_mib(process.child.id()),
    );
    let heap = *process.heap.lock().unwrap_or_else(|e| e.into_inner());
    record(
        results,
        scenario,
        "live heap when idle",
        "MiB",
        driver,
        heap.map_or(f64::NAN, |b| b as f64 / 1024.0 / 1024.0),
    );
    h.record_memcached(results, scenario, driver).await;
}

/// How cost grows with the number of cached objects: for each driver, a least-squares line
/// through the memory-and-sync results of every size (two sizes or more) — resident memory and
/// live heap per object (bytes) and sync time per 1,000 objects.
fn cost_curves(results: &mut Results, sizes: &[usize]) {
    if sizes.len() < 2 {
        return;
    }
    let mut fits = Vec::new();
    for label in ["memory and sync", "memory and sync, managedFields kept"] {
        let curve = format!("cost curve: {label} ({} objects)", join_sizes(sizes));
        for (metric, unit, per, scale) in [
            (
                "rss after sync",
                "bytes/object",
                "rss per object",
                1024.0 * 1024.0,
            ),
            (
                "live heap after sync",
                "bytes/object",
                "live heap after sync per object",
                1024.0 * 1024.0,
            ),
            (
                "rss when idle",
                "bytes/object",
                "rss when idle per object",
                1024.0 * 1024.0,
            ),
            (
                "live heap when idle",
                "bytes/object",
                "live heap per object",
                1024.0 * 1024.0,
            ),
            (
                "sync time",
                "s/1000 objects",
                "sync time per 1,000 objects",
                1000.0,
            ),
        ] {
            let mut by_driver: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for &size in sizes {
                let key = (
                    format!("{label} ({size} objects)"),
                    metric.to_owned(),
                    unit_of(metric),
                );
                for (driver, values) in results.get(&key).into_iter().flatten() {
                    let y = median(values);
                    if y.is_finite() {
                        by_driver
                            .entry(driver.clone())
                            .or_default()
                            .push((size as f64, y));
                    }
                }
            }
            for (driver, points) in by_driver {
                if let Some(slope) = slope(&points) {
                    fits.push((curve.clone(), per, unit, driver, slope * scale));
                }
            }
        }
    }
    for (curve, metric, unit, driver, value) in fits {
        record(results, &curve, metric, unit, &driver, value);
    }
}

/// The unit the memory-and-sync scenario records `metric` in.
fn unit_of(metric: &str) -> String {
    if metric == "sync time" { "s" } else { "MiB" }.to_owned()
}

fn join_sizes(sizes: &[usize]) -> String {
    sizes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("/")
}

/// The slope of the least-squares line through `points` (none for fewer than two distinct x).
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    let (mx, my) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (points.len() >= 2 && sxx > 0.0).then(|| sxy / sxx)
}

/// Lower is better for every metric except throughput.
fn higher_is_better(metric: &str) -> bool {
    metric == "throughput"
}

/// After each scenario of a run that writes `--out`: the rows so far, in the same form, to
/// `<out>.partial` (a full run takes hours; a crash or a stop late in it keeps what was measured).
fn checkpoint(results: &Results, out: Option<&PathBuf>, done: &str) {
    let Some(out) = out else { return };
    let partial = partial_path(out);
    write_results(&rows(results), &partial);
    eprintln!("== {done} done: the rows so far in {}", partial.display());
}

/// `<out>.partial`: where [`checkpoint`] writes (removed once `<out>` is written).
fn partial_path(out: &std::path::Path) -> PathBuf {
    let mut partial = out.to_path_buf().into_os_string();
    partial.push(".partial");
    PathBuf::from(partial)
}

/// The medians of each (scenario, metric, unit) by driver, as the JSON rows `--out` holds.
fn rows(results: &Results) -> Vec<serde_json::Value> {
    let extras = extra_columns(results);
    results
        .iter()
        .map(|((scenario, metric, unit), by_driver)| {
            let m = |d: &str| by_driver.get(d).map(|v| median(v));
            json!({
                "scenario": scenario, "metric": metric, "unit": unit,
                "kubeforge": m("kubeforge"), "kube_runtime": m("kube-runtime"),
                "controller_runtime": m("controller-runtime"), "raw": m("raw"),
                "kubeforge_watcher": m("kubeforge-watcher"),
                "kubeforge_memcached": m("kubeforge-memcached"),
                "others": extras.iter().map(|d| (d.to_string(), json!(m(d)))).collect::<serde_json::Map<_, _>>(),
            })
        })
        .collect()
}

/// The columns of the table and the JSON rows, in order.
const COLUMNS: [&str; 6] = [
    "kubeforge",
    "kube-runtime",
    "controller-runtime",
    "raw",
    "kubeforge-watcher",
    "kubeforge-memcached",
];

/// Drivers of other names (an A/B's second kubeforge binary, `--driver kubeforge-b=PATH`): they
/// get a column each after [`COLUMNS`].
fn extra_columns(results: &Results) -> std::collections::BTreeSet<&str> {
    results
        .values()
        .flat_map(|by_driver| by_driver.keys())
        .map(String::as_str)
        .filter(|d| !COLUMNS.contains(d))
        .collect()
}

/// Writes `rows` with the machine's description as the JSON document of `--out`.
fn write_results(rows: &[serde_json::Value], path: &std::path::Path) {
    let machine = format!(
        "{} cores, {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| m.lines().next().map(|l| l
                .split_whitespace()
                .skip(1)
                .collect::<Vec<_>>()
                .join(" ")))
            .unwrap_or_default()
    );
    let doc = json!({ "machine": machine, "rows": rows });
    std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap_or_default())
        .expect("write results");
}

fn report(results: &Results, out: Option<&PathBuf>) {
    let extras = extra_columns(results);
    println!(
        "{:<52} {:<34} {:<13} {:>11} {:>13} {:>19} {:>9} {:>16} {:>17} {:>19}{}",
        "scenario",
        "metric",
        "unit",
        "kubeforge",
        "kube-runtime",
        "controller-runtime",
        "raw",
        "kubeforge/best",
        "kubeforge-watcher",
        "kubeforge-memcached",
        extras
            .iter()
            .map(|d| format!(" {d:>19}"))
            .collect::<String>()
    );
    for ((scenario, metric, unit), by_driver) in results {
        let m = |d: &str| by_driver.get(d).map(|v| median(v));
        let peers: Vec<f64> = ["kube-runtime", "controller-runtime"]
            .iter()
            .filter_map(|d| m(d))
            .filter(|v| v.is_finite())
            .collect();
        let best = if higher_is_better(metric) {
            peers.iter().copied().fold(f64::NAN, f64::max)
        } else {
            peers.iter().copied().fold(f64::NAN, f64::min)
        };
        let ratio = m("kubeforge").map(|k| k / best);
        let cell = |v: Option<f64>| {
            v.filter(|x| x.is_finite())
                .map_or("-".to_owned(), |x| format!("{x:.3}"))
        };
        println!(
            "{:<52} {:<34} {:<13} {:>11} {:>13} {:>19} {:>9} {:>16} {:>17} {:>19}{}",
            scenario,
            metric,
            unit,
            cell(m(COLUMNS[0])),
            cell(m(COLUMNS[1])),
            cell(m(COLUMNS[2])),
            cell(m(COLUMNS[3])),
            cell(ratio),
            cell(m(COLUMNS[4])),
            cell(m(COLUMNS[5])),
            extras
                .iter()
                .map(|d| format!(" {:>19}", cell(m(d))))
                .collect::<String>()
        );
    }
    if let Some(path) = out {
        write_results(&rows(results), path);
        // Absent when no scenario ran (or after a run without checkpoints): nothing to remove.
        let _ = std::fs::remove_file(partial_path(path));
    }
}
