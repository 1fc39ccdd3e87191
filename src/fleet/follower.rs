//! Every host's side of the fleet: install what the fleet publishes (opened with the fleet
//! key and checked again on this host), serve and withdraw the validation files the leader
//! publishes, report what this host did under `hosts/HOST/`.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use time::OffsetDateTime;

use crate::config::Config;
use crate::crypto::CsrHashes;
use crate::engine::{Job, Outcome, RunReport, RunStats};
use crate::store::{FleetAttempt, Records, Store};

use super::coord::Snapshot;
use super::link::{FleetLink, check_specs, spec_digest};
use super::manifest;
use super::open_shared::open_state;
use super::schema::{HostResult, KEY_CHECK, current_key, retired_key, state_key};
use super::versions::{Seen, Versions};

mod current;
pub(super) mod hosts;
mod install_or_keep;
mod listing;
pub(super) use listing::fuzz as fuzz_listing;
pub(super) mod retired;
mod slices;
mod validation_files;

pub(super) use hosts::report_host;
use hosts::{report_hosts, report_problems, report_seen, report_served_again};
use install_or_keep::note_outcomes;
use validation_files::remove_own_leftovers;
use validation_files::sync_dcv;

/// What [`sync`] did for one certificate.
#[derive(Debug)]
pub(crate) struct Synced {
    pub name: String,
    pub outcome: Outcome,
}

/// What [`sync`] did, and the fleet's current certificates as it read them (serial and
/// `not_before` of the checked bundle, by name), for the leader's hand-over to use without
/// reading them again.
#[derive(Debug, Default)]
pub(super) struct SyncReport {
    pub synced: Vec<Synced>,
    pub(super) fleet_has: BTreeMap<String, (String, OffsetDateTime)>,
    /// The certificates retired for the fleet (their tombstone opened): no lead works on them.
    pub(super) retired: BTreeSet<String>,
    /// Each record as the synchronisation left it in the state directory (one that could
    /// not be read or written is not here): for the leader's imports, not read again.
    pub(super) records: Records,
    /// The versions this host accepted, as the synchronisation wrote them.
    pub(super) versions: Versions,
}

/// What a read of the fleet left out, to be read when needed ([`View::read_left`]).
#[derive(Clone, Copy)]
enum Left {
    /// Values this host accepted at their key's revision.
    Unread,
    /// The certificates' values, read a slice at a time.
    Deferred,
}

/// One synchronisation's view of the fleet: the values under `certs/` it read (those this host
/// accepted at their key's revision left out: a few requests whatever the number of
/// certificates when little changed) and under `dcv/`, the versions this host accepted, and
/// what went wrong, by certificate.
pub(super) struct View {
    pub(super) docs: BTreeMap<String, Vec<u8>>,
    /// The keys under `certs/` whose values the read left out: each at the revision this host
    /// accepted its value at (the value accepted last, not read again).
    pub(super) unread: BTreeMap<String, i64>,
    /// The keys under `certs/` whose values the read left to be read a slice at a time (see
    /// [`slices`]), each at its listed revision.
    pub(super) deferred: BTreeMap<String, i64>,
    /// The modification revision of every key under `certs/`, and the revision of the read.
    revisions: BTreeMap<String, i64>,
    revision: i64,
    /// The id of the etcd cluster the read was made from.
    cluster: u64,
    pub(super) dcv: BTreeMap<String, Vec<u8>>,
    pub(super) versions: Versions,
    pub(super) problems: BTreeMap<String, Vec<String>>,
    /// The fleet's last attempt of each certificate whose shared record was opened.
    pub(super) attempts: BTreeMap<String, FleetAttempt>,
    /// The issuer certificates of the fleet's chains read so far, each once.
    pub(super) chains: crate::fleet::chains::Intermediates,
}

impl View {
    /// The values under `certs/` and `dcv/` as `snap` read them, and the versions this host
    /// accepted.
    fn read(snap: Snapshot, versions: Versions) -> Self {
        View {
            docs: snap.certs,
            unread: snap.unread,
            deferred: snap.deferred,
            revisions: snap.revisions,
            revision: snap.revision,
            cluster: snap.cluster,
            dcv: snap
                .dcv
                .into_iter()
                .filter_map(|(k, v)| Some((k.strip_prefix("dcv/")?.to_owned(), v)))
                .collect(),
            versions,
            problems: BTreeMap::new(),
            attempts: BTreeMap::new(),
            chains: Default::default(),
        }
    }

