//! Self-check before waiting for the CA: fetch `http://<domain>/.well-known/<directory>/<name>`
//! as the CA would (plain HTTP, no redirects followed, short timeout) and classify the answer,
//! so that a failure is reported with its likely cause instead of after hours of waiting.
//!
//! The body is compared the way validators do: CRLF and LF are the same, trailing whitespace
//! of each line and trailing empty lines do not count.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use super::{DCV_URL_DIR, DcvError, ValidationFile};
use crate::values::text::quote;

/// Most bytes of the answer read.
const MAX_BODY: usize = 8 * 1024;

/// What the fetch saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelfCheckOutcome {
    /// 200 with the expected content.
    Ok,
    /// 200 with other content; an escaped excerpt of what came back.
    WrongContent(String),
    /// 3xx: the status and the `Location` (escaped), empty when absent.
    Redirect(u16, String),
    /// Any other status code.
    Status(u16),
    /// No HTTP answer: DNS, connection, timeout; the reason.
    Unreachable(String),
}

impl SelfCheckOutcome {
    /// The file is served as the CA expects.
    pub fn is_ok(&self) -> bool {
        matches!(self, Self::Ok)
    }

    /// The likely cause of a failure, for the operator; `None` for [`Ok`](Self::Ok).
    pub fn likely_cause(&self) -> Option<String> {
        Some(match self {
            Self::Ok => return None,
            Self::WrongContent(_) => "another virtual host or server answers for this domain \
                (wrong vhost or webroot), or a cache or proxy serves an old copy"
                .to_owned(),
            Self::Redirect(_, location) if location.trim_matches('"').starts_with("https:") => {
                format!(
                    "the web server redirects HTTP to HTTPS; the CA fetches over plain HTTP, \
                     so exempt {DCV_URL_DIR}/ from the redirect"
                )
            }
            Self::Redirect(..) => {
                format!("the web server redirects this path; serve {DCV_URL_DIR}/ directly")
            }
            Self::Status(401 | 403) => format!(
                "authentication or an access rule protects the path; allow {DCV_URL_DIR}/ \
                 without authentication"
            ),
            Self::Status(404 | 410) => "the file is not served from this webroot: the \
                domain's virtual host uses another document root (wrong vhost or webroot), or \
                a rewrite rule catches the path"
                .to_owned(),
            Self::Status(code) if *code >= 500 => {
                "the web server or an application in front of it failed".to_owned()
            }
            Self::Status(_) => "the web server does not serve the file as a static file".to_owned(),
            Self::Unreachable(reason) => unreachable_cause(reason).to_owned(),
        })
    }

    /// A warning naming the URL, what was seen and the likely cause; `None` when Ok.
    pub fn warning(&self, url: &str) -> Option<String> {
        let cause = self.likely_cause()?;
        Some(format!(
            "self-check of {url}: {self}; likely cause: {cause}"
        ))
    }
}

impl fmt::Display for SelfCheckOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ok => write!(f, "the expected content is served"),
            Self::WrongContent(excerpt) => write!(f, "other content is served: {excerpt}"),
            Self::Redirect(code, location) => write!(f, "port 80 answers {code} to {location}"),
            Self::Status(code) => write!(f, "status {code}"),
            Self::Unreachable(reason) => write!(f, "unreachable: {reason}"),
        }
    }
}

/// How to fetch.
#[derive(Debug, Clone)]
pub struct SelfCheck {
    /// Limit for the whole fetch.
    pub timeout: Duration,
    /// Connect here instead of resolving the domain (the `Host` header stays the domain).
    /// The port of the address is used; port 0 means 80.
    pub address: Option<SocketAddr>,
}

impl Default for SelfCheck {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            address: None,
        }
    }
}

impl SelfCheck {
    /// The URL fetched for `domain` and `file`.
    pub fn url(domain: &str, file: &ValidationFile) -> String {
        format!("http://{domain}{}", file.url_path())
    }

    /// Fetches the file for `domain` and classifies the answer. Errors only when the check
    /// cannot be made at all (bad domain, HTTP client setup).
    pub async fn check(
        &self,
        domain: &str,
        file: &ValidationFile,
    ) -> Result<SelfCheckOutcome, DcvError> {
        // URLs carry host names in lower case; the address override must use the same.
        let domain = domain.to_ascii_lowercase();
        let domain = domain.as_str();
        let url = Self::url(domain, file);
        let fail = |reason: String| DcvError::SelfCheck {
            url: quote(&url),
            reason,
        };
        let valid_host = !domain.is_empty()
            && domain.len() <= 253
            && domain
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
        if !valid_host {
            return Err(fail(
                "not a host name (wildcards cannot use HTTP validation)".into(),
            ));
        }
        let builder = || {
            reqwest::Client::builder()
                .user_agent(concat!("cert-agent-selfcheck/", env!("CARGO_PKG_VERSION")))
                .redirect(reqwest::redirect::Policy::none())
                .retry(reqwest::retry::never())
                .no_proxy()
                .http1_only()
                .referer(false)
                .connect_timeout(self.timeout)
        };
        // Building a client loads the system's trust anchors: one shared client serves every
        // check of the process, except with an address override (tests), which is per client.
        static SHARED: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
        let own;
        let client = match self.address {
            Some(addr) => {
                own = builder()
                    .resolve(domain, addr)
                    .build()
                    .map_err(|e| fail(error_chain(&e)))?;
                &own
            }
            None => match SHARED.get() {
                Some(c) => c,
                None => {
                    let c = builder().build().map_err(|e| fail(error_chain(&e)))?;
                    SHARED.get_or_init(|| c)
                }
            },
        };
        let mut response = match client.get(&url).timeout(self.timeout).send().await {
            Ok(r) => r,
            Err(e) => return Ok(SelfCheckOutcome::Unreachable(error_chain(&e.without_url()))),
        };
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .map(|v| quote(&String::from_utf8_lossy(v.as_bytes())))
                .unwrap_or_default();
            return Ok(SelfCheckOutcome::Redirect(status.as_u16(), location));
        }
        if status != reqwest::StatusCode::OK {
            return Ok(SelfCheckOutcome::Status(status.as_u16()));
        }
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = MAX_BODY.saturating_sub(body.len());
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    if body.len() >= MAX_BODY {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return Ok(SelfCheckOutcome::Unreachable(error_chain(&e.without_url())));
                }
            }
        }
        if content_matches(&body, file.content()) {
            Ok(SelfCheckOutcome::Ok)
        } else {
            Ok(SelfCheckOutcome::WrongContent(quote(
                &String::from_utf8_lossy(&body),
            )))
        }
    }
}

