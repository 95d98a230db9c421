//! A TCP proxy between an operator under test and the apiserver, which the test can black-hole.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Which connections are silent.
#[derive(Clone, Copy, Debug, Default)]
struct Faults {
    /// Connections numbered below this forward nothing any more (for ever).
    dead_below: u64,
    /// New connections are accepted but forward nothing (until [`FaultProxy::restore`]).
    new_silent: bool,
}

impl Faults {
    fn silent(self, id: u64) -> bool {
        id < self.dead_below
    }
}

/// A TCP proxy on loopback in front of an upstream address (the apiserver), for network faults.
///
/// A *black-holed* connection stops forwarding bytes in both directions while both of its
/// sockets stay open: neither end sees a reset or an end of stream, exactly like a half-open TCP
/// connection after a NAT timeout, a load-balancer failover or a lost route. Only a client that
/// pings or times out notices. Bytes read from a socket when the fault starts are dropped.
///
/// Dropping the proxy closes every connection.
///
/// # Examples
///
/// ```no_run
/// use kubeforge::testing::{ControlPlane, FaultProxy};
///
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// let plane = ControlPlane::shared()?;
/// let proxy = FaultProxy::start(plane.config().await?).await?;
/// let client = kubeforge::client::connect(proxy.config().clone())?; // through the proxy
/// proxy.blackhole_existing(); // today's connections go silent; new ones work
/// # let _ = client;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FaultProxy {
    local: SocketAddr,
    config: kube::Config,
    faults: watch::Sender<Faults>,
    next_id: Arc<AtomicU64>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // Aborting the accept task drops its JoinSet, which aborts (and closes) every connection.
        self.accept.abort();
    }
}

impl FaultProxy {
    /// Starts a proxy on `127.0.0.1` in front of any TCP server at `upstream` (e.g. a webhook
    /// server the apiserver calls); [`FaultProxy::config`] then points at the proxy over https.
    ///
    /// # Errors
    ///
    /// No local port can be bound.
    pub async fn tcp(upstream: SocketAddr) -> std::io::Result<FaultProxy> {
        let uri: http::Uri = format!("https://{upstream}")
            .parse()
            .map_err(std::io::Error::other)?;
        Self::start(kube::Config::new(uri)).await
    }

