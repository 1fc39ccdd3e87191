//! Revocation against the sandbox's CRLs: a revoked certificate served by a real nginx is
//! CRITICAL in `check` until the next run replaces it (a new order for an annulled order, a
//! reissue where the order allows one) and nginx serves the replacement; the order policy
//! holds (no order without `allow_orders`); a CRL that is forged, too large, stale or garbage
//! is refused and reported naming its URL, never read as "not revoked"; one CRL fetched once
//! for two certificates and kept until its `nextUpdate` or for `refresh_secs`.

use crate::support;

use std::fs;

use partner_sandbox::crl::CrlFault;
use partner_sandbox::state::RevokeTarget;
use support::env::{Publish, TestEnv, Web, norm_serial};
use support::webserver::{Server, require};

fn certificate_id(env: &TestEnv, name: &str) -> u64 {
    env.record(name).unwrap()["order"]["certificate_id"]
        .as_u64()
        .unwrap()
}

fn installed_serial(env: &TestEnv, name: &str) -> String {
    norm_serial(
        env.record(name).unwrap()["installed"]["serial"]
            .as_str()
            .unwrap(),
    )
}

/// The CRL path of product 1101's issuer as the sandbox counts its fetches.
fn fetches(env: &TestEnv) -> u64 {
    env.sandbox.crl_fetches().values().sum()
}

#[test]
fn a_revoked_certificate_is_replaced_and_served() {
    if !require(Server::Nginx) {
        return;
    }
    let mut env = TestEnv::new();
    let metrics = env.path("cert_agent.prom");
    env.agent_extra = format!("metrics_file = \"{}\"\n", metrics.display());
    let webroot = env.path("www-root");
    let mut spec = env.cert_spec("www", &["www.revoked.test"], "nginx");
    spec.publish = Publish::Webroot(webroot.clone());
    env.write_placeholder(&spec);
    let web = Web::start(Server::Nginx, env.dir.path(), &[env.site(&spec, &webroot)]);
    env.certs.push(web.configure(spec));
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    env.renew().expect_code(0);
    let first = installed_serial(&env, "www");
    let https = web.https_addr();
    env.served_leaf_with_serial(&https, "www.revoked.test", &first)
        .unwrap();
    env.agent(["check"]).run().expect_code(0);
    let billed = env.billed();

    // The CA revokes it (the order becomes annulled, as the API document says).
    let revoked = env
        .sandbox
        .revoke(
            RevokeTarget::CertificateId(certificate_id(&env, "www")),
            "keyCompromise",
            false,
        )
        .unwrap();
    assert_eq!(norm_serial(&revoked.serial_hex), first);
    // The CRL the previous check kept is still valid until its nextUpdate, but older than
    // `refresh_secs` (six hours) it is read again: the revocation shows.
    age_kept_crls(&env, 6 * 3600);
    let critical = env.agent(["check"]).run();
    critical.expect_code(2);
    assert!(
        critical.stdout.starts_with("CERT-AGENT CRITICAL - www: ")
            && critical.stdout.contains("was revoked on")
            && critical.stdout.contains("keyCompromise"),
        "{}",
        critical.describe()
    );
    assert_eq!(env.billed(), billed, "check orders nothing");

    // The next run: the order is annulled, orders are allowed: a new order, installed and
    // served.
    let run = env.renew();
    run.expect_code(0);
    let second = run.installed_serial("www");
    assert_ne!(second, first);
    assert_eq!(
        env.billed(),
        billed + 1,
        "one new order\n{}",
        run.describe()
    );
    let served = env
        .served_leaf_with_serial(&https, "www.revoked.test", &second)
        .unwrap();
    assert_eq!(norm_serial(&served.serial), second);
    env.agent(["check"]).run().expect_code(0);
    let journal = env.journal();
    assert!(journal.contains("certificate-revoked"), "{journal}");

    // Nothing more to do: no order; the replacement's CRL entry is read: not revoked.
    let orders = env.order_posts();
    env.renew().expect_code(0);
    assert_eq!(env.order_posts(), orders);
    let text = fs::read_to_string(&metrics).unwrap();
    let revoked = text
        .lines()
        .find(|l| l.starts_with("cert_agent_certificate_revoked{name=\"www\""))
        .unwrap_or_else(|| panic!("no revoked gauge\n{text}"));
    assert!(revoked.ends_with(" 0"), "{revoked}");
}

