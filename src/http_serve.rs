//! The serve loop of the agent's small plain-HTTP/1.1 servers (hyper): the standalone
//! validation-file server and the daemon's `/metrics` endpoint. A server gives only its
//! handler, a function from a request (and the peer's address) to a response; this module
//! owns the connections and their limits:
//!
//! - a request head must arrive within [`Limits::header_read_timeout`] (slowloris), is at most
//!   16 KiB with at most 32 headers;
//! - one request per connection (no keep-alive), and a connection lives at most
//!   [`Limits::connection_timeout`], whatever it does;
//! - at most [`Limits::max_connections`] connections at a time; at the cap, [`OverCap`] says
//!   whether further connections wait in the kernel's listen queue or are closed at once;
//! - at most [`Limits::max_per_peer`] of them from one address (an IPv6 address counts by
//!   its /64): one more from that address is closed at once, so that one client holding
//!   idle connections cannot take every slot;
//! - [`Server::shutdown`] (or dropping the [`Server`]) stops accepting and closes every
//!   connection; accept and connection errors are logged, never fatal.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};

/// Largest request head accepted (hyper's minimum buffer is 8 KiB).
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Most request headers accepted.
const MAX_HEADERS: usize = 32;
/// Pause after a failed accept (e.g. out of file descriptors), so the loop does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// What happens to a connection that arrives while [`Limits::max_connections`] are open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OverCap {
    /// Not accepted until a slot frees: it waits in the kernel's listen queue, then is served
    /// (a client sees a slow answer rather than a reset).
    Wait,
    /// Accepted and closed at once, unanswered.
    Close,
}

/// The limits of one server's connections.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Time a client has to send a complete request head.
    pub(crate) header_read_timeout: Duration,
    /// Longest life of a connection, whatever it does.
    pub(crate) connection_timeout: Duration,
    /// Connections served at the same time (at least one).
    pub(crate) max_connections: usize,
    /// What becomes of connections beyond `max_connections`.
    pub(crate) over_cap: OverCap,
    /// Connections open at the same time from one address (0: no cap of its own); one more
    /// is closed at once.
    pub(crate) max_per_peer: usize,
}

/// The connections open per address ([`peer_key`]).
#[derive(Debug, Default)]
struct Peers(std::sync::Mutex<HashMap<IpAddr, usize>>);

/// One open connection of an address, given back when dropped.
struct PeerSlot {
    peers: Arc<Peers>,
    key: IpAddr,
}

