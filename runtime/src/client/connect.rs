//! Clients that notice a dead connection within seconds.
//!
//! A TCP connection can die without either end being told: a NAT entry expires, a load balancer
//! fails over, a route disappears. Nothing arrives any more, and nothing says so. kube's default
//! client speaks HTTP/1.1 without timeouts on reads, so a watch on such a connection waits for its
//! server-side timeout (about five minutes) and a request in flight waits for ever.
//!
//! [`connect`] builds a [`kube::Client`] that, like client-go, notices:
//!
//! - it negotiates **HTTP/2** and sends a **PING** when a connection has been quiet for
//!   [`ConnectionConfig::ping_interval`]; no answer within [`ConnectionConfig::ping_timeout`]
//!   closes the connection, which fails every request and watch on it (they are retried on a new
//!   one);
//! - every request other than a watch must produce its response headers within
//!   [`ConnectionConfig::request_timeout`], and its body may not stall longer than that;
//! - a watch's body may not stay silent longer than [`ConnectionConfig::watch_idle_timeout`]
//!   (this also covers servers or proxies that only speak HTTP/1.1, where there are no pings).
//!   A quiet watch hears nothing at all: the apiserver's bookmarks come about once a minute, and
//!   only when the kind's resourceVersion moved. So every watch is sent with a `timeoutSeconds`
//!   of two thirds of that deadline (60 s of 90 s; a smaller one the watch asked for is kept):
//!   the apiserver ends a healthy watch itself, the watcher resumes it from its resourceVersion at
//!   once, and only a dead one reaches the deadline. A streaming list (`sendInitialEvents`) keeps
//!   its own timeout, which its initial events need; over HTTP/2, where the pings watch the
//!   connection, its deadline is then that timeout plus 30 s.
//!
//! [`crate::cli::Options::client`] and the test harness build their clients this way.
//!
//! # Examples
//!
//! ```no_run
//! use std::time::Duration;
//! use kubeforge::client::{ConnectionConfig, connect_with};
//!
//! # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
//! let config = kube::Config::infer().await?;
//! let client = connect_with(config, &ConnectionConfig::default().ping(Duration::from_secs(5), Duration::from_secs(5)))?;
//! # let _ = client;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body::{Body, Frame};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::ConfigExt;
use kube::client::retry::RetryPolicy;
use tower::{Layer, Service, ServiceBuilder};
use tracing::Instrument;

use crate::BoxError;

use super::rate_limit::RateLimitLayer;

/// How a client built by [`connect_with`] detects dead connections (and limits its rate).
#[derive(Clone, Debug)]
pub struct ConnectionConfig {
    connect_timeout: Duration,
    ping_interval: Duration,
    ping_timeout: Duration,
    request_timeout: Option<Duration>,
    watch_idle_timeout: Option<Duration>,
    rate_limit: Option<(f64, u32)>,
}

impl Default for ConnectionConfig {
    /// 10 s to connect (TCP and TLS); ping after 5 s of quiet, give up after 5 more (a dead
    /// connection is closed within 10 s, and the requests in flight on it fail then); 60 s for a
    /// request (the apiserver's own limit); 90 s of watch silence.
    ///
    /// The pings are why the requests in flight on a dead connection are retried at all before
    /// their own deadline, so their interval and timeout are most of what a dead connection
    /// costs: with 10 s and 10 s, 41 reconciles in flight on a connection gone silent converged
    /// 20.5–21.6 s after the fault (the ping closed it 19.9 s after it; retrying them on a new
    /// connection took the rest), with 5 s and 5 s in 10.5–11.5 s. A ping costs a 17-byte frame
    /// each way; a ping timeout must still cover the apiserver's answer on a loaded machine
    /// (a PING is answered before the data queued on the connection).
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(5),
            ping_timeout: Duration::from_secs(5),
            request_timeout: Some(Duration::from_secs(60)),
            watch_idle_timeout: Some(Duration::from_secs(90)),
            rate_limit: None,
        }
    }
}

