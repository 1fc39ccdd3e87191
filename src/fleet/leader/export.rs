//! After the leader's engine ran: what changed shared, what it installed published, what this
//! host installed before it joined handed over — each certificate's write a request of its
//! own, up to [`PUBLISHING`] under way at once (one connection carries them all), so that a
//! mass reissue reaches the fleet as one short burst and the followers install it with one
//! reload. Every write keeps its fence and every failure stays its certificate's.

use std::collections::{BTreeMap, HashMap, HashSet};

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use time::OffsetDateTime;

use crate::config::CertificateConfig;
use crate::crypto;
use crate::engine::{Installable, deploy};
use crate::fleet::schema::shared_view;
use crate::store::{CertRecord, Records, Store};

use super::FleetRun;

/// How many of a run's writes to the fleet are under way at once.
pub(super) const PUBLISHING: usize = 32;

/// What the export did: the certificates it could not share or publish (with the error), and
/// every record it read (the records after the run, read once).
pub(super) struct Exported {
    pub(super) errors: Vec<(String, String)>,
    pub(super) records: Records,
}

/// What the leader's engine left for the export.
pub(super) struct Ran<'a> {
    /// What it installed.
    pub(super) installed: &'a [(String, Installable)],
    /// The certificates whose records it neither read nor wrote.
    pub(super) untouched: &'a HashSet<String>,
    /// The records as the run's imports left them on disk, but those the engine took.
    pub(super) records: Records,
}

impl Ran<'_> {
    /// The record of `name` as it is on disk now: the import's, when the engine neither read
    /// nor wrote it (nothing else writes a record while the run holds the state directory's
    /// lock), otherwise read.
    fn record(&mut self, store: &Store, name: &str) -> Result<CertRecord> {
        if self.untouched.contains(name)
            && let Some(rec) = self.records.remove(name)
        {
            return Ok(rec);
        }
        Ok(store.load(name)?)
    }
}

/// Every record that changed since `imported` (the records as the fleet held them) shared,
/// every certificate the engine installed published, and what this host has installed but the
/// fleet lacks handed over (`fleet_has`: the fleet's certificates as the run's synchronisation
/// read them); then the versions accepted meanwhile written once.
pub(super) async fn export(
    fr: &FleetRun<'_>,
    store: &Store,
    certs: &[&CertificateConfig],
    imported: &BTreeMap<String, Option<CertRecord>>,
    fleet_has: &BTreeMap<String, (String, OffsetDateTime)>,
    mut ran: Ran<'_>,
) -> Exported {
    let installed = ran.installed;
    let mut errors = Vec::new();
    let mut records = BTreeMap::new();
    let mut changed = Vec::new();
    for cert in certs {
        match ran.record(store, &cert.name) {
            Ok(rec) => {
                let unchanged = imported
                    .get(&cert.name)
                    .and_then(Option::as_ref)
                    .is_some_and(|r| *r == shared_view(&rec));
                if !unchanged {
                    changed.push(*cert);
                }
                records.insert(cert.name.clone(), rec);
            }
            Err(e) => errors.push((cert.name.clone(), format!("{e:#}"))),
        }
    }
    let mut written = Vec::new();
    let shares = futures_util::stream::iter(changed.iter().filter_map(|cert| {
        let rec = records.get(&cert.name)?;
        Some(async move { (*cert, fr.share(cert, rec).await) })
    }))
    .buffer_unordered(PUBLISHING)
    .collect::<Vec<_>>()
    .await;
    note(shares, &mut errors, &mut written);
    let by_name: HashMap<&str, &CertificateConfig> =
        certs.iter().map(|c| (c.name.as_str(), *c)).collect();
    let publishing = installed.iter().filter_map(|(name, r)| {
        let cert = *by_name.get(name.as_str())?;
        Some(async move { (cert, fr.publish_current(cert, r).await) })
    });
    let published = futures_util::stream::iter(publishing)
        .buffer_unordered(PUBLISHING)
        .collect::<Vec<_>>()
        .await;
    note(published, &mut errors, &mut written);
    // A certificate installed on this host before it joined the fleet (or adopted here, or
    // installed while it led and not published) that the fleet lacks: handed over, without a
    // new order.
    let published: HashSet<&str> = installed.iter().map(|(n, _)| n.as_str()).collect();
    let lacking = certs.iter().filter_map(|cert| {
        if published.contains(cert.name.as_str()) {
            return None;
        }
        // A certificate of an ACME CA reaches the fleet through an order the leader places.
        if !cert.order.issuer.is_partner() {
            return None;
        }
        let rec = records.get(&cert.name)?;
        // A reissue or order in flight: the fleet gets its certificate once issued (the
        // order's download may already be the new certificate, not the one installed here).
        if rec.pending_key.is_some()
            || rec.partner.reissue().is_some()
            || rec.partner.intent().is_some()
        {
            return None;
        }
        let inst = rec.installed.as_ref()?;
        let lacking = match fleet_has.get(&cert.name) {
            None => true,
            Some((serial, not_before)) => {
                !crypto::same_serial_hex(serial, &inst.serial) && inst.not_before > *not_before
            }
        };
        lacking.then_some(async move { (*cert, hand_over_installed(fr, cert, inst).await) })
    });
    let handed = futures_util::stream::iter(lacking)
        .buffer_unordered(PUBLISHING)
        .collect::<Vec<_>>()
        .await;
    note(handed, &mut errors, &mut written);
    if let Err(e) = fr.save_versions() {
        // The writes were made; this host's record of them was not: the next run reads
        // them back from the fleet. Said for each certificate they were for.
        let error = format!("{e:#}");
        for name in written {
            errors.push((name, error.clone()));
        }
    }
    Exported { errors, records }
}

