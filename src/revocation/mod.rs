//! Revocation: whether an installed certificate is on its issuer's CRL. The CRL is named by the
//! certificate (its CRL distribution point), fetched over HTTP at most once per URL per run,
//! kept in `state_dir/crl/` until its `nextUpdate`, capped in size, and believed only when its
//! signature verifies with the issuer certificate of the installed chain and it is not stale.
//! A CRL that cannot be used makes the answer "unknown" — never "not revoked". A CRL whose
//! download fails or is refused is reported once per run with the number of certificates it
//! leaves unknown, and tried again on a backoff ([`retry`]); while a copy kept before is still
//! valid, that copy answers.
//!
//! Bottom up: `crl` (the pure check of a CRL's bytes), `installed` (the leaf, its issuer and
//! its distribution points from the installed files), `fetch` (cache and download), `retry`
//! (the backoff of failing CRLs), and the [`Checker`] a run or a `check` shares.

mod crl;
mod fetch;
mod installed;
pub(crate) mod retry;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::{Mutex, OnceCell};

pub(crate) use crl::Entry;
pub use crl::check as check_crl;
pub use installed::of_chain;
pub(crate) use installed::{InstalledCert, read as read_installed};

use crate::clock::short_time;
use crate::config::RevocationConfig;
use crate::store::Installed;

/// Directory of the kept CRLs, under the state directory.
pub(crate) const CACHE_DIR: &str = "crl";

/// Where the CRL of `url` is kept under `state_dir` (the tests' view of the cache).
#[cfg(test)]
pub(crate) fn cache_file(state_dir: &Path, url: &str) -> PathBuf {
    fetch::cache_path(&state_dir.join(CACHE_DIR), url)
}

/// What the CRL says of an installed certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    /// Not on a valid CRL, which is good until `next_update`.
    Good {
        url: String,
        next_update: OffsetDateTime,
        /// When a run reads the CRL again: `next_update`, or earlier at the end of
        /// `refresh_secs` since the kept copy was stored.
        recheck_at: OffsetDateTime,
    },
    /// On the CRL.
    Revoked {
        url: String,
        serial_hex: String,
        revoked_at: OffsetDateTime,
        reason: Option<String>,
    },
    /// No usable CRL: revocation unknown (the URL when one was tried, and why).
    Unknown { url: Option<String>, why: String },
    /// The certificate names no HTTP CRL distribution point: nothing to check.
    NoCrl,
}

impl Status {
    /// One line for the operator.
    pub(crate) fn describe(&self) -> String {
        match self {
            Status::Good {
                url, next_update, ..
            } => format!(
                "not revoked (CRL {url}, valid until {})",
                short_time(*next_update)
            ),
            Status::Revoked {
                serial_hex,
                revoked_at,
                reason,
                url,
            } => format!(
                "serial {serial_hex} was revoked on {}{} (CRL {url})",
                short_time(*revoked_at),
                reason
                    .as_deref()
                    .map_or(String::new(), |r| format!(", reason {r}"))
            ),
            Status::Unknown {
                url: Some(url),
                why,
            } => {
                format!("revocation unknown: the CRL {url} was refused: {why}")
            }
            Status::Unknown { url: None, why } => format!("revocation unknown: {why}"),
            Status::NoCrl => "no CRL distribution point: revocation not checked".to_owned(),
        }
    }

    /// `good`, `revoked`, `unknown` or `no_crl`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Status::Good { .. } => "good",
            Status::Revoked { .. } => "revoked",
            Status::Unknown { .. } => "unknown",
            Status::NoCrl => "no_crl",
        }
    }
}

type Slot = Arc<OnceCell<Result<Arc<fetch::Fetched>, String>>>;

/// A CRL URL that could not be read this run: why, when a run tries it again, the kept copy
/// used meanwhile (its `nextUpdate`), and how many certificates it left unknown.
#[derive(Debug, Clone)]
struct Problem {
    why: String,
    retry_at: Option<OffsetDateTime>,
    kept_until: Option<OffsetDateTime>,
    unknown: usize,
}