impl ConnectionConfig {
    /// Deadline of a new connection: TCP connect and TLS handshake together (a handshake with
    /// a silent peer would otherwise wait for the request deadline). `kube::Config`'s
    /// `connect_timeout`, when shorter, applies too.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Ping a connection quiet for `interval`; close it when the answer takes longer than
    /// `timeout`. A dead connection is noticed within `interval + timeout`.
    #[must_use]
    pub fn ping(mut self, interval: Duration, timeout: Duration) -> Self {
        self.ping_interval = interval.max(Duration::from_millis(100));
        self.ping_timeout = timeout.max(Duration::from_millis(100));
        self
    }

    /// Deadline of a request other than a watch: for its response headers, and for each stall of
    /// its body (`None`: no deadline).
    #[must_use]
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The longest silence of a watch before it is considered dead (`None`: wait for ever).
    ///
    /// Each watch's `timeoutSeconds` is lowered to two thirds of it (at least 1 s), so that the
    /// apiserver ends a healthy but quiet watch before this deadline passes (see the
    /// [module](self) docs): a shorter deadline notices a dead HTTP/1.1 connection sooner, at
    /// the cost of resuming every watch that often.
    #[must_use]
    pub fn watch_idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.watch_idle_timeout = timeout;
        self
    }

    /// Limit requests to `qps` per second with bursts of `burst` (client-go's `--kube-api-qps`
    /// and `--kube-api-burst`).
    #[must_use]
    pub fn rate_limit(mut self, qps: f64, burst: u32) -> Self {
        self.rate_limit = Some((qps, burst));
        self
    }
}

/// A client for `config` with the default [`ConnectionConfig`].
///
/// # Errors
///
/// An unusable configuration (certificates, credentials, proxy).
pub fn connect(config: kube::Config) -> Result<kube::Client, kube::Error> {
    connect_with(config, &ConnectionConfig::default())
}

/// A client for `config` that detects dead connections as `connection` says.
///
/// `config.proxy_url` is not supported (an error); `config.connect_timeout` applies.
///
/// # Errors
///
/// An unusable configuration (certificates, credentials, a proxy, a bad rate).
pub fn connect_with(
    config: kube::Config,
    connection: &ConnectionConfig,
) -> Result<kube::Client, kube::Error> {
    if let Some(proxy) = &config.proxy_url {
        return Err(kube::Error::Service(
            format!("kubeforge's client does not support proxies ({proxy})").into(),
        ));
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    http.set_nodelay(true);
    let mut tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(name.clone())
            .map_err(|e| kube::Error::Service(format!("tls-server-name {name}: {e}").into()))?;
        tls = tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let connector = ConnectTimeout {
        inner: tls.enable_http1().enable_http2().wrap_connector(http),
        timeout: config
            .connect_timeout
            .map_or(connection.connect_timeout, |t| {
                t.min(connection.connect_timeout)
            }),
    };
    let hyper = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(connection.ping_interval)
        .http2_keep_alive_timeout(connection.ping_timeout)
        .http2_keep_alive_while_idle(true)
        // Go's HTTP/2 client windows (4 MiB per stream, 1 GiB per connection): hyper's default
        // 64 KiB window makes a large list wait on window updates.
        .http2_initial_stream_window_size(4 << 20)
        .http2_initial_connection_window_size(1 << 30)
        .build(connector);
    let rate_limit = connection
        .rate_limit
        .map(|(qps, burst)| RateLimitLayer::new(qps, burst))
        .transpose()
        .map_err(|e| kube::Error::Service(e.to_string().into()))?;
    let service = ServiceBuilder::new()
        .option_layer(rate_limit)
        .layer(config.base_uri_layer())
        // As kube's default client: 429, 503 and 504 are retried (honouring Retry-After).
        .option_layer(
            config
                .default_retry
                .then(|| tower::retry::RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(DeadlinesLayer {
            request: connection.request_timeout,
            watch_idle: connection.watch_idle_timeout,
        })
        .service(hyper);
    Ok(kube::Client::new(service, config.default_namespace))
}

/// A connector whose connections (TCP and TLS) must be up within `timeout`.
#[derive(Clone, Debug)]
struct ConnectTimeout<C> {
    inner: C,
    timeout: Duration,
}

impl<C> Service<http::Uri> for ConnectTimeout<C>
where
    C: Service<http::Uri>,
    C::Error: Into<BoxError>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<C::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let timeout = self.timeout;
        let connecting = self.inner.call(uri);
        async move {
            tokio::time::timeout(timeout, connecting)
                .await
                .map_err(|_| DeadlineError::Connect(timeout))?
                .map_err(Into::into)
        }
        .boxed()
    }
}

/// Whether a request is a watch (`watch=true` or `watch=1` in its query).
fn is_watch(uri: &http::Uri) -> bool {
    has_pair(uri, &["watch=true", "watch=1"])
}

/// Whether `uri`'s query holds one of `pairs` (`key=value`, as sent).
fn has_pair(uri: &http::Uri, pairs: &[&str]) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|pair| pairs.contains(&pair)))
}

