//! Webroot mode: the validation file written under `<webroot>/.well-known/<directory>/<name>`
//! of every distinct webroot of a certificate's domains, and its removal. The directory is the
//! file's [`WellKnown`](super::WellKnown) one: `pki-validation` (`<MD5>.txt`) or
//! `acme-challenge` (`<token>`).
//!
//! Web roots are often writable by the site's own users while the agent runs as root, so the
//! two directories below the webroot are opened relative to each other with `O_NOFOLLOW`: a
//! symbolic link at `.well-known` or `pki-validation`/`acme-challenge` is refused, and swapping one in while we
//! work cannot redirect a write. The webroot itself may be a symbolic link (it is
//! configuration). The file is written atomically (temporary file created `0644` before any
//! byte, fsync, rename, fsync of the directory); missing directories are created `0755`
//! whatever the umask. The returned [`Published`] record lists exactly what was created, so the
//! orchestrator can store it and [`remove`] it later, also after a crash.
//!
//! The functions are blocking; call them from `spawn_blocking` in async code.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{FileStat, Mode, SFlag, fchmod, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use serde::{Deserialize, Serialize};

use super::{DcvError, ValidationFile, WellKnown, pki_validation};

/// Why a path is refused that is in neither validation directory.
const NOT_VALIDATION_DIR: &str = concat!(
    "not in a ",
    pki_validation!(),
    " or acme-challenge directory"
);

/// First directory below the webroot.
const WELL_KNOWN: &str = ".well-known";
/// Mode of the validation file.
const FILE_MODE: u32 = 0o644;
/// Mode of directories we create.
const DIR_MODE: u32 = 0o755;

/// Where the validation file of a certificate goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Webroots {
    /// One document root serves every domain of the certificate.
    One(PathBuf),
    /// Document root per domain; the file goes into each distinct one.
    PerDomain(BTreeMap<String, PathBuf>),
}

impl Webroots {
    /// The distinct webroots for `domains`, in the order of first use. Every domain needs
    /// one; domain names are compared case-insensitively.
    pub(crate) fn distinct_for(&self, domains: &[String]) -> Result<Vec<PathBuf>, DcvError> {
        let mut out: Vec<PathBuf> = Vec::new();
        for domain in domains {
            let root = match self {
                Self::One(root) => root,
                Self::PerDomain(map) => map
                    .iter()
                    .find(|(d, _)| d.eq_ignore_ascii_case(domain))
                    .map(|(_, root)| root)
                    .ok_or_else(|| DcvError::NoWebroot {
                        domain: domain.clone(),
                    })?,
            };
            if !out.contains(root) {
                out.push(root.clone());
            }
        }
        Ok(out)
    }
}

/// What [`publish`] created: exactly the files written and the directories it made (parents
/// before children), as absolute paths. Serialisable so that it can be stored before waiting
/// for validation and removed after a crash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// Validation files written.
    pub files: Vec<PathBuf>,
    /// Directories created, parents first.
    pub dirs: Vec<PathBuf>,
}

impl Published {
    /// Nothing was created.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dirs.is_empty()
    }
}

/// Publishes `file` into each of `webroots` (absolute paths of existing directories, one per
/// distinct webroot: `Webroots::distinct_for`). On failure, whatever this call created is
/// removed again before the error is returned.
pub fn publish_into(webroots: &[PathBuf], file: &ValidationFile) -> Result<Published, DcvError> {
    let mut published = Published::default();
    for root in webroots {
        if let Err(e) = publish_one(root, file, &mut published) {
            if let Err(undo) = remove(&published) {
                tracing::warn!("could not undo a partial DCV publication: {undo}");
            }
            return Err(e);
        }
    }
    Ok(published)
}

fn publish_one(root: &Path, file: &ValidationFile, rec: &mut Published) -> Result<(), DcvError> {
    if !root.is_absolute() {
        return Err(DcvError::RelativeWebroot {
            path: root.to_path_buf(),
        });
    }
    let root_fd = open_webroot(root)?;
    let wk_path = root.join(WELL_KNOWN);
    let wk = open_or_create_dir(&root_fd, WELL_KNOWN, &wk_path, rec)?;
    let dir_name = file.well_known().dir_name();
    let pv_path = wk_path.join(dir_name);
    let pv = open_or_create_dir(&wk, dir_name, &pv_path, rec)?;
    let path = pv_path.join(file.name());
    write_at(&pv, file, &path)?;
    rec.files.push(path);
    Ok(())
}

