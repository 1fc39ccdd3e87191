//! The parameters of a partner-API request: the body (JSON or form data) merged with the query
//! string. [`Fields::from_body`] is the one way in; the accessors read strings and maps.

use serde_json::{Map, Value};

use super::answers::error;
use crate::wire::{ApiRequest, ApiResponse};

/// Fields of a form-encoded or JSON body.
pub(super) struct Fields {
    json: Map<String, Value>,
    form: Vec<(String, String)>,
}

fn is_json(req: &ApiRequest) -> bool {
    req.header("content-type").is_some_and(|ct| {
        let ct = ct.to_ascii_lowercase();
        ct.starts_with("application/json") || ct.contains("+json")
    })
}

impl Fields {
    /// The request's parameters: the body (JSON when the content type says so, else
    /// `application/x-www-form-urlencoded`) merged with the query string, as the real service
    /// reads them (clients such as the PHP client send every parameter in the query string,
    /// also on POST). The body wins when both carry a parameter.
    pub(super) fn from_body(req: &ApiRequest) -> Result<Fields, Box<ApiResponse>> {
        let mut fields = Self::body_only(req)?;
        // Looked up after the body's own fields: the body wins.
        fields.form.extend(req.query.iter().cloned());
        Ok(fields)
    }

    fn body_only(req: &ApiRequest) -> Result<Fields, Box<ApiResponse>> {
        if is_json(req) {
            if req.body.iter().all(u8::is_ascii_whitespace) {
                return Ok(Fields {
                    json: Map::new(),
                    form: Vec::new(),
                });
            }
            return match serde_json::from_slice::<Value>(&req.body) {
                Ok(Value::Object(map)) => Ok(Fields {
                    json: map,
                    form: Vec::new(),
                }),
                Ok(_) => Err(Box::new(error(
                    400,
                    "The request body must be a JSON object",
                ))),
                Err(e) => Err(Box::new(error(
                    400,
                    &format!("The request body is not valid JSON: {e}"),
                ))),
            };
        }
        let form =
            serde_urlencoded::from_bytes::<Vec<(String, String)>>(&req.body).map_err(|e| {
                Box::new(error(
                    400,
                    &format!("The request body is not valid form data: {e}"),
                ))
            })?;
        Ok(Fields {
            json: Map::new(),
            form,
        })
    }

    /// A string field (JSON strings only; numbers and others count as absent).
    pub(super) fn text(&self, key: &str) -> Option<&str> {
        if let Some(v) = self.json.get(key) {
            return v.as_str();
        }
        self.form
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A string field, trimmed, `None` when absent or blank.
    pub(super) fn non_blank(&self, key: &str) -> Option<&str> {
        self.text(key).map(str::trim).filter(|s| !s.is_empty())
    }

    /// A map field: a JSON object of strings, or form keys `key[sub]=value` (deepObject).
    /// `Err` names what is wrong.
    pub(super) fn map(&self, key: &str) -> Result<Vec<(String, String)>, String> {
        if let Some(v) = self.json.get(key) {
            return match v {
                Value::Null => Ok(Vec::new()),
                Value::Object(m) => m
                    .iter()
                    .map(|(k, v)| match v.as_str() {
                        Some(s) => Ok((k.clone(), s.to_string())),
                        None => Err(format!("{key}[{k}] must be a string")),
                    })
                    .collect(),
                _ => Err(format!("{key} must be an object")),
            };
        }
        let prefix = format!("{key}[");
        let mut out = Vec::new();
        for (k, v) in &self.form {
            if k == key {
                return Err(format!(
                    "{key} must be an object (send {key}[domain]=value)"
                ));
            }
            if let Some(rest) = k.strip_prefix(&prefix) {
                match rest.strip_suffix(']') {
                    Some(sub) if !sub.is_empty() && !sub.contains(['[', ']']) => {
                        out.push((sub.to_string(), v.clone()));
                    }
                    _ => return Err(format!("{k} is not a valid {key} key")),
                }
            }
        }
        Ok(out)
    }
}
