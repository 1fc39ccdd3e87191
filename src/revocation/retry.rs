//! The CRL retry book, `state_dir/crl-retry.json`: each CRL URL whose last download failed or
//! was refused, how many times in a row, why, and when a run tries it again. The first failure
//! is tried again by the next run (a passing fault); from the second in a row a run waits 5
//! minutes, doubling up to `refresh_secs`, so that a CA's CRL outage costs one attempt per
//! interval, not one per run. A success removes the URL. `check` always tries (an operator
//! asked now) and records what it found.
//!
//! The file is a hint: a missing, foreign or damaged one is an empty book (every CRL is tried).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// The file under `state_dir`.
pub(crate) const RETRY_FILE: &str = "crl-retry.json";
const FORMAT: u32 = 1;
/// The wait after the second failure in a row.
const FIRST_WAIT: Duration = Duration::from_secs(5 * 60);
/// Largest book read, longest URL and error kept.
const MAX_BYTES: u64 = 1024 * 1024;
const MAX_URL: usize = 2048;
const MAX_ERROR: usize = 2048;

/// One URL's failures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Failures in a row (at least 1).
    pub failures: u32,
    /// Not tried by a run before this instant (Unix seconds).
    pub retry_at: i64,
    /// The last failure's text.
    pub error: String,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    format: u32,
    urls: BTreeMap<String, Failure>,
}

/// The book of one run or check.
#[derive(Debug, Default)]
pub struct Book {
    urls: BTreeMap<String, Failure>,
    changed: bool,
}

impl Book {
    /// Parses `bytes`: `None` unless it is a whole book of this format whose every URL is an
    /// `http(s)` URL and every entry counts a failure.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.len() as u64 > MAX_BYTES {
            return None;
        }
        let stored: Stored = serde_json::from_slice(bytes).ok()?;
        if stored.format != FORMAT {
            return None;
        }
        for (url, f) in &stored.urls {
            let lower = url.to_ascii_lowercase();
            if url.len() > MAX_URL
                || !(lower.starts_with("http://") || lower.starts_with("https://"))
                || f.failures == 0
                || f.error.len() > MAX_ERROR
            {
                return None;
            }
        }
        Some(Self {
            urls: stored.urls,
            changed: false,
        })
    }

    /// The book under `state_dir`; empty when there is none or it cannot be used.
    pub fn load(state_dir: &Path) -> Self {
        let path = state_dir.join(RETRY_FILE);
        match crate::fsutil::read_private(&path, MAX_BYTES) {
            Ok(bytes) => Self::parse(&bytes).unwrap_or_else(|| {
                tracing::debug!("{} cannot be used: every CRL is tried", path.display());
                Self::default()
            }),
            Err(_) => Self::default(),
        }
    }

    /// The failures of `url` when a run is to wait for it at `now`.
    pub fn waiting(&self, url: &str, now: OffsetDateTime) -> Option<&Failure> {
        self.urls
            .get(url)
            .filter(|f| f.failures >= 2 && f.retry_at > now.unix_timestamp())
    }

    /// Records a failure of `url` at `now`; the wait grows up to `refresh`.
    pub fn failed(
        &mut self,
        url: &str,
        error: &str,
        now: OffsetDateTime,
        refresh: Duration,
    ) -> Failure {
        let failures = self
            .urls
            .get(url)
            .map_or(1, |f| f.failures.saturating_add(1));
        let wait = wait_after(failures, refresh);
        let mut error = error.to_owned();
        if error.len() > MAX_ERROR {
            let mut end = MAX_ERROR;
            while !error.is_char_boundary(end) {
                end -= 1;
            }
            error.truncate(end);
        }
        let f = Failure {
            failures,
            retry_at: now
                .unix_timestamp()
                .saturating_add(i64::try_from(wait.as_secs()).unwrap_or(i64::MAX)),
            error,
        };
        if url.len() <= MAX_URL {
            self.urls.insert(url.to_owned(), f.clone());
            self.changed = true;
        }
        f
    }

    /// `url` was read: it is no longer waited for.
    pub fn succeeded(&mut self, url: &str) {
        self.changed |= self.urls.remove(url).is_some();
    }

    /// Writes the book when it changed (removes it when empty); a failure is logged: the next
    /// run tries every CRL.
    pub fn save(&mut self, state_dir: &Path) {
        if !self.changed {
            return;
        }
        self.changed = false;
        let path = state_dir.join(RETRY_FILE);
        if self.urls.is_empty() {
            let _ = std::fs::remove_file(&path);
            return;
        }
        let stored = Stored {
            format: FORMAT,
            urls: std::mem::take(&mut self.urls),
        };
        let written = serde_json::to_vec(&stored)
            .map_err(std::io::Error::other)
            .and_then(|json| crate::fsutil::write_atomic(&path, &json, 0o600));
        self.urls = stored.urls;
        if let Err(e) = written {
            tracing::warn!(
                "could not write {}: {}",
                path.display(),
                crate::fsutil::io_text(&e)
            );
        }
    }
}

