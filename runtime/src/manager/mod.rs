//! The manager: one shared cache, several controllers, one lifecycle.
//!
//! A [`Manager`] owns the [`Wiring`] its controllers share (the cache, the fenced client, the
//! leadership gate, the namespace and informer options, the metrics), starts the informers, runs
//! every controller (and any other [`Runnable`]) and stops everything on SIGTERM or ctrl-c,
//! giving running reconciles a bounded grace period; a second signal exits the process at once
//! (see [`Manager::run`]).
//!
//! Controllers added with [`Manager::controller`] are wired when the manager runs, so the
//! manager's options apply to them whatever order they were set in.
//!
//! # Examples
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::Api;
//! use kubeforge::controller::{Action, Context, Controller, Reconciler};
//! use kubeforge::informer::InformerConfig;
//! use kubeforge::manager::Manager;
//!
//! struct Noop;
//! impl Reconciler<ConfigMap> for Noop {
//!     type Error = kube::Error;
//!     async fn reconcile(&self, _: Arc<ConfigMap>, _: &Context<ConfigMap>) -> Result<Action, kube::Error> {
//!         Ok(Action::Done)
//!     }
//! }
//!
//! # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kubeforge::client::connect(kube::Config::infer().await?)?;
//! let manager = Manager::new(client.clone());
//! let controller = Controller::new("noop", manager.wiring(), Api::<ConfigMap>::all(client), InformerConfig::default());
//! manager.add_controller(controller, Noop).run().await?;
//! # Ok(()) }
//! ```

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::{Client, Resource};
use tokio_util::sync::CancellationToken;

use std::net::SocketAddr;

use crate::BoxError;
use crate::cache::Cache;
use crate::controller::{Controller, ControllerMetrics, ControllerSpec, Kind, Reconciler, Wiring};
use crate::health::{Check, Endpoints, Render, check};
use crate::leader::{LeaderElectionConfig, LeaderElectionError, LeaderElector};
use crate::metrics::Metrics;
use crate::runner::{DynamicMultiRunner, MultiRunner, Runnable, RunnerError, SingletonRunner};
use crate::watcher::{Watcher, WatcherController, WatcherSpec};

mod backends;
mod crd;
/// For the metrics reference (`metrics/reference.rs`).
#[cfg(test)]
pub(crate) use crd::established_metric;
mod leading;
mod migration;
#[cfg(test)]
pub(crate) use migration::reference as migration_reference;
mod sharding;

use leading::Leading;

/// Runs controllers over a shared cache; see the [module docs](self).
pub struct Manager {
    client: Client,
    wiring: Wiring,
    runnables: Vec<Arc<dyn Runnable>>,
    /// Controllers declared with `#[controller]`, wired when the manager runs (behind a mutex
    /// only so the manager is `Sync` whatever the closures capture).
    unwired: Mutex<Vec<Unwired>>,
    shutdown_grace: Duration,
    leader_election: Option<LeaderElectionConfig>,
    warm_up_before_leading: bool,
    leading: Option<tokio::sync::watch::Sender<bool>>,
    metrics: Arc<Metrics>,
    metrics_addr: Option<SocketAddr>,
    health_addr: Option<SocketAddr>,
    liveness: Vec<(String, Check)>,
    readiness: Vec<(String, Check)>,
    listening: Option<tokio::sync::mpsc::UnboundedSender<(&'static str, SocketAddr)>>,
    /// Runs the controllers that follow their CRD (see [`Manager::controller_following_crd`]).
    dynamic: Option<DynamicMultiRunner>,
    #[cfg(feature = "webhooks")]
    webhooks: Option<crate::webhook::WebhookOptions>,
    /// `(group, kind)` of the primary kinds of the controllers and watchers: the kinds whose
    /// webhooks the manager serves by default.
    primary_kinds: Vec<(String, String)>,
    /// Shard mode (see [`Manager::shards`]).
    shards: Option<(crate::shard::ShardConfig, Arc<crate::shard::Membership>)>,
    /// Watchers added (they are not sharded: shard mode refuses them).
    watchers: usize,
    /// How the storage migration runs, `None` when it is off (see
    /// [`Manager::storage_migration`]).
    storage_migration: Option<crate::crd::MigrateOptions>,
}

/// Wires a declared controller to the manager's final wiring.
type Unwired = Box<dyn FnOnce(&Wiring, &Arc<dyn ControllerMetrics>) -> Arc<dyn Runnable> + Send>;

/// Why a [`Manager`] stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// A component failed, or did not stop within the grace period.
    #[error(transparent)]
    Runner(#[from] RunnerError),
    /// Leader election failed or leadership was lost (the controllers were stopped; exit the
    /// process, as controller-runtime does, and let a successor take over).
    #[error(transparent)]
    LeaderElection(#[from] LeaderElectionError),
    /// The metrics or health-probe address could not be bound.
    #[error("cannot listen on {addr} for {what}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// `metrics`, `health probes` or `webhooks`.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("runnables", &self.runnables.len())
            .field("shutdown_grace", &self.shutdown_grace)
            .finish_non_exhaustive()
    }
}

/// Work that runs once (a controller or a watcher with its handlers, a server): a second run
/// fails.
struct RunOnce {
    run: Mutex<Option<RunFn>>,
    /// Its readiness check (`controller-<name>`, `watcher-<name>`).
    check: Option<(String, Check)>,
    /// Its liveness check (`controller-<name>`).
    liveness: Option<(String, Check)>,
    leader_only: bool,
}

type RunFn = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> + Send>;

impl RunOnce {
    fn new(check: Option<(String, Check)>, run: RunFn) -> Arc<Self> {
        Self::with_liveness(check, None, run)
    }

