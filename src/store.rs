//! On-disk state: one record per configured certificate, the billing journal, pending keys,
//! and the run lock.
//!
//! Layout under `state_dir` (0700):
//! - `lock` — held with `flock` for a whole run; holds the PID of the holder.
//! - `certs/NAME.json` — the record of certificate NAME (0600, replaced atomically).
//! - `keys/NAME/*.key` — private keys whose certificate is not installed yet (0600).
//! - `journal.log` — append-only audit trail of every billed or billing-relevant step
//!   (JSON lines, fsynced).
//!
//! Billing safety rests on the record: the order *intent* is written and fsynced before
//! `POST /order` is sent, and the order and certificate IDs right after the answer. An intent
//! without IDs means the outcome is unknown and must be reconciled before any new order.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::fsutil;

mod acme;
pub(crate) mod audit;
mod batch;
pub(crate) mod due;
pub(crate) use batch::JournalEvent;
mod lock;
mod partner;
mod parts;
mod retired;
pub(crate) mod served;

pub use acme::AcmeBook;
pub(crate) use acme::RenewalWindow;
pub(crate) use lock::{RunLock, lock_waiting};

pub(crate) use partner::{OrderIntent, ReissueState};
pub use partner::{OrderRef, PartnerBook, PartnerStage, Subscription, fuzz_partner_book};
pub(crate) use parts::{
    FleetAttempt, Held, PlaceholderMark, RevocationSeen, RolledBack, ValidationMark,
};
pub(crate) use retired::Retired;

/// Version of the record format.
pub const RECORD_VERSION: u32 = 1;

/// The directory of the records under the state directory.
const RECORDS_DIR: &str = "certs";

/// Errors of the state store; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("could not create the state directory {}: {source}", path.display())]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("could not read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("could not write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("{} is damaged ({message}); move it aside to start this certificate's state afresh", path.display())]
    Corrupt { path: PathBuf, message: String },
    /// The record's order bookkeeping contradicts itself (an edited or damaged file): moving
    /// the file aside could lose an order, so it is to be mended.
    #[error("{} holds {message}; nothing is ordered or reissued for this certificate until the file is mended", path.display())]
    Contradictory { path: PathBuf, message: String },
    #[error("another cert-agent run holds {} (PID {pid}); try again when it has finished", path.display())]
    Locked { path: PathBuf, pid: String },
    #[error("could not lock {}: {source}", path.display())]
    Lock { path: PathBuf, source: io::Error },
    #[error("certificate name '{0}' cannot be used as a file name")]
    BadName(String),
}

/// A key and CSR generated locally whose certificate is not installed yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingKey {
    /// The private key (0600) under `keys/NAME/`.
    pub key_file: PathBuf,
    pub csr_pem: String,
    /// Upper-case hex MD5 of the CSR DER (names the DCV file).
    pub csr_md5: String,
    /// Upper-case hex SHA-256 of the CSR DER.
    pub csr_sha256: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// What is installed for this certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    /// Upper-case hex serial of the installed leaf.
    pub serial: String,
    #[serde(with = "time::serde::rfc3339")]
    pub not_before: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    /// Certificate ID it was downloaded from.
    pub certificate_id: u64,
    /// Files written (certificate, chain, key...).
    pub files: Vec<PathBuf>,
    #[serde(with = "time::serde::rfc3339")]
    pub installed_at: OffsetDateTime,
    /// The file holding the leaf (fullchain or certificate) and its stamp when written, so a
    /// later run sees a changed file without parsing it.
    #[serde(default)]
    pub leaf_file: Option<PathBuf>,
    #[serde(default)]
    pub leaf_stamp: Option<FileStamp>,
}

/// Size, modification time and inode of a file: equal stamps mean an unchanged file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    pub size: u64,
    pub mtime_ns: i128,
    pub ino: u64,
}

impl FileStamp {
    /// The stamp of `path`, or `None` when it cannot be read.
    pub fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = fs::metadata(path).ok()?;
        Some(Self {
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ino: m.ino(),
        })
    }
}

