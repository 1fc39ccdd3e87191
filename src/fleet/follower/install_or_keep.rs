//! What a follower decides and records about the fleet's certificate: whether it installs it
//! or keeps its own newer one (reported under `hosts/HOST/`), and each certificate's record
//! after a synchronisation.

use std::collections::{BTreeMap, BTreeSet};

use time::OffsetDateTime;

use super::Synced;
use crate::clock;
use crate::config::Config;
use crate::crypto;
use crate::engine::{Job, Outcome};
use crate::fleet::link::FleetLink;
use crate::fleet::schema::HostResult;
use crate::store::{FleetAttempt, Records, Store};

/// What this host does with the fleet's certificate `serial` (version `version` at `key`).
pub(super) enum Keep {
    Install,
    /// It serves that certificate already.
    Serves,
    /// It serves a newer certificate of its own (installed while it led, or before it joined,
    /// not published yet): never downgraded; its next lead hands it to the fleet. The reason,
    /// in words.
    Newer(String),
}

pub(super) fn keeps(
    job: &Job<'_>,
    key: &str,
    version: u64,
    serial: &str,
    not_before: OffsetDateTime,
) -> Keep {
    match job.rec.installed.as_ref() {
        Some(i) if crypto::same_serial_hex(&i.serial, serial) => Keep::Serves,
        Some(i) if i.not_before > not_before => Keep::Newer(format!(
            "not installing the fleet's certificate {key} (version {version}, serial {serial}, \
             valid from {}): this host serves serial {}, valid from {}, which is newer; it \
             hands it to the fleet when it next leads",
            clock::rfc3339(not_before),
            i.serial,
            clock::rfc3339(i.not_before)
        )),
        _ => Keep::Install,
    }
}

/// The result under `hosts/HOST/` that says this host keeps its own newer certificate of
/// `job`.
pub(super) fn skip_result(link: &FleetLink, job: &Job<'_>, version: u64, why: &str) -> HostResult {
    let installed = job.rec.installed.as_ref();
    HostResult {
        serial: installed.map(|i| i.serial.clone()),
        version,
        at: link.clock.now(),
        since: installed.map(|i| i.installed_at),
        error: None,
        skipped: Some(why.to_owned()),
    }
}

/// After a synchronisation, each configured certificate's record: the fleet's last attempt as
/// its shared record tells it (when it was opened), and this host's own failures — a value
/// that did not open or check, a refused specification, a failed install — or, when this
/// synchronisation did not fail on it, none. `known`: the records as the state directory
/// holds them, by name, that this synchronisation read or its installs wrote (not read
/// again). Returns each record as it leaves it in the state directory (those it could not
/// read or write left out).
pub(super) fn note_outcomes(
    config: &Config,
    store: &Store,
    attempts: &BTreeMap<String, FleetAttempt>,
    (out, mut known): (&[Synced], Records),
    (counted, halted, overridden): (
        &BTreeSet<String>,
        &BTreeMap<String, String>,
        &BTreeMap<String, String>,
    ),
    now: OffsetDateTime,
) -> Records {
    let outcomes: BTreeMap<&str, &Outcome> =
        out.iter().map(|s| (s.name.as_str(), &s.outcome)).collect();
    let mut changed = Vec::new();
    let mut left = BTreeMap::new();
    for cert in &config.certificates {
        let Ok(mut rec) = store.take_or_load(&mut known, &cert.name) else {
            continue;
        };
        if store.retired_and_idle(&cert.name, &rec).is_some() {
            continue;
        }
        let before = rec.clone();
        if let Some(a) = attempts.get(&cert.name) {
            rec.fleet = Some(a.clone());
        }
        rec.rollout_halted = halted.get(&cert.name).cloned();
        match outcomes.get(cert.name.as_str()).copied() {
            Some(Outcome::Failed { error }) => {
                if !counted.contains(&cert.name) {
                    rec.last_failed_at = Some(now);
                }
                rec.note_host_failure(error.clone());
            }
            Some(Outcome::Installed { .. }) => {
                rec.host_failures = 0;
                rec.host_error = None;
                rec.rolled_back = None;
                rec.rollout_overridden = overridden.get(&cert.name).cloned();
            }
            _ => {
                // The fleet's own record tells its failures (`fleet`); what this host noted
                // while it led is the fleet's, and goes when it no longer leads.
                rec.clear_failures();
                rec.host_failures = 0;
                rec.host_error = None;
            }
        }
        if rec == before {
            left.insert(cert.name.clone(), rec);
        } else {
            changed.push(rec);
        }
    }
    // Written together: one sync for the batch, not one per record.
    for (name, e) in store.save_all_into(changed, &mut left) {
        tracing::warn!(certificate = %name, "could not record the fleet's state: {e:#}");
    }
    left
}
