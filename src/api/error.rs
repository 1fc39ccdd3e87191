//! `ApiError`: what went wrong with which call, the API's own words, and whether the call may
//! be repeated safely.

use std::fmt;
use std::path::PathBuf;

/// Longest excerpt of a raw error body kept in an error (bytes of the original body).
pub(super) const EXCERPT_BYTES: usize = 512;

/// One call to the API: method and path, e.g. `POST /api/v1/order`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: &'static str,
    /// Path without query string (never holds a credential).
    pub path: String,
    /// True when repeating the call cannot change anything at the service (GET, sign in,
    /// DCV emails).
    pub idempotent: bool,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// How a request failed below HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// No connection (DNS, TCP, TLS): the request was not sent.
    Connect,
    /// The connect or total timeout expired.
    Timeout,
    /// The connection failed while sending or receiving.
    Other,
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Connect => "could not connect",
            Self::Timeout => "timed out",
            Self::Other => "connection failed",
        })
    }
}

/// A documented error body, decoded (section "Errors" of the document).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorBody {
    /// `{error}`, and the details call's `{id: null, error}`.
    Error(String),
    /// `{errors: [string]}` (invalid order).
    Errors(Vec<String>),
    /// `{errors: string}` (download and bundle failures, bundle 404).
    ErrorsText(String),
    /// `{success: false, error, certificate_status?, dcv_available?}` (DCV status, reissue).
    Failure {
        error: Option<String>,
        certificate_status: Option<String>,
        dcv_available: Option<bool>,
    },
    /// JSON of another shape.
    OtherJson,
    /// Not JSON (e.g. the 404 bodies "not meant to be parsed").
    NotJson,
    /// No body.
    Empty,
}

impl ErrorBody {
    /// Decodes a body of an error answer.
    pub fn decode(body: &[u8]) -> Self {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Self::Empty;
        }
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
            return Self::NotJson;
        };
        let Some(obj) = value.as_object() else {
            return Self::OtherJson;
        };
        let text = |k: &str| obj.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        if obj.get("success") == Some(&serde_json::Value::Bool(false)) {
            return Self::Failure {
                error: text("error").or_else(|| text("result")),
                certificate_status: text("certificate_status"),
                dcv_available: obj.get("dcv_available").and_then(|v| v.as_bool()),
            };
        }
        match obj.get("errors") {
            Some(serde_json::Value::Array(items)) => {
                return Self::Errors(
                    items
                        .iter()
                        .map(|i| match i {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect(),
                );
            }
            Some(serde_json::Value::String(s)) => return Self::ErrorsText(s.clone()),
            _ => {}
        }
        match text("error") {
            Some(e) => Self::Error(e),
            None => Self::OtherJson,
        }
    }

    /// The API's own message, if the body carried one.
    pub fn message(&self) -> Option<String> {
        match self {
            Self::Error(e) | Self::ErrorsText(e) => Some(e.clone()),
            Self::Errors(list) if !list.is_empty() => Some(list.join("; ")),
            Self::Failure {
                error,
                certificate_status,
                ..
            } => {
                let mut m = error.clone()?;
                if let Some(s) = certificate_status {
                    m.push_str(&format!(" (certificate status: {s})"));
                }
                Some(m)
            }
            _ => None,
        }
    }
}

/// An error of the Partner API client. Every message names the call, e.g.
/// `POST /api/v1/order: HTTP 422: Items can't be blank`. No variant holds a credential.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The client cannot be built or used as configured (http:// base URL, bad CA file, ...).
    #[error("Partner API client: {0}")]
    Config(String),

    /// No usable password (file missing, readable by others, empty, none configured).
    #[error("Partner API password: {0}")]
    Credentials(String),

    /// The request did not complete below HTTP. For calls with side effects this variant
    /// means the request was not sent (otherwise it is [`ApiError::OutcomeUnknown`]).
    #[error("{call}: {kind}: {message}")]
    Transport {
        call: Call,
        kind: TransportKind,
        message: String,
    },

    /// The request was not sent: the client's [`SendGuard`](super::SendGuard) refused it
    /// (e.g. this host's lead of the fleet ended). Certainly not carried out; not repeated.
    #[error("{call}: {reason}; no request was sent")]
    NotSent { call: Call, reason: String },

    /// The server answered with an error status; `body` is the decoded documented shape and
    /// `excerpt` a bounded, printable excerpt of the raw body.
    #[error("{call}: HTTP {status}: {}", describe_http(body, excerpt))]
    Http {
        call: Call,
        status: u16,
        body: Box<ErrorBody>,
        excerpt: String,
    },

    /// HTTP 200 with `success: false` (change DCV, resend DCV, cancel): the action was refused.
    #[error("{call}: refused: {reason}")]
    Refused { call: Call, reason: String },

    /// The answer could not be decoded as the documented shape.
    #[error("{call}: could not decode the answer (HTTP {status}): {message}")]
    Decode {
        call: Call,
        status: u16,
        message: String,
    },

    /// A call with side effects (an order above all) whose request may have reached the server
    /// but whose answer was lost or unreadable. Whether it took effect is unknown: reconcile
    /// (e.g. from the certificate list) before doing anything that could repeat it.
    #[error("{call}: outcome unknown ({reason}); the request may have been carried out")]
    OutcomeUnknown { call: Call, reason: String },

    /// The server answered with a redirect; redirects are never followed.
    #[error("{call}: HTTP {status}: redirect to {location:?} not followed (check api.base_url)")]
    Redirect {
        call: Call,
        status: u16,
        location: String,
    },

    /// The answer was larger than the limit for this call.
    #[error("{call}: the answer is larger than {limit} bytes")]
    TooLarge { call: Call, limit: usize },

    /// The auth token could not be cached in `state_dir`.
    #[error("could not write the token cache {}: {message}", path.display())]
    TokenCache { path: PathBuf, message: String },
}

