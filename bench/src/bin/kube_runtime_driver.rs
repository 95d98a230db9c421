//! The kube-runtime driver: the Bench workload with kube's `Controller`, as its docs show.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use kube::{Api, Resource, ResourceExt};
use kubeforge_bench::{Bench, DriverArgs, MANAGER, PodCache, configmap};
use serde::de::DeserializeOwned;

/// Counts live heap bytes (`heap` lines, see `kubeforge_bench::report_heap`).
#[global_allocator]
static ALLOC: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

struct Ctx {
    client: kube::Client,
    /// Per-key failure counts, for the same 5 ms .. 1000 s backoff as the other drivers.
    failures: Mutex<HashMap<String, u32>>,
}

async fn reconcile(bench: Arc<Bench>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let ns = bench.namespace().unwrap_or_default();
    let mut cm = configmap(&bench);
    cm.metadata.owner_references = bench.controller_owner_ref(&()).map(|r| vec![r]);
    Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns)
        .patch(
            &bench.name_any(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&cm),
        )
        .await?;
    let value = bench.spec.value;
    if bench.status.as_ref().and_then(|s| s.observed_value) != Some(value) {
        Api::<Bench>::namespaced(ctx.client.clone(), &ns)
            .patch_status(
                &bench.name_any(),
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "status": { "observedValue": value } })),
            )
            .await?;
    }
    ctx.failures
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&bench.name_any());
    Ok(Action::await_change())
}

fn error_policy(bench: Arc<Bench>, _error: &kube::Error, ctx: Arc<Ctx>) -> Action {
    let mut failures = ctx.failures.lock().unwrap_or_else(|e| e.into_inner());
    let n = failures.entry(bench.name_any()).or_insert(0);
    let delay = Duration::from_millis(5)
        .saturating_mul(2u32.saturating_pow(*n))
        .min(Duration::from_secs(1000));
    *n += 1;
    Action::requeue(delay)
}

/// Prints `synced <seconds since now>` at the stream's first complete list (once) and starts
/// the heap reports.
fn synced_reporter<K, E>() -> impl FnMut(&Result<watcher::Event<K>, E>) {
    let start = Instant::now();
    let mut synced = false;
    move |event| {
        if !synced && matches!(event, Ok(watcher::Event::InitDone)) {
            synced = true;
            println!("synced {:.6}", start.elapsed().as_secs_f64());
            kubeforge_bench::report_heap(|| ALLOC.allocated());
        }
    }
}

#[tokio::main]
async fn main() {
    let args = DriverArgs::parse();
    let client = kubeforge::cli::or_exit(kubeforge_bench::client(&args).await);
    if let Some(pods) = args.pods {
        return cache_pods(client, &args, pods).await;
    }
    let benches: Api<Bench> = Api::namespaced(client.clone(), &args.namespace);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &args.namespace);
    let keep = args.keep_managed_fields;
    let (reader, writer) = reflector::store();
    let on_event = synced_reporter();
    let stream = watcher(benches, watcher::Config::default())
        .default_backoff()
        .modify(move |b: &mut Bench| {
            if !keep {
                b.managed_fields_mut().clear();
            }
        })
        .inspect(on_event)
        .reflect(writer)
        .touched_objects()
        .predicate_filter(predicates::resource_version, Default::default());
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        failures: Mutex::default(),
    });
    let concurrency = u16::try_from(args.concurrency).unwrap_or(u16::MAX);
    if args.owned_metadata_only {
        // kube 5: an Api of PartialObjectMeta makes metadata-only list/watch requests.
        let metadata: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client, &args.namespace);
        run(stream, reader, owned(metadata, keep), concurrency, ctx).await;
    } else {
        run(stream, reader, owned(configmaps, keep), concurrency, ctx).await;
    }
}

/// The owned objects' events (kube-runtime's `owns` keeps no cache of them).
fn owned<C>(api: Api<C>, keep: bool) -> impl Stream<Item = Result<C, watcher::Error>> + Send
where
    C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(move |c: &mut C| {
            if !keep {
                c.meta_mut().managed_fields = None;
            }
        })
        .touched_objects()
}

async fn run<C>(
    benches: impl Stream<Item = Result<Bench, watcher::Error>> + Send + 'static,
    reader: reflector::Store<Bench>,
    owned: impl Stream<Item = Result<C, watcher::Error>> + Send + 'static,
    concurrency: u16,
    ctx: Arc<Ctx>,
) where
    C: Resource<DynamicType = ()> + Send + 'static,
{
    Controller::for_stream(benches, reader)
        .with_config(Config::default().concurrency(concurrency))
        .owns_stream(owned)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// The pods-cached scenario: a controller of the Pods in the namespace whose reconcile does
/// nothing, its reflector's store holding them in full (managedFields dropped unless kept) or
/// cut down to the view's fields by `.modify(..)` before they are stored.
async fn cache_pods(client: kube::Client, args: &DriverArgs, mode: PodCache) {
    let pods: Api<Pod> = Api::namespaced(client, &args.namespace);
    let keep = args.keep_managed_fields;
    let (reader, writer) = reflector::store();
    let on_event = synced_reporter();
    let stream = watcher(pods, watcher::Config::default())
        .default_backoff()
        .modify(move |pod: &mut Pod| match mode {
            PodCache::View => kubeforge_bench::strip_to_view(pod),
            PodCache::Full if !keep => pod.managed_fields_mut().clear(),
            PodCache::Full => {}
        })
        .inspect(on_event)
        .reflect(writer)
        .touched_objects()
        .predicate_filter(predicates::resource_version, Default::default());
    let concurrency = u16::try_from(args.concurrency).unwrap_or(u16::MAX);
    Controller::for_stream(stream, reader)
        .with_config(Config::default().concurrency(concurrency))
        .shutdown_on_signal()
        .run(
            |_pod: Arc<Pod>, _ctx: Arc<()>| async { Ok::<_, kube::Error>(Action::await_change()) },
            |_pod, _error, _ctx| Action::requeue(Duration::from_secs(1)),
            Arc::new(()),
        )
        .for_each(|_| async {})
        .await;
}