/// Margin between the end a watch's `timeoutSeconds` promises and the idle deadline of a watch
/// that keeps its own (see [`WatchLimits`]).
const SERVER_END_MARGIN: Duration = Duration::from_secs(30);

/// The `timeoutSeconds` that makes the apiserver end a healthy watch before `idle` passes
/// without a frame: two thirds of it (60 s of 90 s), at least 1 s (`0` would mean the
/// apiserver's own, 30 to 60 minutes).
fn server_timeout_within(idle: Duration) -> u64 {
    (idle.as_secs() * 2 / 3).max(1)
}

/// The `timeoutSeconds` of `uri` (the longest the apiserver keeps the watch), if it has one.
fn server_timeout(uri: &http::Uri) -> Option<u64> {
    uri.query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("timeoutSeconds="))
        .and_then(|seconds| seconds.parse().ok())
}

/// `uri` with `timeoutSeconds={seconds}` in place of its own (added when it has none).
fn with_server_timeout(uri: &http::Uri, seconds: u64) -> Option<http::Uri> {
    let kept = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty() && !pair.starts_with("timeoutSeconds="));
    let query = std::iter::once(format!("timeoutSeconds={seconds}"))
        .chain(kept.map(str::to_owned))
        .collect::<Vec<_>>()
        .join("&");
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(format!("{}?{query}", uri.path()).parse().ok()?);
    http::Uri::from_parts(parts).ok()
}

/// How a watch is kept from being presumed dead while it is healthy.
///
/// The apiserver sends a watch's events and, to watchers that ask for them, bookmarks; but only
/// about once a minute, and none while the kind's resourceVersion does not move (a quiet kind in a
/// quiet cluster: a ConfigMap watch can hear nothing for the watch's whole life, 290 s with kube's
/// watcher, 30 to 60 minutes by the apiserver's default). Silence alone therefore cannot tell a
/// dead connection from a quiet watch, unless the watch is known to end sooner: its
/// `timeoutSeconds` is lowered to [`server_timeout_within`] the idle deadline, so the apiserver
/// itself ends a healthy watch (cleanly: the watcher resumes it from its resourceVersion at
/// once, logged at `debug`) before the deadline can pass.
///
/// A streaming list (`sendInitialEvents=true`) keeps its timeout: its initial events must all
/// arrive before it ends, or the watcher starts the list again, and a large one could never
/// finish within a minute. Over HTTP/2 (the pings watch the connection) its idle deadline is
/// then the end its timeout promises plus a margin; over HTTP/1.1 the idle deadline stays.
#[derive(Clone, Copy, Debug, PartialEq)]
struct WatchLimits {
    /// The `timeoutSeconds` to send instead of the request's own (`None`: keep it).
    server_timeout: Option<u64>,
    /// The idle deadline over HTTP/1.1.
    idle: Option<Duration>,
    /// The idle deadline over HTTP/2.
    idle_h2: Option<Duration>,
}

