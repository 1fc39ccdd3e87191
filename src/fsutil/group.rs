//! Writes of a batch made durable together. Written one by one, a thousand files cost a
//! thousand `fsync` calls, each a journal commit and a flush of the disk's cache; a batch that
//! only needs all of them durable before its next step pays once instead.
//!
//! A batch of fewer than [`SYNCFS_FROM`] files is synced file by file (an `fsync` of a small
//! file costs less than a `syncfs` on a file system with other dirty data).
//!
//! A [`SyncGroup`] is told each directory the batch writes in ([`SyncGroup::watch`]) *before*
//! anything is written there, and [`SyncGroup::sync`] is called once, after the last write
//! and before anything depends on the writes being durable. With `syncfs(2)` reporting
//! write-back errors (Linux 5.8 and later), that is one `syncfs` per file system, on a
//! directory opened before the writes: it writes back and waits for every dirty page and
//! inode of that file system, commits its journal and flushes the disk's cache — what an
//! `fsync` of each file and each directory does, for all of them at once — and it fails
//! when any write-back on that file system failed since the directory was opened (the
//! kernel's per-file-system error sequence), so no failed write goes unnoticed. On older
//! kernels, whose `syncfs` does not report write-back errors, each file is fsynced as it is
//! written ([`SyncGroup::written`]) and each directory once in [`SyncGroup::sync`].

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// How a group makes its writes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// One `syncfs` per file system (kernels whose `syncfs` reports write-back errors).
    FileSystem,
    /// Each file fsynced as it is written, each directory once at [`SyncGroup::sync`].
    EachFile,
}

/// From this many files on, a batch is synced with `syncfs` (where it reports errors): below,
/// an `fsync` of each costs less than writing back whatever else is dirty on the file system.
pub(crate) const SYNCFS_FROM: usize = 16;

impl SyncMode {
    /// [`SyncMode::FileSystem`] for a batch of at least [`SYNCFS_FROM`] files where this
    /// kernel's `syncfs` reports write-back errors, else [`SyncMode::EachFile`].
    pub fn for_files(count: usize) -> Self {
        if count >= SYNCFS_FROM {
            Self::detect()
        } else {
            SyncMode::EachFile
        }
    }

    /// [`SyncMode::FileSystem`] where this kernel's `syncfs` reports write-back errors
    /// (Linux 5.8 and later), else [`SyncMode::EachFile`].
    pub fn detect() -> Self {
        static MODE: std::sync::OnceLock<SyncMode> = std::sync::OnceLock::new();
        *MODE.get_or_init(|| {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            if reports_errors(&release) {
                SyncMode::FileSystem
            } else {
                SyncMode::EachFile
            }
        })
    }
}

/// Whether a kernel of this release (`uname -r`) reports write-back errors from `syncfs`.
fn reports_errors(release: &str) -> bool {
    let mut parts = release.trim().split(['.', '-']);
    let number = |p: Option<&str>| p.and_then(|s| s.parse::<u32>().ok());
    match (number(parts.next()), number(parts.next())) {
        (Some(major), Some(minor)) => (major, minor) >= (5, 8),
        _ => false,
    }
}

#[derive(Debug, Default)]
struct Watched {
    /// Every directory watched (fsynced in [`SyncMode::EachFile`]).
    dirs: BTreeSet<PathBuf>,
    /// One open directory per file system, opened before anything was written there.
    anchors: Vec<(u64, PathBuf, File)>,
}

/// The writes of one batch, made durable together by [`SyncGroup::sync`]. Shared by the
/// threads that write the batch.
#[derive(Debug)]
pub struct SyncGroup {
    mode: SyncMode,
    watched: Mutex<Watched>,
}

impl Default for SyncGroup {
    fn default() -> Self {
        Self::new()
    }
}

impl SyncGroup {
    /// A group in this kernel's mode ([`SyncMode::detect`]).
    pub fn new() -> Self {
        Self::with_mode(SyncMode::detect())
    }

    /// A group for a batch of about `count` files ([`SyncMode::for_files`]).
    pub fn for_files(count: usize) -> Self {
        Self::with_mode(SyncMode::for_files(count))
    }

