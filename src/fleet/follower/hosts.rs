//! What this host reports to the fleet under `hosts/HOST/`: its result for each certificate
//! (installed, kept, failed and why), sealed, and when it last synchronised with which fleet
//! keys.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;

use super::Synced;
use crate::config::Config;
use crate::engine::Outcome;
use crate::fleet::envelope::{self, Place, Purpose};
use crate::fleet::link::FleetLink;
use crate::fleet::schema::{AuditMark, HostResult, HostSeen, host_key, seen_key};
use crate::fleet::versions::Versions;
use crate::store::{Records, Store};

/// Each certificate that met a bad value: failed in the run's outcome (unless its install
/// already failed) and reported under `hosts/HOST/`.
pub(super) fn report_problems(
    link: &FleetLink,
    store: &Store,
    problems: BTreeMap<String, Vec<String>>,
    out: &mut Vec<Synced>,
    results: &mut Vec<(String, HostResult)>,
) {
    for (name, errors) in problems {
        let error = errors.join("; ");
        if let Some(s) = out.iter_mut().find(|s| s.name == name) {
            if let Outcome::Failed { error: e } = &mut s.outcome {
                e.push_str("; ");
                e.push_str(&error);
            } else {
                s.outcome = Outcome::Failed { error };
            }
            continue;
        }
        let rec = store.load(&name).ok();
        let installed = rec.as_ref().and_then(|r| r.installed.as_ref());
        let result = HostResult {
            serial: installed.map(|i| i.serial.clone()),
            version: 0,
            at: link.clock.now(),
            since: installed.map(|i| i.installed_at),
            error: Some(error.clone()),
            skipped: None,
        };
        results.push((name.clone(), result));
        out.push(Synced {
            name,
            outcome: Outcome::Failed { error },
        });
    }
}

/// Records what this host did with each certificate of `results` under
/// `hosts/HOST/certs/NAME`: each result sealed, written in transactions of at most
/// [`PUTS_PER_TXN`](crate::fleet::coord::PUTS_PER_TXN) puts, not one request each.
pub(super) async fn report_hosts(link: &FleetLink, host: &str, results: Vec<(String, HostResult)>) {
    let mut names = Vec::with_capacity(results.len());
    let mut puts = Vec::with_capacity(results.len());
    for (name, result) in &results {
        match seal_result(link, host, name, result) {
            Ok(put) => {
                names.push(name.as_str());
                puts.push(put);
            }
            Err(e) => tracing::warn!(certificate = %name, "{e:#}"),
        }
    }
    if let Err(e) = link.fleet.put_own_all(puts).await {
        let (count, shown) = e.left(&names);
        tracing::warn!(
            "could not report {count} results to the fleet ({shown}): {}",
            e.error
        );
    }
}

/// The sealed result of certificate `name` and its key under `hosts/HOST/certs/`.
fn seal_result(
    link: &FleetLink,
    host: &str,
    name: &str,
    result: &HostResult,
) -> Result<(String, Vec<u8>)> {
    let rel = host_key(host, name);
    let place = Place::new(Purpose::HostResult, &rel, name);
    let version = u64::try_from(result.at.unix_timestamp()).unwrap_or(0);
    let sealed = envelope::seal_json(&link.key, &place, version, result)?;
    Ok((rel, sealed))
}

/// What this host serves of each configured certificate that has no result in `results`
/// yet (installed, skipped or failed at this synchronisation) and was not refused, as a
/// result: for a synchronisation that found no `seen` record of this host in etcd (a host
/// new to the fleet, or one `fleet forget-host` forgot and that runs again), so that `fleet
/// status` and the rollouts see what it serves without waiting for its next install. A
/// record the synchronisation holds (`records`) is not read again.
pub(super) fn report_served_again(
    link: &FleetLink,
    config: &Config,
    store: &Store,
    (refused, versions, records): (&BTreeMap<String, String>, &Versions, &Records),
    results: &mut Vec<(String, HostResult)>,
) {
    let reported: BTreeSet<String> = results.iter().map(|(n, _)| n.clone()).collect();
    for cert in &config.certificates {
        if reported.contains(&cert.name) || refused.contains_key(&cert.name) {
            continue;
        }
        let Ok(rec) = store.held_or_load(records, &cert.name) else {
            continue;
        };
        let Some(installed) = rec.installed.as_ref() else {
            continue;
        };
        let version = versions
            .accepted_current(&cert.name)
            .filter(|a| a.serial == installed.serial)
            .map_or(0, |a| a.value.version);
        results.push((
            cert.name.clone(),
            HostResult {
                serial: Some(installed.serial.clone()),
                version,
                at: link.clock.now(),
                since: Some(installed.installed_at),
                error: None,
                skipped: None,
            },
        ));
    }
}

/// Records when this host last synchronised, the ids of the fleet keys it opens values
/// with, and the last line of its audit log in `store` (sealed).
pub(in crate::fleet) async fn report_seen(link: &FleetLink, store: &Store, host: &str) {
    let at = link.clock.now();
    let rel = seen_key(host);
    let audit = match crate::store::audit::last_mark(store.dir()) {
        Ok(mark) => mark.map(|a| AuditMark {
            seq: a.seq,
            hash: a.hash,
        }),
        Err(e) => {
            tracing::warn!("the fleet is told no audit line of this host: {e}");
            None
        }
    };
    let doc = HostSeen {
        at,
        key_id: link.key.current().id(),
        previous_key_id: link.key.previous_in_use(),
        instance: link.instance.get().cloned(),
        audit,
    };
    let place = Place::new(Purpose::HostSeen, &rel, "");
    let version = u64::try_from(at.unix_timestamp()).unwrap_or(0);
    match envelope::seal_json(&link.key, &place, version, &doc) {
        Ok(sealed) => {
            if let Err(e) = link.fleet.put_own(&rel, sealed).await {
                tracing::warn!("could not report to the fleet: {e}");
            }
        }
        Err(e) => tracing::warn!("{e:#}"),
    }
}

/// Records what this host did with certificate `name` under `hosts/HOST/certs/NAME`.
pub(in crate::fleet) async fn report_host(
    link: &FleetLink,
    host: &str,
    name: &str,
    result: &HostResult,
) {
    match seal_result(link, host, name, result) {
        Ok((rel, bytes)) => {
            if let Err(e) = link.fleet.put_own(&rel, bytes).await {
                tracing::warn!(certificate = %name, "could not report to the fleet: {e}");
            }
        }
        Err(e) => tracing::warn!(certificate = %name, "{e:#}"),
    }
}