/// The wait after `failures` in a row: none after the first, then 5 minutes doubling, at
/// most `refresh` (and never under 5 minutes).
pub(crate) fn wait_after(failures: u32, refresh: Duration) -> Duration {
    if failures <= 1 {
        return Duration::ZERO;
    }
    let doubled = FIRST_WAIT.saturating_mul(1u32 << (failures - 2).min(20));
    doubled.min(refresh.max(FIRST_WAIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(unix: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(unix).expect("time")
    }

    #[test]
    fn the_wait_doubles_from_the_second_failure_up_to_the_refresh_interval() {
        let refresh = Duration::from_secs(6 * 3600);
        let waits: Vec<u64> = (1..=9).map(|n| wait_after(n, refresh).as_secs()).collect();
        assert_eq!(waits, [0, 300, 600, 1200, 2400, 4800, 9600, 19200, 21600]);
        assert_eq!(wait_after(u32::MAX, refresh), refresh);
        assert_eq!(wait_after(2, Duration::from_secs(10)), FIRST_WAIT);
    }

    #[test]
    fn a_book_keeps_failures_until_a_success_and_survives_a_reload() {
        let dir = tempfile::tempdir().expect("dir");
        let refresh = Duration::from_secs(3600);
        let url = "http://crl.example.net/ca.crl";
        let mut book = Book::load(dir.path());
        book.failed(url, "connection refused", at(1000), refresh);
        assert!(
            book.waiting(url, at(1000)).is_none(),
            "the next run tries again"
        );
        book.failed(url, "connection refused", at(1100), refresh);
        assert_eq!(book.waiting(url, at(1399)).map(|f| f.retry_at), Some(1400));
        assert!(book.waiting(url, at(1400)).is_none());
        book.save(dir.path());
        let mut again = Book::load(dir.path());
        assert_eq!(again.waiting(url, at(1200)).map(|f| f.failures), Some(2));
        again.succeeded(url);
        again.save(dir.path());
        assert!(!dir.path().join(RETRY_FILE).exists());
    }

    #[test]
    fn garbage_and_forged_books_are_not_used() {
        let good =
            br#"{"format":1,"urls":{"http://a/b.crl":{"failures":2,"retry_at":5,"error":"x"}}}"#;
        assert!(Book::parse(good).is_some());
        for bad in [
            &b"garbage"[..],
            br#"{"format":2,"urls":{}}"#,
            br#"{"format":1,"urls":{"file:///etc/passwd":{"failures":2,"retry_at":5,"error":"x"}}}"#,
            br#"{"format":1,"urls":{"http://a/b.crl":{"failures":0,"retry_at":5,"error":"x"}}}"#,
            br#"{"format":1,"urls":{"http://a/b.crl":{"failures":2,"retry_at":"soon","error":"x"}}}"#,
            br#"{"format":1,"urls":{"http://a/b.crl":{"failures":2,"retry_at":5,"error":"x"}}"#,
        ] {
            assert!(Book::parse(bad).is_none(), "{}", String::from_utf8_lossy(bad));
        }
        // A replayed book only delays a retry until its instant: it never makes a CRL good.
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join(RETRY_FILE);
        std::fs::write(&path, good).expect("write");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("mode");
        assert_eq!(
            Book::load(dir.path())
                .waiting("http://a/b.crl", at(4))
                .map(|f| f.failures),
            Some(2)
        );
    }
}
