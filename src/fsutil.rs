//! Crash-safe file writes: a temporary file in the target's directory, created with its final
//! mode before any byte is written, fsynced, renamed over the target, and the directory fsynced.
//! Also the one rule for reading a secret file (a password, a private key): [`read_private`],
//! and the writes of a batch made durable together ([`SyncGroup`], [`stage_atomic`]).

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

mod group;
pub(crate) use group::{SyncGroup, SyncMode};

/// How [`write_atomic_with`] writes a file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriteOptions {
    /// Permission bits of the new file (set exactly: the umask does not apply).
    pub mode: u32,
    /// Group of the new file, set before any byte is written.
    pub group: Option<u32>,
    /// Refuse to replace a symbolic link or a non-regular file at the target (checked before
    /// writing and again just before the rename); otherwise such an entry is replaced, never
    /// followed.
    pub refuse_links: bool,
}

/// Writes `data` to `path` atomically with permission bits `mode` (umask does not apply: the
/// mode is set explicitly on the temporary file before the content). A symlink at `path` is
/// replaced, never followed.
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    write_atomic_with(
        path,
        data,
        WriteOptions {
            mode,
            group: None,
            refuse_links: false,
        },
    )
}

/// Writes `data` to `path` atomically: a temporary file with a random name in the same
/// directory (created exclusively, not through a link), owner group and mode set before the
/// content, fsynced, renamed over `path`, and the directory fsynced. The temporary file is
/// removed on any failure.
pub(crate) fn write_atomic_with(path: &Path, data: &[u8], opts: WriteOptions) -> io::Result<()> {
    let (tmp, file) = write_temp(path, data, opts)?;
    file.sync_all()?;
    drop(file);
    StagedWrite {
        tmp,
        target: path.to_path_buf(),
        refuse_links: opts.refuse_links,
    }
    .rename()?;
    sync_dir(&parent_dir(path))
}

/// A file written in full beside its target (as [`write_atomic`] writes it), not yet renamed
/// over it; removed when dropped.
#[derive(Debug)]
pub(crate) struct StagedWrite {
    tmp: TempPath,
    target: PathBuf,
    refuse_links: bool,
}

impl StagedWrite {
    /// The path it replaces.
    pub(crate) fn target(&self) -> &Path {
        &self.target
    }

    /// Renames it over its target: durable once its group syncs again.
    pub(crate) fn rename(self) -> io::Result<()> {
        if self.refuse_links {
            refuse_link(&self.target)?;
        }
        let tmp_path = self.tmp.0.as_deref().unwrap_or(&self.target);
        fs::rename(tmp_path, &self.target)?;
        self.tmp.keep();
        Ok(())
    }
}

/// The first half of [`write_atomic_with`] for a batch: `data` written to a temporary file
/// beside `path` (created exclusively with its final mode and group before any byte), made
/// durable through `group` — whose [`SyncGroup::watch`] must have seen `path`'s directory
/// before this call. After [`SyncGroup::sync`], [`StagedWrite::rename`] replaces `path`, and
/// a second sync makes the rename durable.
pub(crate) fn stage_atomic(
    path: &Path,
    data: &[u8],
    opts: WriteOptions,
    group: &SyncGroup,
) -> io::Result<StagedWrite> {
    let (tmp, file) = write_temp(path, data, opts)?;
    group.written(&file)?;
    Ok(StagedWrite {
        tmp,
        target: path.to_path_buf(),
        refuse_links: opts.refuse_links,
    })
}

/// A temporary file beside `path` holding `data` (not yet synced), and the file.
fn write_temp(path: &Path, data: &[u8], opts: WriteOptions) -> io::Result<(TempPath, fs::File)> {
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    if opts.refuse_links {
        refuse_link(path)?;
    }
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(
        ".tmp-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let tmp = TempPath(Some(dir.join(tmp_name)));
    let tmp_path = tmp.0.as_deref().unwrap_or(path);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(opts.mode & 0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(tmp_path)?;
    if let Some(gid) = opts.group {
        std::os::unix::fs::fchown(&file, None, Some(gid))?;
    }
    // The creation mode is filtered by the umask; set the exact bits before writing.
    file.set_permissions(fs::Permissions::from_mode(opts.mode))?;
    file.write_all(data)?;
    Ok((tmp, file))
}

/// An error when `path` is a symbolic link or not a regular file (missing is fine).
fn refuse_link(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to replace a symbolic link",
        )),
        Ok(meta) if !meta.file_type().is_file() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to replace something that is not a regular file",
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// A temporary file removed when dropped, unless kept.
#[derive(Debug)]
struct TempPath(Option<PathBuf>);

impl TempPath {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_file(p);
        }
    }
}

