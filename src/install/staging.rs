//! The single-file steps of the install transaction ([`super::files::InstallTx`]): where a
//! target's staged and previous versions live (`.NAME.cert-agent-new`,
//! `.NAME.cert-agent-prev`), writing a staged file (owner and mode before content, made
//! durable with its batch), comparing a live file's content, keeping its previous version,
//! and refusing targets that are not regular files and directories others may write.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::error::InstallError;
use crate::fsutil::SyncGroup;

/// Suffix of a target's staged new version.
pub(super) const NEW_SUFFIX: &str = ".cert-agent-new";
/// Suffix of a target's kept previous version.
pub(super) const PREV_SUFFIX: &str = ".cert-agent-prev";

/// Why a staged file could not be written.
pub(super) enum StageError {
    Chown(io::Error),
    Write(io::Error),
}

/// Creates `staged` owner-only (a file left there by a crashed run, or anything else at that
/// name, removed first — never followed), sets owner and mode, then writes the content, made
/// durable through `group` (whose [`SyncGroup::watch`] saw its directory).
pub(super) fn write_staged(
    staged: &Path,
    data: &[u8],
    (uid, gid): (Option<u32>, Option<u32>),
    mode: u32,
    group: &SyncGroup,
) -> Result<(), StageError> {
    let create = || {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(staged)
    };
    // Nothing is there on a host that installs for the first time: no removal to try first.
    let mut file = match create() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            remove_if_exists(staged).map_err(StageError::Write)?;
            create()
        }
        other => other,
    }
    .map_err(StageError::Write)?;
    // The owner a new file got is only looked at when one is asked for.
    if uid.is_some() || gid.is_some() {
        let meta = file.metadata().map_err(StageError::Write)?;
        let uid = uid.filter(|&u| u != meta.uid());
        let gid = gid.filter(|&g| g != meta.gid());
        if uid.is_some() || gid.is_some() {
            std::os::unix::fs::fchown(&file, uid, gid).map_err(StageError::Chown)?;
        }
    }
    // Explicit bits after the owner change: the umask does not apply, and chown may clear
    // set-id bits.
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(StageError::Write)?;
    file.write_all(data).map_err(StageError::Write)?;
    group.written(&file).map_err(StageError::Write)
}

/// Whether the regular file at `target` holds exactly `data` (false on any error).
pub(super) fn same_content(target: &Path, data: &[u8]) -> bool {
    use std::io::Read;
    let Ok(file) = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(target)
    else {
        return false;
    };
    let mut current = Vec::with_capacity(data.len() + 1);
    let same = file
        .take(data.len() as u64 + 1)
        .read_to_end(&mut current)
        .is_ok()
        && current == data;
    current.fill(0);
    std::hint::black_box(&current);
    same
}

/// Keeps the live file's current version at `prev`: a hard link (same inode, so owner, mode
/// and content are exactly preserved) or, where links are impossible, a copy with the same
/// mode and owner.
pub(super) fn keep_previous(target: &Path, prev: &Path, meta: &fs::Metadata) -> io::Result<()> {
    remove_if_exists(prev)?;
    match fs::hard_link(target, prev) {
        Ok(()) => Ok(()),
        Err(link_err) => {
            tracing::debug!(path = %target.display(), "hard link failed ({link_err}), copying");
            let data = fs::read(target)?;
            let result = (|| {
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(prev)?;
                let _ = std::os::unix::fs::fchown(&file, Some(meta.uid()), Some(meta.gid()));
                file.set_permissions(fs::Permissions::from_mode(meta.mode() & 0o7777))?;
                file.write_all(&data)?;
                file.sync_all()
            })();
            if result.is_err() {
                let _ = fs::remove_file(prev);
            }
            result
        }
    }
}

/// `Some(metadata)` for an existing regular file, `None` when absent; a symlink or any other
/// kind of file is refused.
pub(super) fn inspect_target(target: &Path) -> Result<Option<fs::Metadata>, InstallError> {
    match fs::symlink_metadata(target) {
        Ok(meta) if meta.file_type().is_symlink() => Err(InstallError::SymlinkTarget {
            path: target.to_path_buf(),
        }),
        Ok(meta) if !meta.file_type().is_file() => Err(InstallError::NotAFile {
            path: target.to_path_buf(),
        }),
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(InstallError::Inspect {
            path: target.to_path_buf(),
            cause: Arc::new(e),
        }),
    }
}

/// The directories a batch of installs found safe with all their ancestors: each ancestor is
/// checked once per batch, not once per file staged under it (a batch of thousands of
/// certificates under one directory otherwise checks every directory up to `/` for each
/// file). The directory a file goes into is still checked for every file.
#[derive(Debug, Default)]
pub struct CheckedDirs(Mutex<HashSet<PathBuf>>);

/// Refuses `dir` or any ancestor that group or others may write, unless it is sticky and
/// owned by root (like `/tmp`). The ancestors found safe before in `checked` are not checked
/// again.
pub(super) fn check_ancestors(
    dir: &Path,
    meta: fs::Metadata,
    checked: &CheckedDirs,
) -> Result<(), InstallError> {
    check_dir(dir, &meta)?;
    let known = |d: &Path| {
        let set = checked.0.lock().unwrap_or_else(PoisonError::into_inner);
        set.contains(d)
    };
    let mut walked = vec![dir.to_path_buf()];
    let mut cur = dir.parent();
    while let Some(d) = cur.filter(|p| !p.as_os_str().is_empty()) {
        if known(d) {
            break;
        }
        let meta = fs::metadata(d).map_err(|e| InstallError::Inspect {
            path: d.to_path_buf(),
            cause: Arc::new(e),
        })?;
        check_dir(d, &meta)?;
        walked.push(d.to_path_buf());
        cur = d.parent();
    }
    let mut set = checked.0.lock().unwrap_or_else(PoisonError::into_inner);
    set.extend(walked);
    Ok(())
}

fn check_dir(dir: &Path, meta: &fs::Metadata) -> Result<(), InstallError> {
    let mode = meta.mode() & 0o7777;
    let sticky_root = mode & 0o1000 != 0 && meta.uid() == 0;
    if mode & 0o022 != 0 && !sticky_root {
        return Err(InstallError::InsecureDirectory {
            path: dir.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

pub(super) fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// `dir/.NAME<suffix>` for `dir/NAME`.
pub(super) fn sibling(target: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(target.file_name().unwrap_or(target.as_os_str()));
    name.push(suffix);
    parent_dir(target).join(name)
}

pub(super) fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
