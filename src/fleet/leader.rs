//! The leader's side of the fleet: take the lead, import the shared records, run the engine
//! as the only host that talks to the Partner API (every record change that precedes a billed
//! call shared first, fenced by the lead), publish validation files and the new certificate,
//! hand over what this host installed before it joined, give the lead up.

use std::collections::{BTreeMap, BTreeSet};

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
use super::repair;
use super::schema::{
    Current, HostResult, SharedState, b64, current_key, dcv_key, shared_view, state_key,
};
use super::versions::Versions;

mod acme;
mod bookkeeping;
mod export;
mod held;
mod import;
mod imports;
mod kept_crl;
mod no_lead;
mod outcomes;
mod records_now;
mod repaired;
mod rounds;
mod wanted;

use rounds::Round;
pub(crate) use rounds::run;

pub(super) use records_now::Now;

pub(super) use import::import;
use import::{ForImports, Imported, import_round};
pub(super) use imports::Imports;

use bookkeeping::{announce_lead, merge_requests, not_leading, note_host_failure, record_attempts};
use export::export;
use outcomes::{FromSync, from_sync, set_outcome, take_engine_outcomes};

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
    repaired_current: std::cell::RefCell<BTreeSet<String>>,
    /// The issuer certificates this run found or stored at `chains/` ([`super::chains`]).
    chains_known: std::cell::RefCell<BTreeSet<String>>,
    /// With a rollout in waves: the proofs of the installs the engine held, published once
    /// the batch is settled ([`held`]).
    held_proofs: std::cell::RefCell<Option<super::rollback::Checked>>,
    /// The fleet's proofs and decisions, read once a run when a rolled back serial is met.
    fleetwide: std::cell::RefCell<Option<std::rc::Rc<super::rollout::Fleetwide>>>,
    /// The fleet's current certificates as the round's synchronisation read them (serial and
    /// `not_before`, by name).
    fleet_has: &'a BTreeMap<String, (String, time::OffsetDateTime)>,
}

impl FleetRun<'_> {
    /// A Partner API client for the leader's own calls outside the engine, with the lead's
    /// check before every request (as the engine's).
    fn client(&self) -> Result<&crate::api::Client> {
        if let Some(c) = self.client.get() {
            return Ok(c);
        }
        let c = engine::client_guarded(self.config, Some(self.lead.send_guard()))?;
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
        let sealed = envelope::seal_json_lean(&self.link.key, &place, version, &doc)?;
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

    fn holds_installs(&self) -> bool {
        FleetRun::holds_installs(self)
    }

    fn prove_held<'a>(
        &'a self,
        live: &'a [engine::Live],
    ) -> LocalBoxFuture<'a, std::collections::HashMap<String, String>> {
        Box::pin(FleetRun::prove_held(self, live))
    }

    fn settled(&self) -> LocalBoxFuture<'_, ()> {
        Box::pin(FleetRun::settled(self))
    }

    fn refuses<'a>(
        &'a self,
        rec: &'a CertRecord,
        serial: &'a str,
    ) -> LocalBoxFuture<'a, Option<engine::Refusal>> {
        Box::pin(FleetRun::refuses(self, rec, serial))
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
        let shared =
            super::chains::shared_form(self.link, self.lead, cert, r, &self.chains_known).await?;
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
            archive: shared.archive,
            chain: shared.chain,
            intermediates: shared.intermediates,
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
                // With a rollout in waves the install was proved before it was committed.
                if !self.holds_installs() {
                    let installed = [(cert.name.clone(), doc.serial.clone(), version)];
                    super::proof::prove_installed(self.link, self.config, &installed).await;
                }
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

