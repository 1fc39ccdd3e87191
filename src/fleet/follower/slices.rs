//! The fleet's current certificates taken a slice at a time: for each slice of the configured
//! certificates (in the configuration's order), the values not accepted before are read at the
//! synchronisation's revision (the snapshot left them out: [`Fleet::snapshot_deferring`]),
//! planned, opened and checked, accepted, and what is to be installed staged into one batch
//! ([`deploy::ReadyBatch`]); then the slice's raw values, bundles and keys are dropped. A
//! fresh host catching up on ten thousand certificates holds one slice of them at a time,
//! and still switches everything once and reloads each web server once, when the batch is
//! finished.
//!
//! [`Fleet::snapshot_deferring`]: crate::fleet::coord::Fleet::snapshot_deferring

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use time::OffsetDateTime;

use super::current::{self, Step, take_steps};
use super::install_or_keep::skip_result;
use super::retired;
use super::{Synced, View, remove_own_leftovers};
use crate::config::{CertificateConfig, Config};
use crate::engine::{Job, Outcome, Ready, deploy};
use crate::fleet::link::FleetLink;
use crate::fleet::schema::{HostResult, Tombstone, current_key};
use crate::store::{Records, Store};

/// Certificates per slice: the values of at most this many are held at once (about 17 KiB
/// each as read, and their opened bundles and keys until staged).
pub(super) const SLICE: usize = 500;

/// [`SLICE`] (in debug builds, `CERT_AGENT_TEST_SYNC_SLICE` for the tests).
pub(super) fn slice_size() -> usize {
    if cfg!(debug_assertions)
        && let Some(n) = std::env::var("CERT_AGENT_TEST_SYNC_SLICE")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|n| *n > 0)
    {
        return n;
    }
    SLICE
}

/// What the slices of a synchronisation found: the outcomes so far (in order), the batch to
/// install, the version published of each certificate in it, the fleet's certificates as
/// read (serial and `not_before`), and each record read as the state directory holds it
/// (for [`note_outcomes`](super::install_or_keep::note_outcomes), not read again).
pub(super) struct Sliced<'a> {
    pub(super) out: Vec<Synced>,
    pub(super) batch: deploy::ReadyBatch<'a>,
    pub(super) published: BTreeMap<String, u64>,
    pub(super) fleet_has: BTreeMap<String, (String, OffsetDateTime)>,
    pub(super) records: Records,
    /// With a rollout in waves, by certificate: where the rollout of the fleet's serial halted.
    pub(super) halted: BTreeMap<String, String>,
    /// With a rollout in waves, by certificate: why this host installs the fleet's serial
    /// without waiting for its wave (the certificate it serves nears its end).
    pub(super) overridden: BTreeMap<String, String>,
}

/// What every slice needs besides the view: the specifications refused, the tombstones that
/// opened, the certificates whose validation file the fleet publishes.
pub(super) struct Given<'g> {
    pub(super) refused: &'g BTreeMap<String, String>,
    pub(super) tombstones: &'g BTreeMap<String, Tombstone>,
    pub(super) validating: &'g BTreeSet<String>,
}

/// Takes the configured certificates a slice at a time (see the module's documentation);
/// the results of what is kept go to `results`, the errors to the view's problems. An error
/// reading a slice's values ends the synchronisation before anything is switched (what was
/// staged is removed with the batch).
pub(super) async fn take_slices<'a>(
    link: &'a FleetLink,
    config: &'a Config,
    store: &'a Store,
    given: &Given<'_>,
    view: &mut View,
    results: &mut Vec<(String, HostResult)>,
) -> Result<Sliced<'a>> {
    let size = slice_size();
    let fresh = config
        .certificates
        .iter()
        .filter(|c| view.deferred.contains_key(&current_key(&c.name)))
        .count();
    // About four files a certificate (key, certificate, chain, full chain).
    let mut taken = Sliced {
        out: Vec::new(),
        batch: deploy::ReadyBatch::new(fresh.saturating_mul(4)),
        published: BTreeMap::new(),
        fleet_has: BTreeMap::new(),
        records: BTreeMap::new(),
        halted: BTreeMap::new(),
        overridden: BTreeMap::new(),
    };
    // With a rollout in waves, what the gates need: read once per synchronisation.
    let fleetwide = match &link.config.rollout {
        Some(_) => Some(crate::fleet::rollout::read(link, &mut view.versions).await?),
        None => None,
    };
    for (n, slice) in config.certificates.chunks(size).enumerate() {
        let first = n.saturating_mul(size);
        view.read_deferred(link, slice.iter().map(|c| current_key(&c.name)).collect())
            .await?;
        let steps = plan_slice(
            link,
            config,
            store,
            given,
            (first, slice),
            (view, &mut taken.records),
        )
        .await;
        let to_open: Vec<&CertificateConfig> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Current(current) if current.1.opens() => Some(current.0.cert),
                _ => None,
            })
            .collect();
        // A value accepted before but not installed here is opened again: read when left out.
        view.fill(link, to_open.iter().map(|c| current_key(&c.name)).collect())
            .await?;
        current::read_intermediates(link, view, &to_open).await?;
        let mut opened = current::open_all(link, view, to_open).into_iter();
        let (mut out, ready, published, fleet_has) =
            take_steps(link, steps, &mut opened, view, results);
        let mut ready = hold_back(
            link,
            fleetwide.as_ref(),
            ready,
            (&mut out, results),
            &mut taken.overridden,
        );
        // The fleet's last attempt goes into the record the install writes: not written
        // again after it ([`note_outcomes`](super::install_or_keep::note_outcomes)).
        for (job, _) in &mut ready {
            if let Some(a) = view.attempts.get(&job.cert.name) {
                job.rec.fleet = Some(a.clone());
            }
        }
        taken.out.extend(out);
        taken.published.extend(published);
        taken.fleet_has.extend(fleet_has);
        view.forget(slice.iter().map(|c| current_key(&c.name)));
        taken.batch.stage(ready);
    }
    if let (Some(rollout), Some(fleet)) = (&link.config.rollout, &fleetwide) {
        for (name, (serial, _)) in &taken.fleet_has {
            let decision = fleet.decision(name, serial);
            let halt = fleet.proofs.get(name).and_then(|p| {
                crate::fleet::rollout::halted(rollout, &fleet.hosts, serial, (p, decision))
            });
            if let Some(h) = halt {
                taken.halted.insert(name.clone(), h);
            }
        }
    }
    Ok(taken)
}

