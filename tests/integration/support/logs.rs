//! Log lines captured in-process: `#[tokio::test]` runs on one thread, so a thread-local
//! subscriber sees everything the controllers and informers of the test log.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// The log lines at `info` and above of this test's thread, one JSON object each.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures this thread's log lines until the guard is dropped.
    pub fn capture() -> (Logs, kubeforge::tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_max_level(kubeforge::tracing::Level::INFO)
            .with_writer(move || writer.clone())
            .finish();
        (
            logs,
            kubeforge::tracing::subscriber::set_default(subscriber),
        )
    }

    /// Every line captured so far, as JSON.
    pub fn json(&self) -> Vec<Value> {
        self.text()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .collect()
    }

    /// The captured text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Forgets what was captured so far.
    pub fn clear(&self) {
        self.0.lock().unwrap().clear();
    }

    /// The fields of each line at `level` with `message`, about `kind`.
    pub fn lines(&self, level: &str, message: &str, kind: &str) -> Vec<Value> {
        self.json()
            .into_iter()
            .filter(|line| line["level"] == level)
            .map(|line| line["fields"].clone())
            .filter(|fields| fields["message"] == message && fields["kind"] == kind)
            .collect()
    }

    /// The only line at `level` with `message` about `kind` (the capture in the panic message).
    pub fn one(&self, level: &str, message: &str, kind: &str) -> Value {
        let mut lines = self.lines(level, message, kind);
        assert_eq!(
            lines.len(),
            1,
            "one {level} {message:?} expected; the log:\n{}",
            self.text()
        );
        lines.remove(0)
    }

    /// Waits for a line at `level` with `message` about `kind` (the capture in the panic message).
    pub async fn wait_for(&self, level: &str, message: &str, kind: &str, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        while self.lines(level, message, kind).is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {level} line {message:?} within {within:?}; the log:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
