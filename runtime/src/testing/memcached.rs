//! A real memcached server on loopback, for tests of the memcached store backend.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TestingError;

/// How long a server may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How often to try binding a port when another process took it first.
const ATTEMPTS: usize = 5;

/// A `memcached` process on `127.0.0.1` and a port of its own, killed when the value is dropped.
///
/// The binary is `$KUBEFORGE_MEMCACHED`, else `memcached` on `PATH`, else `/usr/bin/memcached`
/// (Debian's `memcached` package). It runs in the foreground with UDP off and the given memory
/// limit; a small watchdog kills it if the test process dies without dropping the value.
///
/// # Examples
///
/// ```no_run
/// use kubeforge::testing::MemcachedServer;
///
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// let mut server = MemcachedServer::start(64).await?;
/// let addr = server.addr(); // "127.0.0.1:<port>", for MemcachedConfig::new([addr])
/// server.stop(); // unreachable now: connections are refused
/// server.start_again().await?; // same port, empty
/// # let _ = addr;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MemcachedServer {
    binary: PathBuf,
    port: u16,
    memory_mb: u32,
    running: Option<Running>,
}

/// The memcached process and its watchdog.
#[derive(Debug)]
struct Running {
    memcached: Child,
    watchdog: Option<Child>,
}

impl Drop for MemcachedServer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl MemcachedServer {
    /// Starts memcached with `memory_mb` megabytes for items on a free port of `127.0.0.1`, and
    /// waits until it answers.
    ///
    /// # Errors
    ///
    /// memcached is not installed ([`TestingError::NotInstalled`]), does not start or exits
    /// ([`TestingError::Process`], with its stderr), or does not answer within 10 s
    /// ([`TestingError::Timeout`]).
    pub async fn start(memory_mb: u32) -> Result<Self, TestingError> {
        let binary = binary()?;
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let port = free_port(&binary)?;
            let mut server = MemcachedServer {
                binary: binary.clone(),
                port,
                memory_mb,
                running: None,
            };
            match server.launch().await {
                Ok(()) => return Ok(server),
                // Another process bound the port between our probe and memcached: another port.
                Err(Launch::PortTaken(error)) => last = Some(error),
                Err(Launch::Failed(error)) => return Err(error),
            }
        }
        Err(last.unwrap_or_else(|| TestingError::Process {
            program: binary,
            message: "found no free port".to_owned(),
        }))
    }

    /// The server's address, `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's port (the same across [`MemcachedServer::start_again`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id of the running memcached, if it runs.
    pub fn pid(&self) -> Option<u32> {
        self.running.as_ref().map(|running| running.memcached.id())
    }

    /// Kills memcached (`SIGKILL`) and waits until it is gone: its port refuses connections and
    /// open connections see their end. Does nothing if it is not running.
    pub fn stop(&mut self) {
        if let Some(mut running) = self.running.take() {
            if let Some(mut watchdog) = running.watchdog.take() {
                let _ = watchdog.kill();
                let _ = watchdog.wait();
            }
            let _ = running.memcached.kill();
            let _ = running.memcached.wait();
        }
    }

    /// Starts memcached again on the same port, empty, and waits until it answers; a running
    /// one is stopped first. Together with [`MemcachedServer::stop`], a restart with a gap.
    ///
    /// # Errors
    ///
    /// As [`MemcachedServer::start`]; also when another process took the port meanwhile.
    pub async fn start_again(&mut self) -> Result<(), TestingError> {
        self.stop();
        let mut last = None;
        for _ in 0..ATTEMPTS {
            match self.launch().await {
                Ok(()) => return Ok(()),
                Err(Launch::PortTaken(error)) => {
                    last = Some(error);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(Launch::Failed(error)) => return Err(error),
            }
        }
        Err(last.unwrap_or_else(|| TestingError::Process {
            program: self.binary.clone(),
            message: format!("port {} stayed taken", self.port),
        }))
    }

    /// Restarts memcached: [`stop`](MemcachedServer::stop), then
    /// [`start_again`](MemcachedServer::start_again). Every item is lost.
    ///
    /// # Errors
    ///
    /// As [`MemcachedServer::start_again`].
    pub async fn restart(&mut self) -> Result<(), TestingError> {
        self.stop();
        self.start_again().await
    }

    /// memcached's resident memory (`VmRSS` of `/proc/<pid>/status`), for benchmarks; `None`
    /// when it is not running or the figure cannot be read (not Linux).
    pub fn rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
        let kib: u64 = line
            .trim_start_matches("VmRSS:")
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    }

    /// Spawns memcached on `self.port` and waits until it answers `version`.
    async fn launch(&mut self) -> Result<(), Launch> {
        let mut memcached = Command::new(&self.binary)
            .args(["-l", "127.0.0.1", "-U", "0"])
            .args(["-p", &self.port.to_string()])
            .args(["-m", &self.memory_mb.to_string()])
            // memcached refuses to run as root without a user to switch to; otherwise `-u` is
            // ignored.
            .args(["-u", "root"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                Launch::Failed(TestingError::Process {
                    program: self.binary.clone(),
                    message: format!("could not run it: {e}"),
                })
            })?;
        let watchdog = watchdog(memcached.id());
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = memcached.try_wait() {
                let mut stderr = String::new();
                if let Some(mut pipe) = memcached.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                stop_watchdog(watchdog);
                let error = TestingError::Process {
                    program: self.binary.clone(),
                    message: format!(
                        "exited ({status}) before accepting connections on port {}:\n{}",
                        self.port,
                        stderr.trim_end()
                    ),
                };
                return Err(if stderr.contains("already in use") {
                    Launch::PortTaken(error)
                } else {
                    Launch::Failed(error)
                });
            }
            if answers(self.port).await {
                self.running = Some(Running {
                    memcached,
                    watchdog,
                });
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = memcached.kill();
                let _ = memcached.wait();
                stop_watchdog(watchdog);
                return Err(Launch::Failed(TestingError::Timeout {
                    what: format!("memcached to accept connections on port {}", self.port),
                    after: READY_TIMEOUT,
                }));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Why one launch failed.
enum Launch {
    /// The port was taken: worth another try.
    PortTaken(TestingError),
    /// Anything else.
    Failed(TestingError),
}

/// The memcached binary to run: `$KUBEFORGE_MEMCACHED`, else on `$PATH`, else the Debian path.
fn binary() -> Result<PathBuf, TestingError> {
    find_binary(
        std::env::var_os("KUBEFORGE_MEMCACHED"),
        std::env::var_os("PATH"),
        Path::new("/usr/bin/memcached"),
    )
}

fn find_binary(
    chosen: Option<OsString>,
    path: Option<OsString>,
    fallback: &Path,
) -> Result<PathBuf, TestingError> {
    if let Some(chosen) = chosen {
        let chosen = PathBuf::from(chosen);
        return if chosen.is_file() {
            Ok(chosen)
        } else {
            Err(TestingError::NotInstalled {
                program: "memcached".to_owned(),
                hint: format!("KUBEFORGE_MEMCACHED={} is not a file", chosen.display()),
            })
        };
    }
    std::env::split_paths(&path.unwrap_or_default())
        .map(|dir| dir.join("memcached"))
        .chain([fallback.to_owned()])
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| TestingError::NotInstalled {
            program: "memcached".to_owned(),
            hint: format!(
                "not on PATH nor at {}; install it (`apt-get install memcached`) or set \
                 KUBEFORGE_MEMCACHED to its path",
                fallback.display()
            ),
        })
}

/// A port of `127.0.0.1` that was free a moment ago.
fn free_port(binary: &Path) -> Result<u16, TestingError> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| TestingError::Process {
            program: binary.to_owned(),
            message: format!("could not find a free port: {e}"),
        })
}

