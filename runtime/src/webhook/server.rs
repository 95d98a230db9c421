//! The HTTPS server: one listener for every kind's webhooks, routed by path, each review answered
//! within the kind's timeout, with controller-runtime's webhook metrics.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use kube::Client;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::admission::{Hook, HookVersion, Reviewed};
use super::conversion::KindConversions;

/// The largest review body read (the apiserver's own request limit is 3 MiB; a review holds the
/// object and the old object).
const MAX_BODY: usize = 7 * 1024 * 1024;

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a path serves.
#[derive(Clone)]
pub(crate) enum Handler {
    /// An admission webhook (`AdmissionReview`), and the version its objects are brought to
    /// when its kind converts.
    Admission(Arc<dyn Hook>, Option<HookVersion>),
    /// A kind's conversion webhook (`ConversionReview`).
    Conversion(Arc<KindConversions>),
}

/// One served webhook: its handler, and how long it may take.
#[derive(Clone)]
pub(crate) struct Route {
    pub(crate) handler: Handler,
    /// Answer before the apiserver gives up (its `timeoutSeconds`), so a slow hook is a clear
    /// error in our log and, through a 504, the webhook's failure policy decides.
    pub(crate) timeout: Duration,
    /// `Kind` for the rejection metric.
    pub(crate) kind: String,
}

/// The webhook metrics, under controller-runtime's names (label `webhook`: the path).
#[derive(Clone)]
pub(crate) struct WebhookMetrics {
    requests: IntCounterVec,
    in_flight: IntGaugeVec,
    latency: HistogramVec,
    rejections: IntCounterVec,
}

impl WebhookMetrics {
    /// Registers the metrics in `registry` (reuses them when already there).
    pub(crate) fn new(registry: &Registry) -> Self {
        let requests = IntCounterVec::new(
            Opts::new(
                "controller_runtime_webhook_requests_total",
                "Total number of admission requests by HTTP status code.",
            ),
            &["webhook", "code"],
        );
        let in_flight = IntGaugeVec::new(
            Opts::new(
                "controller_runtime_webhook_requests_in_flight",
                "Current number of admission requests being served.",
            ),
            &["webhook"],
        );
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "controller_runtime_webhook_latency_seconds",
                "Histogram of the latency of processing admission requests",
            ),
            &["webhook"],
        );
        let rejections = IntCounterVec::new(
            Opts::new(
                "kubeforge_webhook_rejections_total",
                "Admission requests denied, by webhook, kind and operation.",
            ),
            &["webhook", "kind", "operation"],
        );
        // The names and labels are constants: these cannot fail.
        let (Ok(requests), Ok(in_flight), Ok(latency), Ok(rejections)) =
            (requests, in_flight, latency, rejections)
        else {
            unreachable!("constant metric definitions")
        };
        for collector in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(in_flight.clone()),
            Box::new(latency.clone()),
            Box::new(rejections.clone()),
        ] {
            // Already registered by an earlier manager on this registry: keep counting there.
            let _ = registry.register(collector);
        }
        Self {
            requests,
            in_flight,
            latency,
            rejections,
        }
    }

    /// One series of each metric, every label `_` (for the metrics reference, which renders
    /// what a registry gathers: only metrics with series).
    #[cfg(test)]
    pub(crate) fn touch(&self) {
        self.requests.with_label_values(&["_", "_"]);
        self.in_flight.with_label_values(&["_"]);
        self.latency.with_label_values(&["_"]);
        self.rejections.with_label_values(&["_", "_", "_"]);
    }
}

/// The routes and what they share.
pub(crate) struct Server {
    pub(crate) routes: HashMap<String, Route>,
    pub(crate) client: Client,
    pub(crate) metrics: WebhookMetrics,
    /// Events about the annotations conversions dropped.
    pub(crate) drops: Arc<super::kept::DropEvents>,
}

