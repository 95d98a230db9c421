//! The benchmark workload shared by the Rust drivers: the `Bench` kind and the driver flags.
//!
//! Every driver (kubeforge, kube-runtime, controller-runtime in `bench/controller-runtime/`)
//! reconciles a `Bench` the same way: read it from the cache, server-side-apply a ConfigMap
//! owned by it holding `spec.value`, then merge-patch `status.observedValue`.

use clap::Parser;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A benchmark object: `value` to mirror into a ConfigMap, and a ~2 KiB payload.
#[kubeforge::custom_resource(
    group = "bench.kubeforge.dev",
    version = "v1",
    kind = "Bench",
    namespaced,
    status = BenchStatus
)]
#[derive(Clone, Debug, PartialEq)]
pub struct BenchSpec {
    /// The value the controller mirrors.
    pub value: i64,
    /// Ballast, about 2 KiB.
    #[serde(default)]
    pub payload: String,
}

/// What the controller observed.
#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BenchStatus {
    /// The `spec.value` last mirrored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_value: Option<i64>,
}

/// What the Bench reconciler reads of a Bench (kubeforge's `--bench-view` driver): its
/// metadata, `spec.value` and `status.observedValue`; the payload is never decoded or kept.
#[kubeforge::view(of = Bench)]
pub struct BenchView {
    /// The Bench's metadata.
    pub metadata: ObjectMeta,
    /// Its value.
    pub spec: BenchSpecView,
    /// What was mirrored.
    pub status: Option<BenchStatusView>,
}

/// [`BenchView`]'s fields of the spec.
#[kubeforge::view(of = BenchSpec)]
pub struct BenchSpecView {
    /// The value the controller mirrors.
    pub value: i64,
}

/// [`BenchView`]'s fields of the status.
#[kubeforge::view(of = BenchStatus)]
pub struct BenchStatusView {
    /// The `spec.value` last mirrored.
    pub observed_value: Option<i64>,
}

/// Flags every driver takes (the Go driver takes the same).
#[derive(Clone, Debug, Parser)]
pub struct DriverArgs {
    /// Kubeconfig of the (non-admin) benchmark identity.
    #[arg(long)]
    pub kubeconfig: std::path::PathBuf,
    /// Namespace to watch.
    #[arg(long)]
    pub namespace: String,
    /// Maximum concurrent reconciles.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Keep managedFields in the cache.
    #[arg(long)]
    pub keep_managed_fields: bool,
    /// Watch the owned ConfigMaps as metadata only (the reconciler never reads them).
    #[arg(long)]
    pub owned_metadata_only: bool,
    /// kubeforge only: handle every event with a watcher (`--concurrency` workers of the
    /// concurrent dispatcher) instead of a level-triggered reconciler.
    #[arg(long)]
    pub watcher: bool,
    /// kubeforge only: keep the Bench cache in memcached on these servers (`host:port`, comma
    /// separated; shard key `bench`) instead of in memory. Not with `--watcher`.
    #[arg(long, value_delimiter = ',', conflicts_with = "watcher")]
    pub memcached_servers: Vec<String>,
    /// kubeforge only: a replica of this shard group (identity `$POD_NAME`, Leases in
    /// `--namespace`).
    #[arg(long)]
    pub shards: Option<String>,
    /// kubeforge only: with `--shards`, how the group assigns objects (`auto`, `labels`,
    /// `ranges`, as `--shard-mode` of `cli::Options`).
    #[arg(long, default_value = "auto", requires = "shards")]
    pub shard_mode: String,
    /// kubeforge only: one replica under leader election on Lease `LEASE` in `--namespace`
    /// (identity `$POD_NAME`): only the leader reconciles. The driver prints `leading` when it
    /// becomes the leader (and `synced <seconds>` once its cache is synced, as always: a cold
    /// standby's only after it leads).
    #[arg(long, value_name = "LEASE", conflicts_with = "shards")]
    pub leader_elect: Option<String>,
    /// kubeforge only: with `--leader-elect`, the lease duration, renew deadline and retry
    /// period, in seconds (controller-runtime's defaults: 15,10,2).
    #[arg(
        long,
        value_name = "SECONDS",
        value_delimiter = ',',
        default_values_t = [15.0, 10.0, 2.0]
    )]
    pub leader_election_timings: Vec<f64>,
    /// kubeforge only: with `--leader-elect`, a standby lists, watches and fills its caches
    /// before it leads (`Manager::warm_up_before_leading`, the default); `false`: a cold
    /// standby, which lists only once it has won the Lease.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub warm_standby: bool,
    /// The pods-cached scenario: instead of the Bench workload, a controller of the Pods in
    /// `--namespace` whose reconcile does nothing, caching them in full (managedFields dropped
    /// unless `--keep-managed-fields`) or as a view ([`PodView`]'s fields: kubeforge's
    /// `#[kubeforge::view]`, kube-runtime's `.modify(..)` with [`strip_to_view`],
    /// controller-runtime's cache transform). The driver prints `synced <seconds>` as always.
    #[arg(long, value_enum)]
    pub pods: Option<PodCache>,
    /// kubeforge only: cache the Benches as [`BenchView`]s (what the reconciler reads, without
    /// the payload); the status is patched through the full type.
    #[arg(long, conflicts_with_all = ["watcher", "pods"])]
    pub bench_view: bool,
}