impl WatchLimits {
    fn of(uri: &http::Uri, idle: Option<Duration>) -> WatchLimits {
        let Some(idle) = idle else {
            return WatchLimits {
                server_timeout: None,
                idle: None,
                idle_h2: None,
            };
        };
        let within = server_timeout_within(idle);
        // `timeoutSeconds=0` asks for the apiserver's default.
        let requested = server_timeout(uri).filter(|&seconds| seconds > 0);
        if !has_pair(uri, &["sendInitialEvents=true"]) {
            return WatchLimits {
                server_timeout: Some(requested.map_or(within, |r| r.min(within))),
                idle: Some(idle),
                idle_h2: Some(idle),
            };
        }
        WatchLimits {
            server_timeout: None,
            idle: Some(idle),
            // No timeoutSeconds: the apiserver picks one (at most an hour); the pings watch
            // the connection meanwhile.
            idle_h2: requested.map(|r| idle.max(Duration::from_secs(r) + SERVER_END_MARGIN)),
        }
    }

    /// The idle deadline of a response of `version`.
    fn idle(&self, version: http::Version) -> Option<Duration> {
        if version == http::Version::HTTP_2 {
            self.idle_h2
        } else {
            self.idle
        }
    }
}

/// A request or a watch took longer than its deadline.
#[derive(Debug, thiserror::Error)]
pub enum DeadlineError {
    /// No connection (TCP and TLS) within the connect timeout.
    #[error("could not connect to the apiserver within {0:?}")]
    Connect(Duration),
    /// No response headers within the request timeout.
    #[error("no response from the apiserver within {0:?}")]
    Response(Duration),
    /// The response body stalled longer than allowed.
    #[error("the apiserver sent nothing for {0:?}; the connection is presumed dead")]
    Idle(Duration),
}

/// Applies [`ConnectionConfig::request_timeout`] and [`ConnectionConfig::watch_idle_timeout`].
#[derive(Clone, Copy, Debug)]
struct DeadlinesLayer {
    request: Option<Duration>,
    watch_idle: Option<Duration>,
}

impl<S> Layer<S> for DeadlinesLayer {
    type Service = Deadlines<S>;
    fn layer(&self, inner: S) -> Deadlines<S> {
        Deadlines {
            inner,
            limits: *self,
        }
    }
}

#[derive(Clone, Debug)]
struct Deadlines<S> {
    inner: S,
    limits: DeadlinesLayer,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Deadlines<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    ResBody: Body<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<IdleTimeout<ResBody>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let idle = if is_watch(request.uri()) {
            let limits = WatchLimits::of(request.uri(), self.limits.watch_idle);
            if let Some(uri) = limits
                .server_timeout
                .and_then(|seconds| with_server_timeout(request.uri(), seconds))
            {
                *request.uri_mut() = uri;
            }
            limits
        } else {
            WatchLimits {
                server_timeout: None,
                idle: self.limits.request,
                idle_h2: self.limits.request,
            }
        };
        let limit = self.limits.request;
        let method = request.method().clone();
        let host = request.uri().authority().map(ToString::to_string);
        let span = request_span(&method, request.uri());
        let in_span = span.clone();
        let response = self.inner.call(request);
        let sent = std::time::Instant::now();
        async move {
            let response: Result<_, BoxError> = match limit {
                Some(limit) => match tokio::time::timeout(limit, response).await {
                    Ok(answered) => answered.map_err(Into::into),
                    Err(_) => Err(DeadlineError::Response(limit).into()),
                },
                None => response.await.map_err(Into::into),
            };
            super::metrics::observe(
                method.as_str(),
                host.as_deref().unwrap_or(""),
                response.as_ref().ok().map(|r| r.status().as_u16()),
                sent.elapsed(),
            );
            if !span.is_none() {
                match &response {
                    Ok(answer) => {
                        let code = answer.status().as_u16();
                        span.record("code", code);
                        if code >= 400 {
                            span.record("error", answer.status().to_string().as_str());
                        }
                    }
                    Err(error) => {
                        span.record("error", error.to_string().as_str());
                    }
                }
            }
            let response = response?;
            let idle = idle.idle(response.version());
            Ok(response.map(|body| IdleTimeout::new(body, idle)))
        }
        .instrument(in_span)
        .boxed()
    }
}

