//! The exporter: a thread of its own (with a small tokio runtime) that batches finished spans and
//! POSTs them to the OTLP/HTTP endpoint. The operator's runtime never waits for it: a span that
//! finds the queue full is dropped and counted, and a failed export is logged and counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio::sync::{mpsc, oneshot};

use super::config::{OtlpConfig, Protocol};
use super::encode::{self, FinishedSpan, Origin, Value};

/// Spans exported, dropped (queue full or export failed) and failed export requests, for
/// `/metrics` (`kubeforge_otlp_*`).
pub(crate) static EXPORTED: AtomicU64 = AtomicU64::new(0);
pub(crate) static DROPPED: AtomicU64 = AtomicU64::new(0);
pub(crate) static FAILED_REQUESTS: AtomicU64 = AtomicU64::new(0);

enum Message {
    Span(Box<FinishedSpan>),
    Flush(oneshot::Sender<()>),
}

/// The sending side, held by the layer.
#[derive(Clone)]
pub(crate) struct Exporter {
    tx: mpsc::Sender<Message>,
}

impl Exporter {
    /// Queues a finished span; drops it when the queue is full.
    pub(crate) fn send(&self, span: FinishedSpan) {
        if self.tx.try_send(Message::Span(Box::new(span))).is_err() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends everything queued so far; returns when it was sent (or failed), or after `within`.
    pub(crate) async fn flush(&self, within: Duration) {
        let (done, sent) = oneshot::channel();
        if self.tx.send(Message::Flush(done)).await.is_ok() {
            let _ = tokio::time::timeout(within, sent).await;
        }
    }

    /// Starts the exporter's thread.
    pub(crate) fn start(config: &OtlpConfig) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel(config.max_queue_size);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let worker = Worker::new(config);
        std::thread::Builder::new()
            .name("otlp-exporter".to_owned())
            .spawn(move || runtime.block_on(worker.run(rx)))?;
        Ok(Self { tx })
    }
}

type HttpClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

struct Worker {
    endpoint: String,
    protocol: Protocol,
    headers: Vec<(String, String)>,
    timeout: Duration,
    schedule_delay: Duration,
    batch_size: usize,
    resource: Vec<(String, Value)>,
    client: HttpClient,
    /// When the last failure was logged: failures are logged at most once a minute.
    last_warning: Option<tokio::time::Instant>,
}

impl Worker {
    fn new(config: &OtlpConfig) -> Self {
        let mut resource = vec![
            (
                "service.name".to_owned(),
                Value::Str(config.service_name.clone()),
            ),
            (
                "telemetry.sdk.name".to_owned(),
                Value::Str("kubeforge".into()),
            ),
            (
                "telemetry.sdk.language".to_owned(),
                Value::Str("rust".into()),
            ),
            (
                "telemetry.sdk.version".to_owned(),
                Value::Str(env!("CARGO_PKG_VERSION").into()),
            ),
        ];
        resource.extend(
            config
                .resource
                .iter()
                .map(|(k, v)| (k.clone(), Value::Str(v.clone()))),
        );
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        Self {
            endpoint: config.endpoint.clone(),
            protocol: config.protocol,
            headers: config.headers.clone(),
            timeout: config.timeout,
            schedule_delay: config.schedule_delay,
            batch_size: config.max_export_batch_size,
            resource,
            client,
            last_warning: None,
        }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Message>) {
        let mut batch: Vec<FinishedSpan> = Vec::new();
        let mut due: Option<tokio::time::Instant> = None;
        loop {
            let received = match due {
                Some(at) => tokio::select! {
                    message = rx.recv() => message,
                    () = tokio::time::sleep_until(at) => {
                        self.send(&mut batch).await;
                        due = None;
                        continue;
                    }
                },
                None => rx.recv().await,
            };
            match received {
                Some(Message::Span(span)) => {
                    batch.push(*span);
                    if batch.len() >= self.batch_size {
                        self.send(&mut batch).await;
                        due = None;
                    } else if due.is_none() {
                        due = Some(tokio::time::Instant::now() + self.schedule_delay);
                    }
                }
                Some(Message::Flush(done)) => {
                    // Whatever is queued behind this message is not part of the flush.
                    while !batch.is_empty() {
                        self.send(&mut batch).await;
                    }
                    due = None;
                    let _ = done.send(());
                }
                None => {
                    self.send(&mut batch).await;
                    return;
                }
            }
        }
    }

    /// Sends up to one batch of `batch` (the oldest spans), removing them.
    async fn send(&mut self, batch: &mut Vec<FinishedSpan>) {
        if batch.is_empty() {
            return;
        }
        let take = batch.len().min(self.batch_size);
        let spans: Vec<FinishedSpan> = batch.drain(..take).collect();
        let origin = Origin {
            resource: &self.resource,
            scope: "kubeforge",
            version: env!("CARGO_PKG_VERSION"),
        };
        let body = Bytes::from(match self.protocol {
            Protocol::HttpProtobuf => encode::protobuf(&origin, &spans),
            Protocol::HttpJson => encode::json(&origin, &spans),
        });
        // Retried twice on what OTLP calls retryable (429, 502, 503, 504, no connection).
        let mut failure = String::new();
        for attempt in 0..3u32 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
            }
            match self.post(body.clone()).await {
                Ok(()) => {
                    EXPORTED.fetch_add(spans.len() as u64, Ordering::Relaxed);
                    return;
                }
                Err((retryable, message)) => {
                    FAILED_REQUESTS.fetch_add(1, Ordering::Relaxed);
                    failure = message;
                    if !retryable {
                        break;
                    }
                }
            }
        }
        DROPPED.fetch_add(spans.len() as u64, Ordering::Relaxed);
        let now = tokio::time::Instant::now();
        if self
            .last_warning
            .is_none_or(|at| now.duration_since(at) >= Duration::from_secs(60))
        {
            self.last_warning = Some(now);
            tracing::warn!(endpoint = %self.endpoint, error = %failure, dropped = spans.len(), "exporting spans failed (logged at most once a minute; kubeforge_otlp_spans_dropped_total counts them)");
        }
    }

    async fn post(&self, body: Bytes) -> Result<(), (bool, String)> {
        let mut request = http::Request::post(&self.endpoint)
            .header(http::header::CONTENT_TYPE, self.protocol.content_type());
        for (k, v) in &self.headers {
            request = request.header(k.as_str(), v.as_str());
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| (false, e.to_string()))?;
        let response = tokio::time::timeout(self.timeout, self.client.request(request))
            .await
            .map_err(|_| (true, format!("no answer within {:?}", self.timeout)))?
            .map_err(|e| (true, e.to_string()))?;
        let status = response.status();
        // Read the body so the connection can be reused.
        let text = tokio::time::timeout(self.timeout, response.into_body().collect())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
            .unwrap_or_default();
        if status.is_success() {
            return Ok(());
        }
        let retryable = matches!(status.as_u16(), 429 | 502 | 503 | 504);
        Err((
            retryable,
            format!("{status}: {}", crate::text::truncate(text, 200)),
        ))
    }
}
