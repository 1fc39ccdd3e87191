//! Taking a certbot lineage over without a new order: its `live/NAME/` links become regular
//! files holding the same bytes (cert-agent installs never write through a link, and certbot
//! itself then refuses to renew the lineage: two renewers must not run), and its record is
//! written as installed with an ACME part, so that the first `renew` only renews it when due.
//! A reusable account is written where `issuer::acme::account` reads it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use time::OffsetDateTime;

use super::lineage::{Files, Lineage, read_file};
use crate::crypto::{CertificateInfo, PrivateKey};
use crate::store::{AcmeBook, FileStamp, Installed, Store};

/// The largest file copied over its link.
const MAX_COPY_BYTES: u64 = 256 * 1024;

/// Refuses a lineage whose record shows cert-agent already manages a certificate of that name.
pub(crate) fn check_free(store: &Store, name: &str) -> Result<()> {
    let rec = store.load(name)?;
    if rec.installed.is_some() || rec.acme.is_some() || rec.certificate_id().is_some() {
        bail!(
            "'{name}' already has a record in {} (cert-agent manages a certificate of that \
             name); it is not taken over",
            store.records_dir().display()
        );
    }
    Ok(())
}

/// Takes `lineage` over for the ACME CA `ca`: the live files as regular files (checked again:
/// still the certificate and key that were read), then the record. The caller holds the run
/// lock.
pub(crate) fn take_over(
    store: &Store,
    lineage: &Lineage,
    ca: &str,
    now: OffsetDateTime,
) -> Result<()> {
    check_free(store, &lineage.name)?;
    let contents = read_again(lineage)?;
    for ((live, _), (data, mode)) in lineage.live.each().iter().zip(&contents) {
        let is_link = std::fs::symlink_metadata(live).is_ok_and(|m| m.file_type().is_symlink());
        if is_link {
            crate::fsutil::write_atomic(live, data, *mode)
                .with_context(|| format!("could not replace the link {}", live.display()))?;
        }
    }
    let live = &lineage.live;
    let leaf_file = live.fullchain.clone();
    let mut rec = store.load(&lineage.name)?;
    rec.installed = Some(Installed {
        serial: lineage.leaf.serial_hex.clone(),
        not_before: lineage.leaf.not_before,
        not_after: lineage.leaf.not_after,
        certificate_id: 0,
        files: live.each().iter().map(|(p, _)| p.to_path_buf()).collect(),
        installed_at: now,
        leaf_stamp: FileStamp::of(&leaf_file),
        leaf_file: Some(leaf_file),
    });
    rec.acme = Some(Box::new(AcmeBook {
        ca: ca.to_owned(),
        ..AcmeBook::default()
    }));
    store.save(&rec)?;
    store.journal(
        &lineage.name,
        "imported",
        serde_json::json!({
            "from": "certbot",
            "renewal_conf": lineage.conf_file,
            "ca": ca,
            "serial": lineage.leaf.serial_hex,
        }),
    )?;
    Ok(())
}

/// The four files' bytes and modes, read again through the links: refused unless they still
/// hold the certificate that was read and its key.
fn read_again(lineage: &Lineage) -> Result<Vec<(Vec<u8>, u32)>> {
    let t: &Files = &lineage.targets;
    let mut out = Vec::new();
    for (live, what) in lineage.live.each() {
        let target = std::fs::canonicalize(live)
            .with_context(|| format!("could not follow {}", live.display()))?;
        let expected = t
            .each()
            .iter()
            .find(|(_, w)| *w == what)
            .map(|(p, _)| p.to_path_buf());
        if expected.as_deref() != Some(target.as_path()) {
            bail!(
                "{} changed while it was read; run the import again",
                live.display()
            );
        }
        let data = read_file(&target, MAX_COPY_BYTES)
            .map_err(|m| anyhow::anyhow!("{}: {m}", target.display()))?;
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&target)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0o600);
        // The key is never made more readable than certbot had it, nor readable by others.
        let mode = if what == "privkey" {
            mode & 0o640
        } else {
            mode
        };
        out.push((data, mode));
    }
    let leaf = CertificateInfo::from_pem(&out[0].0).ok();
    let key = PrivateKey::from_pem(&out[3].0, &t.privkey.display().to_string()).ok();
    match (leaf, key) {
        (Some(leaf), Some(key)) if leaf.der == lineage.leaf.der && leaf.matches_key(&key) => {
            Ok(out)
        }
        _ => bail!(
            "{} changed while it was read; run the import again",
            lineage
                .live
                .cert
                .parent()
                .unwrap_or(Path::new("/"))
                .display()
        ),
    }
}

/// Writes certbot's account (reused: an EC P-256 key) for the ACME CA `ca` under the state
/// directory, unless that CA already has an account there. Returns the file when written.
pub(crate) fn write_account(
    store: &Store,
    ca: &str,
    directory: &str,
    url: &str,
    key_pkcs8: &[u8],
) -> Result<Option<PathBuf>> {
    let dir = crate::issuer::acme::account_dir(store.dir(), ca);
    let file = dir.join(crate::issuer::acme::ACCOUNT_FILE);
    if file.exists() {
        return Ok(None);
    }
    crate::issuer::acme::write_account(&dir, directory, url, key_pkcs8)?;
    Ok(Some(file))
}
