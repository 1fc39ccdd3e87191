//! The leader's side of the fleet: take the lead, import the shared records, run the engine
//! as the only host that talks to the Partner API (every record change that precedes a billed
//! call shared first, fenced by the lead), publish validation files and the new certificate,
//! hand over what this host installed before it joined, give the lead up.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::future::LocalBoxFuture;
use time::OffsetDateTime;

use super::link::now;
use crate::config::{CertificateConfig, Config};
use crate::crypto::{self, PrivateKey};
use crate::dcv::ValidationFile;
use crate::engine::{self, Installable, Lead, Outcome, RunOptions, RunReport, deploy, keys};
use crate::store::{CertRecord, Store};

use super::coord::{Expect, Leadership, Written};
use super::follower::{report_host, sync};
use super::link::{FleetLink, check_specs, connect};
use super::schema::{
    Current, DcvEntry, HostResult, SharedState, b64, current_key, dcv_key, parse, pending_version,
    shared_view, state_key, unb64,
};

/// The leader's side of a run: its lead and the fleet.
pub(super) struct FleetRun<'a> {
    link: &'a FleetLink,
    lead: &'a Leadership,
    config: &'a Config,
    client: std::cell::OnceCell<crate::api::Client>,
}

impl FleetRun<'_> {
    /// A Partner API client for the leader's own calls outside the engine.
    fn client(&self) -> Result<&crate::api::Client> {
        if let Some(c) = self.client.get() {
            return Ok(c);
        }
        let c = engine::client(self.config)?;
        Ok(self.client.get_or_init(|| c))
    }

    /// Shares `rec` (and its pending key, sealed) with the fleet, fenced by the lead: called
    /// before every billed or state-changing call to the Partner API, which is not made when
    /// this fails.
    pub(super) async fn share(&self, cert: &CertificateConfig, rec: &CertRecord) -> Result<()> {
        let pending_key = match &rec.pending_key {
            Some(p) if p.key_file.is_file() => {
                let key = keys::load_pending(p)?;
                let sealed = self.link.key.seal(
                    &cert.name,
                    pending_version(p),
                    key.secret_pem().as_bytes(),
                )?;
                Some(b64(&sealed))
            }
            _ => None,
        };
        let doc = SharedState {
            record: shared_view(rec),
            pending_key,
            written_by: self.link.fleet.host().to_owned(),
            written_at: now(),
        };
        self.lead
            .put(
                &state_key(&cert.name),
                serde_json::to_vec(&doc)?,
                Expect::Any,
            )
            .await
            .with_context(|| {
                format!(
                    "could not share the state of certificate '{}' with the fleet",
                    cert.name
                )
            })?;
        Ok(())
    }

    /// Publishes the validation file for every host.
    pub(super) async fn publish_dcv(
        &self,
        cert: &CertificateConfig,
        file: &ValidationFile,
    ) -> Result<()> {
        let entry = DcvEntry {
            file_name: file.name().to_owned(),
            content: file.content().to_owned(),
        };
        self.lead
            .put(
                &dcv_key(&cert.name),
                serde_json::to_vec(&entry)?,
                Expect::Any,
            )
            .await?;
        Ok(())
    }

    /// Withdraws the validation file from every host.
    pub(super) async fn remove_dcv(&self, cert: &CertificateConfig) {
        if let Err(e) = self.lead.delete(&dcv_key(&cert.name), Expect::Any).await {
            tracing::warn!(certificate = %cert.name, "could not withdraw the fleet's validation file: {e}");
        }
    }
}

impl Lead for FleetRun<'_> {
    fn share<'a>(
        &'a self,
        cert: &'a CertificateConfig,
        rec: &'a CertRecord,
    ) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(FleetRun::share(self, cert, rec))
    }

    fn publish_dcv<'a>(
        &'a self,
        cert: &'a CertificateConfig,
        file: &'a ValidationFile,
    ) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(FleetRun::publish_dcv(self, cert, file))
    }

    fn remove_dcv<'a>(&'a self, cert: &'a CertificateConfig) -> LocalBoxFuture<'a, ()> {
        Box::pin(FleetRun::remove_dcv(self, cert))
    }
}

