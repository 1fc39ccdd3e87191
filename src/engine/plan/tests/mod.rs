//! Table tests of the planner: every branch of the decision, the timing rules, the
//! two-step reissue decision, rule 2, the backoff and the dry-run descriptions.

use super::*;
use crate::store::{Installed, OrderIntent, OrderRef, PendingKey, ReissueState, Subscription};
use std::path::PathBuf;

fn t(days: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap() + Duration::days(days)
}

/// A record with an order and a certificate installed from day 0 to day `life`, in a
/// subscription ending on day `sub`.
fn installed(life: i64, sub: Option<i64>) -> CertRecord {
    CertRecord {
        name: "www".into(),
        partner: crate::store::PartnerBook {
            stage: PartnerStage::Ordered {
                order: OrderRef {
                    certificate_id: 7,
                    order_id: Some(1),
                    placed_at: t(0),
                    adopted: false,
                },
                reissue: None,
            },
            subscription: sub.map(|d| Subscription {
                ends: t(d),
                multi_year: true,
            }),
            ..Default::default()
        },
        installed: Some(Installed {
            serial: "0A".into(),
            not_before: t(0),
            not_after: t(life),
            certificate_id: 7,
            files: vec![],
            installed_at: t(0),
            leaf_file: None,
            leaf_stamp: None,
        }),
        ..CertRecord::default()
    }
}

/// The order read before a reissue, reporting nothing new (the record's decision stands).
static NO_NEWS: OrderFacts = OrderFacts {
    subscription: None,
    names: Vec::new(),
};

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

static WWW: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(|| names(&["www.example.com"]));

fn wanted(domains: &[String]) -> Wanted<'_> {
    Wanted {
        product_id: 1,
        days: 365,
        domains,
    }
}

/// Inputs of a timer run for `record` at `now`, the order already read (see
/// `reissue_is_decided_again_with_the_order_read` for the first decision).
fn inputs(record: &CertRecord, now: OffsetDateTime) -> Inputs<'_> {
    Inputs {
        now,
        record,
        disk: Disk::AsInstalled,
        renew_before_days: 30,
        allow_orders: false,
        force: false,
        ignore_backoff: false,
        replace_ended: false,
        reuse_key: false,
        family: None,
        reinstall: false,
        wanted: wanted(&WWW),
        order_facts: Some(&NO_NEWS),
    }
}

#[test]
fn reissue_is_decided_again_with_the_order_read() {
    // Due for a reissue on day 184 of a 200-day certificate in a 5-year subscription.
    let rec = installed(200, Some(1825));
    let first = Inputs {
        order_facts: None,
        ..inputs(&rec, t(184))
    };
    let Action::ReadOrderFirst {
        new_key: true,
        reason,
    } = decide(&first)
    else {
        panic!("{:?}", decide(&first));
    };
    assert!(reason.contains("ends on"), "{reason}");
    // The dry-run text of the first decision is the reissue's.
    assert!(describe(&decide(&first), first.wanted).starts_with("reissue (new key) because"));

    // The API reports the same names, and no subscription end: reissue.
    let same = OrderFacts {
        subscription: None,
        names: names(&["www.example.com"]),
    };
    let i = Inputs {
        order_facts: Some(&same),
        ..first.clone()
    };
    assert!(matches!(decide(&i), Action::Reissue { new_key: true, .. }));

    // The subscription ends sooner than recorded (inside the blackout): a renewal.
    let ending = OrderFacts {
        subscription: Some(Subscription {
            ends: t(200),
            multi_year: false,
        }),
        names: Vec::new(),
    };
    let i = Inputs {
        order_facts: Some(&ending),
        ..first.clone()
    };
    assert!(
        matches!(decide(&i), Action::RenewSubscription { order: false, .. }),
        "{:?}",
        decide(&i)
    );

    // The configured names grew past the order's: refused (rule 2), naming the command.
    let grown = names(&["www.example.com", "api.example.com"]);
    let i = Inputs {
        wanted: wanted(&grown),
        order_facts: Some(&same),
        ..first.clone()
    };
    let Action::CannotReissue { reason } = decide(&i) else {
        panic!("{:?}", decide(&i));
    };
    assert!(reason.contains("`cert-agent issue www --yes`"), "{reason}");

    // Without an order there is nothing to read: adopted keys are reissued directly only
    // with an order, so a record without one never asks.
    let mut no_order = rec.clone();
    no_order.partner.stage = PartnerStage::NoOrder;
    no_order.installed = None;
    let i = Inputs {
        order_facts: None,
        allow_orders: true,
        ..inputs(&no_order, t(184))
    };
    assert_eq!(decide(&i), Action::Order);
}

