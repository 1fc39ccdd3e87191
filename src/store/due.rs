//! The due summary, `state_dir/due.json`: for each certificate that the last full run found
//! with nothing to do, until when that stands and what it was decided from, so that a run
//! with nothing due reads one file and `stat`s each record and installed leaf instead of
//! reading and parsing every record.
//!
//! With `[revocation] check`, an entry also keeps what the CRL check needs of the installed
//! certificate ([`CrlRef`]: its serial, its CRL distribution points, its issuer's certificate,
//! kept once per issuer in the file), taken when the installed files were read, so that a run
//! reads each CRL once and checks the entries' serials without opening a certificate file.
//!
//! The file is a hint, never a source of truth. It is used only when it was written by this
//! program version for the same configuration sources (the main file's bytes and each
//! included file's `stat`) and the same run options; an entry is used only
//! while its instant lies ahead and while its record and its installed leaf still have the
//! `stat` they had when the entry was made. Any doubt — a missing, unreadable, foreign,
//! truncated or damaged file, a mismatch, an instant passed — means the full path: the record
//! is read and the planner decides, as if there were no summary.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::{FileStamp, Store};

/// The file under `state_dir`.
pub(crate) const DUE_FILE: &str = "due.json";
/// The file of the same layout that a fleet host's runs that do not lead keep for their CRL
/// check (no express part, no CRLs): what each installed certificate's check needs.
pub(crate) const FOLLOWER_FILE: &str = "due-follower.json";
/// Version of the file's layout.
const FORMAT: u32 = 2;
/// Largest summary read (about 25,000 certificates per MiB is far below this).
const MAX_BYTES: u64 = 256 * 1024 * 1024;

/// What identifies one version of a record, from `stat`: a record is
/// replaced by rename (a new inode), and the change time cannot be set back by anyone but the
/// kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl Stamp {
    fn of(s: &nix::sys::stat::FileStat) -> Self {
        let ns = |sec: i64, nsec: i64| i128::from(sec) * 1_000_000_000 + i128::from(nsec);
        Self {
            dev: s.st_dev,
            ino: s.st_ino,
            size: u64::try_from(s.st_size).unwrap_or(u64::MAX),
            mtime_ns: ns(s.st_mtime, s.st_mtime_nsec),
            ctime_ns: ns(s.st_ctime, s.st_ctime_nsec),
        }
    }

    /// The stamp of `path`, or `None` when it cannot be read.
    pub fn of_path(path: &Path) -> Option<Self> {
        nix::sys::stat::stat(path).ok().map(|s| Self::of(&s))
    }

    /// Whether the file changed at or after `ns` (nanoseconds since the epoch): a change
    /// within the same tick of the file system's clock could leave the stamp as it is.
    pub fn changed_since(&self, ns: i128) -> bool {
        self.mtime_ns >= ns || self.ctime_ns >= ns
    }
}

/// The whole-summary conditions: what every entry was decided under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Basis {
    /// The program's version.
    pub version: String,
    /// The configuration's sources ([`crate::config::Config::source_digest`]).
    pub config: String,
    /// The run options that the decisions depend on.
    pub options: String,
}

/// What the CRL check needs of an installed certificate, read from its installed files when
/// the entry was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrlRef {
    /// The leaf's serial, hex of its bytes as in the certificate.
    pub serial: String,
    /// SHA-256 (hex) of the issuer certificate's DER, the key of the file's issuers.
    pub issuer: String,
    /// The leaf's `http(s)` CRL distribution points, in its order.
    pub urls: Vec<String>,
    /// What the CRL said when the entry was made: `good`, `unknown` or `no_crl`. A run whose
    /// CRL says otherwise takes the full path for the certificate (its record learns it).
    pub state: String,
}

/// Issuer certificates by the SHA-256 (hex) of their DER.
pub(crate) type Issuers = BTreeMap<String, Vec<u8>>;

/// A CRL the run read fresh and checked every kept serial naming it against, as it lies in
/// `state_dir/crl/`: while the file keeps this stamp (a new copy is a new file), is younger
/// than `refresh_secs` and its `nextUpdate` is ahead, a `renew` that does not parse the
/// configuration takes the run's verdicts without reading it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptCrl {
    pub url: String,
    /// [`issuer_key`] of the issuer it was checked with.
    pub issuer: String,
    /// The kept file's stamp after the run.
    pub file: Stamp,
    /// Its `nextUpdate` (Unix seconds).
    pub next_update: i64,
}

/// The CRL part of a summary: the issuer certificates its entries name and the CRLs the run
/// read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CrlParts {
    pub issuers: Issuers,
    pub crls: Vec<KeptCrl>,
}

/// The key of an issuer certificate in [`Issuers`].
pub fn issuer_key(der: &[u8]) -> String {
    hex::encode(Sha256::digest(der))
}

