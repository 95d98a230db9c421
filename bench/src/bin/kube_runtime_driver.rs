//! The kube-runtime driver: the Bench workload with kube's `Controller`, as its docs show.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use kube::{Api, Resource, ResourceExt};
use kubeforge_bench::{Bench, DriverArgs, MANAGER, configmap};

/// An owned ConfigMap event, from the full or the metadata-only watch: only its owner
/// references matter.
#[derive(Clone, Debug)]
enum Owned {
    Full(ConfigMap),
    Metadata(PartialObjectMeta<ConfigMap>),
}

impl Resource for Owned {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;
    fn kind(&(): &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::kind(&())
    }
    fn group(&(): &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::group(&())
    }
    fn version(&(): &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::version(&())
    }
    fn plural(&(): &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::plural(&())
    }
    fn meta(&self) -> &kube::api::ObjectMeta {
        match self {
            Owned::Full(cm) => cm.meta(),
            Owned::Metadata(cm) => cm.meta(),
        }
    }
    fn meta_mut(&mut self) -> &mut kube::api::ObjectMeta {
        match self {
            Owned::Full(cm) => cm.meta_mut(),
            Owned::Metadata(cm) => cm.meta_mut(),
        }
    }
}

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

#[tokio::main]
async fn main() {
    let args = DriverArgs::parse();
    let client = kubeforge::cli::or_exit(kubeforge_bench::client(&args).await);
    let benches: Api<Bench> = Api::namespaced(client.clone(), &args.namespace);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &args.namespace);
    let keep = args.keep_managed_fields;
    let (reader, writer) = reflector::store();
    let start = Instant::now();
    let synced = std::sync::atomic::AtomicBool::new(false);
    let stream = watcher(benches, watcher::Config::default())
        .default_backoff()
        .modify(move |b: &mut Bench| {
            if !keep {
                b.managed_fields_mut().clear();
            }
        })
        .inspect(move |event| {
            // The first complete list: the cache is synced (printed once).
            if matches!(event, Ok(watcher::Event::InitDone))
                && !synced.swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                println!("synced {:.6}", start.elapsed().as_secs_f64());
            }
        })
        .reflect(writer)
        .touched_objects()
        .predicate_filter(predicates::resource_version, Default::default());
    let owned = if args.owned_metadata_only {
        // kube 5: an Api of PartialObjectMeta makes metadata-only list/watch requests.
        let metadata: Api<PartialObjectMeta<ConfigMap>> =
            Api::namespaced(client.clone(), &args.namespace);
        watcher(metadata, watcher::Config::default())
            .default_backoff()
            .modify(move |cm: &mut PartialObjectMeta<ConfigMap>| {
                if !keep {
                    cm.managed_fields_mut().clear();
                }
            })
            .touched_objects()
            .map_ok(Owned::Metadata)
            .boxed()
    } else {
        watcher(configmaps, watcher::Config::default())
            .default_backoff()
            .modify(move |cm: &mut ConfigMap| {
                if !keep {
                    cm.managed_fields_mut().clear();
                }
            })
            .touched_objects()
            .map_ok(Owned::Full)
            .boxed()
    };
    let ctx = Arc::new(Ctx {
        client,
        failures: Mutex::default(),
    });
    Controller::for_stream(stream, reader)
        .with_config(
            Config::default().concurrency(u16::try_from(args.concurrency).unwrap_or(u16::MAX)),
        )
        .owns_stream(owned)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}
