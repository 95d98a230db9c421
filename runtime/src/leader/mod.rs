//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's algorithm and timings.
//!
//! Several replicas of an operator run [`LeaderElector::run`]; one holds the Lease and does the
//! work, the others wait. The leader renews the Lease every `retry_period`; if it cannot renew
//! for `renew_deadline` it gives up leadership and its work is cancelled. A candidate takes over
//! a Lease only after it has seen no renewal for `lease_duration`, measured on its own clock from
//! when it *observed* the last change (never comparing timestamps across machines). Because
//! `renew_deadline < lease_duration`, a leader that lost contact stops before anyone else can
//! start. On a clean shutdown the leader releases the Lease so a successor starts at once.
//!
//! Defaults are controller-runtime's: 15 s lease, 10 s renew deadline, 2 s retry period.
//!
//! # Examples
//!
//! ```no_run
//! use kubeforge::leader::{LeaderElectionConfig, LeaderElector};
//!
//! # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let elector = LeaderElector::new(client, LeaderElectionConfig::new("my-operator", "operators"))?;
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! elector
//!     .run(shutdown, |leading| async move {
//!         // Do the work until `leading` is cancelled.
//!         leading.cancelled().await;
//!     })
//!     .await?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod fence;
pub use fence::{Gate, NotLeader, fenced};

/// Options of a [`LeaderElector`].
#[derive(Clone, Debug)]
pub struct LeaderElectionConfig {
    /// Name of the Lease.
    pub lease_name: String,
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// This replica's identity (default: `$POD_NAME`, or `$HOSTNAME` plus a random suffix).
    pub identity: String,
    /// How long a Lease is valid after its last renewal, as seen by the other candidates.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leadership.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire, and the leader to renew.
    pub retry_period: Duration,
    /// Release the Lease on clean shutdown, so a successor takes over at once.
    pub release_on_cancel: bool,
    /// Where the elector opens a connection of its own (see [`LeaderElectionConfig::connection`]);
    /// `None`: it shares the client it is given.
    pub connection: Option<kube::Config>,
    /// Labels the Lease carries (set when it is created or renewed): shard membership Leases
    /// are found by them.
    pub labels: std::collections::BTreeMap<String, String>,
}

impl LeaderElectionConfig {
    /// controller-runtime's defaults for Lease `namespace/name`. The identity is `$POD_NAME`
    /// (unique within a cluster) if set, else the host name with a random suffix.
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> Self {
        let identity = std::env::var("POD_NAME").unwrap_or_else(|_| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "kubeforge".to_owned());
            let suffix = kubeforge_shared::random::Rng::from_clock().next_u64();
            format!("{host}_{suffix:x}")
        });
        Self {
            lease_name: name.into(),
            lease_namespace: namespace.into(),
            identity,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
            connection: None,
            labels: std::collections::BTreeMap::new(),
        }
    }

    /// Renew over a connection of the elector's own, opened from `config`, instead of the
    /// client it is given: renewals then neither queue behind the controllers' requests (nor
    /// their client-side rate limit) nor wait on a connection the controllers' traffic shares,
    /// and after an attempt that timed out or failed in transport the elector opens a fresh
    /// connection, so one silently dead TCP connection does not cost the leadership. The
    /// [`Options::manager`](crate::cli::Options::manager) of the command line sets it.
    #[must_use]
    pub fn connection(mut self, config: kube::Config) -> Self {
        self.connection = Some(config);
        self
    }

    /// Sets this replica's identity.
    #[must_use]
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// Sets the three timings (lease duration, renew deadline, retry period).
    #[must_use]
    pub fn timings(
        mut self,
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Self {
        self.lease_duration = lease_duration;
        self.renew_deadline = renew_deadline;
        self.retry_period = retry_period;
        self
    }

    /// How long one attempt to acquire, renew or release may take: half the renew deadline, so
    /// a request stuck on a dead connection leaves time for another on a fresh one.
    fn attempt_timeout(&self) -> Duration {
        self.renew_deadline / 2
    }

    pub(crate) fn validate(&self) -> Result<(), LeaderElectionError> {
        let invalid = |message: &str| Err(LeaderElectionError::InvalidConfig(message.to_owned()));
        if self.lease_name.is_empty() || self.lease_namespace.is_empty() || self.identity.is_empty()
        {
            return invalid("lease name, namespace and identity must not be empty");
        }
        if self.lease_duration <= self.renew_deadline {
            return invalid("the lease duration must be longer than the renew deadline");
        }
        // client-go requires room for at least one jittered retry within the renew deadline.
        if self.renew_deadline.as_secs_f64() <= 1.2 * self.retry_period.as_secs_f64() {
            return invalid("the renew deadline must be longer than 1.2 × the retry period");
        }
        if self.retry_period.is_zero() {
            return invalid("the retry period must not be zero");
        }
        Ok(())
    }
}

