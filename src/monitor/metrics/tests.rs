use std::borrow::Cow;

use super::certificate::{CertFacts, Looks, RunFacts, render};
use super::family::Metric;
use super::passes::{KeptRun, fuzz_kept_pass, last_run, sync_text};
use super::samples::{Samples, push_value};
use crate::config::Config;
use crate::engine::forecast::FreshValidation;
use crate::engine::{Outcome, RunReport};
use crate::store::CertRecord;

fn config() -> Config {
    let cert = |name: &str| {
        format!(
            r#"
[[certificate]]
name = "{name}"
domains = ["{name}.example.com"]
product_id = 1101
webroot = "/var/www"
country = "DE"
region = "Berlin"
city = "Berlin"
server = "nginx"
cert_path = "/tmp/{name}.pem"
key_path = "/tmp/{name}.key"
"#
        )
    };
    let text = format!(
        "[api]\nbase_url = \"https://127.0.0.1:1\"\nlogin = \"a@b.test\"\npassword = \"x\"\n{}{}",
        cert("old"),
        cert("www")
    );
    Config::parse(&text, std::path::Path::new("/tmp/x.toml")).unwrap()
}

/// The integer shortcut writes every value as `{value}` does.
#[test]
fn values_are_written_as_rust_prints_them() {
    for v in [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        1_800_000_000.0,
        -1_800_000_000.0,
        8.999_999_999_999_998e15,
        9.0e15,
        1e16,
        2f64.powi(53) + 2.0,
        1e308,
        -9.223_372_036_854_776e18,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MIN_POSITIVE,
        0.1 + 0.2,
    ] {
        let mut out = String::new();
        push_value(&mut out, v);
        assert_eq!(out, format!("{v}"), "{v:?}");
    }
}

/// A retired certificate the configuration still lists shows only as retired (no
/// failures, no pending work, no outcome: nothing an alert on a certificate never
/// installed matches); the other's fresh validation shows when it is due and that a
/// person must do it.
#[test]
fn a_retired_certificate_and_a_fresh_validation_in_the_metrics() {
    let config = config();
    let due = time::macros::datetime!(2027-05-20 00:00 UTC);
    let facts = vec![
        CertFacts {
            cert: &config.certificates[0],
            rec: Some(Cow::Owned(CertRecord {
                name: "old".into(),
                ..CertRecord::default()
            })),
            retired: true,
            fresh: None,
            sunset: None,
        },
        CertFacts {
            cert: &config.certificates[1],
            rec: Some(Cow::Owned(CertRecord {
                name: "www".into(),
                ..CertRecord::default()
            })),
            retired: false,
            fresh: Some(FreshValidation {
                due,
                domains: vec!["www.example.com".into()],
                reuse_days: 100,
                method: crate::engine::forecast::ValidationMethod::Email,
                automatic: false,
            }),
            sunset: Some(crate::engine::sunset::EmailSunset {
                stage: crate::engine::sunset::Stage::Warning,
                days_left: 472,
                message: String::new(),
            }),
        },
    ];
    let report = RunReport {
        certificates: vec![crate::engine::CertReport {
            name: "old".into(),
            outcome: Outcome::Failed {
                error: "certificate 'old' was retired".into(),
            },
            warning: None,
            revocation: None,
            ordered: None,
        }],
        stats: None,
        takeover: None,
    };
    let run = RunFacts {
        started_at: due,
        report: &report,
    };
    let (text, _) = render(&facts, &Default::default(), &Default::default(), Some(&run));
    let old: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("name=\"old\""))
        .collect();
    assert_eq!(
        old,
        [
            "cert_agent_certificate_retired{name=\"old\",common_name=\"old.example.com\",server=\"nginx\"} 1"
        ],
        "{text}"
    );
    let www = "{name=\"www\",common_name=\"www.example.com\",server=\"nginx\"}";
    for line in [
        format!("cert_agent_certificate_retired{www} 0"),
        format!(
            "cert_agent_certificate_fresh_validation_due_timestamp_seconds{www} {}",
            due.unix_timestamp()
        ),
        format!("cert_agent_certificate_fresh_validation_needs_person{www} 1"),
        format!("cert_agent_certificate_email_validation_ends_days{www} 472"),
    ] {
        assert!(text.lines().any(|l| l == line), "{line}\n{text}");
    }
}

