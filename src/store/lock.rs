//! The state directory's run lock: `state_dir/lock`, held with `flock` for a whole run and
//! holding the PID of its holder; taken at once or waited for.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;

use nix::fcntl::{Flock, FlockArg};

use super::{Store, StoreError};

/// Takes the run lock of `store`, waiting up to `wait` while another process holds it
/// (`Duration::ZERO`: not at all). `waiting` is told once, with the holder, when the lock is
/// taken at the first attempt; when the wait ends without the lock, the last
/// [`StoreError::Locked`] (naming the holder then) is returned.
pub(crate) async fn lock_waiting(
    store: &Store,
    wait: std::time::Duration,
    mut waiting: impl FnMut(&StoreError),
) -> Result<RunLock, StoreError> {
    let until = tokio::time::Instant::now() + wait;
    let mut told = false;
    loop {
        match store.lock() {
            Err(e @ StoreError::Locked { .. }) => {
                let now = tokio::time::Instant::now();
                if now >= until {
                    return Err(e);
                }
                if !told {
                    waiting(&e);
                    told = true;
                }
                let step = std::time::Duration::from_millis(200).min(until - now);
                tokio::time::sleep(step).await;
            }
            other => return other,
        }
    }
}

/// Held for a whole run; released on drop.
#[derive(Debug)]
pub struct RunLock {
    _lock: Flock<File>,
}

impl Store {
    /// Takes the run lock without waiting; a second run gets [`StoreError::Locked`] naming the
    /// PID that holds it.
    pub fn lock(&self) -> Result<RunLock, StoreError> {
        let path = self.dir.join("lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|source| StoreError::Lock {
                path: path.clone(),
                source,
            })?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                let pid = std::process::id().to_string();
                let written = lock
                    .set_len(0)
                    .and_then(|()| lock.rewind())
                    .and_then(|()| lock.write_all(pid.as_bytes()))
                    .and_then(|()| lock.sync_data());
                written.map_err(|source| StoreError::Lock {
                    path: path.clone(),
                    source,
                })?;
                Ok(RunLock { _lock: lock })
            }
            Err((mut file, errno)) if errno == nix::errno::Errno::EWOULDBLOCK => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                Err(StoreError::Locked {
                    path,
                    pid: if pid.is_empty() {
                        "unknown".to_owned()
                    } else {
                        pid.to_owned()
                    },
                })
            }
            Err((_, errno)) => Err(StoreError::Lock {
                path,
                source: io::Error::from(errno),
            }),
        }
    }
}
