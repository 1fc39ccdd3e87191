//! One request on the HTTPS listener: the control API (loopback peers only), the CORS
//! preflight, or a partner-API call, which is applied under the lock (fault, tick, dispatch,
//! call log) off the reactor threads and then answered, delayed or dropped as its fault says.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, header};
use http_body_util::Full;
use hyper::body::Incoming;
use serde_json::json;
use tokio::sync::Notify;

use super::answers::{api_response, json_response, preflight_response, status_fault_response};
use super::fault_answers::answer_fault;
use super::request::{api_request, read_body};
use crate::control;
use crate::faults::FaultKind;
use crate::wire::{ApiRequest, ApiResponse};
use crate::world::{CallRecord, Shared, guarded};

/// What a connection's requests share: the world, the peer, and the kill switch a
/// `drop_after_apply` fault pulls.
#[derive(Clone)]
pub(super) struct Conn {
    pub(super) shared: Arc<Shared>,
    pub(super) peer: SocketAddr,
    pub(super) kill: Arc<Notify>,
}

/// One request on the HTTPS listener: control API, CORS preflight, or partner API.
pub(super) async fn handle(conn: Conn, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let raw_query = parts.uri.query().unwrap_or("").to_owned();
    let method = parts.method.clone();

    if path == control::PREFIX || path.starts_with(&format!("{}/", control::PREFIX)) {
        if !conn.peer.ip().is_loopback() {
            return json_response(
                403,
                &json!({ "error": "the control API answers loopback peers only" }),
                None,
            );
        }
        let body = match read_body(body).await {
            Ok(b) => b,
            Err(status) => {
                return json_response(status, &json!({ "error": "body too large" }), None);
            }
        };
        let shared = conn.shared.clone();
        let m = method.as_str().to_owned();
        let answer =
            tokio::task::spawn_blocking(move || control::handle_http(&shared, &m, &path, &body))
                .await
                .unwrap_or_else(|e| (500, json!({ "error": format!("control call failed: {e}") })));
        return json_response(answer.0, &answer.1, None);
    }

    if method == Method::OPTIONS {
        let now = {
            let mut w = conn.shared.lock();
            let now = w.now();
            w.log_call(CallRecord {
                time: now,
                method: method.to_string(),
                path,
                query: raw_query,
                status: 204,
                account: None,
                billed: false,
                fault: None,
                delivered: true,
            });
            now
        };
        return preflight_response(now);
    }

    let _in_flight = conn.shared.begin_call();
    let body = match read_body(body).await {
        Ok(b) => b,
        Err(status) => {
            let mut w = conn.shared.lock();
            let now = w.now();
            w.log_call(CallRecord {
                time: now,
                method: method.to_string(),
                path,
                query: raw_query,
                status,
                account: None,
                billed: false,
                fault: None,
                delivered: true,
            });
            let resp = ApiResponse::json(status, json!({ "error": "Request body too large" }));
            return api_response(resp, now);
        }
    };
    let api_req = api_request(method, path, &raw_query, parts.headers, body);

    let shared = conn.shared.clone();
    // The state does CPU work (key parsing, signing, ZIPs): keep it off the reactor threads.
    let outcome = tokio::task::spawn_blocking(move || apply(&shared, api_req, raw_query)).await;
    let Ok((response, fault, mutated)) = outcome else {
        return json_response(500, &json!({ "error": "sandbox internal error" }), None);
    };
    if mutated {
        let shared = conn.shared.clone();
        let _ = tokio::task::spawn_blocking(move || shared.persist(false)).await;
    }
    match fault {
        Some(FaultKind::DropAfterApply) => {
            conn.kill.notify_one();
            std::future::pending::<()>().await;
            unreachable!("the connection is dropped before this resolves")
        }
        Some(FaultKind::Delay { ms }) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            response
        }
        _ => response,
    }
}

/// Under the lock: fault, tick, dispatch, post-processing, call log. Returns the HTTP answer,
/// the fault that applied, and whether the request may have changed the state.
fn apply(
    shared: &Shared,
    req: ApiRequest,
    raw_query: String,
) -> (Response<Full<Bytes>>, Option<FaultKind>, bool) {
    let mut w = shared.lock();
    let now = w.now();
    let fault = w.faults.take(req.method.as_str(), &req.path);
    let mut record = CallRecord {
        time: now,
        method: req.method.to_string(),
        path: req.path.clone(),
        query: raw_query,
        status: 0,
        account: None,
        billed: false,
        fault: fault.as_ref().map(|f| f.name().to_owned()),
        delivered: !matches!(fault, Some(FaultKind::DropAfterApply)),
    };

    if let Some(FaultKind::Status { status }) = fault {
        record.status = status;
        w.log_call(record);
        return (status_fault_response(status, now), fault, false);
    }
    if let Some(FaultKind::RotateToken { login }) = &fault {
        let state = &mut w.state;
        match guarded(|| state.rotate_token(login)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("rotate_token fault for '{login}': {e}"),
            Err(e) => tracing::error!("rotate_token fault for '{login}' panicked: {e}"),
        }
    }

    w.tick(now);
    let w = &mut *w;
    let (state, ca) = (&mut w.state, &w.ca);
    let mut resp = match guarded(|| state.dispatch(&req, now, ca)) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("dispatch of {} {} panicked: {e}", req.method, req.path);
            ApiResponse::json(
                500,
                json!({ "error": format!("sandbox internal error: {e}") }),
            )
        }
    };

    answer_fault(w, &req, fault.as_ref(), &mut resp, now);

    record.status = resp.status;
    record.account = resp.account.clone();
    record.billed = resp.billed;
    w.log_call(record);
    let mutated = req.method != Method::GET && req.method != Method::HEAD;
    let malformed = matches!(fault, Some(FaultKind::MalformedJson));
    let mut http = api_response(resp, now);
    if malformed {
        http.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
    }
    (http, fault, mutated)
}