/// Creates `dir` (and parents) if missing and sets its mode.
pub(crate) fn ensure_private_dir(dir: &Path, mode: u32) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(mode))
}

/// fsync a directory so that a rename inside it is durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The mode bits that make a secret file readable by others than its owner.
const SHARED_READ: u32 = 0o044;

/// Reads a secret file (a password, a private key) of at most `max` bytes. Refused, with the
/// reason as text: a file that cannot be opened, that is not a regular file, that is readable
/// by group or others (the same rule for every secret file the agent reads), or that is
/// larger than `max`. The caller names the file and its key in front of the reason.
pub(crate) fn read_private(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    read_secret(path, max, true)
}

/// [`read_private`], with the mode check only when `private` (a systemd credential is
/// protected by systemd, whatever its mode).
pub(crate) fn read_secret(path: &Path, max: u64, private: bool) -> Result<Vec<u8>, String> {
    let mut file = fs::File::open(path).map_err(|e| io_text(&e))?;
    let meta = file.metadata().map_err(|e| io_text(&e))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mode = meta.mode() & 0o7777;
    if private && mode & SHARED_READ != 0 {
        return Err(format!(
            "has mode {mode:04o}: it must not be readable by group or others (chmod 600 it)"
        ));
    }
    // Sized from the file's length, so that a file is read in one call (and a last one
    // that finds its end), not in calls that double a buffer from 32 bytes.
    let expected = usize::try_from(meta.len().min(max).saturating_add(1)).unwrap_or(0);
    let mut data = Vec::with_capacity(expected);
    (&mut file)
        .take(max + 1)
        .read_to_end(&mut data)
        .map_err(|e| io_text(&e))?;
    if data.len() as u64 > max {
        return Err(format!("is larger than {max} bytes"));
    }
    Ok(data)
}

/// An I/O error as text without the Rust decoration ("permission denied").
pub(crate) fn io_text(e: &io::Error) -> String {
    let s = e.to_string();
    // "Permission denied (os error 13)" → "permission denied"
    let s = s.split(" (os error").next().unwrap_or(&s).to_owned();
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => s,
    }
}

/// Whether `name` matches the shell pattern `pattern`: `*` stands for any run of bytes other
/// than `/`, `?` for one such byte. Linear in practice: the last `*` is the only point it
/// goes back to.
pub(crate) fn glob_matches(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if (c == b'?' && name[n] != b'/') || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                // A star does not stand for a `/`.
                Some((sp, sn)) if name[sn] != b'/' => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                _ => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Same path, or the same file reached through another path.
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_with_exact_mode_and_replaces_symlink_without_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::write(&outside, b"keep").unwrap();
        let target = dir.path().join("secret");
        std::os::unix::fs::symlink(&outside, &target).unwrap();
        write_atomic(&target, b"new", 0o600).unwrap();
        assert_eq!(fs::read(&outside).unwrap(), b"keep");
        assert_eq!(fs::read(&target).unwrap(), b"new");
        let meta = fs::symlink_metadata(&target).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn a_secret_file_readable_by_group_or_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        fs::write(&file, b"hunter2\n").unwrap();
        for mode in [0o644, 0o640, 0o604] {
            fs::set_permissions(&file, fs::Permissions::from_mode(mode)).unwrap();
            let err = read_private(&file, 64).unwrap_err();
            assert!(err.contains(&format!("mode {mode:04o}")), "{err}");
            assert!(err.contains("readable by group or others"), "{err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
        // Writable by the group only: not a disclosure; the rule is about reading.
        fs::set_permissions(&file, fs::Permissions::from_mode(0o620)).unwrap();
        assert_eq!(read_private(&file, 64).unwrap(), b"hunter2\n");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_private(&file, 64).unwrap(), b"hunter2\n");
        assert!(
            read_private(&file, 4)
                .unwrap_err()
                .contains("larger than 4 bytes")
        );
        assert!(
            read_private(dir.path(), 64)
                .unwrap_err()
                .contains("not a regular file")
        );
        let missing = read_private(&dir.path().join("absent"), 64).unwrap_err();
        assert!(missing.contains("no such file"), "{missing}");
    }
}
