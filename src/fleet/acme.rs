//! ACME in fleet mode: the fleet's one account per ACME CA (`acme/CA/account`, registered by
//! the first leader that needs it, its credentials sealed once more under their own purpose,
//! used by every later leader), and the hosts' word that they serve an ACME validation file
//! (`hosts/HOST/dcv/NAME`), which the leader waits for before it answers the challenge.

use std::path::Path;

use anyhow::{Result, anyhow, bail};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::config::AcmeCa;
use crate::dcv::ValidationFile;
use crate::issuer::acme as issuer;

use super::envelope::{self, Place, Purpose};
use super::link::FleetLink;
use super::schema::{AcmeAccountDoc, DcvEntry, DcvServed, acme_account_key, dcv_served_key, unb64};

/// The version every account value is sealed at: it is written once and never replaced.
pub(super) const ACCOUNT_VERSION: u64 = 1;

/// The content's SHA-256 as the hosts report it (lower-case hex).
pub(super) fn content_sha256(content: &str) -> String {
    hex::encode(Sha256::digest(content.as_bytes()))
}

/// Opens the fleet's account value `value` of the ACME CA `ca` and checks it: the account
/// file's bytes, registered with the configured directory. Every error names the key.
pub(super) fn open_account(link: &FleetLink, ca: &AcmeCa, value: &[u8]) -> Result<Vec<u8>> {
    let rel = acme_account_key(&ca.name);
    let full = link.fleet.key(&rel);
    let place = Place::new(Purpose::AcmeAccount, &rel, &ca.name);
    let (version, doc): (u64, AcmeAccountDoc) =
        envelope::open_json(&link.key, &link.fleet, &place, value)?;
    let key_place = Place::new(Purpose::AcmeAccountKey, &rel, &ca.name);
    let (at, bytes) = envelope::open(
        &link.key,
        &link.fleet,
        &key_place,
        &unb64("ACME account", &doc.credentials)?,
    )?;
    if at != version {
        bail!(
            "the credentials in the fleet's ACME account {full} are of version {at}, not \
             {version}; refused"
        );
    }
    let url = issuer::check_account_bytes(&bytes, &ca.directory)
        .map_err(|why| anyhow!("the fleet's ACME account {full}: {why}; refused"))?;
    if url != doc.account_url || doc.directory != ca.directory {
        bail!(
            "the fleet's ACME account {full} names another account or directory than its \
             sealed credentials; refused"
        );
    }
    Ok(bytes)
}

/// Says, under `hosts/HOST/dcv/NAME`, that this host serves `entries` (the fleet's ACME
/// validation files of certificate `name`).
pub(super) async fn confirm_served(link: &FleetLink, name: &str, entries: &[DcvEntry]) {
    let at = link.clock.now();
    let doc: Vec<DcvServed> = entries
        .iter()
        .map(|e| DcvServed {
            file_name: e.file_name.clone(),
            content_sha256: content_sha256(&e.content),
            at,
        })
        .collect();
    let rel = dcv_served_key(link.fleet.host(), name);
    let place = Place::new(Purpose::DcvServed, &rel, name);
    let version = u64::try_from(at.unix_timestamp()).unwrap_or(0);
    match envelope::seal_json(&link.key, &place, version, &doc) {
        Ok(sealed) => {
            if let Err(e) = link.fleet.put_own(&rel, sealed).await {
                tracing::warn!(certificate = %name, "could not report to the fleet: {e}");
            }
        }
        Err(e) => tracing::warn!(certificate = %name, "{e:#}"),
    }
}

/// Whether `entry` is an ACME `http-01` file (a token under `/.well-known/acme-challenge/`).
pub(super) fn is_acme(entry: &DcvEntry) -> bool {
    ValidationFile::from_parts(&entry.file_name, &entry.content)
        .is_ok_and(|f| f.url_path().starts_with("/.well-known/acme-challenge/"))
}

/// The fleet's account with an ACME CA, as `cert-agent acme account` shows it.
#[derive(Debug, Clone)]
pub struct FleetAccount {
    /// The etcd key it lives at.
    pub key: String,
    pub account_url: String,
    /// The host that registered it, as etcd holds it (escaped for printing).
    pub registered_by: String,
    pub registered_at: OffsetDateTime,
    /// This host's copy of it.
    pub file: std::path::PathBuf,
}

/// The fleet's account with the ACME CA `ca`, opened, checked and written as this host's
/// account file under `state_dir`; `None` when no leader registered one yet.
pub async fn fleet_account(
    link: &FleetLink,
    ca: &AcmeCa,
    state_dir: &Path,
) -> Result<Option<FleetAccount>> {
    let rel = acme_account_key(&ca.name);
    let Some((value, _)) = link.fleet.get(&rel).await? else {
        return Ok(None);
    };
    let bytes = open_account(link, ca, &value)?;
    let place = Place::new(Purpose::AcmeAccount, &rel, &ca.name);
    let (_, doc): (u64, AcmeAccountDoc) =
        envelope::open_json(&link.key, &link.fleet, &place, &value)?;
    let dir = issuer::account_dir(state_dir, &ca.name);
    issuer::write_account_bytes(&dir, &bytes)?;
    Ok(Some(FleetAccount {
        key: link.fleet.key(&rel),
        account_url: doc.account_url,
        registered_by: super::schema::printable_capped(&doc.registered_by, 255),
        registered_at: doc.registered_at,
        file: dir.join(issuer::ACCOUNT_FILE),
    }))
}