#[test]
fn install_again_overrides_intact_files() {
    let rec = installed(200, Some(1825));
    let i = inputs(&rec, t(10));
    assert!(matches!(decide(&i), Action::Idle { .. }));
    let i = Inputs {
        reinstall: true,
        ..i
    };
    assert_eq!(decide(&i), Action::Reinstall);
    // Nothing installed yet: `install` continues the order instead.
    let mut pending = rec.clone();
    pending.installed = None;
    pending.pending_key = Some(Box::new(pending_key()));
    let i = Inputs {
        reinstall: true,
        ..inputs(&pending, t(10))
    };
    assert_eq!(decide(&i), Action::Continue);
}

#[test]
fn a_first_failure_before_any_order_is_retried_on_the_next_run() {
    let now = t(0);
    let fresh = CertRecord {
        name: "www".into(),
        ..CertRecord::default()
    };
    // rows: (failures, retry after) for a certificate that never reached an order
    assert_eq!(retry_after(&fresh, 1, now), None);
    assert_eq!(retry_after(&fresh, 2, now), Some(now + Duration::hours(1)));
    assert_eq!(retry_after(&fresh, 3, now), Some(now + Duration::hours(2)));
    // an order sent without an answer is not "never ordered"
    let mut intent = fresh.clone();
    intent.partner.stage = PartnerStage::Intended(OrderIntent {
        csr_sha256: "AA".into(),
        common_name: "www.example.com".into(),
        created_at: now,
        product_id: 1,
        price: None,
    });
    assert_eq!(retry_after(&intent, 1, now), Some(now + Duration::hours(1)));
    // nor is one whose order the CA refused
    let refused = CertRecord {
        partner: crate::store::PartnerBook {
            order_refused: true,
            ..fresh.clone().partner
        },
        ..fresh.clone()
    };
    assert_eq!(
        retry_after(&refused, 1, now),
        Some(now + Duration::hours(1))
    );
    // a certificate with an order backs off from the first failure, up to 24 h
    let ordered = installed(200, Some(1825));
    assert_eq!(
        retry_after(&ordered, 1, now),
        Some(now + Duration::hours(1))
    );
    assert_eq!(
        retry_after(&ordered, 9, now),
        Some(now + Duration::hours(24))
    );
}

#[test]
fn reissue_rule_2_on_the_configured_names() {
    let two = names(&["a.example.com", "b.example.com"]);
    let check = |domains: &[&str], family: Option<Family>, ordered: &[String]| {
        let domains = names(domains);
        names_cannot_change("www", wanted(&domains), family, ordered)
    };
    // Same names, fewer names: fine.
    assert!(check(&["a.example.com", "b.example.com"], None, &two).is_none());
    assert!(check(&["a.example.com"], None, &two).is_none());
    // Growth: refused.
    let grown = ["a.example.com", "b.example.com", "c.example.com"];
    assert!(check(&grown, None, &two).is_some());
    // Family S multi-domain may change up to max(current, 3).
    assert!(check(&grown, Some(Family::S), &two).is_none());
    let four = [
        "a.example.com",
        "b.example.com",
        "c.example.com",
        "d.example.com",
    ];
    assert!(check(&four, Some(Family::S), &two).is_some());
    // Other families may not swap a name.
    assert!(check(&["a.example.com", "c.example.com"], Some(Family::D), &two).is_some());
    // The common name must be one of the order's domains.
    assert!(check(&["c.example.com", "a.example.com"], Some(Family::S), &two).is_some());
    // A wildcard's bare domain is not counted as extra.
    let wild = names(&["*.example.com"]);
    assert!(check(&["*.example.com", "example.com"], None, &wild).is_none());
    // Names the API did not report: not checked.
    assert!(check(&grown, None, &[]).is_none());
}

#[test]
fn describe_names_product_names_and_times() {
    let domains = names(&["a.example.com", "b.example.com"]);
    let w = wanted(&domains);
    assert_eq!(
        describe(&Action::Order, w),
        "place a billed order for product 1 (365 days) for a.example.com, b.example.com"
    );
    assert_eq!(
        describe(&Action::Backoff { until: t(0) }, w),
        format!("wait until {} after failures", short_time(t(0)))
    );
    assert_eq!(short_time(t(0)), "2027-01-15 08:00 UTC");
}

fn pending_key() -> PendingKey {
    PendingKey {
        key_file: PathBuf::from("/k"),
        csr_pem: String::new(),
        csr_md5: String::new(),
        csr_sha256: String::new(),
        created_at: t(0),
    }
}