    fn with_liveness(
        check: Option<(String, Check)>,
        liveness: Option<(String, Check)>,
        run: RunFn,
    ) -> Arc<Self> {
        Arc::new(Self {
            run: Mutex::new(Some(run)),
            check,
            liveness,
            leader_only: true,
        })
    }
}

impl Runnable for RunOnce {
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        match self.run.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(run) => run(shutdown),
            None => async { Err("a controller or watcher can only be run once".into()) }.boxed(),
        }
    }

    fn health_checks(&self) -> Vec<(String, Check)> {
        self.check.iter().cloned().collect()
    }

    fn liveness_checks(&self) -> Vec<(String, Check)> {
        self.liveness.iter().cloned().collect()
    }

    fn needs_leader_election(&self) -> bool {
        self.leader_only
    }
}

/// `controller` reconciling with `reconciler`, runnable once.
fn controller_runnable<K: crate::scope::AnyKind, R: Reconciler<K>>(
    controller: Controller<K>,
    reconciler: R,
) -> Arc<dyn Runnable> {
    let name = format!("controller-{}", controller.name());
    let check = (name.clone(), controller.lifecycle().check());
    let liveness = (name, controller.liveness());
    RunOnce::with_liveness(
        Some(check),
        Some(liveness),
        Box::new(move |shutdown| {
            async move {
                controller
                    .run(reconciler, shutdown)
                    .await
                    .map_err(BoxError::from)
            }
            .boxed()
        }),
    )
}

/// `watcher` handling with `handlers`, runnable once.
fn watcher_runnable<K: Kind, W: Watcher<K>>(
    watcher: WatcherController<K>,
    handlers: W,
) -> Arc<dyn Runnable> {
    let check = (
        format!("watcher-{}", watcher.name()),
        watcher.lifecycle().check(),
    );
    RunOnce::new(
        Some(check),
        Box::new(move |shutdown| {
            async move {
                watcher
                    .run(handlers, shutdown)
                    .await
                    .map_err(BoxError::from)
            }
            .boxed()
        }),
    )
}

impl Manager {
    /// A manager whose cache and controllers use `client`.
    pub fn new(client: Client) -> Self {
        let metrics = Arc::new(Metrics::new());
        let mut wiring = Wiring::fenced(client.clone());
        wiring.set_metrics(Arc::clone(&metrics) as Arc<dyn ControllerMetrics>);
        Self {
            wiring,
            client,
            runnables: Vec::new(),
            unwired: Mutex::default(),
            shutdown_grace: Duration::from_secs(30),
            leader_election: None,
            warm_up_before_leading: true,
            leading: None,
            metrics,
            metrics_addr: None,
            health_addr: None,
            liveness: Vec::new(),
            readiness: Vec::new(),
            listening: None,
            dynamic: None,
            #[cfg(feature = "webhooks")]
            webhooks: None,
            primary_kinds: Vec::new(),
            shards: None,
            watchers: 0,
            storage_migration: Some(crate::crd::MigrateOptions::default()),
        }
    }

