//! The install transaction: every file of a certificate is first written in full beside its
//! target (`.NAME.cert-agent-new`, owner and mode set before any content, fsynced — or, for a
//! batch, made durable together: [`crate::fsutil::SyncGroup`]), then the
//! live files are switched by `rename`, keeping each previous version as a hard link
//! `.NAME.cert-agent-prev` so that a rollback restores it byte for byte, with its inode, owner
//! and mode. A live file is only ever replaced by a rename, so a full disk or a write error
//! never leaves it truncated. A file whose content, owner and mode are already what would be
//! written is left alone (not staged, not renamed, nothing to restore).
//!
//! Key and certificate as a pair: a combined file (key followed by the full chain) is switched
//! by one rename, so any reader opening it sees the old pair or the new pair, never a mix.
//! Separate key and certificate files cannot be switched atomically for a reader that opens
//! them one after the other. To keep that window as short as possible, everything is staged
//! and fsynced and every previous version linked aside before the first rename; then the
//! renames run back to back (see [`InstallTx::apply`]) — nothing but renames happens between
//! them, so a reader sees a new key with an old certificate for at most the time of those
//! renames (microseconds). Order: private files first (the key, then the combined file), then
//! the certificate files with the file the next run checks for the installed leaf (see
//! [`InstallPaths::leaf_file`]) last: a crash between the renames then leaves the *old*
//! leaf in that file, which the next run sees as not yet installed and installs again; the
//! other order would leave the new certificate (looking installed) with the old key. Web
//! servers read the files only when their configuration is tested or reloaded, which the
//! install flow does after all renames. Leftover `.cert-agent-new` / `.cert-agent-prev` files
//! of a crashed run are replaced by the next install of the same path.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::InstallError;
use super::paths::InstallPaths;
use super::staging::{
    CheckedDirs, NEW_SUFFIX, PREV_SUFFIX, StageError, check_ancestors, inspect_target,
    keep_previous, parent_dir, remove_if_exists, same_content, sibling, write_staged,
};
use crate::fsutil::{SyncGroup, SyncMode};

/// Mode of new certificate files.
pub(crate) const CERT_MODE: u32 = 0o644;
/// Mode of new key files.
pub(crate) const KEY_MODE: u32 = 0o600;
/// Mode of new key files when a group is configured.
pub(crate) const KEY_MODE_GROUP: u32 = 0o640;
/// Mode of directories created for install paths.
pub(crate) const DIR_MODE: u32 = 0o755;
/// Mode of a directory created to hold only keys.
pub(crate) const KEY_DIR_MODE: u32 = 0o700;

/// A user or group, by numeric id or by name (resolved with the system's user database).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// A numeric uid or gid.
    Id(u32),
    /// A user or group name.
    Name(String),
}

impl Principal {
    /// Reads a configured value: all digits is an id, anything else a name.
    pub fn parse(value: &str) -> Self {
        match value.parse::<u32>() {
            Ok(id) if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                Principal::Id(id)
            }
            _ => Principal::Name(value.to_string()),
        }
    }

    fn uid(&self) -> Result<u32, InstallError> {
        match self {
            Principal::Id(id) => Ok(*id),
            Principal::Name(name) => match nix::unistd::User::from_name(name) {
                Ok(Some(user)) => Ok(user.uid.as_raw()),
                Ok(None) => Err(InstallError::UnknownUser { name: name.clone() }),
                Err(cause) => Err(InstallError::Lookup {
                    name: name.clone(),
                    cause,
                }),
            },
        }
    }

    fn gid(&self) -> Result<u32, InstallError> {
        match self {
            Principal::Id(id) => Ok(*id),
            Principal::Name(name) => match nix::unistd::Group::from_name(name) {
                Ok(Some(group)) => Ok(group.gid.as_raw()),
                Ok(None) => Err(InstallError::UnknownGroup { name: name.clone() }),
                Err(cause) => Err(InstallError::Lookup {
                    name: name.clone(),
                    cause,
                }),
            },
        }
    }
}