/// What a round's synchronisation leaves for the rest of the round: the link and what it
/// decided (what it read for the imports is a [`ForImports`] beside it).
struct Synchronised {
    link: FleetLink,
    /// The certificates whose spec this host refuses, with why.
    refused: BTreeMap<String, String>,
    /// The certificates retired for the fleet.
    retired: BTreeSet<String>,
    /// The fleet's current certificates as read (serial and `not_before`, by name).
    fleet_has: BTreeMap<String, (String, time::OffsetDateTime)>,
    /// What this host's install of the fleet's work decided (each outcome set in the report).
    decided: FromSync,
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
    let mut report = RunReport::not_started(certs);
    let (mut synced, for_imports) =
        synchronise(config, opts, store, opts.force || follows, &mut report).await?;
    let given = (config, opts, store);
    if !no_lead::leads(&synced, &for_imports, given, certs, follows, &mut report).await {
        return Ok(Round::followed(report));
    }
    let Some(lead) = synced.link.fleet.try_lead_exclusive().await? else {
        let decided = &synced.decided.decided;
        not_leading(&synced.link, store, &mut report, decided).await?;
        return Ok(Round::followed(report));
    };
    super::leads::note_led(store.dir(), synced.link.clock.now());
    announce_lead(&synced.link, &lead, opts, store, certs, &mut report).await;
    let imported = import_led(&mut synced, for_imports, &lead, store, certs, &mut report).await?;
    let Synchronised {
        link,
        fleet_has,
        decided,
        ..
    } = synced;
    let leading = Leading {
        link: &link,
        lead,
        config,
        opts,
        store,
    };
    let mut led = leading
        .run_engine(imported, &fleet_has, &decided.decided, &mut report)
        .await;
    leading.give_up(marked, &mut led).await;
    let Led {
        mut records,
        not_shared,
        imported,
        requests,
        ..
    } = led;
    record_attempts(store, &link, &mut records, &imported, &not_shared);
    crate::fleet::follower::fleet_failures_of(store, &mut report, &records);
    store.debug_check_held(&records, "after the leader's round");
    Ok(Round::led(report, requests, records))
}

/// The round's first step, on every host: the fleet read once and checked against this
/// host's specs, then what the fleet has installed here ([`sync`]); each outcome it decided
/// is set in `report` (`follow_up`: `--force`, or a later round of the run, see
/// [`from_sync`]). Returns it with what it read for the imports of a lead that follows.
async fn synchronise(
    config: &Config,
    opts: &RunOptions,
    store: &Store,
    follow_up: bool,
    report: &mut RunReport,
) -> Result<(Synchronised, ForImports)> {
    let link = connect(config, opts.clock)
        .await?
        .ok_or_else(|| anyhow!("no [fleet] in {}", config.path.display()))?;
    let versions = Versions::load(store.dir());
    let snap = read_fleet(&link, config, versions.as_ref().ok()).await?;
    let mut versions = versions?;
    let refused = check_specs(&link, config, &snap, &mut versions).await?;
    let kept = records_now::Kept::of(&snap);
    let synced = sync(&link, config, store, &refused, (snap, versions)).await?;
    let decided = from_sync(
        synced.synced,
        &synced.fleet_has,
        &synced.records,
        follow_up,
        report,
    );
    let for_imports = ForImports {
        kept,
        versions: synced.versions,
        records: synced.records,
    };
    let synchronised = Synchronised {
        link,
        refused,
        retired: synced.retired,
        fleet_has: synced.fleet_has,
        decided,
    };
    Ok((synchronised, for_imports))
}

/// The round's step once this host leads: a spec it refuses written back from its own
/// accepted copy ([`repair::specs`]), then the imports of every certificate the lead does
/// not leave alone ([`import_round`]). What the synchronisation decided of a certificate
/// whose refused value is written back becomes the engine's outcome.
async fn import_led<'c>(
    synced: &mut Synchronised,
    for_imports: ForImports,
    lead: &Leadership,
    store: &Store,
    certs: &[&'c CertificateConfig],
    report: &mut RunReport,
) -> Result<Imported<'c>> {
    let Synchronised {
        link,
        refused,
        retired,
        decided,
        ..
    } = synced;
    let specs = repair::specs(link, lead, store, &for_imports.versions, certs, refused).await;
    decided.decided.retain(|name| !specs.contains(name));
    let skip = |name: &str| decided.leaves_alone(name, refused, retired);
    let imported = import_round(link, store, for_imports, certs, &skip, report).await?;
    decided
        .decided
        .retain(|name| !imported.repaired.contains(name));
    Ok(imported)
}