    /// Records `K` as a kind the manager reconciles or watches (its webhooks are served).
    fn primary<K: Resource<DynamicType = ()>>(&mut self) {
        self.primary_kinds
            .push((K::group(&()).into_owned(), K::kind(&()).into_owned()));
    }

    /// Builds a runnable from the manager's final wiring when the manager runs.
    fn wire_later(
        &mut self,
        wire: impl FnOnce(&Wiring, &Arc<dyn ControllerMetrics>) -> Arc<dyn Runnable> + Send + 'static,
    ) {
        let unwired = self.unwired.get_mut().unwrap_or_else(|e| e.into_inner());
        unwired.push(Box::new(wire));
    }

    /// Restrict the controllers added with [`Manager::controller`] to one namespace (`None`:
    /// all namespaces).
    #[must_use]
    pub fn namespace(mut self, namespace: Option<String>) -> Self {
        self.wiring.namespaces = namespace.into();
        self
    }

    /// Restrict the controllers added with [`Manager::controller`] to a set of namespaces
    /// (controller-runtime's `DefaultNamespaces`): each of their sources watches each namespace
    /// with an informer of its own, so the manager needs permission in those namespaces only;
    /// the webhooks it serves cover those namespaces, and the storage migration migrates them.
    ///
    /// ```no_run
    /// # fn doc(client: kubeforge::kube::Client) {
    /// use kubeforge::{Namespaces, manager::Manager};
    /// let manager = Manager::new(client).namespaces(Namespaces::set(["shop", "billing"]));
    /// # }
    /// ```
    #[must_use]
    pub fn namespaces(mut self, namespaces: crate::Namespaces) -> Self {
        if !namespaces.is_all() && namespaces.iter().next().is_none() {
            tracing::warn!("the manager's namespace set is empty: its controllers watch nothing");
        }
        self.wiring.namespaces = namespaces;
        self
    }

    /// Informer options for every kind the controllers added with [`Manager::controller`] watch
    /// (keep `managedFields`, a resync period, a page size, ...).
    #[must_use]
    pub fn informer_defaults(mut self, config: crate::informer::InformerConfig) -> Self {
        self.wiring.informer_defaults = config;
        self
    }

    /// Adds a controller declared with `#[kubeforge::controller(...)]`; it is wired when the
    /// manager runs, to the manager's [`Wiring`].
    #[must_use]
    pub fn controller<C: ControllerSpec>(self, controller: C) -> Self {
        self.controller_customized(controller, |wired| wired)
    }

    /// Like [`Manager::controller`], with a last say over the wired controller: options known
    /// only at run time, extra watches or predicates.
    ///
    /// ```no_run
    /// # use kubeforge::manager::Manager;
    /// # fn doc<C: kubeforge::controller::ControllerSpec>(manager: Manager, controller: C, workers: usize) -> Manager {
    /// manager.controller_customized(controller, move |wired| {
    ///     wired.configure(|config| config.concurrency(workers))
    /// })
    /// # }
    /// ```
    #[must_use]
    pub fn controller_customized<C: ControllerSpec>(
        mut self,
        controller: C,
        customize: impl FnOnce(Controller<C::Kind>) -> Controller<C::Kind> + Send + 'static,
    ) -> Self {
        self.primary::<C::Kind>();
        self.wire_later(move |wiring, metrics| {
            let wired = customize(C::controller(wiring)).default_metrics(metrics);
            controller_runnable(wired, controller)
        });
        self
    }