/// The records the branch tables start from.
struct Records {
    no_order: CertRecord,
    with_intent: CertRecord,
    pending: CertRecord,
    reissuing: CertRecord,
    adopted: CertRecord,
    failing: CertRecord,
    multi: CertRecord,
    single: CertRecord,
}

fn records() -> Records {
    let no_order = CertRecord {
        name: "www".into(),
        ..CertRecord::default()
    };
    let mut with_intent = no_order.clone();
    with_intent.partner.stage = PartnerStage::Intended(OrderIntent {
        csr_sha256: "AA".into(),
        common_name: "www.example.com".into(),
        created_at: t(0),
        product_id: 1,
        price: None,
    });
    let mut pending = installed(200, Some(1825));
    pending.installed = None;
    pending.pending_key = Some(Box::new(pending_key()));
    let mut reissuing = installed(200, Some(1825));
    assert!(reissuing.partner.begin_reissue(ReissueState {
        certificate_id: 7,
        csr_sha256: "BB".into(),
        previous_serial: Some("0A".into()),
        requested_at: t(100),
        confirmed: true,
    }));
    let mut adopted = installed(200, None);
    adopted.installed = None;
    let mut failing = installed(200, Some(1825));
    failing.retry_after = Some(t(10) + Duration::hours(2));

    let multi = installed(200, Some(1825));
    let single = installed(365, Some(365));
    Records {
        no_order,
        with_intent,
        pending,
        reissuing,
        adopted,
        failing,
        multi,
        single,
    }
}

struct Case<'a> {
    what: &'a str,
    record: &'a CertRecord,
    now: OffsetDateTime,
    allow: bool,
    disk: Disk,
    expect: fn(&Action) -> bool,
}