    /// Whether the value of `rel` is the one this host accepted last: read and the same, or
    /// left unread for being at the revision it was accepted at.
    pub(super) fn unchanged(&self, rel: &str, value: Option<&Vec<u8>>, seen: Seen) -> bool {
        self.unread.contains_key(rel) || (value.is_some() && seen == Seen::Same)
    }

    /// Reads the values of those of `keys` the read left out, at the read's revision.
    async fn fill(&mut self, link: &FleetLink, keys: Vec<String>) -> Result<()> {
        self.read_left(link, keys, Left::Unread).await.map(|_| ())
    }

    /// Reads the values of those of `keys` the read left to be read later, at the read's
    /// revision, each where the read listed it.
    async fn read_deferred(&mut self, link: &FleetLink, keys: Vec<String>) -> Result<()> {
        let read = self.read_left(link, keys, Left::Deferred).await?;
        if read.is_empty() {
            return Ok(());
        }
        let shown = if read.len() <= 10 {
            format!(" ({})", read.join(", "))
        } else {
            String::new()
        };
        tracing::debug!(
            "fleet: {} value(s) read in a slice at revision {}{shown}",
            read.len(),
            self.revision
        );
        Ok(())
    }

    /// Reads the values of those of `keys` that the read left out as `which` says, at the
    /// read's revision: each must be at the revision the read listed it at. Returns the keys
    /// read.
    async fn read_left(
        &mut self,
        link: &FleetLink,
        keys: Vec<String>,
        which: Left,
    ) -> Result<Vec<String>> {
        let left = match which {
            Left::Unread => &mut self.unread,
            Left::Deferred => &mut self.deferred,
        };
        let keys: Vec<String> = keys.into_iter().filter(|k| left.contains_key(k)).collect();
        if keys.is_empty() {
            return Ok(keys);
        }
        let values = link
            .fleet
            .values_listed(&keys, self.revision, &self.revisions)
            .await?;
        for (key, value) in values {
            left.remove(&key);
            self.docs.insert(key, value);
        }
        Ok(keys)
    }

    /// Drops the values of `keys` once taken, each noted as [`View::note_revisions`] does.
    fn forget(&mut self, keys: impl Iterator<Item = String>) {
        for rel in keys {
            if let Some(value) = self.docs.remove(&rel)
                && let Some(rev) = self.revisions.get(&rel)
            {
                self.versions.note_read(&rel, &value, *rev);
            }
        }
    }

    /// Keeps, with each value read that is the one accepted last, the revision it was read at.
    fn note_revisions(&mut self) {
        for (rel, value) in &self.docs {
            if let Some(rev) = self.revisions.get(rel) {
                self.versions.note_read(rel, value, *rev);
            }
        }
    }

    fn problem(&mut self, name: &str, error: String) {
        tracing::warn!(certificate = %name, "{error}");
        self.problems
            .entry(name.to_owned())
            .or_default()
            .push(error);
    }
}

