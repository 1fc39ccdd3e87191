//! `retire NAME --revoke`: a certificate of an ACME CA revoked at the CA (revokeCert) before it
//! is retired; refused without confirmation, for a certificate of the Partner API, and a
//! refused revocation retires nothing.

use crate::support;

use super::e2e_acme::acme_env;
use support::env::TestEnv;
use support::webserver::Server;

#[test]
fn retire_revoke_revokes_at_the_acme_ca_then_retires() {
    let Some(a) = acme_env(Server::Nginx, "www.acme-retire.test") else {
        return;
    };
    let out = a.env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");

    // Without --yes and without a terminal nothing is asked of the CA.
    let refused = a.env.agent(["retire", "www", "--revoke"]).run();
    assert_ne!(refused.code, Some(0), "{}", refused.describe());
    assert!(!a.pebble.log().contains("/revoke-cert"));
    assert!(a.env.record("www").is_some(), "not retired");
    // A reason outside RFC 5280's names is refused before anything happens.
    let bad = a
        .env
        .agent(["retire", "www", "--revoke", "--reason", "because", "--yes"])
        .run();
    assert_ne!(bad.code, Some(0), "{}", bad.describe());
    assert!(!a.pebble.log().contains("/revoke-cert"));

    let done = a
        .env
        .agent([
            "retire",
            "www",
            "--revoke",
            "--reason",
            "keyCompromise",
            "--yes",
        ])
        .run();
    done.expect_code(0);
    let text = done.text();
    assert!(
        text.contains(&serial) && text.contains("was revoked at the ACME CA"),
        "{}",
        done.describe()
    );
    assert!(
        a.pebble.log().contains("/revoke-cert"),
        "{}",
        a.pebble.log()
    );
    assert!(
        a.env.record("www").is_none(),
        "retired: the record is archived"
    );
    let audit = std::fs::read_to_string(a.env.state_dir().join("audit.log")).unwrap();
    assert!(audit.contains("\"action\":\"revoke\""), "{audit}");
}

#[test]
fn retire_revoke_of_a_partner_certificate_is_refused_and_retires_nothing() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.partner-retire.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    let out = env.agent(["retire", "www", "--revoke", "--yes"]).run();
    assert_ne!(out.code, Some(0), "{}", out.describe());
    assert!(
        out.text().contains("comes from the Partner API"),
        "{}",
        out.describe()
    );
    assert!(env.record("www").is_some(), "not retired");
}
