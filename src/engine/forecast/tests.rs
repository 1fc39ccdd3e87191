//! Table tests of the projection and the SC-081v3 dates.

use super::*;
use crate::store::{Installed, OrderRef, PendingKey, Subscription};
use time::macros::datetime;

fn day(d: i64) -> OffsetDateTime {
    datetime!(2027-01-01 00:00 UTC) + Duration::days(d)
}

fn date(y: i32, m: Month, d: u8) -> Date {
    Date::from_calendar_date(y, m, d).unwrap()
}

/// Installed from `from` to `until`, in a subscription ending on `sub`.
fn installed(from: i64, until: i64, sub: i64) -> CertRecord {
    CertRecord {
        name: "www".into(),
        partner: crate::store::PartnerBook {
            stage: crate::store::PartnerStage::Ordered {
                order: OrderRef {
                    certificate_id: 7,
                    order_id: Some(1),
                    placed_at: day(from),
                    adopted: false,
                },
                reissue: None,
            },
            subscription: Some(Subscription {
                ends: day(sub),
                multi_year: false,
            }),
            ..Default::default()
        },
        installed: Some(Installed {
            serial: "0A".into(),
            not_before: day(from),
            not_after: day(until),
            certificate_id: 7,
            files: vec![],
            installed_at: day(from),
            leaf_file: None,
            leaf_stamp: None,
        }),
        ..CertRecord::default()
    }
}

const KNOBS: Knobs = Knobs {
    renew_before_days: 30,
    order_days: 365,
};

#[test]
fn the_ballot_steps_fall_on_their_dates() {
    for (d, life, reuse) in [
        (date(2026, Month::March, 14), 398, 398),
        (date(2026, Month::March, 15), 200, 200),
        (date(2027, Month::March, 14), 200, 200),
        (date(2027, Month::March, 15), 100, 100),
        (date(2029, Month::March, 14), 100, 100),
        (date(2029, Month::March, 15), 47, 10),
        (date(2035, Month::January, 1), 47, 10),
    ] {
        assert_eq!(max_lifetime_days_on(d), life, "{d}");
        assert_eq!(reuse_days_on(d), reuse, "{d}");
    }
}

#[test]
fn a_certificate_inside_its_subscription_is_reissued_free_then_ordered_at_the_end() {
    // 90-day certificate from day 0 in a one-year subscription ending on day 365.
    let rec = installed(0, 90, 365);
    let dues = upcoming(&rec, KNOBS, day(0), day(400));
    assert!(dues.len() >= 2, "{dues:?}");
    let first = &dues[0];
    assert_eq!(first.kind, DueKind::Reissue, "{dues:?}");
    // Due with 30 days left, moved earlier by at most 7 days of spread.
    assert!(first.at <= day(60) && first.at >= day(53), "{first:?}");
    // The subscription ends on day 365: the renewal that would fall into its last 30 days is
    // an order.
    let order = dues.iter().find(|d| d.kind == DueKind::Order).unwrap();
    assert!(order.at <= day(365) && order.at > day(250), "{order:?}");
    assert!(
        dues.windows(2).all(|w| w[0].at <= w[1].at),
        "in order: {dues:?}"
    );
    // Nothing after the horizon.
    assert!(upcoming(&rec, KNOBS, day(0), day(40)).is_empty());
}

#[test]
fn no_order_or_an_ended_order_is_billed_now() {
    let none = CertRecord {
        name: "www".into(),
        ..CertRecord::default()
    };
    let dues = upcoming(&none, KNOBS, day(0), day(30));
    assert_eq!(dues.len(), 1, "{dues:?}");
    assert_eq!((dues[0].at, dues[0].kind), (day(0), DueKind::Order));

    let mut ended = installed(0, 90, 365);
    ended.mark_ended("annulled");
    let dues = upcoming(&ended, KNOBS, day(10), day(30));
    assert_eq!((dues[0].at, dues[0].kind), (day(10), DueKind::Order));
    assert!(dues[0].reason.contains("annulled"));
}