/// Whether memcached on `port` answers `version` (within a second).
async fn answers(port: u16) -> bool {
    let ask = async {
        // A DSN with `tcp://` takes an IP literal as the host.
        let mut client = async_memcached::Client::new(format!("tcp://127.0.0.1:{port}")).await?;
        client.version().await
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ask).await,
        Ok(Ok(_))
    )
}

/// A shell that kills memcached (`pid`) when this process is gone, should it die without
/// dropping the [`MemcachedServer`] (a killed test run); `None` if it cannot be started.
fn watchdog(pid: u32) -> Option<Child> {
    Command::new("sh")
        .args([
            "-c",
            "while kill -0 \"$1\" 2>/dev/null; do sleep 1; done; kill -9 \"$2\" 2>/dev/null",
            "kubeforge-memcached-watchdog",
            &std::process::id().to_string(),
            &pid.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}

fn stop_watchdog(watchdog: Option<Child>) {
    if let Some(mut watchdog) = watchdog {
        let _ = watchdog.kill();
        let _ = watchdog.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installed() -> bool {
        match binary() {
            Ok(_) => true,
            Err(e) => {
                eprintln!("skipped: {e}");
                false
            }
        }
    }

    #[tokio::test]
    async fn memcached_server_should_start_stop_and_start_again_on_its_port() {
        if !installed() {
            return;
        }
        let mut server = MemcachedServer::start(16).await.unwrap();
        let port = server.port();
        assert!(answers(port).await);
        assert!(server.rss_bytes().is_some_and(|rss| rss > 0));
        server.stop();
        assert!(tokio::net::TcpStream::connect(server.addr()).await.is_err());
        assert_eq!(server.rss_bytes(), None);
        server.start_again().await.unwrap();
        assert_eq!(server.port(), port);
        assert!(answers(port).await);
        drop(server);
        assert!(!answers(port).await, "dropping the server kills memcached");
    }

    #[test]
    fn find_binary_should_prefer_the_variable_then_path_and_say_how_to_install() {
        let dir = std::env::temp_dir().join(format!("kubeforge-memcached-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let on_path = dir.join("memcached");
        std::fs::write(&on_path, "").unwrap();
        let nowhere = Path::new("/nonexistent/memcached");
        let chosen = find_binary(Some(on_path.clone().into()), None, nowhere).unwrap();
        assert_eq!(chosen, on_path);
        let found = find_binary(None, Some(dir.clone().into()), nowhere).unwrap();
        assert_eq!(found, on_path);
        let wrong = find_binary(Some("/nonexistent/mc".into()), None, nowhere).unwrap_err();
        assert!(
            wrong
                .to_string()
                .contains("KUBEFORGE_MEMCACHED=/nonexistent/mc")
        );
        let missing = find_binary(None, Some("/nonexistent".into()), nowhere).unwrap_err();
        assert!(
            missing.to_string().contains("apt-get install memcached"),
            "{missing}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