/// A client span for a request made inside another span (a reconcile): what an exported trace
/// shows as the reconcile's writes. `debug`, so the default log filter disables it and a
/// process that exports nothing pays one callsite check; watches get none (they outlive it).
fn request_span(method: &http::Method, uri: &http::Uri) -> tracing::Span {
    if !tracing::enabled!(target: "kubeforge::client", tracing::Level::DEBUG)
        || tracing::Span::current().is_none()
        || is_watch(uri)
    {
        return tracing::Span::none();
    }
    let target = ApiPath::parse(uri.path());
    let verb = target.verb(method, uri.query().unwrap_or(""));
    tracing::debug_span!(
        target: "kubeforge::client",
        "request",
        otel.name = %format_args!("{verb} {}", target.resource),
        otel.kind = "client",
        verb,
        resource = target.resource,
        namespace = target.namespace,
        name = target.name,
        subresource = target.subresource,
        code = tracing::field::Empty,
        error = tracing::field::Empty,
    )
}

/// What a Kubernetes API path names: `/api/v1/namespaces/NS/RESOURCE/NAME/SUBRESOURCE` or
/// `/apis/GROUP/VERSION/...`; absent parts are empty.
#[derive(Debug, Default, PartialEq, Eq)]
struct ApiPath<'a> {
    namespace: &'a str,
    resource: &'a str,
    name: &'a str,
    subresource: &'a str,
}

impl<'a> ApiPath<'a> {
    fn parse(path: &'a str) -> Self {
        let mut parts = path.trim_start_matches('/').split('/');
        let rest: Vec<&str> = match parts.next() {
            Some("api") => parts.skip(1).collect(),
            Some("apis") => parts.skip(2).collect(),
            _ => return Self::default(),
        };
        let (namespace, rest) = match rest.as_slice() {
            ["namespaces", ns, resource, rest @ ..] => (*ns, {
                let mut v = vec![*resource];
                v.extend_from_slice(rest);
                v
            }),
            _ => ("", rest),
        };
        Self {
            namespace,
            resource: rest.first().copied().unwrap_or(""),
            name: rest.get(1).copied().unwrap_or(""),
            subresource: rest.get(2).copied().unwrap_or(""),
        }
    }

    /// kubectl's verbs: `get`/`list`, `create`, `update`, `patch`, `delete`/`deletecollection`.
    fn verb(&self, method: &http::Method, query: &str) -> &'static str {
        let named = !self.name.is_empty();
        match *method {
            http::Method::GET if named => "get",
            http::Method::GET
                if query
                    .split('&')
                    .any(|p| p == "watch=true" || p == "watch=1") =>
            {
                "watch"
            }
            http::Method::GET => "list",
            http::Method::POST => "create",
            http::Method::PUT => "update",
            http::Method::PATCH => "patch",
            http::Method::DELETE if named => "delete",
            http::Method::DELETE => "deletecollection",
            _ => "other",
        }
    }
}

/// A response body that fails when no frame arrives for `idle`.
///
/// A frame only records when it arrived; the timer, armed once, is moved on lazily when it
/// fires early, so a busy stream costs no timer operation per frame.
pub struct IdleTimeout<B> {
    inner: Pin<Box<B>>,
    idle: Option<Duration>,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    last_frame: tokio::time::Instant,
}

impl<B> std::fmt::Debug for IdleTimeout<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdleTimeout")
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

impl<B> IdleTimeout<B> {
    fn new(inner: B, idle: Option<Duration>) -> Self {
        Self {
            inner: Box::pin(inner),
            idle,
            timer: None,
            last_frame: tokio::time::Instant::now(),
        }
    }
}

