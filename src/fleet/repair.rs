//! A leader's repair of a fleet value it refuses. A spec, a shared record or a current
//! certificate that does not open (garbage, not sealed, moved from another key) or is older than what
//! this host accepted (a replay) would otherwise block its certificate until a person deletes
//! it. When the leader holds the copy it accepted itself — the spec it agreed with under the
//! same configuration, the shared record its state directory took whole at that version, the
//! certificate it serves as the one it accepted —
//! and no host's sealed manifest entry vouches for a newer version, it writes that copy back
//! sealed, at a version above both (its own and every host's), says so (a warning naming the
//! etcd key, a `fleet-value-repaired` journal and audit line) and goes on with the
//! certificate in the same run. Without such a copy the refusal stands.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use anyhow::Result;

use super::coord::{Expect, Leadership, Written};
use super::envelope::{self, Place, Purpose};
use super::link::{FleetLink, spec_digest};
use super::manifest;
use super::schema::{Spec, shared_view, spec_key};
use super::versions::{Versions, Vouched, digest};
use crate::config::CertificateConfig;
use crate::store::{CertRecord, Store};

/// A value of the fleet this host refused: it does not open, or it is older than one
/// accepted. What a leader holding its own accepted copy repairs.
#[derive(Debug)]
pub(super) struct Refused(pub(super) anyhow::Error);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for Refused {}

/// Whether `e` is a refused value ([`Refused`]).
pub(super) fn is_refused(e: &anyhow::Error) -> bool {
    e.downcast_ref::<Refused>().is_some()
}

/// The digest of what the fleet shares of `rec` but its failures (a synchronisation notes
/// this host's own, the refusal among them, in the record's times of failure).
pub(super) fn view_digest(rec: &CertRecord) -> String {
    let mut view = shared_view(rec);
    view.clear_failures();
    view.last_failed_at = None;
    digest(&serde_json::to_vec(&view).unwrap_or_default())
}

/// The highest versions of `name` any entry of the fleet's manifest vouches for (entries that
/// do not open vouch for nothing).
async fn fleet_vouched(link: &FleetLink, name: &str) -> Result<Vouched> {
    let (entries, _) = manifest::read_entries(link).await?;
    let floors = manifest::floors(&entries, &[name.to_owned()]);
    Ok(floors.get(name).map(|f| f.versions).unwrap_or_default())
}

/// The version of the shared record of `name` this host may write back in place of a refused
/// one: the one it accepted, when `local` (its record) is that very copy and no host vouches
/// for a newer shared record or tombstone (`fleet`). Otherwise why not.
pub(super) fn held_state(
    versions: &Versions,
    name: &str,
    local: &CertRecord,
    fleet: Vouched,
) -> Result<u64, String> {
    let v = versions.of(name);
    let accepted = v
        .state
        .map(|a| a.version)
        .ok_or("this host accepted no shared record of it")?;
    match v.held {
        Some(h) if h.version == accepted && h.record == view_digest(local) => {}
        _ => {
            return Err(format!(
                "this host's record is not the version {accepted} it accepted"
            ));
        }
    }
    let newest = fleet.state.max(fleet.tombstone);
    if newest > accepted {
        return Err(format!(
            "the fleet's hosts vouch for version {newest}, newer than this host's {accepted}"
        ));
    }
    Ok(accepted)
}

/// After a lead's import refused the shared record of `name` (`error`): whether this host
/// writes its own copy back (the export shares it, at a version above every one accepted).
/// Said either way; a repair noted in the journal and the audit log.
pub(super) async fn state(
    link: &FleetLink,
    store: &Store,
    versions: &Versions,
    local: Option<&CertRecord>,
    name: &str,
    error: &anyhow::Error,
) -> bool {
    if !is_refused(error) {
        return false;
    }
    let key = link.fleet.key(&super::schema::state_key(name));
    let held = match (local, fleet_vouched(link, name).await) {
        (None, _) => Err("this host has no record of it".to_owned()),
        (_, Err(e)) => Err(format!("{e:#}")),
        (Some(local), Ok(fleet)) => held_state(versions, name, local, fleet),
    };
    match held {
        Ok(version) => {
            let next = versions.next_state(name, 0).unwrap_or(version);
            repaired(store, name, &key, "shared record", version, next, error);
            true
        }
        Err(why) => {
            tracing::warn!(certificate = %name, "{key} is not written back from this host's copy: {why}");
            false
        }
    }
}

/// Whether the current certificate this host serves (`serial`) may be written back in place
/// of a refused value: the one it accepted last (`accepted`: its version and serial), with no
/// host vouching for a newer current certificate. `Ok(version accepted)`, or why not.
pub(super) async fn current(
    link: &FleetLink,
    accepted: Option<(u64, String)>,
    name: &str,
    serial: &str,
) -> Result<u64, String> {
    let accepted = accepted
        .filter(|(_, s)| crate::crypto::same_serial_hex(s, serial))
        .map(|(v, _)| v)
        .ok_or("the certificate this host serves is not the one it accepted last")?;
    let fleet = fleet_vouched(link, name)
        .await
        .map_err(|e| format!("{e:#}"))?;
    if fleet.current > accepted {
        return Err(format!(
            "the fleet's hosts vouch for version {}, newer than this host's {accepted}",
            fleet.current
        ));
    }
    Ok(accepted)
}