/// Configured ownership and permissions of installed files (`owner`, `group`, `mode`). Anything
/// not configured is kept from the file being replaced, or, for a new file, defaults to the
/// agent's user and group with [`CERT_MODE`] / [`KEY_MODE`] ([`KEY_MODE_GROUP`] when a group
/// is configured).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ownership {
    /// Owner of every installed file.
    pub owner: Option<Principal>,
    /// Group of every installed file.
    pub group: Option<Principal>,
    /// Permission bits of certificate files.
    pub cert_mode: Option<u32>,
    /// Permission bits of the key file.
    pub key_mode: Option<u32>,
}

/// Whether a file holds public certificates or the private key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    /// Certificates (leaf, chain or fullchain): world-readable by default.
    Certificate,
    /// The private key, alone or followed by the certificates (combined file): owner-only by
    /// default, never accessible by others.
    Key,
}

/// The PEM content installed for one certificate. `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct CertMaterial {
    /// The leaf certificate.
    pub leaf_pem: Vec<u8>,
    /// The intermediates, leaf excluded.
    pub chain_pem: Vec<u8>,
    /// Leaf followed by the intermediates.
    pub fullchain_pem: Vec<u8>,
    /// The private key.
    pub key_pem: Vec<u8>,
}

impl CertMaterial {
    /// Builds the material from leaf, chain and key; the fullchain is leaf + chain.
    pub fn new(leaf_pem: Vec<u8>, chain_pem: Vec<u8>, key_pem: Vec<u8>) -> Self {
        let mut fullchain_pem = leaf_pem.clone();
        if !fullchain_pem.is_empty() && !fullchain_pem.ends_with(b"\n") {
            fullchain_pem.push(b'\n');
        }
        fullchain_pem.extend_from_slice(&chain_pem);
        CertMaterial {
            leaf_pem,
            chain_pem,
            fullchain_pem,
            key_pem,
        }
    }

    /// The content of a combined file: the private key followed by the fullchain (leaf, then
    /// the intermediates). Secret: it holds the key.
    pub fn combined_pem(&self) -> Vec<u8> {
        let mut pem = Vec::with_capacity(self.key_pem.len() + 1 + self.fullchain_pem.len());
        pem.extend_from_slice(&self.key_pem);
        if !pem.is_empty() && !pem.ends_with(b"\n") {
            pem.push(b'\n');
        }
        pem.extend_from_slice(&self.fullchain_pem);
        pem
    }
}

impl std::fmt::Debug for CertMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertMaterial")
            .field("leaf_pem", &format_args!("{} bytes", self.leaf_pem.len()))
            .field("chain_pem", &format_args!("{} bytes", self.chain_pem.len()))
            .field(
                "fullchain_pem",
                &format_args!("{} bytes", self.fullchain_pem.len()),
            )
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

#[derive(Debug)]
struct TxFile {
    target: PathBuf,
    role: FileRole,
    staged: PathBuf,
    /// The live file already has this content, owner and mode: nothing staged or switched.
    unchanged: bool,
    backup: Option<PathBuf>,
    switched: bool,
    /// For an unchanged file: a previous version left beside it by a crashed run, removed
    /// at commit (kept until then, like every other previous version).
    stale: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Staging,
    Applied,
    Finished,
}

/// A set of file replacements that undoes itself unless committed.
///
/// Life cycle: [`stage_file`](Self::stage_file) / [`stage_certificate`](Self::stage_certificate)
/// (new content written beside each target; nothing live changes) → [`apply`](Self::apply)
/// (previous versions kept, new versions renamed into place) → [`commit`](Self::commit)
/// (previous versions removed) or [`rollback`](Self::rollback) (previous versions renamed back,
/// files that did not exist removed, directories created by the transaction removed when
/// empty). Dropping an uncommitted transaction rolls it back.
#[derive(Debug)]
pub struct InstallTx {
    files: Vec<TxFile>,
    created_dirs: Vec<PathBuf>,
    state: State,
    /// The directories found safe, shared with the batch's other transactions.
    checked: Arc<CheckedDirs>,
}