/// Installs, for every certificate of `config` that the fleet has a newer certificate of,
/// that certificate — opened with the fleet key, of a higher version than any accepted
/// before, and checked again against this host's key, names, chain and clock — through this
/// host's own config test, reload, verification and rollback; records the result under
/// `hosts/HOST/`. Also serves the validation files the leader published (each checked
/// against the fleet's pending CSR) and removes those it withdrew. A value that does not
/// open or check fails its certificate only. `snap` is the fleet as this synchronisation
/// read it ([`read_fleet`]); the certificates' values it left out are read, opened and staged
/// a slice at a time ([`slices`]), and everything staged is installed together.
pub(super) async fn sync(
    link: &FleetLink,
    config: &Config,
    store: &Store,
    refused: &BTreeMap<String, String>,
    (snap, versions): (Snapshot, Versions),
) -> Result<SyncReport> {
    let host = link.fleet.host().to_owned();
    let mut view = View::read(snap, versions);
    take_floors(link, config, &mut view).await?;
    let tombstones = retired::open_tombstones(link, config, &mut view);
    let skip = retired::with_retired(refused, &tombstones);
    // A validation file is checked against the shared record: read when left out.
    let dcv_states = view.dcv.keys().map(|n| state_key(n)).collect();
    view.fill(link, dcv_states).await?;
    let pending = pending_csrs(link, config, &skip, &mut view);
    let (validating, acme_served) = sync_dcv(link, config, store, &skip, &pending, &mut view)?;
    for (name, entry) in &acme_served {
        super::acme::confirm_served(link, name, entry).await;
    }
    let mut results = Vec::new();
    let given = slices::Given {
        refused,
        tombstones: &tombstones,
        validating: &validating,
    };
    let slices::Sliced {
        mut out,
        batch,
        published,
        fleet_has,
        mut records,
        halted,
        overridden,
    } = slices::take_slices(link, config, store, &given, &mut view, &mut results).await?;
    // No `seen` record of this host in etcd (new, or forgotten): its manifest entry and what
    // it serves are reported again.
    let unannounced = link.unannounced.load(std::sync::atomic::Ordering::Relaxed);
    if unannounced {
        view.versions.forget_manifest_written();
    }
    view.note_revisions();
    view.versions.save()?;
    // The next read lists only what changed since this one, against the versions saved.
    listing::keep(
        store.dir(),
        (link.fleet.prefix(), view.cluster, view.revision),
        &view.revisions,
        &known_of(link, config, &view.versions),
    );
    manifest::publish(link, &mut view.versions).await;
    // With a rollout in waves, each install is proved before it is committed, and rolled
    // back when its proof fails.
    let held = batch.finish_held().await;
    let checked = super::rollback::check(link, config, &held, (&published, &overridden)).await;
    let back = checked.as_ref().map(|c| c.back.clone()).unwrap_or_default();
    let settled = held.settle(&back).await;
    let mut taken = Taken {
        out: &mut out,
        records: &mut records,
        results: &mut results,
    };
    let Settled { proved, counted } = taken.settled(link, settled, checked.as_ref(), &published);
    report_problems(link, store, view.problems, &mut out, &mut results);
    if unannounced {
        let given = (refused, &view.versions, &records);
        report_served_again(link, config, store, given, &mut results);
    }
    report_hosts(link, &host, results).await;
    match checked {
        Some(checked) => super::rollback::publish(link, config, checked).await,
        None => super::proof::prove_installed(link, config, &proved).await,
    }
    let records = note_outcomes(
        config,
        store,
        &view.attempts,
        (&out, records),
        (&counted, &halted, &overridden),
        link.clock.now(),
    );
    super::proof::prove_again(link, config, &records, &proved).await;
    super::drift::prove_due(link, config, (&records, &view.versions), &proved).await;
    report_seen(link, store, &host).await;
    super::lead_age::note(link, store.dir()).await;
    store.debug_check_held(&records, "after the synchronisation");
    Ok(SyncReport {
        synced: out,
        fleet_has,
        retired: tombstones.into_keys().collect(),
        records,
        versions: view.versions,
    })
}

/// What a synchronisation gathers of each certificate as it goes: its outcome, its record as
/// the state directory holds it, and its result for `hosts/HOST/`.
struct Taken<'t> {
    out: &'t mut Vec<Synced>,
    records: &'t mut Records,
    results: &'t mut Vec<(String, HostResult)>,
}

/// What the installs of a synchronisation came to once settled.
struct Settled {
    /// What each installed certificate is to be proved serving: name, serial, version.
    proved: Vec<(String, String, u64)>,
    /// The certificates whose failed install counted its failure itself.
    counted: BTreeSet<String>,
}

impl Taken<'_> {
    /// Takes the settled installs (`settled`: each committed, failed or rolled back, see
    /// [`super::rollback`] and `checked`): each one's outcome, its record (an installed one as
    /// the install saved it) and its result at the version it was `published` at.
    fn settled(
        &mut self,
        link: &FleetLink,
        settled: Vec<(Job<'_>, Outcome, Option<String>)>,
        checked: Option<&super::rollback::Checked>,
        published: &BTreeMap<String, u64>,
    ) -> Settled {
        // A failed install is counted by the install itself.
        let mut counted = BTreeSet::new();
        let mut proved = Vec::new();
        for (mut job, outcome, _warning) in settled {
            super::rollback::note(&mut job, checked, link.clock.now());
            let version = published.get(&job.cert.name).copied().unwrap_or(0);
            if let (Outcome::Installed { .. }, Some(i)) = (&outcome, &job.rec.installed) {
                proved.push((job.cert.name.clone(), i.serial.clone(), version));
            }
            if matches!(outcome, Outcome::Failed { .. }) {
                counted.insert(job.cert.name.clone());
            }
            // The install wrote the record: read again unless it is the one it saved.
            self.records.remove(&job.cert.name);
            // The record as the install left it (saved): not read again.
            let installed = job.rec.installed.as_ref();
            self.results.push((
                job.cert.name.clone(),
                HostResult {
                    serial: installed.map(|i| i.serial.clone()),
                    version,
                    at: link.clock.now(),
                    since: installed.map(|i| i.installed_at),
                    error: match &outcome {
                        Outcome::Failed { error } => Some(error.clone()),
                        _ => None,
                    },
                    skipped: None,
                },
            ));
            if matches!(outcome, Outcome::Installed { .. }) {
                self.records.insert(job.cert.name.clone(), job.rec);
            }
            self.out.push(Synced {
                name: job.cert.name.clone(),
                outcome,
            });
        }
        Settled { proved, counted }
    }
}

