//! In-memory ZIP unpacking for untrusted archives.
//!
//! Before the zip crate sees the archive, its central directory is walked here: the entry
//! count is bounded before anything is allocated per entry, and every name, type and flag is
//! checked (the zip crate keeps only the last of two entries with the same name, so duplicates
//! must be caught before it reads). Contents are then inflated through a `take` limit; the
//! sizes an archive declares are never trusted.

use std::collections::HashSet;
use std::fmt;
use std::io::{Cursor, Read};

use super::BundleError;
use crate::values::text::quote_max;

/// Bounds for [`Archive::unpack_with_limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest archive accepted, in bytes.
    pub max_archive_bytes: usize,
    /// Most entries (files and directories) accepted.
    pub max_entries: usize,
    /// Largest inflated entry, in bytes.
    pub max_entry_bytes: u64,
    /// Largest inflated total, in bytes.
    pub max_total_bytes: u64,
    /// Longest entry name, in bytes.
    pub max_name_bytes: usize,
}

impl Default for Limits {
    /// A bundle holds a dozen files of a few kilobytes each.
    fn default() -> Self {
        Self {
            max_archive_bytes: 16 << 20,
            max_entries: 256,
            max_entry_bytes: 1 << 20,
            max_total_bytes: 8 << 20,
            max_name_bytes: 255,
        }
    }
}

/// What is wrong with one entry of an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryProblem {
    EmptyName,
    NameTooLong {
        limit: usize,
    },
    NotUtf8,
    Nul,
    ControlCharacter,
    Backslash,
    Absolute,
    ParentDir,
    DotComponent,
    EmptyComponent,
    Duplicate,
    Symlink,
    SpecialFile {
        mode: u32,
    },
    Encrypted,
    TooLarge {
        limit: u64,
    },
    TotalTooLarge {
        limit: u64,
    },
    /// The zip crate's view of the entry differs from the central directory's.
    Inconsistent(String),
    Unreadable(String),
}

impl fmt::Display for EntryProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyName => f.write_str("empty name"),
            Self::NameTooLong { limit } => write!(f, "name longer than {limit} bytes"),
            Self::NotUtf8 => f.write_str("name is not UTF-8"),
            Self::Nul => f.write_str("NUL byte in name"),
            Self::ControlCharacter => f.write_str("control character in name"),
            Self::Backslash => f.write_str("backslash in name"),
            Self::Absolute => f.write_str("absolute path"),
            Self::ParentDir => f.write_str("'..' component in name"),
            Self::DotComponent => f.write_str("'.' component in name"),
            Self::EmptyComponent => f.write_str("empty component ('//') in name"),
            Self::Duplicate => f.write_str("duplicate name"),
            Self::Symlink => f.write_str("symbolic link entry"),
            Self::SpecialFile { mode } => write!(f, "special file entry (mode {mode:o})"),
            Self::Encrypted => f.write_str("encrypted entry"),
            Self::TooLarge { limit } => write!(f, "inflates to more than {limit} bytes"),
            Self::TotalTooLarge { limit } => {
                write!(f, "archive inflates to more than {limit} bytes in total")
            }
            Self::Inconsistent(what) => write!(f, "inconsistent archive: {what}"),
            Self::Unreadable(what) => write!(f, "could not be read: {what}"),
        }
    }
}

/// The files of an unpacked archive, in archive order (directory entries are left out).
#[derive(Debug, Clone, Default)]
pub struct Archive {
    files: Vec<(String, Vec<u8>)>,
}

impl Archive {
    /// Unpacks `zip` in memory with the default [`Limits`].
    pub fn unpack(zip: &[u8]) -> Result<Self, BundleError> {
        Self::unpack_with_limits(zip, &Limits::default())
    }

