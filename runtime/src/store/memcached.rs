//! [`Memcached`]: a [`Backend`] on one or more memcached servers (the `memcached` feature).
//!
//! Keys are spread over the servers by a stable hash (FNV-1a) and Lamping and Veach's jump
//! consistent hash, so adding a server to `n` moves about `1/(n+1)` of the keys. Each server has
//! a small pool of idle connections; every connect and every request is bounded by the
//! configured timeout, and a server that timed out or refused a connection has its name resolved
//! again before the next attempt (app-sdk's server selector refreshed on timeouts).

use std::collections::HashMap;
use std::fmt::{self, Debug};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_memcached::{AsciiProtocol, Client, Status};
use futures::future::join_all;
use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};

use super::{Backend, MAX_KEY_LEN, StoreError, StoreFuture};

/// The backend's name in errors, metrics and readiness checks.
const BACKEND: &str = "memcached";

/// Request-latency buckets (seconds): memcached answers in well under a millisecond on a quiet
/// network, so the buckets start at 100 µs.
const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// How to reach a memcached cluster; app-sdk's `MemcachedStoreConfig`, option for option.
///
/// ```
/// use std::time::Duration;
/// use kubeforge::store::MemcachedConfig;
///
/// let config = MemcachedConfig::new(["memcached-0.cache:11211", "memcached-1.cache:11211"])
///     .shard_key("shop-operator")
///     .timeout(Duration::from_millis(250));
/// assert_eq!(config.page_size, 500);
/// ```
#[derive(Clone, Debug)]
pub struct MemcachedConfig {
    /// The servers, as `host:port` (the host is resolved to an IPv4 address). Keys are spread
    /// over them by a consistent hash: every replica must list the same servers in the same
    /// order, or they will look for a key on different servers.
    pub servers: Vec<String>,
    /// A prefix that separates this operator's (or replica group's) entries from others sharing
    /// the cluster; stores build their keys with it. Default: empty.
    pub shard_key: String,
    /// How often each store writes its key list into memcached, so a full `list` works from
    /// memcached alone; `None` or zero disables full lists. Default: 60 s.
    pub key_sync_interval: Option<Duration>,
    /// How many objects one `get_many` or `set_many` carries when a store lists or relists.
    /// Default: 500.
    pub page_size: usize,
    /// The bound on connecting to a server, and separately on each request to it. Too short
    /// and large pages of big objects fail on a busy network; too long and a dead server stalls
    /// every read for that long. Default: 500 ms.
    pub timeout: Duration,
    /// Idle connections kept per server for later requests (more are opened under load and
    /// closed after use). Default: 4.
    pub max_idle_conns: usize,
}

impl MemcachedConfig {
    /// The defaults, with these servers (`host:port`).
    pub fn new<S: Into<String>>(servers: impl IntoIterator<Item = S>) -> Self {
        Self {
            servers: servers.into_iter().map(Into::into).collect(),
            shard_key: String::new(),
            key_sync_interval: Some(Duration::from_secs(60)),
            page_size: 500,
            timeout: Duration::from_millis(500),
            max_idle_conns: 4,
        }
    }

    /// Sets [`shard_key`](Self::shard_key).
    #[must_use]
    pub fn shard_key(mut self, shard_key: impl Into<String>) -> Self {
        self.shard_key = shard_key.into();
        self
    }

    /// Sets [`key_sync_interval`](Self::key_sync_interval): a [`Duration`], or `None` to disable
    /// full lists.
    #[must_use]
    pub fn key_sync_interval(mut self, interval: impl Into<Option<Duration>>) -> Self {
        self.key_sync_interval = interval.into();
        self
    }

    /// Sets [`page_size`](Self::page_size) (at least 1).
    #[must_use]
    pub fn page_size(mut self, page_size: usize) -> Self {
        self.page_size = page_size;
        self
    }

    /// Sets [`timeout`](Self::timeout) (more than zero).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets [`max_idle_conns`](Self::max_idle_conns) (0: a connection per request).
    #[must_use]
    pub fn max_idle_conns(mut self, max_idle_conns: usize) -> Self {
        self.max_idle_conns = max_idle_conns;
        self
    }

    /// Why this configuration cannot work, if it cannot.
    fn validate(&self) -> Result<(), String> {
        if self.servers.is_empty() {
            return Err("no servers: give at least one host:port".to_owned());
        }
        for (i, server) in self.servers.iter().enumerate() {
            let valid = server.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && port.parse::<u16>().is_ok_and(|port| port != 0)
            });
            if !valid {
                return Err(format!("server {server:?} is not host:port"));
            }
            if self.servers[..i].contains(server) {
                return Err(format!("server {server} is listed twice"));
            }
        }
        if self.page_size == 0 {
            return Err("page size 0: a page carries at least one object".to_owned());
        }
        if self.timeout.is_zero() {
            return Err("timeout 0: every request would fail".to_owned());
        }
        Ok(())
    }
}