/// The floor of each configured certificate this host has accepted nothing of and took no
/// floor for yet ([`manifest::establish`]): taken before any of its values is opened, and before
/// a lead could take the certificate for one never ordered (its values deleted from etcd).
async fn take_floors(link: &FleetLink, config: &Config, view: &mut View) -> Result<()> {
    let mut names = Vec::new();
    let mut held = BTreeSet::new();
    for c in &config.certificates {
        if !view.versions.needs_floor(&c.name) {
            continue;
        }
        names.push(c.name.clone());
        if [
            state_key(&c.name),
            current_key(&c.name),
            retired_key(&c.name),
        ]
        .iter()
        .any(|k| view.revisions.contains_key(k))
        {
            held.insert(c.name.clone());
        }
    }
    manifest::establish(link, names, &held, &mut view.versions).await
}

/// The fleet's pending CSR of each certificate (its hashes), from the shared record opened
/// and checked: read when it changed or a validation file waits for it.
fn pending_csrs(
    link: &FleetLink,
    config: &Config,
    refused: &BTreeMap<String, String>,
    view: &mut View,
) -> BTreeMap<String, CsrHashes> {
    let mut pending = BTreeMap::new();
    for cert in &config.certificates {
        if refused.contains_key(&cert.name) {
            continue;
        }
        let rel = state_key(&cert.name);
        let value = view.docs.get(&rel);
        let seen = value.map_or(Seen::Other, |v| view.versions.seen_state(&cert.name, v));
        if view.unchanged(&rel, value, seen) && !view.dcv.contains_key(&cert.name) {
            continue;
        }
        let Some(value) = value else {
            continue;
        };
        let value = value.clone();
        match open_state(link, &mut view.versions, cert, &value) {
            Ok(s) => {
                view.attempts.insert(cert.name.clone(), s.shared.attempt());
                if let Some(h) = s.hashes() {
                    pending.insert(cert.name.clone(), h);
                }
            }
            Err(e) => view.problem(&cert.name, format!("{e:#}")),
        }
    }
    pending
}

/// What one [`follow`] read and whether it left anything to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Followed {
    /// The store's revision the fleet was read at.
    pub revision: i64,
    /// Every certificate installed or in step: nothing failed here, nothing is held until
    /// it is valid. Until then each resynchronisation reads the fleet again.
    pub clean: bool,
}