/// The results of one kind of write: the failures in `errors`, the certificates written in
/// `written`.
fn note(
    results: Vec<(&CertificateConfig, Result<()>)>,
    errors: &mut Vec<(String, String)>,
    written: &mut Vec<String>,
) {
    for (cert, result) in results {
        match result {
            Ok(()) => written.push(cert.name.clone()),
            Err(e) => errors.push((cert.name.clone(), format!("{e:#}"))),
        }
    }
}

/// Publishes `installed`, this host's certificate of `cert` that the fleet lacks: the bundle
/// is downloaded again (the archive is what the other hosts check) and the installed key is
/// sealed beside it.
pub(super) async fn hand_over_installed(
    fr: &FleetRun<'_>,
    cert: &CertificateConfig,
    installed: &crate::store::Installed,
) -> Result<()> {
    let key = deploy::installed_key(cert)?;
    let client = fr.client()?;
    let download = client
        .download_bundle(installed.certificate_id)
        .await
        .with_context(|| {
            format!(
                "could not download certificate {} to hand it to the fleet",
                installed.certificate_id
            )
        })?;
    let bundle = deploy::check_archive_now(cert, &download.bytes, &key, fr.link.clock.now())
        .with_context(|| {
            format!(
                "the bundle of certificate {} does not match what is installed here; not handed \
             to the fleet",
                installed.certificate_id
            )
        })?;
    if !crypto::same_serial_hex(&bundle.serial_hex, &installed.serial) {
        bail!(
            "certificate {} now downloads as serial {}, not the installed {}; not handed to the \
             fleet",
            installed.certificate_id,
            bundle.serial_hex,
            installed.serial
        );
    }
    let item = Installable {
        certificate_id: installed.certificate_id,
        serial: bundle.serial_hex.clone(),
        not_before: bundle.not_before,
        not_after: bundle.not_after,
        key_pem: key.secret_pem().as_bytes().to_vec(),
        archive: download.bytes.to_vec(),
        chain: None,
    };
    fr.publish_current(cert, &item).await?;
    tracing::info!(certificate = %cert.name, serial = %item.serial, "the installed certificate was handed to the fleet");
    Ok(())
}
