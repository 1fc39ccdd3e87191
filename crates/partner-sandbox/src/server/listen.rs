//! The listeners: binding, the TLS configuration (HTTP/1.1 only), the HTTPS accept loop with
//! its per-connection handshake and kill switch, the plain-HTTP accept loop (one for every
//! plain listener: the CRLs, and the one answering every request with 301 to the HTTPS URL).

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};

use super::answers::redirect_response;
use super::config::SandboxError;
use super::dispatch::{Conn, handle};
use crate::ca;
use crate::world::Shared;

/// Time a client gets to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) fn bind(addr: SocketAddr) -> Result<StdTcpListener, SandboxError> {
    let l = StdTcpListener::bind(addr).map_err(|source| SandboxError::Listen { addr, source })?;
    l.set_nonblocking(true)
        .map_err(|source| SandboxError::Listen { addr, source })?;
    Ok(l)
}

/// `127.0.0.1:PORT` or `[::1]:PORT`; an unspecified address is shown as loopback.
pub(super) fn url_authority(addr: SocketAddr) -> String {
    let ip = if addr.ip().is_unspecified() {
        match addr {
            SocketAddr::V4(_) => std::net::IpAddr::from([127, 0, 0, 1]),
            SocketAddr::V6(_) => std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        }
    } else {
        addr.ip()
    };
    SocketAddr::new(ip, addr.port()).to_string()
}

pub(super) fn tls_config(
    identity: ca::ApiTlsIdentity,
) -> Result<rustls::ServerConfig, SandboxError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SandboxError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(identity.cert_chain, identity.key)
        .map_err(|e| SandboxError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

pub(super) async fn accept_https(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    while let Some((stream, peer)) = next_connection(&listener, &mut shutdown, "HTTPS").await {
        let _ = stream.set_nodelay(true);
        let conn = Conn {
            shared: shared.clone(),
            peer,
            kill: Arc::new(Notify::new()),
        };
        let acceptor = acceptor.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(serve_tls_connection(stream, acceptor, conn, shutdown));
    }
}

async fn serve_tls_connection(
    stream: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    conn: Conn,
    mut shutdown: watch::Receiver<bool>,
) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!("TLS handshake with {} failed: {e}", conn.peer);
            return;
        }
        Err(_) => {
            tracing::debug!("TLS handshake with {} timed out", conn.peer);
            return;
        }
    };
    let kill = conn.kill.clone();
    let service = service_fn(move |req| {
        let conn = conn.clone();
        async move { Ok::<_, Infallible>(handle(conn, req).await) }
    });
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30))
        .serve_connection(TokioIo::new(tls), service);
    // Dropping `served` closes the socket without writing anything more.
    tokio::select! {
        r = served => {
            if let Err(e) = r {
                tracing::debug!("connection error: {e}");
            }
        }
        _ = kill.notified() => tracing::debug!("connection dropped after applying a request (fault)"),
        _ = shutdown.changed() => {}
    }
}

/// The next connection on `listener`, or `None` at shutdown. A failed accept (too many open
/// files, a connection reset before it was taken) is logged with `what` and tried again.
async fn next_connection(
    listener: &TcpListener,
    shutdown: &mut watch::Receiver<bool>,
    what: &str,
) -> Option<(tokio::net::TcpStream, SocketAddr)> {
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => return Some(x),
                Err(e) => {
                    tracing::warn!("{what} listener: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => return None,
        }
    }
}

/// Serves plain HTTP/1.1 on `listener` until shutdown, every request answered by `answer`
/// (`what` names the listener in the log).
pub(super) async fn accept_plain<F>(
    listener: TcpListener,
    what: &'static str,
    answer: F,
    mut shutdown: watch::Receiver<bool>,
) where
    F: Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Clone + Send + Sync + 'static,
{
    while let Some((stream, _)) = next_connection(&listener, &mut shutdown, what).await {
        let answer = answer.clone();
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let response = answer(&req);
                async move { Ok::<_, Infallible>(response) }
            });
            let served = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = served => {}
                _ = shutdown.changed() => {}
            }
        });
    }
}

/// Answers every request on `listener` with 301 to the same path under `base_url`.
pub(super) async fn accept_redirect(
    listener: TcpListener,
    base_url: String,
    shutdown: watch::Receiver<bool>,
) {
    let answer = move |req: &Request<Incoming>| {
        let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
        redirect_response(&format!("{base_url}{path}"))
    };
    accept_plain(listener, "HTTP", answer, shutdown).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_listen_shows_loopback() {
        assert_eq!(
            url_authority(SocketAddr::from(([0, 0, 0, 0], 8443))),
            "127.0.0.1:8443"
        );
    }
}