impl<B> Body for IdleTimeout<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.inner.as_mut().poll_frame(cx) {
            Poll::Ready(frame) => {
                if self.idle.is_some() {
                    self.last_frame = tokio::time::Instant::now();
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let Some(idle) = self.idle else {
                    return Poll::Pending;
                };
                loop {
                    let deadline = self.last_frame + idle;
                    let timer = self
                        .timer
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                    if timer.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    if timer.deadline() >= deadline {
                        self.timer = None;
                        return Poll::Ready(Some(Err(DeadlineError::Idle(idle).into())));
                    }
                    // Frames came since the timer was armed: move it to the new deadline.
                    timer.as_mut().reset(deadline);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::BodyExt;

    use super::*;

    #[test]
    fn api_paths_name_their_resource_and_verb() {
        let p = ApiPath::parse("/apis/apps/v1/namespaces/shop/deployments/web");
        assert_eq!(
            p,
            ApiPath {
                namespace: "shop",
                resource: "deployments",
                name: "web",
                subresource: ""
            }
        );
        assert_eq!(p.verb(&http::Method::PATCH, ""), "patch");
        let p = ApiPath::parse("/apis/apps.kubeforge.dev/v2/namespaces/shop/webapps/web/status");
        assert_eq!(
            (p.resource, p.name, p.subresource),
            ("webapps", "web", "status")
        );
        let p = ApiPath::parse("/api/v1/namespaces/shop/configmaps");
        assert_eq!(
            (p.namespace, p.resource, p.name),
            ("shop", "configmaps", "")
        );
        assert_eq!(p.verb(&http::Method::GET, "labelSelector=a"), "list");
        assert_eq!(p.verb(&http::Method::GET, "watch=true&rv=1"), "watch");
        assert_eq!(p.verb(&http::Method::POST, ""), "create");
        assert_eq!(p.verb(&http::Method::DELETE, ""), "deletecollection");
        let p = ApiPath::parse("/api/v1/namespaces/shop");
        assert_eq!(
            (p.namespace, p.resource, p.name),
            ("", "namespaces", "shop")
        );
        assert_eq!(p.verb(&http::Method::DELETE, ""), "delete");
        let p = ApiPath::parse("/apis/rbac.authorization.k8s.io/v1/clusterroles/admin");
        assert_eq!((p.resource, p.name), ("clusterroles", "admin"));
        assert_eq!(p.verb(&http::Method::PUT, ""), "update");
        assert_eq!(ApiPath::parse("/version"), ApiPath::default());
    }

    #[test]
    fn watches_should_be_told_from_other_requests() {
        let uri = |s: &str| s.parse::<http::Uri>().unwrap();
        assert!(is_watch(&uri("/api/v1/pods?watch=true&resourceVersion=1")));
        assert!(is_watch(&uri(
            "/api/v1/pods?allowWatchBookmarks=true&watch=1"
        )));
        assert!(!is_watch(&uri("/api/v1/pods?limit=500")));
        assert!(!is_watch(&uri("/api/v1/namespaces/watch")));
    }

    #[test]
    fn a_watch_should_be_sent_with_a_server_timeout_below_its_idle_deadline() {
        let uri = |s: &str| s.parse::<http::Uri>().unwrap();
        let idle = Some(Duration::from_secs(90));
        // kube's watcher asks for 290 s: the apiserver would keep a quiet watch silent that long.
        let kube = uri(
            "https://h:6443/api/v1/namespaces/a/configmaps?watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion=7",
        );
        let limits = WatchLimits::of(&kube, idle);
        assert_eq!(limits.server_timeout, Some(60));
        let sent = with_server_timeout(&kube, 60).unwrap();
        assert_eq!(
            sent.to_string(),
            "https://h:6443/api/v1/namespaces/a/configmaps?timeoutSeconds=60&watch=true&allowWatchBookmarks=true&resourceVersion=7"
        );
        assert_eq!(server_timeout(&sent), Some(60));
        assert_eq!(limits.idle(http::Version::HTTP_11), idle);
        assert_eq!(limits.idle(http::Version::HTTP_2), idle);
        // A shorter timeout is kept; none, or 0 (the apiserver's default: up to an hour), is set.
        assert_eq!(
            WatchLimits::of(&uri("/api/v1/pods?watch=1&timeoutSeconds=5"), idle).server_timeout,
            Some(5)
        );
        for query in ["watch=1", "watch=1&timeoutSeconds=0"] {
            let limits = WatchLimits::of(&uri(&format!("/api/v1/pods?{query}")), idle);
            assert_eq!(limits.server_timeout, Some(60), "{query}");
        }
        assert_eq!(
            with_server_timeout(&uri("/api/v1/pods?watch=1"), 60)
                .unwrap()
                .to_string(),
            "/api/v1/pods?timeoutSeconds=60&watch=1"
        );
        // A tiny deadline still gets a real timeout (`0` would be the apiserver's default).
        assert_eq!(server_timeout_within(Duration::from_millis(1500)), 1);
        // Without an idle deadline nothing changes.
        assert_eq!(WatchLimits::of(&kube, None).server_timeout, None);
    }

    #[test]
    fn a_streaming_list_should_keep_its_timeout_and_rely_on_pings_over_http2() {
        let uri: http::Uri =
            "/api/v1/pods?watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                .parse()
                .unwrap();
        let limits = WatchLimits::of(&uri, Some(Duration::from_secs(90)));
        assert_eq!(limits.server_timeout, None);
        assert_eq!(
            limits.idle(http::Version::HTTP_2),
            Some(Duration::from_secs(320))
        );
        assert_eq!(
            limits.idle(http::Version::HTTP_11),
            Some(Duration::from_secs(90))
        );
    }

    /// A body that yields one frame, then nothing for ever.
    struct Stalling(bool);

    impl Body for Stalling {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            if self.0 {
                Poll::Pending
            } else {
                self.0 = true;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"{}\n")))))
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_body_should_fail_after_the_idle_timeout() {
        let started = tokio::time::Instant::now();
        let mut body = IdleTimeout::new(Stalling(false), Some(Duration::from_secs(90)));
        assert!(body.frame().await.unwrap().is_ok());
        let error = body.frame().await.unwrap().unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(90));
        assert!(error.to_string().contains("presumed dead"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn frames_should_keep_a_body_alive_and_the_silence_after_the_last_one_should_count() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|frame| (frame, rx))
        });
        let mut body = IdleTimeout::new(
            http_body_util::StreamBody::new(stream),
            Some(Duration::from_secs(90)),
        );
        let started = tokio::time::Instant::now();
        tokio::spawn(async move {
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_secs(60)).await;
                let _ = tx.send(Ok(Frame::data(Bytes::from_static(b"{}\n")))).await;
            }
            std::future::pending::<()>().await; // keep the channel open, silent
        });
        for _ in 0..3 {
            assert!(body.frame().await.unwrap().is_ok());
        }
        assert!(body.frame().await.unwrap().is_err());
        // Three frames 60 s apart kept it alive; it failed 90 s after the last one.
        assert_eq!(started.elapsed(), Duration::from_secs(180 + 90));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_without_response_should_time_out_but_a_watch_body_should_not_on_that_deadline()
     {
        let layer = DeadlinesLayer {
            request: Some(Duration::from_secs(60)),
            watch_idle: None,
        };
        let mut never = layer.layer(tower::service_fn(|_: Request<()>| {
            std::future::pending::<Result<Response<Stalling>, Infallible>>()
        }));
        let error = never
            .call(Request::get("/api/v1/pods").body(()).unwrap())
            .await
            .unwrap_err();
        assert!(error.to_string().contains("no response"), "{error}");

        let mut watch = layer.layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Stalling(false)))
        }));
        let response = watch
            .call(Request::get("/api/v1/pods?watch=true").body(()).unwrap())
            .await
            .unwrap();
        let mut body = response.into_body();
        assert!(body.frame().await.unwrap().is_ok());
        let waited = tokio::time::timeout(Duration::from_secs(600), body.frame()).await;
        assert!(waited.is_err(), "a watch without idle timeout must wait");
    }
}
