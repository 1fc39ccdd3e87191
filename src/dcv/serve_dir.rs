//! The publish directory shared by `renew` and a running `cert-agent serve`.
//!
//! `cert-agent serve` (the standalone DCV server as a process of its own) takes the lock
//! `<state_dir>/serve.lock` with `flock` for as long as it runs and writes its PID and the
//! listen addresses it serves into it. It serves the validation files of
//! `<state_dir>/standalone/` (mode 0755, files 0644: validation contents are public) through a
//! descriptor of that directory opened before it drops its privileges.
//!
//! `renew` asks [`running`] before publishing for a standalone certificate: when a serve
//! process holds the lock and serves the certificate's `listen` address, the file is written
//! into the directory ([`publish`]) instead of being served by a server inside the run, and it
//! stays there between runs until validation is over ([`remove`]).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg, OFlag};
use nix::sys::stat::Mode;

use super::{DcvError, ValidationFile};

/// The publish directory inside the state directory.
pub(crate) const PUBLISH_DIR: &str = "standalone";
/// The lock a running `cert-agent serve` holds, inside the state directory.
pub(crate) const LOCK_FILE: &str = "serve.lock";

/// Mode of the publish directory: the server may run as another user.
const DIR_MODE: u32 = 0o755;
/// Mode of a published file.
const FILE_MODE: u32 = 0o644;

/// `<state_dir>/standalone`.
pub(crate) fn dir_path(state_dir: &Path) -> PathBuf {
    state_dir.join(PUBLISH_DIR)
}

/// A running `cert-agent serve`, as its lock file describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServeInfo {
    /// Its process ID (as written; "unknown" if it could not be read).
    pub pid: String,
    /// The addresses it listens on, as configured.
    pub listen: Vec<SocketAddr>,
}

/// The lock of a running `cert-agent serve`; released when dropped (or when the process ends).
/// The lock is held through a read-only descriptor: a server process that dropped its
/// privileges keeps no way to write into the state directory.
#[derive(Debug)]
pub(crate) struct ServeLock {
    _lock: Flock<File>,
    path: PathBuf,
}

impl ServeLock {
    /// Takes the lock without waiting; an error names the PID of a serve process that holds it.
    pub(crate) fn take(state_dir: &Path) -> Result<Self, DcvError> {
        let path = state_dir.join(LOCK_FILE);
        let io = |source| DcvError::Io {
            op: "lock",
            path: path.clone(),
            source,
        };
        // Created if missing (0600), never truncated here: it may be another server's.
        drop(
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(o_nofollow())
                .open(&path)
                .map_err(io)?,
        );
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(o_nofollow())
            .open(&path)
            .map_err(io)?;
        // A `renew` asking whether a server runs ([`running`]) holds a shared lock for an
        // instant: try again for a moment before concluding that another server holds it.
        for attempt in 0.. {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(Self { _lock: lock, path }),
                Err((f, Errno::EWOULDBLOCK)) if attempt < 10 => {
                    file = f;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err((f, Errno::EWOULDBLOCK)) => {
                    return Err(DcvError::ServeRunning {
                        path: path.clone(),
                        pid: read_info(f).pid,
                    });
                }
                Err((_, errno)) => return Err(io(errno.into())),
            }
        }
        unreachable!("the loop above returns")
    }

    /// Records this process and the addresses it serves for [`running`] (through a descriptor
    /// closed again at once).
    pub(crate) fn announce(&self, listen: &[SocketAddr]) -> Result<(), DcvError> {
        let mut text = format!("{}\n", std::process::id());
        for addr in listen {
            text.push_str(&format!("{addr}\n"));
        }
        OpenOptions::new()
            .write(true)
            .truncate(true)
            .custom_flags(o_nofollow())
            .open(&self.path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|source| DcvError::Io {
                op: "write",
                path: self.path.clone(),
                source,
            })
    }
}

fn o_nofollow() -> i32 {
    OFlag::O_NOFOLLOW.bits()
}

fn read_info(mut file: File) -> ServeInfo {
    let mut text = String::new();
    // Bounded: the file holds a PID and a few addresses.
    let _ = Read::by_ref(&mut file)
        .take(64 * 1024)
        .read_to_string(&mut text);
    let mut lines = text.lines().map(str::trim);
    let pid = match lines.next() {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.to_owned(),
        _ => "unknown".to_owned(),
    };
    ServeInfo {
        pid,
        listen: lines.filter_map(|l| l.parse().ok()).collect(),
    }
}

/// The `cert-agent serve` process holding the lock of `state_dir`, if one runs.
pub(crate) fn running(state_dir: &Path) -> Result<Option<ServeInfo>, DcvError> {
    let path = state_dir.join(LOCK_FILE);
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(o_nofollow())
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(DcvError::Io {
                op: "open",
                path,
                source,
            });
        }
    };
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        // Nobody holds it: released again when `_free` drops.
        Ok(_free) => Ok(None),
        Err((file, Errno::EWOULDBLOCK)) => Ok(Some(read_info(file))),
        Err((_, errno)) => Err(DcvError::Io {
            op: "lock",
            path,
            source: errno.into(),
        }),
    }
}

