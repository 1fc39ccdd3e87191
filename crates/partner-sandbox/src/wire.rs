//! The sandbox's internal seam between transport and semantics.
//!
//! The HTTP layer (`server`) turns each partner-API request into an [`ApiRequest`], hands it to
//! [`crate::state::State::dispatch`], and writes the returned [`ApiResponse`] back. Everything the
//! document says about an endpoint (routing, authentication, validation, status codes, error
//! bodies) lives behind `dispatch`; everything about connections (TLS, CORS, faults, call log,
//! the control API, the DCV fetcher) lives in the transport.

use bytes::Bytes;
use http::{HeaderMap, Method};

/// One partner-API request, as received.
#[derive(Debug, Clone)]
pub struct ApiRequest {
    pub method: Method,
    /// Path without the query string, e.g. `/api/v1/ssl_certificates/12/status`.
    pub path: String,
    /// Decoded query parameters in order of appearance (repeated keys kept).
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl ApiRequest {
    /// First query parameter named `key`.
    pub fn query_param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Header value as UTF-8, if present and valid.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Body of an [`ApiResponse`].
#[derive(Debug, Clone)]
pub enum ResponseBody {
    /// Serialised as `application/json; charset=utf-8`.
    Json(serde_json::Value),
    /// Raw bytes with their content type (ZIP archives) and optional download file name
    /// (sent as `Content-Disposition: attachment; filename="..."`).
    Bytes {
        content_type: String,
        filename: Option<String>,
        data: Bytes,
    },
    /// No body (e.g. 404 bodies "not meant to be parsed" may still carry text; use `Text`).
    Empty,
    /// Plain text, `text/plain; charset=utf-8`.
    Text(String),
}

/// What `dispatch` answers.
#[derive(Debug, Clone)]
pub struct ApiResponse {
    pub status: u16,
    /// Extra headers, e.g. `X-Pagination`.
    pub headers: Vec<(String, String)>,
    pub body: ResponseBody,
    /// Login of the authenticated account, for the call log (None when unauthenticated).
    pub account: Option<String>,
    /// True when this call placed a billed order.
    pub billed: bool,
}

impl ApiResponse {
    pub fn json(status: u16, value: serde_json::Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: ResponseBody::Json(value),
            account: None,
            billed: false,
        }
    }
}

/// An HTTP file check the validator must perform (HTTP_CSR_HASH / HTTPS_CSR_HASH).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcvCheck {
    pub certificate_id: u64,
    /// Domain whose control is being checked; sent as the Host header.
    pub domain: String,
    /// True for HTTPS_CSR_HASH on family S (fetched over TLS without verifying the peer).
    pub https: bool,
    /// Path, e.g. `/.well-known/pki-validation/<MD5 upper hex>.txt`.
    pub path: String,
}
