//! A certificate retired for the fleet (`cert-agent retire NAME` on the leader): its tombstone
//! `certs/NAME/retired`, opened and checked on every host at each synchronisation. One that
//! opens makes the host retire NAME the way `cert-agent retire` does on a single host (the
//! validation files withdrawn, the record archived under `state_dir/retired/`, the installed
//! files removed when the tombstone says so — never one the web server still names); the
//! fleet's certificate of NAME is never installed again, nor ordered, reissued or published by
//! a leader, while the tombstone is there. One that does not open (written without the fleet
//! key, moved from another key, certificate or purpose, altered, or older than the shared
//! record this host accepted) is refused, naming its key, and fails nothing else: the
//! certificate goes on as if there were no tombstone.

use std::collections::BTreeMap;

use anyhow::Result;

use super::{Synced, View};
use crate::config::{CertificateConfig, Config};
use crate::engine::retire::{self, RetireOptions};
use crate::engine::{Job, Outcome};
use crate::fleet::envelope::{self, Place, Purpose};
use crate::fleet::link::FleetLink;
use crate::fleet::schema::{Tombstone, printable, retired_key};
use crate::fleet::versions::{Seen, Versions};
use crate::store::Store;

/// The tombstones of the configured certificates that open, by name; each one refused is a
/// problem of its certificate only.
pub(in crate::fleet) fn open_tombstones(
    link: &FleetLink,
    config: &Config,
    view: &mut View,
) -> BTreeMap<String, Tombstone> {
    let mut out = BTreeMap::new();
    for cert in &config.certificates {
        let Some(value) = view.docs.get(&retired_key(&cert.name)).cloned() else {
            continue;
        };
        match open_tombstone(link, &mut view.versions, &cert.name, &value) {
            Ok(t) => {
                out.insert(cert.name.clone(), t);
            }
            Err(e) => view.problem(
                &cert.name,
                format!(
                    "{e:#}; '{}' is not retired: this host goes on with it as if there were no \
                     tombstone",
                    cert.name
                ),
            ),
        }
    }
    out
}

/// Opens the tombstone `value` of `name`: sealed for its key, certificate and purpose, at a
/// version higher than the shared record this host accepted (the tombstone takes the record's
/// place, so a tombstone put back after the certificate came back is refused as a replay).
pub(in crate::fleet) fn open_tombstone(
    link: &FleetLink,
    versions: &mut Versions,
    name: &str,
    value: &[u8],
) -> Result<Tombstone> {
    let rel = retired_key(name);
    let place = Place::new(Purpose::Retired, &rel, name);
    let (version, t): (u64, Tombstone) =
        envelope::open_json(&link.key, &link.fleet, &place, value)?;
    if versions.seen_state(name, value) != Seen::Same {
        versions.accept_tombstone(name, &link.fleet.key(&rel), version, value)?;
    }
    Ok(t)
}

/// `refused` with every retired certificate added: what the validation files and the pending
/// CSRs leave alone.
pub(super) fn with_retired(
    refused: &BTreeMap<String, String>,
    retired: &BTreeMap<String, Tombstone>,
) -> BTreeMap<String, String> {
    let mut all = refused.clone();
    for name in retired.keys() {
        all.entry(name.clone())
            .or_insert_with(|| format!("'{name}' was retired for the fleet"));
    }
    all
}

/// Retires `cert` on this host, as the tombstone `t` says, unless it is retired here already;
/// the outcome is the one every later run gives while the configuration still lists it.
pub(super) async fn retire_here(
    link: &FleetLink,
    config: &Config,
    store: &Store,
    (idx, cert): (usize, &CertificateConfig),
    t: &Tombstone,
) -> Synced {
    Synced {
        name: cert.name.clone(),
        outcome: outcome(link, config, store, (idx, cert), t).await,
    }
}

async fn outcome(
    link: &FleetLink,
    config: &Config,
    store: &Store,
    (idx, cert): (usize, &CertificateConfig),
    t: &Tombstone,
) -> Outcome {
    let first = match archive(link, config, store, cert, t).await {
        Ok(first) => first,
        Err(e) => {
            return Outcome::Failed {
                error: format!(
                    "'{}' was retired for the fleet by {}, but not here yet: {e:#}",
                    cert.name,
                    printable(&t.by)
                ),
            };
        }
    };
    // The rule of a single host, one piece of code: a run refuses a retired certificate its
    // configuration still lists.
    match Job::load(store, cert, idx, link.clock) {
        Err(e) if first => Outcome::Failed {
            error: format!(
                "retired for the fleet by {} at {}: {e:#}",
                printable(&t.by),
                crate::clock::rfc3339(t.retired_at)
            ),
        },
        Err(e) => Outcome::Failed {
            error: format!("{e:#}"),
        },
        Ok(_) => Outcome::Unchanged {
            reason: format!("'{}' was retired for the fleet", cert.name),
        },
    }
}

/// Archives `cert` here (`false`: archived before, nothing left to do).
async fn archive(
    link: &FleetLink,
    config: &Config,
    store: &Store,
    cert: &CertificateConfig,
    t: &Tombstone,
) -> Result<bool> {
    let name = cert.name.as_str();
    let live = store.record_path(name)?;
    if !live.exists() && store.retired(name).is_some() {
        return Ok(false);
    }
    // An order intent in the record is the fleet's, decided by the leader that retired it.
    let in_plan = RetireOptions {
        cancel: false,
        remove_files: t.remove_files,
        force: true,
    };
    let mut plan = retire::plan(config, store, name, in_plan)?;
    let looking = RetireOptions {
        force: false,
        ..in_plan
    };
    plan.guard(config, store, None, looking, false).await?;
    let report = retire::finish(plan, store, None, link.clock.now()).await?;
    for w in &report.warnings {
        tracing::warn!(certificate = %name, "{w}");
    }
    store.journal(
        name,
        "fleet-retired",
        serde_json::json!({
            "by": t.by,
            "retired_at": crate::clock::rfc3339(t.retired_at),
            "remove_files": t.remove_files,
            "cancel": t.cancel,
            "archive": report.archive,
        }),
    )?;
    tracing::info!(
        certificate = %name,
        by = %printable(&t.by),
        archive = %report.archive.display(),
        "retired for the fleet: archived here"
    );
    Ok(true)
}