#[test]
fn work_in_progress_projects_nothing() {
    let mut rec = installed(0, 90, 365);
    rec.pending_key = Some(Box::new(PendingKey {
        key_file: "/k".into(),
        csr_pem: String::new(),
        csr_md5: String::new(),
        csr_sha256: String::new(),
        created_at: day(0),
    }));
    assert!(upcoming(&rec, KNOBS, day(70), day(400)).is_empty());
}

#[test]
fn a_certificate_reaching_the_subscription_end_needs_an_order() {
    // The certificate already runs to the end of the subscription.
    let rec = installed(0, 365, 365);
    let dues = upcoming(&rec, KNOBS, day(0), day(365));
    assert_eq!(dues[0].kind, DueKind::Order, "{dues:?}");
    // Due with a third of its lifetime left (121 days), less at most 7 days of spread.
    assert!(dues[0].at >= day(236) && dues[0].at <= day(244), "{dues:?}");
    // The new order starts a new subscription: its certificates are reissued free.
    assert_eq!(dues[1].kind, DueKind::Reissue, "{dues:?}");
}

#[test]
fn an_overdue_renewal_is_due_now_and_short_certificates_cannot_loop() {
    let rec = installed(0, 90, 365);
    let dues = upcoming(&rec, KNOBS, day(80), day(85));
    assert_eq!(dues.len(), 1, "{dues:?}");
    assert_eq!((dues[0].at, dues[0].kind), (day(80), DueKind::Reissue));
    // A one-day certificate with 30 days' renewal window: due at once, never endlessly.
    let short = installed(0, 1, 365);
    let dues = upcoming(&short, KNOBS, day(0), day(365));
    assert!(dues.len() <= 2 * 365, "{}", dues.len());
}

#[test]
fn later_certificates_are_no_longer_than_the_rules_of_their_issue_date() {
    // From 2029-03-15 certificates live 47 days: a 100-day certificate renewed after that
    // date is followed by 47-day ones (about eight renewals a year).
    let start = (datetime!(2029-03-01 00:00 UTC) - day(0)).whole_days();
    let rec = installed(start, start + 100, start + 1825);
    let dues = upcoming(&rec, KNOBS, day(start), day(start + 365));
    assert!(dues.iter().all(|d| d.kind == DueKind::Reissue), "{dues:?}");
    // Each certificate lives at most 47 days and is renewed with a third of it left: a
    // renewal every 15 days or so, more than twenty a year.
    assert!(dues.len() >= 20, "{}: {dues:?}", dues.len());
    assert!(
        dues.windows(2)
            .all(|w| w[1].at - w[0].at <= Duration::days(47) - Duration::days(47) / 3),
        "{dues:?}"
    );
}

fn mark(at: OffsetDateTime, method: &str) -> ValidationMark {
    ValidationMark {
        method: method.into(),
        at,
    }
}

#[test]
fn a_validation_is_stale_after_the_reuse_period_in_force_on_the_due_date() {
    let domains = vec!["www.example.com".to_owned(), "api.example.com".to_owned()];
    let mut marks = BTreeMap::new();
    marks.insert("www.example.com".to_owned(), mark(day(0), "HTTP"));
    // api.example.com was never validated: always stale.
    assert_eq!(
        stale_domains(&domains, &marks, day(100), 100),
        vec!["api.example.com".to_owned()]
    );
    marks.insert("api.example.com".to_owned(), mark(day(0), "HTTP"));
    assert!(stale_domains(&domains, &marks, day(100), 100).is_empty());
    assert_eq!(stale_domains(&domains, &marks, day(101), 100).len(), 2);
    // Upper-case configured names match the lower-case marks.
    assert!(stale_domains(&["WWW.example.com".into()], &marks, day(5), 10).is_empty());
}