    /// Starts a proxy on `127.0.0.1` in front of `config`'s cluster URL (host and port), and
    /// returns it with [`FaultProxy::config`]: `config` pointed at the proxy.
    ///
    /// # Errors
    ///
    /// The cluster URL has no usable host and port, or the upstream cannot be resolved, or no
    /// local port can be bound.
    pub async fn start(config: kube::Config) -> std::io::Result<FaultProxy> {
        let uri = config.cluster_url.clone();
        let host = uri.host().unwrap_or("127.0.0.1").trim_matches(['[', ']']);
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("http") {
                80
            } else {
                443
            });
        let upstream = tokio::net::lookup_host((host, port))
            .await?
            .next()
            .ok_or_else(|| std::io::Error::other(format!("{host}:{port} did not resolve")))?;
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let local = listener.local_addr()?;
        let (faults, _) = watch::channel(Faults::default());
        let next_id = Arc::new(AtomicU64::new(0));
        let accept = tokio::spawn(accept_loop(
            listener,
            upstream,
            faults.subscribe(),
            Arc::clone(&next_id),
        ));
        let mut config = config;
        let scheme = uri.scheme_str().unwrap_or("https");
        config.cluster_url = format!("{scheme}://127.0.0.1:{}", local.port())
            .parse()
            .map_err(std::io::Error::other)?;
        // The apiserver's certificate names the IP, not the port: TLS still verifies.
        if config.tls_server_name.is_none() && host != "127.0.0.1" {
            config.tls_server_name = Some(host.to_owned());
        }
        Ok(FaultProxy {
            local,
            config,
            faults,
            next_id,
            accept,
        })
    }

    /// The proxy's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The client configuration given to [`FaultProxy::start`], pointed at the proxy.
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// How many connections the proxy has accepted so far.
    pub fn connections(&self) -> u64 {
        self.next_id.load(Ordering::SeqCst)
    }

    /// Every connection open now goes silent for ever (sockets left open); new connections work.
    pub fn blackhole_existing(&self) {
        let below = self.next_id.load(Ordering::SeqCst);
        self.faults
            .send_modify(|f| f.dead_below = f.dead_below.max(below));
    }

    /// Every connection open now goes silent for ever, and new connections are accepted but
    /// silent too, until [`FaultProxy::restore`]: the apiserver is unreachable.
    pub fn blackhole_all(&self) {
        let below = self.next_id.load(Ordering::SeqCst);
        self.faults.send_modify(|f| {
            f.dead_below = f.dead_below.max(below);
            f.new_silent = true;
        });
    }

    /// New connections work again. Connections that went silent stay silent (their state is
    /// lost, as on a real network after a failover): clients must notice and reconnect.
    pub fn restore(&self) {
        // Connections accepted during the outage are silent: mark them dead for good.
        let below = self.next_id.load(Ordering::SeqCst);
        self.faults.send_modify(|f| {
            f.dead_below = f.dead_below.max(below);
            f.new_silent = false;
        });
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    faults: watch::Receiver<Faults>,
    next_id: Arc<AtomicU64>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                let id = next_id.fetch_add(1, Ordering::SeqCst);
                let mut faults = faults.clone();
                if faults.borrow().new_silent {
                    // Silent from the start: hold the socket, never connect upstream.
                    connections.spawn(async move {
                        let _held = client;
                        std::future::pending::<()>().await;
                    });
                    continue;
                }
                connections.spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else { return };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let dead = async {
                        let _ = faults.wait_for(|f| f.silent(id)).await;
                    };
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = server.into_split();
                    tokio::select! {
                        () = dead => {}
                        () = pump(&mut client_read, &mut server_write) => return,
                        () = pump(&mut server_read, &mut client_write) => return,
                    }
                    // Black-holed: keep all four halves open, forward nothing, for ever.
                    let _held = (client_read, client_write, server_read, server_write);
                    std::future::pending::<()>().await;
                });
            }
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Copies bytes from `from` to `to` until either side ends; then shuts `to`'s writing down.
async fn pump(from: &mut tokio::net::tcp::OwnedReadHalf, to: &mut tokio::net::tcp::OwnedWriteHalf) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// An echo server; the proxy in front of it; a config whose URL names the echo server.
    async fn echo_behind_proxy() -> FaultProxy {
        let echo = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = echo.accept().await.unwrap();
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let config =
            kube::Config::new(format!("http://127.0.0.1:{}", addr.port()).parse().unwrap());
        FaultProxy::start(config).await.unwrap()
    }

    async fn roundtrip(stream: &mut TcpStream) -> bool {
        stream.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        tokio::time::timeout(Duration::from_millis(500), stream.read_exact(&mut buf))
            .await
            .is_ok_and(|r| r.is_ok() && &buf == b"ping")
    }

    #[tokio::test]
    async fn fault_proxy_should_silence_existing_connections_and_keep_new_ones_working() {
        let proxy = echo_behind_proxy().await;
        let mut old = TcpStream::connect(proxy.local_addr()).await.unwrap();
        assert!(roundtrip(&mut old).await);
        proxy.blackhole_existing();
        assert!(
            !roundtrip(&mut old).await,
            "a black-holed connection forwarded"
        );
        let mut new = TcpStream::connect(proxy.local_addr()).await.unwrap();
        assert!(roundtrip(&mut new).await);

        proxy.blackhole_all();
        assert!(!roundtrip(&mut new).await);
        let mut during = TcpStream::connect(proxy.local_addr()).await.unwrap();
        assert!(!roundtrip(&mut during).await);
        proxy.restore();
        assert!(
            !roundtrip(&mut during).await,
            "connections of the outage stay dead"
        );
        let mut after = TcpStream::connect(proxy.local_addr()).await.unwrap();
        assert!(roundtrip(&mut after).await);
        assert_eq!(proxy.connections(), 4);
        assert!(
            proxy
                .config()
                .cluster_url
                .to_string()
                .contains(&proxy.local_addr().port().to_string())
        );
    }
}
