//! The certificates of the included files, validated, kept between runs
//! (`state_dir/config-cache.json`), so that a run over a thousand unchanged fragment files
//! costs one `stat` per file instead of opening, reading and checking each of them.
//!
//! The kept certificates are used only when everything they were read from is unchanged: the
//! same program version, the same main file (its text, which holds `[defaults]`), the same
//! list of included files, and each file with the same device, inode, size, mode, and
//! modification and change times (to the nanosecond). The change time cannot be set back by
//! anyone but the kernel, so an edit is always noticed; an edit within the same clock tick as
//! the read that filled the cache is ruled out by keeping only files whose times are at least
//! [`SETTLED`] old. The cache is only written after a read without any problem, is owned by
//! the user who reads it and writable by no one else (otherwise it is ignored), and holds what
//! the included files hold (mode 0600, in the state directory). Any doubt — a missing,
//! unreadable, foreign or stale file — means the files are read and checked as if there were
//! no cache.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::include::{Dir, Stamp};
use super::types::{CertificateConfig, DcvSpec, InstallSpec, OrderSpec};

/// The file under `state_dir`.
pub(super) const CACHE_FILE: &str = "config-cache.json";
/// Version of the file's layout.
const FORMAT: u32 = 1;
/// Files changed more recently than this when the cache is written are not kept (their next
/// change could fall within the same tick of the file system's clock).
const SETTLED: Duration = Duration::from_secs(1);

#[derive(Deserialize)]
struct Stored {
    format: u32,
    version: String,
    config: PathBuf,
    main_sha256: String,
    fragments: Vec<StoredFragment>,
    /// Every file's certificates, file after file (one list: a list per file would hold
    /// room for several certificates in each).
    certificates: Vec<StoredCertificate>,
}

#[derive(Deserialize)]
struct StoredFragment {
    path: PathBuf,
    stamp: Stamp,
}

/// A certificate with its parts nested (as in [`CertificateConfig`]; the configuration file and
/// `config check` show them flat, which costs a buffer per certificate to read back).
#[derive(Deserialize)]
struct StoredCertificate {
    name: String,
    domains: Vec<String>,
    order: OrderSpec,
    dcv: DcvSpec,
    install: InstallSpec,
}

#[derive(Serialize)]
struct StoredCertificateRef<'a> {
    name: &'a str,
    domains: &'a [String],
    order: &'a OrderSpec,
    dcv: &'a DcvSpec,
    install: &'a InstallSpec,
}

#[derive(Serialize)]
struct StoredRef<'a> {
    format: u32,
    version: &'static str,
    config: &'a Path,
    main_sha256: String,
    fragments: Vec<StoredFragmentRef<'a>>,
    certificates: Vec<StoredCertificateRef<'a>>,
}

#[derive(Serialize)]
struct StoredFragmentRef<'a> {
    path: &'a Path,
    stamp: Stamp,
}

/// The included files' certificates, kept from an earlier run.
pub(super) struct Hit {
    /// In the order of the files, each file's in its order.
    pub certificates: Vec<CertificateConfig>,
    /// Each file's stamp (checked against the file now), in the order of the files.
    pub stamps: Vec<Stamp>,
}

/// The digest of a configuration read from `config` with `main_text`, including `fragments`
/// with their stamps ([`super::Config::source_digest`]); `None` when one of them changed within
/// [`SETTLED`] of now.
pub(super) fn source_digest<'a>(
    config: &Path,
    main_text: &str,
    fragments: impl Iterator<Item = (&'a Path, &'a Stamp)>,
) -> Option<String> {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(env!("CARGO_PKG_VERSION").as_bytes());
    field(config.as_os_str().as_encoded_bytes());
    field(main_text.as_bytes());
    for (path, stamp) in fragments {
        if stamp.recent(now.saturating_sub(SETTLED)) {
            return None;
        }
        field(path.as_os_str().as_encoded_bytes());
        field(&serde_json::to_vec(stamp).ok()?);
    }
    Some(hex::encode(h.finalize()))
}