/// Every family is documented for operators in `docs/monitoring.md`.
#[test]
fn every_metric_is_documented() {
    let doc = include_str!("../../../docs/monitoring.md");
    for m in Metric::ALL {
        let (name, _) = m.def();
        assert!(
            doc.contains(&format!("`{name}")),
            "{name} is not in docs/monitoring.md"
        );
    }
}

#[test]
fn every_metric_is_listed_once_in_the_enums_order() {
    for (i, m) in Metric::ALL.into_iter().enumerate() {
        assert_eq!(m as usize, i, "{m:?}");
    }
}

/// The fuzz seed of `metrics-last-run.json` reads, and cut short it is refused without a
/// panic.
#[test]
fn the_kept_pass_fuzz_seed_reads() {
    let seed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus/fleet_values/seed-kept-pass");
    let data = std::fs::read(seed).expect("the seed");
    assert_eq!(data.first(), Some(&3), "the parser byte of fleet_values");
    assert!(KeptRun::parse(&data[1..]).is_some());
    for cut in [data.len() / 2, 2, 1] {
        fuzz_kept_pass(&data[1..cut]);
    }
}

#[test]
fn kept_facts_that_make_no_sense_show_nothing() {
    for bad in [
        &b""[..],
        b"{}",
        b"[]",
        b"{\"started_at\":1,\"duration_secs\":-1,\"certificates\":{}}",
        b"{\"started_at\":\"x\",\"duration_secs\":1,\"certificates\":{}}",
        b"{\"started_at\":1,\"duration_secs\":1,\"certificates\":{\"failed\":-2}}",
    ] {
        assert_eq!(
            KeptRun::parse(bad),
            None,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    // Hostile labels are escaped; unknown outcome kinds are not shown.
    let kept = KeptRun::parse(
        br#"{"started_at":5,"duration_secs":0.5,"certificates":{"installed":2,"x\"}":9},
            "requests":[{"method":"GET\"} 1\n","endpoint":"/a","status":200,"count":3}]}"#,
    )
    .expect("reads");
    let mut samples = Samples::default();
    last_run(&mut samples, &kept);
    let text = samples.text();
    assert!(
        text.contains("cert_agent_last_run_certificates{outcome=\"installed\"} 2"),
        "{text}"
    );
    assert!(!text.contains("} 9"), "{text}");
    assert!(text.contains("method=\"GET\\\"} 1\\n\""), "{text}");
    let sync = sync_text(&kept);
    assert!(
        sync.contains("cert_agent_last_sync_timestamp_seconds 5\n"),
        "{sync}"
    );
    assert!(
        sync.contains("cert_agent_last_sync_certificates{outcome=\"installed\"} 2"),
        "{sync}"
    );
    fuzz_kept_pass(
        br#"{"started_at":-9223372036854775808,"duration_secs":1e308,"certificates":{}}"#,
    );
}

fn installed_record(name: &str, serial: &str, at: time::OffsetDateTime) -> CertRecord {
    CertRecord {
        name: name.into(),
        installed: Some(crate::store::Installed {
            serial: serial.into(),
            not_before: at,
            not_after: at + time::Duration::days(90),
            certificate_id: 1,
            files: Vec::new(),
            installed_at: at,
            leaf_file: None,
            leaf_stamp: None,
        }),
        ..CertRecord::default()
    }
}

fn facts<'a>(config: &'a Config, recs: [CertRecord; 2]) -> Vec<CertFacts<'a>> {
    config
        .certificates
        .iter()
        .zip(recs)
        .map(|(cert, rec)| CertFacts {
            cert,
            rec: Some(Cow::Owned(rec)),
            retired: false,
            fresh: None,
            sunset: None,
        })
        .collect()
}

fn sample(text: &str, family: &str, name: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(&format!("{family}{{name=\"{name}\"")))
        .and_then(|l| l.rsplit(' ').next())
        .map(str::to_owned)
}

