//! The leader's side of the fleet: take the lead, import the shared records, run the engine
//! as the only host that talks to the Partner API (every record change that precedes a billed
//! call shared first, fenced by the lead), publish validation files and the new certificate,
//! hand over what this host installed before it joined, give the lead up.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::future::LocalBoxFuture;

use crate::config::{CertificateConfig, Config};
use crate::crypto;
use crate::dcv::ValidationFile;
use crate::engine::{self, Installable, Lead, Outcome, RunOptions, RunReport, keys};
use crate::store::{CertRecord, OrderIntent, Records, Store};

use super::coord::{Expect, Leadership, Written};
use super::envelope::{self, Place, Purpose};
use super::follower::{read_fleet, report_host, sync};
use super::link::{FleetLink, check_specs, connect};
use super::open_shared::{check_keeps, open_state};
use super::repair;
use super::schema::{
    Current, HostResult, SharedState, b64, current_key, dcv_key, shared_view, state_key,
};
use super::versions::Versions;

mod acme;
mod bookkeeping;
mod export;
mod imports;
mod outcomes;
mod records_now;
mod repaired;
mod rounds;

use rounds::Round;
pub use rounds::{FleetRan, run};

pub(super) use records_now::Now;

pub(super) use imports::Imports;

use bookkeeping::{announce_lead, merge_requests, not_leading, note_host_failure, record_attempts};
use export::export;
use outcomes::{from_sync, set_outcome, take_engine_outcomes};

/// While a run shares and publishes, the versions it accepted are written at least this often
/// (and once at the end of its export): not after every certificate (the file holds every
/// certificate's versions).
const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// The leader's side of a run: its lead and the fleet.
pub(super) struct FleetRun<'a> {
    pub(super) link: &'a FleetLink,
    pub(super) lead: &'a Leadership,
    pub(super) config: &'a Config,
    client: std::cell::OnceCell<crate::api::Client>,
    /// The versions this host accepted (and wrote): never borrowed across an `await`.
    versions: std::cell::RefCell<Versions>,
    /// When the versions were last written.
    saved_at: std::cell::Cell<std::time::Instant>,
    /// The records as the run's imports left them on disk: each one the engine works on taken
    /// by it ([`Lead::take_record`]), the others handed to the export.
    records: std::cell::RefCell<Records>,
    /// The ACME validation files this run published, by certificate.
    acme_published: std::cell::RefCell<BTreeMap<String, super::schema::DcvEntry>>,
    /// The certificates whose refused current value this run wrote back ([`repaired`]).
    repaired_current: std::cell::RefCell<std::collections::BTreeSet<String>>,
}

