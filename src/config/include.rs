//! `[agent] include`: the fragment files (`conf.d/*.toml`) that hold further `[[certificate]]`
//! tables, one per site for hosting panels. A pattern may hold `*` and `?` in its file name
//! (not in its directories); matches are sorted by name, and names starting with a dot (editor
//! and package-manager leftovers) are only matched by a pattern that starts with a dot. The
//! files are read and stat-ed through their open directory ([`Dir`]); a [`Stamp`] identifies
//! the version read.

use std::ffi::OsStr;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::sys::stat::{Mode, fstat, fstatat};
use serde::{Deserialize, Serialize};

/// What a pattern of `[agent] include` names.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Expanded {
    /// The files, sorted.
    Files(Vec<PathBuf>),
    /// A pattern with wildcards whose directory does not exist (yet): nothing is included.
    NoDirectory(PathBuf),
}

/// The files `pattern` names, sorted; relative patterns are read from `base` (the directory of
/// the main configuration file). A pattern without wildcards names one file, which must exist;
/// a pattern with wildcards may match nothing (an empty `conf.d/` is normal, and so is one not
/// made yet: `discover --write` makes it).
pub(super) fn expand(pattern: &str, base: &Path) -> Result<Expanded, String> {
    let path = base.join(pattern);
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Err(format!("{pattern:?} does not name a file"));
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    if dir.to_string_lossy().contains(['*', '?', '[']) {
        return Err(format!(
            "{pattern:?}: wildcards are allowed only in the file name, not in directories"
        ));
    }
    if !name.contains(['*', '?']) {
        return match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => Ok(Expanded::Files(vec![path])),
            Ok(_) => Err(format!("{} is not a file", path.display())),
            Err(e) => Err(format!(
                "{}: {}",
                path.display(),
                crate::fsutil::io_text(&e)
            )),
        };
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Expanded::NoDirectory(dir.to_path_buf()));
        }
        Err(e) => {
            return Err(format!(
                "directory {} of {pattern:?}: {}",
                dir.display(),
                crate::fsutil::io_text(&e)
            ));
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| format!("{}: {}", dir.display(), crate::fsutil::io_text(&e)))?;
        let file_name = entry.file_name();
        let Some(candidate) = file_name.to_str() else {
            continue;
        };
        if candidate.starts_with('.') && !name.starts_with('.') {
            continue;
        }
        if !crate::fsutil::glob_matches(name.as_bytes(), candidate.as_bytes()) {
            continue;
        }
        let full = dir.join(candidate);
        // Symbolic links to files count (sites-enabled style); directories do not. The type
        // comes with the directory entry; only a link costs a stat.
        let is_file = match entry.file_type() {
            Ok(t) if t.is_file() => true,
            Ok(t) if t.is_symlink() => std::fs::metadata(&full).is_ok_and(|m| m.is_file()),
            Ok(_) => false,
            Err(_) => std::fs::metadata(&full).is_ok_and(|m| m.is_file()),
        };
        if is_file {
            out.push(full);
        }
    }
    // One directory: the order of the names' bytes is the order of the paths (sorting the
    // paths compares them component by component).
    out.sort_unstable_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
    Ok(Expanded::Files(out))
}

/// What identifies one version of a file, from `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    mtime: i64,
    mtime_ns: i64,
    ctime: i64,
    ctime_ns: i64,
}

impl Stamp {
    pub(super) fn of(s: &nix::sys::stat::FileStat) -> Self {
        Self {
            dev: s.st_dev,
            ino: s.st_ino,
            size: u64::try_from(s.st_size).unwrap_or(u64::MAX),
            mode: s.st_mode,
            mtime: s.st_mtime,
            mtime_ns: s.st_mtime_nsec,
            ctime: s.st_ctime,
            ctime_ns: s.st_ctime_nsec,
        }
    }

    pub(super) fn mode(&self) -> u32 {
        self.mode
    }

    pub(super) fn size(&self) -> u64 {
        self.size
    }

    /// Modified or changed at or after `limit` (since the epoch).
    pub(super) fn recent(&self, limit: Duration) -> bool {
        let at = |s: i64, ns: i64| {
            u64::try_from(s).map_or(Duration::ZERO, |s| {
                Duration::new(s, u32::try_from(ns).unwrap_or(0))
            })
        };
        at(self.mtime, self.mtime_ns) >= limit || at(self.ctime, self.ctime_ns) >= limit
    }
}

