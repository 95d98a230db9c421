//! Command-line options for operator binaries (feature `cli`), with controller-runtime's flag
//! names, environment variables, and logging set-up.
//!
//! | flag | environment | default |
//! |---|---|---|
//! | `--kubeconfig PATH` | `KUBECONFIG` | kubeconfig inference, then in-cluster configuration |
//! | `--namespace NS,...` | `WATCH_NAMESPACE` | all namespaces |
//! | `--metrics-bind-address ADDR` | `METRICS_BIND_ADDRESS` | `0` (off); `:8080` binds all interfaces |
//! | `--health-probe-bind-address ADDR` | `HEALTH_PROBE_BIND_ADDRESS` | `:8081` |
//! | `--leader-elect` | `LEADER_ELECT` | off |
//! | `--leader-election-id NAME` | `LEADER_ELECTION_ID` | the binary's name |
//! | `--leader-election-namespace NS` | `LEADER_ELECTION_NAMESPACE` | the client's default namespace |
//! | `--leader-election-lease-duration`, `--leader-election-renew-deadline`, `--leader-election-retry-period` | | `15s`, `10s`, `2s` |
//! | `--warm-standby BOOL` | `WARM_STANDBY` | `true`: standby replicas keep their caches synced for a fast failover |
//! | `--shards GROUP` | `SHARDS` | off: split the work between the replicas of shard group `GROUP` ([`crate::shard`]); its Leases live in the leader-election namespace and use its timings; excludes `--leader-elect` |
//! | `--shard-mode MODE` | `SHARD_MODE` | `auto`: hash ranges (`shardSelector`) where the apiserver serves them, else labels; `labels`; `ranges`; `auto`/`ranges` take `:uid` (default) or `:namespace` |
//! | `--kube-api-qps N`, `--kube-api-burst N` | `KUBE_API_QPS`, `KUBE_API_BURST` | no client-side limit |
//! | `--log-format text\|json` | `LOG_FORMAT` | `text` (level from `RUST_LOG`, default `info`) |
//!
//! [`parse!`] parses them under the binary's own name, version and description: `--version`
//! prints `<binary> <version of its package>` and `--help` starts with the package's
//! `description`. The macro reads `CARGO_BIN_NAME`, `CARGO_PKG_VERSION` and
//! `CARGO_PKG_DESCRIPTION` where it expands, in the operator's crate; a derive inside kubeforge
//! would read kubeforge's.
//!
//! # Examples
//!
//! ```no_run
//! use kubeforge::cli::{self, or_exit};
//!
//! #[kubeforge::tokio::main(crate = "kubeforge::tokio")]
//! async fn main() {
//!     let options = cli::parse!();
//!     options.init_tracing();
//!     let client = or_exit(options.client().await);
//!     let manager = or_exit(options.manager(client));
//!     // ... add controllers, then:
//!     or_exit(manager.run().await);
//! }
//! ```
//!
//! Flags of your own: flatten [`Options`] into your parser. [`clap`] is re-exported here, so
//! this needs no dependency on clap either; `#[command(version, about)]` expands in your crate
//! and shows your package's version and description.
//!
//! ```no_run
//! use kubeforge::cli::clap::{self, Parser};
//! use kubeforge::cli::{Options, or_exit};
//!
//! /// The sidecar injector.
//! #[derive(Parser)]
//! #[command(version, about)]
//! struct Flags {
//!     #[command(flatten)]
//!     kubeforge: Options,
//!     /// Image of the injected sidecar.
//!     #[arg(long, env = "SIDECAR_IMAGE", default_value = "sidecar:1")]
//!     sidecar_image: String,
//! }
//!
//! #[kubeforge::tokio::main(crate = "kubeforge::tokio")]
//! async fn main() {
//!     let flags = Flags::parse();
//!     flags.kubeforge.init_tracing();
//!     let client = or_exit(flags.kubeforge.client().await);
//!     let manager = or_exit(flags.kubeforge.manager(client));
//!     // ... add controllers that use `flags.sidecar_image`, then:
//!     or_exit(manager.run().await);
//! }
//! ```

use std::ffi::OsString;
use std::fmt::Display;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::leader::LeaderElectionConfig;
use crate::manager::Manager;

/// clap, which [`Options`] is built with: flatten `Options` into your own `#[derive(Parser)]`
/// (see the [module docs](self)) without a dependency of your own.
pub use clap;

/// Log output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Who an operator binary is, for `--version` and `--help`; [`about!`] captures it in the
/// operator's crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct About {
    /// The command's name (`--version` prints `<name> <version>`).
    pub name: &'static str,
    /// The version `--version` prints.
    pub version: &'static str,
    /// The first paragraph of `--help`; none when empty.
    pub description: &'static str,
}

