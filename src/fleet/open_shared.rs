//! Opening what the leader shares, with every check that does not depend on etcd: the shared
//! record belongs to this certificate and its pending CSR is the pending key's, with the
//! configured names and its own hashes; the current certificate's key, names and chain are
//! checked on this host, and its serial and dates come from the checked bundle.

use anyhow::{Context, Result, anyhow, bail};

use crate::config::CertificateConfig;
use crate::crypto::{self, CsrHashes, CsrInfo, PrivateKey};
use crate::engine::{Ready, deploy, keys};
use crate::store::{CertRecord, PendingKey};

use super::chains::Intermediates;
use super::envelope::{self, Place, Purpose};
use super::link::FleetLink;
use super::schema::{Current, DcvEntry, SharedState, current_key, state_key, unb64};
use super::versions::{Seen, Versions};

/// The shared record, opened and checked.
pub(super) struct OpenState {
    pub(super) version: u64,
    pub(super) shared: SharedState,
    /// The pending key, opened and checked against the pending CSR.
    pub(super) pending_key: Option<PrivateKey>,
}

impl OpenState {
    /// The hashes of the pending CSR (checked against the CSR itself).
    pub(super) fn hashes(&self) -> Option<CsrHashes> {
        let p = self.shared.record.pending_key.as_ref()?;
        Some(CsrHashes {
            md5: p.csr_md5.to_ascii_uppercase(),
            sha256: p.csr_sha256.to_ascii_uppercase(),
        })
    }
}

/// Opens the shared record `value` of `cert` and checks it; a value not seen before is
/// accepted only at a higher version than the last one accepted.
pub(super) fn open_state(
    link: &FleetLink,
    versions: &mut Versions,
    cert: &CertificateConfig,
    value: &[u8],
) -> Result<OpenState> {
    let rel = state_key(&cert.name);
    let what = link.fleet.key(&rel);
    let place = Place::new(Purpose::State, &rel, &cert.name);
    let (version, shared): (u64, SharedState) =
        envelope::open_json(&link.key, &link.fleet, &place, value)?;
    if shared.record.name != cert.name {
        bail!(
            "the fleet's record {what} names certificate '{}', not '{}'; refused",
            shared.record.name,
            cert.name
        );
    }
    let mut pending_key = None;
    if let Some(p) = &shared.record.pending_key {
        let sealed = shared.pending_key.as_deref().ok_or_else(|| {
            anyhow!("the fleet's record {what} has a pending CSR but not its key; refused")
        })?;
        let place = Place::new(Purpose::PendingKey, &rel, &cert.name);
        let (at, pem) = envelope::open(
            &link.key,
            &link.fleet,
            &place,
            &unb64("pending key", sealed)?,
        )?;
        if at != version {
            bail!("the pending key in {what} is of version {at}, not {version}; refused");
        }
        let key = PrivateKey::from_pem(&pem, "the fleet's record")
            .with_context(|| format!("the pending key in {what}"))?;
        check_pending(&cert.domains, p, &key)
            .with_context(|| format!("the fleet's record {what}"))?;
        pending_key = Some(key);
    }
    if versions.seen_state(&cert.name, value) == Seen::Other {
        versions.accept_state(&cert.name, &what, version, value)?;
    }
    Ok(OpenState {
        version,
        shared,
        pending_key,
    })
}

/// The pending CSR is the pending key's, lists the configured names, and its stored hashes
/// are its own.
pub(super) fn check_pending(domains: &[String], p: &PendingKey, key: &PrivateKey) -> Result<()> {
    let info = CsrInfo::from_pem(p.csr_pem.as_bytes()).context("its pending CSR")?;
    if !crypto::same_public_key(&info.public_key_der, &key.public_key_der()) {
        bail!("its pending CSR is not signed for the pending key (another key's CSR); refused");
    }
    if !info.hashes.md5.eq_ignore_ascii_case(&p.csr_md5)
        || !info.hashes.sha256.eq_ignore_ascii_case(&p.csr_sha256)
    {
        bail!("the CSR hashes it stores are not its pending CSR's; refused");
    }
    if !keys::csr_names_match(&p.csr_pem, domains) {
        bail!("its pending CSR does not list the configured names {domains:?}; refused");
    }
    Ok(())
}