#[test]
fn the_order_policy_decides_how_a_revoked_certificate_is_replaced() {
    let mut env = TestEnv::new();
    env.allow_orders = false;
    let keep = env.standalone_spec("keep", &["keep.revoked.test"]);
    env.certs.push(keep);
    env.agent(["--json", "issue", "keep", "--yes", "--wait", "30"])
        .run()
        .expect_code(0);
    let mut ended = env.cert_spec("ended", &["ended.revoked.test"], "none");
    ended.publish = env.spec("keep").publish.clone();
    env.certs.push(ended);
    env.agent(["--json", "issue", "ended", "--yes", "--wait", "30"])
        .run()
        .expect_code(0);
    let billed = env.billed();
    let keep_first = installed_serial(&env, "keep");
    let ended_first = installed_serial(&env, "ended");

    // "keep": revoked, its order still allows a reissue. "ended": revoked and annulled.
    for (name, keep_order) in [("keep", true), ("ended", false)] {
        env.sandbox
            .revoke(
                RevokeTarget::CertificateId(certificate_id(&env, name)),
                "superseded",
                keep_order,
            )
            .unwrap();
    }
    let run = env.renew();
    // The reissue is free and done; no order is placed for the annulled one.
    let keep_second = run.installed_serial("keep");
    assert_ne!(keep_second, keep_first);
    let ended_outcome = run.outcome("ended");
    assert_eq!(ended_outcome["outcome"], "failed", "{}", run.describe());
    let error = ended_outcome["error"].as_str().unwrap();
    assert!(
        error.contains("annulled") && error.contains("issue ended --yes"),
        "{error}"
    );
    assert_eq!(
        ended_outcome["revocation"]["state"],
        "revoked",
        "{}",
        run.describe()
    );
    assert_eq!(env.billed(), billed, "no billed order\n{}", run.describe());
    assert_eq!(installed_serial(&env, "ended"), ended_first);

    // `check`: the reissued one is fine, the other stays CRITICAL.
    let check = env.agent(["check"]).run();
    check.expect_code(2);
    assert!(
        check.stdout.contains("CRITICAL ended: ") && !check.stdout.contains("keep:"),
        "{}",
        check.describe()
    );

    // The operator allows the order: the next run places it.
    let run = env
        .agent(["--json", "issue", "ended", "--yes", "--wait", "30"])
        .run();
    run.expect_code(0);
    assert_ne!(run.installed_serial("ended"), ended_first);
    assert_eq!(env.billed(), billed + 1);
    env.agent(["check"]).run().expect_code(0);
}

