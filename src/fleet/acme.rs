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
use super::key::FleetKeys;
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
    check_account_value(
        &link.key,
        &link.fleet.key(&rel),
        &ca.name,
        &ca.directory,
        value,
    )
}

/// [`open_account`] with the keys, the full etcd key (for the words), the CA's name and
/// directory given: the account file's bytes, or why not.
pub(super) fn check_account_value(
    keys: &FleetKeys,
    full: &str,
    ca: &str,
    directory: &str,
    value: &[u8],
) -> Result<Vec<u8>> {
    let rel = acme_account_key(ca);
    let refused = |purpose: &str, why: String| {
        anyhow!(
            "the fleet's {purpose} {full} {why}; refused (a value written without the fleet \
             key, moved from another key, or altered)"
        )
    };
    let place = Place::new(Purpose::AcmeAccount, &rel, ca);
    let (version, plain, _) =
        envelope::open_raw(keys, &place, value).map_err(|why| refused("ACME account", why))?;
    let doc: AcmeAccountDoc = serde_json::from_slice(&plain).map_err(|e| {
        anyhow!("the fleet's ACME account {full} opens but is not a valid document: {e}")
    })?;
    let key_place = Place::new(Purpose::AcmeAccountKey, &rel, ca);
    let sealed = unb64("ACME account", &doc.credentials)?;
    let (at, bytes, _) = envelope::open_raw(keys, &key_place, &sealed)
        .map_err(|why| refused("ACME account's credentials in", why))?;
    if at != version {
        bail!(
            "the credentials in the fleet's ACME account {full} are of version {at}, not \
             {version}; refused"
        );
    }
    let url = issuer::check_account_bytes(&bytes, directory)
        .map_err(|why| anyhow!("the fleet's ACME account {full}: {why}; refused"))?;
    if url != doc.account_url || doc.directory != directory {
        bail!(
            "the fleet's ACME account {full} names another account or directory than its \
             sealed credentials; refused"
        );
    }
    Ok(bytes)
}

/// Says, under `hosts/HOST/dcv/NAME`, that this host serves `entry` (the fleet's ACME
/// validation files of certificate `name`).
pub(super) async fn confirm_served(link: &FleetLink, name: &str, entry: &DcvEntry) {
    let at = link.clock.now();
    let doc: Vec<DcvServed> = entry
        .files()
        .map(|(file_name, content)| DcvServed {
            file_name: file_name.to_owned(),
            content_sha256: content_sha256(content),
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

/// Whether `entry` holds ACME `http-01` files (tokens under `/.well-known/acme-challenge/`).
pub(super) fn is_acme(entry: &DcvEntry) -> bool {
    is_acme_file(&entry.file_name, &entry.content)
}

fn is_acme_file(name: &str, content: &str) -> bool {
    ValidationFile::from_parts(name, content)
        .is_ok_and(|f| f.url_path().starts_with("/.well-known/acme-challenge/"))
}

/// Checks the fleet's validation files `entry`: ACME `http-01` files every one (their shapes
/// checked: no path characters), or a single file of another kind (`Ok(false)`).
pub(super) fn check_files(entry: &DcvEntry) -> Result<bool> {
    if !is_acme(entry) {
        if !entry.more.is_empty() {
            bail!("holds more than one file, and not ACME http-01 files");
        }
        return Ok(false);
    }
    for (name, content) in entry.files() {
        if !is_acme_file(name, content) {
            bail!(
                "holds a file that is not an ACME http-01 token and key authorization ({})",
                crate::values::text::quote(name)
            );
        }
    }
    Ok(true)
}

/// The fleet's account with an ACME CA, as `cert-agent acme account` shows it.
#[derive(Debug, Clone)]
pub(crate) struct FleetAccount {
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
pub(crate) async fn fleet_account(
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

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "https://acme.test/dir";

    #[test]
    fn the_fleets_account_value_opens_only_as_the_fleets_account_of_its_ca() {
        let seeds: [&[u8]; 3] = [
            include_bytes!("../../fuzz/corpus/fleet_acme_account/seed-account-file"),
            include_bytes!("../../fuzz/corpus/fleet_acme_account/seed-garbage-envelope"),
            include_bytes!("../../fuzz/corpus/fleet_acme_account/seed-other-directory"),
        ];
        // Sealed well, garbage, moved to another CA: what the fuzz target asserts.
        for seed in seeds {
            super::super::fuzzing::acme_account(seed);
        }
        assert_eq!(
            issuer::check_account_bytes(seeds[0], DIR).as_deref(),
            Ok("https://acme.test/acct/1")
        );
        let other = issuer::check_account_bytes(seeds[2], DIR).unwrap_err();
        assert!(other.contains("not with the configured"), "{other}");
    }

    #[test]
    fn the_fleets_acme_files_are_tokens_and_key_authorizations_every_one() {
        use crate::fleet::schema::DcvFile;
        let thumb = "A".repeat(43);
        let token = |c: char| c.to_string().repeat(43);
        let file = |t: &str| DcvFile {
            file_name: t.to_owned(),
            content: format!("{t}.{thumb}"),
        };
        let good = DcvEntry {
            file_name: token('a'),
            content: format!("{}.{thumb}", token('a')),
            more: vec![file(&token('b'))],
        };
        assert!(check_files(&good).unwrap());
        assert_eq!(good.files().count(), 2);
        // A second file with path characters, or not a key authorization: refused whole.
        for bad in [
            file("../../etc/passwd"),
            file("a/b"),
            DcvFile {
                file_name: token('c'),
                content: "<html>".into(),
            },
        ] {
            let entry = DcvEntry {
                more: vec![bad.clone()],
                ..good.clone()
            };
            assert!(check_files(&entry).is_err(), "{bad:?}");
        }
        // A Partner file is alone.
        let partner = DcvEntry {
            file_name: format!("{}.txt", "A".repeat(32)),
            content: format!("{}\nsectigo.com", "B".repeat(64)),
            more: vec![file(&token('b'))],
        };
        assert!(check_files(&partner).is_err());
        // A value written by an earlier version (no `more`) reads as one file.
        let old: DcvEntry = serde_json::from_str(r#"{"file_name":"X.txt","content":"Y"}"#).unwrap();
        assert!(old.more.is_empty());
    }

    #[test]
    fn the_new_keys_are_the_fleets() {
        use crate::fleet::schema::Kind;
        assert!(matches!(
            Kind::of("acme/le/account"),
            Some(Kind::AcmeAccount("le"))
        ));
        assert!(matches!(
            Kind::of("hosts/web1/dcv/www"),
            Some(Kind::DcvServed("www"))
        ));
        assert!(Kind::of("acme/le/other").is_none());
    }

    #[test]
    fn garbage_at_the_accounts_key_is_refused_naming_the_key() {
        let Some(key) = super::super::key::FleetKey::from_bytes(&[7; 32]) else {
            panic!("a key");
        };
        let keys = FleetKeys::new(key, None);
        let full = "/fleet/acme/le/account";
        for value in [&b""[..], b"\x01garbage", &[0u8; 64]] {
            let e = check_account_value(&keys, full, "le", DIR, value).unwrap_err();
            let text = format!("{e:#}");
            assert!(text.contains(full) && text.contains("refused"), "{text}");
        }
    }
}
