//! The planner's timing rules: the due moment, the spread, the warning, the blackout,
//! forced reissues, ended orders, prepared renewals and the backoff.

use super::*;

#[test]
fn due_is_the_earlier_of_days_left_and_a_third_of_the_lifetime() {
    // 200-day certificate: a third (66.7 days) comes before 30 days.
    let at = renewal_time("a", "01", t(0), t(200), 30);
    assert!(
        at <= t(200) - Duration::days(66) && at >= t(200) - Duration::days(74),
        "{at}"
    );
    // 47-day certificate: 30 days left comes before a third (15.7 days).
    let at = renewal_time("a", "01", t(0), t(47), 30);
    assert!(at <= t(17) && at >= t(17) - Duration::days(4), "{at}");
}

#[test]
fn spread_is_stable_and_differs_between_certificates() {
    let a1 = renewal_time("a", "01", t(0), t(200), 30);
    let a2 = renewal_time("a", "01", t(0), t(200), 30);
    let b = renewal_time("b", "01", t(0), t(200), 30);
    assert_eq!(a1, a2);
    assert_ne!(a1, b);
    let f = stable_fraction("x", "y");
    assert!((0.0..1.0).contains(&f));
}

#[test]
fn subscription_warning_starts_60_days_before_the_end() {
    let rec = installed(200, Some(400));
    // Certificate 2 (reissued) covers to day 400; not due yet on day 320 with a 200-day
    // life from day 200, but the subscription warning shows.
    let mut rec2 = rec.clone();
    if let Some(inst) = rec2.installed.as_mut() {
        inst.not_before = t(200);
        inst.not_after = t(400);
    }
    let a = decide(&inputs(&rec2, t(250)));
    assert!(matches!(a, Action::Idle { warning: None, .. }), "{a:?}");
    let a = decide(&inputs(&rec2, t(345)));
    match a {
        Action::Idle {
            warning: Some(w), ..
        }
        | Action::RenewSubscription { reason: w, .. } => {
            assert!(w.contains("subscription") || w.contains("renewal"), "{w}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn reissue_moves_before_the_blackout_and_none_inside_it() {
    // A 45-day certificate from day 170 to 215 is due around day 196-200; the subscription
    // ends on day 220, so the blackout starts on day 190 and the last reissue moves to a
    // week before it (day 183).
    let mut rec = installed(215, Some(220));
    if let Some(inst) = rec.installed.as_mut() {
        inst.not_before = t(170);
    }
    let mut i = inputs(&rec, t(182));
    i.renew_before_days = 5;
    assert!(
        matches!(decide(&i), Action::Idle { .. }),
        "{:?}",
        decide(&i)
    );
    let i = Inputs { now: t(184), ..i };
    assert!(
        matches!(decide(&i), Action::Reissue { .. }),
        "{:?}",
        decide(&i)
    );
    // Inside the blackout no reissue is possible: the subscription must be renewed.
    let i = Inputs { now: t(195), ..i };
    assert!(
        matches!(decide(&i), Action::RenewSubscription { .. }),
        "{:?}",
        decide(&i)
    );
}

#[test]
fn family_c_refuses_a_reused_key() {
    let rec = installed(200, Some(1825));
    let mut i = inputs(&rec, t(150));
    i.reuse_key = true;
    assert!(matches!(decide(&i), Action::Reissue { new_key: false, .. }));
    i.family = Some(Family::C);
    assert!(
        matches!(decide(&i), Action::CannotReissue { .. }),
        "{:?}",
        decide(&i)
    );
    i.reuse_key = false;
    assert!(matches!(decide(&i), Action::Reissue { new_key: true, .. }));
}

#[test]
fn force_reissues_now_but_never_orders() {
    let rec = installed(200, Some(1825));
    let mut i = inputs(&rec, t(10));
    i.force = true;
    assert!(matches!(decide(&i), Action::Reissue { .. }));
    // A certificate that already reaches the end of its subscription: still a reissue.
    let rec = installed(60, Some(60));
    let mut i = inputs(&rec, t(5));
    i.force = true;
    i.allow_orders = true;
    assert!(
        matches!(decide(&i), Action::Reissue { .. }),
        "{:?}",
        decide(&i)
    );
    // Inside the blackout: refused, even with orders allowed.
    let rec = installed(200, Some(210));
    let mut i = inputs(&rec, t(185));
    i.force = true;
    i.allow_orders = true;
    assert!(
        matches!(decide(&i), Action::CannotReissue { .. }),
        "{:?}",
        decide(&i)
    );
}

#[test]
fn an_ended_order_is_reported_until_issue_replaces_it() {
    let mut rec = installed(200, Some(1825));
    rec.mark_ended("annulled");
    let mut i = inputs(&rec, t(10));
    i.allow_orders = true;
    assert!(matches!(decide(&i), Action::Ended { .. }));
    i.replace_ended = true;
    assert_eq!(decide(&i), Action::Order);
}

#[test]
fn prolong_is_prepared_at_most_once_a_day() {
    let mut rec = installed(365, Some(365));
    rec.partner.prolong_prepared_at = Some(t(300));
    let a = decide(&inputs(&rec, t(300) + Duration::hours(5)));
    assert!(matches!(a, Action::Idle { .. }), "{a:?}");
    let a = decide(&inputs(&rec, t(301) + Duration::hours(1)));
    assert!(
        matches!(a, Action::RenewSubscription { order: false, .. }),
        "{a:?}"
    );
    // Prepared on the last second there is (an edited record): idle, no panic.
    rec.partner.prolong_prepared_at = Some(time::macros::datetime!(9999-12-31 23:59:59 UTC));
    let a = decide(&inputs(&rec, t(301)));
    assert!(matches!(a, Action::Idle { next: None, .. }), "{a:?}");
}

#[test]
fn explicit_commands_ignore_the_backoff() {
    let mut rec = installed(200, Some(1825));
    rec.retry_after = Some(t(10) + Duration::hours(2));
    let mut i = inputs(&rec, t(10));
    assert!(matches!(decide(&i), Action::Backoff { .. }));
    i.ignore_backoff = true;
    assert!(
        matches!(decide(&i), Action::Idle { .. }),
        "{:?}",
        decide(&i)
    );
}

#[test]
fn backoff_doubles_to_a_day() {
    assert_eq!(backoff(1), Duration::hours(1));
    assert_eq!(backoff(2), Duration::hours(2));
    assert_eq!(backoff(5), Duration::hours(16));
    assert_eq!(backoff(6), Duration::hours(24));
    assert_eq!(backoff(60), Duration::hours(24));
}

/// `quiet_until` is the first instant at which the decision is no longer a quiet idle: the
/// decision just before it is quiet, at it is not (checked minute by minute around it).
#[test]
fn a_quiet_decision_stands_exactly_until_its_instant() {
    // Renewal check first (a one-year certificate in a longer subscription), then the
    // subscription's warning window first (a certificate reaching the subscription's end).
    for (life, sub) in [
        (365, Some(1000)),
        (200, Some(400)),
        (365, None),
        (90, Some(100)),
    ] {
        let rec = installed(life, sub);
        let now = t(1);
        let i = Inputs {
            order_facts: None,
            ..inputs(&rec, now)
        };
        let Some(until) = quiet_until(&i) else {
            panic!("{life}/{sub:?}: not quiet on day 1: {:?}", decide(&i));
        };
        assert!(until > now);
        let at = |when| Inputs {
            now: when,
            order_facts: None,
            ..inputs(&rec, when)
        };
        let before = until - Duration::minutes(1);
        assert!(
            matches!(decide(&at(before)), Action::Idle { warning: None, .. }),
            "{life}/{sub:?}: {:?}",
            decide(&at(before))
        );
        assert!(quiet_until(&at(before)) == Some(until));
        assert!(
            !matches!(decide(&at(until)), Action::Idle { warning: None, .. }),
            "{life}/{sub:?}: still quiet at {until}"
        );
        assert_eq!(quiet_until(&at(until)), None);
    }
}

#[test]
fn only_a_quiet_idle_has_an_instant() {
    let rec = installed(365, Some(1000));
    // Missing files, a backoff, an order in flight: never quiet.
    let i = Inputs {
        disk: Disk::Missing,
        order_facts: None,
        ..inputs(&rec, t(1))
    };
    assert_eq!(quiet_until(&i), None);
    let mut backed = rec.clone();
    backed.retry_after = Some(t(2));
    assert_eq!(
        quiet_until(&Inputs {
            order_facts: None,
            ..inputs(&backed, t(1))
        }),
        None
    );
    let mut pending = rec.clone();
    assert!(pending.partner.begin_reissue(ReissueState {
        certificate_id: 7,
        csr_sha256: "AB".repeat(32),
        previous_serial: Some("0A".into()),
        requested_at: t(0),
        confirmed: true,
    }));
    assert_eq!(
        quiet_until(&Inputs {
            order_facts: None,
            ..inputs(&pending, t(1))
        }),
        None
    );
}
