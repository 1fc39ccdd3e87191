//! The HTTP client the ACME issuer talks to a directory with: HTTPS only (a plain `http://`
//! directory only on loopback, for a CA under test), an extra trust anchor for a private
//! directory, no redirects, time limits on connecting and on the whole exchange, and a cap on
//! the answer's size, so that a garbage, huge or slow directory is an error, not a hang.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use instant_acme::{BodyWrapper, BytesResponse, HttpClient};

use super::AcmeError;

/// Largest answer read from an ACME server (directories, orders and certificate chains are a
/// few KiB).
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;
/// Time to connect (TCP and TLS).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Time for a whole exchange, the answer read included.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);

/// The client: cheap to clone.
#[derive(Clone)]
pub struct AcmeHttp {
    http: reqwest::Client,
}

impl AcmeHttp {
    /// A client trusting the system's roots and, when given, the certificates of `ca_file`.
    pub fn new(ca_file: Option<&Path>) -> Result<Self, AcmeError> {
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("cert-agent/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .referer(false)
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(EXCHANGE_TIMEOUT)
            .pool_idle_timeout(crate::values::endpoint::IDLE_CONNECTION_REUSE);
        if let Some(path) = ca_file {
            let fail = |m: String| AcmeError::Config(format!("ca_file '{}': {m}", path.display()));
            let pem = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| fail(format!("not a PEM certificate bundle: {e}")))?;
            if certs.is_empty() {
                return Err(fail("holds no PEM certificate".into()));
            }
            builder = builder.tls_certs_merge(certs);
        }
        let http = builder
            .build()
            .map_err(|e| AcmeError::Config(format!("cannot build the HTTPS client: {e}")))?;
        Ok(Self { http })
    }
}

/// Is `url` one the client may send to: `https://`, or `http://` to a loopback address?
pub fn allowed_url(url: &str) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return false;
    };
    match parsed.scheme() {
        "https" => parsed.host_str().is_some(),
        "http" => parsed.host_str().is_some_and(|h| {
            let h = h.trim_start_matches('[').trim_end_matches(']');
            h.eq_ignore_ascii_case("localhost")
                || h.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
        }),
        _ => false,
    }
}

/// An answer as read: status, headers, and at most [`MAX_ANSWER_BYTES`] of body.
pub struct Answer {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl AcmeHttp {
    /// Sends one request to `url` (refused unless [`allowed_url`]) and reads its answer
    /// within the limits of size and time.
    pub async fn send(
        &self,
        method: http::Method,
        url: &str,
        headers: &http::HeaderMap,
        body: Bytes,
    ) -> Result<Answer, String> {
        if !allowed_url(url) {
            return Err(format!(
                "refusing to send to {}: not an https:// URL",
                crate::values::text::quote_max(url, 200)
            ));
        }
        let mut request = self.http.request(method, url).body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let mut answer = request.send().await.map_err(|e| describe(&e))?;
        let status = answer.status();
        let headers = answer.headers().clone();
        let too_large = || {
            format!(
                "the answer from {} is larger than {MAX_ANSWER_BYTES} bytes",
                crate::values::text::quote_max(url, 200)
            )
        };
        if answer
            .content_length()
            .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = answer.chunk().await.map_err(|e| describe(&e))? {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Answer {
            status,
            headers,
            body: Bytes::from(bytes),
        })
    }
}

/// Whether `url` is at the same origin (scheme, host, port) as `directory`: where an order
/// URL read back from the state may be sent with the account's signature.
pub(crate) fn same_origin(url: &str, directory: &str) -> bool {
    match (reqwest::Url::parse(url), reqwest::Url::parse(directory)) {
        (Ok(u), Ok(d)) => {
            u.scheme() == d.scheme()
                && u.host_str().is_some()
                && u.host_str() == d.host_str()
                && u.port_or_known_default() == d.port_or_known_default()
        }
        _ => false,
    }
}

impl HttpClient for AcmeHttp {
    fn request(
        &self,
        req: http::Request<BodyWrapper<Bytes>>,
    ) -> Pin<Box<dyn Future<Output = Result<BytesResponse, instant_acme::Error>> + Send>> {
        let client = self.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let url = parts.uri.to_string();
            let body = http_body_util::BodyExt::collect(body)
                .await
                .map(http_body_util::Collected::to_bytes)
                .unwrap_or_default();
            let answer = client
                .send(parts.method, &url, &parts.headers, body)
                .await
                .map_err(other)?;
            let mut response = http::Response::new(Full::new(answer.body));
            *response.status_mut() = answer.status;
            *response.headers_mut() = answer.headers;
            Ok(BytesResponse::from(response))
        })
    }
}

fn other(message: String) -> instant_acme::Error {
    instant_acme::Error::Other(message.into())
}

/// A request error with its causes, one line.
fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "no answer in time".to_owned()
    } else {
        e.to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_is_sent_to() {
        for ok in [
            "https://acme.example/dir",
            "https://127.0.0.1:14000/dir",
            "http://127.0.0.1:4001/dir",
            "http://[::1]:4001/dir",
            "http://localhost:4001/dir",
        ] {
            assert!(allowed_url(ok), "{ok}");
        }
        let dir = "https://acme.example/dir";
        assert!(same_origin("https://acme.example/order/7", dir));
        assert!(same_origin("https://acme.example:443/order/7", dir));
        for other in [
            "https://evil.example/order/7",
            "http://acme.example/order/7",
            "https://acme.example:8443/order/7",
            "https://acme.example.evil.example/order/7",
            "not a url",
            "",
        ] {
            assert!(!same_origin(other, dir), "{other}");
        }
        for bad in [
            "http://acme.example/dir",
            "http://10.0.0.1/dir",
            "ftp://acme.example/dir",
            "file:///etc/passwd",
            "https://",
            "not a url",
            "",
        ] {
            assert!(!allowed_url(bad), "{bad}");
        }
    }
}
