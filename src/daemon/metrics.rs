//! `/metrics` for Prometheus while `cert-agent run` runs (`[agent] metrics_listen`): the same
//! text as `[agent] metrics_file`, from the state directory at start and refreshed after every
//! run. Plain HTTP/1.1, `GET`/`HEAD /metrics` only, served by [`crate::http_serve`] under
//! [`LIMITS`]: a request head must arrive within five seconds, each connection is cut off after
//! ten, at most 32 at once (more are closed at once).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

use crate::http_serve::{self, Limits, OverCap};

/// The content type of the Prometheus text format.
const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The name of the endpoint in log messages.
const NAME: &str = "metrics endpoint";

/// The endpoint's connection limits: a scrape is one short request, so a client that is slow
/// to ask or holds more than its share of connections is dropped rather than waited for.
pub(super) const LIMITS: Limits = Limits {
    header_read_timeout: Duration::from_secs(5),
    connection_timeout: Duration::from_secs(10),
    max_connections: 32,
    over_cap: OverCap::Close,
    max_per_peer: 0,
};

/// The running endpoint; stops when dropped.
pub(super) struct MetricsServer {
    text: Arc<Mutex<Bytes>>,
    _server: http_serve::Server,
    pub(super) local_addr: SocketAddr,
}

impl MetricsServer {
    /// Binds `addr` and serves `initial` until [`Self::update`] replaces it.
    pub(super) async fn start(addr: SocketAddr, initial: String) -> Result<Self> {
        Self::start_with(addr, initial, LIMITS).await
    }

    /// [`Self::start`] under `limits`.
    pub(super) async fn start_with(
        addr: SocketAddr,
        initial: String,
        limits: Limits,
    ) -> Result<Self> {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("could not listen on metrics_listen {addr}"))?;
        let text = Arc::new(Mutex::new(Bytes::from(initial)));
        let served = text.clone();
        let handler = move |req: &Request<Incoming>, _: SocketAddr| respond(&served, req);
        let server = http_serve::Server::start(listener, limits, NAME, Arc::new(handler))
            .context("metrics_listen")?;
        Ok(Self {
            text,
            local_addr: server.local_addr(),
            _server: server,
        })
    }

    /// Serves `text` from now on.
    pub(super) fn update(&self, text: String) {
        self.updater().update(text);
    }

    /// What replaces the text served from another task (the fleet's follow loop).
    pub(super) fn updater(&self) -> Updater {
        Updater(self.text.clone())
    }
}

/// Replaces what a [`MetricsServer`] serves.
#[derive(Clone)]
pub(super) struct Updater(Arc<Mutex<Bytes>>);

impl Updater {
    /// Serves `text` from now on.
    pub(super) fn update(&self, text: String) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Bytes::from(text);
    }
}

fn respond(text: &Mutex<Bytes>, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let method = req.method();
    let (status, body, content_type) = if req.uri().path() != "/metrics" {
        (
            StatusCode::NOT_FOUND,
            Bytes::from_static(b"not found\n"),
            "text/plain",
        )
    } else if method != Method::GET && method != Method::HEAD {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            Bytes::from_static(b"method not allowed\n"),
            "text/plain",
        )
    } else {
        let body = text.lock().unwrap_or_else(PoisonError::into_inner).clone();
        (StatusCode::OK, body, CONTENT_TYPE_TEXT)
    };
    let len = body.len();
    let body = if method == Method::HEAD {
        Bytes::new()
    } else {
        body
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio::time::Instant;

    const TEXT: &str = "cert_agent_up 1\n";

    async fn server(max_connections: usize) -> MetricsServer {
        let limits = Limits {
            header_read_timeout: Duration::from_millis(400),
            connection_timeout: Duration::from_secs(5),
            max_connections,
            ..LIMITS
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        MetricsServer::start_with(addr, TEXT.to_owned(), limits)
            .await
            .unwrap()
    }

    /// Reads until the server closes; what was read and how long it took.
    async fn until_closed(s: &mut TcpStream) -> (String, Duration) {
        let start = Instant::now();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut out))
            .await
            .expect("the server closes the connection");
        (String::from_utf8_lossy(&out).into_owned(), start.elapsed())
    }

    async fn scrape(addr: SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        until_closed(&mut s).await.0
    }

    #[tokio::test]
    async fn serves_the_text_and_only_at_its_path() {
        let server = server(4).await;
        let answer = scrape(server.local_addr).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with(TEXT), "{answer}");
        server.update("cert_agent_up 2\n".to_owned());
        assert!(
            scrape(server.local_addr)
                .await
                .ends_with("cert_agent_up 2\n")
        );
        let mut s = TcpStream::connect(server.local_addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        assert!(until_closed(&mut s).await.0.starts_with("HTTP/1.1 404"));
    }

    /// Guards the slowloris protection: a client that sends half a request head and waits does
    /// not keep another from being served, and is closed after the header timeout.
    #[tokio::test]
    async fn a_slow_client_is_closed_after_the_timeout_while_others_are_served() {
        let server = server(4).await;
        let mut slow = TcpStream::connect(server.local_addr).await.unwrap();
        slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: loc")
            .await
            .unwrap();
        let answer = scrape(server.local_addr).await;
        assert!(answer.ends_with(TEXT), "{answer}");
        let (answer, took) = until_closed(&mut slow).await;
        assert!(!answer.contains(TEXT), "{answer}");
        assert!(took < Duration::from_millis(1500), "closed after {took:?}");
    }

    /// Guards the cap: connections beyond it are closed at once, unanswered; once a slot frees
    /// the endpoint serves again.
    #[tokio::test]
    async fn connections_over_the_cap_are_refused() {
        let server = server(2).await;
        let addr = server.local_addr;
        let mut hogs = Vec::new();
        for _ in 0..2 {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
            hogs.push(s);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut over = TcpStream::connect(addr).await.unwrap();
        let _ = over
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await;
        let (answer, took) = until_closed(&mut over).await;
        assert!(answer.is_empty(), "{answer}");
        assert!(took < Duration::from_millis(300), "closed after {took:?}");
        drop(hogs);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(scrape(addr).await.ends_with(TEXT));
    }
}
