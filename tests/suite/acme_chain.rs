//! `preferred_chain`: Pebble offers every certificate under its default chain and one
//! alternate chain to a second root (RFC 8555 §7.4.2). The chain whose topmost certificate was
//! issued by the preferred CA is installed and served; a name no chain matches keeps the
//! default chain; a default chain that already matches costs no extra request.

use crate::support;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::e2e_acme::{AcmeEnv, acme_env};
use support::webserver::Server;

/// The Common Name of the issuer of the topmost certificate of the installed chain.
fn installed_top_issuer(a: &AcmeEnv) -> String {
    let files = a.env.spec("www").files.clone();
    let pem = std::fs::read(files.leaf_file()).expect("the installed chain");
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .expect("a PEM chain");
    assert!(certs.len() >= 2, "a leaf and its intermediate");
    let (_, top) = x509_parser::parse_x509_certificate(certs[certs.len() - 1].as_ref()).unwrap();
    top.issuer()
        .iter_common_name()
        .next()
        .and_then(|c| c.as_str().ok())
        .expect("an issuer CN")
        .to_owned()
}

fn set_preferred(a: &mut AcmeEnv, name: &str) {
    let table = a.pebble.config_table("pebble", &a.env.path("eab.key"));
    a.env.tail_extra = format!("{table}preferred_chain = \"{name}\"\n");
}

#[test]
fn the_preferred_chain_is_installed_and_served_and_no_match_keeps_the_default() {
    let domain = "www.acme-chain.test";
    let Some(mut a) = acme_env(Server::Nginx, domain) else {
        return;
    };
    let (default_root, alternate_root) = (a.pebble.root_name(0), a.pebble.root_name(1));
    assert_ne!(default_root, alternate_root);

    // A name no offered chain ends at: the default chain, the certificate issued all the same.
    set_preferred(&mut a, "No Such Root CA");
    let out = a.env.renew();
    out.expect_code(0);
    assert_eq!(installed_top_issuer(&a), default_root, "{}", out.describe());

    // The alternate root preferred: the alternate chain is installed, and nginx serves a chain
    // that verifies to the alternate root.
    set_preferred(&mut a, &alternate_root.to_lowercase());
    let out = a.env.agent(["--json", "renew", "--force"]).run();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    assert_eq!(
        installed_top_issuer(&a),
        alternate_root,
        "{}",
        out.describe()
    );
    let root = a.env.path("alternate-root.pem");
    a.pebble.write_root_n(1, &root);
    let leaf = support::env::served_leaf_until(&root, &a.web.https_addr(), domain, &serial);
    assert!(leaf.dns_names.iter().any(|n| n == domain));

    // The default root preferred: the default chain, with no request beyond the order's.
    set_preferred(&mut a, &default_root);
    let before = a.pebble.requests("/certZ/");
    let out = a.env.agent(["--json", "renew", "--force"]).run();
    out.expect_code(0);
    assert_eq!(installed_top_issuer(&a), default_root, "{}", out.describe());
    assert_eq!(
        a.pebble.requests("/certZ/") - before,
        1,
        "only the order's own download\n{}",
        a.pebble.log()
    );
    assert_eq!(a.pebble.requests("/order-plz"), 3);
}

/// The order URLs the journal recorded as placed, in order.
fn placed_orders(a: &AcmeEnv) -> Vec<String> {
    a.env
        .journal()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.to_string().contains("acme-order-placed"))
        .filter_map(|v| {
            let found = v.pointer("/detail/order").or_else(|| v.pointer("/order"));
            found.and_then(|o| o.as_str()).map(str::to_owned)
        })
        .collect()
}

/// An order URL written into the record by someone else: one at another origin is never
/// sent to (dropped, a new order placed in the same run); an old order of the same CA replayed
/// gives a chain for another key, which is refused, nothing installed, and the order dropped so
/// that the next run does not resume it for ever.
#[test]
fn a_forged_or_replayed_order_url_in_the_record_is_dropped_not_followed() {
    let domain = "www.acme-replay.test";
    let Some(a) = acme_env(Server::Nginx, domain) else {
        return;
    };
    let first = a.env.renew();
    first.expect_code(0);
    let s1 = first.installed_serial("www");
    let orders = placed_orders(&a);
    assert_eq!(orders.len(), 1, "{}", a.env.journal());
    let set_order = |url: &str| {
        a.env.edit_record("www", |r| {
            r["acme"]["order_url"] = serde_json::json!(url);
            r["acme"]["names"] = serde_json::json!([domain]);
        });
    };

    // Forged: another origin, then garbage. Neither is asked; a new order is placed.
    for forged in ["https://127.0.0.2:1/order/1", "not a url"] {
        set_order(forged);
        let out = a.env.agent(["--json", "renew", "--force"]).run();
        out.expect_code(0);
        assert_ne!(out.installed_serial("www"), s1, "{}", out.describe());
        assert!(
            out.stderr.contains("is not at the CA's directory"),
            "{}",
            out.describe()
        );
    }
    assert_eq!(a.pebble.requests("/order-plz"), 3);
    let installed = a.env.record("www").unwrap()["installed"]["serial"].clone();

    // Replayed: the first order (valid, its certificate for the first key).
    set_order(&orders[0]);
    let out = a.env.agent(["--json", "renew"]).run();
    assert_ne!(out.code, Some(0), "{}", out.describe());
    assert!(
        out.text().contains("was rejected; nothing was installed"),
        "{}",
        out.describe()
    );
    assert_eq!(
        a.env.record("www").unwrap()["installed"]["serial"],
        installed,
        "the installed certificate stays"
    );
    assert!(a.env.record("www").unwrap()["acme"]["order_url"].is_null());
    assert_eq!(a.pebble.requests("/order-plz"), 3, "nothing ordered yet");
    // The next run does not resume the replayed order: the installed certificate is not due,
    // so nothing is asked of the CA.
    let out = a.env.agent(["--json", "renew", "--name", "www"]).run();
    out.expect_code(0);
    assert_eq!(
        out.outcome("www")["outcome"],
        "unchanged",
        "{}",
        out.describe()
    );
    assert_eq!(a.pebble.requests("/order-plz"), 3, "{}", out.describe());
}
