//! The proof's verdict, its names, its handshakes against a local TLS server, and its
//! sealing: a forged proof, a proof moved to another host's key, and one made by another
//! host are refused naming the key.

use std::sync::Arc;

use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;

use super::*;
use crate::fleet::key::{FleetKey, KEY_LEN};

fn keys(byte: u8) -> FleetKeys {
    FleetKeys::new(FleetKey::from_bytes(&[byte; KEY_LEN]).unwrap(), None)
}

fn answer_of(served: Option<&str>, chain: Option<&str>, error: Option<&str>) -> Answer {
    Answer {
        address: "127.0.0.1:443".into(),
        server_name: "www.test".into(),
        served: served.map(Into::into),
        chain_error: chain.map(Into::into),
        error: error.map(Into::into),
    }
}

fn proof(answers: Vec<Answer>, health: Option<Health>) -> Proof {
    Proof {
        host: "web2".into(),
        serial: "0A1B".into(),
        version: 3,
        at: OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000),
        answers,
        health,
        since: None,
        rolled_back: None,
    }
}

#[test]
fn a_proof_passes_only_when_every_answer_and_the_health_command_do() {
    let ok = answer_of(Some("0a1b"), None, None);
    let healthy = Some(Health {
        exit: Some(0),
        error: None,
    });
    assert_eq!(proof(vec![ok.clone()], healthy.clone()).failure(), None);
    assert_eq!(proof(vec![], None).failure(), None);
    let rows: [(Vec<Answer>, Option<Health>, &str); 6] = [
        (
            vec![ok.clone(), answer_of(Some("99"), None, None)],
            None,
            "127.0.0.1:443 (SNI www.test) serves serial 99, not 0A1B",
        ),
        (
            vec![answer_of(Some("0A1B"), Some("no issuer"), None)],
            None,
            "the served chain does not verify: no issuer",
        ),
        (
            vec![answer_of(None, None, Some("connect: refused"))],
            None,
            "127.0.0.1:443 (SNI www.test): connect: refused",
        ),
        (
            vec![answer_of(None, None, None)],
            None,
            "no certificate seen",
        ),
        (
            vec![ok.clone()],
            Some(Health {
                exit: Some(7),
                error: None,
            }),
            "the health command exited 7",
        ),
        (
            vec![ok],
            Some(Health {
                exit: None,
                error: Some("did not finish within 60 s".into()),
            }),
            "the health command did not finish within 60 s",
        ),
    ];
    for (answers, health, want) in rows {
        let why = proof(answers, health).failure().expect("fails");
        assert!(why.contains(want), "{why} / {want}");
    }
}

#[test]
fn wildcards_are_not_sent_as_server_names() {
    let mut cert = crate::config::testing::certificate(
        "name = \"www\"\ndomains = [\"a.test\", \"b.test\"]\nproduct_id = 1",
    );
    cert.domains = vec!["*.a.test".into(), "b.test".into()];
    assert_eq!(server_names(&cert), ["b.test"]);
    cert.domains = vec!["*.a.test".into()];
    assert_eq!(server_names(&cert), ["a.test"]);
}

#[test]
fn a_sealed_proof_opens_only_at_its_own_hosts_key_and_names_the_key_when_refused() {
    let k = keys(0x5a);
    let p = proof(vec![answer_of(Some("0A1B"), None, None)], None);
    let (rel, sealed) = seal(&k, "www", &p).unwrap();
    assert_eq!(rel, "hosts/web2/proof/www");
    assert_eq!(
        open_at(&k, "/ca/hosts/web2/proof/www", &rel, &sealed).unwrap(),
        p
    );

    // Garbage, a value under another fleet key, a proof moved to web3's key or to another
    // certificate: refused, naming the key.
    let forged = seal(&keys(0x11), "www", &p).unwrap().1;
    for (rel, value) in [
        ("hosts/web2/proof/www", b"{\"host\":\"web2\"}".to_vec()),
        ("hosts/web2/proof/www", forged),
        ("hosts/web3/proof/www", sealed.clone()),
        ("hosts/web2/proof/shop", sealed.clone()),
    ] {
        let full = format!("/ca/{rel}");
        let e = format!("{:#}", open_at(&k, &full, rel, &value).unwrap_err());
        assert!(e.contains(&full) && e.contains("refused"), "{e}");
    }
    // A proof sealed by a fleet member for web3's key but saying it is web2's: refused.
    let mut other = p.clone();
    other.host = "web2".into();
    let rel3 = "hosts/web3/proof/www";
    let place = Place::new(Purpose::Proof, rel3, "www");
    let v = envelope::seal_json(&k, &place, 1, &other).unwrap();
    let e = format!(
        "{:#}",
        open_at(&k, "/ca/hosts/web3/proof/www", rel3, &v).unwrap_err()
    );
    assert!(e.contains("made by host \"web2\", not \"web3\""), "{e}");
    // Sealed at a version other than its time: refused (the version is the time a replay is
    // judged by).
    let rel2 = "hosts/web2/proof/www";
    let place = Place::new(Purpose::Proof, rel2, "www");
    let v = envelope::seal_json(&k, &place, 99, &p).unwrap();
    let e = format!("{:#}", open_at(&k, "/ca/x", rel2, &v).unwrap_err());
    assert!(e.contains("sealed as version 99; refused"), "{e}");
    // Dated before 1970 (version 0, as sealed): opens back.
    let mut old = p.clone();
    old.at = time::macros::datetime!(1013-11-28 19:00 UTC);
    let (rel0, v) = seal(&k, "www", &old).unwrap();
    assert_eq!(open_at(&k, "/ca/x", &rel0, &v).unwrap().at, old.at);
    // A replayed proof of an older time opens here (the gates refuse it against the version
    // this host opened before, [`crate::fleet::rollout::gather`]): the version carries its
    // time.
    let text = "\u{1b}[2Jweb2";
    let mut hostile = p;
    hostile.answers[0].error = Some(text.into());
    let (rel, v) = seal(&k, "www", &hostile).unwrap();
    let opened = open_at(&k, "/ca/x", &rel, &v).unwrap();
    assert!(
        !opened.answers[0]
            .error
            .as_deref()
            .unwrap()
            .contains('\u{1b}')
    );
}