fn check(cases: &[Case<'_>]) {
    for c in cases {
        let mut i = inputs(c.record, c.now);
        i.allow_orders = c.allow;
        i.disk = c.disk.clone();
        let a = decide(&i);
        assert!((c.expect)(&a), "{}: got {a:?}", c.what);
    }
}

#[test]
fn every_branch_of_the_record_state() {
    let r = records();
    check(&[
        Case {
            what: "intent first",
            record: &r.with_intent,
            now: t(0),
            allow: true,
            disk: Disk::AsInstalled,
            expect: |a| *a == Action::Reconcile,
        },
        Case {
            what: "no order, not allowed",
            record: &r.no_order,
            now: t(0),
            allow: false,
            disk: Disk::AsInstalled,
            expect: |a| *a == Action::NeedsOrder,
        },
        Case {
            what: "no order, allowed",
            record: &r.no_order,
            now: t(0),
            allow: true,
            disk: Disk::AsInstalled,
            expect: |a| *a == Action::Order,
        },
        Case {
            what: "order pending",
            record: &r.pending,
            now: t(0),
            allow: false,
            disk: Disk::Missing,
            expect: |a| *a == Action::Continue,
        },
        Case {
            what: "reissue pending",
            record: &r.reissuing,
            now: t(150),
            allow: false,
            disk: Disk::AsInstalled,
            expect: |a| *a == Action::Continue,
        },
        Case {
            what: "adopted order without local key",
            record: &r.adopted,
            now: t(1),
            allow: false,
            disk: Disk::Missing,
            expect: |a| matches!(a, Action::Reissue { new_key: true, .. }),
        },
    ]);
}

#[test]
fn every_branch_of_the_schedule() {
    let r = records();
    check(&[
        Case {
            what: "backoff",
            record: &r.failing,
            now: t(10),
            allow: false,
            disk: Disk::AsInstalled,
            expect: |a| matches!(a, Action::Backoff { .. }),
        },
        Case {
            what: "file missing",
            record: &r.multi,
            now: t(10),
            allow: false,
            disk: Disk::Missing,
            expect: |a| *a == Action::Reinstall,
        },
        Case {
            what: "file differs",
            record: &r.multi,
            now: t(10),
            allow: false,
            disk: Disk::Differs(Some("0B".into())),
            expect: |a| *a == Action::Reinstall,
        },
        Case {
            what: "not due",
            record: &r.multi,
            now: t(100),
            allow: false,
            disk: Disk::AsInstalled,
            expect: |a| matches!(a, Action::Idle { warning: None, .. }),
        },
        Case {
            what: "due inside multi-year subscription",
            record: &r.multi,
            now: t(140),
            allow: false,
            disk: Disk::AsInstalled,
            expect: |a| matches!(a, Action::Reissue { new_key: true, .. }),
        },
        Case {
            what: "single year, due: prepare renewal",
            record: &r.single,
            now: t(300),
            allow: false,
            disk: Disk::AsInstalled,
            expect: |a| matches!(a, Action::RenewSubscription { order: false, .. }),
        },
        Case {
            what: "single year, due, orders allowed",
            record: &r.single,
            now: t(300),
            allow: true,
            disk: Disk::AsInstalled,
            expect: |a| matches!(a, Action::RenewSubscription { order: true, .. }),
        },
        Case {
            what: "warning 60 days before the end",
            record: &r.single,
            now: t(310),
            allow: false,
            disk: Disk::AsInstalled,
            expect: |a| matches!(a, Action::RenewSubscription { .. }),
        },
    ]);
}

mod timing;

#[test]
fn a_held_certificate_waits_for_its_start_then_installs_without_backoff_or_force() {
    let mut rec = installed(200, Some(1825));
    rec.held = Some(Box::new(crate::store::Held {
        certificate_id: 7,
        serial: "0B".into(),
        not_before: t(10),
    }));
    rec.retry_after = Some(t(20));
    rec.failures = 1;
    let before = inputs(&rec, t(10) - Duration::hours(1));
    assert_eq!(decide(&before), Action::Hold { from: t(10) });
    let forced = Inputs {
        force: true,
        ..before.clone()
    };
    assert_eq!(decide(&forced), Action::Hold { from: t(10) });
    assert!(describe(&decide(&before), before.wanted).contains("once it is valid"));
    // Within the tolerance of a host clock a little behind, and after its start: installed.
    let almost = inputs(&rec, t(10) - Duration::minutes(4));
    assert_eq!(decide(&almost), Action::InstallHeld);
    assert_eq!(decide(&inputs(&rec, t(11))), Action::InstallHeld);
    // An open order intent is resolved first.
    rec.partner.stage = PartnerStage::Intended(OrderIntent {
        csr_sha256: "AA".into(),
        common_name: "www.example.com".into(),
        created_at: t(9),
        product_id: 1,
        price: None,
    });
    assert_eq!(decide(&inputs(&rec, t(11))), Action::Reconcile);
}

#[test]
fn a_revoked_certificate_is_replaced_at_once() {
    let seen = |serial: &str, state: &str| crate::store::RevocationSeen {
        serial: serial.into(),
        state: state.into(),
        url: Some("http://crl.example/ca.crl".into()),
        detail: "serial 0A was revoked on 2026-01-02 00:00 UTC, reason keyCompromise".into(),
        revoked_at: None,
        reason: None,
    };
    // Day 10 of a 200-day certificate in a 5-year subscription: idle by the schedule.
    let mut rec = installed(200, Some(1825));
    assert!(matches!(decide(&inputs(&rec, t(10))), Action::Idle { .. }));

    // rows: (what the CRL said, the action)
    rec.revocation = Some(seen("0a", "revoked"));
    let Action::Reissue { new_key, reason } = decide(&Inputs {
        reuse_key: true,
        ..inputs(&rec, t(10))
    }) else {
        panic!("{:?}", decide(&inputs(&rec, t(10))));
    };
    assert!(new_key, "a revoked certificate's key is never reused");
    assert!(
        reason.contains("revoked") && reason.contains("keyCompromise"),
        "{reason}"
    );
    // Before the order is read, the order is read first.
    let first = Inputs {
        order_facts: None,
        ..inputs(&rec, t(10))
    };
    assert!(matches!(
        decide(&first),
        Action::ReadOrderFirst { new_key: true, .. }
    ));

    // Another serial revoked, or a CRL that could not be used: the schedule decides.
    for other in [
        seen("0B", "revoked"),
        seen("0A", "unknown"),
        seen("0A", "good"),
    ] {
        let mut r = rec.clone();
        r.revocation = Some(other);
        assert!(matches!(decide(&inputs(&r, t(10))), Action::Idle { .. }));
    }

    // Inside the blackout: the order policy.
    let late = installed(40, Some(40));
    let mut late = CertRecord {
        revocation: Some(seen("0A", "revoked")),
        ..late
    };
    assert!(matches!(
        decide(&inputs(&late, t(15))),
        Action::RenewSubscription { order: false, .. }
    ));
    assert!(matches!(
        decide(&Inputs {
            allow_orders: true,
            ..inputs(&late, t(15))
        }),
        Action::RenewSubscription { order: true, .. }
    ));

    // The order is annulled: a new order where allowed, else reported.
    late.mark_ended("annulled");
    assert_eq!(
        decide(&Inputs {
            allow_orders: true,
            ..inputs(&late, t(15))
        }),
        Action::Order
    );
    assert!(matches!(
        decide(&inputs(&late, t(15))),
        Action::Ended { .. }
    ));
    // An annulled order whose certificate is not revoked waits for `issue --yes`.
    late.revocation = None;
    assert!(matches!(
        decide(&Inputs {
            allow_orders: true,
            ..inputs(&late, t(15))
        }),
        Action::Ended { .. }
    ));
}

/// The stages of an order that ended with a reissue in flight: a reissue whose answer is not
/// known is resolved first (even in a backoff), a confirmed one waits with the order for the
/// operator, and only `issue --yes` (orders allowed) orders anew.
#[test]
fn an_ended_order_with_a_reissue_in_flight() {
    let mut rec = installed(200, Some(1825));
    assert!(rec.partner.begin_reissue(ReissueState {
        certificate_id: 7,
        csr_sha256: "BB".into(),
        previous_serial: Some("0A".into()),
        requested_at: t(100),
        confirmed: false,
    }));
    assert!(rec.mark_ended("expired"));
    rec.retry_after = Some(t(150) + Duration::hours(2));
    fn allowed(r: &CertRecord) -> Inputs<'_> {
        Inputs {
            allow_orders: true,
            ..inputs(r, t(150))
        }
    }
    assert_eq!(decide(&allowed(&rec)), Action::Continue, "unconfirmed");
    if let Some(r) = rec.partner.reissue_mut() {
        r.confirmed = true;
    }
    rec.retry_after = None;
    assert_eq!(
        decide(&allowed(&rec)),
        Action::Ended {
            state: "expired".into()
        },
        "confirmed"
    );
    assert_eq!(
        decide(&Inputs {
            replace_ended: true,
            ..allowed(&rec)
        }),
        Action::Order,
        "issue --yes"
    );
    // `issue --yes` gives the ended order up: renewed by the next order, nothing of it kept.
    let (state, _) = rec.replace_ended_order().expect("an ended order");
    assert_eq!(state, "expired");
    assert_eq!(rec.partner.stage, PartnerStage::NoOrder);
    assert_eq!(rec.partner.renews, Some(7));
    assert!(rec.partner.subscription.is_none());
}

