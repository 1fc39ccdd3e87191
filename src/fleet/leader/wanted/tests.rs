use time::{Duration, OffsetDateTime};

use super::*;
use crate::store::{Installed, OrderIntent, OrderRef, PartnerBook, PartnerStage, RevocationSeen};

fn config() -> Config {
    let text = r#"
[api]
base_url = "https://127.0.0.1:1"
login = "a@b.test"
password = "x"

[agent]
renew_before_days = 30

[[certificate]]
name = "www"
domains = ["www.example.com"]
product_id = 1101
webroot = "/var/www"
country = "DE"
region = "Berlin"
city = "Berlin"
server = "nginx"
cert_path = "/tmp/www.pem"
key_path = "/tmp/www.key"
"#;
    Config::parse(text, std::path::Path::new("/tmp/x.toml")).unwrap()
}

const UNATTENDED: Run = Run {
    asked: Asked::Unattended,
    crl_due: false,
    key_check_forged: false,
};

fn now() -> OffsetDateTime {
    time::macros::datetime!(2027-01-01 00:00 UTC)
}

/// The fleet's record of an issued certificate, and this host's record serving it
/// (`days_left` until it ends).
fn issued(days_left: i64) -> (CertRecord, CertRecord) {
    let placed = now() - Duration::days(199 - days_left);
    let shared = CertRecord {
        name: "www".into(),
        partner: PartnerBook {
            stage: PartnerStage::Ordered {
                order: OrderRef {
                    certificate_id: 7,
                    order_id: Some(7),
                    placed_at: placed,
                    adopted: false,
                },
                reissue: None,
            },
            subscription: Some(crate::store::Subscription {
                ends: now() + Duration::days(400),
                multi_year: true,
            }),
            ..Default::default()
        },
        ..CertRecord::default()
    };
    let local = CertRecord {
        installed: Some(Installed {
            serial: "0A".into(),
            not_before: placed,
            not_after: now() + Duration::days(days_left),
            certificate_id: 7,
            files: Vec::new(),
            installed_at: placed,
            leaf_file: None,
            leaf_stamp: None,
        }),
        ..shared.clone()
    };
    (shared, local)
}

/// What [`wanted`] says of one certificate: the fleet's `shared` record, its current serial
/// `0A` (issued before any of this host's), this host's `local` record.
fn ask(config: &Config, said: Said, shared: Shared, local: &CertRecord) -> Option<String> {
    let nb = now() - Duration::days(400);
    let facts = [Facts {
        cert: &config.certificates[0],
        said,
        refused: None,
        shared,
        fleet_has: Some(("0a", nb)),
        local: Some(local),
    }];
    wanted(config, UNATTENDED, &facts, now())
}

fn record(r: &CertRecord) -> Shared {
    Shared::Record(Box::new(r.clone()))
}

#[test]
fn nothing_due_and_nothing_in_flight_needs_no_leader() {
    let config = config();
    let (shared, local) = issued(150);
    assert_eq!(ask(&config, Said::InStep, record(&shared), &local), None);
    // What a lead leaves alone anyway: held until valid, not installable here, retired.
    for said in [Said::Held, Said::NotHere, Said::Retired] {
        let (_, mut due) = issued(5);
        due.installed = None;
        assert_eq!(ask(&config, said, record(&shared), &due), None, "{said:?}");
    }
}

#[test]
fn a_certificate_due_by_the_planners_rule_needs_a_leader() {
    let config = config();
    // Within renew_before_days (30) of its end: due; 150 days before: not.
    let (shared, local) = issued(29);
    let why = ask(&config, Said::InStep, record(&shared), &local).unwrap_or_default();
    assert!(why.starts_with("'www': a reissue is due"), "{why}");
    let (shared, local) = issued(150);
    assert_eq!(ask(&config, Said::InStep, record(&shared), &local), None);
}