fn describe_http(body: &ErrorBody, excerpt: &str) -> String {
    if let Some(m) = body.message() {
        return m;
    }
    match body {
        ErrorBody::Empty => "(empty body)".to_owned(),
        _ if excerpt.is_empty() => "(no usable message)".to_owned(),
        _ => excerpt.to_owned(),
    }
}

impl ApiError {
    /// True when repeating the same call cannot do harm and may succeed: transport failures
    /// of requests not sent or of idempotent calls, 5xx/408/429 answers to idempotent calls.
    /// Never true for [`ApiError::OutcomeUnknown`], refusals, decode or client errors.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Transport { call, kind, .. } => {
                *kind == TransportKind::Connect || call.idempotent
            }
            Self::Http { call, status, .. } => {
                call.idempotent && (*status >= 500 || *status == 408 || *status == 429)
            }
            _ => false,
        }
    }

    /// Alias of [`ApiError::is_retryable`].
    pub fn may_retry(&self) -> bool {
        self.is_retryable()
    }

    /// True when the outcome of a call with side effects is unknown (see
    /// [`ApiError::OutcomeUnknown`]).
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Self::OutcomeUnknown { .. })
    }

    /// The call that failed, if the error belongs to one.
    pub fn call(&self) -> Option<&Call> {
        match self {
            Self::Transport { call, .. }
            | Self::NotSent { call, .. }
            | Self::Http { call, .. }
            | Self::Refused { call, .. }
            | Self::Decode { call, .. }
            | Self::OutcomeUnknown { call, .. }
            | Self::Redirect { call, .. }
            | Self::TooLarge { call, .. } => Some(call),
            _ => None,
        }
    }

    /// The HTTP status of an error answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Http { status, .. } | Self::Redirect { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The API's own message (decoded error body or refusal reason).
    pub fn api_message(&self) -> Option<String> {
        match self {
            Self::Http { body, .. } => body.message(),
            Self::Refused { reason, .. } => Some(reason.clone()),
            _ => None,
        }
    }

    /// 404: the certificate does not exist or belongs to another account.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// 401 (after the one re-signin) or 403: credentials or role do not allow the call.
    pub fn is_auth(&self) -> bool {
        matches!(self.status(), Some(401 | 403))
    }
}