impl Default for InstallTx {
    fn default() -> Self {
        Self::new()
    }
}

impl InstallTx {
    /// An empty transaction.
    pub fn new() -> Self {
        Self::in_batch(Arc::default())
    }

    /// An empty transaction of a batch whose transactions share `checked`: a directory the
    /// batch found safe with its ancestors is not checked again up to `/`.
    pub fn in_batch(checked: Arc<CheckedDirs>) -> Self {
        InstallTx {
            files: Vec::new(),
            created_dirs: Vec::new(),
            state: State::Staging,
            checked,
        }
    }

    /// The install paths staged so far, in staging order.
    pub fn targets(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|f| f.target.as_path())
    }

    /// Stages every file of one certificate that has a path: the key, the combined file (key
    /// followed by the fullchain, with the key's owner and mode) and the certificate files, in
    /// the order they are switched, each fsynced. A directory holding only the key and/or the
    /// combined file is created [`KEY_DIR_MODE`] (0750 with a configured group). Paths with
    /// neither a key nor a combined file are refused.
    pub fn stage_certificate(
        &mut self,
        paths: &InstallPaths,
        material: &CertMaterial,
        ownership: &Ownership,
    ) -> Result<(), InstallError> {
        let each = SyncGroup::with_mode(SyncMode::EachFile);
        self.stage_certificate_in(paths, material, ownership, &each)
    }

    /// [`stage_certificate`](Self::stage_certificate) for a batch: the staged files are
    /// durable once `group` syncs, which must happen before [`apply_in`](Self::apply_in).
    pub fn stage_certificate_in(
        &mut self,
        paths: &InstallPaths,
        material: &CertMaterial,
        ownership: &Ownership,
        group: &SyncGroup,
    ) -> Result<(), InstallError> {
        if paths.key.is_none() && paths.combined.is_none() {
            return Err(InstallError::NoKeyFile);
        }
        let private_dir_mode = |p: &Path| {
            let dir = parent_dir(p);
            if paths.certificate_paths().any(|c| parent_dir(c) == dir) {
                DIR_MODE
            } else if ownership.group.is_some() {
                0o750
            } else {
                KEY_DIR_MODE
            }
        };
        if let Some(key) = &paths.key {
            self.stage(
                key,
                &material.key_pem,
                (FileRole::Key, ownership),
                private_dir_mode(key),
                group,
            )?;
        }
        if let Some(combined) = &paths.combined {
            let mut pem = material.combined_pem();
            let staged = self.stage(
                combined,
                &pem,
                (FileRole::Key, ownership),
                private_dir_mode(combined),
                group,
            );
            pem.fill(0);
            std::hint::black_box(&pem);
            staged?;
        }
        // The leaf file the next run checks (fullchain, else leaf) goes last.
        let certs = [
            (&paths.chain, &material.chain_pem),
            (&paths.cert, &material.leaf_pem),
            (&paths.fullchain, &material.fullchain_pem),
        ];
        for (path, data) in certs {
            if let Some(path) = path {
                self.stage(
                    path,
                    data,
                    (FileRole::Certificate, ownership),
                    DIR_MODE,
                    group,
                )?;
            }
        }
        Ok(())
    }

    /// Stages one file: checks the target and its directories, creates missing directories
    /// ([`DIR_MODE`]), and writes `data` in full to `.NAME.cert-agent-new` beside `target`
    /// with its final owner and mode set before the first byte.
    pub fn stage_file(
        &mut self,
        target: &Path,
        data: &[u8],
        role: FileRole,
        ownership: &Ownership,
    ) -> Result<(), InstallError> {
        let each = SyncGroup::with_mode(SyncMode::EachFile);
        self.stage(target, data, (role, ownership), DIR_MODE, &each)
    }

    fn stage(
        &mut self,
        target: &Path,
        data: &[u8],
        (role, ownership): (FileRole, &Ownership),
        dir_mode: u32,
        group: &SyncGroup,
    ) -> Result<(), InstallError> {
        debug_assert_eq!(self.state, State::Staging, "stage after apply");
        if self.files.iter().any(|f| f.target == target) {
            return Err(InstallError::DuplicatePath {
                path: target.to_path_buf(),
            });
        }
        let uid = ownership.owner.as_ref().map(Principal::uid).transpose()?;
        let gid = ownership.group.as_ref().map(Principal::gid).transpose()?;
        let dir = parent_dir(target);
        self.ensure_dir(&dir, dir_mode, gid)?;
        let existing = inspect_target(target)?;

        let mode = match role {
            FileRole::Certificate => ownership.cert_mode,
            FileRole::Key => ownership.key_mode,
        }
        .or(existing.as_ref().map(|m| m.mode() & 0o7777))
        .unwrap_or(match role {
            FileRole::Certificate => CERT_MODE,
            FileRole::Key if ownership.group.is_some() => KEY_MODE_GROUP,
            FileRole::Key => KEY_MODE,
        });
        let uid = uid.or(existing.as_ref().map(|m| m.uid()));
        let gid = gid.or(existing.as_ref().map(|m| m.gid()));
        // A private key is never left readable or writable by others, whatever mode the file
        // it replaces had.
        let mode = if role == FileRole::Key && mode & 0o007 != 0 {
            tracing::warn!(
                path = %target.display(),
                "key file had mode {mode:04o}; writing it without access for others ({:04o})",
                mode & !0o007
            );
            mode & !0o007
        } else {
            mode
        };

        // A staged file left by a crashed run is replaced when written (`write_staged`).
        let staged = sibling(target, NEW_SUFFIX);
        if let Some(meta) = &existing
            && meta.mode() & 0o7777 == mode
            && uid.is_none_or(|u| u == meta.uid())
            && gid.is_none_or(|g| g == meta.gid())
            && same_content(target, data)
        {
            tracing::debug!(path = %target.display(), "unchanged, not replaced");
            remove_if_exists(&staged).map_err(|e| InstallError::Write {
                path: target.to_path_buf(),
                cause: Arc::new(e),
            })?;
            // A previous version left by a crashed run goes once this transaction commits.
            let prev = sibling(target, PREV_SUFFIX);
            self.files.push(TxFile {
                target: target.to_path_buf(),
                role,
                staged,
                unchanged: true,
                backup: None,
                switched: false,
                stale: fs::symlink_metadata(&prev).is_ok().then_some(prev),
            });
            return Ok(());
        }
        let watched = group.watch(&dir).map_err(StageError::Write);
        if let Err(err) =
            watched.and_then(|()| write_staged(&staged, data, (uid, gid), mode, group))
        {
            let _ = fs::remove_file(&staged);
            return Err(match err {
                StageError::Chown(e) => InstallError::Chown {
                    path: target.to_path_buf(),
                    cause: Arc::new(e),
                },
                StageError::Write(e) => InstallError::Write {
                    path: target.to_path_buf(),
                    cause: Arc::new(e),
                },
            });
        }
        self.files.push(TxFile {
            target: target.to_path_buf(),
            role,
            staged,
            unchanged: false,
            backup: None,
            switched: false,
            stale: None,
        });
        Ok(())
    }

    /// Checks every existing directory from `dir` up to `/`, and creates the missing ones.
    fn ensure_dir(&mut self, dir: &Path, mode: u32, gid: Option<u32>) -> Result<(), InstallError> {
        let mut missing = Vec::new();
        let mut cur = Some(dir);
        while let Some(d) = cur {
            match fs::metadata(d) {
                Ok(meta) => {
                    check_ancestors(d, meta, &self.checked)?;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(d.to_path_buf()),
                Err(e) => {
                    return Err(InstallError::Inspect {
                        path: d.to_path_buf(),
                        cause: Arc::new(e),
                    });
                }
            }
            cur = d.parent().filter(|p| !p.as_os_str().is_empty());
        }
        for d in missing.iter().rev() {
            // Only the innermost directory gets the restricted mode; directories on the way
            // are plain 0755 so that sibling paths stay reachable.
            let this_mode = if d == dir { mode } else { DIR_MODE };
            match fs::create_dir(d) {
                Ok(()) => {}
                // Another certificate of the batch, staged at the same time, created it first:
                // checked as an existing one (the other's install owns it).
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let meta = fs::metadata(d).map_err(|e| InstallError::Inspect {
                        path: d.clone(),
                        cause: Arc::new(e),
                    })?;
                    check_ancestors(d, meta, &self.checked)?;
                    continue;
                }
                Err(e) => {
                    return Err(InstallError::CreateDir {
                        path: d.clone(),
                        cause: Arc::new(e),
                    });
                }
            }
            let created = (|| {
                self.created_dirs.push(d.clone());
                if d == dir && this_mode != DIR_MODE && gid.is_some() {
                    std::os::unix::fs::chown(d, None, gid)?;
                }
                fs::set_permissions(d, fs::Permissions::from_mode(this_mode))
            })();
            created.map_err(|e| InstallError::CreateDir {
                path: d.clone(),
                cause: Arc::new(e),
            })?;
        }
        Ok(())
    }

    /// Switches every staged file into place: previous versions are hard-linked (or, where
    /// links are impossible, copied) to `.NAME.cert-agent-prev`, then the new versions are
    /// renamed over the targets back to back — files holding the key first, then the
    /// certificate files, each group in staging order — and the directories are fsynced.
    /// Unchanged files are skipped. On error everything already switched is restored before
    /// returning.
    pub fn apply(&mut self) -> Result<(), InstallError> {
        let each = SyncGroup::with_mode(SyncMode::EachFile);
        self.apply_in(&each)?;
        match each.sync() {
            Ok(()) => Ok(()),
            Err((dir, e)) => Err(self.undo_unsynced(dir, e)),
        }
    }

    /// [`apply`](Self::apply) for a batch: the renames are durable once `group` syncs; when
    /// that fails, [`undo_unsynced`](Self::undo_unsynced) restores the previous versions.
    pub fn apply_in(&mut self, group: &SyncGroup) -> Result<(), InstallError> {
        debug_assert_eq!(self.state, State::Staging, "apply twice");
        self.state = State::Applied;
        let result = self.switch(group);
        if let Err(err) = result {
            return Err(self.undone(err));
        }
        Ok(())
    }

    /// Restores the previous versions of a transaction switched with
    /// [`apply_in`](Self::apply_in) whose group could not be made durable (at `dir`); the
    /// error to report.
    pub fn undo_unsynced(&mut self, dir: PathBuf, e: io::Error) -> InstallError {
        self.undone(InstallError::Replace {
            path: dir,
            cause: Arc::new(e),
        })
    }

    fn undone(&mut self, err: InstallError) -> InstallError {
        match self.undo() {
            Ok(()) => err,
            Err(restore) => InstallError::RestoreFailed {
                first: Box::new(err),
                restore: Box::new(restore),
            },
        }
    }

    fn switch(&mut self, group: &SyncGroup) -> Result<(), InstallError> {
        for f in self.files.iter_mut().filter(|f| !f.unchanged) {
            let dir = parent_dir(&f.target);
            group.watch(&dir).map_err(|e| InstallError::Replace {
                path: f.target.clone(),
                cause: Arc::new(e),
            })?;
            if let Some(meta) = inspect_target(&f.target)? {
                let prev = sibling(&f.target, PREV_SUFFIX);
                keep_previous(&f.target, &prev, &meta).map_err(|e| InstallError::Backup {
                    path: f.target.clone(),
                    cause: Arc::new(e),
                })?;
                f.backup = Some(prev);
            }
        }
        let mut order: Vec<usize> = (0..self.files.len())
            .filter(|&i| !self.files[i].unchanged)
            .collect();
        order.sort_by_key(|&i| self.files[i].role != FileRole::Key);
        // Nothing but renames from here to the last one: the window in which a reader of
        // separate files could see a new key with an old certificate.
        for i in order {
            let f = &mut self.files[i];
            fs::rename(&f.staged, &f.target).map_err(|e| InstallError::Replace {
                path: f.target.clone(),
                cause: Arc::new(e),
            })?;
            f.switched = true;
        }
        Ok(())
    }

    /// Makes the switch permanent (applying it first if [`apply`](Self::apply) was not
    /// called): removes the kept previous versions.
    pub fn commit(self) -> Result<(), InstallError> {
        let each = SyncGroup::with_mode(SyncMode::EachFile);
        let result = self.commit_in(&each);
        let _ = each.sync();
        result
    }

    /// [`commit`](Self::commit) for a batch: the removals are durable once `group` syncs
    /// (nothing depends on that: a previous version left behind is replaced by the next
    /// install of its path).
    pub fn commit_in(mut self, group: &SyncGroup) -> Result<(), InstallError> {
        if self.state == State::Staging {
            self.apply()?;
        }
        self.state = State::Finished;
        for f in self
            .files
            .iter()
            .filter(|f| !f.unchanged || f.stale.is_some())
        {
            let _ = group.watch(&parent_dir(&f.target));
        }
        let mut first = None;
        for prev in self.files.iter().filter_map(|f| f.stale.clone()) {
            if let Err(e) = remove_if_exists(&prev) {
                first.get_or_insert(InstallError::Cleanup {
                    path: prev,
                    cause: Arc::new(e),
                });
            }
        }
        for f in self.files.iter_mut().filter(|f| !f.unchanged) {
            if !f.switched {
                let _ = fs::remove_file(&f.staged);
            }
            if let Some(prev) = f.backup.take()
                && let Err(e) = fs::remove_file(&prev)
            {
                first.get_or_insert(InstallError::Cleanup {
                    path: prev,
                    cause: Arc::new(e),
                });
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Undoes the transaction: every switched file gets its previous version back (byte
    /// identical, same inode) or is removed if it did not exist; staged files are removed.
    /// Returns the first error, after trying every file.
    pub fn rollback(mut self) -> Result<(), InstallError> {
        self.undo()
    }

    fn undo(&mut self) -> Result<(), InstallError> {
        self.state = State::Finished;
        let mut first: Option<InstallError> = None;
        for f in self.files.iter_mut().rev().filter(|f| !f.unchanged) {
            let result = if f.switched {
                match f.backup.take() {
                    Some(prev) => fs::rename(&prev, &f.target),
                    None => remove_if_exists(&f.target),
                }
            } else {
                let r = remove_if_exists(&f.staged);
                match f.backup.take() {
                    Some(prev) => r.and(remove_if_exists(&prev)),
                    None => r,
                }
            };
            if let Err(e) = result {
                first.get_or_insert(InstallError::Restore {
                    path: f.target.clone(),
                    cause: Arc::new(e),
                });
            } else {
                f.switched = false;
            }
        }
        if let Err((path, e)) = self.sync_dirs() {
            first.get_or_insert(InstallError::Restore {
                path,
                cause: Arc::new(e),
            });
        }
        for d in self.created_dirs.drain(..).rev() {
            let _ = fs::remove_dir(&d);
        }
        first.map_or(Ok(()), Err)
    }

    fn sync_dirs(&self) -> Result<(), (PathBuf, io::Error)> {
        let mut dirs: Vec<PathBuf> = self
            .files
            .iter()
            .filter(|f| !f.unchanged || f.stale.is_some())
            .map(|f| parent_dir(&f.target))
            .collect();
        dirs.sort();
        dirs.dedup();
        for d in dirs {
            if d.exists() {
                crate::fsutil::sync_dir(&d).map_err(|e| (d.clone(), e))?;
            }
        }
        Ok(())
    }
}

impl Drop for InstallTx {
    fn drop(&mut self) {
        if self.state != State::Finished
            && let Err(err) = self.undo()
        {
            tracing::error!("rolling back an unfinished install: {err}");
        }
    }
}