/// How long a server that is down (while another is up) is skipped before it is asked again.
const RETRY_DOWN_AFTER: Duration = Duration::from_secs(1);

/// A [`Backend`] on a memcached cluster, through the text protocol over TCP.
///
/// Construction checks the configuration but connects to nothing: connections are opened by
/// the first requests, so an operator starts while memcached is still coming up (its readiness
/// check, [`Backend::check`], tells when memcached answers).
///
/// - `get_many`, `set_many` and `delete_many` group the keys by server and send one request per
///   server (a multi-key `get`; pipelined `set`s; pipelined `delete … noreply`s followed by a
///   `version` that confirms the server processed them), to all servers at once.
/// - Values are stored without expiry and with flags 0; memcached refuses items over its item
///   size limit (1 MB by default, key and overhead included), which fails the `set_many`.
/// - A failed request is not retried, except once on a new connection when a pooled one turns
///   out to be dead (the server restarted since it was last used).
/// - With several servers, one that is down (its last request failed in transport) degrades
///   the backend instead of failing it while another answers: its keys read as misses (the
///   store refills them from the apiserver), writes and deletes to it are skipped, it is asked
///   again a second after its last failure, and [`Backend::check`] passes. With every server
///   down, requests and the check fail, naming a server.
///
/// Its metrics ([`Backend::metrics`]) are `kubeforge_store_requests_total{backend, op, result}`
/// (`op` is `get`, `set`, `delete` or `check`; `result` is `hit` or `miss` per key read, `ok` per
/// other successful request to a server, and `error` per failed request to a server) and the
/// histogram `kubeforge_store_request_seconds{backend, op}` of requests to one server.
///
/// ```
/// use kubeforge::store::{Backend, Memcached, MemcachedConfig};
///
/// let backend = Memcached::new(MemcachedConfig::new(["127.0.0.1:11211"]).shard_key("shop"))?;
/// assert_eq!((backend.name(), backend.shard_key()), ("memcached", "shop"));
/// # Ok::<(), kubeforge::store::StoreError>(())
/// ```
pub struct Memcached {
    config: MemcachedConfig,
    servers: Vec<Server>,
    /// `None` only if the series could not be built (their names are constant and valid).
    series: Option<Series>,
}