/// One synchronisation outside a run (the daemon follows the fleet's changes with it): the
/// fleet read once ([`Fleet::snapshot`](super::coord::Fleet::snapshot)), the certificates
/// checked against the fleet's record, then [`sync`]; `done` gets its report (every
/// configured certificate: installed, failed here, failing in the fleet, or in step) while
/// the state directory's lock is still held. `None` when a run holds that lock (that run
/// synchronises itself).
pub(crate) async fn follow(
    config: &Config,
    link: &FleetLink,
    done: &impl AsyncFn(&Config, &Store, RunReport),
) -> Result<Option<Followed>> {
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = match store.lock() {
        Ok(l) => l,
        Err(crate::store::StoreError::Locked { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let started_at = link.clock.now();
    let started = tokio::time::Instant::now();
    let versions = Versions::load(store.dir());
    let snap = read_fleet(link, config, versions.as_ref().ok()).await?;
    let mut versions = versions?;
    let revision = snap.revision;
    let refused = check_specs(link, config, &snap, &mut versions).await?;
    let synced = sync(link, config, &store, &refused, (snap, versions))
        .await?
        .synced;
    let clean = synced.iter().all(|s| {
        matches!(
            s.outcome,
            Outcome::Installed { .. } | Outcome::Unchanged { .. }
        )
    });
    let mut outcomes: BTreeMap<String, Outcome> =
        synced.into_iter().map(|s| (s.name, s.outcome)).collect();
    let mut report = RunReport {
        certificates: config
            .certificates
            .iter()
            .map(|c| {
                let outcome = match outcomes.remove(&c.name) {
                    Some(outcome) => outcome,
                    None => Outcome::Unchanged {
                        reason: "in step with the fleet".into(),
                    },
                };
                crate::engine::CertReport {
                    name: c.name.clone(),
                    outcome,
                    warning: None,
                    revocation: None,
                    ordered: None,
                }
            })
            .collect(),
        stats: None,
        takeover: None,
    };
    fleet_failures(&store, &mut report);
    report.stats = Some(RunStats {
        started_at,
        duration: started.elapsed(),
        requests: Vec::new(),
    });
    done(config, &store, report).await;
    Ok(Some(Followed { revision, clean }))
}

/// The fleet as a synchronisation reads it ([`Fleet::snapshot`](super::coord::Fleet::snapshot)),
/// without the values this host accepted at the revision their keys are still at (its
/// `versions`, as the run read them). Without them (the file does not read) every value is
/// read, and the synchronisation then says what is wrong with the file.
pub(super) async fn read_fleet(
    link: &FleetLink,
    config: &Config,
    versions: Option<&Versions>,
) -> Result<Snapshot> {
    let (known, prior) = match versions {
        Some(versions) => {
            let known = known_of(link, config, versions);
            let prior = listing::prior(&config.agent.state_dir, link.fleet.prefix(), &known);
            (known, prior)
        }
        None => (BTreeMap::new(), None),
    };
    // The certificates' bundles are read a slice at a time by the synchronisation.
    let snap = link
        .fleet
        .snapshot_deferring(KEY_CHECK, &known, prior, |k| k.ends_with("/current"))
        .await?;
    Ok(snap)
}

/// The revision this host accepted each value of the fleet at, by key (relative to the
/// prefix), for the configured certificates (a specification only when it is the one this
/// host's configuration gives).
fn known_of(link: &FleetLink, config: &Config, versions: &Versions) -> BTreeMap<String, i64> {
    let configs = config
        .certificates
        .iter()
        .map(|c| (c.name.clone(), spec_digest(link, c)))
        .collect();
    versions.known(&configs)
}

/// A certificate this host did not fail on, whose fleet's last attempt failed (a follower,
/// or the leader left idle by the fleet's backoff): failed in this host's report too (its
/// exit code, its notifications, its metrics).
pub(super) fn fleet_failures(store: &Store, report: &mut RunReport) {
    fleet_failures_of(store, report, &BTreeMap::new());
}

/// [`fleet_failures`], taking each certificate's record from `records` (the run's, as the
/// state directory holds them) where it is there, instead of reading it again.
pub(crate) fn fleet_failures_of(
    store: &Store,
    report: &mut RunReport,
    records: &BTreeMap<String, crate::store::CertRecord>,
) {
    for c in &mut report.certificates {
        if !matches!(
            c.outcome,
            Outcome::Unchanged { .. } | Outcome::Pending { .. }
        ) {
            continue;
        }
        let Ok(rec) = store.held_or_load(records, &c.name) else {
            continue;
        };
        if let Some(f) = rec.fleet.as_ref().filter(|f| f.failing()) {
            c.outcome = Outcome::Failed {
                error: f.describe(),
            };
        }
    }
}

/// Whether a change of `key` (relative to the prefix) concerns what [`sync`] does: a
/// certificate published or retired, a validation file published or withdrawn, or — with a
/// rollout in waves (`rollout`) — a host's proof written.
pub(crate) fn concerns_hosts(key: &str, rollout: bool) -> bool {
    // A host's proof may open the next wave of a rollout; without one, nothing waits for it.
    (rollout && is_proof(key))
        || key.starts_with("dcv/")
        || (key.starts_with("certs/") && (key.ends_with("/current") || key.ends_with("/retired")))
}

/// Whether [`sync`] reads `key` (relative to the prefix): a change of it is read by the next
/// resynchronisation (what other hosts report under `hosts/`, and the lead, are not; their
/// proofs and rollout decisions are with a rollout in waves, `rollout`).
pub(crate) fn read_by_sync(key: &str, rollout: bool) -> bool {
    (rollout && is_proof(key))
        || key.starts_with("certs/")
        || key.starts_with("dcv/")
        || key == KEY_CHECK
}

/// Whether `key` is a host's proof, `hosts/HOST/proof/NAME`, or a rollout decision,
/// `hosts/HOST/rollout/NAME`.
fn is_proof(key: &str) -> bool {
    matches!(
        key.split('/').collect::<Vec<_>>().as_slice(),
        ["hosts", _, "proof" | "rollout", _]
    )
}