/// When the CRLs kept in `state_dir/crl/` for the installed certificates `installed` that are
/// still usable at `now` (signed by their issuer, not stale) are first to be read again: the
/// earliest `nextUpdate`, or the end of `refresh_secs` since one was stored — when a newer
/// CRL, and a revocation it lists, can first be seen. `None` when none is kept or usable (a
/// run then fetches it anyway). Reads only the local copies, each CRL once for all the
/// certificates that name it (a CA's CRL is shared by thousands of them).
pub(crate) fn kept_next_update(
    state_dir: &Path,
    config: &RevocationConfig,
    installed: impl Iterator<Item = Installed>,
    now: OffsetDateTime,
) -> Option<OffsetDateTime> {
    let dir = state_dir.join(CACHE_DIR);
    let limits = fetch::CacheLimits {
        max_bytes: config.max_crl_bytes,
        refresh: Duration::from_secs(config.refresh_secs),
    };
    let mut seen: HashMap<(String, Vec<u8>), Option<OffsetDateTime>> = HashMap::new();
    let mut earliest = None;
    for inst in installed {
        let Ok(cert) = installed::read(&inst) else {
            continue;
        };
        for url in cert.crl_urls {
            let at = *seen
                .entry((url, cert.issuer_der.clone()))
                .or_insert_with_key(|(url, issuer)| {
                    fetch::kept_until(&dir, url, issuer, now, limits)
                });
            if let Some(a) = at {
                earliest = Some(earliest.map_or(a, |e: OffsetDateTime| e.min(a)));
            }
        }
    }
    earliest
}

/// The CRLs kept in `state_dir/crl/`, read without any download, for a `renew` that reports
/// the due summary's certificates without parsing the configuration: each kept CRL read and
/// checked once, however many entries name it.
pub(crate) struct KeptCrls {
    dir: PathBuf,
    limits: fetch::CacheLimits,
    seen: HashMap<(String, String), Option<fetch::Fetched>>,
    /// The CRLs the run that wrote the summary read, and whether each is still as it was.
    read: HashMap<(String, String), (crate::store::due::KeptCrl, Option<bool>)>,
}

impl KeptCrls {
    /// The kept CRLs under `state_dir`, used within `max_bytes` and `refresh_secs`; `read`
    /// are the CRLs the run that wrote the summary read and checked the entries against.
    pub(crate) fn new(
        state_dir: &Path,
        max_bytes: u64,
        refresh_secs: u64,
        read: &[crate::store::due::KeptCrl],
    ) -> Self {
        Self {
            dir: state_dir.join(CACHE_DIR),
            limits: fetch::CacheLimits {
                max_bytes,
                refresh: Duration::from_secs(refresh_secs),
            },
            seen: HashMap::new(),
            read: read
                .iter()
                .map(|k| ((k.url.clone(), k.issuer.clone()), (k.clone(), None)))
                .collect(),
        }
    }

    /// Whether the CRL of `url` for `issuer` is the very file the summary's run read (same
    /// stamp), younger than `refresh_secs` and before its `nextUpdate`: that run's verdicts
    /// stand without reading it. Checked once per CRL.
    fn unchanged(&mut self, url: &str, issuer: &str, now: OffsetDateTime) -> bool {
        let (dir, refresh) = (&self.dir, self.limits.refresh);
        let Some((kept, verdict)) = self.read.get_mut(&(url.to_owned(), issuer.to_owned())) else {
            return false;
        };
        *verdict.get_or_insert_with(|| {
            let file = crate::store::due::Stamp::of_path(&fetch::cache_path(dir, url));
            let age_ns = OffsetDateTime::now_utc().unix_timestamp_nanos() - kept.file.mtime_ns;
            file == Some(kept.file)
                && now.unix_timestamp() < kept.next_update
                && (0..i128::try_from(refresh.as_nanos()).unwrap_or(i128::MAX)).contains(&age_ns)
        })
    }

