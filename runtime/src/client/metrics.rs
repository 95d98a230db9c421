//! client-go's `rest_client_*` series, for every request a client built by
//! [`connect`](fn@crate::client::connect) sends: requests by method, host and status code,
//! and their latency (until the response headers) by verb and host. Process-wide, as in
//! client-go: one registry however many clients and managers a process has.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus::proto::MetricFamily;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

struct Series {
    registry: Registry,
    requests: IntCounterVec,
    duration: HistogramVec,
}

/// client-go's buckets for `rest_client_request_duration_seconds`.
const BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

static SERIES: LazyLock<Option<Series>> = LazyLock::new(|| {
    let registry = Registry::new();
    let requests = IntCounterVec::new(
        Opts::new(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
        ),
        &["code", "host", "method"],
    )
    .ok()?;
    let duration = HistogramVec::new(
        HistogramOpts::new(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
        )
        .buckets(BUCKETS.to_vec()),
        &["host", "verb"],
    )
    .ok()?;
    registry.register(Box::new(requests.clone())).ok()?;
    registry.register(Box::new(duration.clone())).ok()?;
    Some(Series {
        registry,
        requests,
        duration,
    })
});

/// A request to `host` with `method` ended with `code` (`None`: no response, counted as
/// `<error>` as client-go does) after `took`.
pub(crate) fn observe(method: &str, host: &str, code: Option<u16>, took: Duration) {
    let Some(series) = SERIES.as_ref() else {
        return;
    };
    let code = code.map_or_else(|| "<error>".to_owned(), |c| c.to_string());
    series
        .requests
        .with_label_values(&[code.as_str(), host, method])
        .inc();
    series
        .duration
        .with_label_values(&[host, method])
        .observe(took.as_secs_f64());
}

/// The families, as of now.
pub(crate) fn families() -> Vec<MetricFamily> {
    SERIES
        .as_ref()
        .map(|series| series.registry.gather())
        .unwrap_or_default()
}
