//! One request as the transport sends it ([`Request`]: method, path, query, body, limits, and
//! whether it may be repeated) and one answer as it was read ([`Raw`]).
//!
//! Imports only `error` (the [`Call`] that names a request in errors).

use reqwest::Method;
use reqwest::header::HeaderMap;

use super::error::Call;

/// What kind of call, for retries and for lost answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Changes nothing: may be repeated.
    Read,
    /// Changes something (not billed): repeated only when certainly not sent.
    Write,
    /// `POST /order`: billed; never repeated.
    Order,
}

/// What a request carries.
pub(super) enum Body {
    None,
    Form(Vec<(String, String)>),
    Json(Vec<u8>),
}

/// One request to make.
pub(super) struct Request {
    pub(super) method: Method,
    pub(super) path: String,
    pub(super) query: Vec<(&'static str, String)>,
    pub(super) body: Body,
    /// Send the auth token (and handle 401 by signing in again).
    pub(super) auth: bool,
    pub(super) kind: Kind,
    /// Largest success body.
    pub(super) limit: usize,
    /// Bodies of this call may hold credentials (sign in, prolong): no excerpt in errors.
    pub(super) sensitive: bool,
    pub(super) accept: &'static str,
}

impl Request {
    pub(super) fn new(method: Method, path: impl Into<String>, kind: Kind, limit: usize) -> Self {
        Self {
            method,
            path: path.into(),
            query: Vec::new(),
            body: Body::None,
            auth: true,
            kind,
            limit,
            sensitive: false,
            accept: "application/json",
        }
    }

    pub(super) fn call(&self) -> Call {
        Call {
            method: method_name(&self.method),
            path: self.path.clone(),
            idempotent: self.kind == Kind::Read,
        }
    }
}

/// The method as it is named in errors and logs.
fn method_name(m: &Method) -> &'static str {
    if *m == Method::POST { "POST" } else { "GET" }
}

/// An answer, read whole (within its limit).
pub(super) struct Raw {
    pub(super) status: u16,
    pub(super) headers: HeaderMap,
    pub(super) body: Vec<u8>,
}

impl Raw {
    pub(super) fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}
