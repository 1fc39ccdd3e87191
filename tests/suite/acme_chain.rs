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
