//! Table tests of the check's levels.

use super::*;
use crate::store::{Installed, OrderRef, PendingKey, Subscription};

fn t(days: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap() + time::Duration::days(days)
}

fn opts() -> CheckOptions {
    CheckOptions {
        names: Vec::new(),
        warning_days: 14,
        critical_days: 7,
        by_lifetime: true,
        served: false,
        balance: false,
        refresh_crl: false,
    }
}

/// Installed from day 0 to day `until`, serial 0A, subscription for a year.
fn installed(until: i64) -> CertRecord {
    CertRecord {
        name: "www".into(),
        partner: crate::store::PartnerBook {
            stage: crate::store::PartnerStage::Ordered {
                order: OrderRef {
                    certificate_id: 7,
                    order_id: Some(1),
                    placed_at: t(0),
                    adopted: false,
                },
                reissue: None,
            },
            subscription: Some(Subscription {
                ends: t(365),
                multi_year: false,
            }),
            ..Default::default()
        },
        installed: Some(Installed {
            serial: "0A".into(),
            // A 90-day certificate: the days thresholds apply, not the lifetime's fractions.
            not_before: t(until - 90),
            not_after: t(until),
            certificate_id: 7,
            files: vec![],
            installed_at: t(0),
            leaf_file: None,
            leaf_stamp: None,
        }),
        ..CertRecord::default()
    }
}

fn level(rec: &CertRecord, disk: Disk, served: Option<Served>, now: i64) -> (Level, String) {
    let c = assess(rec, &disk, served.as_ref(), t(now), &opts(), 30);
    (c.level, c.problems.join("; "))
}

/// (what, record, disk, served, day, level, text the problems contain)
type Row<'a> = (
    &'a str,
    &'a CertRecord,
    Disk,
    Option<Served>,
    i64,
    Level,
    &'a str,
);

