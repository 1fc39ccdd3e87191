//! Drift: which answers of a proof served another serial, what this host keeps of a proof,
//! and which certificates a synchronisation proves again.

use time::OffsetDateTime;

use super::*;
use crate::fleet::proof::{Answer, Proof};

fn answer(name: &str, served: Option<&str>, error: Option<&str>) -> Answer {
    Answer {
        address: "127.0.0.1:8443".into(),
        server_name: name.into(),
        served: served.map(Into::into),
        chain_error: None,
        error: error.map(Into::into),
    }
}

fn proof(answers: Vec<Answer>) -> Proof {
    Proof {
        host: "web2".into(),
        serial: "0A1B".into(),
        version: 3,
        at: OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000),
        answers,
        health: None,
        since: None,
        rolled_back: None,
    }
}

fn config() -> Config {
    let cert = |name: &str, verify: &str| {
        format!(
            "[[certificate]]\nname = \"{name}\"\ndomains = [\"{name}.example.com\", \
             \"b.{name}.example.com\"]\nproduct_id = 1103\nwebroot = \"/var/www\"\ncountry = \
             \"DE\"\nregion = \"Berlin\"\ncity = \"Berlin\"\nserver = \"nginx\"\ncert_path = \
             \"/tmp/{name}.pem\"\nkey_path = \"/tmp/{name}.key\"\nverify_address = \"{verify}\"\n"
        )
    };
    let text = format!(
        "[api]\nbase_url = \"https://127.0.0.1:1\"\nlogin = \"a@b.test\"\npassword = \"x\"\n{}{}{}{}",
        cert("www", "127.0.0.1:8443"),
        cert("shop", "127.0.0.1:8443"),
        cert("api", ""),
        cert("new", "127.0.0.1:8443"),
    );
    Config::parse(&text, std::path::Path::new("/tmp/x.toml")).unwrap()
}

#[test]
fn only_answers_that_served_another_serial_are_drift() {
    let p = proof(vec![
        answer("www.example.com", Some("0a1b"), None),
        answer("b.www.example.com", Some("4A17"), None),
        answer("c.www.example.com", None, Some("connection refused")),
    ]);
    assert_eq!(
        p.served_elsewhere(),
        ["127.0.0.1:8443 (SNI b.www.example.com) serves 4A17"]
    );
    assert!(
        proof(vec![answer("www.example.com", Some("0A1B"), None)])
            .served_elsewhere()
            .is_empty()
    );
}

#[test]
fn a_proof_is_kept_with_the_common_names_answer_and_the_drift() {
    let config = config();
    let www = &config.certificates[0];
    let p = proof(vec![
        answer("b.www.example.com", Some("4A17"), None),
        answer("www.example.com", Some("0A1B"), None),
    ]);
    let o = p.observation(www.common_name()).expect("a handshake");
    assert_eq!(o.served_serial.as_deref(), Some("0A1B"));
    assert_eq!(o.elsewhere.as_ref().map(Vec::len), Some(1));
    assert!(!o.matches(), "another serial at one name is no match");
    let clean = proof(vec![answer("www.example.com", Some("0A1B"), None)]);
    assert!(clean.observation(www.common_name()).unwrap().matches());
    assert!(proof(vec![]).observation(www.common_name()).is_none());
}

#[test]
fn a_certificate_is_proved_again_only_when_installed_current_and_its_proof_is_old() {
    let config = config();
    let t0 = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
    let versions = Versions::parse(
        "/tmp/fleet-versions.json".into(),
        br#"{"www":{"current":{"version":7,"digest":"d","serial":"0A1B","not_before":"2024-01-01T00:00:00Z"}},
            "shop":{"current":{"version":2,"digest":"d","serial":"0C","not_before":"2024-01-01T00:00:00Z"}},
            "api":{"current":{"version":2,"digest":"d","serial":"0D","not_before":"2024-01-01T00:00:00Z"}},
            "new":{"current":{"version":4,"digest":"d","serial":"0F","not_before":"2024-01-01T00:00:00Z"}}}"#,
    )
    .unwrap();
    let installed = |name: &str, serial: &str| {
        let mut r = crate::store::CertRecord {
            name: name.into(),
            ..Default::default()
        };
        r.installed = Some(crate::store::Installed {
            serial: serial.into(),
            not_before: t0,
            not_after: t0,
            certificate_id: 1,
            files: Vec::new(),
            installed_at: t0,
            leaf_file: None,
            leaf_stamp: None,
        });
        (name.to_owned(), r)
    };
    // shop is kept back (another serial installed), api has no verify address, new was just
    // proved by this synchronisation.
    let records: Records = [
        installed("www", "0a1b"),
        installed("shop", "0B"),
        installed("api", "0D"),
        installed("new", "0F"),
    ]
    .into_iter()
    .collect();
    let just = [("new".to_owned(), "0F".to_owned(), 4)];
    let kept_at = |at: OffsetDateTime, serial: &str| {
        let mut o = proof(vec![answer("www.example.com", Some(serial), None)])
            .observation("www.example.com")
            .unwrap();
        o.at = at;
        o.installed_serial = serial.into();
        [("www".to_owned(), o)].into_iter().collect()
    };
    let due_at = |kept: &std::collections::BTreeMap<String, Observation>, now, every| {
        due(&config, (&records, &versions), kept, (now, every), &just)
    };
    let www = vec![("www".to_owned(), "0a1b".to_owned(), 7)];
    // Never proved here: due.
    assert_eq!(due_at(&Default::default(), t0, 1800), www);
    // Proved 10 minutes ago: not yet; 31 minutes ago: due; 0 s: at every synchronisation.
    let recent = kept_at(t0 - time::Duration::minutes(10), "0A1B");
    assert!(due_at(&recent, t0, 1800).is_empty());
    assert_eq!(due_at(&recent, t0 + time::Duration::minutes(21), 1800), www);
    assert_eq!(due_at(&recent, t0, 0), www);
    // A recent proof of another serial does not count.
    assert_eq!(
        due_at(&kept_at(t0 - time::Duration::minutes(1), "99"), t0, 1800),
        www
    );
}