/// Equal after turning CRLF into LF, removing trailing whitespace of every line and trailing
/// empty lines.
fn content_matches(body: &[u8], expected: &str) -> bool {
    let Ok(text) = std::str::from_utf8(body) else {
        return false;
    };
    normalise(text) == normalise(expected)
}

fn normalise(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').map(str::trim_end).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

/// An error with its sources, escaped.
/// Why nothing answered, from the error's words: the name not resolving, a connection
/// refused, a connection that timed out, or (words not recognised) all three possibilities.
fn unreachable_cause(reason: &str) -> &'static str {
    let r = reason.to_ascii_lowercase();
    if r.contains("dns error")
        || r.contains("failed to lookup")
        || r.contains("name or service not known")
        || r.contains("no address")
    {
        "the name does not resolve from here: add its A or AAAA record pointing at the web \
         server that serves /.well-known/"
    } else if r.contains("connection refused") {
        "no web server listens on port 80 at the address the name points to"
    } else if r.contains("timed out") {
        "nothing answers on port 80 at the address the name points to: it points at another \
         host, or a firewall drops the connection"
    } else {
        "nothing answers on port 80 at the address fetched from here: the name points at \
         another host, a firewall drops the connection, or no web server listens"
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text.chars().filter(|c| !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_comparison_ignores_line_ends_and_trailing_space() {
        let expected = "ABC\nsectigo.com\nuv1";
        assert!(content_matches(
            b"ABC\r\nsectigo.com \r\nuv1\r\n\r\n",
            expected
        ));
        assert!(content_matches(b"ABC\nsectigo.com\nuv1", expected));
        assert!(!content_matches(b"ABC\nsectigo.com", expected));
        assert!(!content_matches(b" ABC\nsectigo.com\nuv1", expected));
        assert!(!content_matches(&[0xff], expected));
    }

    #[test]
    fn causes_are_named() {
        let https = SelfCheckOutcome::Redirect(301, "\"https://www.example.com/x\"".into());
        assert!(
            https.to_string().starts_with("port 80 answers 301 to"),
            "{https}"
        );
        assert!(https.likely_cause().unwrap().contains("HTTPS"));
        assert!(
            SelfCheckOutcome::Status(401)
                .likely_cause()
                .unwrap()
                .contains("authentication")
        );
        assert!(
            SelfCheckOutcome::Status(404)
                .likely_cause()
                .unwrap()
                .contains("wrong vhost")
        );
        assert!(SelfCheckOutcome::Ok.warning("http://x/").is_none());
        let w = SelfCheckOutcome::WrongContent("\"x\"".into())
            .warning("http://www.example.com/.well-known/pki-validation/A.txt")
            .unwrap();
        assert!(w.contains("www.example.com") && w.contains("vhost"), "{w}");
    }

    #[test]
    fn an_unreachable_file_is_blamed_on_what_the_error_says() {
        let cause = |reason: &str| {
            SelfCheckOutcome::Unreachable(reason.into())
                .likely_cause()
                .unwrap_or_default()
        };
        let dns = cause(
            "error sending request: client error (Connect): dns error: failed to lookup address information: Name or service not known",
        );
        assert!(
            dns.contains("does not resolve") && !dns.contains("firewall"),
            "{dns}"
        );
        let refused = cause(
            "error sending request: client error (Connect): tcp connect error: Connection refused (os error 111)",
        );
        assert!(
            refused.contains("no web server listens") && !refused.contains("firewall"),
            "{refused}"
        );
        let timeout = cause("error sending request: operation timed out");
        assert!(
            timeout.contains("firewall") && !timeout.contains("resolve"),
            "{timeout}"
        );
        assert!(cause("something else").contains("no web server listens"));
    }

    /// The warning names the URL once (reqwest's error would carry it again).
    #[tokio::test]
    async fn an_unreachable_url_is_named_once() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let url = format!("http://127.0.0.1:{port}/.well-known/pki-validation/A.txt");
        let client = reqwest::Client::new();
        let e = client.get(&url).send().await.expect_err("nothing listens");
        let outcome = SelfCheckOutcome::Unreachable(error_chain(&e.without_url()));
        let w = outcome.warning(&url).unwrap_or_default();
        assert_eq!(w.matches(&url).count(), 1, "{w}");
        assert!(w.contains("no web server listens"), "{w}");
    }
}