#[test]
fn levels() {
    let ok = installed(90);
    let mut failed = installed(90);
    failed.failures = 2;
    failed.last_error = Some("could not read certificate 7".into());
    failed.retry_after = Some(t(10) + time::Duration::hours(2));
    let mut pending = installed(90);
    pending.pending_key = Some(Box::new(PendingKey {
        key_file: "/k".into(),
        csr_pem: String::new(),
        csr_md5: String::new(),
        csr_sha256: String::new(),
        created_at: t(5),
    }));
    let mut none = installed(90);
    none.installed = None;
    let mut ended = none.clone();
    ended.mark_ended("annulled");
    let mut sub_ends = installed(90);
    sub_ends.partner.subscription = Some(Subscription {
        ends: t(90),
        multi_year: false,
    });
    let mut prepared = sub_ends.clone();
    prepared.partner.prolong_prepared_at = Some(t(70));
    let mut failing_long = failed.clone();
    failing_long.failures = 3;
    failing_long.retry_after = None;
    // A follower: this host is fine, the fleet's last attempts (the leader's) failed.
    let fleet = |failures: u32| {
        let mut r = installed(90);
        r.fleet = Some(crate::store::FleetAttempt {
            failures,
            error: Some("POST /reissue: 400".into()),
            failed_at: Some(t(9)),
            by: "web1".into(),
        });
        r
    };
    let (fleet_fine, fleet_once, fleet_thrice) = (fleet(0), fleet(1), fleet(3));
    // A rollout halted by another host's failed proof: CRITICAL here too.
    let mut halted = installed(90);
    halted.rollout_halted =
        Some("rollout halted at wave 0: web2: 127.0.0.1:443 (SNI b.test) serves serial 09".into());
    // The host that led: its own failure is the fleet's; one problem, not two.
    let mut led = failed.clone();
    led.fleet = Some(crate::store::FleetAttempt {
        failures: 2,
        error: failed.last_error.clone(),
        failed_at: Some(t(9)),
        by: "web1".into(),
    });
    let rows: Vec<Row<'_>> = vec![
        (
            "failing for 3 runs",
            &failing_long,
            Disk::AsInstalled,
            None,
            10,
            Level::Critical,
            "the last 3 runs failed: could not read certificate 7",
        ),
        (
            "fleet fine",
            &fleet_fine,
            Disk::AsInstalled,
            None,
            10,
            Level::Ok,
            "",
        ),
        (
            "fleet failed once",
            &fleet_once,
            Disk::AsInstalled,
            None,
            10,
            Level::Warning,
            "the fleet's last 1 attempt(s) failed (led by web1 at ",
        ),
        (
            "rollout halted",
            &halted,
            Disk::AsInstalled,
            None,
            10,
            Level::Critical,
            "rollout halted at wave 0: web2: 127.0.0.1:443 (SNI b.test) serves serial 09",
        ),
        (
            "fleet failed thrice",
            &fleet_thrice,
            Disk::AsInstalled,
            None,
            10,
            Level::Critical,
            "the fleet's last 3 attempt(s) failed (led by web1",
        ),
        (
            "the leader's own failure is the fleet's",
            &led,
            Disk::AsInstalled,
            None,
            10,
            Level::Warning,
            "the last 2 run(s) failed, next try after",
        ),
        ("fresh", &ok, Disk::AsInstalled, None, 10, Level::Ok, ""),
        (
            "warning window",
            &ok,
            Disk::AsInstalled,
            None,
            80,
            Level::Warning,
            "10 days left",
        ),
        (
            "critical window",
            &ok,
            Disk::AsInstalled,
            None,
            85,
            Level::Critical,
            "5 days left",
        ),
        (
            "expired",
            &ok,
            Disk::AsInstalled,
            None,
            95,
            Level::Critical,
            "expired 5 days ago",
        ),
        (
            "file missing",
            &ok,
            Disk::Missing,
            None,
            10,
            Level::Critical,
            "file is missing",
        ),
        (
            "file differs",
            &ok,
            Disk::Differs(Some("0B".into())),
            None,
            10,
            Level::Critical,
            "holds serial 0B, not the installed serial 0A",
        ),
        (
            "served matches (leading zeros do not matter)",
            &ok,
            Disk::AsInstalled,
            Some(Served::Serial("000A".into())),
            10,
            Level::Ok,
            "",
        ),
        (
            "served differs",
            &ok,
            Disk::AsInstalled,
            Some(Served::Serial("0B".into())),
            10,
            Level::Critical,
            "serves serial 0B, installed serial 0A",
        ),
        (
            "served unreachable",
            &ok,
            Disk::AsInstalled,
            Some(Served::Failed("connection refused".into())),
            10,
            Level::Critical,
            "serving: connection refused",
        ),
        (
            "no verify address",
            &ok,
            Disk::AsInstalled,
            Some(Served::NotChecked),
            10,
            Level::Ok,
            "",
        ),
        (
            "failed run",
            &failed,
            Disk::AsInstalled,
            None,
            10,
            Level::Warning,
            "the last 2 run(s) failed",
        ),
        (
            "pending a day",
            &pending,
            Disk::AsInstalled,
            None,
            7,
            Level::Warning,
            "validation pending since",
        ),
        (
            "pending an hour",
            &pending,
            Disk::AsInstalled,
            None,
            5,
            Level::Ok,
            "",
        ),
        (
            "not installed",
            &none,
            Disk::Missing,
            None,
            10,
            Level::Critical,
            "issuance pending",
        ),
        (
            "ended",
            &ended,
            Disk::Missing,
            None,
            10,
            Level::Critical,
            "order annulled",
        ),
        (
            "subscription ends",
            &sub_ends,
            Disk::AsInstalled,
            None,
            70,
            Level::Warning,
            "no renewal order is prepared",
        ),
        (
            "renewal prepared",
            &prepared,
            Disk::AsInstalled,
            None,
            70,
            Level::Ok,
            "",
        ),
    ];
    for (what, rec, disk, served, day, want, text) in rows {
        let (got, problems) = level(rec, disk, served, day);
        assert_eq!(got, want, "{what}: {problems}");
        assert!(problems.contains(text), "{what}: {problems}");
    }
    let (_, led_problems) = level(&led, Disk::AsInstalled, None, 10);
    assert!(!led_problems.contains("the fleet's"), "{led_problems}");
}

#[test]
fn the_plugin_output_names_the_worst_first_with_performance_data() {
    let o = opts();
    let mut certs = Vec::new();
    for (name, rec, disk, day) in [
        ("api", installed(90), Disk::AsInstalled, 80),
        ("www", installed(90), Disk::Missing, 10),
    ] {
        let mut c = assess(&rec, &disk, None, t(day), &o, 30);
        c.name = name.into();
        certs.push(c);
    }
    let report = CheckReport {
        level: Level::Critical,
        certificates: certs,
        money: None,
        fleet_key: None,
        fleet: Vec::new(),
        warning_days: 14,
        critical_days: 7,
    };
    let out = report.render();
    let first = out.lines().next().unwrap();
    assert!(
        first.starts_with("CERT-AGENT CRITICAL - www: the installed certificate file is missing; api: 10 days left | "),
        "{out}"
    );
    assert!(
        first.contains("'api_days_left'=10;14;7 'www_days_left'=80;14;7"),
        "{out}"
    );
    assert_eq!(out.lines().count(), 3, "{out}");

    let all_ok = CheckReport {
        level: Level::Ok,
        certificates: vec![assess(
            &installed(90),
            &Disk::AsInstalled,
            None,
            t(10),
            &o,
            30,
        )],
        money: None,
        fleet_key: None,
        fleet: Vec::new(),
        warning_days: 14,
        critical_days: 7,
    };
    assert_eq!(
        all_ok.render(),
        "CERT-AGENT OK - 1 certificate(s), the nearest expiry in 80 days (www) | 'www_days_left'=80;14;7\n"
    );
    let warned = CheckReport {
        level: Level::Warning,
        fleet_key: Some("remove previous_secret_file".into()),
        ..all_ok
    };
    let out = warned.render();
    assert!(
        out.starts_with("CERT-AGENT WARNING - fleet key: remove previous_secret_file | "),
        "{out}"
    );
    assert!(
        out.contains("\nWARNING fleet key: remove previous_secret_file\n"),
        "{out}"
    );
    let stuck = CheckReport {
        level: Level::Critical,
        fleet_key: None,
        fleet: vec![(
            Level::Critical,
            "lead: the lead has been held by 'web1'".into(),
        )],
        ..warned
    };
    let out = stuck.render();
    assert!(
        out.starts_with("CERT-AGENT CRITICAL - fleet lead: the lead has been held by 'web1' | "),
        "{out}"
    );
    assert!(
        out.contains("\nCRITICAL fleet lead: the lead has been held by 'web1'\n"),
        "{out}"
    );
}