impl FleetRun<'_> {
    /// Publishes an installed certificate as the fleet's current one.
    async fn publish_current(&self, cert: &CertificateConfig, r: &Installable) -> Result<()> {
        let rel = current_key(&cert.name);
        let (version, expect) = match self.link.fleet.get(&rel).await? {
            Some((bytes, rev)) => {
                let before: Current = parse(&self.link.fleet, &rel, &bytes)?;
                if crypto::same_serial_hex(&before.serial, &r.serial) {
                    return Ok(());
                }
                (before.version + 1, Expect::Revision(rev))
            }
            None => (1, Expect::Absent),
        };
        let sealed = self.link.key.seal(&cert.name, version, &r.key_pem)?;
        let doc = Current {
            version,
            certificate_id: r.certificate_id,
            serial: r.serial.clone(),
            not_before: r.not_before,
            not_after: r.not_after,
            published_by: self.link.fleet.host().to_owned(),
            published_at: now(),
            archive: b64(&r.archive),
            key: b64(&sealed),
        };
        match self
            .lead
            .put(&rel, serde_json::to_vec(&doc)?, expect)
            .await?
        {
            Written::Done(_) => {
                tracing::info!(certificate = %cert.name, version, serial = %doc.serial, "published to the fleet");
                let result = HostResult {
                    serial: Some(doc.serial.clone()),
                    version,
                    at: now(),
                    since: Some(now()),
                    error: None,
                };
                report_host(self.link, self.link.fleet.host(), &cert.name, &result).await;
                Ok(())
            }
            Written::Conflict(_) => bail!(
                "the fleet's current certificate of '{}' changed while this host published; \
                 the next run publishes again",
                cert.name
            ),
        }
    }
}

/// Before the leader's engine runs: the shared record of each certificate replaces what this
/// host's state directory holds of it (the installed files and published validation files
/// stay this host's); a pending key that is not here yet is opened and written to the key
/// directory. Returns the record as the fleet holds it (`None`: the fleet has none yet).
pub(super) async fn import(
    link: &FleetLink,
    store: &Store,
    cert: &CertificateConfig,
) -> Result<Option<CertRecord>> {
    let rel = state_key(&cert.name);
    let Some((bytes, _)) = link.fleet.get(&rel).await? else {
        return Ok(None);
    };
    let shared: SharedState = parse(&link.fleet, &rel, &bytes)?;
    let local = store.load(&cert.name)?;
    if shared_view(&local) == shared.record {
        return Ok(Some(shared.record));
    }
    let mut next = shared.record.clone();
    next.installed.clone_from(&local.installed);
    next.dcv = local.dcv.clone();
    if let Some(sp) = &mut next.pending_key {
        match &local.pending_key {
            Some(lp) if lp.csr_sha256 == sp.csr_sha256 && lp.key_file.is_file() => {
                sp.key_file.clone_from(&lp.key_file);
            }
            _ => {
                let sealed = shared.pending_key.as_deref().ok_or_else(|| {
                    anyhow!(
                        "the fleet's record of '{}' has a pending key but not the key itself",
                        cert.name
                    )
                })?;
                let pem = link.key.open(
                    &cert.name,
                    pending_version(sp),
                    &unb64("pending key", sealed)?,
                )?;
                let key = PrivateKey::from_pem(&pem, "the fleet's record")?;
                let dir = store.key_dir(&cert.name)?;
                let file = dir.join(format!(
                    "{}-{}.key",
                    sp.created_at.unix_timestamp(),
                    sp.csr_sha256.get(..16).unwrap_or("fleet")
                ));
                crypto::write_key_file(&file, &key, None)?;
                sp.key_file = file;
            }
        }
    }
    store.save(&next)?;
    store.journal(
        &cert.name,
        "fleet-imported",
        serde_json::json!({ "written_by": shared.written_by }),
    )?;
    Ok(Some(shared.record))
}