/// Creates the publish directory if missing (0755) and checks that it is a directory, not a
/// symbolic link.
fn ensure_dir(state_dir: &Path) -> Result<PathBuf, DcvError> {
    let dir = dir_path(state_dir);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(DcvError::Symlink {
                op: "use",
                path: dir,
            });
        }
        Ok(m) if !m.is_dir() => {
            return Err(DcvError::NotADirectory {
                op: "use",
                path: dir,
            });
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir(&dir).map_err(|source| DcvError::Io {
                op: "create",
                path: dir.clone(),
                source,
            })?;
        }
        Err(source) => {
            return Err(DcvError::Io {
                op: "inspect",
                path: dir,
                source,
            });
        }
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(DIR_MODE)).map_err(
        |source| DcvError::Io {
            op: "set the mode of",
            path: dir.clone(),
            source,
        },
    )?;
    Ok(dir)
}

/// Creates the publish directory if missing and opens it for serving (`O_DIRECTORY`,
/// `O_NOFOLLOW`): files are then read relative to the descriptor only.
pub(crate) fn open_dir(state_dir: &Path) -> Result<OwnedFd, DcvError> {
    let dir = ensure_dir(state_dir)?;
    nix::fcntl::open(
        &dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| DcvError::Io {
        op: "open",
        path: dir,
        source: errno.into(),
    })
}

/// Writes `file` into the publish directory (atomically, mode 0644); returns its path.
pub(crate) fn publish(state_dir: &Path, file: &ValidationFile) -> Result<PathBuf, DcvError> {
    let dir = ensure_dir(state_dir)?;
    let path = dir.join(file.name());
    // Published by an earlier run and still in place: nothing to write.
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
        && std::fs::read(&path).is_ok_and(|b| b == file.content().as_bytes())
    {
        return Ok(path);
    }
    crate::fsutil::write_atomic(&path, file.content().as_bytes(), FILE_MODE).map_err(|source| {
        DcvError::Io {
            op: "write",
            path: path.clone(),
            source,
        }
    })?;
    Ok(path)
}

/// Removes the validation file `name` (`<MD5>.txt` or an ACME token) from the publish
/// directory; true when there was one. Nothing but a validation file name is accepted.
pub(crate) fn remove(state_dir: &Path, name: &str) -> Result<bool, DcvError> {
    super::check_file_name(name)?;
    let path = dir_path(state_dir).join(name);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(DcvError::Io {
            op: "remove",
            path,
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> ValidationFile {
        ValidationFile::from_parts("0123456789ABCDEF0123456789ABCDEF.txt", "abc\nsectigo.com\n")
            .unwrap()
    }

    #[test]
    fn publish_and_remove_with_public_modes() {
        let state = tempfile::tempdir().unwrap();
        let path = publish(state.path(), &file()).unwrap();
        assert_eq!(path, dir_path(state.path()).join(file().name()));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), file().content());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&path), FILE_MODE);
        assert_eq!(mode(&dir_path(state.path())), DIR_MODE);
        assert!(remove(state.path(), file().name()).unwrap());
        assert!(!remove(state.path(), file().name()).unwrap());
        assert!(remove(state.path(), "../lock").is_err());
    }

    #[test]
    fn a_symlinked_publish_dir_is_refused() {
        let state = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir_path(state.path())).unwrap();
        assert!(matches!(
            publish(state.path(), &file()),
            Err(DcvError::Symlink { .. })
        ));
        assert!(open_dir(state.path()).is_err());
        assert!(
            std::fs::read_dir(elsewhere.path())
                .unwrap()
                .next()
                .is_none()
        );
    }

    #[test]
    fn the_lock_tells_renew_who_serves_what() {
        let state = tempfile::tempdir().unwrap();
        assert_eq!(running(state.path()).unwrap(), None, "no lock file");
        let addrs: Vec<SocketAddr> = vec![
            "127.0.0.1:8080".parse().unwrap(),
            "[::1]:80".parse().unwrap(),
        ];
        {
            let lock = ServeLock::take(state.path()).unwrap();
            lock.announce(&addrs).unwrap();
            let info = running(state.path()).unwrap().unwrap();
            assert_eq!(info.pid, std::process::id().to_string());
            assert_eq!(info.listen, addrs);
            let err = ServeLock::take(state.path()).unwrap_err();
            assert!(
                err.to_string()
                    .contains(&format!("pid {}", std::process::id())),
                "{err}"
            );
        }
        assert_eq!(running(state.path()).unwrap(), None, "released on drop");
    }
}
