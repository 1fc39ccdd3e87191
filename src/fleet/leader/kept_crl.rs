//! The CRL check of a run that does not lead ([`no_lead`](super::no_lead)), at the cost of the
//! CRLs: what the check needs of each installed certificate (its serial, its CRL distribution
//! points, its issuer's certificate) is kept in `state_dir/due-follower.json`
//! ([`FOLLOWER_FILE`], the due summary's layout, [`crate::store::due`]) when the installed
//! files are read, and used while the certificate's record names the same serial and its
//! installed leaf keeps the stamp the record holds. A scheduled no-op run then reads each CRL
//! once and opens no certificate file; a certificate installed since (a new leaf, a new
//! stamp) is read once.
//!
//! The file is a hint, as the due summary is: written by this program version for the same
//! configuration sources; anything else — missing, damaged, foreign, another serial, another
//! leaf, an issuer it does not hold — means the installed files are read.

use time::OffsetDateTime;

use crate::config::Config;
use crate::revocation::{Checker, InstalledCert, Status};
use crate::store::due::{self, Basis, CrlParts, CrlRef, DueSummary, Entry, FOLLOWER_FILE, Issuers};
use crate::store::{FileStamp, Installed, Store};

/// The run options the file is kept under.
const OPTIONS: &str = "fleet-follower-crl";

/// The kept reference of the certificate `name` installed as `inst`, and its issuer (DER),
/// when it still describes what is installed at `now`.
fn kept<'k>(
    kept: &'k DueSummary,
    name: &str,
    inst: &Installed,
    now: OffsetDateTime,
) -> Option<(&'k Entry, &'k CrlRef, &'k [u8])> {
    let entry = kept.get(name)?;
    let crl = entry.crl.as_ref()?;
    let (path, stamp) = entry.leaf.as_ref()?;
    let same_leaf = inst.leaf_file.as_ref() == Some(path)
        && inst.leaf_stamp == Some(*stamp)
        && FileStamp::of(path) == Some(*stamp);
    let standing = now.unix_timestamp() < entry.until
        && crate::crypto::same_serial_hex(&crl.serial, &inst.serial)
        && same_leaf;
    standing.then_some((entry, crl, kept.issuer(&crl.issuer)?))
}

/// The entry to keep for `name`, installed as `inst` and read as `cert`, whose CRL said
/// `status` (not "revoked"); `None` when the record names no leaf file to check.
fn entry_of(
    store: &Store,
    name: &str,
    inst: &Installed,
    cert: &InstalledCert,
    status: &Status,
) -> Option<Entry> {
    Some(Entry {
        name: name.to_owned(),
        until: inst.not_after.unix_timestamp(),
        record: store.record_stamp(name)?,
        leaf: Some((inst.leaf_file.clone()?, inst.leaf_stamp?)),
        reason: String::new(),
        crl: Some(CrlRef {
            serial: hex::encode_upper(&cert.raw_serial),
            issuer: due::issuer_key(&cert.issuer_der),
            urls: cert.crl_urls.clone(),
            state: status.kind().to_owned(),
        }),
    })
}

/// The first of `installed` (name and installed certificate) whose CRL lists it as revoked
/// (the CRLs as the engine reads them: a kept copy within `refresh_secs`, each read once):
/// work for a leader, which replaces it. Each certificate's reference is taken from the file
/// when it still stands, else from its installed files (and kept for the next run).
pub(super) async fn revoked<'n>(
    config: &Config,
    store: &Store,
    installed: impl Iterator<Item = (&'n str, &'n Installed)>,
    now: OffsetDateTime,
) -> Option<String> {
    let checker = Checker::new(store.dir(), &config.revocation);
    let basis = config.source_digest.clone().map(|digest| Basis {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        config: digest,
        options: OPTIONS.to_owned(),
    });
    let before = basis
        .as_ref()
        .map(|b| DueSummary::load_file(store, FOLLOWER_FILE, b))
        .unwrap_or_default();
    let (mut next, mut issuers) = (Vec::new(), Issuers::new());
    let (mut read, mut taken) = (0usize, 0usize);
    let mut found = None;
    for (name, inst) in installed {
        let status = match kept(&before, name, inst, now) {
            Some((entry, crl, der)) => {
                taken += 1;
                let status = checker.status_of_ref(crl, der, now).await;
                checker.count(&status);
                issuers
                    .entry(crl.issuer.clone())
                    .or_insert_with(|| der.to_vec());
                next.push(entry.clone());
                status
            }
            None => {
                read += 1;
                match crate::revocation::read_installed(inst) {
                    Ok(cert) => {
                        let status = checker.status_of(&cert, now).await;
                        if let Some(e) = entry_of(store, name, inst, &cert, &status) {
                            issuers.insert(due::issuer_key(&cert.issuer_der), cert.issuer_der);
                            next.push(e);
                        }
                        status
                    }
                    Err(why) => Status::Unknown { url: None, why },
                }
            }
        };
        if let Status::Revoked { .. } = status {
            found = Some(format!(
                "'{name}': its CRL lists the installed certificate as revoked"
            ));
            break;
        }
    }
    checker.finish();
    tracing::debug!(
        "revocation: {read} installed certificate(s) read, {taken} taken from {FOLLOWER_FILE}"
    );
    if let Some(basis) = basis
        && found.is_none()
        && (read > 0 || next.len() != before.len())
    {
        let crl = CrlParts {
            issuers,
            crls: Vec::new(),
        };
        due::save_to(store, FOLLOWER_FILE, &basis, &next, None, &crl);
    }
    found
}

#[cfg(test)]
mod tests;