#[test]
fn who_validates_and_the_stricter_reuse_period() {
    let setup = |method, dns_hook, reuse_days| ValidationSetup {
        method,
        dns_hook,
        reuse_days,
    };
    assert!(setup(ValidationMethod::Http, false, None).automatic());
    assert!(setup(ValidationMethod::Dns, true, None).automatic());
    assert!(!setup(ValidationMethod::Dns, false, None).automatic());
    assert!(!setup(ValidationMethod::Email, true, None).automatic());
    let d = date(2027, Month::April, 1);
    assert_eq!(
        setup(ValidationMethod::Http, false, None).reuse_days_on(d),
        100
    );
    assert_eq!(
        setup(ValidationMethod::Http, false, Some(30)).reuse_days_on(d),
        30
    );
    // An override longer than the ballot's period does not lengthen it.
    assert_eq!(
        setup(ValidationMethod::Http, false, Some(398)).reuse_days_on(d),
        100
    );
}

#[test]
fn the_first_renewal_past_reuse_needs_a_fresh_validation_across_2027_and_2029() {
    let domains = vec!["www.example.com".to_owned()];
    let email = ValidationSetup {
        method: ValidationMethod::Email,
        dns_hook: false,
        reuse_days: None,
    };
    let due = |at| Due {
        at,
        kind: DueKind::Reissue,
        reason: String::new(),
    };
    let mut marks = BTreeMap::new();
    // Validated on 2027-01-01; 150 days later is past 2027-03-15: 100 days' reuse.
    marks.insert("www.example.com".to_owned(), mark(day(0), "EMAIL"));
    let f = fresh_validation(&[due(day(90)), due(day(150))], &domains, &marks, email).unwrap();
    assert_eq!((f.due, f.reuse_days, f.automatic), (day(150), 100, false));
    // Before 2027-03-15 the same 150 days were inside the 200 days' reuse.
    let before = datetime!(2026-06-01 00:00 UTC);
    marks.insert("www.example.com".to_owned(), mark(before, "EMAIL"));
    assert_eq!(
        fresh_validation(
            &[due(before + Duration::days(150))],
            &domains,
            &marks,
            email
        ),
        None
    );
    // From 2029-03-15 ten days: a validation 11 days old no longer counts.
    let v = datetime!(2029-04-01 00:00 UTC);
    marks.insert("www.example.com".to_owned(), mark(v, "HTTP"));
    let http = ValidationSetup {
        method: ValidationMethod::Http,
        ..email
    };
    assert_eq!(
        fresh_validation(&[due(v + Duration::days(10))], &domains, &marks, http),
        None
    );
    let f = fresh_validation(&[due(v + Duration::days(11))], &domains, &marks, http).unwrap();
    assert_eq!((f.reuse_days, f.automatic), (10, true));
    assert!(
        f.describe().contains("cert-agent does it itself"),
        "{}",
        f.describe()
    );
}

/// Guards the projection near the largest date: certificates and subscriptions ending in the
/// last days of year 9999 (a reissue that would run past it, an order after it) project
/// what falls before it and stop there, without a panic.
#[test]
fn terms_ending_near_year_9999_project_without_a_panic() {
    let last = datetime!(9999-12-31 23:59:59 UTC);
    let now = datetime!(2026-11-28 00:00 UTC);
    let shapes = [
        // (not_before, not_after, subscription end)
        (now - Duration::days(1), last, last),
        (last - Duration::days(30), last, last),
        (last - Duration::days(90), last - Duration::days(20), last),
        (last - Duration::days(400), last - Duration::days(200), last),
        (now, now + Duration::days(90), last),
    ];
    for (from, until, sub) in shapes {
        let mut rec = installed(0, 1, 2);
        let inst = rec.installed.as_mut().unwrap();
        inst.not_before = from;
        inst.not_after = until;
        rec.partner.subscription.as_mut().unwrap().ends = sub;
        for (n, horizon) in [(now, now + Duration::days(400)), (from, last)] {
            let dues = upcoming(&rec, KNOBS, n, horizon);
            assert!(dues.iter().all(|d| d.at <= last), "{dues:?}");
            assert!(dues.windows(2).all(|w| w[0].at <= w[1].at), "{dues:?}");
        }
    }
}
