//! What a client is built from: [`ClientOptions`] (base URL, login, password source, trust
//! anchors, token cache, timeouts, body limits, the [`SendGuard`] asked before each request),
//! the [`RetryPolicy`] of idempotent calls, and the User-Agent.
//!
//! Imports only `auth` (the password source) and the foundation (`values`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::auth::PasswordSource;
pub(crate) use crate::values::endpoint::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, IDLE_CONNECTION_REUSE, normalize_base_url,
};

/// Largest JSON answer accepted.
pub(crate) const MAX_JSON_BYTES: usize = 4 * 1024 * 1024;
/// Largest ZIP archive accepted (download calls).
pub(crate) const MAX_ZIP_BYTES: usize = 16 * 1024 * 1024;

/// `cert-agent/<version>`, sent as User-Agent.
pub(crate) fn user_agent() -> String {
    format!("cert-agent/{}", env!("CARGO_PKG_VERSION"))
}

/// Retries of idempotent calls: capped exponential backoff with jitter, bounded in count and
/// in total time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, including the first (1 = no retry).
    pub max_attempts: u32,
    /// Delay before the first retry (before jitter).
    pub initial_backoff: Duration,
    /// Longest delay between two attempts.
    pub max_backoff: Duration,
    /// No retry starts once this much time has passed since the first attempt.
    pub max_elapsed: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_elapsed: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// `max_attempts` attempts with millisecond delays (for tests).
    pub fn fast(max_attempts: u32) -> Self {
        Self {
            max_attempts,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_elapsed: Duration::from_secs(30),
        }
    }

    /// Delay before attempt `attempt + 1`: `initial · 2^(attempt-1)`, capped, times a random
    /// factor in [0.5, 1].
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self
            .initial_backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let capped = exp.min(self.max_backoff);
        // `try_from`: no panic even for an absurd `max_backoff`.
        Duration::try_from_secs_f64(capped.as_secs_f64() * rand::random_range(0.5..=1.0))
            .unwrap_or(capped)
    }
}

/// A check made immediately before every request is sent (sign-ins and repeated attempts
/// included): `Err(reason)` and the request is not sent — the call fails with
/// [`ApiError::NotSent`](super::ApiError::NotSent), is not repeated and is not counted. A
/// fleet's leader installs one that refuses once its lead of the fleet may have ended.
///
/// A guard made [`with_deadline`](Self::with_deadline) also yields how long the request has
/// to be sent in: the client abandons a request not handed to the connection by then (see
/// `api/gate.rs`), and asks the guard again at that last moment.
#[derive(Clone)]
pub struct SendGuard(Arc<dyn Fn() -> Result<Option<Duration>, String> + Send + Sync>);

impl SendGuard {
    /// A guard that asks `check` before each request, with no time limit for the sending.
    pub fn new(check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(move || check().map(|()| None)))
    }

    /// A guard that asks `remaining` before each request: `Ok(time)` is how long the request
    /// has to be sent in (zero counts as a refusal).
    pub fn with_deadline(
        remaining: impl Fn() -> Result<Duration, String> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(move || remaining().map(Some)))
    }

    /// `Ok` when a request may be sent now; otherwise why not.
    pub fn check(&self) -> Result<(), String> {
        self.remaining().map(|_| ())
    }

    /// `Ok` when a request may be sent now, with the time it has to be sent in (`None`: no
    /// limit); otherwise why not.
    pub fn remaining(&self) -> Result<Option<Duration>, String> {
        match (self.0)()? {
            Some(left) if left.is_zero() => Err(ZERO_LEFT.to_owned()),
            left => Ok(left),
        }
    }
}

/// Why a guard that yields no time at all refuses.
const ZERO_LEFT: &str = "no time is left to send the request in";

impl std::fmt::Debug for SendGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SendGuard")
    }
}

/// Everything the client needs. Build it with [`ClientOptions::new`] and adjust fields.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `api.base_url`, `https://` only; may carry a path prefix; no query, no user info.
    pub base_url: String,
    /// `api.login`.
    pub login: String,
    /// Where the password comes from (read only when a sign-in is needed).
    pub password: PasswordSource,
    /// `api.ca_file`: PEM file with extra trust anchors (in addition to the system roots).
    pub ca_file: Option<PathBuf>,
    /// `agent.state_dir`: the token is cached in `state_dir/token`. `None` keeps it in memory.
    pub state_dir: Option<PathBuf>,
    pub connect_timeout: Duration,
    /// Total time of one attempt, body included.
    pub timeout: Duration,
    /// How long an idle connection may wait for the next request; one idle longer is closed
    /// and the request connects anew (default [`IDLE_CONNECTION_REUSE`], 4 s).
    pub idle_reuse: Duration,
    pub retry: RetryPolicy,
    pub max_json_bytes: usize,
    pub max_zip_bytes: usize,
    /// Asked before every request is sent (`None`: every request may be sent).
    pub guard: Option<SendGuard>,
}

impl ClientOptions {
    /// Options with the default timeouts, retries and body limits, and no token cache.
    pub fn new(
        base_url: impl Into<String>,
        login: impl Into<String>,
        password: PasswordSource,
    ) -> Self {
        Self {
            base_url: base_url.into(),
            login: login.into(),
            password,
            ca_file: None,
            state_dir: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: DEFAULT_TIMEOUT,
            idle_reuse: IDLE_CONNECTION_REUSE,
            retry: RetryPolicy::default(),
            max_json_bytes: MAX_JSON_BYTES,
            max_zip_bytes: MAX_ZIP_BYTES,
            guard: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_must_be_https_without_credentials() {
        assert_eq!(
            normalize_base_url("https://partner.example.net/").unwrap(),
            "https://partner.example.net"
        );
        assert_eq!(
            normalize_base_url("https://h:8443/prefix/").unwrap(),
            "https://h:8443/prefix"
        );
        assert!(
            normalize_base_url("http://partner.example.net")
                .unwrap_err()
                .contains("https://")
        );
        assert!(normalize_base_url("https://u:p@h").is_err());
        assert!(normalize_base_url("https://h/?auth_token=x").is_err());
        assert!(normalize_base_url("partner.example.net").is_err());
    }

    #[test]
    fn backoff_is_capped_and_jittered() {
        let p = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            max_elapsed: Duration::from_secs(10),
        };
        for attempt in 1..12 {
            let d = p.delay(attempt);
            let full = Duration::from_millis(100 * (1u64 << (attempt - 1))).min(p.max_backoff);
            assert!(d <= full && d >= full / 2, "attempt {attempt}: {d:?}");
        }
    }
}