/// The [`About`] of the crate where it expands: the binary's name (`CARGO_BIN_NAME`, or the
/// package's name outside a binary), the package's version and description.
///
/// # Examples
///
/// ```
/// let about = kubeforge::cli::about!();
/// assert_eq!(about.version, env!("CARGO_PKG_VERSION"));
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! __kubeforge_cli_about {
    () => {
        $crate::cli::About {
            name: match ::core::option_env!("CARGO_BIN_NAME") {
                ::core::option::Option::Some(name) => name,
                ::core::option::Option::None => ::core::env!("CARGO_PKG_NAME"),
            },
            version: ::core::env!("CARGO_PKG_VERSION"),
            description: ::core::env!("CARGO_PKG_DESCRIPTION"),
        }
    };
}

/// Parses the process's command line into [`Options`] under the binary's own name, version and
/// description ([`about!`]); `--help`, `--version` and bad flags print what clap prints and exit.
///
/// # Examples
///
/// ```no_run
/// let options: kubeforge::cli::Options = kubeforge::cli::parse!();
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! __kubeforge_cli_parse {
    () => {
        $crate::cli::Options::parse_with($crate::cli::about!())
    };
}

#[doc(inline)]
pub use crate::__kubeforge_cli_about as about;
#[doc(inline)]
pub use crate::__kubeforge_cli_parse as parse;

/// The common options of an operator binary; see the [module docs](self). Parse them with
/// [`parse!`], or flatten them into a parser of your own (`#[command(flatten)]`).
#[derive(Clone, Debug, clap::Args)]
// Not this doc comment: the description of `--help` is the operator's.
#[command(about = None, long_about = None)]
pub struct Options {
    /// Path of a kubeconfig file (default: inferred, or the in-cluster configuration).
    #[arg(long, env = "KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Watch only these namespaces (comma-separated, or the flag repeated; one informer per
    /// namespace and kind).
    #[arg(
        long,
        env = "WATCH_NAMESPACE",
        value_name = "NS,...",
        value_delimiter = ','
    )]
    pub namespace: Vec<String>,
    /// Address of the /metrics endpoint (`0` disables it, `:8080` listens on all interfaces).
    #[arg(long, env = "METRICS_BIND_ADDRESS", value_name = "ADDR", default_value = "0", value_parser = parse_bind_address)]
    pub metrics_bind_address: BindAddress,
    /// Address of the /healthz and /readyz endpoints (`0` disables them).
    #[arg(long, env = "HEALTH_PROBE_BIND_ADDRESS", value_name = "ADDR", default_value = ":8081", value_parser = parse_bind_address)]
    pub health_probe_bind_address: BindAddress,
    /// Elect a leader among replicas; only the leader reconciles.
    #[arg(long, env = "LEADER_ELECT")]
    pub leader_elect: bool,
    /// Name of the leader-election Lease (default: the binary's name).
    #[arg(long, env = "LEADER_ELECTION_ID", value_name = "NAME")]
    pub leader_election_id: Option<String>,
    /// Namespace of the leader-election Lease (default: the client's default namespace).
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE", value_name = "NS")]
    pub leader_election_namespace: Option<String>,
    /// How long a Lease is valid without renewal.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,
    /// How long the leader tries to renew before giving up.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub leader_election_renew_deadline: Duration,
    /// How often to try to acquire or renew.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub leader_election_retry_period: Duration,
    /// With --leader-elect, standby replicas keep their caches synced, so a failover starts
    /// reconciling at once (`--warm-standby=false`: standbys stay idle until they lead).
    #[arg(long, env = "WARM_STANDBY", value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub warm_standby: bool,
    /// Split the work between the replicas of this shard group (instead of electing a leader);
    /// the Leases live in the leader-election namespace and use its timings.
    #[arg(
        long,
        env = "SHARDS",
        value_name = "GROUP",
        conflicts_with = "leader_elect"
    )]
    pub shards: Option<String>,
    /// How the shard group assigns objects: `auto` (hash ranges where the apiserver serves
    /// shardSelector, else labels), `labels`, `ranges`; `auto` and `ranges` take the hashed
    /// field as `:uid` (default) or `:namespace`.
    #[arg(
        long,
        env = "SHARD_MODE",
        value_name = "MODE",
        default_value = "auto",
        requires = "shards"
    )]
    pub shard_mode: crate::shard::ShardMode,
    /// Client-side limit of API requests per second (with --kube-api-burst).
    #[arg(long, env = "KUBE_API_QPS", value_name = "N")]
    pub kube_api_qps: Option<f64>,
    /// Client-side burst of API requests.
    #[arg(long, env = "KUBE_API_BURST", value_name = "N", default_value_t = 30)]
    pub kube_api_burst: u32,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Export spans (one per reconcile, the reconciles of one generation in one trace) with
    /// OTLP over HTTP, configured by the standard OTEL_* variables (default endpoint
    /// http://localhost:4318).
    #[arg(long, env = "OTLP_TRACES")]
    pub otlp_traces: bool,
    /// The webhook server (started when a kind has webhooks; feature `webhooks`).
    #[cfg(feature = "webhooks")]
    #[command(flatten)]
    pub webhook: WebhookFlags,
    /// The memcached store backend (feature `memcached`).
    #[cfg(feature = "memcached")]
    #[command(flatten)]
    pub memcached: MemcachedOptions,
    /// The configuration [`Options::client`] connected with: the leader elector opens its own
    /// connection from it.
    #[arg(skip)]
    connected: std::sync::OnceLock<kube::Config>,
}

