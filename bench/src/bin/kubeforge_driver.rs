//! The kubeforge driver: the Bench workload written as a kubeforge user would.

use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Patch;
use kubeforge::controller::{Action, Context};
use kubeforge::informer::InformerConfig;
use kubeforge::leader::LeaderElectionConfig;
use kubeforge::manager::Manager;
use kubeforge::store::{Memcached, MemcachedConfig};
use kubeforge::watcher::{WatchContext, Watcher, WatcherController};
use kubeforge_bench::{
    Bench, BenchView, DriverArgs, MANAGER, PodCache, PodView, configmap, configmap_of,
};

/// Counts live heap bytes (`heap` lines, see `kubeforge_bench::report_heap`).
#[global_allocator]
static ALLOC: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

/// The Bench controller. The reconciler never reads the ConfigMaps it applies, so it watches
/// them without caching them (`uncached`: keys, versions and owner references only), as
/// kube-runtime's `owns` does.
struct BenchController;

#[kubeforge::controller(for = Bench, owns(k8s_openapi::api::core::v1::ConfigMap(uncached)))]
impl BenchController {
    async fn reconcile(
        &self,
        bench: Arc<Bench>,
        ctx: &Context<Bench>,
    ) -> Result<Action, kube::Error> {
        reconcile(bench, ctx).await
    }
}

/// The same controller with the owned ConfigMaps watched and cached as metadata only (the
/// reconciler never reads them; owner references are all `owns` needs).
struct BenchControllerOwnedMetadata;

#[kubeforge::controller(
    for = Bench,
    owns(k8s_openapi::api::core::v1::ConfigMap(metadata)),
    name = "bench"
)]
impl BenchControllerOwnedMetadata {
    async fn reconcile(
        &self,
        bench: Arc<Bench>,
        ctx: &Context<Bench>,
    ) -> Result<Action, kube::Error> {
        reconcile(bench, ctx).await
    }
}

/// [`BenchController`] with the Bench cache in memcached (`--memcached-servers`): the objects
/// live there as JSON, only their index entries stay in memory.
struct BenchControllerMemcached;

#[kubeforge::controller(
    for = Bench,
    store = memcached,
    owns(k8s_openapi::api::core::v1::ConfigMap(uncached)),
    name = "bench"
)]
impl BenchControllerMemcached {
    async fn reconcile(
        &self,
        bench: Arc<Bench>,
        ctx: &Context<Bench>,
    ) -> Result<Action, kube::Error> {
        reconcile(bench, ctx).await
    }
}

/// [`BenchControllerOwnedMetadata`] with the Bench cache in memcached (the ConfigMaps'
/// metadata stays in memory, as there).
struct BenchControllerMemcachedOwnedMetadata;

#[kubeforge::controller(
    for = Bench,
    store = memcached,
    owns(k8s_openapi::api::core::v1::ConfigMap(metadata)),
    name = "bench"
)]
impl BenchControllerMemcachedOwnedMetadata {
    async fn reconcile(
        &self,
        bench: Arc<Bench>,
        ctx: &Context<Bench>,
    ) -> Result<Action, kube::Error> {
        reconcile(bench, ctx).await
    }
}

/// [`BenchController`] with the Benches cached as [`BenchView`]s (`--bench-view`): the payload
/// is skipped while decoding, and the status is patched through the full type.
struct BenchViewController;

#[kubeforge::controller(
    for = BenchView,
    owns(k8s_openapi::api::core::v1::ConfigMap(uncached)),
    name = "bench"
)]
impl BenchViewController {
    async fn reconcile(
        &self,
        bench: Arc<BenchView>,
        ctx: &Context<BenchView>,
    ) -> Result<Action, kube::Error> {
        use kube::ResourceExt;
        let value = bench.spec.value;
        let child = configmap_of(&bench.metadata, value);
        ctx.apply_owned(bench.as_ref(), MANAGER, child).await?;
        if bench.status.as_ref().and_then(|s| s.observed_value) != Some(value) {
            // A view is read-only: the write goes through the full type.
            ctx.api::<Bench>()
                .patch_status(
                    &bench.name_any(),
                    &kube::api::PatchParams::default(),
                    &Patch::Merge(serde_json::json!({ "status": { "observedValue": value } })),
                )
                .await?;
        }
        Ok(Action::Done)
    }
}

