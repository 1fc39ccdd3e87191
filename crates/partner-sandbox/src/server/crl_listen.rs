//! The plain-HTTP listener serving the CRLs: `GET /crl/{issuer}.crl` (CRLs are fetched over
//! plain HTTP: they are signed, and a client must not need the TLS they are there to check).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::world::Shared;

/// Serves `GET /crl/{issuer}.crl` on `listener` until shutdown.
pub(super) async fn accept_crl(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("CRL listener: accept failed: {e}");
                    tokio::time::sleep(StdDuration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let shared = shared.clone();
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(answer(&shared, &req)) }
            });
            let served = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(StdDuration::from_secs(30))
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = served => {}
                _ = shutdown.changed() => {}
            }
        });
    }
}

fn answer(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let build = |status: u16, ctype: &str, body: Bytes| {
        Response::builder()
            .status(status)
            .header("content-type", ctype)
            .body(Full::new(body))
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
    };
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return build(405, "text/plain", Bytes::from_static(b"GET only\n"));
    }
    let path = req.uri().path().to_owned();
    let served = {
        let mut w = shared.lock();
        let now = w.clock.now();
        let world = &mut *w;
        world.crls.serve(&path, &world.ca, now)
    };
    match served {
        Ok(der) => build(200, "application/pkix-crl", der),
        Err((status, message)) => build(status, "text/plain", Bytes::from(message + "\n")),
    }
}
