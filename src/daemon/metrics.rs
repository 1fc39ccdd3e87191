//! `/metrics` for Prometheus while `cert-agent run` runs (`[agent] metrics_listen`): the same
//! text as `[agent] metrics_file`, from the state directory at start and refreshed after every
//! run. Plain HTTP/1.1 (hyper), `GET`/`HEAD /metrics` only; each connection is cut off after
//! ten seconds, at most 32 at once.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// The content type of the Prometheus text format.
const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Longest life of one connection.
const CONNECTION_LIMIT: Duration = Duration::from_secs(10);
/// Connections served at once.
const MAX_CONNECTIONS: usize = 32;

/// The running endpoint; stops when dropped.
pub(super) struct MetricsServer {
    text: Arc<Mutex<Bytes>>,
    task: tokio::task::JoinHandle<()>,
    pub(super) local_addr: SocketAddr,
}

impl MetricsServer {
    /// Binds `addr` and serves `initial` until [`Self::update`] replaces it.
    pub(super) async fn start(addr: SocketAddr, initial: String) -> Result<Self> {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("could not listen on metrics_listen {addr}"))?;
        let local_addr = listener.local_addr().context("metrics_listen")?;
        let text = Arc::new(Mutex::new(Bytes::from(initial)));
        let served = text.clone();
        let task = tokio::spawn(async move {
            let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
            loop {
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (stream, _) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!("metrics endpoint: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let text = served.clone();
                tokio::spawn(async move {
                    let _slot = slot;
                    let service = service_fn(move |req: Request<Incoming>| {
                        let response = respond(&text, &req);
                        async move { Ok::<_, Infallible>(response) }
                    });
                    let conn =
                        http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                    let _ = tokio::time::timeout(CONNECTION_LIMIT, conn).await;
                });
            }
        });
        Ok(Self {
            text,
            task,
            local_addr,
        })
    }

    /// Serves `text` from now on.
    pub(super) fn update(&self, text: String) {
        *self.text.lock().unwrap_or_else(PoisonError::into_inner) = Bytes::from(text);
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
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