/// How the pods-cached scenario caches its Pods (`--pods`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PodCache {
    /// Every field (managedFields dropped, as the Bench scenarios do).
    Full,
    /// Only the fields of [`PodView`].
    View,
}

impl DriverArgs {
    /// `--leader-election-timings` as durations (lease duration, renew deadline, retry period).
    ///
    /// # Errors
    ///
    /// Not three finite, non-negative numbers of seconds.
    pub fn leader_election_timings(&self) -> Result<[std::time::Duration; 3], String> {
        let duration = |seconds: f64| {
            std::time::Duration::try_from_secs_f64(seconds)
                .map_err(|e| format!("--leader-election-timings: {seconds}: {e}"))
        };
        match self.leader_election_timings[..] {
            [lease, renew, retry] => Ok([duration(lease)?, duration(renew)?, duration(retry)?]),
            _ => Err("--leader-election-timings takes three numbers of seconds: lease duration, renew deadline, retry period".to_owned()),
        }
    }
}

/// Field manager of the ConfigMaps.
pub const MANAGER: &str = "bench-driver";

/// The client configuration of the driver's kubeconfig.
///
/// # Errors
///
/// An unreadable kubeconfig.
pub async fn config(args: &DriverArgs) -> Result<kube::Config, String> {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(&args.kubeconfig).map_err(|e| e.to_string())?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| e.to_string())
}

/// kube's default client for the driver's kubeconfig (HTTP/1.1), with no client-side rate limit.
///
/// # Errors
///
/// An unreadable kubeconfig.
pub async fn client(args: &DriverArgs) -> Result<kube::Client, String> {
    kube::Client::try_from(config(args).await?).map_err(|e| e.to_string())
}

/// The owned ConfigMap holding `value`.
pub fn configmap(bench: &Bench) -> k8s_openapi::api::core::v1::ConfigMap {
    configmap_of(&bench.metadata, bench.spec.value)
}

/// [`configmap`] of a Bench known by its metadata and value (a [`BenchView`]'s).
pub fn configmap_of(owner: &ObjectMeta, value: i64) -> k8s_openapi::api::core::v1::ConfigMap {
    k8s_openapi::api::core::v1::ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: owner.name.clone(),
            namespace: owner.namespace.clone(),
            ..Default::default()
        },
        data: Some([("value".to_owned(), value.to_string())].into()),
        ..Default::default()
    }
}

/// With `BENCH_REPORT_HEAP=1` (the harness sets it in the memory scenario only), prints
/// `heap <live bytes>` every second, as `live` counts them (the drivers' counting allocator):
/// the live heap, which resident memory hides behind what the allocator keeps after the initial
/// list.
pub fn report_heap(live: fn() -> usize) {
    if std::env::var_os("BENCH_REPORT_HEAP").is_none() {
        return;
    }
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
            println!("heap {}", live());
        }
    });
}

/// What a typical operator reads of a Pod, the view the pods-cached scenario caches: its
/// metadata (managedFields dropped, as always), the node it runs on, its containers' names and
/// images, its phase.
#[kubeforge::view(of = Pod)]
pub struct PodView {
    /// The Pod's metadata.
    pub metadata: ObjectMeta,
    /// Its node and containers.
    pub spec: Option<PodSpecView>,
    /// Its phase.
    pub status: Option<PodStatusView>,
}

/// [`PodView`]'s fields of the spec.
#[kubeforge::view(of = PodSpec)]
pub struct PodSpecView {
    /// The node the Pod is bound to.
    pub node_name: Option<String>,
    /// The containers' names and images.
    pub containers: Vec<ContainerView>,
}

/// [`PodView`]'s fields of a container.
#[kubeforge::view(of = Container)]
pub struct ContainerView {
    /// The container's name.
    pub name: String,
    /// Its image.
    pub image: Option<String>,
}

/// [`PodView`]'s fields of the status.
#[kubeforge::view(of = PodStatus)]
pub struct PodStatusView {
    /// Pending, Running, Succeeded, Failed or Unknown.
    pub phase: Option<String>,
}

/// Cuts a full Pod down to [`PodView`]'s fields and drops its managedFields, in place: what the
/// kube-runtime driver's `.modify(..)` does (the Go driver's transform does the same). The
/// result is still a `Pod`, its other fields empty.
pub fn strip_to_view(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    pod.spec = pod.spec.take().map(|spec| PodSpec {
        node_name: spec.node_name,
        containers: spec
            .containers
            .into_iter()
            .map(|c| Container {
                name: c.name,
                image: c.image,
                ..Container::default()
            })
            .collect(),
        ..PodSpec::default()
    });
    pod.status = pod.status.take().map(|status| PodStatus {
        phase: status.phase,
        ..PodStatus::default()
    });
}