impl Debug for Memcached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Memcached")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Memcached {
    /// A backend on `config`'s servers; connects to nothing yet.
    ///
    /// # Errors
    ///
    /// The configuration cannot work: no servers, a server that is not `host:port` or is listed
    /// twice, a page size or a timeout of zero.
    pub fn new(config: MemcachedConfig) -> Result<Self, StoreError> {
        config
            .validate()
            .map_err(|why| StoreError::new(BACKEND, "configuration", why))?;
        Ok(Self {
            servers: config
                .servers
                .iter()
                .map(|name| Server::new(name))
                .collect(),
            config,
            series: Series::new(),
        })
    }

    /// The configuration this backend was built with.
    pub fn config(&self) -> &MemcachedConfig {
        &self.config
    }

    /// Whether server `index` is skipped: down, failed a moment ago, and another server is up
    /// (its keys are misses, its writes lost, without waiting on it for every request).
    fn skipped(&self, index: usize) -> bool {
        self.passable(index) && self.servers.get(index).is_some_and(Server::resting)
    }

    /// Whether a failed request to server `index` may be passed over: the server is down (its
    /// last request failed in transport) while another one is up. Its keys are then misses,
    /// which the store refills from the apiserver, and writes to it are lost as evictions are;
    /// with every server down, requests fail.
    fn passable(&self, index: usize) -> bool {
        self.servers.get(index).is_some_and(|s| !s.is_up())
            && self.servers.iter().any(Server::is_up)
    }

    /// The outcome of a write to several servers: failures on passable servers are passed over.
    fn passing(&self, results: Vec<(usize, Result<(), StoreError>)>) -> Result<(), StoreError> {
        for (index, result) in results {
            if let Err(error) = result
                && !self.passable(index)
            {
                return Err(error);
            }
        }
        Ok(())
    }

    /// The index of the server that holds `key`.
    fn server_of(&self, key: &str) -> usize {
        server_for(key, self.servers.len())
    }

    /// The positions of `keys`, grouped by the server that holds them.
    fn group<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> Vec<Vec<usize>> {
        group_by(keys, self.servers.len(), |key| self.server_of(key))
    }

    /// Runs `request` on a connection to server `index`, bounded by the timeout, and records it.
    ///
    /// `request` takes the connection and gives it back with its outcome; it may be called twice
    /// when a pooled connection turns out to be dead.
    async fn on_server<T, F, Fut>(
        &self,
        index: usize,
        op: Op,
        keys: usize,
        mut request: F,
    ) -> Result<T, StoreError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = (Client, Result<T, Failure>)>,
    {
        let Some(server) = self.servers.get(index) else {
            return Err(StoreError::new(
                BACKEND,
                op.what(keys, "?"),
                "no such server",
            ));
        };
        let timeout = self.config.timeout;
        let started = Instant::now();
        let mut retried = false;
        let outcome = loop {
            let (client, pooled) = match server.connection(timeout).await {
                Ok(connection) => connection,
                Err(failure) => break Err(failure),
            };
            match tokio::time::timeout(timeout, request(client)).await {
                Err(_) => break Err(Failure::Timeout(timeout)),
                Ok((client, Ok(value))) => {
                    server.put_back(client, self.config.max_idle_conns);
                    server.answered();
                    break Ok(value);
                }
                Ok((_, Err(failure))) if pooled && !retried && failure.is_io() => {
                    // Its peer likely went away while it sat idle, and so did its siblings'.
                    server.forget_idle();
                    retried = true;
                }
                Ok((_, Err(failure))) => break Err(failure),
            }
        };
        if let Some(series) = &self.series {
            series.observe(op, started.elapsed());
            if outcome.is_err() {
                series.count(op, "error", 1);
            } else if op != Op::Get {
                series.count(op, "ok", 1);
            }
        }
        outcome.map_err(|failure| {
            server.failed(&failure);
            StoreError::new(BACKEND, op.what(keys, &server.name), failure)
        })
    }

    /// The values of the keys at `positions` of `keys`, all on server `index`.
    async fn get_on(
        &self,
        index: usize,
        keys: &[String],
        positions: &[usize],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let group: Vec<&str> = positions
            .iter()
            .filter_map(|&i| keys.get(i).map(String::as_str))
            .collect();
        let group = &group;
        let values = self
            .on_server(index, Op::Get, group.len(), |mut client| async move {
                let found = match client.get_multi(group).await {
                    Ok(values) => Ok(values),
                    // memcached answers a multi-get of misses only with `END`.
                    Err(async_memcached::Error::Protocol(Status::NotFound)) => Ok(Vec::new()),
                    Err(error) => Err(Failure::Memcached(error)),
                };
                (client, found.map(|found| in_order(group, found)))
            })
            .await?;
        if let Some(series) = &self.series {
            let hits = values.iter().filter(|value| value.is_some()).count();
            series.count(Op::Get, "hit", hits);
            series.count(Op::Get, "miss", values.len() - hits);
        }
        Ok(values)
    }

    /// Stores the entries at `positions` of `entries`, all on server `index`.
    async fn set_on(
        &self,
        index: usize,
        entries: &[(String, Vec<u8>)],
        positions: &[usize],
    ) -> Result<(), StoreError> {
        let group: Vec<(&str, &[u8])> = positions
            .iter()
            .filter_map(|&i| entries.get(i))
            .map(|(key, value)| (key.as_str(), value.as_slice()))
            .collect();
        let group = &group;
        self.on_server(index, Op::Set, group.len(), |mut client| async move {
            let stored = match client.set_multi(group, Some(0), Some(0)).await {
                Ok(results) => group
                    .iter()
                    .find_map(|entry| match results.get(&entry.0) {
                        Some(Ok(())) => None,
                        Some(Err(error)) => Some(Failure::Refused {
                            key: entry.0.to_owned(),
                            reason: error.to_string(),
                        }),
                        None => Some(Failure::Unanswered(entry.0.to_owned())),
                    })
                    .map_or(Ok(()), Err),
                Err(error) => Err(Failure::Memcached(error)),
            };
            (client, stored)
        })
        .await
    }

    /// Deletes the keys at `positions` of `keys`, all on server `index`.
    async fn delete_on(
        &self,
        index: usize,
        keys: &[String],
        positions: &[usize],
    ) -> Result<(), StoreError> {
        let group: Vec<&str> = positions
            .iter()
            .filter_map(|&i| keys.get(i).map(String::as_str))
            .collect();
        let group = &group;
        self.on_server(index, Op::Delete, group.len(), |mut client| async move {
            // `noreply` deletes are silent (a missing key is no error); the server handles a
            // connection's commands in order, so its answer to `version` confirms them all.
            let deleted = match client.delete_multi_no_reply(group).await {
                Ok(()) => client.version().await.map(drop),
                Err(error) => Err(error),
            };
            (client, deleted.map_err(Failure::Memcached))
        })
        .await
    }

    /// Fails if a key cannot be sent (the store hashes long keys, so this is a bug upstream).
    fn valid_keys<'k>(
        &self,
        op: Op,
        keys: impl ExactSizeIterator<Item = &'k str>,
    ) -> Result<(), StoreError> {
        let n = keys.len();
        let mut keys = keys;
        match keys.find(|key| !valid_key(key)) {
            Some(key) => Err(StoreError::new(
                BACKEND,
                format!("{} {}", op.as_str(), count_keys(n)),
                Failure::InvalidKey(key.to_owned()),
            )),
            None => Ok(()),
        }
    }
}

