//! The one source of the operator's notifications: the events of a run — a certificate
//! installed, failing, recovered, its subscription ending, a renewal order prepared — each
//! once per change of state, measured against the states last announced (kept in
//! `state_dir/announced.json` with the events `notify_url` could not deliver yet).
//! `notify_command` and `notify_url` are both fed from here, under the same rule.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::engine::{Outcome, RunReport};
use crate::store::Store;

/// File of the announced states.
const STATE_FILE: &str = "announced.json";

/// What a certificate's last announced state was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum State {
    Ok,
    Failed,
    Expiring,
    RenewalPrepared,
    Revoked,
}

/// One event of the payload (see `docs/monitoring.md` for the schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Event {
    /// The configured certificate.
    certificate: String,
    /// `installed`, `failed`, `recovered`, `expiring`, `renewal_prepared` or `revoked`.
    pub(super) event: String,
    /// When the run that saw it ran.
    #[serde(with = "time::serde::rfc3339")]
    time: OffsetDateTime,
    /// What happened, as the run reported it.
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    serial: Option<String>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        default,
        with = "time::serde::rfc3339::option"
    )]
    not_after: Option<OffsetDateTime>,
}

/// `announced.json`: the state last announced per certificate, and the events no delivery
/// has taken yet.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Announced {
    #[serde(default)]
    states: BTreeMap<String, State>,
    #[serde(default)]
    pub(super) undelivered: Vec<Event>,
}

impl Announced {
    /// What `state_dir/announced.json` holds (nothing when it is missing or damaged).
    pub(super) fn load(store: &Store) -> Self {
        std::fs::read(store.dir().join(STATE_FILE))
            .ok()
            .and_then(|b| Self::parse(&b))
            .unwrap_or_default()
    }

    /// `announced.json` holding `bytes`: `None` when it does not read (then nothing was
    /// announced).
    pub(super) fn parse(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }

    /// The events of `report` (a run at `now`) since the states last announced, which
    /// become this run's.
    pub(super) fn advance(&mut self, report: &RunReport, now: OffsetDateTime) -> Vec<Event> {
        let (new, states) = events(report, &self.states, now);
        self.states = states;
        new
    }

    /// Writes the states and the undelivered events; a failure is logged.
    pub(super) fn save(&self, store: &Store) {
        let path = store.dir().join(STATE_FILE);
        match serde_json::to_vec(self) {
            Ok(bytes) => {
                if let Err(e) = crate::fsutil::write_atomic(&path, &bytes, 0o600) {
                    tracing::warn!("could not record the announced events: {e}");
                }
            }
            Err(e) => tracing::warn!("could not record the announced events: {e}"),
        }
    }
}

/// The events of `report` (a run at `now`) against the states last announced; the states
/// after it.
fn events(
    report: &RunReport,
    announced: &BTreeMap<String, State>,
    now: OffsetDateTime,
) -> (Vec<Event>, BTreeMap<String, State>) {
    let mut next = announced.clone();
    let mut out = Vec::new();
    for c in &report.certificates {
        let before = announced.get(&c.name).copied();
        let event = |event: &str, message: String| Event {
            certificate: c.name.clone(),
            event: event.to_owned(),
            time: now,
            message,
            certificate_id: None,
            serial: None,
            not_after: None,
        };
        let warned = c.warning.as_ref().map(|w| {
            if w.contains("renewal order is prepared") {
                (State::RenewalPrepared, w)
            } else {
                (State::Expiring, w)
            }
        });
        // A revoked certificate is announced once, whatever the run then does about it; while
        // its replacement is not installed, nothing else is announced for it.
        let revoked = c.revocation.as_ref().filter(|r| r.state == "revoked");
        if let Some(r) = revoked
            && !matches!(c.outcome, Outcome::Planned { .. })
        {
            if before != Some(State::Revoked) {
                out.push(event("revoked", r.detail.clone()));
            }
            if !matches!(c.outcome, Outcome::Installed { .. }) {
                next.insert(c.name.clone(), State::Revoked);
                continue;
            }
        }
        let (state, ev) = match &c.outcome {
            Outcome::Installed {
                certificate_id,
                serial,
                not_after,
            } => (
                State::Ok,
                Some(Event {
                    certificate_id: Some(*certificate_id),
                    serial: Some(serial.clone()),
                    not_after: Some(*not_after),
                    ..event("installed", c.line())
                }),
            ),
            Outcome::Failed { error } => (
                State::Failed,
                (before != Some(State::Failed)).then(|| event("failed", error.clone())),
            ),
            Outcome::Unchanged { .. } | Outcome::Pending { .. } => match warned {
                Some((state, w)) => (
                    state,
                    (before != Some(state)).then(|| {
                        let name = match state {
                            State::RenewalPrepared => "renewal_prepared",
                            _ => "expiring",
                        };
                        event(name, w.clone())
                    }),
                ),
                None => (
                    State::Ok,
                    (before == Some(State::Failed)).then(|| event("recovered", c.line())),
                ),
            },
            Outcome::Planned { .. } => continue,
        };
        out.extend(ev);
        next.insert(c.name.clone(), state);
    }
    (out, next)
}