/// A TLS server on 127.0.0.1:0 serving `chain` (leaf first) with `key`.
async fn tls_server(chain: Vec<Vec<u8>>, key_pem: String) -> String {
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain.into_iter().map(Into::into).collect(), key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = acceptor.accept(tcp).await;
            });
        }
    });
    addr
}

/// A CA and a leaf for `names` it issued: (ca DER, leaf DER, leaf key PEM, leaf serial).
fn issued(names: &[&str]) -> (Vec<u8>, Vec<u8>, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "Proof Test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = rcgen::CertificateParams::new(names.clone()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, names[0].clone());
    let leaf = params.signed_by(&leaf_key, &issuer).unwrap();
    let serial = crate::install::verify::serial_of_der(leaf.der())
        .unwrap()
        .to_string();
    (
        ca_cert.der().to_vec(),
        leaf.der().to_vec(),
        leaf_key.serialize_pem(),
        serial,
    )
}

#[tokio::test]
async fn a_handshake_shows_the_serial_and_whether_the_served_chain_verifies() {
    let (ca, leaf, key, serial) = issued(&["www.test", "shop.test"]);
    let now = OffsetDateTime::now_utc();
    let soon = Instant::now() + Duration::from_secs(2);
    let whole = tls_server(vec![leaf.clone(), ca.clone()], key.clone()).await;
    let a = answer(&whole, "www.test", &serial, (now, soon), &[]).await;
    assert_eq!(a.failure(&serial), None, "{a:?}");
    // The leaf without its issuer: served, but the chain does not verify.
    let alone = tls_server(vec![leaf], key).await;
    let a = answer(&alone, "shop.test", &serial, (now, soon), &[]).await;
    let why = a.failure(&serial).expect("the chain is incomplete");
    assert!(
        why.contains("does not verify") && why.contains(&alone),
        "{why}"
    );
    // Checked against the roots the install was checked against: its own CA passes, another
    // root does not.
    let own = [rustls_pki_types::CertificateDer::from(ca.clone())];
    let a = answer(&whole, "www.test", &serial, (now, soon), &own).await;
    assert_eq!(a.failure(&serial), None, "{a:?}");
    let (other, _, _, _) = issued(&["other.test"]);
    let other = [rustls_pki_types::CertificateDer::from(other)];
    let a = answer(&whole, "www.test", &serial, (now, soon), &other).await;
    assert!(a.failure(&serial).is_some(), "another root: {a:?}");
    // Another serial expected: the serial served is named, after the wait.
    let a = answer(&whole, "www.test", "01", (now, Instant::now()), &[]).await;
    let why = a.failure("01").unwrap();
    assert!(
        why.contains(&format!("serves serial {serial}, not 01")),
        "{why}"
    );
}