impl Backend for Memcached {
    fn name(&self) -> &'static str {
        BACKEND
    }

    fn shard_key(&self) -> &str {
        &self.config.shard_key
    }

    fn get_many<'a>(&'a self, keys: &'a [String]) -> StoreFuture<'a, Vec<Option<Vec<u8>>>> {
        Box::pin(async move {
            self.valid_keys(Op::Get, keys.iter().map(String::as_str))?;
            let groups: Vec<(usize, Vec<usize>)> = self
                .group(keys.iter().map(String::as_str))
                .into_iter()
                .enumerate()
                .filter(|(_, positions)| !positions.is_empty())
                .collect();
            let requests = groups.iter().map(|(index, positions)| async move {
                if self.skipped(*index) {
                    return Ok(vec![None; positions.len()]);
                }
                self.get_on(*index, keys, positions).await
            });
            let mut values = Vec::with_capacity(groups.len());
            for ((index, positions), result) in groups.iter().zip(join_all(requests).await) {
                values.push(match result {
                    Ok(found) => found,
                    // The server is down but not the backend: its keys are misses.
                    Err(_) if self.passable(*index) => vec![None; positions.len()],
                    Err(error) => return Err(error),
                });
            }
            let positions: Vec<Vec<usize>> = groups.into_iter().map(|(_, p)| p).collect();
            Ok(ungroup(keys.len(), &positions, values))
        })
    }

    fn set_many<'a>(&'a self, entries: &'a [(String, Vec<u8>)]) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.valid_keys(Op::Set, entries.iter().map(|(key, _)| key.as_str()))?;
            let groups = self.group(entries.iter().map(|(key, _)| key.as_str()));
            let requests = groups
                .iter()
                .enumerate()
                .filter(|(_, positions)| !positions.is_empty())
                .map(|(index, positions)| async move {
                    if self.skipped(index) {
                        return (index, Ok(()));
                    }
                    (index, self.set_on(index, entries, positions).await)
                });
            self.passing(join_all(requests).await)
        })
    }

    fn delete_many<'a>(&'a self, keys: &'a [String]) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.valid_keys(Op::Delete, keys.iter().map(String::as_str))?;
            let groups = self.group(keys.iter().map(String::as_str));
            let requests = groups
                .iter()
                .enumerate()
                .filter(|(_, positions)| !positions.is_empty())
                .map(|(index, positions)| async move {
                    if self.skipped(index) {
                        return (index, Ok(()));
                    }
                    (index, self.delete_on(index, keys, positions).await)
                });
            self.passing(join_all(requests).await)
        })
    }

    /// Ready while any server answers: with one of several down the store is degraded (that
    /// server's keys are read from the apiserver), not down. Every server is asked; when none
    /// answers, the first one (in configuration order) is named.
    fn check(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let checks = (0..self.servers.len()).map(|index| {
                self.on_server(index, Op::Check, 0, |mut client| async move {
                    let version = client.version().await.map_err(Failure::Memcached);
                    (client, version)
                })
            });
            let results = join_all(checks).await;
            if results.iter().any(Result::is_ok) {
                return Ok(());
            }
            results.into_iter().try_for_each(|r| r.map(drop))
        })
    }

    fn page_size(&self) -> usize {
        self.config.page_size
    }

    fn key_sync_interval(&self) -> Option<Duration> {
        self.config.key_sync_interval.filter(|d| !d.is_zero())
    }

    fn metrics(&self) -> Vec<MetricFamily> {
        self.series
            .as_ref()
            .map(Series::families)
            .unwrap_or_default()
    }
}

/// One memcached server: its address and its idle connections.
struct Server {
    /// `host:port` as configured, in errors.
    name: String,
    state: Mutex<ServerState>,
    /// Whether its last request went through (or none was made yet); `false` after a failure in
    /// transport (unreachable, timed out, connection lost).
    up: AtomicBool,
}

