//! The faults that change an answer after the request was applied: half a JSON document, a
//! maintenance page, every value of the wrong type, the CA unreachable, a failing or hostile
//! bundle, a refusal with a chosen message. (A `status` fault answers before; `delay` and `drop_after_apply` act on the
//! connection.)

use bytes::Bytes;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::bundle;
use crate::faults::FaultKind;
use crate::wire::{ApiRequest, ApiResponse, ResponseBody};
use crate::world::{World, guarded};

/// Rewrites `resp` as `fault` says. The CA, bundle and hostile-bundle faults replace only an
/// answer that would have been a 200.
pub(super) fn answer_fault(
    w: &World,
    req: &ApiRequest,
    fault: Option<&FaultKind>,
    resp: &mut ApiResponse,
    now: OffsetDateTime,
) {
    match fault {
        Some(FaultKind::MalformedJson) => {
            resp.status = 200;
            resp.body = ResponseBody::Text(malformed_json(&resp.body));
        }
        Some(FaultKind::HtmlPage) => {
            resp.status = 200;
            resp.body = ResponseBody::Bytes {
                content_type: "text/html; charset=utf-8".into(),
                filename: None,
                data: Bytes::from_static(MAINTENANCE_PAGE.as_bytes()),
            };
        }
        Some(FaultKind::WrongTypes) => {
            resp.status = 200;
            let real = match &resp.body {
                ResponseBody::Json(v) => v.clone(),
                _ => json!({ "success": true }),
            };
            resp.body = ResponseBody::Json(wrong_types(real));
        }
        Some(FaultKind::CaUnreachable) if resp.status == 200 => {
            resp.status = 422;
            resp.headers.clear();
            resp.body = ResponseBody::Json(json!({
                "success": false,
                "error": "Failed to retrieve DCV status: the certificate authority cannot be reached, try again later",
            }));
        }
        Some(FaultKind::Refusal { message }) if resp.status == 200 => {
            resp.status = 422;
            resp.headers.clear();
            resp.body = ResponseBody::Json(json!({ "success": false, "error": message }));
        }
        Some(FaultKind::BundleFailure { failure }) if resp.status == 200 => {
            resp.status = 422;
            resp.headers.clear();
            resp.body = ResponseBody::Json(json!({ "errors": failure.message() }));
        }
        Some(FaultKind::HostileBundle { hostile }) if resp.status == 200 => {
            match hostile_body(w, &req.path, *hostile, now) {
                Ok(data) => {
                    let filename = match &resp.body {
                        ResponseBody::Bytes { filename, .. } => filename.clone(),
                        _ => None,
                    };
                    resp.body = ResponseBody::Bytes {
                        content_type: "application/zip".into(),
                        filename,
                        data: Bytes::from(data),
                    };
                }
                Err(e) => tracing::error!("hostile bundle for {}: {e}", req.path),
            }
        }
        _ => {}
    }
}

fn hostile_body(
    w: &World,
    path: &str,
    kind: bundle::HostileKind,
    now: OffsetDateTime,
) -> Result<Vec<u8>, String> {
    let id = certificate_id_in(path).ok_or_else(|| "no certificate ID in the path".to_owned())?;
    let input = guarded(|| w.state.hostile_input(id, now, &w.ca))?
        .ok_or_else(|| format!("certificate {id} has no issued certificate"))?;
    guarded(|| bundle::hostile_bundle(kind, &input.borrow(), &w.ca))?.map_err(|e| e.to_string())
}

/// `12` in `/api/v1/ssl_certificates/12/...`.
fn certificate_id_in(path: &str) -> Option<u64> {
    path.strip_prefix("/api/v1/ssl_certificates/")?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// What a proxy in front of the service answers during maintenance.
const MAINTENANCE_PAGE: &str = "<!DOCTYPE html>\n<html><head><title>503 Service Temporarily \
Unavailable</title></head><body><h1>Maintenance</h1><p>We will be back shortly.</p></body>\
</html>\n";

/// `value` with every scalar of the wrong type: numbers become strings, strings numbers,
/// booleans strings, an empty array a string (null stays null; arrays and objects are walked).
fn wrong_types(value: Value) -> Value {
    match value {
        Value::Array(items) if items.is_empty() => Value::String("[]".into()),
        Value::Number(n) => Value::String(format!("{n}")),
        Value::String(_) => Value::from(7),
        Value::Bool(b) => Value::String(b.to_string()),
        Value::Array(items) => Value::Array(items.into_iter().map(wrong_types).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, wrong_types(v))).collect())
        }
        Value::Null => Value::Null,
    }
}

/// The first half of the JSON the call would have answered: never parses.
fn malformed_json(body: &ResponseBody) -> String {
    let full = match body {
        ResponseBody::Json(v) => v.to_string(),
        _ => String::new(),
    };
    if full.len() < 4 || !(full.starts_with('{') || full.starts_with('[')) {
        return "{\"success\": tru".to_owned();
    }
    let mut cut = full.len() / 2;
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    full[..cut.max(1)].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_json_never_parses() {
        for v in [
            json!({ "order": 12, "certificate": 13, "token": "abc" }),
            json!([1, 2, 3]),
            json!({}),
            json!(null),
        ] {
            let s = malformed_json(&ResponseBody::Json(v));
            assert!(serde_json::from_str::<Value>(&s).is_err(), "{s}");
        }
    }

    #[test]
    fn wrong_types_changes_every_value() {
        let real =
            json!({ "certificate": 13, "status": "issued", "ok": true, "list": [], "n": null });
        assert_eq!(
            wrong_types(real),
            json!({ "certificate": "13", "status": 7, "ok": "true", "list": "[]", "n": null })
        );
        assert_eq!(wrong_types(json!([{ "id": 1 }])), json!([{ "id": "1" }]));
    }

    #[test]
    fn certificate_id_from_path() {
        assert_eq!(
            certificate_id_in("/api/v1/ssl_certificates/42/download_bundle"),
            Some(42)
        );
        assert_eq!(certificate_id_in("/api/v1/products"), None);
    }
}
