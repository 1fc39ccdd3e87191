//! The one source of the operator's notifications: the events of a run — a certificate
//! installed, failing, recovered, revoked, retired, its subscription ending, a renewal order
//! prepared, a renewal whose fresh domain validation needs a person within `[validation]
//! warning_days`, a rollout in waves halted by this host's failed proof, or overridden because
//! the certificate this host served neared its end ([`halt`]) — each once
//! per change of state, measured against the states last announced (kept in
//! `state_dir/announced.json` with the events `notify_url` could not deliver yet).
//! `notify_command` and `notify_url` are both fed from here, under the same rule.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::engine::forecast::FreshValidation;
use crate::engine::{Outcome, RunReport};
use crate::store::Store;

pub(super) mod halt;

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
    Retired,
}

/// One event of the payload (see `docs/monitoring.md` for the schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Event {
    /// The configured certificate.
    certificate: String,
    /// `installed`, `failed`, `recovered`, `expiring`, `renewal_prepared`, `revoked`,
    /// `retired`, `fresh_validation_needed` or `email_validation_ends`.
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
    /// `fresh_validation_needed`: when the renewal falls due.
    #[serde(
        skip_serializing_if = "Option::is_none",
        default,
        with = "time::serde::rfc3339::option"
    )]
    due: Option<OffsetDateTime>,
    /// `fresh_validation_needed`: the names to validate again.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    domains: Vec<String>,
    /// `fresh_validation_needed`: the configured method (`EMAIL`, `DNS`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    method: Option<String>,
    /// `retired`: the archived record.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    archive: Option<String>,
    /// Where the certificate comes from: `partner` or `acme:NAME`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    issuer: Option<String>,
}

impl Event {
    /// Another host's audit log went back (`host`, `why`), as this host's daemon saw it.
    pub(super) fn audit_rewound(host: &str, why: &str, now: OffsetDateTime) -> Self {
        Self::new(
            "",
            "audit_rewound",
            now,
            format!("{host}: AUDIT REWOUND: {why}"),
        )
    }

    fn new(certificate: &str, event: &str, now: OffsetDateTime, message: String) -> Self {
        Self {
            certificate: certificate.to_owned(),
            event: event.to_owned(),
            time: now,
            message,
            certificate_id: None,
            serial: None,
            not_after: None,
            due: None,
            domains: Vec::new(),
            method: None,
            archive: None,
            issuer: None,
        }
    }

    /// `retired`: `name` was retired, its record archived in `archive`.
    fn retired(
        name: &str,
        archive: &str,
        certificate_id: Option<u64>,
        message: String,
        now: OffsetDateTime,
    ) -> Self {
        Self {
            certificate_id,
            archive: Some(archive.to_owned()),
            ..Self::new(name, "retired", now, message)
        }
    }
}

/// What the monitor knows of the run's certificates beyond the run's report.
#[derive(Debug, Default)]
pub(super) struct Facts {
    /// Certificates retired (`cert-agent retire`) that the configuration still lists: the
    /// archive of each.
    pub(super) retired: BTreeMap<String, String>,
    /// Renewals whose fresh domain validation needs a person and falls due within
    /// `[validation] warning_days`.
    pub(super) person_needed: BTreeMap<String, FreshValidation>,
    /// Certificates validated by email, and how close the end of email validation is.
    pub(super) email_sunset: BTreeMap<String, crate::engine::sunset::EmailSunset>,
    /// Each configured certificate's issuer (`partner`, `acme:NAME`), carried by its events.
    pub(super) issuers: BTreeMap<String, String>,
    /// Rollouts in waves that this host's failed proof halted: `rollout halted at wave N:
    /// HOST: reason`, per certificate.
    pub(super) halted: BTreeMap<String, String>,
    /// Installs that did not wait for their wave: why, per certificate.
    pub(super) overridden: BTreeMap<String, String>,
}