#[derive(Default)]
struct ServerState {
    /// Where connections go; `None`: resolve `name` before the next connect.
    addr: Option<SocketAddr>,
    /// Connections that completed their last request, most recently used last.
    idle: Vec<Client>,
    /// When its last request failed in transport (while it is down).
    failed_at: Option<Instant>,
}

impl Server {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            state: Mutex::new(ServerState::default()),
            up: AtomicBool::new(true),
        }
    }

    fn state(&self) -> MutexGuard<'_, ServerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An idle connection (`true`: pooled) or a new one, connected within `timeout`.
    async fn connection(&self, timeout: Duration) -> Result<(Client, bool), Failure> {
        let addr = {
            let mut state = self.state();
            while let Some(client) = state.idle.pop() {
                if !client.is_closed() {
                    return Ok((client, true));
                }
            }
            state.addr
        };
        let connect = async {
            let addr = match addr {
                Some(addr) => addr,
                None => self.resolve().await?,
            };
            // async-memcached parses a DSN; `tcp://` makes it take an IP literal as the host.
            Client::new(format!("tcp://{addr}"))
                .await
                .map_err(Failure::Memcached)
        };
        match tokio::time::timeout(timeout, connect).await {
            Ok(client) => client.map(|client| (client, false)),
            Err(_) => Err(Failure::ConnectTimeout(timeout)),
        }
    }

    /// Resolves the name to an IPv4 address (async-memcached connects over IPv4 only) and keeps
    /// it for later connections.
    async fn resolve(&self) -> Result<SocketAddr, Failure> {
        let addr = tokio::net::lookup_host(self.name.as_str())
            .await
            .map_err(Failure::Resolve)?
            .find(SocketAddr::is_ipv4)
            .ok_or(Failure::NoIpv4)?;
        self.state().addr = Some(addr);
        Ok(addr)
    }

    /// Keeps a connection that completed its request, if the pool has room.
    fn put_back(&self, client: Client, max_idle: usize) {
        let mut state = self.state();
        if !client.is_closed() && state.idle.len() < max_idle {
            state.idle.push(client);
        }
    }

    /// After a request that went through.
    fn answered(&self) {
        if !self.up.swap(true, Ordering::Relaxed) {
            tracing::info!(server = %self.name, "memcached server answers again");
        }
    }

    fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Whether it is down and failed less than [`RETRY_DOWN_AFTER`] ago: not worth asking yet.
    fn resting(&self) -> bool {
        !self.is_up()
            && self
                .state()
                .failed_at
                .is_some_and(|at| at.elapsed() < RETRY_DOWN_AFTER)
    }

    /// Closes every idle connection.
    fn forget_idle(&self) {
        self.state().idle.clear();
    }

    /// After a failed request: connections that may be dead are closed, and an address that
    /// may be stale is resolved again before the next connect.
    fn failed(&self, failure: &Failure) {
        if !failure.is_io() {
            return;
        }
        if self.up.swap(false, Ordering::Relaxed) {
            tracing::warn!(server = %self.name, %failure, "memcached server down: while another answers, its keys are read from the apiserver and its writes are skipped");
        }
        let mut state = self.state();
        state.idle.clear();
        state.failed_at = Some(Instant::now());
        if failure.is_unreachable() {
            state.addr = None;
        }
    }
}

/// Why a request to one server failed.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("connecting timed out after {0:?}")]
    ConnectTimeout(Duration),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("resolving the address")]
    Resolve(#[source] std::io::Error),
    #[error("the name resolves to no IPv4 address (the client connects over IPv4 only)")]
    NoIpv4,
    /// Not a `#[source]`: its `Display` already shows its own source.
    #[error("{0}")]
    Memcached(async_memcached::Error),
    #[error("the server did not store {key}: {reason}")]
    Refused { key: String, reason: String },
    #[error("the server did not answer the set of {0}")]
    Unanswered(String),
    #[error(
        "invalid key {0:?}: keys are 1 to {MAX_KEY_LEN} bytes of ASCII without spaces or \
         control characters"
    )]
    InvalidKey(String),
}

impl Failure {
    /// Whether the connection (and maybe the server) is in doubt, not just the request.
    fn is_io(&self) -> bool {
        match self {
            Failure::ConnectTimeout(_)
            | Failure::Timeout(_)
            | Failure::Resolve(_)
            | Failure::NoIpv4 => true,
            Failure::Memcached(error) => matches!(
                error,
                async_memcached::Error::Connect(_)
                    | async_memcached::Error::Io(_)
                    | async_memcached::Error::ConnectionClosed
            ),
            Failure::Refused { .. } | Failure::Unanswered(_) | Failure::InvalidKey(_) => false,
        }
    }

