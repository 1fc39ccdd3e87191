//! What a leader's run reports of each certificate: what this host's install of the fleet's
//! work decided, what the leader's engine did, and what this host's lead leaves alone.

use std::collections::BTreeMap;

use crate::engine::{self, Outcome, RunReport};

/// What this host's install of the fleet's work (the run's synchronisation) decided, for the
/// leader's part of the run; each outcome set in `report`.
pub(super) struct FromSync {
    /// The certificates whose outcome it decided (installed, failed, or held until valid).
    pub(super) decided: std::collections::BTreeSet<String>,
    /// The fleet's certificates this host holds until they are valid: the fleet's work on
    /// them is done, so this host's lead leaves them alone (without an installed copy it
    /// would otherwise take them for certificates to reissue).
    pub(super) held: std::collections::BTreeSet<String>,
    /// The fleet's current certificates this host could not install: a fault of this host,
    /// not of the certificate, so its lead does not renew them for it (without an installed
    /// copy it would otherwise take them for certificates to reissue, for the whole fleet);
    /// `--force` still does.
    pub(super) not_here: std::collections::BTreeSet<String>,
}

/// `fleet_has`: the fleet's certificates as the synchronisation read them; `records`: this
/// host's records as it left them (a certificate this host serves the fleet's serial of is
/// installed here, whatever else failed: a refused shared record is not an install's fault).
pub(super) fn from_sync(
    synced: Vec<crate::fleet::follower::Synced>,
    fleet_has: &BTreeMap<String, (String, time::OffsetDateTime)>,
    records: &crate::store::Records,
    force: bool,
    report: &mut RunReport,
) -> FromSync {
    let mut out = FromSync {
        decided: std::collections::BTreeSet::new(),
        held: std::collections::BTreeSet::new(),
        not_here: std::collections::BTreeSet::new(),
    };
    let lines = super::bookkeeping::lines_by_name(report);
    for s in synced {
        out.decided.insert(s.name.clone());
        if matches!(s.outcome, Outcome::Pending { .. }) {
            out.held.insert(s.name.clone());
        }
        let serves = fleet_has
            .get(&s.name)
            .zip(records.get(&s.name).and_then(|r| r.installed.as_ref()))
            .is_some_and(|((serial, _), i)| crate::crypto::same_serial_hex(serial, &i.serial));
        if matches!(s.outcome, Outcome::Failed { .. })
            && fleet_has.contains_key(&s.name)
            && !serves
            && !force
        {
            out.not_here.insert(s.name.clone());
        }
        if let Some(c) = lines
            .get(&s.name)
            .and_then(|&i| report.certificates.get_mut(i))
        {
            c.outcome = s.outcome;
        }
    }
    out
}

/// The engine's outcome of each certificate in `report`, with its warning. What this host's
/// install of the fleet's certificate did (`from_sync`: installed, or failed and rolled back)
/// stays the outcome when the leader's work changed nothing.
pub(super) fn take_engine_outcomes(
    report: &mut RunReport,
    engine: Vec<engine::CertReport>,
    from_sync: &std::collections::BTreeSet<String>,
) {
    let lines = super::bookkeeping::lines_by_name(report);
    for c in engine {
        let keep_sync =
            matches!(c.outcome, Outcome::Unchanged { .. }) && from_sync.contains(&c.name);
        if let Some(r) = lines
            .get(&c.name)
            .and_then(|&i| report.certificates.get_mut(i))
        {
            if !keep_sync {
                r.outcome = c.outcome;
            }
            r.warning = c.warning;
        }
    }
}

/// Sets the outcome of `name` in `report`.
pub(super) fn set_outcome(report: &mut RunReport, name: &str, outcome: Outcome) {
    if let Some(c) = report.certificates.iter_mut().find(|c| c.name == name) {
        c.outcome = outcome;
    }
}

/// The certificates whose refused current value the run wrote back from this host's copy
/// (`repaired`; those whose write failed, `failed`, aside): no longer failed by this host's
/// synchronisation's refusal, which the write answered.
pub(super) fn written_back(
    report: &mut RunReport,
    repaired: &std::collections::BTreeSet<String>,
    failed: &std::collections::BTreeSet<String>,
) {
    for c in &mut report.certificates {
        if repaired.contains(&c.name)
            && !failed.contains(&c.name)
            && matches!(c.outcome, Outcome::Failed { .. })
        {
            c.outcome = Outcome::Unchanged {
                reason: "the fleet's current certificate was refused here and written back \
                         from this host's copy"
                    .into(),
            };
        }
    }
}

impl FromSync {
    /// Whether this host's lead leaves `name` alone: its spec refused (`refused`), held until
    /// valid, retired, or not installed here (said).
    pub(super) fn leaves_alone(
        &self,
        name: &str,
        refused: &BTreeMap<String, String>,
        retired: &std::collections::BTreeSet<String>,
    ) -> bool {
        if refused.contains_key(name) || self.held.contains(name) || retired.contains(name) {
            return true;
        }
        if self.not_here.contains(name) {
            tracing::warn!(
                certificate = %name,
                "the fleet's certificate is not installed on this host (see above); this host's \
                 lead leaves it to the fleet rather than renew it for that (`renew --force` \
                 renews it)"
            );
            return true;
        }
        false
    }
}