impl FleetRun<'_> {
    /// A Partner API client for the leader's own calls outside the engine, with the lead's
    /// check before every request (as the engine's).
    fn client(&self) -> Result<&crate::api::Client> {
        if let Some(c) = self.client.get() {
            return Ok(c);
        }
        let mut options = engine::client_options(self.config);
        options.guard = Some(self.lead.send_guard());
        let c =
            crate::api::Client::new(options).context("could not set up the Partner API client")?;
        Ok(self.client.get_or_init(|| c))
    }

    /// Writes the versions accepted since the last write. A version is accepted (in memory)
    /// only once the write it stands for was made; until the file holds it, a restart reads
    /// it back from the fleet, which holds it.
    pub(super) fn save_versions(&self) -> Result<()> {
        self.saved_at.set(std::time::Instant::now());
        self.versions.borrow_mut().save()
    }

    /// After a version was accepted: the versions written when [`SAVE_EVERY`] passed since
    /// they last were (a failure is said; the export's final write says it per certificate).
    fn accepted(&self) {
        if self.saved_at.get().elapsed() >= SAVE_EVERY
            && let Err(e) = self.save_versions()
        {
            tracing::warn!("{e:#}");
        }
    }

    /// Shares `rec` (and its pending key, sealed) with the fleet at the next version, fenced
    /// by the lead: called before every billed or state-changing call to the Partner API,
    /// which is not made when this fails.
    pub(super) async fn share(&self, cert: &CertificateConfig, rec: &CertRecord) -> Result<()> {
        let rel = state_key(&cert.name);
        let version = self.versions.borrow().next_state(&cert.name, 0)?;
        let pending_key = match &rec.pending_key {
            Some(p) => {
                let key = keys::load_pending(p)?;
                let place = Place::new(Purpose::PendingKey, &rel, &cert.name);
                let sealed =
                    envelope::seal(&self.link.key, &place, version, key.secret_pem().as_bytes())?;
                Some(b64(&sealed))
            }
            None => None,
        };
        let doc = SharedState {
            record: shared_view(rec),
            pending_key,
            written_by: self.link.fleet.host().to_owned(),
            written_at: self.link.clock.now(),
        };
        let place = Place::new(Purpose::State, &rel, &cert.name);
        let sealed = envelope::seal_json(&self.link.key, &place, version, &doc)?;
        let written = self
            .lead
            .put(&rel, sealed.clone(), Expect::Any)
            .await
            .with_context(|| {
                format!(
                    "could not share the state of certificate '{}' with the fleet",
                    cert.name
                )
            })?;
        {
            let mut versions = self.versions.borrow_mut();
            versions.accept_state(&cert.name, &self.link.fleet.key(&rel), version, &sealed)?;
            versions.hold_state(&cert.name, version, repair::view_digest(rec));
            if let Written::Done(at) = written {
                versions.wrote_state(&cert.name, at);
            }
        }
        self.accepted();
        Ok(())
    }

    /// Withdraws the validation file from every host.
    pub(super) async fn remove_dcv(&self, cert: &CertificateConfig) {
        self.acme_published.borrow_mut().remove(&cert.name);
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

    fn not_placed<'a>(
        &'a self,
        cert: &'a CertificateConfig,
        rec: &'a CertRecord,
        intent: &'a OrderIntent,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            match FleetRun::share(self, cert, rec).await {
                Ok(()) => tracing::info!(
                    certificate = %cert.name,
                    "the fleet's record no longer holds the order intent (the order was not placed)"
                ),
                Err(e) => {
                    tracing::warn!(certificate = %cert.name, "{e:#}");
                    super::unplaced_intent::note(self.link, &cert.name, intent).await;
                }
            }
        })
    }

    fn send_guard(&self) -> Option<crate::api::SendGuard> {
        Some(self.lead.send_guard())
    }

    fn acme_account<'a>(&'a self, ca: &'a crate::config::AcmeCa) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(FleetRun::acme_account(self, ca))
    }

    fn hosts_not_serving<'a>(
        &'a self,
        cert: &'a CertificateConfig,
        files: &'a [ValidationFile],
    ) -> LocalBoxFuture<'a, Result<Vec<String>>> {
        Box::pin(FleetRun::hosts_not_serving(self, cert, files))
    }

    fn take_record(&self, name: &str) -> Option<CertRecord> {
        self.records.borrow_mut().remove(name)
    }
}