/// What of `ready` this host installs now: with a rollout in waves, a certificate whose wave
/// has not come yet, or whose rollout an earlier wave's failed proof halted, is kept back
/// (pending while it waits, unchanged when halted; its result `skipped` with the reason); the
/// rest goes on.
fn hold_back<'a>(
    link: &FleetLink,
    fleetwide: Option<&crate::fleet::rollout::Fleetwide>,
    ready: Vec<(Job<'a>, Ready)>,
    (out, results): (&mut Vec<Synced>, &mut Vec<(String, HostResult)>),
    overridden: &mut BTreeMap<String, String>,
) -> Vec<(Job<'a>, Ready)> {
    use crate::fleet::decision::Verdict;
    use crate::fleet::rollout::{Gate, gate};
    let (Some(config), Some(fleet)) = (&link.config.rollout, fleetwide) else {
        return ready;
    };
    let none = BTreeMap::new();
    let mut go = Vec::with_capacity(ready.len());
    for (job, r) in ready {
        let name = job.cert.name.clone();
        let proofs = fleet.proofs.get(&name).unwrap_or(&none);
        let serial = &r.bundle.serial_hex;
        let host = link.fleet.host();
        // Waiting is pending work (the follow loop synchronises again at its next interval,
        // for a pause); a halted rollout waits for a person.
        let decision = fleet.decision(&name, serial);
        // An expiring certificate is worse than an unproven one: the waves, a halt and this
        // host's own rollback give way; an abort does not.
        let aborted = decision.is_some_and(|d| d.verdict == Verdict::Abort);
        let serving = job
            .rec
            .installed
            .as_ref()
            .map(|i| (i.serial.as_str(), i.not_before, i.not_after));
        if let Some(why) = crate::fleet::rollout::overdue(config, serving, serial, link.clock.now())
            .filter(|_| !aborted)
        {
            tracing::warn!(certificate = %name, serial = %serial, "rollout_overridden: {why}");
            overridden.insert(name, why);
            go.push((job, r));
            continue;
        }
        // An abort names itself (the serial is refused for good, not only here).
        let here = crate::fleet::rollback::refused_here(&job.rec, serial, decision);
        let gate = match here.filter(|_| !aborted) {
            Some(why) => Gate::Halted(why),
            None => gate(
                config,
                &fleet.hosts,
                (host, serial),
                (proofs, decision),
                link.clock.now(),
            ),
        };
        let (why, outcome) = match gate {
            Gate::Go => {
                go.push((job, r));
                continue;
            }
            Gate::Wait(why) => {
                tracing::info!(certificate = %name, serial = %serial, "{why}");
                let reason = why.clone();
                (why, Outcome::Pending { reason })
            }
            Gate::Halted(why) => {
                tracing::warn!(certificate = %name, serial = %serial, "{why}; not installed");
                let reason = why.clone();
                (why, Outcome::Unchanged { reason })
            }
        };
        results.push((name.clone(), skip_result(link, &job, 0, &why)));
        out.push(Synced { name, outcome });
    }
    go
}

/// The step of each certificate of `slice` (the configured certificates from index `first`
/// on): refused, retired here, or what its current value needs. Each record read goes into
/// `records` as the state directory holds it.
async fn plan_slice<'a>(
    link: &'a FleetLink,
    config: &'a Config,
    store: &'a Store,
    given: &Given<'_>,
    (first, slice): (usize, &'a [CertificateConfig]),
    (view, records): (&mut View, &mut Records),
) -> Vec<Step<'a>> {
    let mut steps = Vec::new();
    for (i, cert) in slice.iter().enumerate() {
        let idx = first + i;
        if let Some(why) = given.refused.get(&cert.name) {
            steps.push(Step::Done(Synced {
                name: cert.name.clone(),
                outcome: Outcome::Failed { error: why.clone() },
            }));
            continue;
        }
        if let Some(t) = given.tombstones.get(&cert.name) {
            let done = retired::retire_here(link, config, store, (idx, cert), t).await;
            steps.push(Step::Done(done));
            continue;
        }
        let mut job = match Job::load(store, cert, idx, link.clock) {
            Ok(job) => job,
            Err(e) => {
                view.problem(&cert.name, format!("{e:#}"));
                continue;
            }
        };
        let on_disk = given.validating.contains(&cert.name) || remove_own_leftovers(&mut job);
        match current::plan(link, cert, &job, view) {
            // A step that installs keeps no copy beside its job: the install keeps the record
            // it saves, and one that ends before it is read where needed (the run's records
            // are completed from the state directory when the outcomes are noted). A step
            // that installs nothing keeps its copy: a quiet synchronisation reads no record
            // twice.
            Some(planned) => {
                if on_disk && !planned.opens() {
                    records.insert(cert.name.clone(), job.rec.clone());
                }
                steps.push(Step::Current(Box::new((job, planned))));
            }
            None if on_disk => {
                records.insert(cert.name.clone(), job.rec);
            }
            None => {}
        }
    }
    steps
}
