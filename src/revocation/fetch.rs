//! Getting a CRL's bytes: from `state_dir/crl/` while the stored copy is still valid (until its
//! `nextUpdate`), else over HTTP with a time limit and a size cap; a copy that passed the
//! checks is stored for the next runs. One fetch per URL per [`super::Checker`], however many
//! certificates name it. A download older than the copy kept (`thisUpdate` or `cRLNumber`
//! going back: a replay) is refused and the kept copy stays. Redirects are followed only to
//! the same host (same scheme and port, or the `https` upgrade of an `http` URL), never to a
//! loopback, link-local or private address.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::crl::{self, Crl};

/// A CRL that passed the checks for one issuer.
#[derive(Debug)]
pub(super) struct Fetched {
    pub(super) bytes: Vec<u8>,
    pub(super) issuer_der: Vec<u8>,
    pub(super) crl: Crl,
    /// When a run reads it again: its `nextUpdate`, or the end of `refresh_secs` since it was
    /// stored, whichever comes first.
    pub(super) recheck_at: OffsetDateTime,
}

/// Where the CRL of `url` is kept: `dir/` + the first 32 hex digits of its SHA-256.
pub(super) fn cache_path(dir: &Path, url: &str) -> PathBuf {
    let digest = Sha256::digest(url.as_bytes());
    dir.join(format!("{}.crl", &hex::encode(digest)[..32]))
}

/// Redirects followed for one download.
const MAX_REDIRECTS: usize = 3;

/// The HTTP client for CRLs: time limits, a few redirects within the same host
/// ([`redirect_refusal`]), the agent's User-Agent.
pub(super) fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let Some(from) = attempt.previous().first() else {
            return attempt.stop();
        };
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        match redirect_refusal(from, attempt.url()) {
            Some(why) => {
                let text = format!(
                    "the server redirected to {}: not followed ({why})",
                    attempt.url()
                );
                attempt.error(text)
            }
            None => attempt.follow(),
        }
    });
    reqwest::Client::builder()
        .user_agent(crate::api::user_agent())
        .redirect(policy)
        .retry(reqwest::retry::never())
        .referer(false)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .timeout(timeout)
        .build()
        .map_err(|e| format!("cannot build the HTTP client for CRLs: {}", e.without_url()))
}

/// Why a redirect from the CRL URL `from` to `to` is not followed, `None` when it is: only
/// to the same host, with the same scheme and port or as the `https` upgrade of an `http`
/// URL (port 443), and never to an address literal that is loopback, link-local, private,
/// shared (100.64/10), unique-local or unspecified. A CRL is signed, but where the agent
/// connects is not the CRL server's to choose: a redirect must not turn the agent into a
/// probe of the host's own network.
pub(super) fn redirect_refusal(from: &reqwest::Url, to: &reqwest::Url) -> Option<&'static str> {
    if let Some(ip) = host_ip(to)
        && !public(ip)
    {
        return Some("a loopback, link-local or private address");
    }
    if from.host_str() != to.host_str() {
        return Some("another host");
    }
    let same =
        from.scheme() == to.scheme() && from.port_or_known_default() == to.port_or_known_default();
    let upgrade = from.scheme() == "http"
        && to.scheme() == "https"
        && to.port_or_known_default() == Some(443);
    (!same && !upgrade).then_some("another scheme or port")
}

fn host_ip(url: &reqwest::Url) -> Option<std::net::IpAddr> {
    let host = url.host_str()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match host.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V6(a) => Some(a.to_ipv4_mapped().map_or(a.into(), Into::into)),
        v4 => Some(v4),
    }
}

fn public(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(a) => {
            let [first, second, ..] = a.octets();
            !(a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_unspecified()
                || a.is_broadcast()
                || (first == 100 && (64..128).contains(&second)))
        }
        std::net::IpAddr::V6(a) => {
            let top = a.segments()[0];
            !(a.is_loopback()
                || a.is_unspecified()
                || (top & 0xfe00) == 0xfc00
                || (top & 0xffc0) == 0xfe80)
        }
    }
}

/// How a stored copy may be used: its size cap, and the age (since it was stored, on this
/// host's own clock) after which it is fetched again even before its `nextUpdate`.
#[derive(Debug, Clone, Copy)]
pub(super) struct CacheLimits {
    pub(super) max_bytes: u64,
    pub(super) refresh: Duration,
}

/// The stored copy of `url`'s CRL if it is younger than `limits.refresh` and still passes
/// every check at `now`.
pub(super) fn from_cache(
    dir: &Path,
    url: &str,
    issuer_der: &[u8],
    now: OffsetDateTime,
    limits: CacheLimits,
) -> Option<Fetched> {
    let path = cache_path(dir, url);
    let stored = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
    // A copy stored "in the future" (a clock set back) counts as old.
    let age = std::time::SystemTime::now().duration_since(stored).ok()?;
    if age >= limits.refresh {
        return None;
    }
    let mut kept = kept(dir, url, issuer_der, now, limits.max_bytes)?;
    kept.recheck_at = kept
        .crl
        .next_update
        .min(now + time::Duration::try_from(limits.refresh.saturating_sub(age)).ok()?);
    Some(kept)
}

