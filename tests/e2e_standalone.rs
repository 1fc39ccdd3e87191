//! `cert-agent renew` end to end in standalone mode: no web server, the agent's own DCV server
//! answers the sandbox's validator, the files are written to the configured paths only.

mod support;

use std::fs;
use std::net::TcpStream;

use support::env::{Leaf, TestEnv, key_spki};

/// Guards standalone validation and a files-only install: one billed order, the built-in
/// server serves the validation file while it is needed and is gone after the run, the
/// installed leaf, chain and full chain belong together and to the installed key, and a
/// second run calls nothing.
#[test]
fn standalone_renew_orders_validates_and_installs_files() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.e2e-standalone.test"]);
    let support::env::Publish::Standalone(port) = spec.publish else {
        unreachable!()
    };
    let files = spec.files.clone();
    env.certs.push(spec);

    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    assert_eq!(env.billed(), 1);
    assert_eq!(env.order_posts(), 1);

    let leaf = Leaf::from_pem_file(files.cert.as_ref().unwrap());
    assert_eq!(leaf.serial, serial);
    assert_eq!(
        leaf.spki,
        key_spki(&files.key),
        "leaf matches the installed key"
    );
    assert!(
        leaf.dns_names
            .iter()
            .any(|n| n == "www.e2e-standalone.test")
    );
    // fullchain = leaf followed by the chain.
    let cert = fs::read_to_string(files.cert.as_ref().unwrap()).unwrap();
    let chain = fs::read_to_string(files.chain.as_ref().unwrap()).unwrap();
    let full = fs::read_to_string(files.fullchain.as_ref().unwrap()).unwrap();
    assert!(chain.contains("BEGIN CERTIFICATE"), "chain: {chain}");
    assert!(!chain.contains(cert.trim()), "chain holds no leaf");
    assert!(
        full.starts_with(cert.trim_end()),
        "fullchain begins with the leaf"
    );
    assert!(full.contains(chain.trim()), "fullchain holds the chain");
    assert_eq!(
        Leaf::from_pem_file(files.fullchain.as_ref().unwrap()).serial,
        serial
    );
    assert!(
        !fs::read_to_string(&files.key).unwrap().is_empty(),
        "key written"
    );

    // The standalone server lived only as long as the run.
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the DCV server on port {port} is stopped after the run"
    );
    // The state keeps no pending key once installed.
    let rec = env.record("www").unwrap();
    assert!(rec["pending_key"].is_null(), "{rec:#}");
    assert!(rec["intent"].is_null(), "{rec:#}");

    let calls = env.calls().len();
    let again = env.renew();
    again.expect_code(0);
    assert_eq!(env.calls().len(), calls, "nothing due: no API call");
    assert_eq!(
        Leaf::from_pem_file(files.cert.as_ref().unwrap()).serial,
        serial
    );
}
