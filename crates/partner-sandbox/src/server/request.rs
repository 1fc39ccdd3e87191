//! Reading a request: the body (at most 1 MiB) and the parameters. [`api_request`] is the
//! one place where a partner-API request's parameters are made from what was received; the
//! query string is decoded as `application/x-www-form-urlencoded`, repeated keys kept in order.

use bytes::Bytes;
use http::{HeaderMap, Method};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use crate::wire::ApiRequest;

/// Largest request body accepted (a CSR is a few KiB).
const MAX_REQUEST_BODY: usize = 1024 * 1024;

pub(super) async fn read_body(body: Incoming) -> Result<Bytes, u16> {
    match Limited::new(body, MAX_REQUEST_BODY).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(413)
            } else {
                Err(400)
            }
        }
    }
}

/// Decoded query pairs (`+` as space, percent-decoding), repeated keys kept in order.
fn parse_query(raw: &str) -> Vec<(String, String)> {
    if raw.is_empty() {
        return Vec::new();
    }
    serde_urlencoded::from_str::<Vec<(String, String)>>(raw).unwrap_or_else(|_| {
        raw.split('&')
            .filter(|s| !s.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                (k.to_owned(), v.to_owned())
            })
            .collect()
    })
}

/// The partner-API request made of what was received: method, path, the raw query string
/// (decoded here), headers and body.
pub(super) fn api_request(
    method: Method,
    path: String,
    raw_query: &str,
    headers: HeaderMap,
    body: Bytes,
) -> ApiRequest {
    ApiRequest {
        method,
        path,
        query: parse_query(raw_query),
        headers,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_keeps_order_and_decodes() {
        assert_eq!(
            parse_query("a=1&b=x+y&a=%2F"),
            vec![
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "x y".to_owned()),
                ("a".to_owned(), "/".to_owned())
            ]
        );
        assert!(parse_query("").is_empty());
    }
}