/// An import keeps what this host knows: an order or an order intent is never dropped.
pub(super) fn check_keeps(what: &str, local: &CertRecord, shared: &CertRecord) -> Result<()> {
    if local.partner.order().is_some() && shared.partner.order().is_none() {
        bail!(
            "the fleet's record {what} has no order, but this host knows order {}; refused \
             (an import never drops an order)",
            local
                .certificate_id()
                .map_or_else(|| "?".to_owned(), |id| id.to_string())
        );
    }
    if local.partner.intent().is_some()
        && shared.partner.intent().is_none()
        && shared.partner.order().is_none()
    {
        bail!(
            "the fleet's record {what} has neither an order nor an order intent, but this \
             host recorded an intent to order; refused (an import never drops an intent)"
        );
    }
    Ok(())
}

/// A validation file is the pending CSR's: its name and its first line are the CSR's hashes
/// (the rule one host applies to the API's content).
pub(super) fn check_dcv(hashes: &CsrHashes, entry: &DcvEntry) -> Result<()> {
    crate::dcv::content::check_dcv_file_name(hashes, &entry.file_name)?;
    crate::dcv::content::check_dcv_content(hashes, &entry.content)?;
    Ok(())
}

/// The fleet's current certificate, opened and checked for this host.
pub(super) struct OpenedCurrent {
    pub(super) version: u64,
    pub(super) ready: Ready,
    /// It begins after this host's clock (less than a day ahead): held until then.
    pub(super) not_yet: bool,
    /// It is in the format of a version before `chains/` (a leader rewrites it).
    pub(super) old_format: bool,
}

/// The issuer certificates the current certificate `value` of `cert` names (none when it
/// does not open: [`open_current`] says why).
pub(super) fn named_intermediates(
    link: &FleetLink,
    cert: &CertificateConfig,
    value: &[u8],
) -> Vec<String> {
    let rel = current_key(&cert.name);
    let place = Place::new(Purpose::Current, &rel, &cert.name);
    envelope::open_json::<Current>(&link.key, &link.fleet, &place, value)
        .map(|(_, c)| c.intermediates)
        .unwrap_or_default()
}

/// Opens the current certificate `value` of `cert` and checks it for this host: its version,
/// and what it would install (the key opened, the bundle checked against it, the names and
/// the chain, its issuer certificates from `chains`).
pub(super) fn open_current(
    link: &FleetLink,
    cert: &CertificateConfig,
    value: &[u8],
    chains: &Intermediates,
) -> Result<OpenedCurrent> {
    let rel = current_key(&cert.name);
    let place = Place::new(Purpose::Current, &rel, &cert.name);
    let (version, current): (u64, Current) =
        envelope::open_json(&link.key, &link.fleet, &place, value)?;
    if current.version != version {
        bail!(
            "the fleet's certificate {} says version {}, sealed as {version}; refused",
            link.fleet.key(&rel),
            current.version
        );
    }
    let (ready, not_yet) = prepare(link, cert, (&rel, version), &current, chains)?;
    Ok(OpenedCurrent {
        version,
        ready,
        not_yet,
        old_format: super::chains::is_old(&current),
    })
}