    /// Whether the server's address may have changed: it timed out or refused connections.
    fn is_unreachable(&self) -> bool {
        matches!(
            self,
            Failure::ConnectTimeout(_)
                | Failure::Timeout(_)
                | Failure::Resolve(_)
                | Failure::NoIpv4
                | Failure::Memcached(async_memcached::Error::Connect(_))
        )
    }
}

/// Whether memcached's text protocol can carry `key` as one token.
fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_LEN && key.bytes().all(|b| b.is_ascii_graphic())
}

/// The data of `found` (a multi-get's hits, in any order) for each of `keys`, in order; a key
/// listed twice gets the same value twice.
fn in_order(keys: &[&str], found: Vec<async_memcached::Value>) -> Vec<Option<Vec<u8>>> {
    let mut found: HashMap<Vec<u8>, Vec<u8>> = found
        .into_iter()
        .filter_map(|value| Some((value.key, value.data?)))
        .collect();
    let mut remaining: HashMap<&str, usize> = HashMap::new();
    for key in keys {
        *remaining.entry(key).or_default() += 1;
    }
    keys.iter()
        .map(|key| {
            let left = remaining.get_mut(key).map_or(0, |n| {
                *n = n.saturating_sub(1);
                *n
            });
            if left == 0 {
                found.remove(key.as_bytes())
            } else {
                found.get(key.as_bytes()).cloned()
            }
        })
        .collect()
}

/// The positions of `keys` grouped by `bucket_of` into `buckets` groups, each in `keys`' order.
fn group_by<'k>(
    keys: impl IntoIterator<Item = &'k str>,
    buckets: usize,
    bucket_of: impl Fn(&str) -> usize,
) -> Vec<Vec<usize>> {
    let mut groups = vec![Vec::new(); buckets];
    for (position, key) in keys.into_iter().enumerate() {
        if let Some(group) = groups.get_mut(bucket_of(key)) {
            group.push(position);
        }
    }
    groups
}

/// The inverse of [`group_by`]: `values[g][i]` goes to position `groups[g][i]` of a vector of
/// `len` (positions no group names stay at the default).
fn ungroup<T: Default>(len: usize, groups: &[Vec<usize>], values: Vec<Vec<T>>) -> Vec<T> {
    let mut all: Vec<T> = std::iter::repeat_with(T::default).take(len).collect();
    for (positions, values) in groups.iter().zip(values) {
        for (&position, value) in positions.iter().zip(values) {
            if let Some(slot) = all.get_mut(position) {
                *slot = value;
            }
        }
    }
    all
}

/// The index in `0..servers` of the server that holds `key`: FNV-1a, the same in every process
/// and version (unlike std's `DefaultHasher`), so every replica maps a key to the same server.
fn server_for(key: &str, servers: usize) -> usize {
    jump_hash(kubeforge_shared::hash::fnv1a(key.as_bytes()), servers)
}

