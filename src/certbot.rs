//! `cert-agent import certbot`: certbot's directory (`/etc/letsencrypt`) read as untrusted
//! input — the renewal configurations ([`conf`]), each lineage's `live/` links and `archive/`
//! files ([`lineage`]), the ACME account ([`account`]) — and what taking it over proposes
//! ([`propose`]) and writes ([`takeover`]): the configuration of each certificate, its record
//! as installed (so the first `renew` orders nothing), and the account where it can be
//! reused.

pub(crate) mod account;
pub(crate) mod conf;
pub(crate) mod lineage;
pub(crate) mod propose;
pub(crate) mod takeover;

use std::path::{Path, PathBuf};

pub(crate) use lineage::{Lineage, LineageError};

/// The most renewal configurations read.
const MAX_LINEAGES: usize = 10_000;

/// certbot's directory as read: the lineages that can be taken over and those that cannot.
#[derive(Debug)]
pub(crate) struct Scan {
    /// The directory (canonical).
    pub root: PathBuf,
    pub lineages: Vec<Lineage>,
    pub refused: Vec<LineageError>,
}

/// Reads every `renewal/*.conf` of certbot's directory `from`.
pub(crate) fn scan(from: &Path) -> Result<Scan, String> {
    let root = std::fs::canonicalize(from)
        .map_err(|e| format!("{}: {}", from.display(), crate::fsutil::io_text(&e)))?;
    let renewal = root.join("renewal");
    let entries = std::fs::read_dir(&renewal)
        .map_err(|e| format!("{}: {}", renewal.display(), crate::fsutil::io_text(&e)))?;
    let mut files = Vec::new();
    for entry in entries.take(MAX_LINEAGES) {
        let entry =
            entry.map_err(|e| format!("{}: {}", renewal.display(), crate::fsutil::io_text(&e)))?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "conf") {
            files.push(path);
        }
    }
    files.sort();
    let mut out = Scan {
        root: root.clone(),
        lineages: Vec::new(),
        refused: Vec::new(),
    };
    for file in files {
        // A link in renewal/ could lead anywhere: only regular files are read.
        let regular = std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file());
        let read = if regular {
            lineage::read(&root, &file)
        } else {
            Err(LineageError {
                file: file.clone(),
                line: None,
                message: "not a regular file (a link or something else)".into(),
            })
        };
        match read {
            Ok(l) => out.lineages.push(l),
            Err(e) => out.refused.push(e),
        }
    }
    Ok(out)
}