/// Removes what [`publish`] created: the files, then the directories if they are empty.
/// Idempotent: what is already gone is not an error. Paths that are not of the form publishing
/// creates are refused, so a damaged record cannot delete anything else. Every entry is tried;
/// the first error is returned.
pub(crate) fn remove(published: &Published) -> Result<(), DcvError> {
    let mut first = None;
    for path in &published.files {
        if let Err(e) = remove_file(path) {
            first.get_or_insert(e);
        }
    }
    for path in published.dirs.iter().rev() {
        if let Err(e) = remove_dir_if_empty(path) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

fn remove_file(path: &Path) -> Result<(), DcvError> {
    let foreign = |reason| DcvError::ForeignPath {
        path: path.to_path_buf(),
        reason,
    };
    let pv_path = path.parent().ok_or_else(|| foreign("no parent"))?;
    let well_known = pv_path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(WellKnown::of_dir_name)
        .ok_or_else(|| foreign(NOT_VALIDATION_DIR))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| well_known.accepts_name(n))
        .ok_or_else(|| foreign("not a validation file name"))?;
    let Some(pv) = open_chain(pv_path, "remove validation file")? else {
        return Ok(());
    };
    // A publisher stopped between writing and renaming leaves its temporary file
    // (`.NAME.tmp<pid>-<n>`, always a regular file) beside the target: remove those too.
    let prefix = format!(".{name}.tmp");
    if let Ok(entries) = std::fs::read_dir(pv_path) {
        for entry in entries.flatten() {
            let Some(n) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if n.starts_with(&prefix)
                && n.len() <= prefix.len() + 32
                && matches!(stat_at(&pv, n.as_str()), Ok(st) if kind(&st) == SFlag::S_IFREG)
            {
                let _ = unlinkat(&pv, n.as_str(), UnlinkatFlags::NoRemoveDir);
            }
        }
    }
    match stat_at(&pv, name) {
        Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(io(e, "inspect", path)),
        Ok(st) if kind(&st) == SFlag::S_IFREG => unlinkat(&pv, name, UnlinkatFlags::NoRemoveDir)
            .or_else(ignore_enoent)
            .map_err(|e| io(e, "remove", path)),
        Ok(st) if kind(&st) == SFlag::S_IFLNK => Err(DcvError::Symlink {
            op: "remove validation file",
            path: path.to_path_buf(),
        }),
        Ok(_) => Err(foreign("not a regular file")),
    }
}

fn remove_dir_if_empty(path: &Path) -> Result<(), DcvError> {
    let foreign = |reason| DcvError::ForeignPath {
        path: path.to_path_buf(),
        reason,
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| foreign("no directory name"))?;
    let parent = path.parent().ok_or_else(|| foreign("no parent"))?;
    let parent_fd = match name {
        WELL_KNOWN => open_webroot_if_present(parent)?,
        _ if WellKnown::of_dir_name(name).is_some() => open_chain_well_known(parent)?,
        _ => return Err(foreign("not a directory publishing creates")),
    };
    let Some(parent_fd) = parent_fd else {
        return Ok(());
    };
    match unlinkat(&parent_fd, name, UnlinkatFlags::RemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        // Something else lives there now (e.g. another certificate's file): keep it.
        Err(Errno::ENOTEMPTY | Errno::EEXIST) => Ok(()),
        Err(Errno::ENOTDIR) => match stat_at(&parent_fd, name) {
            Ok(st) if kind(&st) == SFlag::S_IFLNK => Err(DcvError::Symlink {
                op: "remove directory",
                path: path.to_path_buf(),
            }),
            _ => Err(DcvError::NotADirectory {
                op: "remove directory",
                path: path.to_path_buf(),
            }),
        },
        Err(e) => Err(io(e, "remove directory", path)),
    }
}

/// Opens `<webroot>/.well-known/<pki-validation|acme-challenge>` given its path, refusing
/// symbolic links below the webroot. `None` when a part is missing.
fn open_chain(pv_path: &Path, op: &'static str) -> Result<Option<OwnedFd>, DcvError> {
    let foreign = |reason| DcvError::ForeignPath {
        path: pv_path.to_path_buf(),
        reason,
    };
    let Some(dir_name) = pv_path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(WellKnown::of_dir_name)
        .map(WellKnown::dir_name)
    else {
        return Err(foreign(NOT_VALIDATION_DIR));
    };
    let wk_path = pv_path.parent().ok_or_else(|| foreign("no parent"))?;
    let Some(wk) = open_chain_well_known(wk_path)? else {
        return Ok(None);
    };
    open_existing_dir(&wk, dir_name, pv_path, op)
}

/// Opens `<webroot>/.well-known` given its path. `None` when a part is missing.
fn open_chain_well_known(wk_path: &Path) -> Result<Option<OwnedFd>, DcvError> {
    let foreign = |reason| DcvError::ForeignPath {
        path: wk_path.to_path_buf(),
        reason,
    };
    if wk_path.file_name().and_then(|n| n.to_str()) != Some(WELL_KNOWN) {
        return Err(foreign("not in a .well-known directory"));
    }
    let root = wk_path.parent().ok_or_else(|| foreign("no parent"))?;
    let Some(root_fd) = open_webroot_if_present(root)? else {
        return Ok(None);
    };
    open_existing_dir(&root_fd, WELL_KNOWN, wk_path, "remove validation file")
}

fn open_webroot_if_present(root: &Path) -> Result<Option<OwnedFd>, DcvError> {
    if !root.is_absolute() {
        return Err(DcvError::RelativeWebroot {
            path: root.to_path_buf(),
        });
    }
    match open_dir_at(None, root, true) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ENOENT) => Ok(None),
        Err(Errno::ENOTDIR) => Err(DcvError::NotADirectory {
            op: "open webroot",
            path: root.to_path_buf(),
        }),
        Err(e) => Err(io(e, "open webroot", root)),
    }
}