impl Peers {
    /// A slot for a connection from `ip`, unless `max` are open from its address (`max` 0:
    /// always).
    fn take(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<PeerSlot> {
        let key = peer_key(ip);
        let mut open = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = open.entry(key).or_insert(0);
        if max > 0 && *n >= max {
            return None;
        }
        *n += 1;
        Some(PeerSlot {
            peers: Arc::clone(self),
            key,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self
            .peers
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// What connections are counted by: an IPv4 address (an IPv4-mapped IPv6 one too), or the
/// /64 of an IPv6 address (one host usually holds a whole /64).
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        },
    }
}

/// A server's answer to one request.
pub(crate) type Handler =
    dyn Fn(&Request<Incoming>, SocketAddr) -> Response<Full<Bytes>> + Send + Sync + 'static;

/// A running server. Dropping it stops it too; [`Self::shutdown`] waits for the stop.
#[derive(Debug)]
pub(crate) struct Server {
    local_addr: SocketAddr,
    name: &'static str,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves `handler` on `listener` under `limits`; `name` starts every log message ("metrics
    /// endpoint"). Fails when the listener's address cannot be read or when called outside a
    /// Tokio runtime.
    pub(crate) fn start(
        listener: TcpListener,
        limits: Limits,
        name: &'static str,
        handler: Arc<Handler>,
    ) -> std::io::Result<Self> {
        let local_addr = listener.local_addr()?;
        let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
        let (stop, stopped) = watch::channel(false);
        let task = runtime.spawn(accept_loop(listener, limits, name, handler, stopped));
        Ok(Self {
            local_addr,
            name,
            stop,
            task: Some(task),
        })
    }

    /// The address the server listens on (with the real port when bound to port 0).
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, closes every connection and waits until the server is gone.
    pub(crate) async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take()
            && let Err(e) = task.await
            && e.is_panic()
        {
            tracing::warn!("{} task panicked", self.name);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    limits: Limits,
    name: &'static str,
    handler: Arc<Handler>,
    mut stopped: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let peers = Arc::new(Peers::default());
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(false)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS);
    let builder = Arc::new(builder);
    let mut conns = JoinSet::new();
    loop {
        while conns.try_join_next().is_some() {}
        // Waiting at the cap: take a slot before accepting, so new connections stay queued.
        let waited = match limits.over_cap {
            OverCap::Wait => tokio::select! {
                _ = stopped.changed() => break,
                slot = slots.clone().acquire_owned() => match slot {
                    Ok(slot) => Some(slot),
                    Err(_) => break,
                },
            },
            OverCap::Close => None,
        };
        let (stream, peer) = tokio::select! {
            _ = stopped.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("{name}: accept failed: {e}");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
        };
        let Some(slot) = waited.or_else(|| slots.clone().try_acquire_owned().ok()) else {
            tracing::debug!(
                "{name}: connection from {peer} closed: {} connections open",
                limits.max_connections.max(1)
            );
            drop(stream);
            continue;
        };
        let Some(from_peer) = peers.take(peer.ip(), limits.max_per_peer) else {
            tracing::debug!(
                "{name}: connection from {peer} closed: {} connections from its address open",
                limits.max_per_peer
            );
            drop(stream);
            continue;
        };
        let builder = builder.clone();
        let handler = handler.clone();
        let limit = limits.connection_timeout;
        conns.spawn(async move {
            let slots = (slot, from_peer);
            serve_connection(&builder, stream, peer, handler, limit, name, slots).await;
        });
    }
    conns.shutdown().await;
}

async fn serve_connection(
    builder: &http1::Builder,
    stream: TcpStream,
    peer: SocketAddr,
    handler: Arc<Handler>,
    limit: Duration,
    name: &str,
    _slots: (OwnedSemaphorePermit, PeerSlot),
) {
    let service = service_fn(move |req: Request<Incoming>| {
        let response = handler(&req, peer);
        async move { Ok::<_, Infallible>(response) }
    });
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(limit, conn).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!("{name}: connection from {peer}: {e}"),
        Err(_) => tracing::debug!("{name}: connection from {peer} cut off"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::StatusCode;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::time::Instant;

    fn ok(_: &Request<Incoming>, _: SocketAddr) -> Response<Full<Bytes>> {
        let mut r = Response::new(Full::new(Bytes::from_static(b"ok\n")));
        *r.status_mut() = StatusCode::OK;
        r
    }

    async fn server(over_cap: OverCap, max_connections: usize) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let limits = Limits {
            header_read_timeout: Duration::from_millis(300),
            connection_timeout: Duration::from_secs(5),
            max_connections,
            over_cap,
            max_per_peer: 0,
        };
        Server::start(listener, limits, "test server", Arc::new(ok)).unwrap()
    }

    async fn get(addr: SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut out))
            .await
            .unwrap()
            .unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn over_the_cap_a_connection_is_closed_at_once_when_asked() {
        let server = server(OverCap::Close, 1).await;
        let addr = server.local_addr();
        let mut hog = TcpStream::connect(addr).await.unwrap();
        hog.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut refused = TcpStream::connect(addr).await.unwrap();
        let start = Instant::now();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), refused.read_to_end(&mut out))
            .await
            .unwrap();
        assert!(out.is_empty());
        assert!(start.elapsed() < Duration::from_millis(250));
        drop(hog);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(get(addr).await.starts_with("HTTP/1.1 200"));
        server.shutdown().await;
    }

    #[tokio::test]
    async fn a_dropped_server_closes_its_connections() {
        let server = server(OverCap::Wait, 4).await;
        let addr = server.local_addr();
        assert!(get(addr).await.contains("connection: close"));
        let mut held = TcpStream::connect(addr).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(server);
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(1), held.read_to_end(&mut out))
            .await
            .unwrap();
        assert!(TcpStream::connect(addr).await.is_err());
    }

    #[test]
    fn an_ipv6_peer_counts_by_its_64_and_a_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(peer_key(a), peer_key(b));
        assert_ne!(peer_key(a), peer_key(c));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(peer_key(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
        let peers = Arc::new(Peers::default());
        let held: Vec<_> = (0..2).map(|_| peers.take(a, 2).unwrap()).collect();
        assert!(peers.take(b, 2).is_none(), "the same /64");
        assert!(peers.take(c, 2).is_some());
        drop(held);
        assert!(peers.take(b, 2).is_some(), "given back");
    }
}