impl FleetRun<'_> {
    /// Publishes an installed certificate as the fleet's current one, at a version higher
    /// than any this host accepted or etcd holds. A value there that does not open is
    /// replaced.
    async fn publish_current(&self, cert: &CertificateConfig, r: &Installable) -> Result<()> {
        let rel = current_key(&cert.name);
        let place = Place::new(Purpose::Current, &rel, &cert.name);
        let (seen, expect) = match self.link.fleet.get(&rel).await? {
            Some((bytes, rev)) => {
                match envelope::open_json::<Current>(
                    &self.link.key,
                    &self.link.fleet,
                    &place,
                    &bytes,
                ) {
                    Ok((version, before)) => {
                        if crypto::same_serial_hex(&before.serial, &r.serial) {
                            return Ok(());
                        }
                        self.replayed_current(cert, &r.serial, version).await;
                        (version, Expect::Revision(rev))
                    }
                    Err(e) => {
                        self.refused_current(cert, &r.serial, &e).await;
                        (0, Expect::Revision(rev))
                    }
                }
            }
            None => (0, Expect::Absent),
        };
        let version = self.versions.borrow().next_current(&cert.name, seen)?;
        let key_place = Place::new(Purpose::CurrentKey, &rel, &cert.name);
        let sealed_key = envelope::seal(&self.link.key, &key_place, version, &r.key_pem)?;
        let doc = Current {
            version,
            certificate_id: r.certificate_id,
            serial: r.serial.clone(),
            not_before: r.not_before,
            not_after: r.not_after,
            published_by: self.link.fleet.host().to_owned(),
            published_at: self.link.clock.now(),
            archive: b64(&r.archive),
            chain: r
                .chain
                .as_ref()
                .map(|c| String::from_utf8_lossy(c).into_owned()),
            key: b64(&sealed_key),
        };
        let sealed = envelope::seal_json(&self.link.key, &place, version, &doc)?;
        crate::failpoint::hit("fleet-publishing");
        match self.lead.put(&rel, sealed.clone(), expect).await? {
            Written::Done(at) => {
                crate::failpoint::hit("fleet-published");
                tracing::info!(certificate = %cert.name, version, serial = %doc.serial, "published to the fleet");
                {
                    let mut versions = self.versions.borrow_mut();
                    versions.accept_current(
                        &cert.name,
                        &self.link.fleet.key(&rel),
                        version,
                        &sealed,
                        &r.serial,
                        r.not_before,
                    )?;
                    versions.wrote_current(&cert.name, at);
                }
                self.accepted();
                let result = HostResult {
                    serial: Some(doc.serial.clone()),
                    version,
                    at: self.link.clock.now(),
                    since: Some(self.link.clock.now()),
                    error: None,
                    skipped: None,
                };
                report_host(self.link, self.link.fleet.host(), &cert.name, &result).await;
                let installed = [(cert.name.clone(), doc.serial.clone(), version)];
                super::proof::prove_installed(self.link, self.config, &installed).await;
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

/// Before the leader's engine runs: the shared record of each certificate, opened and
/// checked (its version, its name, its pending CSR against its pending key; it keeps every
/// order and intent this host knows), replaces what this host's state directory holds of it
/// (the installed files and published validation files stay this host's); a pending key that
/// is not here yet is written to the key directory. Returns the record as the fleet holds it
/// (`None`: the fleet has none yet). `docs`: the values under `certs/`, read once the lead
/// was taken (one request for every certificate). The record and its journal line are
/// written with the run's other imports, by [`Imports::write`], before anything reads them.
pub(super) async fn import(
    link: &FleetLink,
    store: &Store,
    versions: &mut Versions,
    cert: &CertificateConfig,
    now: &Now,
    local: Option<CertRecord>,
    imports: &mut Imports,
) -> Result<Option<CertRecord>> {
    let rel = state_key(&cert.name);
    let Some(bytes) = now.states.get(&rel) else {
        // Not read: at the revision this host imported, its record as that import left it.
        if now.unchanged.contains(&rel) {
            return Ok(local.map(|local| shared_view(&local)));
        }
        // None: a first order, unless the fleet vouches for a record this host does not know.
        let local = match local {
            Some(local) => local,
            None => store.load(&cert.name)?,
        };
        super::manifest::check_missing_state(&link.fleet.key(&rel), versions, &cert.name, &local)?;
        return Ok(None);
    };
    let opened =
        open_state(link, versions, cert, bytes).map_err(|e| anyhow!(repair::Refused(e)))?;
    let local = match local {
        Some(local) => local,
        None => store.load(&cert.name)?,
    };
    // Once this host's record is what the fleet's says, the import of this revision is done.
    let revision = now.revisions.get(&rel).copied();
    let held = (opened.version, repair::view_digest(&opened.shared.record));
    let mut imported = |saved: &CertRecord, fleet: &CertRecord| {
        if shared_view(saved) == *fleet {
            versions.hold_state(&cert.name, held.0, held.1.clone());
        }
        if let Some(rev) = revision.filter(|_| shared_view(saved) == *fleet) {
            versions.imported(&cert.name, rev, &records_now::record_digest(saved));
        }
    };
    check_keeps(&link.fleet.key(&rel), &local, &opened.shared.record)?;
    let shared = opened.shared;
    let mut next = shared.record.clone();
    if let Some(intent) = next
        .partner
        .intent
        .as_ref()
        .filter(|_| next.partner.order.is_none())
        && let Some(host) = super::unplaced_intent::noted_by(link, &cert.name, intent).await?
    {
        tracing::info!(
            certificate = %cert.name,
            "{host} noted that the fleet's order intent was never placed: withdrawn, the \
             certificate is ordered normally"
        );
        store.journal(
            &cert.name,
            "fleet-intent-withdrawn",
            serde_json::json!({ "noted_by": host, "csr_sha256": intent.csr_sha256 }),
        )?;
        next.partner.intent = None;
    }
    if shared_view(&local) == next {
        let attempt = Some(shared.attempt());
        let mut local = local;
        let noted = local.fleet != attempt;
        local.fleet = attempt;
        imported(&local, &shared.record);
        if noted {
            imports.save(local);
        }
        return Ok(Some(shared.record));
    }
    next.fleet = Some(shared.attempt());
    next.host_failures = local.host_failures;
    next.host_error.clone_from(&local.host_error);
    next.rollout_halted.clone_from(&local.rollout_halted);
    next.rolled_back.clone_from(&local.rolled_back);
    next.rollout_overridden
        .clone_from(&local.rollout_overridden);
    next.installed.clone_from(&local.installed);
    next.dcv = local.dcv.clone();
    next.revocation.clone_from(&local.revocation);
    // A certificate this host holds until it is valid stays held while the fleet still waits
    // for the same pending key (the archive is this host's).
    let same_pending = matches!(
        (&local.pending_key, &next.pending_key),
        (Some(l), Some(n)) if l.csr_sha256 == n.csr_sha256
    );
    if same_pending {
        next.held.clone_from(&local.held);
    } else if local.held.is_some() {
        store.discard_held(&cert.name);
    }
    if let Some(sp) = &mut next.pending_key {
        match (&local.pending_key, &opened.pending_key) {
            (Some(lp), _) if lp.csr_sha256 == sp.csr_sha256 && lp.key_file.is_file() => {
                sp.key_file.clone_from(&lp.key_file);
            }
            (_, Some(key)) => {
                let dir = store.key_dir(&cert.name)?;
                let file = dir.join(format!(
                    "{}-{}.key",
                    sp.created_at.unix_timestamp(),
                    sp.csr_sha256.get(..16).unwrap_or("fleet")
                ));
                crypto::write_key_file(&file, key, None)?;
                sp.key_file = file;
            }
            (_, None) => bail!(
                "the fleet's record {} has a pending CSR but not its key",
                link.fleet.key(&rel)
            ),
        }
    }
    imported(&next, &shared.record);
    imports.import(
        next,
        serde_json::json!({ "written_by": shared.written_by, "version": opened.version }),
    );
    Ok(Some(shared.record))
}

/// What the imports of a round leave for the rest of the run.
struct Imported<'c> {
    /// The certificates the engine works on.
    eligible: Vec<&'c CertificateConfig>,
    /// Each one's record as the fleet holds it.
    imported: BTreeMap<String, Option<CertRecord>>,
    /// The versions accepted (saved).
    versions: Versions,
    /// Each one's record as this host's state directory holds it after the imports (read or
    /// written by them; a certificate whose record could not be read is not here): handed
    /// to the engine, and to the export for what the engine neither read nor wrote, instead
    /// of read again.
    records: Records,
    /// The certificates whose refused shared record this host writes back ([`repair`]).
    repaired: std::collections::BTreeSet<String>,
}

/// The imports of a round this host leads: every certificate of `certs` but those `skip`
/// names, imported from the shared records as etcd holds them now (another leader may have
/// written since the synchronisation's read: what was written since, read in one request),
/// their records and journal lines written together. `versions` and `known`: this host's
/// versions and records as the round's synchronisation left them (not read again).
async fn import_round<'c>(
    link: &FleetLink,
    store: &Store,
    (kept, (mut versions, known)): (records_now::Kept, (Versions, Records)),
    certs: &[&'c CertificateConfig],
    skip: &dyn Fn(&str) -> bool,
    report: &mut RunReport,
) -> Result<Imported<'c>> {
    let mut eligible: Vec<&CertificateConfig> = Vec::new();
    let mut imported = BTreeMap::new();
    let mut records = BTreeMap::new();
    let (unchanged, mut locals) =
        records_now::unchanged_imports(store, &versions, &kept, certs, known);
    let mut imports = Imports::default();
    let mut repaired = std::collections::BTreeSet::new();
    let docs = kept.now(link, unchanged).await?;
    for cert in certs.iter().filter(|c| !skip(&c.name)) {
        let local = locals.remove(&cert.name);
        // As read: what the import writes replaces it below.
        if let Some(local) = &local {
            records.insert(cert.name.clone(), local.clone());
        }
        match import(link, store, &mut versions, cert, &docs, local, &mut imports).await {
            Ok(view) => {
                imported.insert(cert.name.clone(), view);
                eligible.push(*cert);
            }
            Err(e)
                if repair::state(
                    link,
                    store,
                    &versions,
                    records.get(&cert.name),
                    &cert.name,
                    &e,
                )
                .await =>
            {
                // The fleet holds none this host accepts: the export shares this host's.
                imported.insert(cert.name.clone(), None);
                eligible.push(*cert);
                repaired.insert(cert.name.clone());
            }
            Err(e) => {
                records.remove(&cert.name);
                let error = format!("{e:#}");
                note_host_failure(store, &cert.name, &error);
                set_outcome(report, &cert.name, Outcome::Failed { error });
            }
        }
    }
    let failed = imports.write_for_run(store, &mut eligible, &mut imported, &mut records);
    for (name, error) in failed {
        set_outcome(report, &name, Outcome::Failed { error });
    }
    versions.save()?;
    store.debug_check_held(&records, "after the imports");
    Ok(Imported {
        eligible,
        imported,
        versions,
        records,
        repaired,
    })
}

/// One round of a run on a fleet host ([`rounds::run`] repeats them while the run waits):
/// installs what the fleet has, then — when this host can take the lead — imports the shared
/// records, runs the engine as the leader (waiting as `opts.wait` says), shares and publishes
/// what changed, and gives the lead up. Without etcd (or its quorum) nothing is ordered and
/// the round fails; what is installed stays. A later round of a run (`follows`) works on the
/// certificates the run follows up (`certs`): one whose fleet value failed here is not left
/// to the fleet as [`FromSync::not_here`] says, since its work may be in flight here.
async fn round(
    config: &Config,
    opts: &RunOptions,
    store: &Store,
    certs: &[&CertificateConfig],
    marked: &std::cell::Cell<bool>,
    follows: bool,
) -> Result<Round> {
    let link = connect(config, opts.clock)
        .await?
        .ok_or_else(|| anyhow!("no [fleet] in {}", config.path.display()))?;
    let versions = Versions::load(store.dir());
    let snap = read_fleet(&link, config, versions.as_ref().ok()).await?;
    let mut versions = versions?;
    let mut refused = check_specs(&link, config, &snap, &mut versions).await?;
    let kept = records_now::Kept::of(&snap);
    let synced = sync(&link, config, store, &refused, (snap, versions)).await?;
    let fleet_has = synced.fleet_has;
    let retired = synced.retired;
    let from_run = (synced.versions, synced.records);
    let mut report = RunReport::not_started(certs);
    let mut sync_decided = from_sync(
        synced.synced,
        (&fleet_has, &from_run.1),
        opts.force || follows,
        &mut report,
    );
    let Some(lead) = link.fleet.try_lead_exclusive().await? else {
        not_leading(&link, store, &mut report, &sync_decided.decided).await?;
        return Ok(Round::followed(report));
    };
    announce_lead(&link, &lead, opts, store, certs, &mut report).await;
    let specs = repair::specs(&link, &lead, store, &from_run.0, certs, &mut refused).await;
    sync_decided.decided.retain(|name| !specs.contains(name));
    let skip = |name: &str| sync_decided.leaves_alone(name, &refused, &retired);
    let Imported {
        eligible,
        imported,
        versions,
        records,
        repaired,
    } = import_round(&link, store, (kept, from_run), certs, &skip, &mut report).await?;
    // A value refused by this host's synchronisation and written back: the engine's outcome.
    sync_decided.decided.retain(|name| !repaired.contains(name));
    let fr = FleetRun {
        link: &link,
        lead: &lead,
        config,
        client: std::cell::OnceCell::new(),
        versions: std::cell::RefCell::new(versions),
        saved_at: std::cell::Cell::new(std::time::Instant::now()),
        records: std::cell::RefCell::new(records),
        acme_published: std::cell::RefCell::default(),
        repaired_current: std::cell::RefCell::default(),
    };
    let done = engine::run(config, store, opts, &eligible, Some(&fr)).await;
    take_engine_outcomes(&mut report, done.report.certificates, &sync_decided.decided);
    let mut not_shared = std::collections::BTreeSet::new();
    let exported = export(
        &fr,
        store,
        &eligible,
        &imported,
        &fleet_has,
        export::Ran {
            installed: &done.installed,
            untouched: &done.untouched,
            records: fr.records.take(),
        },
    )
    .await;
    let mut records = exported.records;
    for (name, error) in exported.errors {
        tracing::warn!(certificate = %name, "{error}");
        not_shared.insert(name.clone());
        // Written again below: read where needed.
        records.remove(&name);
        note_host_failure(store, &name, &error);
        set_outcome(&mut report, &name, Outcome::Failed { error });
    }
    outcomes::written_back(&mut report, &fr.repaired_current.take(), &not_shared);
    let own = fr.client.get().map(crate::api::Client::request_counts);
    let mut versions = fr.versions.take();
    drop(fr);
    // What this lead accepted and wrote, vouched for in its manifest entry.
    super::manifest::publish(&link, &mut versions).await;
    let host = link.fleet.host();
    rounds::mark_waiting(
        (&lead, host, marked),
        opts,
        (store, &records),
        config,
        &eligible,
    )
    .await;
    lead.resign().await;
    if let Err(e) = store.audit(
        None,
        "fleet-lead-given",
        &serde_json::json!({ "host": link.fleet.host() }),
    ) {
        tracing::warn!("{e}");
    }
    record_attempts(store, &link, &mut records, &imported, &not_shared);
    crate::fleet::follower::fleet_failures_of(store, &mut report, &records);
    let mut requests = done.requests;
    if let Some(own) = own {
        merge_requests(&mut requests, own);
    }
    store.debug_check_held(&records, "after the leader's round");
    Ok(Round::led(report, requests, records))
}
