//! What a fleet run does around the leader's work: the run left to another leader, the lead
//! announced (audit log, takeover journal), the fleet's attempts recorded after the export,
//! this host's failures noted and the leader's own requests counted.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;

use crate::config::CertificateConfig;
use crate::engine::{Outcome, RunOptions, RunReport};
use crate::fleet::coord::Leadership;
use crate::fleet::follower::fleet_failures;
use crate::fleet::link::{FleetLink, reseal_forged_key_check};
use crate::fleet::schema::{attempt_of, shared_view};
use crate::store::{CertRecord, Records, Store};

/// When another host leads: each certificate this host's install of the fleet's work did not
/// decide is left to that leader (`from_sync`: those it decided), then the fleet's failures.
pub(super) async fn not_leading(
    link: &FleetLink,
    store: &Store,
    report: &mut RunReport,
    from_sync: &BTreeSet<String>,
) -> Result<()> {
    let leader = link
        .fleet
        .leader()
        .await?
        .unwrap_or_else(|| "another host".into());
    for c in &mut report.certificates {
        if matches!(c.outcome, Outcome::Pending { .. }) && !from_sync.contains(&c.name) {
            c.outcome = Outcome::Unchanged {
                reason: format!(
                    "{leader} leads the fleet and renews it; this host installs what it \
                     publishes"
                ),
            };
        }
    }
    fleet_failures(store, report);
    Ok(())
}

/// Once this host leads: the forged key check resealed, `fleet-lead-taken` in the audit log
/// and, when the run takes over a lead that ended with its lease, `fleet-takeover` in each
/// certificate's journal and the reason in the report.
pub(super) async fn announce_lead(
    link: &FleetLink,
    lead: &Leadership,
    opts: &RunOptions,
    store: &Store,
    certs: &[&CertificateConfig],
    report: &mut RunReport,
) {
    tracing::info!(host = %link.fleet.host(), "leading the fleet for this run");
    reseal_forged_key_check(link, lead).await;
    if let Err(e) = store.audit(
        None,
        "fleet-lead-taken",
        &serde_json::json!({ "host": link.fleet.host() }),
    ) {
        tracing::warn!("{e}");
    }
    if let Some(why) = &opts.takeover {
        tracing::info!("taking over the fleet's work: {why}");
        report.takeover = Some(why.clone());
        let detail = serde_json::json!({ "host": link.fleet.host(), "reason": why });
        let events: Vec<crate::store::JournalEvent<'_>> = certs
            .iter()
            .map(|cert| (cert.name.as_str(), "fleet-takeover", detail.clone()))
            .collect();
        if let Err(e) = store.journal_all(&events) {
            tracing::warn!("{e}");
        }
    }
}

/// After the leader's export: on each record this host changed and shared, the fleet's last
/// attempt is this host's (the records it did not change keep the attempt their import
/// read; `records`: the records as the export read them, each one written here replaced by
/// what was written; `not_shared`: those whose export failed).
pub(super) fn record_attempts(
    store: &Store,
    link: &FleetLink,
    records: &mut Records,
    imported: &BTreeMap<String, Option<CertRecord>>,
    not_shared: &BTreeSet<String>,
) {
    let mut changed = Vec::new();
    for (name, rec) in records.iter().filter(|(n, _)| !not_shared.contains(*n)) {
        let unchanged = imported
            .get(name)
            .and_then(Option::as_ref)
            .is_some_and(|r| *r == shared_view(rec));
        if unchanged {
            continue;
        }
        let attempt = Some(attempt_of(rec, link.fleet.host()));
        if rec.fleet != attempt {
            let mut rec = rec.clone();
            rec.fleet = attempt;
            changed.push(rec);
        }
    }
    // Written together: one sync for the batch, not one per record.
    for (name, e) in store.save_all_into(changed, records) {
        tracing::warn!(certificate = %name, "{e:#}");
    }
}

/// A failure of this host's part of the fleet's work (an import refused, an export that did
/// not reach etcd): one more on its record, for `status`, `check` and the metrics.
pub(super) fn note_host_failure(store: &Store, name: &str, error: &str) {
    let saved = store.load(name).and_then(|mut rec| {
        rec.note_host_failure(error.to_owned());
        store.save(&rec)
    });
    if let Err(e) = saved {
        tracing::warn!(certificate = %name, "could not record the failure: {e:#}");
    }
}

/// The line of each certificate in `report`, by name: looked up once per certificate, not
/// searched for (quadratic at 10,000 certificates).
pub(super) fn lines_by_name(report: &RunReport) -> std::collections::HashMap<String, usize> {
    report
        .certificates
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.clone(), i))
        .collect()
}

/// Adds `more` (the leader's own requests: a hand-over's download) to the run's `counts`.
pub(super) fn merge_requests(
    counts: &mut Vec<crate::api::RequestCount>,
    more: Vec<crate::api::RequestCount>,
) {
    for m in more {
        match counts
            .iter_mut()
            .find(|c| c.method == m.method && c.endpoint == m.endpoint && c.status == m.status)
        {
            Some(c) => c.count += m.count,
            None => counts.push(m),
        }
    }
}