    /// A group in `mode`.
    pub fn with_mode(mode: SyncMode) -> Self {
        SyncGroup {
            mode,
            watched: Mutex::new(Watched::default()),
        }
    }

    /// How this group syncs.
    pub fn mode(&self) -> SyncMode {
        self.mode
    }

    /// Notes that the batch writes (creates, renames, removes) in `dir`; called before the
    /// first such write. In [`SyncMode::FileSystem`] the first directory of each file system
    /// is opened and kept.
    pub fn watch(&self, dir: &Path) -> io::Result<()> {
        let mut w = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        if w.dirs.contains(dir) {
            return Ok(());
        }
        if self.mode == SyncMode::FileSystem {
            let dev = std::fs::metadata(dir)?.dev();
            if !w.anchors.iter().any(|(d, _, _)| *d == dev) {
                let file = File::open(dir)?;
                // The directory opened may have been replaced since the stat.
                let dev = file.metadata()?.dev();
                w.anchors.push((dev, dir.to_path_buf(), file));
            }
        }
        w.dirs.insert(dir.to_path_buf());
        Ok(())
    }

    /// Called once a file of the batch is fully written: fsynced now in
    /// [`SyncMode::EachFile`], nothing in [`SyncMode::FileSystem`] (its directory was
    /// watched).
    pub fn written(&self, file: &File) -> io::Result<()> {
        match self.mode {
            SyncMode::EachFile => file.sync_all(),
            SyncMode::FileSystem => Ok(()),
        }
    }

    /// Makes every write of the batch so far durable: one `syncfs` per file system, or an
    /// `fsync` of each directory watched. The error names the directory it was met at.
    pub fn sync(&self) -> Result<(), (PathBuf, io::Error)> {
        let w = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        match self.mode {
            SyncMode::FileSystem => {
                for (_, dir, file) in &w.anchors {
                    nix::unistd::syncfs(file).map_err(|e| (dir.clone(), io::Error::from(e)))?;
                }
            }
            SyncMode::EachFile => {
                for dir in &w.dirs {
                    match super::sync_dir(dir) {
                        Ok(()) => {}
                        // A directory the batch removed again (rolled back): nothing to keep.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err((dir.clone(), e)),
                    }
                }
            }
        }
        Ok(())
    }

    /// How many `syncfs` or directory `fsync` calls [`sync`](Self::sync) makes.
    pub fn syncs(&self) -> usize {
        let w = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        match self.mode {
            SyncMode::FileSystem => w.anchors.len(),
            SyncMode::EachFile => w.dirs.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn kernels_from_5_8_report_syncfs_errors() {
        assert!(reports_errors("6.18.44-fc-v657"));
        assert!(reports_errors("5.8.0"));
        assert!(reports_errors("5.15.0-91-generic\n"));
        assert!(!reports_errors("5.4.0-150-generic"));
        assert!(!reports_errors("4.19.0"));
        assert!(!reports_errors(""));
        assert!(!reports_errors("garbage"));
        assert!(!reports_errors("5"));
    }

    #[test]
    fn small_batches_are_synced_file_by_file() {
        assert_eq!(SyncMode::for_files(0), SyncMode::EachFile);
        assert_eq!(SyncMode::for_files(SYNCFS_FROM - 1), SyncMode::EachFile);
        assert_eq!(SyncMode::for_files(SYNCFS_FROM), SyncMode::detect());
        assert_eq!(SyncGroup::for_files(1).mode(), SyncMode::EachFile);
    }

    #[test]
    fn one_sync_per_file_system_or_per_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        for mode in [SyncMode::FileSystem, SyncMode::EachFile] {
            let g = SyncGroup::with_mode(mode);
            for dir in [&a, &b, &a] {
                g.watch(dir).unwrap();
                let mut f = File::create(dir.join(format!("{mode:?}"))).unwrap();
                f.write_all(b"x").unwrap();
                g.written(&f).unwrap();
            }
            g.sync().unwrap();
            assert_eq!(g.syncs(), if mode == SyncMode::FileSystem { 1 } else { 2 });
        }
    }

    #[test]
    fn a_missing_directory_cannot_be_watched() {
        let tmp = tempfile::tempdir().unwrap();
        let g = SyncGroup::with_mode(SyncMode::FileSystem);
        let err = g.watch(&tmp.path().join("absent")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
