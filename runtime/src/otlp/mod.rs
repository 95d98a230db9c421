//! Spans exported with OpenTelemetry's protocol (OTLP over HTTP), off unless asked for.
//!
//! With `--otlp-traces` ([`crate::cli::Options::init_tracing`]) or [`layer`] in your own
//! subscriber, every reconcile is a span with its trigger, the API requests it made (a client
//! span each: verb, resource, namespace, name, status code) and its outcome, and the reconciles
//! of one object's generation share one trace: the spec change, the reconciles that waited for
//! its children, and the one that set `Ready` read as one timeline in Jaeger, Tempo or any OTLP
//! backend. The standard `OTEL_*` variables configure it ([`OtlpConfig::from_env`]).
//!
//! The exporter is kubeforge's own, written against the OTLP specification (`http/protobuf`,
//! the default, or `http/json`): it adds no dependency, runs on a thread of its own, and never
//! makes a reconcile wait; a span that finds its queue full is dropped and counted.
//!
//! When it is off, nothing of it runs: the worker checks one flag per reconcile, and the request
//! spans are `debug` spans that the default log filter disables.
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let otlp = kubeforge::otlp::layer(&kubeforge::otlp::OtlpConfig::from_env()?)?;
//! tracing_subscriber::registry()
//!     .with(tracing_subscriber::fmt::layer().with_filter(tracing_subscriber::EnvFilter::new("info")))
//!     .with(otlp.with_filter(kubeforge::otlp::filter()))
//!     .init();
//! # Ok(())
//! # }
//! ```

pub(crate) mod ids;

#[cfg(feature = "otlp")]
mod config;
#[cfg(feature = "otlp")]
mod encode;
#[cfg(feature = "otlp")]
mod export;
#[cfg(feature = "otlp")]
mod layer;

#[cfg(feature = "otlp")]
pub use config::{ConfigError, OtlpConfig, Protocol, Sampler};
#[cfg(feature = "otlp")]
pub use layer::OtlpLayer;

#[cfg(feature = "otlp")]
static EXPORTER: std::sync::OnceLock<export::Exporter> = std::sync::OnceLock::new();

/// The exporter's layer, with its thread started. Add it to a `tracing_subscriber` registry,
/// behind [`filter`] (or a filter of your own). One exporter per process: a second call returns a
/// layer that sends to the first one's thread.
///
/// # Errors
///
/// The exporter's thread could not be started.
#[cfg(feature = "otlp")]
pub fn layer(config: &OtlpConfig) -> std::io::Result<OtlpLayer> {
    let exporter = match EXPORTER.get() {
        Some(exporter) => exporter.clone(),
        None => {
            let started = export::Exporter::start(config)?;
            EXPORTER.get_or_init(|| started).clone()
        }
    };
    ids::set_exporting(true);
    Ok(OtlpLayer {
        exporter,
        sampler: config.sampler,
    })
}

/// What is exported: spans and events at `info` and above, and kubeforge's API request spans
/// (`debug`, so that the log output, filtered by `RUST_LOG`, does not pay for them).
#[cfg(feature = "otlp")]
#[must_use]
pub fn filter() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::INFO)
        .with_target("kubeforge::client", tracing::Level::DEBUG)
}

/// Sends the spans finished so far; waits at most `within`. The manager calls it when it stops
/// (`Manager::run`), so the last reconciles before a SIGTERM reach the backend.
pub async fn flush(within: std::time::Duration) {
    #[cfg(feature = "otlp")]
    if let Some(exporter) = EXPORTER.get() {
        exporter.flush(within).await;
    }
    #[cfg(not(feature = "otlp"))]
    let _ = within;
}

/// The exporter's series for `/metrics` (none while nothing is exported).
pub(crate) fn families() -> Vec<prometheus::proto::MetricFamily> {
    #[cfg(feature = "otlp")]
    if EXPORTER.get().is_some() {
        return counter_families();
    }
    Vec::new()
}

#[cfg(feature = "otlp")]
fn counter_families() -> Vec<prometheus::proto::MetricFamily> {
    use prometheus::core::Collector;
    use std::sync::atomic::Ordering::Relaxed;
    let mut families = Vec::new();
    for (name, help, value) in [
        (
            "kubeforge_otlp_spans_exported_total",
            "Spans the OTLP exporter sent and the endpoint accepted.",
            &export::EXPORTED,
        ),
        (
            "kubeforge_otlp_spans_dropped_total",
            "Spans dropped: the exporter's queue was full (OTEL_BSP_MAX_QUEUE_SIZE) or their export failed.",
            &export::DROPPED,
        ),
        (
            "kubeforge_otlp_export_failures_total",
            "OTLP export requests that failed (each is retried twice when retryable).",
            &export::FAILED_REQUESTS,
        ),
    ] {
        if let Ok(counter) = prometheus::IntCounter::new(name, help) {
            counter.inc_by(value.load(Relaxed));
            families.extend(counter.collect());
        }
    }
    families
}

/// The series with zero values, for the metrics reference.
#[cfg(all(test, feature = "otlp"))]
pub(crate) fn reference_families() -> Vec<prometheus::proto::MetricFamily> {
    counter_families()
}
