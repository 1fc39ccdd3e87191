//! `rollout_halted`: a rollout in waves that this host's failed proof halted, announced once
//! per halt, by that host only — the hosts it keeps back note the halt (`check`) but say
//! nothing, so that the fleet sends one notification.

use std::collections::BTreeMap;

use time::OffsetDateTime;

use crate::engine::RunReport;

use super::{Event, Facts};

/// Whether `halt` (`rollout halted at wave N: HOST: reason`) names `host` as the host whose
/// proof failed.
pub(in crate::monitor) fn names_host(halt: &str, host: &str) -> bool {
    halt.strip_prefix("rollout halted at wave ")
        .and_then(|r| r.split_once(": "))
        .and_then(|(_, rest)| rest.strip_prefix(host))
        .is_some_and(|r| r.starts_with(": "))
}

/// The `rollout_halted` events of `report` (a run at `now`) against the halts last announced
/// per certificate, `announced`, which become the run's.
pub(super) fn events(
    report: &RunReport,
    facts: &Facts,
    announced: &mut BTreeMap<String, String>,
    now: OffsetDateTime,
) -> Vec<Event> {
    once(
        "rollout_halted",
        &facts.halted,
        (report, facts),
        announced,
        now,
    )
}

/// The `rollout_overridden` events: a rollout that stopped holding a certificate back from
/// this host because the one it served neared its end, announced once per reason.
pub(super) fn overridden(
    report: &RunReport,
    facts: &Facts,
    announced: &mut BTreeMap<String, String>,
    now: OffsetDateTime,
) -> Vec<Event> {
    once(
        "rollout_overridden",
        &facts.overridden,
        (report, facts),
        announced,
        now,
    )
}

/// The `kind` events of `report`, one per certificate whose text in `of` differs from the
/// one last announced.
fn once(
    kind: &str,
    of: &BTreeMap<String, String>,
    (report, facts): (&RunReport, &Facts),
    announced: &mut BTreeMap<String, String>,
    now: OffsetDateTime,
) -> Vec<Event> {
    let mut out = Vec::new();
    for c in &report.certificates {
        match of.get(&c.name) {
            Some(h) => {
                if announced.get(&c.name) != Some(h) {
                    out.push(Event {
                        issuer: facts.issuers.get(&c.name).cloned(),
                        ..Event::new(&c.name, kind, now, h.clone())
                    });
                }
                announced.insert(c.name.clone(), h.clone());
            }
            None => {
                announced.remove(&c.name);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{CertReport, Outcome};

    #[test]
    fn a_halt_is_announced_once_by_the_host_whose_proof_failed() {
        let halt = "rollout halted at wave 0: web2: 127.0.0.1:443 (SNI b.test) serves serial 09";
        assert!(names_host(halt, "web2"));
        assert!(!names_host(halt, "web"), "a prefix of the name");
        assert!(!names_host(halt, "web3"));
        assert!(!names_host("the last run failed: web2: x", "web2"));
        let report = RunReport {
            certificates: vec![CertReport {
                name: "www".into(),
                outcome: Outcome::Unchanged {
                    reason: "up to date".into(),
                },
                warning: None,
                revocation: None,
                ordered: None,
            }],
            stats: None,
            takeover: None,
        };
        let halted = Facts {
            halted: [("www".to_owned(), halt.to_owned())].into(),
            ..Facts::default()
        };
        let now = OffsetDateTime::UNIX_EPOCH;
        let mut announced = BTreeMap::new();
        let kinds = |e: Vec<Event>| e.into_iter().map(|e| e.event).collect::<Vec<_>>();
        let first = events(&report, &halted, &mut announced, now);
        assert_eq!(first[0].message, halt);
        assert_eq!(kinds(first), ["rollout_halted"]);
        assert!(events(&report, &halted, &mut announced, now).is_empty());
        // Gone (proved again), then halted again: announced again.
        assert!(events(&report, &Facts::default(), &mut announced, now).is_empty());
        assert_eq!(
            kinds(events(&report, &halted, &mut announced, now)),
            ["rollout_halted"]
        );
    }
}