/// `announced.json`: the state last announced per certificate, and the events no delivery
/// has taken yet.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Announced {
    #[serde(default)]
    states: BTreeMap<String, State>,
    #[serde(default)]
    pub(super) undelivered: Vec<Event>,
    /// The fresh validation announced per certificate: the due date of its renewal.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    validations: BTreeMap<String, String>,
    /// The halted rollout announced per certificate ([`halt`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    halts: BTreeMap<String, String>,
    /// The rollout override announced per certificate.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    overrides: BTreeMap<String, String>,
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
    pub(super) fn advance(
        &mut self,
        report: &RunReport,
        facts: &Facts,
        now: OffsetDateTime,
    ) -> Vec<Event> {
        let (mut new, states, validations) =
            events(report, facts, &self.states, &self.validations, now);
        self.states = states;
        self.validations = validations;
        new.extend(halt::events(report, facts, &mut self.halts, now));
        new.extend(halt::overridden(report, facts, &mut self.overrides, now));
        new
    }

    /// `cert-agent retire` retired `name`: its `retired` event, unless one was announced
    /// already; the state becomes retired.
    pub(super) fn retire(
        &mut self,
        name: &str,
        archive: &str,
        certificate_id: Option<u64>,
        message: String,
        now: OffsetDateTime,
    ) -> Option<Event> {
        let before = self.states.insert(name.to_owned(), State::Retired);
        self.validations.remove(name);
        (before != Some(State::Retired))
            .then(|| Event::retired(name, archive, certificate_id, message, now))
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

/// The events of `report` (a run at `now`, `facts` beside it) against the states and the
/// fresh validations last announced; both after it.
fn events(
    report: &RunReport,
    facts: &Facts,
    announced: &BTreeMap<String, State>,
    validations: &BTreeMap<String, String>,
    now: OffsetDateTime,
) -> (
    Vec<Event>,
    BTreeMap<String, State>,
    BTreeMap<String, String>,
) {
    let mut next = announced.clone();
    let mut next_validations = validations.clone();
    let mut out = Vec::new();
    for c in &report.certificates {
        let before = announced.get(&c.name).copied();
        let event = |event: &str, message: String| Event::new(&c.name, event, now, message);
        if matches!(c.outcome, Outcome::Planned { .. }) {
            continue;
        }
        // Retired while the configuration lists it: said once, and nothing else after it.
        if let Some(archive) = facts.retired.get(&c.name) {
            if before != Some(State::Retired) {
                out.push(Event::retired(
                    &c.name,
                    archive,
                    None,
                    format!(
                        "{}: retired ({archive}): nothing is managed for it; remove its \
                         [[certificate]] entry from the configuration",
                        c.name
                    ),
                    now,
                ));
            }
            next.insert(c.name.clone(), State::Retired);
            next_validations.remove(&c.name);
            continue;
        }
        out.extend(validation_events(
            &c.name,
            facts,
            validations,
            &mut next_validations,
            now,
        ));
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
        if let Some(r) = revoked {
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
    for e in &mut out {
        e.issuer = facts.issuers.get(&e.certificate).cloned();
    }
    (out, next, next_validations)
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

/// The validation events of certificate `name`: a renewal whose fresh validation needs a
/// person, said once per renewal (its due date); `email_validation_ends`, said once (kept
/// beside the fresh validations under its own key) until it no longer validates by email.
fn validation_events(
    name: &str,
    facts: &Facts,
    validations: &BTreeMap<String, String>,
    next_validations: &mut BTreeMap<String, String>,
    now: OffsetDateTime,
) -> Vec<Event> {
    let mut out = Vec::new();
    match facts.person_needed.get(name) {
        Some(f) => {
            let due = f.due.date().to_string();
            if validations.get(name) != Some(&due) {
                out.push(Event {
                    due: Some(f.due),
                    domains: f.domains.clone(),
                    method: Some(f.method.as_str().to_owned()),
                    ..Event::new(name, "fresh_validation_needed", now, f.describe())
                });
            }
            next_validations.insert(name.to_owned(), due);
        }
        None => {
            next_validations.remove(name);
        }
    }
    let key = format!("{name}\u{0}email-sunset");
    let Some(sunset) = facts.email_sunset.get(name) else {
        next_validations.remove(&key);
        return out;
    };
    if !validations.contains_key(&key) {
        out.push(Event {
            due: Some(crate::engine::sunset::EMAIL_SUNSET.midnight().assume_utc()),
            method: Some("EMAIL".into()),
            ..Event::new(
                name,
                "email_validation_ends",
                now,
                format!("{name}: {}", sunset.message),
            )
        });
    }
    next_validations.insert(key, "announced".into());
    out
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
                ordered: None,
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
            let (events, next, _) = events(
                &report(outcome, warning),
                &Facts::default(),
                &state,
                &BTreeMap::new(),
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
                ordered: None,
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
            let (events, next, _) = events(
                &run,
                &Facts::default(),
                &state,
                &BTreeMap::new(),
                OffsetDateTime::UNIX_EPOCH,
            );
            let got: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
            assert_eq!(got, want, "row {i}");
            state = next;
        }
    }

    /// A retirement is said once: by `retire` or by the first run that finds the certificate
    /// retired, never by the runs after it (which fail on it), and no `failed` for it.
    #[test]
    fn a_retirement_is_announced_once() {
        let refused = || Outcome::Failed {
            error: "certificate 'www' was retired".into(),
        };
        let facts = Facts {
            retired: [(
                "www".to_owned(),
                "/var/lib/cert-agent/retired/www.json".to_owned(),
            )]
            .into(),
            ..Facts::default()
        };
        let now = OffsetDateTime::UNIX_EPOCH;
        let (first, states, _) = events(
            &report(refused(), None),
            &facts,
            &BTreeMap::new(),
            &BTreeMap::new(),
            now,
        );
        let got: Vec<(&str, Option<&str>)> = first
            .iter()
            .map(|e| (e.event.as_str(), e.archive.as_deref()))
            .collect();
        assert_eq!(
            got,
            [("retired", Some("/var/lib/cert-agent/retired/www.json"))]
        );
        let (again, _, _) = events(
            &report(refused(), None),
            &facts,
            &states,
            &BTreeMap::new(),
            now,
        );
        assert!(again.is_empty(), "{again:?}");

        // Said by `retire` itself: the runs after it say nothing.
        let mut log = Announced::default();
        let said = log.retire("www", "/r/www.json", Some(7), "retired".into(), now);
        assert_eq!(said.map(|e| e.certificate_id), Some(Some(7)));
        assert!(
            log.advance(&report(refused(), None), &facts, now)
                .is_empty()
        );
        assert!(
            log.retire("www", "/r/www.json", None, "again".into(), now)
                .is_none()
        );
    }

    /// A renewal whose fresh validation needs a person is said once per renewal (its due
    /// date), with the due date, the names and the method; the next renewal that needs one is
    /// said again.
    #[test]
    fn a_fresh_validation_needing_a_person_is_announced_once_per_renewal() {
        let fine = || Outcome::Unchanged {
            reason: "up to date".into(),
        };
        let needs = |due: OffsetDateTime| Facts {
            person_needed: [(
                "www".to_owned(),
                FreshValidation {
                    due,
                    domains: vec!["www.example.com".into()],
                    reuse_days: 10,
                    method: crate::engine::forecast::ValidationMethod::Dns,
                    automatic: false,
                },
            )]
            .into(),
            ..Facts::default()
        };
        let first_due = time::macros::datetime!(2029-04-02 00:00 UTC);
        let later_due = time::macros::datetime!(2029-05-10 00:00 UTC);
        let mut log = Announced::default();
        let now = OffsetDateTime::UNIX_EPOCH;
        // rows: (what the monitor knows, events announced)
        let rows = [
            (Facts::default(), vec![]),
            (needs(first_due), vec!["fresh_validation_needed"]),
            (needs(first_due), vec![]),
            (Facts::default(), vec![]),
            (needs(later_due), vec!["fresh_validation_needed"]),
            (needs(later_due), vec![]),
        ];
        for (i, (facts, want)) in rows.into_iter().enumerate() {
            let new = log.advance(&report(fine(), None), &facts, now);
            let got: Vec<&str> = new.iter().map(|e| e.event.as_str()).collect();
            assert_eq!(got, want, "row {i}");
            if let Some(e) = new.first() {
                assert_eq!(e.method.as_deref(), Some("DNS"));
                assert_eq!(e.domains, ["www.example.com"]);
                assert!(
                    e.due.is_some() && e.message.contains("needs a person"),
                    "{e:?}"
                );
            }
        }
        // What is kept reads back.
        let bytes = serde_json::to_vec(&log).unwrap();
        assert_eq!(Announced::parse(&bytes), Some(log));
    }
}