/// The stored copy of `url`'s CRL if it still passes every check at `now`, however long ago
/// it was stored (a download that failed or was refused leaves it in use until its
/// `nextUpdate`).
pub(super) fn kept(
    dir: &Path,
    url: &str,
    issuer_der: &[u8],
    now: OffsetDateTime,
    max_bytes: u64,
) -> Option<Fetched> {
    let bytes = crate::fsutil::read_private(&cache_path(dir, url), max_bytes).ok()?;
    let crl = crl::check(&bytes, issuer_der, now).ok()?;
    Some(Fetched {
        bytes,
        issuer_der: issuer_der.to_vec(),
        recheck_at: crl.next_update,
        crl,
    })
}

/// When the stored copy of `url`'s CRL is next to be read again: its `nextUpdate`, or the end
/// of `limits.refresh` since it was stored, whichever comes first (`None` when it is not
/// usable now).
pub(super) fn kept_until(
    dir: &Path,
    url: &str,
    issuer_der: &[u8],
    now: OffsetDateTime,
    limits: CacheLimits,
) -> Option<OffsetDateTime> {
    from_cache(dir, url, issuer_der, now, limits).map(|f| f.recheck_at)
}

/// Downloads `url`, refusing more than `limits.max_bytes`, checks it and stores it; a CRL
/// older than `kept` (the copy kept for the same issuer) is refused.
pub(super) async fn download(
    http: &reqwest::Client,
    dir: &Path,
    url: &str,
    issuer_der: &[u8],
    now: OffsetDateTime,
    limits: CacheLimits,
    kept: Option<&Crl>,
) -> Result<Fetched, String> {
    let bytes = body(http, url, limits.max_bytes).await?;
    let crl = crl::check(&bytes, issuer_der, now).map_err(|e| e.to_string())?;
    if let Some(kept) = kept
        && crl.is_older_than(kept)
    {
        return Err(format!(
            "the server sent an older CRL ({}) than the one kept ({}): refused, the kept one \
             stays",
            crl.describe(),
            kept.describe()
        ));
    }
    if let Err(e) = crate::fsutil::ensure_private_dir(dir, 0o700)
        .and_then(|()| crate::fsutil::write_atomic(&cache_path(dir, url), &bytes, 0o600))
    {
        tracing::warn!(
            "could not keep the CRL of {url} in {}: {}",
            dir.display(),
            crate::fsutil::io_text(&e)
        );
    }
    let refresh = time::Duration::try_from(limits.refresh).unwrap_or(time::Duration::MAX);
    Ok(Fetched {
        bytes,
        issuer_der: issuer_der.to_vec(),
        recheck_at: crl.next_update.min(now.saturating_add(refresh)),
        crl,
    })
}

async fn body(http: &reqwest::Client, url: &str, max_bytes: u64) -> Result<Vec<u8>, String> {
    let mut resp = http
        .get(url)
        .send()
        .await
        .map_err(|e| format!("download failed: {}", error_text(&e)))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("the server answered {status}"));
    }
    let too_big = || format!("the CRL is larger than max_crl_bytes ({max_bytes} bytes)");
    if resp.content_length().is_some_and(|n| n > max_bytes) {
        return Err(too_big());
    }
    let mut out = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("download failed: {}", error_text(&e)))?
    {
        if out.len() as u64 + chunk.len() as u64 > max_bytes {
            return Err(too_big());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The error and its causes, without the URL (which the caller names).
fn error_text(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_owned()
    } else {
        String::new()
    };
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if text.is_empty() {
        text = e.to_string();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::redirect_refusal;

    fn url(text: &str) -> reqwest::Url {
        reqwest::Url::parse(text).expect("url")
    }

    #[test]
    fn redirects_stay_on_the_same_host_and_off_private_addresses() {
        let from = url("http://crl.example.net/ca.crl");
        for (to, refused) in [
            ("http://crl.example.net/other.crl", None),
            ("https://crl.example.net/ca.crl", None),
            (
                "https://crl.example.net:8443/ca.crl",
                Some("another scheme or port"),
            ),
            (
                "http://crl.example.net:8080/ca.crl",
                Some("another scheme or port"),
            ),
            ("http://other.example.net/ca.crl", Some("another host")),
            (
                "http://127.0.0.2/ca.crl",
                Some("a loopback, link-local or private address"),
            ),
            (
                "http://169.254.169.254/latest",
                Some("a loopback, link-local or private address"),
            ),
            (
                "http://10.1.2.3/ca.crl",
                Some("a loopback, link-local or private address"),
            ),
            (
                "http://192.168.0.1/ca.crl",
                Some("a loopback, link-local or private address"),
            ),
            (
                "http://100.64.0.1/ca.crl",
                Some("a loopback, link-local or private address"),
            ),
            (
                "http://[::1]/ca.crl",
                Some("a loopback, link-local or private address"),
            ),
            (
                "http://[fe80::1]/ca.crl",
                Some("a loopback, link-local or private address"),
            ),
            (
                "http://[::ffff:127.0.0.1]/ca.crl",
                Some("a loopback, link-local or private address"),
            ),
            (
                "http://0.0.0.0/ca.crl",
                Some("a loopback, link-local or private address"),
            ),
        ] {
            assert_eq!(redirect_refusal(&from, &url(to)), refused, "{to}");
        }
        // Not even back to the loopback host a test CRL server was named by.
        let local = url("http://127.0.0.1:8080/ca.crl");
        assert!(redirect_refusal(&local, &url("http://127.0.0.1:8080/b.crl")).is_some());
        // No downgrade.
        let https = url("https://crl.example.net/ca.crl");
        assert!(redirect_refusal(&https, &url("http://crl.example.net/ca.crl")).is_some());
    }
}
