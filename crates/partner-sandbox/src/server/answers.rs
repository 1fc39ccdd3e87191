//! The HTTP answers of the HTTPS listener: a partner-API answer with CORS and the virtual
//! `Date`, the CORS preflight, the HTML page of a `status` fault, the control API's JSON, and
//! the redirect listener's 301.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use serde_json::Value;
use time::OffsetDateTime;

use crate::clock;
use crate::wire::{ApiResponse, ResponseBody};

pub(super) fn redirect_response(location: &str) -> Response<Full<Bytes>> {
    let body = format!(
        "<html><head><title>301 Moved Permanently</title></head><body>\
         <h1>Moved Permanently</h1><a href=\"{location}\">{location}</a></body></html>\n"
    );
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = StatusCode::MOVED_PERMANENTLY;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(location) {
        h.insert(header::LOCATION, v);
    }
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    resp
}

fn with_cors(resp: &mut Response<Full<Bytes>>, now: OffsetDateTime) {
    let h = resp.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("X-Pagination, Content-Disposition"),
    );
    if let Ok(v) = HeaderValue::from_str(&clock::http_date(now)) {
        h.insert(header::DATE, v);
    }
}

pub(super) fn preflight_response(now: OffsetDateTime) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::NO_CONTENT;
    with_cors(&mut resp, now);
    let h = resp.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("X-AUTH-TOKEN, X-PUBLIC-TOKEN, Content-Type"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    resp
}

pub(super) fn status_fault_response(status: u16, now: OffsetDateTime) -> Response<Full<Bytes>> {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let reason = code.canonical_reason().unwrap_or("Error");
    let body = format!(
        "<html><head><title>{status} {reason}</title></head><body><h1>{status} {reason}</h1></body></html>\n"
    );
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    with_cors(&mut resp, now);
    resp
}

/// An [`ApiResponse`] as HTTP, with CORS and the virtual `Date`.
pub(super) fn api_response(resp: ApiResponse, now: OffsetDateTime) -> Response<Full<Bytes>> {
    let (content_type, disposition, data): (String, Option<String>, Bytes) = match resp.body {
        ResponseBody::Json(v) => (
            "application/json; charset=utf-8".into(),
            None,
            Bytes::from(v.to_string()),
        ),
        ResponseBody::Bytes {
            content_type,
            filename,
            data,
        } => (content_type, filename, data),
        ResponseBody::Empty => (String::new(), None, Bytes::new()),
        ResponseBody::Text(t) => ("text/plain; charset=utf-8".into(), None, Bytes::from(t)),
    };
    let mut http = Response::new(Full::new(data));
    *http.status_mut() = StatusCode::from_u16(resp.status).unwrap_or_else(|_| {
        tracing::error!("state answered an invalid status {}", resp.status);
        StatusCode::INTERNAL_SERVER_ERROR
    });
    let h = http.headers_mut();
    if !content_type.is_empty() {
        match HeaderValue::from_str(&content_type) {
            Ok(v) => {
                h.insert(header::CONTENT_TYPE, v);
            }
            Err(_) => tracing::error!("invalid content type '{content_type}'"),
        }
    }
    if let Some(name) = disposition {
        let value = format!(
            "attachment; filename=\"{}\"",
            name.replace(['"', '\\'], "_")
        );
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(header::CONTENT_DISPOSITION, v);
        }
    }
    for (name, value) in resp.headers {
        match (
            http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            (Ok(n), Ok(v)) => {
                h.append(n, v);
            }
            _ => tracing::error!("state answered an invalid header '{name}: {value}'"),
        }
    }
    with_cors(&mut http, now);
    http
}

pub(super) fn json_response(
    status: u16,
    value: &Value,
    now: Option<OffsetDateTime>,
) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(value.to_string())));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    if let Some(now) = now {
        with_cors(&mut resp, now);
    }
    resp
}