#[test]
fn crls_that_cannot_be_trusted_are_refused_and_reported() {
    let mut env = TestEnv::new();
    env.agent_extra = "\n[revocation]\nmax_crl_bytes = 1048576\n".to_owned();
    let spec = env.standalone_spec("www", &["www.crl.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    let issuer_url = {
        // The issuer of product 1101 decides the URL: read it from the installed chain's CRL
        // distribution point through a check.
        env.agent(["check"]).run().expect_code(0);
        let paths: Vec<String> = env.sandbox.crl_fetches().into_keys().collect();
        assert_eq!(paths.len(), 1, "{paths:?}");
        format!("http://{}{}", env.sandbox.crl_addr(), paths[0])
    };
    // The certificate is revoked under each bad CRL: never "not revoked", never OK.
    env.sandbox
        .revoke(
            RevokeTarget::CertificateId(certificate_id(&env, "www")),
            "keyCompromise",
            true,
        )
        .unwrap();
    for (fault, why) in [
        (CrlFault::WrongKey, "signature does not verify"),
        (
            CrlFault::Oversized,
            "larger than max_crl_bytes (1048576 bytes)",
        ),
        (CrlFault::Stale, "stale"),
        (CrlFault::Garbage, "not a DER certificate revocation list"),
    ] {
        env.sandbox
            .set_crl_fault(Some(fault), Some(2 * 1024 * 1024));
        let _ = fs::remove_dir_all(env.state_dir().join("crl"));
        let check = env.agent(["check"]).run();
        check.expect_code(1);
        assert!(
            check.stdout.starts_with("CERT-AGENT WARNING - www: ")
                && check.stdout.contains(&format!(
                    "revocation unknown: the CRL {issuer_url} was refused"
                ))
                && check.stdout.contains(why),
            "{fault:?}\n{}",
            check.describe()
        );
        // A run neither replaces the certificate nor calls it fine.
        let run = env.renew();
        run.expect_code(0);
        let o = run.outcome("www");
        assert_eq!(o["outcome"], "unchanged", "{fault:?}\n{}", run.describe());
        assert_eq!(o["revocation"]["state"], "unknown", "{}", run.describe());
        assert!(
            o["revocation"]["detail"]
                .as_str()
                .unwrap_or_default()
                .contains(why),
            "{}",
            run.describe()
        );
        assert!(
            !env.state_dir().join("crl").exists()
                || fs::read_dir(env.state_dir().join("crl")).unwrap().count() == 0,
            "a refused CRL is not kept"
        );
    }
    // The CA's real CRL again: revoked, and replaced.
    env.sandbox.set_crl_fault(None, None);
    env.agent(["check"]).run().expect_code(2);
    let first = installed_serial(&env, "www");
    let run = env.renew();
    run.expect_code(0);
    assert_ne!(run.installed_serial("www"), first);
    env.agent(["check"]).run().expect_code(0);
}

#[test]
fn one_crl_is_fetched_once_for_two_certificates_and_kept() {
    let mut env = TestEnv::new();
    let a = env.standalone_spec("a", &["a.crl-cache.test"]);
    let mut b = env.cert_spec("b", &["b.crl-cache.test"], "none");
    b.publish = a.publish.clone();
    env.certs.push(a);
    env.certs.push(b);
    env.renew().expect_code(0);
    assert_eq!(
        fetches(&env),
        0,
        "nothing installed before the run: nothing read"
    );

    env.agent(["check"]).run().expect_code(0);
    assert_eq!(fetches(&env), 1, "{:?}", env.sandbox.crl_fetches());
    // Kept in the state directory until its nextUpdate: neither a run nor a check fetches it.
    env.renew().expect_code(0);
    env.agent(["check"]).run().expect_code(0);
    assert_eq!(fetches(&env), 1, "{:?}", env.sandbox.crl_fetches());
    let kept: Vec<_> = fs::read_dir(env.state_dir().join("crl"))
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    assert_eq!(kept.len(), 1);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        kept[0].metadata().unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A kept copy that no longer verifies is not used: fetched again, once for both.
    fs::write(kept[0].path(), b"tampered").unwrap();
    env.renew().expect_code(0);
    assert_eq!(fetches(&env), 2, "{:?}", env.sandbox.crl_fetches());
    // Kept for less than `refresh_secs` (six hours): not fetched; older: fetched again.
    age_kept_crls(&env, 6 * 3600 - 120);
    env.agent(["check"]).run().expect_code(0);
    assert_eq!(fetches(&env), 2, "{:?}", env.sandbox.crl_fetches());
    age_kept_crls(&env, 6 * 3600 + 1);
    env.agent(["check"]).run().expect_code(0);
    assert_eq!(fetches(&env), 3, "{:?}", env.sandbox.crl_fetches());
}

/// Makes every CRL kept in the state directory look stored `secs` seconds ago.
fn age_kept_crls(env: &TestEnv, secs: u64) {
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
    for e in fs::read_dir(env.state_dir().join("crl")).unwrap() {
        let f = fs::File::options()
            .write(true)
            .open(e.unwrap().path())
            .unwrap();
        f.set_modified(when).unwrap();
    }
}

/// `status` (table and `--json`) and the metrics of one installed certificate from what the
/// CRL says: not checked before a run read it, good, unusable (a garbage CRL: why), and
/// revoked (date and reason) while the annulled order waits for the operator's leave to order.
#[test]
fn status_and_the_metrics_show_what_the_crl_said() {
    let mut env = TestEnv::new();
    env.watch_surfaces();
    let spec = env.standalone_spec("www", &["www.crl-status.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    env.allow_orders = false;
    let status = || {
        let out = env.agent(["--json", "status"]).run();
        out.expect_code(0);
        let v = out.json();
        (v[0]["revocation"].clone(), out)
    };
    let table = || {
        let out = env.agent(["status"]).run();
        out.expect_code(0);
        out.stdout
    };
    let (r, out) = status();
    assert_eq!(r["state"], "not_checked", "{}", out.describe());
    assert!(table().contains(" not checked "), "{}", table());

    env.renew().expect_code(0);
    let (r, out) = status();
    assert_eq!(r["state"], "good", "{}", out.describe());
    assert!(
        r["url"].as_str().unwrap_or_default().starts_with("http://"),
        "{r}"
    );
    assert!(table().contains(" good "), "{}", table());
    assert_eq!(
        env.metric("cert_agent_certificate_revoked", "www"),
        Some(0.0)
    );

    env.sandbox.set_crl_fault(Some(CrlFault::Garbage), None);
    fs::remove_dir_all(env.state_dir().join("crl")).unwrap();
    env.renew().expect_code(0);
    let (r, out) = status();
    assert_eq!(r["state"], "unknown", "{}", out.describe());
    let text = table();
    assert!(
        text.contains(" UNUSABLE ")
            && text.contains("www: revocation unknown: the CRL http://")
            && text.contains("not a DER certificate revocation list"),
        "{text}"
    );
    assert_eq!(
        env.metric("cert_agent_certificate_crl_usable", "www"),
        Some(0.0)
    );

    env.sandbox.set_crl_fault(None, None);
    let _ = fs::remove_dir_all(env.state_dir().join("crl"));
    env.sandbox
        .revoke(
            RevokeTarget::CertificateId(certificate_id(&env, "www")),
            "keyCompromise",
            false,
        )
        .unwrap();
    let run = env.renew();
    assert_eq!(
        run.outcome("www")["outcome"],
        "failed",
        "{}",
        run.describe()
    );
    let (r, out) = status();
    assert_eq!(r["state"], "revoked", "{}", out.describe());
    assert_eq!(r["reason"], "keyCompromise", "{r}");
    let revoked_at = time::OffsetDateTime::parse(
        r["revoked_at"].as_str().unwrap_or_default(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap_or_else(|e| panic!("revoked_at: {e}: {r}"));
    let text = table();
    assert!(
        text.contains(&format!(" REVOKED {} keyCompromise ", revoked_at.date()))
            && text.contains("www: serial ")
            && text.contains("was revoked on"),
        "{text}"
    );
    assert_eq!(
        env.metric("cert_agent_certificate_revoked", "www"),
        Some(1.0)
    );
    assert_eq!(
        env.metric("cert_agent_certificate_crl_usable", "www"),
        Some(1.0)
    );
    // Announced once, by the run that read it.
    let revoked: Vec<_> = env
        .notified()
        .into_iter()
        .filter(|e| e["event"] == "revoked")
        .collect();
    assert_eq!(revoked.len(), 1, "{revoked:?}");
}

/// The daemon wakes at the kept CRL's `nextUpdate`, not at its hourly schedule: a certificate
/// revoked after the daemon's run read the CRL is replaced by the run that reads the next CRL.
/// The sandbox's CRLs are valid for a day: its clock (and the agent's with it) is moved to 80 s
/// before the kept CRL's `nextUpdate`, so that the next one is due within the test.
#[test]
fn the_daemon_acts_on_a_revocation_when_the_next_crl_is_due() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.crl-pace.test"]);
    env.certs.push(spec);
    let first = env.agent(["--json", "renew", "--wait", "60"]).run();
    first.expect_code(0);
    let first = first.installed_serial("www");
    // A check keeps the CRL (not listing the certificate) until its nextUpdate.
    env.agent(["check"]).run().expect_code(0);
    assert!(
        fs::read_dir(env.state_dir().join("crl")).unwrap().count() > 0,
        "a CRL kept"
    );
    let fetched = fetches(&env);
    let billed = env.billed();
    env.sandbox
        .revoke(
            RevokeTarget::CertificateId(certificate_id(&env, "www")),
            "keyCompromise",
            false,
        )
        .unwrap();
    let day = partner_sandbox::crl::CRL_VALIDITY
        .whole_seconds()
        .unsigned_abs();
    env.sandbox
        .advance(std::time::Duration::from_secs(day - 80));
    let offset = support::scenario::clock_offset(&env).to_string();

    // Hourly schedule; the first run at once reads the kept CRL: nothing revoked yet.
    let config = env.write_config();
    let mut daemon = env
        .agent_at(
            &config,
            ["run", "--interval", "3600", "--first-run-delay", "0"],
        )
        .env(support::scenario::CLOCK_OFFSET_ENV, &offset)
        .spawn();
    let replaced = support::env::wait_until(std::time::Duration::from_secs(240), || {
        env.record("www")
            .and_then(|r| r["installed"]["serial"].as_str().map(norm_serial))
            .is_some_and(|s| s != first)
    });
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(
        replaced,
        "the daemon replaced the revoked certificate when the next CRL was due\n{}",
        env.journal()
    );
    assert!(fetches(&env) > fetched, "the next CRL was fetched");
    assert_eq!(
        env.billed(),
        billed + 1,
        "one new order for the annulled one"
    );
    assert!(env.journal().contains("certificate-revoked"));
}