/// Why leader election failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaderElectionError {
    /// The timings or names are unusable.
    #[error("invalid leader election configuration: {0}")]
    InvalidConfig(String),
    /// The leader could not renew within the renew deadline; its work was cancelled.
    #[error("leadership of lease {0} lost: could not renew within the renew deadline")]
    Lost(String),
    /// A shard group's mode could not be decided (see [`crate::shard::ShardMode`]).
    #[error("shard mode: {0}")]
    ShardMode(String),
    /// The apiserver refused the campaign's first requests for the Lease (401 or 403): the
    /// operator's identity may not read or write Leases there. Retrying cannot help, so the
    /// campaign stops with the request, the apiserver's message and what to grant.
    #[error(
        "the apiserver refused the leader election Lease {namespace}/{lease}: {message}; grant \
         get, list, watch, create, update and delete on leases (coordination.k8s.io) in \
         namespace {namespace} (crdgen's RBAC outputs do)"
    )]
    Refused {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        lease: String,
        /// The request and the apiserver's answer.
        message: String,
    },
}

/// What a candidate last saw of the Lease, and when (on its own clock).
#[derive(Clone, Debug)]
struct Observed {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    at: Instant,
}

/// Runs leader election for one Lease; see the [module docs](self).
pub struct LeaderElector {
    /// The client renewals go through; replaced by a fresh connection after a failed attempt
    /// when `config.connection` is set.
    client: Mutex<Client>,
    config: LeaderElectionConfig,
    observed: Mutex<Option<Observed>>,
    leading: watch::Sender<bool>,
    /// When the last successful acquire or renew *started* (on our clock): the Lease we wrote
    /// cannot look newer to anyone than that, so our validity is counted from it. Counting from
    /// the response instead would stretch it by however long this process stalled in between.
    renewed_at: Mutex<Option<Instant>>,
    /// Annotations written on the Lease at each acquire or renew (a shard member's
    /// acknowledgements), and the wake-up of a renewal that carries a change at once.
    annotations: Mutex<std::collections::BTreeMap<String, String>>,
    renew_soon: tokio::sync::Notify,
    /// The Lease as our last successful acquire or renew wrote it (the apiserver's answer,
    /// with its `resourceVersion`): while we lead, the next renewal writes over it at once,
    /// one request instead of a read and a write (client-go's optimistic renewal).
    written: Mutex<Option<Lease>>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .field("leading", &*self.leading.borrow())
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// An elector for `config`'s Lease.
    ///
    /// # Errors
    ///
    /// [`LeaderElectionError::InvalidConfig`] when the timings cannot work (the lease duration
    /// must exceed the renew deadline, which must exceed 1.2 × the retry period), or the
    /// elector's own connection cannot be configured.
    /// With [`LeaderElectionConfig::connection`] set, `client` is not used: the elector opens a
    /// connection of its own at once (an unusable configuration fails here).
    pub fn new(client: Client, config: LeaderElectionConfig) -> Result<Self, LeaderElectionError> {
        config.validate()?;
        let client = match &config.connection {
            Some(connection) => Self::connect(connection, &config)?,
            None => client,
        };
        Ok(Self {
            client: Mutex::new(client),
            config,
            observed: Mutex::new(None),
            leading: watch::channel(false).0,
            renewed_at: Mutex::new(None),
            annotations: Mutex::default(),
            renew_soon: tokio::sync::Notify::new(),
            written: Mutex::new(None),
        })
    }