fn main_digest(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The kept certificates of `fragments` (the files `include` names now, in order), if nothing
/// they came from has changed. `programs`: the programs of their commands must still exist.
pub(super) fn lookup(
    state_dir: &Path,
    config: &Path,
    main_text: &str,
    fragments: &[PathBuf],
    programs: bool,
) -> Option<Hit> {
    let bytes = read_own(&state_dir.join(CACHE_FILE))?;
    let stored: Stored = serde_json::from_slice(&bytes).ok()?;
    drop(bytes);
    if stored.format != FORMAT
        || stored.version != env!("CARGO_PKG_VERSION")
        || stored.config != config
        || stored.fragments.len() != fragments.len()
        || stored.main_sha256 != main_digest(main_text)
    {
        return None;
    }
    let mut dir = Dir::default();
    let mut stamps = Vec::with_capacity(fragments.len());
    for (file, kept) in fragments.iter().zip(&stored.fragments) {
        if kept.path != *file || dir.stamp(file).ok()? != kept.stamp {
            return None;
        }
        stamps.push(kept.stamp);
    }
    let certificates: Vec<CertificateConfig> = stored
        .certificates
        .into_iter()
        .map(|c| CertificateConfig {
            name: c.name,
            domains: c.domains,
            order: c.order,
            dcv: c.dcv,
            install: c.install,
        })
        .collect();
    // What the rest of the agent relies on of a checked certificate (a damaged file that is
    // still JSON must not get further than this).
    if certificates
        .iter()
        .any(|c| c.domains.is_empty() || super::validate_certificate_name(&c.name).is_err())
    {
        return None;
    }
    if programs && !programs_exist(&certificates) {
        return None;
    }
    Some(Hit {
        certificates,
        stamps,
    })
}

/// Keeps the certificates read from `fragments` (each file with the stamp it had when read).
/// Nothing is written when a file changed within [`SETTLED`]; failures are not errors (the
/// next run reads the files again).
pub(super) fn store(
    state_dir: &Path,
    config: &Path,
    main_text: &str,
    fragments: &[(PathBuf, Stamp)],
    certificates: &[(&CertificateConfig, Option<&Path>)],
) {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    if fragments
        .iter()
        .any(|(_, s)| s.recent(now.saturating_sub(SETTLED)))
    {
        return;
    }
    let mut kept = Vec::with_capacity(certificates.len());
    // Certificates come file by file, in the order of the files; the main file's are not kept.
    let mut at = 0;
    for (c, file) in certificates {
        let Some(file) = file else { continue };
        while fragments.get(at).is_some_and(|(p, _)| p != file) {
            at += 1;
        }
        if at == fragments.len() {
            return;
        }
        kept.push(StoredCertificateRef {
            name: &c.name,
            domains: &c.domains,
            order: &c.order,
            dcv: &c.dcv,
            install: &c.install,
        });
    }
    let stored = StoredRef {
        format: FORMAT,
        version: env!("CARGO_PKG_VERSION"),
        config,
        main_sha256: main_digest(main_text),
        fragments: fragments
            .iter()
            .map(|(path, stamp)| StoredFragmentRef {
                path,
                stamp: *stamp,
            })
            .collect(),
        certificates: kept,
    };
    let Ok(json) = serde_json::to_vec(&stored) else {
        return;
    };
    let path = state_dir.join(CACHE_FILE);
    if let Err(e) = crate::fsutil::write_atomic(&path, &json, 0o600) {
        tracing::debug!(
            "could not keep the checked configuration in {}: {e}",
            path.display()
        );
    }
}

/// The file's bytes if it is a regular file owned by this user and writable by no one else.
fn read_own(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o022 != 0
    {
        return None;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0) + 1);
    f.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Every program the certificates' commands name can still be run (checked once each).
fn programs_exist(certificates: &[CertificateConfig]) -> bool {
    let mut seen: HashSet<&str> = HashSet::new();
    for c in certificates {
        let commands = [
            &c.install.reload_command,
            &c.install.configtest_command,
            &c.install.deploy_hook,
            &c.dcv.dns_hook,
        ];
        for cmd in commands.into_iter().flatten() {
            let Some(program) = super::rules::program_to_check(cmd) else {
                continue;
            };
            if seen.insert(program) && super::rules::check_program(program).is_err() {
                return false;
            }
        }
    }
    true
}
