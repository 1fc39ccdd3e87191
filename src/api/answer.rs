//! Reading an answer: a non-2xx status becomes its [`ApiError`], a 2xx body is decoded (or
//! described when it cannot be), and the headers the client reads (`Content-Disposition`,
//! `Date`) are parsed. Pure functions of a [`Request`] and its [`Raw`] answer.
//!
//! Imports `request` and `error`.

use reqwest::StatusCode;
use serde::de::DeserializeOwned;

use super::error::{ApiError, ErrorBody, excerpt};
use super::request::{Kind, Raw, Request};

/// Maps a non-2xx answer to its error.
pub(super) fn check_status(req: &Request, raw: Raw) -> Result<Raw, ApiError> {
    let status = StatusCode::from_u16(raw.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status.is_success() {
        return Ok(raw);
    }
    if status.is_redirection() {
        return Err(ApiError::Redirect {
            call: req.call(),
            status: raw.status,
            location: raw
                .header("location")
                .map(|l| excerpt(l.as_bytes()))
                .unwrap_or_else(|| "(no Location)".into()),
        });
    }
    let body = ErrorBody::decode(&raw.body);
    Err(ApiError::Http {
        call: req.call(),
        status: raw.status,
        // Bodies of sign-in and prolong may hold credentials: never excerpt them.
        excerpt: if req.sensitive {
            String::new()
        } else {
            excerpt(&raw.body)
        },
        body: Box::new(body),
    })
}

/// Decodes a 2xx JSON body. For a call with side effects (an order above all) an undecodable
/// 2xx means the call was probably carried out but its result is unknown:
/// [`ApiError::OutcomeUnknown`], never repeated blindly.
pub(super) fn decode<T: DeserializeOwned>(req: &Request, raw: &Raw) -> Result<T, ApiError> {
    serde_json::from_slice(&raw.body).map_err(|e| {
        // The error text names the place, not the body (bodies may hold tokens).
        let message = e.to_string();
        if req.kind != Kind::Read {
            ApiError::OutcomeUnknown {
                call: req.call(),
                reason: format!("HTTP {} with an undecodable answer: {message}", raw.status),
            }
        } else {
            ApiError::Decode {
                call: req.call(),
                status: raw.status,
                message,
            }
        }
    })
}

/// What an answer was, for messages and logs: status, content type and the beginning of the
/// body — never for answers that may carry a credential (sign-in, prolong), whose body is not
/// quoted.
pub(super) fn received(req: &Request, raw: &Raw) -> String {
    let content_type = raw
        .header("content-type")
        .map(|c| excerpt(c.as_bytes()))
        .unwrap_or_else(|| "no content type".into());
    if req.sensitive {
        return format!("HTTP {} ({content_type})", raw.status);
    }
    let start = &raw.body[..raw.body.len().min(RECEIVED_EXCERPT)];
    format!(
        "HTTP {} ({content_type}) beginning {:?}",
        raw.status,
        excerpt(start)
    )
}

/// How much of an undecodable answer is quoted.
const RECEIVED_EXCERPT: usize = 120;

/// The file name of a `Content-Disposition` header, reduced to a safe base name.
pub(super) fn disposition_filename(value: &str) -> Option<String> {
    let mut plain = None;
    let mut extended = None;
    for part in value.split(';').map(str::trim) {
        let Some((key, v)) = part.split_once('=') else {
            continue;
        };
        match key.trim().to_ascii_lowercase().as_str() {
            "filename" => plain = Some(v.trim().trim_matches('"').to_owned()),
            // RFC 5987: charset'lang'value; only percent-encoded ASCII is kept.
            "filename*" => extended = v.split('\'').nth(2).map(percent_decode_ascii),
            _ => {}
        }
    }
    let name = extended.flatten().or(plain)?;
    let base = name.rsplit(['/', '\\']).next()?.trim();
    let ok = !base.is_empty()
        && base != "."
        && base != ".."
        && !base.starts_with('.')
        && base.chars().all(|c| !c.is_control())
        && base.len() <= 255;
    ok.then(|| base.to_owned())
}

fn percent_decode_ascii(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().filter(|s| s.is_ascii())
}

/// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 IMF-fixdate).
pub(super) fn parse_http_date(text: &str) -> Option<time::OffsetDateTime> {
    let format = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    time::PrimitiveDateTime::parse(text.trim(), format)
        .ok()
        .map(time::PrimitiveDateTime::assume_utc)
}

#[cfg(test)]
mod tests {
    use reqwest::Method;
    use reqwest::header::{self, HeaderMap, HeaderValue};

    use super::*;

    #[test]
    fn redirects_are_errors_naming_the_location() {
        let req = Request::new(Method::POST, "/api/v1/order", Kind::Order, 10);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::LOCATION,
            HeaderValue::from_static("https://elsewhere.example/api/v1/order"),
        );
        let raw = Raw {
            status: 301,
            headers,
            body: Vec::new(),
        };
        let Err(e) = check_status(&req, raw) else {
            panic!("a redirect was accepted");
        };
        assert_eq!(
            e.to_string(),
            "POST /api/v1/order: HTTP 301: redirect to \"https://elsewhere.example/api/v1/order\" \
             not followed (check api.base_url)"
        );
        assert!(!e.is_retryable());
    }

    #[test]
    fn content_disposition_names_are_made_safe() {
        assert_eq!(
            disposition_filename(r#"attachment; filename="vendor_OSC-12.zip""#).as_deref(),
            Some("vendor_OSC-12.zip")
        );
        assert_eq!(
            disposition_filename("attachment; filename=../../etc/passwd").as_deref(),
            Some("passwd")
        );
        assert_eq!(disposition_filename(r#"attachment; filename="..""#), None);
        assert_eq!(
            disposition_filename(r#"attachment; filename=".hidden""#),
            None
        );
        assert_eq!(
            disposition_filename("attachment; filename*=UTF-8''a%20b.zip; filename=x.zip")
                .as_deref(),
            Some("a b.zip")
        );
        assert_eq!(disposition_filename("attachment"), None);
    }

    #[test]
    fn reads_imf_fixdate_and_refuses_other_forms() {
        let t = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(t.unix_timestamp(), 784_111_777);
        assert!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT").is_none());
        assert!(parse_http_date("garbage").is_none());
    }
}
