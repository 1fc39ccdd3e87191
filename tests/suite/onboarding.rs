//! Bringing existing sites under the agent: an order placed elsewhere adopted without a new
//! billed order (its validation method switched by the reissue itself), certificates split
//! over `include` fragments, `discover` against real `nginx -T` and `apachectl -S` output,
//! placeholders and snippets.

use crate::support;

use std::time::Duration;

use cert_agent::api::{Client, ClientOptions, PasswordSource, RetryPolicy};
use support::env::{LOGIN, TestEnv};

/// A client of the sandbox account the agent uses, for placing orders "on the web site".
fn account_client(env: &TestEnv) -> Client {
    let mut o = ClientOptions::new(
        env.sandbox.base_url(),
        LOGIN,
        PasswordSource::file(env.path("password")),
    );
    o.ca_file = Some(env.sandbox.api_ca_path());
    o.state_dir = Some(env.path("web-site-state"));
    o.retry = RetryPolicy::fast(4);
    o.timeout = Duration::from_secs(20);
    Client::new(o).expect("client builds")
}

/// An order placed on the web site with EMAIL validation and issued there; returns its ID.
fn issued_elsewhere_by_email(env: &TestEnv, domain: &str) -> u64 {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = account_client(env);
    let id = rt.block_on(support::api::place_order(&client, domain));
    env.sandbox.approve_email(id, None).expect("approve");
    env.sandbox.validate_now();
    for _ in 0..100 {
        let s = rt.block_on(client.status(id)).expect("status");
        if s.certificate.as_ref().map(|c| c.as_str()) == Some("issued") {
            return id;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("certificate {id} not issued");
}

/// `adopt --reissue` of an EMAIL-validated order with `dcv = "http"`: the reissue names
/// HTTP_CSR_HASH, so the method switches in the same step, the file is validated, the
/// certificate installed, and nothing is ordered.
#[test]
fn adopting_an_email_order_switches_it_to_http_in_the_reissue() {
    let mut env = TestEnv::new();
    let id = issued_elsewhere_by_email(&env, "shop.adopt.test");
    let billed = env.billed();
    let spec = env.standalone_spec("shop", &["shop.adopt.test"]);
    env.certs.push(spec);
    let out = env
        .agent([
            "adopt",
            "shop",
            "--certificate-id",
            &id.to_string(),
            "--reissue",
        ])
        .run();
    out.expect_code(0);
    let text = out.text();
    assert!(
        text.contains("validates by EMAIL") && text.contains("HTTP_CSR_HASH"),
        "the adoption says that the method switches: {text}"
    );
    assert!(!text.contains("dcv change"), "{text}");
    let rec = env.record("shop").expect("record");
    assert_eq!(rec["order"]["certificate_id"], id, "{rec:#}");
    assert!(rec["installed"]["installed_at"].is_string(), "{rec:#}");
    let reissues: Vec<_> = env
        .calls()
        .into_iter()
        .filter(|c| c.path.ends_with("/reissue"))
        .collect();
    assert_eq!(reissues.len(), 1, "one reissue call");
    assert_eq!(env.billed(), billed, "no new billed order");
    assert_eq!(
        env.sandbox.inspect(id).unwrap()["domains"][0]["method"],
        "Http",
        "the order validates by HTTP now"
    );
}
