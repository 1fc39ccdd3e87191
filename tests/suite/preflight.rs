//! The pre-flight before a billed order against real DNS: nsd serving the test's zones and a
//! validating unbound in front of it. Where the pre-flight fails the sandbox sees no order;
//! where it passes, exactly one.

use crate::support;

use support::dns::{self, DnsWorld};
use support::env::{CertSpec, TestEnv};

/// A world whose certificate `www` names `domains` (standalone validation) and whose
/// `[preflight]` asks `dns`'s resolver.
fn env_for(dns: &DnsWorld, domains: &[&str]) -> TestEnv {
    env_with(dns, domains, |_| {})
}

/// [`env_for`] with the certificate's spec changed by `edit`.
fn env_with(dns: &DnsWorld, domains: &[&str], edit: impl FnOnce(&mut CertSpec)) -> TestEnv {
    let mut env = TestEnv::new();
    let mut spec = env.standalone_spec("www", domains);
    edit(&mut spec);
    env.certs.push(spec);
    env.preflight = dns.section();
    env
}

/// A renew that the pre-flight stops: no order reaches the sandbox, the message names what
/// is given in `names`, the certificate backs off (a second plain run sends nothing), and
/// `status` and `check` show why.
#[track_caller]
fn stopped(domains: &[&str], names: &[&str]) {
    stopped_with(domains, names, |_| {});
}

/// [`stopped`] with the certificate's spec changed by `edit`.
#[track_caller]
fn stopped_with(domains: &[&str], names: &[&str], edit: impl FnOnce(&mut CertSpec)) {
    if !dns::require() {
        return;
    }
    let dns = DnsWorld::start();
    let env = env_with(&dns, domains, edit);
    let out = env.renew();
    out.expect_failure();
    let text = out.text();
    assert!(
        text.contains("pre-flight stops the order"),
        "{}",
        out.describe()
    );
    for n in names {
        assert!(text.contains(n), "{n:?} not named\n{}", out.describe());
    }
    assert_eq!(env.order_posts(), 0, "no order sent");
    assert_eq!(env.billed(), 0);
    let rec = env.record("www").expect("record");
    assert!(!rec["retry_after"].is_null(), "backs off: {rec:#}");
    let again = env.renew();
    assert_eq!(
        env.order_posts(),
        0,
        "no order after the backoff's run\n{}",
        again.describe()
    );
    // The failure shows where the operator looks.
    let status = env.agent(["--json", "status"]).run();
    assert!(
        status.text().contains("pre-flight stops the order"),
        "{}",
        status.describe()
    );
    let check = env.agent(["check"]).run();
    assert!(check.text().contains("pre-flight"), "{}", check.describe());
}

/// A renew that the pre-flight lets through: one order, installed.
#[track_caller]
fn passes(domains: &[&str]) {
    if !dns::require() {
        return;
    }
    let dns = DnsWorld::start();
    let env = env_for(&dns, domains);
    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(env.order_posts(), 1);
    assert_eq!(env.billed(), 1);
}

#[test]
fn caa_naming_the_products_ca_lets_the_order_through() {
    passes(&["allow.ok.test"]);
}

#[test]
fn caa_naming_another_ca_stops_the_order() {
    stopped(
        &["forbid.ok.test"],
        &["forbid.ok.test", "letsencrypt.org", dns::OURS],
    );
}

#[test]
fn caa_issuewild_none_stops_only_a_wildcard() {
    passes(&["wild.ok.test"]);
    // A wildcard cannot be validated over HTTP: by email, which the pre-flight does not
    // change.
    stopped_with(
        &["*.wild.ok.test"],
        &["*.wild.ok.test", "issuewild"],
        |spec| {
            spec.product_id = 1102; // Aurora DV Wildcard, issuer s-one
            spec.dcv = Some("email".into());
            spec.extra.push_str("dcv_email = \"admin@wild.ok.test\"\n");
        },
    );
}

#[test]
fn caa_of_the_parent_naming_another_ca_stops_the_order() {
    stopped(
        &["www.parent.ok.test"],
        &["www.parent.ok.test", "CAA at parent.ok.test"],
    );
}

#[test]
fn caa_critical_unknown_tag_stops_the_order() {
    stopped(
        &["critical.ok.test"],
        &["critical.ok.test", "tbs", "critical"],
    );
}

#[test]
fn bogus_zone_stops_the_order_naming_record_and_zone() {
    stopped(
        &["www.bad.test"],
        &["CAA www.bad.test", "zone bad.test", "DNSSEC"],
    );
}

/// `cert-agent preflight --json` on demand: the failing name with its fix, exit 3; nothing
/// ordered.
#[test]
fn preflight_command_reports_without_ordering() {
    if !dns::require() {
        return;
    }
    let dns = DnsWorld::start();
    let env = env_for(&dns, &["allow.ok.test", "forbid.ok.test"]);
    let out = env.agent(["--json", "preflight"]).run();
    out.expect_code(3);
    let v = out.json();
    let findings = v[0]["findings"].as_array().expect("findings");
    let level = |name: &str| {
        findings
            .iter()
            .find(|f| f["name"] == name && f["check"] == "caa")
            .map(|f| f["level"].clone())
    };
    assert_eq!(
        level("allow.ok.test"),
        Some("ok".into()),
        "{}",
        out.describe()
    );
    assert_eq!(
        level("forbid.ok.test"),
        Some("failure".into()),
        "{}",
        out.describe()
    );
    assert_eq!(env.order_posts(), 0);
}