    /// Unpacks `zip` in memory within `limits`. Every entry name is checked (no `..`, absolute
    /// path, backslash, NUL or control character, empty or `.` component, duplicate); symbolic
    /// links, special files and encrypted entries are refused. Nested archives are just bytes.
    pub fn unpack_with_limits(zip: &[u8], limits: &Limits) -> Result<Self, BundleError> {
        if zip.len() > limits.max_archive_bytes {
            return Err(BundleError::ArchiveTooLarge {
                size: zip.len(),
                limit: limits.max_archive_bytes,
            });
        }
        let entries = central_directory(zip, limits)?;

        let mut archive = zip::ZipArchive::new(Cursor::new(zip))
            .map_err(|e| BundleError::NotZip(e.to_string()))?;
        if archive.len() != entries.len() {
            return Err(BundleError::NotZip(format!(
                "the central directory lists {} entries, the ZIP reader found {}",
                entries.len(),
                archive.len()
            )));
        }

        let mut files = Vec::new();
        let mut total: u64 = 0;
        for (index, entry) in entries.iter().enumerate() {
            let problem = |problem| BundleError::Entry {
                name: quote_max(&entry.name, NAME_CHARS),
                problem,
            };
            let mut file = archive
                .by_index(index)
                .map_err(|e| problem(EntryProblem::Unreadable(e.to_string())))?;
            if file.name_raw() != entry.name.as_bytes() {
                return Err(problem(EntryProblem::Inconsistent(format!(
                    "the ZIP reader sees entry {index} as {}",
                    quote_max(&String::from_utf8_lossy(file.name_raw()), NAME_CHARS)
                ))));
            }
            if entry.is_dir {
                continue;
            }
            let cap = limits
                .max_entry_bytes
                .min(limits.max_total_bytes.saturating_sub(total));
            let mut data = Vec::new();
            (&mut file)
                .take(cap.saturating_add(1))
                .read_to_end(&mut data)
                .map_err(|e| problem(EntryProblem::Unreadable(e.to_string())))?;
            let len = data.len() as u64;
            if len > cap {
                return Err(problem(if cap == limits.max_entry_bytes {
                    EntryProblem::TooLarge {
                        limit: limits.max_entry_bytes,
                    }
                } else {
                    EntryProblem::TotalTooLarge {
                        limit: limits.max_total_bytes,
                    }
                }));
            }
            total += len;
            files.push((entry.name.clone(), data));
        }
        Ok(Self { files })
    }

    /// The content of the file named exactly `name`.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| d.as_slice())
    }

    /// File names, in archive order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|(n, _)| n.as_str())
    }

    /// Number of files (directory entries are not counted).
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when the archive holds no file.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// One central directory record, checked.
struct CdEntry {
    name: String,
    is_dir: bool,
}

