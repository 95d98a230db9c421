//! Health probes (`/healthz`, `/readyz`) and the small HTTP server that also serves `/metrics`.
//!
//! Probes follow the apiserver's conventions: `GET /readyz` answers `200 ok` when every check
//! passes and `500` with the failing checks otherwise; `?verbose` lists every check
//! (`[+]informer-sync ok`, `[-]db failed: ...`); `GET /readyz/<check>` runs one check.
//!
//! The manager registers `ping` (liveness) and `informer-sync` (readiness: every informer has
//! completed its first list, except those configured with `ignore_sync_for_health`); add your own
//! with [`Manager::liveness_check`](crate::manager::Manager::liveness_check) and
//! [`Manager::readiness_check`](crate::manager::Manager::readiness_check). After them come the
//! checks of the parts running now, gathered from the manager's runners at each probe
//! ([`Runnable::health_checks`](crate::runner::Runnable::health_checks)):
//! `controller-<name>`, `watcher-<name>`, `crd-<name>`.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A named health check: `Ok` is healthy, `Err(reason)` is not.
pub type Check = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// A [`Check`] from an async closure.
pub fn check<F, Fut>(f: F) -> Check
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    Arc::new(move || Box::pin(f()))
}

/// Renders the Prometheus text of `/metrics`, at each scrape.
pub(crate) type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Lists checks that change while the server runs (those of the running components), at each
/// probe.
pub(crate) type Checks = Arc<dyn Fn() -> Vec<(String, Check)> + Send + Sync>;

/// What the HTTP server serves.
#[derive(Clone, Default)]
pub(crate) struct Endpoints {
    pub(crate) metrics: Option<Render>,
    pub(crate) liveness: Vec<(String, Check)>,
    pub(crate) readiness: Vec<(String, Check)>,
    /// Readiness checks asked for at each probe, after `readiness`.
    pub(crate) more_readiness: Option<Checks>,
    /// Liveness checks asked for at each probe, after `liveness`.
    pub(crate) more_liveness: Option<Checks>,
    pub(crate) health: bool,
}

type Reply = (StatusCode, &'static str, String);

impl Endpoints {
    async fn handle(&self, path: &str, query: Option<&str>) -> Reply {
        let verbose = query.is_some_and(|q| {
            q.split('&')
                .any(|p| p == "verbose" || p.starts_with("verbose="))
        });
        let text = "text/plain; charset=utf-8";
        if path == "/metrics"
            && let Some(render) = &self.metrics
        {
            return (
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                render(),
            );
        }
        if self.health {
            let mut readiness = self.readiness.clone();
            if let Some(more) = &self.more_readiness {
                readiness.extend(more());
            }
            let mut liveness = self.liveness.clone();
            if let Some(more) = &self.more_liveness {
                liveness.extend(more());
            }
            for (prefix, checks) in [("/healthz", &liveness), ("/readyz", &readiness)] {
                let kind = &prefix[1..];
                if path == prefix {
                    return run_checks(kind, checks.iter().collect(), verbose).await;
                }
                if let Some(name) = path.strip_prefix(prefix).and_then(|p| p.strip_prefix('/')) {
                    return match checks.iter().find(|(n, _)| n == name) {
                        Some(check) => run_checks(kind, vec![check], verbose).await,
                        None => (
                            StatusCode::NOT_FOUND,
                            text,
                            format!("no {kind} check named {name}\n"),
                        ),
                    };
                }
            }
        }
        (StatusCode::NOT_FOUND, text, "not found\n".to_owned())
    }
}

async fn run_checks(kind: &str, checks: Vec<&(String, Check)>, verbose: bool) -> Reply {
    let mut report = String::new();
    let mut failed = false;
    for (name, check) in checks {
        match check().await {
            Ok(()) => report.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                failed = true;
                report.push_str(&format!("[-]{name} failed: {reason}\n"));
            }
        }
    }
    let text = "text/plain; charset=utf-8";
    if failed {
        report.push_str(&format!("{kind} check failed\n"));
        (StatusCode::INTERNAL_SERVER_ERROR, text, report)
    } else if verbose {
        report.push_str(&format!("{kind} check passed\n"));
        (StatusCode::OK, text, report)
    } else {
        (StatusCode::OK, text, "ok".to_owned())
    }
}

/// Binds `addr` (fails at once if it cannot) and returns the server future and the bound address.
pub(crate) async fn bind(
    addr: SocketAddr,
    endpoints: Endpoints,
) -> std::io::Result<(SocketAddr, impl Future<Output = ()> + Send + use<>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let endpoints = Arc::new(endpoints);
    let serve = async move {
        let shutdown = CancellationToken::new();
        let _stop_connections = shutdown.clone().drop_guard();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let endpoints = Arc::clone(&endpoints);
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let endpoints = Arc::clone(&endpoints);
                    async move {
                        let (status, content_type, body) = endpoints
                            .handle(request.uri().path(), request.uri().query())
                            .await;
                        let response = Response::builder()
                            .status(status)
                            .header("content-type", content_type)
                            .body(Full::new(Bytes::from(body)))
                            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())));
                        Ok::<_, Infallible>(response)
                    }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                tokio::select! {
                    _ = connection => {}
                    () = shutdown.cancelled() => {}
                }
            });
        }
    };
    Ok((local, serve))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints() -> Endpoints {
        Endpoints {
            metrics: None,
            liveness: vec![("ping".into(), check(|| async { Ok(()) }))],
            readiness: vec![
                ("informer-sync".into(), check(|| async { Ok(()) })),
                (
                    "db".into(),
                    check(|| async { Err("connection refused".into()) }),
                ),
            ],
            more_readiness: Some(Arc::new(|| {
                vec![("controller-a".into(), check(|| async { Ok(()) }))]
            })),
            more_liveness: None,
            health: true,
        }
    }

    #[tokio::test]
    async fn probes_should_report_like_the_apiserver() {
        let e = endpoints();
        assert_eq!(e.handle("/healthz", None).await.2, "ok");
        let (status, _, body) = e.handle("/healthz", Some("verbose")).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, "[+]ping ok\nhealthz check passed\n")
        );
        let (status, _, body) = e.handle("/readyz", None).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            body,
            "[+]informer-sync ok\n[-]db failed: connection refused\n[+]controller-a ok\nreadyz check failed\n"
        );
        let (status, _, _) = e.handle("/readyz/informer-sync", None).await;
        assert_eq!(status, StatusCode::OK);
        let (status, _, body) = e.handle("/readyz/controller-a", Some("verbose")).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, "[+]controller-a ok\nreadyz check passed\n"),
            "a check asked for at probe time"
        );
        assert_eq!(
            e.handle("/readyz/nope", None).await.0,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            e.handle("/metrics", None).await.0,
            StatusCode::NOT_FOUND,
            "metrics not enabled"
        );
    }
}