#[test]
fn revocation_raises_the_level() {
    let rec = installed(100);
    let base = || assess(&rec, &Disk::AsInstalled, None, t(10), &opts(), 30);
    assert_eq!(base().level, Level::Ok);
    let url = "http://127.0.0.1:1/crl/s-one.crl".to_owned();
    // rows: (what the CRL says, level, text expected in the problems)
    let rows = [
        (
            Status::Good {
                url: url.clone(),
                next_update: t(11),
                recheck_at: t(11),
            },
            Level::Ok,
            "",
        ),
        (Status::NoCrl, Level::Ok, ""),
        (
            Status::Revoked {
                url: url.clone(),
                serial_hex: "0A".into(),
                revoked_at: t(9),
                reason: Some("keyCompromise".into()),
            },
            Level::Critical,
            "serial 0A was revoked on",
        ),
        (
            Status::Unknown {
                url: Some(url.clone()),
                why: "the CRL is stale".into(),
            },
            Level::Warning,
            "revocation unknown: the CRL http://127.0.0.1:1/crl/s-one.crl was refused",
        ),
    ];
    for (status, level, text) in rows {
        let mut c = base();
        revocation(&mut c, &status);
        assert_eq!(c.level, level, "{status:?}");
        assert!(c.problems.join("; ").contains(text), "{:?}", c.problems);
    }
    // A CRITICAL expiry stays CRITICAL with an unknown revocation.
    let mut c = assess(&installed(3), &Disk::AsInstalled, None, t(0), &opts(), 30);
    revocation(
        &mut c,
        &Status::Unknown {
            url: None,
            why: "x".into(),
        },
    );
    assert_eq!(c.level, Level::Critical);
}

/// A 6-day certificate is judged by its lifetime: OK with days left, WARNING in its last
/// quarter, CRITICAL in its last tenth (in hours); a 90-day one by the configured days.
#[test]
fn thresholds_scale_with_a_short_lifetime() {
    let six_days = |left_hours: i64| {
        let mut rec = installed(6);
        if let Some(i) = rec.installed.as_mut() {
            i.not_before = t(0);
        }
        let now = t(6) - time::Duration::hours(left_hours);
        assess(&rec, &Disk::AsInstalled, None, now, &opts(), 30)
    };
    assert_eq!(
        six_days(100).level,
        Level::Ok,
        "{:?}",
        six_days(100).problems
    );
    let warn = six_days(30);
    assert_eq!(warn.level, Level::Warning, "{:?}", warn.problems);
    assert!(
        warn.problems.join("; ").contains("30 hours left"),
        "{:?}",
        warn.problems
    );
    assert_eq!(six_days(10).level, Level::Critical);
    // 90 days: 10 days left is WARNING (under 14), 5 CRITICAL (under 7), as configured.
    let at = |left: i64| {
        assess(
            &installed(left),
            &Disk::AsInstalled,
            None,
            t(0),
            &opts(),
            30,
        )
        .level
    };
    assert_eq!(at(10), Level::Warning);
    assert_eq!(at(5), Level::Critical);
    assert_eq!(at(20), Level::Ok);
    // Thresholds the operator gave are taken as given, whatever the lifetime.
    let mut given = opts();
    given.by_lifetime = false;
    let mut rec = installed(6);
    if let Some(i) = rec.installed.as_mut() {
        i.not_before = t(0);
    }
    assert_eq!(
        assess(&rec, &Disk::AsInstalled, None, t(1), &given, 30).level,
        Level::Critical
    );
}
