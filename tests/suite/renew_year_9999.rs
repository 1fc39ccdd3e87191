//! Dates near the limits, against the sandbox: an installed certificate valid from
//! 9999-12-01 to 9999-12-31 23:59:59 UTC (the largest date X.509's GeneralizedTime holds,
//! made with rcgen and put at the install paths, the record saying so) goes through `renew`, `status`,
//! `check` and `forecast`: none panics, each says what it can.

use crate::support;

use std::fs;

use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
use support::env::{AgentOutput, TestEnv};
use support::scenario;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::datetime;

/// The last second of year 9999.
const LAST: OffsetDateTime = datetime!(9999-12-31 23:59:59 UTC);
/// Its certificate's start: 30 days before, so that its renewal falls due in its last days and
/// a renewal's new term would end after the largest date there is.
const FIRST: OffsetDateTime = datetime!(9999-12-01 23:59:59 UTC);

const SERIAL: [u8; 8] = [0x19, 0x99, 0x12, 0x31, 0x23, 0x59, 0x59, 0x01];

/// `www` issued through the sandbox, then its installed leaf replaced by one valid until
/// [`LAST`] (same names, its own key) and its record saying so, the subscription too.
fn dated_9999() -> TestEnv {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.year-9999.test"]);
    env.certs.push(spec);
    scenario::renew_synced(&env).expect_code(0);

    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec!["www.year-9999.test".to_owned()]).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name
        .push(DnType::CommonName, "www.year-9999.test");
    p.not_before = FIRST;
    p.not_after = LAST;
    p.serial_number = Some(rcgen::SerialNumber::from(SERIAL.to_vec()));
    let cert = p.self_signed(&key).unwrap();
    let files = &env.certs[0].files;
    fs::write(files.leaf_file(), cert.pem()).unwrap();
    fs::write(&files.key, key.serialize_pem()).unwrap();
    let last = LAST.format(&Rfc3339).unwrap();
    env.edit_record("www", |v| {
        v["installed"]["not_before"] = FIRST.format(&Rfc3339).unwrap().into();
        v["installed"]["not_after"] = last.clone().into();
        v["installed"]["serial"] = hex::encode_upper(SERIAL).into();
        v["installed"]["leaf_stamp"] = serde_json::Value::Null;
        if v["subscription"].is_object() {
            v["subscription"]["ends"] = last.clone().into();
        }
    });
    env
}

fn no_panic(out: &AgentOutput) {
    assert!(
        !out.stderr.contains("panicked") && out.code != Some(101),
        "{}",
        out.describe()
    );
}

/// Guards the date arithmetic near the limits: `renew` (twice: the forecast runs after every
/// run), `status`, `check` and `forecast` on a certificate dated 9999-12-31 end normally and
/// say when it ends and when its renewal falls due (the renewal's own term, which would run
/// past year 9999, is not projected). Before, `status` panicked in the projection.
#[test]
fn a_certificate_dated_9999_panics_no_command() {
    let env = dated_9999();
    let run = |args: &[&str]| {
        let out = scenario::run_synced(&env, args);
        no_panic(&out);
        out
    };
    run(&["--json", "renew", "--wait", "30"]).expect_code(0);
    let out = run(&["renew"]);
    out.expect_code(0);
    assert!(
        out.stdout
            .contains("valid until 9999-12-31; next renewal check after 9999-"),
        "{}",
        out.describe()
    );
    let out = run(&["status"]);
    out.expect_code(0);
    assert!(
        out.stdout.contains("9999-12-31") && out.stdout.contains("do nothing before 9999-"),
        "{}",
        out.describe()
    );
    let out = run(&["--json", "status"]);
    out.expect_code(0);
    assert_eq!(
        out.json()[0]["expires"],
        "9999-12-31T23:59:59Z",
        "{}",
        out.describe()
    );
    let out = run(&["check"]);
    out.expect_code(0);
    assert!(
        out.stdout.starts_with("CERT-AGENT OK"),
        "{}",
        out.describe()
    );
    let out = run(&["forecast"]);
    out.expect_code(0);
    assert!(
        out.stdout.contains("Nothing falls due"),
        "{}",
        out.describe()
    );
    run(&["--json", "forecast", "--days", "1830"]).expect_code(0);
}