/// Once this host leads: the spec of each of the run's certificates (`certs`) refused
/// (`refused`) because it does not open, when this host agreed with the fleet's spec under
/// this very configuration before, written back sealed (a spec has one version, 1) in place
/// of the value refused, fenced by the lead; taken out of `refused`. A spec that opens and
/// differs from this host's configuration stays refused. Returns the certificates repaired.
pub(super) async fn specs(
    link: &FleetLink,
    lead: &Leadership,
    store: &Store,
    versions: &Versions,
    certs: &[&CertificateConfig],
    refused: &mut BTreeMap<String, String>,
) -> BTreeSet<String> {
    let mut done = BTreeSet::new();
    let refused_here: Vec<&CertificateConfig> = certs
        .iter()
        .filter(|c| refused.contains_key(&c.name))
        .copied()
        .collect();
    for cert in refused_here {
        let agreed = versions.of(&cert.name).spec;
        if agreed.is_none_or(|a| a.config != spec_digest(link, cert)) {
            continue;
        }
        let rel = spec_key(&cert.name);
        let place = Place::new(Purpose::Spec, &rel, &cert.name);
        let Ok(Some((value, rev))) = link.fleet.get(&rel).await else {
            continue;
        };
        let Err(error) = envelope::open_json::<Spec>(&link.key, &link.fleet, &place, &value) else {
            continue;
        };
        let mine = Spec::of(cert, link.fleet.host());
        let written = match envelope::seal_json(&link.key, &place, 1, &mine) {
            Ok(sealed) => lead.put(&rel, sealed, Expect::Revision(rev)).await,
            Err(e) => {
                tracing::warn!(certificate = %cert.name, "{e:#}");
                continue;
            }
        };
        match written {
            Ok(Written::Done(_)) => {
                let key = link.fleet.key(&rel);
                repaired(store, &cert.name, &key, "spec", 1, 1, &error);
                refused.remove(&cert.name);
                done.insert(cert.name.clone());
            }
            Ok(Written::Conflict(_)) => {}
            Err(e) => tracing::warn!(certificate = %cert.name, "{e}"),
        }
    }
    done
}

/// Says that the `what` of `name` at `key` was refused and written back from this host's copy
/// of `version` at `next`: a warning, and a `fleet-value-repaired` line in the journal (and so
/// the audit log).
pub(super) fn repaired(
    store: &Store,
    name: &str,
    key: &str,
    what: &str,
    version: u64,
    next: u64,
    error: &anyhow::Error,
) {
    tracing::warn!(
        certificate = %name,
        "{error:#}; the leader writes back its own sealed copy of the {what} (the version {version} \
         it accepted) at version {next}: {key} repaired"
    );
    let detail = serde_json::json!({
        "key": key, "value": what, "held_version": version, "version": next,
    });
    if let Err(e) = store.journal(name, "fleet-value-repaired", detail) {
        tracing::warn!(certificate = %name, "{e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_copy_accepted_and_newest_in_the_fleet_is_written_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Versions::load(dir.path()).unwrap();
        let rec = CertRecord {
            name: "www".into(),
            ..CertRecord::default()
        };
        let at = |s: u64, t: u64| Vouched {
            state: s,
            current: 0,
            tombstone: t,
        };
        let e = held_state(&v, "www", &rec, at(0, 0)).unwrap_err();
        assert!(e.contains("accepted no shared record"), "{e}");
        v.accept_state("www", "k", 4, b"four").unwrap();
        let e = held_state(&v, "www", &rec, at(0, 0)).unwrap_err();
        assert!(e.contains("not the version 4"), "{e}");
        v.hold_state("www", 4, view_digest(&rec));
        assert_eq!(held_state(&v, "www", &rec, at(4, 0)), Ok(4));
        // Another host accepted a newer record, or a tombstone: this copy is older.
        assert!(held_state(&v, "www", &rec, at(5, 0)).is_err());
        assert!(held_state(&v, "www", &rec, at(3, 5)).is_err());
        // The record changed since (not shared): not the copy accepted.
        let mut changed = rec.clone();
        changed.partner.set_order(crate::store::OrderRef {
            certificate_id: 7,
            order_id: None,
            placed_at: time::OffsetDateTime::UNIX_EPOCH,
            adopted: false,
        });
        assert!(held_state(&v, "www", &changed, at(4, 0)).is_err());
        // What only this host keeps of it is not the fleet's.
        let mut local = rec.clone();
        local.host_failures = 3;
        local.failures = 2;
        local.last_failed_at = Some(time::OffsetDateTime::UNIX_EPOCH);
        assert_eq!(held_state(&v, "www", &local, at(0, 0)), Ok(4));
        // Accepted a newer version without taking it whole: not held.
        v.accept_state("www", "k", 6, b"six").unwrap();
        assert!(held_state(&v, "www", &rec, at(0, 0)).is_err());
    }

    #[test]
    fn only_a_refused_value_is_repaired() {
        let refused = anyhow::Error::new(Refused(anyhow::anyhow!("garbage")));
        assert!(is_refused(&refused));
        assert!(is_refused(&refused.context("in the import")));
        assert!(!is_refused(&anyhow::anyhow!("disk full")));
    }
}