/// Validation files or records published for a pending certificate, so that a later run can
/// remove them even after a crash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedDcv {
    /// Files written into web roots.
    #[serde(default)]
    pub files: Vec<PathBuf>,
    /// Directories created for them (removed when empty).
    #[serde(default)]
    pub dirs: Vec<PathBuf>,
    /// DNS records added through the hook: (name, type, value).
    #[serde(default)]
    pub dns_records: Vec<(String, String, String)>,
    /// The certificate domain each of `dns_records` validates (same order).
    #[serde(default)]
    pub dns_domains: Vec<String>,
    /// Every DNS record was added successfully.
    #[serde(default)]
    pub dns_complete: bool,
    /// The file served by the standalone server (name, content; not secret), so that a later
    /// run serves it again without asking the API.
    #[serde(default)]
    pub standalone_file: Option<(String, String)>,
}

impl PublishedDcv {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
            && self.dirs.is_empty()
            && self.dns_records.is_empty()
            && self.standalone_file.is_none()
    }
}

/// Records by certificate name, each as the state directory holds it, that a run holds in
/// memory: handed on instead of read again.
pub(crate) type Records = std::collections::BTreeMap<String, CertRecord>;

/// Everything cert-agent remembers about one configured certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertRecord {
    pub version: u32,
    pub name: String,
    pub pending_key: Option<Box<PendingKey>>,
    pub installed: Option<Installed>,
    #[serde(default)]
    pub dcv: PublishedDcv,
    /// Last status-type call for this certificate (polling discipline across runs).
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub last_poll: Option<OffsetDateTime>,
    /// Last state the API reported.
    pub last_state: Option<String>,
    /// Last failure, for `status`.
    pub last_error: Option<String>,
    /// Consecutive failed runs; drives the backoff.
    #[serde(default)]
    pub failures: u32,
    /// When a run last failed on this certificate.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub last_failed_at: Option<OffsetDateTime>,
    /// No new attempt before this time (after failures), unless forced.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub retry_after: Option<OffsetDateTime>,
    /// The issuer's bookkeeping: the Partner API's order intent, order, reissue and
    /// subscription. Stored flat beside the other fields (the format of every record written
    /// so far, and of the fleet's shared records).
    #[serde(flatten)]
    pub partner: PartnerBook,
    /// An ACME CA's bookkeeping: the order in progress and the renewal window (certificates
    /// of an ACME CA only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acme: Option<Box<AcmeBook>>,
    /// Per domain (lower case), its last successful validation: when a reissue or order will
    /// need a fresh one.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub validations: std::collections::BTreeMap<String, ValidationMark>,
    /// A self-signed placeholder is at the install paths (until the first real install).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<Box<PlaceholderMark>>,
    /// Fleet mode: the fleet's last attempt at this certificate (the leader's, from the shared
    /// record), as this host last read it. Never shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetAttempt>,
    /// Fleet mode: this host's own failures in a row at its part of the fleet's work (a value
    /// from etcd that does not open or check, an install of the fleet's certificate that
    /// failed, an import refused, an export that did not reach etcd); 0 after a
    /// synchronisation that did not fail. Never shared.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_failures: u32,
    /// The last of those failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_error: Option<String>,
    /// Fleet mode, with a rollout in waves: `rollout halted at wave N: HOST: reason` while a
    /// host of an earlier wave failed its proof of the fleet's current serial, as this host
    /// last read it. Never shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_halted: Option<String>,
    /// Fleet mode, with a rollout in waves: the fleet's serial this host rolled back after its
    /// proof failed (not installed again here while its rollout stays halted). Never shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<Box<RolledBack>>,
    /// Fleet mode, with a rollout in waves: why this host's last install of the fleet's
    /// certificate did not wait for its wave (the certificate it served neared its end). Never
    /// shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_overridden: Option<String>,
    /// An issued and checked certificate that begins after this host's clock: its archive is
    /// kept in `held/NAME.zip` and installed once it is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Box<Held>>,
    /// What the CRL last said of the installed certificate (kept when it changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation: Option<RevocationSeen>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl CertRecord {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            version: RECORD_VERSION,
            name: name.to_owned(),
            ..Self::default()
        }
    }

    /// The ID of the current order's certificate.
    pub fn certificate_id(&self) -> Option<u64> {
        self.partner.certificate_id()
    }

    /// One more consecutive failure, with its message; returns how many there are now. The
    /// caller sets `retry_after` from the count (the planner's rule).
    pub fn note_failure(&mut self, error: String, at: OffsetDateTime) -> u32 {
        self.last_error = Some(error);
        self.last_failed_at = Some(at);
        self.failures = self.failures.saturating_add(1);
        self.failures
    }

    /// The failures in a row that monitoring reports: this host's own, its part of the
    /// fleet's work, or the fleet's last attempts (fleet mode), whichever are more.
    pub fn consecutive_failures(&self) -> u32 {
        let fleet = self.fleet.as_ref().map_or(0, |f| f.failures);
        self.failures.max(fleet).max(self.host_failures)
    }

    /// Fleet mode: one more failure of this host's part of the fleet's work.
    pub fn note_host_failure(&mut self, error: String) {
        self.host_failures = self.host_failures.saturating_add(1);
        self.host_error = Some(error);
    }

    /// The fleet's last attempt when it failed and is not this host's own last failure (as
    /// on the host that led it): what monitoring adds to this host's own state.
    pub fn fleet_failure(&self) -> Option<&FleetAttempt> {
        self.fleet.as_ref().filter(|f| {
            f.failing() && !(self.failures > 0 && self.last_error.as_deref() == f.error.as_deref())
        })
    }

    /// Forgets earlier failures and their backoff; `true` when there were any.
    pub fn clear_failures(&mut self) -> bool {
        let had = self.failures > 0 || self.retry_after.is_some() || self.last_error.is_some();
        self.failures = 0;
        self.retry_after = None;
        self.last_error = None;
        had
    }

    /// Keeps `at` as the last status-type call unless a later one is recorded; `true` when it
    /// changed.
    pub fn keep_latest_poll(&mut self, at: OffsetDateTime) -> bool {
        if self.last_poll.is_some_and(|p| p >= at) {
            return false;
        }
        self.last_poll = Some(at);
        true
    }

    /// `issue --yes` on an ended order: the ended order becomes the one renewed and everything
    /// about it is dropped. Returns the ended state and the pending key to discard.
    pub fn replace_ended_order(&mut self) -> Option<(String, Option<PendingKey>)> {
        let state = self.partner.ended()?.to_owned();
        self.partner.give_up_order();
        Some((state, self.pending_key.take().map(|p| *p)))
    }

    /// A new billed order replaces the current subscription: the current order becomes the
    /// one renewed. Returns its certificate ID.
    pub fn begin_subscription_renewal(&mut self) -> Option<u64> {
        self.partner.give_up_order()
    }

    /// The API reports the order ended (`annulled`, `expired`); a record without an order
    /// has nothing to end (`false`).
    pub fn mark_ended(&mut self, state: &str) -> bool {
        self.partner.mark_ended(state)
    }

    /// A certificate is installed and live: it is recorded, a finished reissue and earlier
    /// failures are cleared, and a subscription end is assumed (`fallback`) when the API gave
    /// none. Returns the pending key, now installed, whose state-directory copy is discarded.
    pub fn mark_installed(
        &mut self,
        installed: Installed,
        fallback: Subscription,
    ) -> Option<PendingKey> {
        self.installed = Some(installed);
        self.placeholder = None;
        // A serial rolled back here is no longer refused once another install is kept.
        self.rolled_back = None;
        // An ACME certificate has no subscription.
        if self.partner.subscription.is_none() && self.acme.is_none() {
            self.partner.subscription = Some(fallback);
        }
        self.held = None;
        self.failures = 0;
        self.retry_after = None;
        self.last_error = None;
        self.close_in_flight()
    }

    /// Closes the reissue or ACME order in flight and returns its pending key (to discard):
    /// its certificate was installed ([`CertRecord::mark_installed`]), or refused for good on
    /// this host (its rollout aborted; the record's `rolled_back` keeps that serial refused
    /// here), so that the due rule decides on the installed certificate anew.
    pub fn close_in_flight(&mut self) -> Option<PendingKey> {
        self.partner.end_reissue();
        if let Some(acme) = &mut self.acme {
            acme.order_url = None;
            acme.names.clear();
            acme.placed_at = None;
            acme.window = None;
        }
        self.pending_key.take().map(|p| *p)
    }
}

