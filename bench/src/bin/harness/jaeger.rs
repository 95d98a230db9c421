//! The Jaeger the `-traced` drivers export their spans to (the kubeforge driver with the OTLP
//! exporter on, as `--otlp-traces` sets it up): the binary `controlplane/jaeger/build.sh` builds
//! and caches (the tracing test's), run with `controlplane/jaeger/config.yaml` on free loopback
//! ports, killed when the harness ends. Its CPU is not the driver's: the column measures what
//! exporting costs the operator.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether the driver `name` exports its spans.
pub(super) fn traced(name: &str) -> bool {
    name.ends_with("-traced")
}

pub(super) struct Jaeger {
    child: Child,
    otlp_port: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Jaeger {
    /// Builds Jaeger if its cache lacks it, starts it, and waits for its OTLP port.
    pub(super) fn start() -> Self {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let script = format!("{root}/controlplane/jaeger/build.sh");
        let built = Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .expect("controlplane/jaeger/build.sh runs");
        assert!(built.status.success(), "{script} failed");
        let bin = String::from_utf8_lossy(&built.stdout)
            .lines()
            .last()
            .expect("the bin directory")
            .trim()
            .to_owned();
        let otlp_port = free_port();
        let child = Command::new(format!("{bin}/jaeger"))
            .args([
                "--config",
                &format!("{root}/controlplane/jaeger/config.yaml"),
            ])
            .env("JAEGER_QUERY_PORT", free_port().to_string())
            .env("JAEGER_QUERY_GRPC_PORT", free_port().to_string())
            .env("JAEGER_OTLP_PORT", otlp_port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("jaeger starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", otlp_port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "jaeger's OTLP port did not open in 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Self { child, otlp_port }
    }

    /// What a traced driver is started with: the exporter on, pointed at this Jaeger.
    pub(super) fn configure(&self, command: &mut Command) {
        command
            .env("BENCH_OTLP", "1")
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{}", self.otlp_port),
            )
            .env("OTEL_SERVICE_NAME", "bench-kubeforge")
            .env("OTEL_BSP_SCHEDULE_DELAY", "1000");
    }
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
