//! Pending keys: the private key and CSR of a certificate that is ordered or reissued but not
//! installed yet. The key is written (0600) into `state_dir/keys/NAME/` before the CSR leaves
//! the host, and stays there until its certificate is installed.

use std::path::Path;

use anyhow::{Context, Result};
use time::OffsetDateTime;

use crate::config::CertificateConfig;
use crate::crypto::{self, Csr, KeyType, PrivateKey};
use crate::store::{CertRecord, PendingKey, Store};

/// The key type the configuration asks for.
pub(crate) fn key_type(cert: &CertificateConfig) -> KeyType {
    cert.order.key_type
}

/// Loads the pending key of `record`.
pub(crate) fn load_pending(pending: &PendingKey) -> Result<PrivateKey> {
    crypto::read_key_file(&pending.key_file).with_context(|| {
        format!(
            "could not load the pending private key {}",
            pending.key_file.display()
        )
    })
}

/// The pending key and CSR of `record`, generated and saved first when there is none (or when
/// the stored one no longer matches the configured names and nothing was ordered with it).
pub(crate) fn ensure_pending_key(
    store: &Store,
    cert: &CertificateConfig,
    record: &mut CertRecord,
    now: OffsetDateTime,
) -> Result<PendingKey> {
    let (pending, generated) = pending_key_unsaved(store, cert, record, now)?;
    if let Some(detail) = generated {
        store.save(record)?;
        crate::failpoint::hit("key-saved");
        store.journal(&cert.name, "key-generated", detail)?;
    }
    Ok(pending)
}

/// [`ensure_pending_key`] without writing the record: a new key's file is written (0600,
/// synced) and `record` names it in memory only. With the detail of its `key-generated`
/// journal event when a key was generated: the caller writes the record and journals the
/// event before the CSR leaves the host (an order's intent is written with them, in one write).
pub(crate) fn pending_key_unsaved(
    store: &Store,
    cert: &CertificateConfig,
    record: &mut CertRecord,
    now: OffsetDateTime,
) -> Result<(PendingKey, Option<serde_json::Value>)> {
    if let Some(p) = &record.pending_key {
        let usable = p.key_file.is_file() && csr_names_match(&p.csr_pem, &cert.domains);
        if usable || !record.partner.is_unordered() {
            return Ok((PendingKey::clone(p), None));
        }
    }
    let key = PrivateKey::generate(key_type(cert))
        .with_context(|| format!("could not generate the key of certificate '{}'", cert.name))?;
    let pending = save_new_key(store, cert, &key, now)?;
    record.pending_key = Some(Box::new(pending.clone()));
    let detail =
        serde_json::json!({ "key_file": pending.key_file, "csr_sha256": pending.csr_sha256 });
    Ok((pending, Some(detail)))
}

/// Writes `key` (0600) into the certificate's key directory and builds its CSR.
pub(crate) fn save_new_key(
    store: &Store,
    cert: &CertificateConfig,
    key: &PrivateKey,
    now: OffsetDateTime,
) -> Result<PendingKey> {
    let csr = Csr::new(key, &cert.domains)
        .with_context(|| format!("could not build the CSR of certificate '{}'", cert.name))?;
    let dir = store.key_dir(&cert.name)?;
    let stamp = now.unix_timestamp();
    let file = dir.join(format!("{stamp}-{}.key", &csr.hashes.sha256[..16]));
    crypto::write_key_file(&file, key, None)?;
    Ok(PendingKey {
        key_file: file,
        csr_pem: csr.pem,
        csr_md5: csr.hashes.md5,
        csr_sha256: csr.hashes.sha256,
        created_at: now,
    })
}

/// True when the CSR lists exactly `domains` (common name first, any order of the rest).
pub(crate) fn csr_names_match(csr_pem: &str, domains: &[String]) -> bool {
    let Ok(info) = crypto::CsrInfo::from_pem(csr_pem.as_bytes()) else {
        return false;
    };
    let mut want: Vec<String> = domains.iter().map(|d| d.to_ascii_lowercase()).collect();
    let mut have: Vec<String> = info
        .dns_names
        .iter()
        .map(|d| d.to_ascii_lowercase())
        .collect();
    want.sort();
    want.dedup();
    have.sort();
    have.dedup();
    want == have
}

/// Removes a pending key file once its certificate is installed elsewhere.
pub(crate) fn discard_key_file(path: &Path) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(
            "could not remove the used pending key {}: {e}",
            path.display()
        );
    }
}