    /// Like [`Manager::controller`], for a kind whose CRD may come and go while the operator runs:
    /// the controller starts when the CRD `<plural>.<group>` is Established, stops when the CRD
    /// is deleted, and starts again when it comes back (its reconciler is shared between the
    /// runs). Until then `/readyz` reports `crd-<name>` as failing. The operator needs `get`,
    /// `list` and `watch` on `customresourcedefinitions` (`apiextensions.k8s.io`).
    #[must_use]
    pub fn controller_following_crd<C: ControllerSpec>(mut self, controller: C) -> Self {
        self.primary::<C::Kind>();
        let crd = format!(
            "{}.{}",
            <C::Kind as Resource>::plural(&()),
            <C::Kind as Resource>::group(&())
        );
        let dynamic = self
            .dynamic
            .get_or_insert_with(|| DynamicMultiRunner::new().named("crd-followed"))
            .clone();
        let reconciler = Arc::new(controller);
        self.wire_later(move |wiring, metrics| {
            let metrics = Arc::clone(metrics);
            let start: crd::Start = Arc::new(move |wiring: &Wiring| -> Arc<dyn Runnable> {
                let wired = C::controller(wiring).default_metrics(&metrics);
                controller_runnable(wired, Arc::clone(&reconciler))
            });
            Arc::new(crd::Following(Arc::new(crd::CrdFollower {
                crd,
                controller: C::NAME.to_owned(),
                start,
                wiring: wiring.clone(),
                dynamic,
                established: std::sync::atomic::AtomicBool::new(false),
            })))
        });
        self
    }

    /// An event recorder for `controller` whose writes go through the manager's fenced client:
    /// under leader election, a replica whose leadership is not valid publishes nothing (the
    /// write fails with [`NotLeader`](crate::leader::NotLeader)). Build the recorders of an
    /// operator binary here, not from the plain client.
    pub fn recorder(&self, controller: impl Into<String>) -> crate::events::Recorder {
        crate::events::Recorder::new(self.wiring.client(), controller)
    }

    /// Keeps the kinds that ask for a store backend of this name (`#[controller(store =
    /// memcached)]`, [`InformerConfig::store_named`](crate::informer::InformerConfig::store_named))
    /// in `backend`. The manager serves the backend's readiness check `store-<name>` and its
    /// metrics. Add it before the controllers built by hand that use it ([`Manager::controller`]
    /// wires its controllers when it runs, after every backend is known).
    #[must_use]
    pub fn store_backend(mut self, backend: crate::store::SharedBackend) -> Self {
        self.wiring.cache().add_backend(Arc::clone(&backend));
        self.runnables
            .push(Arc::new(backends::BackendPart(backend)));
        self
    }

    /// Reports `(what, address)` for each server once it listens (useful with port 0).
    pub fn on_listening(
        &mut self,
    ) -> tokio::sync::mpsc::UnboundedReceiver<(&'static str, SocketAddr)> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.listening = Some(tx);
        rx
    }