#[tokio::test]
async fn the_names_of_a_proof_are_asked_side_by_side_within_one_bound() {
    // An address that accepts and never answers: every handshake waits for its limit.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = silent.local_addr().unwrap().to_string();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            open.push(s);
        }
    });
    let names: Vec<String> = (0..8).map(|i| format!("n{i}.test")).collect();
    let mut cert = crate::config::testing::certificate(
        "name = \"www\"\ndomains = [\"a.test\"]\nproduct_id = 1",
    );
    cert.domains = names.clone();
    cert.install.verify_address = Some(address);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(1);
    let now = OffsetDateTime::now_utc();
    let p = prove(&cert, ("0A1B", 1), ("web1", None), (now, deadline)).await;
    let took = started.elapsed();
    held.abort();
    assert_eq!(p.answers.len(), 8);
    let asked: Vec<&str> = p.answers.iter().map(|a| a.server_name.as_str()).collect();
    assert_eq!(asked, names, "in the order of the names");
    assert!(p.answers.iter().all(|a| a.error.is_some()), "{p:?}");
    // One after the other, eight names would take 1 s + 7 × 0.5 s.
    assert!(took < Duration::from_millis(2_500), "{took:?}");
}

/// A passing proof keeps the `since` of this host's last passing proof of the same serial; a
/// failed proof has none, and the next passing one starts again from its own time.
#[test]
fn a_passing_proof_keeps_since_when_its_serial_was_proved_without_a_break() {
    let at = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
    let earlier = at - time::Duration::hours(2);
    let passing = proof(vec![answer_of(Some("0A1B"), None, None)], None);
    let kept = |serial: &str, since: Option<OffsetDateTime>| Observation {
        at: earlier,
        installed_serial: serial.into(),
        served_serial: Some(serial.into()),
        error: None,
        elsewhere: Some(Vec::new()),
        proved_since: since,
    };
    let rows: [(Option<Observation>, Option<OffsetDateTime>); 5] = [
        (None, Some(at)),
        (Some(kept("0a1b", Some(earlier))), Some(earlier)),
        // After a failed proof (none kept), of another serial, or dated after this one.
        (Some(kept("0A1B", None)), Some(at)),
        (Some(kept("0A1C", Some(earlier))), Some(at)),
        (
            Some(kept("0A1B", Some(at + time::Duration::hours(1)))),
            Some(at),
        ),
    ];
    for (k, want) in rows {
        let mut p = passing.clone();
        p.carry_since(k.as_ref());
        assert_eq!(p.since, want, "{k:?}");
        assert_eq!(p.observation("www.test").and_then(|o| o.proved_since), want);
    }
    let mut failed = proof(vec![answer_of(Some("99"), None, None)], None);
    failed.since = Some(earlier);
    failed.carry_since(Some(&kept("0A1B", Some(earlier))));
    assert_eq!(failed.since, None);
}

#[test]
fn the_failed_proofs_are_kept_as_they_fail_and_pass_and_a_damaged_file_is_not_read() {
    use super::again::Failed;
    let dir = tempfile::tempdir().unwrap();
    let store = crate::store::Store::existing(dir.path());
    assert_eq!(Failed::load(&store), None, "no file");
    let failing = proof(vec![answer_of(Some("0B"), None, None)], None);
    let passing = proof(vec![answer_of(Some("0A1B"), None, None)], None);
    assert!(failing.failure().is_some() && passing.failure().is_none());
    again::note_published(
        &store,
        &[
            ("www".to_owned(), failing.clone()),
            ("shop".to_owned(), passing.clone()),
        ],
    );
    let kept = Failed::load(&store).unwrap();
    assert_eq!(kept.names.iter().collect::<Vec<_>>(), ["www"]);
    assert_eq!(kept.listed_at, 0, "never listed whole: the next look lists");
    again::note_published(
        &store,
        &[("www".to_owned(), passing), ("blog".to_owned(), failing)],
    );
    let kept = Failed::load(&store).unwrap();
    assert_eq!(kept.names.iter().collect::<Vec<_>>(), ["blog"]);
    // Fresh for an hour after the listing; a time before it (a clock set back, a forged
    // time) or past the hour means listing again.
    let listed = Failed {
        listed_at: 1_000_000,
        names: std::collections::BTreeSet::new(),
    };
    assert!(listed.fresh_at(1_000_000) && listed.fresh_at(1_003_599));
    assert!(!listed.fresh_at(1_003_600) && !listed.fresh_at(999_999));
    let forged = Failed {
        listed_at: i64::MIN,
        ..listed
    };
    assert!(!forged.fresh_at(i64::MAX) && !forged.fresh_at(0));
    for garbage in [
        &b""[..],
        b"{",
        b"[]",
        b"{\"listed_at\":\"x\",\"names\":[]}",
        // A name no certificate can have: the file is not read.
        b"{\"listed_at\":1,\"names\":[\"../www\"]}",
        b"{\"listed_at\":1,\"names\":[\"a/b\"]}",
    ] {
        std::fs::write(dir.path().join("proofs-failed.json"), garbage).unwrap();
        assert_eq!(Failed::load(&store), None, "{garbage:?}");
    }
}
