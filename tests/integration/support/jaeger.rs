//! A Jaeger all-in-one backend for the tracing test: the binary `controlplane/jaeger/build.sh`
//! builds from the pinned Go module (cached beside the control plane; CI builds it while the
//! plane builds), run with `controlplane/jaeger/config.yaml` on free loopback ports, and its
//! query API (`/api/traces`) read over plain HTTP.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::process::Spawned;

pub struct Jaeger {
    process: Spawned,
    query_port: u16,
    otlp_port: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The directory holding the `jaeger` binary: `KUBEFORGE_JAEGER_BIN`, else what the build script
/// prints (it returns at once when the cache holds the build).
fn binary_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KUBEFORGE_JAEGER_BIN") {
        return dir.into();
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../controlplane/jaeger/build.sh"
    );
    let out = Command::new(script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {script}: {e}"));
    assert!(out.status.success(), "{script} failed: {}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .last()
        .expect("the bin directory")
        .trim()
        .into()
}

impl Jaeger {
    /// Starts Jaeger and waits (up to 60 s) for its query API to answer.
    pub async fn start() -> Self {
        let bin = binary_dir().join("jaeger");
        let config = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../controlplane/jaeger/config.yaml"
        );
        let (query_port, otlp_port) = (free_port(), free_port());
        let mut command = Command::new(&bin);
        command
            .args(["--config", config])
            .env("JAEGER_QUERY_PORT", query_port.to_string())
            .env("JAEGER_QUERY_GRPC_PORT", free_port().to_string())
            .env("JAEGER_OTLP_PORT", otlp_port.to_string());
        let mut jaeger = Self {
            process: Spawned::start(command),
            query_port,
            otlp_port,
        };
        let started = std::time::Instant::now();
        loop {
            if jaeger.get("/api/services").await.is_some() {
                return jaeger;
            }
            assert!(
                jaeger.process.running(),
                "jaeger exited:\n{}",
                jaeger.process.tail()
            );
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "jaeger's query API did not answer within 60 s:\n{}",
                jaeger.process.tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The OTLP/HTTP base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn otlp_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.otlp_port)
    }

    /// `GET path` on the query API: the JSON body of a 200 answer, else `None`.
    pub async fn get(&self, path: &str) -> Option<serde_json::Value> {
        serde_json::from_str(&http_get(self.query_port, path).await?).ok()
    }

    /// The traces of `service` (up to 100) as Jaeger's API returns them (`data`).
    pub async fn traces(&self, service: &str) -> Vec<serde_json::Value> {
        self.get(&format!(
            "/api/traces?service={service}&limit=100&lookback=1h"
        ))
        .await
        .and_then(|body| body["data"].as_array().cloned())
        .unwrap_or_default()
    }
}

/// `GET path` from `127.0.0.1:port` over HTTP/1.0: the body of a 200 answer, else `None`.
pub async fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let ok = head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200");
    ok.then(|| body.to_owned())
}