    /// The manager's metrics (every controller added reports to them unless it was given its
    /// own hooks). Register your own metrics on [`Metrics::registry`].
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Serve `/metrics` on `addr` (port 0 picks a free port; see [`Manager::on_listening`]).
    #[must_use]
    pub fn metrics_bind_address(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// Serve `/healthz` and `/readyz` on `addr` (may equal the metrics address).
    #[must_use]
    pub fn health_probe_bind_address(mut self, addr: SocketAddr) -> Self {
        self.health_addr = Some(addr);
        self
    }

    /// Adds a liveness check (served under `/healthz`).
    #[must_use]
    pub fn liveness_check(mut self, name: impl Into<String>, check: Check) -> Self {
        self.liveness.push((name.into(), check));
        self
    }

    /// Adds a readiness check (served under `/readyz`).
    #[must_use]
    pub fn readiness_check(mut self, name: impl Into<String>, check: Check) -> Self {
        self.readiness.push((name.into(), check));
        self
    }

    /// Serve the webhooks of the registered kinds (see [`crate::webhook`]) on every replica
    /// (feature `webhooks`, on by default).
    #[cfg(feature = "webhooks")]
    #[must_use]
    pub fn webhooks(mut self, options: crate::webhook::WebhookOptions) -> Self {
        self.webhooks = Some(options);
        self
    }

    /// Run the controllers only while this replica holds the Lease (see [`crate::leader`]).
    #[must_use]
    pub fn leader_election(mut self, config: LeaderElectionConfig) -> Self {
        self.leader_election = Some(config);
        self
    }

    /// How the kinds of the controllers and watchers with several versions are migrated to their
    /// storage version (on the leader, when the CRD's `status.storedVersions` lists another one;
    /// see [`crd::migrate`](crate::crd::migrate)); `None` turns it off (run
    /// [`crd::migrate_storage`](crate::crd::migrate_storage) yourself then). On by default, 50
    /// objects per second; a manager limited to a namespace migrates that namespace only and
    /// leaves `storedVersions` as it is.
    #[must_use]
    pub fn storage_migration(mut self, options: Option<crate::crd::MigrateOptions>) -> Self {
        self.storage_migration = options;
        self
    }

    /// With leader election, start the informers before leadership is won (default `true`): a
    /// standby replica lists and watches like the leader, its workers idle, so on a failover
    /// the new leader reconciles from a synced cache at once, with no list of its own. The cost
    /// is a full cache and one watch per informer on every standby (its
    /// `kubeforge_informer_*` metrics and RSS show them); `false` keeps a standby idle until it
    /// leads, which then pays the full list and sync before its first reconcile. The
    /// `--warm-standby=false` flag turns it off.
    #[must_use]
    pub fn warm_up_before_leading(mut self, warm: bool) -> Self {
        self.warm_up_before_leading = warm;
        self
    }

    /// Follows whether this replica leads (always `true` without leader election once running).
    pub fn leading(&mut self) -> tokio::sync::watch::Receiver<bool> {
        self.leading
            .get_or_insert_with(|| tokio::sync::watch::channel(false).0)
            .subscribe()
    }

    /// What the manager wires its controllers to: build controllers by hand with it
    /// ([`Controller::new`]) so they share the manager's informers, client and gate. Its client
    /// is fenced: once the manager runs with leader election, its writes fail with
    /// [`NotLeader`](crate::leader::NotLeader) while this replica's lease is not valid.
    pub fn wiring(&self) -> &Wiring {
        &self.wiring
    }

    /// The shared cache (the wiring's).
    pub fn cache(&self) -> &Cache {
        self.wiring.cache()
    }

    /// A client for anything the operator writes besides its reconciles: the wiring's, whose
    /// writes are fenced under leader election (reads always pass); the manager keeps the plain
    /// client for leader election itself.
    pub fn client(&self) -> Client {
        self.wiring.client()
    }

    /// How long shutdown waits for everything to stop (default 30 s).
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Adds a controller built by hand and its reconciler (see [`Manager::controller`] for
    /// controllers declared with `#[kubeforge::controller]`).
    #[must_use]
    pub fn add_controller<K, R>(mut self, controller: Controller<K>, reconciler: R) -> Self
    where
        K: crate::scope::AnyKind,
        R: Reconciler<K>,
    {
        let ty = controller.kind_type();
        self.primary_kinds
            .push((ty.group().into_owned(), ty.kind().into_owned()));
        let metrics = Arc::clone(&self.metrics) as Arc<dyn ControllerMetrics>;
        let controller = controller.default_metrics(&metrics);
        self.runnables
            .push(controller_runnable(controller, reconciler));
        self
    }

    /// Adds a watcher declared with `#[kubeforge::controller(for = Kind, watcher, ...)]`; it
    /// is wired when the manager runs, to the manager's [`Wiring`].
    #[must_use]
    pub fn watcher<W: WatcherSpec>(mut self, watcher: W) -> Self {
        self.primary::<W::Kind>();
        self.watchers += 1;
        self.wire_later(move |wiring, _metrics| watcher_runnable(W::watcher(wiring), watcher));
        self
    }

    /// Adds a watcher built by hand (event handlers through the concurrent dispatcher, see
    /// [`crate::watcher`]); it reports to the manager's metrics.
    #[must_use]
    pub fn add_watcher<K, W>(mut self, watcher: WatcherController<K>, handlers: W) -> Self
    where
        K: Kind,
        W: Watcher<K>,
    {
        self.primary::<K>();
        self.watchers += 1;
        self.runnables.push(watcher_runnable(watcher, handlers));
        self
    }

    /// Adds any other long-running component (a metrics server, for example).
    #[must_use]
    pub fn runnable(mut self, runnable: Arc<dyn Runnable>) -> Self {
        self.runnables.push(runnable);
        self
    }

    /// Runs until SIGTERM or ctrl-c, then stops everything within the grace period.
    ///
    /// A second SIGTERM or ctrl-c while stopping ends the process at once with status 1
    /// (`std::process::exit`, as controller-runtime does): reconciles still running are cut off,
    /// no destructors run and the leader-election Lease is not released (a successor waits for
    /// it to expire). Embed a manager with [`Manager::run_until`], which never exits the process.
    ///
    /// # Errors
    ///
    /// A component failed (and stopped the others), did not stop within the grace period, or
    /// leadership was lost.
    pub async fn run(self) -> Result<(), ManagerError> {
        let shutdown = CancellationToken::new();
        let trigger = shutdown.clone();
        let _signals = AbortOnDrop(tokio::spawn(async move {
            let mut signals = ShutdownSignals::new();
            signals.recv().await;
            tracing::info!("shutdown signal received; stopping");
            trigger.cancel();
            if signals.recv().await {
                tracing::error!("second shutdown signal; exiting immediately");
                std::process::exit(1);
            }
        }));
        self.run_until(shutdown).await
    }

    /// Runs until `shutdown` is cancelled, then stops everything within the grace period.
    ///
    /// # Errors
    ///
    /// As [`Manager::run`].
    pub async fn run_until(mut self, shutdown: CancellationToken) -> Result<(), ManagerError> {
        let token = shutdown.child_token();
        let elector = match (self.leader_election.take(), self.shards.take()) {
            (Some(_), Some(_)) => {
                return Err(LeaderElectionError::InvalidConfig(
                    "leader election and sharding exclude each other: every shard replica works"
                        .to_owned(),
                )
                .into());
            }
            (Some(config), None) => {
                let elector = Arc::new(LeaderElector::new(self.client.clone(), config)?);
                let gate = Arc::clone(&elector);
                self.wiring.gate().install(move || gate.lease_valid());
                Some(elector)
            }
            (None, Some((config, membership))) => {
                Some(self.start_sharding(&config, membership).await?)
            }
            (None, None) => None,
        };
        self.start_webhooks().await?;
        let tree = self.runner_tree(elector);
        let servers = self.start_servers(&tree).await?;
        let result = servers
            .into_iter()
            .fold(tree, MultiRunner::runnable)
            .run(token.clone())
            .await;
        token.cancel();
        // The spans of the last reconciles, when they are exported (a no-op otherwise).
        crate::otlp::flush(Duration::from_secs(5)).await;
        result.map_err(|error| match error {
            RunnerError::Failed(error) => match error.downcast::<LeaderElectionError>() {
                Ok(lost) => ManagerError::LeaderElection(*lost),
                Err(error) => ManagerError::Runner(RunnerError::Failed(error)),
            },
            error => ManagerError::Runner(error),
        })
    }

    /// The manager's runner tree (servers are added by `run_until`): the runnables that run on
    /// every replica, and the leader-elected ones under a singleton the elector starts.
    fn runner_tree(&mut self, elector: Option<Arc<LeaderElector>>) -> MultiRunner {
        let metrics = Arc::clone(&self.metrics) as Arc<dyn ControllerMetrics>;
        let unwired = std::mem::take(self.unwired.get_mut().unwrap_or_else(|e| e.into_inner()));
        let wired = unwired.into_iter().map(|wire| wire(&self.wiring, &metrics));
        let dynamic = self
            .dynamic
            .take()
            .map(|d| Arc::new(d.exit_wait(self.shutdown_grace)) as Arc<dyn Runnable>);
        let migration = self.storage_migration_runnable();
        let (elected, everywhere): (Vec<_>, Vec<_>) = std::mem::take(&mut self.runnables)
            .into_iter()
            .chain(wired)
            .chain(dynamic)
            .chain(migration)
            .partition(|r| r.needs_leader_election());
        let elected = elected
            .into_iter()
            .fold(
                MultiRunner::new().named("controllers"),
                MultiRunner::runnable,
            )
            .exit_wait(self.shutdown_grace);
        let leading = self.leading.clone();
        let leader_metrics = Arc::clone(&self.metrics);
        let lease = elector.as_ref().map(|e| e.lease_name().to_owned());
        let leading = Leading {
            elected: SingletonRunner::named(Arc::new(elected), true, "leader-elected"),
            elector,
            cache: self.wiring.cache().clone(),
            warm_up: self.warm_up_before_leading,
            set_leading: Arc::new(move |on| {
                if let Some(tx) = &leading {
                    tx.send_replace(on);
                }
                if let Some(lease) = &lease {
                    leader_metrics.set_leader(lease, on);
                }
            }),
        };
        everywhere
            .into_iter()
            .chain([Arc::new(leading) as Arc<dyn Runnable>])
            .fold(MultiRunner::new().named("manager"), MultiRunner::runnable)
            .exit_wait(self.shutdown_grace)
    }
}

impl Manager {
    /// The storage migration of the CRDs of this manager's kinds that have several versions in
    /// this binary, unless it is off or there are none.
    fn storage_migration_runnable(&self) -> Option<Arc<dyn Runnable>> {
        let mut options = self.storage_migration.clone()?;
        options.namespaces.clone_from(&self.wiring.namespaces);
        let crds = match crate::crd::crds() {
            Ok(crds) => crds,
            Err(error) => {
                tracing::warn!(%error, "no storage migration: the registered CRDs do not merge");
                return None;
            }
        };
        let names: Vec<String> = crds
            .into_iter()
            .filter(|c| c.spec.versions.len() > 1)
            .filter(|c| {
                self.primary_kinds
                    .iter()
                    .any(|(group, kind)| *group == c.spec.group && *kind == c.spec.names.kind)
            })
            .filter_map(|c| c.metadata.name)
            .collect();
        (!names.is_empty()).then(|| {
            Arc::new(migration::StorageMigration::new(
                self.client.clone(),
                names,
                options,
            )) as Arc<dyn Runnable>
        })
    }

    /// The kinds of this manager's controllers and watchers that have webhooks.
    fn primary_kinds_with_webhooks(&self) -> Vec<&'static str> {
        crate::webhook::registered()
            .into_iter()
            .filter(|k| crate::webhook::listed(&self.primary_kinds, k.group, k.kind))
            .map(|k| k.kind)
            .collect()
    }

    /// Without the `webhooks` feature nothing can serve them: says so when kinds have webhooks.
    #[cfg(not(feature = "webhooks"))]
    #[allow(clippy::unused_async)]
    async fn start_webhooks(&mut self) -> Result<(), ManagerError> {
        let kinds = self.primary_kinds_with_webhooks();
        if !kinds.is_empty() {
            tracing::warn!(
                ?kinds,
                "kinds have webhooks but this build cannot serve them (kubeforge's `webhooks` \
                 feature is off)"
            );
        }
        Ok(())
    }

    /// Binds the webhook server (when configured and some kind has webhooks) and adds it to the
    /// runnables of every replica.
    #[cfg(feature = "webhooks")]
    async fn start_webhooks(&mut self) -> Result<(), ManagerError> {
        let Some(options) = self.webhooks.take() else {
            let kinds = self.primary_kinds_with_webhooks();
            if !kinds.is_empty() {
                tracing::warn!(
                    ?kinds,
                    "kinds have webhooks but the manager serves none (set Manager::webhooks)"
                );
            }
            return Ok(());
        };
        let started = crate::webhook::start(
            &options,
            &self.primary_kinds,
            &self.client,
            self.metrics.registry(),
            &self.wiring.namespaces,
        )
        .await
        .map_err(|source| ManagerError::Bind {
            addr: options.bind,
            what: "webhooks",
            source,
        })?;
        if let Some(started) = started {
            if let Some(listening) = &self.listening {
                let _ = listening.send(("webhook", started.local));
            }
            self.runnables.push(started.runnable);
        }
        Ok(())
    }

    /// Binds the metrics and health servers, which serve `tree`'s metrics and readiness checks
    /// besides the manager's; returns them as runnables of the manager.
    async fn start_servers(
        &self,
        tree: &MultiRunner,
    ) -> Result<Vec<Arc<dyn Runnable>>, ManagerError> {
        let mut plans: Vec<(SocketAddr, Endpoints, &'static str)> = Vec::new();
        if let Some(addr) = self.metrics_addr {
            let (metrics, cache, tree) = (
                Arc::clone(&self.metrics),
                self.cache().clone(),
                tree.clone(),
            );
            let render: Render =
                Arc::new(move || metrics.render_with(Some(&cache), tree.metrics()));
            plans.push((
                addr,
                Endpoints {
                    metrics: Some(render),
                    ..Endpoints::default()
                },
                "metrics",
            ));
        }
        if let Some(addr) = self.health_addr {
            let health = self.health_endpoints(tree);
            match plans
                .iter_mut()
                .find(|(a, _, _)| *a == addr && addr.port() != 0)
            {
                Some((_, shared, what)) => {
                    shared.liveness = health.liveness;
                    shared.readiness = health.readiness;
                    shared.more_readiness = health.more_readiness;
                    shared.more_liveness = health.more_liveness;
                    shared.health = true;
                    *what = "metrics and health probes";
                }
                None => plans.push((addr, health, "health probes")),
            }
        }
        let mut servers = Vec::new();
        for (addr, endpoints, what) in plans {
            let (local, serve) = crate::health::bind(addr, endpoints)
                .await
                .map_err(|source| ManagerError::Bind { addr, what, source })?;
            tracing::info!(%local, what, "serving");
            if let Some(listening) = &self.listening {
                let _ = listening.send((what, local));
            }
            servers.push(Arc::new(RunOnce {
                run: Mutex::new(Some(Box::new(move |shutdown: CancellationToken| {
                    async move {
                        tokio::select! {
                            () = serve => {}
                            () = shutdown.cancelled() => {}
                        }
                        Ok(())
                    }
                    .boxed()
                }))),
                check: None,
                liveness: None,
                leader_only: false,
            }) as Arc<dyn Runnable>);
        }
        Ok(servers)
    }

    /// `/healthz` (`ping` and the user's checks) and `/readyz` (`informer-sync`, the user's
    /// checks, then those of the running parts of `tree`).
    fn health_endpoints(&self, tree: &MultiRunner) -> Endpoints {
        let cache = self.cache().clone();
        let mut readiness = vec![(
            "informer-sync".to_owned(),
            check(move || {
                let cache = cache.clone();
                async move {
                    let pending: Vec<String> = cache
                        .sync_status()
                        .into_iter()
                        .filter(|s| !s.synced && !s.ignore_sync_for_health)
                        .map(|s| s.name)
                        .collect();
                    if pending.is_empty() || !cache.is_started() {
                        Ok(())
                    } else {
                        Err(format!("not synced yet: {}", pending.join(", ")))
                    }
                }
            }),
        )];
        readiness.extend(self.readiness.iter().cloned());
        let mut liveness = vec![("ping".to_owned(), check(|| async { Ok(()) }))];
        liveness.extend(self.liveness.iter().cloned());
        let (ready_tree, live_tree) = (tree.clone(), tree.clone());
        Endpoints {
            liveness,
            readiness,
            more_readiness: Some(Arc::new(move || ready_tree.health_checks())),
            more_liveness: Some(Arc::new(move || live_tree.liveness_checks())),
            health: true,
            ..Endpoints::default()
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Completes on ctrl-c, or on SIGTERM on Unix.
pub async fn shutdown_signal() {
    ShutdownSignals::new().recv().await;
}

/// The SIGTERM and ctrl-c listeners, registered once so that a signal arriving between two
/// [`ShutdownSignals::recv`] calls is not missed.
struct ShutdownSignals {
    /// SIGTERM and SIGINT (ctrl-c); `None` if they could not be registered.
    #[cfg(unix)]
    unix: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl ShutdownSignals {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let unix = signal(SignalKind::terminate())
                .and_then(|term| Ok((term, signal(SignalKind::interrupt())?)))
                .ok();
            Self { unix }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// Waits for the next signal; `false` if none can be received (no listener could be
    /// registered, or the runtime is shutting down).
    async fn recv(&mut self) -> bool {
        #[cfg(unix)]
        if let Some((term, interrupt)) = &mut self.unix {
            return tokio::select! {
                received = term.recv() => received.is_some(),
                received = interrupt.recv() => received.is_some(),
            };
        }
        tokio::signal::ctrl_c().await.is_ok()
    }
}