/// After the leader's engine ran: every record that changed since `imported` (the records as
/// the fleet held them) shared, every certificate it installed published, and what this host
/// has installed but the fleet lacks handed over (`fleet_has`: the fleet's certificates as
/// the run's synchronisation read them).
pub(super) async fn export(
    fr: &FleetRun<'_>,
    store: &Store,
    certs: &[&CertificateConfig],
    imported: &BTreeMap<String, Option<CertRecord>>,
    fleet_has: &BTreeMap<String, (String, OffsetDateTime)>,
    installed: &[(String, Installable)],
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    let mut records = BTreeMap::new();
    for cert in certs {
        let rec = match store.load(&cert.name) {
            Ok(rec) => rec,
            Err(e) => {
                errors.push((cert.name.clone(), format!("{e:#}")));
                continue;
            }
        };
        let unchanged = imported
            .get(&cert.name)
            .and_then(Option::as_ref)
            .is_some_and(|r| *r == shared_view(&rec));
        if !unchanged && let Err(e) = fr.share(cert, &rec).await {
            errors.push((cert.name.clone(), format!("{e:#}")));
        }
        records.insert(cert.name.clone(), rec);
    }
    for (name, r) in installed {
        let Some(cert) = certs.iter().find(|c| &c.name == name) else {
            continue;
        };
        if let Err(e) = fr.publish_current(cert, r).await {
            errors.push((name.clone(), format!("{e:#}")));
        }
    }
    // A certificate installed on this host before it joined the fleet (or adopted here, or
    // installed while it led and not published) that the fleet lacks: handed over, without a
    // new order.
    for cert in certs {
        if installed.iter().any(|(n, _)| *n == cert.name) {
            continue;
        }
        let Some(inst) = records.get(&cert.name).and_then(|r| r.installed.as_ref()) else {
            continue;
        };
        let lacking = match fleet_has.get(&cert.name) {
            None => true,
            Some((serial, not_before)) => {
                !crypto::same_serial_hex(serial, &inst.serial) && inst.not_before > *not_before
            }
        };
        if lacking && let Err(e) = hand_over_installed(fr, cert, inst).await {
            errors.push((cert.name.clone(), format!("{e:#}")));
        }
    }
    errors
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
    let bundle = deploy::check_archive(cert, &download.bytes, &key, now()).with_context(|| {
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
    };
    fr.publish_current(cert, &item).await?;
    tracing::info!(certificate = %cert.name, serial = %item.serial, "the installed certificate was handed to the fleet");
    Ok(())
}

/// A run on a fleet host: installs what the fleet has, then — when this host can take the
/// lead — imports the shared records, runs the engine as the leader, shares and publishes
/// what changed, and gives the lead up. Without etcd (or its quorum) nothing is ordered and
/// the run fails; what is installed stays.
pub async fn run(
    config: &Config,
    opts: &RunOptions,
    store: &Store,
    certs: &[&CertificateConfig],
) -> Result<(RunReport, Vec<crate::api::RequestCount>)> {
    let link = connect(config)
        .await?
        .ok_or_else(|| anyhow!("no [fleet] in {}", config.path.display()))?;
    let refused = check_specs(&link, config).await?;
    let synced = sync(&link, config, store, &refused).await?;
    let fleet_has = synced.fleet_has;
    let mut report = RunReport::not_started(certs);
    let set = |report: &mut RunReport, name: &str, outcome: Outcome| {
        if let Some(c) = report.certificates.iter_mut().find(|c| c.name == name) {
            c.outcome = outcome;
        }
    };
    for s in synced.synced {
        set(&mut report, &s.name, s.outcome);
    }
    let Some(lead) = link.fleet.try_lead_exclusive().await? else {
        let leader = link
            .fleet
            .leader()
            .await?
            .unwrap_or_else(|| "another host".into());
        for c in &mut report.certificates {
            if matches!(c.outcome, Outcome::Pending { .. }) {
                c.outcome = Outcome::Unchanged {
                    reason: format!(
                        "{leader} leads the fleet and renews it; this host installs what it \
                         publishes"
                    ),
                };
            }
        }
        return Ok((report, Vec::new()));
    };
    tracing::info!(host = %link.fleet.host(), "leading the fleet for this run");
    let mut eligible = Vec::new();
    let mut imported = BTreeMap::new();
    for cert in certs {
        if refused.contains_key(&cert.name) {
            continue;
        }
        match import(&link, store, cert).await {
            Ok(view) => {
                imported.insert(cert.name.clone(), view);
                eligible.push(*cert);
            }
            Err(e) => set(
                &mut report,
                &cert.name,
                Outcome::Failed {
                    error: format!("{e:#}"),
                },
            ),
        }
    }
    let fr = FleetRun {
        link: &link,
        lead: &lead,
        config,
        client: std::cell::OnceCell::new(),
    };
    let done = engine::run(config, store, opts, &eligible, Some(&fr)).await;
    for c in done.report.certificates {
        // What this host's install of the fleet's certificate did (installed, or failed and
        // rolled back) stays the outcome when the leader's work changed nothing.
        let keep_sync = matches!(c.outcome, Outcome::Unchanged { .. })
            && report.certificates.iter().any(|r| {
                r.name == c.name
                    && matches!(
                        r.outcome,
                        Outcome::Installed { .. } | Outcome::Failed { .. }
                    )
            });
        if let Some(r) = report.certificates.iter_mut().find(|r| r.name == c.name) {
            if !keep_sync {
                r.outcome = c.outcome;
            }
            r.warning = c.warning;
        }
    }
    for (name, error) in export(
        &fr,
        store,
        &eligible,
        &imported,
        &fleet_has,
        &done.installed,
    )
    .await
    {
        tracing::warn!(certificate = %name, "{error}");
        set(&mut report, &name, Outcome::Failed { error });
    }
    lead.resign().await;
    Ok((report, done.requests))
}