/// A printable, bounded excerpt of a raw body: at most [`EXCERPT_BYTES`] bytes, lossy UTF-8,
/// control characters replaced, whitespace collapsed.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let cut = &body[..body.len().min(EXCERPT_BYTES)];
    let text = String::from_utf8_lossy(cut);
    let mut out = String::with_capacity(text.len());
    let mut last_space = false;
    for c in text.chars() {
        let c = if c.is_whitespace() {
            ' '
        } else if crate::values::text::is_unsafe(c) {
            '\u{FFFD}'
        } else {
            c
        };
        if c == ' ' && last_space {
            continue;
        }
        last_space = c == ' ';
        out.push(c);
    }
    let mut out = out.trim().to_owned();
    if body.len() > EXCERPT_BYTES {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(method: &'static str, path: &str, idempotent: bool) -> Call {
        Call {
            method,
            path: path.to_owned(),
            idempotent,
        }
    }

    fn http(status: u16, body: &str, idempotent: bool) -> ApiError {
        ApiError::Http {
            call: call(
                if idempotent { "GET" } else { "POST" },
                "/api/v1/x",
                idempotent,
            ),
            status,
            body: Box::new(ErrorBody::decode(body.as_bytes())),
            excerpt: excerpt(body.as_bytes()),
        }
    }

    // Section "Errors": every documented body shape.
    #[test]
    fn decodes_documented_error_bodies() {
        assert_eq!(
            ErrorBody::decode(br#"{"error":"Invalid login or password"}"#),
            ErrorBody::Error("Invalid login or password".into())
        );
        assert_eq!(
            ErrorBody::decode(br#"{"id":null,"error":"Invalid certificate ID"}"#),
            ErrorBody::Error("Invalid certificate ID".into())
        );
        assert_eq!(
            ErrorBody::decode(br#"{"errors":["Items can't be blank","Days is invalid"]}"#),
            ErrorBody::Errors(vec![
                "Items can't be blank".into(),
                "Days is invalid".into()
            ])
        );
        assert_eq!(
            ErrorBody::decode(br#"{"errors":"Certificate not found"}"#),
            ErrorBody::ErrorsText("Certificate not found".into())
        );
        assert_eq!(
            ErrorBody::decode(
                br#"{"success":false,"error":"Certificate is issued",
                    "certificate_status":"issued","dcv_available":false}"#
            ),
            ErrorBody::Failure {
                error: Some("Certificate is issued".into()),
                certificate_status: Some("issued".into()),
                dcv_available: Some(false),
            }
        );
        assert_eq!(
            ErrorBody::decode(b"<html>Not Found</html>"),
            ErrorBody::NotJson
        );
        assert_eq!(ErrorBody::decode(b"  "), ErrorBody::Empty);
        assert_eq!(ErrorBody::decode(b"[1,2]"), ErrorBody::OtherJson);
    }

    #[test]
    fn messages_name_the_call_and_carry_the_api_text() {
        let e = ApiError::Http {
            call: call("POST", "/api/v1/order", false),
            status: 422,
            body: Box::new(ErrorBody::decode(
                br#"{"errors":["Items can't be blank","Days is invalid"]}"#,
            )),
            excerpt: String::new(),
        };
        assert_eq!(
            e.to_string(),
            "POST /api/v1/order: HTTP 422: Items can't be blank; Days is invalid"
        );
        let e = http(
            422,
            r#"{"success":false,"error":"not in progress","certificate_status":"issued"}"#,
            true,
        );
        assert_eq!(
            e.to_string(),
            "GET /api/v1/x: HTTP 422: not in progress (certificate status: issued)"
        );
        let e = http(404, "<html>\n\n Not   Found</html>", true);
        assert_eq!(
            e.to_string(),
            "GET /api/v1/x: HTTP 404: <html> Not Found</html>"
        );
        assert_eq!(
            http(502, "", true).to_string(),
            "GET /api/v1/x: HTTP 502: (empty body)"
        );
    }

    #[test]
    fn retryability() {
        assert!(http(503, "", true).is_retryable());
        assert!(http(429, "", true).is_retryable());
        assert!(!http(503, "", false).is_retryable());
        assert!(!http(404, "", true).is_retryable());
        assert!(!http(401, "", true).is_retryable());
        let t = |kind, idempotent| ApiError::Transport {
            call: call("POST", "/api/v1/order", idempotent),
            kind,
            message: String::new(),
        };
        assert!(t(TransportKind::Connect, false).is_retryable());
        assert!(t(TransportKind::Timeout, true).may_retry());
        assert!(!t(TransportKind::Timeout, false).may_retry());
        let u = ApiError::OutcomeUnknown {
            call: call("POST", "/api/v1/order", false),
            reason: "timed out".into(),
        };
        assert!(!u.is_retryable());
        assert!(u.is_outcome_unknown());
        let r = ApiError::Refused {
            call: call("POST", "/api/v1/ssl_certificates/1/cancel", false),
            reason: "Cannot cancel".into(),
        };
        assert!(!r.is_retryable());
        assert_eq!(
            r.to_string(),
            "POST /api/v1/ssl_certificates/1/cancel: refused: Cannot cancel"
        );
    }

    #[test]
    fn excerpt_is_bounded_and_printable() {
        let long = vec![b'a'; 5000];
        let e = excerpt(&long);
        assert!(e.len() <= EXCERPT_BYTES + '…'.len_utf8());
        assert!(e.ends_with('…'));
        assert_eq!(excerpt(b"a\x1b[31mb\r\nc"), "a\u{FFFD}[31mb c");
        assert_eq!(excerpt(&[0xff, b'x']), "\u{FFFD}x");
    }
}