/// The flags of the webhook server, in controller-runtime's style (see [`crate::webhook`]).
#[cfg(feature = "webhooks")]
#[derive(Clone, Debug, clap::Args)]
#[command(next_help_heading = WEBHOOK_HEADING)]
pub struct WebhookFlags {
    /// Port of the webhook server (0: any free port).
    #[arg(
        long,
        env = "WEBHOOK_PORT",
        value_name = "PORT",
        default_value_t = 9443
    )]
    pub webhook_port: u16,
    /// Directory with tls.crt and tls.key (and ca.crt) to serve; without it the operator
    /// creates a self-signed CA and certificate, kept in a Secret.
    #[arg(long, env = "WEBHOOK_CERT_DIR", value_name = "DIR")]
    pub webhook_cert_dir: Option<PathBuf>,
    /// The Service the apiserver calls, as NAMESPACE/NAME (what `crdgen --deploy` writes).
    #[arg(
        long,
        env = "WEBHOOK_SERVICE",
        value_name = "NAMESPACE/NAME",
        conflicts_with = "webhook_url"
    )]
    pub webhook_service: Option<String>,
    /// The URL base the apiserver calls, `https://HOST[:PORT]` (default, outside a cluster:
    /// `https://127.0.0.1:<port>`).
    #[arg(long, env = "WEBHOOK_URL", value_name = "URL")]
    pub webhook_url: Option<String>,
    /// Name of the webhook configurations and of the certificate Secret (default: the binary's
    /// name).
    #[arg(long, env = "WEBHOOK_NAME", value_name = "NAME")]
    pub webhook_name: Option<String>,
    /// Where the self-signed certificate is kept, as NAMESPACE/NAME (default:
    /// `<webhook name>-webhook-cert` in the namespace of --webhook-service, else in the client's
    /// default namespace: the kubeconfig context's, in a cluster the pod's, else `default`).
    #[arg(
        long,
        env = "WEBHOOK_CERT_SECRET",
        value_name = "NAMESPACE/NAME",
        conflicts_with = "webhook_cert_dir"
    )]
    pub webhook_cert_secret: Option<String>,
}

/// The `--help` heading of [`WebhookFlags`].
#[cfg(feature = "webhooks")]
const WEBHOOK_HEADING: &str = "Webhook server";

#[cfg(feature = "webhooks")]
impl WebhookFlags {
    /// The manager's webhook options.
    ///
    /// # Errors
    ///
    /// `--webhook-service` or `--webhook-cert-secret` is not `NAMESPACE/NAME`.
    pub fn options(&self) -> Result<crate::webhook::WebhookOptions, StartError> {
        let name = self.webhook_name.clone().unwrap_or_else(binary_name);
        let mut options = crate::webhook::WebhookOptions::new(name).port(self.webhook_port);
        if let Some(dir) = &self.webhook_cert_dir {
            options = options.cert_dir(dir);
        }
        if let Some(service) = &self.webhook_service {
            let (namespace, name) = namespaced_name("--webhook-service", service)?;
            options = options.service(namespace, name);
        }
        if let Some(secret) = &self.webhook_cert_secret {
            let (namespace, name) = namespaced_name("--webhook-cert-secret", secret)?;
            options = options.secret(namespace, name);
        }
        if let Some(url) = &self.webhook_url {
            options = options.url(url);
        }
        Ok(options)
    }
}

/// `NAMESPACE/NAME`, the value of `flag`, split.
#[cfg(feature = "webhooks")]
fn namespaced_name<'a>(flag: &str, value: &'a str) -> Result<(&'a str, &'a str), StartError> {
    value
        .split_once('/')
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
        .ok_or_else(|| StartError::Flag(format!("{flag}: expected NAMESPACE/NAME, got {value:?}")))
}