    /// The name of the Lease it campaigns for.
    pub fn lease_name(&self) -> &str {
        &self.config.lease_name
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// A client of the elector's own for `connection`: no request of it may take longer than
    /// one attempt may.
    fn connect(
        connection: &kube::Config,
        config: &LeaderElectionConfig,
    ) -> Result<Client, LeaderElectionError> {
        let options = crate::client::ConnectionConfig::default()
            .request_timeout(Some(config.attempt_timeout()))
            .ping(config.retry_period, config.retry_period);
        crate::client::connect_with(connection.clone(), &options).map_err(|error| {
            LeaderElectionError::InvalidConfig(format!("the elector's connection: {error}"))
        })
    }

    fn api(&self) -> Api<Lease> {
        let client = self
            .client
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Api::namespaced(client, &self.config.lease_namespace)
    }

    /// After an attempt that timed out or failed in transport: a fresh connection for the
    /// next one (the old one may be silently dead), if the elector has a connection of its own.
    fn reconnect(&self) {
        let Some(connection) = &self.config.connection else {
            return;
        };
        match Self::connect(connection, &self.config) {
            Ok(client) => *self.client.lock().unwrap_or_else(|e| e.into_inner()) = client,
            Err(error) => tracing::warn!(%error, "reconnecting the leader elector failed"),
        }
    }

    /// Whether this replica currently leads.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Whether this replica leads *and* its last successful renewal started less than a renew
    /// deadline ago, by its own clock. Controllers check this before every reconcile, and their
    /// client before every write ([`NotLeader`]): a leader that was frozen (paused VM, SIGSTOP,
    /// long GC) past its deadline does not act on its stale belief in the time it takes its
    /// renew loop to notice.
    pub fn lease_valid(&self) -> bool {
        self.is_leader() && self.since_renewal() < self.config.renew_deadline
    }

    fn renewed(&self, started: Instant) {
        *self.renewed_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(started);
    }

    /// Time since the last successful renewal started (`Duration::MAX` if there was none).
    fn since_renewal(&self) -> Duration {
        self.renewed_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map_or(Duration::MAX, |at| at.elapsed())
    }

    /// Sets annotations the Lease carries from its next acquire or renew on, and renews at
    /// once if it is held (a shard member acknowledging an assignment: the sharder waits for
    /// it).
    pub(crate) fn annotate(&self, annotations: std::collections::BTreeMap<String, String>) {
        self.annotations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(annotations);
        self.renew_soon.notify_one();
    }

    fn annotations(&self) -> std::collections::BTreeMap<String, String> {
        self.annotations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Follows leadership changes (for metrics and health).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// Campaigns until elected (or `shutdown`), then runs `lead` with a token that is cancelled
    /// when leadership is lost or `shutdown` is cancelled, and renews the Lease meanwhile.
    ///
    /// Returns `Ok` after a clean shutdown (the Lease is released if configured).
    ///
    /// # Errors
    ///
    /// [`LeaderElectionError::Lost`] when renewal failed for the renew deadline. `lead`'s token is
    /// cancelled at that moment; whatever `lead` still runs after that is the caller's to stop
    /// (the [`Manager`](crate::manager::Manager) stops its controllers and exits).
    pub async fn run<F, Fut>(
        &self,
        shutdown: CancellationToken,
        lead: F,
    ) -> Result<(), LeaderElectionError>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        // Campaign.
        loop {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            let attempt = self.campaign_attempt(self.config.attempt_timeout());
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                acquired = attempt => if acquired? { break },
            }
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(jittered(self.config.retry_period)) => {}
            }
        }
        tracing::info!(lease = %self.config.lease_name, identity = %self.config.identity, "acquired leadership");
        self.leading.send_replace(true);