fn open_webroot(root: &Path) -> Result<OwnedFd, DcvError> {
    open_webroot_if_present(root)?.ok_or_else(|| DcvError::Io {
        op: "open webroot",
        path: root.to_path_buf(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    })
}

/// Opens the directory `name` in `parent` without following a symbolic link.
fn open_existing_dir(
    parent: &OwnedFd,
    name: &str,
    path: &Path,
    op: &'static str,
) -> Result<Option<OwnedFd>, DcvError> {
    match open_dir_at(Some(parent), Path::new(name), false) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ENOENT) => Ok(None),
        Err(e @ (Errno::ELOOP | Errno::ENOTDIR)) => Err(not_dir_error(parent, name, path, op, e)),
        Err(e) => Err(io(e, op, path)),
    }
}

/// Opens the directory `name` in `parent`, creating it (`0755`) when missing and recording it.
fn open_or_create_dir(
    parent: &OwnedFd,
    name: &str,
    path: &Path,
    rec: &mut Published,
) -> Result<OwnedFd, DcvError> {
    const OP: &str = "publish into";
    if let Some(fd) = open_existing_dir(parent, name, path, OP)? {
        return Ok(fd);
    }
    let created = match mkdirat(parent, name, Mode::from_bits_truncate(DIR_MODE)) {
        Ok(()) => true,
        // Created concurrently by someone else: not ours to remove.
        Err(Errno::EEXIST) => false,
        Err(e) => return Err(io(e, "create directory", path)),
    };
    if created {
        rec.dirs.push(path.to_path_buf());
    }
    let fd = open_existing_dir(parent, name, path, OP)?.ok_or_else(|| DcvError::Io {
        op: "open directory",
        path: path.to_path_buf(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    })?;
    if created {
        // mkdir's mode is filtered by the umask; set the exact bits.
        fchmod(&fd, Mode::from_bits_truncate(DIR_MODE))
            .map_err(|e| io(e, "set mode of directory", path))?;
    }
    Ok(fd)
}

fn not_dir_error(
    parent: &OwnedFd,
    name: &str,
    path: &Path,
    op: &'static str,
    e: Errno,
) -> DcvError {
    match stat_at(parent, name) {
        Ok(st) if kind(&st) == SFlag::S_IFLNK => DcvError::Symlink {
            op,
            path: path.to_path_buf(),
        },
        Ok(_) => DcvError::NotADirectory {
            op,
            path: path.to_path_buf(),
        },
        Err(_) => io(e, op, path),
    }
}

/// Writes the file atomically into the directory `dir` (whose path is `path`'s parent).
fn write_at(dir: &OwnedFd, file: &ValidationFile, path: &Path) -> Result<(), DcvError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = format!(".{}.tmp{}-{seq}", file.name(), std::process::id());
    let _ = unlinkat(dir, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
    let result = (|| {
        let fd = openat(
            dir,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(FILE_MODE),
        )
        .map_err(|e| io(e, "create validation file", path))?;
        // The creation mode is filtered by the umask; set the exact bits before the content.
        fchmod(&fd, Mode::from_bits_truncate(FILE_MODE))
            .map_err(|e| io(e, "set mode of validation file", path))?;
        let mut f = File::from(fd);
        f.write_all(file.content().as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|source| DcvError::Io {
                op: "write validation file",
                path: path.to_path_buf(),
                source,
            })?;
        drop(f);
        renameat(dir, tmp.as_str(), dir, file.name())
            .map_err(|e| io(e, "rename into place validation file", path))?;
        nix::unistd::fsync(dir).map_err(|e| io(e, "sync directory of validation file", path))
    })();
    if result.is_err() {
        let _ = unlinkat(dir, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
    }
    result
}

fn open_dir_at(parent: Option<&OwnedFd>, path: &Path, follow: bool) -> nix::Result<OwnedFd> {
    let mut flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    if !follow {
        flags |= OFlag::O_NOFOLLOW;
    }
    match parent {
        Some(p) => openat(p, path, flags, Mode::empty()),
        None => openat(nix::fcntl::AT_FDCWD, path, flags, Mode::empty()),
    }
}

fn stat_at(dir: &OwnedFd, name: &str) -> nix::Result<FileStat> {
    fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

fn ignore_enoent(e: Errno) -> nix::Result<()> {
    if e == Errno::ENOENT { Ok(()) } else { Err(e) }
}

fn io(e: Errno, op: &'static str, path: &Path) -> DcvError {
    DcvError::Io {
        op,
        path: path.to_path_buf(),
        source: std::io::Error::from(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn file() -> ValidationFile {
        ValidationFile::from_parts(
            "0123456789ABCDEF0123456789ABCDEF.txt",
            "5D41402ABC4B2A76B9719D911017C592\nsectigo.com\nAbc123",
        )
        .unwrap()
    }

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    /// The umask is per process: this test runs its body in a child process (this test
    /// binary, started through `sh -c 'umask 000; exec ...'`) so that no other test sees it.
    #[test]
    fn publish_creates_exact_modes_under_umask_000_and_remove_undoes_it() {
        const CHILD: &str = "CERT_AGENT_TEST_UMASK_000_CHILD";
        const NAME: &str =
            "dcv::webroot::tests::publish_creates_exact_modes_under_umask_000_and_remove_undoes_it";
        if std::env::var_os(CHILD).is_none() {
            let exe = std::env::current_exe().unwrap();
            let out = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg("umask 000 && exec \"$0\" --exact \"$1\" --test-threads=1 --nocapture")
                .arg(exe)
                .arg(NAME)
                .env(CHILD, "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(text.contains("1 passed"), "{text}");
            return;
        }
        let old = nix::sys::stat::umask(Mode::empty());
        assert_eq!(old.bits(), 0, "the child runs under umask 000");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let f = file();
        let roots = Webroots::One(root.clone()).distinct_for(&["a.example".into()]);
        let result = publish_into(&roots.unwrap(), &f);
        let published = result.unwrap();
        let wk = root.join(".well-known");
        let pv = wk.join("pki-validation");
        let path = pv.join(f.name());
        assert_eq!(published.files, vec![path.clone()]);
        assert_eq!(published.dirs, vec![wk.clone(), pv.clone()]);
        assert_eq!(fs::read_to_string(&path).unwrap(), f.content());
        assert_eq!(mode(&path), 0o644);
        assert_eq!(mode(&wk), 0o755);
        assert_eq!(mode(&pv), 0o755);
        // No temporary file left behind.
        assert_eq!(fs::read_dir(&pv).unwrap().count(), 1);

        // The record survives a round trip through storage.
        let stored = serde_json::to_string(&published).unwrap();
        let published: Published = serde_json::from_str(&stored).unwrap();
        remove(&published).unwrap();
        assert!(!wk.exists());
        remove(&published).unwrap();
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
    }

    #[test]
    fn existing_directories_are_kept_and_not_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let pv = root.join(".well-known/pki-validation");
        fs::create_dir_all(&pv).unwrap();
        fs::write(root.join(".well-known/other"), b"keep").unwrap();
        let f = file();
        let published = publish_into(std::slice::from_ref(&root), &f).unwrap();
        assert_eq!(published.dirs, Vec::<PathBuf>::new());
        assert_eq!(published.files, vec![pv.join(f.name())]);
        // Overwrites a stale copy.
        let p2 = publish_into(std::slice::from_ref(&root), &f).unwrap();
        assert_eq!(p2, published);
        remove(&published).unwrap();
        assert!(pv.is_dir());
        assert_eq!(fs::read_dir(&pv).unwrap().count(), 0);
    }

    #[test]
    fn created_directory_is_kept_when_something_else_was_put_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let published = publish_into(std::slice::from_ref(&root), &file()).unwrap();
        let other = root.join(".well-known/pki-validation/FEDCBA9876543210FEDCBA9876543210.txt");
        fs::write(&other, b"another certificate").unwrap();
        remove(&published).unwrap();
        assert!(other.exists());
        assert!(
            !root
                .join(".well-known/pki-validation")
                .join(file().name())
                .exists()
        );
    }

    #[test]
    fn symlinks_below_the_webroot_are_refused() {
        for link_at in [".well-known", ".well-known/pki-validation"] {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("www");
            let elsewhere = dir.path().join("elsewhere");
            fs::create_dir_all(&root).unwrap();
            fs::create_dir_all(&elsewhere).unwrap();
            if link_at.contains('/') {
                fs::create_dir(root.join(".well-known")).unwrap();
            }
            let link = root.join(link_at);
            symlink(&elsewhere, &link).unwrap();
            let err = publish_into(std::slice::from_ref(&root), &file()).unwrap_err();
            assert!(matches!(err, DcvError::Symlink { .. }), "{link_at}: {err}");
            assert!(
                err.to_string().contains(&link.display().to_string()),
                "{err}"
            );
            assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0, "{link_at}");
        }
    }

    #[test]
    fn a_symlinked_webroot_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        fs::create_dir(&real).unwrap();
        let root = dir.path().join("html");
        symlink(&real, &root).unwrap();
        let published = publish_into(std::slice::from_ref(&root), &file()).unwrap();
        assert!(
            real.join(".well-known/pki-validation")
                .join(file().name())
                .is_file()
        );
        remove(&published).unwrap();
        assert_eq!(fs::read_dir(&real).unwrap().count(), 0);
    }

    #[test]
    fn a_file_where_a_directory_belongs_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        fs::write(root.join(".well-known"), b"x").unwrap();
        let err = publish_into(std::slice::from_ref(&root), &file()).unwrap_err();
        assert!(matches!(err, DcvError::NotADirectory { .. }), "{err}");
    }

    #[test]
    fn missing_or_relative_webroot_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let err = publish_into(std::slice::from_ref(&missing), &file()).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
        let err = publish_into(&[PathBuf::from("www")], &file()).unwrap_err();
        assert!(matches!(err, DcvError::RelativeWebroot { .. }), "{err}");
    }

    #[test]
    fn map_mode_publishes_into_each_distinct_webroot() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        let map = Webroots::PerDomain(BTreeMap::from([
            ("example.com".to_owned(), a.clone()),
            ("www.example.com".to_owned(), a.clone()),
            ("shop.example.com".to_owned(), b.clone()),
        ]));
        let domains: Vec<String> = ["www.example.com", "example.com", "Shop.Example.com"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            map.distinct_for(&domains).unwrap(),
            vec![a.clone(), b.clone()]
        );
        let f = file();
        let published = publish_into(&map.distinct_for(&domains).unwrap(), &f).unwrap();
        assert_eq!(published.files.len(), 2);
        assert_eq!(published.dirs.len(), 4);
        for root in [&a, &b] {
            let p = root.join(".well-known/pki-validation").join(f.name());
            assert_eq!(fs::read_to_string(p).unwrap(), f.content());
        }
        remove(&published).unwrap();
        remove(&published).unwrap();
        assert_eq!(fs::read_dir(&a).unwrap().count(), 0);
        assert_eq!(fs::read_dir(&b).unwrap().count(), 0);

        let err = map.distinct_for(&["other.example.com".into()]).unwrap_err();
        assert!(err.to_string().contains("other.example.com"), "{err}");
    }

    #[test]
    fn failure_in_the_second_webroot_undoes_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        symlink("/tmp", b.join(".well-known")).unwrap();
        let err = publish_into(&[a.clone(), b], &file()).unwrap_err();
        assert!(matches!(err, DcvError::Symlink { .. }), "{err}");
        assert_eq!(fs::read_dir(&a).unwrap().count(), 0);
    }

    #[test]
    fn remove_refuses_foreign_paths_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        let foreign = Published {
            files: vec![victim.clone()],
            dirs: vec![dir.path().to_path_buf()],
        };
        let err = remove(&foreign).unwrap_err();
        assert!(matches!(err, DcvError::ForeignPath { .. }), "{err}");
        assert!(victim.exists());

        let root = dir.path().join("www");
        let published = {
            fs::create_dir(&root).unwrap();
            publish_into(std::slice::from_ref(&root), &file()).unwrap()
        };
        // The file was replaced by a link to something else: not ours to delete.
        let path = &published.files[0];
        fs::remove_file(path).unwrap();
        symlink(&victim, path).unwrap();
        let err = remove(&published).unwrap_err();
        assert!(matches!(err, DcvError::Symlink { .. }), "{err}");
        assert!(victim.exists());
        // A directory swapped for a link is not followed either.
        fs::remove_file(path).unwrap();
        let pv = root.join(".well-known/pki-validation");
        fs::remove_dir(&pv).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::write(elsewhere.join(file().name()), b"keep").unwrap();
        symlink(&elsewhere, &pv).unwrap();
        assert!(remove(&published).is_err());
        assert!(elsewhere.join(file().name()).exists());
    }

    fn acme_file() -> ValidationFile {
        let token = "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA";
        ValidationFile::acme_http01(
            token,
            &format!("{token}.9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI"),
        )
        .unwrap()
    }

    #[test]
    fn an_acme_file_goes_into_acme_challenge_beside_a_csr_hash_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let (pki, acme) = (file(), acme_file());
        let first = publish_into(std::slice::from_ref(&root), &pki).unwrap();
        let second = publish_into(std::slice::from_ref(&root), &acme).unwrap();
        let ac = root.join(".well-known/acme-challenge");
        assert_eq!(second.files, vec![ac.join(acme.name())]);
        // `.well-known` was made by the first publication, `acme-challenge` by the second.
        assert_eq!(second.dirs, vec![ac.clone()]);
        assert_eq!(
            fs::read_to_string(ac.join(acme.name())).unwrap(),
            acme.content()
        );
        assert_eq!(mode(&ac), 0o755);
        // Each removal takes its own file and directory, and leaves the other's.
        let stored: Published =
            serde_json::from_str(&serde_json::to_string(&second).unwrap()).unwrap();
        remove(&stored).unwrap();
        assert!(!ac.exists());
        assert!(first.files[0].is_file());
        remove(&first).unwrap();
        assert!(!root.join(".well-known").exists());
    }

    #[test]
    fn a_symlinked_acme_challenge_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("www");
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir_all(root.join(".well-known")).unwrap();
        fs::create_dir_all(&elsewhere).unwrap();
        symlink(&elsewhere, root.join(".well-known/acme-challenge")).unwrap();
        let err = publish_into(std::slice::from_ref(&root), &acme_file()).unwrap_err();
        assert!(matches!(err, DcvError::Symlink { .. }), "{err}");
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
    }

    #[test]
    fn remove_refuses_names_of_the_other_directory_and_unknown_directories() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        for (sub, name) in [
            // A token's shape in the CSR-hash directory, and the other way round.
            ("pki-validation", acme_file().name().to_owned()),
            ("acme-challenge", file().name().to_owned()),
            ("other", acme_file().name().to_owned()),
            ("acme-challenge", "index.html".to_owned()),
        ] {
            let d = root.join(".well-known").join(sub);
            fs::create_dir_all(&d).unwrap();
            let victim = d.join(&name);
            fs::write(&victim, b"keep").unwrap();
            let err = remove(&Published {
                files: vec![victim.clone()],
                dirs: vec![],
            })
            .unwrap_err();
            assert!(
                matches!(err, DcvError::ForeignPath { .. }),
                "{sub}/{name}: {err}"
            );
            assert!(victim.exists());
        }
        let err = remove(&Published {
            files: vec![],
            dirs: vec![root.join(".well-known/other")],
        })
        .unwrap_err();
        assert!(matches!(err, DcvError::ForeignPath { .. }), "{err}");
    }
}