/// A state file holding a reissue without its order (edited, or damaged) is read as the order
/// of the certificate the reissue was sent for: the planner follows the reissue and never
/// places a second billed order for it.
#[test]
fn a_stored_reissue_without_its_order_never_orders_again() {
    let mut stored = serde_json::to_value(installed(200, Some(1825))).unwrap();
    stored["order"] = serde_json::Value::Null;
    stored["reissue"] = serde_json::json!({"certificate_id": 7, "csr_sha256": "BB",
        "previous_serial": "0A", "requested_at": "2027-01-15T08:01:00Z", "confirmed": true});
    let rec: CertRecord = serde_json::from_value(stored).unwrap();
    assert_eq!(rec.certificate_id(), Some(7));
    for now in [t(0), t(150), t(199)] {
        let a = decide(&Inputs {
            allow_orders: true,
            ..inputs(&rec, now)
        });
        assert_eq!(a, Action::Continue, "at {now}");
    }
}

/// An intent is never beside an order: recording one needs no order, the order's answer
/// replaces it, and a refusal withdraws it.
#[test]
fn an_intent_becomes_the_order_or_is_withdrawn() {
    let intent = OrderIntent {
        csr_sha256: "AA".into(),
        common_name: "www.example.com".into(),
        created_at: t(0),
        product_id: 1,
        price: None,
    };
    let mut rec = installed(200, None);
    assert!(!rec.partner.intend(intent.clone()), "beside an order");
    assert!(rec.partner.order().is_some() && rec.partner.intent().is_none());
    assert_eq!(rec.begin_subscription_renewal(), Some(7));
    assert!(rec.partner.intend(intent.clone()));
    assert_eq!(decide(&inputs(&rec, t(0))), Action::Reconcile);
    let order = OrderRef {
        certificate_id: 9,
        order_id: None,
        placed_at: t(0),
        adopted: true,
    };
    assert_eq!(rec.partner.set_order(order.clone()), Some(intent.clone()));
    assert_eq!(rec.partner.intent(), None);
    assert_eq!(rec.partner.renews, Some(7));
    let mut refused = CertRecord::default();
    assert!(refused.partner.intend(intent.clone()));
    assert_eq!(refused.partner.withdraw_intent(), Some(intent));
    assert_eq!(refused.partner.stage, PartnerStage::NoOrder);
}