        // Lead and renew.
        let leading = shutdown.child_token();
        let work = lead(leading.clone());
        tokio::pin!(work);
        let (outcome, work_done) = tokio::select! {
            () = &mut work => (Ok(()), true),
            lost = self.renew_until_lost(&shutdown) => (lost, false),
        };
        leading.cancel();
        match outcome {
            Err(lost) => {
                self.leading.send_replace(false);
                tracing::error!(lease = %self.config.lease_name, "leadership lost; work cancelled");
                Err(lost)
            }
            Ok(()) => {
                // Clean shutdown: the work saw the cancellation and drains (running reconciles
                // finish within the manager's grace period). Their writes must still pass the
                // fence, so keep renewing until the work is done, then release.
                if !work_done {
                    let keep_renewing = CancellationToken::new();
                    let drained = tokio::select! {
                        () = &mut work => Ok(()),
                        lost = self.renew_until_lost(&keep_renewing) => lost,
                    };
                    if let Err(lost) = drained {
                        self.leading.send_replace(false);
                        tracing::error!(lease = %self.config.lease_name, "leadership lost while shutting down; work cancelled");
                        return Err(lost);
                    }
                }
                self.leading.send_replace(false);
                if self.config.release_on_cancel {
                    self.release().await;
                }
                Ok(())
            }
        }
    }

    /// Renews every retry period until `shutdown` (returns `Ok`) or until no renewal succeeded
    /// for the renew deadline (returns `Lost`). `shutdown` also interrupts an attempt in flight:
    /// a renewal stuck on a dead connection must not hold up a shutdown until the deadline
    /// passes and leadership counts as lost.
    async fn renew_until_lost(
        &self,
        shutdown: &CancellationToken,
    ) -> Result<(), LeaderElectionError> {
        let deadline = self.config.renew_deadline;
        let mut wait = self.config.retry_period;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(wait) => {}
                () = self.renew_soon.notified() => {}
            }
            let remaining = deadline.saturating_sub(self.since_renewal());
            if remaining.is_zero() {
                // Frozen (or starved) past the deadline: no attempt can count any more.
                return Err(LeaderElectionError::Lost(self.config.lease_name.clone()));
            }
            let started = Instant::now();
            let attempt = self.attempt(remaining.min(self.config.attempt_timeout()));
            let renewed = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                renewed = attempt => renewed,
            };
            if !renewed && self.since_renewal() >= deadline {
                return Err(LeaderElectionError::Lost(self.config.lease_name.clone()));
            }
            // An attempt that used up its time (a dead connection) is retried at once, on the
            // fresh connection; otherwise the next renewal is a retry period after this one.
            wait = self.config.retry_period.saturating_sub(started.elapsed());
        }
    }

    /// [`Self::attempt`] of a campaign: an authorization failure (401, 403) is not retried but
    /// returned as [`LeaderElectionError::Refused`] — at start-up nothing can change it but an
    /// administrator, and retrying for ever hides the reason behind a debug line.
    async fn campaign_attempt(&self, timeout: Duration) -> Result<bool, LeaderElectionError> {
        match tokio::time::timeout(timeout, self.try_acquire_or_renew()).await {
            Ok(Err(kube::Error::Api(status))) if matches!(status.code, 401 | 403) => {
                let error = kube::Error::Api(status);
                Err(LeaderElectionError::Refused {
                    namespace: self.config.lease_namespace.clone(),
                    lease: self.config.lease_name.clone(),
                    message: crate::client::readable(&error).to_string(),
                })
            }
            outcome => Ok(self.attempted(outcome, timeout)),
        }
    }

    /// [`Self::try_acquire_or_renew`] within `timeout`; `true` if we hold the Lease afterwards.
    /// A timeout or a transport failure opens a fresh connection for the next attempt.
    async fn attempt(&self, timeout: Duration) -> bool {
        let started = Instant::now();
        let outcome = tokio::time::timeout(timeout, self.try_acquire_or_renew()).await;
        let held = matches!(outcome, Ok(Ok(true)));
        tracing::debug!(lease = %self.config.lease_name, took = ?started.elapsed(), held, "lease renewal attempted");
        self.attempted(outcome, timeout)
    }

    /// What an attempt's `outcome` means: `true` if we hold the Lease.
    fn attempted(
        &self,
        outcome: Result<Result<bool, kube::Error>, tokio::time::error::Elapsed>,
        timeout: Duration,
    ) -> bool {
        match outcome {
            Ok(Ok(held)) => held,
            Ok(Err(error)) => {
                tracing::debug!(error = %crate::client::readable(&error), lease = %self.config.lease_name, "leader election request failed");
                if !matches!(error, kube::Error::Api(_)) {
                    self.reconnect();
                }
                false
            }
            Err(_) => {
                tracing::warn!(lease = %self.config.lease_name, ?timeout, "leader election request timed out; reconnecting");
                self.reconnect();
                false
            }
        }
    }

    /// One attempt to take or keep the Lease; `true` if we hold it afterwards. On success the
    /// attempt's start (before its first request) becomes the last renewal.
    ///
    /// While we lead, a renewal first writes over the Lease as we last wrote it, guarded by its
    /// `resourceVersion`: one request, where reading the Lease first takes two — on a loaded
    /// apiserver each costs as much as the whole renewal should. Refused (someone else wrote
    /// the Lease since), it falls back to reading the Lease and deciding from what it holds.
    async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let started = Instant::now();
        let api = self.api();
        let now = MicroTime(Timestamp::now());
        let me = &self.config.identity;
        let duration_secs = i32::try_from(self.config.lease_duration.as_secs())
            .unwrap_or(i32::MAX)
            .max(1);
        let written = self.is_leader().then(|| self.written()).flatten();
        if let Some(mut lease) = written {
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            spec.renew_time = Some(now.clone());
            spec.lease_duration_seconds = Some(duration_secs);
            self.stamp(&mut lease);
            match api
                .replace(&self.config.lease_name, &PostParams::default(), &lease)
                .await
            {
                Ok(lease) => {
                    self.observe(Some(me.clone()), Some(now));
                    self.renewed(started);
                    self.wrote(Some(lease));
                    return Ok(true);
                }
                // Written by someone else since (or gone): read it and decide.
                Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => {
                    self.wrote(None);
                }
                Err(error) => return Err(error),
            }
        }
        let lease = api.get_opt(&self.config.lease_name).await?;
        let Some(mut lease) = lease else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.lease_name.clone()),
                    namespace: Some(self.config.lease_namespace.clone()),
                    labels: (!self.config.labels.is_empty()).then(|| self.config.labels.clone()),
                    annotations: Some(self.annotations()).filter(|a| !a.is_empty()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now.clone()),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            let created = api.create(&PostParams::default(), &lease).await?;
            self.observe(Some(me.clone()), Some(now));
            self.renewed(started);
            self.wrote(Some(created));
            return Ok(true);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        // Record what we saw; a change restarts the expiry clock.
        let observed_at = self.observe(holder.clone(), spec.renew_time.clone());
        let held_by_me = holder.as_deref() == Some(me.as_str());
        if let Some(other) = &holder
            && !held_by_me
        {
            let valid_for = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.config.lease_duration, Duration::from_secs);
            if observed_at.elapsed() < valid_for {
                tracing::trace!(holder = %other, "lease held by another candidate");
                self.wrote(None);
                return Ok(false);
            }
        }
        let mut new_spec = spec.clone();
        new_spec.holder_identity = Some(me.clone());
        new_spec.lease_duration_seconds = Some(duration_secs);
        new_spec.renew_time = Some(now.clone());
        if !held_by_me {
            new_spec.acquire_time = Some(now.clone());
            new_spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        lease.spec = Some(new_spec);
        self.stamp(&mut lease);
        // `replace` carries the resourceVersion we read: if someone else wrote since, we lose.
        let replaced = api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await?;
        self.observe(Some(me.clone()), Some(now));
        self.renewed(started);
        self.wrote(Some(replaced));
        Ok(true)
    }

    /// Adds the labels and annotations the Lease carries to `lease`, about to be written.
    fn stamp(&self, lease: &mut Lease) {
        if !self.config.labels.is_empty() {
            let labels = lease.metadata.labels.get_or_insert_with(Default::default);
            labels.extend(self.config.labels.clone());
        }
        let annotations = self.annotations();
        if !annotations.is_empty() {
            lease
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .extend(annotations);
        }
    }

    /// The Lease as we last wrote it, if we wrote it last.
    fn written(&self) -> Option<Lease> {
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn wrote(&self, lease: Option<Lease>) {
        *self.written.lock().unwrap_or_else(|e| e.into_inner()) = lease;
    }

    /// Records the Lease state; returns when it was first observed in this state.
    fn observe(&self, holder: Option<String>, renew_time: Option<MicroTime>) -> Instant {
        let mut observed = self.observed.lock().unwrap_or_else(|e| e.into_inner());
        match &*observed {
            Some(o) if o.holder == holder && o.renew_time == renew_time => o.at,
            _ => {
                let at = Instant::now();
                *observed = Some(Observed {
                    holder,
                    renew_time,
                    at,
                });
                at
            }
        }
    }

    /// Gives the Lease up (keeps the transition count) so a successor acquires it at once.
    /// Retried (each attempt on a fresh connection after a failure) while the Lease we last
    /// renewed is still valid: after that it has expired anyway, and nothing is left to release.
    async fn release(&self) {
        let expires = self
            .config
            .lease_duration
            .saturating_sub(self.since_renewal());
        let outcome = tokio::time::timeout(expires, async {
            loop {
                let attempt =
                    tokio::time::timeout(self.config.attempt_timeout(), self.try_release());
                match attempt.await {
                    Ok(Ok(released)) => return Ok(released),
                    Ok(Err(error @ kube::Error::Api(_))) => {
                        return Err(crate::client::readable(&error).to_string());
                    }
                    Ok(Err(error)) => {
                        tracing::debug!(error = %crate::client::readable(&error), "releasing the lease failed; retrying");
                        self.reconnect();
                    }
                    Err(_) => {
                        tracing::debug!("releasing the lease timed out; retrying");
                        self.reconnect();
                    }
                }
                tokio::time::sleep(self.config.retry_period.min(Duration::from_millis(500))).await;
            }
        })
        .await;
        match outcome {
            Ok(Ok(true)) => tracing::info!(lease = %self.config.lease_name, "released leadership"),
            Ok(Ok(false)) => {}
            Ok(Err(error)) => {
                tracing::warn!(lease = %self.config.lease_name, %error, "releasing the lease failed")
            }
            Err(_) => tracing::warn!(
                lease = %self.config.lease_name,
                "could not release the lease before it expired (apiserver unreachable); it expires by itself"
            ),
        }
    }

    /// One attempt to release: `Ok(false)` when the Lease is not ours (any more).
    async fn try_release(&self) -> Result<bool, kube::Error> {
        let api = self.api();
        let Some(mut lease) = api.get_opt(&self.config.lease_name).await? else {
            return Ok(false);
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(false);
        };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        self.wrote(None);
        api.replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await?;
        Ok(true)
    }
}

/// `period` plus up to 20 % (client-go's jitter factor 1.2), so candidates do not move in lockstep.
fn jittered(period: Duration) -> Duration {
    kubeforge_shared::random::Rng::from_clock().jitter(period, 1.0, 1.2)
}

#[cfg(test)]
mod tests;