/// Lamping and Veach's jump consistent hash: the bucket in `0..buckets` of `key`. Going from
/// `n` to `n + 1` buckets moves only the keys that land in the new bucket (about `1/(n+1)`).
fn jump_hash(mut key: u64, buckets: usize) -> usize {
    let buckets = i64::try_from(buckets).unwrap_or(i64::MAX);
    let (mut bucket, mut next) = (-1_i64, 0_i64);
    while next < buckets {
        bucket = next;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        next = ((bucket + 1) as f64 * ((1_u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    usize::try_from(bucket).unwrap_or(0)
}

/// `1 key`, `3 keys`.
fn count_keys(n: usize) -> String {
    if n == 1 {
        "1 key".to_owned()
    } else {
        format!("{n} keys")
    }
}

/// What a request does, for errors and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Get,
    Set,
    Delete,
    Check,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Set => "set",
            Op::Delete => "delete",
            Op::Check => "check",
        }
    }

    /// What failed, for a [`StoreError`]: `get 3 keys on 10.0.0.7:11211`.
    fn what(self, keys: usize, server: &str) -> String {
        match self {
            Op::Check => format!("check (version) on {server}"),
            op => format!("{} {} on {server}", op.as_str(), count_keys(keys)),
        }
    }
}

/// `kubeforge_store_requests_total` and `kubeforge_store_request_seconds` of one backend.
pub(crate) struct Series {
    requests: IntCounterVec,
    seconds: HistogramVec,
}

impl Series {
    fn new() -> Option<Self> {
        let requests = IntCounterVec::new(
            Opts::new(
                "kubeforge_store_requests_total",
                "Requests to the store backend: keys read (hit, miss), other requests to a \
                 server (ok) and failed requests to a server (error).",
            )
            .const_label("backend", BACKEND),
            &["op", "result"],
        )
        .ok()?;
        let seconds = HistogramVec::new(
            HistogramOpts::new(
                "kubeforge_store_request_seconds",
                "Latency of requests to one server of the store backend (connect included).",
            )
            .const_label("backend", BACKEND)
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["op"],
        )
        .ok()?;
        Some(Self { requests, seconds })
    }

    fn count(&self, op: Op, result: &str, n: usize) {
        if n > 0 {
            self.requests
                .with_label_values(&[op.as_str(), result])
                .inc_by(u64::try_from(n).unwrap_or(u64::MAX));
        }
    }

    fn observe(&self, op: Op, elapsed: Duration) {
        self.seconds
            .with_label_values(&[op.as_str()])
            .observe(elapsed.as_secs_f64());
    }

    /// The families with one series each, every label `_` (for the metrics reference).
    #[cfg(test)]
    pub(crate) fn reference() -> Vec<MetricFamily> {
        let Some(series) = Self::new() else {
            return Vec::new();
        };
        series.requests.with_label_values(&["_", "_"]);
        series.seconds.with_label_values(&["_"]);
        series.families()
    }

    fn families(&self) -> Vec<MetricFamily> {
        let mut families = self.requests.collect();
        families.extend(self.seconds.collect());
        // A vector with no series yet has an empty family: leave it out of the scrape.
        families.retain(|family| !family.get_metric().is_empty());
        families
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("shop/configmaps/ns-{}/object-{i}", i % 7))
            .collect()
    }

    #[test]
    fn jump_hash_should_match_the_reference_implementation() {
        // The test vectors of dgryski/go-jump, a port of the paper's C++ `JumpConsistentHash`.
        assert_eq!(jump_hash(1, 1), 0);
        assert_eq!(jump_hash(42, 57), 43);
        assert_eq!(jump_hash(0xdead_10cc, 1), 0);
        assert_eq!(jump_hash(0xdead_10cc, 666), 361);
        assert_eq!(jump_hash(256, 1024), 520);
        assert_eq!(jump_hash(42, 0), 0, "no buckets: bucket 0, never a panic");
    }

    /// Issue 37: every replica, of any build, must find a key on the same server — these values
    /// were computed by the store's own FNV-1a before it moved to `kubeforge_shared::hash`.
    #[test]
    fn server_for_should_place_keys_as_every_earlier_build_did() {
        for (key, on) in [
            ("a:1:shop/object-1", [0, 0, 4]),
            ("a:1:shop/object-2", [0, 2, 2]),
            ("a:1:shop/object-3", [1, 1, 3]),
            ("a:1:shop/object-7", [0, 2, 3]),
        ] {
            assert_eq!(
                [2, 3, 5].map(|servers| server_for(key, servers)),
                on,
                "{key}"
            );
        }
    }

    #[test]
    fn jump_hash_should_spread_keys_evenly() {
        let keys = keys(40_000);
        for servers in [2, 3, 5, 8] {
            let mut counts = vec![0_usize; servers];
            for key in &keys {
                counts[server_for(key, servers)] += 1;
            }
            let expected = keys.len() / servers;
            for (server, &count) in counts.iter().enumerate() {
                assert!(
                    count.abs_diff(expected) * 20 < expected,
                    "server {server} of {servers} got {count} keys, expected about {expected}"
                );
            }
        }
    }

    #[test]
    fn jump_hash_should_move_few_keys_when_a_server_is_added() {
        let keys = keys(20_000);
        for servers in [1, 2, 4, 7] {
            let moved: Vec<usize> = keys
                .iter()
                .map(|key| kubeforge_shared::hash::fnv1a(key.as_bytes()))
                .filter(|&hash| jump_hash(hash, servers) != jump_hash(hash, servers + 1))
                .map(|hash| jump_hash(hash, servers + 1))
                .collect();
            assert!(
                moved.iter().all(|&to| to == servers),
                "keys only move to the new server"
            );
            let share = moved.len() as f64 / keys.len() as f64;
            let ideal = 1.0 / (servers + 1) as f64;
            assert!(
                share < ideal * 1.1,
                "{} of {} keys moved from {servers} to {} servers",
                moved.len(),
                keys.len(),
                servers + 1
            );
        }
    }

    #[test]
    fn config_should_reject_what_cannot_work() {
        let ok = MemcachedConfig::new(["127.0.0.1:11211", "cache-1.cache:11211"]);
        assert!(Memcached::new(ok.clone()).is_ok());
        for (config, expected) in [
            (MemcachedConfig::new(Vec::<String>::new()), "no servers"),
            (MemcachedConfig::new(["cache"]), "not host:port"),
            (MemcachedConfig::new([":11211"]), "not host:port"),
            (MemcachedConfig::new(["cache:0"]), "not host:port"),
            (MemcachedConfig::new(["cache:x"]), "not host:port"),
            (MemcachedConfig::new(["a:1", "b:1", "a:1"]), "listed twice"),
            (ok.clone().page_size(0), "page size 0"),
            (ok.clone().timeout(Duration::ZERO), "timeout 0"),
        ] {
            let error = Memcached::new(config).unwrap_err();
            let source = error.source.as_ref().unwrap().to_string();
            assert!(source.contains(expected), "{source:?}: want {expected:?}");
            assert_eq!(error.what, "configuration");
        }
    }

    #[test]
    fn config_should_be_reported_through_the_backend() {
        let backend = Memcached::new(
            MemcachedConfig::new(["127.0.0.1:11211"])
                .shard_key("replicas-a")
                .page_size(100)
                .key_sync_interval(Duration::ZERO),
        )
        .unwrap();
        assert_eq!(backend.name(), "memcached");
        assert_eq!(backend.shard_key(), "replicas-a");
        assert_eq!(backend.page_size(), 100);
        assert_eq!(backend.key_sync_interval(), None);
        let default = Memcached::new(MemcachedConfig::new(["127.0.0.1:11211"])).unwrap();
        assert_eq!(default.key_sync_interval(), Some(Duration::from_secs(60)));
        assert!(default.metrics().is_empty(), "no series before a request");
    }

    #[test]
    fn grouping_should_preserve_the_callers_order() {
        let keys = keys(1000);
        let groups = group_by(keys.iter().map(String::as_str), 3, |key| server_for(key, 3));
        assert!(groups.iter().all(|group| !group.is_empty()));
        assert!(groups.iter().all(|group| group.is_sorted()));
        assert_eq!(groups.iter().map(Vec::len).sum::<usize>(), keys.len());
        // What each server answers, in its group's order, comes back in the caller's order.
        let answers: Vec<Vec<Option<String>>> = groups
            .iter()
            .map(|group| group.iter().map(|&i| Some(keys[i].clone())).collect())
            .collect();
        let merged = ungroup(keys.len(), &groups, answers);
        assert_eq!(merged, keys.into_iter().map(Some).collect::<Vec<_>>());
    }

    #[test]
    fn in_order_should_answer_every_key_in_order_with_misses_and_repeats() {
        let value = |key: &str, data: &str| async_memcached::Value {
            key: key.as_bytes().to_vec(),
            cas: None,
            flags: Some(0),
            data: Some(data.as_bytes().to_vec()),
        };
        let found = vec![value("b", "2"), value("a", "1")];
        let keys = ["a", "missing", "b", "a"];
        let data = |s: &str| Some(s.as_bytes().to_vec());
        assert_eq!(
            in_order(&keys, found),
            vec![data("1"), None, data("2"), data("1")]
        );
    }

    #[test]
    fn keys_should_be_checked_before_anything_is_sent() {
        assert!(valid_key("shop/configmaps/default/settings"));
        assert!(!valid_key(""));
        assert!(!valid_key("with space"));
        assert!(!valid_key("line\nbreak"));
        assert!(!valid_key("ü"));
        assert!(!valid_key(&"k".repeat(MAX_KEY_LEN + 1)));
        assert!(valid_key(&"k".repeat(MAX_KEY_LEN)));
    }

    #[tokio::test]
    async fn invalid_keys_should_fail_without_a_server() {
        let backend = Memcached::new(MemcachedConfig::new(["127.0.0.1:1"])).unwrap();
        let error = backend
            .get_many(&["ok".to_owned(), "not ok".to_owned()])
            .await
            .unwrap_err();
        assert_eq!(error.what, "get 2 keys");
        assert!(error.source.unwrap().to_string().contains("\"not ok\""));
    }

    #[tokio::test]
    async fn an_unreachable_server_should_be_named_and_counted() {
        // Nothing listens on port 1 of loopback: the connect is refused at once.
        let backend = Memcached::new(MemcachedConfig::new(["127.0.0.1:1"])).unwrap();
        let error = backend.get_many(&["a".to_owned()]).await.unwrap_err();
        assert_eq!(error.what, "get 1 key on 127.0.0.1:1");
        assert!(error.source.unwrap().to_string().starts_with("connect"));
        let error = backend.check().await.unwrap_err();
        assert_eq!(error.what, "check (version) on 127.0.0.1:1");
        let families = backend.metrics();
        let requests = families
            .iter()
            .find(|f| f.name() == "kubeforge_store_requests_total")
            .unwrap();
        assert_eq!(requests.get_metric().len(), 2, "get and check errors");
    }
}
