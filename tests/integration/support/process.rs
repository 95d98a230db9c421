//! Operator processes the tests freeze, thaw and kill.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Sends `signal` (`-STOP`, `-CONT`, ...) to `child`.
pub fn signal(child: &Child, signal: &str) {
    let pid = child.id().to_string();
    let status = Command::new("kill").args([signal, &pid]).status().unwrap();
    assert!(status.success(), "kill {signal} {pid}: {status}");
}

/// Whether `child` is stopped (state `T` in `/proc/<pid>/stat`).
pub fn stopped(child: &Child) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id()));
    // The state follows the command name, which is in parentheses.
    stat.ok()
        .and_then(|s| Some(s[s.rfind(')')? + 1..].trim_start().starts_with('T')))
        .unwrap_or(false)
}

/// Whether `child` has exited (a zombie not reaped yet, state `Z`, or reaped and gone).
pub fn exited(child: &Child) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id()));
    match stat {
        Ok(s) => s
            .rfind(')')
            .is_some_and(|at| s[at + 1..].trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

/// Kills `child` and reaps it; a frozen process is continued first (it ignores SIGKILL until
/// then).
pub fn kill(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-CONT", &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// An operator run as a separate process, killed when dropped (a failed test leaves no process
/// behind); every line of its stdout and stderr is collected, in arrival order per stream.
pub struct Spawned {
    child: Child,
    output: Arc<Mutex<Vec<String>>>,
}

impl Spawned {
    /// Starts `command` with stdin closed and its output collected.
    pub fn start(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
        let output: Arc<Mutex<Vec<String>>> = Arc::default();
        let collect = |stream: Box<dyn Read + Send>| {
            let output = Arc::clone(&output);
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    output.lock().unwrap().push(line);
                }
            });
        };
        collect(Box::new(child.stdout.take().unwrap()));
        collect(Box::new(child.stderr.take().unwrap()));
        Self { child, output }
    }

    /// Sends `signal` (`-TERM`, `-STOP`, ...).
    pub fn signal(&self, signal_name: &str) {
        signal(&self.child, signal_name);
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.output.lock().unwrap().clone()
    }

    /// Whether a line so far contains `wanted`.
    pub fn has_line(&self, wanted: &str) -> bool {
        self.output
            .lock()
            .unwrap()
            .iter()
            .any(|line| line.contains(wanted))
    }

    /// The last 40 lines, for failure messages.
    pub fn tail(&self) -> String {
        let lines = self.lines();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Waits up to `timeout` for the process to exit: its status and how long that took.
    pub async fn exit_within(&mut self, timeout: Duration) -> (ExitStatus, Duration) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, start.elapsed());
            }
            assert!(
                start.elapsed() < timeout,
                "still running {timeout:?} after the signal:\n{}",
                self.tail()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, then the exit status (within 30 s).
    pub async fn stop(mut self) -> ExitStatus {
        self.signal("-TERM");
        self.exit_within(Duration::from_secs(30)).await.0
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        kill(&mut self.child);
    }
}