/// The pods-cached scenario (`--pods full`): a controller of Pods, cached in full, whose
/// reconcile does nothing.
struct PodsFull;

#[kubeforge::controller(for = Pod, name = "pods")]
impl PodsFull {
    async fn reconcile(&self, _pod: Arc<Pod>, _ctx: &Context<Pod>) -> Result<Action, kube::Error> {
        Ok(Action::Done)
    }
}

/// The same with the Pods cached as [`PodView`]s (`--pods view`): decoded straight into the
/// view, every other field skipped.
struct PodsView;

#[kubeforge::controller(for = PodView, name = "pods")]
impl PodsView {
    async fn reconcile(
        &self,
        _pod: Arc<PodView>,
        _ctx: &Context<PodView>,
    ) -> Result<Action, kube::Error> {
        Ok(Action::Done)
    }
}

/// Server-side-apply the owned ConfigMap holding `spec.value`, then record it in the status.
async fn reconcile(bench: Arc<Bench>, ctx: &Context<Bench>) -> Result<Action, kube::Error> {
    ctx.apply_owned(bench.as_ref(), MANAGER, configmap(&bench))
        .await?;
    let value = bench.spec.value;
    if bench.status.as_ref().and_then(|s| s.observed_value) != Some(value) {
        ctx.patch_status(&Patch::Merge(
            serde_json::json!({ "status": { "observedValue": value } }),
        ))
        .await?;
    }
    Ok(Action::Done)
}

/// The same work as a watcher: every event of a Bench (not just the latest state of a key)
/// applies its ConfigMap and records the value in the status.
struct BenchWatcher;

impl BenchWatcher {
    async fn handle(bench: &Bench, ctx: &WatchContext) -> Result<(), kube::Error> {
        let ns = bench.metadata.namespace.as_deref().unwrap_or_default();
        let configmaps = kube::Api::namespaced(ctx.client(), ns);
        kubeforge::client::apply_owned(&configmaps, bench, MANAGER, configmap(bench)).await?;
        let value = bench.spec.value;
        if bench.status.as_ref().and_then(|s| s.observed_value) != Some(value) {
            let benches: kube::Api<Bench> = kube::Api::namespaced(ctx.client(), ns);
            let name = bench.metadata.name.as_deref().unwrap_or_default();
            let status = serde_json::json!({ "status": { "observedValue": value } });
            benches
                .patch_status(name, &Default::default(), &Patch::Merge(status))
                .await?;
        }
        Ok(())
    }
}

impl Watcher<Bench> for BenchWatcher {
    type Error = kube::Error;
    async fn add(&self, bench: Arc<Bench>, ctx: &WatchContext) -> Result<(), kube::Error> {
        Self::handle(&bench, ctx).await
    }
    async fn update(
        &self,
        _old: Arc<Bench>,
        bench: Arc<Bench>,
        ctx: &WatchContext,
    ) -> Result<(), kube::Error> {
        Self::handle(&bench, ctx).await
    }
}

/// Logs to stderr; `kubeforge-traced` (BENCH_OTLP set): spans exported as `--otlp-traces`
/// exports them, to the harness's Jaeger (the OTEL_* variables); otherwise no exporter, as by
/// default.
fn init_tracing() {
    let otlp = std::env::var_os("BENCH_OTLP").map(|_| {
        let config = kubeforge::cli::or_exit(kubeforge::otlp::OtlpConfig::from_env());
        let layer = kubeforge::cli::or_exit(kubeforge::otlp::layer(&config));
        tracing_subscriber::Layer::with_filter(layer, kubeforge::otlp::filter())
    });
    {
        use tracing_subscriber::prelude::*;
        tracing_subscriber::registry()
            .with(otlp)
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_filter(tracing_subscriber::EnvFilter::from_default_env()),
            )
            .init();
    }
}