    /// Whether the certificate `crl` describes, found "not revoked" (or without a CRL) when
    /// its entry was made, still is by its first CRL kept and fresh at `now` (signed by
    /// `issuer_der`). `false` on any doubt: the full run decides.
    pub(crate) fn still_good(
        &mut self,
        crl: &crate::store::due::CrlRef,
        issuer_der: Option<&[u8]>,
        now: OffsetDateTime,
    ) -> bool {
        let Some(url) = crl.urls.first() else {
            return crl.state == "no_crl";
        };
        if crl.state != "good" {
            return false;
        }
        if self.unchanged(url, &crl.issuer, now) {
            return true;
        }
        let (Some(issuer_der), Ok(serial)) = (issuer_der, hex::decode(&crl.serial)) else {
            return false;
        };
        let (dir, limits) = (&self.dir, self.limits);
        self.seen
            .entry((url.clone(), crl.issuer.clone()))
            .or_insert_with(|| fetch::from_cache(dir, url, issuer_der, now, limits))
            .as_ref()
            .is_some_and(|f| f.issuer_der == issuer_der && f.crl.entry(&serial).is_none())
    }
}

/// The CRL checks of one run or one `check`: each CRL URL read once, whatever the number of
/// certificates naming it.
pub(crate) struct Checker {
    state_dir: PathBuf,
    dir: PathBuf,
    max_bytes: u64,
    timeout: Duration,
    refresh: Duration,
    /// Whether a CRL in its backoff is left alone (a run) or tried anyway (`check`).
    wait_backoff: bool,
    /// Whether a kept copy younger than `refresh` is downloaded anew all the same
    /// (`check --refresh-crl`).
    download_now: bool,
    http: std::sync::OnceLock<Result<reqwest::Client, String>>,
    slots: Mutex<HashMap<String, Slot>>,
    book: std::sync::Mutex<Option<retry::Book>>,
    problems: std::sync::Mutex<std::collections::BTreeMap<String, Problem>>,
    /// The CRLs read fresh this run (URL, issuer key, `nextUpdate`).
    fresh: std::sync::Mutex<Vec<(String, String, OffsetDateTime)>>,
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checker")
            .field("dir", &self.dir)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl Checker {
    /// A checker keeping its CRLs under `state_dir/crl/`.
    pub(crate) fn new(state_dir: &Path, config: &RevocationConfig) -> Self {
        Self {
            state_dir: state_dir.to_path_buf(),
            dir: state_dir.join(CACHE_DIR),
            max_bytes: config.max_crl_bytes,
            timeout: Duration::from_secs(config.timeout_secs),
            refresh: Duration::from_secs(config.refresh_secs),
            wait_backoff: true,
            download_now: false,
            http: std::sync::OnceLock::new(),
            slots: Mutex::default(),
            book: std::sync::Mutex::default(),
            problems: std::sync::Mutex::default(),
            fresh: std::sync::Mutex::default(),
        }
    }

    /// The CRLs this run read fresh (from `state_dir/crl/` within `refresh_secs`, or
    /// downloaded), each with its kept file's stamp now: what the due summary keeps so that a
    /// run that does not parse the configuration trusts the verdicts while the file is
    /// unchanged ([`crate::store::due::KeptCrl`]).
    pub(crate) fn fresh_crls(&self) -> Vec<crate::store::due::KeptCrl> {
        let fresh = self.fresh.lock().map(|f| f.clone()).unwrap_or_default();
        fresh
            .into_iter()
            .filter_map(|(url, issuer, next_update)| {
                let file = crate::store::due::Stamp::of_path(&fetch::cache_path(&self.dir, &url))?;
                Some(crate::store::due::KeptCrl {
                    url,
                    issuer,
                    file,
                    next_update: next_update.unix_timestamp(),
                })
            })
            .collect()
    }

    fn read_fresh(&self, url: &str, f: &fetch::Fetched) {
        if let Ok(mut fresh) = self.fresh.lock() {
            let issuer = crate::store::due::issuer_key(&f.issuer_der);
            fresh.push((url.to_owned(), issuer, f.crl.next_update));
        }
    }

    /// The checker of `check`: a CRL in its backoff is tried now all the same.
    pub(crate) fn trying_now(mut self) -> Self {
        self.wait_backoff = false;
        self
    }

    /// A checker that downloads every CRL it needs instead of using a kept copy younger than
    /// `refresh_secs` (`check --refresh-crl`); what it downloads is kept as usual.
    pub(crate) fn downloading(mut self) -> Self {
        self.download_now = true;
        self
    }

    /// Ends the run's checks: the retry book is written, and each CRL that could not be read
    /// is reported once, with the number of certificates it left unknown.
    pub(crate) fn finish(&self) {
        if let Some(book) = self
            .book
            .lock()
            .ok()
            .as_deref_mut()
            .and_then(Option::as_mut)
        {
            book.save(&self.state_dir);
        }
        let problems = self
            .problems
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default();
        for (url, p) in problems {
            let retry = match p.retry_at {
                Some(at) => format!("; tried again after {}", short_time(at)),
                None => "; tried again by the next run".to_owned(),
            };
            match p.kept_until {
                Some(until) if p.unknown == 0 => tracing::warn!(
                    "the CRL {url} could not be read again: {}; the copy kept, valid until {}, \
                     is used{retry}",
                    p.why,
                    short_time(until)
                ),
                _ if p.unknown == 0 => tracing::warn!(
                    "the CRL {url} was refused: {}{retry} (another distribution point answered)",
                    p.why
                ),
                _ => tracing::warn!(
                    "revocation unknown for {} certificate(s): the CRL {url} was refused: {}{retry}",
                    p.unknown,
                    p.why
                ),
            }
        }
    }

    /// What the CRL says of the certificate a due summary entry describes (`crl`, with its
    /// issuer's certificate `issuer_der`), without reading its installed files; not counted
    /// ([`Checker::count`] counts it where it stands).
    pub(crate) async fn status_of_ref(
        &self,
        crl: &crate::store::due::CrlRef,
        issuer_der: &[u8],
        now: OffsetDateTime,
    ) -> Status {
        let Ok(raw_serial) = hex::decode(&crl.serial) else {
            return Status::Unknown {
                url: None,
                why: format!("the kept serial '{}' is not hex", crl.serial),
            };
        };
        let cert = InstalledCert {
            serial_hex: crate::crypto::serial_hex(&raw_serial),
            raw_serial,
            issuer_der: issuer_der.to_vec(),
            crl_urls: crl.urls.clone(),
        };
        self.status_uncounted(&cert, now).await
    }

    fn problem(&self, url: &str, update: impl FnOnce(&mut Problem)) {
        if let Ok(mut problems) = self.problems.lock() {
            let p = problems.entry(url.to_owned()).or_insert_with(|| Problem {
                why: String::new(),
                retry_at: None,
                kept_until: None,
                unknown: 0,
            });
            update(p);
        }
    }

    fn with_book<T>(&self, f: impl FnOnce(&mut retry::Book) -> T) -> Option<T> {
        let mut guard = self.book.lock().ok()?;
        Some(f(
            guard.get_or_insert_with(|| retry::Book::load(&self.state_dir))
        ))
    }

    fn limits(&self) -> fetch::CacheLimits {
        fetch::CacheLimits {
            max_bytes: self.max_bytes,
            refresh: self.refresh,
        }
    }

    /// What the CRL says of the installed certificate `inst` at `now`.
    pub(crate) async fn status(&self, inst: &Installed, now: OffsetDateTime) -> Status {
        let cert = match installed::read(inst) {
            Ok(c) => c,
            Err(why) => return Status::Unknown { url: None, why },
        };
        self.status_of(&cert, now).await
    }

    /// What the CRL says of `cert` at `now`: the first distribution point that gives a usable
    /// CRL decides. An "unknown" is counted for the CRL's report ([`Checker::finish`]).
    pub(crate) async fn status_of(&self, cert: &InstalledCert, now: OffsetDateTime) -> Status {
        let status = self.status_uncounted(cert, now).await;
        self.count(&status);
        status
    }

    /// Counts an "unknown" of a certificate for the report of its CRL.
    pub(crate) fn count(&self, status: &Status) {
        if let Status::Unknown { url: Some(url), .. } = status {
            self.problem(url, |p| p.unknown += 1);
        }
    }

    async fn status_uncounted(&self, cert: &InstalledCert, now: OffsetDateTime) -> Status {
        let mut refused = None;
        for url in &cert.crl_urls {
            match self.lookup(url, cert, now).await {
                Ok((entry, next_update, recheck_at)) => {
                    return match entry {
                        Some(e) => Status::Revoked {
                            url: url.clone(),
                            serial_hex: cert.serial_hex.clone(),
                            revoked_at: e.revoked_at,
                            reason: e.reason.clone(),
                        },
                        None => Status::Good {
                            url: url.clone(),
                            next_update,
                            recheck_at,
                        },
                    };
                }
                Err(why) => {
                    refused.get_or_insert((url.clone(), why));
                }
            }
        }
        match refused {
            Some((url, why)) => Status::Unknown {
                url: Some(url),
                why,
            },
            None => Status::NoCrl,
        }
    }

    /// The CRL of `url` for this run: the kept copy while it is fresh; else, unless the URL
    /// waits in its backoff, downloaded (and the backoff ended, or grown on a failure); a
    /// copy kept before answers while it is still valid when no newer one could be read.
    async fn read(
        &self,
        url: &str,
        issuer_der: &[u8],
        now: OffsetDateTime,
    ) -> Result<Arc<fetch::Fetched>, String> {
        if !self.download_now
            && let Some(f) = fetch::from_cache(&self.dir, url, issuer_der, now, self.limits())
        {
            self.read_fresh(url, &f);
            return Ok(Arc::new(f));
        }
        let kept = fetch::kept(&self.dir, url, issuer_der, now, self.max_bytes);
        let kept_until = kept.as_ref().map(|k| k.crl.next_update);
        let waiting = if self.wait_backoff {
            self.with_book(|b| b.waiting(url, now).cloned()).flatten()
        } else {
            None
        };
        if let Some(f) = waiting {
            self.problem(url, |p| {
                p.why.clone_from(&f.error);
                p.retry_at = OffsetDateTime::from_unix_timestamp(f.retry_at).ok();
                p.kept_until = kept_until;
            });
            return kept.map(Arc::new).ok_or(f.error);
        }
        let downloaded = match self.http.get_or_init(|| fetch::client(self.timeout)) {
            Ok(http) => {
                tracing::debug!("fetching the CRL {url}");
                let kept_crl = kept.as_ref().map(|k| &k.crl);
                fetch::download(
                    http,
                    &self.dir,
                    url,
                    issuer_der,
                    now,
                    self.limits(),
                    kept_crl,
                )
                .await
            }
            Err(e) => Err(e.clone()),
        };
        match downloaded {
            Ok(f) => {
                self.with_book(|b| b.succeeded(url));
                self.read_fresh(url, &f);
                Ok(Arc::new(f))
            }
            Err(why) => {
                let failure = self.with_book(|b| b.failed(url, &why, now, self.refresh));
                self.problem(url, |p| {
                    p.why.clone_from(&why);
                    p.retry_at = failure
                        .filter(|f| f.failures >= 2)
                        .and_then(|f| OffsetDateTime::from_unix_timestamp(f.retry_at).ok());
                    p.kept_until = kept_until;
                });
                kept.map(Arc::new).ok_or(why)
            }
        }
    }

    /// `cert`'s entry on the CRL of `url` (fetched, or read from the cache, once) and the
    /// CRL's `nextUpdate`.
    async fn lookup(
        &self,
        url: &str,
        cert: &InstalledCert,
        now: OffsetDateTime,
    ) -> Result<(Option<Entry>, OffsetDateTime, OffsetDateTime), String> {
        let issuer_der = cert.issuer_der.as_slice();
        let slot = self
            .slots
            .lock()
            .await
            .entry(url.to_owned())
            .or_default()
            .clone();
        let fetched = slot
            .get_or_init(|| self.read(url, issuer_der, now))
            .await
            .clone()?;
        if fetched.issuer_der == issuer_der {
            let crl = &fetched.crl;
            Ok((
                crl.entry(&cert.raw_serial).cloned(),
                crl.next_update,
                fetched.recheck_at,
            ))
        } else {
            let crl = check_crl(&fetched.bytes, issuer_der, now).map_err(|e| e.to_string())?;
            let recheck_at = fetched.recheck_at.min(crl.next_update);
            Ok((
                crl.entry(&cert.raw_serial).cloned(),
                crl.next_update,
                recheck_at,
            ))
        }
    }
}