/// A run that found a certificate never installed (waiting at the CA) gives it no last
/// success; the installed one has its own.
#[test]
fn a_certificate_never_installed_has_no_last_success() {
    let config = config();
    let at = time::macros::datetime!(2026-11-28 12:00 UTC);
    let never = CertRecord {
        name: "old".into(),
        ..CertRecord::default()
    };
    let report = RunReport {
        certificates: ["old", "www"]
            .into_iter()
            .map(|name| crate::engine::CertReport {
                name: name.into(),
                outcome: Outcome::Pending {
                    reason: "validation".into(),
                },
                warning: None,
                revocation: None,
                ordered: None,
            })
            .collect(),
        stats: None,
        takeover: None,
    };
    let run = RunFacts {
        started_at: at + time::Duration::hours(1),
        report: &report,
    };
    let kept = [("old".to_owned(), 5)].into_iter().collect();
    let (text, successes) = render(
        &facts(&config, [never, installed_record("www", "0A", at)]),
        &Looks::default(),
        &kept,
        Some(&run),
    );
    let family = "cert_agent_certificate_last_success_timestamp_seconds";
    assert_eq!(sample(&text, family, "old"), None, "{text}");
    assert!(!successes.contains_key("old"));
    let www = (at + time::Duration::hours(1)).unix_timestamp().to_string();
    assert_eq!(sample(&text, family, "www").as_deref(), Some(www.as_str()));
    // The last attempt still shows for both.
    let attempt = "cert_agent_certificate_last_attempt_timestamp_seconds";
    assert!(sample(&text, attempt, "old").is_some(), "{text}");
}

/// The latest look for the installed serial decides whether the served certificate matches:
/// a `check --served` that saw another serial, then a fleet proof (or an install's own
/// verification) that saw the installed one; a proof that met another serial at one name
/// sets the drift metric.
#[test]
fn the_latest_look_decides_and_a_proof_shows_drift() {
    use crate::store::served::{Observation, Served};
    let config = config();
    let at = time::macros::datetime!(2026-11-28 12:00 UTC);
    let recs = || {
        [
            installed_record("old", "0A", at),
            installed_record("www", "0B", at),
        ]
    };
    let look = |t: i64, installed: &str, served: &str| {
        Observation::of(
            at + time::Duration::minutes(t),
            installed,
            &Served::Serial(served.into()),
        )
        .unwrap()
    };
    let mut looks = Looks::default();
    looks.served.insert("www".into(), look(1, "0B", "99"));
    let (text, _) = render(&facts(&config, recs()), &looks, &Default::default(), None);
    let matches = "cert_agent_certificate_served_matches_installed";
    let mismatch = "cert_agent_fleet_served_serial_mismatch";
    assert_eq!(
        sample(&text, matches, "www").as_deref(),
        Some("0"),
        "{text}"
    );
    assert_eq!(sample(&text, mismatch, "www"), None, "no proof: {text}");

    // A later proof: the common name serves the installed serial, another name does not.
    let mut proved = look(2, "0B", "0B");
    proved.elsewhere = Some(vec!["127.0.0.1:443 (SNI b.test) serves 99".into()]);
    looks.proved.insert("www".into(), proved.clone());
    let (text, _) = render(&facts(&config, recs()), &looks, &Default::default(), None);
    assert_eq!(
        sample(&text, matches, "www").as_deref(),
        Some("0"),
        "{text}"
    );
    assert_eq!(
        sample(&text, mismatch, "www").as_deref(),
        Some("1"),
        "{text}"
    );

    // Fixed: the next proof meets the installed serial everywhere; both metrics clear
    // without another check --served.
    proved.elsewhere = Some(Vec::new());
    proved.at += time::Duration::minutes(1);
    looks.proved.insert("www".into(), proved);
    let (text, _) = render(&facts(&config, recs()), &looks, &Default::default(), None);
    assert_eq!(
        sample(&text, matches, "www").as_deref(),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        sample(&text, mismatch, "www").as_deref(),
        Some("0"),
        "{text}"
    );
    let checked = (at + time::Duration::minutes(3))
        .unix_timestamp()
        .to_string();
    assert_eq!(
        sample(
            &text,
            "cert_agent_certificate_served_checked_timestamp_seconds",
            "www"
        )
        .as_deref(),
        Some(checked.as_str())
    );

    // A look at an earlier serial counts for nothing.
    looks.served.insert("old".into(), look(9, "01", "01"));
    let (text, _) = render(&facts(&config, recs()), &looks, &Default::default(), None);
    assert_eq!(sample(&text, matches, "old"), None, "{text}");
}

/// The fleet's leads lost: a counter (`_total`), documented for operators.
#[test]
fn the_leads_lost_are_a_documented_counter() {
    let text = super::leads_lost_text(3);
    assert!(
        text.contains("# TYPE cert_agent_fleet_leads_lost_total counter\n"),
        "{text}"
    );
    assert!(
        text.ends_with("\ncert_agent_fleet_leads_lost_total 3\n"),
        "{text}"
    );
    let doc = include_str!("../../../docs/monitoring.md");
    assert!(doc.contains("`cert_agent_fleet_leads_lost_total`"));
}