#[tokio::main]
async fn main() {
    let args = DriverArgs::parse();
    init_tracing();
    // The client every kubeforge operator gets (`cli::Options::client`): HTTP/2 with pings.
    let config = kubeforge::cli::or_exit(kubeforge_bench::config(&args).await);
    let client = kubeforge::cli::or_exit(kubeforge::client::connect(config.clone()));
    // The wiring #[controller] generated, with the benchmark's run-time settings on top.
    let manager = Manager::new(client)
        .namespace(Some(args.namespace.clone()))
        .informer_defaults(InformerConfig::default().keep_managed_fields(args.keep_managed_fields));
    let manager = match &args.shards {
        Some(group) => {
            let mode = args.shard_mode.parse().unwrap_or_else(|e: String| {
                eprintln!("--shard-mode: {e}");
                std::process::exit(2)
            });
            manager.shards(
                kubeforge::shard::ShardConfig::new(group.clone(), args.namespace.clone())
                    .mode(mode),
            )
        }
        None => manager,
    };
    // One of several replicas under leader election, as `--leader-elect` of `cli::Options`
    // sets it up: the Lease renewed over a connection of its own, a warm or cold standby.
    let manager = match &args.leader_elect {
        Some(lease) => {
            let [lease_duration, renew_deadline, retry_period] =
                kubeforge::cli::or_exit(args.leader_election_timings());
            let election = LeaderElectionConfig::new(lease.clone(), args.namespace.clone())
                .timings(lease_duration, renew_deadline, retry_period)
                .connection(config);
            manager
                .leader_election(election)
                .warm_up_before_leading(args.warm_standby)
        }
        None => manager,
    };
    let workers = args.concurrency;
    // A/B switch for the own-write skip (ControllerConfig::skip_own_writes, on by default).
    let skip_own = std::env::var_os("BENCH_KUBEFORGE_COUNT_OWN_WRITES").is_none();
    let memcached = !args.memcached_servers.is_empty();
    let manager = if memcached {
        let config =
            MemcachedConfig::new(args.memcached_servers.iter().cloned()).shard_key("bench");
        let backend = kubeforge::cli::or_exit(Memcached::new(config));
        manager.store_backend(Arc::new(backend))
    } else {
        manager
    };
    let manager = if let Some(pods) = args.pods {
        match pods {
            PodCache::Full => manager.controller(PodsFull),
            PodCache::View => manager.controller(PodsView),
        }
    } else if args.bench_view && !memcached {
        manager.controller_customized(BenchViewController, move |wired| {
            wired.configure(|config| config.concurrency(workers).skip_own_writes(skip_own))
        })
    } else if args.watcher {
        let api = kube::Api::<Bench>::namespaced(manager.cache().client(), &args.namespace);
        let watcher = WatcherController::new("bench", manager.wiring(), api).workers(workers);
        manager.add_watcher(watcher, BenchWatcher)
    } else if memcached && args.owned_metadata_only {
        manager.controller_customized(BenchControllerMemcachedOwnedMetadata, move |wired| {
            wired.configure(|config| config.concurrency(workers).skip_own_writes(skip_own))
        })
    } else if memcached {
        manager.controller_customized(BenchControllerMemcached, move |wired| {
            wired.configure(|config| config.concurrency(workers).skip_own_writes(skip_own))
        })
    } else if args.owned_metadata_only {
        manager.controller_customized(BenchControllerOwnedMetadata, move |wired| {
            wired.configure(|config| config.concurrency(workers).skip_own_writes(skip_own))
        })
    } else {
        manager.controller_customized(BenchController, move |wired| {
            wired.configure(|config| config.concurrency(workers).skip_own_writes(skip_own))
        })
    };
    let mut manager = manager;
    if args.leader_elect.is_some() {
        let mut leading = manager.leading();
        tokio::spawn(async move {
            if leading.wait_for(|leads| *leads).await.is_ok() {
                println!("leading");
            }
        });
    }
    let cache = manager.cache().clone();
    let start = Instant::now();
    tokio::spawn(async move {
        cache.wait_for_sync().await;
        println!("synced {:.6}", start.elapsed().as_secs_f64());
        kubeforge_bench::report_heap(|| ALLOC.allocated());
    });
    kubeforge::cli::or_exit(manager.run().await);
}
