//! The plain-HTTP listener serving the CRLs: `GET /crl/{issuer}.crl` (CRLs are fetched over
//! plain HTTP: they are signed, and a client must not need the TLS they are there to check).

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::listen::accept_plain;
use crate::world::Shared;

/// Serves `GET /crl/{issuer}.crl` on `listener` until shutdown.
pub(super) async fn accept_crl(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) {
    let answer = move |req: &Request<Incoming>| answer(&shared, req);
    accept_plain(listener, "CRL", answer, shutdown).await;
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
    if let Some(location) = shared.lock().crls.redirect(&path) {
        return Response::builder()
            .status(302)
            .header("location", location)
            .body(Full::new(Bytes::new()))
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())));
    }
    let served = {
        let mut w = shared.lock();
        // Stamped on the clock the certificates begin on: under a time scale above 1 the
        // virtual clock runs ahead of the real one, and certificates are dated back by that
        // lead so that a client on the real clock can use them; a CRL dated on the virtual
        // clock would be "not yet valid" for the same client.
        let now = w.clock.now() - w.clock.scale_drift();
        let world = &mut *w;
        world.crls.serve(&path, &world.ca, now)
    };
    match served {
        Ok(der) => build(200, "application/pkix-crl", der),
        Err((status, message)) => build(status, "text/plain", Bytes::from(message + "\n")),
    }
}