/// One certificate with nothing to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    /// Nothing to do before this instant (Unix seconds): the renewal check, the start of the
    /// subscription's warning window, the CRL's `nextUpdate`, whichever comes first.
    pub until: i64,
    /// The record as it was when the entry was made.
    pub record: Stamp,
    /// The installed leaf and its stamp, as the record has them (`None`: the record names no
    /// leaf file to check).
    pub leaf: Option<(PathBuf, FileStamp)>,
    /// The report's line for the certificate.
    pub reason: String,
    /// With `[revocation] check`: what the CRL check needs (`None` in a summary written
    /// without it or by an older version: the certificate then takes the full path once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crl: Option<CrlRef>,
}

/// What a `renew` needs to report a run with nothing due without parsing the configuration
/// (`cert-agent renew` with no option, [`crate::run::express`]): written only for a
/// configuration without fleet, notifications or metrics, whose every certificate was quiet,
/// and used only when the configuration's sources, re-read and re-listed, give
/// [`Basis::config`] again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Express {
    /// The configuration file as the command named it.
    pub config: PathBuf,
    /// Its permission bits (a warning depends on them).
    pub config_mode: u32,
    /// `agent.state_dir`.
    pub state_dir: PathBuf,
    /// `[agent] include`, as written.
    pub include: Vec<String>,
    /// `agent.allow_orders`.
    pub allow_orders: bool,
    /// `[revocation] check`.
    pub revocation: bool,
    /// `[revocation] max_crl_bytes` and `refresh_secs`: how a kept CRL may be used.
    #[serde(default)]
    pub crl_limits: (u64, u64),
    /// The configuration's warnings, printed by every run.
    pub warnings: Vec<String>,
    /// The programs the certificates' commands name (each must still exist).
    pub programs: Vec<String>,
    /// How many certificates the configuration holds; the entries are theirs, in its order.
    pub certificates: usize,
}

#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    format: u32,
    basis: Basis,
    #[serde(default)]
    express: Option<Express>,
    certificates: Vec<Entry>,
    /// Issuer certificates (hex DER) by [`issuer_key`].
    #[serde(default)]
    issuers: BTreeMap<String, String>,
    #[serde(default)]
    crls: Vec<KeptCrl>,
}

#[derive(Serialize)]
struct StoredRef<'a> {
    format: u32,
    basis: &'a Basis,
    express: Option<&'a Express>,
    certificates: &'a [Entry],
    issuers: BTreeMap<&'a str, String>,
    crls: &'a [KeptCrl],
}

/// The issuers of a stored summary that are what their key says (a damaged or forged one is
/// left out: the entries naming it take the full path).
fn issuers_of(stored: BTreeMap<String, String>) -> Issuers {
    stored
        .into_iter()
        .filter_map(|(key, text)| {
            let der = hex::decode(text).ok()?;
            (issuer_key(&der) == key).then_some((key, der))
        })
        .collect()
}

/// A summary read back and found to match the run's basis.
#[derive(Debug, Default)]
pub struct DueSummary {
    by_name: HashMap<String, Entry>,
    express: Option<Express>,
    issuers: Issuers,
    crls: Vec<KeptCrl>,
}

/// A summary read for a run that has not parsed its configuration: the basis is checked by
/// the caller against the sources as they are now.
#[derive(Debug)]
pub struct ExpressSummary {
    pub basis: Basis,
    pub express: Express,
    /// Every certificate's entry, in the configuration's order.
    pub certificates: Vec<Entry>,
    /// The issuers the entries' [`CrlRef`]s name.
    pub issuers: Issuers,
    /// The CRLs the run that wrote it read.
    pub crls: Vec<KeptCrl>,
}

impl ExpressSummary {
    /// Parses `bytes`: `None` unless it is a whole summary of this format with its express
    /// part, an entry for each of the configuration's certificates, each name valid and once.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let stored: Stored = serde_json::from_str(text).ok()?;
        let express = stored.express?;
        if stored.format != FORMAT || stored.certificates.len() != express.certificates {
            return None;
        }
        let mut seen = std::collections::HashSet::with_capacity(stored.certificates.len());
        for e in &stored.certificates {
            if super::check_name(&e.name).is_err() || !seen.insert(e.name.as_str()) {
                return None;
            }
        }
        drop(seen);
        Some(Self {
            basis: stored.basis,
            express,
            certificates: stored.certificates,
            issuers: issuers_of(stored.issuers),
            crls: stored.crls,
        })
    }

    /// The summary under `state_dir` (the file read as [`DueSummary::load`] reads it).
    pub fn load(store: &Store) -> Option<Self> {
        Self::parse(&read_own(&store.dir().join(DUE_FILE))?)
    }
}

impl DueSummary {
    /// Parses `bytes` and keeps the entries if the file was made under `basis`; `None` for
    /// anything else (damaged, truncated, another format, version, configuration, options or
    /// CRL store, a name twice or one that cannot be a certificate's).
    pub fn parse(bytes: &[u8], basis: &Basis) -> Option<Self> {
        // Written by this program: UTF-8 throughout, even in what a reader ignores.
        let text = std::str::from_utf8(bytes).ok()?;
        let stored: Stored = serde_json::from_str(text).ok()?;
        if stored.format != FORMAT || stored.basis != *basis {
            return None;
        }
        let express = stored.express;
        let mut by_name = HashMap::with_capacity(stored.certificates.len());
        for e in stored.certificates {
            if super::check_name(&e.name).is_err() {
                return None;
            }
            if let Some(dup) = by_name.insert(e.name.clone(), e) {
                tracing::debug!("{DUE_FILE}: certificate '{}' listed twice", dup.name);
                return None;
            }
        }
        Some(Self {
            by_name,
            express,
            issuers: issuers_of(stored.issuers),
            crls: stored.crls,
        })
    }

