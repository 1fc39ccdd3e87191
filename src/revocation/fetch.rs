//! Getting a CRL's bytes: from `state_dir/crl/` while the stored copy is still valid (until its
//! `nextUpdate`), else over HTTP with a time limit and a size cap; a copy that passed the
//! checks is stored for the next runs. One fetch per URL per [`super::Checker`], however many
//! certificates name it.

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

/// The HTTP client for CRLs: time limits, a few redirects (a CRL is signed: where it comes
/// from does not matter), the agent's User-Agent.
pub(super) fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .user_agent(crate::api::user_agent())
        .redirect(reqwest::redirect::Policy::limited(3))
        .retry(reqwest::retry::never())
        .referer(false)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .timeout(timeout)
        .build()
        .map_err(|e| format!("cannot build the HTTP client for CRLs: {}", e.without_url()))
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
    let bytes = crate::fsutil::read_private(&path, limits.max_bytes).ok()?;
    let crl = crl::check(&bytes, issuer_der, now).ok()?;
    let recheck_at = crl
        .next_update
        .min(now + time::Duration::try_from(limits.refresh.saturating_sub(age)).ok()?);
    Some(Fetched {
        bytes,
        issuer_der: issuer_der.to_vec(),
        crl,
        recheck_at,
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

/// Downloads `url`, refusing more than `limits.max_bytes`, checks it and stores it.
pub(super) async fn download(
    http: &reqwest::Client,
    dir: &Path,
    url: &str,
    issuer_der: &[u8],
    now: OffsetDateTime,
    limits: CacheLimits,
) -> Result<Fetched, String> {
    let bytes = body(http, url, limits.max_bytes).await?;
    let crl = crl::check(&bytes, issuer_der, now).map_err(|e| e.to_string())?;
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