/// The flags of the memcached store backend: with `--memcached-servers`, kinds that ask for
/// `store = memcached` keep their objects there.
#[cfg(feature = "memcached")]
#[derive(Clone, Debug, clap::Args)]
#[command(next_help_heading = MEMCACHED_HEADING)]
pub struct MemcachedOptions {
    /// memcached servers (`host:port`, comma-separated); every replica lists them in the same
    /// order.
    #[arg(
        long,
        env = "MEMCACHED_SERVERS",
        value_name = "HOST:PORT,...",
        value_delimiter = ','
    )]
    pub memcached_servers: Vec<String>,
    /// Prefix that separates this operator's entries from others sharing the servers.
    #[arg(
        long,
        env = "MEMCACHED_SHARD_KEY",
        value_name = "PREFIX",
        default_value = ""
    )]
    pub memcached_shard_key: String,
    /// How often each store writes its key list to memcached (`0` disables full lists).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub memcached_key_sync_interval: Duration,
    /// Objects per multi-get or multi-set when a store lists or relists.
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub memcached_page_size: usize,
    /// Bound on connecting, and on each request.
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = parse_duration)]
    pub memcached_timeout: Duration,
    /// Idle connections kept per server.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub memcached_max_idle_conns: usize,
    /// Where every kind keeps its cache unless its controller chose (`store = ..`): `memory`,
    /// or `memcached` (needs --memcached-servers).
    #[arg(long, env = "CACHE_STORE", default_value = "memory", value_parser = ["memory", "memcached"])]
    pub cache_store: String,
}

/// The `--help` heading of [`MemcachedOptions`].
#[cfg(feature = "memcached")]
const MEMCACHED_HEADING: &str = "Memcached store";

#[cfg(feature = "memcached")]
impl MemcachedOptions {
    /// The backend these flags describe; `None` without servers.
    ///
    /// # Errors
    ///
    /// The settings are unusable (a page size of 0, a zero timeout).
    pub fn backend(&self) -> Result<Option<crate::store::SharedBackend>, crate::store::StoreError> {
        if self.memcached_servers.is_empty() {
            if self.cache_store == "memcached" {
                return Err(crate::store::StoreError::new(
                    "memcached",
                    "use memcached for every kind (--cache-store memcached)",
                    "no servers: give --memcached-servers host:port",
                ));
            }
            return Ok(None);
        }
        let interval = Some(self.memcached_key_sync_interval).filter(|d| !d.is_zero());
        let config = crate::store::MemcachedConfig::new(self.memcached_servers.iter().cloned())
            .shard_key(self.memcached_shard_key.clone())
            .key_sync_interval(interval)
            .page_size(self.memcached_page_size)
            .timeout(self.memcached_timeout)
            .max_idle_conns(self.memcached_max_idle_conns);
        Ok(Some(std::sync::Arc::new(crate::store::Memcached::new(
            config,
        )?)))
    }
}

/// A listen address; `None` when disabled with `0`.
pub type BindAddress = Option<SocketAddr>;

/// Parses `0` (disabled), `:PORT` (all interfaces) or `HOST:PORT`.
fn parse_bind_address(value: &str) -> Result<BindAddress, String> {
    if value == "0" {
        return Ok(None);
    }
    if let Some(port) = value.strip_prefix(':') {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("invalid port in {value:?}"))?;
        return Ok(Some(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            port,
        )));
    }
    value
        .parse()
        .map(Some)
        .map_err(|_| format!("{value:?} is not `0`, `:PORT` or `HOST:PORT`"))
}

/// Parses a Go duration (`15s`, `500ms`, `1m30s`, `1.5s`: `kubeforge_shared::duration`, the
/// grammar of `#[controller(..)]`'s durations too). A bare number is refused as Go's flags refuse
/// it, with the fix: `15` is not a duration, write `15s`.
fn parse_duration(value: &str) -> Result<Duration, String> {
    kubeforge_shared::duration::parse(value).map_err(|e| format!("{value:?} {e}"))
}