    /// The summary in `store` if it matches `basis`; empty otherwise.
    pub fn load(store: &Store, basis: &Basis) -> Self {
        Self::load_file(store, DUE_FILE, basis)
    }

    /// The summary `file` under `store` ([`DUE_FILE`], [`FOLLOWER_FILE`]) if it matches
    /// `basis`; empty otherwise.
    pub(crate) fn load_file(store: &Store, file: &str, basis: &Basis) -> Self {
        let path = store.dir().join(file);
        match read_own(&path) {
            Some(bytes) => Self::parse(&bytes, basis).unwrap_or_else(|| {
                tracing::debug!("{} does not match this run: not used", path.display());
                Self::default()
            }),
            None => Self::default(),
        }
    }

    /// The kept entry of `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name)
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The express part it was written with.
    pub fn express(&self) -> Option<&Express> {
        self.express.as_ref()
    }

    /// The issuer certificate (DER) kept under `key`.
    pub fn issuer(&self, key: &str) -> Option<&[u8]> {
        self.issuers.get(key).map(Vec::as_slice)
    }

    /// The CRLs the run that wrote it read.
    pub fn crls(&self) -> &[KeptCrl] {
        &self.crls
    }
}

impl Entry {
    /// Whether the entry still stands at `now` (Unix seconds) for a record stamped `record`:
    /// the instant lies ahead, the record is the one it was made from, and the installed leaf
    /// has the stamp the record holds.
    pub fn stands(&self, now: i64, record: Option<Stamp>) -> bool {
        now < self.until
            && record == Some(self.record)
            && self
                .leaf
                .as_ref()
                .is_none_or(|(path, stamp)| FileStamp::of(path) == Some(*stamp))
    }
}

/// Writes the summary (0600, atomically); `entries` in any order, no express part (the tests'
/// shorthand for [`save_with`]). Failures are logged, not errors.
#[cfg(test)]
pub(crate) fn save(store: &Store, basis: &Basis, mut entries: Vec<Entry>) {
    entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    save_with(store, basis, &entries, None, &CrlParts::default());
}

/// Writes the summary with its express part: `entries` in the configuration's order, with the
/// issuers of `crl` that their [`CrlRef`]s name and the CRLs read.
pub(crate) fn save_with(
    store: &Store,
    basis: &Basis,
    entries: &[Entry],
    express: Option<&Express>,
    crl: &CrlParts,
) {
    save_to(store, DUE_FILE, basis, entries, express, crl);
}

/// [`save_with`] into `file` under `state_dir`.
pub(crate) fn save_to(
    store: &Store,
    file: &str,
    basis: &Basis,
    entries: &[Entry],
    express: Option<&Express>,
    crl: &CrlParts,
) {
    let issuers = &crl.issuers;
    let keys: std::collections::BTreeSet<&str> = entries
        .iter()
        .filter_map(|e| e.crl.as_ref().map(|c| c.issuer.as_str()))
        .collect();
    let named: BTreeMap<&str, String> = keys
        .into_iter()
        .filter_map(|key| Some((key, hex::encode(issuers.get(key)?))))
        .collect();
    let stored = StoredRef {
        format: FORMAT,
        basis,
        express,
        certificates: entries,
        issuers: named,
        crls: &crl.crls,
    };
    let path = store.dir().join(file);
    let written = serde_json::to_vec(&stored)
        .map_err(std::io::Error::other)
        .and_then(|json| crate::fsutil::write_atomic(&path, &json, 0o600));
    if let Err(e) = written {
        tracing::debug!("could not write {}: {e}", path.display());
    }
}

/// Removes the summary (a run that cannot vouch for it).
pub(crate) fn remove(store: &Store) {
    let _ = std::fs::remove_file(store.dir().join(DUE_FILE));
}

impl Store {
    /// The stamp of the record of `name` (`None` when there is none), read relative to the
    /// open `certs/` directory.
    pub fn record_stamp(&self, name: &str) -> Option<Stamp> {
        super::check_name(name).ok()?;
        let file = format!("{name}.json");
        match self.certs_dir() {
            Some(dir) => nix::sys::stat::fstatat(
                dir.as_fd(),
                file.as_str(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .ok()
            .map(|s| Stamp::of(&s)),
            None => Stamp::of_path(&self.records_dir().join(file)),
        }
    }
}

/// The file's bytes if it is a regular file owned by this user and writable by no one else.
fn read_own(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o022 != 0
    {
        return None;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).ok()?);
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= MAX_BYTES).then_some(bytes)
}

#[cfg(test)]
mod tests;