/// Opens and checks the fleet's certificate for this host.
fn prepare(
    link: &FleetLink,
    cert: &CertificateConfig,
    (rel, version): (&str, u64),
    current: &Current,
    chains: &Intermediates,
) -> Result<(Ready, bool)> {
    let place = Place::new(Purpose::CurrentKey, rel, &cert.name);
    let (at, pem) = envelope::open(&link.key, &link.fleet, &place, &unb64("key", &current.key)?)?;
    if at != version {
        bail!(
            "the key in {} is of version {at}, not {version}; refused",
            link.fleet.key(rel)
        );
    }
    let key = PrivateKey::from_pem(&pem, "the fleet's record")
        .with_context(|| format!("the fleet's key of certificate '{}'", cert.name))?;
    let archive = unb64("archive", &current.archive)?;
    let now = link.clock.now();
    let named = !current.intermediates.is_empty();
    let checked = match &current.chain {
        Some(_) if !archive.is_empty() => {
            Err(anyhow!("it holds both an archive and a chain; refused"))
        }
        // The leaf, its issuers stored once for the fleet: checked as the archive or the
        // ACME CA's chain it came from.
        Some(leaf) if named => chains
            .chain(leaf, &current.intermediates)
            .and_then(|chain| match cert.order.issuer.acme() {
                Some(_) => deploy::check_chain(cert, chain.as_bytes(), &key, now),
                None => deploy::check_chain_anchored(cert, chain.as_bytes(), &key, now),
            }),
        // A certificate of an ACME CA as an earlier version shared it: its chain, checked as
        // the leader checked it.
        Some(chain) => deploy::check_chain(cert, chain.as_bytes(), &key, now),
        None if named => Err(anyhow!(
            "it names intermediate certificates but holds no leaf; refused"
        )),
        None => deploy::check_archive(cert, &archive, &key, now),
    }
    .with_context(|| {
        format!(
            "the fleet's certificate of '{}' (version {version}) was rejected on this host; \
             nothing was installed",
            cert.name
        )
    })?;
    let (bundle, not_yet) = match checked {
        deploy::Checked::Valid(b) => (b, false),
        deploy::Checked::NotYet(b) => (b, true),
    };
    let install = deploy::cert_install(cert, &bundle, &key);
    let ready = Ready {
        certificate_id: current.certificate_id,
        bundle,
        install,
        archive,
    };
    Ok((ready, not_yet))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::{Csr, KeyType};
    use crate::store::OrderRef;

    fn pending(key: &PrivateKey, domains: &[String]) -> PendingKey {
        let csr = Csr::new(key, domains).unwrap();
        PendingKey {
            key_file: std::path::PathBuf::new(),
            csr_pem: csr.pem,
            csr_md5: csr.hashes.md5,
            csr_sha256: csr.hashes.sha256,
            created_at: time::OffsetDateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_pending_csr_must_be_the_keys_with_its_own_hashes_and_the_configured_names() {
        let names = vec!["www.example.test".to_owned()];
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let p = pending(&key, &names);
        check_pending(&names, &p, &key).unwrap();
        // The writer's CSR beside the fleet's key.
        let writer = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let swapped = pending(&writer, &names);
        let err = check_pending(&names, &swapped, &key)
            .unwrap_err()
            .to_string();
        assert!(err.contains("another key's CSR"), "{err}");
        let mut hashes = p.clone();
        hashes.csr_md5 = "0".repeat(32);
        let err = check_pending(&names, &hashes, &key)
            .unwrap_err()
            .to_string();
        assert!(err.contains("hashes"), "{err}");
        let other = vec!["evil.example.test".to_owned()];
        let err = check_pending(&other, &p, &key).unwrap_err().to_string();
        assert!(err.contains("configured names"), "{err}");

        // A validation file: only the pending CSR's.
        let h = CsrHashes {
            md5: p.csr_md5.clone(),
            sha256: p.csr_sha256.clone(),
        };
        let good = DcvEntry {
            file_name: format!("{}.txt", h.md5),
            content: format!("{}\nsectigo.com\nabc", h.sha256),
            more: Vec::new(),
        };
        check_dcv(&h, &good).unwrap();
        let forged = DcvEntry {
            file_name: format!("{}.txt", "A".repeat(32)),
            ..good.clone()
        };
        assert!(check_dcv(&h, &forged).is_err());
        let forged = DcvEntry {
            content: format!("{}\nsectigo.com", "B".repeat(64)),
            ..good
        };
        assert!(check_dcv(&h, &forged).is_err());
    }

    #[test]
    fn an_import_never_drops_a_known_order_or_intent() {
        let known = CertRecord {
            name: "www".into(),
            partner: crate::store::PartnerBook {
                stage: crate::store::PartnerStage::Ordered {
                    order: OrderRef {
                        certificate_id: 7,
                        order_id: None,
                        placed_at: time::OffsetDateTime::UNIX_EPOCH,
                        adopted: false,
                    },
                    reissue: None,
                },
                ..Default::default()
            },
            ..CertRecord::default()
        };
        let empty = CertRecord {
            name: "www".into(),
            ..CertRecord::default()
        };
        let err = check_keeps("/p/certs/www/state", &known, &empty)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/p/certs/www/state") && err.contains("order 7"),
            "{err}"
        );
        check_keeps("k", &known, &known).unwrap();
        check_keeps("k", &empty, &known).unwrap();
    }
}