thread_local! {
    /// The buffer records are read through, zeroed once per thread instead of once per record
    /// (a run over a thousand certificates zeroed 16 MB).
    static READ_CHUNK: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 16 * 1024]);
}

/// The state directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    /// `certs/`, opened on the first record read: records are then opened relative to it
    /// (one path component to resolve instead of the whole state path, which matters for a
    /// run over thousands of certificates). `None` when it cannot be opened.
    certs_dir: std::sync::OnceLock<Option<std::sync::Arc<std::os::fd::OwnedFd>>>,
}

impl Store {
    /// Opens (and creates, 0700) the state directory.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        for d in [dir.to_path_buf(), dir.join(RECORDS_DIR), dir.join("keys")] {
            if !d.is_dir() {
                fsutil::ensure_private_dir(&d, 0o700).map_err(|source| StoreError::CreateDir {
                    path: d.clone(),
                    source,
                })?;
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            certs_dir: std::sync::OnceLock::new(),
        })
    }

    /// The state directory at `dir` without creating anything (for read-only commands; a
    /// missing directory reads as "no state").
    pub fn existing(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            certs_dir: std::sync::OnceLock::new(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory of the records, `state_dir/certs`.
    pub fn records_dir(&self) -> PathBuf {
        self.dir.join(RECORDS_DIR)
    }

    /// The record file of certificate `name`, `state_dir/certs/NAME.json` (`name` checked).
    pub fn record_path(&self, name: &str) -> Result<PathBuf, StoreError> {
        check_name(name)?;
        Ok(self.records_dir().join(format!("{name}.json")))
    }

    /// The record of `name` from `records` (records the run holds, each as on disk) where it
    /// is there, otherwise read.
    pub fn held_or_load<'r>(
        &self,
        records: &'r Records,
        name: &str,
    ) -> Result<std::borrow::Cow<'r, CertRecord>, StoreError> {
        match records.get(name) {
            Some(rec) => Ok(std::borrow::Cow::Borrowed(rec)),
            None => self.load(name).map(std::borrow::Cow::Owned),
        }
    }

    /// The record of `name` taken out of `records` (records the run holds, each as on disk)
    /// where it is there, otherwise read: [`Store::held_or_load`] for a caller that changes
    /// it.
    pub fn take_or_load(
        &self,
        records: &mut Records,
        name: &str,
    ) -> Result<CertRecord, StoreError> {
        match records.remove(name) {
            Some(rec) => Ok(rec),
            None => self.load(name),
        }
    }

    /// In debug builds (the tests), that each of `records` — records a run holds and hands on
    /// instead of reading them again — is the record on disk: a record written after it was
    /// taken, and not replaced in `records`, would otherwise be reported stale. `at`: the
    /// hand-over, for the message.
    pub fn debug_check_held(&self, records: &Records, at: &str) {
        if !cfg!(debug_assertions) {
            return;
        }
        for (name, held) in records {
            if let Ok(on_disk) = self.load(name) {
                assert!(
                    *held == on_disk,
                    "{at}: the record of '{name}' handed on is not the one on disk"
                );
            }
        }
    }

    /// The record of certificate `name` (a fresh one when none exists).
    pub fn load(&self, name: &str) -> Result<CertRecord, StoreError> {
        let path = self.record_path(name)?;
        let text = match self.read_record(name, &path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(CertRecord::new(name)),
            Err(source) => return Err(StoreError::Read { path, source }),
        };
        let record: CertRecord = serde_json::from_slice(&text).map_err(|e| {
            let message = e.to_string();
            if message.starts_with(partner::CONTRADICTION) {
                StoreError::Contradictory {
                    path: path.clone(),
                    message,
                }
            } else {
                StoreError::Corrupt {
                    path: path.clone(),
                    message,
                }
            }
        })?;
        if record.name != name {
            return Err(StoreError::Corrupt {
                path,
                message: format!("it belongs to certificate '{}'", record.name),
            });
        }
        Ok(record)
    }

    /// `certs/`, opened once.
    fn certs_dir(&self) -> Option<&std::os::fd::OwnedFd> {
        use nix::fcntl::{OFlag, open};
        self.certs_dir
            .get_or_init(|| {
                open(
                    &self.records_dir(),
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                    nix::sys::stat::Mode::empty(),
                )
                .ok()
                .map(std::sync::Arc::new)
            })
            .as_deref()
    }

    /// The bytes of a record file: opened relative to `certs/` when that directory is open,
    /// read without a size query (records are small, usually in one read).
    fn read_record(&self, name: &str, path: &Path) -> io::Result<Vec<u8>> {
        use nix::fcntl::{OFlag, openat};
        use nix::sys::stat::Mode;
        let mut file = match self.certs_dir() {
            Some(dir) => File::from(
                openat(
                    dir,
                    format!("{name}.json").as_str(),
                    OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
                .map_err(io::Error::from)?,
            ),
            None => File::open(path)?,
        };
        // Records are replaced by rename, so the open file does not change; a read that
        // returns less than asked of a regular file has reached its end (one read for a
        // record instead of a second one that returns nothing).
        READ_CHUNK.with_borrow_mut(|chunk| {
            let mut buf = Vec::new();
            loop {
                match file.read(chunk) {
                    Ok(0) => return Ok(buf),
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        if n < chunk.len() {
                            return Ok(buf);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        })
    }

    /// Where the record of `record.name` lives, and its text at the current format version.
    fn record_text(&self, record: &CertRecord) -> Result<(PathBuf, Vec<u8>), StoreError> {
        let path = self.record_path(&record.name)?;
        let mut record = record.clone();
        record.version = RECORD_VERSION;
        let text = serde_json::to_vec(&record).map_err(|e| StoreError::Write {
            path: path.clone(),
            source: io::Error::other(e),
        })?;
        Ok((path, text))
    }

    /// Replaces the record of `record.name` atomically and durably (0600).
    pub fn save(&self, record: &CertRecord) -> Result<(), StoreError> {
        let (path, text) = self.record_text(record)?;
        fsutil::write_atomic(&path, &text, 0o600)
            .map_err(|source| StoreError::Write { path, source })
    }

    /// Names of every stored record.
    pub fn names(&self) -> Result<Vec<String>, StoreError> {
        let dir = self.records_dir();
        let entries = fs::read_dir(&dir).map_err(|source| StoreError::Read {
            path: dir.clone(),
            source,
        })?;
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.strip_suffix(".json").map(str::to_owned)
            })
            .filter(|n| check_name(n).is_ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Directory for pending keys of certificate `name` (created 0700).
    pub fn key_dir(&self, name: &str) -> Result<PathBuf, StoreError> {
        check_name(name)?;
        let dir = self.dir.join("keys").join(name);
        if !dir.is_dir() {
            fsutil::ensure_private_dir(&dir, 0o700).map_err(|source| StoreError::CreateDir {
                path: dir.clone(),
                source,
            })?;
        }
        Ok(dir)
    }

    /// Stores the prolongation token of certificate `id` (a credential: `0600` in a `0700`
    /// directory) and returns the file's path.
    pub fn save_prolongation_token(&self, id: u64, token: &str) -> Result<PathBuf, StoreError> {
        let dir = self.dir.join("prolongation");
        fsutil::ensure_private_dir(&dir, 0o700).map_err(|source| StoreError::CreateDir {
            path: dir.clone(),
            source,
        })?;
        let path = dir.join(format!("{id}.token"));
        fsutil::write_atomic(&path, token.as_bytes(), 0o600).map_err(|source| {
            StoreError::Write {
                path: path.clone(),
                source,
            }
        })?;
        Ok(path)
    }

    /// Where the archive of a certificate held until it is valid is kept.
    pub fn held_path(&self, name: &str) -> Result<PathBuf, StoreError> {
        check_name(name)?;
        Ok(self.dir.join("held").join(format!("{name}.zip")))
    }

    /// Keeps the archive of a certificate held until it is valid (0600, in a 0700 directory).
    pub fn save_held(&self, name: &str, archive: &[u8]) -> Result<PathBuf, StoreError> {
        let path = self.held_path(name)?;
        let dir = self.dir.join("held");
        fsutil::ensure_private_dir(&dir, 0o700).map_err(|source| StoreError::CreateDir {
            path: dir.clone(),
            source,
        })?;
        fsutil::write_atomic(&path, archive, 0o600).map_err(|source| StoreError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// The held archive of `name` (at most `max` bytes; checked again before it is installed).
    pub fn load_held(&self, name: &str, max: u64) -> Result<Vec<u8>, StoreError> {
        let path = self.held_path(name)?;
        fsutil::read_private(&path, max).map_err(|message| StoreError::Corrupt {
            path: path.clone(),
            message,
        })
    }

    /// Removes the held archive of `name`, if any.
    pub fn discard_held(&self, name: &str) {
        if let Ok(path) = self.held_path(name)
            && let Err(e) = fs::remove_file(&path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!("could not remove {}: {e}", path.display());
        }
    }

    /// Appends one event to `journal.log` and fsyncs it; an event with effect (see
    /// [`audit::action_of`]) is also appended to the audit log. `event` must hold no secret.
    pub fn journal(
        &self,
        name: &str,
        event: &str,
        detail: serde_json::Value,
    ) -> Result<(), StoreError> {
        self.journal_all(&[(name, event, detail)])
    }

    /// Appends an action with effect that is not a certificate's journal event (a
    /// cancellation asked for by hand, the fleet's lead taken or given) to the audit log.
    pub fn audit(
        &self,
        certificate: Option<&str>,
        event: &str,
        details: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let action = audit::action_of(event).unwrap_or("other");
        self.audit_as(action, certificate, event, details)
    }

    fn audit_as(
        &self,
        action: &str,
        certificate: Option<&str>,
        event: &str,
        details: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let entry = audit::NewEntry {
            action,
            event,
            certificate,
            details,
        };
        audit::append(&self.dir, &entry)
            .map(drop)
            .map_err(|source| StoreError::Write {
                path: self.dir.join(audit::FILE),
                source,
            })
    }
}

/// Certificate names become file names: letters, digits, `.`, `_`, `-`; not starting with `.`.
pub fn check_name(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::BadName(name.to_owned()))
    }
}

/// Mode bits of a path (for checks and tests).
pub fn mode_of(path: &Path) -> io::Result<u32> {
    Ok(fs::metadata(path)?.permissions().mode() & 0o7777)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    #[test]
    fn record_round_trip_is_private_and_atomic() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state")).unwrap();
        assert_eq!(mode_of(store.dir()).unwrap(), 0o700);
        let mut rec = store.load("www").unwrap();
        assert_eq!(rec, CertRecord::new("www"));
        rec.partner.stage = PartnerStage::Intended(OrderIntent {
            csr_sha256: "AB".repeat(32),
            common_name: "www.example.com".into(),
            created_at: now(),
            product_id: 101,
            price: Some("10.00".into()),
        });
        store.save(&rec).unwrap();
        let path = store.dir().join("certs/www.json");
        assert_eq!(mode_of(&path).unwrap(), 0o600);
        assert_eq!(
            store.load("www").unwrap().partner.intent(),
            rec.partner.intent()
        );
        assert_eq!(store.names().unwrap(), vec!["www".to_owned()]);
    }

    /// The issuer's bookkeeping is its own part of the record in memory, and the record's
    /// stored form stays what every state file and shared record written so far holds: the
    /// Partner fields flat beside the others, read into the part and written back the same.
    #[test]
    fn a_record_written_before_the_issuer_part_reads_and_writes_the_same_fields() {
        let stored = serde_json::json!({
            "version": 1,
            "name": "www",
            "intent": null,
            "order": {"certificate_id": 7, "order_id": 8,
                      "placed_at": "2027-01-15T08:00:00Z", "adopted": true},
            "pending_key": null,
            "installed": null,
            "last_poll": "2027-01-15T08:05:00Z",
            "last_state": "processing",
            "last_error": null,
            "failures": 2,
            "retry_after": null,
            "reissue": {"certificate_id": 7, "csr_sha256": "AB", "previous_serial": "0A",
                        "requested_at": "2027-01-15T08:01:00Z", "confirmed": false},
            "ended": null,
            "subscription": {"ends": "2029-01-15T08:00:00Z", "multi_year": true},
            "renews": 5,
            "prolong_prepared_at": "2027-01-14T08:00:00Z",
            "order_refused": true,
            "something_newer": {"kept": false}
        });
        let rec: CertRecord = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(rec.partner.certificate_id(), Some(7));
        assert!(rec.partner.order().is_some_and(|o| o.adopted));
        assert_eq!(rec.partner.reissue().map(|r| r.confirmed), Some(false));
        assert_eq!(rec.partner.renews, Some(5));
        assert!(rec.partner.order_refused);
        assert!(rec.partner.prolong_prepared_at.is_some());
        assert_eq!(rec.failures, 2);
        let mut written = serde_json::to_value(&rec).unwrap();
        let mut expected = stored;
        if let (Some(w), Some(e)) = (written.as_object_mut(), expected.as_object_mut()) {
            e.remove("something_newer");
            for (k, v) in e.iter() {
                assert_eq!(w.get(k), Some(v), "field {k}");
            }
            // Nothing nested under a new name: the fields written are the ones read, plus
            // the record's own optional parts.
            w.retain(|k, _| !e.contains_key(k));
            assert!(
                w.keys().all(|k| ["dcv"].contains(&k.as_str())),
                "new fields: {w:?}"
            );
        } else {
            panic!("not objects");
        }
        // A record without any Partner field (a certificate never ordered) reads too.
        let bare: CertRecord =
            serde_json::from_value(serde_json::json!({"version": 1, "name": "new",
                "intent": null, "order": null, "pending_key": null, "installed": null,
                "last_poll": null, "last_state": null, "last_error": null}))
            .unwrap();
        assert_eq!(bare.partner, PartnerBook::default());
        // A damaged Partner field is an error, as any damaged field is.
        let damaged =
            serde_json::json!({"version": 1, "name": "x", "order": {"certificate_id": "seven"}});
        assert!(serde_json::from_value::<CertRecord>(damaged).is_err());
    }

    #[test]
    fn damaged_record_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        fs::write(dir.path().join("certs/www.json"), b"{not json").unwrap();
        let err = store.load("www").unwrap_err().to_string();
        assert!(
            err.contains("certs/www.json") && err.contains("damaged"),
            "{err}"
        );
    }

    #[test]
    fn names_that_are_not_file_names_are_refused() {
        for bad in ["", "../x", "a/b", ".hidden", "a b", "ä"] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["www", "shop.example.com", "a_b-1"] {
            assert!(check_name(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn second_lock_fails_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let held = store.lock().unwrap();
        let err = store.lock().unwrap_err();
        match &err {
            StoreError::Locked { pid, .. } => assert_eq!(pid, &std::process::id().to_string()),
            other => panic!("unexpected {other:?}"),
        }
        drop(held);
        store.lock().unwrap();
    }

    #[test]
    fn journal_appends_lines() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .journal("www", "intent", serde_json::json!({"csr_sha256": "AA"}))
            .unwrap();
        store
            .journal("www", "ordered", serde_json::json!({"certificate_id": 7}))
            .unwrap();
        let text = fs::read_to_string(dir.path().join("journal.log")).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert_eq!(mode_of(&dir.path().join("journal.log")).unwrap(), 0o600);
    }
}
