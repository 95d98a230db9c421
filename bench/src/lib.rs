//! The benchmark workload shared by the Rust drivers: the `Bench` kind and the driver flags.
//!
//! Every driver (kubeforge, kube-runtime, controller-runtime in `bench/controller-runtime/`)
//! reconciles a `Bench` the same way: read it from the cache, server-side-apply a ConfigMap
//! owned by it holding `spec.value`, then merge-patch `status.observedValue`.

use clap::Parser;

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
    use kube::ResourceExt;
    k8s_openapi::api::core::v1::ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(bench.name_any()),
            namespace: bench.namespace(),
            ..Default::default()
        },
        data: Some([("value".to_owned(), bench.spec.value.to_string())].into()),
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