/// The lead of one round, as its steps after the imports see it.
struct Leading<'a> {
    link: &'a FleetLink,
    lead: Leadership,
    config: &'a Config,
    opts: &'a RunOptions,
    store: &'a Store,
}

/// What the leader's engine and export leave for the end of the round.
struct Led<'c> {
    /// The certificates the engine worked on.
    eligible: Vec<&'c CertificateConfig>,
    /// Each one's record as the fleet held it at the import.
    imported: BTreeMap<String, Option<CertRecord>>,
    /// The records as the round leaves them in the state directory.
    records: Records,
    /// The certificates whose change could not be shared (this host's failure).
    not_shared: BTreeSet<String>,
    /// The versions accepted, as the run's writes left them.
    versions: Versions,
    /// The Partner API requests of the engine and of the leader's own calls.
    requests: Vec<crate::api::RequestCount>,
}

impl Leading<'_> {
    /// The engine run as the leader over what the imports left, then the export: what
    /// changed shared, what was installed published. The engine's outcomes are set in
    /// `report` (what the synchronisation `decided` stays when the engine changed nothing);
    /// a certificate whose change could not be shared fails here.
    async fn run_engine<'c>(
        &self,
        imported: Imported<'c>,
        fleet_has: &BTreeMap<String, (String, time::OffsetDateTime)>,
        decided: &BTreeSet<String>,
        report: &mut RunReport,
    ) -> Led<'c> {
        let Imported {
            eligible,
            imported,
            versions,
            records,
            ..
        } = imported;
        let (store, config) = (self.store, self.config);
        let fr = FleetRun {
            link: self.link,
            lead: &self.lead,
            config,
            client: std::cell::OnceCell::new(),
            versions: std::cell::RefCell::new(versions),
            saved_at: std::cell::Cell::new(std::time::Instant::now()),
            records: std::cell::RefCell::new(records),
            acme_published: std::cell::RefCell::default(),
            repaired_current: std::cell::RefCell::default(),
            chains_known: std::cell::RefCell::default(),
            held_proofs: std::cell::RefCell::default(),
            fleetwide: std::cell::RefCell::default(),
            fleet_has,
        };
        let done = engine::run(config, store, self.opts, &eligible, Some(&fr)).await;
        take_engine_outcomes(report, done.report.certificates, decided);
        let mut not_shared = BTreeSet::new();
        let ran = export::Ran {
            installed: &done.installed,
            untouched: &done.untouched,
            records: fr.records.take(),
        };
        let exported = export(&fr, store, &eligible, &imported, fleet_has, ran).await;
        super::chains::migrate(fr.link, fr.lead, config, &fr.versions, &fr.chains_known).await;
        let mut records = exported.records;
        for (name, error) in exported.errors {
            tracing::warn!(certificate = %name, "{error}");
            not_shared.insert(name.clone());
            // Written again below: read where needed.
            records.remove(&name);
            note_host_failure(store, &name, &error);
            set_outcome(report, &name, Outcome::Failed { error });
        }
        outcomes::written_back(report, &fr.repaired_current.take(), &not_shared);
        let own = fr.client.get().map(crate::api::Client::request_counts);
        let versions = fr.versions.take();
        drop(fr);
        let mut requests = done.requests;
        if let Some(own) = own {
            merge_requests(&mut requests, own);
        }
        Led {
            eligible,
            imported,
            records,
            not_shared,
            versions,
            requests,
        }
    }

    /// The round's last step as the leader: what this lead accepted and wrote vouched for in
    /// its manifest entry, the fleet told whether this run still waits for the CA, the lead
    /// given up (and said in the audit log).
    async fn give_up(self, marked: &std::cell::Cell<bool>, led: &mut Led<'_>) {
        let (link, store) = (self.link, self.store);
        super::manifest::publish(link, &mut led.versions).await;
        let host = link.fleet.host();
        rounds::mark_waiting(
            (&self.lead, host, marked),
            self.opts,
            (store, &led.records),
            self.config,
            &led.eligible,
        )
        .await;
        self.lead.resign().await;
        if let Err(e) = store.audit(
            None,
            "fleet-lead-given",
            &serde_json::json!({ "host": host }),
        ) {
            tracing::warn!("{e}");
        }
    }
}