/// The directory of the included files being looked at, open, so that each file is found by
/// its name alone (a thousand files: a thousand short lookups instead of whole-path walks).
#[derive(Default)]
pub(super) struct Dir {
    path: PathBuf,
    fd: Option<OwnedFd>,
}

impl Dir {
    /// `file`'s name, and its directory open (`None`: it could not be opened; the file is then
    /// found by its whole path).
    fn enter<'f>(&mut self, file: &'f Path) -> std::io::Result<(&'f OsStr, Option<&OwnedFd>)> {
        let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
            return Err(std::io::Error::other("not a file path"));
        };
        if self.path != dir || self.fd.is_none() {
            self.path = dir.to_path_buf();
            self.fd = open(
                dir,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .ok();
        }
        Ok((name, self.fd.as_ref()))
    }

    /// `file`'s text and stamp: open, the stamp (mode, size, times) from the open file, one
    /// read of that size, close.
    pub(super) fn read(&mut self, file: &Path) -> std::io::Result<(String, Stamp)> {
        let mut f = match self.enter(file)? {
            (name, Some(fd)) => std::fs::File::from(openat(
                fd,
                name,
                OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?),
            (_, None) => std::fs::File::open(file)?,
        };
        let stamp = Stamp::of(&fstat(&f)?);
        let size = usize::try_from(stamp.size()).unwrap_or(0);
        let mut bytes = vec![0u8; size];
        let mut filled = 0;
        // The size the file had when opened (no further read to find its end: one read for a
        // small file).
        while filled < size {
            match f.read(&mut bytes[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        bytes.truncate(filled);
        let text = String::from_utf8(bytes)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))?;
        Ok((text, stamp))
    }

    /// `file`'s stamp, links followed as when it is read: one `stat` by its name.
    pub(super) fn stamp(&mut self, file: &Path) -> std::io::Result<Stamp> {
        let st = match self.enter(file)? {
            (name, Some(fd)) => fstatat(fd, name, AtFlags::empty())?,
            (_, None) => nix::sys::stat::stat(file)?,
        };
        Ok(Stamp::of(&st))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_in_the_shell() {
        for (pattern, name, expected) in [
            ("*.toml", "www.toml", true),
            ("*.toml", "www.toml~", false),
            ("*.toml", ".toml", true),
            ("site-?.toml", "site-a.toml", true),
            ("site-?.toml", "site-ab.toml", false),
            ("*", "", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("**x", "abcx", true),
            ("/etc/*.conf", "/etc/a/b.conf", false),
            ("/etc/*/b.conf", "/etc/a/b.conf", true),
            ("exact.toml", "exact.toml", true),
            ("exact.toml", "exact.tom", false),
        ] {
            assert_eq!(
                crate::fsutil::glob_matches(pattern.as_bytes(), name.as_bytes()),
                expected,
                "{pattern} ~ {name}"
            );
        }
    }

    #[test]
    fn expansion_is_sorted_skips_hidden_files_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("conf.d");
        std::fs::create_dir(&d).unwrap();
        for f in [
            "b.toml",
            "a.toml",
            ".a.toml.swp",
            "c.toml.bak",
            ".hidden.toml",
        ] {
            std::fs::write(d.join(f), "").unwrap();
        }
        std::fs::create_dir(d.join("dir.toml")).unwrap();
        let got = expand("conf.d/*.toml", dir.path()).unwrap();
        assert_eq!(
            got,
            Expanded::Files(vec![d.join("a.toml"), d.join("b.toml")])
        );
        assert_eq!(
            expand("conf.d/*.none", dir.path()).unwrap(),
            Expanded::Files(Vec::new())
        );
        let e = expand("conf.d/missing.toml", dir.path()).unwrap_err();
        assert!(e.contains("missing.toml"), "{e}");
        // A directory not made yet includes nothing (the caller warns); a file named without
        // wildcards must exist.
        assert_eq!(
            expand("nowhere/*.toml", dir.path()).unwrap(),
            Expanded::NoDirectory(dir.path().join("nowhere"))
        );
        let e = expand("nowhere/x.toml", dir.path()).unwrap_err();
        assert!(e.contains("nowhere"), "{e}");
        let e = expand("*/x.toml", dir.path()).unwrap_err();
        assert!(e.contains("only in the file name"), "{e}");
    }
}