#[test]
fn work_in_flight_in_the_shared_record_needs_a_leader() {
    let config = config();
    let (mut shared, local) = issued(150);
    assert!(shared.partner.begin_reissue(crate::store::ReissueState {
        certificate_id: 7,
        csr_sha256: "AB".into(),
        previous_serial: Some("0A".into()),
        requested_at: now(),
        confirmed: true,
    }));
    let why = ask(&config, Said::InStep, record(&shared), &local).unwrap_or_default();
    assert!(why.contains("reissue of certificate 7 pending"), "{why}");
    // An order intent, in the fleet's record or only in this host's.
    let intent = OrderIntent {
        csr_sha256: "CD".into(),
        common_name: "www.example.com".into(),
        created_at: now(),
        product_id: 1101,
        price: None,
    };
    let intended = CertRecord {
        name: "www".into(),
        partner: PartnerBook {
            stage: PartnerStage::Intended(intent),
            ..Default::default()
        },
        ..CertRecord::default()
    };
    let why = ask(&config, Said::InStep, record(&intended), &local).unwrap_or_default();
    assert!(why.contains("without a known answer"), "{why}");
    let (shared, _) = issued(150);
    let local_intent = CertRecord {
        installed: local.installed.clone(),
        ..intended
    };
    let why = ask(&config, Said::InStep, record(&shared), &local_intent).unwrap_or_default();
    assert!(why.contains("order intent"), "{why}");
}

#[test]
fn in_doubt_a_run_leads() {
    let config = config();
    let (shared, local) = issued(150);
    // A shared record that did not open or was not read; a value refused here.
    let why = ask(
        &config,
        Said::InStep,
        Shared::Unknown("garbage".into()),
        &local,
    );
    assert!(why.is_some_and(|w| w.contains("garbage")));
    assert!(ask(&config, Said::Failed, record(&shared), &local).is_some());
    // The fleet's certificate not installed here, or another serial served.
    let mut other = local.clone();
    other.installed = None;
    assert!(ask(&config, Said::InStep, record(&shared), &other).is_some());
    let mut newer = local.clone();
    if let Some(i) = newer.installed.as_mut() {
        i.serial = "0B".into();
        i.not_before += Duration::days(1);
    }
    let why = ask(&config, Said::InStep, record(&shared), &newer).unwrap_or_default();
    assert!(why.contains("hands it over"), "{why}");
    // A revoked certificate.
    let mut revoked = local.clone();
    revoked.revocation = Some(RevocationSeen {
        serial: "0a".into(),
        state: "revoked".into(),
        url: None,
        detail: "revoked".into(),
        revoked_at: None,
        reason: None,
    });
    assert!(ask(&config, Said::InStep, record(&shared), &revoked).is_some());
    // No shared record, no current certificate, a refused spec, this host's record unread.
    assert!(ask(&config, Said::InStep, Shared::Absent, &local).is_some());
    let cert = &config.certificates[0];
    let none = [Facts {
        cert,
        said: Said::InStep,
        refused: None,
        shared: record(&shared),
        fleet_has: None,
        local: Some(&local),
    }];
    assert!(wanted(&config, UNATTENDED, &none, now()).is_some());
    let refused = [Facts {
        refused: Some("names differ"),
        fleet_has: Some(("0a", now())),
        ..none[0].clone_for_test()
    }];
    let why = wanted(&config, UNATTENDED, &refused, now()).unwrap_or_default();
    assert!(why.contains("names differ"), "{why}");
    let unread = [Facts {
        local: None,
        fleet_has: Some(("0a", now())),
        ..none[0].clone_for_test()
    }];
    assert!(wanted(&config, UNATTENDED, &unread, now()).is_some());
}

#[test]
fn an_operators_command_or_the_crl_checks_lead_whatever_the_certificates() {
    let config = config();
    let (shared, local) = issued(150);
    let facts = [Facts {
        cert: &config.certificates[0],
        said: Said::InStep,
        refused: None,
        shared: record(&shared),
        fleet_has: Some((
            "0a",
            local.installed.as_ref().map_or(now(), |i| i.not_before),
        )),
        local: Some(&local),
    }];
    assert_eq!(wanted(&config, UNATTENDED, &facts, now()), None);
    assert!(
        wanted(
            &config,
            Run {
                asked: Asked::Explicit,
                ..UNATTENDED
            },
            &facts,
            now()
        )
        .is_some()
    );
    assert!(
        wanted(
            &config,
            Run {
                crl_due: true,
                ..UNATTENDED
            },
            &facts,
            now()
        )
        .is_some()
    );
    let forged = Run {
        key_check_forged: true,
        ..UNATTENDED
    };
    assert!(wanted(&config, forged, &facts, now()).is_some());
}

impl<'a> Facts<'a> {
    fn clone_for_test(&self) -> Facts<'a> {
        Facts {
            cert: self.cert,
            said: self.said,
            refused: self.refused,
            shared: match &self.shared {
                Shared::Record(r) => Shared::Record(r.clone()),
                Shared::Absent => Shared::Absent,
                Shared::Unknown(w) => Shared::Unknown(w.clone()),
            },
            fleet_has: self.fleet_has,
            local: self.local,
        }
    }
}
