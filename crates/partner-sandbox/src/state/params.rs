//! The parameters of a partner-API request, read as the real service (Rails) reads them:
//! the query string and the body merged into one tree, the body winning for a top-level name.
//! [`Fields::from_body`] is the one way in; the accessors read strings, maps and subtrees.
//!
//! - Query string and `application/x-www-form-urlencoded` bodies (also a POST without a
//!   content type) are text; nested keys (`a[b][c]`, `a[]`, `a[0][b]`) build objects and arrays
//!   ([`nested`]).
//! - A body is JSON when its media type is `application/json` or `…/…+json`; an empty (or
//!   all-blank) JSON body carries nothing. JSON values keep their types.
//! - Any other media type (`text/plain`, a bare `json`) leaves the body unread, as Rails does;
//!   a non-empty `multipart/form-data` body is refused (the sandbox does not read it).

use serde_json::{Map, Value};

use super::answers::error;
use crate::wire::{ApiRequest, ApiResponse};

mod nested;

/// How a body is read, from its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyKind {
    Json,
    Form,
    Multipart,
    Unread,
}

fn body_kind(req: &ApiRequest) -> BodyKind {
    let Some(ct) = req.header("content-type") else {
        return BodyKind::Form;
    };
    let media = ct
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match media.split_once('/') {
        _ if media.is_empty() => BodyKind::Form,
        Some(("application", "json")) => BodyKind::Json,
        Some((_, sub)) if sub.ends_with("+json") => BodyKind::Json,
        Some(("application", "x-www-form-urlencoded")) => BodyKind::Form,
        Some(("multipart", "form-data")) => BodyKind::Multipart,
        _ => BodyKind::Unread,
    }
}

fn bad(message: String) -> Box<ApiResponse> {
    Box::new(error(400, &message))
}

/// The parameters of one request.
pub(super) struct Fields {
    params: Map<String, Value>,
    /// Top-level names whose values came from a JSON body (typed); the others are text.
    typed: Vec<String>,
}

impl Fields {
    /// The request's parameters: the query string merged with the body (the body wins for a
    /// top-level name, as the real service merges them). Clients such as the PHP client send
    /// every parameter in the query string, also on POST, with an empty body.
    pub(super) fn from_body(req: &ApiRequest) -> Result<Fields, Box<ApiResponse>> {
        let mut params = nested::expand(&req.query)
            .map_err(|e| bad(format!("Invalid query parameters: {e}")))?;
        let mut typed = Vec::new();
        let body = match body_kind(req) {
            BodyKind::Json => {
                let b = Self::json_body(req)?;
                typed.extend(b.keys().cloned());
                b
            }
            BodyKind::Form => {
                let pairs = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&req.body)
                    .map_err(|e| bad(format!("The request body is not valid form data: {e}")))?;
                nested::expand(&pairs)
                    .map_err(|e| bad(format!("Invalid request parameters: {e}")))?
            }
            BodyKind::Multipart if !req.body.iter().all(u8::is_ascii_whitespace) => {
                return Err(bad(
                    "multipart/form-data bodies are not read by the sandbox: send the parameters \
                     as application/x-www-form-urlencoded, JSON or in the query string"
                        .to_string(),
                ));
            }
            BodyKind::Multipart | BodyKind::Unread => Map::new(),
        };
        params.extend(body);
        Ok(Fields { params, typed })
    }

    fn json_body(req: &ApiRequest) -> Result<Map<String, Value>, Box<ApiResponse>> {
        if req.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Map::new());
        }
        match serde_json::from_slice::<Value>(&req.body) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(_) => Err(bad("The request body must be a JSON object".to_string())),
            Err(e) => Err(bad(format!("The request body is not valid JSON: {e}"))),
        }
    }

    /// The value of a top-level parameter, whatever its type.
    pub(super) fn value(&self, key: &str) -> Option<&Value> {
        self.params.get(key)
    }

    /// True when the parameter came from a JSON body (its numbers are numbers); false when it
    /// came from the query string or a form body (every leaf is text).
    pub(super) fn is_typed(&self, key: &str) -> bool {
        self.typed.iter().any(|k| k == key)
    }

    /// A string field (strings only; numbers, objects and others count as absent).
    pub(super) fn text(&self, key: &str) -> Option<&str> {
        self.params.get(key).and_then(Value::as_str)
    }

    /// A string or a JSON number, as text (`page=2` and `{"page": 2}` alike).
    pub(super) fn scalar(&self, key: &str) -> Option<String> {
        match self.params.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// A string field, trimmed, `None` when absent or blank.
    pub(super) fn non_blank(&self, key: &str) -> Option<&str> {
        self.text(key).map(str::trim).filter(|s| !s.is_empty())
    }

    /// A map field: an object of strings (JSON, or form keys `key[sub]=value`).
    /// `Err` names what is wrong.
    pub(super) fn map(&self, key: &str) -> Result<Vec<(String, String)>, String> {
        match self.params.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v.as_str() {
                    Some(s) => Ok((k.clone(), s.to_string())),
                    None => Err(format!("{key}[{k}] must be a string")),
                })
                .collect(),
            Some(_) if !self.is_typed(key) => Err(format!(
                "{key} must be an object (send {key}[domain]=value)"
            )),
            Some(_) => Err(format!("{key} must be an object")),
        }
    }
}

#[cfg(test)]
mod tests;
