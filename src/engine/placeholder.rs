//! Self-signed placeholders: a site whose TLS files do not exist yet gets a self-signed
//! certificate and key at its configured paths, so that the web server's configuration test
//! passes and it can start the site before the first real certificate, which replaces it.
//! Written only where none of the certificate's files exist: nothing real is ever replaced.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::config::CertificateConfig;
use crate::crypto::{CertificateInfo, PrivateKey, self_signed_placeholder, write_key_file};
use crate::store::{PlaceholderMark, Store};

use time::OffsetDateTime;

use super::deploy::install_paths;

/// Days a placeholder is valid (the first real certificate replaces it long before).
const PLACEHOLDER_DAYS: i64 = 90;

/// A placeholder that was written.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Placeholder {
    pub name: String,
    pub serial: String,
    pub files: Vec<PathBuf>,
}

/// Whether every install file of `cert` is missing (`Ok(true)`), present (`Ok(false)`), or
/// some are and some are not (an error naming them).
fn all_missing(cert: &CertificateConfig) -> Result<bool> {
    let files: Vec<PathBuf> = install_paths(cert).all().map(Path::to_path_buf).collect();
    let (present, missing): (Vec<&PathBuf>, Vec<&PathBuf>) = files
        .iter()
        .partition(|p| std::fs::symlink_metadata(p).is_ok());
    if missing.is_empty() {
        return Ok(false);
    }
    if present.is_empty() {
        return Ok(true);
    }
    let list = |v: &[&PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    bail!(
        "certificate '{}': {} exist(s) but {} do(es) not; a placeholder is written only where \
         none of the certificate's files exist (nothing was changed)",
        cert.name,
        list(&present),
        list(&missing)
    )
}

/// Writes a placeholder for `cert` when none of its files exist; `None` when they all exist.
/// The caller holds the run lock of `store`.
pub(crate) fn ensure(
    store: &Store,
    cert: &CertificateConfig,
    now: OffsetDateTime,
) -> Result<Option<Placeholder>> {
    if !all_missing(cert)? {
        return Ok(None);
    }
    let key = PrivateKey::generate(cert.order.key_type)?;
    let pem = self_signed_placeholder(&key, &cert.domains, PLACEHOLDER_DAYS)?;
    let serial = CertificateInfo::from_pem(pem.as_bytes())?.serial_hex;
    let paths = install_paths(cert);
    let mut files = Vec::new();
    let write = |path: &Path, data: &[u8], mode: u32| -> Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("could not create {}", dir.display()))?;
        }
        crate::fsutil::write_atomic(path, data, mode)
            .with_context(|| format!("could not write {}", path.display()))
    };
    // The key first: a reader never finds a certificate without its key.
    if let Some(k) = &paths.key {
        if let Some(dir) = k.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("could not create {}", dir.display()))?;
        }
        write_key_file(k, &key, None)?;
        files.push(k.clone());
    }
    if let Some(c) = &paths.combined {
        write(c, format!("{}{pem}", key.secret_pem()).as_bytes(), 0o600)?;
        files.push(c.clone());
    }
    // A self-signed certificate is its own chain.
    for p in [&paths.cert, &paths.chain, &paths.fullchain]
        .into_iter()
        .flatten()
    {
        write(p, pem.as_bytes(), 0o644)?;
        files.push(p.clone());
    }
    let mut rec = store.load(&cert.name)?;
    rec.placeholder = Some(Box::new(PlaceholderMark {
        serial: serial.clone(),
        written_at: now,
    }));
    store.save(&rec)?;
    store.journal(
        &cert.name,
        "placeholder",
        serde_json::json!({ "serial": serial, "files": files }),
    )?;
    Ok(Some(Placeholder {
        name: cert.name.clone(),
        serial,
        files,
    }))
}