/// For the fuzz target `fleet_values`: `data` as `announced.json` — refused or read, never a
/// panic; what reads is written and read back the same. Not an interface of the agent.
#[doc(hidden)]
pub fn fuzz_announced(data: &[u8]) {
    if let Some(a) = Announced::parse(data) {
        let Ok(bytes) = serde_json::to_vec(&a) else {
            panic!("what reads is written");
        };
        assert_eq!(
            Announced::parse(&bytes).as_ref(),
            Some(&a),
            "reads back the same"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::CertReport;

    fn report(outcome: Outcome, warning: Option<&str>) -> RunReport {
        RunReport {
            certificates: vec![CertReport {
                name: "www".into(),
                outcome,
                warning: warning.map(str::to_owned),
                revocation: None,
            }],
            stats: None,
            takeover: None,
        }
    }

    #[test]
    fn each_change_is_announced_once() {
        let failed = || Outcome::Failed {
            error: "could not read certificate 7".into(),
        };
        let fine = || Outcome::Unchanged {
            reason: "up to date".into(),
        };
        let mut state = BTreeMap::new();
        // rows: (outcome, warning, events announced)
        let rows: Vec<(Outcome, Option<&str>, Vec<&str>)> = vec![
            (fine(), None, vec![]),
            (failed(), None, vec!["failed"]),
            (failed(), None, vec![]),
            (fine(), None, vec!["recovered"]),
            (
                fine(),
                Some("the subscription ends on 2027-01-01 (50 days); …"),
                vec!["expiring"],
            ),
            (
                fine(),
                Some("the subscription ends on 2027-01-01 (49 days); …"),
                vec![],
            ),
            (
                fine(),
                Some("x: a renewal order is prepared (nothing is billed …)"),
                vec!["renewal_prepared"],
            ),
            (
                Outcome::Installed {
                    certificate_id: 7,
                    serial: "0A".into(),
                    not_after: OffsetDateTime::UNIX_EPOCH,
                },
                None,
                vec!["installed"],
            ),
            (fine(), None, vec![]),
        ];
        for (i, (outcome, warning, want)) in rows.into_iter().enumerate() {
            let (events, next) = events(
                &report(outcome, warning),
                &state,
                OffsetDateTime::UNIX_EPOCH,
            );
            let got: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
            assert_eq!(got, want, "row {i}");
            state = next;
        }
    }

    #[test]
    fn a_revocation_is_announced_once() {
        let revoked = |outcome: Outcome| RunReport {
            certificates: vec![CertReport {
                name: "www".into(),
                outcome,
                warning: None,
                revocation: Some(crate::engine::RevocationNote {
                    state: "revoked".into(),
                    detail: "serial 0A was revoked".into(),
                }),
            }],
            stats: None,
            takeover: None,
        };
        let pending = || Outcome::Pending {
            reason: "reissue sent".into(),
        };
        let failed = || Outcome::Failed {
            error: "orders are not allowed".into(),
        };
        let installed = || Outcome::Installed {
            certificate_id: 7,
            serial: "0B".into(),
            not_after: OffsetDateTime::UNIX_EPOCH,
        };
        let mut state = BTreeMap::new();
        // rows: (the run, events announced)
        let rows: Vec<(RunReport, Vec<&str>)> = vec![
            (revoked(pending()), vec!["revoked"]),
            (revoked(failed()), vec![]),
            (revoked(pending()), vec![]),
            (report(installed(), None), vec!["installed"]),
            // Revoked and replaced in one run: both said, once.
            (revoked(installed()), vec!["revoked", "installed"]),
        ];
        for (i, (run, want)) in rows.into_iter().enumerate() {
            let (events, next) = events(&run, &state, OffsetDateTime::UNIX_EPOCH);
            let got: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
            assert_eq!(got, want, "row {i}");
            state = next;
        }
    }
}