/// The cost of the pre-flight at 1,000 names (10 certificates of 100 names below one CAA
/// set, validated over HTTP): questions and time as `preflight --json` reports them, printed
/// for the docs; every name passes, and three questions per name (CAA, A, AAAA) and one per
/// shared parent are asked.
#[test]
fn preflight_of_1000_names_asks_three_questions_per_name() {
    if !dns::require() {
        return;
    }
    let dns = DnsWorld::start();
    let mut env = TestEnv::new();
    for c in 0..10 {
        let names: Vec<String> = (0..100)
            .map(|n| format!("n{c}-{n}.allow.ok.test"))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let spec = env.standalone_spec(&format!("c{c}"), &names);
        env.certs.push(spec);
    }
    env.preflight = dns.section();
    let started = std::time::Instant::now();
    let out = env.agent(["--json", "preflight"]).run();
    let wall = started.elapsed();
    out.expect_code(0);
    let v = out.json();
    let items = v.as_array().expect("array");
    assert_eq!(items.len(), 10);
    let queries: u64 = items.iter().map(|i| i["queries"].as_u64().unwrap()).sum();
    let millis: u64 = items.iter().map(|i| i["millis"].as_u64().unwrap()).sum();
    eprintln!("pre-flight of 1000 names: {queries} questions, {millis} ms checking, {wall:?} wall");
    // CAA, A and AAAA per name (HTTP validation), one per certificate for the shared CAA
    // set, a few retries at most.
    assert!((3010..=3040).contains(&queries), "{queries} questions");
    assert_eq!(env.order_posts(), 0);
}

/// HTTP validation of a name without an address (A/AAAA): the CA could not fetch the file,
/// so no order is placed; the message names the name and the resolver's answer.
#[test]
fn name_without_an_address_stops_an_http_order() {
    stopped(
        &["noaddr.ok.test"],
        &["noaddr.ok.test has no address", "no A or AAAA record"],
    );
}

/// A name that resolves to another host: the pre-flight passes (the name resolves), the
/// order goes, and the self-check of the validation file, fetched through the name's own
/// address, shows where it went and what answered.
#[test]
fn name_resolving_elsewhere_is_shown_by_the_self_check() {
    if !dns::require() {
        return;
    }
    let dns = DnsWorld::start();
    let env = env_for(&dns, &["elsewhere.ok.test"]);
    let pre = env.agent(["preflight"]).run();
    pre.expect_code(0);
    assert!(
        pre.text()
            .contains(&format!("elsewhere.ok.test resolves to {}", dns::ELSEWHERE)),
        "{}",
        pre.describe()
    );
    let out = env.renew();
    out.expect_code(0);
    assert_eq!(env.order_posts(), 1);
    let text = out.text();
    let through = format!(
        "through {}:80 (elsewhere.ok.test resolves to {}",
        dns::ELSEWHERE,
        dns::ELSEWHERE
    );
    assert!(
        text.contains(&through),
        "{through:?} not shown\n{}",
        out.describe()
    );
    assert!(
        text.contains("no web server listens on port 80 at the address the name points to"),
        "{}",
        out.describe()
    );
}

/// DNS validation whose record is delegated by CNAME into a zone with broken signatures:
/// CAA passes, the validation record is bogus, and the order stops naming the record and the
/// zone that signs it.
#[test]
fn bogus_dns_validation_record_stops_the_order_naming_record_and_zone() {
    if !dns::require() {
        return;
    }
    let dns = DnsWorld::start();
    let mut env = TestEnv::new();
    let mut spec = env.cert_spec("www", &["deleg.ok.test"], "none");
    spec.dcv = Some("dns-txt".into());
    spec.publish = support::env::Publish::Nothing;
    spec.dns_hook = Some(vec!["/bin/true".into()]);
    env.certs.push(spec);
    env.preflight = dns.section();
    let out = env.renew();
    out.expect_failure();
    let text = out.text();
    for n in [
        "pre-flight stops the order",
        "TXT _pki-validation.deleg.ok.test does not validate",
        "zone bad.test",
    ] {
        assert!(text.contains(n), "{n:?} not named\n{}", out.describe());
    }
    assert_eq!(env.order_posts(), 0, "no order sent");
}