/// Why an operator binary could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No usable cluster configuration.
    #[error("cannot configure the Kubernetes client: {0}")]
    Config(String),
    /// The apiserver did not answer.
    #[error("cannot reach the Kubernetes API server at {url}: {}", crate::client::readable(.source))]
    Unreachable {
        /// The server URL.
        url: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The leader-election settings are unusable.
    #[error(transparent)]
    LeaderElection(#[from] crate::leader::LeaderElectionError),
    /// The store backend settings are unusable.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A flag's value is unusable.
    #[error("{0}")]
    Flag(String),
}

impl Options {
    /// The command line of an operator: these flags under `about`'s name, version and
    /// description.
    #[must_use]
    pub fn command(about: About) -> clap::Command {
        let command = <Self as clap::Args>::augment_args(clap::Command::new(about.name))
            .version(about.version);
        if about.description.is_empty() {
            command
        } else {
            command.about(about.description)
        }
    }

    /// Parses `args` (the first is the program's path) with [`Options::command`].
    ///
    /// # Errors
    ///
    /// clap's error for a bad flag, and for `--help` and `--version` (`error.exit()` prints it
    /// and exits with clap's status).
    pub fn try_parse_from<I, T>(about: About, args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let mut command = Self::command(about);
        let matches = command.try_get_matches_from_mut(args)?;
        <Self as clap::FromArgMatches>::from_arg_matches(&matches)
            .map_err(|error| error.format(&mut command))
    }

    /// Parses the process's arguments; on `--help`, `--version` or a bad flag prints what clap
    /// prints and exits. [`parse!`] calls this with the operator's [`About`].
    #[must_use]
    pub fn parse_with(about: About) -> Self {
        Self::try_parse_from(about, std::env::args_os()).unwrap_or_else(|error| error.exit())
    }

    /// Initializes `tracing` output in the chosen format (level filter from `RUST_LOG`, default
    /// `info`), on stdout, coloured only when stdout is a terminal and `NO_COLOR` is not set;
    /// with `--otlp-traces`, also the span exporter ([`crate::otlp`]). Call once, first.
    ///
    /// An `OTEL_*` variable that cannot be used (with `--otlp-traces`) is printed and the
    /// process exits with status 2, as for a bad flag.
    pub fn init_tracing(&self) {
        if let Err(error) = self.try_init_tracing() {
            eprintln!("error: {error}");
            std::process::exit(2);
        }
    }

    /// As [`Options::init_tracing`], returning the exporter's configuration error instead of
    /// exiting.
    ///
    /// # Errors
    ///
    /// With `--otlp-traces`: an `OTEL_*` variable that cannot be used, or the exporter's thread
    /// could not start.
    pub fn try_init_tracing(&self) -> Result<(), StartError> {
        use tracing_subscriber::prelude::*;
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let ansi = colours(
            self.log_format,
            std::io::IsTerminal::is_terminal(&std::io::stdout()),
            std::env::var_os("NO_COLOR").as_deref(),
        );
        let otlp = if self.otlp_traces {
            let config = crate::otlp::OtlpConfig::from_env()
                .map_err(|e| StartError::Flag(format!("--otlp-traces: {e}")))?;
            let layer = crate::otlp::layer(&config).map_err(|e| {
                StartError::Flag(format!("--otlp-traces: starting the exporter: {e}"))
            })?;
            Some(layer.with_filter(crate::otlp::filter()))
        } else {
            None
        };
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stdout)
            .with_ansi(ansi);
        let result = match self.log_format {
            LogFormat::Text => tracing_subscriber::registry()
                .with(otlp)
                .with(fmt.with_filter(filter))
                .try_init(),
            LogFormat::Json => tracing_subscriber::registry()
                .with(otlp)
                .with(fmt.json().flatten_event(true).with_filter(filter))
                .try_init(),
        };
        // Already initialized (tests): keep the existing subscriber.
        let _ = result;
        Ok(())
    }

    /// A client from `--kubeconfig`, else inference (`KUBECONFIG`, `~/.kube/config`, in-cluster),
    /// rate-limited if `--kube-api-qps` is set, checked by asking the apiserver for its version.
    ///
    /// # Errors
    ///
    /// [`StartError::Config`] or [`StartError::Unreachable`], each one clear line.
    pub async fn client(&self) -> Result<kube::Client, StartError> {
        let mut config = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .map_err(|e| StartError::Config(format!("{}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| StartError::Config(format!("{}: {e}", path.display())))?
            }
            None => kube::Config::infer()
                .await
                .map_err(|e| StartError::Config(e.to_string()))?,
        };
        config.connect_timeout = Some(Duration::from_secs(5));
        let _ = self.connected.set(config.clone());
        let url = config.cluster_url.to_string();
        let client = match self.kube_api_qps {
            Some(qps) => crate::client::rate_limited_client(config, qps, self.kube_api_burst),
            None => crate::client::connect(config),
        }
        .map_err(|e| StartError::Config(e.to_string()))?;
        client
            .apiserver_version()
            .await
            .map_err(|source| StartError::Unreachable { url, source })?;
        Ok(client)
    }

    /// The namespaces `--namespace` names (all when it names none).
    pub fn namespaces(&self) -> crate::Namespaces {
        if self.namespace.is_empty() {
            crate::Namespaces::all()
        } else {
            crate::Namespaces::set(&self.namespace)
        }
    }

    /// A manager with the metrics, health and leader-election options applied. With
    /// `--leader-elect`, after [`Options::client`], the elector renews over a connection of its
    /// own (see [`LeaderElectionConfig::connection`]).
    ///
    /// # Errors
    ///
    /// Unusable leader-election timings.
    pub fn manager(&self, client: kube::Client) -> Result<Manager, StartError> {
        let mut manager = Manager::new(client.clone()).namespaces(self.namespaces());
        if let Some(addr) = self.metrics_bind_address {
            manager = manager.metrics_bind_address(addr);
        }
        if let Some(addr) = self.health_probe_bind_address {
            manager = manager.health_probe_bind_address(addr);
        }
        if self.leader_elect {
            let name = self.leader_election_id.clone().unwrap_or_else(binary_name);
            let namespace = self
                .leader_election_namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_owned());
            let mut config = LeaderElectionConfig::new(name, namespace).timings(
                self.leader_election_lease_duration,
                self.leader_election_renew_deadline,
                self.leader_election_retry_period,
            );
            // Renewals over a connection of their own (see `LeaderElectionConfig::connection`).
            if let Some(connected) = self.connected.get() {
                config = config.connection(connected.clone());
            }
            // Validate now, so a bad flag fails at start-up with one line.
            crate::leader::LeaderElector::new(client.clone(), config.clone())?;
            manager = manager
                .leader_election(config)
                .warm_up_before_leading(self.warm_standby);
        }
        if let Some(group) = &self.shards {
            let namespace = self
                .leader_election_namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_owned());
            let mut config = crate::shard::ShardConfig::new(group.clone(), namespace)
                .timings(
                    self.leader_election_lease_duration,
                    self.leader_election_renew_deadline,
                    self.leader_election_retry_period,
                )
                .mode(self.shard_mode);
            if let Some(connected) = self.connected.get() {
                config = config.connection(connected.clone());
            }
            config.check()?;
            manager = manager.shards(config);
        }
        #[cfg(feature = "webhooks")]
        {
            manager = manager.webhooks(self.webhook.options()?);
        }
        #[cfg(feature = "memcached")]
        if let Some(backend) = self.memcached.backend()? {
            manager = manager.store_backend(backend);
            if self.memcached.cache_store == "memcached" {
                manager = manager.informer_defaults(
                    crate::informer::InformerConfig::default().store_named("memcached"),
                );
            }
        }
        Ok(manager)
    }
}