const EOCD_SIG: u32 = 0x0605_4b50;
const CDH_SIG: u32 = 0x0201_4b50;
const EOCD_LEN: usize = 22;
const CDH_LEN: usize = 46;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Walks the central directory (classic, non-ZIP64 format: a bundle is far below its
/// limits) and checks every record.
fn central_directory(zip: &[u8], limits: &Limits) -> Result<Vec<CdEntry>, BundleError> {
    let not_zip = |what: &str| BundleError::NotZip(what.to_owned());
    // The end record is the last 22 bytes plus a comment of up to 65535 bytes; its comment
    // length must reach exactly to the end of the data.
    let lowest = zip.len().saturating_sub(EOCD_LEN + usize::from(u16::MAX));
    let eocd = (lowest..=zip.len().saturating_sub(EOCD_LEN))
        .rev()
        .find(|&at| {
            u32_at(zip, at) == Some(EOCD_SIG)
                && u16_at(zip, at + 20).map(|c| at + EOCD_LEN + usize::from(c)) == Some(zip.len())
        })
        .ok_or_else(|| not_zip("no end of central directory record (truncated or not a ZIP)"))?;
    let field16 = |off| u16_at(zip, eocd + off).map(usize::from).unwrap_or(0);
    let field32 = |off| u32_at(zip, eocd + off).unwrap_or(0);
    let (disk, cd_disk, on_disk, count) = (field16(4), field16(6), field16(8), field16(10));
    let (cd_size, cd_offset) = (field32(12), field32(16));
    if count == usize::from(u16::MAX) || cd_size == u32::MAX || cd_offset == u32::MAX {
        return Err(not_zip(
            "ZIP64 archives are not accepted for a certificate bundle",
        ));
    }
    if disk != 0 || cd_disk != 0 || on_disk != count {
        return Err(not_zip("multi-disk archives are not accepted"));
    }
    if count > limits.max_entries {
        return Err(BundleError::TooManyEntries {
            count,
            limit: limits.max_entries,
        });
    }
    let cd_start = cd_offset as usize;
    let cd_end = cd_start
        .checked_add(cd_size as usize)
        .filter(|&end| end <= eocd)
        .ok_or_else(|| not_zip("central directory lies outside the archive (truncated?)"))?;
    let cd = &zip[cd_start..cd_end];

    let mut entries = Vec::with_capacity(count);
    let mut seen = HashSet::with_capacity(count);
    let mut at = 0usize;
    for index in 0..count {
        let truncated = || not_zip(&format!("central directory record {index} is truncated"));
        if u32_at(cd, at) != Some(CDH_SIG) {
            return Err(truncated());
        }
        let made_by = u16_at(cd, at + 4).ok_or_else(truncated)?;
        let flags = u16_at(cd, at + 8).ok_or_else(truncated)?;
        let name_len = usize::from(u16_at(cd, at + 28).ok_or_else(truncated)?);
        let extra_len = usize::from(u16_at(cd, at + 30).ok_or_else(truncated)?);
        let comment_len = usize::from(u16_at(cd, at + 32).ok_or_else(truncated)?);
        let external = u32_at(cd, at + 38).ok_or_else(truncated)?;
        let name_raw = cd
            .get(at + CDH_LEN..at + CDH_LEN + name_len)
            .ok_or_else(truncated)?;
        at += CDH_LEN + name_len + extra_len + comment_len;

        let entry_err = |problem| BundleError::Entry {
            name: quote_max(&String::from_utf8_lossy(name_raw), NAME_CHARS),
            problem,
        };
        let name = check_name(name_raw, limits).map_err(entry_err)?;
        let is_dir = name.ends_with('/');
        // Host systems 3 (Unix) and 19 (OS X) keep the Unix mode in the high 16 bits.
        if matches!(made_by >> 8, 3 | 19) {
            let mode = external >> 16;
            match mode & 0o170_000 {
                0 | 0o100_000 => {}
                0o040_000 if is_dir => {}
                0o120_000 => return Err(entry_err(EntryProblem::Symlink)),
                _ => return Err(entry_err(EntryProblem::SpecialFile { mode })),
            }
        }
        if flags & 1 != 0 {
            return Err(entry_err(EntryProblem::Encrypted));
        }
        // Names that differ only in case are duplicates too: on a case-insensitive file
        // system, or to a reader, they are the same file.
        if !seen.insert(name.to_ascii_lowercase()) {
            return Err(entry_err(EntryProblem::Duplicate));
        }
        entries.push(CdEntry { name, is_dir });
    }
    Ok(entries)
}

/// A safe relative name: UTF-8, no NUL / control characters / backslash, not absolute, no
/// `..`, `.` or empty components (a trailing `/` marks a directory).
fn check_name(raw: &[u8], limits: &Limits) -> Result<String, EntryProblem> {
    if raw.is_empty() {
        return Err(EntryProblem::EmptyName);
    }
    if raw.len() > limits.max_name_bytes {
        return Err(EntryProblem::NameTooLong {
            limit: limits.max_name_bytes,
        });
    }
    if raw.contains(&0) {
        return Err(EntryProblem::Nul);
    }
    let name = std::str::from_utf8(raw).map_err(|_| EntryProblem::NotUtf8)?;
    if name.chars().any(char::is_control) {
        return Err(EntryProblem::ControlCharacter);
    }
    if name.contains('\\') {
        return Err(EntryProblem::Backslash);
    }
    let bytes = name.as_bytes();
    if name.starts_with('/')
        || (bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic())
    {
        return Err(EntryProblem::Absolute);
    }
    let body = name.strip_suffix('/').unwrap_or(name);
    for component in body.split('/') {
        match component {
            ".." => return Err(EntryProblem::ParentDir),
            "." => return Err(EntryProblem::DotComponent),
            "" => return Err(EntryProblem::EmptyComponent),
            _ => {}
        }
    }
    Ok(name.to_owned())
}

/// How many characters of a name from the archive an error message quotes.
pub(super) const NAME_CHARS: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rules() {
        let l = Limits::default();
        for ok in [
            "README.txt",
            "nginx/fullchain.crt",
            "pem/*.example.com.pem",
            "nginx/",
            "a..b/c",
        ] {
            assert!(check_name(ok.as_bytes(), &l).is_ok(), "{ok}");
        }
        for (bad, problem) in [
            ("", EntryProblem::EmptyName),
            ("../evil.crt", EntryProblem::ParentDir),
            ("nginx/../../evil", EntryProblem::ParentDir),
            ("nginx/..", EntryProblem::ParentDir),
            ("/etc/evil.crt", EntryProblem::Absolute),
            ("C:/evil.crt", EntryProblem::Absolute),
            ("nginx\\fullchain.crt", EntryProblem::Backslash),
            ("nginx/full\0chain.crt", EntryProblem::Nul),
            ("nginx/\nx", EntryProblem::ControlCharacter),
            ("./nginx/fullchain.crt", EntryProblem::DotComponent),
            ("nginx//fullchain.crt", EntryProblem::EmptyComponent),
        ] {
            assert_eq!(check_name(bad.as_bytes(), &l), Err(problem), "{bad:?}");
        }
        assert_eq!(check_name(b"\xff\xfe", &l), Err(EntryProblem::NotUtf8));
        assert_eq!(
            check_name(&[b'a'; 300], &l),
            Err(EntryProblem::NameTooLong { limit: 255 })
        );
    }

    #[test]
    fn garbage_is_not_a_zip() {
        for data in [&b""[..], b"PK", b"hello world", &[0u8; 100]] {
            assert!(matches!(Archive::unpack(data), Err(BundleError::NotZip(_))));
        }
    }
}