impl Server {
    /// Serves `listener` with `tls` until `shutdown`; then every open connection finishes the
    /// request in flight and is closed (a keep-alive connection the apiserver pools would
    /// otherwise go on reaching a manager that has stopped).
    pub(crate) async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        tls: TlsAcceptor,
        shutdown: CancellationToken,
    ) {
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, "webhook server: accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = shutdown.cancelled() => return,
            };
            let (server, tls, shutdown) = (Arc::clone(&self), tls.clone(), shutdown.clone());
            tokio::spawn(async move {
                let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await
                {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(error)) => {
                        tracing::debug!(%peer, %error, "webhook server: TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                };
                let service = service_fn(move |request| {
                    let server = Arc::clone(&server);
                    async move { Ok::<_, Infallible>(server.handle(request).await) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                let mut connection = std::pin::pin!(connection);
                let ended = tokio::select! {
                    ended = connection.as_mut() => ended,
                    () = shutdown.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        connection.await
                    }
                };
                if let Err(error) = ended {
                    tracing::debug!(%peer, %error, "webhook server: connection ended");
                }
            });
        }
    }

    async fn handle(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = request.uri().path().to_owned();
        let Some(route) = self.routes.get(&path).cloned() else {
            return plain(StatusCode::NOT_FOUND, format!("no webhook at {path}"));
        };
        if request.method() != Method::POST {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "POST an AdmissionReview");
        }
        let metrics = &self.metrics;
        let in_flight = metrics.in_flight.with_label_values(&[&path]);
        in_flight.inc();
        let started = Instant::now();
        let response = self.review(&path, &route, request).await;
        in_flight.dec();
        metrics
            .latency
            .with_label_values(&[&path])
            .observe(started.elapsed().as_secs_f64());
        metrics
            .requests
            .with_label_values(&[&path, response.status().as_str()])
            .inc();
        response
    }

    async fn review(
        &self,
        path: &str,
        route: &Route,
        request: Request<Incoming>,
    ) -> Response<Full<Bytes>> {
        let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
            Ok(body) => body.to_bytes(),
            Err(error) => {
                return plain(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the review: {error}"),
                );
            }
        };
        let (hook, version) = match &route.handler {
            Handler::Admission(hook, version) => (hook, version.as_ref()),
            Handler::Conversion(conversions) => {
                let (review, dropped) = conversions.review(&body);
                self.drops.report(dropped);
                if review
                    .response
                    .as_ref()
                    .is_some_and(|r| r.result.is_failure())
                {
                    self.metrics
                        .rejections
                        .with_label_values(&[path, &route.kind, "CONVERT"])
                        .inc();
                }
                return json(&review);
            }
        };
        let reviewing = hook.review(&body, self.client.clone(), version);
        let Ok(Reviewed {
            response,
            operation,
        }) = tokio::time::timeout(route.timeout, reviewing).await
        else {
            tracing::error!(
                webhook = path,
                timeout = ?route.timeout,
                "webhook did not answer in time; the webhook's failure policy decides"
            );
            return plain(
                StatusCode::GATEWAY_TIMEOUT,
                format!("webhook {path} did not answer within {:?}", route.timeout),
            );
        };
        if !response.allowed {
            let operation = operation
                .map(|o| format!("{o:?}").to_uppercase())
                .unwrap_or_default();
            self.metrics
                .rejections
                .with_label_values(&[path, &route.kind, &operation])
                .inc();
            tracing::debug!(webhook = path, %operation, message = %response.result.message, "denied");
        }
        json(&response.into_review())
    }
}

fn json(review: &impl serde::Serialize) -> Response<Full<Bytes>> {
    match serde_json::to_vec(review) {
        Ok(json) => Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(json)))
            .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "")),
        Err(error) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode the review: {error}"),
        ),
    }
}

fn plain(status: StatusCode, text: impl Into<String>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text.into())));
    *response.status_mut() = status;
    response
}

/// Dials `addr` and completes a TLS handshake trusting only `ca` (PEM): the readiness check of
/// the webhook server, through the address the apiserver uses when it is known.
pub(crate) async fn probe(addr: SocketAddr, server_name: &str, ca: &[u8]) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(ca) {
        let cert: rustls::pki_types::CertificateDer<'static> =
            cert.map_err(|e| format!("CA bundle: {e}"))?;
        roots.add(cert).map_err(|e| format!("CA bundle: {e}"))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(server_name.to_owned())
        .map_err(|e| format!("server name {server_name}: {e}"))?;
    let connect = async {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake with {addr}: {e}"))
    };
    tokio::time::timeout(Duration::from_secs(3), connect)
        .await
        .map_err(|_| format!("no TLS handshake with {addr} within 3s"))?
        .map(|_| ())
}