/// Whether log lines in `format`, written to a terminal or not (`terminal`), get ANSI colours:
/// only text for a person at a terminal, and not when `NO_COLOR` is set to anything but the
/// empty string (<https://no-color.org>). Log collectors reading a pipe or a file get plain text.
fn colours(format: LogFormat, terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    format == LogFormat::Text && terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

fn binary_name() -> String {
    std::env::args()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "kubeforge-operator".to_owned())
}

/// Unwraps `result`, or prints `error: <message>` as one line on stderr and exits with status 1.
pub fn or_exit<T, E: Display>(result: Result<T, E>) -> T {
    match result {
        Ok(value) => value,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_should_follow_controller_runtime_conventions() {
        assert_eq!(parse_bind_address("0"), Ok(None));
        assert_eq!(
            parse_bind_address(":8080"),
            Ok(Some("0.0.0.0:8080".parse().unwrap()))
        );
        assert_eq!(
            parse_bind_address("127.0.0.1:9"),
            Ok(Some("127.0.0.1:9".parse().unwrap()))
        );
        assert!(parse_bind_address("nonsense").is_err());
        assert!(parse_bind_address(":99999").is_err());
    }

    #[test]
    fn durations_should_parse_with_units() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("3h"), Ok(Duration::from_secs(3 * 3600)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        // Go's flags refuse a number without a unit; so does this, and says what to write.
        let bare = parse_duration("3").unwrap_err();
        assert!(bare.contains("is not a duration"), "{bare}");
        assert!(bare.contains(r#"write "3s""#), "{bare}");
        let fast = parse_duration("fast").unwrap_err();
        assert!(fast.contains(r#"such as "500ms""#), "{fast}");
    }

    /// Issue 33, item 5: the duration flags take Go's syntax, as controller-runtime's do.
    #[test]
    fn duration_flags_should_take_go_durations_and_refuse_bare_numbers() {
        let o = Options::try_parse_from(
            OPERATOR,
            [
                "op",
                "--leader-election-lease-duration",
                "1m30s",
                "--leader-election-renew-deadline=1h",
                "--leader-election-retry-period",
                "500ms",
            ],
        )
        .unwrap();
        assert_eq!(o.leader_election_lease_duration, Duration::from_secs(90));
        assert_eq!(o.leader_election_renew_deadline, Duration::from_secs(3600));
        assert_eq!(o.leader_election_retry_period, Duration::from_millis(500));
        let bare =
            Options::try_parse_from(OPERATOR, ["op", "--leader-election-lease-duration", "15"])
                .unwrap_err();
        assert_eq!(bare.kind(), clap::error::ErrorKind::ValueValidation);
        let text = bare.to_string();
        assert!(text.contains("--leader-election-lease-duration"), "{text}");
        assert!(text.contains(r#"write "15s""#), "{text}");
    }

    #[test]
    fn colours_should_be_for_text_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(colours(LogFormat::Text, true, None));
        assert!(!colours(LogFormat::Text, false, None), "a pipe or a file");
        assert!(!colours(LogFormat::Text, true, Some(OsStr::new("1"))));
        // no-color.org: set and not empty.
        assert!(colours(LogFormat::Text, true, Some(OsStr::new(""))));
        assert!(!colours(LogFormat::Json, true, None));
    }

    /// Issue 33: a local operator whose kubeconfig names no namespace looked for its certificate
    /// Secret in `default`, and only `WebhookOptions::secret` could move it.
    #[cfg(feature = "webhooks")]
    #[test]
    fn webhook_cert_secret_should_place_the_certificate_secret() {
        let parse = |args: &[&str]| {
            Options::try_parse_from(OPERATOR, ["op"].iter().chain(args)).map(|o| o.webhook)
        };
        let flags = parse(&["--webhook-cert-secret", "operators/shop-cert"]).unwrap();
        let options = flags.options().unwrap();
        assert_eq!(
            options.secret,
            Some(("operators".to_owned(), "shop-cert".to_owned()))
        );
        assert_eq!(parse(&[]).unwrap().options().unwrap().secret, None);
        for bad in ["shop-cert", "/shop-cert", "operators/", "a/b/c"] {
            let error = parse(&["--webhook-cert-secret", bad])
                .unwrap()
                .options()
                .unwrap_err()
                .to_string();
            assert_eq!(
                error,
                format!("--webhook-cert-secret: expected NAMESPACE/NAME, got {bad:?}")
            );
        }
        let conflict = parse(&["--webhook-cert-secret=a/b", "--webhook-cert-dir=/certs"]);
        assert_eq!(
            conflict.unwrap_err().kind(),
            clap::error::ErrorKind::ArgumentConflict
        );
        let command = Options::command(OPERATOR);
        let arg = command
            .get_arguments()
            .find(|a| a.get_long() == Some("webhook-cert-secret"))
            .unwrap();
        assert_eq!(
            arg.get_env(),
            Some(std::ffi::OsStr::new("WEBHOOK_CERT_SECRET"))
        );
    }

    const OPERATOR: About = About {
        name: "shop-operator",
        version: "1.2.3",
        description: "Runs the shop.",
    };

    #[test]
    fn options_should_parse_flags_and_reject_bad_ones() {
        let o = Options::try_parse_from(
            OPERATOR,
            [
                "op",
                "--leader-elect",
                "--metrics-bind-address",
                ":9090",
                "--log-format",
                "json",
            ],
        )
        .unwrap();
        assert!(o.leader_elect);
        assert_eq!(
            o.metrics_bind_address,
            Some("0.0.0.0:9090".parse().unwrap())
        );
        assert_eq!(o.log_format, LogFormat::Json);
        assert_eq!(o.leader_election_lease_duration, Duration::from_secs(15));
        let err = Options::try_parse_from(OPERATOR, ["op", "--metrics-bind-address", "nowhere"])
            .unwrap_err();
        assert!(err.to_string().contains("nowhere"), "{err}");
        assert!(Options::try_parse_from(OPERATOR, ["op", "--no-such-flag"]).is_err());
    }

    /// Issue 12, item 10: `--version` and `--help` showed kubeforge's version and description.
    #[test]
    fn version_and_help_should_present_the_operator_not_kubeforge() {
        let version = Options::try_parse_from(OPERATOR, ["op", "--version"]).unwrap_err();
        assert_eq!(version.kind(), clap::error::ErrorKind::DisplayVersion);
        assert_eq!(version.to_string(), "shop-operator 1.2.3\n");

        let help = Options::try_parse_from(OPERATOR, ["/usr/bin/shop", "--help"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        let help = help.to_string();
        assert!(
            help.starts_with("Runs the shop.\n\nUsage: shop [OPTIONS]"),
            "{help}"
        );
        assert!(help.contains("--leader-elect"), "{help}");
        assert!(!help.contains(env!("CARGO_PKG_DESCRIPTION")), "{help}");

        let quiet = About {
            description: "",
            ..OPERATOR
        };
        let help = Options::try_parse_from(quiet, ["shop", "--help"]).unwrap_err();
        assert!(help.to_string().starts_with("Usage: shop"), "{help}");
    }

    #[test]
    fn options_flattened_into_an_operator_parser_should_keep_its_description() {
        /// Not shown: `about` below wins.
        #[derive(Debug, clap::Parser)]
        #[command(name = "shop-operator", version = "1.2.3", about = "Runs the shop.")]
        struct Flags {
            #[command(flatten)]
            kubeforge: Options,
            /// Image of the injected sidecar.
            #[arg(long, default_value = "sidecar:1")]
            sidecar_image: String,
        }
        use clap::Parser;

        let flags =
            Flags::try_parse_from(["shop", "--leader-elect", "--sidecar-image", "s:2"]).unwrap();
        assert!(flags.kubeforge.leader_elect);
        assert_eq!(flags.sidecar_image, "s:2");
        let help = Flags::try_parse_from(["shop", "--help"])
            .unwrap_err()
            .to_string();
        assert!(
            help.starts_with("Runs the shop.\n\nUsage: shop [OPTIONS]"),
            "{help}"
        );
        assert!(help.contains("--sidecar-image"), "{help}");
        assert!(!help.contains("The common options"), "{help}");
    }

    /// The book's reference of the flags, from clap's `Command` of [`Options`] (every feature
    /// on, as the book describes them).
    #[cfg(all(feature = "webhooks", feature = "memcached"))]
    fn reference() -> String {
        use std::fmt::Write as _;
        let escape = crate::text::table_cell;
        let command = Options::command(OPERATOR);
        let mut sections: Vec<(Option<&str>, Vec<&clap::Arg>)> = Vec::new();
        for arg in command.get_arguments() {
            if arg.is_hide_set() || arg.get_long().is_none() {
                continue;
            }
            let heading = arg.get_help_heading();
            match sections.iter_mut().find(|(h, _)| *h == heading) {
                Some((_, args)) => args.push(arg),
                None => sections.push((heading, vec![arg])),
            }
        }
        let mut page = String::from(
            "<!-- generated by kubeforge's cli::tests::reference_page_should_be_current \
             (runtime/src/cli/mod.rs); do not edit -->\n\
             # Operator flags\n\n\
             An operator binary that reads its command line with `kubeforge::cli::parse!()`, or \
             flattens `kubeforge::cli::Options` into a clap parser of its own (feature `cli`), \
             takes these flags, with controller-runtime's names. A flag with an environment \
             variable can be set there too; the command line wins. Durations are written as Go \
             writes them (`500ms`, `15s`, `1m30s`, `1.5h`); a number without a unit is refused. \
             `--help` prints the same list under the binary's name, and `--version` its \
             package's version.\n",
        );
        for (heading, args) in sections {
            let title = match heading {
                None => "Manager".to_owned(),
                Some(WEBHOOK_HEADING) => format!("{WEBHOOK_HEADING} (feature `webhooks`)"),
                Some(MEMCACHED_HEADING) => format!("{MEMCACHED_HEADING} (feature `memcached`)"),
                Some(other) => other.to_owned(),
            };
            let _ = write!(
                page,
                "\n## {title}\n\n| flag | environment | default | description |\n|---|---|---|---|\n"
            );
            for arg in args {
                let long = arg.get_long().unwrap_or_default();
                let takes_value = arg.get_action().takes_values();
                let values = arg.get_possible_values();
                let flag = if !takes_value {
                    format!("`--{long}`")
                } else if values.is_empty() {
                    let names = arg.get_value_names().unwrap_or_default();
                    let name = names
                        .first()
                        .map_or(long.to_uppercase(), ToString::to_string);
                    format!("`--{long} {name}`")
                } else {
                    let names: Vec<&str> = values.iter().map(|v| v.get_name()).collect();
                    format!("`--{long} {}`", names.join("\\|"))
                };
                let env = arg
                    .get_env()
                    .map_or("".to_owned(), |e| format!("`{}`", e.to_string_lossy()));
                let defaults: Vec<String> = arg
                    .get_default_values()
                    .iter()
                    .map(|d| d.to_string_lossy().into_owned())
                    .collect();
                let default = match (takes_value, defaults.is_empty()) {
                    (false, _) => "off".to_owned(),
                    (true, true) => "".to_owned(),
                    (true, false) => match defaults.join(",") {
                        empty if empty.is_empty() => "`\"\"`".to_owned(),
                        default => format!("`{default}`"),
                    },
                };
                let help = arg
                    .get_long_help()
                    .or_else(|| arg.get_help())
                    .map(ToString::to_string)
                    .unwrap_or_default();
                let _ = writeln!(page, "| {flag} | {env} | {default} | {} |", escape(&help));
            }
        }
        page
    }

    #[cfg(all(feature = "webhooks", feature = "memcached"))]
    #[test]
    fn reference_page_should_be_current() {
        crate::text::check_generated(
            "docs/src/reference/flags.md",
            &reference(),
            "cli::tests::reference_page_should_be_current",
        );
    }

    #[test]
    fn about_should_describe_the_crate_where_it_expands() {
        // Here that is kubeforge's library: no binary, so the package's name.
        assert_eq!(
            about!(),
            About {
                name: "kubeforge",
                version: env!("CARGO_PKG_VERSION"),
                description: env!("CARGO_PKG_DESCRIPTION"),
            }
        );
    }
}