/// An email-validated certificate in progress (the email not approved) moved to HTTP
/// validation: the pre-flight of HTTP passes, the sandbox's change DCV call switches the
/// order (its DCV status then says HTTP_CSR_HASH), and the configuration lines are printed;
/// a name without an address is not switched.
#[test]
fn dcv_migrate_switches_the_order_in_progress_after_the_preflight() {
    if !dns::require() {
        return;
    }
    let dns = DnsWorld::start();
    let mut env = TestEnv::new();
    for (name, domain) in [("mail", "allow.ok.test"), ("lost", "noaddr.ok.test")] {
        let mut spec = env.cert_spec(name, &[domain], "none");
        spec.dcv = Some("email".into());
        spec.extra = format!("dcv_email = \"admin@{domain}\"\n");
        env.certs.push(spec);
    }
    // Placed with the checks off (the pre-flight of HTTP is what is tested here).
    env.agent(["renew", "--wait", "2"]).run().expect_code(75);
    env.preflight = dns.section();
    let id = env.record("mail").unwrap()["order"]["certificate_id"]
        .as_u64()
        .unwrap();
    let change = |env: &TestEnv| {
        env.calls()
            .iter()
            .filter(|c| c.method == "POST" && c.path.ends_with("/change_dcv"))
            .count()
    };
    assert_eq!(change(&env), 0);

    let out = env.agent(["dcv", "migrate", "mail", "--to", "http"]).run();
    out.expect_code(0);
    let text = out.text();
    for n in [
        "allow.ok.test resolves to 127.0.0.1",
        "validation changed to HTTP_CSR_HASH",
        "dcv = \"http\"",
        "remove dcv_email",
        "cert-agent renew mail",
    ] {
        assert!(text.contains(n), "{n:?} not shown\n{}", out.describe());
    }
    assert_eq!(change(&env), 1);
    let status = env
        .agent(["--json", "dcv", "status", &id.to_string()])
        .run();
    status.expect_code(0);
    assert!(
        status.stdout.contains("HTTP_CSR_HASH"),
        "{}",
        status.describe()
    );

    let lost = env.agent(["dcv", "migrate", "lost", "--to", "http"]).run();
    lost.expect_code(3);
    assert!(
        lost.text().contains("noaddr.ok.test has no address")
            && lost.text().contains("nothing was changed"),
        "{}",
        lost.describe()
    );
    assert_eq!(
        change(&env),
        1,
        "no change for a name the CA could not validate"
    );
}

/// A zone without DNSSEC at all: a warning naming the name and the resolver, and the order
/// goes on (one order, installed).
#[test]
fn an_unsigned_zone_is_a_warning_and_the_order_proceeds() {
    if !dns::require() {
        return;
    }
    let dns = DnsWorld::start();
    let env = env_for(&dns, &["www.plain.test"]);
    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(env.order_posts(), 1);
    assert!(
        out.text()
            .contains("the answers for www.plain.test are not DNSSEC-validated"),
        "{}",
        out.describe()
    );
}

/// A resolver that never answers: each check is a warning naming the resolver and the time
/// limit, and the order goes on (the agent cannot tell).
#[test]
fn a_resolver_that_does_not_answer_is_a_warning_and_the_order_proceeds() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.silent.test"]);
    env.certs.push(spec);
    env.preflight = format!("\n[preflight]\nresolver = \"{addr}\"\ntimeout_secs = 1\n");
    let out = env.renew();
    out.expect_code(0);
    assert_eq!(env.order_posts(), 1);
    let want =
        format!("the resolver {addr} did not answer CAA www.silent.test within 1 s (2 tries)");
    assert!(out.text().contains(&want), "{want:?}\n{}", out.describe());
    assert!(
        out.text().contains(&format!(
            "the resolver {addr} did not answer A www.silent.test"
        )),
        "{}",
        out.describe()
    );
    drop(silent);
}

/// Renews one certificate of the ACME CA `pebble` (its CAA identity set in `[preflight]
/// caa_identities`) for `domain`: the pre-flight stops it, naming each of `named`, before the
/// new-order request reaches Pebble.
fn acme_order_stopped(domain: &str, named: &[&str]) {
    if !dns::require() || !support::pebble::require() {
        return;
    }
    let dns = DnsWorld::start();
    let pebble = support::pebble::Pebble::start(support::webserver::free_port());
    let mut env = TestEnv::new();
    let mut spec = env.standalone_spec("www", &[domain]);
    spec.extra.push_str("issuer = \"pebble\"\n");
    env.certs.push(spec);
    env.tail_extra = pebble.config_table("pebble", &env.path("eab.key"));
    env.preflight = format!(
        "{}caa_identities = {{ pebble = [\"pebble.letsencrypt.org\"] }}\n",
        dns.section()
    );
    let out = env.renew();
    out.expect_failure();
    let text = out.text();
    for n in ["pre-flight stops the order", domain].iter().chain(named) {
        assert!(text.contains(n), "{n:?} not named\n{}", out.describe());
    }
    assert_eq!(pebble.requests("/order-plz"), 0, "{}", pebble.log());
}

/// An ACME order for a name whose CAA names another CA.
#[test]
fn caa_naming_another_ca_stops_an_acme_order() {
    acme_order_stopped(
        "forbid.ok.test",
        &["letsencrypt.org", "pebble.letsencrypt.org"],
    );
}

/// RFC 8657 `accounturi`: a CAA record that lets the ACME CA issue only to another account
/// stops the order, naming the account it allows.
#[test]
fn caa_accounturi_of_another_account_stops_an_acme_order() {
    acme_order_stopped("acct.ok.test", &["https://127.0.0.1:1/my-account/1"]);
}
