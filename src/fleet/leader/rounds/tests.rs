use std::collections::BTreeMap;
use std::time::Duration;

use crate::engine::{CertReport, Outcome, RunOptions, RunReport};

use super::{following, merge_round};

#[test]
fn a_later_round_starts_nothing_the_first_round_started() {
    let first = RunOptions {
        names: vec!["www".into()],
        force: true,
        wait: Duration::from_secs(300),
        allow_orders: true,
        clear_intent: true,
        reuse_key: true,
        reinstall: true,
        ignore_backoff: true,
        replace_ended: true,
        takeover: Some("the lead of web1 ended with its lease".into()),
        ..RunOptions::default()
    };
    let later = following(&first);
    assert!(!later.force, "a forced reissue is the first round's");
    assert!(!later.replace_ended);
    assert!(!later.clear_intent);
    assert!(!later.reinstall);
    assert!(!later.reuse_key);
    assert_eq!(later.wait, Duration::ZERO, "the run waits between rounds");
    assert!(later.takeover.is_none());
    // What only selects or allows the follow-up is kept (the installs' placeholders need
    // `allow_orders`).
    assert_eq!(later.names, first.names);
    assert!(later.ignore_backoff);
    assert!(later.allow_orders);
}

fn line(name: &str, outcome: Outcome) -> CertReport {
    CertReport {
        name: name.into(),
        outcome,
        warning: None,
        revocation: None,
        ordered: None,
    }
}

fn report(lines: Vec<CertReport>) -> RunReport {
    RunReport {
        certificates: lines,
        takeover: None,
        stats: None,
    }
}

fn pending(reason: &str) -> Outcome {
    Outcome::Pending {
        reason: reason.into(),
    }
}

#[test]
fn a_failure_here_in_a_round_another_host_led_keeps_the_certificate_followed() {
    let waiting = BTreeMap::from([("c7".to_owned(), "a reissue pending at the CA".to_owned())]);
    let failed = || Outcome::Failed {
        error: "the fleet's current value of c7 cannot be opened".into(),
    };
    let mut run = report(vec![line("c7", pending("a reissue pending at the CA"))]);
    merge_round(
        &mut run,
        report(vec![line("c7", failed())]),
        false,
        &waiting,
    );
    let Outcome::Pending { reason } = &run.certificates[0].outcome else {
        panic!("followed on: {:?}", run.certificates[0].outcome);
    };
    assert!(
        reason.starts_with("a reissue pending at the CA"),
        "{reason}"
    );
    assert!(
        reason.contains("cannot be opened"),
        "the failure is said: {reason}"
    );
    assert!(reason.contains("another host leads its work"), "{reason}");

    // The next round installs what the leader published: that is the run's outcome.
    let installed = Outcome::Installed {
        certificate_id: 7,
        serial: "07".into(),
        not_after: time::OffsetDateTime::UNIX_EPOCH,
    };
    merge_round(
        &mut run,
        report(vec![line("c7", installed.clone())]),
        false,
        &waiting,
    );
    assert_eq!(run.certificates[0].outcome, installed);

    // A round this host led decides, a failure included.
    merge_round(&mut run, report(vec![line("c7", failed())]), true, &waiting);
    assert_eq!(run.certificates[0].outcome, failed());
}
