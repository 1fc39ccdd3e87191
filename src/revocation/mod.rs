//! Revocation: whether an installed certificate is on its issuer's CRL. The CRL is named by the
//! certificate (its CRL distribution point), fetched over HTTP at most once per URL per run,
//! kept in `state_dir/crl/` until its `nextUpdate`, capped in size, and believed only when its
//! signature verifies with the issuer certificate of the installed chain and it is not stale.
//! A CRL that cannot be used makes the answer "unknown" — never "not revoked".
//!
//! Bottom up: `crl` (the pure check of a CRL's bytes), `installed` (the leaf, its issuer and
//! its distribution points from the installed files), `fetch` (cache and download), and the
//! [`Checker`] a run or a `check` shares.

mod crl;
mod fetch;
mod installed;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::{Mutex, OnceCell};

pub use crl::{Crl, CrlError, Entry, check as check_crl, reason_name};
pub use installed::{InstalledCert, of_chain, read as read_installed};

use crate::clock::short_time;
use crate::config::RevocationConfig;
use crate::store::Installed;

/// Directory of the kept CRLs, under the state directory.
pub const CACHE_DIR: &str = "crl";

/// What the CRL says of an installed certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
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
    pub fn describe(&self) -> String {
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
    pub fn kind(&self) -> &'static str {
        match self {
            Status::Good { .. } => "good",
            Status::Revoked { .. } => "revoked",
            Status::Unknown { .. } => "unknown",
            Status::NoCrl => "no_crl",
        }
    }
}

type Slot = Arc<OnceCell<Result<Arc<fetch::Fetched>, String>>>;

/// When the CRLs kept in `state_dir/crl/` for the installed certificates `installed` that are
/// still usable at `now` (signed by their issuer, not stale) are first to be read again: the
/// earliest `nextUpdate`, or the end of `refresh_secs` since one was stored — when a newer
/// CRL, and a revocation it lists, can first be seen. `None` when none is kept or usable (a
/// run then fetches it anyway). Reads only the local copies, each CRL once for all the
/// certificates that name it (a CA's CRL is shared by thousands of them).
pub fn kept_next_update(
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

/// The CRL checks of one run or one `check`: each CRL URL read once, whatever the number of
/// certificates naming it.
pub struct Checker {
    dir: PathBuf,
    max_bytes: u64,
    timeout: Duration,
    refresh: Duration,
    http: std::sync::OnceLock<Result<reqwest::Client, String>>,
    slots: Mutex<HashMap<String, Slot>>,
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
    pub fn new(state_dir: &Path, config: &RevocationConfig) -> Self {
        Self {
            dir: state_dir.join(CACHE_DIR),
            max_bytes: config.max_crl_bytes,
            timeout: Duration::from_secs(config.timeout_secs),
            refresh: Duration::from_secs(config.refresh_secs),
            http: std::sync::OnceLock::new(),
            slots: Mutex::default(),
        }
    }

    fn limits(&self) -> fetch::CacheLimits {
        fetch::CacheLimits {
            max_bytes: self.max_bytes,
            refresh: self.refresh,
        }
    }

    /// What the CRL says of the installed certificate `inst` at `now`.
    pub async fn status(&self, inst: &Installed, now: OffsetDateTime) -> Status {
        let cert = match installed::read(inst) {
            Ok(c) => c,
            Err(why) => return Status::Unknown { url: None, why },
        };
        self.status_of(&cert, now).await
    }

    /// What the CRL says of `cert` at `now`: the first distribution point that gives a usable
    /// CRL decides.
    pub async fn status_of(&self, cert: &InstalledCert, now: OffsetDateTime) -> Status {
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
                    tracing::warn!("revocation unknown: the CRL {url} was refused: {why}");
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
            .get_or_init(|| async {
                if let Some(f) = fetch::from_cache(&self.dir, url, issuer_der, now, self.limits()) {
                    return Ok(Arc::new(f));
                }
                let http = self
                    .http
                    .get_or_init(|| fetch::client(self.timeout))
                    .as_ref()
                    .map_err(Clone::clone)?;
                tracing::debug!("fetching the CRL {url}");
                fetch::download(http, &self.dir, url, issuer_der, now, self.limits())
                    .await
                    .map(Arc::new)
            })
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
